"""The recipe benchmark's PyTorch baseline (bench/torch_ref.py: TorchGPT2, RecipeTrainer,
train_text) computes what our GPT-2 kernels and run.Run compute.

From the same weights: the logits (with and without biases), a few recipe steps
(AdamW with decoupled weight decay on >= 2-D tensors, get_lr's warm-up and cosine
decay, clipping, gradient accumulation) and a whole short text run with its
evaluations, through bench.recipe's own run functions. torch is in the test extra,
so it is imported directly.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

import reference_gpt2 as R
from conftest import get_runtime
from microgpt_fut.models.gpt2 import GPT2Config, GPT2Model
from microgpt_fut.training.optimizer import Recipe

from bench import recipe as BR
from bench import torch_ref as TR

V, C, NH, L, T = 11, 8, 2, 2, 6


def tiny(bias: bool, seed: int = 0):
    """A tiny GPT-2 with random float32 weights (HF names, std 0.3) and its RNG."""
    cfg = GPT2Config(vocab_size=V, n_embd=C, n_head=NH, n_layer=L, block_size=T, bias=bias)
    rng = np.random.default_rng(seed)
    hf = {k: a.astype(np.float32)
          for k, a in R.random_params(R.hf_shapes(V, C, L, T, bias), rng, 0.3).items()}
    return cfg, hf, rng


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_logits_match_ours(bias):
    """Our weights loaded into TorchGPT2 give GPT2Model.logits_seq's logits (1e-4), also on
    a shorter sequence; hf_tensors gives the same tensors back, in HF's order."""
    cfg, hf, rng = tiny(bias)
    model = GPT2Model.from_arrays(get_runtime("c", "gpt2"), cfg, cfg.from_file(hf))
    tm = TR.TorchGPT2(cfg).load_hf(hf)
    for n in (T, 3):
        idx = rng.integers(0, V, size=(3, n))
        with torch.no_grad():
            theirs = tm(torch.from_numpy(idx)).numpy()
        np.testing.assert_allclose(theirs, model.logits_seq(idx), atol=1e-4)
    back = tm.hf_tensors()
    assert list(back) == list(hf)
    for k in hf:
        np.testing.assert_array_equal(back[k], hf[k])
    with pytest.raises(KeyError):
        TR.TorchGPT2(cfg).load_hf({k: a for k, a in hf.items() if k != "wpe.weight"})


def test_nanogpt_init_and_param_groups():
    """nanoGPT's initialisation statistics, the tied head, and AdamW's two groups."""
    cfg = GPT2Config(vocab_size=65, n_embd=64, n_head=4, n_layer=2, block_size=32, bias=True)
    tm = TR.TorchGPT2(cfg, seed=1)
    assert tm.lm_head.weight is tm.transformer.wte.weight
    hf = tm.hf_tensors()
    import fnmatch
    for pattern, (mean, std) in R.init_stats_expected(cfg.n_layer).items():
        for name in (n for n in hf if fnmatch.fnmatch(n, pattern)):
            assert abs(hf[name].mean() - mean) < 0.01 + 3 * std / math.sqrt(hf[name].size)
            assert abs(hf[name].std() - std) <= 0.15 * std + 1e-7, name
    groups = TR.RecipeTrainer(tm, Recipe()).opt.param_groups
    assert [g["weight_decay"] for g in groups] == [0.1, 0.0]
    assert all(p.dim() >= 2 for p in groups[0]["params"])
    assert all(p.dim() < 2 for p in groups[1]["params"])
    assert sum(p.numel() for g in groups for p in g["params"]) == cfg.num_params()


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("clip", [0.5, 0.0], ids=["clipped", "no_clip"])
def test_recipe_steps_match_ours(bias, clip):
    """Three steps (2 micro-batches each) from the same weights: the same losses and
    gradient norms, and the same weights after them (1e-5), as GPT2Model.train.

    The lr goes through warm-up and cosine decay (warmup 1, decay over 4 steps), and
    clipping at 0.5 is active (the norms are above it). Exception: the key bias (the
    middle third of c_attn.bias) has a gradient of exactly zero in exact arithmetic
    (it adds the same q.b to every logit of a softmax row), so AdamW divides rounding
    noise by its square root and both sides move it by up to lr per step in whatever
    direction their noise has: it is only bounded.
    """
    cfg, hf, rng = tiny(bias, seed=2)
    K, A, B = 3, 2, 3
    w = rng.integers(0, V, size=(K, A, B, T + 1))
    recipe = Recipe(lr=1e-2, min_lr=1e-3, warmup_steps=1, lr_decay_steps=4, beta1=0.9,
                    beta2=0.99, weight_decay=0.1, grad_clip=clip)
    model = GPT2Model.from_arrays(get_runtime("c", "gpt2"), cfg, cfg.from_file(hf))
    losses, norms = model.train(w, None, recipe)
    after = cfg.to_file(model.params())
    tm = TR.TorchGPT2(cfg).load_hf(hf)
    trainer = TR.RecipeTrainer(tm, recipe)
    got = [trainer.step(w[k]) for k in range(K)]
    np.testing.assert_allclose([float(x) for x, _ in got], losses, atol=1e-5)
    np.testing.assert_allclose([float(n) for _, n in got], norms, rtol=1e-4)
    if clip:
        assert (norms > clip).all()
    theirs = tm.hf_tensors()
    moved = 0.0
    for name, ours in after.items():
        t = theirs[name]
        if name.endswith("attn.c_attn.bias"):
            k_ours, k_theirs = ours[C:2 * C].copy(), t[C:2 * C].copy()
            assert np.abs(k_theirs - k_ours).max() <= 2 * K * recipe.lr
            ours, t = np.delete(ours, np.s_[C:2 * C]), np.delete(t, np.s_[C:2 * C])
        np.testing.assert_allclose(t, ours, atol=1e-5, err_msg=name)
        moved = max(moved, float(np.abs(after[name] - hf[name]).max()))
    assert moved > 1e-3  # the steps did move the weights


def test_short_run_matches_text_training(tmp_path):
    """bench.recipe's two run functions on a tiny model and text: the same step-0
    evaluation (same initial weights, same batches), then the same per-step losses and
    evaluations (1e-4) over 6 steps with evaluations at 0, 4 and 6; and the files,
    plot and table the benchmark writes from them."""
    rng = np.random.default_rng(0)
    words = ["the ", "king ", "and ", "queen ", "of ", "rome\n", "speak ", "thou "]
    text = "".join(rng.choice(words, size=3000))
    path = tmp_path / "text.txt"
    path.write_text(text)
    spec = BR.RecipeSpec(steps=6, n_layer=2, n_head=2, n_embd=16, block_size=8, batch_size=4,
                         grad_accum=2, warmup_steps=2, eval_every=4, eval_iters=3,
                         steps_per_call=3, data=str(path))
    ours = BR.run_ours("c", spec, quiet=True)
    theirs = BR.run_torch(spec, quiet=True)
    assert [e[0] for e in ours["evals"]] == [e[0] for e in theirs["evals"]] == [0, 4, 6]
    np.testing.assert_allclose(theirs["evals"][0], ours["evals"][0], atol=1e-6)
    np.testing.assert_allclose(theirs["evals"], ours["evals"], atol=1e-4)
    np.testing.assert_allclose(theirs["losses"], ours["losses"], atol=1e-4)
    np.testing.assert_allclose(theirs["norms"], ours["norms"], rtol=1e-3)
    tokens = 6 * 2 * 4 * 8
    for r in (ours, theirs):
        assert r["positions"] == tokens and r["steps"] == 6
        assert 0 < r["train_s"] <= r["wall_s"] and r["train_tok_s"] > 0

    # c-threads: the same run with each step's windows split over two c contexts
    split = BR.run_ours(BR.THREADED, replace(spec, threads=2), quiet=True)
    assert (split["backend"], split["threads"]) == (BR.THREADED, 2)
    np.testing.assert_allclose(split["losses"], ours["losses"], atol=1e-5)
    np.testing.assert_allclose(split["evals"], ours["evals"], atol=1e-5)

    rows = BR.write_results([ours, theirs], tmp_path)
    assert [r["backend"] for r in rows["summary"]] == ["c", "torch"]
    assert len(rows["evals"]) == 6 and len(rows["losses"]) == 12
    again = BR.write_results([theirs], tmp_path)  # torch's rows replaced, c's kept
    assert [r["backend"] for r in again["summary"]] == ["c", "torch"]
    names = BR.files("shakespeare")
    assert [r["backend"] for r in BR.read_csv(tmp_path / names["evals"])].count("c") == 3
    BR.plot(again["evals"], again["losses"], tmp_path / names["plot"])
    assert (tmp_path / names["plot"]).stat().st_size > 1000
    md = BR.table(again["summary"]).splitlines()
    assert md[0].startswith("| backend | steps | wall s") and len(md) == 4
    assert md[2].startswith("| c | 6 |") and md[2].split(" | ")[3].endswith("x")


def test_spec_matches_the_issue_command():
    """The default spec is the issue's command's settings (warm-up 100 at 2000 steps)."""
    s = BR.RecipeSpec().settings()
    r = s.optimizer
    assert (s.num_steps, s.batch_size, s.grad_accum, s.eval_every, s.eval_iters, s.seed) == \
        (2000, 12, 1, 250, 20, 1337)
    assert (r.lr, r.min_lr, r.warmup_steps, r.lr_decay_steps, r.beta1, r.beta2, r.eps,
            r.weight_decay, r.grad_clip) == (1e-3, 1e-4, 100, 2000, 0.9, 0.99, 1e-8, 0.1, 1.0)
    cfg = BR.RecipeSpec().config(65)
    assert (cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.block_size, cfg.mlp_width, cfg.bias) == \
        (4, 4, 128, 64, 512, False)
    short = BR.RecipeSpec(steps=20).recipe()
    assert (short.warmup_steps, short.lr_decay_steps) == (2, 20)


def test_fine_tuning_a_hugging_face_folder_on_shards(tmp_path):
    """bench.recipe --model gpt2-124m's pieces on a small folder: transformers'
    GPT2LMHeadModel saved with its own initialisation and random token shards
    (make_finetune_data). Ours starts from the folder's weights, as transformers
    computes them (its loss on a shard window), and trains as torch does from the same
    folder on the same batches; compare_losses reports the largest difference."""
    import transformers

    from microgpt_fut.data.shards import load_tokens

    sizes = dict(vocab_size=37, n_positions=16, n_embd=16, n_layer=2, n_head=2,
                 bos_token_id=36, eos_token_id=36)
    folder, shards = BR.make_finetune_data(tmp_path, 2000, 3, **sizes)
    spec = BR.RecipeSpec(steps=4, block_size=8, batch_size=2, lr=3e-4, min_lr=3e-4,
                         warmup_steps=0, eval_every=4, eval_iters=2, steps_per_call=2,
                         init_from=str(folder), data=str(shards), data_format="tokens")
    data = load_tokens(shards, 8)
    assert data.vocab.size == 37 and len(data.train) == len(data.val) == 2000
    window = np.asarray(data.train[np.arange(9)], dtype=np.int64)[None]
    hf = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
    with torch.no_grad():
        want = float(hf(torch.from_numpy(window), labels=torch.from_numpy(window)).loss)
    model = GPT2Model.from_arrays(get_runtime("c", "gpt2"), spec.config(37),
                                  spec.config(37).from_file(spec.weights()))
    logits = model.logits_seq(window[:, :8]).astype(np.float64)[0]
    logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1,
                           keepdims=True)) - logits.max(-1, keepdims=True)
    assert -logp[np.arange(8), window[0, 1:]].mean() == pytest.approx(want, abs=1e-5)

    ours = BR.run_ours("c", spec, quiet=True)
    theirs = BR.run_torch(spec, quiet=True)
    np.testing.assert_allclose(theirs["losses"], ours["losses"], atol=1e-4)
    np.testing.assert_allclose(theirs["evals"], ours["evals"], atol=1e-4)
    BR.compare_losses([ours, theirs])
    assert 0 <= ours["max_loss_diff"] < 1e-4 and "max_loss_diff" not in theirs
    assert ours["peak_rss_mb"] > 0
