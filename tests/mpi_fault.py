"""microgpt-fut's command line with a fault on one MPI rank, for tests/test_mpi.py.

    mpirun -n 2 python tests/mpi_fault.py RANK FAULT CALL train ...

On rank RANK, the CALL-th shard gradient it computes (1-based: with one context
per rank, the CALL-th step) does FAULT instead: ``kill`` (SIGKILL to itself),
``stop`` (SIGSTOP to itself: a frozen process), ``nan`` (a NaN loss and
gradient, from that call on, as a blown-up shard would keep giving), ``oom``
(MemoryError) or ``error`` (a RuntimeError). The other ranks, and this one
before that call, run the command unchanged.
"""
from __future__ import annotations

import os
import signal
import sys

import numpy as np

from microgpt_fut.cli.commands import main
from microgpt_fut.models.gpt2 import GPT2Model
from microgpt_fut.models.microgpt import Model


def _inject(fault: str, call: int) -> None:
    calls = [0]

    def patch(cls):
        real = cls.loss_grad

        def loss_grad(self, *args, **kwargs):
            calls[0] += 1
            if calls[0] < call or (calls[0] > call and fault != "nan"):
                return real(self, *args, **kwargs)
            if fault == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if fault == "stop":
                os.kill(os.getpid(), signal.SIGSTOP)
                return real(self, *args, **kwargs)
            if fault == "oom":
                raise MemoryError()
            if fault == "error":
                raise RuntimeError("injected failure of a kernel call")
            loss, grad = real(self, *args, **kwargs)
            return float("nan"), {k: np.full_like(g, np.nan) for k, g in grad.items()}

        cls.loss_grad = loss_grad

    patch(Model)
    patch(GPT2Model)


if __name__ == "__main__":
    rank, fault, call = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    if int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))) == rank:
        _inject(fault, call)
    main(args=sys.argv[4:], prog_name="microgpt-fut")
