"""Data-parallel training on several CPU threads: one c-backend context per thread.

For --threads N each step is split as data-parallel training does it across devices:

1. the step's rows (all its micro-batches together) are cut into n = min(N, rows)
   shards of consecutive rows;
2. each shard's mean loss and gradient come from its own Futhark context, on its own
   thread (futhark-ffi releases the GIL during the call);
3. the gradient of the whole batch is the shards' gradients weighted by their share of
   the valid positions: the loss is a mean over positions (train.fut's
   ``compute_loss``), so sum_s (n_pos_s / n_pos) * grad_s is it exactly;
4. one optimiser step on context 0, which holds the state: the libraries'
   ``apply_gradient``, the same clip and AdamW as ``train``'s steps (futhark/train.fut's
   ``step``), at the optimiser's learning rate of that step; the new parameters go to
   every other context for the next step.

Sampling and evaluation split the rows over the contexts the same way (each sample has
its own random stream, so the names do not depend on the split).

The shards' weighted sum is exchange.py's: ``Exchange`` in one process, and
``MPIExchange`` under ``mpirun``, where the batch is first split among the ranks and
each rank's partial sum is combined with the others' by Allreduce; every rank then
takes the same step from the same state (mpi_world.py, cli/mpi.py). --threads and MPI
ranks are the same mechanism: a rank's contexts are its shards.

The host is in the loop once per step (``--steps-per-call`` fuses nothing here).
Sums are taken in a fixed order, so a run is reproducible for a given N; runs
with another N agree to float32 rounding.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .exchange import Exchange, shard_rows
from ..models.base import DeviceModel, unflatten, valid_positions
from ..backend.runtime import Runtime


def local_shards(exchange: Exchange, n: int, contexts: int) -> list[slice]:
    """This process's shards of n rows: its share (``exchange.rows(n)``) cut over its
    contexts as ``shard_rows`` cuts, as slices of the whole batch (none for an empty
    share)."""
    mine = exchange.rows(n)
    return [slice(mine.start + s.start, mine.start + s.stop)
            for s in shard_rows(mine.stop - mine.start, contexts)]


def runtimes(rt: Runtime, threads: int) -> list[Runtime]:
    """rt and threads - 1 more contexts of its backend, one per thread.

    Raises ValueError (naming --threads) unless threads is 1 or rt is the c backend.
    """
    if threads > 1 and rt.backend != "c":
        raise ValueError(f"--threads {threads} applies to the c backend only, not "
                         f"{rt.backend!r} (multicore, opencl and cuda run their own "
                         "parallel kernels)")
    extra = _EXTRA_CONTEXTS.setdefault(rt.program, [])
    while len(extra) < threads - 1:  # contexts hold no state between calls: reused
        extra.append(Runtime(rt.backend, quiet=True, program=rt.program))
    return [rt] + extra[:threads - 1]


# c contexts beside the caller's, per program (microgpt, gpt2), shared by all models
_EXTRA_CONTEXTS: dict[str, list[Runtime]] = {}


def _check_contexts(rts: list[Runtime]) -> None:
    """Several contexts in one process are c contexts (--threads); one may be any backend
    (an MPI rank's device)."""
    if not rts or (len(rts) > 1 and any(rt.backend != "c" for rt in rts)):
        raise ValueError("--threads applies to the c backend only")


class DataParallelModel:
    """A model trained over several contexts (--threads) and MPI ranks, for either family,
    with the device model's interface: the state lives on context 0 (``model``, a
    DeviceModel; ``state`` is its state),
    each step's gradient is the shards' (``exchange``; its ``bad_ranks`` name the
    ranks of a non-finite step), and the step is taken on context 0 by the kernels'
    ``apply_gradient``. The other contexts hold the current parameters only.

    Raises ValueError when several Runtimes are given and one is not the c backend.
    """

    def __init__(self, rts: list[Runtime], model: DeviceModel, exchange: Exchange | None = None):
        _check_contexts(rts)
        if model.rt is not rts[0]:
            raise ValueError("the model's state must live on the first context")
        self.rts, self.rt, self.model, self.config = rts, rts[0], model, model.config
        self.exchange = exchange or Exchange()
        self._pool = ThreadPoolExecutor(max_workers=len(rts), thread_name_prefix="microgpt-fut")

    @property
    def state(self):
        """The state on context 0 (an opaque device value, consumed by each step)."""
        return self.model.state

    def _contexts(self, n: int) -> list[DeviceModel]:
        """The first n contexts as models holding the current parameters: context 0 is
        the model itself; the others get its parameters with zero moments (only
        gradients, losses and samples are taken there)."""
        models = [self.model]
        if n > 1:
            params = self.rt.numpy(self.rt.entry("get_params", self.state))
            models += [type(self.model)(rt, self.config,
                                        rt.entry("make_state_params", *self.config.init_sizes(),
                                                 0, params))
                       for rt in self.rts[1:n]]
        return models

    @property
    def bad_ranks(self) -> tuple[int, ...]:
        """The MPI ranks whose shards gave a non-finite loss or gradient in the last step
        (empty in one process)."""
        return self.exchange.bad_ranks

    def _loss_grad(self, tokens: np.ndarray, n_pos: np.ndarray) -> tuple[float, np.ndarray]:
        """(mean loss, flat float32 gradient) of one batch: tokens int64 [B, T+1], n_pos
        int64 [B], from the shards' gradients on the threads (and, under MPI, the
        other ranks'), each weighted by its share of the batch's valid positions (the
        loss is a mean over positions: train.fut's compute_loss), in a fixed order."""
        shards = local_shards(self.exchange, len(n_pos), len(self.rts))
        total = float(np.sum(n_pos))
        models = self._contexts(len(shards))
        results = self._pool.map(lambda i: models[i].loss_grad_flat(tokens[shards[i]],
                                                                    n_pos[shards[i]]),
                                 range(len(shards)))
        parts = ((float(np.sum(n_pos[rows])) / total, loss, grad)
                 for rows, (loss, grad) in zip(shards, results))
        return self.exchange.combine(parts, self.config.num_tensor_elements())

    def loss_grad(self, tokens: np.ndarray, n_pos: np.ndarray | None = None):
        """As the device model's loss_grad: (mean loss, gradient by tensor) of one batch
        tokens [B, T+1], n_pos [B] (None: all T); no update."""
        tokens = np.asarray(tokens, np.int64)
        loss, grad = self._loss_grad(tokens, valid_positions(tokens, n_pos))
        return loss, unflatten(grad, self.config)

    def train(self, tokens: np.ndarray, n_pos: np.ndarray | None, optimizer,
              num_steps: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """As the device model's train: K steps on tokens [K, A, B, T+1] (a step's A
        micro-batches as one batch of A*B rows; [K, B, T+1]: A = 1), n_pos of the same
        leading shape or None (every position counts); (losses [K], gradient norms [K]).
        A step whose loss, norm or update is not finite is not taken and ends the call
        (its loss and norm recorded, the later ones NaN), as the kernels' ``train``."""
        tokens = np.asarray(tokens, np.int64)
        T1 = tokens.shape[-1]
        n_pos = valid_positions(tokens, n_pos)
        losses = np.full(len(tokens), np.nan, np.float32)
        norms = losses.copy()
        first = self.model.step()
        for k in range(len(tokens)):
            losses[k], grad = self._loss_grad(tokens[k].reshape(-1, T1), n_pos[k].reshape(-1))
            lr = optimizer.lr_at(first + k, num_steps)
            norms[k], taken = self.model.apply_gradient(grad, lr, optimizer)
            if not taken:
                break
        return losses, norms

    def losses(self, tokens: np.ndarray, n_pos: np.ndarray | None = None) -> np.ndarray:
        """As the device model's losses, the I batches split over the contexts (and the
        ranks)."""
        tokens = np.asarray(tokens, np.int64)
        parts = local_shards(self.exchange, len(tokens), len(self.rts))
        models = self._contexts(len(parts))
        mine = (np.concatenate(list(self._pool.map(
            lambda i: models[i].losses(tokens[parts[i]],
                                       None if n_pos is None else n_pos[parts[i]]),
            range(len(parts))))) if parts else np.zeros(0, np.float32))
        return self.exchange.gather(mine, len(tokens))

    def loss(self, tokens: np.ndarray, n_pos: np.ndarray | None = None) -> float:
        """As the device model's loss, on context 0."""
        return self.model.loss(tokens, n_pos)

    def logits_seq(self, tokens: np.ndarray) -> np.ndarray:
        """As the device model's logits_seq, on context 0."""
        return self.model.logits_seq(tokens)

    def params(self) -> dict[str, np.ndarray]:
        """The parameters, as the device model's params()."""
        return self.model.params()

    def adam(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The optimiser's moments, as the device model's adam()."""
        return self.model.adam()

    def finite(self) -> bool:
        """Whether the parameters and both moments are free of NaN and infinities (the
        same on every MPI rank: each holds the same state)."""
        return self.model.finite()

    def step(self) -> int:
        """Number of optimiser steps taken."""
        return self.model.step()

    def generate_prompts(self, seed: int, temperature: float, top_k: int, prompts,
                         max_new: int, first: int = 0, stop: int = -1) -> np.ndarray:
        """As the device model's generate_prompts, the prompts split over the contexts
        (row i draws from random stream first+i wherever it runs)."""
        prompts = list(prompts)
        parts = shard_rows(len(prompts), len(self.rts)) if prompts else [slice(0, 0)]
        models = self._contexts(len(parts))
        return np.concatenate(list(self._pool.map(
            lambda i: models[i].generate_prompts(seed, temperature, top_k, prompts[parts[i]],
                                                 max_new, first + parts[i].start, stop),
            range(len(parts)))))

    def start_prompts(self, seed: int, temperature: float, top_k: int, prompts,
                      first: int = 0, stop: int = -1) -> "SplitContinuation":
        """As the device model's start_prompts, the prompts split over the contexts as
        ``generate_prompts`` splits them: each advances its share on its own thread."""
        prompts = list(prompts)
        parts = shard_rows(len(prompts), len(self.rts)) if prompts else [slice(0, 0)]
        models = self._contexts(len(parts))
        conts = list(self._pool.map(
            lambda i: models[i].start_prompts(seed, temperature, top_k, prompts[parts[i]],
                                              first + parts[i].start, stop),
            range(len(parts))))
        return SplitContinuation(conts, self._pool)


class SplitContinuation:
    """Continuations whose rows are split over contexts (models/base.Continuation's
    interface): ``advance(k)`` advances every part on its own thread and stacks the
    rows in order."""

    def __init__(self, parts, pool: ThreadPoolExecutor):
        self.parts, self._pool = parts, pool
        self.lens = np.concatenate([c.lens for c in parts])
        self.steps = 0

    def advance(self, k: int) -> np.ndarray:
        """k more steps of every row: int64 [n, k] (Continuation.advance)."""
        out = np.concatenate(list(self._pool.map(lambda c: c.advance(k), self.parts)))
        self.steps += k
        return out
