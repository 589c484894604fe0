"""Text files of any size to llm.c token shards and the tokenizer beside them
(``microgpt-fut prepare``), as nanoGPT's data/*/prepare.py and llm.c's dev/data scripts
do it offline, once.

Streaming: the inputs are read in chunks of about a MiB cut at line ends, so memory
does not grow with them. With a character vocabulary a first pass collects the
characters; a BPE is trained on a bounded sample (the inputs' first bytes). Every
input file is one document: a tokenizer with an end-of-text token puts it before each
one (llm.c's convention). The validation split is the last ``val_fraction`` of all
tokens (nanoGPT's ``data[int(n*0.9):]``), or the tokens of the given validation files.
Each shard is written to a temporary file and renamed when whole; the same inputs and
options give the same bytes.
"""
from __future__ import annotations

import codecs
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from ..errors import DataError
from .shards import DTYPES, ShardWriter, version_for
from .tokenizer import CharVocab, Tokenizer

CHUNK_BYTES = 1 << 20


def iter_text(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[str]:
    """The UTF-8 text of a file in pieces that end at a line end (or, in a line longer
    than a chunk, after a space), a leading byte-order mark dropped.

    Raises DataError (one line naming the file) when it is missing, unreadable or
    empty, or at the byte offset of the first byte sequence that is not UTF-8.
    """
    where = f"input {str(path)!r}"
    try:
        f = open(path, "rb")
    except OSError as e:
        raise DataError(f"cannot read {where}: {e.strerror or e}") from None
    with f:
        offset, pending, carry, first = 0, b"", "", True
        while True:
            try:
                raw = f.read(chunk_bytes)
            except OSError as e:
                raise DataError(f"cannot read {where}: {e.strerror or e}") from None
            if first and not raw:
                raise DataError(f"{where} is empty")
            final = not raw
            data = pending + raw
            try:
                text, used = codecs.utf_8_decode(data, "strict", final)
            except UnicodeDecodeError as e:
                raise DataError(f"{where} is not valid UTF-8 at byte offset {offset + e.start}"
                                ) from None
            pending, offset, carry = data[used:], offset + used, carry + text
            if first and carry:
                carry, first = carry.removeprefix("\ufeff"), False
            if final:
                if carry:
                    yield carry
                return
            cut = carry.rfind("\n") + 1 or (carry.rfind(" ") + 1 if len(carry) > chunk_bytes
                                            else 0)
            if cut:
                yield carry[:cut]
                carry = carry[cut:]


def char_vocab(inputs: list[Path]) -> CharVocab:
    """The sorted characters of all inputs (nanoGPT's ``sorted(list(set(data)))``),
    read in one streaming pass."""
    chars: set[str] = set()
    for path in inputs:
        for piece in iter_text(path):
            chars.update(piece)
    return CharVocab("".join(sorted(chars)))


def text_sample(inputs: list[Path], limit_bytes: int) -> str:
    """The inputs' text, in order, up to the first line end at or after ``limit_bytes``
    bytes of UTF-8 (or all of it when shorter)."""
    out, n = [], 0
    for path in inputs:
        for piece in iter_text(path):
            raw = piece.encode("utf-8")
            if n + len(raw) >= limit_bytes:
                rest = raw[limit_bytes - n:]
                end = limit_bytes - n + (rest.find(b"\n") + 1 or len(rest))
                return "".join(out) + raw[:end].decode("utf-8")
            out.append(piece)
            n += len(raw)
    return "".join(out)


@dataclass
class Prepared:
    """What ``prepare`` wrote: the shards of each split, their token counts, the
    tokenizer file."""

    train: list[Path] = field(default_factory=list)
    val: list[Path] = field(default_factory=list)
    train_tokens: int = 0
    val_tokens: int = 0
    tokenizer: Path | None = None


def _existing(out: Path) -> list[Path]:
    return sorted(set(out.glob("*_train_*.bin")) | set(out.glob("*_val_*.bin"))
                  | set(out.glob("tokenizer.json")))


def prepare(inputs: list[Path], out: Path, tokenizer: Tokenizer, *, name: str = "data",
            shard_tokens: int = 100_000_000, val_fraction: float = 0.1,
            val_inputs: list[Path] = (), overwrite: bool = False,
            progress=None) -> Prepared:
    """Tokenize ``inputs`` (and ``val_inputs``) into llm.c shards in ``out``:
    ``{name}_train_{k:06d}.bin``, ``{name}_val_{k:06d}.bin`` and ``tokenizer.json``.

    tokenizer: any Tokenizer (CharVocab of the inputs, a BPE, a loaded one); tokens
    are uint16 shards (llm.c version 1) up to 65,536 tokens of vocabulary, else uint32
    (version 2). val_fraction in [0, 1): the last part of all tokens validates, unless
    val_inputs are given. progress: called with (bytes read, tokens written) after each
    piece (None: nothing).

    Raises DataError (one line naming the file or option) for an unreadable, empty or
    non-UTF-8 input, a character the tokenizer does not know, an ``out`` that holds
    shards or a tokenizer already (unless overwrite: then the old ones are replaced
    once the new ones are whole), an ``out`` that is a file, a bad shard_tokens or
    val_fraction, and a split left without tokens.
    """
    if shard_tokens < 1:
        raise DataError(f"--shard-tokens {shard_tokens} must be at least 1")
    if not 0 <= val_fraction < 1:
        raise DataError(f"--val-fraction {val_fraction} must be in [0, 1)")
    if out.exists() and not out.is_dir():
        raise DataError(f"--out {str(out)!r} is a file; give a folder")
    out.mkdir(parents=True, exist_ok=True)
    old = _existing(out)
    if old and not overwrite:
        raise DataError(f"--out {str(out)!r} already holds {old[0].name} (and "
                        f"{len(old) - 1} more): give another folder, or --overwrite")
    version = version_for(tokenizer.size)
    dtype = DTYPES[version]
    tmp = {s: out / f".prepare-{s}.tokens.partial" for s in ("train", "val")}
    writers = {s: ShardWriter(out, name, s, shard_tokens, version) for s in ("train", "val")}
    done = Prepared()
    try:
        counts = {"train": _tokenize(inputs, tokenizer, tmp["train"], dtype, progress)}
        counts["val"] = (_tokenize(list(val_inputs), tokenizer, tmp["val"], dtype, progress)
                         if val_inputs else 0)
        n_all = counts["train"]
        if val_inputs:
            sources = {"train": (tmp["train"], 0, n_all), "val": (tmp["val"], 0, counts["val"])}
        else:
            n_train = int(n_all * (1 - val_fraction))
            sources = {"train": (tmp["train"], 0, n_train), "val": (tmp["train"], n_train, n_all)}
        for split, (path, lo, hi) in sources.items():
            if hi - lo == 0 and (split == "train" or val_fraction > 0 or val_inputs):
                raise DataError(f"the {split} split would hold no tokens: give more input"
                                + ("" if split == "train" else " or a larger --val-fraction"))
            tokens = np.memmap(path, dtype=dtype, mode="r") if hi > lo else np.zeros(0, dtype)
            for i in range(lo, hi, CHUNK_BYTES):
                writers[split].write(tokens[i:min(hi, i + CHUNK_BYTES)])
            del tokens
        done.train, done.val = writers["train"].finish(), writers["val"].finish()
        done.train_tokens = sources["train"][2] - sources["train"][1]
        done.val_tokens = sources["val"][2] - sources["val"][1]
        done.tokenizer = out / "tokenizer.json"
        part = out / ".tokenizer.json.partial"
        part.write_text(tokenizer.to_json(), encoding="utf-8")
        os.replace(part, done.tokenizer)
    except BaseException:
        for w in writers.values():
            w.abort()
        raise
    finally:
        for p in tmp.values():
            p.unlink(missing_ok=True)
    for p in set(old) - set(done.train) - set(done.val) - {done.tokenizer}:
        p.unlink(missing_ok=True)  # an --overwrite's leftovers (more shards than now)
    return done


def _tokenize(files: list[Path], tok: Tokenizer, dest: Path, dtype, progress) -> int:
    """Every file's tokens, each file after the end-of-text token when there is one,
    appended to ``dest`` as raw ``dtype``; the number of tokens."""
    n = 0
    eot = tok.eot_id
    with open(dest, "wb") as f:
        for path in files:
            if eot is not None:
                f.write(np.array([eot], dtype).tobytes())
                n += 1
            for piece in iter_text(path):
                ids = tok.encode(piece, f"input {str(path)!r}")
                f.write(ids.astype(dtype).tobytes())
                n += len(ids)
                if progress is not None:
                    progress(len(piece.encode("utf-8")), len(ids))
    return n
