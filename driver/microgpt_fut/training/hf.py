"""Hugging Face GPT-2 folders: read one into a GPT-2 of ours, write one from a checkpoint.

A folder as ``transformers.GPT2LMHeadModel.save_pretrained`` writes it (or as on the
Hub, e.g. openai-community/gpt2):

- ``config.json``: GPT2Config's keys (transformers' configuration_gpt2.py); missing
  keys take transformers' defaults (GPT-2 small's sizes);
- ``model.safetensors`` (or shards listed by ``model.safetensors.index.json``): the
  tensors, named ``wte.weight``, ``h.{i}.attn.c_attn.weight``, ... with or without
  the ``transformer.`` prefix, Conv1D layout ([in, out]; gpt2.py converts);
- the tokenizer: ``tokenizer.json``, or GPT-2's ``vocab.json`` + ``merges.txt``.

What our kernels cannot compute is refused, each time with one line naming the
folder and the key or tensor: a LayerNorm epsilon other than 1e-5, an activation
other than GELU's tanh form, attention scaled otherwise than by 1/sqrt(head size),
cross-attention, an output head that is not ``wte`` itself, missing tensors or
unexpected ones, wrong shapes, non-float dtypes. Nothing is downloaded.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import struct
import tempfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..data import tokenizer as tokenizers
from . import checkpoint as ckpt
from .checkpoint import Checkpoint, first_nonfinite
from ..errors import DataError, HFError, OptionConflict
from ..models.gpt2 import GPT2Config

PREFIX = "transformer."   # GPT2LMHeadModel's name for its GPT2Model
LM_HEAD = "lm_head.weight"
# transformers' GPT-2 activations that are GELU's tanh approximation, which the kernels compute
ACTIVATIONS = ("gelu_new", "gelu_pytorch_tanh")
EPS = 1e-5                # futhark/gpt2_model.fut's layer_norm
# transformers' GPT2Config defaults (configuration_gpt2.py), for keys a config.json omits
HF_DEFAULTS = {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12,
               "n_head": 12, "n_inner": None, "activation_function": "gelu_new",
               "layer_norm_epsilon": 1e-5, "scale_attn_weights": True,
               "scale_attn_by_inverse_layer_idx": False, "add_cross_attention": False,
               "tie_word_embeddings": True}
# safetensors dtype -> NumPy dtype that holds it exactly ("BF16": the high half of a float32)
_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "F64": np.dtype("<f8"),
           "BF16": np.dtype("<u2")}


class HFModel(NamedTuple):
    """A GPT-2 read from a Hugging Face folder: config (bias=True, as every HF GPT-2),
    params (device arrays: ``config.shapes()``, float32) and tokenizer (None when the
    folder has none and none was required)."""

    config: GPT2Config
    params: dict[str, np.ndarray]
    tokenizer: tokenizers.Tokenizer | None


def is_folder(path: str | Path) -> bool:
    """True when ``path`` is a folder holding a config.json (a Hugging Face model folder)."""
    path = Path(path)
    return path.is_dir() and (path / "config.json").is_file()


def _where(folder: Path) -> str:
    return f"Hugging Face folder {str(folder)!r}"


def _int(cfg: dict, key: str, where: str) -> int:
    v = cfg.get(key, HF_DEFAULTS.get(key))
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise HFError(f"{where}: config.json {key!r} must be a positive integer, got "
                      f"{json.dumps(v)}")
    return v


def read_config(folder: str | Path) -> GPT2Config:
    """The GPT2Config of a folder's config.json: n_embd, n_layer, n_head, n_positions
    (-> block_size), vocab_size, n_inner (None -> 4 * n_embd, -> mlp_width); bias=True.

    Raises HFError when config.json is missing or not JSON, model_type is not "gpt2",
    a size is not a positive integer, or the model is one the kernels cannot compute
    (layer_norm_epsilon != 1e-5, activation_function not in ACTIVATIONS,
    scale_attn_weights false, scale_attn_by_inverse_layer_idx or add_cross_attention
    true, n_embd not divisible by n_head).
    """
    folder = Path(folder)
    where = _where(folder)
    path = folder / "config.json"
    if not folder.is_dir():
        raise HFError(f"{where} does not exist" if not folder.exists() else
                      f"{where} is not a folder")
    if not path.is_file():
        raise HFError(f"{where} has no config.json (not a Hugging Face model folder)")
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        msg = getattr(e, "strerror", None) or str(e).splitlines()[0] or type(e).__name__
        raise HFError(f"{where}: cannot read config.json: {msg}") from None
    if not isinstance(cfg, dict):
        raise HFError(f"{where}: cannot read config.json: not a JSON object")
    if cfg.get("model_type") != "gpt2":
        raise HFError(f"{where}: config.json 'model_type' is {json.dumps(cfg.get('model_type'))}; "
                      'only "gpt2" models load')
    get = lambda k: cfg.get(k, HF_DEFAULTS[k])  # noqa: E731
    act = get("activation_function")
    if act not in ACTIVATIONS:
        raise HFError(f"{where}: config.json 'activation_function' {json.dumps(act)} is not "
                      f"supported (the kernels compute GELU's tanh form: "
                      f"{', '.join(map(json.dumps, ACTIVATIONS))})")
    eps = get("layer_norm_epsilon")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or abs(eps - EPS) > 1e-12:
        raise HFError(f"{where}: config.json 'layer_norm_epsilon' {json.dumps(eps)} is not "
                      f"supported (the kernels' LayerNorm uses {json.dumps(EPS)})")
    for key, need in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
                      ("add_cross_attention", False)):
        if bool(get(key)) != need:
            raise HFError(f"{where}: config.json {key!r} {json.dumps(get(key))} is not "
                          f"supported (the kernels' attention needs {json.dumps(need)})")
    sizes = {k: _int(cfg, k, where) for k in ("vocab_size", "n_positions", "n_embd", "n_layer",
                                               "n_head")}
    inner = cfg.get("n_inner")
    mlp_width = None if inner is None else _int(cfg, "n_inner", where)
    if sizes["n_embd"] % sizes["n_head"]:
        raise HFError(f"{where}: config.json 'n_embd' {sizes['n_embd']} is not divisible by "
                      f"'n_head' {sizes['n_head']}")
    return GPT2Config(vocab_size=sizes["vocab_size"], n_embd=sizes["n_embd"],
                      n_head=sizes["n_head"], n_layer=sizes["n_layer"],
                      block_size=sizes["n_positions"], mlp_width=mlp_width, bias=True)


def _entry_fits(t, data_size: int) -> bool:
    """Whether a safetensors header entry has a shape list and data offsets [a, b] within
    the data_size bytes of data after the header."""
    try:
        a, b = t["data_offsets"]
        return 0 <= a <= b <= data_size and isinstance(t["shape"], list)
    except (KeyError, TypeError, ValueError):
        return False


def _safetensors_index(path: Path, where: str) -> tuple[dict, int]:
    """(the header's tensor entries, the offset of the data) of a safetensors file."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            n = struct.unpack("<Q", head)[0] if len(head) == 8 else None
            if n is None or n > min(100_000_000, size - 8):
                raise HFError(f"{where}: {path.name} is truncated or not a safetensors file")
            header = json.loads(f.read(n).decode("utf-8"))
    except OSError as e:
        raise HFError(f"{where}: cannot read {path.name}: {e.strerror or e}") from None
    except ValueError:
        raise HFError(f"{where}: {path.name} is not a safetensors file (bad header)") from None
    header.pop("__metadata__", None)
    for name, t in header.items():
        if not _entry_fits(t, size - 8 - n):
            raise HFError(f"{where}: {path.name} is truncated or damaged at tensor {name!r}")
    return header, 8 + n


def _read_tensor(path: Path, start: int, name: str, t: dict, where: str) -> np.ndarray:
    """One tensor of a safetensors file as float32 (F16, BF16, F64 converted exactly
    or rounded as float32 does)."""
    dtype = _DTYPES.get(t["dtype"])
    if dtype is None:
        raise HFError(f"{where}: tensor {name!r} is {t['dtype']}; only float tensors load")
    a, b = t["data_offsets"]
    count = int(np.prod(t["shape"], dtype=np.int64))
    if b - a != count * dtype.itemsize:
        raise HFError(f"{where}: tensor {name!r} has {b - a} bytes for shape {tuple(t['shape'])}")
    raw = np.memmap(path, dtype=dtype, mode="r", offset=start + a, shape=(count,)) if count \
        else np.zeros(0, dtype)
    if t["dtype"] == "BF16":  # bfloat16 is a float32's high 16 bits
        out = (raw.astype(np.uint32) << 16).view(np.float32)
    else:
        out = np.asarray(raw, dtype=np.float32)
    return out.reshape(t["shape"])


def _weight_files(folder: Path, where: str) -> list[Path]:
    """model.safetensors, or the shards of model.safetensors.index.json."""
    single = folder / "model.safetensors"
    if single.is_file():
        return [single]
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            files = sorted(set(weight_map.values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise HFError(f"{where}: cannot read model.safetensors.index.json") from None
        for f in files:
            if not (folder / f).is_file():
                raise HFError(f"{where}: shard {f!r} of model.safetensors.index.json is missing")
        return [folder / f for f in files]
    other = [p.name for p in (folder / "pytorch_model.bin", folder / "tf_model.h5")
             if p.is_file()]
    raise HFError(f"{where} has no model.safetensors"
                  + (f" ({other[0]} is not read: save the model with safetensors, "
                     "save_pretrained's default)" if other else ""))


def read_tensors(folder: str | Path, config: GPT2Config) -> dict[str, np.ndarray]:
    """The folder's tensors checked against ``config``: Hugging Face names without the
    ``transformer.`` prefix -> float32 arrays of ``config.file_shapes()``.

    ``attn.bias`` / ``attn.masked_bias`` (the causal-mask buffers of older
    transformers) are ignored; ``lm_head.weight``, when present, must equal
    ``wte.weight`` (GPT-2 ties them), and must be present when config.json says
    ``tie_word_embeddings`` false. Raises HFError naming the tensor when one is
    missing, unexpected, of another shape or not a float tensor, and for the head.
    """
    folder = Path(folder)
    where = _where(folder)
    expected = config.file_shapes()
    entries: dict[str, tuple[Path, int, str, dict]] = {}  # short name -> where it is
    head = None
    for path in _weight_files(folder, where):
        header, start = _safetensors_index(path, where)
        for name, t in header.items():
            short = name[len(PREFIX):] if name.startswith(PREFIX) else name
            if short.endswith((".attn.bias", ".attn.masked_bias")):
                continue  # buffers (the causal mask), not weights
            if short == LM_HEAD:
                head = (path, start, name, t)
                continue
            if short not in expected:
                raise HFError(f"{where}: tensor {name!r} is not part of a GPT-2 of this "
                              "config.json (the model cannot represent it)")
            if short in entries:
                raise HFError(f"{where}: tensor {short!r} appears twice")
            entries[short] = (path, start, name, t)
    out = {}
    for short, shape in expected.items():
        if short not in entries:
            raise HFError(f"{where}: model.safetensors lacks tensor {short!r}")
        path, start, name, t = entries[short]
        if tuple(t["shape"]) != tuple(shape):
            raise HFError(f"{where}: tensor {name!r} has shape {tuple(t['shape'])}, "
                          f"config.json needs {tuple(shape)}")
        out[short] = _read_tensor(path, start, name, t, where)
    if head is not None:
        path, start, name, t = head
        lm = _read_tensor(path, start, name, t, where) if tuple(t["shape"]) == \
            tuple(expected["wte.weight"]) else None
        if lm is None or not np.array_equal(lm, out["wte.weight"]):
            differs = "other values" if lm is not None else f"shape {tuple(t['shape'])}"
            raise HFError(f"{where}: tensor {name!r} is not tied to wte.weight ({differs}); "
                          "the model's head must be the token embedding")
    elif not _config_json(folder).get("tie_word_embeddings", True):
        raise HFError(f"{where}: config.json 'tie_word_embeddings' is false but there is no "
                      f"{LM_HEAD!r}; the model's head must be the token embedding")
    return out


def _config_json(folder: Path) -> dict:
    try:
        return json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def read_tokenizer(folder: str | Path, vocab_size: int | None = None
                   ) -> tokenizers.Tokenizer | None:
    """The folder's tokenizer (tokenizer.py's load_tokenizer: tokenizer.json, else
    vocab.json + merges.txt), or None when it has neither. Raises HFError when the
    files cannot be read, or the tokenizer has more ids than ``vocab_size``."""
    folder = Path(folder)
    where = _where(folder)
    files = tokenizers.find_tokenizer_files(folder)
    if files is None:
        return None
    try:
        tok = tokenizers.load_tokenizer(files[0])
    except DataError as e:
        raise HFError(f"{where}: {e}") from None
    if vocab_size is not None and tok.size > vocab_size:
        raise HFError(f"{where}: {files[0].name} has {tok.size} tokens, more than config.json's "
                      f"vocab_size {vocab_size}")
    return tok


def load_folder(folder: str | Path, require_tokenizer: bool = True) -> HFModel:
    """A Hugging Face GPT-2 folder as (config, device arrays, tokenizer) (HFModel).

    Reads config.json (``read_config``), the safetensors weights (``read_tensors``,
    converted to the device layout by ``GPT2Config.from_file``) and the tokenizer
    (``read_tokenizer``). Raises HFError (one line naming the folder and the key,
    tensor or file) for anything it refuses, for a tensor holding a NaN or an
    infinity, and when there is no tokenizer and ``require_tokenizer``.
    """
    folder = Path(folder)
    config = read_config(folder)
    tok = read_tokenizer(folder, config.vocab_size)
    if tok is None and require_tokenizer:
        raise HFError(f"{_where(folder)} has no tokenizer (tokenizer.json, or vocab.json and "
                      "merges.txt)")
    tensors = read_tensors(folder, config)
    bad = first_nonfinite(tensors)
    if bad is not None:
        raise HFError(f"{_where(folder)}: tensor {bad!r} holds NaN or infinite values, so the "
                      "model is unusable")
    return HFModel(config, config.from_file(tensors), tok)


def load_checkpoint(folder: str | Path) -> Checkpoint:
    """A Hugging Face GPT-2 folder as a text Checkpoint at step 0 without optimiser
    state (what ``sample --checkpoint`` and ``--init-from`` start from). Raises
    HFError as ``load_folder`` does (a tokenizer is required)."""
    config, params, tok = load_folder(folder)
    vocab = list(tok.chars) if isinstance(tok, tokenizers.CharVocab) else []
    return Checkpoint(config, vocab, params, step=0, data_format="text", tokenizer=tok,
                      train={"data": f"Hugging Face folder {str(folder)}"})


def load_model(path: str | Path) -> Checkpoint:
    """The model that ``sample``, ``eval`` and ``train --init-from`` read: a Hugging Face
    GPT-2 folder (``load_checkpoint``), else a checkpoint file without Adam's moments
    (checkpoint.load, which checks each tensor's checksum). Raises HFError or
    CheckpointError, one line naming the path."""
    return load_checkpoint(path) if is_folder(path) else ckpt.load(path, adam=False)


# --------------------------------------------------------------------------- export
def hf_config(config: GPT2Config, tok: tokenizers.Tokenizer) -> dict:
    """The config.json of ``config`` for transformers' GPT2Config: sizes, GELU (tanh),
    eps 1e-5, tied head, no dropout (our models train without), bos/eos the
    tokenizer's ``<|endoftext|>`` when it has one."""
    eot = tok.eot_id
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
            "vocab_size": config.vocab_size, "n_positions": config.block_size,
            "n_embd": config.n_embd, "n_layer": config.n_layer, "n_head": config.n_head,
            "n_inner": None if config.mlp_width == 4 * config.n_embd else config.mlp_width,
            "activation_function": "gelu_new", "layer_norm_epsilon": EPS,
            "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
            "initializer_range": 0.02, "scale_attn_weights": True,
            "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
            "tie_word_embeddings": True, "use_cache": True, "bos_token_id": eot,
            "eos_token_id": eot, "torch_dtype": "float32"}


def hf_tensors(config: GPT2Config, params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """GPT2LMHeadModel's tensors (``transformer.`` names, Conv1D layout, float32) of device
    arrays; a bias=False model gets zero biases (HF's GPT-2 always has them, and
    zeros compute what no bias does). No ``lm_head.weight``: tied to wte."""
    out = config.to_file(params, PREFIX)
    if not config.bias:
        full = GPT2Config(**{**config.to_dict(), "bias": True})
        out = {k: out[k] if k in out else np.zeros(s, np.float32)
               for k, s in full.file_shapes(PREFIX).items()}
    return out


# The files an export writes or replaces: its own, and those transformers' save_pretrained
# writes beside them (which would describe another model after an --overwrite).
EXPORT_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt")


def _tokenizer_files(tok: tokenizers.Tokenizer, block_size: int) -> dict[str, bytes]:
    """tokenizer.json, tokenizer_config.json and, for a GPT-2-style BPE, vocab.json and
    merges.txt. tokenizer_config.json names transformers' PreTrainedTokenizerFast,
    which uses tokenizer.json as it is (transformers' GPT2Tokenizer would rebuild a
    byte-level BPE from the vocabulary, wrong for a character vocabulary)."""
    hf = tok.hf_tokenizer() if isinstance(tok, tokenizers.CharVocab) else tok.tok
    files = {"tokenizer.json": hf.to_str(pretty=True).encode("utf-8")}
    tconf = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": block_size,
             "clean_up_tokenization_spaces": False}
    if tok.eot_id is not None:
        tconf.update(bos_token=tokenizers.EOT, eos_token=tokenizers.EOT, unk_token=tokenizers.EOT)
    files["tokenizer_config.json"] = json.dumps(tconf, indent=2).encode("utf-8")
    if isinstance(tok, tokenizers.HFTokenizer) and tok.byte_level():
        vocab, merges = tok.vocab_merges()
        files["vocab.json"] = vocab.encode("utf-8")
        files["merges.txt"] = merges.encode("utf-8")
    return files


def _write_file(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def export_folder(ck: Checkpoint, folder: str | Path, overwrite: bool = False) -> list[str]:
    """Write a text GPT-2 checkpoint as a Hugging Face folder that
    ``GPT2LMHeadModel.from_pretrained`` and ``AutoTokenizer.from_pretrained`` load:
    config.json (``hf_config``), model.safetensors (``hf_tensors``, metadata
    format "pt" as transformers writes), the tokenizer (a character vocabulary as a
    ``tokenizers`` tokenizer.json mapping each character to its id, without an unknown
    token: ``CharVocab.hf_tokenizer``; a BPE as its tokenizer.json, plus vocab.json and
    merges.txt when GPT-2-style).
    Returns the file names written.

    The files go to a temporary folder beside ``folder``, fsync'ed, which is then
    renamed to ``folder`` (atomic). An existing non-empty ``folder`` is refused unless
    ``overwrite``: then each file is renamed over its old version, and the other
    ``EXPORT_FILES`` (a former export's, e.g. a BPE's vocab.json) are removed; every
    other file and folder in it stays as it was. Raises OptionConflict (one line, a
    usage error) for a microgpt checkpoint or one of lines; HFError (one line) for
    weights holding a NaN or an infinity, a ``folder`` that is a file or not empty, and any OSError.
    """
    folder = Path(folder)
    where = _where(folder)
    if ck.arch != "gpt2" or ck.data_format == "lines":  # the argument, not the file: usage
        raise OptionConflict(f"cannot export to {where}: export-hf writes GPT-2 models of text "
                             f"or tokens, and this checkpoint is a {ck.arch} model of "
                             f"{ck.data_format} (train one with --arch gpt2 --data-format text "
                             "or tokens)")
    bad = first_nonfinite(ck.params)
    if bad is not None:  # checkpoint.load refuses such a file: a guard for other callers
        raise HFError(f"cannot export to {where}: tensor {bad!r} holds NaN or infinite values")
    tok = ck.text_tokenizer()
    if folder.exists() and not folder.is_dir():
        raise HFError(f"cannot export to {where}: it is a file")
    above = next((p for p in folder.parents if p.exists()), None)  # the nearest that exists
    if above is not None and not above.is_dir():
        raise HFError(f"cannot export to {where}: {str(above)!r} is a file, not a folder; "
                      "give a folder")
    if above != folder.parent:
        raise HFError(f"cannot export to {where}: the folder {str(folder.parent)!r} does not "
                      f"exist; make it first (mkdir -p {shlex.quote(str(folder.parent))})")
    if folder.is_dir() and any(folder.iterdir()) and not overwrite:
        raise HFError(f"{where} exists and is not empty: choose another folder, or pass "
                      "--overwrite to replace the export's files in it")
    from safetensors.numpy import save as st_save

    files = {"config.json": json.dumps(hf_config(ck.config, tok), indent=2).encode("utf-8"),
             "model.safetensors": st_save(hf_tensors(ck.config, ck.params),
                                          metadata={"format": "pt"})}
    files.update(_tokenizer_files(tok, ck.config.block_size))
    parent = folder.parent
    tmp = None
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=parent))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's 0700 -> what mkdir would give
        for name, data in files.items():
            _write_file(tmp / name, data)
        _fsync_dir(tmp)
        if folder.is_dir() and any(folder.iterdir()):  # overwrite: the export's files only
            for name in files:
                os.replace(tmp / name, folder / name)
            for name in set(EXPORT_FILES) - set(files):  # a former export's, now stale
                (folder / name).unlink(missing_ok=True)
            _fsync_dir(folder)
        else:
            os.replace(tmp, folder)  # replaces an empty folder too (rename(2))
            tmp = None
        _fsync_dir(parent)
    except OSError as e:
        raise HFError(f"cannot write {where}: {e.strerror or e}") from None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return list(files)
