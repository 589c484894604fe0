"""The training loop and name generation, as plain Python functions (the CLI calls them).

microgpt's job: shuffle the documents once under the seed, then step s trains on
documents (s*B + i) % N (B = 1: ``docs[step % len(docs)]``) with Adam and a
learning rate decaying linearly to 0. Here K consecutive steps are fused into one
device call (``Model.train``); the host only builds their [K, B, block_size+1] tokens.

A run (``Training``) can stop after any call, be written to a checkpoint and be
continued from it (``Training.resume``): the data order is a function of the
seed and the documents, and the cursor is step * batch_size, so a resumed run
computes exactly what the uninterrupted run would have.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from .checkpoint import Checkpoint
from ..data.lines import DataInfo, Vocab, docs_sha256
from ..data.datasets import Lines
from ..parallel.exchange import Exchange
from .family import Adam, family_of
from ..models.microgpt import GPTConfig, Model
from ..pacing import CallPacer
from .run import Diverged, Progress, Run  # noqa: F401  (Diverged: its callers catch it here)
from ..backend.runtime import Runtime

SAMPLE_CHUNK = 4096  # samples per device call in generate_names


@dataclass(frozen=True)
class TrainSettings:
    """Optimisation settings; defaults are microgpt's (steps_per_call, threads are ours).

    threads > 1 (c backend only) trains each step's batch in shards on that many
    threads (data_parallel.DataParallelModel), at most one per document of the batch;
    1 keeps the whole run on the device (unless MPI ranks share the batch:
    ``Training.start``'s exchange).
    """

    num_steps: int = 1000
    batch_size: int = 1
    lr: float = 0.01
    beta1: float = 0.85
    beta2: float = 0.99
    eps: float = 1e-8
    seed: int = 42
    steps_per_call: int = 50
    threads: int = 1

    grad_accum = 1  # microgpt's recipe: one batch a step

    @property
    def optimizer(self) -> Adam:
        """The run's optimiser: microgpt's Adam (family.Adam)."""
        return Adam(self.lr, self.beta1, self.beta2, self.eps)

    def to_train(self) -> dict:
        """The checkpoint's ``train`` entries of these settings (the data's are the
        dataset's)."""
        return {"num_steps": self.num_steps, "lr": float(self.lr), "beta1": float(self.beta1),
                "beta2": float(self.beta2), "eps": float(self.eps), "seed": self.seed,
                "batch_size": self.batch_size}

    @property
    def contexts(self) -> int:
        """Kernel contexts a step is split over: threads, but no more than the batch's rows
        (with one, the whole run stays on the device and steps_per_call steps are fused)."""
        return min(self.threads, self.batch_size)

    def validate(self) -> None:
        """Raise ValueError naming the option when a setting is unusable."""
        for name in ("num_steps", "batch_size", "steps_per_call", "threads"):
            if getattr(self, name) < 1:
                opt = "--steps" if name == "num_steps" else f"--{name.replace('_', '-')}"
                raise ValueError(f"{opt} must be at least 1, got {getattr(self, name)}")
        self.optimizer.validate()
        if not 0 <= self.seed < 2**63:
            raise ValueError(f"--seed must be in [0, 2**63), got {self.seed}")


class Training(Run):
    """A microgpt-style run on documents (run.Run over a datasets.Lines), made from the
    documents themselves: ``start`` (fresh weights) or ``resume`` (a checkpoint).
    ``vocab``, ``order``, ``tokens``, ``n_pos``, ``n_cut`` and ``data`` are the
    dataset's (datasets.Lines)."""

    vocab = property(lambda self: self.dataset.vocab)
    order = property(lambda self: self.dataset.order)
    tokens = property(lambda self: self.dataset.tokens)
    n_pos = property(lambda self: self.dataset.n_pos)
    n_cut = property(lambda self: self.dataset.n_cut)
    data = property(lambda self: self.dataset.info)

    @classmethod
    def start(cls, rt: Runtime, docs: list[str], settings, config: GPTConfig,
              data: DataInfo | None = None, vocab: Vocab | None = None,
              params: dict[str, np.ndarray] | None = None,
              exchange: Exchange | None = None, init_from: str = "") -> "Training":
        """A fresh run on docs: the family's initialisation under settings.seed, or
        (``train --init-from``) the weights ``params`` (arrays of config's shapes) with
        the optimiser's moments at zero. config's class is the family (GPTConfig:
        microgpt, GPT2Config: GPT-2); settings: TrainSettings (microgpt's Adam) or
        text_training.TextSettings (any optimiser).

        vocab: the model's vocabulary (default: the data's, ``Vocab.from_docs(docs)``);
        config.vocab_size must be its size. exchange: an MPIExchange when MPI ranks
        share each batch. Raises ValueError (naming the option) for bad settings or
        sizes, and when a document has a character outside vocab.
        """
        settings.validate()
        config.validate()
        if not docs:
            raise ValueError("no documents to train on")
        vocab = vocab or Vocab.from_docs(docs)
        if config.vocab_size != vocab.size:
            raise ValueError(f"vocab_size {config.vocab_size} does not match the data's "
                             f"{vocab.size}")
        unknown = sorted(set("".join(docs)) - set(vocab.chars))
        if unknown:
            raise ValueError(f"the data has characters the model does not know: "
                             f"{''.join(unknown)!r}")
        data = data or DataInfo("", "", "utf-8", docs_sha256(docs), len(docs))
        dataset = Lines(docs, data, vocab, settings.seed, config.block_size)
        return super().start(rt, dataset, settings, config, params, init_from, exchange)

    @classmethod
    def resume(cls, rt: Runtime, ck: Checkpoint, docs: list[str], settings,
               data: DataInfo, exchange: Exchange | None = None) -> "Training":
        """The run saved in ck, continued on docs (which must be the run's own data).

        settings must be the checkpoint's (resume.settings_for gives them);
        only steps_per_call and threads may differ (and the MPI ranks: exchange, as
        in ``start``). Raises ValueError when docs are not the checkpoint's
        documents or ck cannot continue (no Adam moments or loss history, step
        beyond the total).
        """
        settings.validate()
        if ck.m is None or ck.v is None:
            raise ValueError("the checkpoint was loaded without Adam's moments")
        if data.sha256 != ck.train.get("data_sha256"):
            raise ValueError("the documents are not the ones the checkpoint was trained on")
        vocab = Vocab(tuple(ck.vocab))
        # a run started --init-from another model may know more characters than its data
        if not set("".join(docs)) <= set(vocab.chars):
            raise ValueError("the documents' characters differ from the checkpoint's vocabulary")
        if ck.losses is None:
            raise ValueError("the checkpoint has no loss history ('train.losses')")
        dataset = Lines(docs, data, vocab, settings.seed, ck.config.block_size)
        return super().resume(rt, ck, dataset, settings, exchange)


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
    training: Training | None = None

    def mean_loss(self, last: int = 100) -> float:
        """Mean loss of the last min(last, num_steps) steps."""
        return float(np.mean(self.losses[-last:]))

    def checkpoint(self, data: str = "") -> Checkpoint:
        """The model, Adam's moments, the settings and the losses, ready for checkpoint.save."""
        ck = self.training.checkpoint()
        if data:
            ck.train["data"] = data
        return ck


def train(rt: Runtime, docs: list[str], settings: TrainSettings = TrainSettings(), *,
          n_embd: int = 16, n_head: int = 4, n_layer: int = 1, block_size: int = 16,
          mlp_width: int | None = None, progress: Progress | None = None,
          report_every: int = 100) -> TrainResult:
    """Train a fresh model (Model.init under settings.seed) on docs, all steps.

    The vocabulary comes from docs (data.Vocab); documents are shuffled as
    microgpt does (data.shuffled) and encoded by Vocab.encode. ``progress`` as
    in ``Training.run``. Raises ValueError (naming the option) for bad settings
    or sizes, Diverged on a NaN or infinity, and the runtime's errors.
    """
    settings.validate()
    if not docs:
        raise ValueError("no documents to train on")
    config = GPTConfig(Vocab.from_docs(docs).size, n_embd, n_head, n_layer, block_size,
                       mlp_width)
    start = time.perf_counter()
    t = Training.start(rt, docs, settings, config)
    t.run(progress=progress, report_every=report_every)
    return TrainResult(t.model, t.vocab, settings, t.losses, len(docs), t.n_cut, t.positions,
                       time.perf_counter() - start, t)


def iter_names(model: Model, vocab: Vocab, n: int, temperature: float, seed: int,
               chunk: int | None = None) -> Iterator[list[str]]:
    """n samples (microgpt's inference loop) decoded to strings, a device call's worth
    at a time: ``chunk`` samples a call, or (None) as many as take about
    pacing.CALL_SECONDS, at most SAMPLE_CHUNK, so that a printer shows them as they
    come and Ctrl-C waits little.

    Sample i uses the kernels' RNG stream i under seed, so the samples do not
    depend on the chunks. temperature 0 is greedy (argmax). Raises ValueError for a
    negative, NaN or infinite temperature or a negative n.
    """
    if n < 0:
        raise ValueError(f"the number of samples must be at least 0, got {n}")
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"--temperature must be a finite number >= 0, got {temperature}")
    pacer = CallPacer(SAMPLE_CHUNK)
    first = 0
    while first < n:
        k = min(chunk, n - first) if chunk else pacer.next_k(first, n - first)
        t0 = time.perf_counter()
        rows = family_of(model.config).names(model, seed, k, temperature, first)
        pacer.record(k, time.perf_counter() - t0)
        first += k
        yield [vocab.decode(r) for r in rows]


def generate_names(model: Model, vocab: Vocab, n: int, temperature: float, seed: int,
                   chunk: int = SAMPLE_CHUNK) -> list[str]:
    """The samples of ``iter_names`` as one list (``chunk`` samples per device call)."""
    return [name for part in iter_names(model, vocab, n, temperature, seed, chunk)
            for name in part]
