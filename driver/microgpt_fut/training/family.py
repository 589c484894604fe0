"""A model family as a run sees it: the Python side of futhark/gpt_model.fut's ``gpt_model``.

Two families share every run (run.Run): microgpt (models/microgpt.py: rmsnorm, ReLU, no
biases, Adam with microgpt's linear decay: optimizer.Adam) and GPT-2 (models/gpt2.py:
LayerNorm, GELU, tied head, nanoGPT's AdamW recipe: optimizer.Recipe). Both libraries
export the same entry points (futhark/gpt.fut), so training, evaluation and sampling
are written once here (``Family``); a family says only what differs: its name, program,
config, device model class, and which options it reads: its sizes and its optimiser's,
with their defaults (training/plan.py reads them). Nothing here knows the data.
"""
from __future__ import annotations

import numpy as np

from ..parallel.host_state import DataParallelModel, runtimes
from ..parallel.exchange import Exchange
from ..models.gpt2 import GPT2Config, GPT2Model
from ..models.microgpt import MicrogptConfig, MicrogptModel
from ..models.base import check_array_bytes
from ..backend.runtime import Runtime
from ..errors import OptionConflict
from .optimizer import Adam, Recipe


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
    """A model family: what differs between microgpt and GPT-2 above the kernels, which
    both libraries serve through the same entry points (futhark/gpt.fut): ``arch`` (the
    checkpoint's and --arch's name), ``program`` (the compiled library), its config
    class, its device model class, its size options and its optimiser's defaults."""

    arch: str
    program: str
    config_class: type
    device_model: type
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
        (``validate``), raising OptionConflict naming the option."""
        raise NotImplementedError

    def model(self, rt: Runtime, config, seed: int, contexts: int = 1,
              exchange: Exchange | None = None, params=None, m=None, v=None, step: int = 0):
        """The run's model: fresh under ``seed`` (params None) or from the arrays
        (float32, config.shapes(); moments zero when not given), on the device, or over
        ``contexts`` c contexts and the MPI ranks of ``exchange`` (parallel/host_state.py).
        Raises ValueError for a shape that does not match config."""
        if params is None:
            model = self.device_model.init(rt, config, seed)
        else:
            model = self.device_model.from_arrays(rt, config, params, m, v, step)
        if uses_host_state(contexts, exchange):
            return DataParallelModel(runtimes(rt, contexts), model, exchange)
        return model

    def train(self, model, tokens: np.ndarray, n_pos: np.ndarray | None, num_steps: int,
              optimizer) -> tuple[np.ndarray, np.ndarray]:
        """K steps in one device call: tokens int64 [K, A, B, T+1] (A micro-batches of B
        rows), n_pos int64 [K, A, B] valid positions per row (None: all T), the
        optimiser's learning rate at each step of a ``num_steps``-step run. Returns
        (losses float32 [K], gradient norms float32 [K])."""
        return model.train(tokens, n_pos, optimizer, num_steps)

    def eval_losses(self, model, batches: np.ndarray) -> np.ndarray:
        """Mean loss of each of I batches int64 [I, B, T+1] (every position counts):
        float32 [I], no update."""
        return model.losses(batches)

    def names(self, model, seed: int, n: int, temperature: float, first: int) -> np.ndarray:
        """Samples first..first+n-1 of a model trained on lines: int64 [n, block_size], each
        continuing the prompt [BOS] (BOS is the last token of a lines vocabulary) until it
        draws BOS, then BOS (data/lines.py's Vocab.decode stops there), as microgpt.py's
        loop; sample i draws from random stream i under seed."""
        c = model.config
        bos = c.vocab_size - 1
        # (the caches' size is checked before n prompts are made)
        check_array_bytes(f"the KV caches of {n} samples", 4, c.n_layer, n, c.block_size,
                          c.n_embd, 4)
        return model.generate_prompts(seed, temperature, 0, [[bos]] * n,
                                      model.config.block_size, first, stop=bos)

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
    """microgpt's model and Adam."""

    arch, program = "microgpt", "microgpt"
    config_class, device_model = MicrogptConfig, MicrogptModel
    optimizer_options = {k: shown(getattr(Adam, k))
                         for k in ("lr", "beta1", "beta2", "weight_decay", "grad_clip")}

    def optimizer(self, values, num_steps):
        """Family.optimizer's: microgpt's Adam (microgpt.py's lr 0.01, betas 0.85, 0.99, no
        weight decay or clipping: Adam's defaults; checked by Settings)."""
        return Adam(**{k: values[k] for k in self.optimizer_options
                       if values.get(k) is not None})


class GPT2(Family):
    """GPT-2's model and nanoGPT's recipe (optimizer.Recipe)."""

    arch, program = "gpt2", "gpt2"
    config_class, device_model = GPT2Config, GPT2Model
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


FAMILIES = {"microgpt": Microgpt(), "gpt2": GPT2()}


def family_of(config) -> Family:
    """The family of a config (its class's ``arch``)."""
    return FAMILIES[config.arch]
