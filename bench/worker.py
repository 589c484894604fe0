"""One measurement in a fresh process: ``python -m bench.worker '<json spec>'``.

The spec names a phase ("train", "sample" or "default_job"), a backend (one of
ours or "torch") and, for train/sample, a configuration (bench.configs). The
worker prints one line ``BENCH {json}`` per event, flushed at once, so that the
parent keeps what was measured when it has to kill a worker that ran past its
time. Events: "setup" (idle_rss_mb: the peak RSS after imports and creating the
runtime, before any data or model), "ready" (data and model set up: the warm-up
starts), "warm" (warm-up done: the measurement's budget, budget_s, starts), "call" (a timed call begins: what, and its tokens or
samples), one result event per phase, or "error".
RSS figures are high-water marks of the worker's own memory (``peak_rss_mb``).
"""
from __future__ import annotations

import json
import math
import resource
import sys
import time
from dataclasses import dataclass

import numpy as np

from .report import library

now = time.perf_counter


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MiB.

    Linux: VmHWM of /proc/self/status, the high-water mark of this program's own
    memory. (``ru_maxrss`` is not used there: across fork and exec it keeps the
    parent's size at the fork, so every worker would report at least the parent's
    RSS.) Elsewhere ``ru_maxrss`` (KiB on Linux, bytes on macOS).
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024 if sys.platform == "darwin" else 1024)


def emit(event: str, **fields) -> None:
    """Print one ``BENCH {json}`` line (the parent parses these) and flush."""
    fields["event"] = event
    print("BENCH " + json.dumps(fields), flush=True)


def measure_budget(budget: float, warm_s: float) -> float:
    """Seconds for the timed calls after a warm-up of warm_s: the budget, but at least
    1.5 x the warm-up, so that one call like it fits. The "warm" event tells the
    parent, which kills the worker kill_slack_s after it."""
    return max(budget, 1.5 * warm_s)


class FutharkEngine:
    """Our kernels through the driver's own classes: a Runtime of one backend's library
    (``program``: microgpt's or GPT-2's), and models made, trained and sampled by their
    config's family (training/family.py: ``Family.model``, ``train``, ``names``), on
    the device or, for the bench backend "c-threads", over ``threads`` c contexts
    (parallel/host_state.py, as ``train --threads``). bench/gpu/worker.py uses it too.
    """

    def __init__(self, backend: str, program: str = "microgpt", threads: int = 1,
                 quiet: bool = True):
        from microgpt_fut.backend.runtime import Runtime

        self.rt = Runtime(library(backend), quiet=quiet, program=program)
        self.contexts = threads if backend == "c-threads" else 1
        cache = self.rt.kernel_cache
        self.kernel_cache = "off" if cache is None else ("hit" if cache.hit else "compiled")

    def model(self, config, params, num_steps: int, seed: int = 42, optimizer=None):
        """A Trainee of ``config`` (MicrogptConfig or GPT2Config): the arrays ``params``
        (None: the family's initialisation under ``seed``), trained towards num_steps
        with ``optimizer`` (None: the family's defaults, Family.optimizer)."""
        from microgpt_fut.training.family import family_of

        family = family_of(config)
        m = family.model(self.rt, config, seed, self.contexts, None, params)
        return Trainee(family, m, optimizer or family.optimizer({}, num_steps), num_steps)

    def train(self, t: "Trainee", tokens, n_pos) -> np.ndarray:
        """K steps in one call (Family.train): tokens int64 [K, A, B, T+1], n_pos [K, A, B]
        or None; the K losses as NumPy (so the device has finished)."""
        return t.family.train(t.model, tokens, n_pos, t.num_steps, t.optimizer)[0]

    def generate(self, t: "Trainee", n, temperature, seed, first):
        """Names first..first+n-1 (Family.names): int64 [n, block_size]."""
        return t.family.names(t.model, seed, n, temperature, first)

    def reset_peak(self) -> None:
        self.rt.reset_peak_memory()

    def peak_bytes(self) -> int | None:
        return self.rt.peak_memory()


@dataclass
class Trainee:
    """A model of FutharkEngine's with its family, optimiser and schedule length."""

    family: object
    model: object
    optimizer: object
    num_steps: int


class TorchEagerEngine:
    """The PyTorch eager baseline (bench.torch_ref) on ``threads`` threads, on
    ``device`` ("cpu", or "cuda" for PyTorch CUDA)."""

    def __init__(self, threads: int, device: str = "cpu"):
        import torch

        torch.set_num_threads(threads)
        self.torch = torch
        self.device = device

    def model(self, config, params, num_steps: int):
        from .torch_ref import TorchGPT, TorchTrainer

        return TorchTrainer(TorchGPT(config, params).to(self.device), num_steps)

    def train(self, m, tokens, n_pos):
        """K steps of tokens [K, 1, B, T+1], n_pos [K, 1, B] (one micro-batch a step)."""
        return m.train(tokens[:, 0], n_pos[:, 0])

    def generate(self, m, n, temperature, seed, first):
        from .torch_ref import generate

        return generate(m.model, n, temperature, seed * 1_000_003 + first)


def make_engine(spec: dict):
    """The engine the spec's backend names."""
    if spec["backend"] == "torch":
        return TorchEagerEngine(spec.get("threads", 1), spec.get("torch_device", "cpu"))
    return FutharkEngine(spec["backend"], threads=spec.get("threads", 1))


def _config(spec: dict, vocab_size: int):
    from microgpt_fut.models.microgpt import MicrogptConfig

    c = spec["config"]
    return MicrogptConfig(vocab_size, c["n_embd"], c["n_head"], c["n_layer"], c["block_size"])


def measure_train(engine, spec: dict, ds) -> None:
    """Training tokens/s: a 1-step warm-up call, a 1-step call to estimate a step's time,
    then calls of K steps until min_time seconds are timed or the budget is spent.

    Tokens are valid positions (sum of n_pos). When not even one K-step call fits in
    the budget, the 1-step call (after the warm-up) is the measurement. The budget
    starts after the warm-up (the "warm" event); the parent bounds set-up and warm-up.
    """
    from microgpt_fut.training.settings import Settings

    from .datasets import init_params

    B, K, min_time = spec["config"]["batch"], spec["steps_per_call"], spec["min_time"]
    budget = spec["budget_s"]
    config = _config(spec, ds.vocab.size)
    m = engine.model(config, init_params(config, spec["seed"]), num_steps=10 ** 6)
    emit("ready", rss_mb=peak_rss_mb())
    step = 0

    batch = Settings(batch_size=B)

    def call(k: int, what: str) -> tuple[float, int, np.ndarray]:
        nonlocal step
        tokens, n_pos, positions = ds.batches(step, k, batch)
        emit("call", what=what, tokens=positions)
        t0 = now()
        losses = engine.train(m, tokens, n_pos)
        step += k
        return now() - t0, positions, losses

    warm, _, _ = call(1, "first 1-step training call (warm-up)")
    t_phase, budget = now(), measure_budget(budget, warm)
    emit("warm", warmup_s=warm, budget_s=budget, rss_mb=peak_rss_mb())
    t_step, pos1, losses1 = call(1, "second 1-step training call")
    remaining = budget - (now() - t_phase)
    k_eff = max(1, min(K, int(remaining / (1.5 * t_step)) if t_step > 0 else K))
    timed = positions = steps = 0
    last = losses1
    while timed < min_time and now() - t_phase + 1.2 * k_eff * t_step <= budget:
        dt, pos, last = call(k_eff, f"{k_eff}-step training call")
        timed, positions, steps = timed + dt, positions + pos, steps + k_eff
    notes = []
    if steps == 0:
        timed, positions, steps, k_eff = t_step, pos1, 1, 1
        notes.append(f"from one 1-step call of {t_step:.2f} s")
    elif timed < min_time:
        notes.append(f"only {timed:.2f} s timed (budget)")
    if k_eff < K:
        notes.append(f"K={k_eff}")
    if not np.isfinite(last).all():
        notes.append("non-finite loss")
    emit("train", status="ok", tok_s=positions / timed, timed_s=timed, steps=steps,
         steps_per_call=k_eff, warmup_s=warm, last_loss=float(last[-1]),
         peak_rss_mb=peak_rss_mb(), note="; ".join(notes))


def measure_sample(engine, spec: dict, ds) -> None:
    """Samples/s: a warm-up generate of min(n, 16) samples, then calls of n samples
    (temperature 0.5, from the initial weights) until min_time seconds are timed or
    the budget (from the end of the warm-up) is spent; at least one call."""
    from .datasets import init_params

    n, min_time, budget = spec["config"]["sample_n"], spec["min_time"], spec["budget_s"]
    config = _config(spec, ds.vocab.size)
    m = engine.model(config, init_params(config, spec["seed"]), num_steps=1)
    emit("ready", rss_mb=peak_rss_mb())
    n_warm = min(n, 16)
    emit("call", what=f"first generate call ({n_warm} samples, warm-up)", samples=n_warm)
    t0 = now()
    engine.generate(m, n_warm, 0.5, spec["seed"], 0)
    warm = now() - t0
    t_phase, budget = now(), measure_budget(budget, warm * n / n_warm)
    emit("warm", warmup_s=warm, budget_s=budget, rss_mb=peak_rss_mb())
    timed, samples, calls, lengths, last = 0.0, 0, 0, [], 0.0
    bos = ds.vocab.bos
    while calls == 0 or (timed < min_time and now() - t_phase + 1.2 * last <= budget):
        emit("call", what=f"generate call of {n} samples", samples=n)
        t0 = now()
        rows = engine.generate(m, n, 0.5, spec["seed"], 1 + calls * n)
        last = now() - t0
        timed, samples, calls = timed + last, samples + n, calls + 1
        ends = np.argmax(np.concatenate([rows, np.full((n, 1), bos)], 1) == bos, axis=1)
        lengths.append(ends)
    lengths = np.concatenate(lengths)
    emit("sample", status="ok", samples_s=samples / timed, timed_s=timed, calls=calls,
         sample_len=float(lengths.mean()), warmup_s=warm, peak_rss_mb=peak_rss_mb(),
         note="" if timed >= min_time else f"only {timed:.2f} s timed (budget)")


def default_job(spec: dict, t_start: float) -> None:
    """microgpt's job: 1000 steps, B=1, microgpt's sizes, names.txt shuffled (seed 42).

    Ours: the driver's run on lines (run.Run over datasets.Lines) as
    ``microgpt-fut train`` runs it (Settings' defaults); train_s = time inside the
    device calls, job_s = the whole run from Lines and Run.start (encoding, init, NaN
    checks), total_s = from before importing the backend.
    torch: one document per step in eager mode, same order; its own N(0, 0.08)
    initialisation (NumPy, seed 42).  seed_port: the seed port's formulation
    (bench/seed_port.py), the whole job in one call from our initialisation
    (seed 42), same order; train_s = that call.  The job runs spec["repeats"] times in this
    process (a 0.1-0.2 s job is noisy here): train_s and job_s are the medians,
    train_s_all every run's train_s, the loss is the last run's.
    """
    from .datasets import load_docs

    docs, description = load_docs("names", 16)
    steps = spec.get("steps", 1000)

    def encoded():
        """(vocab, tokens, n_pos, prep_s): the documents as the CLI encodes them."""
        from microgpt_fut.data.lines import Vocab, shuffled

        t0 = now()
        vocab = Vocab.from_docs(docs)
        tokens, n_pos, _ = vocab.encode(shuffled(docs, 42), 16)
        return vocab, tokens, n_pos, now() - t0

    if spec["backend"] == "torch":
        import torch

        from microgpt_fut.models.microgpt import MicrogptConfig

        from .datasets import init_params
        from .torch_ref import TorchGPT, TorchTrainer

        torch.set_num_threads(spec.get("threads", 1))
        ctx = now() - t_start
        vocab, tokens, n_pos, prep_s = encoded()
        config = MicrogptConfig(vocab.size)

        def run_once() -> tuple[np.ndarray, float, float]:
            t1 = now()
            trainer = TorchTrainer(TorchGPT(config, init_params(config, 42))
                                   .to(spec.get("torch_device", "cpu")), steps)
            t2 = now()
            losses = np.concatenate([trainer.train(tokens[[s % len(docs)]][None],
                                                   n_pos[[s % len(docs)]][None])
                                     for s in range(steps)])
            return losses, now() - t2, prep_s + now() - t1
        spk = 1
    elif spec["backend"] == "seed_port":
        from .seed_port import SeedPort

        lib = SeedPort()
        ctx = now() - t_start
        vocab, tokens, n_pos, prep_s = encoded()
        rows = np.arange(steps) % len(docs)

        def run_once() -> tuple[np.ndarray, float, float]:
            t1 = now()
            losses = lib.job(vocab.size, 42, tokens[rows], n_pos[rows])
            return losses, now() - t1, prep_s + now() - t1
        spk = steps
    else:
        from microgpt_fut.backend.runtime import Runtime
        from microgpt_fut.data.lines import Vocab
        from microgpt_fut.models.microgpt import MicrogptConfig
        from microgpt_fut.data.datasets import Lines
        from microgpt_fut.training.run import Run
        from microgpt_fut.training.settings import Settings

        rt = Runtime(spec["backend"], quiet=True)
        ctx = now() - t_start
        settings = Settings(num_steps=steps)

        def run_once() -> tuple[np.ndarray, float, float]:
            t1 = now()
            config = MicrogptConfig(Vocab.from_docs(docs).size)
            run = Run.start(rt, Lines(docs, None, None, settings.seed, config.block_size),
                            settings, config)
            run.run()
            return np.asarray(run.losses), run.seconds, now() - t1
        spk = settings.steps_per_call
    runs = [run_once() for _ in range(max(1, spec.get("repeats", 1)))]
    losses = runs[-1][0]
    train_s = float(np.median([r[1] for r in runs]))
    job_s = float(np.median([r[2] for r in runs]))
    emit("default_job", status="ok", context_s=ctx, train_s=train_s, job_s=job_s,
         train_s_all=[r[1] for r in runs], job_s_all=[r[2] for r in runs],
         total_s=now() - t_start, loss_last100=float(np.mean(losses[-100:])),
         steps=steps, steps_per_call=spk, data=description, peak_rss_mb=peak_rss_mb(),
         note="" if math.isfinite(float(losses[-1])) else "non-finite loss")


def main(argv: list[str]) -> int:
    """Run the phase of the JSON spec in argv[1]; errors become an "error" event."""
    t_start = now()
    spec = json.loads(argv[1])
    phase = spec["phase"]
    try:
        if phase == "default_job":
            default_job(spec, t_start)
            return 0
        from .datasets import load

        engine = make_engine(spec)
        emit("setup", idle_rss_mb=peak_rss_mb(), setup_s=now() - t_start)
        ds = load(spec["config"]["data"], spec["config"]["block_size"])
        {"train": measure_train, "sample": measure_sample}[phase](engine, spec, ds)
    except Exception as e:  # reported to the parent, which records it in the notes
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        emit("error", phase=phase, error=f"{type(e).__name__}: {first}"[:300],
             peak_rss_mb=peak_rss_mb())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
