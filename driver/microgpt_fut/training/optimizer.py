"""The optimiser's settings, for every family: one AdamW on the device (futhark/train.fut's
``step``: clip by the global gradient norm, then AdamW), two learning-rate schedules.

``Adam`` is microgpt's: Adam (AdamW without weight decay or clipping), the learning rate
decaying linearly from ``lr`` to 0 at the run's last step (microgpt.py). ``Recipe`` is
nanoGPT's train.py: AdamW with weight decay on the >= 2-D tensors, clipping, and get_lr's
warm-up and cosine decay. Both give the kernels the same things: each step's learning
rate (``lrs``, computed here on the host in float64, as Python computes them) and AdamW's
settings (``kernel_args``).
"""
from __future__ import annotations

import math
from dataclasses import KW_ONLY, dataclass

import numpy as np

from ..errors import OptionConflict

FLOAT32_MAX = float(np.finfo(np.float32).max)


def check_float32(opt: str, value: float) -> None:
    """Raise OptionConflict naming ``opt`` when ``value`` is not a finite float32 (the
    kernels hold every rate and coefficient in float32: 1e39 would be infinite)."""
    if not (math.isfinite(value) and abs(value) <= FLOAT32_MAX):
        raise OptionConflict(f"{opt} {value} is not a finite float32 number (at most "
                             f"{FLOAT32_MAX:.4g} in magnitude)")


def _check_betas(o) -> None:
    for name in ("beta1", "beta2"):
        if not 0 <= getattr(o, name) < 1:
            raise OptionConflict(f"--{name} must be in [0, 1), got {getattr(o, name)}")


def _check_decay_and_clip(o) -> None:
    for name in ("weight_decay", "grad_clip"):
        check_float32("--" + name.replace("_", "-"), getattr(o, name))
    if not o.weight_decay >= 0:
        raise OptionConflict(f"--weight-decay must be at least 0, got {o.weight_decay}")
    if not o.grad_clip >= 0:
        raise OptionConflict(f"--grad-clip must be at least 0 (0: no clipping), got "
                             f"{o.grad_clip}")


class _Optimizer:
    """What the kernels take of either optimiser."""

    beta1: float
    beta2: float
    eps: float
    weight_decay: float = 0.0
    grad_clip: float = 0.0

    def lr_at(self, it: int, num_steps: int | None = None) -> float:
        """The learning rate of step ``it`` (0-based) of a run of ``num_steps`` steps."""
        raise NotImplementedError

    def lrs(self, first: int, k: int, num_steps: int | None = None) -> np.ndarray:
        """The learning rates of steps first..first+k-1: float32 [k] (the libraries'
        ``train`` takes them)."""
        return np.array([self.lr_at(first + i, num_steps) for i in range(k)], np.float32)

    def kernel_args(self) -> tuple:
        """AdamW's settings as the libraries' ``train`` and ``apply_gradient`` take them:
        float32 beta1, beta2, eps, weight_decay, grad_clip (0: no clipping)."""
        return tuple(np.float32(x) for x in (self.beta1, self.beta2, self.eps,
                                             self.weight_decay, self.grad_clip))


@dataclass(frozen=True)
class Adam(_Optimizer):
    """microgpt's optimiser: Adam, the learning rate decaying linearly from ``lr`` to 0 at
    the run's last step (microgpt.py: lr_t = lr (1 - step / num_steps)). Weight decay
    and clipping are off, as microgpt's, unless given (--weight-decay, --grad-clip):
    then it is the kernels' AdamW with that schedule."""

    lr: float = 0.01
    beta1: float = 0.85
    beta2: float = 0.99
    eps: float = 1e-8
    _: KW_ONLY  # (microgpt's own settings are the four above, in its order)
    weight_decay: float = 0.0
    grad_clip: float = 0.0

    def lr_at(self, it: int, num_steps: int | None = None) -> float:
        """microgpt's lr (1 - it / num_steps). Raises ValueError without num_steps."""
        if not num_steps:
            raise ValueError("microgpt's learning rate decays over the run: give num_steps")
        return self.lr * (1 - it / num_steps)

    def validate(self) -> None:
        """Raise OptionConflict naming the option when a setting is unusable."""
        check_float32("--lr", self.lr)
        if not self.lr > 0:
            raise OptionConflict(f"--lr must be a positive number, got {self.lr}")
        _check_betas(self)
        if not (math.isfinite(self.eps) and self.eps > 0):
            raise OptionConflict(f"eps must be positive, got {self.eps}")
        _check_decay_and_clip(self)

    def to_train(self) -> dict:
        """The checkpoint's ``train`` entries of these settings (weight_decay and grad_clip
        only when set: microgpt's checkpoints have neither)."""
        return {"lr": float(self.lr), "beta1": float(self.beta1), "beta2": float(self.beta2),
                "eps": float(self.eps),
                **{k: float(getattr(self, k)) for k in ("weight_decay", "grad_clip")
                   if getattr(self, k)}}


@dataclass(frozen=True)
class Recipe(_Optimizer):
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

    def lr_at(self, it: int, num_steps: int | None = None) -> float:
        """nanoGPT's get_lr(it): linear warm-up, cosine decay to min_lr at lr_decay_steps,
        min_lr after (num_steps is not read: the schedule holds its own length)."""
        if it < self.warmup_steps:
            return self.lr * (it + 1) / (self.warmup_steps + 1)
        if it > self.lr_decay_steps:
            return self.min_lr
        ratio = (it - self.warmup_steps) / (self.lr_decay_steps - self.warmup_steps)
        return self.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (self.lr - self.min_lr)

    def validate(self) -> None:
        """Raise OptionConflict naming the option when one of nanoGPT's settings is
        unusable."""
        for name in ("lr", "min_lr"):
            check_float32("--" + name.replace("_", "-"), getattr(self, name))
        if not self.lr > 0:
            raise OptionConflict(f"--lr must be a positive number, got {self.lr}")
        if not 0 <= self.min_lr <= self.lr:
            raise OptionConflict(f"--min-lr must be in [0, --lr], got {self.min_lr}")
        if self.warmup_steps < 0:
            raise OptionConflict(f"--warmup-steps must be at least 0, got {self.warmup_steps}")
        if self.lr_decay_steps <= self.warmup_steps:
            raise OptionConflict(f"--lr-decay-steps ({self.lr_decay_steps}) must be larger "
                                 f"than --warmup-steps ({self.warmup_steps})")
        _check_betas(self)
        _check_decay_and_clip(self)

    def to_train(self) -> dict:
        """The checkpoint's ``train`` entries of nanoGPT's recipe."""
        return {"lr": float(self.lr), "min_lr": float(self.min_lr),
                "warmup_steps": self.warmup_steps, "lr_decay_steps": self.lr_decay_steps,
                "beta1": float(self.beta1), "beta2": float(self.beta2), "eps": float(self.eps),
                "weight_decay": float(self.weight_decay), "grad_clip": float(self.grad_clip)}


def optimizer_from_train(train: dict) -> Adam | Recipe:
    """The optimiser a checkpoint's ``train`` entries describe: the recipe when they hold
    its schedule (``min_lr``), else microgpt's Adam. Raises KeyError for a missing entry."""
    if "min_lr" in train:
        return Recipe(lr=train["lr"], min_lr=train["min_lr"],
                      warmup_steps=train["warmup_steps"],
                      lr_decay_steps=train["lr_decay_steps"], beta1=train["beta1"],
                      beta2=train["beta2"], eps=train["eps"],
                      weight_decay=train["weight_decay"], grad_clip=train["grad_clip"])
    return Adam(train["lr"], train["beta1"], train["beta2"], train["eps"],
                weight_decay=train.get("weight_decay", 0.0),
                grad_clip=train.get("grad_clip", 0.0))
