"""The training loop and name generation, as plain Python functions (the CLI calls them).

microgpt's job: shuffle the documents once under the seed, then step s trains on
documents (s*B + i) % N (B = 1: ``docs[step % len(docs)]``) with Adam and a
learning rate decaying linearly to 0. Here K consecutive steps are fused into one
device call (``Model.train``); the host only builds their [K, B, block_size+1] tokens.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .checkpoint import Checkpoint
from .data import Vocab, batch_indices, shuffled
from .model import GPTConfig, Model
from .runtime import Runtime

SAMPLE_CHUNK = 4096  # samples per device call in generate_names


@dataclass(frozen=True)
class TrainSettings:
    """Optimisation settings; defaults are microgpt's (steps_per_call is ours)."""

    num_steps: int = 1000
    batch_size: int = 1
    lr: float = 0.01
    beta1: float = 0.85
    beta2: float = 0.99
    eps: float = 1e-8
    seed: int = 42
    steps_per_call: int = 50

    def validate(self) -> None:
        """Raise ValueError naming the option when a setting is unusable."""
        for name in ("num_steps", "batch_size", "steps_per_call"):
            if getattr(self, name) < 1:
                opt = "--steps" if name == "num_steps" else f"--{name.replace('_', '-')}"
                raise ValueError(f"{opt} must be at least 1, got {getattr(self, name)}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"--lr must be a positive number, got {self.lr}")
        for name in ("beta1", "beta2"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if not (math.isfinite(self.eps) and self.eps > 0):
            raise ValueError(f"eps must be positive, got {self.eps}")
        if not 0 <= self.seed < 2**63:
            raise ValueError(f"--seed must be in [0, 2**63), got {self.seed}")


@dataclass
class TrainResult:
    """A finished run: the model on the device and what happened.

    losses: float32 [num_steps], the loss of each step before its update
    (mean negative log-likelihood per valid position, nats). tokens: number of
    valid positions trained on (sum of n_pos). n_cut: documents longer than
    block_size-1 characters, cut to fit.
    """

    model: Model
    vocab: Vocab
    settings: TrainSettings
    losses: np.ndarray
    n_docs: int
    n_cut: int
    tokens: int
    seconds: float

    def mean_loss(self, last: int = 100) -> float:
        """Mean loss of the last min(last, num_steps) steps."""
        return float(np.mean(self.losses[-last:]))

    def checkpoint(self, data: str = "") -> Checkpoint:
        """The model, Adam's moments and the settings, ready for checkpoint.save."""
        m, v = self.model.adam()
        s = self.settings
        return Checkpoint(self.model.config, list(self.vocab.chars), self.model.params(), m, v,
                          self.model.step(),
                          {"num_steps": s.num_steps, "lr": float(s.lr), "beta1": float(s.beta1),
                           "beta2": float(s.beta2), "eps": float(s.eps), "seed": s.seed,
                           "batch_size": s.batch_size, "data": data})


# progress(step, num_steps, mean loss since the last report, tokens per second since then)
Progress = Callable[[int, int, float, float], None]


def train(rt: Runtime, docs: list[str], settings: TrainSettings = TrainSettings(), *,
          n_embd: int = 16, n_head: int = 4, n_layer: int = 1, block_size: int = 16,
          mlp_width: int | None = None, progress: Progress | None = None,
          report_every: int = 100) -> TrainResult:
    """Train a fresh model (Model.init under settings.seed) on docs.

    The vocabulary comes from docs (data.Vocab); documents are shuffled as
    microgpt does (data.shuffled) and encoded by Vocab.encode. ``progress`` is
    called after the device call that crosses each multiple of report_every
    steps, and after the last step. Raises ValueError (naming the option) for
    bad settings or sizes, and the runtime's errors.
    """
    settings.validate()
    if not docs:
        raise ValueError("no documents to train on")
    vocab = Vocab.from_docs(docs)
    config = GPTConfig(vocab.size, n_embd, n_head, n_layer, block_size, mlp_width)
    config.validate()
    order = shuffled(docs, settings.seed)
    tokens, n_pos, n_cut = vocab.encode(order, block_size)
    model = Model.init(rt, config, settings.seed)
    S, B, K = settings.num_steps, settings.batch_size, settings.steps_per_call
    losses = np.empty(S, np.float32)
    start = last_t = time.perf_counter()
    total = last_tok = 0
    last_step = 0
    done = 0
    while done < S:
        k = min(K, S - done)
        idx = batch_indices(done, k, B, len(order))
        batch_n = n_pos[idx]
        losses[done:done + k] = model.train(tokens[idx], batch_n, S, settings.lr,
                                            settings.beta1, settings.beta2, settings.eps)
        done += k
        total += int(batch_n.sum())
        if progress is not None and (done // report_every > last_step // report_every or done == S):
            now = time.perf_counter()
            rate = (total - last_tok) / max(now - last_t, 1e-9)
            progress(done, S, float(np.mean(losses[last_step:done])), rate)
            last_t, last_tok, last_step = now, total, done
    rt.sync()
    return TrainResult(model, vocab, settings, losses, len(docs), n_cut, total,
                       time.perf_counter() - start)


def generate_names(model: Model, vocab: Vocab, n: int, temperature: float, seed: int,
                   chunk: int = SAMPLE_CHUNK) -> list[str]:
    """n samples (microgpt's inference loop) decoded to strings, in chunks of ``chunk``.

    Sample i uses the kernels' RNG stream i under seed, so the result does not
    depend on chunk. temperature 0 is greedy (argmax). Raises ValueError for a
    negative, NaN or infinite temperature or a negative n.
    """
    if n < 0:
        raise ValueError(f"the number of samples must be at least 0, got {n}")
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"--temperature must be a finite number >= 0, got {temperature}")
    out: list[str] = []
    for first in range(0, n, chunk):
        rows = model.generate(seed, min(chunk, n - first), temperature, first)
        out.extend(vocab.decode(r) for r in rows)
    return out
