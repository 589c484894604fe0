"""GPT-2's kernels (futhark/gpt2.fut) against the float64 reference (tests/reference_gpt2.py).

Every test that takes ``gpt2_rt`` runs on each backend with GPT-2's library
(conftest.py). Expected values come from the reference: its forward pass, central
finite differences of its loss, nanoGPT's get_lr, torch's clip_grad_norm_ and AdamW.
"""
from __future__ import annotations

import fnmatch

import numpy as np
import pytest

import reference_gpt2 as R
from conftest import ONLY, REQUIRED_BACKENDS
from microgpt_fut.models.gpt2 import GPT2Config, GPT2Model
from microgpt_fut.training.optimizer import Recipe
from microgpt_fut.backend.runtime import built_backends

V, C, NH, L, T = 11, 8, 2, 2, 6


def generate(model, seed, n, temperature, top_k, prompt, max_new, first=0):
    """n continuations first..first+n-1 of one prompt (generate_prompts of n copies)."""
    return model.generate_prompts(seed, temperature, top_k, [prompt] * n, max_new, first)


def tiny(bias: bool, seed: int = 0):
    """A tiny GPT-2 (random float32 weights, HF names) and 3 random windows [3][T+1]."""
    cfg = GPT2Config(vocab_size=V, n_embd=C, n_head=NH, n_layer=L, block_size=T, bias=bias)
    rng = np.random.default_rng(seed)
    hf = {k: a.astype(np.float32).astype(np.float64)
          for k, a in R.random_params(R.hf_shapes(V, C, L, T, bias), rng, 0.3).items()}
    windows = rng.integers(0, V, size=(3, T + 1))
    return cfg, hf, windows


def model_of(rt, cfg, hf) -> GPT2Model:
    return GPT2Model.from_arrays(rt, cfg, cfg.from_file(hf))


def test_ci_has_gpt2_on_cpu_backends():
    """README's test command runs `./build.sh all` first: GPT-2's c, multicore and opencl
    libraries exist."""
    missing = [b for b in REQUIRED_BACKENDS if b not in built_backends("gpt2")]
    assert not missing


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_hf_layout_round_trip(bias):
    """Device arrays <-> Hugging Face tensors: the names and shapes of hf_shapes, and
    back to the same values (no bias tensor at all without bias)."""
    cfg, hf, _ = tiny(bias)
    assert cfg.file_shapes() == R.hf_shapes(V, C, L, T, bias)
    back = cfg.to_file(cfg.from_file(hf))
    assert list(back) == list(hf)
    for k in hf:
        np.testing.assert_array_equal(back[k], hf[k].astype(np.float32))


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_forward_matches_reference(gpt2_rt, bias):
    """Whole-sequence logits (full and shorter sequences) within 1e-4 of the float64 forward."""
    cfg, hf, w = tiny(bias)
    model = model_of(gpt2_rt, cfg, hf)
    for n in (T, 3):
        got = model.logits_seq(w[:, :n])
        np.testing.assert_allclose(got, R.forward(hf, w[:, :n], NH), atol=1e-4, rtol=0)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_kv_cache_matches_whole_sequence(gpt2_rt, bias):
    """The sampling path (one token at a time through the KV cache) gives the training
    path's logits at every position."""
    cfg, hf, w = tiny(bias)
    model = model_of(gpt2_rt, cfg, hf)
    np.testing.assert_allclose(model.logits_cached(w[0, :T]), model.logits_seq(w[:1, :T])[0],
                               atol=1e-5, rtol=0)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_gradients_match_finite_differences(gpt2_rt, bias):
    """vjp2's gradient of the mean loss, every tensor, against central differences of
    the float64 reference loss (relative to the tensor's largest gradient)."""
    cfg, hf, w = tiny(bias)
    model = model_of(gpt2_rt, cfg, hf)
    loss, grad = model.loss_grad(w)
    assert loss == pytest.approx(R.loss(hf, w, NH), rel=1e-5)
    got = cfg.to_file(grad)
    assert list(got) == list(hf)
    for name in hf:
        expected = R.numeric_grad(hf, name, w, NH)
        scale = np.abs(expected).max()
        assert scale > 0, name
        assert np.abs(got[name] - expected).max() <= 1e-4 * scale + 1e-7, name
    if not bias:  # the unused bias arrays on the device get no gradient
        assert all(not grad[n].any() for n in grad if n.endswith("_b"))


def test_head_dx_in_chunks_matches_finite_differences(gpt2_rt):
    """A vocabulary of 4,200 (over 2 x 2,048: gemm.fut's `matmul_nn` sums the head's dx
    in three chunks, the last of 104 tokens): the gradients of the tensors that the
    head's dx reaches first (ln_f's, the last block's MLP projection and its LayerNorm)
    against central differences of the float64 reference loss, and the loss."""
    vocab = 4200
    cfg = GPT2Config(vocab_size=vocab, n_embd=C, n_head=NH, n_layer=1, block_size=T, bias=True)
    rng = np.random.default_rng(5)
    hf = {k: a.astype(np.float32).astype(np.float64)
          for k, a in R.random_params(R.hf_shapes(vocab, C, 1, T, True), rng, 0.3).items()}
    w = rng.integers(0, vocab, size=(3, T + 1))
    loss, grad = model_of(gpt2_rt, cfg, hf).loss_grad(w)
    assert loss == pytest.approx(R.loss(hf, w, NH), rel=1e-5)
    got = cfg.to_file(grad)
    for name in ("ln_f.weight", "ln_f.bias", "h.0.mlp.c_proj.bias", "h.0.ln_2.weight"):
        expected = R.numeric_grad(hf, name, w, NH)
        scale = np.abs(expected).max()
        assert scale > 0, name
        assert np.abs(got[name] - expected).max() <= 1e-4 * scale + 1e-7, name


def test_gradient_by_hand_equals_vjp2s(runtime_cache):
    """c and multicore compute the gradient by the backward written by hand
    (futhark/gpt2_grad.fut), opencl and cuda by vjp2 of the forward (`grad_by_hand`
    in futhark/layout_cpu.fut and layout_gpu.fut): the same gradient, every tensor, on
    one batch with padded rows."""
    if ONLY:
        pytest.skip(f"compares two backends; MICROGPT_FUT_TEST_BACKENDS runs {', '.join(ONLY)}")
    built = built_backends("gpt2")
    by_hand = [b for b in ("c", "multicore") if b in built]
    by_vjp2 = [b for b in ("opencl", "cuda") if b in built]
    assert by_hand and by_vjp2, f"`./build.sh all` builds both forms; GPT-2 libraries: {built}"
    cfg, hf, w = tiny(True)
    n_pos = np.array([T, 2, 4])
    ref_loss, ref = model_of(runtime_cache(by_vjp2[0], "gpt2"), cfg, hf).loss_grad(w, n_pos)
    for b in by_hand:
        loss, grad = model_of(runtime_cache(b, "gpt2"), cfg, hf).loss_grad(w, n_pos)
        assert loss == pytest.approx(ref_loss, rel=1e-6), b
        for name in ref:
            scale = np.abs(ref[name]).max()
            assert np.abs(grad[name] - ref[name]).max() <= 1e-5 * scale + 1e-8, (b, name)


def test_learning_rate_schedule():
    """Recipe.lr_at (the host's schedule, which gives the kernels each step's learning
    rate) equals nanoGPT's get_lr at every step of a run and past its end."""
    its = np.arange(0, 2101, dtype=np.int64)
    expected = [R.get_lr(int(i), 1e-3, 1e-4, 100, 2000) for i in its]
    rec = Recipe(lr=1e-3, min_lr=1e-4, warmup_steps=100, lr_decay_steps=2000)
    np.testing.assert_allclose([rec.lr_at(int(i)) for i in its], expected, rtol=1e-12, atol=0)
    np.testing.assert_array_equal(rec.lrs(5, 3), np.float32(expected[5:8]))


@pytest.mark.parametrize("clip", [0.0, 0.3, 1e3], ids=["no_clip", "clip", "clip_unused"])
def test_adamw_steps_match_reference(gpt2_rt, clip):
    """Three recipe steps (warm-up lr, AdamW with decay on >= 2-D tensors only, clipping
    at the global norm) against the reference's clip_grad_norm and adamw_step fed with
    the kernels' own gradients at each step."""
    cfg, hf, w = tiny(True, seed=1)
    rec = Recipe(lr=3e-2, min_lr=3e-3, warmup_steps=2, lr_decay_steps=5, beta1=0.9,
                 beta2=0.95, eps=1e-8, weight_decay=0.1, grad_clip=clip)
    model = model_of(gpt2_rt, cfg, hf)
    params = dict(hf)
    m = {k: np.zeros_like(a) for k, a in hf.items()}
    v = {k: np.zeros_like(a) for k, a in hf.items()}
    for step in range(3):
        batch = np.roll(w, step, axis=0)
        loss_ref, grad = model.loss_grad(batch)
        g = {k: a.astype(np.float64) for k, a in cfg.to_file(grad).items()}
        g, norm = R.clip_grad_norm(g, clip)
        lr = R.get_lr(step, rec.lr, rec.min_lr, rec.warmup_steps, rec.lr_decay_steps)
        params, m, v = R.adamw_step(params, g, m, v, step, lr, rec.beta1, rec.beta2, rec.eps,
                                    rec.weight_decay)
        (loss,), (got_norm,) = model.train(batch[None, None], None, rec)
        assert loss == pytest.approx(loss_ref, rel=1e-6)
        assert got_norm == pytest.approx(norm, rel=1e-5)
        if clip == 0.3:
            assert norm > clip  # the clip is exercised
    got = cfg.to_file(model.params())
    for k in hf:
        np.testing.assert_allclose(got[k], params[k], rtol=0, atol=2e-5, err_msg=k)
    assert model.step() == 3


def test_gradient_accumulation_equals_one_large_batch(gpt2_rt):
    """A step over 3 micro-batches of 2 windows gives the loss, norm and gradient of one
    step over the 6 windows together (float rounding apart)."""
    cfg, hf, _ = tiny(True, seed=2)
    w = np.random.default_rng(5).integers(0, V, size=(6, T + 1))
    rec = Recipe(lr=1e-2, min_lr=1e-3, warmup_steps=0, lr_decay_steps=10, grad_clip=1.0)
    one = model_of(gpt2_rt, cfg, hf)
    acc = model_of(gpt2_rt, cfg, hf)
    l1, n1 = one.train(w[None, None], None, rec)
    l3, n3 = acc.train(w.reshape(1, 3, 2, T + 1), None, rec)
    assert l3[0] == pytest.approx(l1[0], rel=1e-6)
    assert n3[0] == pytest.approx(n1[0], rel=1e-5)
    # AdamW's first moment holds (1 - beta1) x the clipped gradient. (Not the weights:
    # the keys' bias has a zero gradient in exact arithmetic, softmax being
    # shift-invariant, and Adam turns its rounding noise into lr-sized steps.)
    a, b = one.adam()[0], acc.adam()[0]
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=0, atol=1e-7 + 1e-5 * np.abs(a[k]).max(),
                                   err_msg=k)


def test_init_statistics(gpt2_rt):
    """GPT-2's initialisation: each tensor's mean and std as nanoGPT's _init_weights says."""
    cfg = GPT2Config(vocab_size=65, n_embd=64, n_head=4, n_layer=3, block_size=64, bias=True)
    p = cfg.to_file(GPT2Model.init(gpt2_rt, cfg, seed=7).params())
    expected = R.init_stats_expected(cfg.n_layer)
    for name, a in p.items():
        (mean, std), = [e for pat, e in expected.items() if fnmatch.fnmatchcase(name, pat)]
        assert abs(a.mean() - mean) < 0.15 * max(std, 1e-9) + 1e-12, name
        assert a.std() == pytest.approx(std, rel=0.05, abs=1e-12), name
    other = cfg.to_file(GPT2Model.init(gpt2_rt, cfg, seed=8).params())
    assert not np.array_equal(other["wte.weight"], p["wte.weight"])


def _greedy_reference(hf, prompt, max_new):
    """nanoGPT's generate at temperature -> 0: argmax of the last logits of the last T tokens."""
    seq = list(prompt)
    for _ in range(max_new):
        logits = R.forward(hf, np.array([seq[-T:]]), NH)[0, -1]
        seq.append(int(np.argmax(logits)))
    return seq[len(prompt):]


@pytest.mark.parametrize("prompt_len", [1, 4, 9])
def test_greedy_generation_matches_reference(gpt2_rt, prompt_len):
    """Temperature 0 continues the prompt as the reference's argmax does, also past
    block_size (the window slides) and for a prompt longer than block_size (cropped);
    top_k 1 at temperature 1 is greedy too."""
    cfg, hf, _ = tiny(False, seed=3)
    hf = {k: a * 3 for k, a in hf.items()}  # sharper logits: no near-ties for float32
    model = model_of(gpt2_rt, cfg, hf)
    prompt = np.random.default_rng(prompt_len).integers(0, V, size=prompt_len)
    expected = _greedy_reference(hf, prompt, 12)
    got = generate(model, 1, 2, 0.0, 0, prompt, 12)
    assert got.tolist() == [expected, expected]
    top1 = generate(model, 1, 2, 1.0, 1, prompt, 12)
    assert top1.tolist() == [expected, expected]


def test_greedy_continuations_of_a_batch_match_reference(gpt2_rt):
    """21 prompts of 1-5 tokens in one batch, each continued as the float64
    reference's argmax continues it alone, with no batch and no KV cache: every row
    reads its own cache rows (futhark/attention.fut's `cached_heads`) at its own
    prompt length."""
    cfg, hf, _ = tiny(True, seed=5)
    hf = {k: a * 3 for k, a in hf.items()}  # sharper logits: no near-ties for float32
    model = model_of(gpt2_rt, cfg, hf)
    rng = np.random.default_rng(21)
    prompts = [rng.integers(0, V, size=1 + i % 5) for i in range(21)]
    got = model.generate_prompts(0, 0.0, 0, prompts, 6)
    for i, p in enumerate(prompts):
        assert got[i].tolist() == _greedy_reference(hf, p, 6), f"row {i}"


def test_sampling_streams_and_top_k(gpt2_rt):
    """Sample i depends only on (seed, first + i); top_k 3 draws only the 3 likeliest
    first tokens, and over many samples draws all three."""
    cfg, hf, _ = tiny(True, seed=4)
    model = model_of(gpt2_rt, cfg, hf)
    prompt = np.array([1, 2])
    whole = generate(model, 9, 40, 1.0, 0, prompt, 5)
    part = generate(model, 9, 10, 1.0, 0, prompt, 5, first=30)
    np.testing.assert_array_equal(part, whole[30:])
    assert len({tuple(r) for r in whole.tolist()}) > 1
    first = generate(model, 9, 400, 1.0, 3, prompt, 1)[:, 0]
    logits = R.forward(hf, prompt[None], NH)[0, -1]
    top3 = set(np.argsort(logits)[-3:].tolist())
    assert set(first.tolist()) == top3


def test_uploaded_weights_come_back_unchanged(gpt2_rt):
    """30 models from fresh host arrays (freed right after the call) read back exactly.
    On opencl the upload is asynchronous: before the driver kept the host arrays
    alive until the next sync, 1 to 3 in 40 came back as garbage on pocl."""
    cfg = GPT2Config(vocab_size=V, n_embd=C, n_head=NH, n_layer=L, block_size=T, bias=True)
    rng = np.random.default_rng(11)
    for _ in range(30):
        hf = {k: a.astype(np.float32)
              for k, a in R.random_params(R.hf_shapes(V, C, L, T, True), rng, 0.3).items()}
        expected = cfg.from_file(hf)
        model = GPT2Model.from_arrays(gpt2_rt, cfg, {k: a.copy() for k, a in expected.items()})
        got = model.params()
        for k in expected:
            np.testing.assert_array_equal(got[k], expected[k], err_msg=k)


def test_paced_continuation_equals_one_call(gpt2_rt):
    """Issue 41: GPT-2's continuation advanced in calls of a few steps makes the tokens
    of one call (``generate``), past the context too (block_size T: 4 + 9 steps)."""
    cfg, hf, _ = tiny(True, seed=4)
    model = model_of(gpt2_rt, cfg, hf)
    prompt = np.array([1, 2, 3, 1])
    max_new = 2 * T + 3
    whole = generate(model, 9, 3, 1.0, 0, prompt, max_new, first=5)
    cont = model.start_prompts(9, 1.0, 0, [prompt] * 3, first=5)
    steps = len(prompt) + max_new - 1
    out = np.concatenate([cont.advance(k) for k in (3, 1, 7, steps - 11)], axis=1)
    np.testing.assert_array_equal(out[:, len(prompt) - 1:], whole)
