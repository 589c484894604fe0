"""What every model family shares (models/microgpt.py, models/gpt2.py): the sizes and
their checks (GPTConfigBase), the host class of a state living on the device
(DeviceModel), the continuation of prompts between device calls (Continuation), and the
checks of the arrays the host hands the kernels or asks of them.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import ClassVar

import numpy as np

from .. import host_memory
from ..backend.runtime import Runtime
from ..host_memory import format_bytes


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
        return int(sum(np.prod(s) for s in self.shapes().values()))

    def init_sizes(self) -> tuple:
        """The sizes the library's ``init`` entry takes after the seed."""
        return (self.vocab_size, self.n_embd, self.n_head, self.n_layer, self.block_size,
                self.mlp_width)

    def to_dict(self) -> dict:
        return asdict(self)


def state_arrays(config: GPTConfigBase, params: dict[str, np.ndarray],
                 m: dict[str, np.ndarray] | None = None,
                 v: dict[str, np.ndarray] | None = None) -> list[np.ndarray]:
    """The arrays of a state: params, then the optimiser's m and v, each in the order of
    ``config.shapes()`` (microgpt's make_state takes these 27 as they are), as contiguous
    float32; m and v zero when not given. Serves GPT2Config too.

    Raises ValueError naming the first tensor whose shape does not match ``config``.
    """
    config.validate()
    shapes = config.shapes()
    zeros = {n: np.zeros(s, np.float32) for n, s in shapes.items()}
    arrays = []
    for group, d in (("", params), ("adam.m.", m if m is not None else zeros),
                     ("adam.v.", v if v is not None else zeros)):
        for n in shapes:
            a = np.ascontiguousarray(d[n], dtype=np.float32)
            if a.shape != shapes[n]:
                raise ValueError(f"tensor {group}{n} has shape {a.shape}, "
                                 f"config needs {shapes[n]}")
            arrays.append(a)
    return arrays


class DeviceModel:
    """A model whose state (parameters, optimiser moments, step) stays on the device:
    what microgpt's and GPT-2's host classes share. ``names``: the order in which
    the library's get_params/get_adam_m/get_adam_v return the arrays."""

    names: ClassVar[tuple[str, ...]] = ()

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

    def _arrays(self, entry: str) -> dict[str, np.ndarray]:
        return dict(zip(self.names, self.rt.numpy(*self.rt.entry(entry, self.state))))

    def params(self) -> dict[str, np.ndarray]:
        """The parameters as the device's float32 arrays (shapes: config.shapes())."""
        return self._arrays("get_params")

    def adam(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The optimiser's first and second moments, like ``params()``."""
        return self._arrays("get_adam_m"), self._arrays("get_adam_v")

    def finite(self) -> bool:
        """Whether the parameters and both moments are free of NaN and infinities: one
        reduction on the device (the entry ``nonfinite_count``), no copy of the model;
        run.Run asks it after every training call."""
        return float(self.rt.numpy(self.rt.entry("nonfinite_count", self.state))[0]) == 0

    def step(self) -> int:
        """Number of optimiser steps taken."""
        return int(self.rt.numpy(self.rt.entry("get_counters", self.state))[0])

    def generate_prompts(self, seed: int, temperature: float, top_k: int, prompts,
                         max_new: int, first: int = 0) -> np.ndarray:
        """Continuations of n different prompts in one call with the KV cache (both
        libraries' ``generate_prompts``: futhark/sample.fut's ``continue_prompts``, one
        ``advance`` of every step): int64 [n, max_new], row i continuing ``prompts[i]``
        (a sequence of >= 1 token ids) as sample first+i under seed: token j of row i is
        drawn with uniform number j of the kernels' random stream first+i
        (futhark/rng.fut). temperature 0 is greedy (argmax); otherwise nanoGPT
        sample.py's softmax(top_k(logits / temperature)), top_k 0 keeping every token.
        ``start_prompts`` makes the same tokens in paced calls.

        A prompt longer than block_size is cut to its last block_size tokens (all the
        model sees of it, as nanoGPT crops ``idx_cond``); once a row is longer than
        block_size, each next token sees its last block_size tokens. Raises ValueError
        for an empty prompt, max_new < 0, or an output whose size overflows int64 or
        exceeds the machine's memory (the paced calls hold no such array).
        """
        padded, lens = prompt_rows(prompts, self.config.block_size)
        if max_new < 0:
            raise ValueError(f"max_new must be at least 0, got {max_new}")
        if len(lens) == 0 or max_new == 0:
            return np.zeros((len(lens), max_new), np.int64)
        check_array_bytes("the continuations", len(lens), int(lens.max()) + max_new, INT64)
        return self.rt.numpy(self.rt.entry("generate_prompts", self.state, seed, first,
                                           np.float32(temperature), int(top_k), padded, lens,
                                           int(max_new)))

    def start_prompts(self, seed: int, temperature: float, top_k: int, prompts,
                      first: int = 0) -> "Continuation":
        """The continuation of n prompts as ``generate_prompts`` makes it, before its first
        step, to be advanced in calls of any length (the library's ``start_prompts``).
        Raises ValueError for an empty prompt, or when the rows' KV caches (held twice
        while ``advance`` runs) would not fit in memory (check_array_bytes)."""
        c = self.config
        padded, lens = prompt_rows(prompts, c.block_size)
        check_array_bytes(f"the KV caches of {len(lens)} continuations", 4, c.n_layer, len(lens),
                          c.block_size, c.n_embd, 4)
        value = self.rt.entry("start_prompts", self.state, seed, first, np.float32(temperature),
                              int(top_k), padded, lens)
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
