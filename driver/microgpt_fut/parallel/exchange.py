"""Combining the shards' gradients of a data-parallel step: in one process, or across MPI ranks.

A step's global batch (B documents, or N text windows) is cut into shards of
consecutive rows: first one share per process (``rows``: ``shard_rows(B, size)[rank]``),
then each process cuts its share over its own contexts (``--threads``). Each shard
gives its mean loss and gradient; the batch's are the shards' weighted by their
share of the batch's positions, w_s = n_pos_s / n_pos (the loss is a mean over
positions, train.fut's ``compute_loss``, so sum_s w_s grad_s is the batch's gradient
exactly). ``combine`` takes this process's shards, in order, and returns the sum
over all shards of the job:

- ``Exchange`` (one process, ``--threads``): the shards' sum itself, in float32 in
  a fixed order (the loss in float64), so a run is reproducible;
- ``MPIExchange`` (``mpirun -n N``): the same sum over this rank's shards, then
  ``Allreduce`` (MPI.SUM, in place) of that one contiguous float32 vector of the
  gradient across the ranks, and a second one of 1 + N doubles: the loss and each
  rank's flag of a non-finite partial sum (``bad_ranks``, to name the rank).

With 2 ranks of one context each, the sums are the ones ``--threads 2`` takes in
one process (0 + a is a, and a + b is b + a), so the two agree bit for bit;
with more ranks, Open MPI's reduction order may differ, to float32 rounding.
The ``gather`` of per-row values (evaluation losses) is an ``Allgatherv``.

A rank that is done before the others waits for them. Open MPI's blocking
collectives wait by polling a core flat out, which on a machine with no core to
spare (2 vCPUs, other work) slows the very ranks being waited for; so the long
waits here are non-blocking collectives polled a little, then with short sleeps
(``wait``): the same results, a fraction of a millisecond later.
"""
from __future__ import annotations

import math
import time
from typing import Iterable

import numpy as np

SPIN_SECONDS = 2e-4   # poll flat out this long before sleeping between polls
POLL_SECONDS = 2e-4   # then sleep this long between polls


def wait(request) -> None:
    """Wait for an MPI request (mpi4py's): poll it for SPIN_SECONDS, then every
    POLL_SECONDS (Open MPI progresses a non-blocking collective inside Test)."""
    spin_until = time.perf_counter() + SPIN_SECONDS
    while not request.Test():
        if time.perf_counter() > spin_until:
            time.sleep(POLL_SECONDS)


def shard_rows(batch_size: int, threads: int) -> list[slice]:
    """Consecutive row ranges of a batch, one per shard: min(threads, batch_size) of
    them, sizes differing by at most one (as numpy.array_split); none for an empty
    batch."""
    n = min(threads, batch_size)
    if n <= 0:
        return []
    bounds = [batch_size * i // n for i in range(n + 1)]
    return [slice(a, b) for a, b in zip(bounds, bounds[1:])]


# (weight, mean loss, flat float32 gradient) of one shard
Part = tuple[float, float, np.ndarray]


class Exchange:
    """The shards of one process (``--threads``, or no parallelism): rank 0 of 1.

    ``bad_ranks``: after ``combine``, the ranks whose partial sum was not finite
    (always empty here: one process needs no one named).
    """

    rank = 0
    size = 1

    def __init__(self):
        self.bad_ranks: tuple[int, ...] = ()

    def rows(self, n: int) -> slice:
        """This process's share of n rows (here all of them)."""
        return slice(0, n)

    def local_sum(self, parts: Iterable[Part], n_params: int) -> tuple[float, np.ndarray]:
        """(sum_s w_s loss_s, sum_s w_s grad_s) over this process's shards, in order:
        the loss in float64, the gradient a new float32 [n_params] vector (each part's
        gradient is scaled in place by float32(w_s), then added)."""
        loss, grad = 0.0, np.zeros(n_params, np.float32)
        for w, shard_loss, flat in parts:
            loss += w * shard_loss
            flat *= np.float32(w)
            grad += flat  # float32, shards in a fixed order
        return loss, grad

    def combine(self, parts: Iterable[Part], n_params: int) -> tuple[float, np.ndarray]:
        """The batch's (mean loss, flat float32 gradient) from this process's shards
        (``local_sum``; in one process, that is all of them)."""
        return self.local_sum(parts, n_params)

    def gather(self, values: np.ndarray, n: int) -> np.ndarray:
        """Per-row values of this process's ``rows(n)``, as the n values of all rows."""
        return values


class MPIExchange(Exchange):
    """The shards of every rank of an MPI communicator (mpi4py's ``comm``): this rank
    sums its own, then Allreduce sums the ranks' partial sums (module docstring)."""

    def __init__(self, comm):
        super().__init__()
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()

    def rows(self, n: int) -> slice:
        """This rank's share of n rows: ``shard_rows(n, size)[rank]``, empty when n < size
        leaves none for it."""
        shares = shard_rows(n, self.size)
        return shares[self.rank] if self.rank < len(shares) else slice(n, n)

    def combine(self, parts: Iterable[Part], n_params: int) -> tuple[float, np.ndarray]:
        """The sum over all ranks' shards: ``local_sum``, then one Allreduce of the float32
        gradient in place and one of [loss, bad flag of rank 0 .. N-1] (float64).
        Sets ``bad_ranks``. Every rank returns the same bits."""
        from mpi4py import MPI

        loss, grad = self.local_sum(parts, n_params)
        small = np.zeros(1 + self.size, np.float64)
        small[0] = loss
        # one pass over the vector: NaN and infinities survive a float64 sum, and float32
        # values cannot overflow it
        small[1 + self.rank] = not (math.isfinite(loss)
                                    and math.isfinite(float(grad.sum(dtype=np.float64))))
        wait(self.comm.Iallreduce(MPI.IN_PLACE, grad, op=MPI.SUM))
        self.comm.Allreduce(MPI.IN_PLACE, small, op=MPI.SUM)
        self.bad_ranks = tuple(r for r in range(self.size) if small[1 + r])
        return float(small[0]), grad

    def max_int(self, value: int) -> int:
        """The largest of the ranks' values (an Iallreduce, waited for politely)."""
        from mpi4py import MPI

        buf = np.array([value], np.int64)
        wait(self.comm.Iallreduce(MPI.IN_PLACE, buf, op=MPI.MAX))
        return int(buf[0])

    def rank0_int(self, value: int | None) -> int:
        """Rank 0's value on every rank (an Ibcast, waited for politely)."""
        buf = np.array([value if self.rank == 0 else 0], np.int64)
        wait(self.comm.Ibcast(buf, root=0))
        return int(buf[0])

    def gather(self, values: np.ndarray, n: int) -> np.ndarray:
        """Allgatherv of each rank's per-row float32 values: the n values in row order."""
        from mpi4py import MPI

        counts = [s.stop - s.start for s in shard_rows(n, self.size)]
        counts += [0] * (self.size - len(counts))
        out = np.empty(n, np.float32)
        self.comm.Allgatherv(np.ascontiguousarray(values, np.float32),
                             [out, counts, MPI.FLOAT])
        return out
