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

from .base import DeviceModel, GPTConfigBase

# The tensors in the order of the flat state (futhark/model_grad.fut's ``flat``).
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
    """microgpt on the device (DeviceModel: every method is both families'). Create with
    ``MicrogptModel.init`` (microgpt's N(0, 0.08) initialisation) or ``from_arrays``
    (a checkpoint's stacked arrays)."""
