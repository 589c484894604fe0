"""Token shards (shards.py) and `microgpt-fut prepare` (prepare.py): llm.c's .bin format
checked byte by byte, nanoGPT's split and encoding recomputed here as its prepare.py
does, bad shards and pickles refused in one line, and memory that stays flat."""
from __future__ import annotations

import json
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


def _last_word_end(text, limit):
    """The last i <= limit with text[i] whitespace after a non-space, found by a loop."""
    return next(i for i in range(limit, 0, -1) if text[i].isspace() and not text[i - 1].isspace())


def test_prepare_with_bpe_and_validation_files(tmp_path):
    text = SHAKESPEARE.read_text(encoding="utf-8")
    a, b, v = (tmp_path / f"{n}.txt" for n in "abv")
    a.write_text(text[:30_000]), b.write_text(text[30_000:60_000]), v.write_text(text[-20_000:])
    r = run("prepare", a, b, "--val", v, "--out", tmp_path / "o", "--tokenizer", "bpe",
            "--vocab-size", 300, "--bpe-sample-mb", 0.02, "--name", "sh")
    assert r.exit_code == 0, r.output
    # up to the last word end (before whitespace) within 20,000 bytes (ASCII text)
    sample = text[:_last_word_end(text, 20_000)]
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
    assert not (tmp_path / "o").exists()  # the refused run removes the --out it made


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
    assert not (tmp_path / "o").exists()  # the folder it made is gone again


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


def _meta_folder(tmp_path):
    """nanoGPT's shakespeare_char set of the first 3,000 characters: (folder, meta.pkl's
    good bytes)."""
    chars, train, val = nanogpt_char(SHAKESPEARE.read_text(encoding="utf-8")[:3000])
    folder = tmp_path / "nano"
    folder.mkdir()
    train.tofile(folder / "train.bin")
    val.tofile(folder / "val.bin")
    good = pickle.dumps({"vocab_size": len(chars), "itos": dict(enumerate(chars)),
                         "stoi": {c: i for i, c in enumerate(chars)}})
    return folder, good


@pytest.mark.parametrize("damage, what", [
    (lambda good: good[:len(good) // 2], "is truncated"),
    (lambda good: b"", "is empty"),
    (lambda good: b"L12x\n.", "is corrupt"),  # pickle's words: invalid literal for int()
    (lambda good: b"g12x\n.", "is corrupt"),
    (lambda good: b"Fabc\n.", "is corrupt"),
    (lambda good: bytes(range(7, 107)), "is corrupt"),
    (lambda good: pickle.dumps({"itos": {0: "a", "b": "c"}}), "itos is not a map"),
], ids=["truncated", "empty", "int", "memo", "float", "bytes", "keys"])
def test_a_damaged_meta_pkl_is_one_line_naming_it(tmp_path, damage, what):
    """A damaged meta.pkl beside nanoGPT's train.bin/val.bin: one line naming the file
    and what is wrong with it (not Python's words for it), status 1."""
    folder, good = _meta_folder(tmp_path)
    meta = folder / "meta.pkl"
    meta.write_bytes(damage(good))
    r = run("train", "--data", folder, "--steps", 1, "--samples", 0,
            "--out", tmp_path / "m.safetensors")
    line = assert_one_line_error(r, repr(str(meta)), what)
    assert r.exit_code == 1
    for python in ("int()", "base 10", "float", "load key", "Ran out", "not supported"):
        assert python not in line, line
    if what != "itos is not a map":
        assert "--tokenizer PATH" in line and "prepare.py" in line
    meta.write_bytes(good)  # the same folder, whole again: it trains
    r = run("train", "--data", folder, "--steps", 1, "--samples", 0,
            "--out", tmp_path / "m.safetensors")
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("choice", ["bpe", "char"])
def test_tokenizer_char_or_bpe_on_shards_says_where_their_tokenizer_is(tmp_path, choice):
    """--tokenizer char|bpe on a folder of shards is a usage error that says what the
    folder holds: nanoGPT's train.bin/val.bin alone hold no tokenizer (give --tokenizer
    PATH); with meta.pkl, or prepare's tokenizer.json, it has one (leave it out)."""
    folder, good = _meta_folder(tmp_path)
    args = ["train", "--data", folder, "--tokenizer", choice, "--steps", 1, "--samples", 0,
            "--out", tmp_path / "m.safetensors"]
    r = run(*args)
    line = assert_one_line_error(r, f"--tokenizer {choice} does not apply",
                                 f"--data {str(folder)!r} holds none", "--tokenizer PATH")
    assert r.exit_code == 2 and "has it" not in line
    (folder / "meta.pkl").write_bytes(good)
    r = run(*args)
    assert_one_line_error(r, f"--data {str(folder)!r} has it (meta.pkl)", "leave --tokenizer out")
    assert r.exit_code == 2
    src = tmp_path / "in.txt"
    src.write_text(SHAKESPEARE.read_text(encoding="utf-8")[:500])
    assert run("prepare", src, "--out", tmp_path / "o").exit_code == 0
    r = run("train", "--data", tmp_path / "o", "--tokenizer", choice, "--steps", 1)
    assert_one_line_error(r, "has it (tokenizer.json)", "leave --tokenizer out")
    assert r.exit_code == 2


def test_one_token_file_as_data_is_told_to_give_its_folder(tmp_path):
    """--data one file of a shard set (prepare's llm.c shard, nanoGPT's train.bin), with
    any --data-format or none, is a usage error naming the folder to give (it was read
    as text: not valid utf-8, or told to make shards with prepare)."""
    src = tmp_path / "in.txt"
    src.write_text(SHAKESPEARE.read_text(encoding="utf-8")[:2000])
    assert run("prepare", src, "--out", tmp_path / "o").exit_code == 0
    nano, _ = _meta_folder(tmp_path)
    shard = next((tmp_path / "o").glob("in_train_*.bin"))
    for path, what in ((shard, "an llm.c token shard"), (nano / "train.bin", "nanoGPT's"),
                       (nano / "val.bin", "nanoGPT's")):
        for fmt in ([], ["--data-format", "tokens"]):
            r = run("train", "--data", path, *fmt, "--steps", 1, "--samples", 0,
                    "--out", tmp_path / "m.safetensors")
            assert_one_line_error(r, f"--data {str(path)!r} is {what}",
                                  f"give the folder that holds it, --data {path.parent}")
            assert r.exit_code == 2
        # where the run reads a text file, the hint is not the folder (refused in turn)
        r = run("train", "--data", path, "--data-format", "text", "--steps", 1)
        assert_one_line_error(r, f"is {what}", "--data-format text reads a text file",
                              "without --data-format")
        assert r.exit_code == 2
    assert not (tmp_path / "m.safetensors").exists()
    lines = tmp_path / "lines.safetensors"
    r = run("train", "--data", src, "--steps", 1, "--samples", 0, "--out", lines)
    assert r.exit_code == 0, r.output
    for path, fmt in ((shard, []), (nano / "train.bin", ["--data-format", "lines"])):
        r = run("train", "--resume", lines, "--data", path, *fmt)
        assert_one_line_error(r, f"--resume {str(lines)!r} continues a model of lines",
                              "give its data file")
        assert r.exit_code == 2


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
    """A sparse shard set of 1.2 billion tokens (2.4 GB on disk, only the read windows
    written): its checks and a few batches keep the peak RSS far below the data's size,
    and each batch holds the tokens at the starts that nanoGPT's get_batch draws from
    stream_rng(seed, 0, step, micro-batch) (text.py's contract), computed here apart."""
    folder = tmp_path / "big"
    folder.mkdir()
    vocab = 250
    chars = "".join(chr(0x4E00 + i) for i in range(vocab))
    (folder / "tokenizer.json").write_text(json.dumps({"type": "char", "chars": chars}))
    n, block, seed, accum, batch = 600_000_000, 64, 1, 2, 12

    def token(p):  # distinct nonzero ids by global position: a shifted window shows
        return 1 + (p * 2654435761) % (vocab - 1)

    want = np.empty((5, accum, batch, block + 1), dtype=np.int64)
    for step in range(5):
        for a in range(accum):
            rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 0, step, a])))
            starts = rng.integers(0, 2 * n - block, size=batch)
            want[step, a] = token(starts[:, None] + np.arange(block + 1))
    for k in range(2):
        with open(folder / f"big_train_{k:06d}.bin", "wb") as f:
            f.write(shards.header(n).tobytes())
            f.truncate(shards.HEADER_BYTES + 2 * n)  # zeros elsewhere: sparse
    for step in range(5):
        for a in range(accum):
            rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 0, step, a])))
            for s in rng.integers(0, 2 * n - block, size=batch):
                for p in range(int(s), int(s) + block + 1):
                    with open(folder / f"big_train_{p // n:06d}.bin", "r+b") as f:
                        f.seek(shards.HEADER_BYTES + 2 * (p % n))
                        f.write(np.array([token(p)], dtype="<u2").tobytes())
    np.save(tmp_path / "want.npy", want)
    # VmHWM: this process's own peak (ru_maxrss would keep the pytest process's size
    # from before the exec)
    code = textwrap.dedent(f"""
        import numpy as np
        from microgpt_fut.data import shards
        d = shards.load_tokens({str(folder)!r}, {block})
        assert len(d.train) == {2 * n}
        want = np.load({str(tmp_path / "want.npy")!r})
        for step in range(5):
            b = d.train_batch(step, {seed}, {accum}, {batch})
            assert b.shape == ({accum}, {batch}, {block + 1})
            assert np.array_equal(b, want[step]), step
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


# --------------------------------------------------------------------------- issue 34

def _llmc_bytes(tokens, version=1):
    """llm.c's write_datafile layout, made here with struct."""
    fmt = "<H" if version == 1 else "<I"
    return struct.pack("<256i", 20240520, version, len(tokens), *[0] * 253) + \
        b"".join(struct.pack(fmt, int(t)) for t in tokens)


def test_a_name_holding_train_keeps_its_splits_apart(tmp_path):
    """`prepare shakespeare_train.txt`: the val shards are not read as train shards."""
    src = tmp_path / "shakespeare_train.txt"
    src.write_bytes(SHAKESPEARE.read_bytes())
    r = run("prepare", src, "--out", tmp_path / "leak")
    assert r.exit_code == 0, r.output
    _, train, val = nanogpt_char(SHAKESPEARE.read_text(encoding="utf-8"))
    data = shards.load_tokens(tmp_path / "leak", 64)
    assert (len(data.train), len(data.val)) == (len(train), len(val))
    assert np.array_equal(data.val[np.arange(len(val))], val)


def test_llmc_shard_names_are_matched_exactly(tmp_path):
    """{name}_{split}_{index:06d}.bin (fineweb.py) and {name}_{split}.bin
    (tinyshakespeare.py) are read; other .bin files are not shards; two names are refused."""
    d = tmp_path / "d"
    d.mkdir()
    (d / "tiny_shakespeare_val.bin").write_bytes(_llmc_bytes([1, 2, 3]))
    (d / "tiny_shakespeare_train.bin").write_bytes(_llmc_bytes([4, 5, 6, 7]))
    (d / "notes_train_x.bin").write_bytes(b"not a shard")
    (d / "tiny_shakespeare_train_1.bin").write_bytes(b"not a shard either")
    train, val, fmt = shards.find_splits(d)
    assert ([p.name for p in train], [p.name for p in val], fmt) == (
        ["tiny_shakespeare_train.bin"], ["tiny_shakespeare_val.bin"], "llm.c")
    (d / "other_train_000000.bin").write_bytes(_llmc_bytes([1, 2]))
    with pytest.raises(DataError, match="shards of 2 names .'other', 'tiny_shakespeare'."):
        shards.find_splits(d)
    r = run("train", "--arch", "gpt2", "--data-format", "tokens", "--data", d, "--steps", 1)
    assert_one_line_error(r, "2 names")


def test_a_split_in_two_forms_or_beside_nanogpts_files_is_refused(tmp_path):
    """A split held both as {name}_train.bin and as numbered shards (read as one stream,
    the tokens counted twice), or shards beside nanoGPT's train.bin (which were ignored),
    is refused in one line naming the files: which set to train on would be a guess."""
    d = tmp_path / "d"
    d.mkdir()
    (d / "s_train_000000.bin").write_bytes(_llmc_bytes([4, 5, 6, 7]))
    (d / "s_val_000000.bin").write_bytes(_llmc_bytes([1, 2, 3]))
    assert [p.name for p in shards.find_splits(d)[0]] == ["s_train_000000.bin"]
    (d / "s_train.bin").write_bytes(_llmc_bytes([4, 5, 6, 7]))
    with pytest.raises(DataError, match="holds s_train.bin beside 1 numbered shard of the "
                                        "same split: keep one form"):
        shards.find_splits(d)
    (d / "s_train.bin").unlink()
    (d / "train.bin").write_bytes(_llmc_bytes([4, 5, 6, 7]))
    with pytest.raises(DataError, match="holds s's shards and nanoGPT's train.bin"):
        shards.find_splits(d)
    r = run("train", "--data", d, "--steps", 1)
    assert_one_line_error(r, f"--data {str(d)!r} holds s's shards and nanoGPT's train.bin")


def _whole_encoding(folder, files):
    """`tokenizers` on each whole file (the file tokenizer.json in folder), each after
    <|endoftext|>: what the shards must hold."""
    from tokenizers import Tokenizer

    hf = Tokenizer.from_file(str(folder / "tokenizer.json"))
    eot = hf.token_to_id("<|endoftext|>")
    return np.concatenate([[eot, *hf.encode(f.read_bytes().decode("utf-8"),
                                            add_special_tokens=False).ids] for f in files])


def test_bpe_shards_are_the_encoding_of_the_whole_text_for_any_line_length(tmp_path):
    """A 2.2 MB line, blank-line runs and CRLF across the 1 MiB pieces: the shards hold
    exactly what `tokenizers` gives for the whole file."""
    text = SHAKESPEARE.read_text(encoding="utf-8")
    long = tmp_path / "long.txt"
    long.write_text(text[:4000] + text.replace("\n", " ") * 2 + "\n\n\n  x\n"
                    + text[:500_000].replace("\n", "\r\n") + "\n\n\n\n" * 1000 + text[:300_000],
                    encoding="utf-8", newline="")
    r = run("prepare", long, "--out", tmp_path / "o", "--tokenizer", "bpe", "--vocab-size", 300,
            "--bpe-sample-mb", 0.05, "--val-fraction", 0)
    assert r.exit_code == 0, r.output
    want = _whole_encoding(tmp_path / "o", [long])
    _, _, _, got = read_llmc(tmp_path / "o" / "long_train_000000.bin")
    assert len(got) == len(want) and np.array_equal(got, want)


def test_prepare_bpe_learns_from_the_train_split_only(tmp_path):
    """With --val-fraction, the BPE's sample ends at the last word end within 98% of the
    train part's bytes (1 - f of them; the margin as the split is made in tokens), as
    `train --tokenizer bpe` learns from its train split."""
    text = SHAKESPEARE.read_text(encoding="utf-8")[:40_000]
    src = tmp_path / "in.txt"
    src.write_text(text, encoding="utf-8")
    r = run("prepare", src, "--out", tmp_path / "o", "--tokenizer", "bpe", "--vocab-size", 300,
            "--val-fraction", 0.5)
    assert r.exit_code == 0, r.output
    sample = text[:_last_word_end(text, 19_600)]  # ASCII: bytes are characters
    assert f"first {len(sample):,} bytes of 40,000" in r.output
    assert shards.load_tokens(tmp_path / "o", 8).vocab == train_bpe(sample, 300)


def test_the_char_tokenizer_json_is_one_that_tokenizers_loads(tmp_path):
    """prepare's character tokenizer.json: tokenizers.Tokenizer.from_file loads it and
    encodes nanoGPT's ids; a folder with the former {"type": "char"} file still loads."""
    from tokenizers import Tokenizer

    src = tmp_path / "in.txt"
    text = SHAKESPEARE.read_text(encoding="utf-8")[:30_000] + "é\r\t\u2028 ü\n"
    src.write_text(text, encoding="utf-8", newline="")
    assert run("prepare", src, "--out", tmp_path / "o").exit_code == 0
    chars = sorted(set(text))
    hf = Tokenizer.from_file(str(tmp_path / "o" / "tokenizer.json"))
    assert hf.encode(text).ids == [chars.index(c) for c in text]
    # a character outside the vocabulary is left out, not an error (no "<unk>" it lacks)
    assert hf.encode("€a☃b").ids == [chars.index("a"), chars.index("b")]
    assert shards.load_tokens(tmp_path / "o", 8).vocab.chars == "".join(chars)
    (tmp_path / "o" / "tokenizer.json").write_text(
        '{"type": "char", "chars": %s}' % json.dumps("".join(chars)))
    assert shards.load_tokens(tmp_path / "o", 8).vocab.chars == "".join(chars)


def test_the_char_vocabulary_covers_the_val_files(tmp_path):
    a, v = tmp_path / "a.txt", tmp_path / "v.txt"
    a.write_text("abc\n" * 100)
    v.write_text("abd\n" * 50)
    r = run("prepare", a, "--val", v, "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    data = shards.load_tokens(tmp_path / "o", 8)
    assert data.vocab.chars == "\nabcd"
    assert data.val[np.arange(4)].tolist() == [1, 2, 4, 0]


def _snapshot(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() if p.is_file() else None
            for p in sorted(folder.rglob("*"))}


def test_a_failed_overwrite_leaves_the_old_set_exactly(tmp_path):
    """The val split is found empty after the train shards are written: the old set,
    tokenizer.json included, is as it was, and nothing hidden is left."""
    src = tmp_path / "in.txt"
    src.write_text(SHAKESPEARE.read_text(encoding="utf-8")[:50_000], encoding="utf-8")
    assert run("prepare", src, "--out", tmp_path / "o", "--shard-tokens", 7000).exit_code == 0
    before = _snapshot(tmp_path / "o")
    other = tmp_path / "other.txt"
    other.write_text("xyz\n" * 5000)
    r = run("prepare", other, "--out", tmp_path / "o", "--name", "in", "--overwrite",
            "--val-fraction", 1e-17, "--shard-tokens", 1000)
    assert_one_line_error(r, "val split would hold no tokens")
    assert _snapshot(tmp_path / "o") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "o", "other.txt"]
    # a new --out that fails is not left behind, nor its lock, nor the parents it made
    (tmp_path / "had").mkdir()
    for args in (["--val-fraction", 1e-17], ["--tokenizer", tmp_path / "none.json"]):
        r = run("prepare", other, "--out", tmp_path / "had" / "n9" / "n8" / "n7", *args)
        assert_one_line_error(r, "val split would hold no tokens" if "--val-fraction" in args
                              else "none.json")
        assert list((tmp_path / "had").iterdir()) == []


def test_an_interrupted_overwrite_leaves_the_old_set_exactly(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text(SHAKESPEARE.read_text(encoding="utf-8")[:200_000], encoding="utf-8")
    tok = char_vocab([src])
    prepare([src], tmp_path / "o", tok, name="in", shard_tokens=30_000)
    before = _snapshot(tmp_path / "o")
    for stop_at in (1, 3):  # the first piece; after the first new shard is written
        calls = []

        def stop(n_bytes, n_tokens):
            calls.append(n_tokens)
            if len(calls) == stop_at:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            prepare([src, src, src], tmp_path / "o", tok, name="in", progress=stop,
                    shard_tokens=10_000, overwrite=True)
        assert _snapshot(tmp_path / "o") == before


def _fifo_prepare(tmp_path, out, *extra):
    """A `prepare` process reading a FIFO (with --tokenizer PATH, read once): it waits
    for the test to write, so the test acts while it is surely under way."""
    import os

    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    tok = tmp_path / "tok"
    tok.mkdir()
    (tok / "tokenizer.json").write_text(
        '{"type": "char", "chars": %s}' % json.dumps("".join(sorted(set(
            SHAKESPEARE.read_text(encoding="utf-8"))))))
    p = subprocess.Popen([sys.executable, "-m", "microgpt_fut", "prepare",
                          str(fifo), "--out", str(out), "--tokenizer", str(tok / "tokenizer.json"),
                          "--name", "in", *map(str, extra)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writer = open(fifo, "w", encoding="utf-8")  # blocks until prepare opens it
    return p, writer


def _wait_for(cond, p, timeout=120, ok_exit=False):
    import time

    t0 = time.monotonic()
    while not cond():
        assert ok_exit or p.poll() is None, p.communicate()
        assert time.monotonic() - t0 < timeout
        time.sleep(0.05)


@pytest.mark.parametrize("sig, n, rc, word", [(2, 1, 130, "interrupted"),
                                             (15, 1, 143, "SIGTERM"),
                                             (2, 2, 130, "interrupted twice")])
def test_a_signal_during_an_overwrite_leaves_the_old_set_exactly(tmp_path, sig, n, rc, word):
    """Ctrl-C or SIGTERM while the new tokens are being written (the process waits on its
    FIFO input): the old set is as it was, byte for byte, and no hidden file is left
    (the lock neither), also when a second Ctrl-C ends the process at once."""
    import os
    import signal

    src = tmp_path / "in.txt"
    src.write_text(SHAKESPEARE.read_text(encoding="utf-8")[:50_000], encoding="utf-8")
    out = tmp_path / "o"
    assert run("prepare", src, "--out", out, "--shard-tokens", 7000).exit_code == 0
    before = _snapshot(out)
    p, writer = _fifo_prepare(tmp_path, out, "--overwrite", "--shard-tokens", 1000)
    with writer:
        writer.write(SHAKESPEARE.read_text(encoding="utf-8")[:100_000])
        writer.flush()
        _wait_for(lambda: any(out.glob(".prepare-*/*.tokens")), p)  # its tokens are coming
        p.send_signal(sig)
        if n == 2:  # blocked on its input, it can only end by a second signal (two sent
            # at once may arrive as one, so repeat until it ends)
            _wait_for(lambda: p.send_signal(sig) or p.poll() is not None, p, ok_exit=True)
        else:
            writer.write("more text\n")
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == rc, stderr
    assert stderr.count("\n") == 1 and word in stderr and "as it was" in stderr, stderr
    assert _snapshot(out) == before
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "o", "pipe.txt", "tok"]
    assert signal.SIGINT == 2 and signal.SIGTERM == 15


def test_a_killed_prepares_hidden_folder_is_removed_by_the_next(tmp_path):
    """kill -9 leaves the hidden folder of the unfinished set; the next prepare into that
    --out (holding the lock, so no other run writes it) removes it."""
    out = tmp_path / "o"
    (out / ".prepare-x1y2").mkdir(parents=True)
    (out / ".prepare-x1y2" / "train.tokens").write_bytes(b"\0" * 1000)
    src = tmp_path / "in.txt"
    src.write_text("hello\n" * 100)
    assert run("prepare", src, "--out", out).exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == ["in_train_000000.bin", "in_val_000000.bin",
                                                      "tokenizer.json"]


def test_two_prepares_into_one_out_the_second_is_refused(tmp_path):
    out = tmp_path / "o"
    p, writer = _fifo_prepare(tmp_path, out)
    with writer:
        writer.write(SHAKESPEARE.read_text(encoding="utf-8")[:20_000])
        writer.flush()
        _wait_for(lambda: any(out.glob(".prepare-*")), p)
        src = tmp_path / "in.txt"
        src.write_text("hello\n" * 100)
        r = run("prepare", src, "--out", out, "--name", "in")
        assert_one_line_error(r, str(out), "another microgpt-fut process")
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 0, stderr
    assert sorted(p.name for p in out.iterdir()) == ["in_train_000000.bin", "in_val_000000.bin",
                                                      "tokenizer.json"]


def test_two_prepares_into_one_out_through_a_symlink_the_second_is_refused(tmp_path):
    """The lock is taken on --out's resolved path: a symlink to the folder being written
    (or to a folder above it) is the same --out."""
    out = tmp_path / "conc2"
    p, writer = _fifo_prepare(tmp_path, out)
    with writer:
        writer.write(SHAKESPEARE.read_text(encoding="utf-8")[:20_000])
        writer.flush()
        _wait_for(lambda: any(out.glob(".prepare-*")), p)
        (tmp_path / "conc2link").symlink_to("conc2")
        (tmp_path / "up").symlink_to(".")
        src = tmp_path / "in.txt"
        src.write_text("hello\n" * 100)
        for link in (tmp_path / "conc2link", tmp_path / "up" / "conc2"):
            r = run("prepare", src, "--out", link, "--name", "in", "--overwrite")
            assert_one_line_error(r, str(link), "another microgpt-fut process")
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 0, stderr
    assert sorted(p.name for p in out.iterdir()) == ["in_train_000000.bin", "in_val_000000.bin",
                                                      "tokenizer.json"]
    assert shards.load_tokens(out, 8).n_tokens == 20_000


@pytest.mark.parametrize("args, fragments, code", [
    (["--name", "../escaped"], ["--name '../escaped' holds a '/'"], 2),
    (["--name", "a/b"], ["--name 'a/b' holds a '/'"], 2),
    (["--name", ".."], ["--name '..' names a folder"], 2),
    (["--name", "."], ["--name '.' names a folder", "--out itself"], 2),
    (["--name", ""], ["--name '' is empty", "plain file name"], 2),
    (["--name", "a\nb"], ["--name 'a\\nb' holds a control character"], 2),
    (["--name", "x" * 240], ["--name 'xxx", "is too long (240 bytes", "at most 229"], 2),
    (["--bpe-sample-mb", "1"], ["--bpe-sample-mb goes with --tokenizer bpe"], 2),
    (["--val", "in.txt2", "--val-fraction", "0.2"],
     ["--val-fraction", "--val", "not both"], 2),
    (["--out", "FILE/o"], ["is a file, not a folder"], 1),
    (["--out", "/sys/microgpt-fut-o"], ["cannot write --out '/sys/microgpt-fut-o'"], 1),
])
def test_prepare_refuses_bad_names_and_outs_in_one_line(tmp_path, args, fragments, code):
    src = tmp_path / "in.txt"
    src.write_text("hello\n" * 100)
    (tmp_path / "FILE").write_text("x")
    args = [str(tmp_path / a) if a == "FILE/o" else a for a in args]
    if "--val" in args:  # a validation file (removed before the folder's check)
        (tmp_path / "in.txt2").write_text("bye\n" * 10)
        args = [str(tmp_path / a) if a == "in.txt2" else a for a in args]
    if "--out" not in args:
        args += ["--out", str(tmp_path / "o")]
    r = run("prepare", src, *args)
    assert_one_line_error(r, *fragments)
    assert r.exit_code == code
    (tmp_path / "in.txt2").unlink(missing_ok=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FILE", "in.txt"]


def test_prepare_from_a_pipe(tmp_path):
    """/dev/stdin: a character vocabulary would read it twice, so it is refused in one
    line; with --tokenizer PATH it is read once, and the shards are the file's."""
    text = SHAKESPEARE.read_text(encoding="utf-8")[:20_000]
    cmd = [sys.executable, "-m", "microgpt_fut", "prepare", "/dev/stdin",
           "--out", str(tmp_path / "o"), "--name", "p"]
    r = subprocess.run(cmd, input=text, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "not a regular file" in r.stderr and "--tokenizer PATH" in r.stderr
    assert not (tmp_path / "o").exists()
    src = tmp_path / "in.txt"
    src.write_text(text)
    assert run("prepare", src, "--out", tmp_path / "ref", "--name", "p").exit_code == 0
    r = subprocess.run(cmd + ["--tokenizer", str(tmp_path / "ref" / "tokenizer.json")],
                       input=text, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for n in ("p_train_000000.bin", "p_val_000000.bin"):
        assert (tmp_path / "o" / n).read_bytes() == (tmp_path / "ref" / n).read_bytes()


@pytest.mark.parametrize("command", ["prepare", "eval"])
def test_a_closed_stdout_exits_141_with_one_line(tmp_path, command):
    """`eval ... | head -0`: SIGPIPE's status, one line on stderr. `prepare ... | head
    -0`: prepare prints nothing on stdout (its wrote line is progress, on stderr), so it
    ends as usual, its shards whole."""
    src = tmp_path / "in.txt"
    src.write_text(SHAKESPEARE.read_text(encoding="utf-8")[:20_000])
    if command == "prepare":
        args = ["prepare", str(src), "--out", str(tmp_path / "o")]
    else:
        ck = tmp_path / "m.safetensors"
        r = run("train", "--arch", "gpt2", "--data", src, "--steps", 1, "--n-embd", 8,
                "--n-head", 2, "--block-size", 16, "--samples", 0, "--out", ck, "--quiet")
        assert r.exit_code == 0, r.output
        f = tmp_path / "c.jsonl"
        f.write_text(json.dumps({"ctx": "First", "endings": ["Citizen", "man"], "label": 0}))
        args = ["eval", "--checkpoint", str(ck), "--choices", str(f), "--backend", "c"]
    p = subprocess.Popen([sys.executable, "-m", "microgpt_fut", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()  # the reader went away
    stderr = p.stderr.read()
    if command == "prepare":
        assert p.wait(timeout=300) == 0, stderr
        assert stderr.count("\n") == 1 and stderr.startswith("wrote "), stderr
        assert shards.load_tokens(tmp_path / "o", 8).n_tokens == 20_000
        return
    assert p.wait(timeout=300) == 141, stderr
    assert stderr.count("\n") == 1 and "stdout was closed" in stderr, stderr


def test_a_block_size_longer_than_the_shards_is_a_usage_error(tmp_path):
    """Exit status 2 on tokens as on text (README: usage errors exit 2)."""
    src = tmp_path / "in.txt"
    src.write_text(SHAKESPEARE.read_text(encoding="utf-8")[:2000])
    assert run("prepare", src, "--out", tmp_path / "o").exit_code == 0
    for fmt, data in (("tokens", tmp_path / "o"), ("text", src)):
        r = run("train", "--arch", "gpt2", "--data-format", fmt, "--data", data,
                "--block-size", 1900, "--steps", 1)
        assert_one_line_error(r, "--block-size 1900")
        assert r.exit_code == 2, fmt
    # the shards' message names the sizes and the fix: the largest --block-size that fits
    (n_train,), (n_val,) = ([read_llmc(p)[2] for p in sorted((tmp_path / "o").glob(f"*_{s}_*"))]
                            for s in ("train", "val"))
    fits = min(n_train, n_val) - 1  # both splits' (the first hint ignored the val split's)
    for block, split, n, more in ((1900, "training", n_train, "shards of more text"),
                                  (n_val, "validation", n_val, "a larger validation split")):
        r = run("train", "--data", tmp_path / "o", "--block-size", block, "--steps", 1)
        assert_one_line_error(r, f"the {split} shards hold {n:,} tokens",
                              f"--block-size {block} needs at least {block + 1}",
                              f"use --block-size {fits} or less, or {more}")
        assert r.exit_code == 2
    r = run("train", "--data", tmp_path / "o", "--block-size", fits, "--steps", 1,
            "--samples", 0, "--out", tmp_path / "m.safetensors")
    assert r.exit_code == 0, r.output


def test_resume_on_short_other_shards_names_the_data(tmp_path):
    """A tokens run resumed with --data shards too short for its --block-size (made of
    another, shorter text with the same tokenizer) is told they are not the run's
    shards and to give --data its own: not --block-size, which a resume cannot change."""
    src, short = tmp_path / "in.txt", tmp_path / "short.txt"
    text = SHAKESPEARE.read_text(encoding="utf-8")[:3000]
    src.write_text(text)
    short.write_text(text[:200])
    assert run("prepare", src, "--out", tmp_path / "o").exit_code == 0
    assert run("prepare", short, "--out", tmp_path / "s", "--tokenizer",
               tmp_path / "o" / "tokenizer.json").exit_code == 0  # 180 train, 20 val tokens
    out = tmp_path / "m.safetensors"
    r = run("train", "--data", tmp_path / "o", "--block-size", 64, "--steps", 2,
            "--eval-iters", 1, "--out", out, "--samples", 0)
    assert r.exit_code == 0, r.output
    r = run("train", "--resume", out, "--data", tmp_path / "s")
    line = assert_one_line_error(r, "other data", str(tmp_path / "s"), str(tmp_path / "o"),
                                 "give --data the shards it was trained on")
    assert r.exit_code == 1 and "--block-size" not in line


def test_train_2_to_1_into_a_closed_pipe_exits_141(tmp_path):
    """`train ... 2>&1 | head -3`: stderr is the closed pipe too; the run saves and exits
    with SIGPIPE's status (click would say 1)."""
    src = tmp_path / "in.txt"
    src.write_text(SHAKESPEARE.read_text(encoding="utf-8")[:20_000])
    assert run("prepare", src, "--out", tmp_path / "o").exit_code == 0
    p = subprocess.Popen([sys.executable, "-m", "microgpt_fut", "train", "--arch", "gpt2",
                          "--data-format", "tokens", "--data", str(tmp_path / "o"), "--steps",
                          "100000", "--n-embd", "8", "--n-head", "2", "--block-size", "16",
                          "--eval-every", "1", "--backend", "c", "--out",
                          str(tmp_path / "m.safetensors")], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    lines = [p.stdout.readline() for _ in range(3)]
    p.stdout.close()  # head -3 is done
    assert p.wait(timeout=300) == 141, lines
    assert (tmp_path / "m.safetensors").is_file()


def test_help_and_messages_name_what_they_mean(tmp_path):
    """train --help: --data for each format, --vocab-size's least value, options that
    token runs read not labelled text-only; prepare --help: uint32 shards; a one-character
    text names its file; microgpt's --eval-iters on lines names tokens runs too."""
    out = run("train", "--help").output
    flat = " ".join(out.split())
    assert "tokens: a folder of token shards" in flat and "at least 257" in flat
    for opt in ("--eval-iters INTEGER", "--grad-accum INTEGER", "--eval-choices FILE"):
        assert flat.split(f"{opt} ", 1)[1].startswith("text, tokens:"), opt
    for opt in ("--min-lr FLOAT", "--no-bias"):  # the recipe's
        assert flat.split(f"{opt} ", 1)[1].startswith("gpt2:"), opt
    for opt in ("--weight-decay FLOAT", "--grad-clip FLOAT"):  # both families' AdamW
        assert flat.split(f"{opt} ", 1)[1].startswith(("AdamW", "clip")), opt
    assert "else uint32" in " ".join(run("prepare", "--help").output.split())
    one = tmp_path / "one.txt"
    one.write_text("a" * 100)
    r = run("train", "--arch", "microgpt", "--data-format", "text", "--data", one, "--steps", 1,
            "--block-size", 4)
    assert_one_line_error(r, str(one), "1 token")
    r = run("train", "--arch", "microgpt", "--eval-iters", 3, "--steps", 1)
    assert_one_line_error(r, "--eval-iters", "text and tokens")


# --------------------------------------------------------------------------- the trial after issue 34

def _sample_bytes(output):
    """The N of prepare's line "training a BPE ... on the inputs' first N bytes"."""
    return int(output.split("first ", 1)[1].split(" bytes", 1)[0].replace(",", ""))


def _train_text_bytes(folder, name):
    """The bytes of text that the train split's tokens stand for, decoded by `tokenizers`
    from the shard (the leading <|endoftext|> left out)."""
    from tokenizers import Tokenizer

    hf = Tokenizer.from_file(str(folder / "tokenizer.json"))
    _, _, _, train = read_llmc(folder / f"{name}_train_000000.bin")
    assert train[0] == hf.token_to_id("<|endoftext|>")
    return len(hf.decode(train[1:].tolist(), skip_special_tokens=False).encode("utf-8"))


def test_bpe_prepare_of_one_line_learns_inside_the_train_split(tmp_path):
    """A 100 KB input without a line end, and small inputs, with the defaults: the BPE
    learns from the first bytes (cut inside the line), all of them inside the train
    split (the text of its tokens, decoded by `tokenizers`); --bpe-sample-mb 0.01 takes
    at most 10,000 bytes."""
    text = SHAKESPEARE.read_text(encoding="utf-8")[:100_000].replace("\n", " ")
    one = tmp_path / "oneline.txt"
    one.write_text(text, encoding="utf-8")
    for k, extra in enumerate(([], ["--bpe-sample-mb", 0.01])):
        r = run("prepare", one, "--out", tmp_path / f"o{k}", "--tokenizer", "bpe",
                "--vocab-size", 512, *extra)
        assert r.exit_code == 0, r.output
        n = _sample_bytes(r.output)
        assert 0 < n <= (10_000 if extra else 90_000) and "all of them" not in r.output
        assert n <= _train_text_bytes(tmp_path / f"o{k}", "oneline")
        # ASCII: bytes are characters; the sample ends before a space, after a word
        assert text[n] == " " and text[n - 1] != " "
        assert shards.load_tokens(tmp_path / f"o{k}", 8).vocab == train_bpe([text[:n]], 512)
    lines = SHAKESPEARE.read_text(encoding="utf-8")
    for size in (20, 60, 200, 1000):
        small = tmp_path / f"s{size}.txt"
        small.write_text(lines[:size], encoding="utf-8")
        r = run("prepare", small, "--out", tmp_path / f"s{size}", "--tokenizer", "bpe",
                "--vocab-size", 512)
        assert r.exit_code == 0, (size, r.output)
        assert _sample_bytes(r.output) <= _train_text_bytes(tmp_path / f"s{size}", f"s{size}")


def test_a_bpe_sample_past_the_train_split_is_refused_with_a_fix_that_works(tmp_path):
    """Text whose end the BPE compresses far better than its middle (runs of 'a' that the
    sample learned; random words it did not): the val split's few tokens hold many bytes,
    so the default sample reaches past the train split. The one-line error names the
    bytes and a --bpe-sample-mb that then works."""
    rng = np.random.default_rng(0)
    words = " ".join("".join(rng.choice(list("bcdfghjklmnpqrstvwxz"), 5)) for _ in range(7000))
    src = tmp_path / "in.txt"
    src.write_text("a" * 50_000 + " " + words + " " + "a" * 20_000, encoding="utf-8")
    args = ["prepare", src, "--out", tmp_path / "o", "--tokenizer", "bpe", "--vocab-size", 300]
    r = run(*args)
    assert_one_line_error(r, "the BPE learned from the inputs' first", "bytes",
                          "--bpe-sample-mb")
    assert r.exit_code == 1 and not (tmp_path / "o").exists()
    fix = r.output.split("Error: ", 1)[1].split("--bpe-sample-mb ", 1)[1].split()[0]
    r = run(*args, "--bpe-sample-mb", fix)
    assert r.exit_code == 0, r.output
    assert _sample_bytes(r.output) <= _train_text_bytes(tmp_path / "o", "in")


@pytest.mark.parametrize("how", ["twice", "symlink", "hardlink", "val", "val-symlink", "val-twice"])
def test_an_input_given_twice_or_also_as_val_is_refused(tmp_path, how):
    """The same file twice (by name, symlink or hard link) would put its val tokens into
    train; an input that is also a --val file would validate on trained text. One line,
    exit 2, naming both, and nothing written."""
    import os

    src = tmp_path / "f.txt"
    src.write_text("hello world\n" * 100)
    other = src
    if "symlink" in how:
        other = tmp_path / "link.txt"
        other.symlink_to(src.name)
    elif how == "hardlink":
        other = tmp_path / "hard.txt"
        os.link(src, other)
    if how.startswith("val"):
        v = tmp_path / "v.txt"
        v.write_text("bye\n" * 10)
        vals = [v, v] if how == "val-twice" else [other]
        r = run("prepare", src, *[a for p in vals for a in ("--val", p)], "--out", tmp_path / "o")
        words = ["--val", "v.txt"] if how == "val-twice" else ["--val", str(other), "input"]
    else:
        r = run("prepare", src, other, "--out", tmp_path / "o")
        words = [str(src), str(other), "twice"]
    assert_one_line_error(r, *words)
    assert r.exit_code == 2
    assert not (tmp_path / "o").exists()


def test_an_out_holding_a_nanogpt_set_is_an_existing_set(tmp_path):
    """train.bin, val.bin and meta.pkl (nanoGPT's prepare.py), and GPT-2's vocab.json
    and merges.txt, are a set that --out already holds: refused without --overwrite
    (nothing changed), replaced with it (only the new set is left, which train reads)."""
    out = tmp_path / "o"
    out.mkdir()
    old = {"train.bin": np.arange(100, dtype=np.uint16).tobytes(),
           "val.bin": np.arange(20, dtype=np.uint16).tobytes(),
           "meta.pkl": pickle.dumps({"vocab_size": 100, "itos": {i: chr(40 + i) for i in range(100)},
                                     "stoi": {chr(40 + i): i for i in range(100)}}),
           "vocab.json": b"{}", "merges.txt": b"#version: 0.2\n", "notes.txt": b"mine"}
    for n, b in old.items():
        (out / n).write_bytes(b)
    src = tmp_path / "in.txt"
    src.write_text("hello world\n" * 100)
    before = _snapshot(out)
    r = run("prepare", src, "--out", out)
    assert_one_line_error(r, "already holds", "merges.txt", "--overwrite")
    assert r.exit_code == 1 and _snapshot(out) == before
    r = run("prepare", src, "--out", out, "--overwrite")
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == ["in_train_000000.bin", "in_val_000000.bin",
                                                      "notes.txt", "tokenizer.json"]
    assert shards.load_tokens(out, 8).vocab.chars == "\n dehlorw"


def test_an_empty_out_is_a_usage_error(tmp_path, monkeypatch):
    """--out "" would be the current folder: refused (exit 2), nothing written there."""
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "in.txt"
    src.write_text("hello\n" * 100)
    r = run("prepare", src, "--out", "")
    assert_one_line_error(r, "--out", "empty")
    assert r.exit_code == 2 and sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_a_second_signals_cleanup_removes_the_stage_while_files_are_still_made(tmp_path):
    """A second signal's cleanup (prepare's, run by the signal watcher thread) removes the
    unfinished set's hidden folder although the main thread still makes files in it (as
    it writes shards), so that no `.prepare-*` is left; --out is as it was."""
    import threading

    src = tmp_path / "in.txt"
    src.write_text(SHAKESPEARE.read_text(encoding="utf-8")[:20_000], encoding="utf-8")
    out = tmp_path / "o"
    prepare([src], out, char_vocab([src]), name="in")
    before = _snapshot(out)
    cleanups = []

    def second_signal(n_bytes, n_tokens):
        stage, = out.glob(".prepare-*")
        for i in range(3000):  # a stage of many files: rmtree takes a while
            (stage / f"s{i}").write_bytes(b"")
        watcher = threading.Thread(target=cleanups[-1])
        watcher.start()
        i = 0
        while watcher.is_alive():  # the main thread writes on meanwhile
            try:
                (stage / f"new{i}").write_bytes(b"")
            except OSError:
                break
            i += 1
        watcher.join()
        assert not stage.exists(), f"left with {len(list(stage.iterdir()))} files"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        prepare([src], out, char_vocab([src]), name="in", overwrite=True, progress=second_signal,
                cleanups=cleanups)
    assert _snapshot(out) == before and not cleanups


@pytest.mark.parametrize("case", ["folder", "val-folder", "val-utf8", "utf8", "unknown",
                                  "BPE", "Char"])
def test_prepare_messages_name_the_file_and_the_fix(tmp_path, case):
    """A folder as input is called a folder; a --val file is called one; bad UTF-8 and an
    unknown character name the fix; --tokenizer BPE or Char is the kind."""
    src = tmp_path / "in.txt"
    src.write_text("hello world\n" * 100)
    (tmp_path / "dir").mkdir()
    (tmp_path / "bad.txt").write_bytes(b"ok\n\xffno")
    (tmp_path / "v.txt").write_text("hello zebra\n")
    assert run("prepare", src, "--out", tmp_path / "ref").exit_code == 0
    ref_tok = tmp_path / "ref" / "tokenizer.json"
    args, words = {
        "folder": ([tmp_path / "dir"], ["input", "dir'", "is a folder, not a text file"]),
        "val-folder": ([src, "--val", tmp_path / "dir"], ["--val file", "is a folder"]),
        "utf8": ([tmp_path / "bad.txt"], ["input", "byte offset 3", "convert it to UTF-8"]),
        "val-utf8": ([src, "--val", tmp_path / "bad.txt"], ["--val file", "bad.txt",
                                                             "convert it to UTF-8"]),
        "unknown": ([src, "--val", tmp_path / "v.txt", "--tokenizer", ref_tok],
                    ["--val file", "v.txt", "'z'", "--tokenizer char"]),
        "BPE": ([src, "--tokenizer", "BPE", "--vocab-size", 300], []),
        "Char": ([src, "--tokenizer", "Char"], []),
    }[case]
    r = run("prepare", *args, "--out", tmp_path / "o")
    if not words:
        assert r.exit_code == 0, r.output
        assert shards.load_tokens(tmp_path / "o", 8).vocab.kind == case.lower()
        return
    assert_one_line_error(r, *words)
    assert "input" not in r.output or not case.startswith("val")
    assert not (tmp_path / "o").exists()


def test_a_second_signal_just_after_the_swap_keeps_the_old_set(tmp_path, monkeypatch):
    """A second signal whose cleanup runs when the new set has just been moved in (the
    old one waits in the hidden folder, to be removed): the old set is put back, byte
    for byte, and no hidden folder is left (the cleanup once removed the old set with
    the hidden folder, leaving the new one under a line saying "as it was")."""
    from microgpt_fut.data import prepare as preparation

    src = tmp_path / "in.txt"
    src.write_text(SHAKESPEARE.read_text(encoding="utf-8")[:20_000], encoding="utf-8")
    out = tmp_path / "o"
    prepare([src], out, char_vocab([src]), name="in")
    before = _snapshot(out)
    cleanups = []
    swap = preparation._swap_in

    def swap_then_second_signal(*args, **kwargs):
        swap(*args, **kwargs)
        cleanups[-1]()  # the watcher thread's cleanup; the process would end at once
        raise KeyboardInterrupt

    monkeypatch.setattr(preparation, "_swap_in", swap_then_second_signal)
    other = tmp_path / "other.txt"
    other.write_text("xyz\n" * 5000)
    with pytest.raises(KeyboardInterrupt):
        prepare([other], out, char_vocab([other]), name="in", overwrite=True, shard_tokens=1000,
                cleanups=cleanups)
    assert _snapshot(out) == before
