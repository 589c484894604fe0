"""Ctrl-C during training: let the device call finish, then stop cleanly.

While ``stop_on_sigint()`` is active, the first SIGINT only sets a flag that
the training loop reads after each device call (a call cannot be interrupted
anyway: Python runs signal handlers between calls into C). A second SIGINT
raises KeyboardInterrupt for a user who does not want to wait.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator


class StopRequest:
    """A flag set by the first SIGINT; call it to read it (``should_stop`` of Training.run)."""

    def __init__(self):
        self.requested = False

    def __call__(self) -> bool:
        return self.requested

    def _handler(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True


@contextlib.contextmanager
def stop_on_sigint() -> Iterator[StopRequest]:
    """Install the SIGINT handler for the ``with`` block (main thread only; elsewhere
    the flag is never set) and restore the previous handler after it."""
    req = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield req
        return
    old = signal.signal(signal.SIGINT, req._handler)
    try:
        yield req
    finally:
        signal.signal(signal.SIGINT, old)
