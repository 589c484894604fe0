"""The save-and-stop loop of every training run, on one process or on the ranks of an MPI job.

``train_and_save`` trains a run.Run to its end, saving its checkpoint every
--save-every steps and at the end, stops after the current call on Ctrl-C,
SIGTERM, SIGHUP or a closed stdout (interrupt.py; under MPI decided by all ranks
together), and reports what went wrong as ``RunFailed``: one line that says what
--out still holds. It prints through the ``say`` it is given and knows nothing of
the command line (cli/common.py turns RunFailed into click's one-line error).
"""
from __future__ import annotations

import os
from pathlib import Path

from . import checkpoint as ckpt
from ..errors import CheckpointError, RunFailed
from ..interrupt import StopRequest, stop_on_signals
from ..wording import shown_path


def first_line(msg: str) -> str:
    lines = [ln.strip() for ln in str(msg).strip().splitlines() if ln.strip()]
    return " ".join(lines) if len(lines) <= 3 else lines[0]



def lock_path(out: Path) -> Path:
    """The lock file of --out: ``.<name>.lock`` beside the path that --out resolves to
    (symlinks followed, also a dangling one, and ``..``), so that every spelling of one
    --out (a symlink to it or to a folder above it) takes the same lock."""
    real = Path(os.path.realpath(out))
    return real.parent / f".{real.name}.lock"



def kept(out: Path, ours: int | None = None) -> str:
    """What --out holds now, for messages after a failure. ``ours``: the step of the
    last checkpoint this run wrote there (or resumed from it), None when it wrote none."""
    try:
        meta = ckpt.read_metadata(out)
    except CheckpointError:
        return f"nothing was saved to {str(out)!r}"
    step = meta.get("step", "?")
    if ours is not None and step == str(ours):
        return f"{str(out)!r} still holds this run's checkpoint of step {step}"
    return (f"{str(out)!r} still holds the checkpoint it held before this run started "
            f"(step {step} of another run, data {meta.get('data') or '?'})")



def mean_loss(loss: float, first: int, step: int) -> str:
    """A progress line's loss, labelled with the steps it is the mean of."""
    return (f"loss {loss:.4f} (step {step})" if first >= step else
            f"loss {loss:.4f} (mean of steps {first}-{step})")



def train_and_save(run, out: Path | None, save_every: int | None, say,
                    ours: int | None = None, advance=None, after_save=None,
                    world=None) -> StopRequest | None:
    """Train to the end, saving to out every save_every steps and at the end.

    ``ours``: the step of the checkpoint of this run that out holds already (a
    resume from it), else None. ``advance(until, should_stop)`` trains up to step
    ``until`` (default: ``run.run`` printing progress lines); ``after_save()`` runs
    after each save (text runs write their loss curves). Returns the
    StopRequest when Ctrl-C, SIGTERM or SIGHUP stopped the run early (the
    checkpoint is saved), else None. Errors (a failed save, divergence, a
    second signal) raise RunFailed, one line that says what --out still holds. Works
    for any run.Run (``done``, ``step``, ``num_steps``, ``run`` and ``checkpoint``).

    ``world`` (mpi_world.World, under mpirun): every rank runs this loop in lockstep;
    the stop is decided together (World.shared_stop); rank 0 alone saves and
    reports (a failed rank's line says what out holds); the other ranks (out None)
    raise the run's errors as they are, for cli/mpi.py's serve.
    """
    worker = world is not None and world.rank > 0
    saved = [ours]  # the step of this run's checkpoint in out, once there is one

    def save():
        # every rank makes the checkpoint (it checks the host copies: run.Run)
        ck = run.checkpoint()
        if worker:
            return
        try:
            ckpt.save(out, ck)
        except CheckpointError as e:
            raise RunFailed(f"{e}; {kept(out, saved[0])}") from None
        saved[0] = run.step
        if after_save is not None:
            after_save()

    def progress(step, total, loss, norm, rate, first):
        say(f"step {step:{len(str(total))}d} / {total} | {mean_loss(loss, first, step)} | "
            f"{rate:,.0f} tok/s")

    if advance is None:
        def advance(until, should_stop):
            run.run(until, progress, should_stop=should_stop)

    with stop_on_signals() as local:
        stop = world.shared_stop(local) if world is not None else local
        if worker:
            local.on_second = lambda: None  # rank 0 prints: tell it
            local.cleanups.append(lambda: world.watchdog.report(
                "interrupted twice: stopped without saving"))
        else:
            local.on_second = lambda: (f"interrupted twice: stopped without saving; "
                                       f"{kept(out, saved[0])}")
            local.cleanups.append(lambda: lock_path(out).unlink(missing_ok=True))
            if world is not None:
                local.cleanups.append(world.abandon)
                world.kept = lambda: kept(out, saved[0])
                world.cleanups.append(lambda: lock_path(out).unlink(missing_ok=True))
        try:
            while not run.done and not stop():
                until = run.num_steps
                if save_every:
                    until = min(until, (run.step // save_every + 1) * save_every)
                advance(until, stop)
                if not run.done and not stop():
                    save()
                    say(f"saved checkpoint {shown_path(out)} (step {run.step} of {run.num_steps})")
            save()
        except RuntimeError as e:  # divergence, a failing entry point (out of device memory)
            if worker:
                raise
            raise RunFailed(f"{first_line(str(e))}; {kept(out, saved[0])}") from None
        except MemoryError:
            if worker:
                raise
            raise RunFailed(f"out of memory: try smaller sizes, --batch-size or "
                            f"--steps-per-call; {kept(out, saved[0])}") from None
    return stop if stop() else None
