"""The memory a training run needs, estimated before anything is allocated.

A run that does not fit used to find out late: killed by the kernel's OOM killer
after a minute with no message, or failing at its first save after all the
training. ``check_run`` compares an estimate with what the machine has and
refuses the run in one line naming the option to change. The estimate is a
model fitted to peak resident memory measured here (one training step through
the library, c, multicore and opencl on pocl; tests/test_memory.py keeps it
honest):

- state: parameters, Adam's two moments, the gradient and the update's new
  copies (13-14 float32 per parameter at a step's peak, measured at 0.1M-25M
  parameters), and at a save the host's copies of all three and their
  serialised bytes (20 per parameter for microgpt, 24 for GPT-2, whose Conv1D
  tensors are transposed copies): STATE_FLOATS;
- activations kept for the backward pass, per document in flight: both
  models' backward by hand (c and multicore: model_grad.fut, gpt2_grad.fut)
  holds the whole batch's, and opencl and cuda map all B documents at once
  (fitted to pocl at n_embd 64 and 128 only: rough for GPUs, whose measurement
  is the GPU benchmark's job);
- token arrays on the host: the data's encoded documents or text, and one
  call's batches (--steps-per-call steps of B x (block_size + 1) int64) or an
  evaluation's (--eval-iters batches);
- the checkpoint's bytes, which must also fit on the disk beside --out (an
  atomic save writes the new file next to the old one).
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from .. import host_memory
from ..errors import RunTooLarge
from ..host_memory import format_bytes
from ..models.base import GPTConfigBase

STATE_FLOATS = 24  # float32 per parameter at the peak: a save's host copies (20-24 measured)
CONTEXT_FLOATS = 5  # each further --threads context: its own parameters, moments, gradient
# float32 kept per position of a document in flight: ACT_PER_LAYER * n_embd per layer,
# the [T] attention scores of each head, and the logits and their gradient (2 * V)
ACT_PER_LAYER = {"c": 24, "multicore": 24, "opencl": 150, "cuda": 150}
# GPT-2's backward by hand (gpt2_grad.fut) keeps more per layer (LayerNorms, GELU's
# hidden layer, biases): 37 measured on c, 48.1 on multicore (n_embd 128, 4 layers,
# block 64, the peak at batch 96 less the peak at batch 12; 46.6 before gemm's results
# became arrays of their own, `opaque`)
ACT_PER_LAYER_GPT2 = {"c": 40, "multicore": 52}
# opencl/cuda also hold about 11 n_embd^2 floats per position (measured on pocl at n_embd
# 128: 23 MB a document of 32 positions, with the layers' count hardly mattering; the
# flattened version Futhark picks at that size keeps [C][C] products per position)
GPU_PER_POSITION_C2 = 11
# ACT_PER_LAYER's counts hold the MLP's hidden layer at its default width, 4 n_embd; a
# wider one adds, per position and float of width past that, one saved hidden layer a
# layer and these, held while a layer's backward runs (the activation's input, output
# and gradients; GPT-2's more: GELU's, the biases'). Measured on c at --mlp-width 16000,
# n_embd 16, 1 layer, block 16 (batch 32 less batch 4): 6.05 width-floats a position in
# all for microgpt, 9.9 to 11.0 for GPT-2 (a fresh clone's CI), against 8 and 14 here.
MLP_TRANSIENT = {"microgpt": 7, "gpt2": 13}
FLOAT, INT = 4, 8


@dataclass(frozen=True)
class MemoryNeed:
    """Bytes a run needs, by part (see the module's docstring)."""

    state: int
    activations: int
    tokens: int
    checkpoint: int
    grad_accum: int = 1  # micro-batches a step (their token batches are built at once)
    eval_iters: int = 0  # batches per split of an evaluation (0: the run evaluates none)

    @property
    def total(self) -> int:
        """Memory in use at a training step's peak (the save's copies fit within it)."""
        return self.state + self.activations + self.tokens


def training_need(config: GPTConfigBase, backend: str, batch_size: int, steps_per_call: int,
                  data_tokens: int, grad_accum: int = 1, contexts: int = 1,
                  eval_iters: int = 0) -> MemoryNeed:
    """The estimate for a run of ``config`` (either model) on ``backend``.

    batch_size, grad_accum: documents (or windows) per micro-batch and micro-batches
    per step; steps_per_call: the most steps fused into one call (their batches
    are built at once); data_tokens: int64 tokens the data holds once encoded (N
    documents x (block_size + 1), or the text's length); contexts: --threads;
    eval_iters: batches per split of a text run's evaluation (made at once). The
    checkpoint's loss history (4 bytes a step) is left out: it grows with the
    steps actually trained, not with --steps.
    """
    P, T, L, C, V = (config.num_params(), config.block_size, config.n_layer, config.n_embd,
                     config.vocab_size)
    state = (STATE_FLOATS + CONTEXT_FLOATS * (contexts - 1)) * P * FLOAT
    per_layer = ACT_PER_LAYER.get(backend, 150)
    if config.arch == "gpt2":
        per_layer = ACT_PER_LAYER_GPT2.get(backend, per_layer)
    per_position = (L * (per_layer * C + config.n_head * T) + 2 * V
                    + (L + MLP_TRANSIENT[config.arch]) * max(0, config.mlp_width - 4 * C))
    if backend not in ("c", "multicore"):
        per_position += GPU_PER_POSITION_C2 * C * C
    # every backend holds the whole batch's (c and multicore: the backward by hand)
    activations = batch_size * T * per_position * FLOAT
    batch = steps_per_call * grad_accum * batch_size * (T + 1) * INT
    evaluation = eval_iters * batch_size * (T + 1) * INT
    tokens = 2 * data_tokens * INT + 3 * max(batch, evaluation)  # index, rows, device copy
    checkpoint = 3 * P * FLOAT
    return MemoryNeed(state, activations, tokens, checkpoint, grad_accum, eval_iters)


def _token_options(need: MemoryNeed) -> str:
    """The options the token batches grow with, for the hint: --grad-accum and --eval-iters
    only where the run accumulates or evaluates (microgpt refuses both)."""
    names = ["--batch-size", "--grad-accum" if need.grad_accum > 1 else "", "--steps-per-call",
             "--eval-iters" if need.eval_iters else ""]
    return ", ".join(n for n in names if n) + " or --block-size (token batches)"


def check_run(need: MemoryNeed, out: Path, device_memory: int = 0,
              available: int | None = None) -> None:
    """Raise RunTooLarge (one line naming the option) when the run needs more memory
    than ``available`` (default: host_memory.available_memory()), more than the device's
    ``device_memory`` for the state and activations (opencl/cuda; 0: unknown or the
    host's), or when its checkpoint would not fit on the disk holding ``out``."""
    available = host_memory.available_memory() if available is None else available
    parts = {"--n-embd/--n-layer/--mlp-width (the model's parameters and Adam's moments)":
             need.state,
             "--batch-size, --block-size or --mlp-width (activations of the batch)":
             need.activations,
             _token_options(need): need.tokens}
    culprit = max(parts, key=parts.get)
    if available is not None and need.total > available:
        raise RunTooLarge(
            f"this run needs about {format_bytes(need.total)} of memory (model and Adam "
            f"{format_bytes(need.state)}, activations {format_bytes(need.activations)}, "
            f"tokens {format_bytes(need.tokens)}) and the machine has "
            f"{format_bytes(available)} available: lower {culprit}")
    on_device = need.state + need.activations
    if device_memory and on_device > device_memory:
        raise RunTooLarge(
            f"this run needs about {format_bytes(on_device)} of device memory and the device "
            f"has {format_bytes(device_memory)}: lower "
            f"{culprit if culprit in list(parts)[:2] else '--batch-size'}")
    try:
        free = shutil.disk_usage(out.parent).free
    except OSError:
        return
    if need.checkpoint > free:
        raise RunTooLarge(
            f"the checkpoint will take about {format_bytes(need.checkpoint)} and the disk "
            f"holding --out {str(out)!r} has {format_bytes(free)} free: free space, choose "
            "another --out or lower --n-embd/--n-layer/--mlp-width")


# Sampling (cli `sample`, and the samples after `train`): the model on each context and
# the host's copies of it (checkpoint, state arrays with the optimiser's zero moments),
# and per row sampled at once the KV caches (twice while a paced call copies them), the
# whole-sequence forward past block_size and one call's tokens. Memory does not grow
# with --max-new-tokens: continuations are made in paced calls (sampling.py).
SAMPLE_STATE_FLOATS = 7      # host checkpoint + state arrays (4), the context's state (3)
SAMPLE_CONTEXT_FLOATS = 6    # each further --threads context: its state and host copies
INFER_PER_POSITION = 16      # float32 per position of a forward, times n_embd (one layer's)


@dataclass(frozen=True)
class SampleNeed:
    """Bytes sampling needs: ``state`` (the model, once per context) and ``per_row``
    (each sample made in the same call)."""

    state: int
    per_row: int

    def total(self, rows: int) -> int:
        return self.state + rows * self.per_row


def sampling_need(config: GPTConfigBase, contexts: int = 1, steps_per_call: int = 0) -> SampleNeed:
    """The estimate for sampling ``config`` over ``contexts`` c contexts (--threads):
    the model's float32 copies (SAMPLE_STATE_FLOATS per parameter, SAMPLE_CONTEXT_FLOATS
    more per further context) and, per row, the KV caches [n_layer][block_size][n_embd]
    for keys and values held twice, the activations of one whole-sequence forward of
    block_size positions (one layer's at a time, without a backward: the attention
    scores of each head, INFER_PER_POSITION * n_embd, the logits) and
    ``steps_per_call`` int64 tokens on the device and host. Fitted to the peak
    resident memory of `sample` on c (tests/test_memory.py: 1.5x the measured)."""
    P, T, L, C, V = (config.num_params(), config.block_size, config.n_layer, config.n_embd,
                     config.vocab_size)
    state = (SAMPLE_STATE_FLOATS + SAMPLE_CONTEXT_FLOATS * (contexts - 1)) * P * FLOAT
    kv = 2 * 2 * L * T * C * FLOAT
    forward = T * (INFER_PER_POSITION * C + config.n_head * T + 2 * V) * FLOAT
    return SampleNeed(state, kv + forward + 2 * steps_per_call * INT)


def sample_rows(need: SampleNeed, most: int, contexts: int = 1,
                available: int | None = None) -> int:
    """The most samples (1 <= rows <= most) one call can make within ``available`` bytes
    (default: host_memory.available_memory(); unknown: ``most``). Raises RunTooLarge
    (one line) when not even one fits: naming --threads and the most that fit when fewer
    contexts would, else saying the checkpoint's model is too large for the machine."""
    available = host_memory.available_memory() if available is None else available
    if available is None:
        return most
    if need.total(1) <= available:
        return max(1, min(most, (available - need.state) // max(1, need.per_row)))
    if contexts > 1:
        one = need.state // (SAMPLE_STATE_FLOATS + SAMPLE_CONTEXT_FLOATS * (contexts - 1))
        fit = (available - need.per_row - SAMPLE_STATE_FLOATS * one) // (SAMPLE_CONTEXT_FLOATS * one) + 1
        if fit >= 1:
            raise RunTooLarge(f"--threads {contexts}: sampling needs about "
                              f"{format_bytes(need.total(1))} of memory and the machine has "
                              f"{format_bytes(available)} available: at most --threads {fit} "
                              "fits")
    raise RunTooLarge(f"sampling this model needs about {format_bytes(need.total(1))} of "
                      f"memory and the machine has {format_bytes(available)} available: the "
                      "--checkpoint's model is too large for this machine")
