"""GPT-2 as the host sees it: its config, Hugging Face's tensor names, and its
state living on the device (futhark/gpt.fut with GPT-2's family).

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
leading [n_layer] axis (DEVICE_NAMES, in the flat state's order: futhark/gpt2_grad.fut's
``flat``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .base import DeviceModel, GPTConfigBase, elements

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
        """Parameters the model uses (no biases when bias=False), in Python's integers (as
        ``num_tensor_elements``)."""
        return elements(s for n, s in self.shapes().items() if self._used(n))

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


class GPT2Model(DeviceModel):
    """GPT-2 on the device (DeviceModel: every method is both families'). Create with
    ``GPT2Model.init`` (GPT-2's initialisation) or ``from_arrays`` (device arrays, e.g.
    ``config.from_file`` of a checkpoint's tensors)."""
