"""Ctrl-C, SIGTERM and SIGHUP during training: stop after the current device call and
save, or, at a second signal, stop at once without saving.

While ``stop_on_signals()`` is active, the first SIGINT (Ctrl-C), SIGTERM (what
`timeout`, batch schedulers and container stops send) or SIGHUP (a closed
terminal) only sets a flag that the training loop reads after each device call;
the command then saves and exits with status 128 + the signal's number (130,
143, 129). Calls are kept short (pacing.py: about half a second), so that is the
wait. A second signal ends the process at once, even in the middle of a device
call, without saving: what was written before stays, partial files are removed.

Why a thread: Python runs signal handlers in the main thread between bytecodes,
so while the main thread is inside a kernel call a handler cannot run, and two
Ctrl-C in one call arrive as one. ``signal.set_wakeup_fd`` makes the C-level
handler write each signal's number to a pipe at once; a watcher thread reads
the pipe (kernel calls through cffi release the GIL) and counts every signal.
The main thread's handler sets the same flag, so that a stop is seen right after
the call in which it came.
SIGTERM and SIGHUP are caught only where they would otherwise kill the process
(their default disposition): a run under `nohup` keeps ignoring SIGHUP.

A closed stdout (``train ... | head -2``: the reader went away) is treated as
SIGPIPE would be, but without losing the work: ``stdout_closed()``, called where
a write to stdout raised BrokenPipeError, points stdout at /dev/null and stops
the run like a first signal, SIGPIPE (the command saves and exits with 141).
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

# Temporary files being written (atomic saves): removed when a second signal ends
# the process before they are renamed into place.
PARTIAL_FILES: set[str] = set()
# The StopRequests of the active ``stop_on_signals`` blocks, and whether stdout's reader
# went away (then every StopRequest made is stopped by SIGPIPE).
_ACTIVE: list["StopRequest"] = []
_STDOUT_CLOSED = [False]
_exit = os._exit  # ends the process without unwinding (a seam for tests)


class StopRequest:
    """A flag set by the first signal; call it to read it (``should_stop`` of run.Run.run).
    ``signum``: that signal's number, or None. ``on_second()`` gives the line printed
    when a second signal ends the process (set by the command; None prints nothing)."""

    def __init__(self):
        self.signum: int | None = None
        self._count = 0  # signals the watcher has seen
        self.on_second: Callable[[], str] = lambda: "interrupted twice: stopped without saving"
        self.cleanups: list[Callable[[], None]] = []

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def __call__(self) -> bool:
        return self.requested

    @property
    def name(self) -> str:
        """The signal's name (e.g. "SIGTERM"), "" when none came."""
        return signal.Signals(self.signum).name if self.signum else ""

    def _first(self, signum: int) -> None:
        if not self.requested:
            self.signum = signum

    def _signal(self, signum: int) -> None:
        """The watcher's count of every signal: the first stops, the second ends."""
        self._count += 1
        if self._count == 1:
            self._first(signum)
            return
        # The second signal: remove partial files, say what --out holds, and end now.
        for path in list(PARTIAL_FILES):
            with contextlib.suppress(OSError):
                os.unlink(path)
        for f in self.cleanups:
            with contextlib.suppress(Exception):
                f()
        try:
            msg = self.on_second()
        except Exception:  # never let a message stop the exit
            msg = "interrupted twice: stopped without saving"
        if msg is not None:  # None: another process speaks (an MPI worker's rank 0)
            with contextlib.suppress(OSError):
                os.write(2, f"Error: {msg}\n".encode())
        _exit(128 + signum)


def _watch(fd: int, req: StopRequest, caught: frozenset) -> None:
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        if not data:  # the write end closed: the ``with`` block ended
            return
        for signum in data:
            if signum in caught:
                req._signal(signum)


def to_devnull(stream) -> None:
    """Point ``stream``'s file descriptor at /dev/null: its later writes, and Python's
    flush at exit, then go nowhere instead of failing again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


def stdout_closed(stream=None) -> None:
    """stdout's reader (or ``stream``'s: stderr, where a run's progress goes) went away
    (a write raised BrokenPipeError): point that stream at /dev/null, so that no later
    write (nor Python's flush at exit) fails, and stop every StopRequest, those of
    later ``stop_on_signals`` blocks too, as a first SIGPIPE would (exit status 141)."""
    to_devnull(stream or sys.stdout)
    _STDOUT_CLOSED[0] = True
    for req in _ACTIVE:
        req._first(signal.SIGPIPE)


def is_stdout_closed() -> bool:
    """Whether ``stdout_closed`` was called in this process."""
    return _STDOUT_CLOSED[0]


@contextlib.contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """Catch the signals for the ``with`` block (from the main thread only; elsewhere
    the flag is never set) and restore the previous handlers after it. SIGINT is
    always caught; SIGTERM and SIGHUP only when their disposition is the default."""
    req = StopRequest()
    if _STDOUT_CLOSED[0]:
        req._first(signal.SIGPIPE)
    if threading.current_thread() is not threading.main_thread():
        yield req
        return
    r, w = os.pipe()
    os.set_blocking(w, False)
    old = {}
    for sig in SIGNALS:
        if sig == signal.SIGINT or signal.getsignal(sig) == signal.SIG_DFL:
            old[sig] = signal.signal(sig, lambda signum, frame: req._first(signum))
    old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    watcher = threading.Thread(target=_watch, args=(r, req, frozenset(old)), daemon=True,
                               name="microgpt-fut signals")
    watcher.start()
    _ACTIVE.append(req)
    try:
        yield req
    finally:
        _ACTIVE.remove(req)
        signal.set_wakeup_fd(old_fd)
        for sig, handler in old.items():
            signal.signal(sig, handler)
        os.close(w)
        watcher.join(timeout=5)
        os.close(r)
        sys.stderr.flush()
