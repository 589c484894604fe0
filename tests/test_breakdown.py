"""GPT-2's step part by part (``python -m bench.breakdown --gpt2``): each entry point of
bench/breakdown_gpt2.fut, compiled as the benchmark compiles it, computes at tiny shapes
what PyTorch's operation computes on the same inputs (float64 references, to 1e-4 of
the result's scale), and the benchmark runs end to end on them, its PyTorch side in a
process of its own.

Needs the c libraries' compiler record (``./build.sh``), the Futhark compiler and torch.
"""
from __future__ import annotations

import csv
import dataclasses
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bench import breakdown as bd
from conftest import need_library

# awkward sizes: N = 21 positions (not a multiple of gemm's 6 rows), C = 24 and F = 96
# (not multiples of its 16 columns), 4 heads of D = 6, a vocabulary of 37
TINY = bd.GPT2Shape("tiny", vocab_size=37, n_embd=24, n_head=4, n_layer=2, block_size=7,
                    batch=3, bias=True)
B, T, C, H, L, Fw, V, N = (TINY.batch, TINY.block_size, TINY.n_embd, TINY.n_head, TINY.n_layer,
                           TINY.mlp_width, TINY.vocab_size, TINY.N)


@pytest.fixture(scope="module")
def exe(tmp_path_factory):
    """bench/breakdown_gpt2.fut compiled as ``bench.breakdown`` compiles it."""
    need_library("c", "gpt2")
    return bd.compile_parts(tmp_path_factory.mktemp("parts"), bd.GPT2_SOURCE, bd.gpt2_library())


@pytest.fixture
def call(exe, tmp_path):
    """call(entry, *values): the entry point's results as NumPy arrays."""
    return lambda entry, *values: bd.call_entry(exe, entry, list(values), tmp_path)


def rng(seed: int = 0):
    return np.random.default_rng(seed)


def normal(g, *shape, std: float = 1.0) -> np.ndarray:
    return (std * g.standard_normal(shape)).astype(np.float32)


def t64(a) -> torch.Tensor:
    """A float64 (or int64) torch tensor of a NumPy array, gradients recorded for floats."""
    x = torch.from_numpy(np.asarray(a))
    return x.double().requires_grad_() if x.is_floating_point() else x


def close(ours, ref, rtol: float = 1e-4) -> None:
    """ours within rtol of the reference, relative to the reference's largest magnitude."""
    ref = ref.detach().numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref)
    assert ours.shape == ref.shape, (ours.shape, ref.shape)
    np.testing.assert_allclose(ours, ref, rtol=rtol, atol=rtol * max(np.abs(ref).max(), 1e-30))


def test_embedding(call):
    """embedding_fwd: wte[token] + wpe[position] of every input position, the next tokens
    as targets, each valid position weighted 1/total (row 1 has 5 of 7 valid); its
    backward: autograd's gradients of wte (plus the head's) and wpe."""
    g = rng(1)
    tokens = g.integers(0, V, (B, T + 1)).astype(np.int64)
    n_pos = np.array([T, T - 2, T], np.int64)
    wte, wpe = normal(g, V, C), normal(g, T, C)
    x, targets, weights = call("embedding_fwd", tokens, n_pos, wte, wpe)
    ref = F.embedding(t64(tokens[:, :T]), t64(wte)) + F.embedding(torch.arange(T), t64(wpe))
    close(x, ref.reshape(N, C))
    np.testing.assert_array_equal(targets, tokens[:, 1:].reshape(N))
    valid = np.arange(T)[None, :] < n_pos[:, None]
    close(weights, np.where(valid, 1 / n_pos.sum(), 0).reshape(N))

    inputs, positions = tokens[:, :T].reshape(N), np.tile(np.arange(T), B)
    dx, d_head = normal(g, N, C), normal(g, V, C)
    d_wte, d_wpe = call("embedding_bwd", np.int64(T), inputs, positions, dx, d_head)
    w, p = t64(wte), t64(wpe)
    y = F.embedding(t64(inputs), w) + F.embedding(t64(positions), p)
    rw, rp = torch.autograd.grad(y, (w, p), t64(dx))
    close(d_wte, rw + t64(d_head))
    close(d_wpe, rp)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_layer_norm(call, bias):
    """layer_norm_fwd is F.layer_norm (eps 1e-5, the bias only with bias); layer_norm_bwd
    autograd's dx, dw and db (zero without bias)."""
    g = rng(2)
    x, w, b, dy = normal(g, N, C, std=3), 1 + normal(g, C, std=0.3), normal(g, C), normal(g, N, C)
    tx, tw, tb = t64(x), t64(w), t64(b)
    y = F.layer_norm(tx, (C,), tw, tb if bias else None, 1e-5)
    (ours,) = call("layer_norm_fwd", np.bool_(bias), w, b, x)
    close(ours, y)
    dx, dw, db = call("layer_norm_bwd", np.bool_(bias), w, x, dy)
    rx, rw = torch.autograd.grad(y, (tx, tw), t64(dy), retain_graph=True)
    close(dx, rx)
    close(dw, rw)
    if bias:
        close(db, torch.autograd.grad(y, tb, t64(dy))[0])
    else:
        assert not db.any()


def test_c_attn(call):
    """c_attn_fwd is F.linear with c_attn's [3C, C] weight and [3C] bias, split into q, k,
    v; c_attn_dx and c_attn_dw are autograd's dx, dW and db for the three gradients."""
    g = rng(3)
    x, w, b = normal(g, N, C), normal(g, 3, C, C, std=0.2), normal(g, 3, C)
    tx, tw, tb = t64(x), t64(w.reshape(3 * C, C)), t64(b.reshape(3 * C))
    y = F.linear(tx, tw, tb)
    for ours, ref in zip(call("c_attn_fwd", np.bool_(True), w, b, x), y.split(C, dim=1)):
        close(ours, ref)
    (no_bias,) = call("c_attn_fwd", np.bool_(False), w, b, x)[:1]
    close(no_bias, F.linear(tx, tw)[:, :C])
    dq, dk, dv = normal(g, N, C), normal(g, N, C), normal(g, N, C)
    dy = t64(np.concatenate([dq, dk, dv], axis=1))
    rx, rw, rb = torch.autograd.grad(y, (tx, tw, tb), dy)
    (dx,) = call("c_attn_dx", w, dq, dk, dv)
    close(dx, rx)
    dw, db = call("c_attn_dw", np.bool_(True), x, dq, dk, dv)
    close(dw, rw.reshape(3, C, C))
    close(db, rb.reshape(3, C))
    assert not call("c_attn_dw", np.bool_(False), x, dq, dk, dv)[1].any()


@pytest.mark.parametrize("K, M", [(C, C), (C, Fw), (Fw, C), (C, V)],
                         ids=["c_proj", "c_fc", "mlp.c_proj", "lm_head"])
def test_linear(call, K, M):
    """dense_fwd is F.linear (with and without its bias), dense_dx and dense_dw autograd's
    dx, dW and db; the head's products (head_logits, head_dx, head_dw) are the same
    without a bias."""
    g = rng(4)
    x, w, b, dy = normal(g, N, K), normal(g, M, K, std=0.2), normal(g, M), normal(g, N, M)
    tx, tw, tb = t64(x), t64(w), t64(b)
    y = F.linear(tx, tw, tb)
    close(call("dense_fwd", np.bool_(True), w, b, x)[0], y)
    close(call("dense_fwd", np.bool_(False), w, b, x)[0], F.linear(tx, tw))
    rx, rw, rb = torch.autograd.grad(y, (tx, tw, tb), t64(dy))
    close(call("dense_dx", w, dy)[0], rx)
    dw, db = call("dense_dw", np.bool_(True), x, dy)
    close(dw, rw)
    close(db, rb)
    if (K, M) == (C, V):
        close(call("head_logits", x, w)[0], F.linear(tx, tw))
        close(call("head_dx", dy, w)[0], rx)
        close(call("head_dw", dy, x)[0], rw)


def test_products_in_tasks_of_48_rows(call):
    """The head's products at a size where gemm.fut gives each task 8 blocks of 6 rows
    (the panels, streamed once per 6 rows, would move over 4 GiB): head_logits,
    head_dx and head_dw equal float64 NumPy's products, with N = 770 positions and
    M = 8210 outputs leaving the last task's rows and the last panel's columns partial."""
    g = rng(9)
    n, K, M = 770, 1024, 8210
    assert (n + 5) // 6 * (-(-K // 16)) * M * 64 > 1 << 32  # dx's panels: wte's transpose
    assert (n + 5) // 6 * (-(-M // 16)) * K * 64 > 1 << 32  # the forward's: wte's rows
    assert (M + 5) // 6 * (-(-K // 16)) * n * 64 > 1 << 32  # dW's: x's
    x, w, dy = normal(g, n, K), normal(g, M, K, std=0.05), normal(g, n, M, std=0.05)
    x64, w64, dy64 = x.astype(np.float64), w.astype(np.float64), dy.astype(np.float64)
    close(call("head_logits", x, w)[0], x64 @ w64.T)
    close(call("head_dx", dy, w)[0], dy64 @ w64)
    close(call("head_dw", dy, x)[0], dy64.T @ x64)


def test_dw_from_strips(call):
    """dW = dy^T x where dy's rows have 768 or more elements, which gemm.fut reads from
    strips of 6 of dy's columns (`pack_strips`): dense_dw equals float64 NumPy's product,
    with M = 770 and 1001 outputs (strips and tasks of 6 rows left partial), N = 21
    positions and K = 20 inputs (a partial panel)."""
    g = rng(10)
    for M in (770, 1001):
        x, dy = normal(g, N, 20), normal(g, N, M)
        dw, db = call("dense_dw", np.bool_(True), x, dy)
        close(dw, dy.astype(np.float64).T @ x.astype(np.float64))
        close(db, dy.astype(np.float64).sum(axis=0))


@pytest.mark.parametrize("B, T, H, D", [(B, T, H, C // H), (2, 41, 2, 20)])
def test_attention(call, B, T, H, D):
    """attention_fwd is F.scaled_dot_product_attention(is_causal=True) over each row's T
    positions and H heads (nanoGPT's views), its weights the causal softmax of q kᵀ /
    sqrt(D); attention_bwd, from those weights, autograd's dq, dk, dv.  At T = 41 and
    D = 20 the causal products (gemm.fut's `matmul_*_lower`) cross several panels of 16
    and blocks of 6 rows, partial ones last, so their skipped ranges are exercised."""
    g = rng(5)
    N, C = B * T, H * D
    q, k, v, da = (normal(g, N, C) for _ in range(4))
    tq, tk, tv = t64(q), t64(k), t64(v)

    def heads(t):
        return t.view(B, T, H, D).transpose(1, 2)
    y = F.scaled_dot_product_attention(heads(tq), heads(tk), heads(tv), is_causal=True)
    y = y.transpose(1, 2).reshape(N, C)
    a, att = call("attention_fwd", np.int64(H), np.int64(B), q, k, v)
    close(a, y)
    scores = heads(tq) @ heads(tk).transpose(-1, -2) / math.sqrt(D)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    close(att, torch.softmax(scores.masked_fill(~mask, -math.inf), dim=-1))
    dq, dk, dv = call("attention_bwd", q, k, v, att, da)
    rq, rk, rv = torch.autograd.grad(y, (tq, tk, tv), t64(da))
    close(dq, rq)
    close(dk, rk)
    close(dv, rv)


def test_residual_add_and_gelu(call):
    """residual_add is a + b; gelu_fwd F.gelu(approximate="tanh"), gelu_bwd its autograd
    gradient (over [-8, 8] and beyond, where the tanh saturates)."""
    g = rng(6)
    a, b = normal(g, N, C), normal(g, N, C)
    close(call("residual_add", a, b)[0], t64(a) + t64(b))
    h, dy = normal(g, N, Fw, std=4), normal(g, N, Fw)
    th = t64(h)
    y = F.gelu(th, approximate="tanh")
    close(call("gelu_fwd", h)[0], y)
    close(call("gelu_bwd", h, dy)[0], torch.autograd.grad(y, th, t64(dy))[0])


def test_cross_entropy(call):
    """cross_entropy_fwd with weights 1/N is F.cross_entropy's mean, cross_entropy_bwd its
    gradient with respect to the logits."""
    g = rng(7)
    logits, targets = normal(g, N, V, std=3), g.integers(0, V, N).astype(np.int64)
    weights = np.full(N, 1 / N, np.float32)
    tl = t64(logits)
    loss = F.cross_entropy(tl, t64(targets))
    close(call("cross_entropy_fwd", logits, targets, weights)[0], loss.reshape(1))
    close(call("cross_entropy_bwd", logits, targets, weights)[0], torch.autograd.grad(loss, tl)[0])


def test_stores(call):
    """activation_store holds each layer's saved activations at its index of [L]; and
    gradient_store each layer's weight gradients (ln_1's and ln_2's the same here)."""
    g = rng(10)
    acts = [normal(g, N, C) for _ in range(4)] + [normal(g, B, H, T, T)] + \
        [normal(g, N, C), normal(g, N, C), normal(g, N, Fw)]
    for ours, given in zip(call("activation_store", np.int64(L), *acts), acts):
        np.testing.assert_array_equal(ours, np.stack([given] * L))
    grads = [normal(g, 3, C, C), normal(g, 3, C), normal(g, C, C), normal(g, C), normal(g, C),
             normal(g, C), normal(g, Fw, C), normal(g, Fw), normal(g, C, Fw), normal(g, C)]
    ours = call("gradient_store", np.int64(L), *grads)
    expected = grads[:6] + grads[4:6] + grads[6:]  # ln_1's weight and bias, then ln_2's
    assert len(ours) == len(expected) == 12
    for o, e in zip(ours, expected):
        np.testing.assert_array_equal(o, np.stack([e] * L))


def flat_params(g, std: float) -> tuple[dict, np.ndarray]:
    """Random tensors of the library's GPT-2 shapes at TINY, and the same flat (the
    library's order)."""
    shapes = TINY.config().shapes()
    tensors = {n: normal(g, *s, std=std) for n, s in shapes.items()}
    return tensors, np.concatenate([t.ravel() for t in tensors.values()])


def test_grad_sum_norm(call):
    """grad_sum_norm: the global L2 norm of the micro-batches' mean gradient (one, then two
    micro-batches), as torch.nn.utils.clip_grad_norm_ returns it."""
    g = rng(8)
    (_, g0), (_, g1) = flat_params(g, 1.0), flat_params(g, 1.0)
    sizes = [np.int64(x) for x in (V, C, T, L, Fw)]
    for gs in (g0[None], np.stack([g0, g1])):
        p = t64(np.zeros_like(g0))
        p.grad = t64(gs).detach().mean(0)
        ref = torch.nn.utils.clip_grad_norm_([p], 1.0)
        close(call("grad_sum_norm", *sizes, gs)[0], ref.reshape(1))


def test_adamw(call):
    """adamw (through adamw_flat) is torch.optim.AdamW's step 4 (betas 0.9, 0.99, eps 1e-8,
    lr 1e-3) from the given moments on the gradient scaled by the clip coefficient 0.5,
    decay 0.1 on the embeddings and the linear layers' weights (nanoGPT's rule: the
    tensors of two or more dimensions in Hugging Face's layout), none on the biases and
    LayerNorms."""
    g = rng(9)
    params, p = flat_params(g, 0.5)
    grads, gr = flat_params(g, 0.1)
    ms, m = flat_params(g, 0.05)
    vs, v = flat_params(g, 0.05)
    vs = {n: np.abs(x) for n, x in vs.items()}
    v = np.abs(v)
    step, lr, clip = 3, 1e-3, 0.5
    new_p, new_m, new_v = call("adamw_flat", *[np.int64(x) for x in (V, C, T, L, Fw, H)],
                               np.bool_(True), np.int64(step), np.float32(lr), np.float32(clip),
                               p, m, v, gr)
    tensors = {n: t64(x).detach().requires_grad_() for n, x in params.items()}
    for n, t in tensors.items():
        t.grad = clip * t64(grads[n]).detach()

    def decays(name: str) -> bool:
        return name in ("wte", "wpe") or (name.endswith("_w") and not name.startswith("ln_"))
    groups = [{"params": [t for n, t in tensors.items() if decays(n)], "weight_decay": 0.1},
              {"params": [t for n, t in tensors.items() if not decays(n)], "weight_decay": 0.0}]
    assert len(groups[0]["params"]) == 6
    opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.99), eps=1e-8)
    for n, t in tensors.items():
        opt.state[t] = {"step": torch.tensor(float(step)), "exp_avg": t64(ms[n]).detach(),
                        "exp_avg_sq": t64(vs[n]).detach()}
    opt.step()
    flat = {k: torch.cat([x.reshape(-1) for x in d]).detach() for k, d in
            (("p", tensors.values()), ("m", [opt.state[t]["exp_avg"] for t in tensors.values()]),
             ("v", [opt.state[t]["exp_avg_sq"] for t in tensors.values()]))}
    close(new_m, flat["m"])
    close(new_v, flat["v"])
    close(new_p - p, flat["p"] - t64(p).detach())  # the update itself, not just the weights
    close(new_p, flat["p"])


def test_torch_ops_run_at_every_part():
    """Every part's PyTorch operation runs at TINY's shapes (the benchmark times each),
    and the parts' counts are the step's: 4 L + 1 LayerNorm forwards on our side (ln_1
    and ln_2 recomputed by the backward), 2 L + 1 on PyTorch's."""
    parts = bd.gpt2_parts(TINY)
    for p in parts:
        if p.torch_op:
            bd.torch_op(p.torch_op, TINY, torch, F)()
    ln = next(p for p in parts if p.entry == "layer_norm_fwd")
    assert (ln.ours_calls(L), ln.torch_calls(L)) == (4 * L + 1, 2 * L + 1)
    makers = bd.gpt2_inputs(TINY)
    assert all(a in makers for p in parts for a in p.args)


def test_benchmark_end_to_end(exe, tmp_path, monkeypatch, capsys):
    """`--gpt2 tiny --runs 1` at TINY (bias and no bias): a table per shape set with every
    part, their sum and the whole step through the library, and breakdown_gpt2.csv with
    the same rows; PyTorch's times come from a process of its own."""
    shapes = {"tiny": TINY, "tiny-nb": dataclasses.replace(TINY, name="tiny-nb", bias=False)}
    monkeypatch.setattr(bd, "GPT2_SHAPES", {**bd.GPT2_SHAPES, **shapes})
    monkeypatch.setattr(bd, "compile_parts", lambda *a, **k: exe)
    assert bd.main(["--configs", "", "--products", "", "--gpt2", "tiny,tiny-nb", "--runs", "1",
                    "--step-seconds", "0", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    n_parts = len(bd.gpt2_parts(TINY))
    with (tmp_path / "breakdown_gpt2.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * (n_parts + 2)
    for name in shapes:
        got = [r for r in rows if r["shapes"] == name]
        assert [r["part"] for r in got[-2:]] == ["sum of the parts", "whole step (library)"]
        # (the program's timer counts whole microseconds: a tiny part may take 0)
        assert all(float(r["ours_ms_per_step"]) >= 0 for r in got)
        assert all(float(r[k]) > 0 for k in ("ours_ms_per_step", "torch_ms_per_step")
                   for r in got[-2:-1])
        # PyTorch has no stores of activations and gradients
        assert [r["part"] for r in got[:-1] if not r["torch_ms_per_step"]] == [
            "saved activations (store of all layers)", "weight gradients (store of all layers)"]
        assert all(float(r["torch_ms_per_step"]) > 0 for r in got[:-1] if r["torch_ms_per_step"])
        assert float(got[-1]["share"]) == 1.0
        assert f"GPT-2's step, {name} " in out
    assert out.count("| AdamW (1x) |") == 2 and "sum of the parts" in out
    assert not (tmp_path / "breakdown.csv").exists()

    # measured again, one shape set ("TINY", as typed): its rows are replaced, the other's kept
    assert bd.main(["--configs", "", "--products", "", "--gpt2", "TINY", "--runs", "1",
                    "--step-seconds", "0", "--results", str(tmp_path)]) == 0
    with (tmp_path / "breakdown_gpt2.csv").open() as f:
        again = list(csv.DictReader(f))
    assert [r["shapes"] for r in again] == ["tiny-nb"] * (n_parts + 2) + ["tiny"] * (n_parts + 2)
    assert [r for r in again if r["shapes"] == "tiny-nb"] == [r for r in rows
                                                              if r["shapes"] == "tiny-nb"]
    assert [p.name for p in tmp_path.iterdir()] == ["breakdown_gpt2.csv"]


def test_sum_note():
    """Within 15 % of the step: no note; outside, a line saying which way and by how much."""
    assert bd.sum_note(90, 100) is None and bd.sum_note(114, 100) is None
    assert "80 % of the step (20.0 ms a step in no part)" in bd.sum_note(80, 100)
    assert "130 % of the step (30.0 ms a step more)" in bd.sum_note(130, 100)


def test_bad_shape_set_is_an_error(capsys):
    """An unknown --gpt2 shape set is a usage error naming it and the known ones."""
    with pytest.raises(SystemExit) as e:
        bd.main(["--configs", "", "--products", "", "--gpt2", "gpt2-xl"])
    assert e.value.code == 2 and ("--gpt2: unknown shape set(s) gpt2-xl (known: recipe, "
                                  "gpt2-124m)") in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--gpt2", ""], "nothing to measure"),
    (["--step-seconds", "inf"], "--step-seconds must be a number of seconds"),
    (["--step-seconds", "-1"], "--step-seconds must be a number of seconds"),
    (["--rounds", "0"], "--rounds must be at least 1"),
    (["--results", "{file}"], "--results: cannot write into {file}"),
    (["--results", "{file}/sub"], "--results: cannot write into {file}/sub"),
], ids=["nothing", "inf", "negative", "rounds", "file", "under-a-file"])
def test_bad_options_are_errors_before_any_work(tmp_path, monkeypatch, capsys, args, message):
    """Bad options stop the run at once with a usage error (exit 2), before anything is
    compiled or measured: nothing to measure, an endless or negative --step-seconds, no
    rounds, a results folder that cannot be written (here a file, or a path under one)."""
    file = tmp_path / "a file"
    file.write_text("kept")
    monkeypatch.setattr(bd, "compile_parts", lambda *a, **k: pytest.fail("compiled"))
    with pytest.raises(SystemExit) as e:
        bd.main(["--configs", "", "--products", "", "--results", str(tmp_path / "out")]
                + [a.format(file=file) for a in args])
    err = capsys.readouterr().err
    assert e.value.code == 2 and message.format(file=file) in err, err
    assert file.read_text() == "kept"
