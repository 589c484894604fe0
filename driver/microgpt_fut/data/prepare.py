"""Text files of any size to llm.c token shards and the tokenizer beside them
(``microgpt-fut prepare``), as nanoGPT's data/*/prepare.py and llm.c's dev/data scripts
do it offline, once.

Streaming: the inputs are read in chunks of about a MiB, cut where the tokenizer splits
anyway (``iter_text``), so memory does not grow with them and the tokens are those of
the whole text. With a character vocabulary a first pass collects the
characters (of the validation files too); a BPE is trained on a bounded sample (the
train split's first bytes). Every
input file is one document: a tokenizer with an end-of-text token puts it before each
one (llm.c's convention). The validation split is the last ``val_fraction`` of all
tokens (nanoGPT's ``data[int(n*0.9):]``), or the tokens of the given validation files.
The whole set is written to a hidden folder inside --out and moved into place at the
end, so a failure or a signal leaves --out as it was; the same inputs and options give
the same bytes.
"""
from __future__ import annotations

import codecs
import contextlib
import errno
import math
import os
import re
import shutil
import stat
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from ..errors import DataError, OptionConflict, Stopped
from .shards import DTYPES, ShardWriter, shard_sets, version_for
from .tokenizer import CharVocab, HFTokenizer, Tokenizer

CHUNK_BYTES = 1 << 20
# A BPE learns from at most this part of the train split's bytes: the split is made in
# tokens, after, and prepare refuses a sample that reaches past it (``learned_bytes``).
TRAIN_MARGIN = 0.98
STAGE_PREFIX = ".prepare-"  # the hidden folder inside --out where a new set is written
NAME_MAX = 255  # bytes of a file name (Linux, macOS)
SHARD_SUFFIX = "_train_000000.bin.partial."  # the longest name --name is part of, and a dot


def _cut(text: str, seps: str) -> int:
    """The last index i > 0 where text[i] is one of ``seps`` (whitespace) and text[i-1]
    is not whitespace, else 0. GPT-2's pre-tokenizer never joins a non-space character
    with the whitespace after it (its pattern's only prefix is one space, before a
    word), so cutting there gives the same tokens as the whole text (a character
    vocabulary cuts anywhere)."""
    for sep in seps:
        i = text.rfind(sep)
        while i > 0:
            if not text[i - 1].isspace():
                return i
            i = text.rfind(sep, 0, i)
    return 0


def file_label(path: Path, val: bool = False) -> str:
    """How messages name a file given to prepare: "input 'x.txt'" or "--val file 'v.txt'"."""
    return f"{'--val file' if val else 'input'} {str(path)!r}"


def iter_text(path: Path, chunk_bytes: int = CHUNK_BYTES, where: str | None = None
              ) -> Iterator[str]:
    """The UTF-8 text of a file in pieces of about ``chunk_bytes``, a leading byte-order
    mark dropped. Each piece but the last ends just before a line end (or, in a line
    longer than a chunk, before a space) that follows a non-space character, where
    GPT-2's byte-level BPE splits anyway (``_cut``): the tokens of the pieces are the
    tokens of the whole text. A line without such a place is read whole.

    Raises DataError (one line naming the file as ``where`` says, default
    ``file_label``) when it is missing, a folder, unreadable or empty, or at the byte
    offset of the first byte sequence that is not UTF-8.
    """
    where = where or file_label(path)
    try:
        f = open(path, "rb")
    except IsADirectoryError:
        raise DataError(_folder_message(where)) from None
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
                raise DataError(f"{where} is not valid UTF-8 at byte offset {offset + e.start}: "
                                "convert it to UTF-8 first (e.g. iconv -f latin1 -t utf-8)"
                                ) from None
            pending, offset, carry = data[used:], offset + used, carry + text
            if first and carry:
                carry, first = carry.removeprefix("\ufeff"), False
            if final:
                if carry:
                    yield carry
                return
            cut = _cut(carry, "\n\r") or (_cut(carry, " \t") if len(carry) > chunk_bytes
                                          else 0)
            if cut:
                yield carry[:cut]
                carry = carry[cut:]


def _folder_message(where: str) -> str:
    return f"{where} is a folder, not a text file: give the files in it (e.g. DIR/*.txt)"


def check_rereadable(inputs: list[Path], why: str, val_inputs: list[Path] = ()) -> None:
    """Raise DataError naming the first input (or --val file) that exists but is a
    folder, or not a regular file (a pipe such as /dev/stdin): it cannot be read a
    second time, as ``why`` needs."""
    for path, val in [(p, False) for p in inputs] + [(p, True) for p in val_inputs]:
        try:
            mode = path.stat().st_mode if path.exists() else stat.S_IFREG
        except OSError:
            continue  # iter_text names what is wrong with it
        if stat.S_ISDIR(mode):
            raise DataError(_folder_message(file_label(path, val)))
        if not stat.S_ISREG(mode):
            raise DataError(f"{file_label(path, val)} is not a regular file (a pipe?): {why} "
                            "reads the inputs twice; save it to a file first, or give "
                            "--tokenizer PATH (read once)")


def check_distinct(inputs: list[Path], val_inputs: list[Path]) -> None:
    """Raise OptionConflict naming both when a file is given twice (the same path once
    resolved, or the same inode: a symlink or hard link), among the inputs or the --val
    files, or as both: its tokens would be counted twice, or the validation text
    trained on. Paths that cannot be stat'ed are left to ``iter_text`` to name."""
    seen: dict[tuple, tuple[str, Path]] = {}
    for role, path in [("input", p) for p in inputs] + [("--val", p) for p in val_inputs]:
        try:
            st = path.stat()
            key = (st.st_dev, st.st_ino)
        except OSError:
            key = ("path", os.path.realpath(path))
        if key in seen:
            first_role, first = seen[key]
            same = "" if str(first) == str(path) else f" (as {str(first)!r})"
            if first_role == role:
                what = "input" if role == "input" else "--val file"
                raise OptionConflict(f"{role} {str(path)!r} is given twice{same}: give "
                                     f"each {what} once")
            raise OptionConflict(f"--val {str(path)!r} is also an input{same}: the validation "
                                 "text would be trained on; give a --val file that is not an "
                                 "input, or --val-fraction instead")
        seen[key] = (role, path)


def char_vocab(inputs: list[Path], should_stop=None, val_inputs: list[Path] = ()
               ) -> CharVocab:
    """The sorted characters of all inputs and ``val_inputs`` (nanoGPT's
    ``sorted(list(set(data)))``), read in one streaming pass. should_stop: polled
    after each piece; ``Stopped`` is raised when it returns true."""
    chars: set[str] = set()
    for path, val in [(p, False) for p in inputs] + [(p, True) for p in val_inputs]:
        for piece in iter_text(path, where=file_label(path, val)):
            chars.update(piece)
            if should_stop is not None and should_stop():
                raise Stopped()
    return CharVocab("".join(sorted(chars)))


def text_sample(inputs: list[Path], limit_bytes: int) -> list[str]:
    """The inputs' first ``limit_bytes`` bytes of UTF-8 text at most, one str per input
    in order (all of them when shorter). The last is cut after the last word that
    ends before whitespace (where GPT-2's pre-tokenizer splits anyway) within the
    limit, else at the last whole character: a line of any length is cut inside, so
    that the sample lies within the train split (``prepare`` checks it)."""
    out, n = [], 0
    for path in inputs:
        doc = []
        for piece in iter_text(path):
            raw = piece.encode("utf-8")
            if n + len(raw) > limit_bytes:
                head = len(raw[:limit_bytes - n].decode("utf-8", "ignore"))
                return out + ["".join(doc) + piece[:_last_word_end(piece, head)]]
            doc.append(piece)
            n += len(raw)
        out.append("".join(doc))
    return out


def _last_word_end(text: str, limit: int) -> int:
    """The last index i in (0, limit] where text[i] is whitespace and text[i-1] is not,
    else ``limit``."""
    ends = [m.end() for m in re.finditer(r"\S(?=\s)", text[:limit + 1])]
    return ends[-1] if ends else limit


def _token_bytes(tokenizer: Tokenizer) -> np.ndarray:
    """The bytes of text that each token id stands for: int64 [size]. A byte-level
    BPE's token strings hold one character per byte (an added token such as
    <|endoftext|> is its text); any other tokenizer's tokens are decoded one by one."""
    if isinstance(tokenizer, HFTokenizer) and tokenizer.byte_level():
        names = (tokenizer.tok.id_to_token(i) or "" for i in range(tokenizer.size))
        return np.fromiter(map(len, names), np.int64, count=tokenizer.size)
    return np.fromiter((len(tokenizer.decode([i]).encode("utf-8"))
                        for i in range(tokenizer.size)), np.int64, count=tokenizer.size)


def _learned_in_train(tokens: np.ndarray, doc_tokens: list[int], eot: bool,
                      learned_bytes: list[int], n_train: int, sizes: np.ndarray) -> int | None:
    """None when the first ``learned_bytes[k]`` bytes of each document k lie within the
    first ``n_train`` of ``tokens`` (the documents' tokens one after the other, each
    after an end-of-text token when ``eot``; ``sizes``: the bytes of each token id),
    else the bytes of the sample that they cover. Every token holds a byte at least,
    so no more tokens than the sample's bytes are read."""
    covered, start = 0, 0
    for k, want in enumerate(learned_bytes):
        lo, got = start + eot, 0
        end = min(n_train, start + doc_tokens[k])
        while got < want and lo < end:
            hi = min(end, lo + want - got, lo + CHUNK_BYTES)
            got += int(sizes[tokens[lo:hi]].sum())
            lo = hi
        covered += min(got, want)
        if got < want:
            return covered
        start += doc_tokens[k]
    return None


def _suggest_mb(n_bytes: int) -> str:
    """A --bpe-sample-mb value below ``n_bytes`` bytes: 90% of them, 2 significant
    digits rounded down (e.g. 0.077)."""
    x = n_bytes * 0.9 / 1e6
    if x <= 0:
        return "0.000001"
    q = 10.0 ** (math.floor(math.log10(x)) - 1)
    return f"{math.floor(x / q) * q:.{max(0, 1 - math.floor(math.log10(x)))}f}"


@dataclass
class Prepared:
    """What ``prepare`` wrote: the shards of each split, their token counts, the
    tokenizer file."""

    train: list[Path] = field(default_factory=list)
    val: list[Path] = field(default_factory=list)
    train_tokens: int = 0
    val_tokens: int = 0
    tokenizer: Path | None = None


def check_name(name: str) -> None:
    """Raise OptionConflict (one line saying why) unless ``name`` is a plain file name:
    not empty, not . or .., no separator, no NUL or other control character (a newline
    would break every listing of the shards), short enough that its shards' names fit
    in 255 bytes; so that every shard stays inside --out."""
    why = ("is empty" if not name else
           "names a folder ('.' is --out itself, '..' the one above)" if name in (".", "..")
           else "holds a '/'" if "/" in name or (os.altsep and os.altsep in name) else
           "holds a control character (such as a newline)"
           if any(ord(c) < 32 or ord(c) == 127 for c in name) else
           f"is too long ({len(name.encode('utf-8'))} bytes: its shard names must fit in "
           f"{NAME_MAX} bytes, so at most {NAME_MAX - len(SHARD_SUFFIX)})"
           if len((name + SHARD_SUFFIX).encode("utf-8")) > NAME_MAX else "")
    if why:
        raise OptionConflict(f"--name {name!r} {why}: give a plain file name "
                             "(e.g. --name shakespeare)")


# The files besides llm.c's shards that a token folder is read from (shards.load_tokens):
# the tokenizer (``folder_tokenizer``) and nanoGPT's set (``find_splits``).
SET_FILES = ("tokenizer.json", "vocab.json", "merges.txt", "train.bin", "val.bin", "meta.pkl")


def _existing(out: Path) -> list[Path]:
    """The shard sets, tokenizer files and nanoGPT set that ``out`` holds (what
    --overwrite replaces: a train run on --out would read them)."""
    if not out.is_dir():
        return []
    sets = shard_sets(out)
    found = [p for split in sets.values() for ps in split.values() for p in ps]
    return sorted(found + [p for p in map(out.joinpath, SET_FILES)
                           if p.is_file() or p.is_symlink()])


def check_out_folder(out: Path) -> None:
    """Raise DataError when ``out`` or a folder above it is a file."""
    for p in (out, *out.parents):
        if p.exists() or p.is_symlink():
            if not p.is_dir():
                raise DataError(f"--out {str(out)!r}: {str(p)!r} is a file, not a folder; "
                                "give a folder")
            return


def remove_stale(out: Path) -> None:
    """Remove the hidden folders (``.prepare-*``) that a killed ``prepare`` left in
    ``out``. Call it only while holding --out's lock: then no other run is writing one."""
    if out.is_dir():
        for stage in stages(out):
            remove_tree(stage)


def stages(out: Path) -> list[Path]:
    """The hidden folders (``.prepare-*``) of unfinished sets in ``out``."""
    try:
        return sorted(p for p in out.glob(f"{STAGE_PREFIX}*") if p.is_dir() and not p.is_symlink())
    except OSError:
        return []


def missing_parents(out: Path) -> list[Path]:
    """The folders above ``out`` that do not exist yet (that making it would make),
    innermost first."""
    missing = []
    for p in Path(os.path.abspath(out)).parents:
        if p.exists() or p.is_symlink():
            break
        missing.append(p)
    return missing


def remove_empty(folders: list[Path]) -> None:
    """Remove each of ``folders`` (innermost first) that is empty; stop at one that is
    not (something else was put there)."""
    for p in folders:
        try:
            p.rmdir()
        except FileNotFoundError:
            continue
        except OSError:
            return


def remove_tree(folder: Path, tries: int = 100) -> bool:
    """Remove ``folder`` and all in it, also while another thread still writes into it (a
    second signal's cleanup runs beside the main thread). The folder is first renamed
    aside (atomic), so that the writer's next file, made by the old path, fails instead
    of refilling it; rmtree is repeated should a file still land. True when it is gone."""
    target = folder
    with contextlib.suppress(OSError):
        aside = folder.with_name(folder.name + "-removing")
        os.rename(folder, aside)
        target = aside
    for _ in range(tries):
        shutil.rmtree(target, ignore_errors=True)
        if not (target.exists() or target.is_symlink()):
            return not (folder.exists() or folder.is_symlink())
    return False


def out_error(out: Path, e: OSError) -> DataError:
    """An OSError met writing --out as one line naming it."""
    return DataError(f"cannot write --out {str(out)!r}: {e.strerror or e}"
                     + (" (give a folder you can write)" if e.errno in
                        (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR) else ""))


def prepare(inputs: list[Path], out: Path, tokenizer: Tokenizer, *, name: str = "data",
            shard_tokens: int = 100_000_000, val_fraction: float = 0.1,
            val_inputs: list[Path] = (), overwrite: bool = False,
            progress=None, learned_bytes: list[int] = (), should_stop=None,
            cleanups: list | None = None) -> Prepared:
    """Tokenize ``inputs`` (and ``val_inputs``) into llm.c shards in ``out``:
    ``{name}_train_{k:06d}.bin``, ``{name}_val_{k:06d}.bin`` and ``tokenizer.json``
    (a file that ``tokenizers.Tokenizer.from_file`` loads; a character vocabulary as
    ``CharVocab.hf_tokenizer``).

    tokenizer: any Tokenizer (CharVocab of the inputs, a BPE, a loaded one); tokens
    are uint16 shards (llm.c version 1) up to 65,536 tokens of vocabulary, else uint32
    (version 2). val_fraction in [0, 1): the last part of all tokens validates, unless
    val_inputs are given. progress: called with (bytes read, tokens written) after each
    piece (None: nothing). learned_bytes: how many of the first bytes of each input the
    tokenizer was trained on (``text_sample``); they must all lie within the train
    split (the text of its tokens).
    should_stop: polled after each piece and each shard chunk; when it returns true,
    ``Stopped`` is raised. cleanups: a list to which the function that removes the
    unfinished set is appended while it is being written (for a second signal, which
    ends the process at once; run from another thread, it waits for a swap under way
    and puts back an old set that was just moved out), and removed after.

    The whole set is written to a hidden folder inside ``out`` and moved into place
    at the end, the old set (``overwrite``) moved out first: any failure leaves
    ``out`` as it was (a folder that ``prepare`` made is removed again).

    Raises DataError (one line naming the file or option) for an unreadable, empty or
    non-UTF-8 input, a character the tokenizer does not know, an ``out`` that holds
    shards or a tokenizer already (unless overwrite), an ``out`` that is a file or
    cannot be written, a bad name, shard_tokens or val_fraction, a split left without
    tokens, and a tokenizer that learned from the val split; Stopped as above.
    """
    if shard_tokens < 1:
        raise OptionConflict(f"--shard-tokens {shard_tokens} must be at least 1")
    if not 0 <= val_fraction < 1:
        raise OptionConflict(f"--val-fraction {val_fraction} must be in [0, 1)")
    check_name(name)
    check_out_folder(out)
    old = _existing(out)
    if old and not overwrite:
        raise DataError(f"--out {str(out)!r} already holds {old[0].name} (and "
                        f"{len(old) - 1} more): give another folder, or --overwrite")
    made = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=STAGE_PREFIX, dir=out))
    except OSError as e:
        raise out_error(out, e) from None

    # The swap and the end are guarded against a second signal's cleanup (run by another
    # thread while this one goes on): it waits for a swap under way, and puts the old set
    # back from the hidden folder when the new one is in but the run has not finished.
    guard, swapped, finished = threading.RLock(), [], []

    def remove_stage():
        remove_tree(stage)
        if made:
            with contextlib.suppress(OSError):
                out.rmdir()  # only when nothing else was put there meanwhile

    def second_signal():
        with guard:
            if finished:
                return
            if swapped:
                _undo_swap(out, *swapped[0])
            remove_stage()

    if cleanups is not None:
        cleanups.append(second_signal)
    try:
        done = _write_set(inputs, stage, tokenizer, name, shard_tokens, val_fraction,
                          list(val_inputs), progress, list(learned_bytes), should_stop or bool)
        with guard:
            _swap_in(stage, out, old, done, swapped)
    except OSError as e:
        raise out_error(out, e) from None
    finally:
        with guard:
            finished.append(True)
            remove_stage()
        if cleanups is not None:
            cleanups.remove(second_signal)
    return done


def _write_set(inputs, stage: Path, tokenizer: Tokenizer, name: str, shard_tokens: int,
               val_fraction: float, val_inputs: list[Path], progress, learned_bytes: list[int],
               should_stop) -> Prepared:
    """prepare's whole set, written in ``stage``; the paths are those in ``stage``."""
    version = version_for(tokenizer.size)
    dtype = DTYPES[version]
    tmp = {s: stage / f"{s}.tokens" for s in ("train", "val")}
    writers = {s: ShardWriter(stage, name, s, shard_tokens, version) for s in ("train", "val")}
    doc_tokens = _tokenize(inputs, tokenizer, tmp["train"], dtype, progress, should_stop)
    counts = {"train": sum(doc_tokens)}
    counts["val"] = (sum(_tokenize(val_inputs, tokenizer, tmp["val"], dtype, progress,
                                   should_stop, val=True)) if val_inputs else 0)
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
    if any(learned_bytes) and not val_inputs:
        n_train = sources["train"][2]
        covered = _learned_in_train(np.memmap(tmp["train"], dtype=dtype, mode="r"), doc_tokens,
                                    tokenizer.eot_id is not None, learned_bytes, n_train,
                                    _token_bytes(tokenizer))
        if covered is not None:
            raise DataError(f"the BPE learned from the inputs' first {sum(learned_bytes):,} "
                            f"bytes, but the train split's {n_train:,} tokens hold only the "
                            f"first {covered:,}: give --bpe-sample-mb {_suggest_mb(covered)} "
                            "(or less), or a smaller --val-fraction")
    for split, (path, lo, hi) in sources.items():
        tokens = np.memmap(path, dtype=dtype, mode="r") if hi > lo else np.zeros(0, dtype)
        for i in range(lo, hi, CHUNK_BYTES):
            if should_stop():
                raise Stopped()
            writers[split].write(tokens[i:min(hi, i + CHUNK_BYTES)])
        del tokens
    done = Prepared(writers["train"].finish(), writers["val"].finish(),
                    sources["train"][2] - sources["train"][1],
                    sources["val"][2] - sources["val"][1], stage / "tokenizer.json")
    text = (tokenizer.hf_tokenizer().to_str() if isinstance(tokenizer, CharVocab)
            else tokenizer.to_json())
    with open(done.tokenizer, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    for p in tmp.values():
        p.unlink(missing_ok=True)
    return done


def _undo_swap(out: Path, trash: Path, moved_old: list[Path], moved_new: list[Path]) -> None:
    """Put back what ``_swap_in`` moved: the new files (``moved_new``, their paths in the
    stage) from ``out`` to the stage, the old ones (``moved_old``) from ``trash``."""
    for p in moved_new:
        with contextlib.suppress(OSError):
            os.replace(out / p.name, p)
    for p in moved_old:
        with contextlib.suppress(OSError):
            os.replace(trash / p.name, p)


def _swap_in(stage: Path, out: Path, old: list[Path], done: Prepared,
             swapped: list | None = None) -> None:
    """Move the old set (``old``) into ``stage/.old`` and the new one from ``stage`` into
    ``out``; ``done``'s paths then point into ``out``. Undone when a move fails; when it
    succeeds, ``swapped`` gets what ``_undo_swap`` needs to undo it."""
    trash = stage / ".old"
    trash.mkdir()
    new = [*done.train, *done.val, done.tokenizer]
    moved_old, moved_new = [], []
    try:
        for p in old:
            os.replace(p, trash / p.name)
            moved_old.append(p)
        for p in new:
            os.replace(p, out / p.name)
            moved_new.append(p)
    except BaseException:
        _undo_swap(out, trash, moved_old, moved_new)
        raise
    if swapped is not None:
        swapped.append((trash, moved_old, moved_new))
    done.train = [out / p.name for p in done.train]
    done.val = [out / p.name for p in done.val]
    done.tokenizer = out / done.tokenizer.name
    with contextlib.suppress(OSError):
        fd = os.open(out, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _tokenize(files: list[Path], tok: Tokenizer, dest: Path, dtype, progress,
              should_stop, val: bool = False) -> list[int]:
    """Every file's tokens, each file after the end-of-text token when there is one,
    appended to ``dest`` as raw ``dtype``; the number of tokens of each file (its
    end-of-text token included). val: the files are --val files (for messages)."""
    counts = []
    eot = tok.eot_id
    with open(dest, "wb") as f:
        for path in files:
            n = 0
            if eot is not None:
                f.write(np.array([eot], dtype).tobytes())
                n += 1
            where = file_label(path, val)
            for piece in iter_text(path, where=where):
                try:
                    ids = tok.encode(piece, where, "the tokenizer's")  # no model yet
                except DataError as e:
                    raise DataError(f"{e}: give a tokenizer that has it, or --tokenizer char "
                                    "(the inputs' characters)") from None
                f.write(ids.astype(dtype).tobytes())
                n += len(ids)
                if progress is not None:
                    progress(len(piece.encode("utf-8")), len(ids))
                if should_stop():
                    raise Stopped()
            counts.append(n)
    return counts
