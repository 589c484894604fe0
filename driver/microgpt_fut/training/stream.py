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

import numpy as np

from .checkpoint import Checkpoint
from ..data.datasets import Stream
from ..parallel.exchange import Exchange
from ..models.base import GPTConfigBase
from .run import Run
from .settings import Settings
from ..backend.runtime import Runtime
from ..data.text import TextData


class TextTraining(Run):
    """A run on a token stream (run.Run over a datasets.Stream), made from a TextData:
    ``start`` or ``resume``, then ``run``, then ``checkpoint``."""

    data = property(lambda self: self.dataset.data)

    @classmethod
    def start(cls, rt: Runtime, data: TextData, settings: Settings,
              config: GPTConfigBase, params: dict[str, np.ndarray] | None = None,
              init_from: str = "", exchange: Exchange | None = None,
              data_format: str = "text") -> "TextTraining":
        """A fresh run of config's family (GPT2Config: GPT-2, MicrogptConfig: microgpt) on the
        stream: the family's initialisation under settings.seed, or (``train
        --init-from``) the weights ``params`` (arrays of config's shapes) with the
        optimiser's moments at zero; ``init_from`` names that model in the checkpoint.
        Each step's windows are shared by the MPI ranks of ``exchange``, if given.
        data_format: "text" (a text file) or "tokens" (token shards), for the checkpoint.

        config.vocab_size must be the tokenizer's size, or (a model whose vocabulary
        is padded, like nanoGPT's 50304) larger. Raises ValueError naming the option
        for bad settings or sizes."""
        if config.vocab_size != data.vocab.size and not (
                params is not None and config.vocab_size > data.vocab.size):
            raise ValueError(f"vocab_size {config.vocab_size} does not match the text's "
                             f"{data.vocab.size}")
        return super().start(rt, Stream(data, data_format), settings, config, params,
                             init_from, exchange)

    @classmethod
    def resume(cls, rt: Runtime, ck: Checkpoint, data: TextData,
               settings: Settings, exchange: Exchange | None = None) -> "TextTraining":
        """The stream run saved in ck, continued on data (the same text or shards,
        checked by SHA-256: run.Run.resume; on the MPI ranks of ``exchange``, if given).
        Raises ValueError when it cannot continue."""
        if ck.arch == "gpt2" and ck.norms is None:
            raise ValueError("the checkpoint lacks its gradient norms ('train.grad_norms')")
        return super().resume(rt, ck, Stream(data, ck.data_format), settings, exchange)
