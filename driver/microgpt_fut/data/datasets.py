"""A dataset as a run sees it: its identity, its tokenizer, a step's batches, evaluation.

Two kinds serve every model family (run.Run):

- ``Lines``: documents, one per line, each a row [BOS] + characters + [BOS]
  (microgpt's names; lines.py). The documents are shuffled once under the seed and
  step s takes documents (s*B + i) % N, so a step's rows depend only on (seed, s).
  No evaluation.
- ``Stream``: one stream of tokens (a text file, text.py, or token shards,
  shards.py) split into train and val; a step's A micro-batches of B random
  windows and the evaluation batches depend only on (seed, step) (text.TextData).

A checkpoint records ``data_format`` (lines, text or tokens) and the entries that
identify the data again at --resume (``train_entries``).
"""
from __future__ import annotations

from functools import cached_property
from pathlib import Path

import numpy as np

from .lines import DataInfo, Vocab, batch_indices, docs_sha256, shuffled
from .text import TextData


def other_documents(info: DataInfo, train: dict) -> str:
    """Why the documents ``info`` describes cannot resume the run of a checkpoint's
    ``train`` entries (they are not its documents): one line naming both sources."""
    source = repr(info.path) if info.path else "the built-in dataset"
    theirs = repr(train.get("data_path")) if train.get("data_path") else "the built-in dataset"
    return (f"refusing to resume on other data: {source} has {info.n_docs} documents that "
            f"differ from the {train.get('n_docs')} the checkpoint was trained on (from "
            f"{theirs}; SHA-256 {str(train.get('data_sha256'))[:12]}...): give --data the "
            "documents it was trained on")


def other_stream(path: str, data_format: str, train: dict) -> str:
    """Why the text file or shards' folder ``path`` (``data_format`` "text" or "tokens")
    cannot resume the run of a checkpoint's ``train`` entries (its SHA-256 differs):
    one line naming both paths and --data."""
    what = "shards" if data_format == "tokens" else "text"
    return (f"refusing to resume on other data: {str(path)!r} is not the {what} the "
            f"checkpoint was trained on ({train.get('data_path')!r}, SHA-256 "
            f"{str(train.get('data_sha256'))[:12]}...): give --data the {what} it was "
            "trained on")


class Lines:
    """Documents as rows (lines.Vocab.encode), in microgpt's order under ``seed``.

    docs: the documents in file order; info: where they came from (its sha256 is the
    identity a resume checks; None: the documents' own, no file); vocab: the model's
    characters with BOS (None: the documents', ``Vocab.from_docs``); block_size: T.
    Raises ValueError for no documents, KeyError for a character outside vocab
    (kinds.LinesKind.open refuses those first, naming the file).
    """

    data_format = "lines"
    evaluates = False

    def __init__(self, docs: list[str], info: DataInfo | None, vocab: Vocab | None, seed: int,
                 block_size: int):
        if not docs:
            raise ValueError("no documents to train on")
        self.docs = docs
        self.info = info or DataInfo("", "", "utf-8", docs_sha256(docs), len(docs))
        self.vocab = vocab or Vocab.from_docs(docs)
        self.order = shuffled(docs, seed)
        self.block_size = block_size

    @cached_property
    def _rows(self) -> tuple[np.ndarray, np.ndarray]:
        """(tokens int64 [N, T+1], n_pos int64 [N]) of the documents in order."""
        return self.vocab.encode(self.order, self.block_size)[:2]

    def prepare(self) -> None:
        """Encode the rows now (run.Run does, before its model and its timed calls): not
        when opened, as train's memory check (memory.py), which counts them, comes
        between."""
        self._rows  # noqa: B018 - the cached property's first read makes them

    @property
    def sha256(self) -> str:
        return self.info.sha256

    @property
    def has_val(self) -> bool:
        return False

    def batches(self, first: int, k: int, settings) -> tuple[np.ndarray, np.ndarray, int]:
        """Steps first+1..first+k: (tokens int64 [K, 1, B, T+1], n_pos int64 [K, 1, B],
        valid positions in all), B = settings.batch_size (lines.batch_indices)."""
        idx = batch_indices(first, k, settings.batch_size, len(self.order))
        tokens, n_pos = self._rows
        n_pos = n_pos[idx]
        return tokens[idx][:, None], n_pos[:, None], int(n_pos.sum())

    def train_entries(self, step: int, settings) -> dict:
        """The checkpoint's data entries: description, absolute path ("" built-in),
        sha256 of the documents, their number, encoding, cursor (step * B)."""
        d = self.info
        return {"data": d.description, "data_path": d.path, "data_sha256": d.sha256,
                "n_docs": d.n_docs, "encoding": d.encoding,
                "cursor": step * settings.batch_size}

    def checkpoint_vocab(self) -> tuple[list[str], None]:
        """(the checkpoint's ``vocab`` list, its tokenizer): the characters."""
        return list(self.vocab.chars), None


class Stream:
    """A token stream (text.TextData: a text file, or shards.load_tokens' shards) whose
    windows are drawn as nanoGPT's get_batch; ``data_format``: "text" or "tokens"."""

    evaluates = True

    def __init__(self, data: TextData, data_format: str = "text"):
        self.data, self.data_format = data, data_format

    def prepare(self) -> None:
        """Nothing to do: the tokens are read (or memory-mapped) already."""

    @property
    def sha256(self) -> str:
        return self.data.sha256

    @property
    def vocab(self):
        return self.data.vocab

    @property
    def has_val(self) -> bool:
        return len(self.data.val) > 0

    def batches(self, first: int, k: int, settings) -> tuple[np.ndarray, None, int]:
        """Steps first+1..first+k: (tokens int64 [K, A, B, T+1], None (every position
        counts), positions in all), A = settings.grad_accum (text.TextData.train_batch)."""
        s = settings
        tokens = np.stack([self.data.train_batch(t, s.seed, s.grad_accum, s.batch_size)
                           for t in range(first, first + k)])
        return tokens, None, k * s.grad_accum * s.batch_size * self.data.block_size

    def eval_batches(self, split: str, settings, step: int) -> np.ndarray:
        """nanoGPT estimate_loss's batches of ``split`` at ``step``: int64 [I, B, T+1]."""
        s = settings
        return self.data.eval_batches(split, s.seed, step, s.eval_iters, s.batch_size)

    def other_data(self, train: dict) -> str:
        """Why this stream cannot resume the run of a checkpoint's ``train`` entries (its
        SHA-256 differs): one line naming both paths."""
        return other_stream(self.data.path, self.data_format, train)

    def train_entries(self, step: int, settings, description: str = "") -> dict:
        """The checkpoint's data entries: description, absolute path, sha256 (of the file,
        or shards.py's digest of the shard set), its length and encoding, val_fraction,
        and the settings that only a stream reads (grad_accum, eval_every, eval_iters)."""
        d, s = self.data, settings
        return {"grad_accum": s.grad_accum, "eval_every": s.eval_every,
                "eval_iters": s.eval_iters, "data": description or d.path,
                "data_path": str(Path(d.path).resolve()), "data_sha256": d.sha256, "n_chars": d.n_chars, "encoding": d.encoding,
                "val_fraction": float(d.val_fraction)}

    def checkpoint_vocab(self):
        """(the checkpoint's ``vocab`` list, its tokenizer): a character vocabulary is
        stored as the list by checkpoint.save, any other tokenizer as its JSON."""
        return [], self.data.vocab
