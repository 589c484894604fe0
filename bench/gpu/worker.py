"""One lane's measurements in a fresh process: ``python -m bench.gpu.worker '<json>'``.

The spec names an engine (our kernels on a backend, or PyTorch eager or
``torch.compile`` on a device), an architecture, configurations and a deadline
(Unix time), and a mode:

- ``first_step``: time from the start of this process to the end of its first
  training step at one configuration, in parts: imports, runtime (creating the
  Futhark context, which compiles or loads the kernels; CUDA's initialisation for
  PyTorch), model set-up, and the first step (which includes torch.compile's
  compilation).
- ``sweep``: for each configuration, training tokens/s (valid positions per
  second of K-step calls after a 1-step warm-up and a 1-step probe, until
  ``min_time`` is timed or the cell's budget is spent), peak device memory
  during training (Futhark's count of live arrays; PyTorch's
  ``max_memory_allocated``), and sampling samples/s (microgpt only, eager only).

Work on the GPU (every timed call, and the first step) runs under an exclusive
lock on ``$MICROGPT_FUT_GPU_LOCK`` when set, so that lanes measuring at the same
time never share the GPU; time spent waiting for it is reported and excluded.
torch.compile's warm-up call (its compilation, on the CPU) runs before the lock
is taken.
A configuration predicted not to fit before the deadline is skipped (from the
previous one's step time, scaled by parameters x positions, an overestimate: it
is skipped when even half of that does not fit). Events are printed
as ``BENCH {json}`` lines, flushed, so a killed worker's results are kept.
"""
from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
import time

import numpy as np

from ..worker import FutharkEngine, emit, peak_rss_mb

now = time.perf_counter
LOCK_ENV = "MICROGPT_FUT_GPU_LOCK"
SEED = 42


@contextlib.contextmanager
def gpu_lock():
    """Hold the lanes' GPU lock for the block; yields the seconds spent waiting."""
    path = os.environ.get(LOCK_ENV)
    if not path:
        yield 0.0
        return
    import fcntl

    t0 = now()
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield now() - t0
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def dataset(cfg: dict):
    """(the driver's dataset of a configuration, its vocabulary size): uniform token ids
    for GPT-2 (bench.datasets.random_stream: no tokenizer on the GPU machine), the
    named documents for microgpt (bench.datasets.load)."""
    from ..datasets import load, random_stream

    if cfg["arch"] == "gpt2":
        from .configs import GPT2_VOCAB

        return random_stream(GPT2_VOCAB, cfg["block_size"], SEED), GPT2_VOCAB
    ds = load(cfg["data"], cfg["block_size"])
    return ds, ds.vocab.size


def model_config(cfg: dict, vocab: int):
    """The MicrogptConfig (microgpt) or GPT2Config (gpt2, with biases) of a configuration."""
    from microgpt_fut.models.gpt2 import GPT2Config
    from microgpt_fut.models.microgpt import MicrogptConfig

    cls = GPT2Config if cfg["arch"] == "gpt2" else MicrogptConfig
    return cls(vocab, cfg["n_embd"], cfg["n_head"], cfg["n_layer"], cfg["block_size"])


def new_model(engine, config):
    """engine's model of ``config`` at SEED: GPT-2's own initialisation and nanoGPT's
    Recipe(), or microgpt's N(0, 0.08) (bench.datasets.init_params) and Adam, the
    schedule 10**6 steps long (a torch engine makes the same: TorchGPUEngine.model)."""
    if not isinstance(engine, FutharkEngine):
        return engine.model(config)
    from microgpt_fut.models.gpt2 import GPT2Config
    from microgpt_fut.training.optimizer import Recipe

    from ..datasets import init_params

    if isinstance(config, GPT2Config):  # GPT-2's init, on the device
        return engine.model(config, None, 10 ** 6, SEED, Recipe())
    return engine.model(config, init_params(config, SEED), 10 ** 6, SEED)


class TorchGPUEngine:
    """PyTorch (bench.torch_ref's models) eager, or with the model's forward under
    ``torch.compile``, on "cuda" or "cpu"; each model's architecture is its
    config's (GPT2Config: nanoGPT's GPT-2 and recipe; MicrogptConfig: microgpt's)."""

    def __init__(self, device: str, compiled: bool, compile_backend: str = "inductor"):
        import torch

        self.torch, self.device, self.compiled = torch, device, compiled
        self.compile_backend = compile_backend
        self.kernel_cache = ""
        if device == "cuda":
            torch.zeros(1, device="cuda")  # the CUDA context, inside runtime_s
        else:  # the dry run: lanes share the CPU, and spinning OpenMP threads starve them
            torch.set_num_threads(1)

    def model(self, config):
        from microgpt_fut.models.gpt2 import GPT2Config
        from microgpt_fut.training.optimizer import Recipe

        from ..datasets import init_params
        from ..torch_ref import RecipeTrainer, TorchGPT, TorchGPT2, TorchTrainer

        gpt2 = isinstance(config, GPT2Config)
        if gpt2:
            net = TorchGPT2(config, SEED).to(self.device)
        else:
            net = TorchGPT(config, init_params(config, SEED)).to(self.device)
        if self.compiled:  # the forward; the loss's cross-entropy and the optimiser stay eager
            net.forward = self.torch.compile(net.forward, dynamic=False,
                                             backend=self.compile_backend)
        return RecipeTrainer(net, Recipe()) if gpt2 else TorchTrainer(net, 10 ** 6)

    def train(self, m, tokens, n_pos) -> np.ndarray:
        """K steps of tokens [K, 1, B, T+1] (one micro-batch a step), n_pos [K, 1, B] or
        None (every position counts); the K losses."""
        from ..torch_ref import RecipeTrainer

        if isinstance(m, RecipeTrainer):
            losses = [m.step(tokens[k])[0] for k in range(tokens.shape[0])]
            return self.torch.stack(losses).float().cpu().numpy()
        return m.train(tokens[:, 0], n_pos[:, 0])

    def generate(self, m, n: int, temperature: float, seed: int, first: int) -> np.ndarray:
        from ..torch_ref import generate

        return generate(m.model, n, temperature, seed * 1_000_003 + first)

    def reset_peak(self) -> None:
        gc.collect()
        if self.device == "cuda":
            self.torch.cuda.empty_cache()
            self.torch.cuda.reset_peak_memory_stats()

    def peak_bytes(self) -> int | None:
        return self.torch.cuda.max_memory_allocated() if self.device == "cuda" else None


def make_engine(spec: dict):
    e = spec["engine"]
    if e["kind"] == "futhark":
        return FutharkEngine(e["backend"], spec["arch"], quiet=False)
    return TorchGPUEngine(e["device"], e.get("compile", False),
                          e.get("compile_backend", "inductor"))


def _mb(x) -> float | None:
    return None if x is None else round(x / 2**20, 1)


def first_step(spec: dict) -> None:
    """The ``first_step`` mode (see the module docstring); one "first_step" event.
    ``spec["launched"]``: the Unix time at which the parent started this process."""
    cfg = spec["configs"][0]
    startup_s = time.time() - spec["launched"]  # the interpreter, NumPy and this module
    t0 = now()
    if spec["engine"]["kind"] == "futhark":
        import microgpt_fut.models.gpt2  # noqa: F401  (and the runtime, futhark-ffi, cffi)
    else:
        import torch  # noqa: F401
    import_s = now() - t0
    t0 = now()
    engine = make_engine(spec)
    runtime_s = now() - t0
    emit("runtime", runtime_s=round(runtime_s, 3), kernel_cache=engine.kernel_cache)
    t0 = now()
    from microgpt_fut.training.settings import Settings

    ds, vocab = dataset(cfg)
    m = new_model(engine, model_config(cfg, vocab))
    setup_s = now() - t0
    # torch.compile's first step is mostly compiling, on the CPU: it takes no GPU lock
    with (contextlib.nullcontext(0.0) if getattr(engine, "compiled", False)
          else gpu_lock()) as waited:
        t0 = now()
        tokens, n_pos, _ = ds.batches(0, 1, Settings(batch_size=cfg["batch"]))
        losses = engine.train(m, tokens, n_pos)
        step_s = now() - t0
    emit("first_step", config=cfg["name"], startup_s=round(startup_s, 3),
         import_s=round(import_s, 3), runtime_s=round(runtime_s, 3), setup_s=round(setup_s, 3),
         first_step_s=round(step_s, 3), total_s=round(time.time() - spec["launched"] - waited, 3),
         lock_wait_s=round(waited, 3), kernel_cache=engine.kernel_cache,
         loss=float(losses[-1]), peak_rss_mb=round(peak_rss_mb(), 1))


def _cost(cfg: dict) -> float:
    """Rough work of a training step: parameters x positions (n_embd^2 x layers)."""
    C, L, T, B = cfg["n_embd"], cfg["n_layer"], cfg["block_size"], cfg["batch"]
    return (12 * C * C * L + 65 * C) * T * B


def measure_train(engine, m, cfg: dict, ds, spec: dict, deadline: float) -> dict:
    """Tokens/s of one configuration (see the module docstring)."""
    B, budget, min_time = cfg["batch"], spec["train_budget_s"], spec["min_time"]
    from microgpt_fut.training.settings import Settings

    step, batch = 0, Settings(batch_size=B)

    def call(k: int) -> tuple[float, int, np.ndarray]:
        nonlocal step
        tokens, n_pos, positions = ds.batches(step, k, batch)
        t0 = now()
        losses = engine.train(m, tokens, n_pos)
        step += k
        return now() - t0, positions, losses

    compiling = getattr(engine, "compiled", False)  # torch.compile's first call compiles on
    if compiling:                                     # the CPU: it waits for no GPU lock
        warm, _, _ = call(1)
    with gpu_lock() as waited:
        engine.reset_peak()
        if not compiling:
            warm, _, _ = call(1)
        emit("warm", config=cfg["name"], warmup_s=round(warm, 3))
        t_step, pos1, last = call(1)
        t_phase = now()
        k = max(1, min(spec["steps_per_call"], int(min_time / max(t_step, 1e-6)) + 1))
        timed = positions = steps = 0
        while (timed < min_time and now() - t_phase + 1.2 * k * t_step <= budget
               and time.time() + 1.2 * k * t_step < deadline):
            dt, pos, last = call(k)
            timed, positions, steps = timed + dt, positions + pos, steps + k
        peak = engine.peak_bytes()
    note = []
    if steps == 0:
        timed, positions, steps, k = t_step, pos1, 1, 1
        note.append(f"from one 1-step call of {t_step:.3g} s")
    if not np.isfinite(last).all():
        note.append("non-finite loss")
    return {"tok_s": round(positions / timed, 1), "timed_s": round(timed, 3), "steps": steps,
            "steps_per_call": k, "warmup_s": round(warm, 3), "step_s": round(t_step, 4),
            "peak_mem_mb": _mb(peak), "peak_rss_mb": round(peak_rss_mb(), 1),
            "loss": float(last[-1]), "lock_wait_s": round(waited, 3), "note": "; ".join(note)}


def measure_sample(engine, m, cfg: dict, spec: dict, deadline: float) -> dict:
    """Samples/s of one configuration: a warm-up call of min(n, 16) samples, then
    calls of n samples until min_time is timed or the budget is spent."""
    n, budget, min_time = cfg["sample_n"], spec["sample_budget_s"], spec["min_time"]
    n_warm = min(n, 16)
    with gpu_lock() as waited:
        t0 = now()
        engine.generate(m, n_warm, 0.5, SEED, 0)
        warm = now() - t0
        t_phase, timed, samples, calls, last = now(), 0.0, 0, 0, warm * n / n_warm
        if last > 3 * budget or time.time() + 1.2 * last > deadline:  # the warm-up must do
            return {"samples_s": round(n_warm / warm, 2), "timed_s": round(warm, 3), "calls": 0,
                    "warmup_s": round(warm, 3), "lock_wait_s": round(waited, 3),
                    "note": f"from the warm-up call of {n_warm} samples"}
        while calls == 0 or (timed < min_time and now() - t_phase + 1.2 * last <= budget
                             and time.time() + 1.2 * last < deadline):
            t0 = now()
            engine.generate(m, n, 0.5, SEED, 1 + calls * n)
            last = now() - t0
            timed, samples, calls = timed + last, samples + n, calls + 1
    return {"samples_s": round(samples / timed, 2), "timed_s": round(timed, 3), "calls": calls,
            "warmup_s": round(warm, 3), "lock_wait_s": round(waited, 3), "note": ""}


def sweep(spec: dict) -> None:
    """The ``sweep`` mode: a "train" (and "sample") event per configuration, or "skip"
    or "error" naming it."""
    deadline = spec["deadline"]
    engine = make_engine(spec)
    emit("runtime", kernel_cache=engine.kernel_cache)
    per_cost = None  # seconds per unit of _cost, from the last measured step
    for cfg in spec["configs"]:
        name = cfg["name"]
        if per_cost is not None:  # an overestimate where the last step was mostly overhead
            need = per_cost * _cost(cfg) * (3 + spec["steps_per_call"])
            if time.time() + need / 2 > deadline:
                emit("skip", config=name, reason=f"needs about {need:.0f} s, "
                     f"{max(0.0, deadline - time.time()):.0f} s left")
                continue
        try:
            ds, vocab = dataset(cfg)
            config = model_config(cfg, vocab)
            m = new_model(engine, config)
            result = measure_train(engine, m, cfg, ds, spec, deadline)
            per_cost = result["step_s"] / _cost(cfg)
            emit("train", config=name, n_params=config.num_params(), **result)
            if cfg["sample_n"] and spec.get("sample", True) and time.time() < deadline - 2:
                emit("sample", config=name, **measure_sample(engine, m, cfg, spec, deadline))
        except Exception as e:  # recorded, and the next configuration is tried
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            emit("error", config=name, error=f"{type(e).__name__}: {first}"[:300])
        finally:
            m = None  # the next configuration's memory is its own
            gc.collect()


def main(argv: list[str]) -> int:
    """Run the spec in argv[1]; an exception becomes an "error" event and exit status 1."""
    spec = json.loads(argv[1])
    try:
        (first_step(spec) if spec["mode"] == "first_step" else sweep(spec))
    except Exception as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        emit("error", config="", error=f"{type(e).__name__}: {first}"[:300])
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
