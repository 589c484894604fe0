"""Multiple-choice evaluation as the seed's hellaswag.py does it ("Let's reproduce
GPT-2"): a context and its endings, the model scores each ending by the loss of its
own tokens, and the pick is the ending with the lowest loss.

HellaSwag's jsonl: one object a line with ``ctx`` (str), ``endings`` (list of str) and
``label`` (the index of the right ending). As hellaswag.py ``render_example``: the
context is tokenized as it is and each ending as ``" " + ending``; a row is context +
ending, and only the ending's tokens are scored. ``acc`` picks the ending with the
lowest summed loss, ``acc_norm`` (hellaswag.py's) the lowest mean loss per token.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import DataError, OptionConflict
from ..data.tokenizer import Tokenizer


@dataclass(frozen=True)
class Example:
    """One question: its context, endings and the right ending's index."""

    ctx: str
    endings: tuple[str, ...]
    label: int


def read_examples(path: str | Path) -> list[Example]:
    """The examples of a HellaSwag-style jsonl file (UTF-8, a leading byte-order mark
    dropped). Raises DataError (one line naming
    the file and line number, and what is wrong) for a missing or unreadable file, a
    line that is not a JSON object with ``ctx`` (a non-empty str), ``endings`` (a list
    of at least two non-empty str) and ``label`` (an int, or a str of digits as in
    Hugging Face's HellaSwag, indexing them), and a file without examples."""
    path = Path(path)
    where = f"choices file {str(path)!r}"
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()  # a leading BOM dropped
    except FileNotFoundError:
        raise DataError(f"{where} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"cannot read {where}: {getattr(e, 'strerror', None) or e}") from None
    out = []
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise DataError(f"{where} line {no} is not JSON: {str(e).splitlines()[0]}") from None
        out.append(_example(obj, f"{where} line {no}"))
    if not out:
        raise DataError(f"{where} holds no examples")
    return out


def _example(obj, where: str) -> Example:
    """One jsonl object as an Example; DataError naming ``where`` and what is wrong."""
    if not isinstance(obj, dict):
        raise DataError(f"{where}: want an object with ctx (text), endings (a list of two or "
                        "more texts) and label (the right ending's index)")
    ctx, ends, label = obj.get("ctx"), obj.get("endings"), obj.get("label")
    if not isinstance(ctx, str):
        raise DataError(f"{where}: ctx must be a text, got {_shown(ctx)}")
    if not (isinstance(ends, list) and len(ends) >= 2 and all(isinstance(e, str) for e in ends)):
        raise DataError(f"{where}: endings must be a list of two or more texts, got "
                        f"{_shown(ends)}")
    # an empty text has no token to score (an empty context: the ending's first token
    # has nothing before it), so its loss would be 0 or NaN and win every time
    if not ctx.strip():
        raise DataError(f"{where}: ctx is empty; every example needs a context")
    for k, e in enumerate(ends):
        if not e.strip():
            raise DataError(f"{where}: ending {k} is empty; every ending needs text to score")
    if isinstance(label, str) and label.isascii() and label.isdigit():
        label = int(label)  # Hugging Face's HellaSwag has string labels ("1")
    if isinstance(label, bool) or not isinstance(label, int):
        raise DataError(f"{where}: label must be the right ending's index (an integer such "
                        f"as 0 or \"0\"), got {_shown(label)}")
    if not 0 <= label < len(ends):
        raise DataError(f"{where}: label {label} is out of range for {len(ends)} endings "
                        f"(0 to {len(ends) - 1})")
    return Example(ctx, tuple(ends), label)


def _shown(value) -> str:
    return "nothing (it is missing)" if value is None else f"{json.dumps(value)[:40]}"


def render(ex: Example, tok: Tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """hellaswag.py ``render_example``: tokens int64 [n_endings, n] (context + " " +
    ending, right-padded with 0) and mask float64 [n_endings, n] (1 on the ending's
    tokens)."""
    ctx = tok.encode(ex.ctx, "its context").tolist()
    rows = [ctx + tok.encode(" " + e, f"its ending {k}").tolist()
            for k, e in enumerate(ex.endings)]
    n = max(map(len, rows))
    tokens = np.zeros((len(rows), n), np.int64)
    mask = np.zeros((len(rows), n))
    for i, r in enumerate(rows):
        tokens[i, :len(r)] = r
        mask[i, len(ctx):len(r)] = 1
    return tokens, mask


def ending_losses(logits: np.ndarray, tokens: np.ndarray, mask: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Summed and mean cross-entropy (float64 [rows]) of the masked tokens: position t's
    logits (float32 [rows, n, V]) predict token t+1 (hellaswag.py's shift)."""
    z = logits[:, :-1].astype(np.float64)
    z -= z.max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    nll = -np.take_along_axis(logp, tokens[:, 1:, None], axis=-1)[..., 0]
    m = mask[:, 1:]
    total = (nll * m).sum(axis=1)
    return total, total / m.sum(axis=1)


@dataclass
class Scores:
    """Per-example results: picks by summed (``pred``) and mean (``pred_norm``) loss,
    the labels, and every ending's summed and mean loss."""

    pred: np.ndarray
    pred_norm: np.ndarray
    label: np.ndarray
    sum_loss: list[np.ndarray]
    avg_loss: list[np.ndarray]

    @property
    def acc(self) -> float:
        """Fraction right by the summed loss."""
        return float(np.mean(self.pred == self.label))

    @property
    def acc_norm(self) -> float:
        """Fraction right by the mean loss per token (hellaswag.py's acc_norm)."""
        return float(np.mean(self.pred_norm == self.label))


TOO_LONG_FIX = (": shorten its context, or score a model trained with a larger "
                "--block-size")


def check_fits(examples: list[Example], tok: Tokenizer, block_size: int, where: str) -> None:
    """Raise DataError (one line naming ``where`` and the example) when an example's
    text has a token the tokenizer cannot encode, OptionConflict (a usage error: the
    file and the model cannot go together) when a row is longer than block_size: what
    ``evaluate`` would refuse, found before a run starts."""
    for i, ex in enumerate(examples, 1):
        try:
            tokens, _ = render(ex, tok)
        except DataError as e:
            raise DataError(f"{where}, example {i}: {e}") from None
        if tokens.shape[1] > block_size:
            raise OptionConflict(f"{where}, example {i}: context and ending hold "
                                 f"{tokens.shape[1]} tokens, more than the model's "
                                 f"block_size {block_size}" + TOO_LONG_FIX)


def evaluate(examples: list[Example], tok: Tokenizer,
             logits_fn: Callable[[np.ndarray], np.ndarray], block_size: int) -> Scores:
    """Score every example: one ``logits_fn`` call per example on its endings' rows
    (tokens int64 [n_endings, n] -> float32 [n_endings, n, V], on the device).
    Raises DataError naming the example when a row is longer than block_size."""
    preds, norms, sums, avgs = [], [], [], []
    for i, ex in enumerate(examples, 1):
        tokens, mask = render(ex, tok)
        if tokens.shape[1] > block_size:
            raise DataError(f"choices example {i}: context and ending hold "
                            f"{tokens.shape[1]} tokens, more than the model's block_size "
                            f"{block_size}" + TOO_LONG_FIX)
        total, mean = ending_losses(logits_fn(tokens), tokens, mask)
        preds.append(int(total.argmin()))
        norms.append(int(mean.argmin()))
        sums.append(total)
        avgs.append(mean)
    return Scores(np.array(preds), np.array(norms), np.array([e.label for e in examples]),
                  sums, avgs)
