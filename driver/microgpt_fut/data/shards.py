"""Token shards on disk, read through memory maps: llm.c's ``.bin`` format and nanoGPT's
raw ``train.bin``/``val.bin``.

llm.c (dev/data/data_common.py ``write_datafile``): a header of 256 int32 (magic
20240520, version, token count, then zeros) followed by the tokens, uint16 for version
1 and uint32 for version 2. nanoGPT (data/*/prepare.py): the tokens alone, uint16,
with a ``meta.pkl`` beside them for a character vocabulary.

A split (train or val) is the concatenation of its shards in name order
(``TokenStream``): windows are drawn over it as nanoGPT's ``get_batch`` draws them
over one array (text.py), so memory does not grow with the data.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import re
from pathlib import Path

import numpy as np

from ..errors import DataError, OptionConflict
from ..wording import counted
from .text import TextData
from .tokenizer import CharVocab, Tokenizer, find_tokenizer_files, load_tokenizer

MAGIC = 20240520
HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4
DTYPES = {1: np.dtype("<u2"), 2: np.dtype("<u4")}  # llm.c's version -> token dtype
SAMPLE_BYTES = 1 << 16  # the part of each end of a shard that its digest reads


def header(n_tokens: int, version: int = 1) -> np.ndarray:
    """llm.c's shard header: int32 [256] = (MAGIC, version, n_tokens, 0, ...)."""
    h = np.zeros(HEADER_INTS, dtype="<i4")
    h[:3] = MAGIC, version, n_tokens
    return h


def version_for(vocab_size: int) -> int:
    """llm.c's version for a vocabulary: 1 (uint16 tokens) up to 65,536 tokens, else 2."""
    return 1 if vocab_size <= 1 << 16 else 2


def open_shard(path: str | Path) -> np.memmap:
    """The tokens of one llm.c shard, memory-mapped: uint16 or uint32 [n_tokens].

    Raises DataError (one line naming the file) when it is missing, shorter than the
    header, has another magic or an unknown version, or holds a different number of
    token bytes than its header says (a truncated or over-long file).
    """
    path = Path(path)
    where = f"token shard {str(path)!r}"
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            raw = f.read(HEADER_BYTES)
    except OSError as e:
        raise DataError(f"cannot read {where}: {e.strerror or e}") from None
    head = np.frombuffer(raw[:len(raw) // 4 * 4], dtype="<i4")
    if len(head) < HEADER_INTS:
        raise DataError(f"{where} has {size} bytes, less than llm.c's {HEADER_BYTES}-byte "
                        "header")
    if head[0] != MAGIC:
        raise DataError(f"{where}: magic {int(head[0])} is not llm.c's {MAGIC} (not a .bin "
                        "token shard)")
    version, n = int(head[1]), int(head[2])
    if version not in DTYPES:
        raise DataError(f"{where}: version {version} is not 1 (uint16) or 2 (uint32)")
    want = HEADER_BYTES + n * DTYPES[version].itemsize
    if n < 0 or size != want:
        raise DataError(f"{where}: its header says {n:,} tokens ({want:,} bytes), but the "
                        f"file has {size:,} bytes ({'truncated' if size < want else 'too long'})")
    if n == 0:
        return np.zeros(0, DTYPES[version])
    return np.memmap(path, dtype=DTYPES[version], mode="r", offset=HEADER_BYTES, shape=(n,))


def open_raw(path: str | Path) -> np.memmap:
    """nanoGPT's raw uint16 tokens (train.bin, val.bin), memory-mapped. Raises DataError
    for a missing, unreadable or odd-sized file."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as e:
        raise DataError(f"cannot read token file {str(path)!r}: {e.strerror or e}") from None
    if size % 2:
        raise DataError(f"token file {str(path)!r} has {size} bytes, not a whole number of "
                        "uint16 tokens")
    if size == 0:
        return np.zeros(0, "<u2")
    return np.memmap(path, dtype="<u2", mode="r")


def is_llmc(path: Path) -> bool:
    """True when the file starts with llm.c's magic."""
    with open(path, "rb") as f:
        head = f.read(4)
    return len(head) == 4 and int(np.frombuffer(head, "<i4")[0]) == MAGIC


class TokenStream:
    """The concatenation of token files, read lazily: ``len`` and integer-array indexing
    (``stream[idx]`` -> int64 array of idx's shape), as text.py's ``windows`` needs.

    files: the paths, in order; fmt: "llm.c" (a header) or "nanogpt" (raw uint16).
    Pickled as its paths (MPI ranks and --threads workers open the files themselves).
    """

    def __init__(self, files: list[Path], fmt: str):
        self.files, self.fmt = [Path(f) for f in files], fmt
        self.parts = [open_shard(f) if fmt == "llm.c" else open_raw(f) for f in self.files]
        self.ends = np.cumsum([len(p) for p in self.parts], dtype=np.int64)
        self.starts = self.ends - [len(p) for p in self.parts]

    def __reduce__(self):
        return TokenStream, (self.files, self.fmt)

    def __len__(self) -> int:
        return int(self.ends[-1]) if len(self.ends) else 0

    def __getitem__(self, idx) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= len(self)):
            raise IndexError(f"token index out of range [0, {len(self)})")
        out = np.empty(idx.shape, dtype=np.int64)
        part = np.searchsorted(self.ends, idx, side="right")
        for k in np.unique(part):  # a window may cross from one shard into the next
            sel = part == k
            out[sel] = self.parts[k][idx[sel] - self.starts[k]]
        return out

    def check_below(self, vocab_size: int, chunk: int = 1 << 22) -> None:
        """Raise DataError naming the file and position of the first token >= vocab_size.
        Read with plain reads of ``chunk`` tokens, not through the memory map, whose
        pages would stay in this process's resident set."""
        for path, part in zip(self.files, self.parts):
            offset = HEADER_BYTES if self.fmt == "llm.c" else 0
            with open(path, "rb") as f:
                f.seek(offset)
                for i in range(0, len(part), chunk):
                    block = np.frombuffer(f.read(chunk * part.dtype.itemsize), part.dtype)
                    if block.size and int(block.max()) >= vocab_size:
                        j = i + int(np.argmax(block >= vocab_size))
                        raise DataError(f"token shard {str(path)!r}: token {int(part[j])} at "
                                        f"position {j:,} is not below the vocabulary size "
                                        f"{vocab_size}")

    def identity(self) -> list[dict]:
        """Each file's name, size and SHA-256 of its first and last SAMPLE_BYTES (its
        header among them): what a checkpoint records of the data, without reading GBs."""
        out = []
        for path in self.files:
            size = path.stat().st_size
            h = hashlib.sha256()
            with open(path, "rb") as f:
                h.update(f.read(SAMPLE_BYTES))
                f.seek(max(0, size - SAMPLE_BYTES))
                h.update(f.read(SAMPLE_BYTES))
            out.append({"name": path.name, "bytes": size, "sha256": h.hexdigest()})
        return out


# --------------------------------------------------------------------------- meta.pkl

class _NamesAGlobal(pickle.UnpicklingError):
    """A pickle names a class or function (refused unrun)."""


class _MetaUnpickler(pickle.Unpickler):
    """Refuses every global: a crafted pickle cannot name a callable to run."""

    def find_class(self, module, name):
        raise _NamesAGlobal(f"it names {module}.{name}")


def _plain(x) -> bool:
    """A dict (nested allowed) whose keys and values are str or int."""
    if isinstance(x, dict):
        return all(isinstance(k, (str, int)) and (isinstance(v, (str, int)) or _plain(v))
                   for k, v in x.items())
    return False


def read_meta(path: str | Path) -> dict:
    """nanoGPT's meta.pkl (vocab_size, itos, stoi), unpickled with no global allowed and
    checked to be dicts of str and int only. Raises DataError (one line naming the
    file) otherwise: a pickle that names a class or function is refused unrun, and an
    empty, truncated or corrupt file is called so (not with pickle's own words)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DataError(f"cannot read {str(path)!r}: {e.strerror or e}") from None
    try:
        meta = _MetaUnpickler(io.BytesIO(raw)).load()
    except _NamesAGlobal as e:
        raise DataError(f"{str(path)!r} is refused: only a pickle of dicts of str and int "
                        f"is read ({e})") from None
    except Exception as e:  # noqa: BLE001 - pickle's errors of a damaged file are many
        truncated = isinstance(e, EOFError) or "truncated" in str(e)
        what = ("is empty" if not raw else "is truncated" if truncated else
                "is corrupt (not a pickle)")
        raise DataError(f"nanoGPT's {str(path)!r} {what}: make it again with nanoGPT's "
                        "prepare.py, or move it away and give --tokenizer PATH") from None
    if not _plain(meta):
        raise DataError(f"{str(path)!r} is refused: only a pickle of dicts of str and int is "
                        "read")
    return meta


# --------------------------------------------------------------------------- a folder

# llm.c's shard names: {name}_{split}_{index:06d}.bin (dev/data/fineweb.py), or one shard
# {name}_{split}.bin (dev/data/tinyshakespeare.py's tiny_shakespeare_val.bin)
SHARD_NAME = re.compile(r"(?P<name>.+)_(?P<split>train|val)(?:_(?P<index>\d{6}))?\.bin")


def shard_sets(folder: Path) -> dict[str, dict[str, list[Path]]]:
    """The llm.c shards of a folder grouped by name, then split: {name: {"train": [...],
    "val": [...]}}, each list in index order. A file counts only when its whole name is
    ``{name}_{split}_{index:06d}.bin`` or ``{name}_{split}.bin`` (``SHARD_NAME``); the
    name is what precedes the last ``_{split}`` (so a name that itself holds ``_train``
    or ``_val`` stays one name)."""
    sets: dict[str, dict[str, list[Path]]] = {}
    for path in sorted(folder.iterdir()):
        m = SHARD_NAME.fullmatch(path.name)
        if m and path.is_file():
            sets.setdefault(m["name"], {"train": [], "val": []})[m["split"]].append(path)
    return sets


def shard_file(path: Path) -> str | None:
    """What a file is when it is one token file of a set, for a message: "an llm.c token
    shard" (llm.c's magic, or named as its shards are: ``SHARD_NAME``), "nanoGPT's token
    file" (train.bin, val.bin); else None (an unreadable file too)."""
    path = Path(path)
    try:
        if SHARD_NAME.fullmatch(path.name) or is_llmc(path):
            return "an llm.c token shard"
    except OSError:
        return None
    return "nanoGPT's token file" if path.name in ("train.bin", "val.bin") else None


def find_splits(folder: str | Path) -> tuple[list[Path], list[Path], str]:
    """The train and val token files of a folder and their format ("llm.c" or
    "nanogpt"): llm.c's shards named exactly ``{name}_train_{k:06d}.bin`` and
    ``{name}_val_{k:06d}.bin`` (as its scripts and ``prepare`` write them), else
    nanoGPT's ``train.bin``/``val.bin`` (raw, or with llm.c's header).

    Raises DataError (one line naming the folder) when it does not exist or holds none,
    when the shards carry more than one name, a split both forms of llm.c's names, or
    nanoGPT's files beside them (which set to train on would be a guess), or when a
    name has validation shards but no training shards.
    """
    folder = Path(folder)
    if not folder.exists():
        raise DataError(f"--data {str(folder)!r} does not exist")
    if not folder.is_dir():
        raise DataError(f"--data {str(folder)!r} is not a folder of token shards "
                        "(--data-format tokens; make one with `microgpt-fut prepare`, or "
                        "train on a text file with --data-format text)")
    sets = shard_sets(folder)
    if len(sets) > 1:
        names = sorted(sets)
        raise DataError(f"--data {str(folder)!r} holds shards of {len(names)} names "
                        f"({', '.join(map(repr, names[:3]))}{', ...' if len(names) > 3 else ''})"
                        ": keep one set per folder (move the others away)")
    t, v = folder / "train.bin", folder / "val.bin"
    if sets:
        (name, split), = sets.items()
        if not split["train"]:
            raise DataError(f"--data {str(folder)!r}: the shards {name}_val_*.bin have no "
                            f"{name}_train_*.bin beside them")
        for which, files in split.items():
            whole = folder / f"{name}_{which}.bin"  # the unnumbered form, beside numbered ones:
            if whole in files and len(files) > 1:  # the same tokens twice?
                raise DataError(f"--data {str(folder)!r} holds {whole.name} beside "
                                f"{counted(len(files) - 1, 'numbered shard')} of the same "
                                "split: keep one form (move the other away)")
        if t.is_file() or v.is_file():
            raise DataError(f"--data {str(folder)!r} holds {name}'s shards and nanoGPT's "
                            f"{'train.bin' if t.is_file() else 'val.bin'}: keep one set per "
                            "folder (move the other away)")
        return split["train"], split["val"], "llm.c"
    if t.is_file():
        fmt = "llm.c" if is_llmc(t) else "nanogpt"
        return [t], [v] if v.is_file() else [], fmt
    raise DataError(f"--data {str(folder)!r} holds no token shards (NAME_train_000000.bin,"
                    " or train.bin): make them with `microgpt-fut prepare`")


def digest(identity: list[dict]) -> str:
    """SHA-256 of a shard set's identity (TokenStream.identity of train, then val)."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def shards_digest(folder: str | Path) -> str:
    """The digest of a folder's shard set (``digest`` of its train, then val shards'
    identities: what ``load_tokens`` records), without reading the tokens. Raises
    DataError as ``find_splits`` and ``open_shard`` do."""
    train_files, val_files, fmt = find_splits(folder)
    return streams_digest(TokenStream(train_files, fmt), TokenStream(val_files, fmt))


def streams_digest(train: TokenStream, val: TokenStream) -> str:
    """What a run records of its shards: ``digest`` of the train, then val identities."""
    return digest(train.identity() + val.identity())


# --------------------------------------------------------------------------- writing

class ShardWriter:
    """Writes one split's tokens into llm.c shards of at most ``shard_tokens`` tokens:
    ``{folder}/{name}_{split}_{k:06d}.bin``. Each shard is written to a hidden
    temporary file and renamed into place when whole, so an interrupted run leaves
    no half-written shard under a shard's name. ``written``: the finished paths."""

    def __init__(self, folder: Path, name: str, split: str, shard_tokens: int, version: int):
        self.folder, self.name, self.split = Path(folder), name, split
        self.shard_tokens, self.version = shard_tokens, version
        self.dtype = DTYPES[version]
        self.written: list[Path] = []
        self._f, self._n, self._tmp = None, 0, None

    def _open(self) -> None:
        final = self.folder / f"{self.name}_{self.split}_{len(self.written):06d}.bin"
        self._tmp = final.with_name(f".{final.name}.partial")
        self._final = final
        self._f = open(self._tmp, "wb")
        self._f.write(header(0, self.version).tobytes())  # the count is filled in at the end
        self._n = 0

    def write(self, tokens: np.ndarray) -> None:
        """Append tokens (any integer array, each below the dtype's range)."""
        tokens = np.asarray(tokens).astype(self.dtype, copy=False)
        while tokens.size:
            if self._f is None:
                self._open()
            take = tokens[:self.shard_tokens - self._n]
            self._f.write(take.tobytes())
            self._n += take.size
            tokens = tokens[take.size:]
            if self._n == self.shard_tokens:
                self._close()

    def _close(self) -> None:
        self._f.seek(0)
        self._f.write(header(self._n, self.version).tobytes())
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()
        os.replace(self._tmp, self._final)
        self.written.append(self._final)
        self._f = None

    def finish(self) -> list[Path]:
        """Close the last shard (if it holds tokens); the paths written."""
        if self._f is not None:
            if self._n:
                self._close()
            else:
                self._f.close()
                os.unlink(self._tmp)
                self._f = None
        return self.written

    def abort(self) -> None:
        """Remove the shard being written (its finished shards stay)."""
        if self._f is not None:
            self._f.close()
            self._tmp.unlink(missing_ok=True)
            self._f = None


# --------------------------------------------------------------------------- a dataset

def folder_tokenizer(folder: Path, fmt: str) -> Tokenizer | None:
    """The tokenizer stored with shards: ``tokenizer.json`` (or GPT-2's vocab.json and
    merges.txt), else nanoGPT's meta.pkl as a character vocabulary, else None."""
    if find_tokenizer_files(folder):
        return load_tokenizer(folder)
    meta = folder / "meta.pkl"
    if meta.is_file():
        m = read_meta(meta)
        itos = m.get("itos")
        if not isinstance(itos, dict) or not all(type(k) is int for k in itos) or \
                sorted(itos) != list(range(len(itos))) or \
                not all(isinstance(c, str) and len(c) == 1 for c in itos.values()):
            raise DataError(f"{str(meta)!r}: itos is not a map from 0..n-1 to characters")
        return CharVocab("".join(itos[i] for i in range(len(itos))))
    return None


def load_tokens(folder: str | Path, block_size: int,
                tokenizer: Tokenizer | None = None) -> TextData:
    """A folder of token shards as text.py's TextData, its splits memory-mapped
    (``TokenStream``): llm.c's shards (``prepare``'s) or nanoGPT's train.bin/val.bin.

    tokenizer: None takes the folder's (``folder_tokenizer``). Every token is checked
    to be below the tokenizer's size (read in chunks). ``sha256`` is the digest of the
    shard set's identity (names, sizes, samples), not of every byte.

    Raises DataError (one line naming the folder or file) when there are no shards, a
    shard is bad (``open_shard``), there is no tokenizer or a token is out of range;
    OptionConflict (naming --block-size, the sizes and the largest that both splits
    fit) when a split is shorter than block_size + 1 tokens (the val split may be
    absent).
    """
    folder = Path(folder)
    train_files, val_files, fmt = find_splits(folder)
    tok = tokenizer or folder_tokenizer(folder, fmt)
    if tok is None:
        raise DataError(f"--data {str(folder)!r} has no tokenizer.json (nor meta.pkl): give "
                        "--tokenizer PATH")
    train, val = TokenStream(train_files, fmt), TokenStream(val_files, fmt)
    # the largest block that both splits hold (the val split may be absent)
    fits = min(len(train), len(val) or len(train)) - 1
    for split, stream in (("training", train), ("validation", val)):
        stream.check_below(tok.size)
        n = len(stream)
        if (stream is train or n) and n < block_size + 1:
            more = ("a larger validation split (prepare's --val-fraction or --val)"
                    if stream is val else "shards of more text")
            fix = f"use --block-size {fits} or less, or {more}" if fits >= 1 else f"give {more}"
            raise OptionConflict(f"--data {str(folder)!r}: the {split} shards hold "
                                 f"{counted(n, 'token')}; --block-size {block_size} "
                                 f"needs at least {block_size + 1}: {fix}")
    return TextData(tok, train, val, block_size, 0.0, str(folder), streams_digest(train, val))
