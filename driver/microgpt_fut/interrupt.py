"""Ctrl-C, SIGTERM and SIGHUP during training: let the device call finish, then stop cleanly.

While ``stop_on_signals()`` is active, the first SIGINT (Ctrl-C), SIGTERM (what
`timeout`, batch schedulers and container stops send) or SIGHUP (a closed
terminal) only sets a flag that the training loop reads after each device call
(a call cannot be interrupted anyway: Python runs signal handlers between calls
into C), and the command saves and exits with status 128 + the signal's number
(130, 143, 129). A second one raises KeyboardInterrupt for a user who does not
want to wait. SIGTERM and SIGHUP are caught only where they would otherwise kill
the process (their default disposition): a run under `nohup` keeps ignoring SIGHUP.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class StopRequest:
    """A flag set by the first signal; call it to read it (``should_stop`` of Training.run).
    ``signum``: that signal's number, or None."""

    def __init__(self):
        self.signum: int | None = None

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def __call__(self) -> bool:
        return self.requested

    @property
    def name(self) -> str:
        """The signal's name (e.g. "SIGTERM"), "" when none came."""
        return signal.Signals(self.signum).name if self.signum else ""

    def _handler(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.signum = signum


@contextlib.contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """Install the handler for the ``with`` block (main thread only; elsewhere the flag
    is never set) and restore the previous handlers after it. SIGINT is always
    caught (as before); SIGTERM and SIGHUP only when their disposition is the default."""
    req = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield req
        return
    old = {}
    for sig in SIGNALS:
        if sig == signal.SIGINT or signal.getsignal(sig) == signal.SIG_DFL:
            old[sig] = signal.signal(sig, req._handler)
    try:
        yield req
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
