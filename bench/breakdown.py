"""``python -m bench.breakdown``: where a training step's time goes on the c backend.

Each part of microgpt's training step (futhark/model_grad.fut: the linear layers'
forward, their dx and dW, attention forward and backward, the norms and
element-wise rest, the output head, Adam) is timed alone by ``bench/breakdown.fut``,
compiled by ``futhark c`` with the c backend's compiler and flags (build/c/compiler.txt)
and run on random inputs of configuration C's and D's shapes: the linear layers
over a batch's B*n positions at once, attention one document after another, as
the c backend trains them. Each part's time per
training step is set beside its FLOPs, and their sum beside a whole step timed
through the library (models.microgpt.MicrogptModel.train, one thread).

Then each linear layer's three products alone (y = x·Wᵀ, dx = dy·W, dW = dyᵀ·x, through
futhark/gemm.fut) at GPT-2's shapes: the Shakespeare recipe's (n_embd 128, B 12 x 64 =
768 positions) and GPT-2 small's (n_embd 768, B 4 x T 256 = 1024 positions), beside
NumPy's one-thread OpenBLAS on the same shapes, measured in alternation (``--rounds``
rounds, each a median of ``--runs`` calls of each side): GFLOP/s of both and the median
and range of the per-round ratios.

Writes ``bench/results/breakdown.csv`` and ``breakdown_products.csv`` and prints a
Markdown table per configuration and per product shape. Needs ``./build.sh`` (the c
library and the Futhark compiler it installs).
"""
from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .configs import CONFIGS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SOURCE = HERE / "breakdown.fut"
COLUMNS = ["config", "part", "ms_per_step", "share", "gflop_per_step", "gflop_s", "measured_at"]
PRODUCT_COLUMNS = ["shapes", "N", "K", "M", "product", "gflop_s", "numpy_gflop_s", "ratio",
                   "ratio_min", "ratio_max", "rounds", "measured_at"]
# (N positions, K inputs, M outputs) of GPT-2's linear layers: attention's q, k, v and
# c_proj (K = M = n_embd), the MLP's c_fc and c_proj; y = x W^T with W: [M][K]
PRODUCT_SHAPES = {
    "recipe": [(768, 128, 128), (768, 128, 512), (768, 512, 128)],
    "gpt2-small": [(1024, 768, 768), (1024, 768, 3072), (1024, 3072, 768)],
}
# product: (entry point of bench/breakdown.fut, its inputs' shapes, the same in NumPy)
PRODUCTS = {
    "y = x·Wᵀ": ("product_fwd", lambda N, K, M: [(N, K), (M, K)], "a @ b.T"),
    "dx = dy·W": ("product_dx", lambda N, K, M: [(N, M), (M, K)], "a @ b"),
    "dW = dyᵀ·x": ("product_dw", lambda N, K, M: [(N, M), (N, K)], "a.T @ b"),
}
# NumPy's side, in a process of its own so that OpenBLAS starts with one thread
NUMPY_TIMER = """
import sys, time, numpy as np
sa, sb, expr, runs = eval(sys.argv[1]), eval(sys.argv[2]), sys.argv[3], int(sys.argv[4])
rng = np.random.default_rng(0)
a, b = rng.standard_normal(sa, np.float32), rng.standard_normal(sb, np.float32)
f = eval("lambda: " + expr)
f()
ts = []
for _ in range(runs):
    t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
print(np.median(ts))
"""
VOCAB = 65  # tinyshakespeare's characters and BOS, as the sweep's C and D


def futhark() -> str:
    """The Futhark compiler that build.sh installed (or the one on PATH)."""
    own = ROOT / ".toolchain" / "bin" / "futhark"
    return str(own) if own.exists() else "futhark"


def compile_parts(out: Path) -> Path:
    """bench/breakdown.fut as an executable, with the c library's compiler and flags.

    Raises RuntimeError (with futhark's output) when it does not compile, and
    FileNotFoundError when the c library was never built.
    """
    record = ROOT / "build" / "c" / "compiler.txt"
    if not record.exists():
        raise FileNotFoundError(f"{record} not found: run ./build.sh first")
    cc, flags = record.read_text().splitlines()[:2]
    exe = out / "breakdown"
    env = {**os.environ, "CC": cc, "CFLAGS": flags}
    r = subprocess.run([futhark(), "c", str(SOURCE), "-o", str(exe)], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"futhark c {SOURCE} failed:\n{r.stderr}")
    return exe


def dataset(shapes: list[str]) -> bytes:
    """Input in Futhark's data format, one value per string: a literal such as "4i64"
    as it is, otherwise random values of that type (binary)."""
    out = b""
    for s in shapes:
        if s[0].isdigit():
            out += s.encode() + b"\n"
        else:
            out += subprocess.run([futhark(), "dataset", "-b", "-g", s], capture_output=True,
                                  check=True).stdout
    return out


def time_entry(exe: Path, entry: str, data: bytes, runs: int) -> float:
    """Median seconds of ``runs`` calls of one entry point (the program's own timer)."""
    with tempfile.NamedTemporaryFile("r", suffix=".txt") as t:
        subprocess.run([str(exe), "-e", entry, "-b", "-r", str(runs), "-t", t.name],
                       input=data, stdout=subprocess.DEVNULL, check=True)
        times = [int(x) for x in Path(t.name).read_text().split()]
    return float(np.median(times)) / 1e6


def parts(name: str) -> list[tuple[str, str, list[str], float, float]]:
    """(part, entry, input shapes, times per step, GFLOP per call) for configuration ``name``:
    N = B*n positions (n = block_size) for the linear layers, B documents of n for
    attention; per-layer parts run n_layer times a step, the head and Adam once."""
    c = CONFIGS[name]
    B, n, C, H, L, F, V = c.batch, c.block_size, c.n_embd, c.n_head, c.n_layer, 4 * c.n_embd, VOCAB
    N = B * n
    P = V * C * 2 + n * C + L * (4 * C * C + 2 * F * C)
    act, hid, docs = f"[{N}][{C}]f32", f"[{N}][{F}]f32", f"[{B}][{n}][{C}]f32"
    lin = 2 * N * (4 * C * C + 2 * C * F) / 1e9
    return [
        ("linear layers, forward", "linear_fwd", [act, f"[4][{C}][{C}]f32", f"[{F}][{C}]f32",
                                                  f"[{C}][{F}]f32"], L, lin),
        ("linear layers, dx", "linear_dx", [act, hid, f"[4][{C}][{C}]f32", f"[{F}][{C}]f32",
                                            f"[{C}][{F}]f32"], L, lin),
        ("linear layers, dW", "linear_dw", [act, act, hid, hid], L, lin),
        ("attention, forward", "attention_fwd", [f"{H}i64", docs, docs, docs], L,
         4 * B * n * n * C / 1e9),
        ("attention, backward", "attention_bwd", [docs, docs, docs, f"[{B}][{H}][{n}][{n}]f32", docs],
         L, 8 * B * n * n * C / 1e9),
        ("rmsnorm, relu, adds, forward", "other_fwd", [act, act, hid], L, 0.0),
        ("rmsnorm, relu, adds, backward", "other_bwd", [act, act, hid, hid], L, 0.0),
        ("output head, loss, its backward", "head", [act, f"[{V}][{C}]f32", f"[{N}]i64"], 1,
         3 * 2 * N * V * C / 1e9),
        ("Adam", "adam", [f"[{P}]f32"] * 4, 1, 0.0),
    ]


def step_time(name: str, seconds: float) -> float:
    """Seconds per training step of configuration ``name`` through the library (c, one
    thread), random tokens with every position valid."""
    from microgpt_fut.models.microgpt import MicrogptConfig, MicrogptModel
    from microgpt_fut.backend.runtime import Runtime
    from microgpt_fut.training.optimizer import Adam

    c = CONFIGS[name]
    cfg = MicrogptConfig(vocab_size=VOCAB, n_embd=c.n_embd, n_head=c.n_head, n_layer=c.n_layer,
                    block_size=c.block_size)
    model = MicrogptModel.init(Runtime("c", quiet=True), cfg, 42)
    rng = np.random.default_rng(0)
    K = 2
    tokens = rng.integers(0, VOCAB, (K, c.batch, c.block_size + 1)).astype(np.int64)
    n_pos = np.full((K, c.batch), c.block_size, np.int64)
    model.train(tokens, n_pos, Adam(), 10**6)  # warm-up
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        model.train(tokens, n_pos, Adam(), 10**6)
        steps += K
    return (time.perf_counter() - t0) / steps


def measure(name: str, exe: Path, runs: int, step_seconds: float) -> list[dict]:
    """One configuration's rows: each part, their sum, the whole step, the rest."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    rows, total_ms, total_gf = [], 0.0, 0.0
    for part, entry, shapes, per_step, gflop in parts(name):
        ms = 1e3 * per_step * time_entry(exe, entry, dataset(shapes), runs)
        rows.append({"config": name, "part": part, "ms_per_step": ms,
                     "gflop_per_step": per_step * gflop})
        total_ms += ms
        total_gf += per_step * gflop
    step_ms = 1e3 * step_time(name, step_seconds)
    rows.append({"config": name, "part": "sum of the parts", "ms_per_step": total_ms,
                 "gflop_per_step": total_gf})
    rows.append({"config": name, "part": "whole step (library)", "ms_per_step": step_ms,
                 "gflop_per_step": total_gf})
    for r in rows:
        r["share"] = r["ms_per_step"] / step_ms
        r["gflop_s"] = r["gflop_per_step"] / r["ms_per_step"] * 1e3 if r["gflop_per_step"] else None
        r["measured_at"] = stamp
    return rows


def numpy_time(shapes: list[tuple[int, int]], expr: str, runs: int) -> float:
    """Median seconds of ``runs`` evaluations of ``expr`` (a, b: random float32 arrays of
    ``shapes``) by NumPy on one thread."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", NUMPY_TIMER, repr(shapes[0]), repr(shapes[1]), expr,
                        str(runs)], env=env, capture_output=True, text=True, check=True)
    return float(r.stdout)


def measure_products(name: str, exe: Path, runs: int, rounds: int) -> list[dict]:
    """Each product at each of shape set ``name``'s shapes, ours against NumPy's, in
    alternation: ``rounds`` rounds of a median of ``runs`` calls on each side."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    rows = []
    for N, K, M in PRODUCT_SHAPES[name]:
        for product, (entry, shapes_of, expr) in PRODUCTS.items():
            shapes = shapes_of(N, K, M)
            data = dataset([f"[{a}][{b}]f32" for a, b in shapes])
            ours, theirs = [], []
            for _ in range(rounds):
                ours.append(time_entry(exe, entry, data, runs))
                theirs.append(numpy_time(shapes, expr, runs))
            ratios = [t / o for o, t in zip(ours, theirs)]
            gflop = 2 * N * K * M / 1e9
            rows.append({"shapes": name, "N": N, "K": K, "M": M, "product": product,
                         "gflop_s": gflop / float(np.median(ours)),
                         "numpy_gflop_s": gflop / float(np.median(theirs)),
                         "ratio": float(np.median(ratios)), "ratio_min": min(ratios),
                         "ratio_max": max(ratios), "rounds": rounds, "measured_at": stamp})
    return rows


def products_markdown(rows: list[dict]) -> str:
    """One shape set's product rows as a Markdown table."""
    out = ["| N, K, M | product | ours GFLOP/s | NumPy GFLOP/s | ours / NumPy (range) |",
           "|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['N']}, {r['K']}, {r['M']} | {r['product']} | {r['gflop_s']:.1f} | "
                   f"{r['numpy_gflop_s']:.1f} | {r['ratio']:.2f} ({r['ratio_min']:.2f}-"
                   f"{r['ratio_max']:.2f}) |")
    return "\n".join(out)


def markdown(rows: list[dict]) -> str:
    """One configuration's rows as a Markdown table."""
    out = ["| part | ms per step | of the step | GFLOP per step | GFLOP/s |", "|---|---|---|---|---|"]
    for r in rows:
        gf = f"{r['gflop_per_step']:.3f}" if r["gflop_per_step"] else ""
        rate = f"{r['gflop_s']:.1f}" if r["gflop_s"] else ""
        out.append(f"| {r['part']} | {r['ms_per_step']:.2f} | {100 * r['share']:.0f} % | {gf} | {rate} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.breakdown", description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default="C,D",
                    help="comma-separated, from the sweep's (default C,D; empty: none)")
    ap.add_argument("--products", default="recipe,gpt2-small",
                    help="the products' shape sets, comma-separated: "
                         f"{', '.join(PRODUCT_SHAPES)} (default both; empty: none)")
    ap.add_argument("--runs", type=int, default=10, help="calls per part, median taken (default 10)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternations of ours and NumPy's per product (default 3)")
    ap.add_argument("--step-seconds", type=float, default=5.0,
                    help="seconds of whole training steps timed (default 5)")
    ap.add_argument("--results", type=Path, default=HERE / "results", help="where the CSVs go")
    args = ap.parse_args(argv)
    names = [n.strip().upper() for n in args.configs.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        ap.error(f"--configs: unknown configuration(s) {', '.join(unknown)}")
    sets = [n.strip() for n in args.products.split(",") if n.strip()]
    unknown = [n for n in sets if n not in PRODUCT_SHAPES]
    if unknown:
        ap.error(f"--products: unknown shape set(s) {', '.join(unknown)}")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            exe = compile_parts(Path(tmp))
            rows, product_rows = [], []
            for name in names:
                got = measure(name, exe, args.runs, args.step_seconds)
                print(f"\nconfiguration {name}:\n{markdown(got)}", flush=True)
                rows += got
            for name in sets:
                got = measure_products(name, exe, args.runs, args.rounds)
                print(f"\nproducts, {name}:\n{products_markdown(got)}", flush=True)
                product_rows += got
    except (FileNotFoundError, RuntimeError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    args.results.mkdir(parents=True, exist_ok=True)
    for file, columns, got in [("breakdown.csv", COLUMNS, rows),
                               ("breakdown_products.csv", PRODUCT_COLUMNS, product_rows)]:
        if got:
            with (args.results / file).open("w", newline="") as f:
                w = csv.DictWriter(f, columns)
                w.writeheader()
                w.writerows(got)
    return 0


if __name__ == "__main__":
    sys.exit(main())
