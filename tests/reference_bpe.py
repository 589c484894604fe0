"""GPT-2's byte-level BPE in plain Python, from vocab.json and merges.txt: the reference
for the tokenizers we train and write (tests/test_tokenizer.py).

This is OpenAI's gpt-2 ``src/encoder.py`` (MIT licence), which transformers' slow
``GPT2Tokenizer`` copied: its own byte-to-unicode table, GPT-2's pre-tokenizer
regex and the merge loop, and decoding with ``errors="replace"``. It shares no code
with Hugging Face ``tokenizers`` (which our tokenizers run on, and which
transformers 5's ``GPT2Tokenizer`` runs on too: it has no slow version any more).
``<|endoftext|>`` written in a text is that one token, as GPT2Tokenizer's special
tokens are.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import regex

EOT = "<|endoftext|>"
PATTERN = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


@lru_cache(maxsize=None)
def bytes_to_unicode() -> dict[int, str]:
    """encoder.py's table: each byte to a printable character (the printable bytes to
    themselves, the others to 256 + n)."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class ReferenceBPE:
    """encoder.py's Encoder, read from a vocab.json and a merges.txt."""

    def __init__(self, vocab_json: Path, merges_txt: Path):
        self.encoder = json.loads(Path(vocab_json).read_text(encoding="utf-8"))
        self.decoder = {v: k for k, v in self.encoder.items()}
        lines = Path(merges_txt).read_text(encoding="utf-8").split("\n")
        merges = [tuple(ln.split()) for ln in lines[1:] if ln.strip()]  # after "#version"
        self.ranks = {m: i for i, m in enumerate(merges)}
        self.byte_encoder = bytes_to_unicode()
        self.byte_decoder = {v: k for k, v in self.byte_encoder.items()}

    def bpe(self, token: str) -> list[str]:
        """The merge loop: repeatedly merge the adjacent pair of the lowest rank."""
        word = list(token)
        while len(word) > 1:
            pairs = {(a, b) for a, b in zip(word, word[1:])}
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            out, i = [], 0
            while i < len(word):
                if i < len(word) - 1 and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            word = out
        return word

    def encode(self, text: str) -> list[int]:
        """The ids of text (``<|endoftext|>`` as its one token)."""
        ids: list[int] = []
        for k, part in enumerate(text.split(EOT)):
            if k:
                ids.append(self.encoder[EOT])
            for piece in PATTERN.findall(part):
                mapped = "".join(self.byte_encoder[b] for b in piece.encode("utf-8"))
                ids.extend(self.encoder[t] for t in self.bpe(mapped))
        return ids

    def decode(self, ids) -> str:
        """The text of ids: their bytes decoded as UTF-8 with errors="replace"."""
        out, raw = [], bytearray()
        for i in ids:
            token = self.decoder[int(i)]
            if token == EOT:
                out.append(raw.decode("utf-8", errors="replace") + EOT)
                raw = bytearray()
            else:
                raw.extend(self.byte_decoder[c] for c in token)
        return "".join(out) + raw.decode("utf-8", errors="replace")
