"""Training data for the benchmark, read through the driver's own classes.

``names``: data/names.txt (microgpt's 32k names), one document per line.
``shakespeare``: data/tinyshakespeare.txt cut into consecutive documents
of block_size - 1 characters (newlines kept), so BOS + doc + BOS fills a row.
Both are the driver's ``datasets.Lines`` (shuffled as microgpt does, ``random.seed(42);
random.shuffle``; a step's batch as ``microgpt-fut train`` takes it). GPT-2's GPU
configurations train on ``random_stream``: the driver's ``datasets.Stream`` over uniform
token ids (no tokenizer on the GPU machine), its windows drawn as nanoGPT's get_batch.
"""
from __future__ import annotations

import numpy as np

from microgpt_fut.data.datasets import Lines, Stream
from microgpt_fut.data.lines import DataInfo, Vocab, default_docs, docs_sha256, read_docs
from microgpt_fut.data.text import TextData
from microgpt_fut.data.tokenizer import CharVocab

from . import DATA_DIR


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
    ``config``, a MicrogptConfig), drawn with NumPy under ``seed``: the same weights go to
    our kernels (MicrogptModel.from_arrays) and to the PyTorch baseline."""
    rng = np.random.default_rng(seed)
    return {n: (std * rng.standard_normal(s, dtype=np.float32)).astype(np.float32)
            for n, s in config.shapes().items()}


def load(kind: str, block_size: int, seed: int = 42) -> Lines:
    """Dataset ``kind`` as the driver's Lines: shuffled under ``seed``, encoded for
    ``block_size``; ``batches(first, k, Settings(batch_size=B))`` gives steps first+1..
    first+k as ([K, 1, B, T+1], [K, 1, B], valid positions)."""
    docs, description = load_docs(kind, block_size)
    info = DataInfo(description, "", "utf-8", docs_sha256(docs), len(docs))
    return Lines(docs, info, Vocab.from_docs(docs), seed, block_size)


def random_stream(vocab_size: int, block_size: int, seed: int = 42,
                  n_tokens: int = 1 << 20) -> Stream:
    """n_tokens uniform token ids in [0, vocab_size) (NumPy under ``seed``) as the driver's
    Stream, all of them the train split: ``batches(first, k, Settings(batch_size=B))``
    gives ([K, 1, B, T+1] windows, None: every position counts, positions). The
    tokenizer is a stand-in of vocab_size characters; nothing decodes these ids."""
    tokens = np.random.default_rng(seed).integers(0, vocab_size, n_tokens, np.int64)
    vocab = CharVocab("".join(map(chr, range(0x10000, 0x10000 + vocab_size))))
    data = TextData(vocab, tokens, np.zeros(0, np.int64), block_size, 0.0, "random tokens",
                    "")
    return Stream(data, "tokens")
