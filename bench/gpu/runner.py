"""The GPU run's schedule, in lanes that overlap: ``python -m bench.gpu.runner``.

Started by ``bench/gpu/run`` (which installs the carried wheels first). Three
lanes run side by side, each a sequence of subprocess steps with deadlines:

- one per library (microgpt's, GPT-2's): build the CFFI module from the carried
  C; first training step in a fresh process with empty kernel caches (ours and
  the CUDA driver's: NVRTC and the driver's PTX compiler run here, minutes); the
  library's tests (pytest, holding the GPU lock); the first step again in a new
  process (cached kernels); then the sweep of its configurations;
- PyTorch: first steps (eager, then ``torch.compile`` with an empty and then a
  filled inductor cache), the eager sweep, the ``torch.compile`` sweep.

Compiling (gcc, NVRTC, inductor) runs on the CPU while another lane measures;
every timed GPU call holds ``$MICROGPT_FUT_GPU_LOCK`` (bench.gpu.worker), so no
two measurements share the GPU. Each step has its own cap and all end before
the run's deadline; a step that overruns is killed and what it measured is
kept. The dry run (``--dry-run``) is the same schedule on the c backend and
PyTorch CPU, with the configurations shrunk; the carried CUDA C is then only
fixed up and its header parsed.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import REPO_ROOT
from . import configs as C
from .worker import LOCK_ENV

REPORT_RESERVE_S = 25.0  # kept at the end for the report
KILL_GRACE_S = 5.0
CAPS = {"build": 240.0, "cold": 330.0, "tests": 120.0, "cached": 90.0}
DRY_CAPS = {"build": 420.0, "cold": 120.0, "tests": 300.0, "cached": 60.0}


@dataclass
class Step:
    """A finished subprocess step: status "ok", "failed (exit N)", "killed at its
    deadline" or "not run: <why>"; its BENCH events; its last output lines."""

    name: str
    status: str
    seconds: float = 0.0
    events: list[dict] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)  # a worker's: engine, arch, mode, state, configs

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class Run:
    """One GPU run (or dry run): settings, environment, log and every step's outcome."""

    def __init__(self, args: argparse.Namespace):
        self.dry_run = args.dry_run
        self.out = Path(args.out)
        self.scratch = Path(args.scratch)
        self.payload = Path(args.payload)
        self.started = args.started or time.time()
        self.end = self.started + args.budget - REPORT_RESERVE_S
        self.caps = DRY_CAPS if self.dry_run else CAPS
        self.backend = "c" if self.dry_run else "cuda"
        self.device = "cpu" if self.dry_run else "cuda"
        self.steps: list[Step] = []
        self._lock = threading.Lock()
        self.out.mkdir(parents=True, exist_ok=True)
        for d in ("kernels", "nv-compute-cache", "inductor-first", "inductor-sweep"):
            (self.scratch / d).mkdir(parents=True, exist_ok=True)
        self.log = open(self.out / "gpu_run.log", "a", buffering=1)
        self.env = self._environment()

    def _environment(self) -> dict[str, str]:
        """Every step's environment: this checkout's code, the scratch build folder,
        empty kernel caches (ours, the CUDA driver's), the GPU lock."""
        s = self.scratch
        env = dict(os.environ)
        env.update({
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT / "driver"), str(REPO_ROOT),
                                                        env.get("PYTHONPATH", "")])),
            "PYTHONUNBUFFERED": "1",
            "MICROGPT_FUT_BUILD": str(s / "build"),
            "MICROGPT_FUT_KERNEL_CACHE": str(s / "kernels"),
            "CUDA_CACHE_PATH": str(s / "nv-compute-cache"),
            # the driver's cache of PTX compiled for the GPU; its default size (256 MiB
            # on recent drivers) might not hold both libraries' kernels
            "CUDA_CACHE_MAXSIZE": "4294967296",
            LOCK_ENV: str(s / "gpu.lock"),
            "TORCHINDUCTOR_CACHE_DIR": str(s / "inductor-sweep"),
            "TRITON_CACHE_DIR": str(s / "inductor-sweep" / "triton"),
        })
        return env

    def say(self, msg: str) -> None:
        """A line in the log and on stdout, stamped with seconds since the start."""
        line = f"[{time.time() - self.started:7.1f} s] {msg}"
        with self._lock:
            print(line, flush=True)
            self.log.write(line + "\n")

    def left(self) -> float:
        return self.end - time.time()

    def step(self, name: str, argv: list[str], cap: float, env: dict | None = None,
             meta: dict | None = None) -> Step:
        """Run argv (in the repository root) until it exits or min(now + cap, the run's
        end) passes, then kill its process group; every output line goes to the log
        prefixed with ``name``, and ``BENCH`` lines are parsed as events."""
        deadline = min(time.time() + cap, self.end)
        if self.end - time.time() < 3:
            st = Step(name, "not run: no time left", meta=meta or {})
            self._record(st)
            return st
        self.say(f"{name}: start (cap {deadline - time.time():.0f} s)")
        t0 = time.time()
        proc = subprocess.Popen(argv, cwd=REPO_ROOT, env=env or self.env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        st = Step(name, "ok", meta=meta or {})

        def pump():
            for line in proc.stdout:
                line = line.rstrip("\n")
                if line.startswith("BENCH "):
                    with contextlib.suppress(ValueError):
                        st.events.append(json.loads(line[6:]))
                st.tail = (st.tail + [line])[-20:]
                with self._lock:
                    self.log.write(f"  {name} | {line}\n")

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            rc = proc.wait(timeout=max(0.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait()
            st.status = "killed at its deadline"
        reader.join(timeout=10)
        if st.status == "ok" and rc != 0:
            st.status = f"failed (exit {rc})"
        st.seconds = round(time.time() - t0, 1)
        self._record(st)
        return st

    def _record(self, st: Step) -> None:
        with self._lock:
            self.steps.append(st)
        self.say(f"{st.name}: {st.status} after {st.seconds:.1f} s"
                 + (f"; last line: {st.tail[-1][:200]}" if not st.ok and st.tail else ""))

    def skip(self, name: str, why: str, meta: dict | None = None) -> Step:
        st = Step(name, f"not run: {why}", meta=meta or {})
        self._record(st)
        return st

    def python(self, *args: str) -> list[str]:
        return [sys.executable, *args]

    def worker(self, name: str, spec: dict, cap: float, env: dict | None = None,
               state: str = "") -> Step:
        """A bench.gpu.worker step; the spec gets the deadline and launch time, the
        step's meta what the report needs (engine, arch, mode, state, configs)."""
        deadline = min(time.time() + cap, self.end)
        spec = {"min_time": 1.0, "train_budget_s": 6.0 if not self.dry_run else 3.0,
                "sample_budget_s": 4.0 if not self.dry_run else 2.0, "steps_per_call": 10,
                **spec, "deadline": deadline - KILL_GRACE_S, "launched": time.time()}
        meta = {"engine": engine_label(spec["engine"]), "arch": spec["arch"],
                "mode": spec["mode"], "state": state, "device": self.device,
                "configs": spec["configs"]}
        return self.step(name, self.python("-m", "bench.gpu.worker", json.dumps(spec)), cap, env,
                         meta)


def engine_label(engine: dict) -> str:
    """"cuda"/"c" for our kernels, "torch" (eager) or "torch.compile"."""
    if engine["kind"] == "futhark":
        return engine["backend"]
    return "torch.compile" if engine.get("compile") else "torch"


def _configs(run: Run, arch: str, compiled: bool = False) -> list[dict]:
    return [c.to_dict() for c in C.configs(run.dry_run, arch)
            if not compiled or c.torch_compile]


def _first_config(run: Run, arch: str) -> list[dict]:
    return [C.first_step_config(arch, run.dry_run).to_dict()]


def futhark_lane(run: Run, arch: str) -> None:
    """Build, cold first step, tests, cached first step, sweep: one library."""
    target = run.backend if arch == "microgpt" else f"gpt2_{run.backend}"
    source = (run.payload / target) if not run.dry_run else (REPO_ROOT / "build" / target)
    eng = {"kind": "futhark", "backend": run.backend}
    later = {"first step (cold)": ("first_step", "cold"), "tests": ("", ""),
             "first step (cached)": ("first_step", "cached"), "sweep": ("sweep", "")}

    def skip_rest(why: str, after: str = "") -> None:
        todo = list(later)[list(later).index(after) + 1:] if after else list(later)
        for what in todo:
            mode, state = later[what]
            meta = {"engine": run.backend, "arch": arch, "mode": mode, "state": state,
                    "device": run.device, "configs": _configs(run, arch) if mode == "sweep"
                    else _first_config(run, arch)} if mode else None
            run.skip(f"{target} {what}", why, meta)

    b = run.step(f"build {target}", run.python("-m", "bench.gpu.build", target, str(source),
                                                str(run.scratch / "build")), run.caps["build"])
    if not b.ok:
        return skip_rest(f"build {target} {b.status}")
    cold = run.worker(f"{target} first step (cold)", {"mode": "first_step", "engine": eng,
                      "arch": arch, "configs": _first_config(run, arch)}, run.caps["cold"],
                      state="cold")
    if not any(e["event"] == "runtime" for e in cold.events):  # no context: no cached kernels
        return skip_rest(f"its first context did not start ({cold.status})",
                         "first step (cold)")
    tests = ["tests/test_kernels.py", "tests/test_kernel_cache.py"] if arch == "microgpt" \
        else ["tests/test_gpt2.py"]
    with gpu_held(run):  # its backend's tests alone: the machine builds no other library
        run.step(f"{target} tests", run.python("-m", "pytest", "-q", "-p", "no:cacheprovider",
                                               "-o", "addopts=-ra", *tests), run.caps["tests"],
                 {**run.env, "MICROGPT_FUT_TEST_BACKENDS": run.backend})
    run.worker(f"{target} first step (cached)", {"mode": "first_step", "engine": eng,
               "arch": arch, "configs": _first_config(run, arch)}, run.caps["cached"],
               state="cached")
    run.worker(f"{target} sweep", {"mode": "sweep", "engine": eng, "arch": arch,
               "configs": _configs(run, arch)}, run.left())


@contextlib.contextmanager
def gpu_held(run: Run):
    """Hold the GPU lock in this process for the block (the tests take no lock)."""
    import fcntl

    with open(run.env[LOCK_ENV], "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def torch_lane(run: Run) -> None:
    """PyTorch: eager first steps, the eager sweep, the torch.compile sweep (the
    targets' ratios), then torch.compile's first steps with empty and then filled
    inductor and Triton caches (their own folders: the sweep's do not warm them)."""
    eager = {"kind": "torch", "device": run.device, "compile": False}
    # the dry run compiles with dynamo and AOTAutograd but no inductor code generation:
    # inductor's C++ took 169 s for one first step on the 2 busy vCPUs here
    comp = {**eager, "compile": True,
            "compile_backend": "aot_eager" if run.dry_run else "inductor"}
    for arch in ("microgpt", "gpt2"):
        for state in ("cold", "cached"):
            run.worker(f"torch {arch} first step ({state})", {"mode": "first_step",
                       "engine": eager, "arch": arch, "configs": _first_config(run, arch)},
                       run.caps["cached"], state=state)
    run.worker("torch sweep", {"mode": "sweep", "engine": eager, "arch": "microgpt",
               "configs": _configs(run, "microgpt") + _configs(run, "gpt2")}, run.left())
    run.worker("torch.compile sweep", {"mode": "sweep", "engine": comp, "arch": "microgpt",
               "configs": _configs(run, "microgpt", True) + _configs(run, "gpt2", True),
               "sample": False}, run.left())
    first = run.scratch / "inductor-first"
    env = {**run.env, "TORCHINDUCTOR_CACHE_DIR": str(first),
           "TRITON_CACHE_DIR": str(first / "triton")}
    for arch in ("gpt2", "microgpt"):
        for state in ("cold", "cached"):
            run.worker(f"torch.compile {arch} first step ({state})", {"mode": "first_step",
                       "engine": comp, "arch": arch, "configs": _first_config(run, arch)},
                       run.caps["cold"], env, state=state)


def main(argv: list[str] | None = None) -> int:
    """Run the schedule, then write the report (bench.gpu.report) into --out."""
    from . import report
    from .payload import PayloadError, verify

    p = argparse.ArgumentParser(prog="python -m bench.gpu.runner", description=__doc__)
    p.add_argument("--out", required=True, help="folder for CSV, PNG, summary and log")
    p.add_argument("--scratch", required=True, help="folder for builds, caches and the lock")
    p.add_argument("--payload", default=str(REPO_ROOT / "bench" / "gpu" / "payload"))
    p.add_argument("--budget", type=float, default=500.0,
                   help="seconds from --started to the end of the report (default %(default)s)")
    p.add_argument("--started", type=float, help="Unix time the run started (default: now)")
    p.add_argument("--dry-run", action="store_true",
                   help="c backend and PyTorch CPU, shrunk configurations (this machine)")
    args = p.parse_args(argv)
    run = Run(args)
    run.say(f"{'dry run' if run.dry_run else 'GPU run'}: budget {args.budget:.0f} s, "
            f"report by +{run.end - run.started:.0f} s; out {run.out}; scratch {run.scratch}")
    try:
        manifest = verify(run.payload)
    except PayloadError as e:
        run.say(f"error: {e}")
        return 1
    run.say(f"payload: commit {manifest['git_commit']}, Futhark {manifest['futhark']}, "
            f"made {manifest['created']}")
    if run.dry_run:
        for t in ("cuda", "gpt2_cuda"):
            run.step(f"{t} C: fix-ups and header", run.python(
                "-m", "bench.gpu.build", "--check-header", t, str(run.payload / t),
                str(run.scratch / "cuda-check")), 120)
    lanes = [threading.Thread(target=futhark_lane, args=(run, a), name=a)
             for a in ("microgpt", "gpt2")] + [threading.Thread(target=torch_lane, args=(run,))]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    run.say("lanes done; writing the report")
    written = report.write(run.out, run.steps, run.dry_run, manifest, run.started)
    run.say("wrote " + ", ".join(p.name for p in written))
    run.say(f"done in {time.time() - run.started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
