"""Tokenizers (driver/microgpt_fut/tokenizer.py): the character vocabulary and a byte-level
BPE (Hugging Face ``tokenizers``), their JSON form, decoding, loading from files, text
data with a BPE, and the tokenizer in checkpoints.

Expected values come from elsewhere: the tokenizers library's own encode/decode, the
UTF-8 bytes of the text, Python's str operations, and GPT-2's own encoder.py
(tests/reference_bpe.py: the regex, byte mapping and merge loop of transformers'
former slow GPT2Tokenizer, in plain Python) reading the vocab.json and merges.txt we
write.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from cli_helpers import without_metadata_sum

from hf_helpers import BPE_SIZE, shakespeare, small_bpe
from reference_bpe import ReferenceBPE
from microgpt_fut.training import checkpoint as ckpt
from microgpt_fut.errors import CheckpointError, DataError
from microgpt_fut.models.gpt2 import GPT2Config
from microgpt_fut.data.text import load_text
from microgpt_fut.data.tokenizer import (EOT, CharVocab, HFTokenizer, from_json, load_tokenizer,
                                    train_bpe)

# ASCII, 2-, 3- and 4-byte UTF-8 characters: the BPE splits the last ones over tokens
TEXT = "ROMEO:\nWhat say'st thou, café? 日本 😀 <|endoftext|> end"


def _one_line(exc_info) -> str:
    msg = str(exc_info.value)
    assert msg and "\n" not in msg and msg.strip() == msg
    return msg


# --- the character vocabulary ---------------------------------------------------------

def test_char_vocab_json_round_trip_and_decode():
    v = CharVocab.from_text(TEXT)
    back = from_json(v.to_json())
    assert back == v and isinstance(back, CharVocab)
    assert json.loads(v.to_json()) == {"type": "char", "chars": "".join(sorted(set(TEXT)))}
    ids = v.encode(TEXT, "t")
    assert v.decode(ids) == TEXT and v.decode(ids[3:]) == TEXT[3:]
    assert v.eot_id is None and v.kind == "char"


def test_char_vocab_as_hf_tokenizer_gives_the_same_ids():
    """The tokenizer.json written for a character vocabulary (export) encodes and
    decodes as the vocabulary does, and reads back as the same CharVocab."""
    v = CharVocab.from_text(TEXT)
    hf = v.hf_tokenizer()
    assert hf.encode(TEXT).ids == v.encode(TEXT, "t").tolist()
    assert hf.decode(hf.encode(TEXT).ids) == TEXT
    assert from_json(hf.to_str()) == v


# --- byte-level BPE -------------------------------------------------------------------

def test_train_bpe_is_gpt2_style_and_deterministic():
    """256 byte symbols, the merges, <|endoftext|> last; the same text gives the same
    tokenizer; every text round-trips (byte level: no unknown characters)."""
    tok = small_bpe()
    assert isinstance(tok, HFTokenizer) and tok.kind == "bpe" and tok.byte_level()
    assert tok.size == BPE_SIZE and tok.eot_id == BPE_SIZE - 1
    assert tok.tok.token_to_id(EOT) == BPE_SIZE - 1
    again = train_bpe(shakespeare(), BPE_SIZE)
    assert again == tok and again.to_json() == tok.to_json()
    ids = tok.encode(TEXT, "t")
    assert ids.dtype == np.int64 and ids.max() < tok.size
    assert tok.decode(ids) == TEXT
    assert EOT in tok.decode(ids) and (ids == tok.eot_id).sum() == 1  # written, it is the token
    # merges learnt from Shakespeare shorten its text
    assert len(tok.encode(shakespeare()[:2000], "t")) < 0.8 * len(shakespeare()[:2000].encode())
    with pytest.raises(ValueError, match="at least 257"):
        train_bpe("abc", 256)


def test_a_bpe_asked_for_more_than_its_text_can_fill_is_what_it_fills():
    """A BPE asked for more tokens than its text allows merges (up to 2**62, --vocab-size's
    bound) is the one asked for just enough: every merge the text has, then <|endoftext|>.
    (Asked as it was, the trainer sized its tables by the request: 2**31 aborted the process
    on a failed allocation, 2**62 panicked.)"""
    text = shakespeare()[:3000]
    nbytes = len(text.encode())
    enough = train_bpe(text, 257 + nbytes)
    assert BPE_SIZE < enough.size < 257 + nbytes
    for asked in (nbytes + 10_000, 2**62, 2**31):
        assert train_bpe(text, asked) == enough
    docs = text.split("\n\n")
    assert train_bpe(docs, 2**62) == train_bpe(docs, 257 + nbytes)


def test_bpe_json_round_trip():
    tok = small_bpe()
    back = from_json(tok.to_json())
    assert isinstance(back, HFTokenizer) and back == tok
    assert back.encode(TEXT, "t").tolist() == tok.encode(TEXT, "t").tolist()


def test_bpe_decode_shows_an_incomplete_character_as_u_fffd():
    """A 4-byte character spread over tokens: the whole sequence decodes to the text, and
    a prefix that cuts the character decodes to the text before it and U+FFFD (nothing
    is held back)."""
    tok = small_bpe()
    text = " 日本 😀!"
    ids = tok.encode(text, "t")
    assert len(ids) > len(text)  # the characters are split over byte tokens
    assert tok.decode(ids) == text
    cut = next(k for k in range(1, len(ids)) if tok.decode(ids[:k]).endswith("\ufffd"))
    whole = tok.decode(ids[:cut]).rstrip("\ufffd")
    assert text.startswith(whole) and len(whole) < len(text)


# Text for GPT-2's pre-tokenizer: Unicode, runs of spaces, tabs and newlines, digits,
# the contractions its regex splits off, the special token written out, a long run
HARD_TEXTS = ["Café 🎉 naïve façade", "It's 12345 o'clock; we'll've I'm you're they'd",
              "  two  spaces,\ttab\t\tand\n\nnewlines  \n  ", "日本語のテキスト 😀!",
              "<|endoftext|>The end<|endoftext|>", "x" * 60 + "!!!???...",
              "1 22 333 4444 55555 3.14159", "a\u00a0b\u2003c\u3000d", "\n"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> ReferenceBPE:
    """GPT-2's encoder.py reading the vocab.json and merges.txt that we write for
    small_bpe() (HFTokenizer.vocab_merges, as export-hf does)."""
    folder = tmp_path_factory.mktemp("gpt2_files")
    vocab, merges = small_bpe().vocab_merges()
    (folder / "vocab.json").write_text(vocab, encoding="utf-8")
    (folder / "merges.txt").write_text(merges, encoding="utf-8")
    return ReferenceBPE(folder / "vocab.json", folder / "merges.txt")


@pytest.mark.parametrize("text", HARD_TEXTS + [shakespeare()[:4000]],
                         ids=[f"text{i}" for i in range(len(HARD_TEXTS))] + ["shakespeare"])
def test_bpe_encodes_as_gpt2s_encoder(reference, text):
    tok = small_bpe()
    assert tok.encode(text, "t").tolist() == reference.encode(text)
    assert tok.decode(tok.encode(text, "t")) == text


def test_bpe_decodes_as_gpt2s_encoder(reference):
    """Every single id, every id after a prompt (lone bytes like 0x89 among them), and
    random sequences of ids: our decode is GPT-2's (incomplete and invalid UTF-8 as
    U+FFFD, the same number of them)."""
    tok = small_bpe()
    theirs = reference.decode
    prompt = tok.encode("Café 🎉", "t").tolist()
    for i in range(tok.size):
        assert tok.decode([i]) == theirs([i]), i
        assert tok.decode(prompt + [i]) == theirs(prompt + [i]), i
    rng = np.random.default_rng(0)
    for n in range(2000):
        ids = rng.integers(0, tok.size, size=int(rng.integers(1, 16))).tolist()
        assert tok.decode(ids) == theirs(ids), ids
    lone = reference.encoder[reference.byte_encoder[0x89]]  # the byte 0x89 alone
    assert tok.decode(prompt + [lone] * 40) == "Café 🎉" + "\ufffd" * 40


def test_bpe_encode_failure_names_what():
    """A tokenizer that cannot encode a character (a WordLevel without unknown token)
    fails with one line naming what was encoded."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    hf = Tokenizer(models.WordLevel({"a": 0, "b": 1}, unk_token=None))
    hf.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = HFTokenizer(hf)
    with pytest.raises(DataError) as e:
        tok.encode("a c", "--prompt")
    assert _one_line(e).startswith("--prompt: ")
    hf2 = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    hf2.pre_tokenizer = pre_tokenizers.Whitespace()
    with pytest.raises(DataError) as e:
        HFTokenizer(hf2).encode("a zz", "--prompt")
    assert "'zz'" in _one_line(e) and "--prompt" in str(e.value)


# --- loading from files ----------------------------------------------------------------

def test_load_tokenizer_json_folder_and_vocab_merges(tmp_path):
    """tokenizer.json (file or folder) and GPT-2's vocab.json + merges.txt give the same ids."""
    tok = small_bpe()
    tok.tok.save(str(tmp_path / "tokenizer.json"))
    pair = tmp_path / "pair"
    pair.mkdir()
    vocab, merges = tok.vocab_merges()  # as GPT-2's: <|endoftext|> in vocab.json
    (pair / "vocab.json").write_text(vocab, encoding="utf-8")
    (pair / "merges.txt").write_text(merges, encoding="utf-8")
    assert json.loads(vocab)[EOT] == tok.size - 1 and len(json.loads(vocab)) == tok.size
    assert merges.startswith("#version: 0.2\n") and merges.count("\n") == tok.size - 256
    expected = tok.encode(TEXT, "t").tolist()
    for path in (tmp_path / "tokenizer.json", tmp_path, pair, pair / "vocab.json",
                 pair / "merges.txt"):
        got = load_tokenizer(path)
        assert got.encode(TEXT, "t").tolist() == expected, path
        assert got.decode(expected) == TEXT and got.size == tok.size and got.eot_id == tok.eot_id


def test_load_tokenizer_refusals(tmp_path):
    cases = {}
    cases["missing"] = tmp_path / "nope.json"
    (tmp_path / "empty").mkdir()
    cases["no files"] = tmp_path / "empty"
    (tmp_path / "bad.json").write_text("{not json")
    cases["not json"] = tmp_path / "bad.json"
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "vocab.json").write_text(json.dumps({"a": 0, "b": 1}))
    cases["no merges"] = lone / "vocab.json"
    (tmp_path / "other.json").write_text(json.dumps({"model": {"type": "Nope"}}))
    cases["not a tokenizer"] = tmp_path / "other.json"
    for why, path in cases.items():
        with pytest.raises(DataError) as e:
            load_tokenizer(path)
        assert str(path) in _one_line(e), why


# --- text data ------------------------------------------------------------------------------

def test_load_text_with_a_bpe(tmp_path):
    """The text's tokens are the tokenizer's encoding of the whole file, split 90/10;
    n_chars stays the characters, n_tokens the tokens; the default stays characters."""
    tok = small_bpe()
    text = shakespeare()[:20_000]
    p = tmp_path / "s.txt"
    p.write_text(text, encoding="utf-8")
    d = load_text(p, 16, 0.1, tokenizer=tok)
    ids = tok.encode(text, "t")
    n_train = int(len(ids) * 0.9)
    assert np.array_equal(d.train, ids[:n_train]) and np.array_equal(d.val, ids[n_train:])
    assert d.vocab is tok and d.tokenizer is tok
    assert d.n_tokens == len(ids) < d.n_chars == len(text)
    assert tok.decode(d.train_batch(0, 1, 1, 2)[0, 0]) in text
    chars = load_text(p, 16, 0.1)
    assert isinstance(chars.vocab, CharVocab) and chars.n_chars == chars.n_tokens == len(text)
    short = tmp_path / "short.txt"
    short.write_text("ROMEO: the the the the the", encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_text(short, 24, 0.0, tokenizer=tok)
    assert "tokens" in _one_line(e) and "--block-size 24" in str(e.value)


# --- checkpoints ---------------------------------------------------------------------------

def _ck(tok, vocab=(), V=None):
    cfg = GPT2Config(vocab_size=V or tok.size, n_embd=8, n_head=2, n_layer=1, block_size=4)
    params = {n: np.full(s, 0.5, np.float32) for n, s in cfg.shapes().items()}
    return ckpt.Checkpoint(cfg, list(vocab), params, data_format="text", tokenizer=tok)


def test_checkpoint_keeps_a_bpe_tokenizer(tmp_path):
    tok = small_bpe()
    path = tmp_path / "bpe.safetensors"
    ckpt.save(path, _ck(tok))
    meta = ckpt.read_metadata(path)
    assert json.loads(meta["vocab"]) == [] and meta["tokenizer"] == tok.to_json()
    back = ckpt.load(path)
    assert back.tokenizer == tok and back.vocab == [] and back.text_tokenizer() == tok
    # a padded vocab_size (more ids than the tokenizer, as nanoGPT's 50304) is fine
    ckpt.save(path, _ck(tok, V=tok.size + 7))
    assert ckpt.load(path).tokenizer == tok


def test_checkpoint_of_a_char_model_is_unchanged(tmp_path):
    """A character vocabulary is stored as the "vocab" list, as before (no "tokenizer"),
    and loads as that CharVocab; given only as the tokenizer, the list is filled in."""
    v = CharVocab.from_text(TEXT)
    path = tmp_path / "char.safetensors"
    for ck in (_ck(None, list(v.chars), v.size), _ck(v), _ck(v, list(v.chars))):
        ckpt.save(path, ck)
        meta = ckpt.read_metadata(path)
        assert "tokenizer" not in meta and json.loads(meta["vocab"]) == list(v.chars)
        back = ckpt.load(path)
        assert back.tokenizer == v and back.vocab == list(v.chars)


def test_checkpoint_tokenizer_refusals(tmp_path):
    tok = small_bpe()
    with pytest.raises(ValueError, match="differ"):
        ckpt.save(tmp_path / "x.safetensors", _ck(CharVocab("ab"), ["a", "c"], 2))
    path = tmp_path / "big.safetensors"
    ckpt.save(path, _ck(tok))
    # a tokenizer with more ids than the model's vocab_size: rewrite the metadata
    from safetensors.numpy import load_file, save_file

    meta = ckpt.read_metadata(path)
    cfg = json.loads(meta["config"])
    cfg["vocab_size"] = tok.size - 1
    tensors = {k: (a[:tok.size - 1] if "wte" in k else a) for k, a in load_file(path).items()}
    save_file(tensors, path, metadata=without_metadata_sum({**meta, "config": json.dumps(cfg)}))
    with pytest.raises(CheckpointError) as e:
        ckpt.load(path)
    assert "tokenizer" in _one_line(e) and str(path) in str(e.value)
    save_file(tensors, path, metadata=without_metadata_sum({**meta, "config": json.dumps(cfg),
                                                          "tokenizer": "{bad"}))
    with pytest.raises(CheckpointError) as e:
        ckpt.load(path)
    assert "tokenizer" in _one_line(e)
