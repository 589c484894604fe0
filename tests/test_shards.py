"""Token shards (shards.py) and `microgpt-fut prepare` (prepare.py): llm.c's .bin format
checked byte by byte, nanoGPT's split and encoding recomputed here as its prepare.py
does, bad shards and pickles refused in one line, and memory that stays flat."""
from __future__ import annotations

import pickle
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

from cli_helpers import assert_one_line_error
from conftest import DATA_DIR
from microgpt_fut.data import shards
from microgpt_fut.cli.commands import main
from microgpt_fut.errors import DataError
from microgpt_fut.data.prepare import char_vocab, prepare
from microgpt_fut.data.text import load_text
from microgpt_fut.data.tokenizer import train_bpe

SHAKESPEARE = DATA_DIR / "tinyshakespeare.txt"


def run(*args):
    return CliRunner().invoke(main, list(map(str, args)))


def read_llmc(path):
    """An llm.c shard read with struct, as its data_common.py writes it: 256 int32
    (magic, version, count, zeros), then the uint16 tokens."""
    raw = path.read_bytes()
    head = struct.unpack("<256i", raw[:1024])
    assert head[3:] == (0,) * 253
    return head[0], head[1], head[2], np.frombuffer(raw[1024:], "<u2")


def nanogpt_char(text):
    """nanoGPT data/shakespeare_char/prepare.py: vocabulary, ids and the 90% split."""
    chars = sorted(list(set(text)))
    stoi = {ch: i for i, ch in enumerate(chars)}
    ids = np.array([stoi[c] for c in text], dtype=np.uint16)
    n = len(ids)
    return chars, ids[:int(n * 0.9)], ids[int(n * 0.9):]


def test_prepare_writes_nanogpts_shakespeare_char_as_llmc_shards(tmp_path):
    r = run("prepare", SHAKESPEARE, "--out", tmp_path / "sh", "--shard-tokens", 300_000)
    assert r.exit_code == 0, r.output
    chars, train, val = nanogpt_char(SHAKESPEARE.read_text(encoding="utf-8"))
    assert (len(train), len(val)) == (1_003_854, 111_540)  # printed by nanoGPT's prepare.py
    files = sorted((tmp_path / "sh").glob("*.bin"))
    assert [f.name for f in files] == [f"tinyshakespeare_train_{k:06d}.bin" for k in range(4)] \
        + ["tinyshakespeare_val_000000.bin"]
    got = {"train": [], "val": []}
    for f in files:
        magic, version, n, toks = read_llmc(f)
        assert (magic, version, n) == (20240520, 1, len(toks)) and n <= 300_000
        got["train" if "_train_" in f.name else "val"].append(toks)
    assert np.array_equal(np.concatenate(got["train"]), train)
    assert np.array_equal(np.concatenate(got["val"]), val)
    data = shards.load_tokens(tmp_path / "sh", 64)
    assert data.vocab.chars == "".join(chars)
    # the same windows as the text file read whole (text.py), for the same seed and step
    text = load_text(SHAKESPEARE, 64)
    assert np.array_equal(data.train_batch(7, 1337, 2, 12), text.train_batch(7, 1337, 2, 12))
    assert np.array_equal(data.eval_batches("val", 1337, 3, 2, 4),
                          text.eval_batches("val", 1337, 3, 2, 4))


def test_prepare_is_deterministic_and_refuses_to_overwrite(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text(SHAKESPEARE.read_text(encoding="utf-8")[:50_000], encoding="utf-8")
    for out in ("a", "b"):
        assert run("prepare", src, "--out", tmp_path / out, "--shard-tokens", 10_000).exit_code == 0
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir())
    for n in names:
        assert (tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes()
    before = {n: (tmp_path / "a" / n).read_bytes() for n in names}
    r = run("prepare", src, "--out", tmp_path / "a")
    assert_one_line_error(r, "already holds", "--overwrite")
    assert {n: (tmp_path / "a" / n).read_bytes() for n in names} == before  # untouched
    r = run("prepare", src, "--out", tmp_path / "a", "--overwrite")  # one shard of each now
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [
        "in_train_000000.bin", "in_val_000000.bin", "tokenizer.json"]


def test_prepare_with_bpe_and_validation_files(tmp_path):
    text = SHAKESPEARE.read_text(encoding="utf-8")
    a, b, v = (tmp_path / f"{n}.txt" for n in "abv")
    a.write_text(text[:30_000]), b.write_text(text[30_000:60_000]), v.write_text(text[-20_000:])
    r = run("prepare", a, b, "--val", v, "--out", tmp_path / "o", "--tokenizer", "bpe",
            "--vocab-size", 300, "--bpe-sample-mb", 0.02, "--name", "sh")
    assert r.exit_code == 0, r.output
    sample = text[:20_000 + text[20_000:].index("\n") + 1]  # whole lines (ASCII text)
    assert f"first {len(sample):,} bytes of 60,000 (--bpe-sample-mb 0.02)" in r.output
    tok = train_bpe(sample, 300)
    eot = tok.eot_id
    want_train = np.concatenate([[eot], tok.encode(text[:30_000], "a"), [eot],
                                 tok.encode(text[30_000:60_000], "b")])
    _, _, _, train = read_llmc(tmp_path / "o" / "sh_train_000000.bin")
    _, _, _, val = read_llmc(tmp_path / "o" / "sh_val_000000.bin")
    assert np.array_equal(train, want_train)
    assert np.array_equal(val, np.concatenate([[eot], tok.encode(text[-20_000:], "v")]))
    data = shards.load_tokens(tmp_path / "o", 32)
    assert data.vocab == tok


@pytest.mark.parametrize("content, fragment", [
    (b"", "is empty"),
    (b"good text\nthen \xff bad", "not valid UTF-8 at byte offset 15"),
])
def test_prepare_refuses_bad_input_in_one_line(tmp_path, content, fragment):
    src = tmp_path / "in.txt"
    src.write_bytes(content)
    r = run("prepare", src, "--out", tmp_path / "o")
    assert_one_line_error(r, "in.txt", fragment)
    assert not list((tmp_path / "o").glob("*")) if (tmp_path / "o").exists() else True


def test_iter_text_reports_the_offset_past_the_first_chunk(tmp_path):
    from microgpt_fut.data.prepare import iter_text

    src = tmp_path / "in.txt"
    src.write_bytes(b"ab\n" * 1000 + "é".encode() + b"\x80")
    with pytest.raises(DataError, match="byte offset 3002"):
        list(iter_text(src, chunk_bytes=64))
    src.write_bytes("\ufeffhé\nwo\nrld".encode())
    assert "".join(iter_text(src, chunk_bytes=2)) == "hé\nwo\nrld"


def test_an_interrupted_prepare_leaves_no_shard_that_looks_whole(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text(SHAKESPEARE.read_text(encoding="utf-8")[:200_000], encoding="utf-8")
    tok = char_vocab([src])
    calls = []

    def stop(n_bytes, n_tokens):
        calls.append(n_tokens)
        if len(calls) == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        prepare([src], tmp_path / "o", tok, progress=stop, shard_tokens=50_000)
    assert list((tmp_path / "o").iterdir()) == []


def _shard(path, n, version=1, count=None, tokens=None):
    toks = np.arange(n, dtype=shards.DTYPES.get(version, "<u2")) if tokens is None else tokens
    path.write_bytes(shards.header(len(toks) if count is None else count, version).tobytes()
                     + toks.tobytes())
    return path


@pytest.mark.parametrize("make, fragment", [
    (lambda p: p.write_bytes(b"\x00" * 1500), "magic 0 is not llm.c's 20240520"),
    (lambda p: _shard(p, 100, count=120), "header says 120 tokens (1,264 bytes), but the file "
                                          "has 1,224 bytes (truncated)"),
    (lambda p: _shard(p, 100, count=80), "too long"),
    (lambda p: p.write_bytes(b"\x01\x02"), "less than llm.c's 1024-byte header"),
    (lambda p: _shard(p, 10, version=7), "version 7"),
])
def test_bad_shards_are_refused_naming_the_file(tmp_path, make, fragment):
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "tokenizer.json").write_text('{"type": "char", "chars": "abc"}')
    make(folder / "x_train_000000.bin")
    with pytest.raises(DataError, match="x_train_000000.bin") as e:
        shards.load_tokens(folder, 4)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_a_token_outside_the_vocabulary_is_refused(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "tokenizer.json").write_text('{"type": "char", "chars": "abc"}')
    _shard(folder / "x_train_000000.bin", 0, tokens=np.array([0, 1, 2, 1, 0, 3, 1], "<u2"))
    with pytest.raises(DataError, match=r"x_train_000000.bin': token 3 at position 5 is not "
                                        r"below the vocabulary size 3"):
        shards.load_tokens(folder, 4)


class _Evil:
    def __reduce__(self):
        return (exec, ("open(__import__('os').environ['EVIL_MARK'], 'w').write('ran')",))


def test_nanogpt_bins_with_meta_pkl_and_a_crafted_pickle_refused(tmp_path, monkeypatch):
    text = SHAKESPEARE.read_text(encoding="utf-8")[:30_000]
    chars, train, val = nanogpt_char(text)
    folder = tmp_path / "shakespeare_char"
    folder.mkdir()
    train.tofile(folder / "train.bin")  # nanoGPT's prepare.py: raw uint16, no header
    val.tofile(folder / "val.bin")
    meta = {"vocab_size": len(chars), "itos": dict(enumerate(chars)),
            "stoi": {c: i for i, c in enumerate(chars)}}
    with open(folder / "meta.pkl", "wb") as f:
        pickle.dump(meta, f)
    data = shards.load_tokens(folder, 16)
    ref = load_text_from(tmp_path, text, 16)
    assert data.vocab.chars == ref.vocab.chars
    assert np.array_equal(data.train_batch(3, 5, 1, 8), ref.train_batch(3, 5, 1, 8))
    mark = tmp_path / "ran"
    monkeypatch.setenv("EVIL_MARK", str(mark))
    (folder / "meta.pkl").write_bytes(pickle.dumps({"vocab_size": 65, "x": _Evil()}))
    with pytest.raises(DataError, match=r"meta.pkl' is refused: only a pickle of dicts of str "
                                        r"and int is read \(it names builtins.exec\)"):
        shards.load_tokens(folder, 16)
    assert not mark.exists()


def load_text_from(folder, text, block_size):
    path = folder / "t.txt"
    path.write_text(text, encoding="utf-8")
    return load_text(path, block_size)


def test_windows_cross_shard_boundaries(tmp_path):
    a = _shard(tmp_path / "s_train_000000.bin", 0, tokens=np.arange(0, 5, dtype="<u2"))
    b = _shard(tmp_path / "s_train_000001.bin", 0, tokens=np.arange(5, 12, dtype="<u2"))
    s = shards.TokenStream([a, b], "llm.c")
    assert len(s) == 12
    idx = np.array([[3, 4, 5, 6], [0, 11, 4, 5]])
    assert np.array_equal(s[idx], idx)
    with pytest.raises(IndexError):
        s[np.array([12])]


def test_memory_stays_flat_on_a_billion_tokens(tmp_path):
    """A sparse shard set of 1.2 billion tokens (2.4 GB on disk, no blocks written): its
    checks and a few batches keep the peak RSS far below the data's size."""
    folder = tmp_path / "big"
    folder.mkdir()
    (folder / "tokenizer.json").write_text('{"type": "char", "chars": "ab"}')
    n = 600_000_000
    for k in range(2):
        with open(folder / f"big_train_{k:06d}.bin", "wb") as f:
            f.write(shards.header(n).tobytes())
            f.truncate(shards.HEADER_BYTES + 2 * n)  # zeros: token 0, sparse
    # VmHWM: this process's own peak (ru_maxrss would keep the pytest process's size
    # from before the exec)
    code = textwrap.dedent(f"""
        from microgpt_fut.data import shards
        d = shards.load_tokens({str(folder)!r}, 64)
        assert len(d.train) == {2 * n}
        for step in range(5):
            b = d.train_batch(step, 1, 2, 12)
            assert b.shape == (2, 12, 65) and (b == 0).all()
        status = open("/proc/self/status").read().splitlines()
        print(next(ln.split()[1] for ln in status if ln.startswith("VmHWM:")))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    peak_mib = int(r.stdout) / 1024
    assert peak_mib < 400, f"peak RSS {peak_mib:.0f} MiB for 2.4 GB of shards"


def test_a_missing_input_after_the_bpe_sample_is_one_line(tmp_path):
    """The BPE's sample ends within the first input; the second, missing, is still
    named in one line, and no shard is left."""
    src = tmp_path / "a.txt"
    src.write_text(SHAKESPEARE.read_text(encoding="utf-8")[:3000], encoding="utf-8")
    r = run("prepare", src, tmp_path / "missing.txt", "--out", tmp_path / "o", "--tokenizer",
            "bpe", "--vocab-size", 300, "--bpe-sample-mb", 0.001)
    assert_one_line_error(r, "cannot read input", "missing.txt")
    assert not list((tmp_path / "o").glob("*.bin"))
