"""``mpirun -n N microgpt-fut train ...``: the command line on the ranks of an MPI job.

Rank 0 runs the command as one process would (options, data, checkpoint, --out and
its lock, every line printed, every save, the samples), with one difference: its
run's batches are shared with the other ranks (mpi_world.World's exchange). Once
its run is built, ``share_run`` broadcasts it: the run's checkpoint as it stands,
its data, settings and the options that matter to the others (backend, device,
--save-every). The other ranks (``serve``) never read options or files: they build
the same run from it, on their own device (``local_device``), and train in
lockstep through the same loop as rank 0 (loop.train_and_save), without saving or
printing. Other commands (``sample``, ``devices``, ``--help``) run on rank 0 alone.
"""
from __future__ import annotations

import os
import sys
import traceback
from dataclasses import dataclass
from typing import Callable, NoReturn

import click

from ..parallel import mpi_world
from ..parallel.mpi_world import End
from ..errors import Diverged, WatchdogError
from ..training.checkpoint import Checkpoint
from ..training.family import family_of
from ..training.loop import first_line, train_and_save
from ..training.run import Run
from ..backend.runtime import Runtime


@dataclass(frozen=True)
class RunSpec:
    """A run as rank 0 built it, for the other ranks to build the same.

    checkpoint: rank 0's ``run.checkpoint()`` (weights, moments, step, losses,
    settings; its config's class is the model family); dataset: the run's dataset
    (datasets.Lines or datasets.Stream); settings: the run's settings;
    backend, device: rank 0's options (the device is chosen per rank by
    ``local_device``); save_every, out: rank 0's saves, which fix where the loop
    pauses.
    """

    checkpoint: Checkpoint
    dataset: object
    settings: object
    backend: str
    device: int | None
    save_every: int | None
    out: str


def main(click_main: Callable[..., object], args) -> NoReturn:
    """The command line on one rank of an MPI job (cli/group.py's main calls it when an MPI
    launcher started more than one process). ``click_main(**kw)``: click's main of
    the command group, run here in non-standalone mode; args: its arguments (None:
    sys.argv)."""
    rank, _ = mpi_world.launched()
    argv = list(sys.argv[1:] if args is None else args)
    if not argv or argv[0] != "train":
        if rank > 0:
            sys.exit(0)  # rank 0 alone runs other commands, without MPI
        sys.exit(_run(click_main, None, claim=lambda: None))
    try:
        world = mpi_world.join()
    except ImportError:
        if rank == 0:
            mpi_world.write_line(f"Error: an MPI launcher started {mpi_world.launched()[1]} "
                                  "processes, but mpi4py is not installed: run ./build.sh (or "
                                  "pip install mpi4py)")
        os._exit(1)
    except (WatchdogError, ValueError) as e:
        if rank == 0 or isinstance(e, WatchdogError):
            mpi_world.write_line(f"Error: {e}")
        os._exit(1)
    if world.rank > 0:
        world.finish(serve(world))
    world.finish(_run(click_main, world, world.claim_exit))


def _run(click_main, world, claim: Callable[[], None]) -> int:
    """Rank 0: the command, its errors printed as click prints them (after ``claim``,
    so that a failing rank's line and this one never both appear); its exit status."""
    try:
        rv = click_main(standalone_mode=False, obj=world)
        return rv if isinstance(rv, int) else 0
    except click.ClickException as e:
        claim()
        e.show()
        return e.exit_code
    except click.exceptions.Abort:
        claim()
        click.echo("Aborted!", err=True)
        return 1
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        claim()
        traceback.print_exc()
        return 1


def local_device(backend: str, device: int | None, local_rank: int) -> int | None:
    """The device of the rank numbered ``local_rank`` on its node: ``device`` when given
    (every rank the same), else for opencl and cuda local_rank mod the node's number
    of GPUs (opencl: counted as `microgpt-fut devices` lists them), or None (the
    backend's default) when there is at most one; None on c and multicore."""
    if device is not None or backend not in ("opencl", "cuda"):
        return device
    if backend == "opencl":
        from ..backend.runtime import opencl_devices

        gpus = [d.index for d in opencl_devices() if d.is_gpu]
    else:
        from ..backend.runtime import cuda_device_count

        gpus = list(range(cuda_device_count() or 0))
    return gpus[local_rank % len(gpus)] if len(gpus) > 1 else None


def check_split(world, rows: int, what: str) -> None:
    """Refuse (one line, status 2) a step of ``rows`` rows that the ranks cannot share:
    each rank needs at least one."""
    if world is not None and rows < world.size:
        e = click.ClickException(f"{what} cannot be split over {world.size} MPI ranks: give "
                                 f"at least {world.size} (each rank trains on its share of "
                                 "every step's batch)")
        e.exit_code = 2
        raise e


def describe(world, contexts: int) -> str:
    """How a run is spread, for the line that names the backend: " on 2 MPI ranks",
    " on 2 MPI ranks x 2 threads", " on 2 threads", or ""."""
    threads = f"{contexts} threads" if contexts > 1 else ""
    if world is None:
        return f" on {threads}" if threads else ""
    return f" on {world.size} MPI ranks" + (f" x {threads}" if threads else "")


def share_run(world, spec: RunSpec, run) -> None:
    """Rank 0: broadcast the run (``spec``) to the other ranks and pace ``run`` with them."""
    world.share(spec)
    pace_together(world, run)


def pace_together(world, run) -> None:
    """Make ``run``'s pacers (training and, for text runs, evaluation calls) take rank
    0's choice of steps on every rank."""
    run.pacer = world.shared_pacer(run.pacer)
    if hasattr(run, "eval_pacer"):
        run.eval_pacer = world.shared_pacer(run.eval_pacer)


def build(spec: RunSpec, world):
    """A worker's copy of rank 0's run: the spec's checkpoint resumed on this rank's
    device with the job's exchange. Raises the errors of Runtime and of resume."""
    rt = Runtime(spec.backend, local_device(spec.backend, spec.device, world.local_rank),
                 quiet=True, program=family_of(spec.checkpoint.config).program)
    run = Run.resume(rt, spec.checkpoint, spec.dataset, spec.settings, world.exchange)
    pace_together(world, run)
    return run


def serve(world) -> int:
    """A worker (rank > 0): wait for rank 0's run, build it, train it in lockstep;
    the exit status. A divergence is reported by rank 0 (every rank sees it); any
    other error of this rank is sent to rank 0 to print, as one line."""
    try:
        spec = world.share()
        if isinstance(spec, End):
            return spec.status
        run = build(spec, world)
        stopped = train_and_save(run, None, spec.save_every, lambda *a, **k: None,
                                  advance=lambda until, should_stop: run.run(
                                      until, should_stop=should_stop), world=world)
        return 128 + stopped.signum if stopped else 0
    except Diverged:
        return 1
    except MemoryError:
        world.watchdog.report("out of memory: try smaller sizes, --batch-size or "
                              "--steps-per-call")
        return 1
    except BaseException as e:  # noqa: BLE001 - whatever it is, rank 0 must hear of it
        msg = first_line(str(e))
        if not (msg and isinstance(e, (ValueError, RuntimeError, OSError))):
            msg = f"{type(e).__name__}: {msg}" if msg else type(e).__name__
        world.watchdog.report(msg)
        return 1
