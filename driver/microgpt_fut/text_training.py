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
import time
from pathlib import Path
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .checkpoint import Checkpoint
from .gpt2 import GPT2Config, GPT2Model, Recipe
from .pacing import CallPacer
from .runtime import Runtime
from .text import TextData
from .data_parallel import DataParallelGPT2, runtimes
from .exchange import Exchange
from .trainer import CheckedRun, uses_host_state


@dataclass(frozen=True)
class TextSettings:
    """A text run's settings (nanoGPT's names): total steps, B windows per
    micro-batch, ``grad_accum`` micro-batches per step, the optimiser recipe,
    the evaluations, the seed (initial weights, windows, evaluation batches) and
    how many steps one device call fuses."""

    num_steps: int
    batch_size: int
    recipe: Recipe
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
        if not 0 <= self.seed < 2**63:
            raise ValueError(f"--seed must be in [0, 2**63), got {self.seed}")

    def to_train(self) -> dict:
        """The checkpoint's ``train`` entries for these settings."""
        r = self.recipe
        return {"num_steps": self.num_steps, "batch_size": self.batch_size,
                "grad_accum": self.grad_accum, "eval_every": self.eval_every,
                "eval_iters": self.eval_iters, "seed": self.seed, "lr": float(r.lr),
                "min_lr": float(r.min_lr), "warmup_steps": r.warmup_steps,
                "lr_decay_steps": r.lr_decay_steps, "beta1": float(r.beta1),
                "beta2": float(r.beta2), "eps": float(r.eps),
                "weight_decay": float(r.weight_decay), "grad_clip": float(r.grad_clip)}

    def model(self, rt: Runtime, config: GPT2Config, *arrays, step: int = 0,
              exchange: Exchange | None = None):
        """The run's model: on the device (GPT2Model), or over ``threads`` c contexts
        and/or MPI ranks (``exchange``; data_parallel.DataParallelGPT2); fresh under
        the seed when no arrays are given, else from (params, m, v)."""
        if uses_host_state(self.threads, exchange):
            rts = runtimes(rt, self.threads)
            return (DataParallelGPT2.from_arrays(rts, config, *arrays, step=step,
                                                 exchange=exchange) if arrays
                    else DataParallelGPT2.init(rts, config, self.seed, exchange))
        return (GPT2Model.from_arrays(rt, config, *arrays, step=step) if arrays
                else GPT2Model.init(rt, config, self.seed))

    @classmethod
    def from_train(cls, train: dict, steps_per_call: int, threads: int = 1) -> "TextSettings":
        """The settings a checkpoint's ``train`` entries hold (KeyError when one is missing)."""
        recipe = Recipe(lr=train["lr"], min_lr=train["min_lr"], warmup_steps=train["warmup_steps"],
                        lr_decay_steps=train["lr_decay_steps"], beta1=train["beta1"],
                        beta2=train["beta2"], eps=train["eps"],
                        weight_decay=train["weight_decay"], grad_clip=train["grad_clip"])
        return cls(train["num_steps"], train["batch_size"], recipe, train["grad_accum"],
                   train["eval_every"], train["eval_iters"], train["seed"], steps_per_call,
                   threads)


# progress(step, num_steps, mean loss of steps first..step, the gradient norm of step, tokens/s
# over them, first): first is the step after the previous report (or after where ``run`` started)
Progress = Callable[[int, int, float, float, float, int], None]
# on_eval(step, train loss, val loss or nan)
OnEval = Callable[[int, float, float], None]


class TextTraining(CheckedRun):
    """A text run in progress: the model on the device, the data, the losses,
    gradient norms and evaluations so far. ``start`` or ``resume``, then ``run``,
    then ``checkpoint``. No NaN or infinity is ever saved (CheckedRun)."""

    def __init__(self, model: GPT2Model, data: TextData, settings: TextSettings,
                 losses: np.ndarray, norms: np.ndarray, evals: list):
        self.model = model
        self.data = data
        self.settings = settings
        self.losses = np.asarray(losses, np.float32)
        self.norms = np.asarray(norms, np.float32)
        self.evals = [list(e) for e in evals]
        self.step = len(self.losses)
        self.positions = 0   # tokens trained on by this object's calls
        self.seconds = 0.0   # time in this object's training calls
        self.pacer = CallPacer(settings.steps_per_call)
        self.eval_pacer = CallPacer(settings.eval_iters)
        self.init_from = ""  # the model the run started from (train --init-from), if any
        self.trust()  # a fresh model, or a checkpoint's (checkpoint.load refuses NaN)

    @classmethod
    def start(cls, rt: Runtime, data: TextData, settings: TextSettings,
              config: GPT2Config, params: dict[str, np.ndarray] | None = None,
              init_from: str = "", exchange: Exchange | None = None) -> "TextTraining":
        """A fresh run: GPT-2's initialisation under settings.seed, or (``train
        --init-from``) the weights ``params`` (device arrays of config's shapes) with
        AdamW's moments at zero; ``init_from`` names that model in the checkpoint.
        Each step's windows are shared by the MPI ranks of ``exchange``, if given.

        config.vocab_size must be the tokenizer's size, or (a model whose vocabulary
        is padded, like nanoGPT's 50304) larger. Raises ValueError naming the option
        for bad settings or sizes."""
        settings.validate()
        config.validate()
        if config.vocab_size != data.vocab.size and not (
                params is not None and config.vocab_size > data.vocab.size):
            raise ValueError(f"vocab_size {config.vocab_size} does not match the text's "
                             f"{data.vocab.size}")
        model = settings.model(rt, config, exchange=exchange) if params is None else \
            settings.model(rt, config, params, exchange=exchange)
        run = cls(model, data, settings, np.zeros(0, np.float32), np.zeros(0, np.float32), [])
        run.init_from = init_from
        return run

    @classmethod
    def resume(cls, rt: Runtime, ck: Checkpoint, data: TextData,
               settings: TextSettings, exchange: Exchange | None = None) -> "TextTraining":
        """The text run saved in ck, continued on data (the same text, checked by
        SHA-256; on the MPI ranks of ``exchange``, if given). Raises ValueError when it
        cannot continue."""
        settings.validate()
        if ck.m is None or ck.v is None or ck.losses is None or ck.norms is None:
            raise ValueError("the checkpoint lacks AdamW's moments or its loss history")
        if data.sha256 != ck.train.get("data_sha256"):
            raise ValueError(f"refusing to resume on other data: {data.path!r} is not the text "
                             f"the checkpoint was trained on ({ck.train.get('data_path')!r}, "
                             f"SHA-256 {str(ck.train.get('data_sha256'))[:12]}...)")
        if not 0 <= ck.step <= settings.num_steps:
            raise ValueError(f"checkpoint step {ck.step} is outside 0..{settings.num_steps}")
        model = settings.model(rt, ck.config, ck.params, ck.m, ck.v, step=ck.step,
                               exchange=exchange)
        run = cls(model, data, settings, ck.losses, ck.norms, ck.evals or [])
        run.init_from = ck.train.get("init_from", "")
        return run

    @property
    def num_steps(self) -> int:
        return self.settings.num_steps

    @property
    def done(self) -> bool:
        return self.step >= self.settings.num_steps

    def _due_eval(self, step: int) -> bool:
        return step % self.settings.eval_every == 0 or step == self.settings.num_steps

    def evaluate(self, should_stop: Callable[[], bool] | None = None
                 ) -> tuple[float, float] | None:
        """nanoGPT's estimate_loss at the current step: mean loss over eval_iters
        batches of each split (val: nan without a validation split); recorded.

        The batches go to the device a few at a time (about pacing.CALL_SECONDS a
        call; each batch's loss is its own, so the mean does not depend on it). When
        ``should_stop()`` turns true between calls, the evaluation is abandoned
        (None, nothing recorded); ``run`` does it first when the run continues.
        """
        s, d = self.settings, self.data
        out = []
        for split in ("train", "val"):
            if split == "val" and len(d.val) == 0:
                out.append(math.nan)
                continue
            batches = d.eval_batches(split, s.seed, self.step, s.eval_iters, s.batch_size)
            losses, i = [], 0
            while i < len(batches):
                if should_stop is not None and should_stop():
                    return None
                k = self.eval_pacer.next_k(i, len(batches) - i)
                t0 = time.perf_counter()
                losses.append(self.model.losses(batches[i:i + k]))
                self.eval_pacer.record(k, time.perf_counter() - t0)
                i += k
            out.append(float(np.mean(np.concatenate(losses).astype(np.float64))))
        self.evals = [e for e in self.evals if e[0] != self.step] + [[self.step, *out]]
        return out[0], out[1]

    def _batches(self, first: int, k: int) -> np.ndarray:
        s = self.settings
        return np.stack([self.data.train_batch(t, s.seed, s.grad_accum, s.batch_size)
                         for t in range(first, first + k)])

    def replay(self, first: int, k: int) -> np.ndarray:
        """CheckedRun's: steps first+1..first+k, their losses and norms recorded."""
        losses, norms = self.model.train(self._batches(first, k), None, self.settings.recipe)
        self.losses = np.concatenate([self.losses[:first], losses])
        self.norms = np.concatenate([self.norms[:first], norms])
        return losses

    def rewind(self, step: int) -> None:
        """CheckedRun's: the losses, norms and evaluations after ``step`` are forgotten."""
        self.losses, self.norms = self.losses[:step], self.norms[:step]
        self.evals = [e for e in self.evals if e[0] <= step]
        self.step = step

    def run(self, until: int | None = None, progress: Progress | None = None,
            on_eval: OnEval | None = None, report_every: int = 100,
            should_stop: Callable[[], bool] | None = None) -> None:
        """Train up to step ``until`` (default: the end), evaluating at step 0, every
        eval_every steps and at the end. Calls end at evaluation steps. On a NaN or
        infinity in a call's losses or gradient norms (or in the state at a
        ``checkpoint``) the run goes back to the last good step and Diverged is raised
        (CheckedRun).
        ``should_stop()`` is asked after each call."""
        s = self.settings
        until = s.num_steps if until is None else min(until, s.num_steps)
        if self._due_eval(self.step) and not any(e[0] == self.step for e in self.evals):
            # step 0, or an evaluation a signal abandoned before the run was saved
            result = self.evaluate(should_stop)
            if result is None:
                return
            if on_eval:
                on_eval(self.step, *result)
        last_t, last_step, last_pos = time.perf_counter(), self.step, self.positions
        tokens_per_step = s.grad_accum * s.batch_size * self.model.config.block_size
        while self.step < until:
            first = self.step
            next_eval = (first // s.eval_every + 1) * s.eval_every
            k = self.pacer.next_k(first, min(until, next_eval) - first)
            before = self.model.state
            batches = self._batches(first, k)
            t0 = time.perf_counter()
            losses, norms = self.model.train(batches, None, s.recipe)
            if not np.isfinite(losses).all() or not np.isfinite(norms).all():
                raise self.call_diverged(before, first, first + k)
            self.pacer.record(k, time.perf_counter() - t0)
            self.seconds += time.perf_counter() - t0
            self.losses = np.concatenate([self.losses, losses])
            self.norms = np.concatenate([self.norms, norms])
            self.step += k
            self.positions += k * tokens_per_step
            if progress is not None and (self.step // report_every > first // report_every
                                         or self.step == until):
                now = time.perf_counter()
                progress(self.step, s.num_steps, float(np.mean(self.losses[last_step:])),
                         float(self.norms[-1]), (self.positions - last_pos) / max(now - last_t, 1e-9),
                         last_step + 1)
                last_t, last_step, last_pos = now, self.step, self.positions
            if self._due_eval(self.step):
                # the last evaluation is never abandoned: no later run would do it
                result = self.evaluate(None if self.done else should_stop)
                if result is not None and not math.isfinite(result[0]):
                    raise self.diverged(self.step)  # the state broke: find the step
                if result is not None and on_eval:
                    on_eval(self.step, *result)
            if should_stop is not None and should_stop():
                break
        self.model.rt.sync()

    def checkpoint(self, description: str = "") -> Checkpoint:
        """Everything needed to continue the run, ready for checkpoint.save. Raises
        Diverged (CheckedRun.checked) when the state holds a NaN or an infinity, after
        putting the run back to the last finite step."""
        params, (m, v) = self.model.params(), self.model.adam()
        self.checked((params, m, v))
        d = self.data
        train = self.settings.to_train()
        train.update({"data": description or d.path, "data_path": str(Path(d.path).resolve()),
                      "data_sha256": d.sha256, "n_chars": d.n_chars, "encoding": d.encoding,
                      "val_fraction": float(d.val_fraction)})
        if self.init_from:
            train["init_from"] = self.init_from
        # the tokenizer: a character vocabulary is stored as the "vocab" list, as before
        return Checkpoint(self.model.config, [], params, m, v, self.step, train,
                          self.losses.copy(), "text", self.norms.copy(),
                          [list(e) for e in self.evals], tokenizer=d.vocab)
