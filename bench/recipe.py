"""``python -m bench.recipe``: nanoGPT's Shakespeare-char recipe, ours against PyTorch.

The run of the issue's command (``microgpt-fut train --arch gpt2 --data-format text
--data data/tinyshakespeare.txt`` with nanoGPT's shakespeare_char sizes
scaled down: 4 layers, 4 heads, n_embd 128, block 64, batch 12, no biases; lr 1e-3
decayed to 1e-4 at the last step after 100 warm-up steps, AdamW betas (0.9, 0.99),
weight decay 0.1, clipping at 1.0; evaluations of 20 batches of each split every
250 steps; seed 1337), for each of our backends as ``microgpt-fut train`` runs it
(RecipeSpec is that command line, planned by train's own plan) and for PyTorch
(``bench.torch_ref.TorchGPT2`` and ``train_text``: nanoGPT's model.py and train.py)
from the same initial weights (ours under the same seed, loaded into torch) on the
same batches (our ``TextData`` streams). Each run is a fresh subprocess (``--worker``).

Writes to --out-dir (default bench/results): ``recipe.csv`` (one row per run),
``recipe_evals.csv`` (the evaluations: backend, step, train_loss, val_loss),
``recipe_losses.csv`` (each step's training loss and gradient norm) and
``recipe_val_loss.png``; rows of backends not run now are kept (``--fresh``: not),
and prints a Markdown table. ``--help`` lists the options.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, field, make_dataclass, replace
from functools import cached_property
from pathlib import Path

from . import REPO_ROOT, RESULTS_DIR, DATA_DIR

DATA_DEFAULT = DATA_DIR / "tinyshakespeare.txt"
from .worker import peak_rss_mb

SUMMARY_COLUMNS = ["backend", "steps", "wall_s", "train_s", "eval_s", "setup_s", "train_tok_s",
                   "final_train_loss", "final_val_loss", "step0_train_loss", "step0_val_loss",
                   "max_loss_diff", "peak_rss_mb", "n_params", "threads", "measured_at", "notes"]
EVAL_COLUMNS = ["backend", "step", "train_loss", "val_loss"]
LOSS_COLUMNS = ["backend", "step", "loss", "grad_norm"]
THREADED = "c-threads"  # --backends name of c with --threads (the torch baseline's count)
MODELS = ("shakespeare", "gpt2-124m")  # --model: nanoGPT's recipe, or GPT-2 small fine-tuned
PREFIX = {"shakespeare": "recipe", "gpt2-124m": "finetune_124m"}


def files(model: str) -> dict[str, str]:
    """The result files of --model: recipe*.csv/png for the recipe, finetune_124m*."""
    p = PREFIX[model]
    return {"summary": f"{p}.csv", "evals": f"{p}_evals.csv", "losses": f"{p}_losses.csv",
            "plot": f"{p}_val_loss.png"}


# The command's train options (click's names), and the ones the spec may give:
# a RecipeSpec is that command line, planned by train's own plan
# (microgpt_fut.cli.train.plan_of), so that bench trains as `train` does.
# warmup_steps None: the family's default, min(100, steps // 10), so that a short
# smoke run (steps <= 100) still has lr_decay_steps = steps > warmup_steps.
# The betas are (0.9, 0.99), not train's (0.9, 0.95): the recipe measured in README.
RECIPE = {"arch": "gpt2", "steps": 2000, "n_layer": 4, "n_head": 4, "n_embd": 128,
          "block_size": 64, "batch_size": 12, "grad_accum": 1, "lr": 1e-3, "min_lr": 1e-4,
          "warmup_steps": None, "beta2": 0.99, "bias": False, "seed": 1337,
          "steps_per_call": 50, "data": str(DATA_DEFAULT), "threads": 1,
          # `train --init-from FOLDER`: a Hugging Face GPT-2 folder's sizes and weights,
          # its positional table cropped to block_size (nanoGPT's crop_block_size)
          "init_from": "", "data_format": "text"}
# options the spec may give, None: train's default
TRAIN_DEFAULTS = ("beta1", "weight_decay", "grad_clip", "eval_every", "eval_iters")
SIZES = ("n_layer", "n_head", "n_embd", "bias")  # an init_from model's own


class _Spec:
    """The run's options (train's names; defaults: the issue's command) as train plans
    them: ``plan`` is microgpt_fut.cli.train's, and the settings, config, weights and
    data follow from it as `train` makes them."""

    def args(self) -> list[str]:
        """The command line ``microgpt-fut train ARGS`` of this spec."""
        out = []
        for k, v in asdict(self).items():
            if v is None or v == "" or (self.init_from and k in SIZES):
                continue
            flag = "--" + k.replace("_", "-")
            out += ([flag if v else f"--no-{k}"] if isinstance(v, bool) else [flag, str(v)])
        return out

    @cached_property
    def plan(self):
        from microgpt_fut.cli.train import plan_of

        return plan_of(self.args())

    def settings(self):
        """The Settings of ``microgpt-fut train`` with these options."""
        return self.plan.settings

    def recipe(self):
        return self.settings().optimizer

    def config(self, vocab_size: int):
        """The model's config: an init_from model's (cropped), else GPT-2's of the sizes."""
        p = self.plan
        return p.model.config if p.model is not None else p.family.config(vocab_size, p.sizes)

    def weights(self) -> dict | None:
        """init_from's tensors (Hugging Face names, wpe cropped to block_size), or None."""
        p = self.plan
        return None if p.init is None else p.init.config.to_file(p.init.params)

    def load(self):
        """The tokens (text.TextData) as train opens them: the text (90 % train, 10 % val,
        train's default --val-fraction), or the token shards of data_format "tokens"."""
        return self.plan.kind.open(self.plan).data


RecipeSpec = make_dataclass("RecipeSpec", [(k, object, field(default=v)) for k, v in
                                           {**RECIPE, **dict.fromkeys(TRAIN_DEFAULTS)}.items()],
                            bases=(_Spec,), frozen=True)


def _say(backend: str):
    t0 = time.perf_counter()

    def on_eval(step: int, train: float, val: float) -> None:
        print(f"[{backend:9s} {time.perf_counter() - t0:7.1f} s] step {step}: "
              f"train loss {train:.4f}, val loss {val:.4f}", flush=True)
    return on_eval


def _result(backend: str, spec: RecipeSpec, *, wall_s, train_s, setup_s, positions, evals,
            losses, norms, n_params, threads, notes="") -> dict:
    return {"backend": backend, "steps": spec.steps, "wall_s": wall_s, "train_s": train_s,
            "eval_s": None, "setup_s": setup_s, "positions": positions,
            "train_tok_s": positions / train_s if train_s else None,
            "evals": [[int(s), float(a), float(b)] for s, a, b in evals],
            "losses": [float(x) for x in losses], "norms": [float(x) for x in norms],
            "n_params": n_params, "threads": threads, "notes": notes,
            "peak_rss_mb": peak_rss_mb()}


def run_ours(backend: str, spec: RecipeSpec, quiet: bool = False) -> dict:
    """One run on our ``backend`` as ``microgpt-fut train`` runs it: its plan opens the
    data and starts the run (``c-threads``: c with ``--threads spec.threads``).
    wall_s: all of the run (training calls, batches, evaluations); train_s: the
    training calls only; setup_s: the context, the data and the initialisation."""
    from microgpt_fut.backend.runtime import Runtime

    t0 = time.perf_counter()
    label, backend = backend, ("c" if backend == THREADED else backend)
    p = replace(spec.plan)  # Plan.start lets go of the arrays weights() reads
    rt = Runtime(backend, quiet=True, program=p.family.program)
    data = p.kind.open(p)
    config = p.config(data)
    run = p.start(rt, data, config)
    rt.sync()
    setup_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    run.run(on_eval=None if quiet else _say(backend))
    wall_s = time.perf_counter() - t0
    out = _result(label, spec, wall_s=wall_s, train_s=run.seconds, setup_s=setup_s,
                  positions=run.positions, evals=run.evals, losses=run.losses, norms=run.norms,
                  n_params=config.num_params(), threads=spec.threads if label == THREADED else None)
    out["eval_s"] = wall_s - run.seconds
    rt.close()
    return out


def initial_weights(spec: RecipeSpec, vocab_size: int, backend: str | None = None) -> dict:
    """Our initial weights under spec.seed as Hugging Face tensors (GPT2Model.init on
    ``backend``, default c, else the first backend with GPT-2's library), or those of
    spec.init_from."""
    from microgpt_fut.models.gpt2 import GPT2Model
    from microgpt_fut.backend.runtime import Runtime, built_backends

    if spec.init_from:
        return spec.weights()

    built = built_backends("gpt2")
    if backend is None:
        if not built:
            raise RuntimeError("no backend has GPT-2's library: run ./build.sh")
        backend = "c" if "c" in built else built[0]
    rt = Runtime(backend, quiet=True, program="gpt2")
    config = spec.config(vocab_size)
    try:
        return config.to_file(GPT2Model.init(rt, config, spec.seed).params())
    finally:
        rt.close()


def run_torch(spec: RecipeSpec, threads: int | None = None, device: str = "cpu",
              quiet: bool = False) -> dict:
    """One PyTorch run (bench.torch_ref.train_text) from our initial weights on our
    batches. wall_s: the whole loop with evaluations; train_s: the training steps."""
    import torch

    from . import torch_ref as TR

    if threads:
        torch.set_num_threads(threads)
    t0 = time.perf_counter()
    data = spec.load()
    config = spec.config(data.vocab.size)
    model = TR.TorchGPT2(config).load_hf(initial_weights(spec, data.vocab.size)).to(device)
    setup_s = time.perf_counter() - t0
    run = TR.train_text(model, data, spec.settings(), on_eval=None if quiet else _say("torch"))
    out = _result("torch", spec, wall_s=run.wall_s, train_s=run.train_s, setup_s=setup_s,
                  positions=run.positions, evals=run.evals, losses=run.losses, norms=run.norms,
                  n_params=config.num_params(), threads=torch.get_num_threads(),
                  notes=f"torch {torch.__version__} on {device}")
    out["eval_s"] = run.eval_s
    return out


# --- the parent: one subprocess per run, then CSV files, plot, table ---------------------


def _worker_env(backend: str, omp_wait_policy: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    if backend == "torch" and omp_wait_policy:
        env["OMP_WAIT_POLICY"] = omp_wait_policy
    return env


def run_in_subprocess(backend: str, spec: RecipeSpec, threads: int, device: str,
                      omp_wait_policy: str = "") -> dict:
    """``python -m bench.recipe --worker BACKEND`` in a fresh process; its output goes
    to ours. Returns its result, or a row whose notes hold the error."""
    with tempfile.TemporaryDirectory(prefix="recipe-") as tmp:
        result = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "bench.recipe", "--worker", backend,
               "--spec", json.dumps(asdict(spec)), "--result", str(result),
               "--threads", str(threads), "--torch-device", device]
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=_worker_env(backend, omp_wait_policy),
                              stderr=subprocess.PIPE, text=True)
        if proc.stderr:
            sys.stderr.write(proc.stderr)
        if proc.returncode == 0 and result.exists():
            return json.loads(result.read_text())
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        why = lines[-1] if lines else f"exit status {proc.returncode}"
        return {"backend": backend, "steps": spec.steps, "evals": [], "losses": [], "norms": [],
                "notes": f"error: {why}"}


def _fmt(x, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return ""
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def summary_row(r: dict, stamp: str) -> dict:
    """The recipe.csv row of a worker's result."""
    evals = r.get("evals") or []
    first, last = (evals[0], evals[-1]) if evals else ([None] * 3, [None] * 3)
    return {"backend": r["backend"], "steps": r["steps"], "wall_s": _fmt(r.get("wall_s"), 2),
            "train_s": _fmt(r.get("train_s"), 2), "eval_s": _fmt(r.get("eval_s"), 2),
            "setup_s": _fmt(r.get("setup_s"), 2), "train_tok_s": _fmt(r.get("train_tok_s"), 0),
            "final_train_loss": _fmt(last[1]), "final_val_loss": _fmt(last[2]),
            "step0_train_loss": _fmt(first[1], 6), "step0_val_loss": _fmt(first[2], 6),
            "max_loss_diff": _fmt(r.get("max_loss_diff"), 6),
            "peak_rss_mb": _fmt(r.get("peak_rss_mb"), 0),
            "n_params": _fmt(r.get("n_params")), "threads": _fmt(r.get("threads")),
            "measured_at": stamp, "notes": r.get("notes", "")}


def read_csv(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def write_csv(path: Path, rows: list[dict], columns: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def _merge(old: list[dict], new: list[dict], measured: set[str]) -> list[dict]:
    """new rows, after the old rows of backends not measured now."""
    return [r for r in old if r.get("backend") not in measured] + new


def write_results(results: list[dict], out_dir: Path, fresh: bool = False,
                  model: str = "shakespeare") -> dict[str, list[dict]]:
    """The summary, evals and losses CSV files of ``model`` (``files``) in out_dir (merged
    with the rows of other backends there unless ``fresh``); returns all rows of each."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    measured = {r["backend"] for r in results}
    new = {"summary": [summary_row(r, stamp) for r in results],
           "evals": [{"backend": r["backend"], "step": s, "train_loss": _fmt(a, 6),
                      "val_loss": _fmt(b, 6)} for r in results for s, a, b in r["evals"]],
           "losses": [{"backend": r["backend"], "step": i + 1, "loss": _fmt(x, 6),
                       "grad_norm": _fmt(g, 6)}
                      for r in results for i, (x, g) in enumerate(zip(r["losses"], r["norms"]))]}
    columns = {"summary": SUMMARY_COLUMNS, "evals": EVAL_COLUMNS, "losses": LOSS_COLUMNS}
    out = {}
    for key, rows in new.items():
        path = out_dir / files(model)[key]
        rows = rows if fresh else _merge(read_csv(path), rows, measured)
        write_csv(path, rows, columns[key])
        out[key] = rows
    return out


def _num(x) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def table(summary: list[dict]) -> str:
    """The Markdown table of recipe.csv's rows (x torch: torch's wall time / ours)."""
    torch_row = next((r for r in summary if r["backend"] == "torch"), None)
    tw = _num(torch_row["wall_s"]) if torch_row else None
    lines = ["| backend | steps | wall s (whole run incl. evals) | x torch | train s | "
             "train tokens/s | final train loss | final val loss | val loss at step 0 | notes |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in summary:
        w = _num(r["wall_s"])
        speed = f"{tw / w:.2f}x" if tw and w and r["backend"] != "torch" else ""
        tok = _num(r["train_tok_s"])
        lines.append("| " + " | ".join([
            r["backend"], str(r["steps"]), r["wall_s"], speed, r["train_s"],
            f"{tok:,.0f}" if tok is not None else "", r["final_train_loss"], r["final_val_loss"],
            r["step0_val_loss"], str(r.get("notes", "")).replace("|", "\\|")]) + " |")
    return "\n".join(lines)


STYLE = {"c": ("tab:blue", "o"), THREADED: ("tab:cyan", "P"), "multicore": ("tab:orange", "s"),
         "opencl": ("tab:green", "^"), "cuda": ("tab:purple", "v"), "torch": ("black", "D")}


def plot(evals: list[dict], losses: list[dict], path: Path) -> None:
    """Left: evaluation losses against the step (val solid, train dashed), one colour per
    run (torch's markers hollow: the runs overlap when they agree); right: each step's
    training loss, a running mean over min(50, steps/10) steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.8), dpi=120)
    for b in dict.fromkeys(r["backend"] for r in evals):
        color, marker = STYLE.get(b, ("grey", "x"))
        pts = [(int(r["step"]), _num(r["train_loss"]), _num(r["val_loss"]))
               for r in evals if r["backend"] == b]
        hollow = {"markerfacecolor": "none", "markersize": 10} if b == "torch" else {}
        ax.plot([s for s, _, v in pts if v is not None], [v for _, _, v in pts if v is not None],
                marker=marker, color=color, label=f"{b} val", **hollow)
        ax.plot([s for s, t, _ in pts if t is not None], [t for _, t, _ in pts if t is not None],
                linestyle="--", color=color, alpha=0.6, label=f"{b} train")
    for b in dict.fromkeys(r["backend"] for r in losses):
        color, _ = STYLE.get(b, ("grey", "x"))
        steps = np.array([int(r["step"]) for r in losses if r["backend"] == b])
        ys = np.array([_num(r["loss"]) or np.nan for r in losses if r["backend"] == b])
        k = max(1, min(50, len(ys) // 10))
        if k:
            mean = np.convolve(ys, np.ones(k) / k, mode="valid")
            ax2.plot(steps[k - 1:], mean, color=color, label=b,
                     linestyle="--" if b == "torch" else "-")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (mean of the evaluation batches)")
    ax.set_title("Evaluations: val (solid), train (dashed)")
    ax2.set_xlabel("step")
    ax2.set_ylabel("training loss (running mean)")
    ax2.set_title("Training loss per step")
    for a in (ax, ax2):
        a.grid(True, alpha=0.3)
        a.legend(fontsize=8)
    fig.suptitle("nanoGPT's shakespeare_char recipe: our kernels vs PyTorch, same weights and data")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# GPT-2 small fine-tuned as nanoGPT's finetune_shakespeare does (lr 3e-5, no decay),
# at the B x T that fits a CPU, from OpenAI's gpt2 sizes
GPT2_124M = dict(n_layer=12, n_head=12, n_embd=768, block_size=256, batch_size=4, bias=True,
                 lr=3e-5, min_lr=3e-5, warmup_steps=0, steps=6, eval_iters=2)


def make_finetune_data(folder: Path, n_tokens: int, seed: int,
                       **sizes) -> tuple[Path, Path]:
    """(a Hugging Face folder, a shard folder) in ``folder``: transformers'
    GPT2LMHeadModel of ``GPT2Config(**sizes)`` (no sizes: OpenAI's gpt2, 124M parameters,
    vocab 50257) with its own random initialisation under ``seed``, and llm.c shards of
    ``n_tokens`` uniform random ids below its vocab_size for each split, with a
    word-level tokenizer.json of vocab_size tokens beside them and in the model's folder
    (as `train --init-from` needs). Nothing is downloaded."""
    import numpy as np
    import tokenizers
    import torch
    import transformers

    from microgpt_fut.data.shards import ShardWriter, version_for

    torch.manual_seed(seed)
    hf_dir, shard_dir = folder / "gpt2", folder / "shards"
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**sizes))
    model.save_pretrained(hf_dir)
    vocab = model.config.vocab_size
    del model
    shard_dir.mkdir()
    ids = np.random.default_rng(seed).integers(0, vocab, size=2 * n_tokens)
    for split, part in (("train", ids[:n_tokens]), ("val", ids[n_tokens:])):
        w = ShardWriter(shard_dir, "random", split, n_tokens, version_for(vocab))
        w.write(part)
        w.finish()
    words = tokenizers.models.WordLevel({f"<{i}>": i for i in range(vocab)}, unk_token="<0>")
    for where in (shard_dir, hf_dir):  # the model's too: `train --init-from` reads it
        tokenizers.Tokenizer(words).save(str(where / "tokenizer.json"))
    return hf_dir, shard_dir


def compare_losses(results: list[dict]) -> None:
    """Set each run's ``max_loss_diff``: the largest |difference| from torch's run of any
    step's training loss or any evaluation (None without a torch run)."""
    torch_run = next((r for r in results if r["backend"] == "torch" and r["losses"]), None)
    for r in results:
        if torch_run is None or r is torch_run or not r["losses"]:
            continue
        pairs = list(zip(r["losses"], torch_run["losses"]))
        pairs += [(a, b) for e, f in zip(r["evals"], torch_run["evals"]) for a, b in
                  zip(e[1:], f[1:])]
        r["max_loss_diff"] = max(abs(a - b) for a, b in pairs)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    d = RecipeSpec()
    p = argparse.ArgumentParser(prog="python -m bench.recipe", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=MODELS, default="shakespeare",
                   help="shakespeare: nanoGPT's shakespeare_char recipe (default); gpt2-124m: "
                        "fine-tuning a random GPT-2 small folder made by transformers (12 layers, "
                        "12 heads, n_embd 768, vocab 50257) at B 4 x T 256 on random token ids, "
                        "lr 3e-5 (nanoGPT's finetune_shakespeare), nothing downloaded")
    p.add_argument("--steps", type=int, help=f"training steps (default {d.steps}; gpt2-124m: "
                   f"{GPT2_124M['steps']})")
    p.add_argument("--backends", default="c",
                   help=f"comma-separated backends with GPT-2's library, and {THREADED} (c with "
                        "--threads, the number below) (default %(default)s)")
    p.add_argument("--torch", action=argparse.BooleanOptionalAction, default=True,
                   help="run the PyTorch baseline too (default: yes)")
    p.add_argument("--out-dir", type=Path, default=RESULTS_DIR, help="output folder")
    p.add_argument("--fresh", action="store_true",
                   help="replace the CSV files instead of keeping other backends' rows")
    p.add_argument("--eval-every", type=int,
                   help=f"steps between evaluations (default {d.eval_every}; gpt2-124m: --steps)")
    p.add_argument("--eval-iters", type=int,
                   help=f"batches of each split per evaluation (default {d.eval_iters}; "
                        f"gpt2-124m: {GPT2_124M['eval_iters']})")
    p.add_argument("--steps-per-call", type=int, default=d.steps_per_call,
                   help="our steps per device call, as the CLI's (default %(default)s)")
    p.add_argument("--data", default=d.data, help="the text file (default %(default)s)")
    p.add_argument("--seed", type=int, default=d.seed,
                   help="seed of the initial weights, windows and evaluation batches "
                        "(default %(default)s, nanoGPT's)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help=f"torch.set_num_threads, and {THREADED}'s --threads (default: nproc = "
                        "%(default)s)")
    p.add_argument("--torch-device", default="cpu", choices=("cpu", "cuda"),
                   help="where the PyTorch baseline runs (default %(default)s)")
    p.add_argument("--omp-wait-policy", default="",
                   help="OMP_WAIT_POLICY for the torch run ('' (default): the environment's)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--spec", help=argparse.SUPPRESS)
    p.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _worker(args) -> int:
    spec = RecipeSpec(**json.loads(args.spec))
    if args.worker == "torch":
        out = run_torch(spec, args.threads, args.torch_device)
    else:
        if args.worker == THREADED:
            spec = replace(spec, threads=args.threads)
        out = run_ours(args.worker, spec)
    args.result.write_text(json.dumps(out))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench.recipe``."""
    args = parse_args(argv)
    if args.worker:
        return _worker(args)
    from microgpt_fut.backend.runtime import built_backends

    built = built_backends("gpt2")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    for b in backends:
        if b == "torch":
            raise SystemExit("torch is not one of --backends: it runs unless --no-torch")
        if (b if b != THREADED else "c") not in built:
            raise SystemExit(f"backend {b!r} has no GPT-2 library (built: "
                             f"{', '.join(built) or 'none'}); run BACKENDS=gpt2_{b} ./build.sh")
    if args.torch:
        backends.append("torch")
    if not backends:
        raise SystemExit("nothing to run: give --backends or --torch")
    if args.model == "shakespeare" and not Path(args.data).is_file():
        raise SystemExit(f"data file {args.data} not found (tinyshakespeare.txt is expected in "
                         f"{DATA_DIR})")
    with tempfile.TemporaryDirectory(prefix="bench-recipe-") as tmp:
        return _run_all(args, backends, Path(tmp))


def _spec(args, folder: Path) -> RecipeSpec:
    """The RecipeSpec of --model and the options given (gpt2-124m: its folder and shards
    made in ``folder``)."""
    given = {k: v for k, v in (("steps", args.steps), ("eval_every", args.eval_every),
                               ("eval_iters", args.eval_iters)) if v is not None}
    common = dict(steps_per_call=args.steps_per_call, seed=args.seed)
    if args.model == "shakespeare":
        return RecipeSpec(data=str(args.data), **common, **given)
    sizes = {**GPT2_124M, **given}
    sizes.setdefault("eval_every", sizes["steps"])
    need = sizes["steps"] * sizes["batch_size"] * (sizes["block_size"] + 1) + 4096
    print(f"making a random GPT-2 124M folder and {need:,} random token ids in {folder}",
          flush=True)
    model, shards = make_finetune_data(folder, need, args.seed)
    return RecipeSpec(init_from=str(model), data=str(shards), data_format="tokens",
                      **common, **sizes)


def _run_all(args, backends: list[str], folder: Path) -> int:
    spec = _spec(args, folder)
    import click

    try:
        s = spec.settings()  # checked as train checks it
    except (ValueError, click.ClickException) as e:
        raise SystemExit(str(e))
    r = s.optimizer
    print(f"{args.model}, {spec.steps} steps: {spec.n_layer} layers, "
          f"{spec.n_head} heads, n_embd {spec.n_embd}, block {spec.block_size}, batch "
          f"{spec.batch_size}, bias {spec.bias}; lr {r.lr:g} -> {r.min_lr:g} after "
          f"{r.warmup_steps} warm-up steps, betas ({r.beta1}, {r.beta2}), weight decay "
          f"{r.weight_decay}, clip {r.grad_clip}; evaluations every {s.eval_every} steps of "
          f"{s.eval_iters} batches; seed {spec.seed}", flush=True)
    results = []
    for b in backends:
        print(f"--- {b}", flush=True)
        res = run_in_subprocess(b, spec, args.threads, args.torch_device, args.omp_wait_policy)
        if res.get("notes", "").startswith("error"):
            print(f"{b}: {res['notes']}", flush=True)
        results.append(res)
    compare_losses(results)
    rows = write_results(results, args.out_dir, args.fresh, args.model)
    names = files(args.model)
    plot(rows["evals"], rows["losses"], args.out_dir / names["plot"])
    print(f"\nwrote {', '.join(str(args.out_dir / f) for f in names.values())}\n")
    print(table(rows["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
