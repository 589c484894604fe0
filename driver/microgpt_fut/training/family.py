"""A model family as a run sees it: the Python side of futhark/gpt_model.fut's ``gpt_model``.

Two families share every run (run.Run): microgpt (models/microgpt.py: rmsnorm, ReLU, no
biases, Adam with microgpt's linear decay, ``Adam``) and GPT-2 (models/gpt2.py:
LayerNorm, GELU, tied head, nanoGPT's AdamW recipe, ``gpt2.Recipe``). A family
says how to make its model (on the device, or on the host over --threads
contexts and MPI ranks: parallel/host_state.py), how one device call trains K steps,
how an evaluation batch is scored, and what its optimiser's settings are called
in a checkpoint; and which options it reads: its sizes and its optimiser's, with
their defaults and checks (training/plan.py reads them). Nothing here knows the data.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..parallel.host_state import DataParallelGPT2, DataParallelModel, runtimes
from ..parallel.exchange import Exchange
from ..models.gpt2 import GPT2Config, GPT2Model, Recipe
from ..models.microgpt import MicrogptConfig, MicrogptModel
from ..backend.runtime import Runtime
from ..errors import OptionConflict


FLOAT32_MAX = float(np.finfo(np.float32).max)


def check_float32(opt: str, value: float) -> None:
    """Raise OptionConflict naming ``opt`` when ``value`` is not a finite float32 (the
    kernels hold every rate and coefficient in float32: 1e39 would be infinite)."""
    if not (math.isfinite(value) and abs(value) <= FLOAT32_MAX):
        raise OptionConflict(f"{opt} {value} is not a finite float32 number (at most "
                             f"{FLOAT32_MAX:.4g} in magnitude)")


@dataclass(frozen=True)
class Adam:
    """microgpt's optimiser: Adam, the learning rate decaying linearly from ``lr`` to 0 at
    the run's last step (microgpt.py; futhark/train.fut ``adam``)."""

    lr: float = 0.01
    beta1: float = 0.85
    beta2: float = 0.99
    eps: float = 1e-8

    def validate(self) -> None:
        """Raise OptionConflict naming the option when a setting is unusable."""
        check_float32("--lr", self.lr)
        if not self.lr > 0:
            raise OptionConflict(f"--lr must be a positive number, got {self.lr}")
        _check_betas(self)
        if not (math.isfinite(self.eps) and self.eps > 0):
            raise OptionConflict(f"eps must be positive, got {self.eps}")

    def to_train(self) -> dict:
        """The checkpoint's ``train`` entries of these settings."""
        return {"lr": float(self.lr), "beta1": float(self.beta1), "beta2": float(self.beta2),
                "eps": float(self.eps)}


def _check_betas(o) -> None:
    for name in ("beta1", "beta2"):
        if not 0 <= getattr(o, name) < 1:
            raise OptionConflict(f"--{name} must be in [0, 1), got {getattr(o, name)}")


def validate_recipe(r: Recipe) -> None:
    """Raise OptionConflict naming the option when one of nanoGPT's settings is unusable."""
    for name in ("lr", "min_lr", "weight_decay", "grad_clip"):
        check_float32("--" + name.replace("_", "-"), getattr(r, name))
    if not r.lr > 0:
        raise OptionConflict(f"--lr must be a positive number, got {r.lr}")
    if not 0 <= r.min_lr <= r.lr:
        raise OptionConflict(f"--min-lr must be in [0, --lr], got {r.min_lr}")
    if r.warmup_steps < 0:
        raise OptionConflict(f"--warmup-steps must be at least 0, got {r.warmup_steps}")
    if r.lr_decay_steps <= r.warmup_steps:
        raise OptionConflict(f"--lr-decay-steps ({r.lr_decay_steps}) must be larger than "
                             f"--warmup-steps ({r.warmup_steps})")
    _check_betas(r)
    if not r.weight_decay >= 0:
        raise OptionConflict(f"--weight-decay must be at least 0, got {r.weight_decay}")
    if not r.grad_clip >= 0:
        raise OptionConflict(f"--grad-clip must be at least 0 (0: no clipping), got "
                             f"{r.grad_clip}")


def recipe_to_train(r: Recipe) -> dict:
    """The checkpoint's ``train`` entries of nanoGPT's recipe."""
    return {"lr": float(r.lr), "min_lr": float(r.min_lr), "warmup_steps": r.warmup_steps,
            "lr_decay_steps": r.lr_decay_steps, "beta1": float(r.beta1),
            "beta2": float(r.beta2), "eps": float(r.eps),
            "weight_decay": float(r.weight_decay), "grad_clip": float(r.grad_clip)}


def optimizer_from_train(train: dict) -> Adam | Recipe:
    """The optimiser a checkpoint's ``train`` entries describe: the recipe when they hold
    its schedule (``min_lr``), else microgpt's Adam. Raises KeyError for a missing entry."""
    if "min_lr" in train:
        return Recipe(lr=train["lr"], min_lr=train["min_lr"],
                      warmup_steps=train["warmup_steps"],
                      lr_decay_steps=train["lr_decay_steps"], beta1=train["beta1"],
                      beta2=train["beta2"], eps=train["eps"],
                      weight_decay=train["weight_decay"], grad_clip=train["grad_clip"])
    return Adam(train["lr"], train["beta1"], train["beta2"], train["eps"])


def optimizer_entries(optimizer) -> dict:
    """The checkpoint's ``train`` entries of either optimiser."""
    return optimizer.to_train() if isinstance(optimizer, Adam) else recipe_to_train(optimizer)


def validate_optimizer(optimizer) -> None:
    """Raise OptionConflict naming the option when either optimiser's setting is unusable."""
    if isinstance(optimizer, Adam):
        optimizer.validate()
    else:
        validate_recipe(optimizer)


def uses_host_state(contexts: int, exchange: Exchange | None) -> bool:
    """Whether a run trains on the host-state data-parallel models: with several
    contexts (--threads) or several MPI ranks."""
    return contexts > 1 or (exchange is not None and exchange.size > 1)


def shown(value: float) -> str:
    """A default as --help shows it: 0.85, 1.0, 0.01, 1e-3."""
    if 0 < abs(value) < 0.01:
        mantissa, exponent = f"{value:e}".split("e")
        return f"{float(mantissa):g}e{int(exponent)}"
    return repr(float(value))


class Family:
    """A model family: ``arch`` (the checkpoint's and --arch's name), ``program`` (the
    compiled library), its config class, its device model and its data-parallel one."""

    arch: str
    program: str
    measures_norms: bool  # whether ``train`` gives each step's gradient norm
    config_class: type
    device_model: type
    host_model: type
    # the train options of the model's sizes (click's names; config's fields) and of its
    # optimiser, each with its default as --help shows it
    size_options: tuple[str, ...] = ("n_embd", "n_head", "n_layer", "block_size", "mlp_width")
    optimizer_options: dict[str, str]

    def config(self, vocab_size: int, sizes: dict):
        """The family's config of ``vocab_size`` and the size options' values (``sizes``,
        by click name; None: the config's default)."""
        return self.config_class(vocab_size, **{k: sizes[k] for k in self.size_options
                                                if sizes.get(k) is not None})

    def optimizer(self, values: dict, num_steps: int):
        """The optimiser of a fresh run from the optimiser options' values (None: the
        default of ``optimizer_options``); the Settings that hold it check it
        (validate_optimizer), raising OptionConflict naming the option."""
        raise NotImplementedError

    def model(self, rt: Runtime, config, seed: int, contexts: int = 1,
              exchange: Exchange | None = None, params=None, m=None, v=None, step: int = 0):
        """The run's model: fresh under ``seed`` (params None) or from the arrays
        (float32, config.shapes(); moments zero when not given), on the device, or over
        ``contexts`` c contexts and the MPI ranks of ``exchange`` (parallel/host_state.py).
        Raises ValueError for a shape that does not match config."""
        if uses_host_state(contexts, exchange):
            rts = runtimes(rt, contexts)
            if params is None:
                return self.host_model.init(rts, config, seed, exchange)
            return self.host_model.from_arrays(rts, config, params, m, v, step, exchange)
        if params is None:
            return self.device_model.init(rt, config, seed)
        return self.device_model.from_arrays(rt, config, params, m, v, step)

    def train(self, model, tokens: np.ndarray, n_pos: np.ndarray | None, num_steps: int,
              optimizer) -> tuple[np.ndarray, np.ndarray]:
        """K steps in one device call: tokens int64 [K, A, B, T+1] (A micro-batches of B
        rows), n_pos int64 [K, A, B] valid positions per row (None: all T). Returns
        (losses float32 [K], gradient norms float32 [K], NaN where the family measures
        none)."""
        raise NotImplementedError

    def eval_losses(self, model, batches: np.ndarray) -> np.ndarray:
        """Mean loss of each of I batches int64 [I, B, T+1] (every position counts):
        float32 [I], no update."""
        raise NotImplementedError

    def names(self, model, seed: int, n: int, temperature: float, first: int) -> np.ndarray:
        """Samples first..first+n-1 of a model trained on lines: int64 [n, block_size],
        each from BOS until the next BOS (then padded with BOS: data/lines.py's Vocab.decode stops
        there); sample i draws from random stream i under seed."""
        raise NotImplementedError

    def start_continuations(self, model, seed: int, temperature: float, top_k: int, prompts,
                            first: int):
        """The continuations of ``prompts`` (sequences of >= 1 token id; the model sees
        the last block_size of each), row i as random stream first+i under seed, before
        their first step: a Continuation (models/base.py; SplitContinuation over
        --threads) whose ``advance(k)`` makes k more steps in one call with the KV cache
        carried over (futhark/sample.fut's ``start`` and ``advance``, the libraries'
        ``start_prompts`` and ``advance``). temperature 0 is greedy; top_k 0 keeps every
        token. Raises ValueError for an empty prompt."""
        return model.start_prompts(seed, temperature, top_k, list(prompts), first)

    def logits(self, model, tokens: np.ndarray) -> np.ndarray:
        """Logits of the training path: tokens int64 [B, n], n <= block_size -> float32
        [B, n, V] (causal: position j sees tokens 0..j)."""
        return model.logits_seq(tokens)


class Microgpt(Family):
    """microgpt's model and Adam. A step's A micro-batches are one batch of A*B rows (the
    kernel's loss is the mean over the valid positions of all rows)."""

    arch, program = "microgpt", "microgpt"
    measures_norms = False
    config_class, device_model, host_model = MicrogptConfig, MicrogptModel, DataParallelModel
    optimizer_options = {k: shown(getattr(Adam, k)) for k in ("lr", "beta1", "beta2")}

    def optimizer(self, values, num_steps):
        """Family.optimizer's: microgpt's Adam (microgpt.py's lr 0.01, betas 0.85, 0.99:
        Adam's defaults; checked by Settings)."""
        return Adam(*(getattr(Adam, k) if values.get(k) is None else values[k]
                      for k in ("lr", "beta1", "beta2")))

    def train(self, model, tokens, n_pos, num_steps, optimizer):
        """Family.train's: microgpt's ``train`` entry point (Adam, linear decay to 0 at
        num_steps); no gradient norms (NaN)."""
        K, A, B, T1 = tokens.shape
        tokens = tokens.reshape(K, A * B, T1)
        n_pos = (np.full((K, A * B), T1 - 1, np.int64) if n_pos is None
                 else np.asarray(n_pos).reshape(K, A * B))
        o = optimizer
        losses = model.train(tokens, n_pos, num_steps, o.lr, o.beta1, o.beta2, o.eps)
        return losses, np.full(K, np.nan, np.float32)

    def eval_losses(self, model, batches):
        """Family.eval_losses's: one ``loss`` call per batch."""
        full = np.full(batches.shape[1], batches.shape[2] - 1, np.int64)
        return np.array([model.loss(b, full) for b in batches], np.float32)

    def names(self, model, seed, n, temperature, first):
        """Family.names's: microgpt's ``generate`` entry point (microgpt.py's loop)."""
        return model.generate(seed, n, temperature, first)

    def logits(self, model, tokens):
        """Family.logits's: microgpt's logits_seq takes exactly block_size positions, so
        the rows are padded on the right (causal attention: the padding changes nothing
        before it) and the logits cut back to n."""
        tokens = np.asarray(tokens, np.int64)
        B, n = tokens.shape
        padded = np.zeros((B, model.config.block_size), np.int64)
        padded[:, :n] = tokens
        return model.logits_seq(padded)[:, :n]


class GPT2(Family):
    """GPT-2's model and nanoGPT's recipe (gpt2.Recipe)."""

    arch, program = "gpt2", "gpt2"
    measures_norms = True
    config_class, device_model, host_model = GPT2Config, GPT2Model, DataParallelGPT2
    size_options = Family.size_options + ("bias",)
    # the schedule's defaults depend on --lr and --steps (the rest are Recipe's)
    optimizer_options = {"lr": shown(Recipe.lr), "min_lr": "lr/10",
                         "warmup_steps": f"min({Recipe.warmup_steps}, steps/10)",
                         "lr_decay_steps": "--steps",
                         **{k: shown(getattr(Recipe, k))
                            for k in ("beta1", "beta2", "weight_decay", "grad_clip")}}

    def optimizer(self, values, num_steps):
        """Family.optimizer's: nanoGPT's recipe (train.py: AdamW betas (0.9, 0.95), weight
        decay 0.1, clip 1.0: Recipe's defaults; lr 1e-3 decayed to lr/10 at the last step
        after min(100, steps/10) warm-up steps). A default decay that would end inside the
        warm-up is refused, naming --warmup-steps."""
        def pick(k, default=None):
            """The value given, else ``default``, else Recipe's."""
            if values.get(k) is not None:
                return values[k]
            return getattr(Recipe, k) if default is None else default

        lr = pick("lr")
        r = Recipe(lr=lr, min_lr=pick("min_lr", lr / 10),
                   warmup_steps=pick("warmup_steps", min(Recipe.warmup_steps, num_steps // 10)),
                   lr_decay_steps=pick("lr_decay_steps", num_steps), beta1=pick("beta1"),
                   beta2=pick("beta2"), weight_decay=pick("weight_decay"),
                   grad_clip=pick("grad_clip"))
        if values.get("lr_decay_steps") is None and r.warmup_steps >= r.lr_decay_steps:
            raise OptionConflict(f"--warmup-steps {r.warmup_steps} must be less than --steps "
                                 f"{num_steps}, where the learning rate's decay ends (or give "
                                 "--lr-decay-steps beyond the warm-up)")
        return r

    def train(self, model, tokens, n_pos, num_steps, optimizer):
        """Family.train's: GPT-2's ``train`` entry point (the recipe's schedule is its own;
        num_steps is not used)."""
        return model.train(tokens, n_pos, optimizer)

    def eval_losses(self, model, batches):
        """Family.eval_losses's: GPT-2's ``losses`` entry point."""
        return model.losses(batches)

    def names(self, model, seed, n, temperature, first):
        """Family.names's: GPT-2's ``generate`` from the prompt [BOS] (BOS is the last
        token of a lines vocabulary), block_size tokens (decoding stops at a BOS)."""
        bos = np.array([model.config.vocab_size - 1], np.int64)
        return model.generate(seed, n, temperature, 0, bos, model.config.block_size, first)


FAMILIES = {"microgpt": Microgpt(), "gpt2": GPT2()}


def family_of(config) -> Family:
    """The family of a config (its class's ``arch``)."""
    return FAMILIES[config.arch]
