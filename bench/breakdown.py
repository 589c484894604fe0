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

Then (``--gpt2``) each part of GPT-2's training step (futhark/gpt2_grad.fut's
``loss_grad``, train.fut's gradient sum, clip and AdamW) timed alone by
``bench/breakdown_gpt2.fut``, through the library's own functions, beside the same
operation in PyTorch eager on the same shapes (one thread, in a process of its own):
the embeddings, LayerNorm, c_attn, attention (``F.scaled_dot_product_attention``),
attn.c_proj, the residual adds, mlp.c_fc, GELU, mlp.c_proj, the head tied to wte,
the cross-entropy, the gradient's sum and norm (``clip_grad_norm_``) and AdamW
(``torch.optim.AdamW``), and two stores PyTorch has no counterpart of (every layer's
saved activations, every layer's weight gradients), at the Shakespeare recipe's shape
and GPT-2 124M's (``GPT2_SHAPES``). Per-layer parts are timed for one layer and counted
n_layer times (or as often as the step calls them: our backward recomputes LayerNorm's
and GELU's outputs); their sum is set beside a whole step through the library
(``GPT2Model.train``, c, one thread) and said to be off, with what the parts leave
out, where it differs by more than 15 %.

Writes ``bench/results/breakdown.csv``, ``breakdown_products.csv`` and
``breakdown_gpt2.csv`` and prints a Markdown table per configuration, product shape
and GPT-2 shape set. Needs ``./build.sh`` (the c libraries and the Futhark compiler it
installs); ``--gpt2`` needs torch (the ``bench`` extra).
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from microgpt_fut.backend import host_memory
from microgpt_fut.backend.runtime import build_dir

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


def compile_parts(out: Path, source: Path = SOURCE, library: str = "c") -> Path:
    """``source`` (bench/breakdown.fut; bench/breakdown_gpt2.fut with library "gpt2_c")
    as an executable in folder ``out``, compiled as that library was: against its own
    copy of futhark/ (build/LIBRARY/src, with the layout and the products' block that
    build.sh chose for this machine), with the compiler and flags that build.sh recorded
    (build/LIBRARY/compiler.txt: the C compiler, then its flags).

    Raises RuntimeError (with futhark's output) when it does not compile, and
    FileNotFoundError when the library was never built.
    """
    record = build_dir() / library / "compiler.txt"
    if not record.exists():
        raise FileNotFoundError(f"{record} not found: run ./build.sh first")
    cc, flags = record.read_text().splitlines()[:2]
    # source imports "../futhark/...": beside it, the library's copy of futhark/
    tree = out / "tree"
    shutil.copytree(record.parent / "src", tree / "futhark", dirs_exist_ok=True)
    (tree / "bench").mkdir(exist_ok=True)
    shutil.copy(source, tree / "bench" / source.name)
    exe = out / source.stem
    env = {**os.environ, "CC": cc, "CFLAGS": flags}
    r = subprocess.run([futhark(), "c", str(tree / "bench" / source.name), "-o", str(exe)],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"futhark c {source} failed:\n{r.stderr}")
    if not exe.exists():  # futhark c exits 0 when interrupted, without the program
        raise RuntimeError(f"futhark c {source} made no program (interrupted?)")
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


# glibc's malloc in the programs that time our products and parts: keep freed memory
# for the next call, as the library's process does (the same settings: every block from
# the heap, which is never trimmed). With glibc's defaults, each call page-faulted its
# results in afresh: AdamW at the recipe's shape took 6-9 ms a call, 2.0-2.3 ms with
# blocks up to 32 MB kept, and the library's own `apply_gradient` (the norm, the clip and
# AdamW) 2.2-3.1 ms (2 vCPUs, busy); the recipe's products (results of 0.4-1.6 MB) ran at
# 0.45-0.79 of NumPy's speed with glibc's defaults. Blocks over 32 MB (124M's tensors)
# are still mapped afresh.
KEEP_FREED_MEMORY = host_memory.ENVIRONMENT


def time_entry(exe: Path, entry: str, data: bytes, runs: int) -> float:
    """Median seconds of ``runs`` calls of one entry point (the program's own timer)."""
    with tempfile.NamedTemporaryFile("r", suffix=".txt") as t:
        subprocess.run([str(exe), "-e", entry, "-b", "-r", str(runs), "-t", t.name],
                       input=data, stdout=subprocess.DEVNULL, check=True,
                       env={**os.environ, **KEEP_FREED_MEMORY})
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

# ---------------------------------------------------------------------------------------
# GPT-2's step, part by part, beside PyTorch (--gpt2)

GPT2_SOURCE = HERE / "breakdown_gpt2.fut"
GPT2_COLUMNS = ["shapes", "part", "ours_calls", "torch_calls", "ours_ms_per_step",
                "torch_ms_per_step", "ratio", "share", "runs", "measured_at"]
SUM_TOLERANCE = 0.15  # the parts' sum against the whole step: larger differences are reported


@dataclass(frozen=True)
class GPT2Shape:
    """One GPT-2 shape set of ``--gpt2``: the model's sizes (nanoGPT's names), the batch
    (``batch`` rows of ``block_size`` positions, all of them valid), whether the linear
    layers and LayerNorms have biases, and the most timed calls per part (None: ``--runs``;
    a small number keeps 124M's run to minutes on one thread)."""

    name: str
    vocab_size: int
    n_embd: int
    n_head: int
    n_layer: int
    block_size: int
    batch: int
    bias: bool
    max_runs: int | None = None

    @property
    def N(self) -> int:
        """Positions a step: B x T."""
        return self.batch * self.block_size

    @property
    def mlp_width(self) -> int:
        return 4 * self.n_embd

    def config(self):
        """The library's GPT2Config of these sizes."""
        from microgpt_fut.models.gpt2 import GPT2Config

        return GPT2Config(vocab_size=self.vocab_size, n_embd=self.n_embd, n_head=self.n_head,
                          n_layer=self.n_layer, block_size=self.block_size, bias=self.bias)


GPT2_SHAPES = {
    # nanoGPT's shakespeare_char on CPU, as bench.recipe runs it (bench/recipe.py RECIPE:
    # 65 characters, n_embd 128, 4 heads, 4 layers, block 64, batch 12, no biases)
    "recipe": GPT2Shape("recipe", 65, 128, 4, 4, 64, 12, False),
    # OpenAI's GPT-2 small at the B x T of `bench.recipe --model gpt2-124m` (GPT2_124M)
    "gpt2-124m": GPT2Shape("gpt2-124m", 50257, 768, 12, 12, 256, 4, True, max_runs=2),
}


@dataclass(frozen=True)
class GPT2Part:
    """One part of GPT-2's step: its name, the entry point of bench/breakdown_gpt2.fut and
    its arguments (names of ``gpt2_inputs``), how many times one step calls it on our side
    and on PyTorch's (functions of n_layer L), and PyTorch's operation (``torch_op``'s
    spec: its name and sizes; None: PyTorch does no such work, its autograd keeps
    references to the activations and gives each weight its own gradient)."""

    name: str
    entry: str
    args: tuple[str, ...]
    ours_calls: Callable[[int], int]
    torch_op: tuple | None
    torch_calls: Callable[[int], int]


def gpt2_parts(s: GPT2Shape) -> list[GPT2Part]:
    """The parts of one training step at shape set ``s``, in the step's order. Counts:
    once a step (the embeddings, the head, the cross-entropy, the gradient's norm,
    AdamW), once a layer (c_attn, attention, the projections, c_fc), and where our
    backward (gpt2_grad.fut's ``block_backward``) recomputes a forward, once more: each
    layer's ln_1 and ln_2 outputs and GELU's (PyTorch's autograd keeps them). The
    residual adds: two a layer forward, two backward (PyTorch: the gradients of the
    residual stream summed where it forks). Two parts are our bookkeeping, whole steps'
    worth at once, which PyTorch does not do: the forward's store of every layer's saved
    activations and the backward's of every layer's weight gradients (zeroed, then
    written layer by layer)."""
    C, F, V, b = s.n_embd, s.mlp_width, s.vocab_size, s.bias
    one, per_layer = (lambda L: 1), (lambda L: L)

    def linear(name: str, K: int, M: int, x: str, w: str, bias: str, dy: str) -> list[GPT2Part]:
        return [GPT2Part(f"{name}, forward", "dense_fwd", ("bias", w, bias, x), per_layer,
                         ("linear_fwd", K, M, b), per_layer),
                GPT2Part(f"{name}, dx", "dense_dx", (w, dy), per_layer, ("linear_dx", K, M),
                         per_layer),
                GPT2Part(f"{name}, dW", "dense_dw", ("bias", x, dy), per_layer,
                         ("linear_dw", K, M, b), per_layer)]

    return [
        GPT2Part("embedding (wte, wpe), forward", "embedding_fwd",
                 ("tokens", "n_pos", "wte", "wpe"), one, ("embedding_fwd",), one),
        GPT2Part("embedding (wte, wpe), backward", "embedding_bwd",
                 ("T", "inputs", "positions", "dx", "d_wte"), one, ("embedding_bwd",), one),
        GPT2Part("LayerNorm (ln_1, ln_2, ln_f), forward", "layer_norm_fwd",
                 ("bias", "ln_w", "ln_b", "x"), lambda L: 4 * L + 1, ("layer_norm_fwd", b),
                 lambda L: 2 * L + 1),
        GPT2Part("LayerNorm, backward", "layer_norm_bwd", ("bias", "ln_w", "x", "dx"),
                 lambda L: 2 * L + 1, ("layer_norm_bwd", b), lambda L: 2 * L + 1),
        GPT2Part("c_attn (q, k, v), forward", "c_attn_fwd", ("bias", "c_attn_w", "c_attn_b", "x"),
                 per_layer, ("linear_fwd", C, 3 * C, b), per_layer),
        GPT2Part("c_attn, dx", "c_attn_dx", ("c_attn_w", "q", "k", "v"), per_layer,
                 ("linear_dx", C, 3 * C), per_layer),
        GPT2Part("c_attn, dW", "c_attn_dw", ("bias", "x", "q", "k", "v"), per_layer,
                 ("linear_dw", C, 3 * C, b), per_layer),
        GPT2Part("attention, forward", "attention_fwd", ("H", "B", "q", "k", "v"), per_layer,
                 ("attention_fwd",), per_layer),
        GPT2Part("attention, backward", "attention_bwd", ("q", "k", "v", "att", "dx"), per_layer,
                 ("attention_bwd",), per_layer),
        *linear("attn.c_proj", C, C, "x", "attn_proj_w", "b_C", "dx"),
        GPT2Part("residual adds, forward and backward", "residual_add", ("x", "dx"),
                 lambda L: 4 * L, ("add",), lambda L: 4 * L),
        *linear("mlp.c_fc", C, F, "x", "c_fc_w", "b_F", "h"),
        GPT2Part("GELU, forward", "gelu_fwd", ("h",), lambda L: 2 * L, ("gelu_fwd",), per_layer),
        GPT2Part("GELU, backward", "gelu_bwd", ("h", "dh"), per_layer, ("gelu_bwd",), per_layer),
        *linear("mlp.c_proj", F, C, "h", "mlp_proj_w", "b_C", "dx"),
        GPT2Part("lm_head (tied to wte), forward", "head_logits", ("x", "wte"), one,
                 ("linear_fwd", C, V, False), one),
        GPT2Part("cross-entropy, forward", "cross_entropy_fwd", ("logits", "targets", "weights"),
                 one, ("cross_entropy_fwd",), one),
        GPT2Part("cross-entropy, backward", "cross_entropy_bwd", ("logits", "targets", "weights"),
                 one, ("cross_entropy_bwd",), one),
        GPT2Part("lm_head, dx", "head_dx", ("logits", "wte"), one, ("linear_dx", C, V), one),
        GPT2Part("lm_head, dW (wte's)", "head_dw", ("logits", "x"), one,
                 ("linear_dw", C, V, False), one),
        GPT2Part("saved activations (store of all layers)", "activation_store",
                 ("L", "x", "q", "k", "v", "att", "dx", "x", "h"), one, None, one),
        GPT2Part("weight gradients (store of all layers)", "gradient_store",
                 ("L", "c_attn_w", "c_attn_b", "attn_proj_w", "b_C", "ln_w", "ln_b", "c_fc_w",
                  "b_F", "mlp_proj_w", "b_C"), one, None, one),
        GPT2Part("gradient sum and norm (clip)", "grad_sum_norm", ("V", "C", "T", "L", "F", "gs"),
                 one, ("clip",), one),
        GPT2Part("AdamW", "adamw", ("V", "C", "T", "L", "F", "H", "bias", "step", "lr", "clip_coef",
                                    "params", "adam_m", "adam_v", "grad"), one, ("adamw",), one),
    ]


def gpt2_inputs(s: GPT2Shape, seed: int = 0) -> dict[str, Callable[[], object]]:
    """Makers of the entry points' random inputs at shape set ``s``, by argument name
    (made when asked: 124M's flat vectors are 0.5 GB each): float32 activations N(0, 1)
    [N][C] and [N][F], weights N(0, 0.02), LayerNorm weights near 1, tokens below
    vocab_size, attention weights and logits [N][V], flat parameter vectors [P];
    sizes as int64 scalars, the bias flag as bool, rates as float32."""
    B, T, C, H, L, F, V, N = (s.batch, s.block_size, s.n_embd, s.n_head, s.n_layer,
                              s.mlp_width, s.vocab_size, s.N)
    P = s.config().num_tensor_elements()
    rng = np.random.default_rng(seed)

    def normal(*shape, std=1.0):
        return (std * rng.standard_normal(shape, np.float32)).astype(np.float32)

    positions = np.tile(np.arange(T, dtype=np.int64), B)
    return {
        "B": lambda: np.int64(B), "T": lambda: np.int64(T), "C": lambda: np.int64(C),
        "H": lambda: np.int64(H), "L": lambda: np.int64(L), "F": lambda: np.int64(F),
        "V": lambda: np.int64(V), "bias": lambda: np.bool_(s.bias), "step": lambda: np.int64(10),
        "lr": lambda: np.float32(1e-3), "clip_coef": lambda: np.float32(0.5),
        "tokens": lambda: rng.integers(0, V, (B, T + 1), dtype=np.int64),
        "n_pos": lambda: np.full(B, T, np.int64),
        "inputs": lambda: rng.integers(0, V, N, dtype=np.int64),
        "positions": lambda: positions,
        "targets": lambda: rng.integers(0, V, N, dtype=np.int64),
        "weights": lambda: np.full(N, 1 / N, np.float32),
        "wte": lambda: normal(V, C, std=0.02), "wpe": lambda: normal(T, C, std=0.02),
        "d_wte": lambda: normal(V, C, std=0.02),
        "ln_w": lambda: 1 + normal(C, std=0.1), "ln_b": lambda: normal(C, std=0.1),
        "c_attn_w": lambda: normal(3, C, C, std=0.02), "c_attn_b": lambda: normal(3, C, std=0.02),
        "attn_proj_w": lambda: normal(C, C, std=0.02), "c_fc_w": lambda: normal(F, C, std=0.02),
        "mlp_proj_w": lambda: normal(C, F, std=0.02),
        "b_C": lambda: normal(C, std=0.02), "b_F": lambda: normal(F, std=0.02),
        "x": lambda: normal(N, C), "dx": lambda: normal(N, C), "q": lambda: normal(N, C),
        "k": lambda: normal(N, C), "v": lambda: normal(N, C),
        "h": lambda: normal(N, F), "dh": lambda: normal(N, F),
        "att": lambda: rng.random((B, H, T, T), np.float32) / T,
        "logits": lambda: normal(N, V),
        "gs": lambda: normal(1, P, std=1e-3),
        "params": lambda: normal(P, std=0.02), "adam_m": lambda: normal(P, std=1e-3),
        "adam_v": lambda: np.abs(normal(P, std=1e-6)), "grad": lambda: normal(P, std=1e-3),
    }


_FUTHARK_TYPES = {np.dtype(np.float32): b" f32", np.dtype(np.int64): b" i64",
                  np.dtype(np.bool_): b"bool"}
_NUMPY_TYPES = {v: k for k, v in _FUTHARK_TYPES.items()}


def futhark_value(a) -> bytes:
    """A NumPy array or scalar (float32, int64 or bool) in Futhark's binary data format
    (a ``b``, version 2, the rank, the type, the int64 dimensions, the elements in
    little-endian order). Raises KeyError for another dtype."""
    a = np.asarray(a)
    kind = _FUTHARK_TYPES[a.dtype]
    return (b"b\x02" + bytes([a.ndim]) + kind + np.asarray(a.shape, "<i8").tobytes()
            + np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes())


def read_futhark_values(data: bytes) -> list[np.ndarray]:
    """The values of a program's binary output (``-b``; the inverse of ``futhark_value``),
    each a NumPy array (rank 0 for a scalar). Raises ValueError on anything else (an
    opaque value has no binary form)."""
    out, i = [], 0
    while i < len(data):
        if data[i:i + 1].isspace():
            i += 1
            continue
        if data[i:i + 2] != b"b\x02":
            raise ValueError(f"not a binary Futhark value at byte {i}: {data[i:i + 16]!r}")
        rank, kind = data[i + 2], bytes(data[i + 3:i + 7])
        if kind not in _NUMPY_TYPES:
            raise ValueError(f"unknown Futhark type {kind!r} at byte {i}")
        dtype = _NUMPY_TYPES[kind]
        shape = tuple(np.frombuffer(data, "<i8", rank, i + 7))
        i += 7 + 8 * rank
        n = int(np.prod(shape, dtype=np.int64))
        out.append(np.frombuffer(data, dtype.newbyteorder("<"), n, i).reshape(shape).astype(dtype))
        i += n * dtype.itemsize
    return out


def time_gpt2_entry(exe: Path, entry: str, values: list, runs: int, folder: Path) -> float:
    """Median seconds of ``runs`` calls (after one untimed warm-up call) of entry point
    ``entry`` of ``exe`` on ``values`` (the program's own timer around each call, inputs
    already in memory; results not printed; glibc keeping freed memory: KEEP_FREED_MEMORY).
    The input goes through a file in ``folder``. Raises RuntimeError with the program's
    message when it fails."""
    data, times = folder / "input.bin", folder / "times.txt"
    with data.open("wb") as f:
        for v in values:
            f.write(futhark_value(v))
    with data.open("rb") as f:
        r = subprocess.run([str(exe), "-e", entry, "-n", "-r", str(runs), "-t", str(times)],
                           stdin=f, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, **KEEP_FREED_MEMORY})
    data.unlink()
    if r.returncode != 0:
        raise RuntimeError(f"{exe.name} -e {entry} failed:\n{r.stderr}")
    return float(np.median([int(x) for x in times.read_text().split()])) / 1e6


def call_entry(exe: Path, entry: str, values: list, folder: Path) -> list[np.ndarray]:
    """The results of one call of entry point ``entry`` of ``exe`` on ``values`` (as
    ``time_gpt2_entry`` passes them), as NumPy arrays (``read_futhark_values``). Raises
    RuntimeError with the program's message when it fails."""
    data = folder / "input.bin"
    with data.open("wb") as f:
        for v in values:
            f.write(futhark_value(v))
    with data.open("rb") as f:
        r = subprocess.run([str(exe), "-e", entry, "-b"], stdin=f, capture_output=True)
    data.unlink()
    if r.returncode != 0:
        raise RuntimeError(f"{exe.name} -e {entry} failed:\n{r.stderr.decode()}")
    return read_futhark_values(r.stdout)


# PyTorch's side in a process of its own: one thread set before any operation
TORCH_WORKER = """
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)
from bench.breakdown import torch_times
print(json.dumps(torch_times(json.loads(sys.argv[2]))))
"""


def torch_op(spec: tuple, s: GPT2Shape, torch, F) -> Callable[[], object]:
    """PyTorch's operation of a part (``GPT2Part.torch_op``) at shape set ``s`` on random
    float32 tensors, as nanoGPT's model.py and train.py compute it: a function that runs
    it once. The forwards on [B, T, C] activations; a backward is autograd's
    (``torch.autograd.grad`` through a graph built once, retained); a linear layer's dx
    and dW are the products its autograd runs (dy W, dyᵀ x, and the bias's sum of dy).
    Raises KeyError for an unknown operation."""
    B, T, C, H, L, Fw, V, N = (s.batch, s.block_size, s.n_embd, s.n_head, s.n_layer,
                               s.mlp_width, s.vocab_size, s.N)
    D = C // H
    g = torch.Generator().manual_seed(0)

    def randn(*shape, grad=False, std=1.0):
        return (std * torch.randn(*shape, generator=g)).requires_grad_(grad)

    def grad_of(y, xs, dy=None):
        return lambda: torch.autograd.grad(y, xs, dy, retain_graph=True)

    op, *dims = spec
    if op == "embedding_fwd" or op == "embedding_bwd":
        idx, pos = torch.randint(0, V, (B, T), generator=g), torch.arange(T)
        wte, wpe = randn(V, C, grad=True, std=0.02), randn(T, C, grad=True, std=0.02)
        if op == "embedding_fwd":
            return lambda: F.embedding(idx, wte) + F.embedding(pos, wpe)
        y, dy, d_head = F.embedding(idx, wte) + F.embedding(pos, wpe), randn(B, T, C), randn(V, C)

        def embedding_bwd():
            d_wte, d_wpe = torch.autograd.grad(y, (wte, wpe), dy, retain_graph=True)
            return d_wte + d_head, d_wpe  # wte's gradient: the head's and the embedding's
        return embedding_bwd
    if op in ("layer_norm_fwd", "layer_norm_bwd"):
        bias = dims[0]
        x, w = randn(B, T, C, grad=True), (1 + randn(C, std=0.1)).requires_grad_()
        b = randn(C, grad=True, std=0.1) if bias else None
        if op == "layer_norm_fwd":
            return lambda: F.layer_norm(x, (C,), w, b, 1e-5)
        return grad_of(F.layer_norm(x, (C,), w, b, 1e-5), [x, w] + ([b] if bias else []),
                       randn(B, T, C))
    if op == "linear_fwd":
        K, M, bias = dims
        x, w = randn(B, T, K), randn(M, K, grad=True, std=0.02)  # a weight: autograd records
        b = randn(M, grad=True, std=0.02) if bias else None
        return lambda: F.linear(x, w, b)
    if op == "linear_dx":
        K, M = dims
        dy, w = randn(B, T, M), randn(M, K, std=0.02)
        return lambda: dy @ w
    if op == "linear_dw":
        K, M, bias = dims
        dy, x = randn(N, M), randn(N, K)
        if bias:
            return lambda: (dy.t().mm(x), dy.sum(0))
        return lambda: dy.t().mm(x)
    if op in ("attention_fwd", "attention_bwd"):
        qkv = randn(B, T, 3 * C, grad=True)

        def attention():  # nanoGPT's CausalSelfAttention between c_attn and c_proj
            q, k, v = qkv.split(C, dim=2)
            q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return y.transpose(1, 2).contiguous().view(B, T, C)
        return attention if op == "attention_fwd" else grad_of(attention(), qkv, randn(B, T, C))
    if op == "add":
        a, b = randn(B, T, C), randn(B, T, C)
        return lambda: a + b
    if op in ("gelu_fwd", "gelu_bwd"):
        h = randn(B, T, Fw, grad=True)
        if op == "gelu_fwd":
            return lambda: F.gelu(h, approximate="tanh")
        return grad_of(F.gelu(h, approximate="tanh"), h, randn(B, T, Fw))
    if op in ("cross_entropy_fwd", "cross_entropy_bwd"):
        logits, targets = randn(N, V, grad=True), torch.randint(0, V, (N,), generator=g)
        if op == "cross_entropy_fwd":
            return lambda: F.cross_entropy(logits, targets, ignore_index=-1)
        return grad_of(F.cross_entropy(logits, targets, ignore_index=-1), logits)
    if op in ("clip", "adamw"):
        # nanoGPT's parameters (Hugging Face's tensors: no biases without bias, wte tied)
        params = [randn(*shape, std=0.02).requires_grad_()
                  for shape in s.config().file_shapes().values()]
        for p in params:
            p.grad = 1e-3 * torch.randn(p.shape, generator=g)
        if op == "clip":
            return lambda: torch.nn.utils.clip_grad_norm_(params, 1.0)
        # nanoGPT's configure_optimizers: decay on the tensors of two or more dimensions
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.99), eps=1e-8)
        return opt.step
    raise KeyError(f"unknown PyTorch operation {op!r}")


def torch_times(job: dict) -> list[float]:
    """Median seconds of ``job["runs"]`` calls (after one warm-up call) of each PyTorch
    operation ``job["ops"]`` (``torch_op``'s specs) at shape set ``job["shape"]`` (a
    GPT2Shape's fields), in this process's torch (the caller sets its threads first:
    ``TORCH_WORKER``)."""
    import torch
    import torch.nn.functional as F

    s, runs, out = GPT2Shape(**job["shape"]), job["runs"], []
    for spec in job["ops"]:
        f = torch_op(tuple(spec), s, torch, F)
        with torch.no_grad() if spec[0] in ("clip", "adamw") else contextlib.nullcontext():
            f()
            ts = []
            for _ in range(runs):
                t = time.perf_counter()
                f()
                ts.append(time.perf_counter() - t)
        out.append(float(np.median(ts)))
        del f
    return out


def torch_part_times(s: GPT2Shape, ops: list[tuple], runs: int) -> list[float]:
    """``torch_times`` of ``ops`` at shape set ``s`` in a new process whose torch runs one
    thread (set before any operation; OMP_NUM_THREADS and MKL_NUM_THREADS 1 too). Raises
    RuntimeError with its output when it fails (torch missing, say)."""
    import json

    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1"}
    job = json.dumps({"shape": asdict(s), "ops": [list(o) for o in ops], "runs": runs})
    r = subprocess.run([sys.executable, "-c", TORCH_WORKER, str(ROOT), job], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"PyTorch's timing ({s.name}) failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.splitlines()[-1])


def gpt2_step_time(s: GPT2Shape, seconds: float) -> float:
    """Seconds per training step of GPT-2 at shape set ``s`` through the library
    (``GPT2Model.train`` on the c backend: one thread), on random tokens with every
    position valid, nanoGPT's recipe's AdamW and clip: after one warm-up call, steps
    until ``seconds`` have passed (at least one). Raises BackendError when the GPT-2 c
    library is not built."""
    from microgpt_fut.backend.runtime import Runtime
    from microgpt_fut.models.gpt2 import GPT2Model
    from microgpt_fut.training.optimizer import Recipe

    model = GPT2Model.init(Runtime("c", quiet=True, program="gpt2"), s.config(), 42)
    rng = np.random.default_rng(0)
    K = 2 if s.max_runs is None else 1  # steps a call
    tokens = rng.integers(0, s.vocab_size, (K, s.batch, s.block_size + 1)).astype(np.int64)
    opt = Recipe(beta2=0.99)
    model.train(tokens, None, opt)  # warm-up
    steps, t0 = 0, time.perf_counter()
    while steps == 0 or time.perf_counter() - t0 < seconds:
        model.train(tokens, None, opt)
        steps += K
    return (time.perf_counter() - t0) / steps


def measure_gpt2(s: GPT2Shape, exe: Path, runs: int, step_seconds: float,
                 folder: Path) -> tuple[list[dict], str | None]:
    """Shape set ``s``'s rows (each part, ours and PyTorch's ms per step; their sums; the
    whole step through the library) and a note when the parts' sum is off the step by
    more than SUM_TOLERANCE (None otherwise). ``runs`` calls per part on each side, at
    most ``s.max_runs``."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    runs = min(runs, s.max_runs or runs)
    parts, makers, L = gpt2_parts(s), gpt2_inputs(s), s.n_layer
    rows = []
    for p in parts:
        values = [makers[a]() for a in p.args]
        t = time_gpt2_entry(exe, p.entry, values, runs, folder)
        del values
        rows.append({"shapes": s.name, "part": p.name, "ours_calls": p.ours_calls(L),
                     "torch_calls": p.torch_calls(L),
                     "ours_ms_per_step": 1e3 * t * p.ours_calls(L)})
    theirs = iter(torch_part_times(s, [p.torch_op for p in parts if p.torch_op], runs))
    for r, p in zip(rows, parts):
        r["torch_ms_per_step"] = 1e3 * next(theirs) * p.torch_calls(L) if p.torch_op else None
        if not p.torch_op:
            r["torch_calls"] = None
    ours_sum = sum(r["ours_ms_per_step"] for r in rows)
    torch_sum = sum(r["torch_ms_per_step"] or 0 for r in rows)
    step_ms = 1e3 * gpt2_step_time(s, step_seconds)
    rows.append({"shapes": s.name, "part": "sum of the parts", "ours_ms_per_step": ours_sum,
                 "torch_ms_per_step": torch_sum})
    rows.append({"shapes": s.name, "part": "whole step (library)", "ours_ms_per_step": step_ms,
                 "torch_ms_per_step": None})
    for r in rows:
        r["ratio"] = (r["ours_ms_per_step"] / r["torch_ms_per_step"]
                      if r["torch_ms_per_step"] else None)
        r["share"] = r["ours_ms_per_step"] / step_ms
        r["runs"] = runs
        r["measured_at"] = stamp
    return rows, sum_note(ours_sum, step_ms)


def sum_note(parts_ms: float, step_ms: float) -> str | None:
    """None when the parts' sum is within SUM_TOLERANCE of the whole step; otherwise a
    line saying by how much it is off, and what the parts leave out or count twice."""
    off = parts_ms / step_ms - 1
    if abs(off) <= SUM_TOLERANCE:
        return None
    if off < 0:
        return (f"the parts add up to {100 * (1 + off):.0f} % of the step "
                f"({step_ms - parts_ms:.1f} ms a step in no part): the parts leave out the "
                "training call's own work (its copy of the state, the steps' loop), copies "
                "between parts inside the step (a product's result laid out for the next, "
                "heads split and merged where a part's inputs come ready), and the cost of "
                "caches: in the step a part reads what the previous layers pushed out of the "
                "cache, alone its inputs were just written.")
    return (f"the parts add up to {100 * (1 + off):.0f} % of the step ({parts_ms - step_ms:.1f} "
            "ms a step more): alone, a part cannot fuse with its neighbours as in the step "
            "(a residual add with LayerNorm's backward, a bias with its product); with few "
            "--runs, or beside other work, a part's median is also noisy.")


def gpt2_library() -> str:
    """The build folder whose compiler record compiles the GPT-2 parts: the GPT-2 c
    library's (gpt2_c), else microgpt's c library's (the same compiler and flags)."""
    return "gpt2_c" if (build_dir() / "gpt2_c" / "compiler.txt").exists() else "c"


def torch_version() -> str:
    """torch's version as its package records it (without importing torch here)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return "not installed"


def gpt2_markdown(rows: list[dict]) -> str:
    """One shape set's rows as a Markdown table: part | ours | PyTorch (ms per step) |
    ours / PyTorch | share of our step."""
    out = ["| part | ours ms/step | PyTorch ms/step | ours/PyTorch | share of our step |",
           "|---|---|---|---|---|"]
    for r in rows:
        calls = (f" ({r['ours_calls']}x" + (f", PyTorch {r['torch_calls']}x)"
                 if r["torch_calls"] not in (r["ours_calls"], None) else ")")
                 if r.get("ours_calls") else "")
        torch_ms = (f"{r['torch_ms_per_step']:.2f}" if r["torch_ms_per_step"] is not None
                    else "none" if r.get("ours_calls") else "")
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else ""
        out.append(f"| {r['part']}{calls} | {r['ours_ms_per_step']:.2f} | {torch_ms} | {ratio} | "
                   f"{100 * r['share']:.1f} % |")
    return "\n".join(out)



def show(text: str) -> None:
    """Print text; once standard output's reader has gone (``| head``), print nothing more
    (standard output points at /dev/null, as Python's documentation advises) and go on,
    so that the CSVs are still written."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.breakdown", description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default="C,D",
                    help="comma-separated, from the sweep's (default C,D; empty: none)")
    ap.add_argument("--products", default="recipe,gpt2-small",
                    help="the products' shape sets, comma-separated: "
                         f"{', '.join(PRODUCT_SHAPES)} (default both; empty: none)")
    ap.add_argument("--gpt2", default="recipe",
                    help="GPT-2's step part by part beside PyTorch's, at these shape sets, "
                         f"comma-separated: {', '.join(GPT2_SHAPES)} (default recipe; "
                         "gpt2-124m takes minutes and about 10 GB; empty: none)")
    ap.add_argument("--runs", type=int, default=10,
                    help="calls per part, median taken (default 10; gpt2-124m at most "
                         f"{GPT2_SHAPES['gpt2-124m'].max_runs})")
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternations of ours and NumPy's per product (default 3; --products only)")
    ap.add_argument("--step-seconds", type=float, default=5.0,
                    help="seconds of whole training steps timed, at least one step (default 5)")
    ap.add_argument("--results", type=Path, default=HERE / "results",
                    help="the folder of the CSVs (default bench/results): each measured "
                         "configuration's, shape set's rows replace their earlier ones")
    args = ap.parse_args(argv)
    names = [n.strip().upper() for n in args.configs.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        ap.error(f"--configs: unknown configuration(s) {', '.join(unknown)}")
    sets = [n.strip() for n in args.products.split(",") if n.strip()]
    unknown = [n for n in sets if n not in PRODUCT_SHAPES]
    if unknown:
        ap.error(f"--products: unknown shape set(s) {', '.join(unknown)}")
    gpt2_sets = list(dict.fromkeys(n.strip().lower() for n in args.gpt2.split(",") if n.strip()))
    unknown = [n for n in gpt2_sets if n not in GPT2_SHAPES]
    if unknown:
        ap.error(f"--gpt2: unknown shape set(s) {', '.join(unknown)} (known: "
                 f"{', '.join(GPT2_SHAPES)})")
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if not 0 <= args.step_seconds < float("inf"):
        ap.error("--step-seconds must be a number of seconds, 0 or more")
    if not (names or sets or gpt2_sets):
        ap.error("nothing to measure: --configs, --products and --gpt2 are all empty")
    try:  # the results' folder before the work, which takes minutes
        args.results.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=args.results):
            pass
    except OSError as e:
        ap.error(f"--results: cannot write into {args.results} ({e.strerror})")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rows, product_rows, gpt2_rows = [], [], []
            exe = compile_parts(Path(tmp)) if names or sets else None
            for name in names:
                got = measure(name, exe, args.runs, args.step_seconds)
                show(f"\nconfiguration {name}:\n{markdown(got)}")
                rows += got
            for name in sets:
                got = measure_products(name, exe, args.runs, args.rounds)
                show(f"\nproducts, {name}:\n{products_markdown(got)}")
                product_rows += got
            if gpt2_sets:
                print(f"compiling {GPT2_SOURCE.name} (about 30 s) ...", file=sys.stderr, flush=True)
                gpt2_exe = compile_parts(Path(tmp), GPT2_SOURCE, gpt2_library())
            for name in gpt2_sets:
                got, note = measure_gpt2(GPT2_SHAPES[name], gpt2_exe, args.runs,
                                         args.step_seconds, Path(tmp))
                total, step = got[-2:]
                show(f"\nGPT-2's step, {name} (c, one thread; PyTorch {torch_version()}, one "
                     f"thread):\n{gpt2_markdown(got)}\n\nsum of the parts "
                     f"{total['ours_ms_per_step']:.1f} ms, whole step "
                     f"{step['ours_ms_per_step']:.1f} ms ({100 * total['share']:.0f} %): "
                     + (note or f"within {100 * SUM_TOLERANCE:.0f} %."))
                gpt2_rows += got
    except (FileNotFoundError, RuntimeError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"interrupted: nothing written to {args.results}", file=sys.stderr)
        return 130
    for file, columns, got, key in [("breakdown.csv", COLUMNS, rows, "config"),
                                    ("breakdown_products.csv", PRODUCT_COLUMNS, product_rows,
                                     "shapes"),
                                    ("breakdown_gpt2.csv", GPT2_COLUMNS, gpt2_rows, "shapes")]:
        if got:
            write_rows(args.results / file, columns, got, key)
    return 0


def write_rows(path: Path, columns: list[str], rows: list[dict], key: str) -> None:
    """rows into the CSV file at path, after the rows already there whose ``key`` column
    none of them has (another configuration's or shape set's, measured before), through
    a temporary file renamed into place, so an interrupted write leaves the old file."""
    measured = {str(r[key]) for r in rows}
    old = []
    if path.exists():
        with path.open(newline="") as f:
            old = [r for r in csv.DictReader(f) if r.get(key) not in measured]
    tmp = path.with_name(path.name + ".part")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(old + rows)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
