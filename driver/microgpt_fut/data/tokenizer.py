"""Tokenizers of text models: a character vocabulary, or a Hugging Face ``tokenizers`` one.

Both implement ``Tokenizer``: ``size``, ``encode(text, what)`` -> int64 ids,
``decode(ids)`` -> str, and ``to_json()`` / ``from_json`` for the checkpoint's
metadata.

- ``CharVocab``: nanoGPT's shakespeare_char (data/shakespeare_char/prepare.py):
  token i is the character ``chars[i]``.
- ``HFTokenizer``: any ``tokenizers.Tokenizer`` (the format of Hugging Face's
  ``tokenizer.json``); in practice GPT-2's byte-level BPE, which ``train_bpe``
  trains and ``load_tokenizer`` reads from ``tokenizer.json`` or GPT-2's
  ``vocab.json`` + ``merges.txt``.

A byte-level BPE token may hold part of a character's UTF-8 bytes: ``decode``
of a whole sequence gives the text, each incomplete or invalid byte sequence as
U+FFFD, exactly as transformers' GPT2Tokenizer decodes (tests/test_tokenizer.py).
"""
from __future__ import annotations

import codecs
import json
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DataError

# GPT-2's one special token (end of text); train_bpe gives it the last id, as GPT-2's 50256.
EOT = "<|endoftext|>"
CHAR_KIND = "char"
BPE_MIN_VOCAB = 257  # a byte-level BPE's 256 byte symbols and <|endoftext|>


class Tokenizer(ABC):
    """What text training and sampling need of a tokenizer."""

    kind: str  # "char", "bpe" (or another tokenizers model type, lowercased)

    @property
    @abstractmethod
    def size(self) -> int:
        """The number of token ids (the model's vocab_size must be at least this)."""

    @abstractmethod
    def encode(self, text: str, what: str, whose: str = "the model's") -> np.ndarray:
        """The ids of text: int64 [n]. Raises DataError, one line naming ``what``
        (e.g. "--prompt" or "data file 'x.txt'"), when text cannot be encoded; ``whose``
        vocabulary it says lacks a character ("the tokenizer's" where there is no model
        yet: prepare)."""

    def prompt_ids(self, prompt: str, what: str) -> np.ndarray:
        """The ids a sample continues: the prompt's, and for an empty prompt GPT-2's
        ``<|endoftext|>`` (its start of text, as nanoGPT's sample.py and transformers'
        generate start from it). Raises DataError (one line naming ``what``) for an
        empty prompt without such a token (a character model), or as ``encode``."""
        if prompt:
            return self.encode(prompt, what)
        if self.eot_id is None:
            raise DataError(f"{what} is empty and the model has no <|endoftext|> token to "
                            "start from (a character model): give at least one character")
        return np.array([self.eot_id], dtype=np.int64)

    @abstractmethod
    def decode(self, ids) -> str:
        """The text of a sequence of ids (ints below ``size``)."""

    @abstractmethod
    def to_json(self) -> str:
        """A JSON string that ``from_json`` turns back into an equal tokenizer."""

    @property
    def eot_id(self) -> int | None:
        """The id of GPT-2's ``<|endoftext|>``, or None when there is none."""
        return None

    def stream_decoder(self) -> "StreamDecoder":
        """A decoder of one sequence given piece by piece (a sample printed as it is
        made): the concatenation of its ``feed``s and ``finish`` is ``decode`` of the
        whole sequence, without holding it."""
        return WindowDecoder(self)


class StreamDecoder(ABC):
    """``feed(ids)`` -> the text those ids complete; ``finish()`` -> the rest."""

    @abstractmethod
    def feed(self, ids) -> str: ...

    def finish(self) -> str:
        return ""


class WindowDecoder(StreamDecoder):
    """Any tokenizer's stream, as tokenizers' DecodeStream (and text-generation-
    inference): decode the ids since the last piece together with that piece's ids
    (context for decoders that join tokens), and hold them while the text ends with
    U+FFFD (a character whose bytes are not all there yet). At most HOLD ids are
    held: past that the U+FFFD stays, as ``decode`` of invalid bytes gives it."""

    HOLD = 16

    def __init__(self, tok: "Tokenizer"):
        self.tok = tok
        self.ids: list[int] = []  # the last piece's ids, then the held ones
        self.prefix = ""          # decode of the last piece's ids
        self.start = 0            # where the held ids begin in ``ids``

    def feed(self, ids) -> str:
        out = []
        for i in ids:
            self.ids.append(int(i))
            text = self.tok.decode(self.ids)
            if (len(text) > len(self.prefix) and text.startswith(self.prefix)
                    and (not text.endswith("\ufffd") or len(self.ids) - self.start > self.HOLD)):
                out.append(text[len(self.prefix):])
                self.ids = self.ids[self.start:]
                self.prefix, self.start = self.tok.decode(self.ids), len(self.ids)
        return "".join(out)

    def finish(self) -> str:
        text = self.tok.decode(self.ids)
        return text[len(self.prefix):] if text.startswith(self.prefix) else ""


class CharDecoder(StreamDecoder):
    """A character vocabulary's stream: each id is its character."""

    def __init__(self, vocab: "CharVocab"):
        self.vocab = vocab

    def feed(self, ids) -> str:
        return self.vocab.decode(ids)


def _byte_level_chars() -> dict[str, int]:
    """GPT-2's ``bytes_to_unicode`` inverted: the character that stands for each byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


class ByteLevelDecoder(StreamDecoder):
    """A byte-level BPE's stream, exact: each token's bytes (tokenizers' ByteLevel
    decoder: its characters through GPT-2's byte map, or its own UTF-8 when one is
    not in it, as an added token's), decoded by an incremental UTF-8 decoder with
    U+FFFD for invalid bytes, which holds a character split across two pieces until
    its last byte comes (Python's and Rust's lossy decoding both replace maximal
    invalid subparts, Unicode's recommended practice)."""

    _CHARS: dict[str, int] | None = None

    def __init__(self, tok):
        if ByteLevelDecoder._CHARS is None:
            ByteLevelDecoder._CHARS = _byte_level_chars()
        self.tok = tok
        self.utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self.cache: dict[int, bytes] = {}

    def _bytes(self, i: int) -> bytes:
        b = self.cache.get(i)
        if b is None:
            t = self.tok.id_to_token(i)
            chars = self._CHARS
            b = (b"" if t is None else bytes(chars[c] for c in t) if all(c in chars for c in t)
                 else t.encode("utf-8"))
            self.cache[i] = b
        return b

    def feed(self, ids) -> str:
        return self.utf8.decode(b"".join(self._bytes(int(i)) for i in ids))

    def finish(self) -> str:
        return self.utf8.decode(b"", final=True)


@dataclass(frozen=True)
class CharVocab(Tokenizer):
    """Token i is chars[i]; ``from_text``: the sorted unique characters of the text."""

    chars: str
    kind = CHAR_KIND

    @classmethod
    def from_text(cls, text: str) -> "CharVocab":
        """prepare.py: ``chars = sorted(list(set(data)))``."""
        return cls("".join(sorted(set(text))))

    @property
    def size(self) -> int:
        """vocab_size = number of characters (prepare.py; there is no BOS)."""
        return len(self.chars)

    def encode(self, text: str, what: str, whose: str = "the model's") -> np.ndarray:
        """Tokens of text: int64 [len(text)] (prepare.py ``encode``: ``stoi[c]``).

        Raises DataError, one line naming ``what`` (e.g. "--prompt"), at the first
        character that is not in the vocabulary.
        """
        index = {c: i for i, c in enumerate(self.chars)}
        try:
            return np.fromiter((index[c] for c in text), dtype=np.int64, count=len(text))
        except KeyError as e:
            c = e.args[0]
            raise DataError(f"{what}: character {c!r} (U+{ord(c):04X}) "
                            f"is not in {whose} vocabulary") from None

    def decode(self, ids) -> str:
        """The characters of a sequence of token ids (prepare.py ``decode``)."""
        return "".join(self.chars[int(i)] for i in ids)

    def stream_decoder(self) -> StreamDecoder:
        return CharDecoder(self)

    def to_json(self) -> str:
        """``{"type": "char", "chars": ...}``."""
        return json.dumps({"type": CHAR_KIND, "chars": self.chars}, ensure_ascii=False)

    def hf_tokenizer(self):
        """This vocabulary as a ``tokenizers.Tokenizer`` (for export to Hugging Face):
        a BPE model without merges and without an unknown token, {character: id}, every
        character its own pre-token, the tokens joined without spaces. A character
        outside the vocabulary is left out by ``tokenizers`` (transformers too): no id
        that the model lacks, no error. (A WordLevel model cannot go without an unknown
        token: its tokenizer.json names "<unk>", which encoding then misses.)"""
        from tokenizers import Regex, Tokenizer as HFTok, decoders, models, pre_tokenizers

        tok = HFTok(models.BPE({c: i for i, c in enumerate(self.chars)}, [], unk_token=None))
        tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), "isolated")  # any character
        tok.decoder = decoders.Fuse()
        return tok


class HFTokenizer(Tokenizer):
    """A Hugging Face ``tokenizers.Tokenizer`` (tokenizer.json's format), e.g. GPT-2's
    byte-level BPE. ``encode`` adds no special tokens (tiktoken's ``encode_ordinary``,
    as nanoGPT's prepare.py), but ``<|endoftext|>`` written in the text is that token."""

    def __init__(self, tok):
        self.tok = tok
        state = json.loads(tok.to_str())
        self.kind = str((state.get("model") or {}).get("type", "unknown")).lower()
        pre = state.get("pre_tokenizer") or {}
        self._byte_level = self.kind == "bpe" and pre.get("type") == "ByteLevel"
        self._byte_decoder = (state.get("decoder") or {}).get("type") == "ByteLevel"
        vocab = tok.get_vocab(with_added_tokens=True)
        self._size = max(vocab.values()) + 1 if vocab else 0
        self._eot = vocab.get(EOT)
        unk = (state.get("model") or {}).get("unk_token")
        self._unk = vocab.get(unk) if isinstance(unk, str) else None

    @property
    def size(self) -> int:
        """The largest id plus one (GPT-2: 50257, ``<|endoftext|>`` = 50256)."""
        return self._size

    @property
    def eot_id(self) -> int | None:
        return self._eot

    def encode(self, text: str, what: str, whose: str = "the model's") -> np.ndarray:
        """Ids of text: int64 [n]. Raises DataError naming ``what`` when the tokenizer
        fails, or maps a character to its unknown token (byte-level BPE never does)."""
        try:
            enc = self.tok.encode(text, add_special_tokens=False)
        except Exception as e:  # tokenizers' own errors, e.g. a WordLevel without unk
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise DataError(f"{what}: cannot be encoded by {whose} tokenizer: {msg}") from None
        ids = np.asarray(enc.ids, dtype=np.int64)
        if self._unk is not None and (ids == self._unk).any():
            a, b = enc.offsets[int(np.argmax(ids == self._unk))]
            c = text[a:b] or "?"
            raise DataError(f"{what}: {c[:20]!r} is not in {whose} vocabulary "
                            "(the tokenizer maps it to its unknown token)")
        return ids

    def decode(self, ids) -> str:
        """The text of ids (special tokens included; ids above ``size`` are skipped
        by ``tokenizers``; bytes of an incomplete character become U+FFFD)."""
        return self.tok.decode([int(i) for i in ids], skip_special_tokens=False)

    def stream_decoder(self) -> StreamDecoder:
        """Tokenizer.stream_decoder's: exact by bytes for a byte-level BPE whose decoder
        is ByteLevel alone (GPT-2's), else the windowed one."""
        return ByteLevelDecoder(self.tok) if self._byte_decoder else WindowDecoder(self)

    def to_json(self) -> str:
        """The tokenizer.json text (``tokenizers.Tokenizer.to_str``)."""
        return self.tok.to_str()

    def __eq__(self, other) -> bool:
        return isinstance(other, HFTokenizer) and other.to_json() == self.to_json()

    def __hash__(self) -> int:
        return hash(self.to_json())

    def __repr__(self) -> str:
        return f"HFTokenizer(kind={self.kind!r}, size={self.size})"

    def vocab_merges(self) -> tuple[str, str]:
        """GPT-2's two files of a BPE: (vocab.json, merges.txt) texts. vocab.json holds the
        added tokens too (GPT-2's has ``<|endoftext|>``: 50256); merges.txt is the
        ``#version: 0.2`` header and one "a b" merge per line, in rank order."""
        vocab = self.tok.get_vocab(with_added_tokens=True)
        merges = json.loads(self.tok.to_str())["model"]["merges"]
        lines = [m if isinstance(m, str) else " ".join(m) for m in merges]
        return (json.dumps(dict(sorted(vocab.items(), key=lambda kv: kv[1])), ensure_ascii=False),
                "#version: 0.2\n" + "".join(f"{m}\n" for m in lines))

    def byte_level(self) -> bool:
        """True for a GPT-2-style tokenizer (BPE model, ByteLevel pre-tokenizer),
        which ``vocab.json`` + ``merges.txt`` can describe."""
        return self._byte_level


def _gpt2_pipeline(tok) -> None:
    """GPT-2's pre-tokenizer, decoder and post-processor (byte-level, no prefix space)."""
    from tokenizers import decoders, pre_tokenizers, processors

    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)


def train_bpe(text: str | list[str], vocab_size: int) -> HFTokenizer:
    """A GPT-2-style byte-level BPE trained on ``text`` (a str, or one str per document)
    with ``tokenizers``' BpeTrainer:
    ids 0..255 the 256 byte symbols, then the merges, then ``<|endoftext|>`` as a
    special token with the last id (GPT-2's layout: 50257 = 256 + 50000 + 1).
    ``size`` is vocab_size, or less when the text has too few pairs to merge.
    Deterministic for a given text and size.

    Raises ValueError when vocab_size < 257 (the bytes and ``<|endoftext|>``).
    """
    from tokenizers import AddedToken, Tokenizer as HFTok, models, pre_tokenizers, trainers

    if vocab_size < BPE_MIN_VOCAB:
        raise ValueError(f"--vocab-size must be at least 257 (256 bytes and {EOT}), "
                         f"got {vocab_size}")
    # Each merge joins two symbols of the text into one, so there are fewer merges than
    # the text has bytes: asking the trainer for more changes nothing but its memory
    # (it sizes tables by the request: 2**31 aborted on a failed 141 GB allocation,
    # 2**62 panicked).
    texts = [text] if isinstance(text, str) else text
    most = 256 + sum(len(t.encode("utf-8")) for t in texts)
    tok = HFTok(models.BPE())
    _gpt2_pipeline(tok)
    trainer = trainers.BpeTrainer(vocab_size=min(vocab_size - 1, most), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    tok.train_from_iterator(texts, trainer)
    tok.add_special_tokens([AddedToken(EOT, special=True)])
    return HFTokenizer(tok)


def from_vocab_merges(vocab: str | Path, merges: str | Path) -> HFTokenizer:
    """GPT-2's tokenizer from its ``vocab.json`` and ``merges.txt`` (the files of
    OpenAI's encoder.json / vocab.bpe in Hugging Face's names): a byte-level BPE,
    ``<|endoftext|>`` special when the vocabulary has it. Raises DataError
    naming the files when they cannot be read."""
    from tokenizers import AddedToken, Tokenizer as HFTok, models

    try:
        tok = HFTok(models.BPE.from_file(str(vocab), str(merges)))
    except Exception as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DataError(f"cannot read tokenizer files {str(vocab)!r} and {str(merges)!r}: "
                        f"{msg}") from None
    _gpt2_pipeline(tok)
    if EOT in tok.get_vocab():
        tok.add_special_tokens([AddedToken(EOT, special=True)])
    return HFTokenizer(tok)


def _char_vocab_of(tok) -> CharVocab | None:
    """The CharVocab that a tokenizer.json written by ``CharVocab.hf_tokenizer`` stands
    for (so that export and load give back the same tokenizer), else None: a BPE
    without merges or unknown token, or (written before) a WordLevel model."""
    try:
        state = json.loads(tok.to_str())
        model, dec = state["model"], state.get("decoder") or {}
        if dec.get("type") != "Fuse" or not (
                model.get("type") == "WordLevel" or (model.get("type") == "BPE" and not (
                    model.get("merges") or model.get("unk_token")
                    or model.get("continuing_subword_prefix")
                    or model.get("end_of_word_suffix")))):
            return None
        vocab = model["vocab"]
        chars = sorted(vocab, key=vocab.get)
        if (sorted(vocab.values()) != list(range(len(vocab))) or any(len(c) != 1 for c in chars)
                or state.get("added_tokens") or state.get("normalizer")):
            return None
        return CharVocab("".join(chars))
    except Exception:
        return None


def from_hf(tok) -> Tokenizer:
    """A ``tokenizers.Tokenizer`` as our Tokenizer (a character vocabulary written by
    ``CharVocab.hf_tokenizer`` becomes that CharVocab again)."""
    return _char_vocab_of(tok) or HFTokenizer(tok)


def from_json(text: str) -> Tokenizer:
    """The tokenizer ``to_json`` wrote (CharVocab's ``{"type": "char"}`` or a
    tokenizer.json). Raises ValueError (first line of the reason) when it is neither."""
    try:
        state = json.loads(text)
    except ValueError as e:
        raise ValueError(f"tokenizer is not JSON: {e}") from None
    if isinstance(state, dict) and state.get("type") == CHAR_KIND:
        chars = state.get("chars")
        if not isinstance(chars, str) or len(set(chars)) != len(chars):
            raise ValueError("char tokenizer needs 'chars', a string of distinct characters")
        return CharVocab(chars)
    from tokenizers import Tokenizer as HFTok

    try:
        return from_hf(HFTok.from_str(text))
    except Exception as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"not a tokenizers tokenizer.json: {msg}") from None


def tokenizer_choice(value: str) -> str:
    """A --tokenizer value as given: the kinds "char" and "bpe" in any case (--tokenizer
    BPE), unless a file or folder has that very name, which is then the path; any other
    value as it is."""
    if value.lower() in ("char", "bpe") and not os.path.lexists(value):
        return value.lower()
    return value


def find_tokenizer_files(folder: str | Path) -> list[Path] | None:
    """The tokenizer files of a Hugging Face folder: [tokenizer.json] when present,
    else [vocab.json, merges.txt] when both are, else None."""
    folder = Path(folder)
    if (folder / "tokenizer.json").is_file():
        return [folder / "tokenizer.json"]
    pair = [folder / "vocab.json", folder / "merges.txt"]
    return pair if all(p.is_file() for p in pair) else None


def load_tokenizer(path: str | Path) -> Tokenizer:
    """A tokenizer from ``path``: a ``tokenizer.json`` file (Hugging Face ``tokenizers``),
    a ``vocab.json`` beside its ``merges.txt`` (GPT-2's pair), or a folder holding either
    (tokenizer.json preferred). Nothing is downloaded.

    Raises DataError (one line naming the path) when there is no such file, or it
    cannot be read or parsed.
    """
    path = Path(path)
    where = f"tokenizer {str(path)!r}"
    if path.is_dir():
        files = find_tokenizer_files(path)
        if files is None:
            raise DataError(f"{where}: the folder has no tokenizer.json, nor vocab.json and "
                            "merges.txt")
        return load_tokenizer(files[0])
    if not path.is_file():
        raise DataError(f"{where} does not exist")
    if path.name == "merges.txt":
        path = path.parent / "vocab.json"
        where = f"tokenizer {str(path)!r}"
    try:
        text = path.read_text(encoding="utf-8")
        state = json.loads(text)
    except OSError as e:
        raise DataError(f"cannot read {where}: {e.strerror or e}") from None
    except ValueError as e:  # not UTF-8, or not JSON
        raise DataError(f"{where} is not a JSON file: {str(e).splitlines()[0]}") from None
    if isinstance(state, dict) and state and "model" not in state and \
            all(isinstance(v, int) for v in state.values()):  # GPT-2's vocab.json
        merges = path.parent / "merges.txt"
        if not merges.is_file():
            raise DataError(f"{where} is a vocab.json; its merges.txt must be beside it")
        return from_vocab_merges(path, merges)
    try:
        return from_json(text)
    except ValueError as e:
        raise DataError(f"{where}: {str(e).splitlines()[0]}") from None
