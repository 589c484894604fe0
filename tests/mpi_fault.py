"""microgpt-fut's command line with a fault on one MPI rank, for tests/test_mpi.py.

    mpirun -n 2 python tests/mpi_fault.py RANK FAULT CALL train ...

On rank RANK, the CALL-th shard gradient it computes (1-based: with one context
per rank, the CALL-th step) does FAULT instead: ``kill`` (SIGKILL to itself),
``stop`` (SIGSTOP to itself: a frozen process), ``nan`` (a NaN loss and
gradient, from that call on, as a blown-up shard would keep giving), ``oom``
(MemoryError), ``error`` (a RuntimeError) or ``hold`` (prints ``held`` on stdout and
waits for a signal before computing it: a call still running when a signal comes,
however fast the machine). The other ranks, and this one before that call, run the
command unchanged.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

import numpy as np

from microgpt_fut.cli.commands import main
from microgpt_fut.models.gpt2 import GPT2Model
from microgpt_fut.models.microgpt import MicrogptModel
from microgpt_fut.training import loop


_REQUESTS: list = []  # the run's StopRequest (training.loop's stop_on_signals), once made


@contextlib.contextmanager
def _recording_stop_on_signals(real=loop.stop_on_signals):
    with real() as req:
        _REQUESTS.append(req)
        yield req


def _hold_until_signalled() -> None:
    """Say ``held`` on stdout, then wait until the run has seen SIGTERM or SIGINT (its
    StopRequest is set: by the signal watcher, whichever thread the signal landed on)."""
    print("held", flush=True)
    while not (_REQUESTS and _REQUESTS[-1].requested):
        time.sleep(0.01)


def _inject(fault: str, call: int) -> None:
    calls = [0]

    def patch(cls):
        real = cls.loss_grad_flat

        def loss_grad_flat(self, *args, **kwargs):
            calls[0] += 1
            if calls[0] < call or (calls[0] > call and fault != "nan"):
                return real(self, *args, **kwargs)
            if fault == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if fault == "stop":
                os.kill(os.getpid(), signal.SIGSTOP)
                return real(self, *args, **kwargs)
            if fault == "hold":
                _hold_until_signalled()
                return real(self, *args, **kwargs)
            if fault == "oom":
                raise MemoryError()
            if fault == "error":
                raise RuntimeError("injected failure of a kernel call")
            loss, grad = real(self, *args, **kwargs)
            return float("nan"), np.full_like(grad, np.nan)

        cls.loss_grad_flat = loss_grad_flat

    patch(MicrogptModel)
    patch(GPT2Model)
    loop.stop_on_signals = _recording_stop_on_signals


if __name__ == "__main__":
    rank, fault, call = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    if int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))) == rank:
        _inject(fault, call)
    main(args=sys.argv[4:], prog_name="microgpt-fut")
