"""What every command of the command line shares: one-line errors, --out's checks and
lock, the runtime, the memory check, and the save-and-stop loop as click sees it.

cli/commands.py (the commands) and cli/mpi.py (the MPI ranks) import from here; this
module imports neither.
"""
from __future__ import annotations

import contextlib
import math
import os
import shlex
import signal
import sys
import tempfile
from pathlib import Path

import click

from ..training import checkpoint as ckpt
from ..training import loop
from ..training import curves, memory
from ..errors import (BackendError, CheckpointError, DataError, OptionConflict, RunFailed,
                      RunTooLarge)
from ..interrupt import is_stdout_closed, stdout_closed
from ..training.loop import first_line, lock_path
from ..backend.runtime import Runtime


@contextlib.contextmanager
def user_errors():
    """Turn the library's user-facing errors into one-line click errors."""
    try:
        yield
    except click.exceptions.Exit:  # a RuntimeError too, but an exit status, not an error
        raise
    except OptionConflict as e:  # the options, not the files: a usage error
        raise bad_option(first_line(str(e))) from None
    except (BackendError, DataError, CheckpointError, ValueError) as e:
        raise click.ClickException(first_line(str(e))) from None
    except RuntimeError as e:  # a failing entry point (e.g. out of device memory)
        raise click.ClickException(first_line(str(e))) from None


def bad_option(msg: str) -> click.ClickException:
    """A one-line error about the options (exit status 2, as click's usage errors)."""
    e = click.ClickException(msg)
    e.exit_code = 2
    return e


def check_out(out: Path, data: Path | None = None, resume: Path | None = None,
               overwrite: bool = False) -> None:
    """Fail before training when the checkpoint could not be written, or would destroy
    a file that is not a checkpoint (such as the data), or another run's checkpoint:
    --out may hold a checkpoint only when it is the one being resumed, or with
    --overwrite."""
    folder = out.parent
    # the atomic save's temporary file (".NAME.XXXXXXXX.tmp", checkpoint.py) and the loss
    # files beside it need up to 16 bytes more than the name; a longer name would fail
    # only when the run saves (and Path.is_dir raises on it)
    try:
        name_max = os.pathconf(folder if folder.is_dir() else ".", "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    if len(os.fsencode(out.name)) + 16 > name_max:
        raise bad_option(f"--out's file name is {len(os.fsencode(out.name))} bytes, more than "
                         f"this folder's {name_max} less the 16 its save needs; give a "
                         "shorter name")
    if out.is_dir():
        raise bad_option(f"--out {str(out)!r} is a directory; give a file name")
    if not folder.exists():
        raise click.ClickException(f"--out: folder {str(folder)!r} does not exist")
    if not folder.is_dir():
        raise click.ClickException(f"--out {str(out)!r}: {str(folder)!r} is not a folder")
    if out.exists():
        if data is not None and data.exists() and os.path.samefile(out, data):
            raise bad_option(f"--out {str(out)!r} is the data file; give another name")
        try:
            meta = ckpt.read_metadata(out)
        except CheckpointError:
            raise click.ClickException(
                f"--out {str(out)!r} exists and is not a microgpt-fut checkpoint: refusing to "
                "overwrite it (move it away or choose another --out)") from None
        resuming_it = resume is not None and resume.exists() and os.path.samefile(out, resume)
        if not resuming_it and not overwrite:
            step, total = meta.get("step", "?"), meta.get("num_steps")
            complete = total is not None and step == total
            go_on = ("" if complete else
                     f"continue it with --resume {shlex.quote(str(out))}, ")
            raise click.ClickException(
                f"--out {str(out)!r} holds the checkpoint of another run (step {step}"
                f"{' of ' + total + ', complete' if complete else ''}, data "
                f"{meta.get('data') or '?'}): refusing to overwrite it; {go_on}choose "
                "another --out, or pass --overwrite")
    try:
        fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".probe", dir=folder)
        os.close(fd)
        os.unlink(name)
    except OSError as e:
        raise click.ClickException(f"--out: cannot write in folder {str(folder)!r}: "
                                   f"{e.strerror or e}") from None


def lock_out(ctx, out: Path) -> None:
    """Take the lock ``.<name>.lock`` beside --out (the path it resolves to, loop.lock_path:
    a symlink is the same --out) until the command ends, so that two runs never write
    the same checkpoint or shard set at once (flock: the OS releases it at any
    exit, so a dead process's lock is free). A one-line error when another process
    holds it."""
    import fcntl

    path = lock_path(out)
    f = open(path, "a+")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        pid = f.read().strip() or "?"
        f.close()
        raise click.ClickException(f"--out {str(out)!r} is being written by another "
                                   f"microgpt-fut process (pid {pid}); wait for it or choose "
                                   "another --out") from None
    f.seek(0)
    f.truncate()
    f.write(str(os.getpid()))
    f.flush()

    def release():
        with contextlib.suppress(OSError):
            path.unlink()
        f.close()

    ctx.call_on_close(release)


def say_line(message: str = "") -> None:
    """Print a line of a command's product on stdout (eval's scores). When stdout's
    reader has gone away (``... | head -1``), stop as SIGPIPE would
    (interrupt.stdout_closed): the command keeps its work and exits with status 141."""
    try:
        click.echo(message)
    except BrokenPipeError:
        stdout_closed()


def say_note(message: str) -> None:
    """A line of progress, a note or a message on stderr (stdout holds only a command's
    product: samples, eval's scores, devices' list; as tqdm and logging). When stderr's
    reader went away (``train 2>&1 | head -3``), the line is dropped, stderr pointed at
    /dev/null and a run stopped as SIGPIPE would (interrupt.stdout_closed: it saves and
    exits with 141; click would turn the broken pipe into status 1)."""
    try:
        click.echo(message, err=True)
    except BrokenPipeError:
        stdout_closed(sys.stderr)


def exit_if_stdout_closed(ctx, done: str) -> None:
    """After a command's work is kept (``done`` says what: a saved checkpoint, written
    shards): when stdout's reader went away, say so on stderr and exit with status 141
    (SIGPIPE's; what follows on stdout would go nowhere)."""
    if is_stdout_closed():
        say_note(f"stdout was closed (its reader went away): {done}")
        ctx.exit(141)


def saved_step(run, out: Path) -> str:
    """"saved the checkpoint of step S of N to 'out'": what a stopped run kept."""
    return f"saved the checkpoint of step {run.step} of {run.num_steps} to {str(out)!r}"


def exit_with(code: int, msg: str) -> click.ClickException:
    e = click.ClickException(msg)
    e.exit_code = code
    return e


def runtime(backend: str, device: int | None, quiet: bool, program: str = "microgpt") -> Runtime:
    with user_errors():
        return Runtime(backend, device, quiet=quiet, program=program)


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
