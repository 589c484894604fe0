"""A training run as the command line shows it: the memory checks before it, its
progress bar or lines, its evaluation lines, the save-and-stop loop, and the exit of a
run a signal stopped. The commands import from here; it imports common only."""
from __future__ import annotations

import math
import shlex
import signal
import sys
from pathlib import Path

import click

from ..backend.runtime import Runtime
from ..errors import RunFailed, RunTooLarge
from ..training import curves, loop, memory
from .common import bad_option, say_note


def ranks_here(world) -> int:
    """Training processes on this machine: the MPI ranks of this node, else 1 (each
    holds its own state, as a --threads context does)."""
    return world.local_size if world is not None else 1


def check_memory(config, backend: str, rt: Runtime, batch_size: int, steps_per_call: int,
                  data_tokens: int, grad_accum: int, contexts: int, eval_iters: int,
                  out: Path) -> None:
    """Refuse (one line naming the option) a run that would not fit in memory, in the
    device's memory or, its checkpoint, on the disk of --out (memory.py)."""
    need = memory.training_need(config, backend, batch_size, steps_per_call, data_tokens,
                                grad_accum, contexts, eval_iters)
    device_memory = rt.device.memory if rt.device is not None and rt.device.is_gpu else 0
    try:
        memory.check_run(need, out, device_memory)
    except RunTooLarge as e:
        raise click.ClickException(str(e)) from None


def sample_rows(config, contexts: int, strict: bool = True) -> int:
    """The most samples one sampling call may make on this machine (memory.sample_rows,
    at most sampling.TEXT_CHUNK or NAMES_CHUNK; ``contexts``: --threads), checked before
    the model is loaded. When not even one fits: a one-line usage error (exit 2) naming
    --threads and the most that fit, or that the model is too large; 1 unless
    ``strict`` (the samples after training, whose model is already in memory)."""
    from ..training.sampling import NAMES_CHUNK, STEPS_CHUNK, TEXT_CHUNK

    need = memory.sampling_need(config, contexts, STEPS_CHUNK)
    try:
        return memory.sample_rows(need, max(TEXT_CHUNK, NAMES_CHUNK), contexts)
    except RunTooLarge as e:
        if not strict:
            return 1
        raise bad_option(str(e)) from None


def exit_saved(ctx, stop, run, out: Path, resume_args: str = "", world=None) -> None:
    """After a signal stopped a run (its checkpoint saved): say so on stderr and exit
    with status 128 + the signal's number (Ctrl-C: 130, SIGTERM: 143, SIGHUP: 129;
    a closed stdout, as SIGPIPE: 141).
    Under mpirun (``world``) the hint repeats the number of ranks (any other
    number, or one process, continues the run too, to float rounding)."""
    how = ("interrupted" if stop.signum == signal.SIGINT else
           "stdout was closed (its reader went away)" if stop.signum == signal.SIGPIPE else
           f"stopped by {stop.name}")
    launcher = f"mpirun -n {world.size} " if world is not None else ""
    say_note(f"{how}: saved the checkpoint of step {run.step} of {run.num_steps} "
              f"to {str(out)!r}; continue with: {launcher}microgpt-fut train --resume "
              f"{shlex.quote(str(out))}{resume_args}")
    ctx.exit(128 + stop.signum)


def eval_line(step: int, train_loss: float, val_loss: float, *scores: float) -> str:
    """nanoGPT's evaluation line; without a validation split (--val-fraction 0, its val
    loss NaN) the train loss alone; with --eval-choices its acc and acc_norm after."""
    line = f"step {step}: train loss {train_loss:.4f}"
    line = line if math.isnan(val_loss) else f"{line}, val loss {val_loss:.4f}"
    if scores:
        line += f", acc {scores[0]:.4f}, acc_norm {scores[1]:.4f}"
    return line


def train_and_save(run, out: Path, save_every: int | None, say, quiet: bool,
                   ours: int | None = None, world=None, curves_beside: bool = False):
    """loop.train_and_save with the command line's display: a tqdm bar on a terminal,
    else a progress line every 100 steps (the mean loss of the steps since the last,
    the gradient norm where the family measures one); nanoGPT's evaluation lines; the
    loss curves written beside --out at each save when ``curves_beside`` (a run that
    evaluates). ``world``: rank 0 of an MPI job. The StopRequest when a signal stopped
    the run (saved), else None; RunFailed becomes click's one-line error."""
    bar = None
    if not quiet and sys.stderr.isatty():
        from tqdm import tqdm
        bar = tqdm(total=run.num_steps, initial=run.step, unit="step", dynamic_ncols=True,
                   file=sys.stderr)

    def write(message: str) -> None:
        """A line on stderr, above the bar when there is one."""
        if bar is None:
            return say(message)
        try:
            bar.write(message, file=sys.stderr)
        except BrokenPipeError:
            say_note(message)  # points stderr at /dev/null

    def progress(step, total, loss, norm, rate, first):
        if bar is not None:
            bar.update(step - bar.n)
            grad = "" if math.isnan(norm) else f" | norm {norm:.2f}"
            bar.set_postfix_str(f"loss {loss:.4f}{grad} | {rate:,.0f} tok/s")
        else:
            grad = "" if math.isnan(norm) else f"| grad norm {norm:.4f} (step {step}) "
            say(f"step {step:{len(str(total))}d} / {total} | {loop.mean_loss(loss, first, step)} "
                f"{grad}| {rate:,.0f} tok/s")

    def advance(until, should_stop):
        run.run(until, progress, lambda *e: write(eval_line(*e)),
                report_every=10 if bar else 100, should_stop=should_stop)

    def write_curves():
        config = run.model.config
        title = (f"{Path(run.dataset.data.path).name}: {config.arch} "
                 f"{config.num_params() / 1e6:.2f}M params")
        try:
            curves.write(out, run.losses, run.norms, run.evals, title, run.dataset.has_val)
        except OSError as e:
            raise click.ClickException(f"cannot write the loss curves beside {str(out)!r}: "
                                       f"{e.strerror or e}; the checkpoint is saved") from None

    try:
        return loop.train_and_save(run, out, save_every, write, ours, advance,
                                   write_curves if curves_beside else None, world)
    except RunFailed as e:
        raise click.ClickException(str(e)) from None
    finally:
        if bar is not None:
            bar.close()
