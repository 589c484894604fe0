"""Text data: nanoGPT's shakespeare_char recipe, with any tokenizer.

One text file is one stream of tokens (nanoGPT data/shakespeare_char/prepare.py):
by default the vocabulary is the sorted set of its characters (no BOS; a
byte-level BPE or another ``tokenizer.Tokenizer`` may be given instead, as
nanoGPT's data/shakespeare/prepare.py uses GPT-2's), the first 90% of the
tokens train and the rest validate, and a batch is ``batch_size`` windows of
``block_size + 1`` consecutive tokens at uniformly random starts (nanoGPT train.py
``get_batch``; one window holds both x = w[:-1] and y = w[1:]). The random starts
come from counter-based NumPy streams (``stream_rng``), so a batch depends only on
(seed, step, micro-batch) and a resumed run draws the same batches.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DataError, OptionConflict
from ..wording import counted
from .lines import read_text
from .tokenizer import CharVocab, Tokenizer

TRAIN_KIND, EVAL_KINDS = 0, {"train": 1, "val": 2}


def stream_rng(seed: int, kind: int, i: int, j: int) -> np.random.Generator:
    """The random stream for (seed, kind, i, j): PCG64 seeded by SeedSequence([seed, kind, i, j]).

    kind 0 is training (i = step, j = micro-batch), 1 and 2 evaluation on the
    train and val splits (i = round, j = batch). All four must be >= 0
    (SeedSequence raises ValueError otherwise).
    """
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, kind, i, j])))


def windows(tokens: np.ndarray, starts, block_size: int) -> np.ndarray:
    """Windows tokens[s : s+block_size+1] for each start s: int64 [*starts.shape, block_size+1].

    tokens: int64 [N]; starts: integer array of any shape, each in [0, N - block_size).
    nanoGPT get_batch stacks x = data[i:i+block_size] and y = data[i+1:i+1+block_size];
    the window holds both (x = w[..., :-1], y = w[..., 1:]).
    """
    starts = np.asarray(starts, dtype=np.int64)
    return tokens[starts[..., None] + np.arange(block_size + 1, dtype=np.int64)]


@dataclass
class TextData:
    """A text file as tokens, split into train (first part) and val (the rest).

    vocab: the tokenizer (a CharVocab, or any tokenizer.Tokenizer);
    train, val: int64 token arrays; sha256: hex digest of the file's bytes;
    path: the file as given to ``load_text``; encoding: the one it was read with;
    text_chars: the text's length in characters (0: not recorded, = the tokens).
    """

    vocab: Tokenizer
    train: np.ndarray
    val: np.ndarray
    block_size: int
    val_fraction: float
    path: str
    sha256: str
    encoding: str = "utf-8"
    text_chars: int = 0

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizer (the same object as ``vocab``)."""
        return self.vocab

    @property
    def n_tokens(self) -> int:
        """Number of tokens in the whole text."""
        return len(self.train) + len(self.val)

    @property
    def n_chars(self) -> int:
        """Number of characters in the whole text (= tokens for a character vocabulary)."""
        return self.text_chars or self.n_tokens

    def _batches(self, data: np.ndarray, seed: int, kind: int, i: int, n: int,
                 batch_size: int) -> np.ndarray:
        """n batches: batch j holds the windows at starts drawn from stream_rng(seed, kind, i, j)."""
        out = np.empty((n, batch_size, self.block_size + 1), dtype=np.int64)
        for j in range(n):
            # get_batch: ix = torch.randint(len(data) - block_size, (batch_size,))
            starts = stream_rng(seed, kind, i, j).integers(0, len(data) - self.block_size,
                                                           size=batch_size)
            out[j] = windows(data, starts, self.block_size)
        return out

    def train_batch(self, step: int, seed: int, grad_accum: int, batch_size: int) -> np.ndarray:
        """Training tokens of one step: int64 [grad_accum, batch_size, block_size+1].

        Micro-batch a draws its starts from ``stream_rng(seed, 0, step, a)``, so it
        depends only on (seed, step, a). seed, step >= 0.
        """
        return self._batches(self.train, seed, TRAIN_KIND, step, grad_accum, batch_size)

    def eval_batches(self, split: str, seed: int, round: int, iters: int,
                     batch_size: int) -> np.ndarray:
        """Evaluation tokens: int64 [iters, batch_size, block_size+1] (nanoGPT estimate_loss).

        split "train" (stream kind 1) or "val" (kind 2); batch i draws from
        ``stream_rng(seed, kind, round, i)``. Raises ValueError for another split
        name and DataError for "val" when there is no validation split.
        """
        if split not in EVAL_KINDS:
            raise ValueError(f"split must be 'train' or 'val', not {split!r}")
        data = self.train if split == "train" else self.val
        if len(data) == 0:
            raise DataError(f"data file {self.path!r} has no validation split (--val-fraction 0)")
        return self._batches(data, seed, EVAL_KINDS[split], round, iters, batch_size)


def load_text(path: str | Path, block_size: int, val_fraction: float = 0.1,
              encoding: str = "utf-8", tokenizer: Tokenizer | None = None) -> TextData:
    """Read a text file (``read_text``), tokenize it and split its tokens.

    tokenizer: None builds the character vocabulary of the text (``CharVocab.from_text``,
    prepare.py); a given tokenizer (e.g. ``tokenizer.train_bpe`` of the text, or a
    loaded one) encodes the whole text in one call.
    prepare.py: ``train_data = data[:int(n*0.9)]``; here
    ``n_train = int(n * (1 - val_fraction))`` of the n tokens, train = tokens[:n_train],
    val = the rest. val_fraction 0 means no validation split (val is empty).

    Raises DataError (one line) as ``read_text`` does, as the tokenizer's ``encode``
    does (naming the file), and OptionConflict (naming the option) when val_fraction
    is not in [0, 1), block_size < 1,
    or the text, the train split or (val_fraction > 0) the validation split has
    fewer than block_size + 1 tokens (with the largest --block-size that both splits
    hold).
    """
    if not 0 <= val_fraction < 1:
        raise OptionConflict(f"--val-fraction {val_fraction} must be in [0, 1)")
    if block_size < 1:
        raise OptionConflict(f"--block-size {block_size} must be at least 1")
    path = Path(path)
    text = read_text(path, encoding)
    name, need = str(path), block_size + 1
    vocab = CharVocab.from_text(text) if tokenizer is None else tokenizer
    # a character vocabulary's tokens are the characters, so its messages say characters
    unit = "characters" if isinstance(vocab, CharVocab) else "tokens"
    def fix(n: int, other: str = "") -> str:
        # the largest block that both splits of n tokens hold at this --val-fraction
        n_train = int(n * (1 - val_fraction))
        fits = min(n_train, n - n_train if val_fraction > 0 else n_train) - 1
        return (f": use --block-size {fits} or less" + other if fits >= 1
                else ": give a longer text" + other)

    if len(text) < need and unit == "characters":
        raise OptionConflict(f"data file {name!r} has {counted(len(text), 'character')}; "
                             f"--block-size {block_size} needs at least {need}"
                             + fix(len(text)))
    tokens = vocab.encode(text, f"data file {name!r}")
    if len(tokens) < need:
        raise OptionConflict(f"data file {name!r} has {counted(len(tokens), 'token')}; "
                             f"--block-size {block_size} needs at least {need}"
                             + fix(len(tokens)))
    n_train = int(len(tokens) * (1 - val_fraction))
    train, val = tokens[:n_train], tokens[n_train:]
    if len(train) < need:
        raise OptionConflict(f"data file {name!r}: the training split has {len(train)} of "
                             f"{len(tokens)} {unit}; --block-size {block_size} needs at least "
                             f"{need}" + fix(len(tokens), ", or a smaller --val-fraction"))
    if val_fraction > 0 and len(val) < need:
        raise OptionConflict(f"data file {name!r}: the validation split has {len(val)} of "
                             f"{len(tokens)} {unit}; --block-size {block_size} needs at least "
                             f"{need}" + fix(len(tokens), ", or a larger --val-fraction"))
    sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
    return TextData(vocab, train, val, block_size, val_fraction, name, sha256, encoding,
                    len(text))
