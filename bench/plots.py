"""PNG plots of sweep.csv (matplotlib, Agg backend: no display needed)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .report import OURS, num, ratio  # noqa: E402

STYLE = {"c": ("tab:blue", "o"), "c-threads": ("tab:cyan", "P"), "multicore": ("tab:orange", "s"),
         "opencl": ("tab:green", "^"), "cuda": ("tab:purple", "v"), "torch": ("black", "D")}
TARGETS = {"B": 3.0, "C": 1.0, "D": 0.5}


def tokens_per_s(rows: list[dict], path: Path) -> None:
    """Training tokens/s against parameter count, one line per backend, log-log;
    cells that timed out are marked with an x at the bottom of the axis."""
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=120)
    backends = list(dict.fromkeys(r["backend"] for r in rows))
    failed = []
    for b in backends:
        pts = sorted(((num(r["n_params"]), num(r["train_tok_s"]), r["config"])
                      for r in rows if r["backend"] == b), key=lambda x: (x[0], x[1] or 0))
        good = [(p, t, c) for p, t, c in pts if t is not None]
        failed += [(p, b, c) for p, t, c in pts if t is None]
        if not good:
            continue
        color, marker = STYLE.get(b, ("grey", "x"))
        ax.plot([p for p, _, _ in good], [t for _, t, _ in good], marker=marker, color=color,
                label=b, linewidth=1.5, markersize=6)
        for p, t, c in good:
            ax.annotate(c, (p, t), textcoords="offset points", xytext=(5, 4), fontsize=8,
                        color=color)
    ax.set_xscale("log")
    ax.set_yscale("log")
    if failed:
        lo = ax.get_ylim()[0]
        for p, b, c in failed:
            color, _ = STYLE.get(b, ("grey", "x"))
            shift = 1.08 ** backends.index(b)  # side by side where several failed
            ax.plot([p * shift], [lo], marker="x", color=color, markersize=9, clip_on=False)
        ax.plot([], [], "kx", label="timeout / error / skipped (on the axis)")
    ax.set_xlabel("parameters")
    ax.set_ylabel("training tokens/s (valid positions)")
    ax.set_title("Training throughput vs model size (2 vCPUs)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def ratio_vs_torch(rows: list[dict], path: Path) -> None:
    """Training tokens/s of each of our backends divided by torch's, per configuration
    (bars, log scale); the issue's targets as red marks; timeouts labelled."""
    configs = list(dict.fromkeys(r["config"] for r in rows))
    backends = [b for b in OURS if any(r["backend"] == b for r in rows)]
    fig, ax = plt.subplots(figsize=(8.5, 5), dpi=120)
    width = 0.8 / max(1, len(backends))
    values = [ratio(rows, r, "train_tok_s") for r in rows if r["backend"] in OURS]
    good = [v for v in values if v]
    lo = min(good + [0.5]) / 3 if good else 0.01
    labelled = set()
    for i, b in enumerate(backends):
        color, _ = STYLE.get(b, ("grey", "x"))
        for j, c in enumerate(configs):
            r = next((r for r in rows if r["config"] == c and r["backend"] == b), None)
            if r is None:
                continue
            x = j + (i - (len(backends) - 1) / 2) * width
            v = ratio(rows, r, "train_tok_s")
            if v:
                ax.bar(x, v - lo, width * 0.9, bottom=lo, color=color,
                       label=None if b in labelled else b)
                labelled.add(b)
                ax.text(x, v * 1.08, f"{v:.3g}" if v >= 1 else f"{v:.2g}", ha="center", fontsize=7)
            else:
                ax.text(x, lo * 1.15, str(r["train_tok_s"] or "n/a"), rotation=90, ha="center",
                        va="bottom", fontsize=7, color=color)
    for j, c in enumerate(configs):
        if c in TARGETS:
            ax.plot([j - 0.45, j + 0.45], [TARGETS[c]] * 2, color="red", linewidth=2,
                    label=None if "target" in labelled else "target (issue 3)")
            labelled.add("target")
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.legend(fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(bottom=lo)
    ax.set_xlim(-0.6, len(configs) - 0.4)
    ax.set_xticks(range(len(configs)))
    ax.set_xticklabels(configs)
    ax.set_xlabel("configuration")
    ax.set_ylabel("training tokens/s, ours / torch (log)")
    ax.set_title("Speed relative to PyTorch CPU eager (1 = same; dashed)")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_all(rows: list[dict], results: Path) -> list[Path]:
    """Both plots into ``results``; returns their paths (none when there are no rows)."""
    if not rows:
        return []
    paths = [results / "tokens_per_s.png", results / "ratio_vs_torch.png"]
    tokens_per_s(rows, paths[0])
    ratio_vs_torch(rows, paths[1])
    return paths
