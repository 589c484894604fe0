"""Character-level text data (nanoGPT shakespeare_char): vocabulary, split, windows, batches.

Expected values are computed independently: Python string slicing, sorted(set(...)),
int(n * 0.9) by hand, and NumPy's Generator re-drawn directly.
"""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from conftest import DATA_DIR
from microgpt_fut.data.lines import read_docs, read_text
from microgpt_fut.errors import DataError
from microgpt_fut.data.text import CharVocab, load_text, stream_rng, windows

# 54 characters, 26 distinct
TEXT = "First Citizen:\nBefore we proceed any further, hear me."


def _file(tmp_path, text: str, name: str = "t.txt"):
    p = tmp_path / name
    p.write_bytes(text.encode("utf-8"))
    return p


def _redraw(seed, kind, i, j, high, size):
    """The starts the spec says are drawn, with NumPy directly (not via stream_rng)."""
    g = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, kind, i, j])))
    return g.integers(0, high, size=size)


def _one_line_error(fn, *args, **kw) -> str:
    with pytest.raises(DataError) as e:
        fn(*args, **kw)
    msg = str(e.value)
    assert "\n" not in msg and msg.strip() == msg and msg
    return msg


# --- vocabulary ---------------------------------------------------------------------

def test_vocab_is_sorted_set_and_round_trips():
    v = CharVocab.from_text(TEXT)
    assert list(v.chars) == sorted(set(TEXT))
    assert v.size == len(set(TEXT)) == 26
    ids = v.encode(TEXT, "text")
    assert ids.dtype == np.int64 and ids.shape == (len(TEXT),)
    assert [v.chars[i] for i in ids] == list(TEXT)
    assert ids[0] == sorted(set(TEXT)).index("F")
    assert v.decode(ids) == TEXT
    assert v.decode([]) == "" and v.encode("", "x").shape == (0,)


def test_encode_unknown_character_names_what():
    v = CharVocab.from_text("abc")
    msg = _one_line_error(v.encode, "abxcz", "--prompt")
    assert msg.startswith("--prompt: ")
    assert "'x'" in msg and "U+0078" in msg and "vocabulary" in msg
    msg = _one_line_error(v.encode, "a\nb", "--prompt")  # a newline is shown escaped
    assert "U+000A" in msg


# --- reading and splitting ------------------------------------------------------------

def test_split_sizes_and_concatenation(tmp_path):
    p = _file(tmp_path, TEXT)
    d = load_text(p, block_size=4)
    assert d.n_chars == 54
    assert len(d.train) == 48 and len(d.val) == 6  # int(54 * 0.9) = int(48.6) = 48
    assert d.vocab.decode(d.train) == TEXT[:48] and d.vocab.decode(d.val) == TEXT[48:]
    assert np.array_equal(np.concatenate([d.train, d.val]), d.vocab.encode(TEXT, "t"))
    assert d.train.dtype == d.val.dtype == np.int64
    assert d.sha256 == hashlib.sha256(TEXT.encode("utf-8")).hexdigest()
    assert d.block_size == 4 and d.val_fraction == 0.1 and d.path == str(p)


def test_other_val_fraction_and_zero(tmp_path):
    p = _file(tmp_path, TEXT)
    d = load_text(p, block_size=4, val_fraction=0.25)
    assert (len(d.train), len(d.val)) == (40, 14)  # int(54 * 0.75) = int(40.5) = 40
    d = load_text(p, block_size=4, val_fraction=0.0)
    assert len(d.train) == 54 and len(d.val) == 0
    msg = _one_line_error(d.eval_batches, "val", 0, 0, 1, 1)
    assert "validation" in msg
    assert d.eval_batches("train", 0, 0, 1, 1).shape == (1, 1, 5)


def test_bom_dropped_and_line_endings_kept(tmp_path):
    p = tmp_path / "b.txt"
    p.write_bytes(b"\xef\xbb\xbfab\r\ncd\n" * 3)
    d = load_text(p, block_size=2, val_fraction=0.0)
    # only the leading BOM is dropped; later ones are ordinary characters
    assert d.vocab.chars == "\n\rabcd\ufeff"
    assert d.vocab.decode(d.train) == "ab\r\ncd\n" + "\ufeffab\r\ncd\n" * 2
    assert d.sha256 == hashlib.sha256(p.read_bytes()).hexdigest()


def test_read_text_and_read_docs_share_the_reading(tmp_path):
    p = tmp_path / "l1.txt"
    p.write_bytes("zoë\n\nrené\n".encode("latin-1"))
    assert read_text(p, "latin-1") == "zoë\n\nrené\n"
    assert read_docs(p, "latin-1") == ["zoë", "rené"]
    assert load_text(p, 2, 0.0, "latin-1").vocab.chars == "\nenorzéë"


# --- windows and batches -----------------------------------------------------------

def test_windows_are_slices():
    v = CharVocab.from_text(TEXT)
    toks = v.encode(TEXT, "t")
    starts = np.array([[0, 5], [49, 13]])
    w = windows(toks, starts, 4)
    assert w.shape == (2, 2, 5) and w.dtype == np.int64
    for s, row in zip(starts.ravel(), w.reshape(-1, 5)):
        assert v.decode(row) == TEXT[s:s + 5]


def test_train_batch_windows_match_redrawn_starts(tmp_path):
    d = load_text(_file(tmp_path, TEXT), block_size=4)
    train_text = TEXT[:48]
    b = d.train_batch(step=7, seed=3, grad_accum=3, batch_size=5)
    assert b.shape == (3, 5, 5) and b.dtype == np.int64
    for a in range(3):
        starts = _redraw(3, 0, 7, a, 48 - 4, 5)
        for s, row in zip(starts, b[a]):
            assert d.vocab.decode(row) == train_text[s:s + 5]


def test_eval_batches_match_redrawn_starts(tmp_path):
    d = load_text(_file(tmp_path, TEXT), block_size=4, val_fraction=0.25)
    for split, kind, part in (("train", 1, TEXT[:40]), ("val", 2, TEXT[40:])):
        b = d.eval_batches(split, seed=11, round=2, iters=3, batch_size=4)
        assert b.shape == (3, 4, 5) and b.dtype == np.int64
        for i in range(3):
            starts = _redraw(11, kind, 2, i, len(part) - 4, 4)
            assert [d.vocab.decode(r) for r in b[i]] == [part[s:s + 5] for s in starts]


def test_windows_stay_inside_split_and_reach_every_start(tmp_path):
    # Distinct characters, so each window identifies its start in the split.
    text = "abcdefghijklmnopqrstuvwxyz"
    d = load_text(_file(tmp_path, text), block_size=3, val_fraction=0.3)
    assert (len(d.train), len(d.val)) == (18, 8)  # int(26 * 0.7) = int(18.2) = 18
    T = 3
    for split, part in (("train", text[:18]), ("val", text[18:])):
        b = d.eval_batches(split, seed=0, round=0, iters=200, batch_size=8)
        seen = {part.index(d.vocab.decode(r)) for r in b.reshape(-1, T + 1)}
        assert seen == set(range(len(part) - T)), split  # max start = len - T - 1
    seen = set()
    for step in range(200):
        for r in d.train_batch(step, 5, 2, 4).reshape(-1, T + 1):
            w = d.vocab.decode(r)
            assert w in text[:18]
            seen.add(text.index(w))
    assert seen == set(range(18 - T))


def test_train_batch_deterministic_and_varies(tmp_path):
    d = load_text(_file(tmp_path, TEXT * 20), block_size=8)
    b = d.train_batch(4, 1, 3, 6)
    assert np.array_equal(b, d.train_batch(4, 1, 3, 6))
    # micro-batch a depends only on (seed, step, a): not on grad_accum
    assert np.array_equal(b[:2], d.train_batch(4, 1, 2, 6))
    assert not np.array_equal(b[0], b[1])
    assert not np.array_equal(b, d.train_batch(5, 1, 3, 6))
    assert not np.array_equal(b, d.train_batch(4, 2, 3, 6))
    assert np.array_equal(stream_rng(1, 0, 4, 0).integers(0, 10, 5),
                          stream_rng(1, 0, 4, 0).integers(0, 10, 5))


def test_eval_batches_vary_by_split_and_round(tmp_path):
    d = load_text(_file(tmp_path, TEXT * 20), block_size=8)
    tr = d.eval_batches("train", 0, 0, 4, 5)
    assert tr.shape == (4, 5, 9)
    assert np.array_equal(tr, d.eval_batches("train", 0, 0, 4, 5))
    assert not np.array_equal(tr, d.eval_batches("val", 0, 0, 4, 5))
    assert not np.array_equal(tr, d.eval_batches("train", 0, 1, 4, 5))
    # eval streams are not the training stream
    assert not np.array_equal(tr[:1], d.train_batch(0, 0, 1, 5))
    with pytest.raises(ValueError, match="split"):
        d.eval_batches("test", 0, 0, 1, 1)


# --- errors -------------------------------------------------------------------------

@pytest.mark.parametrize("vf", [-0.1, 1.0, 1.5, float("nan")])
def test_bad_val_fraction(tmp_path, vf):
    msg = _one_line_error(load_text, _file(tmp_path, TEXT), 4, vf)
    assert "--val-fraction" in msg


@pytest.mark.parametrize("bs", [0, -3])
def test_bad_block_size(tmp_path, bs):
    msg = _one_line_error(load_text, _file(tmp_path, TEXT), bs)
    assert "--block-size" in msg


def test_text_too_short(tmp_path):
    p = _file(tmp_path, "hello", "short.txt")
    msg = _one_line_error(load_text, p, 64)
    assert "short.txt" in msg and "has 5 characters" in msg
    assert "--block-size 64 needs at least 65" in msg
    load_text(p, 4, 0.0)  # exactly block_size + 1 characters is enough
    # the fix, the largest block both splits hold: 40 characters at 0.1 keep 36 and 4
    p = _file(tmp_path, "x" * 40, "forty.txt")
    msg = _one_line_error(load_text, p, 64)
    assert "has 40 characters" in msg and "use --block-size 3 or less" in msg
    load_text(p, 3)
    assert "give a longer text" in _one_line_error(load_text, _file(tmp_path, "ab"), 8)


def test_train_split_too_short(tmp_path):
    # 20 characters, val_fraction 0.75: train = int(20 * 0.25) = 5 < 5 + 1
    p = _file(tmp_path, "abcdefghijklmnopqrst", "s.txt")
    msg = _one_line_error(load_text, p, 5, 0.75)
    assert "s.txt" in msg and "train" in msg and "has 5 " in msg
    assert "use --block-size 4 or less" in msg and "smaller --val-fraction" in msg


def test_val_split_too_short(tmp_path):
    p = _file(tmp_path, TEXT, "v.txt")  # val = 6 characters
    msg = _one_line_error(load_text, p, 6)
    assert "v.txt" in msg and "validation" in msg and "has 6 " in msg
    assert "use --block-size 5 or less" in msg and "larger --val-fraction" in msg
    assert len(load_text(p, 5).val) == 6  # 6 = block_size + 1 is enough
    assert len(load_text(p, 6, 0.0).val) == 0  # no validation split: no check


@pytest.mark.parametrize("case", ["missing", "directory", "empty", "bad-utf8", "codec"])
def test_read_errors_are_one_line(tmp_path, case):
    p = tmp_path / "x.txt"
    encoding = "utf-8"
    if case == "directory":
        p.mkdir()
    elif case == "empty":
        p.write_bytes(b"")
    elif case == "bad-utf8":
        p.write_bytes(b"ok\nok\n\xff\n")
    elif case == "codec":
        p.write_bytes(b"ok")
        encoding = "no-such-codec"
    msg = _one_line_error(load_text, p, 4, 0.1, encoding)
    expect = {"missing": "does not exist", "directory": "directory", "empty": "is empty",
              "bad-utf8": "line 3", "codec": "unknown encoding"}[case]
    assert expect in msg


# --- the real file ----------------------------------------------------------------------

def test_tinyshakespeare_matches_nanogpt():
    path = DATA_DIR / "tinyshakespeare.txt"
    d = load_text(path, block_size=256)
    # nanoGPT data/shakespeare_char/prepare.py prints these
    assert d.vocab.size == 65
    assert d.vocab.chars == "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    assert d.n_chars == 1_115_394
    assert (len(d.train), len(d.val)) == (1_003_854, 111_540)
    b = d.train_batch(0, 1337, 2, 3)
    assert b.shape == (2, 3, 257)
    text = path.read_text(encoding="utf-8")
    assert all(d.vocab.decode(r) in text for r in b.reshape(-1, 257))
