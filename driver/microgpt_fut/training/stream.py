"""Training on a stream of text with nanoGPT's recipe (``train --data-format text``).

nanoGPT's train.py, step by step: each step draws ``grad_accum`` micro-batches
of ``batch_size`` random windows from the train split (text.TextData), takes one
AdamW step with warm-up and cosine decay, clipping at the global gradient norm
(gpt2.Recipe, all on the device in one call of up to ``steps_per_call`` steps),
and every ``eval_every`` steps and at the end (and at step 0) the mean loss
over ``eval_iters`` random batches of each split is measured (nanoGPT's
``estimate_loss``). Windows and evaluation batches depend only on (seed, step),
so a resumed run draws exactly what the uninterrupted one would.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .checkpoint import Checkpoint
from ..data.datasets import Stream
from ..parallel.exchange import Exchange
from .family import Adam, optimizer_from_train, recipe_to_train
from ..models.gpt2 import Recipe
from ..models.microgpt import GPTConfig
from .run import Run
from ..backend.runtime import Runtime
from ..data.text import TextData


@dataclass(frozen=True)
class TextSettings:
    """A text run's settings (nanoGPT's names): total steps, B windows per
    micro-batch, ``grad_accum`` micro-batches per step, the optimiser recipe,
    the evaluations, the seed (initial weights, windows, evaluation batches) and
    how many steps one device call fuses."""

    num_steps: int
    batch_size: int
    recipe: Recipe | Adam  # the optimiser: nanoGPT's recipe, or microgpt's Adam
    grad_accum: int = 1
    eval_every: int = 250
    eval_iters: int = 20
    seed: int = 42
    steps_per_call: int = 50
    threads: int = 1  # c backend: each step's windows split over this many contexts

    def validate(self) -> None:
        """Raise ValueError naming the option when a setting is unusable."""
        for name in ("batch_size", "grad_accum", "eval_every", "eval_iters", "steps_per_call",
                     "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1, "
                                 f"got {getattr(self, name)}")
        if self.num_steps < 1:
            raise ValueError(f"--steps must be at least 1, got {self.num_steps}")
        r = self.recipe
        if isinstance(r, Adam):  # microgpt's optimiser
            r.validate()
        else:
            validate_recipe(r)
        if not 0 <= self.seed < 2**63:
            raise ValueError(f"--seed must be in [0, 2**63), got {self.seed}")

    @property
    def optimizer(self) -> Recipe | Adam:
        """The run's optimiser: nanoGPT's recipe (GPT-2) or microgpt's Adam."""
        return self.recipe

    @property
    def contexts(self) -> int:
        """Kernel contexts a step is split over (--threads)."""
        return self.threads

    def to_train(self) -> dict:
        """The checkpoint's ``train`` entries for these settings (the data's are the
        dataset's)."""
        r = self.recipe
        return {"num_steps": self.num_steps, "batch_size": self.batch_size,
                "grad_accum": self.grad_accum, "eval_every": self.eval_every,
                "eval_iters": self.eval_iters, "seed": self.seed,
                **(r.to_train() if isinstance(r, Adam) else recipe_to_train(r))}

    @classmethod
    def from_train(cls, train: dict, steps_per_call: int, threads: int = 1) -> "TextSettings":
        """The settings a checkpoint's ``train`` entries hold (KeyError when one is missing;
        eval_every and eval_iters default to 250 and 20 for a run on lines, which has no
        evaluations, and grad_accum to 1)."""
        return cls(train["num_steps"], train["batch_size"], optimizer_from_train(train),
                   train.get("grad_accum", 1), train.get("eval_every", 250),
                   train.get("eval_iters", 20), train["seed"], steps_per_call, threads)


def validate_recipe(r: Recipe) -> None:
    """Raise ValueError naming the option when one of nanoGPT's settings is unusable."""
    if not (math.isfinite(r.lr) and r.lr > 0):
        raise ValueError(f"--lr must be a positive number, got {r.lr}")
    if not (math.isfinite(r.min_lr) and 0 <= r.min_lr <= r.lr):
        raise ValueError(f"--min-lr must be in [0, --lr], got {r.min_lr}")
    if r.warmup_steps < 0:
        raise ValueError(f"--warmup-steps must be at least 0, got {r.warmup_steps}")
    if r.lr_decay_steps <= r.warmup_steps:
        raise ValueError(f"--lr-decay-steps ({r.lr_decay_steps}) must be larger than "
                         f"--warmup-steps ({r.warmup_steps})")
    for name in ("beta1", "beta2"):
        if not 0 <= getattr(r, name) < 1:
            raise ValueError(f"--{name} must be in [0, 1), got {getattr(r, name)}")
    if not (math.isfinite(r.weight_decay) and r.weight_decay >= 0):
        raise ValueError(f"--weight-decay must be at least 0, got {r.weight_decay}")
    if not (math.isfinite(r.grad_clip) and r.grad_clip >= 0):
        raise ValueError(f"--grad-clip must be at least 0 (0: no clipping), got {r.grad_clip}")


class TextTraining(Run):
    """A run on a token stream (run.Run over a datasets.Stream), made from a TextData:
    ``start`` or ``resume``, then ``run``, then ``checkpoint``."""

    data = property(lambda self: self.dataset.data)

    @classmethod
    def start(cls, rt: Runtime, data: TextData, settings: TextSettings,
              config: GPTConfig, params: dict[str, np.ndarray] | None = None,
              init_from: str = "", exchange: Exchange | None = None,
              data_format: str = "text") -> "TextTraining":
        """A fresh run of config's family (GPT2Config: GPT-2, GPTConfig: microgpt) on the
        stream: the family's initialisation under settings.seed, or (``train
        --init-from``) the weights ``params`` (arrays of config's shapes) with the
        optimiser's moments at zero; ``init_from`` names that model in the checkpoint.
        Each step's windows are shared by the MPI ranks of ``exchange``, if given.
        data_format: "text" (a text file) or "tokens" (token shards), for the checkpoint.

        config.vocab_size must be the tokenizer's size, or (a model whose vocabulary
        is padded, like nanoGPT's 50304) larger. Raises ValueError naming the option
        for bad settings or sizes."""
        settings.validate()
        config.validate()
        if config.vocab_size != data.vocab.size and not (
                params is not None and config.vocab_size > data.vocab.size):
            raise ValueError(f"vocab_size {config.vocab_size} does not match the text's "
                             f"{data.vocab.size}")
        return super().start(rt, Stream(data, data_format), settings, config, params,
                             init_from, exchange)

    @classmethod
    def resume(cls, rt: Runtime, ck: Checkpoint, data: TextData,
               settings: TextSettings, exchange: Exchange | None = None) -> "TextTraining":
        """The stream run saved in ck, continued on data (the same text or shards,
        checked by SHA-256; on the MPI ranks of ``exchange``, if given). Raises
        ValueError when it cannot continue."""
        settings.validate()
        if ck.arch == "gpt2" and ck.norms is None:
            raise ValueError("the checkpoint lacks its gradient norms ('train.grad_norms')")
        if data.sha256 != ck.train.get("data_sha256"):
            raise ValueError(f"refusing to resume on other data: {data.path!r} is not the text "
                             f"the checkpoint was trained on ({ck.train.get('data_path')!r}, "
                             f"SHA-256 {str(ck.train.get('data_sha256'))[:12]}...)")
        return super().resume(rt, ck, Stream(data, ck.data_format), settings, exchange)
