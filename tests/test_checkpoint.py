"""Checkpoint files: names, round trip, atomic writes and every way loading can fail."""
from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from cli_helpers import load_under_optimize, overwrite_float, without_metadata_sum
from microgpt_fut.training import checkpoint as ckpt
from microgpt_fut.errors import CheckpointError
from microgpt_fut.training.checkpoint import Checkpoint
from microgpt_fut.models.microgpt import PARAM_NAMES, MicrogptConfig

CONFIG = MicrogptConfig(vocab_size=6, n_embd=8, n_head=2, n_layer=2, block_size=5, mlp_width=12)
VOCAB = ["a", "b", "c", "d", "e"]
TRAIN = {"num_steps": 1000, "lr": 0.01, "beta1": 0.85, "beta2": 0.99, "eps": 1e-8, "seed": 42,
         "batch_size": 3, "data": "names.txt: 5 documents"}


def make(seed: int = 0) -> Checkpoint:
    rng = np.random.default_rng(seed)
    group = lambda: {n: rng.standard_normal(s).astype(np.float32)  # noqa: E731
                     for n, s in CONFIG.shapes().items()}
    v = {n: a * a for n, a in group().items()}
    return Checkpoint(CONFIG, VOCAB, group(), group(), v, step=17, train=dict(TRAIN))


def assert_same(a: dict, b: dict):
    assert set(a) == set(b) == set(PARAM_NAMES)
    for n in a:
        assert a[n].dtype == np.float32 and np.array_equal(a[n], b[n]), n


def test_round_trip(tmp_path):
    path = tmp_path / "m.safetensors"
    ck = make()
    ckpt.save(path, ck)
    back = ckpt.load(path)
    assert back.config == CONFIG and back.vocab == VOCAB and back.step == 17
    assert back.train == TRAIN
    assert_same(back.params, ck.params)
    assert_same(back.m, ck.m)
    assert_same(back.v, ck.v)
    light = ckpt.load(path, adam=False)
    assert light.m is None and light.v is None
    assert_same(light.params, ck.params)


def test_tensor_names_and_metadata_are_microgpts(tmp_path):
    path = tmp_path / "m.safetensors"
    ckpt.save(path, make())
    tensors = load_file(path)
    base = {"wte", "wpe", "lm_head"} | {f"layer{i}.{n}" for i in range(2) for n in
                                        ("attn_wq", "attn_wk", "attn_wv", "attn_wo",
                                         "mlp_fc1", "mlp_fc2")}
    assert set(tensors) == base | {f"adam.m.{n}" for n in base} | {f"adam.v.{n}" for n in base}
    assert tensors["layer1.mlp_fc1"].shape == (12, 8) and tensors["wpe"].shape == (5, 8)
    from safetensors import safe_open
    with safe_open(str(path), framework="numpy") as f:
        meta = f.metadata()
    assert meta["format"] == "microgpt-fut/1"
    assert json.loads(meta["config"])["n_layer"] == 2
    assert json.loads(meta["vocab"]) == VOCAB
    assert {"step", "num_steps", "lr", "beta1", "beta2", "eps", "seed", "batch_size",
            "data"} <= set(meta)


def test_new_file_mode_follows_umask(tmp_path):
    path = tmp_path / "m.safetensors"
    old = os.umask(0o022)
    try:
        ckpt.save(path, make())
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644


def _temps(folder):
    return [p.name for p in folder.iterdir() if p.name != "m.safetensors"]


def test_failed_write_keeps_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "m.safetensors"
    ckpt.save(path, make(0))
    before = path.read_bytes()

    def half_then_fail(f, data):
        f.write(data[:len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ckpt, "_write_all", half_then_fail)
    with pytest.raises(CheckpointError, match="No space left"):
        ckpt.save(path, make(1))
    assert path.read_bytes() == before
    assert _temps(tmp_path) == []
    assert_same(ckpt.load(path).params, make(0).params)


def test_failed_fsync_and_rename_keep_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "m.safetensors"
    ckpt.save(path, make(0))
    before = path.read_bytes()

    def fail(*a):
        raise OSError(5, "Input/output error")

    for name in ("fsync", "replace"):
        with monkeypatch.context() as m:
            m.setattr(ckpt.os, name, fail)
            with pytest.raises(CheckpointError):
                ckpt.save(path, make(1))
        assert path.read_bytes() == before and _temps(tmp_path) == []


def test_write_into_missing_folder(tmp_path):
    with pytest.raises(CheckpointError, match="cannot write"):
        ckpt.save(tmp_path / "nope" / "m.safetensors", make())


def _error(path) -> str:
    with pytest.raises(CheckpointError) as e:
        ckpt.load(path)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_missing_empty_directory(tmp_path):
    assert "does not exist" in _error(tmp_path / "none.safetensors")
    (tmp_path / "e.safetensors").write_bytes(b"")
    assert "is empty" in _error(tmp_path / "e.safetensors")
    assert "directory" in _error(tmp_path)


def test_truncated(tmp_path):
    path = tmp_path / "m.safetensors"
    ckpt.save(path, make())
    data = path.read_bytes()
    for cut in (len(data) - 1, len(data) // 2, 40, 5):
        path.write_bytes(data[:cut])
        assert "truncated" in _error(path), cut


def test_not_safetensors(tmp_path):
    path = tmp_path / "m.safetensors"
    path.write_text("emma\nolivia\nava\n" * 10)
    assert "not a safetensors file" in _error(path)
    path.write_bytes(struct.pack("<Q", 10) + b"not json!!")
    assert "not a safetensors file" in _error(path)


def _rewrite(path, tensors=None, meta=None, drop=()):
    t = load_file(path) if tensors is None else tensors
    for n in drop:
        del t[n]
    save_file(t, path, metadata=None if meta is None else without_metadata_sum(meta))


def _meta(path):
    from safetensors import safe_open
    with safe_open(str(path), framework="numpy") as f:
        return dict(f.metadata())


def test_not_ours_or_other_version(tmp_path):
    path = tmp_path / "m.safetensors"
    ckpt.save(path, make())
    meta = _meta(path)
    _rewrite(path, meta={})
    assert "not a microgpt-fut checkpoint" in _error(path)
    meta["format"] = "microgpt-fut/99"
    _rewrite(path, meta=meta)
    msg = _error(path)
    assert "microgpt-fut/99" in msg and "microgpt-fut/1" in msg


def test_missing_tensor_and_metadata(tmp_path):
    path = tmp_path / "m.safetensors"
    ckpt.save(path, make())
    meta = _meta(path)
    _rewrite(path, meta=meta, drop=["layer1.attn_wk"])
    assert "layer1.attn_wk" in _error(path)
    ckpt.save(path, make())
    _rewrite(path, meta=meta, drop=["adam.v.wte"])
    assert "adam.v.wte" in _error(path)
    assert ckpt.load(path, adam=False).step == 17  # sampling needs no Adam state
    del meta["config"]
    _rewrite(path, meta=meta)
    assert "config" in _error(path)


def test_wrong_shape_or_dtype(tmp_path):
    path = tmp_path / "m.safetensors"
    ckpt.save(path, make())
    meta = _meta(path)
    t = load_file(path)
    t["wpe"] = np.zeros((7, 8), np.float32)
    _rewrite(path, tensors=t, meta=meta)
    msg = _error(path)
    assert "wpe" in msg and "(7, 8)" in msg and "(5, 8)" in msg
    t["wpe"] = np.zeros((5, 8), np.float64)
    _rewrite(path, tensors=t, meta=meta)
    assert "float32" in _error(path)


def test_vocab_must_match_config(tmp_path):
    path = tmp_path / "m.safetensors"
    ckpt.save(path, make())
    meta = _meta(path)
    meta["vocab"] = json.dumps(["a", "b"])
    _rewrite(path, meta=meta)
    assert "vocab" in _error(path)


def test_every_tensor_has_its_crc32_in_the_metadata(tmp_path):
    import zlib

    path = tmp_path / "m.safetensors"
    ck = make()
    ck.losses = np.arange(17, dtype=np.float32)
    ckpt.save(path, ck)
    meta = _meta(path)
    sums = json.loads(meta["checksums"])
    tensors = load_file(path)
    assert set(sums) == set(tensors) | {"__metadata__"}
    for name, a in tensors.items():  # zlib's CRC-32 of the bytes safetensors reads back
        assert int(sums[name], 16) == zlib.crc32(a.tobytes()), name
    rest = {k: v for k, v in meta.items() if k != "checksums"}
    assert int(sums["__metadata__"], 16) == zlib.crc32(json.dumps(rest, sort_keys=True).encode())


@pytest.mark.parametrize("key, value", [("config", None), ("vocab", None), ("step", "16"),
                                        ("seed", "43")])
def test_a_changed_metadata_value_is_refused(tmp_path, key, value):
    """The metadata (config, vocabulary, step, settings) is covered too: a header
    rewritten with one value changed, tensors and their sums kept, is refused in one line
    (issue 41's trial: a swapped vocabulary or n_head sampled silently)."""
    path = tmp_path / "m.safetensors"
    ck = make()
    ck.losses = np.arange(17, dtype=np.float32)
    ckpt.save(path, ck)
    meta = _meta(path)
    if key == "config":
        value = meta["config"].replace('"n_head": 2', '"n_head": 1')
    elif key == "vocab":
        v = json.loads(meta["vocab"])
        v[0], v[1] = v[1], v[0]
        value = json.dumps(v)
    assert value != meta.get(key)
    save_file(load_file(path), path, metadata={**meta, key: value})
    with pytest.raises(CheckpointError) as e:
        ckpt.load(path, adam=False)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg and "metadata" in msg and "corrupted" in msg


@pytest.mark.parametrize("name, adam", [("wte", False), ("layer1.mlp_fc2", False),
                                        ("adam.v.lm_head", True), ("train.losses", True)])
def test_a_finite_corruption_is_refused_naming_the_tensor(tmp_path, name, adam):
    path = tmp_path / "m.safetensors"
    ck = make()
    ck.losses = np.arange(17, dtype=np.float32)
    ckpt.save(path, ck)
    overwrite_float(path, name, 3.39e38, index=3)  # still finite: only the checksum sees it
    with pytest.raises(CheckpointError) as e:
        ckpt.load(path, adam=adam)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg and repr(name) in msg
    assert "corrupted" in msg and "another checkpoint" in msg


def test_a_checkpoint_without_checksums_still_loads(tmp_path):
    """Files written before checksums have none: read as before, unchecked."""
    path = tmp_path / "m.safetensors"
    ckpt.save(path, make())
    meta = _meta(path)
    del meta["checksums"]
    _rewrite(path, meta=meta)
    overwrite_float(path, "wte", 1.5)
    assert ckpt.load(path).params["wte"][0, 0] == 1.5


@pytest.mark.parametrize("key, value, what", [
    ("vocab", json.dumps([1, 2, 3, 4, 5]), "'vocab' is not a list of characters"),
    ("evals", json.dumps([[10, 2.5]]), "'evals' holds an entry of 2 values, not 3 or 5"),
])
def test_metadata_checks_hold_under_python_optimize(tmp_path, key, value, what):
    """``python -O`` strips asserts: a vocabulary of numbers (the right count for
    vocab_size) or an evaluation of 2 values is still refused in one line naming it."""
    path = tmp_path / "m.safetensors"
    ckpt.save(path, make())
    _rewrite(path, meta={**_meta(path), key: value})
    expected = f"CheckpointError: checkpoint {str(path)!r} has unusable metadata: {what}"
    assert load_under_optimize("microgpt_fut.training.checkpoint.load", path) == expected
