"""``python -m bench.mpi``: training on 2 MPI ranks against one process (issue 18).

Runs the issue's command, ``microgpt-fut train --data data/tinyshakespeare.txt
--batch-size 32 --n-embd 64 --n-layer 2 --block-size 32`` (one document per line,
1000 steps by default), in turn as one process (one c context: the run stays on
the device), as ``mpirun -n 2`` and as one process with ``--threads 2`` (the same
split as 2 ranks, in threads), ``--rounds`` times; each command's tokens/s is the
one it prints (training time only, after start-up). Then it compares the
checkpoints: the 2-rank run against one process (per-step losses, weights) and
against ``--threads 2`` (bit for bit).

It also times ``Allreduce`` of one float32 gradient on 2 ranks here for the
parameter counts of the sweep's configurations (bench/configs.py) and GPT-2
124M, for the cost model of bench/README.md (``cost_rows``). Writes
``mpi.csv`` (one row per run) and ``mpi_allreduce.csv`` into --results and prints
Markdown tables. ``--help`` lists the options.
"""
from __future__ import annotations

import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from . import REPO_ROOT, RESULTS_DIR, DATA_DIR

COMMAND = ["--batch-size", "32", "--n-embd", "64", "--n-layer", "2", "--block-size", "32"]
KINDS = ("one process", "mpirun -n 2", "--threads 2")
GPT2_124M = 124_439_808  # GPT-2 small's parameters (tied head), Hugging Face's count
_RATE = re.compile(r"^trained (\d+) steps in ([\d.]+) s \(([\d,]+) tok/s\)$", re.M)


def parse_rate(output: str) -> tuple[int, float, float]:
    """(steps, seconds, tokens/s) from train's line ``trained N steps in S s (X tok/s)``.
    Raises ValueError when the output has no such line."""
    m = _RATE.search(output)
    if m is None:
        raise ValueError(f"no 'trained ... tok/s' line in the output: {output[-300:]!r}")
    return int(m.group(1)), float(m.group(2)), float(m.group(3).replace(",", ""))


def mpirun(n: int) -> list[str]:
    """mpirun for n ranks here: quiet, oversubscribed if need be, as root if we are."""
    cmd = ["mpirun", "-n", str(n), "--oversubscribe", "-q"]
    return cmd + (["--allow-run-as-root"] if os.geteuid() == 0 else [])


def train_command(kind: str, data: Path, steps: int, out: Path) -> list[str]:
    """The command line of one run of ``kind`` (one of KINDS)."""
    args = ["-m", "microgpt_fut", "train", "--data", str(data), *COMMAND, "--steps", str(steps),
            "--samples", "0", "--overwrite", "--out", str(out)]
    if kind == "mpirun -n 2":
        return [*mpirun(2), sys.executable, *args]
    return [sys.executable, *args, *(["--threads", "2"] if kind == "--threads 2" else [])]


def run_once(kind: str, data: Path, steps: int, out: Path) -> dict:
    """One run: its kind, tokens/s, training seconds, wall seconds (with start-up), when
    it started and the machine's load average (1 min) then."""
    started, load = time.strftime("%Y-%m-%dT%H:%M:%S"), os.getloadavg()[0]
    t0 = time.perf_counter()
    r = subprocess.run(train_command(kind, data, steps, out), capture_output=True, text=True,
                       cwd=REPO_ROOT)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{kind} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    n, seconds, rate = parse_rate(r.stderr)  # train's progress and summary go to stderr
    return {"kind": kind, "steps": n, "tok_s": rate, "train_s": seconds, "wall_s": round(wall, 2),
            "started": started, "load_avg_1min": round(load, 2)}


def compare(mine: Path, ref: Path) -> dict:
    """How far checkpoint ``mine`` is from ``ref``: the largest relative difference of a
    step's loss, the relative norm of the weights' difference (all parameters as one
    vector) and of each tensor's (the largest), and whether every tensor is equal."""
    from safetensors.numpy import load_file

    a, b = load_file(str(mine)), load_file(str(ref))
    la, lb = a["train.losses"].astype(np.float64), b["train.losses"].astype(np.float64)
    names = [n for n in b if not n.startswith(("adam.", "train."))]
    flat = lambda d: np.concatenate([d[n].ravel().astype(np.float64) for n in names])  # noqa: E731
    rel = lambda x, y: float(np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-300))  # noqa: E731
    return {"loss_max_rel": float(np.max(np.abs(la - lb) / np.abs(lb))),
            "last100_a": float(la[-100:].mean()), "last100_b": float(lb[-100:].mean()),
            "weights_rel": rel(flat(a), flat(b)),
            "tensor_max_rel": max(rel(a[n].astype(np.float64), b[n].astype(np.float64))
                                  for n in names),
            "identical": a.keys() == b.keys() and all(np.array_equal(a[n], b[n]) for n in a)}


def ring_bytes(n_params: int, ranks: int) -> float:
    """Bytes each rank sends (and receives) in a ring Allreduce of n_params float32:
    2 (N - 1) / N x 4 n_params (reduce-scatter, then all-gather)."""
    return 2 * (ranks - 1) / ranks * 4 * n_params


def flops_per_token(n_params: int, n_layer: int, block_size: int, n_embd: int) -> float:
    """Training FLOPs per token, forward and backward (Kaplan et al. 2020, PaLM's
    appendix B): 6 N + 12 L T C."""
    return 6 * n_params + 12 * n_layer * block_size * n_embd


def _allreduce_worker(sizes: list[int], reps: int) -> None:
    """Under mpirun: time Allreduce (MPI.SUM, in place) of each size; rank 0 prints
    ``size seconds`` (the median of reps after one warm-up)."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    for n in sizes:
        buf = np.ones(n, np.float32)
        times = []
        for i in range(reps + 1):
            comm.Barrier()
            t0 = time.perf_counter()
            comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
            times.append(time.perf_counter() - t0)
        if comm.Get_rank() == 0:
            print(n, statistics.median(times[1:]), flush=True)
        del buf


def allreduce_seconds(sizes: list[int], reps: int = 5) -> dict[int, float]:
    """Seconds of one Allreduce of each size (float32) on 2 ranks of this machine."""
    r = subprocess.run([*mpirun(2), sys.executable, "-m", "bench.mpi", "--allreduce-worker",
                        ",".join(map(str, sizes)), "--reps", str(reps)], capture_output=True,
                       text=True, cwd=REPO_ROOT, check=True)
    return {int(a): float(b) for a, b in (ln.split() for ln in r.stdout.splitlines())}


def cost_rows(seconds: dict[int, float]) -> list[dict]:
    """The cost model's rows: for each sweep configuration the exchange per step (bytes,
    and ``seconds`` of Allreduce by parameter count) against the compute per step
    (one c context's step time and rate in bench/results/sweep.csv), and GPT-2
    124M's exchange and FLOPs per micro-batch of 12 x 1024 tokens (nanoGPT's; no
    measured step time here)."""
    from .configs import CONFIGS

    rates = {}
    sweep = RESULTS_DIR / "sweep.csv"
    if sweep.exists():
        with open(sweep) as f:
            for row in csv.DictReader(f):
                if row["backend"] == "c" and row["train_steps"] and row["train_timed_s"]:
                    rates[row["config"]] = (float(row["train_tok_s"]), int(row["n_params"]),
                                            float(row["train_timed_s"]) / int(row["train_steps"]))
    rows = []
    for name, c in CONFIGS.items():
        if name not in rates:
            continue
        tok_s, n_params, compute = rates[name]
        tokens = round(tok_s * compute)  # valid positions per step (names fill fewer)
        rows.append({"config": name, "n_params": n_params, "tokens_per_step": tokens,
                     "mb_per_rank": ring_bytes(n_params, 2) / 1e6,
                     "allreduce_ms": seconds.get(n_params, float("nan")) * 1e3,
                     "gflop_per_step": flops_per_token(n_params, c.n_layer, c.block_size,
                                                       c.n_embd) * tokens / 1e9,
                     "compute_ms": compute * 1e3,
                     "ratio": seconds.get(n_params, float("nan")) / compute})
    tokens = 12 * 1024
    rows.append({"config": "GPT-2 124M", "n_params": GPT2_124M, "tokens_per_step": tokens,
                 "mb_per_rank": ring_bytes(GPT2_124M, 2) / 1e6,
                 "allreduce_ms": seconds.get(GPT2_124M, float("nan")) * 1e3,
                 "gflop_per_step": flops_per_token(GPT2_124M, 12, 1024, 768) * tokens / 1e9,
                 "compute_ms": float("nan"), "ratio": float("nan")})
    return rows


def _write_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.mpi", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=1000, help="training steps (default %(default)s)")
    p.add_argument("--rounds", type=int, default=1,
                   help="times each kind runs, in turn (default %(default)s)")
    p.add_argument("--results", type=Path, default=RESULTS_DIR, help="folder of the CSV files")
    p.add_argument("--no-allreduce", action="store_true", help="skip the Allreduce timings")
    p.add_argument("--allreduce-worker", help=argparse.SUPPRESS)
    p.add_argument("--reps", type=int, default=5, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.allreduce_worker:
        return _allreduce_worker([int(s) for s in a.allreduce_worker.split(",")], a.reps)
    data = DATA_DIR / "tinyshakespeare.txt"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        outs = {k: Path(tmp) / f"{i}.safetensors" for i, k in enumerate(KINDS)}
        for rnd in range(a.rounds):
            for kind in KINDS:
                row = run_once(kind, data, a.steps, outs[kind])
                rows.append({"round": rnd, **row})
                print(f"round {rnd}: {kind}: {row['tok_s']:,.0f} tok/s ({row['train_s']} s "
                      f"training, {row['wall_s']} s in all; load {row['load_avg_1min']})",
                      flush=True)
        vs_one = compare(outs["mpirun -n 2"], outs["one process"])
        vs_threads = compare(outs["mpirun -n 2"], outs["--threads 2"])
    best = {k: max(r["tok_s"] for r in rows if r["kind"] == k) for k in KINDS}
    a.results.mkdir(parents=True, exist_ok=True)
    _write_csv(a.results / "mpi.csv", rows)
    print("\n| run | tokens/s (best of rounds) | vs one process |\n|---|---|---|")
    for k in KINDS:
        print(f"| {k} | {best[k]:,.0f} | {best[k] / best['one process']:.2f}x |")
    print(f"\n2 ranks vs one process ({a.steps} steps): per-step loss max relative difference "
          f"{vs_one['loss_max_rel']:.2e}; mean loss of the last 100 steps "
          f"{vs_one['last100_a']:.4f} vs {vs_one['last100_b']:.4f}; weights (one vector) "
          f"{vs_one['weights_rel']:.2e} relative, largest tensor {vs_one['tensor_max_rel']:.2e}")
    print(f"2 ranks vs one process with --threads 2: "
          f"{'bit-identical' if vs_threads['identical'] else 'DIFFERENT'}")
    if a.no_allreduce:
        return
    from .configs import CONFIGS  # noqa: F401 (cost_rows reads them)

    sizes = sorted({r["n_params"] for r in cost_rows({})})
    cost = cost_rows(allreduce_seconds(sizes))
    _write_csv(a.results / "mpi_allreduce.csv", cost)
    print("\n| config | parameters | MB sent per rank per step | Allreduce (2 ranks, here) | "
          "GFLOP per step | step on one c context | Allreduce / step |\n|---|---|---|---|---|---|---|")
    for c in cost:
        step = f"{c['compute_ms']:,.1f} ms" if c["compute_ms"] == c["compute_ms"] else "—"
        ratio = f"{c['ratio']:.1%}" if c["ratio"] == c["ratio"] else "—"
        print(f"| {c['config']} | {c['n_params']:,} | {c['mb_per_rank']:,.2f} | "
              f"{c['allreduce_ms']:,.2f} ms | {c['gflop_per_step']:,.2f} | {step} | {ratio} |")


if __name__ == "__main__":
    main()
