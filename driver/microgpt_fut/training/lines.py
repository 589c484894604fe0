"""A run on documents, one per line (microgpt's names): ``Training``, run.Run over a
datasets.Lines made from the documents themselves.

microgpt's job: shuffle the documents once under the seed, then step s trains on
documents (s*B + i) % N (B = 1: ``docs[step % len(docs)]``) with Adam and a
learning rate decaying linearly to 0. Here K consecutive steps are fused into one
device call (``Model.train``); the host only builds their [K, B, block_size+1] tokens.

A run (``Training``) can stop after any call, be written to a checkpoint and be
continued from it (``Training.resume``): the data order is a function of the
seed and the documents, and the cursor is step * batch_size, so a resumed run
computes exactly what the uninterrupted run would have.

``train`` (a whole fresh run in one call) and ``TrainSettings`` are bench/worker.py's
(issue 36 item 3 moves bench onto the command line's own classes).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from .checkpoint import Checkpoint
from ..data.lines import DataInfo, Vocab, docs_sha256
from ..data.datasets import Lines, other_documents
from ..parallel.exchange import Exchange
from ..models.microgpt import GPTConfig, Model
from .run import Diverged, Progress, Run  # noqa: F401  (Diverged: its callers catch it here)
from .settings import Settings
from ..backend.runtime import Runtime


# bench/worker.py's name for the one Settings class (its defaults are microgpt's job)
TrainSettings = Settings


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
        microgpt, GPT2Config: GPT-2); settings: settings.Settings (either optimiser).

        vocab: the model's vocabulary (default: the data's, ``Vocab.from_docs(docs)``);
        config.vocab_size must be its size. exchange: an MPIExchange when MPI ranks
        share each batch. Raises ValueError (naming the option) for bad settings or
        sizes, and when a document has a character outside vocab.
        """
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

        settings must be the checkpoint's (training/plan.py gives them); only
        steps_per_call and threads may differ (and the MPI ranks: exchange, as in
        ``start``). Raises ValueError when docs are not the checkpoint's documents
        (run.Run.resume) or ck cannot continue.
        """
        vocab = Vocab(tuple(ck.vocab))
        # a run started --init-from another model may know more characters than its data
        if not set("".join(docs)) <= set(vocab.chars):
            raise ValueError(other_documents(data, ck.train))
        dataset = Lines(docs, data, vocab, settings.seed, ck.config.block_size)
        return super().resume(rt, ck, dataset, settings, exchange)


@dataclass
class TrainResult:
    """A finished run (``train``): the model on the device, its vocabulary, its settings,
    losses float32 [num_steps] (each step's loss before its update: the mean negative
    log-likelihood per valid position, nats), the documents, those cut to block_size,
    the valid positions trained on, the seconds it took, and the run itself."""

    model: Model
    vocab: Vocab
    settings: Settings
    losses: np.ndarray
    n_docs: int
    n_cut: int
    tokens: int
    seconds: float
    training: Training | None = None


def train(rt: Runtime, docs: list[str], settings: Settings = Settings(), *,
          n_embd: int = 16, n_head: int = 4, n_layer: int = 1, block_size: int = 16,
          mlp_width: int | None = None, progress: Progress | None = None,
          report_every: int = 100) -> TrainResult:
    """Train a fresh model (Model.init under settings.seed) on docs, all steps.

    The vocabulary comes from docs (data/lines.py's Vocab); documents are shuffled
    as microgpt does (``shuffled``) and encoded by Vocab.encode. ``progress`` as
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
