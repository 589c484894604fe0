"""Checkpoints: the model, Adam's moments and the training settings in one safetensors file.

Tensors (float32) carry the model's names: microgpt's state_dict names (``wte``,
``wpe``, ``lm_head``, ``layer{i}.attn_wq`` ... ``layer{i}.mlp_fc2``, models/microgpt.py) or
Hugging Face GPT-2's (``wte.weight``, ``h.{i}.attn.c_attn.weight`` ..., models/gpt2.py),
and Adam's moments under ``adam.m.`` and ``adam.v.`` with the same names;
``train.losses`` [step] is the loss of every step so far and ``train.grad_norms``
[step] each step's gradient norm (absent in microgpt's checkpoints of before 2026-12). The metadata ``arch``
(microgpt or gpt2) and ``data_format`` (lines or text) say which; absent, they
are microgpt and lines. The safetensors metadata (strings) holds
FORMAT, the config and vocabulary as JSON, the step, and the run's settings and
data identity (TRAIN_KEYS), which is all ``train --resume`` needs to continue
exactly. A text model whose tokenizer is not a character vocabulary (e.g. a
byte-level BPE) keeps it as ``tokenizer`` (its tokenizer.json, data/tokenizer.py)
beside an empty ``vocab`` list; character models keep only ``vocab``, as before.
Writes are atomic: a checkpoint file is either the old one or the complete new one.
The metadata ``checksums`` (JSON {tensor name: CRC-32 as 8 hex digits}) covers every
tensor's bytes, checked by ``load`` for each tensor it reads, and under ``__metadata__``
the rest of the metadata, so that a file damaged after it was saved is refused even
where its values stay finite; files written before it have none (or no metadata sum)
and load unchecked.
"""
from __future__ import annotations

import json
import math
import os
import struct
import tempfile
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..data import tokenizer as tokenizers
from ..errors import CheckpointError
from ..models.gpt2 import GPT2Config
from ..interrupt import PARTIAL_FILES
from ..models.base import GPTConfigBase
from ..models.microgpt import MicrogptConfig

FORMAT = "microgpt-fut/1"
_FORMAT_NAME = FORMAT.split("/")[0]
_MAX_HEADER = 100_000_000  # safetensors' own limit on the JSON header
CHECKSUMS = "checksums"  # the metadata key of the tensors' CRC-32s
METADATA_SUM = "__metadata__"  # in CHECKSUMS: the other metadata's (no tensor has this name)
LOSSES = "train.losses"
NORMS = "train.grad_norms"
CONFIGS = {"microgpt": MicrogptConfig, "gpt2": GPT2Config}  # arch -> config class
DATA_FORMATS = ("lines", "text", "tokens")  # tokens: train --data-format tokens (shards)
# text runs (nanoGPT's recipe) add: its schedule, AdamW's decay, the clip, the
# accumulation, the evaluations, the validation split and the text's length
_INT_KEYS = ("num_steps", "seed", "batch_size", "n_docs", "cursor", "warmup_steps",
             "lr_decay_steps", "grad_accum", "eval_every", "eval_iters", "n_chars")
_FLOAT_KEYS = ("lr", "beta1", "beta2", "eps", "min_lr", "weight_decay", "grad_clip",
               "val_fraction")
_STR_KEYS = ("data", "data_path", "data_sha256", "encoding", "init_from", "eval_choices")
# The run's settings: total steps and the lr schedule's parameters, the seed (of the
# initial weights and of the data order), the batch size, and the data's identity:
# description, absolute path ("" = built-in), sha256 of the documents, their number,
# encoding, and the cursor (documents consumed = step * batch_size); init_from: the
# model whose weights the run started from (train --init-from), absent otherwise.
TRAIN_KEYS = _INT_KEYS + _FLOAT_KEYS + _STR_KEYS


@dataclass
class Checkpoint:
    """What a checkpoint holds.

    config: MicrogptConfig or GPT2Config (its class is the arch).
    params/m/v: the device's arrays (shapes: ``config.shapes()``); m and v are
    None when loaded with ``adam=False``.
    vocab: the characters (token i is vocab[i]; with data_format "lines",
    BOS = len(vocab)); empty when ``tokenizer`` is not a CharVocab.
    train: the run's settings (TRAIN_KEYS), as ints, floats and str.
    losses: float32 [step], the loss of each step so far, or None (not stored).
    norms: float32 [step], each step's gradient norm, or None (not stored).
    evals: [[step, train loss, val loss], ...] of the evaluations so far (text runs;
    with train --eval-choices, [step, train, val, acc, acc_norm]);
    val loss is NaN when the run has no validation split (stored as JSON null).
    tokenizer: a text model's tokenizer (tokenizer.Tokenizer). ``load`` always sets
    it for data_format "text" and "tokens" (a CharVocab of ``vocab`` when the file has no
    ``tokenizer``); ``save`` stores a CharVocab as ``vocab`` (ck.vocab may then be
    empty) and any other tokenizer as the ``tokenizer`` metadata.
    """

    config: GPTConfigBase
    vocab: list[str]
    params: dict[str, np.ndarray]
    m: dict[str, np.ndarray] | None = None
    v: dict[str, np.ndarray] | None = None
    step: int = 0
    train: dict = field(default_factory=dict)
    losses: np.ndarray | None = None
    data_format: str = "lines"
    norms: np.ndarray | None = None
    evals: list | None = None
    tokenizer: tokenizers.Tokenizer | None = None

    @property
    def arch(self) -> str:
        return self.config.arch

    def text_tokenizer(self) -> tokenizers.Tokenizer:
        """The tokenizer of a text model: ``tokenizer``, else the CharVocab of ``vocab``;
        a model of lines reads text with its BOS token (the last) as the newline, the
        separator of its documents in a file (so that it trains on text: --init-from)."""
        if self.tokenizer is not None:
            return self.tokenizer
        return tokenizers.CharVocab("".join(self.vocab) + ("\n" if self.data_format == "lines"
                                                           else ""))


def _stored_vocab(ck: Checkpoint) -> tuple[list[str], str | None]:
    """(the "vocab" list, the "tokenizer" JSON or None) that ck's metadata holds."""
    tok = ck.tokenizer
    if tok is None:
        return list(ck.vocab), None
    # a character vocabulary that fills the model's (as every one trained here) is the
    # "vocab" list old versions read; others (a larger vocab_size) need "tokenizer"
    if isinstance(tok, tokenizers.CharVocab) and tok.size == ck.config.vocab_size:
        if ck.vocab and "".join(ck.vocab) != tok.chars:
            raise ValueError("the checkpoint's vocab and its character tokenizer differ")
        return list(tok.chars), None
    if ck.vocab:
        raise ValueError("a checkpoint with a non-character tokenizer needs an empty vocab")
    return [], tok.to_json()


def _metadata(ck: Checkpoint) -> dict[str, str]:
    vocab, tok = _stored_vocab(ck)
    meta = {"format": FORMAT, "config": json.dumps(ck.config.to_dict()),
            "vocab": json.dumps(vocab), "step": str(int(ck.step)),
            "arch": ck.arch, "data_format": ck.data_format}
    if tok is not None:
        meta["tokenizer"] = tok
    if ck.evals is not None:
        # strict JSON: a loss that is not a number (the val loss of a run without a
        # validation split) is null
        meta["evals"] = json.dumps([[int(e[0]), *(float(x) if math.isfinite(x) else None
                                                  for x in e[1:])] for e in ck.evals],
                                   allow_nan=False)
    for k in TRAIN_KEYS:
        if k in ck.train:
            v = ck.train[k]
            meta[k] = repr(float(v)) if isinstance(v, float) else str(v)
    return meta


def checksum(a: np.ndarray) -> str:
    """The CRC-32 (zlib.crc32, the polynomial of zip and PNG) of an array's bytes in C
    order, as 8 hex digits. CRC-32 detects every error burst of up to 32 bits (such as
    one overwritten float32) and runs at several GB/s: the weights of GPT-2 124M (498
    MB) in 0.14 s on 2 vCPUs (``python -m bench.checksum``)."""
    return f"{zlib.crc32(memoryview(np.ascontiguousarray(a)).cast('B')):08x}"


def metadata_checksum(meta: dict[str, str]) -> str:
    """The CRC-32 of the metadata but ``checksums``, as JSON with sorted keys: what
    ``save`` puts under METADATA_SUM, so that a changed config, vocabulary, step or
    setting is refused as a changed tensor is."""
    rest = {k: v for k, v in meta.items() if k != CHECKSUMS}
    return f"{zlib.crc32(json.dumps(rest, sort_keys=True).encode()):08x}"


def check_metadata_sum(meta: dict[str, str], where: str) -> None:
    """Raise CheckpointError (one line) when the metadata differs from the CRC-32 saved
    with it; nothing to check in a file written before it had one."""
    sums = _checksums(meta, where)
    if sums is not None and METADATA_SUM in sums and sums[METADATA_SUM] != metadata_checksum(meta):
        raise CheckpointError(f"{where}: its metadata (config, vocabulary, step, settings) does "
                              "not match its checksum: the file is corrupted (changed after it "
                              "was saved); use another checkpoint or train again")


def _checksums(meta: dict[str, str], where: str) -> dict[str, str] | None:
    """The ``checksums`` metadata as {name: hex}, None when absent (an older file)."""
    if CHECKSUMS not in meta:
        return None
    try:
        sums = json.loads(meta[CHECKSUMS])
    except ValueError:
        sums = None
    if not isinstance(sums, dict) or not all(isinstance(v, str) for v in sums.values()):
        raise CheckpointError(f"{where} has unusable {CHECKSUMS!r} metadata: the file is "
                              "corrupted; use another checkpoint or train again")
    return sums


def check_sums(tensors: dict[str, np.ndarray], sums: dict[str, str] | None,
               where: str) -> None:
    """Raise CheckpointError (one line naming ``where`` and the tensor) when a tensor's
    CRC-32 differs from the one saved with it in ``sums`` (or is missing from it);
    nothing to check when sums is None (a checkpoint written before checksums)."""
    if sums is None:
        return
    for name, a in tensors.items():
        if sums.get(name) != checksum(a):
            raise CheckpointError(f"{where}: tensor {name!r} does not match its checksum: the "
                                  "file is corrupted (changed after it was saved); use another "
                                  "checkpoint or train again")


def first_nonfinite(tensors: dict[str, np.ndarray]) -> str | None:
    """The name of the first tensor holding a NaN or an infinity, or None."""
    return next((name for name, a in tensors.items() if not np.isfinite(a).all()), None)


def _write_all(f, data: bytes) -> None:
    """Write data to the open file f (a seam for tests that simulate a failing disk)."""
    f.write(data)


def _file_mode(path: Path) -> int:
    """The mode a plain open() would give a new file (or the existing file's mode)."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def save(path: str | Path, ck: Checkpoint) -> None:
    """Write ck to path atomically.

    The bytes go to a temporary file in the same folder, which is flushed,
    fsync'ed and then renamed over path (os.replace). On any error the
    temporary file is removed, the previous file at path is left as it was,
    and CheckpointError is raised; also (nothing written) when a tensor holds a NaN
    or an infinity. m and v default to zeros when None; losses
    is stored as the tensor ``train.losses`` when not None (ValueError unless
    it has ``step`` entries).
    """
    path = Path(path)
    shapes = ck.config.shapes()
    zeros = {n: np.zeros(s, np.float32) for n, s in shapes.items()}
    tensors = {}
    for prefix, group in (("", ck.params), ("adam.m.", ck.m or zeros), ("adam.v.", ck.v or zeros)):
        tensors.update(ck.config.to_file(group, prefix))
    for name, series in ((LOSSES, ck.losses), (NORMS, ck.norms)):
        if series is not None:
            series = np.ascontiguousarray(series, dtype=np.float32)
            if series.shape != (ck.step,):
                raise ValueError(f"{name} has shape {series.shape}, expected ({ck.step},)")
            tensors[name] = series
    bad = first_nonfinite(tensors)
    if bad is not None:  # training never hands one out (run.Run): a last guard
        raise CheckpointError(f"refusing to write checkpoint {str(path)!r}: tensor {bad!r} "
                              "holds NaN or infinite values")
    from safetensors.numpy import save as st_save

    meta = _metadata(ck)
    meta[CHECKSUMS] = json.dumps({**{name: checksum(a) for name, a in tensors.items()},
                                  METADATA_SUM: metadata_checksum(meta)})
    data = st_save(tensors, metadata=meta)
    try:
        replace_file(path, data)
    except OSError as e:
        raise CheckpointError(f"cannot write checkpoint {str(path)!r}: "
                              f"{e.strerror or e}") from None


def replace_file(path: Path, data: bytes) -> None:
    """Write data to path atomically (checkpoints, and the loss curves beside them).

    The bytes go to a temporary file in the same folder, with the mode a plain
    open() would give a new file (the umask's) or the existing file's, which is
    flushed, fsync'ed and then renamed over path (os.replace); the folder is
    fsync'ed too where possible. On any error the temporary file is removed, the
    previous file at path is left as it was, and the OSError is raised. A second
    Ctrl-C during the write removes the temporary file (interrupt.PARTIAL_FILES).
    """
    path = Path(path)
    tmp = name = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        name = tmp
        PARTIAL_FILES.add(tmp)  # removed if a second Ctrl-C ends the process mid-write
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), _file_mode(path))
            _write_all(f, data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
        try:  # make the rename durable too (not possible on every system)
            dfd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError:
            pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        PARTIAL_FILES.discard(name)


def _data_end(header: bytes) -> int | None:
    """Where the tensors' data ends (bytes after the header) by a safetensors header, or
    None when the header is not one (not a JSON object of tensor entries)."""
    try:
        info = json.loads(header.decode("utf-8"))
        if not isinstance(info, dict):
            return None
        return max((int(t["data_offsets"][1]) for k, t in info.items() if k != "__metadata__"),
                   default=0)
    except Exception:  # any malformed entry: not a safetensors header
        return None


def _check_file(path: Path) -> None:
    """Check the safetensors framing (header length, JSON header, data size)."""
    where = f"checkpoint {str(path)!r}"
    if not path.exists():
        raise CheckpointError(f"{where} does not exist (train one with `microgpt-fut train`)")
    if path.is_dir():
        raise CheckpointError(f"{where} is a folder without config.json: neither a checkpoint "
                              "file nor a Hugging Face model folder")
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            n = struct.unpack("<Q", head)[0] if len(head) == 8 else None
            header = f.read(n) if n is not None and n <= min(_MAX_HEADER, size - 8) else None
    except OSError as e:
        raise CheckpointError(f"cannot read {where}: {e.strerror or e}") from None
    if size == 0:
        raise CheckpointError(f"{where} is empty")
    if n is None:
        raise CheckpointError(f"{where} is truncated or not a safetensors file ({size} bytes)")
    if n > _MAX_HEADER:
        raise CheckpointError(f"{where} is not a safetensors file")
    if header is None:
        raise CheckpointError(f"{where} is truncated (header of {n} bytes, file of {size})")
    end = _data_end(header)
    if end is None:
        raise CheckpointError(f"{where} is not a safetensors file (bad header)")
    if 8 + n + end > size:
        raise CheckpointError(f"{where} is truncated ({size} bytes, needs {8 + n + end})")


def _first_line(e: Exception) -> str:
    """An exception's first line, or its class's name when it has no message."""
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


@contextmanager
def _opened(path: Path, where: str):
    """safetensors' safe_open of a file that passed ``_check_file``; safetensors' own
    errors, there and in the body, become one-line CheckpointErrors."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            yield f
    except CheckpointError:
        raise
    except Exception as e:  # safetensors' own errors
        raise CheckpointError(f"cannot read {where}: {_first_line(e)}") from None


def _parse_train(meta: dict[str, str]) -> dict:
    out: dict = {}
    for k in TRAIN_KEYS:
        if k in meta:
            v = meta[k]
            out[k] = int(v) if k in _INT_KEYS else float(v) if k in _FLOAT_KEYS else v
    return out


def _check_format(meta: dict[str, str], where: str) -> None:
    fmt = meta.get("format")
    if fmt is None or fmt.split("/")[0] != _FORMAT_NAME:
        raise CheckpointError(f"{where} is a safetensors file but not a microgpt-fut "
                              "checkpoint (no 'format' metadata)")
    if fmt != FORMAT:
        raise CheckpointError(f"{where} has format {fmt!r}; this version reads {FORMAT!r}")


def read_metadata(path: str | Path) -> dict[str, str]:
    """The safetensors metadata of a microgpt-fut checkpoint, without reading tensors.

    Raises CheckpointError (one line) as ``load`` does for a file that is missing,
    truncated, not safetensors, or not a checkpoint of this format version.
    """
    path = Path(path)
    where = f"checkpoint {str(path)!r}"
    _check_file(path)
    with _opened(path, where) as f:
        meta = dict(f.metadata() or {})
    _check_format(meta, where)
    return meta


@dataclass(frozen=True)
class _Header:
    """What a checkpoint's metadata says, checked (``_read_header``); Checkpoint's fields."""

    config: GPTConfigBase
    vocab: list[str]
    step: int
    train: dict
    data_format: str
    evals: list | None
    tokenizer: tokenizers.Tokenizer | None


def _kind(meta: dict[str, str], where: str) -> tuple[str, str]:
    """(arch, data_format) of the metadata (absent: microgpt, lines), each one known."""
    arch = meta.get("arch", "microgpt")
    data_format = meta.get("data_format", "lines")
    if arch not in CONFIGS:
        raise CheckpointError(f"{where} has an unknown arch {arch!r} "
                              f"(this version knows {', '.join(CONFIGS)})")
    if data_format not in DATA_FORMATS:
        raise CheckpointError(f"{where} has an unknown data_format {data_format!r}")
    return arch, data_format


def _parse_vocab(text: str) -> list[str]:
    """The ``vocab`` metadata: a JSON list of strings (ValueError otherwise)."""
    vocab = json.loads(text)
    if not isinstance(vocab, list) or not all(isinstance(c, str) for c in vocab):
        raise ValueError("'vocab' is not a list of characters")
    return vocab


def _parse_evals(text: str | None) -> list | None:
    """The ``evals`` metadata (None when absent): [step, train, val] or [step, train, val,
    acc, acc_norm] entries, a null loss (no validation split) read as NaN (ValueError
    for any other shape)."""
    if text is None:
        return None
    evals = json.loads(text)
    if evals is None:  # JSON null: as absent
        return None
    if not isinstance(evals, list) or not all(isinstance(e, list) for e in evals):
        raise ValueError("'evals' is not a list of lists")
    for e in evals:
        if len(e) not in (3, 5):
            raise ValueError(f"'evals' holds an entry of {len(e)} values, not 3 or 5")
    return [[e[0], *(math.nan if x is None else float(x) for x in e[1:])] for e in evals]


def _tokenizer(meta: dict[str, str], config: GPTConfigBase, vocab: list[str],
               data_format: str, where: str) -> tokenizers.Tokenizer | None:
    """The tokenizer of the metadata (None for a model of lines without one), checked
    against the vocabulary and the config's vocab_size."""
    if "tokenizer" in meta:
        try:
            tok = tokenizers.from_json(meta["tokenizer"])
        except ValueError as e:
            raise CheckpointError(f"{where} has an unusable tokenizer: "
                                  f"{str(e).splitlines()[0]}") from None
        if vocab:
            raise CheckpointError(f"{where} has both a vocab and a tokenizer")
        if tok.size > config.vocab_size:
            raise CheckpointError(f"{where}: its tokenizer has {tok.size} tokens, more "
                                  f"than vocab_size {config.vocab_size}")
        return tok
    n_tokens = len(vocab) + (1 if data_format == "lines" else 0)  # lines add BOS
    if n_tokens != config.vocab_size:
        raise CheckpointError(f"{where}: vocabulary of {len(vocab)} characters does "
                              f"not match vocab_size {config.vocab_size}")
    return tokenizers.CharVocab("".join(vocab)) if data_format != "lines" else None


def _read_header(meta: dict[str, str], where: str) -> _Header:
    """The checked metadata of a checkpoint: its format, its CRC-32, the keys it needs,
    the config, vocabulary, step, settings, evaluations and tokenizer."""
    _check_format(meta, where)
    check_metadata_sum(meta, where)
    for k in ("config", "vocab", "step"):
        if k not in meta:
            raise CheckpointError(f"{where} lacks the {k!r} metadata")
    arch, data_format = _kind(meta, where)
    try:
        config = CONFIGS[arch](**json.loads(meta["config"]))
        config.validate()
        vocab = _parse_vocab(meta["vocab"])
        step = int(meta["step"])
        train = _parse_train(meta)
        evals = _parse_evals(meta.get("evals"))
    except Exception as e:  # JSON, the config's own checks, numbers
        raise CheckpointError(f"{where} has unusable metadata: {_first_line(e)}") from None
    tok = _tokenizer(meta, config, vocab, data_format, where)
    return _Header(config, vocab, step, train, data_format, evals, tok)


def _read_tensors(f, shapes: dict[str, tuple], where: str) -> dict[str, np.ndarray]:
    """The tensors named in shapes from the open file f, each checked to be there, float32,
    and of its shape."""
    names = set(f.keys())
    tensors = {}
    for name, shape in shapes.items():
        if name not in names:
            raise CheckpointError(f"{where} lacks tensor {name!r}")
        arr = f.get_tensor(name)
        if arr.dtype != np.float32:
            raise CheckpointError(f"{where}: tensor {name!r} is {arr.dtype}, not float32")
        if tuple(arr.shape) != tuple(shape):
            raise CheckpointError(f"{where}: tensor {name!r} has shape {tuple(arr.shape)}, "
                                  f"its config needs {tuple(shape)}")
        tensors[name] = arr
    return tensors


def _read_series(f, step: int, where: str) -> dict[str, np.ndarray | None]:
    """{LOSSES, NORMS: float32 [step] from the open file f, or None where absent}."""
    names = set(f.keys())
    series = {}
    for name in (LOSSES, NORMS):
        a = f.get_tensor(name) if name in names else None
        if a is not None and (a.dtype != np.float32 or a.shape != (step,)):
            raise CheckpointError(f"{where}: tensor {name!r} is {a.dtype} "
                                  f"{tuple(a.shape)}, expected float32 ({step},)")
        series[name] = a
    return series


def _check_values(tensors: dict[str, np.ndarray], sums: dict[str, str] | None,
                  where: str) -> None:
    """Refuse (CheckpointError) a tensor holding a NaN or an infinity, or one whose bytes
    differ from the CRC-32 saved with it."""
    bad = first_nonfinite(tensors)
    if bad is not None:
        raise CheckpointError(f"{where}: tensor {bad!r} holds NaN or infinite values: the "
                              "file is unusable (microgpt-fut never saves such values; it "
                              "was damaged or written elsewhere)")
    check_sums(tensors, sums, where)


def load(path: str | Path, adam: bool = True) -> Checkpoint:
    """Read a checkpoint written by ``save`` (with Adam's moments unless adam=False).

    Raises CheckpointError (one line) when the file is missing, empty,
    truncated, not safetensors, not a microgpt-fut checkpoint or of another
    format version, or when metadata or a tensor is missing or a tensor's
    shape or dtype does not match the config (``train.losses``, optional, must
    be float32 [step]), and when a tensor read (the weights, and Adam's moments
    unless adam=False) holds a NaN or an infinity, or differs from the CRC-32 saved with
    it (the ``checksums`` metadata; a file written before checksums has none and is read
    without this check). The checks are raised errors, not asserts: they hold under
    ``python -O``.
    """
    path = Path(path)
    where = f"checkpoint {str(path)!r}"
    _check_file(path)
    groups = [""] + (["adam.m.", "adam.v."] if adam else [])
    with _opened(path, where) as f:
        meta = f.metadata() or {}
        head = _read_header(meta, where)
        shapes = {name: shape for prefix in groups
                  for name, shape in head.config.file_shapes(prefix).items()}
        tensors = _read_tensors(f, shapes, where)
        series = _read_series(f, head.step, where)
    _check_values({**tensors, **{k: a for k, a in series.items() if a is not None}},
                  _checksums(meta, where), where)
    params = head.config.from_file(tensors)
    m = head.config.from_file(tensors, "adam.m.") if adam else None
    v = head.config.from_file(tensors, "adam.v.") if adam else None
    return Checkpoint(head.config, head.vocab, params, m, v, head.step, head.train,
                      series[LOSSES], head.data_format, series[NORMS], head.evals,
                      head.tokenizer)
