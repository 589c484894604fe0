"""What every model family shares (models/microgpt.py, models/gpt2.py): the sizes and
their checks (GPTConfigBase), the host class of a state living on the device
(DeviceModel), the continuation of prompts between device calls (Continuation), and the
checks of the arrays the host hands the kernels or asks of them.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import ClassVar

import numpy as np

from .. import host_memory
from ..backend.runtime import Runtime
from ..host_memory import format_bytes


def elements(shapes) -> int:
    """The number of elements of tensors of these shapes, in Python's integers (np.prod's
    int64 wraps for sizes given by mistake)."""
    return sum(math.prod(map(int, s)) for s in shapes)


@dataclass(frozen=True)
class GPTConfigBase:
    """The sizes both families share, and their checks: the base of MicrogptConfig and
    GPT2Config (models/microgpt.py, models/gpt2.py), each of which gives its ``arch``, tensor
    shapes and checkpoint layout. Defaults are microgpt's (vocab_size comes from the
    data)."""

    vocab_size: int
    n_embd: int = 16
    n_head: int = 4
    n_layer: int = 1
    block_size: int = 16
    mlp_width: int | None = None  # None: 4 * n_embd, as microgpt

    arch: ClassVar[str]  # --arch, and the checkpoint's "arch"
    # the least vocabulary of every family: a model of one token predicts nothing (loss 0)
    min_vocab: ClassVar[int] = 2

    def __post_init__(self):
        if self.mlp_width is None:
            object.__setattr__(self, "mlp_width", 4 * self.n_embd)

    def validate(self) -> None:
        """Raise ValueError naming the option when a size is unusable."""
        for name in ("vocab_size", "n_embd", "n_head", "n_layer", "block_size", "mlp_width"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1, "
                                 f"got {getattr(self, name)}")
        if self.vocab_size < self.min_vocab:
            raise ValueError(f"vocab_size must be at least {self.min_vocab}, got "
                             f"{self.vocab_size}")
        if self.n_embd % self.n_head:
            raise ValueError(f"--n-embd {self.n_embd} is not divisible by --n-head {self.n_head}")

    def shapes(self) -> dict[str, tuple[int, ...]]:
        raise NotImplementedError

    def num_params(self) -> int:
        """The number of parameters the model uses."""
        return self.num_tensor_elements()

    def num_tensor_elements(self) -> int:
        """The length P of the flat state's rows: every tensor of ``shapes()``. In Python's
        integers: np.prod's int64 wrapped for sizes given by mistake (--n-embd 10**9 made
        a negative count, which the memory check passed and the kernels crashed on)."""
        return elements(self.shapes().values())

    def init_sizes(self) -> tuple:
        """The sizes and settings that the libraries' ``init``, ``make_state`` and
        ``make_state_params`` take (futhark/gpt.fut): vocab_size, n_embd, n_head, n_layer,
        block_size, mlp_width, bias (a family without biases: False)."""
        return (self.vocab_size, self.n_embd, self.n_head, self.n_layer, self.block_size,
                self.mlp_width, bool(getattr(self, "bias", False)))

    def to_dict(self) -> dict:
        return asdict(self)


def flat_state(config: GPTConfigBase, params: dict[str, np.ndarray],
               m: dict[str, np.ndarray] | None = None,
               v: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """A state as the libraries take it (futhark/gpt.fut's ``make_state``): float32
    [3, P], rows params, the optimiser's m and v, each the tensors of
    ``config.shapes()`` one after another (m and v zero when not given); filled in
    place, so a large model is held once more, not twice.

    Raises ValueError naming the first tensor whose shape does not match ``config``.
    """
    out = np.zeros((3, config.num_tensor_elements()), np.float32)
    for row, (group, d) in enumerate((("", params), ("adam.m.", m), ("adam.v.", v))):
        if d is not None:
            flat_vector(config, d, group, out[row])
    return out


def flat_vector(config: GPTConfigBase, arrays: dict[str, np.ndarray], group: str = "",
                out: np.ndarray | None = None) -> np.ndarray:
    """The tensors of ``config.shapes()`` from ``arrays``, one after another: float32 [P]
    (written into ``out`` when given: a row of ``flat_state``). Raises ValueError naming
    the first tensor (``group``: its checkpoint prefix) whose shape does not match."""
    out = np.empty(config.num_tensor_elements(), np.float32) if out is None else out
    at = 0
    for n, shape in config.shapes().items():
        a = np.asarray(arrays[n])
        if a.shape != shape:
            raise ValueError(f"tensor {group}{n} has shape {a.shape}, config needs {shape}")
        out[at:at + a.size] = a.ravel()
        at += a.size
    return out


def valid_positions(tokens: np.ndarray, n_pos: np.ndarray | None) -> np.ndarray:
    """The valid positions of each row of ``tokens`` (int64 [..., T+1]) as the kernels
    take them: ``n_pos`` as contiguous int64 [...], or every row's T when None."""
    if n_pos is None:
        return np.full(np.shape(tokens)[:-1], np.shape(tokens)[-1] - 1, np.int64)
    return np.ascontiguousarray(n_pos, dtype=np.int64)


def unflatten(flat: np.ndarray, config: GPTConfigBase) -> dict[str, np.ndarray]:
    """Views of a flat float32 [P] vector (``flat_state``'s rows, ``get_params``) as the
    tensors of ``config.shapes()`` (no copy)."""
    out, at = {}, 0
    for n, shape in config.shapes().items():
        size = int(np.prod(shape))
        out[n] = flat[at:at + size].reshape(shape)
        at += size
    return out


class DeviceModel:
    """A model whose state (parameters, optimiser moments, step) stays on the device,
    for either family: the host side of futhark/gpt.fut's entry points, which both
    libraries export. Create with ``init`` (the family's initialisation) or
    ``from_arrays`` (a checkpoint). Methods move token arrays in and small results
    out; ``params()``/``adam()`` copy the state to the host.
    """

    def __init__(self, rt: Runtime, config, state):
        self.rt = rt
        self.config = config
        self.state = state

    @classmethod
    def init(cls, rt: Runtime, config, seed: int):
        """Fresh parameters from the kernels' counter-based RNG under ``seed`` (the
        family's initialisation: microgpt.py's, or GPT-2's). Raises ValueError naming
        the option when a size is unusable."""
        config.validate()
        return cls(rt, config, rt.entry("init", seed, *config.init_sizes()))

    @classmethod
    def from_arrays(cls, rt: Runtime, config, params: dict[str, np.ndarray],
                    m: dict[str, np.ndarray] | None = None,
                    v: dict[str, np.ndarray] | None = None, step: int = 0):
        """A model from float32 arrays of ``config.shapes()`` (the optimiser's moments zero
        when not given: made on the device, no host copies). Raises ValueError naming the
        first tensor whose shape does not match ``config``."""
        config.validate()
        if m is None and v is None:
            return cls(rt, config, rt.entry("make_state_params", *config.init_sizes(), step,
                                            flat_vector(config, params)))
        return cls(rt, config, rt.entry("make_state", *config.init_sizes(), step,
                                        flat_state(config, params, m, v)))

    def _arrays(self, entry: str) -> dict[str, np.ndarray]:
        return unflatten(self.rt.numpy(self.rt.entry(entry, self.state)), self.config)

    def params(self) -> dict[str, np.ndarray]:
        """The parameters as the device's float32 arrays (shapes: config.shapes())."""
        return self._arrays("get_params")

    def adam(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The optimiser's first and second moments, like ``params()``."""
        return self._arrays("get_adam_m"), self._arrays("get_adam_v")

    def finite(self) -> bool:
        """Whether the parameters and both moments are free of NaN and infinities: one
        reduction on the device (the entry ``nonfinite_count``), no copy of the model.
        (Training never makes such a state: the kernels refuse the step.)"""
        return float(self.rt.numpy(self.rt.entry("nonfinite_count", self.state))[0]) == 0

    def step(self) -> int:
        """Number of optimiser steps taken."""
        return int(self.rt.numpy(self.rt.entry("get_counters", self.state))[0])

    def train(self, tokens: np.ndarray, n_pos: np.ndarray | None, optimizer,
              num_steps: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """K optimiser steps in one call (the libraries' ``train``: futhark/train.fut's
        ``train_steps``): (losses [K], gradient norms [K]), float32.

        tokens: int64 [K, A, B, block_size+1], A micro-batches accumulated per step
        ([K, B, block_size+1]: A = 1); n_pos: int64 of the same leading shape, the
        valid positions of each row (None: all block_size). ``optimizer``
        (training/optimizer.py's Adam or Recipe) gives each step's learning rate
        (``lrs``, from the model's step on; ``num_steps`` is the run's length, which
        microgpt's linear decay reads) and AdamW's settings (``kernel_args``). Each
        loss is the step's mean over its rows' valid positions, before the update;
        each norm the global gradient norm before clipping.

        A step whose loss, norm or update would not be finite is not taken, and it
        ends the call (``step()`` says how many were; the later steps' losses and
        norms are NaN): the state is always finite. The state before the call is
        consumed (AdamW's moments are written in place), so nothing else may hold it.
        """
        tokens = np.ascontiguousarray(tokens, dtype=np.int64)
        if tokens.ndim == 3:
            tokens = tokens[:, None]
            n_pos = None if n_pos is None else np.asarray(n_pos)[:, None]
        n_pos = valid_positions(tokens, n_pos)
        lrs = optimizer.lrs(self.step(), len(tokens), num_steps)
        self.state, losses, norms = self.rt.entry("train", self.state, tokens, n_pos, lrs,
                                                  *optimizer.kernel_args())
        return tuple(self.rt.numpy(losses, norms))

    def apply_gradient(self, grad: np.ndarray, lr: float, optimizer) -> tuple[float, bool]:
        """One optimiser step on a gradient summed on the host (float32 [P], flat as
        ``params()``'s: --threads and MPI, parallel/host_state.py), as ``train``'s steps
        take it: the clip, then AdamW at ``lr``, taken only when the norm and the update
        are finite (the state before is consumed, as ``train``'s). Returns (the norm
        before clipping, whether the step was taken)."""
        self.state, out = self.rt.entry("apply_gradient", self.state,
                                        np.ascontiguousarray(grad, np.float32),
                                        np.float32(lr), *optimizer.kernel_args())
        norm, taken = self.rt.numpy(out)
        return float(norm), bool(taken)

    def loss_grad_flat(self, tokens: np.ndarray, n_pos: np.ndarray | None = None
                       ) -> tuple[float, np.ndarray]:
        """(mean loss, gradient float32 [P], flat as ``params()``'s) of one batch tokens
        int64 [B, T+1], n_pos [B] (None: all T; a gradient of NaN when the loss or
        the gradient is not finite); the state is not modified. The
        gradient comes from the training kernel itself (one ``vjp`` less to compile): a
        step with beta1 = 0 and no clipping, on a copy of the state (``train`` consumes
        its state), stores it as the first moment."""
        n_pos = valid_positions(tokens, n_pos)[None, None]
        tokens = np.asarray(tokens, np.int64)[None, None]
        state, losses, _ = self.rt.entry("train", self.rt.entry("copy_state", self.state),
                                         tokens, n_pos,
                                         np.zeros(1, np.float32), np.float32(0),
                                         np.float32(0.99), np.float32(1e-8), np.float32(0),
                                         np.float32(0))
        grad = self.rt.numpy(self.rt.entry("get_adam_m", state))
        if self.rt.numpy(self.rt.entry("get_counters", state))[0] == self.step():
            grad[:] = np.nan  # not taken: the loss or the gradient is not finite
        return float(self.rt.numpy(losses)[0]), grad

    def loss_grad(self, tokens: np.ndarray, n_pos: np.ndarray | None = None):
        """(mean loss, gradient by tensor) of one batch, as ``loss_grad_flat``."""
        loss, grad = self.loss_grad_flat(tokens, n_pos)
        return loss, unflatten(grad, self.config)

    def losses(self, tokens: np.ndarray, n_pos: np.ndarray | None = None) -> np.ndarray:
        """Mean loss of each of I batches tokens int64 [I, B, T+1] (float32 [I]), no
        gradient; n_pos int64 [I, B] valid positions per row (None: all T)."""
        tokens = np.ascontiguousarray(tokens, dtype=np.int64)
        return self.rt.numpy(self.rt.entry("losses", self.state, tokens,
                                           valid_positions(tokens, n_pos)))

    def loss(self, tokens: np.ndarray, n_pos: np.ndarray | None = None) -> float:
        """Mean loss of one batch tokens [B, T+1] (``losses`` of one)."""
        return float(self.losses(np.asarray(tokens)[None],
                                 None if n_pos is None else np.asarray(n_pos)[None])[0])

    def logits_seq(self, tokens: np.ndarray) -> np.ndarray:
        """Training-path logits: tokens int64 [B, n] (n <= block_size) -> float32 [B, n, V]
        (causal: position j sees tokens 0..j)."""
        return self.rt.numpy(self.rt.entry("logits_seq", self.state, np.asarray(tokens, np.int64)))

    def logits_cached(self, tokens: np.ndarray) -> np.ndarray:
        """Sampling-path (KV cache) logits: tokens int64 [block_size] -> float32 [T, V]."""
        return self.rt.numpy(self.rt.entry("logits_cached", self.state,
                                           np.asarray(tokens, np.int64)))

    def generate_prompts(self, seed: int, temperature: float, top_k: int, prompts,
                         max_new: int, first: int = 0, stop: int = -1) -> np.ndarray:
        """Continuations of n different prompts in one call with the KV cache (the
        libraries' ``generate_prompts``: futhark/sample.fut's ``continue_prompts``, one
        ``advance`` of every step): int64 [n, max_new], row i continuing ``prompts[i]``
        (a sequence of >= 1 token ids) as sample first+i under seed: token j of row i is
        drawn with uniform number j of the kernels' random stream first+i
        (futhark/rng.fut). temperature 0 is greedy (argmax); otherwise nanoGPT
        sample.py's softmax(top_k(logits / temperature)), top_k 0 keeping every token.
        A row that draws ``stop`` ends there and is ``stop`` after (-1: no stop token;
        microgpt's names: BOS). ``start_prompts`` makes the same tokens in paced calls.
        A prompt longer than block_size is cut to its last block_size tokens (all the
        model sees of it, as nanoGPT crops ``idx_cond``); once a row is longer than
        block_size, each next token sees its last block_size tokens. Raises ValueError
        for an empty prompt, max_new < 0, or an output or KV caches whose size overflows
        int64 or exceeds the machine's memory (the paced calls hold no such output).
        """
        c = self.config
        padded, lens = prompt_rows(prompts, c.block_size)
        if max_new < 0:
            raise ValueError(f"max_new must be at least 0, got {max_new}")
        if len(lens) == 0 or max_new == 0:
            return np.zeros((len(lens), max_new), np.int64)
        check_array_bytes("the continuations", len(lens), int(lens.max()) + max_new, INT64)
        check_array_bytes(f"the KV caches of {len(lens)} continuations", 4, c.n_layer, len(lens),
                          c.block_size, c.n_embd, 4)
        return self.rt.numpy(self.rt.entry("generate_prompts", self.state, seed, first,
                                           np.float32(temperature), int(top_k), int(stop),
                                           padded, lens, int(max_new)))

    def start_prompts(self, seed: int, temperature: float, top_k: int, prompts,
                      first: int = 0, stop: int = -1) -> "Continuation":
        """The continuation of n prompts as ``generate_prompts`` makes it, before its first
        step, to be advanced in calls of any length (the library's ``start_prompts``).
        Raises ValueError for an empty prompt, or when the rows' KV caches (held twice
        while ``advance`` runs) would not fit in memory (check_array_bytes)."""
        c = self.config
        padded, lens = prompt_rows(prompts, c.block_size)
        check_array_bytes(f"the KV caches of {len(lens)} continuations", 4, c.n_layer, len(lens),
                          c.block_size, c.n_embd, 4)
        value = self.rt.entry("start_prompts", self.state, seed, first, np.float32(temperature),
                              int(top_k), int(stop), padded, lens)
        return Continuation(self, value, lens)


INT64 = 8
INT64_MAX = 2**63 - 1


def check_array_bytes(what: str, *shape_and_itemsize: int) -> None:
    """Raise ValueError when an array of these sizes (the last factor: bytes an element)
    would overflow int64, where Futhark's allocations wrap (a heap corruption), or
    exceed the memory the machine has now (host_memory.available_memory)."""
    nbytes = int(np.prod([int(x) for x in shape_and_itemsize], dtype=object))
    if nbytes > INT64_MAX:
        raise ValueError(f"{what} would take {nbytes} bytes, more than int64 can count")
    avail = host_memory.available_memory()
    if avail is not None and nbytes > avail:
        raise ValueError(f"{what} would take {format_bytes(nbytes)} and the machine has "
                         f"{format_bytes(avail)} available")


def prompt_rows(prompts, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Prompts (sequences of >= 1 token ids), each cut to its last block_size tokens, as
    the kernels take them: (int64 [n, longest] padded with 0, int64 [n] lengths).
    Raises ValueError for an empty prompt."""
    rows = [np.asarray(p, dtype=np.int64).reshape(-1)[-block_size:] for p in prompts]
    if any(len(r) == 0 for r in rows):
        raise ValueError("every prompt needs at least one token")
    lens = np.array([len(r) for r in rows], dtype=np.int64)
    padded = np.zeros((len(rows), int(lens.max()) if rows else 0), np.int64)
    for i, r in enumerate(rows):
        padded[i, :len(r)] = r
    return padded, lens


class Continuation:
    """Continuations of n prompts between device calls (futhark/sample.fut's
    ``continuation``: the KV caches, the rows' last block_size tokens, the RNG
    streams, the step count), on one context. ``advance(k)`` takes k more steps;
    ``lens``: int64 [n] prompt lengths (after cropping); ``steps``: steps taken.
    Step t makes each row's token at position t + 1, so row i's new token j comes
    at step lens[i] - 1 + j."""

    def __init__(self, model: DeviceModel, value, lens: np.ndarray):
        self.model, self.value, self.lens, self.steps = model, value, lens, 0

    def advance(self, k: int) -> np.ndarray:
        """k more steps: int64 [n, k], column s the token at position steps + s + 1 of
        each row (a prompt token while that position is inside the row's prompt)."""
        if k < 0 or self.steps + k > INT64_MAX - 1:
            raise ValueError(f"cannot advance a continuation of {self.steps} steps by {k}")
        check_array_bytes("the continuations' tokens", len(self.lens), k, INT64)
        rt = self.model.rt
        self.value, out = rt.entry("advance", self.model.state, self.value, int(k))
        self.steps += k
        return rt.numpy(out)
