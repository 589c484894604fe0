"""Reading documents, the vocabulary, token rows, microgpt's shuffle and batches."""
from __future__ import annotations

import random
import re

import numpy as np
import pytest

from cli_helpers import NAMES_TXT, names_lines
from microgpt_fut.errors import DataError
from microgpt_fut.data.lines import (Vocab, batch_indices, default_docs, load_docs,
                               read_docs, shuffled)


def test_read_docs_strips_and_skips_blank_lines(tmp_path):
    p = tmp_path / "d.txt"
    p.write_bytes(b"  emma \r\n\n\t\nolivia\r\nava")
    assert read_docs(p) == ["emma", "olivia", "ava"]


def test_single_document_is_fine(tmp_path):
    p = tmp_path / "one.txt"
    p.write_text("zoe\n")
    assert read_docs(p) == ["zoe"]


def test_utf8_bom_is_dropped_and_unicode_kept(tmp_path):
    p = tmp_path / "u.txt"
    p.write_bytes("\ufeffzoë\nrené\n".encode("utf-8"))
    assert read_docs(p) == ["zoë", "rené"]


def test_other_encoding(tmp_path):
    p = tmp_path / "l1.txt"
    p.write_bytes("zoë\nrené\n".encode("latin-1"))
    assert read_docs(p, "latin-1") == ["zoë", "rené"]


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("make, fragment", [
    (lambda d: d / "missing.txt", "does not exist"),
    (lambda d: d, "is a directory"),
    (lambda d: _write(d / "empty.txt", b""), "is empty"),
    (lambda d: _write(d / "blank.txt", b"\n  \n\t\r\n"), "only blank lines"),
], ids=["missing", "directory", "empty", "blank-only"])
def test_bad_files(tmp_path, make, fragment):
    path = make(tmp_path)
    with pytest.raises(DataError) as e:
        read_docs(path)
    msg = str(e.value)
    assert fragment in msg and str(path) in msg and "\n" not in msg


def test_invalid_bytes_name_the_line(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"emma\nolivia\n\nz\xf6e\nava\n")
    with pytest.raises(DataError) as e:
        read_docs(p)
    msg = str(e.value)
    assert "line 4" in msg and "--encoding" in msg and str(p) in msg and "\n" not in msg


def test_unknown_encoding(tmp_path):
    p = tmp_path / "d.txt"
    p.write_text("a\n")
    with pytest.raises(DataError, match="unknown encoding"):
        read_docs(p, "no-such-codec")


def test_vocab_is_sorted_unique_chars_plus_bos():
    v = Vocab.from_docs(["cab", "bed"])
    assert v.chars == ("a", "b", "c", "d", "e")
    assert v.bos == 5 and v.size == 6


def test_encode_by_hand():
    # block_size 4: rows of 5 tokens [BOS] + chars + [BOS], cut or padded with BOS
    v = Vocab(("a", "b", "c", "d", "e"))  # BOS = 5
    tokens, n_pos, n_cut = v.encode(["ab", "ca", "abc", "abcd", "abcde"], block_size=4)
    assert tokens.dtype == np.int64 and n_pos.dtype == np.int64
    assert tokens.tolist() == [[5, 0, 1, 5, 5],
                               [5, 2, 0, 5, 5],
                               [5, 0, 1, 2, 5],
                               [5, 0, 1, 2, 3],
                               [5, 0, 1, 2, 3]]
    assert n_pos.tolist() == [3, 3, 4, 4, 4]  # min(block_size, len(doc) + 1)
    assert n_cut == 2                          # "abcd" and "abcde" lose their final BOS


def test_decode_stops_at_first_bos():
    v = Vocab(("a", "b", "c"))
    assert v.decode([0, 2, 1, 3, 0, 3]) == "acb"
    assert v.decode([3, 0]) == ""


def test_shuffle_is_microgpts():
    # microgpt: docs = [l.strip() for l in open(...).read().strip().split('\n') if l.strip()]
    #           random.seed(42); random.shuffle(docs)
    lines = names_lines()
    docs = [ln.strip() for ln in NAMES_TXT.read_text().strip().split("\n") if ln.strip()]
    expected = list(docs)
    random.seed(42)
    random.shuffle(expected)
    ours = shuffled(read_docs(NAMES_TXT), 42)
    assert len(ours) == len(docs) == len([ln for ln in lines if ln.strip()]) > 32000
    assert ours == expected
    assert ours[:3] != docs[:3]


def test_batches_wrap_around():
    idx = batch_indices(0, 3, 1, 2)
    assert idx.tolist() == [[0], [1], [0]]  # microgpt: docs[step % len(docs)]
    idx = batch_indices(2, 2, 3, 5)
    assert idx.tolist() == [[1, 2, 3], [4, 0, 1]]  # (s*B + i) % N


def test_default_dataset():
    docs, desc = default_docs()
    assert len(docs) >= 1000 and len(set(docs)) == len(docs)
    assert all(re.fullmatch("[a-z]+", d) for d in docs)
    assert docs[0] == "mary"  # female list first (US Census 1990, most common first)
    assert "names" in desc
    assert load_docs(None) == (docs, desc)
