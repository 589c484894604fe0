"""A float64 NumPy reference of microgpt, written from microgpt's equations.

This is deliberately independent of the Futhark kernels: a plain NumPy forward
pass over one sequence with an explicit causal mask, the batch loss, Adam as
microgpt writes it, and central finite differences of the float64 loss.

Parameters are the stacked dict of ``microgpt_fut.models.microgpt`` (matrices [out, in]):

    wte [V, C]  wpe [T, C]  lm_head [V, C]
    attn_wq, attn_wk, attn_wv, attn_wo [L, C, C]  mlp_fc1 [L, F, C]  mlp_fc2 [L, C, F]

V = vocab_size (BOS = V - 1), C = n_embd, T = block_size, L = n_layer, F = MLP width.
"""
from __future__ import annotations

import numpy as np

PARAM_NAMES = ("wte", "wpe", "lm_head", "attn_wq", "attn_wk", "attn_wv", "attn_wo",
               "mlp_fc1", "mlp_fc2")


def as_f64(params: dict) -> dict[str, np.ndarray]:
    """Copy of a parameter dict with every array as float64 (same shapes)."""
    return {k: np.asarray(v, dtype=np.float64).copy() for k, v in params.items()}


def random_params(shapes: dict[str, tuple], rng: np.random.Generator,
                  std: float = 0.3) -> dict[str, np.ndarray]:
    """Parameters N(0, std) as float32, one array per entry of ``shapes``."""
    return {n: (std * rng.standard_normal(s)).astype(np.float32) for n, s in shapes.items()}


def softmax(z: np.ndarray, axis: int = -1) -> np.ndarray:
    """softmax along ``axis`` (shifted by the max)."""
    z = z - np.max(z, axis=axis, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=axis, keepdims=True)


def rmsnorm(x: np.ndarray) -> np.ndarray:
    """x / sqrt(mean(x^2) + 1e-5) over the last axis, no gain. x: [..., C]."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5)


def forward(params: dict, tokens, n_head: int) -> np.ndarray:
    """Logits of one sequence: tokens int [n] (n <= block_size) -> float64 [n, V].

    Position t sees tokens[0..t] only (microgpt's KV cache holds exactly those).
    """
    p = params
    tokens = np.asarray(tokens, dtype=np.int64)
    n = len(tokens)
    C = p["wte"].shape[1]
    L = p["attn_wq"].shape[0]
    hd = C // n_head
    x = np.asarray(p["wte"], np.float64)[tokens] + np.asarray(p["wpe"], np.float64)[:n]
    x = rmsnorm(x)
    causal = np.tril(np.ones((n, n), dtype=bool))  # [query t, key s]: s <= t
    for li in range(L):
        wq, wk, wv, wo = (np.asarray(p[k][li], np.float64)
                          for k in ("attn_wq", "attn_wk", "attn_wv", "attn_wo"))
        fc1 = np.asarray(p["mlp_fc1"][li], np.float64)
        fc2 = np.asarray(p["mlp_fc2"][li], np.float64)
        # 1) multi-head causal self-attention
        x_res = x
        xn = rmsnorm(x)
        q, k, v = xn @ wq.T, xn @ wk.T, xn @ wv.T  # [n, C] each
        x_attn = np.empty_like(x)
        for h in range(n_head):
            sl = slice(h * hd, (h + 1) * hd)
            att = (q[:, sl] @ k[:, sl].T) / np.sqrt(hd)  # [n, n]
            att = np.where(causal, att, -np.inf)
            x_attn[:, sl] = softmax(att, axis=1) @ v[:, sl]
        x = x_attn @ wo.T + x_res
        # 2) MLP
        x_res = x
        h1 = np.maximum(rmsnorm(x) @ fc1.T, 0.0)
        x = h1 @ fc2.T + x_res
    return x @ np.asarray(p["lm_head"], np.float64).T


def nll_sum(params: dict, row, n_pos: int, n_head: int) -> float:
    """Sum over positions p < n_pos of -log softmax(logits_p)[row[p+1]]. row: [T+1]."""
    row = np.asarray(row, dtype=np.int64)
    if n_pos == 0:
        return 0.0
    logits = forward(params, row[:n_pos], n_head)  # causal: later tokens are irrelevant
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(n_pos), row[1:n_pos + 1]].sum())


def batch_loss(params: dict, tokens, n_pos, n_head: int) -> float:
    """Mean NLL over all valid positions: tokens [B, T+1], n_pos [B] -> float."""
    tokens = np.asarray(tokens)
    n_pos = np.asarray(n_pos)
    total = sum(nll_sum(params, tokens[b], int(n_pos[b]), n_head) for b in range(len(tokens)))
    return total / float(n_pos.sum())


def adam_step(params: dict, grads: dict, m: dict, v: dict, step: int, num_steps: int,
              lr: float = 0.01, beta1: float = 0.85, beta2: float = 0.99,
              eps: float = 1e-8) -> tuple[dict, dict, dict]:
    """microgpt's Adam update (0-based ``step``) in float64; returns new (params, m, v).

    lr_t = lr * (1 - step / num_steps); all dicts map names to same-shaped arrays.
    """
    lr_t = lr * (1.0 - step / num_steps)
    new_p, new_m, new_v = {}, {}, {}
    for n in params:
        g = np.asarray(grads[n], np.float64)
        mn = beta1 * np.asarray(m[n], np.float64) + (1 - beta1) * g
        vn = beta2 * np.asarray(v[n], np.float64) + (1 - beta2) * g * g
        m_hat = mn / (1 - beta1 ** (step + 1))
        v_hat = vn / (1 - beta2 ** (step + 1))
        new_p[n] = np.asarray(params[n], np.float64) - lr_t * m_hat / (np.sqrt(v_hat) + eps)
        new_m[n], new_v[n] = mn, vn
    return new_p, new_m, new_v


def finite_diff_grad(params: dict, tokens, n_pos, n_head: int, name: str,
                     flat_indices=None, h: float = 1e-5) -> np.ndarray:
    """Central differences of ``batch_loss`` w.r.t. params[name] in float64.

    Returns an array shaped like params[name] (all elements) or, when
    ``flat_indices`` is given, a 1-D array of the derivatives at those flat indices.
    """
    p = as_f64(params)
    arr = p[name]
    flat = arr.reshape(-1)  # a view: perturbing it perturbs p[name]
    idx = range(flat.size) if flat_indices is None else flat_indices
    out = []
    for i in idx:
        old = flat[i]
        flat[i] = old + h
        up = batch_loss(p, tokens, n_pos, n_head)
        flat[i] = old - h
        down = batch_loss(p, tokens, n_pos, n_head)
        flat[i] = old
        out.append((up - down) / (2 * h))
    out = np.array(out)
    return out.reshape(arr.shape) if flat_indices is None else out


def greedy_decode(params: dict, n_head: int, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """microgpt's sampling loop at temperature 0: from BOS, argmax until BOS.

    Returns (tokens int64 [block_size] padded with BOS, margins float64 [k]) where
    margins[i] is the gap between the best and second-best logit at step i.
    """
    bos = params["wte"].shape[0] - 1
    seq = [bos]
    out = np.full(block_size, bos, dtype=np.int64)
    margins = []
    for pos in range(block_size):
        logits = forward(params, seq, n_head)[-1]
        top2 = np.sort(logits)[-2:]
        margins.append(top2[1] - top2[0])
        nxt = int(np.argmax(logits))
        if nxt == bos:
            break
        out[pos] = nxt
        seq.append(nxt)
    return out, np.array(margins)


def greedy_continue(params: dict, n_head: int, block_size: int, prompt,
                    max_new: int) -> tuple[np.ndarray, np.ndarray]:
    """nanoGPT's ``generate`` at temperature -> 0 (argmax), one sequence: each next token
    is the argmax of the last logits of ``forward`` over the last block_size tokens.

    Returns (the max_new new tokens int64 [max_new], margins float64 [max_new]: the gap
    between the best and second-best logit at each step).
    """
    seq = [int(t) for t in prompt]
    margins = []
    for _ in range(max_new):
        logits = forward(params, seq[-block_size:], n_head)[-1]
        top2 = np.sort(logits)[-2:]
        margins.append(top2[1] - top2[0])
        seq.append(int(np.argmax(logits)))
    return np.array(seq[len(prompt):], dtype=np.int64), np.array(margins)


def encode_names(names: list[str], block_size: int, alphabet: str = "abcdefghijklmnopqrstuvwxyz"):
    """Rows BOS + name + BOS padded with BOS to block_size+1, and n_pos = min(T, len+1).

    Token of alphabet[i] is i; BOS is len(alphabet). Returns (tokens int64 [B, T+1],
    n_pos int64 [B]).
    """
    bos = len(alphabet)
    tokens = np.full((len(names), block_size + 1), bos, dtype=np.int64)
    n_pos = np.zeros(len(names), dtype=np.int64)
    for b, name in enumerate(names):
        ids = [alphabet.index(ch) for ch in name][:block_size]
        tokens[b, 1:1 + len(ids)] = ids
        n_pos[b] = min(block_size, len(name) + 1)
    return tokens, n_pos
