"""Training data for the benchmark, encoded as the CLI encodes it (microgpt_fut.data.lines).

``names``: data/names.txt (microgpt's 32k names), one document per line.
``shakespeare``: data/tinyshakespeare.txt cut into consecutive documents
of block_size - 1 characters (newlines kept), so BOS + doc + BOS fills a row.
Both are shuffled as microgpt does (``random.seed(42); random.shuffle``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from microgpt_fut.data.lines import Vocab, batch_indices, default_docs, read_docs, shuffled

from . import DATA_DIR


@dataclass
class Dataset:
    """Encoded documents: tokens int64 [N, block_size+1], n_pos int64 [N], the vocabulary."""

    kind: str
    description: str
    vocab: Vocab
    tokens: np.ndarray
    n_pos: np.ndarray

    def batches(self, first_step: int, num_steps: int, batch: int) -> tuple[np.ndarray, np.ndarray]:
        """Steps first_step.. of the run as the CLI takes them: ([K, B, T+1], [K, B])."""
        idx = batch_indices(first_step, num_steps, batch, len(self.n_pos))
        return self.tokens[idx], self.n_pos[idx]


def load_docs(kind: str, block_size: int) -> tuple[list[str], str]:
    """(documents, description) of dataset ``kind`` ("names" or "shakespeare").

    names.txt missing: the package's built-in names are used (the description says
    so). tinyshakespeare.txt missing: FileNotFoundError.
    """
    if kind == "names":
        path = DATA_DIR / "names.txt"
        if path.exists():
            docs = read_docs(path)
            return docs, f"names.txt ({len(docs)} names)"
        docs, _ = default_docs()
        return docs, f"built-in names ({len(docs)}; {path} missing)"
    if kind == "shakespeare":
        path = DATA_DIR / "tinyshakespeare.txt"
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing (needed for block_size > 16)")
        text = path.read_text(encoding="utf-8")
        n = max(1, block_size - 1)
        docs = [text[i:i + n] for i in range(0, len(text) - n + 1, n)]
        return docs, f"tinyshakespeare.txt in {len(docs)} chunks of {n} characters"
    raise ValueError(f"unknown dataset {kind!r}")


def init_params(config, seed: int, std: float = 0.08) -> dict[str, np.ndarray]:
    """microgpt's initialisation N(0, std) as float32 NumPy arrays (stacked shapes of
    ``config``, a GPTConfig), drawn with NumPy under ``seed``: the same weights go to
    our kernels (Model.from_arrays) and to the PyTorch baseline."""
    rng = np.random.default_rng(seed)
    return {n: (std * rng.standard_normal(s, dtype=np.float32)).astype(np.float32)
            for n, s in config.shapes().items()}


def load(kind: str, block_size: int, seed: int = 42) -> Dataset:
    """Dataset ``kind`` shuffled under ``seed`` and encoded for ``block_size``."""
    docs, description = load_docs(kind, block_size)
    vocab = Vocab.from_docs(docs)
    tokens, n_pos, _ = vocab.encode(shuffled(docs, seed), block_size)
    return Dataset(kind, description, vocab, tokens, n_pos)
