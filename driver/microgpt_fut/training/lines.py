"""A run on documents, one per line (microgpt's names): ``Training``, run.Run over a
datasets.Lines made from the documents themselves.

microgpt's job: shuffle the documents once under the seed, then step s trains on
documents (s*B + i) % N (B = 1: ``docs[step % len(docs)]``) with Adam and a
learning rate decaying linearly to 0. Here K consecutive steps are fused into one
device call (``MicrogptModel.train``); the host only builds their [K, B, block_size+1] tokens.

A run (``Training``) can stop after any call, be written to a checkpoint and be
continued from it (``Training.resume``): the data order is a function of the
seed and the documents, and the cursor is step * batch_size, so a resumed run
computes exactly what the uninterrupted run would have.
"""
from __future__ import annotations

import numpy as np

from .checkpoint import Checkpoint
from ..data.lines import DataInfo, Vocab, docs_sha256
from ..data.datasets import Lines, other_documents
from ..parallel.exchange import Exchange
from ..models.base import GPTConfigBase
from .run import Run
from ..backend.runtime import Runtime


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
    def start(cls, rt: Runtime, docs: list[str], settings, config: GPTConfigBase,
              data: DataInfo | None = None, vocab: Vocab | None = None,
              params: dict[str, np.ndarray] | None = None,
              exchange: Exchange | None = None, init_from: str = "") -> "Training":
        """A fresh run on docs: the family's initialisation under settings.seed, or
        (``train --init-from``) the weights ``params`` (arrays of config's shapes) with
        the optimiser's moments at zero. config's class is the family (MicrogptConfig:
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
