"""A text run's loss curves beside its checkpoint: ``<out>.losses.csv`` and ``.losses.png``.

The CSV has one row per step (``step,loss,grad_norm,eval_train,eval_val``; the
eval columns are filled at evaluation steps, and step 0 holds only the first
evaluation; a run without a validation split, ``--val-fraction 0``, has no
``eval_val`` column); the PNG (marked as this tool's by a text chunk, PNG_MARK) plots the per-step training loss and the evaluations'
train and validation losses against the step (matplotlib). Both are written
atomically, with the mode the umask gives, as checkpoints are
(checkpoint.replace_file).
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np

from .checkpoint import replace_file


HEADER = ["step", "loss", "grad_norm", "eval_train", "eval_val"]
CHOICES = ["eval_acc", "eval_acc_norm"]  # train --eval-choices: the multiple-choice scores


def paths(out: Path) -> tuple[Path, Path]:
    """(CSV, PNG) beside the checkpoint ``out``: model.safetensors -> model.losses.csv,
    model.losses.png."""
    return out.with_suffix(".losses.csv"), out.with_suffix(".losses.png")


# The PNG text chunk (tEXt, written by matplotlib's savefig metadata) that marks a plot as
# this tool's, so that a user's own NAME.losses.png is never replaced.
PNG_MARK = ("microgpt-fut", "loss curves")


def _is_loss_csv(path: Path) -> bool:
    """Whether the file starts with a header line that ``csv_bytes`` writes."""
    try:
        with open(path, encoding="utf-8") as f:
            first = f.readline().strip()
    except (OSError, UnicodeDecodeError):
        return False
    return any(first == ",".join(h) for base in (HEADER, HEADER[:-1])
               for h in (base, base + CHOICES))


def _png_text(path: Path) -> dict[str, str]:
    """The text chunks of a PNG (Pillow, matplotlib's own image library); {} for a file
    that is not a readable PNG."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            return dict(im.text) if im.format == "PNG" else {}
    except Exception:  # not an image, unreadable, damaged: not a plot of ours
        return {}


def _is_loss_png(path: Path, csv_is_ours: bool) -> bool:
    """Whether the PNG is a plot this tool wrote: it carries PNG_MARK, or (versions
    before the mark) matplotlib wrote it and a loss CSV of ours lies beside it."""
    text = _png_text(path)
    key, value = PNG_MARK
    return text.get(key) == value or (
        csv_is_ours and text.get("Software", "").startswith("Matplotlib"))


def check_writable(out: Path) -> None:
    """Raise ValueError (one line) when the CSV or the PNG beside ``out`` exists and is
    not one this tool writes (a file of the user's that the run would overwrite): a CSV
    without a loss CSV's header, a PNG without PNG_MARK (``_is_loss_png``)."""
    csv_path, png_path = paths(out)
    csv_is_ours = csv_path.exists() and _is_loss_csv(csv_path)
    for path, foreign, what in (
            (csv_path, csv_path.exists() and not csv_is_ours, "a loss CSV"),
            (png_path, png_path.exists() and not _is_loss_png(png_path, csv_is_ours),
             "a loss plot")):
        if foreign:
            raise ValueError(f"{str(path)!r} exists and is not {what} of microgpt-fut: "
                             "refusing to overwrite it (move it away or choose another --out)")


def csv_bytes(losses: np.ndarray, norms: np.ndarray, evals: list, val: bool = True) -> bytes:
    """The CSV's contents. losses, norms: float32 [step] (step s+1's loss is losses[s]);
    evals: [[step, train, val], ...]; ``val`` False: the run has no validation split
    (no eval_val column). Evaluations with multiple-choice scores ([step, train, val,
    acc, acc_norm]: train --eval-choices) add the eval_acc and eval_acc_norm columns."""
    scored = any(len(e) == 5 for e in evals)
    by_step = {int(e[0]): (tuple(e[1:3]) if val else (e[1],))
               + ((tuple(e[3:5]) if len(e) == 5 else (None, None)) if scored else ())
               for e in evals}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    header = (HEADER if val else HEADER[:-1]) + (CHOICES if scored else [])
    w.writerow(header)
    for step in range(len(losses) + 1):
        ev = by_step.get(step)
        if step == 0 and ev is None:
            continue
        row = [step] + ([f"{losses[step - 1]:.6f}", f"{norms[step - 1]:.6f}"] if step else ["", ""])
        row += [f"{x:.6f}" if x is not None else "" for x in ev] if ev else \
            [""] * (len(header) - 3)
        w.writerow(row)
    return buf.getvalue().encode()


def png_bytes(losses: np.ndarray, evals: list, title: str) -> bytes:
    """The plot's PNG: training loss per step, evaluations of both splits."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    steps = np.arange(1, len(losses) + 1)
    ax.plot(steps, losses, color="tab:blue", alpha=0.3, lw=0.8, label="train loss (per step)")
    if evals:
        ev = np.asarray([list(e[:3]) for e in evals], dtype=np.float64)
        ax.plot(ev[:, 0], ev[:, 1], "o-", color="tab:blue", label="train loss (eval)")
        if np.isfinite(ev[:, 2]).any():
            ax.plot(ev[:, 0], ev[:, 2], "s-", color="tab:orange", label="val loss (eval)")
        scored = np.asarray([[e[0], e[3], e[4]] for e in evals if len(e) == 5], np.float64)
        if len(scored):  # train --eval-choices: the multiple-choice scores, right axis
            acc = ax.twinx()
            acc.plot(scored[:, 0], scored[:, 1], "^--", color="tab:green", label="acc")
            acc.plot(scored[:, 0], scored[:, 2], "v--", color="tab:red", label="acc_norm")
            acc.set_ylabel("multiple-choice accuracy")
            acc.set_ylim(0, 1)
            acc.legend(loc="upper center")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats per token)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata=dict([PNG_MARK]))
    plt.close(fig)
    return buf.getvalue()


def write(out: Path, losses: np.ndarray, norms: np.ndarray, evals: list, title: str,
          val: bool = True) -> None:
    """Write both files beside ``out`` (OSError when the folder is not writable);
    ``val`` as in ``csv_bytes``."""
    csv_path, png_path = paths(out)
    replace_file(csv_path, csv_bytes(losses, norms, evals, val))
    replace_file(png_path, png_bytes(losses, evals, title))
