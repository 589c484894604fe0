"""The PyTorch eager baseline: microgpt's architecture exactly as our kernels compute it.

Same parameters (names and [out, in] shapes of ``microgpt_fut.model``, per-layer
matrices stacked on a leading [n_layer] axis), same forward: token + position
embedding, rmsnorm without gain (x / sqrt(mean(x^2) + 1e-5)) after the embedding
and before attention and the MLP, no biases, causal multi-head attention
(``scaled_dot_product_attention``), ReLU MLP, separate lm_head; the loss is the
mean next-token NLL over the valid positions (padding masked), computing only
the first max(n_pos) positions as our kernels do. Training is
``torch.optim.Adam`` (β1 0.85, β2 0.99, ε 1e-8) with microgpt's linear decay
of the learning rate to 0 at ``num_steps``. Sampling is batched with a KV cache,
one position per step for all samples, until every sample has drawn BOS or
block_size tokens: the same work as our ``generate``.

tests/test_bench_torch.py checks loss, gradient, Adam steps and the KV-cache
logits against our kernels. Everything runs on the device of the model's
parameters (``TorchGPT(...).to("cuda")`` for PyTorch CUDA); results come back as
NumPy arrays, which waits for the device.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from microgpt_fut.model import PARAM_NAMES, GPTConfig

from .datasets import init_params  # noqa: F401  (the same weights for both sides)


def rmsnorm(x: torch.Tensor) -> torch.Tensor:
    """microgpt's rmsnorm over the last axis: x / sqrt(mean(x^2) + 1e-5), no gain."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)


class TorchGPT(torch.nn.Module):
    """microgpt's GPT in PyTorch with our parameter layout (see module docstring)."""

    def __init__(self, config: GPTConfig, params: dict[str, np.ndarray]):
        super().__init__()
        config.validate()
        self.config = config
        shapes = config.shapes()
        for name in PARAM_NAMES:
            arr = np.ascontiguousarray(params[name], dtype=np.float32)
            if arr.shape != shapes[name]:
                raise ValueError(f"tensor {name} has shape {arr.shape}, config needs "
                                 f"{shapes[name]}")
            self.register_parameter(name, torch.nn.Parameter(torch.from_numpy(arr.copy())))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Training-path logits: tokens int64 [B, n] (n <= block_size) -> [B, n, V]."""
        c = self.config
        B, n = tokens.shape
        H, D = c.n_head, c.n_embd // c.n_head
        x = rmsnorm(self.wte[tokens] + self.wpe[:n])
        for li in range(c.n_layer):
            xn = rmsnorm(x)
            q, k, v = (F.linear(xn, w[li]).view(B, n, H, D).transpose(1, 2)
                       for w in (self.attn_wq, self.attn_wk, self.attn_wv))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = F.linear(y.transpose(1, 2).reshape(B, n, c.n_embd), self.attn_wo[li]) + x
            h = torch.relu(F.linear(rmsnorm(x), self.mlp_fc1[li]))
            x = F.linear(h, self.mlp_fc2[li]) + x
        return F.linear(x, self.lm_head)

    def loss(self, tokens, n_pos) -> torch.Tensor:
        """Mean NLL over valid positions: tokens [B, T+1], n_pos [B] (NumPy or torch)."""
        dev = self.wte.device
        tokens = torch.as_tensor(np.asarray(tokens, np.int64)).to(dev)
        n_pos_np = np.asarray(n_pos, np.int64)
        n = min(self.config.block_size, int(n_pos_np.max()))
        n_pos_t = torch.from_numpy(n_pos_np).to(dev)
        logits = self(tokens[:, :n])
        targets = tokens[:, 1:n + 1]
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                              reduction="none").view(tokens.shape[0], n)
        mask = torch.arange(n, device=dev)[None, :] < n_pos_t[:, None]
        return (nll * mask).sum() / n_pos_t.sum()

    def params_numpy(self) -> dict[str, np.ndarray]:
        """The parameters as float32 NumPy arrays (copies)."""
        return {n: getattr(self, n).detach().cpu().numpy().copy() for n in PARAM_NAMES}


class TorchTrainer:
    """Adam steps on a TorchGPT with microgpt's settings and linear learning-rate decay."""

    def __init__(self, model: TorchGPT, num_steps: int, lr: float = 0.01, beta1: float = 0.85,
                 beta2: float = 0.99, eps: float = 1e-8):
        self.model = model
        self.num_steps = num_steps
        self.lr = lr
        self.step = 0
        self.opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(beta1, beta2), eps=eps)

    def train(self, tokens: np.ndarray, n_pos: np.ndarray) -> np.ndarray:
        """K steps, batch k from tokens [K, B, T+1], n_pos [K, B]; the K losses before
        each update (float32), like ``Model.train``."""
        losses = []
        for k in range(tokens.shape[0]):
            for g in self.opt.param_groups:
                g["lr"] = self.lr * (1 - self.step / self.num_steps)
            self.opt.zero_grad(set_to_none=True)
            loss = self.model.loss(tokens[k], n_pos[k])
            loss.backward()
            self.opt.step()
            self.step += 1
            losses.append(loss.detach())
        return torch.stack(losses).cpu().numpy().astype(np.float32)


def _decode_step(model: TorchGPT, tok: torch.Tensor, pos: int, keys: torch.Tensor,
                 values: torch.Tensor) -> torch.Tensor:
    """Logits [n, V] for tokens tok [n] at position pos; appends to keys/values
    [L, n, H, T, D] at pos (microgpt's ``gpt`` with its KV cache, batched)."""
    c = model.config
    n = tok.shape[0]
    H, D = c.n_head, c.n_embd // c.n_head
    x = rmsnorm(model.wte[tok] + model.wpe[pos])
    for li in range(c.n_layer):
        xn = rmsnorm(x)
        q = F.linear(xn, model.attn_wq[li]).view(n, H, 1, D)
        keys[li, :, :, pos] = F.linear(xn, model.attn_wk[li]).view(n, H, D)
        values[li, :, :, pos] = F.linear(xn, model.attn_wv[li]).view(n, H, D)
        y = F.scaled_dot_product_attention(q, keys[li, :, :, :pos + 1],
                                           values[li, :, :, :pos + 1])
        x = F.linear(y.reshape(n, c.n_embd), model.attn_wo[li]) + x
        h = torch.relu(F.linear(rmsnorm(x), model.mlp_fc1[li]))
        x = F.linear(h, model.mlp_fc2[li]) + x
    return F.linear(x, model.lm_head)


def _cache(model: TorchGPT, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    c = model.config
    shape = (c.n_layer, n, c.n_head, c.block_size, c.n_embd // c.n_head)
    dev = model.wte.device
    return torch.zeros(shape, device=dev), torch.zeros(shape, device=dev)


@torch.inference_mode()
def logits_cached(model: TorchGPT, tokens: np.ndarray) -> np.ndarray:
    """Sampling-path logits of one sequence: tokens int64 [n] -> float32 [n, V]."""
    keys, values = _cache(model, 1)
    rows = [_decode_step(model, torch.tensor([int(t)], device=keys.device), pos, keys, values)[0]
            for pos, t in enumerate(tokens)]
    return torch.stack(rows).cpu().numpy()


@torch.inference_mode()
def generate(model: TorchGPT, n: int, temperature: float, seed: int) -> np.ndarray:
    """n samples as microgpt's inference loop, batched: int64 [n, block_size].

    All samples advance one position per step from BOS, drawing from
    softmax(logits / temperature) (``torch.multinomial``; temperature 0: argmax),
    until every sample has drawn BOS or block_size tokens; after its end a row
    holds BOS, as our ``Model.generate`` returns.
    """
    c = model.config
    bos = c.vocab_size - 1
    keys, values = _cache(model, n)
    dev = keys.device
    gen = torch.Generator(device=dev).manual_seed(seed)
    tok = torch.full((n,), bos, dtype=torch.int64, device=dev)
    out = torch.full((n, c.block_size), bos, dtype=torch.int64, device=dev)
    done = torch.zeros(n, dtype=torch.bool, device=dev)
    for pos in range(c.block_size):
        logits = _decode_step(model, tok, pos, keys, values)
        if temperature == 0:
            nxt = logits.argmax(-1)
        else:
            probs = torch.softmax(logits / temperature, -1)
            nxt = torch.multinomial(probs, 1, generator=gen).squeeze(1)
        done |= nxt == bos
        out[:, pos] = torch.where(done, torch.full_like(nxt, bos), nxt)
        tok = nxt
        if bool(done.all()):
            break
    return out.cpu().numpy()

