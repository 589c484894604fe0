"""The model as the host sees it: its config, and its state living on the device.

Tensor names and shapes follow microgpt's state_dict (matrices are [out, in]):

    wte [V, C]   wpe [T, C]   lm_head [V, C]
    layer{i}.attn_wq/attn_wk/attn_wv/attn_wo [C, C]
    layer{i}.mlp_fc1 [F, C]   layer{i}.mlp_fc2 [C, F]

with V = vocab_size, C = n_embd, T = block_size, F = mlp_width (4*C in microgpt).
On the device the per-layer matrices are stacked on a leading [n_layer] axis.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..backend.runtime import Runtime
from .base import DeviceModel, GPTConfigBase, check_array_bytes, state_arrays

# Order of the parameter arrays in the kernels' entry points (futhark/microgpt.fut).
PARAM_NAMES = ("wte", "wpe", "lm_head", "attn_wq", "attn_wk", "attn_wv", "attn_wo",
               "mlp_fc1", "mlp_fc2")
LAYER_NAMES = PARAM_NAMES[3:]


@dataclass(frozen=True)
class MicrogptConfig(GPTConfigBase):
    """microgpt's sizes; defaults are microgpt's (vocab_size comes from the data)."""

    arch: ClassVar[str] = "microgpt"

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Stacked shape of each parameter array, in PARAM_NAMES order."""
        V, C, T, L, F = (self.vocab_size, self.n_embd, self.block_size, self.n_layer,
                         self.mlp_width)
        return {"wte": (V, C), "wpe": (T, C), "lm_head": (V, C),
                "attn_wq": (L, C, C), "attn_wk": (L, C, C), "attn_wv": (L, C, C),
                "attn_wo": (L, C, C), "mlp_fc1": (L, F, C), "mlp_fc2": (L, C, F)}

    def file_shapes(self, prefix: str = "") -> dict[str, tuple[int, ...]]:
        """Checkpoint name -> shape of every tensor (microgpt's names, per layer)."""
        out = {}
        for name, shape in self.shapes().items():
            if name in LAYER_NAMES:
                out.update({f"{prefix}layer{i}.{name}": shape[1:] for i in range(self.n_layer)})
            else:
                out[prefix + name] = shape
        return out

    def to_file(self, arrays: dict[str, np.ndarray], prefix: str = "") -> dict[str, np.ndarray]:
        """Stacked device arrays -> checkpoint tensors (float32)."""
        return unstack({n: np.asarray(arrays[n], np.float32) for n in PARAM_NAMES}, prefix)

    def from_file(self, tensors: dict[str, np.ndarray], prefix: str = "") -> dict[str, np.ndarray]:
        """Checkpoint tensors -> stacked device arrays; KeyError names a missing one."""
        return stack(tensors, self.n_layer, prefix)


def unstack(params: dict[str, np.ndarray], prefix: str = "") -> dict[str, np.ndarray]:
    """Stacked arrays -> microgpt's names (``layer0.attn_wq`` ...), optional prefix."""
    out = {}
    for name, arr in params.items():
        if name in LAYER_NAMES:
            for i in range(arr.shape[0]):
                out[f"{prefix}layer{i}.{name}"] = np.ascontiguousarray(arr[i])
        else:
            out[prefix + name] = np.ascontiguousarray(arr)
    return out


def stack(tensors: dict[str, np.ndarray], n_layer: int, prefix: str = "") -> dict[str, np.ndarray]:
    """microgpt's names -> stacked arrays; KeyError names a missing tensor."""
    out = {}
    for name in PARAM_NAMES:
        if name in LAYER_NAMES:
            out[name] = np.stack([tensors[f"{prefix}layer{i}.{name}"] for i in range(n_layer)])
        else:
            out[name] = tensors[prefix + name]
    return out


class MicrogptModel(DeviceModel):
    """A GPT whose parameters, Adam moments and step count stay on the device.

    Create with ``MicrogptModel.init`` (microgpt's N(0, 0.08) initialisation) or
    ``MicrogptModel.from_arrays`` (a checkpoint). Methods move only token arrays in and
    small results out; ``params()``/``adam()`` copy the state to the host.
    """

    names = PARAM_NAMES

    @classmethod
    def from_arrays(cls, rt: Runtime, config: MicrogptConfig, params: dict[str, np.ndarray],
                    m: dict[str, np.ndarray] | None = None,
                    v: dict[str, np.ndarray] | None = None, step: int = 0) -> "MicrogptModel":
        """A model from stacked float32 arrays (Adam moments zero when not given).

        Raises ValueError when an array's shape does not match ``config``.
        """
        state = rt.entry("make_state", config.n_head, step, *state_arrays(config, params, m, v))
        return cls(rt, config, state)

    def train(self, tokens: np.ndarray, n_pos: np.ndarray, num_steps: int, lr: float = 0.01,
              beta1: float = 0.85, beta2: float = 0.99, eps: float = 1e-8) -> np.ndarray:
        """K Adam steps in one call; returns the K losses (float32, nats per token).

        tokens: int64 [K, B, block_size+1]; n_pos: int64 [K, B], valid positions
        per row. lr decays linearly from ``lr`` to 0 at step ``num_steps``
        (microgpt). The losses are those before each step's update.
        """
        tokens = np.ascontiguousarray(tokens, dtype=np.int64)
        n_pos = np.ascontiguousarray(n_pos, dtype=np.int64)
        self.state, losses = self.rt.entry("train", self.state, tokens, n_pos, np.float32(lr),
                                           np.float32(beta1), np.float32(beta2),
                                           np.float32(eps), num_steps)
        return self.rt.numpy(losses)

    def loss_grad(self, tokens: np.ndarray, n_pos: np.ndarray):
        """(loss, gradient dict) of one batch tokens [B, T+1], n_pos [B]; no update.

        The gradient comes from the training kernel itself (one less `vjp2` to
        compile): a step with beta1 = 0 stores it as Adam's first moment m, and
        lr = 0 leaves the parameters unchanged. The state is not modified.
        """
        tokens = np.ascontiguousarray(tokens, dtype=np.int64)[None]
        n_pos = np.ascontiguousarray(n_pos, dtype=np.int64)[None]
        state, losses = self.rt.entry("train", self.state, tokens, n_pos, np.float32(0),
                                      np.float32(0), np.float32(0.99), np.float32(1e-8), 1)
        grad = dict(zip(PARAM_NAMES, self.rt.numpy(*self.rt.entry("get_adam_m", state))))
        return float(self.rt.numpy(losses)[0]), grad

    def loss(self, tokens: np.ndarray, n_pos: np.ndarray) -> float:
        """Mean loss of one batch (tokens [B, T+1], n_pos [B]), without a gradient."""
        return float(self.rt.numpy(self.rt.entry("loss", self.state, np.asarray(tokens, np.int64),
                                                 np.asarray(n_pos, np.int64)))[0])

    def logits_seq(self, tokens: np.ndarray) -> np.ndarray:
        """Training-path logits: tokens int64 [B, T] -> float32 [B, T, V]."""
        return self.rt.numpy(self.rt.entry("logits_seq", self.state, np.asarray(tokens, np.int64)))

    def logits_cached(self, tokens: np.ndarray) -> np.ndarray:
        """Sampling-path (KV cache) logits: tokens int64 [T] -> float32 [T, V]."""
        return self.rt.numpy(self.rt.entry("logits_cached", self.state,
                                           np.asarray(tokens, np.int64)))

    def generate(self, seed: int, n: int, temperature: float, first: int = 0) -> np.ndarray:
        """Samples first..first+n-1: int64 [n, block_size], each ended and padded by BOS.
        Raises ValueError when the KV caches of n samples would not fit in memory
        (check_array_bytes)."""
        c = self.config
        check_array_bytes(f"the KV caches of {n} samples", 2, c.n_layer, n, c.block_size,
                          c.n_embd, 4)
        return self.rt.numpy(self.rt.entry("generate", self.state, seed, first, n,
                                           np.float32(temperature)))
