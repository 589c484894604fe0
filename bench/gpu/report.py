"""The GPU run's results from its steps' events: CSV files, a PNG and a Markdown
summary in ``$OUT`` (the device tool brings back at most 8 files: these four,
the log and the environment).

- ``gpu_sweep.csv``: one row per (configuration, engine): training tokens/s,
  samples/s, peak device memory during training, warm-up and step times, and
  ours over PyTorch eager's and torch.compile's tokens/s.
- ``gpu_first_step.csv``: time from a fresh process's start to the end of its
  first training step, in parts, with empty (cold) and filled (cached) caches.
- ``gpu_tokens_per_s.png``: tokens/s per configuration and engine, and ours over
  PyTorch's.
- ``gpu_summary.md``: the phases, both tables and issue 17's targets.
"""
from __future__ import annotations

import csv
import time
from pathlib import Path

from ..report import num
from .configs import GPU_CONFIGS

SWEEP_COLUMNS = ["config", "arch", "engine", "device", "n_embd", "n_head", "n_layer",
                 "block_size", "batch", "n_params", "data", "train_tok_s", "x_torch",
                 "x_torch_compile", "sample_samples_s", "sample_x_torch", "peak_mem_mb",
                 "warmup_s", "step_s", "steps_per_call", "timed_s", "sample_n", "loss",
                 "notes", "measured_at"]
FIRST_COLUMNS = ["engine", "arch", "config", "caches", "total_s", "startup_s", "import_s",
                 "runtime_s", "setup_s", "first_step_s", "kernel_cache", "status", "notes"]
OURS = ("cuda", "c")


def first_step_rows(steps) -> list[dict]:
    """One row per first-step step (run or not)."""
    rows = []
    for st in steps:
        m = st.meta
        if m.get("mode") != "first_step":
            continue
        ev = next((e for e in st.events if e["event"] == "first_step"), None)
        err = next((e["error"] for e in st.events if e["event"] == "error"), "")
        row = {"engine": m["engine"], "arch": m["arch"], "config": m["configs"][0]["name"],
               "caches": m["state"], "status": "ok" if ev else st.status,
               "notes": err or ("" if ev or st.ok else (st.tail[-1][:200] if st.tail else ""))}
        rt = next((e for e in st.events if e["event"] == "runtime"), None)
        for e in (rt, ev):  # a step killed after its context was made still says how long that took
            if e:
                row.update({k: e[k] for k in FIRST_COLUMNS if k in e})
        rows.append(row)
    rank = {"cuda": 0, "c": 0, "torch": 1, "torch.compile": 2, "microgpt": 0, "gpt2": 1,
            "cold": 0, "cached": 1}
    rows.sort(key=lambda r: (rank.get(r["engine"], 3), rank.get(r["arch"], 2),
                             rank.get(r["caches"], 2)))
    return rows


def sweep_rows(steps) -> list[dict]:
    """One row per (configuration, engine) of every sweep step; configurations the
    step never reached say why."""
    rows = []
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    for st in steps:
        m = st.meta
        if m.get("mode") != "sweep":
            continue
        for cfg in m["configs"]:
            name = cfg["name"]
            evs = {e["event"]: e for e in st.events if e.get("config") == name}
            row = {k: cfg.get(k, "") for k in ("n_embd", "n_head", "n_layer", "block_size",
                                               "batch", "data", "arch", "sample_n")}
            row.update({"config": name, "engine": m["engine"], "device": m["device"],
                        "measured_at": stamp})
            notes = []
            if "train" in evs:
                t = evs["train"]
                row.update({"train_tok_s": t["tok_s"], "n_params": t.get("n_params", ""),
                            "peak_mem_mb": t.get("peak_mem_mb") or "",
                            "warmup_s": t["warmup_s"], "step_s": t["step_s"],
                            "steps_per_call": t["steps_per_call"], "timed_s": t["timed_s"],
                            "loss": round(t["loss"], 4)})
                notes += [t["note"]] if t.get("note") else []
            elif "error" in evs:
                row["train_tok_s"] = "error"
                notes.append(evs["error"]["error"])
            elif "skip" in evs:
                row["train_tok_s"] = "skipped"
                notes.append(f"skipped: {evs['skip']['reason']}")
            elif "warm" in evs:
                row["train_tok_s"] = "timeout"
                notes.append(f"killed at the lane's deadline after a warm-up of "
                             f"{evs['warm']['warmup_s']} s")
            else:
                row["train_tok_s"] = "not run"
                notes.append(st.status if st.status.startswith("not run") else
                             f"not reached: the sweep {st.status}")
            if "sample" in evs:
                row["sample_samples_s"] = evs["sample"]["samples_s"]
                notes += [f"sample: {evs['sample']['note']}"] if evs["sample"].get("note") else []
            rows.append({**row, "notes": "; ".join(n for n in notes if n)})
    add_ratios(rows)
    order = {n: i for i, n in enumerate(GPU_CONFIGS)}
    engines = {"cuda": 0, "c": 0, "torch": 1, "torch.compile": 2}
    rows.sort(key=lambda r: (order.get(r["config"], len(order)), engines.get(r["engine"], 3)))
    return rows


def add_ratios(rows: list[dict]) -> None:
    """x_torch, x_torch_compile, sample_x_torch: ours (and torch.compile's) over
    PyTorch's on the same configuration, where both were measured."""
    by = {(r["config"], r["engine"]): r for r in rows}
    for r in rows:
        eager = by.get((r["config"], "torch"), {})
        comp = by.get((r["config"], "torch.compile"), {})
        mine = num(r.get("train_tok_s"))
        if r["engine"] != "torch" and mine and num(eager.get("train_tok_s")):
            r["x_torch"] = round(mine / num(eager["train_tok_s"]), 3)
        if r["engine"] in OURS and mine and num(comp.get("train_tok_s")):
            r["x_torch_compile"] = round(mine / num(comp["train_tok_s"]), 3)
        s = num(r.get("sample_samples_s"))
        if r["engine"] in OURS and s and num(eager.get("sample_samples_s")):
            r["sample_x_torch"] = round(s / num(eager["sample_samples_s"]), 3)


def write_csv(path: Path, rows: list[dict], columns: list[str]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def plot(rows: list[dict], path: Path, title: str) -> None:
    """Tokens/s per configuration (log scale), one line per engine; below, ours and
    torch.compile's over PyTorch eager's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = list(dict.fromkeys(r["config"] for r in rows))
    engines = list(dict.fromkeys(r["engine"] for r in rows))
    style = {"cuda": ("tab:purple", "v"), "c": ("tab:blue", "o"), "torch": ("black", "D"),
             "torch.compile": ("tab:red", "s")}
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(9, 7.5), dpi=110, sharex=True,
                                 gridspec_kw={"height_ratios": [3, 2]})
    xs = range(len(configs))
    for e in engines:
        color, marker = style.get(e, ("grey", "x"))
        ys = [num(next((r["train_tok_s"] for r in rows
                        if r["config"] == c and r["engine"] == e), None)) for c in configs]
        ax.plot(xs, [y if y else float("nan") for y in ys], marker=marker, color=color, label=e)
        if e != "torch":
            ratios = [num(next((r.get("x_torch") for r in rows
                                if r["config"] == c and r["engine"] == e), None)) for c in configs]
            bx.plot(xs, [y if y else float("nan") for y in ratios], marker=marker, color=color,
                    label=f"{e} / torch")
    ax.set_yscale("log")
    ax.set_ylabel("training tokens/s")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    bx.axhline(1.0, color="black", linewidth=0.8)
    bx.set_yscale("log")
    bx.set_ylabel("x PyTorch eager")
    bx.set_xticks(list(xs), configs, rotation=30)
    bx.grid(True, which="both", alpha=0.3)
    bx.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _table(rows: list[dict], columns: list[str]) -> list[str]:
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        out.append("| " + " | ".join(str(r.get(c, "")) for c in columns) + " |")
    return out


def targets(sweep: list[dict], first: list[dict], ours: str) -> list[str]:
    """Issue 17's targets, judged on these rows."""
    def ratios(col, pred):
        return [(r["config"], num(r.get(col))) for r in sweep
                if r["engine"] == ours and pred(r) and num(r.get(col)) is not None]

    def verdict(pairs, floor):
        if not pairs:
            return "not measured"
        worst = min(v for _, v in pairs)
        listed = ", ".join(f"{c} {v:.2f}x" for c, v in pairs)
        return f"{'met' if worst >= floor else 'missed'} ({listed})"

    small = ratios("x_torch", lambda r: num(r["n_embd"]) <= 256)
    big = ratios("x_torch_compile", lambda r: 512 <= num(r["n_embd"]) <= 768)
    sample = ratios("sample_x_torch", lambda r: True)
    cached = [r for r in first if r["engine"] == ours and r["caches"] == "cached"
              and num(r.get("total_s")) is not None]
    second = (", ".join(f"{r['arch']} {num(r['total_s']):.1f} s" for r in cached)
              if cached else "")
    ok = cached and all(num(r["total_s"]) <= 5 for r in cached)
    return [f"- {ours} >= 1x PyTorch eager tokens/s at n_embd <= 256: {verdict(small, 1.0)}",
            f"- {ours} >= 0.3x torch.compile at n_embd 512-768: {verdict(big, 0.3)}",
            f"- sampling >= 1x PyTorch: {verdict(sample, 1.0)}",
            f"- a second process reaches its first step in <= 5 s: "
            f"{('met' if ok else 'missed') + f' ({second})' if cached else 'not measured'}"]


def write(out: Path, steps, dry_run: bool, manifest: dict, started: float) -> list[Path]:
    """Write the four result files into ``out``; returns their paths."""
    sweep, first = sweep_rows(steps), first_step_rows(steps)
    paths = [out / "gpu_sweep.csv", out / "gpu_first_step.csv", out / "gpu_tokens_per_s.png",
             out / "gpu_summary.md"]
    write_csv(paths[0], sweep, SWEEP_COLUMNS)
    write_csv(paths[1], first, FIRST_COLUMNS)
    what = "dry run: c backend and PyTorch on the CPU" if dry_run else "GPU run"
    if sweep:
        plot(sweep, paths[2], f"Training throughput ({what})")
    else:
        paths.remove(paths[2])
    ours = "c" if dry_run else "cuda"
    lines = [f"# {what}", "",
             f"Started {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(started))}, "
             f"{time.time() - started:.0f} s; payload from commit {manifest['git_commit']}, "
             f"Futhark {manifest['futhark']}.", "", "## Steps", ""]
    lines += _table([{"step": s.name, "status": s.status, "seconds": s.seconds}
                     for s in steps], ["step", "status", "seconds"])
    lines += ["", "## Time to first training step (s, from the process's start)", ""]
    lines += _table(first, ["engine", "arch", "config", "caches", "total_s", "runtime_s",
                            "first_step_s", "kernel_cache", "status", "notes"])
    lines += ["", "## Sweep", ""]
    lines += _table(sweep, ["config", "engine", "n_params", "batch", "train_tok_s", "x_torch",
                            "x_torch_compile", "sample_samples_s", "sample_x_torch",
                            "peak_mem_mb", "warmup_s", "notes"])
    lines += ["", "## Targets (issue 17)", ""] + targets(sweep, first, ours)
    names = ", ".join(f"{c.name} = {c.n_embd}/{c.n_head}/{c.n_layer}/{c.block_size}/B{c.batch}"
                      for c in GPU_CONFIGS.values())
    lines += ["", f"Configurations (n_embd/n_head/n_layer/block_size/batch): {names}"
              + (" (shrunk in the dry run: see the CSV)" if dry_run else ""), ""]
    paths[-1].write_text("\n".join(lines))
    return paths
