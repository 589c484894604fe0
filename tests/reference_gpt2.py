"""A float64 NumPy reference of the GPT-2 model and nanoGPT's training recipe.

Written from the equations, independent of the Futhark kernels, so that the kernels
can be tested against it:

* the model is GPT-2 as nanoGPT's model.py writes it (pre-LayerNorm blocks, causal
  multi-head self-attention, a 4C GELU(tanh) MLP, a final LayerNorm and a head tied
  to the token embedding), with parameters named and laid out as Hugging Face's
  GPT-2 checkpoints (``transformers`` GPT2Model without the ``transformer.`` prefix);
* the recipe is nanoGPT's train.py: get_lr (linear warmup, cosine decay),
  torch.nn.utils.clip_grad_norm_ and torch.optim.AdamW with weight decay on the
  tensors of two or more dimensions only (configure_optimizers).

HF's Conv1D computes ``x @ W + b`` with W [in][out] (the transpose of nn.Linear).
V = vocab_size, C = n_embd, T = block_size, L = n_layer, B = batch.
"""
from __future__ import annotations

import math

import numpy as np


def hf_shapes(vocab_size: int, n_embd: int, n_layer: int, block_size: int,
              bias: bool = True) -> dict[str, tuple]:
    """Hugging Face GPT-2 tensor names -> shapes, in checkpoint order.

    With ``bias=False`` (nanoGPT's GPTConfig.bias) every ``.bias`` tensor is absent:
    LayerNorm has a weight only and the Conv1D/Linear layers have no bias.
    """
    V, C, T = vocab_size, n_embd, block_size
    s: dict[str, tuple] = {"wte.weight": (V, C), "wpe.weight": (T, C)}
    for i in range(n_layer):
        h = f"h.{i}."
        s[h + "ln_1.weight"], s[h + "ln_1.bias"] = (C,), (C,)
        s[h + "attn.c_attn.weight"], s[h + "attn.c_attn.bias"] = (C, 3 * C), (3 * C,)
        s[h + "attn.c_proj.weight"], s[h + "attn.c_proj.bias"] = (C, C), (C,)
        s[h + "ln_2.weight"], s[h + "ln_2.bias"] = (C,), (C,)
        s[h + "mlp.c_fc.weight"], s[h + "mlp.c_fc.bias"] = (C, 4 * C), (4 * C,)
        s[h + "mlp.c_proj.weight"], s[h + "mlp.c_proj.bias"] = (4 * C, C), (C,)
    s["ln_f.weight"], s["ln_f.bias"] = (C,), (C,)
    if not bias:
        s = {n: shape for n, shape in s.items() if not n.endswith(".bias")}
    return s


def _is_ln_weight(name: str) -> bool:
    return name.split(".")[-2].startswith("ln_") and name.endswith(".weight")


def random_params(shapes: dict[str, tuple], rng: np.random.Generator,
                  std: float = 0.3) -> dict[str, np.ndarray]:
    """float64 test parameters: N(0, std), LayerNorm weights 1 + std * N(0, 1)."""
    return {n: (1.0 if _is_ln_weight(n) else 0.0) + std * rng.standard_normal(s)
            for n, s in shapes.items()}


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None,
               eps: float = 1e-5) -> np.ndarray:
    """nn.LayerNorm over the last axis: (x - mean) / sqrt(var + eps) * w (+ b), biased var."""
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps) * w
    return y if b is None else y + b


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GPT-2's GELU (nn.GELU(approximate='tanh')): 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _softmax(z: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def n_layer_of(params: dict) -> int:
    """Number of blocks in a parameter dict (the ``h.{i}.ln_1.weight`` present)."""
    n = 0
    while f"h.{n}.ln_1.weight" in params:
        n += 1
    return n


def forward(params: dict, tokens, n_head: int) -> np.ndarray:
    """nanoGPT GPT.forward: tokens int [B][T] (T <= block_size) -> logits float64 [B][T][V].

    n_layer and bias are inferred from ``params`` (bias: ``ln_f.bias`` present).
    """
    p = {n: np.asarray(a, np.float64) for n, a in params.items()}
    tok = np.asarray(tokens, dtype=np.int64)
    B, T = tok.shape
    C = p["wte.weight"].shape[1]
    hd = C // n_head
    bias = "ln_f.bias" in p

    def lin(x, name):  # HF Conv1D: x @ W (+ b)
        y = x @ p[name + ".weight"]
        return y + p[name + ".bias"] if bias else y

    def ln(x, name):
        return layer_norm(x, p[name + ".weight"], p.get(name + ".bias"))

    causal = np.tril(np.ones((T, T), dtype=bool))  # [query t, key s]: s <= t
    x = p["wte.weight"][tok] + p["wpe.weight"][:T]  # [B, T, C]
    for i in range(n_layer_of(p)):
        h = f"h.{i}."
        qkv = lin(ln(x, h + "ln_1"), h + "attn.c_attn")  # [B, T, 3C]
        q, k, v = qkv[..., :C], qkv[..., C:2 * C], qkv[..., 2 * C:]
        y = np.empty_like(x)
        for hh in range(n_head):  # head hh = columns [hh*hd, (hh+1)*hd) of q, k, v
            sl = slice(hh * hd, (hh + 1) * hd)
            att = q[..., sl] @ np.swapaxes(k[..., sl], 1, 2) / math.sqrt(hd)  # [B, T, T]
            att = _softmax(np.where(causal, att, -np.inf), axis=-1)
            y[..., sl] = att @ v[..., sl]
        x = x + lin(y, h + "attn.c_proj")
        x = x + lin(gelu_tanh(lin(ln(x, h + "ln_2"), h + "mlp.c_fc")), h + "mlp.c_proj")
    return ln(x, "ln_f") @ p["wte.weight"].T  # tied lm_head


def loss(params: dict, windows, n_head: int) -> float:
    """nanoGPT's F.cross_entropy(logits, targets): mean over all B*T positions.

    windows int [B][T+1]: inputs windows[:, :-1], targets windows[:, 1:].
    """
    w = np.asarray(windows, dtype=np.int64)
    logits = forward(params, w[:, :-1], n_head)
    z = logits - logits.max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    tgt = w[:, 1:]
    return float(-np.take_along_axis(logp, tgt[..., None], axis=-1).mean())


def numeric_grad(params: dict, name: str, windows, n_head: int,
                 eps: float = 1e-6) -> np.ndarray:
    """Central differences of ``loss`` w.r.t. every element of params[name] (tiny models)."""
    p = {n: np.array(a, dtype=np.float64) for n, a in params.items()}
    flat = p[name].reshape(-1)  # a view: perturbing it perturbs p[name]
    g = np.empty(flat.size)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        up = loss(p, windows, n_head)
        flat[i] = old - eps
        down = loss(p, windows, n_head)
        flat[i] = old
        g[i] = (up - down) / (2 * eps)
    return g.reshape(p[name].shape)


def get_lr(it: int, learning_rate: float, min_lr: float, warmup_iters: int,
           lr_decay_iters: int) -> float:
    """nanoGPT train.py get_lr: linear warmup, then cosine decay to min_lr."""
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


def clip_grad_norm(grads: dict, max_norm: float) -> tuple[dict, float]:
    """torch.nn.utils.clip_grad_norm_ (L2 over all elements): returns (new grads, total norm).

    clip_coef = max_norm / (total + 1e-6); grads are scaled by it when it is < 1.
    max_norm == 0 means no clipping (train.py: ``if grad_clip != 0.0``); the norm is
    still returned.
    """
    g = {n: np.array(a, dtype=np.float64) for n, a in grads.items()}
    total = math.sqrt(sum(float(np.sum(a * a)) for a in g.values()))
    if max_norm != 0.0:
        clip_coef = max_norm / (total + 1e-6)
        if clip_coef < 1.0:
            g = {n: a * clip_coef for n, a in g.items()}
    return g, total


def adamw_step(params: dict, grads: dict, m: dict, v: dict, step: int, lr: float,
               beta1: float = 0.9, beta2: float = 0.95, eps: float = 1e-8,
               weight_decay: float = 0.1) -> tuple[dict, dict, dict]:
    """torch.optim.AdamW (single-tensor, non-amsgrad) step; returns new (params, m, v).

    ``step`` is 0-based (torch's t = step + 1). Weight decay (decoupled, on the old p)
    applies to tensors with ndim >= 2 only, as nanoGPT's configure_optimizers groups them.
    The defaults are nanoGPT's train.py (beta2 0.95, weight_decay 0.1).
    """
    t = step + 1
    bc1, bc2 = 1.0 - beta1 ** t, 1.0 - beta2 ** t
    new_p, new_m, new_v = {}, {}, {}
    for n in params:
        p = np.asarray(params[n], np.float64)
        g = np.asarray(grads[n], np.float64)
        if p.ndim >= 2:
            p = p * (1.0 - lr * weight_decay)
        mn = beta1 * np.asarray(m[n], np.float64) + (1.0 - beta1) * g
        vn = beta2 * np.asarray(v[n], np.float64) + (1.0 - beta2) * g * g
        new_p[n] = p - (lr / bc1) * mn / (np.sqrt(vn) / math.sqrt(bc2) + eps)
        new_m[n], new_v[n] = mn, vn
    return new_p, new_m, new_v


def init_stats_expected(n_layer: int) -> dict[str, tuple[float, float]]:
    """GPT-2 / nanoGPT _init_weights: fnmatch pattern -> (mean, std) of the initial tensor.

    N(0, 0.02) for embeddings and Linear weights, N(0, 0.02/sqrt(2 n_layer)) for the
    residual projections (c_proj), zero biases, LayerNorm weights 1. Every name of
    ``hf_shapes`` matches exactly one pattern.
    """
    proj = 0.02 / math.sqrt(2 * n_layer)
    return {
        "wte.weight": (0.0, 0.02),
        "wpe.weight": (0.0, 0.02),
        "h.*.attn.c_attn.weight": (0.0, 0.02),
        "h.*.mlp.c_fc.weight": (0.0, 0.02),
        "h.*.attn.c_proj.weight": (0.0, proj),
        "h.*.mlp.c_proj.weight": (0.0, proj),
        "*.bias": (0.0, 0.0),
        "*ln_?.weight": (1.0, 0.0),
    }
