"""What every command of the command line shares: one-line errors, --out's checks and
lock, stdout's and stderr's lines, and the runtime (a run's display: running.py).

The commands (cli/train.py, sample.py, ...) and cli/mpi.py import from here; this
module imports none of them.
"""
from __future__ import annotations

import contextlib
import errno
import io
import os
import shlex
import sys
import tempfile
from pathlib import Path

import click

from ..training import checkpoint as ckpt
from ..errors import BackendError, CheckpointError, DataError, OptionConflict
from ..interrupt import is_stdout_closed, stdout_closed, to_devnull
from ..training.loop import first_line, lock_path
from ..backend.runtime import Runtime, default_backend


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


class ClosedStdout(io.TextIOBase):
    """sys.stdout for a process started with file descriptor 1 closed (``>&-``), where
    Python sets it to None and click would drop the product silently: every write fails
    as on a closed descriptor (OSError EBADF), which the group reports in one line."""

    def write(self, s: str) -> int:
        raise OSError(errno.EBADF, "stdout is closed")

    def flush(self) -> None:
        """Nothing is buffered (and Python flushes stdout at exit)."""


def failed_on_stdout(e: OSError) -> bool:
    """Whether ``e`` (not a closed pipe: that is SIGPIPE's 141) was raised by a write to
    stdout (a full device such as /dev/full, a closed descriptor): the innermost frame
    of its traceback holds sys.stdout (click.echo's ``file``, a stream's ``self``). If
    so, stdout is pointed at /dev/null, so that its unwritten bytes and Python's flush
    at exit fail no more."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if isinstance(e, BrokenPipeError) or tb is None or sys.stdout is None or not any(
            v is sys.stdout for v in tb.tb_frame.f_locals.values()):
        return False
    if isinstance(sys.stdout, ClosedStdout):
        sys.stdout = open(os.devnull, "w")
    else:
        to_devnull(sys.stdout)
    return True


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


def backend_of(given: str | None, program: str, work: int, split: bool, say) -> str:
    """--backend as given, else backend.runtime.default_backend's choice for kernel calls
    of ``work`` (rows x positions x parameters; ``split``: over --threads or MPI ranks),
    its note, when it has one, through ``say``."""
    if given is not None:
        return given
    backend, note = default_backend(program, work, split)
    if note is not None:
        say(note)
    return backend


def runtime(backend: str, device: int | None, quiet: bool, program: str = "microgpt") -> Runtime:
    with user_errors():
        return Runtime(backend, device, quiet=quiet, program=program)
