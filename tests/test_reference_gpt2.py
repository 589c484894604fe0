"""Checks of the float64 GPT-2 / nanoGPT reference (tests/reference_gpt2.py) itself.

Each formula is compared with an independent computation: explicit loops, values
worked out by hand with ``math``, and, where torch is importable, torch's own
modules (torch.optim.AdamW, clip_grad_norm_, F.layer_norm, F.gelu, SDPA, autograd).
The torch tests skip when torch is missing, except in CI (CI=true), where they fail.
"""
from __future__ import annotations

import fnmatch
import math

import numpy as np
import pytest

import reference_gpt2 as R
from conftest import in_ci

V, C, T, NH = 11, 8, 6, 2


def _torch():
    """torch, or a skip when it is missing outside CI (in CI a missing torch fails)."""
    if in_ci():
        import torch
        return torch
    return pytest.importorskip("torch")


def _model(n_layer: int, bias: bool = True, seed: int = 0, T_: int = T):
    rng = np.random.default_rng(seed)
    return R.random_params(R.hf_shapes(V, C, n_layer, T_, bias), rng)


def _windows(B: int, seed: int = 1, T_: int = T) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, V, size=(B, T_ + 1))


# --------------------------------------------------------------------------- shapes, init
def test_hf_shapes_names_order_and_layout():
    s = R.hf_shapes(50257, 768, 12, 1024, bias=True)
    names = list(s)
    assert names[:2] == ["wte.weight", "wpe.weight"] and names[-2:] == ["ln_f.weight", "ln_f.bias"]
    assert names[2:14] == [f"h.0.{n}" for n in (
        "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
        "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
        "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias")]
    assert len(s) == 2 + 12 * 12 + 2
    assert s["wte.weight"] == (50257, 768) and s["wpe.weight"] == (1024, 768)
    assert s["h.11.attn.c_attn.weight"] == (768, 2304) and s["h.11.mlp.c_proj.weight"] == (3072, 768)
    # GPT-2 small has 124,439,808 parameters (wte counted once: the head is tied).
    assert sum(math.prod(x) for x in s.values()) == 124_439_808
    nb = R.hf_shapes(V, C, 2, T, bias=False)
    assert list(nb) == [n for n in R.hf_shapes(V, C, 2, T, bias=True) if not n.endswith(".bias")]


def test_random_params_dtype_and_layernorm_around_one():
    p = R.random_params(R.hf_shapes(V, 64, 2, T, True), np.random.default_rng(0), std=0.1)
    assert all(a.dtype == np.float64 for a in p.values())
    assert abs(p["ln_f.weight"].mean() - 1.0) < 0.1 and abs(p["h.1.ln_2.bias"].mean()) < 0.1
    assert abs(p["h.0.attn.c_attn.weight"].std() - 0.1) < 0.01


def test_init_stats_expected_covers_every_name_once():
    L = 3
    exp = R.init_stats_expected(L)
    for name in R.hf_shapes(V, C, L, T, bias=True):
        hits = [pat for pat in exp if fnmatch.fnmatchcase(name, pat)]
        assert len(hits) == 1, (name, hits)
    assert exp["h.*.mlp.c_proj.weight"] == (0.0, 0.02 / math.sqrt(6))
    assert exp["wte.weight"] == (0.0, 0.02) and exp["*ln_?.weight"] == (1.0, 0.0)


# --------------------------------------------------------------------------- layer_norm, gelu
def test_layer_norm_against_loop():
    rng = np.random.default_rng(3)
    x, w, b = rng.standard_normal((4, 7)) * 3 + 1, rng.standard_normal(7), rng.standard_normal(7)
    for bias in (b, None):
        got = R.layer_norm(x, w, bias)
        for r in range(4):
            n = len(x[r])
            mean = sum(x[r]) / n
            var = sum((xi - mean) ** 2 for xi in x[r]) / n
            for j in range(n):
                want = (x[r, j] - mean) / math.sqrt(var + 1e-5) * w[j] + (0 if bias is None else b[j])
                assert got[r, j] == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_gelu_tanh_close_to_erf_gelu_and_exact_formula():
    xs = np.linspace(-5, 5, 2001)
    erf_gelu = np.array([0.5 * x * (1 + math.erf(x / math.sqrt(2))) for x in xs])
    assert np.max(np.abs(R.gelu_tanh(xs) - erf_gelu)) < 1e-3
    for x in (-3.0, -1.0, -0.5, 0.0, 0.7, 1.0, 2.5):
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
        assert R.gelu_tanh(np.array(x)) == pytest.approx(0.5 * x * (1 + math.tanh(inner)), rel=1e-14, abs=0)
    # GPT-2 tanh GELU at 1: 0.5 * (1 + tanh(0.7978845608 * 1.044715)) = 0.8411919906...
    assert R.gelu_tanh(np.array(1.0)) == pytest.approx(0.8411919906, abs=1e-9)


# --------------------------------------------------------------------------- forward
@pytest.mark.parametrize("bias", [True, False])
def test_forward_is_causal(bias):
    p = _model(2, bias)
    tok = _windows(2)[:, :T]
    base = R.forward(p, tok, NH)
    assert base.shape == (2, T, V)
    for t in range(T):
        changed = tok.copy()
        changed[:, t] = (changed[:, t] + 1) % V
        out = R.forward(p, changed, NH)
        np.testing.assert_array_equal(out[:, :t], base[:, :t])
        assert not np.allclose(out[:, t], base[:, t])


def _embedding_only_by_hand(p, tok):
    """logits[b,t,v] = ln_f(wte[tok] + wpe[t]) . wte[v], with loops."""
    B, Tn = tok.shape
    out = np.empty((B, Tn, V))
    for b in range(B):
        for t in range(Tn):
            x = [p["wte.weight"][tok[b, t], j] + p["wpe.weight"][t, j] for j in range(C)]
            mean = sum(x) / C
            var = sum((xi - mean) ** 2 for xi in x) / C
            y = [(x[j] - mean) / math.sqrt(var + 1e-5) * p["ln_f.weight"][j]
                 + (p["ln_f.bias"][j] if "ln_f.bias" in p else 0.0) for j in range(C)]
            for v in range(V):
                out[b, t, v] = sum(y[j] * p["wte.weight"][v, j] for j in range(C))
    return out


@pytest.mark.parametrize("bias", [True, False])
def test_forward_zero_residual_projections_is_embedding_only(bias):
    p = _model(1, bias)
    for n in ("h.0.attn.c_proj", "h.0.mlp.c_proj"):
        p[n + ".weight"][:] = 0
        if bias:
            p[n + ".bias"][:] = 0
    tok = _windows(3)[:, :T]
    want = _embedding_only_by_hand(p, tok)
    np.testing.assert_allclose(R.forward(p, tok, NH), want, rtol=1e-12, atol=1e-12)
    p0 = _model(0, bias)
    np.testing.assert_allclose(R.forward(p0, tok, NH), _embedding_only_by_hand(p0, tok),
                               rtol=1e-12, atol=1e-12)


def test_forward_head_is_tied_to_wte():
    """A zeroed row r of wte (token r never input) zeroes logit column r and nothing else."""
    p = _model(1, True)
    r = 4
    tok = _windows(3)[:, :T]
    tok[tok == r] = r + 1
    base = R.forward(p, tok, NH)
    p["wte.weight"][r] = 0
    out = R.forward(p, tok, NH)
    assert np.all(out[..., r] == 0)
    keep = [v for v in range(V) if v != r]
    np.testing.assert_array_equal(out[..., keep], base[..., keep])


def _one_block_by_hand(p, tok, n_head, bias):
    """One GPT-2 block + ln_f + tied head for one sequence, with explicit loops."""
    def ln(x, name):
        mean = sum(x) / len(x)
        var = sum((xi - mean) ** 2 for xi in x) / len(x)
        return [(x[j] - mean) / math.sqrt(var + 1e-5) * p[name + ".weight"][j]
                + (p[name + ".bias"][j] if bias else 0.0) for j in range(len(x))]

    def conv1d(x, name):
        W = p[name + ".weight"]
        return [sum(x[i] * W[i, o] for i in range(len(x))) + (p[name + ".bias"][o] if bias else 0.0)
                for o in range(W.shape[1])]

    n = len(tok)
    hd = C // n_head
    xs = [[p["wte.weight"][tok[t], j] + p["wpe.weight"][t, j] for j in range(C)] for t in range(n)]
    qkv = [conv1d(ln(x, "h.0.ln_1"), "h.0.attn.c_attn") for x in xs]
    out = []
    for t in range(n):
        y = [0.0] * C
        for h in range(n_head):
            cols = range(h * hd, (h + 1) * hd)
            scores = [sum(qkv[t][c] * qkv[s][C + c] for c in cols) / math.sqrt(hd) for s in range(t + 1)]
            mx = max(scores)
            e = [math.exp(a - mx) for a in scores]
            for c in cols:
                y[c] = sum(e[s] / sum(e) * qkv[s][2 * C + c] for s in range(t + 1))
        x = [a + b for a, b in zip(xs[t], conv1d(y, "h.0.attn.c_proj"))]
        hidden = [0.5 * a * (1 + math.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))
                  for a in conv1d(ln(x, "h.0.ln_2"), "h.0.mlp.c_fc")]
        x = [a + b for a, b in zip(x, conv1d(hidden, "h.0.mlp.c_proj"))]
        yf = ln(x, "ln_f")
        out.append([sum(yf[j] * p["wte.weight"][v, j] for j in range(C)) for v in range(V)])
    return np.array(out)


@pytest.mark.parametrize("n_head", [1, 2, 4])
@pytest.mark.parametrize("bias", [True, False])
def test_forward_one_block_against_loops(n_head, bias):
    p = _model(1, bias, seed=5)
    tok = _windows(2, seed=6)[:, :T]
    got = R.forward(p, tok, n_head)
    for b in range(2):
        np.testing.assert_allclose(got[b], _one_block_by_hand(p, tok[b], n_head, bias),
                                   rtol=1e-11, atol=1e-11)


def test_forward_shorter_than_block_size_uses_first_positions():
    p = _model(2, True)
    tok = _windows(2)[:, :T]
    np.testing.assert_allclose(R.forward(p, tok[:, :3], NH), R.forward(p, tok, NH)[:, :3],
                               rtol=1e-13, atol=1e-13)


# --------------------------------------------------------------------------- loss, gradient
def test_loss_uniform_logits_is_log_vocab():
    p = _model(2, True)
    p["wte.weight"][:] = 0  # tied head -> all logits 0
    assert R.loss(p, _windows(3), NH) == pytest.approx(math.log(V), rel=1e-14)


def test_loss_is_mean_cross_entropy_by_hand():
    p = _model(1, False)
    w = _windows(3)
    logits = R.forward(p, w[:, :-1], NH)
    total = 0.0
    for b in range(3):
        for t in range(T):
            z = logits[b, t]
            total += math.log(sum(math.exp(a) for a in z)) - z[w[b, t + 1]]
    assert R.loss(p, w, NH) == pytest.approx(total / (3 * T), rel=1e-12)


@pytest.mark.parametrize("bias", [True, False])
def test_numeric_grad_matches_analytic_ln_f_weight(bias):
    """n_layer = 0: logits = ln_f(x) @ wte.T, so dL/dw = sum_pos ((softmax - onehot) @ wte) * xhat / (B*T)."""
    p = _model(0, bias)
    w = _windows(4)
    B = len(w)
    x = p["wte.weight"][w[:, :-1]] + p["wpe.weight"][:T]
    xhat = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    logits = R.forward(p, w[:, :-1], NH)
    prob = np.exp(logits - logits.max(-1, keepdims=True))
    prob /= prob.sum(-1, keepdims=True)
    dlogits = (prob - np.eye(V)[w[:, 1:]]) / (B * T)
    dy = dlogits @ p["wte.weight"]
    np.testing.assert_allclose(R.numeric_grad(p, "ln_f.weight", w, NH), (dy * xhat).sum((0, 1)),
                               rtol=1e-6, atol=1e-9)
    if bias:
        np.testing.assert_allclose(R.numeric_grad(p, "ln_f.bias", w, NH), dy.sum((0, 1)),
                                   rtol=1e-6, atol=1e-9)


# --------------------------------------------------------------------------- get_lr
def test_get_lr_boundaries_and_table():
    lr, mn, wu, dec = 6e-4, 6e-5, 10, 110
    f = lambda it: R.get_lr(it, lr, mn, wu, dec)  # noqa: E731
    assert f(0) == pytest.approx(lr / 11, rel=1e-15)
    assert f(5) == pytest.approx(lr * 6 / 11, rel=1e-15)
    assert f(9) == pytest.approx(lr * 10 / 11, rel=1e-15)
    assert f(10) == pytest.approx(lr, rel=1e-15)
    assert f(60) == pytest.approx((lr + mn) / 2, rel=1e-14)
    assert f(35) == pytest.approx(mn + 0.5 * (1 + math.sqrt(2) / 2) * (lr - mn), rel=1e-14)
    assert f(85) == pytest.approx(mn + 0.5 * (1 - math.sqrt(2) / 2) * (lr - mn), rel=1e-14)
    assert f(110) == pytest.approx(mn, rel=1e-14)
    assert f(111) == mn and f(10_000) == mn
    assert all(f(i) >= f(i + 1) for i in range(10, 120))


# --------------------------------------------------------------------------- clip_grad_norm
def test_clip_grad_norm():
    g = {"a": np.array([3.0]), "b": np.array([[4.0]])}
    out, norm = R.clip_grad_norm(g, 1.0)
    assert norm == 5.0
    np.testing.assert_allclose(out["a"], [3 / (5 + 1e-6)], rtol=1e-15)
    clipped_norm = math.sqrt(sum(float(np.sum(a * a)) for a in out.values()))
    assert clipped_norm == pytest.approx(1.0, abs=1e-6)
    out, norm = R.clip_grad_norm(g, 10.0)  # under max_norm: untouched
    assert norm == 5.0 and out["a"][0] == 3.0 and out["b"][0, 0] == 4.0
    out, norm = R.clip_grad_norm(g, 0.0)  # 0: no clipping
    assert norm == 5.0 and out["a"][0] == 3.0
    assert g["a"][0] == 3.0  # inputs not modified


# --------------------------------------------------------------------------- adamw_step
def test_adamw_first_step_is_sign_step():
    rng = np.random.default_rng(0)
    p = {"w": rng.standard_normal((3, 4)), "b": rng.standard_normal(4)}
    g = {"w": rng.standard_normal((3, 4)), "b": rng.standard_normal(4)}
    zeros = {n: np.zeros_like(a) for n, a in p.items()}
    lr, wd = 0.01, 0.1
    new, m, v = R.adamw_step(p, g, zeros, zeros, 0, lr, 0.9, 0.95, 1e-8, wd)
    start = {"b": p["b"], "w": p["w"] * (1 - lr * wd)}  # only the 2-D tensor is decayed
    for n in p:
        moved = new[n] - start[n]
        # exactly -lr * g / (|g| + eps): -lr * sign(g) up to lr * eps / |g|
        np.testing.assert_allclose(moved, -lr * g[n] / (np.abs(g[n]) + 1e-8), rtol=1e-12, atol=1e-16)
        assert np.all(np.abs(moved + lr * np.sign(g[n])) <= lr * 1e-8 / np.abs(g[n]) + 1e-15)
    np.testing.assert_allclose(m["w"], 0.1 * g["w"], rtol=1e-15)
    np.testing.assert_allclose(v["w"], 0.05 * g["w"] ** 2, rtol=1e-14)
    assert np.all(zeros["w"] == 0)


def test_adamw_two_steps_by_hand_scalar():
    lr, b1, b2, eps, wd = 0.1, 0.9, 0.999, 1e-8, 0.5
    p = {"s": np.array([1.0]), "M": np.array([[1.0]])}  # "M" (2-D) is decayed, "s" is not
    z = {n: np.zeros_like(a) for n, a in p.items()}
    p1, m1, v1 = R.adamw_step(p, {"s": np.array([0.5]), "M": np.array([[0.5]])}, z, z, 0, lr, b1, b2, eps, wd)
    p2, m2, v2 = R.adamw_step(p1, {"s": np.array([-0.2]), "M": np.array([[-0.2]])}, m1, v1, 1, lr, b1, b2, eps, wd)
    # step 1: m = 0.05, v = 0.00025, bc1 = 0.1, bc2 = 0.001 -> update 0.1 * 0.5 / (0.5 + eps)
    s1 = 1.0 - 0.1 * 0.5 / (0.5 + 1e-8)
    M1 = 1.0 * (1 - 0.05) - 0.1 * 0.5 / (0.5 + 1e-8)
    # step 2: m = 0.045 - 0.02 = 0.025, v = 0.00024975 + 0.00004 = 0.00028975,
    #         bc1 = 1 - 0.81 = 0.19, bc2 = 1 - 0.998001 = 0.001999
    upd = (0.1 / 0.19) * 0.025 / (math.sqrt(0.00028975) / math.sqrt(0.001999) + 1e-8)
    assert p1["s"][0] == pytest.approx(s1, rel=1e-14) and p1["M"][0, 0] == pytest.approx(M1, rel=1e-14)
    assert m2["s"][0] == pytest.approx(0.025, rel=1e-13) and v2["s"][0] == pytest.approx(0.00028975, rel=1e-12)
    assert p2["s"][0] == pytest.approx(s1 - upd, rel=1e-12)
    assert p2["M"][0, 0] == pytest.approx(M1 * 0.95 - upd, rel=1e-12)


# --------------------------------------------------------------------------- against torch
def test_adamw_matches_torch():
    torch = _torch()
    rng = np.random.default_rng(7)
    p = {"w": rng.standard_normal((3, 5)), "b": rng.standard_normal(5)}
    tw = torch.tensor(p["w"], dtype=torch.float64, requires_grad=True)
    tb = torch.tensor(p["b"], dtype=torch.float64, requires_grad=True)
    lr, b1, b2, eps, wd = 3e-2, 0.9, 0.95, 1e-8, 0.1
    opt = torch.optim.AdamW([{"params": [tw], "weight_decay": wd}, {"params": [tb], "weight_decay": 0.0}],
                            lr=lr, betas=(b1, b2), eps=eps, foreach=False, fused=False)
    m = {n: np.zeros_like(a) for n, a in p.items()}
    v = {n: np.zeros_like(a) for n, a in p.items()}
    for step in range(3):
        g = {"w": rng.standard_normal((3, 5)), "b": rng.standard_normal(5)}
        tw.grad, tb.grad = torch.tensor(g["w"]), torch.tensor(g["b"])
        opt.step()
        p, m, v = R.adamw_step(p, g, m, v, step, lr, b1, b2, eps, wd)
        np.testing.assert_allclose(p["w"], tw.detach().numpy(), rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(p["b"], tb.detach().numpy(), rtol=1e-13, atol=1e-15)


def test_clip_grad_norm_matches_torch():
    torch = _torch()
    rng = np.random.default_rng(8)
    g = {"w": rng.standard_normal((3, 5)), "b": rng.standard_normal(5)}
    for max_norm in (0.5, 100.0):
        ts = [torch.zeros(a.shape, dtype=torch.float64, requires_grad=True) for a in g.values()]
        for t, a in zip(ts, g.values()):
            t.grad = torch.tensor(a)
        tnorm = torch.nn.utils.clip_grad_norm_(ts, max_norm)
        out, norm = R.clip_grad_norm(g, max_norm)
        assert norm == pytest.approx(float(tnorm), rel=1e-14)
        for t, a in zip(ts, out.values()):
            np.testing.assert_allclose(a, t.grad.numpy(), rtol=1e-14)


def _torch_gpt2(torch, params: dict, tokens, n_head: int):
    """nanoGPT's forward in torch (HF layout), for the comparison below."""
    F = torch.nn.functional
    p = params
    bias = "ln_f.bias" in p
    tok = torch.as_tensor(tokens)
    B, Tn = tok.shape
    C = p["wte.weight"].shape[1]

    def lin(x, name):
        y = x @ p[name + ".weight"]
        return y + p[name + ".bias"] if bias else y

    def ln(x, name):
        return F.layer_norm(x, (C,), p[name + ".weight"], p.get(name + ".bias"), 1e-5)

    x = p["wte.weight"][tok] + p["wpe.weight"][:Tn]
    for i in range(R.n_layer_of(p)):
        h = f"h.{i}."
        q, k, v = lin(ln(x, h + "ln_1"), h + "attn.c_attn").split(C, dim=2)
        q, k, v = (a.view(B, Tn, n_head, C // n_head).transpose(1, 2) for a in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + lin(y.transpose(1, 2).contiguous().view(B, Tn, C), h + "attn.c_proj")
        x = x + lin(F.gelu(lin(ln(x, h + "ln_2"), h + "mlp.c_fc"), approximate="tanh"), h + "mlp.c_proj")
    return ln(x, "ln_f") @ p["wte.weight"].T


@pytest.mark.parametrize("bias", [True, False])
def test_forward_loss_and_grad_match_torch(bias):
    torch = _torch()
    p = _model(2, bias, seed=11)
    w = _windows(3, seed=12)
    tp = {n: torch.tensor(a, dtype=torch.float64, requires_grad=True) for n, a in p.items()}
    logits = _torch_gpt2(torch, tp, w[:, :-1], NH)
    np.testing.assert_allclose(R.forward(p, w[:, :-1], NH), logits.detach().numpy(), rtol=1e-11, atol=1e-12)
    tloss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), torch.as_tensor(w[:, 1:]).reshape(-1))
    assert R.loss(p, w, NH) == pytest.approx(float(tloss.detach()), rel=1e-12)
    tloss.backward()
    for name in ("h.1.attn.c_attn.weight", "h.0.ln_1.weight", "wpe.weight"):
        np.testing.assert_allclose(R.numeric_grad(p, name, w, NH), tp[name].grad.numpy(), rtol=1e-5, atol=1e-8)
