"""How many training steps to fuse into the next device call.

Fusing K steps into one call saves the per-call overhead (microgpt's steps take
microseconds), but a call cannot be interrupted: Ctrl-C, SIGTERM and SIGHUP wait
for it (interrupt.py). So K is chosen by time: as many steps as fit in
CALL_SECONDS at the speed the previous call measured, at most --steps-per-call,
starting from one step. A run's results do not depend on how its steps are
split into calls (each step's batch and learning rate depend only on its index).
"""
from __future__ import annotations

CALL_SECONDS = 0.5  # the longest a signal should wait for a call (issue: ~1 s at any size)


class CallPacer:
    """Steps for the next call: ``next_k(done, remaining)``, then ``record(k, seconds)``."""

    def __init__(self, max_steps: int, seconds: float = CALL_SECONDS):
        if max_steps < 1:
            raise ValueError(f"--steps-per-call must be at least 1, got {max_steps}")
        self.max_steps = max_steps
        self.seconds = seconds
        self._per_step: float | None = None  # seconds per step of the last call

    def next_k(self, done: int, remaining: int) -> int:
        """Steps for the next call, which starts after ``done`` steps: 1 <= k <=
        min(remaining, max_steps), remaining >= 1. Calls of K steps end at multiples
        of K (as with a fixed --steps-per-call), so the first call after a resume
        lines up with the calls of an uninterrupted run."""
        if self._per_step is None:
            k = 1  # measure before fusing: a call of max_steps could take minutes
        elif self._per_step <= 0:
            k = self.max_steps
        else:
            k = max(1, min(int(self.seconds / self._per_step), self.max_steps))
        return max(1, min(k - done % k, remaining))

    def record(self, k: int, seconds: float) -> None:
        """The last call took ``seconds`` for ``k`` steps."""
        if k > 0:
            self._per_step = seconds / k
