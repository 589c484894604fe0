"""The PyTorch eager baseline: microgpt's architecture exactly as our kernels compute it.

Same parameters (names and [out, in] shapes of ``microgpt_fut.models.microgpt``, per-layer
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

The second half is GPT-2 as nanoGPT's model.py writes it (``TorchGPT2``) and
nanoGPT's train.py recipe (``RecipeTrainer``, ``train_text``), the baseline of
``python -m bench.recipe``: it loads our weights from Hugging Face-named tensors
(``GPT2Config.to_file``) and draws its batches from our ``TextData``, so that both
sides start from the same weights and see the same windows.
tests/test_bench_recipe.py checks its logits, its recipe steps and a whole short
run with evaluations against ``GPT2Model`` and ``run.Run``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from microgpt_fut.models.gpt2 import GPT2Config
from microgpt_fut.training.optimizer import Recipe
from microgpt_fut.models.microgpt import PARAM_NAMES, MicrogptConfig
from microgpt_fut.data.text import TextData
from microgpt_fut.training.settings import Settings

from .datasets import init_params  # noqa: F401  (the same weights for both sides)


def rmsnorm(x: torch.Tensor) -> torch.Tensor:
    """microgpt's rmsnorm over the last axis: x / sqrt(mean(x^2) + 1e-5), no gain."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)


class TorchGPT(torch.nn.Module):
    """microgpt's GPT in PyTorch with our parameter layout (see module docstring)."""

    def __init__(self, config: MicrogptConfig, params: dict[str, np.ndarray]):
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
        each update (float32), like ``MicrogptModel.train``."""
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
    holds BOS, as our ``MicrogptModel.generate`` returns.
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



# ---------------------------------------------------------------------------
# GPT-2 as nanoGPT's model.py, and nanoGPT's training recipe (python -m bench.recipe)
# ---------------------------------------------------------------------------


class LayerNorm(torch.nn.Module):
    """nanoGPT's LayerNorm: a weight, and a bias only when ``bias`` (eps 1e-5)."""

    def __init__(self, ndim: int, bias: bool):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(ndim))
        self.bias = torch.nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(torch.nn.Module):
    """Fused q, k, v projection (c_attn), causal scaled dot-product attention, c_proj."""

    def __init__(self, config: GPT2Config):
        super().__init__()
        C = config.n_embd
        self.n_head = config.n_head
        self.c_attn = torch.nn.Linear(C, 3 * C, bias=config.bias)
        self.c_proj = torch.nn.Linear(C, C, bias=config.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                   for t in self.c_attn(x).split(C, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(torch.nn.Module):
    """c_fc, GELU (tanh approximation, GPT-2's), c_proj; width config.mlp_width (4C)."""

    def __init__(self, config: GPT2Config):
        super().__init__()
        self.c_fc = torch.nn.Linear(config.n_embd, config.mlp_width, bias=config.bias)
        self.c_proj = torch.nn.Linear(config.mlp_width, config.n_embd, bias=config.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(torch.nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln_1(x)), then + mlp(ln_2(x))."""

    def __init__(self, config: GPT2Config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, config.bias)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TorchGPT2(torch.nn.Module):
    """nanoGPT's GPT (model.py) without dropout: token + position embedding, blocks,
    ln_f, lm_head tied to wte. Parameter names are nanoGPT's
    (``transformer.h.0.attn.c_attn.weight``, ...); torch Linear weights are
    [out, in], the transpose of Hugging Face's Conv1D tensors.

    Initialised as nanoGPT's ``_init_weights`` (N(0, 0.02) for Linear and
    Embedding weights, N(0, 0.02/sqrt(2 n_layer)) for every c_proj weight, zero
    biases, LayerNorm weights 1) from ``torch.Generator().manual_seed(seed)``;
    ``load_hf`` replaces them with given weights (ours).
    """

    def __init__(self, config: GPT2Config, seed: int = 0):
        super().__init__()
        config.validate()
        self.config = config
        c = config
        self.transformer = torch.nn.ModuleDict(dict(
            wte=torch.nn.Embedding(c.vocab_size, c.n_embd),
            wpe=torch.nn.Embedding(c.block_size, c.n_embd),
            h=torch.nn.ModuleList([Block(c) for _ in range(c.n_layer)]),
            ln_f=LayerNorm(c.n_embd, c.bias)))
        self.lm_head = torch.nn.Linear(c.n_embd, c.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for module in self.modules():
                if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
                    module.weight.normal_(0.0, 0.02, generator=gen)
                if isinstance(module, torch.nn.Linear) and module.bias is not None:
                    module.bias.zero_()
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):
                    p.normal_(0.0, 0.02 / math.sqrt(2 * c.n_layer), generator=gen)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits of every position: idx int64 [B, T] (T <= block_size) -> [B, T, V]."""
        T = idx.shape[1]
        if T > self.config.block_size:
            raise ValueError(f"sequence of {T} tokens, block_size is {self.config.block_size}")
        tr = self.transformer
        x = tr.wte(idx) + tr.wpe(torch.arange(T, device=idx.device))
        for block in tr.h:
            x = block(x)
        return self.lm_head(tr.ln_f(x))

    def loss(self, windows) -> torch.Tensor:
        """nanoGPT's loss: mean cross-entropy over all B*T positions of windows
        int64 [B, T+1] (inputs w[:, :-1], targets w[:, 1:]; NumPy or torch)."""
        w = torch.as_tensor(np.asarray(windows, np.int64) if isinstance(windows, np.ndarray)
                            else windows).to(self.lm_head.weight.device)
        logits = self(w[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1))

    @staticmethod
    def _torch_name(hf_name: str) -> tuple[str, bool]:
        """(nanoGPT's parameter name, whether the tensor is transposed) of an HF name."""
        transpose = hf_name.startswith("h.") and hf_name.endswith(
            ("c_attn.weight", "c_proj.weight", "c_fc.weight"))
        return "transformer." + hf_name, transpose

    @torch.no_grad()
    def load_hf(self, tensors: dict[str, np.ndarray]) -> "TorchGPT2":
        """Copy Hugging Face-named tensors (``GPT2Config.to_file``: Conv1D [in][out],
        so a Linear weight is the tensor's transpose) into the parameters. Raises
        KeyError naming a missing or unexpected tensor, ValueError on a shape."""
        own = dict(self.named_parameters())  # the tied lm_head.weight appears as wte
        seen = set()
        for hf_name, arr in tensors.items():
            name, transpose = self._torch_name(hf_name)
            if name not in own:
                raise KeyError(f"unexpected tensor {hf_name!r}")
            a = np.asarray(arr, np.float32)
            a = a.T if transpose else a
            p = own[name]
            if tuple(a.shape) != tuple(p.shape):
                raise ValueError(f"tensor {hf_name!r} has shape {a.shape}, the model needs "
                                 f"{tuple(p.shape)}{' (transposed)' if transpose else ''}")
            p.copy_(torch.from_numpy(np.array(a, dtype=np.float32)))  # a copy: a may be read-only
            seen.add(name)
        missing = [n for n in own if n not in seen]
        if missing:
            raise KeyError(f"missing tensor for {missing[0]!r}")
        return self

    def hf_tensors(self) -> dict[str, np.ndarray]:
        """The parameters as Hugging Face-named float32 NumPy arrays (copies)."""
        out = {}
        for name, p in self.named_parameters():
            hf = name.removeprefix("transformer.")
            _, transpose = self._torch_name(hf)
            a = p.detach().cpu().numpy()
            out[hf] = np.ascontiguousarray(a.T if transpose else a).copy()
        return out


class RecipeTrainer:
    """nanoGPT train.py's optimisation of a TorchGPT2, one step per ``step`` call.

    configure_optimizers: torch.optim.AdamW (defaults: neither fused nor forced
    foreach) with two groups, weight decay on the parameters of >= 2 dimensions
    (embeddings, Linear weights) and none on the others (LayerNorm weights,
    biases). Each step sets get_lr(step) (Recipe.lr_at) on both groups, runs forward and
    backward on each micro-batch with the loss / grad_accum, clips the global
    gradient norm at grad_clip (clip_grad_norm_; 0: no clipping), steps, and
    zeroes the gradients.
    """

    def __init__(self, model: TorchGPT2, recipe: Recipe, step: int = 0):
        self.model = model
        self.recipe = recipe
        self.step_count = step
        params = [p for p in model.parameters() if p.requires_grad]
        self.params = params
        groups = [{"params": [p for p in params if p.dim() >= 2],
                   "weight_decay": recipe.weight_decay},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        self.opt = torch.optim.AdamW(groups, lr=recipe.lr, betas=(recipe.beta1, recipe.beta2),
                                     eps=recipe.eps)

    def step(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        """One optimiser step on micro-batches batch [A, B, T+1] (NumPy or torch):
        (the mean loss over the A micro-batches, the gradient norm before clipping),
        as 0-d tensors (no device sync)."""
        r = self.recipe
        lr = r.lr_at(self.step_count)
        for g in self.opt.param_groups:
            g["lr"] = lr
        self.model.train()
        dev = self.model.lm_head.weight.device
        batch = torch.as_tensor(batch).to(dev)
        A = batch.shape[0]
        total = torch.zeros((), device=dev)
        for a in range(A):
            loss = self.model.loss(batch[a]) / A
            loss.backward()
            total += loss.detach()
        norm = torch.nn.utils.clip_grad_norm_(self.params,
                                              r.grad_clip if r.grad_clip != 0 else math.inf)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.step_count += 1
        return total, norm

    @torch.no_grad()
    def evaluate(self, batches) -> float:
        """nanoGPT's estimate_loss on one split: the mean loss over batches [I, B, T+1]
        (model.eval(), no gradients), as our run.Run.evaluate (float64 mean)."""
        self.model.eval()
        dev = self.model.lm_head.weight.device
        batches = torch.as_tensor(batches).to(dev)
        losses = torch.stack([self.model.loss(b) for b in batches])
        self.model.train()
        return float(losses.double().cpu().numpy().mean())


@dataclass
class TorchRun:
    """A finished train_text run: per-step losses and gradient norms (float32
    [steps]), evaluations [[step, train, val], ...], and its times: wall_s the
    whole loop with evaluations, train_s the training steps only, eval_s the
    evaluations; positions = training tokens."""

    losses: np.ndarray
    norms: np.ndarray
    evals: list = field(default_factory=list)
    wall_s: float = 0.0
    train_s: float = 0.0
    eval_s: float = 0.0
    positions: int = 0


def _sync(model: torch.nn.Module) -> None:
    if model.lm_head.weight.device.type == "cuda":
        torch.cuda.synchronize()


def train_text(model: TorchGPT2, data: TextData, settings: Settings,
               on_eval: Callable[[int, float, float], None] | None = None,
               progress: Callable[[int, int, float], None] | None = None) -> TorchRun:
    """nanoGPT's training loop on our TextData, step for step as run.Run.run:
    step t trains on ``data.train_batch(t, seed, grad_accum, batch_size)``; the
    evaluations (at step 0, every eval_every steps and at the end) on
    ``data.eval_batches(split, seed, step, eval_iters, batch_size)``, val giving
    nan without a validation split. Batches are drawn before each stretch of
    steps between evaluations, outside the timed training (as run.Run draws
    a call's batches). ``on_eval(step, train, val)``; ``progress(step, steps,
    mean loss of the stretch)`` after each stretch."""
    s = settings  # checked when made (Settings)
    trainer = RecipeTrainer(model, s.optimizer)
    losses, norms, evals = [], [], []
    run = TorchRun(np.zeros(0, np.float32), np.zeros(0, np.float32), evals)

    def evaluate(step: int) -> None:
        t0 = time.perf_counter()
        out = []
        for split in ("train", "val"):
            if split == "val" and len(data.val) == 0:
                out.append(math.nan)
                continue
            out.append(trainer.evaluate(data.eval_batches(split, s.seed, step, s.eval_iters,
                                                          s.batch_size)))
        run.eval_s += time.perf_counter() - t0
        evals.append([step, *out])
        if on_eval:
            on_eval(step, out[0], out[1])

    start = time.perf_counter()
    evaluate(0)
    step = 0
    while step < s.num_steps:
        end = min(s.num_steps, (step // s.eval_every + 1) * s.eval_every)
        batches = [data.train_batch(t, s.seed, s.grad_accum, s.batch_size)
                   for t in range(step, end)]
        t0 = time.perf_counter()
        for b in batches:
            loss, norm = trainer.step(b)
            losses.append(loss)
            norms.append(norm)
        _sync(model)
        run.train_s += time.perf_counter() - t0
        if progress:
            progress(end, s.num_steps, float(torch.stack(losses[step:end]).mean()))
        step = end
        evaluate(step)
    run.wall_s = time.perf_counter() - start
    if losses:
        run.losses = torch.stack(losses).float().cpu().numpy()
        run.norms = torch.stack(norms).float().cpu().numpy()
    run.positions = s.num_steps * s.grad_accum * s.batch_size * model.config.block_size
    return run
