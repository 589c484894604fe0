"""Training documents: reading them, the character vocabulary, tokens and batches.

Everything here follows microgpt.py (Karpathy): one document per line, stripped,
empty lines skipped; the vocabulary is the sorted set of characters with one
extra token BOS (= the number of characters) that starts and ends every document;
the documents are shuffled once with Python's ``random`` under the seed, and step
``s`` trains on document ``s % N`` (generalised here to batches of B documents).
"""
from __future__ import annotations

import codecs
import hashlib
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DataError, OptionConflict
from ..wording import counted, shown_path


def read_text(path: str | Path, encoding: str = "utf-8") -> str:
    """The whole text of a data file, decoded with ``encoding``.

    A UTF-8 byte-order mark at the start is dropped; nothing else is changed
    (line endings are kept). Raises DataError (one line naming the file) when
    the file is missing, is a directory, cannot be read, is empty (0 bytes),
    has bytes that are not valid in ``encoding`` (the message gives the line
    number and byte offset); OptionConflict when ``encoding`` is unknown.
    """
    path = Path(path)
    try:
        codec = codecs.lookup(encoding)
    except LookupError:
        raise OptionConflict(f"unknown encoding {encoding!r} (try --encoding utf-8 or "
                             "latin-1)") from None
    if not path.exists():
        raise DataError(f"data file {str(path)!r} does not exist")
    if path.is_dir():
        raise DataError(f"data file {str(path)!r} is a directory, not a text file (a folder "
                        "of token shards from `prepare` takes --data-format tokens)")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DataError(f"cannot read data file {str(path)!r}: {e.strerror or e}") from None
    if not raw:
        raise DataError(f"data file {str(path)!r} is empty")
    try:
        text = raw.decode(codec.name)
    except UnicodeDecodeError as e:
        line = raw[:e.start].decode(codec.name, errors="replace").count("\n") + 1
        raise DataError(f"data file {str(path)!r} is not valid {encoding} at line {line} "
                        f"(byte offset {e.start}): pass the right --encoding, "
                        f"e.g. --encoding latin-1") from None
    if codec.name == "utf-8" and text.startswith("\ufeff"):
        text = text[1:]
    return text


def read_docs(path: str | Path, encoding: str = "utf-8") -> list[str]:
    """The documents of a text file: one per line, stripped, empty lines skipped.

    Lines are split on ``\\n`` only and stripped with ``str.strip`` (microgpt:
    ``[l.strip() for l in text.split('\\n') if l.strip()]``). The file is read
    with ``read_text`` (a UTF-8 byte-order mark is dropped). A single document
    is fine.

    Raises DataError as ``read_text`` does, and when the file holds only blank lines.
    """
    path = Path(path)
    text = read_text(path, encoding)
    docs = [line.strip() for line in text.split("\n")]
    docs = [d for d in docs if d]
    if not docs:
        raise DataError(f"data file {str(path)!r} has no documents (only blank lines)")
    return docs


def default_docs() -> tuple[list[str], str]:
    """The built-in dataset: US first names from the PyPI package ``names`` (0.3.0).

    Its files ``dist.female.first`` then ``dist.male.first`` (US Census 1990),
    first column, lowercased, duplicates dropped, in file order. Returns
    (docs, description). Raises DataError when the package or its files are missing.
    """
    try:
        import names
    except ImportError:
        raise DataError("the built-in dataset needs the Python package 'names' "
                        "(pip install names==0.3.0), or pass --data FILE") from None
    folder = Path(names.__file__).resolve().parent
    docs: list[str] = []
    seen: set[str] = set()
    for fname in ("dist.female.first", "dist.male.first"):
        f = folder / fname
        try:
            lines = f.read_text(encoding="ascii").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise DataError(f"cannot read the built-in dataset {str(f)!r}: {e}") from None
        for line in lines:
            parts = line.split()
            if parts and parts[0].lower() not in seen:
                seen.add(parts[0].lower())
                docs.append(parts[0].lower())
    if not docs:
        raise DataError(f"the built-in dataset in {str(folder)!r} is empty")
    version = getattr(names, "__version__", "?")
    return docs, f"built-in: {len(docs)} US first names (PyPI package names {version}, US Census 1990)"


def load_docs(path: str | Path | None = None, encoding: str = "utf-8") -> tuple[list[str], str]:
    """(docs, description): ``read_docs(path)``, or ``default_docs()`` when path is None."""
    if path is None:
        return default_docs()
    docs = read_docs(path, encoding)
    return docs, f"{shown_path(path)}: {counted(len(docs), 'document')}"


def docs_sha256(docs: list[str]) -> str:
    """Hex SHA-256 of the documents in file order (joined by ``\\n``, UTF-8).

    It identifies the training data independently of line endings, blank lines,
    the byte-order mark and the file's encoding.
    """
    return hashlib.sha256("\n".join(docs).encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class DataInfo:
    """Where the documents came from, as stored in a checkpoint to resume on the same data.

    path: the file as an absolute path, "" for the built-in dataset; encoding: the
    encoding it was read with; sha256: ``docs_sha256(docs)``; n_docs: len(docs).
    """

    description: str
    path: str
    encoding: str
    sha256: str
    n_docs: int


def load_data(path: str | Path | None = None,
              encoding: str = "utf-8") -> tuple[list[str], DataInfo]:
    """(docs, DataInfo): like ``load_docs``, plus the identity of the data.

    Raises DataError as ``read_docs`` and ``default_docs`` do.
    """
    docs, description = load_docs(path, encoding)
    where = str(Path(path).resolve()) if path is not None else ""
    return docs, DataInfo(description, where, encoding, docs_sha256(docs), len(docs))


def shuffled(docs: list[str], seed: int) -> list[str]:
    """A copy of docs in microgpt's order: ``random.seed(seed); random.shuffle(docs)``."""
    out = list(docs)
    random.Random(seed).shuffle(out)
    return out


@dataclass(frozen=True)
class Vocab:
    """Characters in sorted order; token i is chars[i], token len(chars) is BOS."""

    chars: tuple[str, ...]

    @classmethod
    def from_docs(cls, docs: list[str]) -> "Vocab":
        """microgpt: ``uchars = sorted(set(''.join(docs)))``."""
        return cls(tuple(sorted(set("".join(docs)))))

    @property
    def bos(self) -> int:
        return len(self.chars)

    @property
    def size(self) -> int:
        """vocab_size = number of characters + 1 (BOS)."""
        return len(self.chars) + 1

    def encode(self, docs: list[str], block_size: int) -> tuple[np.ndarray, np.ndarray, int]:
        """Rows of training tokens for each document.

        Returns (tokens int64 [N, block_size+1], n_pos int64 [N], n_cut): row i is
        [BOS] + chars + [BOS] cut to block_size+1 tokens, or padded with BOS;
        n_pos[i] = min(block_size, len(doc)+1) positions count in the loss
        (microgpt: ``n = min(block_size, len(tokens) - 1)``); n_cut counts the
        documents whose BOS+doc+BOS is longer than block_size+1 tokens (those
        longer than block_size-1 characters). Raises KeyError on a character
        not in the vocabulary.
        """
        index = {c: i for i, c in enumerate(self.chars)}
        tokens = np.full((len(docs), block_size + 1), self.bos, dtype=np.int64)
        n_pos = np.empty(len(docs), dtype=np.int64)
        n_cut = 0
        for i, doc in enumerate(docs):
            ids = [index[c] for c in doc[:block_size]]
            tokens[i, 1:1 + len(ids)] = ids
            n_pos[i] = min(block_size, len(doc) + 1)
            n_cut += len(doc) + 2 > block_size + 1
        return tokens, n_pos, n_cut

    def decode(self, row) -> str:
        """Characters of a token row up to (not including) the first BOS."""
        out = []
        for t in row:
            t = int(t)
            if t == self.bos:
                break
            out.append(self.chars[t])
        return "".join(out)


def batch_indices(first_step: int, num_steps: int, batch_size: int, num_docs: int) -> np.ndarray:
    """Document indices for steps first_step..first_step+num_steps-1: int64 [K, B].

    Step s takes documents (s*B + i) % N for i < B; with B = 1 that is
    microgpt's ``docs[step % len(docs)]``.
    """
    steps = np.arange(first_step, first_step + num_steps, dtype=np.int64)[:, None]
    return (steps * batch_size + np.arange(batch_size, dtype=np.int64)) % num_docs
