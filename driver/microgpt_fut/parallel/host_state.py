"""Data-parallel training on several CPU threads: one c-backend context per thread.

The c backend runs one step on one core, and Futhark's multicore backend turns
the weight adjoints of ``vjp2`` into atomic compare-and-swap loops (8x slower
per core, measured). So for --threads N each step is split as data-parallel
training does it across devices:

1. the batch's B rows are cut into n = min(N, B) shards of consecutive rows;
2. each shard's mean loss and gradient come from its own Futhark context, on
   its own thread (futhark-ffi releases the GIL during the call);
3. the gradient of the whole batch is the shards' gradients weighted by their
   share of the valid positions: the loss is a mean over positions
   (train.fut's ``compute_loss``), so sum_s (n_pos_s / n_pos) * grad_s is it exactly;
4. one Adam step on the host (NumPy, float32, the formula of train.fut's ``adam``),
   and the new parameters go to every context for the next step.

Sampling splits the samples over the contexts the same way (each sample has its
own random stream, so the names do not depend on the split).

GPT-2 (``DataParallelGPT2``) shards a step's windows (all its micro-batches
together) the same way, and takes nanoGPT's recipe on the host: the global
gradient norm, clipping, get_lr (Recipe.lr_at) and AdamW (float32, futhark/train.fut's formulas).

The shards' weighted sum is exchange.py's: ``Exchange`` in one process, and
``MPIExchange`` under ``mpirun``, where the batch is first split among the ranks and
each rank's partial sum is combined with the others' by Allreduce; both models
take the same step on every rank (mpi_world.py, cli/mpi.py). --threads and MPI
ranks are the same mechanism: a rank's contexts are its shards.

The host is in the loop once per step (``--steps-per-call`` fuses nothing here):
about 1 ms, which pays off once a step takes several (n_embd >= 64; measured 1.7-2.4x
on 2 cores there; at n_embd 16 none, or a loss: 0.85x of one thread at B = 64).
Sums are taken in a fixed order, so a run is reproducible for a given N; runs
with another N agree to float32 rounding.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

from .exchange import Exchange, shard_rows
from ..models.gpt2 import GPT2Config, GPT2Model, Recipe
from ..models.base import GPTConfigBase, state_arrays
from ..models.microgpt import PARAM_NAMES, MicrogptConfig, MicrogptModel
from ..backend.runtime import Runtime

Arrays = dict[str, np.ndarray]


class HostState(NamedTuple):
    """Parameters, Adam's moments and the step. params, m, v: float32 [num_params]
    vectors holding the tensors of PARAM_NAMES one after another (``unflatten`` gives
    them back with GPTConfigBase.shapes), so that Adam is a dozen whole-vector operations.

    Arrays are never modified in place, so a HostState can be kept as a snapshot
    (run.Run keeps the state before each call to replay it).
    """

    params: np.ndarray
    m: np.ndarray
    v: np.ndarray
    step: int


def flatten(arrays: Arrays, names=PARAM_NAMES) -> np.ndarray:
    """The tensors of ``names`` (microgpt's by default) as float32, one after another in
    one new vector."""
    return np.concatenate([np.asarray(arrays[n], np.float32).ravel() for n in names])


def unflatten(flat: np.ndarray, config: GPTConfigBase) -> Arrays:
    """Views of a flatten()ed vector as the tensors of GPTConfigBase.shapes (no copy)."""
    out, at = {}, 0
    for n, shape in config.shapes().items():
        size = int(np.prod(shape))
        out[n] = flat[at:at + size].reshape(shape)
        at += size
    return out


def adam_step(state: HostState, grad: np.ndarray, num_steps: int, lr: float, beta1: float,
              beta2: float, eps: float) -> HostState:
    """One Adam step (Kingma & Ba 2015) as microgpt and futhark/train.fut's ``adam``:
    bias-corrected moments and lr decayed linearly to 0 at step num_steps.

    grad: float32 [num_params], flattened as the state. All arithmetic is float32
    like the kernel's. Returns a new HostState.
    """
    f = np.float32
    t = f(state.step)
    b1, b2 = f(beta1), f(beta2)
    with np.errstate(over="ignore", invalid="ignore"):  # a blow-up: run.Run reports it
        lr_t = f(lr) * (f(1) - t / f(num_steps))
        bc1 = f(1) - b1 ** (t + f(1))
        bc2 = f(1) - b2 ** (t + f(1))
        m = b1 * state.m + (f(1) - b1) * grad
        v = b2 * state.v + (f(1) - b2) * grad * grad
        params = state.params - lr_t * (m / bc1) / (np.sqrt(v / bc2) + f(eps))
    return HostState(params, m, v, state.step + 1)


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


class HostStateModel:
    """One data-parallel model for both families (--threads contexts and MPI ranks): the
    state on the host (``state``, a HostState, flat float32 vectors), one gradient per
    shard of a step's rows from its own context on its own thread, summed by the
    Exchange (``exchange``; its ``bad_ranks`` name the ranks of a non-finite step),
    and one optimiser step on the host. A family's subclass (DataParallelModel,
    DataParallelGPT2) says how a context holds the parameters (``_device_model``),
    its optimiser's step and its device model's interface for sampling.

    Raises ValueError when several Runtimes are given and one is not the c backend.
    """

    device_class: type  # the family's device model (microgpt.MicrogptModel, gpt2.GPT2Model)

    def __init__(self, rts: list[Runtime], config: GPTConfigBase, state: HostState,
                 exchange: Exchange | None = None):
        _check_contexts(rts)
        self.rts, self.rt, self.config, self.state = rts, rts[0], config, state
        self.exchange = exchange or Exchange()
        self._pool = ThreadPoolExecutor(max_workers=len(rts), thread_name_prefix="microgpt-fut")

    @classmethod
    def init(cls, rts: list[Runtime], config: GPTConfigBase, seed: int,
             exchange: Exchange | None = None):
        """The device model's initial parameters under seed (the same kernels' RNG),
        optimiser moments zero, step 0."""
        params = cls.device_class.init(rts[0], config, seed).params()
        return cls.from_arrays(rts, config, params, exchange=exchange)

    @classmethod
    def from_arrays(cls, rts: list[Runtime], config: GPTConfigBase, params: Arrays,
                    m: Arrays | None = None, v: Arrays | None = None,
                    step: int = 0, exchange: Exchange | None = None):
        """As the device model's from_arrays (a checkpoint); raises ValueError on a shape
        mismatch."""
        return cls(rts, config, HostState(*_flat_groups(config, params, m, v), step), exchange)

    def _device_model(self, i: int):
        """Context i holding the current parameters (optimiser moments zero: only
        gradients, losses and samples are taken there)."""
        raise NotImplementedError

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

        def shard(i: int):
            rows = shards[i]
            return self._device_model(i).loss_grad(tokens[rows], n_pos[rows])

        parts = ((float(np.sum(n_pos[rows])) / total, shard_loss,
                  flatten(shard_grad, self.device_class.names))
                 for rows, (shard_loss, shard_grad)
                 in zip(shards, self._pool.map(shard, range(len(shards)))))
        return self.exchange.combine(parts, len(self.state.params))

    def loss_grad(self, tokens: np.ndarray, n_pos: np.ndarray) -> tuple[float, Arrays]:
        """As the device model's loss_grad: (mean loss, gradient by tensor) of one batch
        tokens [B, T+1], n_pos [B]; no update."""
        loss, grad = self._loss_grad(tokens, n_pos)
        return loss, unflatten(grad, self.config)

    def logits_seq(self, tokens: np.ndarray) -> np.ndarray:
        """As the device model's logits_seq, on context 0."""
        return self._device_model(0).logits_seq(tokens)

    def _copies(self, flat: np.ndarray) -> Arrays:
        return {n: a.copy() for n, a in unflatten(flat, self.config).items()}

    def params(self) -> Arrays:
        """Copies of the parameters, as the device model's params()."""
        return self._copies(self.state.params)

    def adam(self) -> tuple[Arrays, Arrays]:
        """Copies of the optimiser's moments, as the device model's adam()."""
        return self._copies(self.state.m), self._copies(self.state.v)

    def finite(self) -> bool:
        """Whether the parameters and both moments are free of NaN and infinities (the
        same on every MPI rank: each holds the same state)."""
        return all(np.isfinite(a).all() for a in self.state[:3])

    def step(self) -> int:
        return self.state.step

    def generate_prompts(self, seed: int, temperature: float, top_k: int, prompts,
                         max_new: int, first: int = 0) -> np.ndarray:
        """As the device model's generate_prompts (DeviceModel's), the prompts split over
        the contexts (row i draws from random stream first+i wherever it runs)."""
        prompts = list(prompts)
        return self._split(len(prompts), lambda model, rows: model.generate_prompts(
            seed, temperature, top_k, prompts[rows], max_new, first + rows.start))

    def start_prompts(self, seed: int, temperature: float, top_k: int, prompts,
                      first: int = 0) -> "SplitContinuation":
        """As the device model's start_prompts, the prompts split over the contexts as
        ``generate_prompts`` splits them: each advances its share on its own thread."""
        prompts = list(prompts)
        parts = shard_rows(len(prompts), len(self.rts)) if prompts else [slice(0, 0)]
        conts = list(self._pool.map(
            lambda i: self._device_model(i).start_prompts(seed, temperature, top_k,
                                                          prompts[parts[i]],
                                                          first + parts[i].start),
            range(len(parts))))
        return SplitContinuation(conts, self._pool)

    def _split(self, n: int, call) -> np.ndarray:
        """call(context, rows) for this process's contexts' shares of n rows (all of them:
        samples are not shared with other ranks), concatenated in order."""
        parts = shard_rows(n, len(self.rts)) if n else [slice(0, 0)]
        return np.concatenate(list(self._pool.map(lambda i: call(self._device_model(i),
                                                                 parts[i]),
                                                  range(len(parts)))))


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


class DataParallelModel(HostStateModel):
    """microgpt trained on len(rts) c-backend Runtimes, called from as many threads at
    once (HostStateModel); MicrogptModel's interface, with microgpt's Adam on the host."""

    device_class = MicrogptModel

    def __init__(self, rts: list[Runtime], config: MicrogptConfig, state: HostState,
                 exchange: Exchange | None = None):
        super().__init__(rts, config, state, exchange)
        # Adam moments for the contexts' states, made once per context: zero (a fresh
        # model's), as only the gradient is taken there (futhark-ffi passes device
        # arrays through as they are)
        self._zeros = [rt.entry("get_adam_m", MicrogptModel.init(rt, config, 0).state)
                       for rt in rts]

    def _device_model(self, i: int) -> MicrogptModel:
        rt, zeros = self.rts[i], self._zeros[i]
        params = unflatten(self.state.params, self.config).values()
        return MicrogptModel(rt, self.config, rt.entry("make_state", self.config.n_head, 0, *params,
                                               *zeros, *zeros))

    def train(self, tokens: np.ndarray, n_pos: np.ndarray, num_steps: int, lr: float = 0.01,
              beta1: float = 0.85, beta2: float = 0.99, eps: float = 1e-8) -> np.ndarray:
        """As MicrogptModel.train: K Adam steps on tokens [K, B, T+1], n_pos [K, B]; K losses."""
        losses = np.zeros(len(tokens), np.float32)
        for k in range(len(tokens)):
            losses[k], grad = self._loss_grad(tokens[k], n_pos[k])
            self.state = adam_step(self.state, grad, num_steps, lr, beta1, beta2, eps)
        return losses

    def loss(self, tokens: np.ndarray, n_pos: np.ndarray) -> float:
        return self._device_model(0).loss(tokens, n_pos)

    def generate(self, seed: int, n: int, temperature: float, first: int = 0) -> np.ndarray:
        """As MicrogptModel.generate, the n samples split over the threads: sample i draws from
        the kernels' random stream i whichever context makes it, so the result is the
        single context's."""
        return self._split(n, lambda model, rows: model.generate(
            seed, rows.stop - rows.start, temperature, first + rows.start))


def adamw_step(state: HostState, grad: np.ndarray, decay: np.ndarray, recipe: Recipe,
               lr: float, clip_coef: float) -> HostState:
    """One AdamW step as futhark/train.fut's ``adamw`` (torch.optim.AdamW's formula), in
    float32: the gradient scaled by clip_coef, decayed entries (``decay``: bool, one per
    parameter) shrunk by (1 - lr wd) first, then the bias-corrected update."""
    f = np.float32
    t = f(state.step + 1)
    with np.errstate(over="ignore", invalid="ignore"):  # a blow-up: run.Run reports it
        b1, b2, lr = f(recipe.beta1), f(recipe.beta2), f(lr)
        g = f(clip_coef) * grad
        m = b1 * state.m + (f(1) - b1) * g
        v = b2 * state.v + (f(1) - b2) * g * g
        step_size = lr / (f(1) - b1 ** t)
        bc2_sqrt = np.sqrt(f(1) - b2 ** t)
        params = np.where(decay, state.params * (f(1) - lr * f(recipe.weight_decay)),
                          state.params)
        params = params - step_size * m / (np.sqrt(v) / bc2_sqrt + f(recipe.eps))
    return HostState(params, m, v, state.step + 1)


class DataParallelGPT2(HostStateModel):
    """A GPT-2 trained with nanoGPT's recipe on len(rts) c-backend GPT-2 Runtimes, one
    thread each (HostStateModel); GPT2Model's interface. Evaluation batches and
    samples are split over the contexts. Reproducible for a given number of threads;
    another number agrees to float32 rounding."""

    device_class = GPT2Model

    def __init__(self, rts: list[Runtime], config: GPT2Config, state: HostState,
                 exchange: Exchange | None = None):
        super().__init__(rts, config, state, exchange)
        self._decay = np.concatenate([np.full(int(np.prod(shape)), name in DECAYED)
                                      for name, shape in config.shapes().items()])

    def _device_model(self, i: int) -> GPT2Model:
        return GPT2Model.from_arrays(self.rts[i], self.config,
                                     unflatten(self.state.params, self.config))

    def train(self, tokens: np.ndarray, n_pos: np.ndarray | None, recipe: Recipe
              ) -> tuple[np.ndarray, np.ndarray]:
        """As GPT2Model.train: K recipe steps on tokens [K, A, B, T+1] (a step's A
        micro-batches as one batch of A*B rows), n_pos [K, A, B] or None (every
        position counts); (losses [K], gradient norms [K])."""
        K, T1 = len(tokens), tokens.shape[-1]
        if n_pos is None:
            n_pos = np.full(tokens.shape[:-1], T1 - 1, np.int64)
        losses, norms = np.zeros(K, np.float32), np.zeros(K, np.float32)
        for k in range(K):
            losses[k], grad = self._loss_grad(tokens[k].reshape(-1, T1), n_pos[k].reshape(-1))
            norm = float(np.sqrt(np.dot(grad.astype(np.float64), grad)))
            norms[k] = norm
            coef = min(1.0, recipe.grad_clip / (norm + 1e-6)) if recipe.grad_clip > 0 else 1.0
            self.state = adamw_step(self.state, grad, self._decay, recipe,
                                    recipe.lr_at(self.state.step), coef)
        return losses, norms

    def losses(self, tokens: np.ndarray, n_pos: np.ndarray | None = None) -> np.ndarray:
        """As GPT2Model.losses, the I batches split over the contexts (and the ranks)."""
        parts = local_shards(self.exchange, len(tokens), len(self.rts))
        mine = (np.concatenate(list(self._pool.map(
            lambda i: self._device_model(i).losses(tokens[parts[i]]), range(len(parts)))))
            if parts else np.zeros(0, np.float32))
        return self.exchange.gather(mine, len(tokens))

    def generate(self, seed: int, n: int, temperature: float, top_k: int, prompt: np.ndarray,
                 max_new: int, first: int = 0) -> np.ndarray:
        """As GPT2Model.generate, the samples split over the contexts (sample i draws from
        random stream first+i wherever it runs)."""
        return self._split(n, lambda model, rows: model.generate(
            seed, rows.stop - rows.start, temperature, top_k, prompt, max_new,
            first + rows.start))



def _flat_groups(config, params: Arrays, m: Arrays | None, v: Arrays | None) -> list[np.ndarray]:
    """[params, m, v] as flat float32 vectors (model.state_arrays' checks; m, v zero
    when not given), for either model's config."""
    arrays = state_arrays(config, params, m, v)
    k = len(config.shapes())
    return [np.concatenate([a.ravel() for a in arrays[i:i + k]]) for i in range(0, len(arrays), k)]


# GPT-2's tensors that take weight decay (nanoGPT: the >= 2-D ones)
DECAYED = ("wte", "wpe", "c_attn_w", "attn_proj_w", "c_fc_w", "mlp_proj_w")
