"""The benchmark's PyTorch baseline (bench/torch_ref.py) computes what our kernels compute.

Same weights in both, then: the loss (to 1e-4), its gradient, a few Adam steps
with the learning-rate decay, the KV-cache logits and greedy sampling. Skipped
when torch is not installed (it is the ``bench`` extra, not a test dependency).
"""
from __future__ import annotations


import numpy as np
import pytest
import torch

from bench import torch_ref as TR
from conftest import DATA_DIR, get_runtime, make_tiny_case
from microgpt_fut.training.family import FAMILIES
from microgpt_fut.training.optimizer import Adam
from microgpt_fut.models.microgpt import PARAM_NAMES, MicrogptConfig, MicrogptModel


def names_case(batch: int = 8, seed: int = 3):
    """microgpt's sizes, N(0, 0.08) weights, a batch of real names (padded rows)."""
    from microgpt_fut.data.lines import Vocab, read_docs

    path = DATA_DIR / "names.txt"
    docs = read_docs(path)[:batch]
    vocab = Vocab.from_docs(read_docs(path))
    tokens, n_pos, _ = vocab.encode(docs, 16)
    cfg = MicrogptConfig(vocab.size, 16, 4, 1, 16)
    return cfg, TR.init_params(cfg, seed), tokens, n_pos


def test_loss_matches_futhark(rt):
    """Loss on given weights: real names (config A) and the tiny random case, to 1e-4."""
    cfg, params, tokens, n_pos = names_case()
    tiny = make_tiny_case(0)
    for cfg, params, tokens, n_pos in ((cfg, params, tokens, n_pos),
                                       (tiny.config, tiny.params, tiny.tokens, tiny.n_pos)):
        ours = MicrogptModel.from_arrays(rt, cfg, params).loss(tokens, n_pos)
        with torch.no_grad():
            theirs = float(TR.TorchGPT(cfg, params).loss(tokens, n_pos))
        assert abs(ours - theirs) <= 1e-4, (ours, theirs)


def test_gradient_matches_futhark():
    """Autograd's gradient equals our training kernel's (relative error 1e-4 per tensor)."""
    tiny = make_tiny_case(1)
    model = MicrogptModel.from_arrays(get_runtime("c"), tiny.config, tiny.params)
    _, grads = model.loss_grad(tiny.tokens, tiny.n_pos)
    tm = TR.TorchGPT(tiny.config, tiny.params)
    tm.loss(tiny.tokens, tiny.n_pos).backward()
    for name in PARAM_NAMES:
        g = getattr(tm, name).grad.numpy()
        err = np.linalg.norm(g - grads[name]) / max(np.linalg.norm(grads[name]), 1e-12)
        assert err <= 1e-4, (name, err)


def test_gradient_at_a_larger_shape_matches_float64_autograd(rt):
    """The training kernel's gradient (microgpt's backward written by hand,
    futhark/model_grad.fut) against float64 autograd on the same weights, at a shape
    where the kernels' vectorised loops and four-row products run: n_embd 64, 4 heads of
    16, 2 layers, block 32, 5 rows of 32, 17, 5, 30 and 1 valid positions (padding
    after them; 4-row blocks with padding rows). Relative error 1e-4 per tensor."""
    cfg = MicrogptConfig(vocab_size=23, n_embd=64, n_head=4, n_layer=2, block_size=32)
    params = TR.init_params(cfg, 7)
    rng = np.random.default_rng(5)
    tokens = rng.integers(0, cfg.vocab_size, (5, cfg.block_size + 1)).astype(np.int64)
    n_pos = np.array([32, 17, 5, 30, 1], np.int64)
    loss, grads = MicrogptModel.from_arrays(rt, cfg, params).loss_grad(tokens, n_pos)
    tm = TR.TorchGPT(cfg, params).double()
    ref = tm.loss(tokens, n_pos)
    ref.backward()
    assert loss == pytest.approx(ref.item(), rel=1e-5)
    for name in PARAM_NAMES:
        g = getattr(tm, name).grad.numpy()
        assert np.linalg.norm(g) > 0, name
        err = np.linalg.norm(g - grads[name]) / np.linalg.norm(g)
        assert err <= 1e-4, (name, err)


def test_adam_steps_match_futhark():
    """Five Adam steps (lr decaying to 0 at step 5): same losses and weights to 1e-4."""
    cfg, params, tokens, n_pos = names_case(batch=20)
    tokens, n_pos = tokens.reshape(5, 4, -1), n_pos.reshape(5, 4)
    model = MicrogptModel.from_arrays(get_runtime("c"), cfg, params)
    ours = model.train(tokens, n_pos, Adam(), 5)[0]
    tm = TR.TorchGPT(cfg, params)
    theirs = TR.TorchTrainer(tm, 5).train(tokens, n_pos)
    np.testing.assert_allclose(theirs, ours, atol=1e-4)
    after = model.params()
    for name, arr in tm.params_numpy().items():
        np.testing.assert_allclose(arr, after[name], atol=1e-4, err_msg=name)


def test_kv_cache_and_greedy_sampling_match():
    """The sampler's KV-cache logits equal the training forward's and ours; greedy
    samples (temperature 0) equal ours token for token."""
    cfg = MicrogptConfig(vocab_size=9, n_embd=16, n_head=4, n_layer=2, block_size=8)
    params = TR.init_params(cfg, 5, std=0.3)
    model = MicrogptModel.from_arrays(get_runtime("c"), cfg, params)
    tm = TR.TorchGPT(cfg, params)
    seq = np.array([8, 1, 2, 3, 4, 5, 6, 7], np.int64)
    cached = TR.logits_cached(tm, seq)
    with torch.no_grad():
        full = tm(torch.from_numpy(seq)[None])[0].numpy()
    np.testing.assert_allclose(cached, full, atol=1e-5)
    np.testing.assert_allclose(cached, model.logits_cached(seq), atol=1e-4)
    greedy = TR.generate(tm, 3, 0.0, seed=0)
    assert greedy.shape == (3, cfg.block_size)
    np.testing.assert_array_equal(greedy, FAMILIES["microgpt"].names(model, 0, 3, 0.0, 0))


def test_sampling_rows_end_with_bos():
    """Temperature sampling: rows of vocabulary tokens, BOS from a sample's end on."""
    cfg = MicrogptConfig(vocab_size=6, n_embd=8, n_head=2, n_layer=1, block_size=10)
    out = TR.generate(TR.TorchGPT(cfg, TR.init_params(cfg, 0, std=0.5)), 50, 0.5, seed=1)
    assert out.shape == (50, 10) and out.min() >= 0 and out.max() <= 5
    for row in out:
        ends = np.flatnonzero(row == 5)
        if len(ends):
            assert (row[ends[0]:] == 5).all()


def test_torch_device_option():
    """--torch-device: only cpu/cuda are accepted; cuda without a CUDA device stops the
    bench with one line; rows measured off the CPU say where."""
    from bench import sweep
    from bench.__main__ import check_torch_device, parse_args

    with pytest.raises(SystemExit):
        parse_args(["--torch-device", "tpu"])
    assert parse_args(["--torch-device", "cuda"]).torch_device == "cuda"
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="--torch-device cuda: PyTorch .* sees no CUDA"):
            check_torch_device("cuda")
    cuda = sweep.Settings(torch_device="cuda")
    assert sweep._device_note("torch", cuda) == "PyTorch on cuda"
    assert sweep._device_note("c", cuda) == sweep._device_note("torch", sweep.Settings()) == ""
