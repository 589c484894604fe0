"""GPT-2 as the host sees it: its config, Hugging Face's tensor names, and its
state living on the device (futhark/gpt2.fut).

Checkpoint tensors use Hugging Face GPT-2's names and Conv1D layout ([in, out],
``y = x @ W + b``), so that real GPT-2 checkpoints load without renaming:

    wte.weight [V, C]   wpe.weight [T, C]
    h.{i}.ln_1.weight/.bias [C]
    h.{i}.attn.c_attn.weight [C, 3C]   .bias [3C]     (q, k, v side by side)
    h.{i}.attn.c_proj.weight [C, C]    .bias [C]
    h.{i}.ln_2.weight/.bias [C]
    h.{i}.mlp.c_fc.weight [C, F]       .bias [F]
    h.{i}.mlp.c_proj.weight [F, C]     .bias [C]
    ln_f.weight/.bias [C]

With ``bias=False`` (nanoGPT's ``bias = False``) no ``.bias`` tensor exists.
On the device, matrices are [out, in] and per-layer tensors are stacked on a
leading [n_layer] axis (DEVICE_NAMES, in the entry points' order).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .base import INT64, DeviceModel, GPTConfigBase, check_array_bytes, state_arrays
from ..backend.runtime import Runtime

DEVICE_NAMES = ("wte", "wpe", "ln_1_w", "ln_1_b", "c_attn_w", "c_attn_b", "attn_proj_w",
                "attn_proj_b", "ln_2_w", "ln_2_b", "c_fc_w", "c_fc_b", "mlp_proj_w",
                "mlp_proj_b", "ln_f_w", "ln_f_b")
# device name -> (Hugging Face name within a layer or at the top, is a Conv1D weight)
_HF = {"ln_1_w": "ln_1.weight", "ln_1_b": "ln_1.bias", "c_attn_w": "attn.c_attn.weight",
       "c_attn_b": "attn.c_attn.bias", "attn_proj_w": "attn.c_proj.weight",
       "attn_proj_b": "attn.c_proj.bias", "ln_2_w": "ln_2.weight", "ln_2_b": "ln_2.bias",
       "c_fc_w": "mlp.c_fc.weight", "c_fc_b": "mlp.c_fc.bias", "mlp_proj_w": "mlp.c_proj.weight",
       "mlp_proj_b": "mlp.c_proj.bias"}
_TOP = {"wte": "wte.weight", "wpe": "wpe.weight", "ln_f_w": "ln_f.weight", "ln_f_b": "ln_f.bias"}


@dataclass(frozen=True)
class GPT2Config(GPTConfigBase):
    """GPT-2's sizes (nanoGPT's GPTConfig): vocab_size from the data, mlp_width
    4 * n_embd unless given; ``bias`` as nanoGPT's (False: no biases in the
    linear layers and LayerNorms)."""

    bias: bool = True

    arch: ClassVar[str] = "gpt2"

    def init_sizes(self) -> tuple:
        """The sizes gpt2.fut's ``init`` takes after the seed: microgpt's and ``bias``."""
        return (*super().init_sizes(), bool(self.bias))

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Device shape of each tensor, in DEVICE_NAMES order."""
        V, C, T, L, F = (self.vocab_size, self.n_embd, self.block_size, self.n_layer,
                         self.mlp_width)
        return {"wte": (V, C), "wpe": (T, C), "ln_1_w": (L, C), "ln_1_b": (L, C),
                "c_attn_w": (L, 3, C, C), "c_attn_b": (L, 3, C), "attn_proj_w": (L, C, C),
                "attn_proj_b": (L, C), "ln_2_w": (L, C), "ln_2_b": (L, C),
                "c_fc_w": (L, F, C), "c_fc_b": (L, F), "mlp_proj_w": (L, C, F),
                "mlp_proj_b": (L, C), "ln_f_w": (C,), "ln_f_b": (C,)}

    def _used(self, name: str) -> bool:
        return self.bias or not name.endswith("_b")

    def num_params(self) -> int:
        """Parameters the model uses (no biases when bias=False)."""
        return int(sum(np.prod(s) for n, s in self.shapes().items() if self._used(n)))

    def file_shapes(self, prefix: str = "") -> dict[str, tuple[int, ...]]:
        """Hugging Face name -> shape of every checkpoint tensor (HF's order)."""
        V, C, T, F = self.vocab_size, self.n_embd, self.block_size, self.mlp_width
        layer = {"ln_1.weight": (C,), "ln_1.bias": (C,), "attn.c_attn.weight": (C, 3 * C),
                 "attn.c_attn.bias": (3 * C,), "attn.c_proj.weight": (C, C),
                 "attn.c_proj.bias": (C,), "ln_2.weight": (C,), "ln_2.bias": (C,),
                 "mlp.c_fc.weight": (C, F), "mlp.c_fc.bias": (F,), "mlp.c_proj.weight": (F, C),
                 "mlp.c_proj.bias": (C,)}
        out = {f"{prefix}wte.weight": (V, C), f"{prefix}wpe.weight": (T, C)}
        for i in range(self.n_layer):
            out.update({f"{prefix}h.{i}.{k}": s for k, s in layer.items()})
        out.update({f"{prefix}ln_f.weight": (C,), f"{prefix}ln_f.bias": (C,)})
        return {k: s for k, s in out.items() if self.bias or not k.endswith(".bias")}

    def to_file(self, arrays: dict[str, np.ndarray], prefix: str = "") -> dict[str, np.ndarray]:
        """Device arrays -> Hugging Face tensors (contiguous float32, HF's layout and order)."""
        C = self.n_embd
        out = {}
        for name in DEVICE_NAMES:
            if not self._used(name):
                continue
            a = np.asarray(arrays[name], np.float32)
            if name in _TOP:
                out[prefix + _TOP[name]] = np.ascontiguousarray(a)
                continue
            for i in range(self.n_layer):
                x = a[i]
                if name == "c_attn_w":    # [3][C_out][C_in] -> [C_in][3C]
                    x = x.reshape(3 * C, C).T
                elif name == "c_attn_b":
                    x = x.reshape(3 * C)
                elif name.endswith("_w") and x.ndim == 2:  # Linear [out][in] -> Conv1D [in][out]
                    x = x.T
                out[f"{prefix}h.{i}.{_HF[name]}"] = np.ascontiguousarray(x)
        return {k: out[k] for k in self.file_shapes(prefix)}

    def from_file(self, tensors: dict[str, np.ndarray], prefix: str = "") -> dict[str, np.ndarray]:
        """Hugging Face tensors -> device arrays (zeros for the biases of a bias=False
        model). KeyError names a missing tensor."""
        C = self.n_embd
        out = {}
        for name, shape in self.shapes().items():
            if not self._used(name):
                out[name] = np.zeros(shape, np.float32)
            elif name in _TOP:
                out[name] = np.asarray(tensors[prefix + _TOP[name]], np.float32)
            else:
                layers = []
                for i in range(self.n_layer):
                    x = np.asarray(tensors[f"{prefix}h.{i}.{_HF[name]}"], np.float32)
                    if name == "c_attn_w":
                        x = x.T.reshape(3, C, C)
                    elif name == "c_attn_b":
                        x = x.reshape(3, C)
                    elif name.endswith("_w") and x.ndim == 2:
                        x = x.T
                    layers.append(x)
                out[name] = np.ascontiguousarray(np.stack(layers))
        return out


@dataclass(frozen=True)
class Recipe:
    """nanoGPT's optimisation settings (train.py's names): AdamW (lr, betas, eps,
    weight_decay on >= 2-D tensors), get_lr's warm-up and cosine decay to min_lr
    at lr_decay_steps, clipping at global norm grad_clip (0: none). The defaults are
    `train --arch gpt2`'s (family.GPT2 reads them: betas (0.9, 0.95) as nanoGPT's
    train.py; min_lr lr/10; warmup_steps and lr_decay_steps those of a 2000-step run)."""

    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup_steps: int = 100
    lr_decay_steps: int = 2000
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1
    grad_clip: float = 1.0

    def lr_at(self, it: int) -> float:
        """nanoGPT's get_lr(it): linear warm-up, cosine decay to min_lr at lr_decay_steps,
        min_lr after (the kernels compute the same in f64: futhark/train.fut)."""
        if it < self.warmup_steps:
            return self.lr * (it + 1) / (self.warmup_steps + 1)
        if it > self.lr_decay_steps:
            return self.min_lr
        ratio = (it - self.warmup_steps) / (self.lr_decay_steps - self.warmup_steps)
        return self.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (self.lr - self.min_lr)

    def args(self) -> tuple:
        """The train entry point's trailing arguments."""
        return (np.float64(self.lr), np.float64(self.min_lr), int(self.warmup_steps),
                int(self.lr_decay_steps), np.float32(self.beta1), np.float32(self.beta2),
                np.float32(self.eps), np.float32(self.weight_decay), np.float32(self.grad_clip))


class GPT2Model(DeviceModel):
    """A GPT-2 whose parameters, AdamW moments and step count stay on the device.

    Create with ``GPT2Model.init`` (GPT-2's initialisation) or ``from_arrays``
    (device arrays, e.g. ``config.from_file`` of a checkpoint's tensors).
    """

    names = DEVICE_NAMES

    @classmethod
    def from_arrays(cls, rt: Runtime, config: GPT2Config, params: dict[str, np.ndarray],
                    m: dict[str, np.ndarray] | None = None,
                    v: dict[str, np.ndarray] | None = None, step: int = 0) -> "GPT2Model":
        """A model from device arrays (moments zero when not given). Raises ValueError
        naming the first tensor whose shape does not match ``config``."""
        arrays = state_arrays(config, params, m, v)
        k = len(DEVICE_NAMES)
        if m is None and v is None:  # zero moments made on the device: no host copies
            state = rt.entry("make_state_params", config.n_head, bool(config.bias), step,
                             *arrays[:k])
            return cls(rt, config, state)
        # make_state takes each tensor stacked as [params, m, v]
        stacked = [np.stack(arrays[j::k]) for j in range(k)]
        state = rt.entry("make_state", config.n_head, bool(config.bias), step, *stacked)
        return cls(rt, config, state)

    def train(self, tokens: np.ndarray, n_pos: np.ndarray | None, recipe: Recipe
              ) -> tuple[np.ndarray, np.ndarray]:
        """K recipe steps in one call: (losses [K], gradient norms [K]), float32.

        tokens: int64 [K, A, B, block_size+1] (A micro-batches accumulated per
        step); n_pos: int64 [K, A, B], valid positions per row (None: all
        block_size, text windows). Each loss is the step's mean over its A
        micro-batches, before the update; each norm the global gradient norm
        before clipping.
        """
        tokens = np.ascontiguousarray(tokens, dtype=np.int64)
        if n_pos is None:
            n_pos = np.full(tokens.shape[:3], self.config.block_size, np.int64)
        n_pos = np.ascontiguousarray(n_pos, dtype=np.int64)
        self.state, losses, norms = self.rt.entry("train", self.state, tokens, n_pos,
                                                  *recipe.args())
        return tuple(self.rt.numpy(losses, norms))

    def loss_grad(self, tokens: np.ndarray, n_pos: np.ndarray | None = None):
        """(loss, gradient dict) of one batch tokens [B, T+1]; the state is not modified.

        The gradient comes from the training kernel itself: a step with beta1 = 0
        stores it (unclipped) as AdamW's first moment, and lr = 0 leaves the
        weights unchanged.
        """
        tokens = np.asarray(tokens, np.int64)[None, None]
        n_pos = None if n_pos is None else np.asarray(n_pos, np.int64)[None, None]
        keep = self.state
        recipe = Recipe(lr=0, min_lr=0, warmup_steps=0, lr_decay_steps=1, beta1=0,
                        weight_decay=0, grad_clip=0)
        (loss,), _ = self.train(tokens, n_pos, recipe)
        grad = self._arrays("get_adam_m")
        self.state = keep
        return float(loss), grad

    def losses(self, tokens: np.ndarray, n_pos: np.ndarray | None = None) -> np.ndarray:
        """Mean loss of each of I batches tokens [I, B, T+1] (float32 [I]), no gradient."""
        tokens = np.ascontiguousarray(tokens, dtype=np.int64)
        if n_pos is None:
            n_pos = np.full(tokens.shape[:2], self.config.block_size, np.int64)
        return self.rt.numpy(self.rt.entry("losses", self.state, tokens,
                                           np.ascontiguousarray(n_pos, dtype=np.int64)))

    def logits_seq(self, tokens: np.ndarray) -> np.ndarray:
        """Training-path logits: tokens int64 [B, n] (n <= block_size) -> float32 [B, n, V]."""
        return self.rt.numpy(self.rt.entry("logits_seq", self.state, np.asarray(tokens, np.int64)))

    def logits_cached(self, tokens: np.ndarray) -> np.ndarray:
        """Sampling-path (KV cache) logits: tokens int64 [T] -> float32 [T, V]."""
        return self.rt.numpy(self.rt.entry("logits_cached", self.state,
                                           np.asarray(tokens, np.int64)))

    def generate(self, seed: int, n: int, temperature: float, top_k: int, prompt: np.ndarray,
                 max_new: int, first: int = 0) -> np.ndarray:
        """Continuations first..first+n-1 of ``prompt`` (int64 [P], P >= 1): int64
        [n, max_new]. temperature 0 is greedy; top_k 0 keeps every token. Raises
        ValueError when the call's tokens or KV caches would overflow int64 or not fit in
        memory (check_array_bytes; ``start_prompts`` makes long ones in paced calls)."""
        c = self.config
        check_array_bytes(f"{n} continuations of {max_new} tokens", n,
                          min(len(prompt), c.block_size) + max_new, INT64)
        check_array_bytes(f"the KV caches of {n} continuations", 2, c.n_layer, n, c.block_size,
                          c.n_embd, 4)
        return self.rt.numpy(self.rt.entry("generate", self.state, seed, first, n,
                                           np.float32(temperature), int(top_k),
                                           np.ascontiguousarray(prompt, dtype=np.int64),
                                           int(max_new)))
