"""``python -m bench.decode``: KV-cache decoding of GPT-2 124M's shape, ours against
transformers' ``generate`` on the same CPU, in one run.

A GPT2LMHeadModel of GPT-2 small's shape (n_embd 768, 12 layers, 12 heads, 1024
positions, vocab 50257) with random weights (N(0, 0.2), so that greedy choices have
no float32 near-ties) is saved with ``save_pretrained`` to a
temporary folder; ours loads that folder (``hf.load_folder``, what ``sample
--checkpoint DIR`` does) on the c backend. Both continue the same prompts greedily
(temperature 0 / ``do_sample=False``) by --new-tokens tokens, at batch 1 and at a
batch of prompts of different lengths (ours: ``generate_prompts``, one KV cache for
the batch; transformers: left-padded with an attention mask). The generated tokens
must be equal (checked, rows of different lengths included), so the two do the same
work. Each runs on one thread and on --torch-threads / --our-threads (ours splits a
batch of prompts over c contexts, as ``sample --threads``); tokens/s counts generated tokens (batch x new tokens) over the wall time of
the call, after one warm-up call each. Timings are the median of --repeats.

Writes --out (default bench/results/decode.csv, one row per (engine, batch)) and
prints a Markdown table.
"""
from __future__ import annotations

import argparse
import csv
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from . import RESULTS_DIR

COLUMNS = ["engine", "batch", "prompt_tokens", "new_tokens", "seconds", "tokens_per_s",
           "threads", "measured_at"]


def _prompts(batch: int, vocab: int, seed: int = 0) -> list[np.ndarray]:
    """batch prompts of 8..8+batch-1 random token ids (different lengths)."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocab, 8 + i) for i in range(batch)]


def _median_time(fn, repeats: int) -> tuple[float, object]:
    fn()  # warm-up: the first call allocates the cache (and compiles nothing here)
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def _ours(folder: Path, prompts, new_tokens: int, repeats: int, threads: int = 1):
    """Our greedy decoding on the c backend; threads > 1 splits the prompts over that
    many contexts (``sample --threads``)."""
    from microgpt_fut.training import hf
    from microgpt_fut.training.family import FAMILIES
    from microgpt_fut.backend.runtime import Runtime

    config, params, _ = hf.load_folder(folder, require_tokenizer=False)
    rt = Runtime("c", None, quiet=True, program="gpt2")
    model = FAMILIES["gpt2"].model(rt, config, 0, threads, params=params)
    return _median_time(lambda: model.generate_prompts(0, 0.0, 0, prompts, new_tokens),
                        repeats)


def _theirs(model, prompts, new_tokens: int, repeats: int):
    import torch

    width = max(len(p) for p in prompts)
    ids = torch.zeros((len(prompts), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):  # left padding, as generation needs
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1

    def call():
        with torch.no_grad():
            out = model.generate(ids, attention_mask=mask, max_new_tokens=new_tokens,
                                 min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
        return out[:, width:].numpy()

    return _median_time(call, repeats)


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(prog="python -m bench.decode", description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--torch-threads", type=int, default=os.cpu_count(),
                    help="PyTorch's threads (besides 1)")
    ap.add_argument("--our-threads", type=int, default=os.cpu_count(),
                    help="c contexts for a batch of prompts (besides 1; sample --threads)")
    ap.add_argument("--n-embd", type=int, default=768)
    ap.add_argument("--n-layer", type=int, default=12)
    ap.add_argument("--n-head", type=int, default=12)
    ap.add_argument("--n-positions", type=int, default=1024)
    ap.add_argument("--vocab-size", type=int, default=50257)
    ap.add_argument("--out", type=Path, default=RESULTS_DIR / "decode.csv")
    a = ap.parse_args(argv)
    import torch
    import transformers

    torch.set_num_threads(a.torch_threads)
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_embd=a.n_embd, n_layer=a.n_layer, n_head=a.n_head,
                                  n_positions=a.n_positions, vocab_size=a.vocab_size)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():  # weights N(0, 0.2): logits far apart, no greedy near-ties
        for name, p in model.named_parameters():
            p.normal_(0.0, 0.2)
            if ".ln_" in name and name.endswith(".weight"):
                p.add_(1.0)
    rows = []
    stamp = time.strftime("%Y-%m-%d %H:%M")
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        for batch in a.batches:
            prompts = _prompts(batch, a.vocab_size)
            runs = []
            for threads in sorted({1, min(a.our_threads, batch)}):
                t, ours = _ours(Path(d), prompts, a.new_tokens, a.repeats, threads)
                runs.append(("microgpt-fut c", t, threads, ours))
            for threads in sorted({1, a.torch_threads}):
                torch.set_num_threads(threads)
                t, theirs = _theirs(model, prompts, a.new_tokens, a.repeats)
                runs.append((f"transformers {transformers.__version__}", t, threads, theirs))
            for engine, _, threads, tokens in runs:
                if not np.array_equal(tokens, runs[0][3]):
                    raise SystemExit(f"batch {batch}: the greedy tokens of {engine} on "
                                     f"{threads} threads differ from ours")
            for engine, t, threads, _ in runs:
                rows.append({"engine": engine, "batch": batch,
                             "prompt_tokens": sum(len(p) for p in prompts),
                             "new_tokens": a.new_tokens, "seconds": round(t, 4),
                             "tokens_per_s": round(batch * a.new_tokens / t, 2),
                             "threads": threads, "measured_at": stamp})
    a.out.parent.mkdir(parents=True, exist_ok=True)
    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    print("| engine | batch | tokens/s | seconds | threads |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['engine']} | {r['batch']} | {r['tokens_per_s']:,.1f} | {r['seconds']} | "
              f"{r['threads']} |")
    return rows


if __name__ == "__main__":
    main()
