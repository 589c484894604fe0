"""Running the measurements: one fresh subprocess (bench.worker) per phase and cell.

A cell is one backend on one configuration; its training and sampling phases run
in separate subprocesses so that each phase's peak RSS is its own and a phase
that runs past its time (killed, recorded as "timeout") costs the other nothing.
"""
from __future__ import annotations

import csv
import json
import os
import queue
import re
import resource
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Callable

from . import REPO_ROOT
from .configs import BenchConfig
from .report import library, num

SWEEP_COLUMNS = ["config", "n_embd", "n_layer", "block_size", "batch", "n_params", "data",
                 "backend", "train_tok_s", "sample_samples_s", "peak_rss_mb", "idle_rss_mb",
                 "compile_s", "notes",
                 # extras, after the columns
                 "n_head", "steps_per_call", "train_steps", "train_timed_s", "sample_n",
                 "sample_len", "sample_peak_rss_mb", "other_load", "measured_at"]
DEFAULT_JOB_COLUMNS = ["backend", "steps", "batch", "n_embd", "n_layer", "block_size", "data",
                       "train_s", "job_s", "total_s", "context_s", "loss_last100",
                       "steps_per_call", "peak_rss_mb", "notes", "other_load", "measured_at"]


@dataclass(frozen=True)
class Settings:
    """How to measure: K steps per call, seconds to time at least, and the time limits
    of a phase: setup_timeout_s for imports, data and model (until "ready"), then
    warmup_budget_s for the warm-up call (until "warm"), then the measurement's budget
    (the worker stops starting calls); each is enforced by killing the worker
    kill_slack_s after it. Also torch's threads and device, the default job's time limit, how
    many times it runs in one worker, and in how many workers when a run takes less
    than job_fast_s (its median over all runs is reported)."""

    steps_per_call: int = 10
    min_time: float = 1.0
    train_budget_s: float = 10.0
    sample_budget_s: float = 6.0
    warmup_budget_s: float = 20.0
    kill_slack_s: float = 5.0
    threads: int = os.cpu_count() or 1
    seed: int = 42
    omp_wait_policy: str = "ACTIVE"
    setup_timeout_s: float = 120.0
    default_job_timeout_s: float = 240.0
    job_repeats: int = 3
    job_processes: int = 5
    job_fast_s: float = 2.0
    torch_device: str = "cpu"


def _busy_cpu_s() -> float | None:
    """CPU seconds all processes have used since boot (/proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    busy = sum(fields[:3]) + sum(fields[5:8])  # user nice system, irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


class OtherLoad:
    """Average number of CPUs that processes other than our workers kept busy between
    ``start()`` and ``stop()`` (our finished workers' CPU time is subtracted)."""

    def start(self) -> "OtherLoad":
        self.t, self.busy, self.ours = time.perf_counter(), _busy_cpu_s(), _children_cpu_s()
        return self

    def stop(self) -> float | None:
        busy = _busy_cpu_s()
        if busy is None or self.busy is None:
            return None
        wall = max(time.perf_counter() - self.t, 1e-6)
        other = (busy - self.busy) - (_children_cpu_s() - self.ours)
        return round(max(0.0, other / wall), 2)


def background_load(seconds: float = 1.0) -> float | None:
    """CPUs busy with other work right now, sampled over ``seconds``."""
    probe = OtherLoad().start()
    time.sleep(seconds)
    return probe.stop()


def worker_env(backend: str, omp_wait_policy: str = "ACTIVE") -> dict[str, str]:
    """The environment of a worker: ours inherit it; torch gets OMP_WAIT_POLICY
    (ACTIVE by default: on an idle machine small ops were up to 100x slower without
    it, as sleeping OpenMP threads were woken for every op; on a busy machine the
    spinning threads compete with the other load instead, see bench/README.md)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    if backend == "torch" and omp_wait_policy:
        env["OMP_WAIT_POLICY"] = omp_wait_policy
    return env


RESULT_EVENTS = ("train", "sample", "default_job", "error")
EXIT_GRACE_S = 30.0


@dataclass
class WorkerResult:
    """What a worker printed and how it ended.

    events: the BENCH events, each with ``_t`` (seconds since the start, on
    arrival); status: "ok", "timeout" (killed) or "crashed: exit code N";
    killed_at: seconds since the start when killed; stderr: its last lines.
    """

    events: list[dict]
    status: str
    killed_at: float | None
    stderr: str

    def last(self, name: str) -> dict | None:
        """The last event called ``name``."""
        found = [e for e in self.events if e["event"] == name]
        return found[-1] if found else None


def run_worker(spec: dict, budget: float | None, slack: float, setup_timeout: float,
               omp_wait_policy: str = "ACTIVE", warmup: float = 0.0) -> WorkerResult:
    """Run bench.worker on spec, killing it when it runs past its time.

    The worker has ``setup_timeout`` s to print its "ready" event (imports, data,
    model), then ``warmup + slack`` s to print "warm", then the measurement's budget
    (``budget``, or more after a long warm-up: the event's budget_s) + slack s;
    with budget None, setup_timeout is its whole time. Events are read as they
    come, so a killed worker's are kept.
    """
    proc = subprocess.Popen([sys.executable, "-m", "bench.worker", json.dumps(spec)],
                            cwd=REPO_ROOT, env=worker_env(spec["backend"], omp_wait_policy),
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines: queue.Queue = queue.Queue()

    def pump(stream, tag):
        for line in stream:
            lines.put((tag, line))
        lines.put((tag, None))

    for stream, tag in ((proc.stdout, "out"), (proc.stderr, "err")):
        threading.Thread(target=pump, args=(stream, tag), daemon=True).start()
    t0 = time.perf_counter()
    deadline = t0 + setup_timeout
    events, err, open_streams, killed_at = [], [], 2, None
    while open_streams:
        wait = deadline - time.perf_counter()
        if wait <= 0 and killed_at is None:
            proc.kill()
            killed_at = time.perf_counter() - t0
        try:
            tag, line = lines.get(timeout=max(wait, 0.05) if killed_at is None else 10.0)
        except queue.Empty:
            if killed_at is not None:
                break  # killed, and its pipes stay open (a grandchild?): stop reading
            continue
        if line is None:
            open_streams -= 1
        elif tag == "out" and line.startswith("BENCH "):
            ev = json.loads(line[6:])
            ev["_t"] = time.perf_counter() - t0
            events.append(ev)
            if killed_at is not None:
                continue
            if budget is not None and ev["event"] == "ready":
                deadline = time.perf_counter() + warmup + slack
            elif budget is not None and ev["event"] == "warm":
                deadline = time.perf_counter() + ev.get("budget_s", budget) + slack
            elif ev["event"] in RESULT_EVENTS:  # measured: give it time to exit cleanly
                deadline = time.perf_counter() + EXIT_GRACE_S
        elif tag == "err":
            err = (err + [line.rstrip()])[-3:]
    rc = proc.wait()
    status = "timeout" if killed_at is not None else (
        "ok" if rc == 0 else f"crashed: exit code {rc}")
    return WorkerResult(events, status, killed_at, " | ".join(err)[-300:])


def _phase(spec: dict, s: Settings, budget: float, result_event: str
           ) -> tuple[dict | None, dict | None, str]:
    """(setup event, result event, note) of one phase; the note says what went wrong."""
    w = run_worker(spec, budget, s.kill_slack_s, s.setup_timeout_s, s.omp_wait_policy,
                   s.warmup_budget_s)
    setup, result, error = w.last("setup"), w.last(result_event), w.last("error")
    note = ""
    if error:
        note = f"{result_event} error: {error['error']}"
    elif result is not None:
        extra = [result["note"]] if result.get("note") else []
        if w.status != "ok":  # measured, then hung or crashed on the way out
            extra.append(f"worker {w.status} after measuring")
        note = f"{result_event}: {'; '.join(extra)}" if extra else ""
    elif w.status == "timeout":
        call = w.last("call")
        if call is None:
            note = f"{result_event}: killed after {w.killed_at:.0f} s, still setting up"
        else:
            took = w.killed_at - call["_t"]
            note = f"{result_event}: killed {took:.0f} s into its {call['what']}"
            if "tokens" in call:
                note += f" (< {call['tokens'] / took:.3g} tok/s in that call)"
            elif "samples" in call:
                note += f" (< {call['samples'] / took:.3g} samples/s in that call)"
    else:
        note = f"{result_event}: worker {w.status}" + (f": {w.stderr}" if w.stderr else "")
    if result is not None and result.get("status") != "ok":
        result = None
    return setup, result, note


def n_params(cfg: BenchConfig, vocab_size: int) -> int:
    """Parameter count of a configuration with the given vocabulary."""
    from microgpt_fut.models.microgpt import MicrogptConfig

    return MicrogptConfig(vocab_size, cfg.n_embd, cfg.n_head, cfg.n_layer,
                          cfg.block_size).num_params()


def vocab_size(kind: str) -> int:
    """Vocabulary size (characters + BOS) of dataset kind, without encoding it."""
    from microgpt_fut.data.lines import Vocab

    from .datasets import load_docs

    return Vocab.from_docs(load_docs(kind, 16)[0]).size


def _fmt(x, digits: int = 1):
    return "" if x is None else round(float(x), digits)


def _busy_note(load: float | None) -> str:
    return f"other processes busy ({load:.1f} CPUs)" if load is not None and load > 0.2 else ""


def train_cost(cfg: BenchConfig, vocab: int) -> int:
    """Work of one training step, roughly: parameters x positions per step."""
    return n_params(cfg, vocab) * cfg.batch * cfg.block_size


def sample_cost(cfg: BenchConfig, vocab: int) -> int:
    """Work of one generate call, roughly: parameters x samples x positions."""
    return n_params(cfg, vocab) * cfg.sample_n * cfg.block_size


class SkipRule:
    """Skip a phase on a backend once it timed out there on a configuration that was
    less work (``train_cost`` / ``sample_cost``): a bigger one cannot be faster."""

    COSTS = {"train": train_cost, "sample": sample_cost}
    COLUMNS = {"train": "train_tok_s", "sample": "sample_samples_s"}

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.cheapest_timeout: dict[tuple[str, str], tuple[int, str]] = {}

    def reasons(self, backend: str, cfg: BenchConfig, vocab: int) -> dict[str, str]:
        """{phase: why it is skipped} for this cell (empty: run everything)."""
        out = {}
        for phase, cost in self.COSTS.items():
            worst = self.cheapest_timeout.get((backend, phase))
            if self.enabled and worst and cost(cfg, vocab) >= worst[0]:
                out[phase] = f"skipped: it timed out at {worst[1]}, and {cfg.name} is more work"
        return out

    def record(self, backend: str, cfg: BenchConfig, vocab: int, row: dict) -> None:
        """Remember the phases of a measured row that timed out."""
        for phase, cost in self.COSTS.items():
            c = cost(cfg, vocab)
            known = self.cheapest_timeout.get((backend, phase))
            if row[self.COLUMNS[phase]] == "timeout" and (known is None or c < known[0]):
                self.cheapest_timeout[(backend, phase)] = (c, cfg.name)


def measure_cell(backend: str, cfg: BenchConfig, s: Settings, compile_s: dict[str, float],
                 vocab: int, skip: dict[str, str] | None = None) -> dict:
    """One CSV row: training and sampling of ``cfg`` on ``backend``, each in its own process.

    ``skip`` maps a phase ("train", "sample") to the reason for not running it
    (its column then says "skipped").
    """
    skip = skip or {}
    base = {"phase": "", "backend": backend, "config": {**cfg.to_dict(), "data": cfg.data},
            "steps_per_call": s.steps_per_call, "min_time": s.min_time, "threads": s.threads,
            "seed": s.seed, "torch_device": s.torch_device}
    probe = OtherLoad().start()
    none = (None, None, "")
    tr_setup, tr, tr_note = none if "train" in skip else _phase(
        {**base, "phase": "train", "budget_s": s.train_budget_s}, s, s.train_budget_s, "train")
    sa_setup, sa, sa_note = none if "sample" in skip else _phase(
        {**base, "phase": "sample", "budget_s": s.sample_budget_s}, s, s.sample_budget_s,
        "sample")
    load = probe.stop() if len(skip) < 2 else None
    tr_note = f"train: {skip['train']}" if "train" in skip else tr_note
    sa_note = f"sample: {skip['sample']}" if "sample" in skip else sa_note
    setup = tr_setup or sa_setup
    notes = [n for n in (_device_note(backend, s), tr_note, sa_note, _busy_note(load)) if n]

    def failed(note: str) -> str:
        if note.split(": ", 1)[-1].startswith("skipped"):
            return "skipped"
        return "error" if " error:" in note or "crashed" in note else "timeout"

    return {
        "config": cfg.name, "n_embd": cfg.n_embd, "n_layer": cfg.n_layer,
        "block_size": cfg.block_size, "batch": cfg.batch, "n_params": n_params(cfg, vocab),
        "data": cfg.data, "backend": backend,
        "train_tok_s": _fmt(tr["tok_s"]) if tr else failed(tr_note),
        "sample_samples_s": _fmt(sa["samples_s"]) if sa else failed(sa_note),
        "peak_rss_mb": _fmt(tr["peak_rss_mb"]) if tr else "",
        "idle_rss_mb": _fmt(setup["idle_rss_mb"]) if setup else "",
        "compile_s": _fmt(compile_s.get(library(backend))), "notes": "; ".join(notes),
        "n_head": cfg.n_head, "steps_per_call": tr["steps_per_call"] if tr else "",
        "train_steps": tr["steps"] if tr else "",
        "train_timed_s": _fmt(tr["timed_s"], 2) if tr else "",
        "sample_n": cfg.sample_n, "sample_len": _fmt(sa["sample_len"]) if sa else "",
        "sample_peak_rss_mb": _fmt(sa["peak_rss_mb"]) if sa else "", "other_load": load,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def measure_default_job(backend: str, s: Settings) -> dict:
    """One row of default_job.csv: microgpt's 1000-step job on ``backend``."""
    spec = {"phase": "default_job", "backend": backend, "threads": s.threads, "steps": 1000,
            "torch_device": s.torch_device, "repeats": s.job_repeats}
    probe = OtherLoad().start()
    w = run_worker(spec, None, 0.0, s.default_job_timeout_s, s.omp_wait_policy)
    load = probe.stop()
    r, error = w.last("default_job"), w.last("error")
    row = {"backend": backend, "steps": 1000, "batch": 1, "n_embd": 16, "n_layer": 1,
           "block_size": 16, "other_load": load,
           "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    if r is None:
        why = error["error"] if error else (
            f"killed after {w.killed_at:.0f} s" if w.status == "timeout" else
            f"worker {w.status}" + (f": {w.stderr}" if w.stderr else ""))
        return {**row, "data": "names", "train_s": "timeout" if w.status == "timeout" else "error",
                "notes": "; ".join(filter(None, [why, _busy_note(load)]))}
    return {**row, "data": r["data"], "train_s": _fmt(r["train_s"], 4),
            "job_s": _fmt(r["job_s"], 4), "total_s": _fmt(r["total_s"], 3),
            "context_s": _fmt(r["context_s"], 3), "loss_last100": _fmt(r["loss_last100"], 4),
            "steps_per_call": r["steps_per_call"], "peak_rss_mb": _fmt(r["peak_rss_mb"]),
            "train_s_all": r.get("train_s_all", []), "job_s_all": r.get("job_s_all", []),
            "notes": "; ".join(filter(None, [_spread_note(r.get("train_s_all", [])),
                                             _device_note(backend, s), r.get("note", ""),
                                             _busy_note(load)]))}


def _device_note(backend: str, s: Settings) -> str:
    """'PyTorch on cuda' for torch rows not measured on the CPU."""
    return f"PyTorch on {s.torch_device}" if backend == "torch" and s.torch_device != "cpu" else ""


def measure_default_jobs(backends: list[str], s: Settings,
                         report: Callable[[dict], None] | None = None) -> list[dict]:
    """microgpt's job on each backend, in s.job_processes rounds of one worker per
    backend; after the first round only backends whose every worker succeeded with
    a median train_s under s.job_fast_s get another. On this machine one process can
    run the same library 1.5x slower than the next, so fast backends are compared
    over several, interleaved. One row per backend (``combine_jobs``);
    ``report(row)`` is called after each worker."""
    per: dict[str, list[dict]] = {b: [] for b in backends}
    for round_ in range(max(1, s.job_processes)):
        for b in backends:
            times = [num(r["train_s"]) for r in per[b]]
            if round_ > 0 and (None in times or max(times) >= s.job_fast_s):
                continue
            per[b].append(measure_default_job(b, s))
            if report:
                report(per[b][-1])
    return [combine_jobs(per[b]) for b in backends]


def combine_jobs(rows: list[dict]) -> dict:
    """One default_job.csv row from the rows (at least one) of one backend's workers:
    train_s and job_s the medians over all runs of the workers that succeeded,
    total_s and context_s the medians over those workers, the peak RSS and other
    load the largest, the loss the last one's; each distinct note once, and one
    saying how many workers failed. When none succeeded, the last worker's row."""
    if len(rows) == 1:
        return rows[0]
    ok = [r for r in rows if num(r["train_s"]) is not None]
    if not ok:
        return rows[-1]
    runs = [t for r in ok for t in r.get("train_s_all") or [r["train_s"]]]
    job_runs = [t for r in ok for t in r.get("job_s_all") or [r["job_s"]]]
    loads = [r["other_load"] for r in rows if r.get("other_load") is not None]
    failed = [r for r in rows if r not in ok]
    notes = [_spread_note(runs, len(ok))] + [
        n for r in ok for n in r.get("notes", "").split("; ") if not n.startswith("median of")]
    notes += [f"{len(failed)} of {len(rows)} workers failed: {failed[-1].get('notes', '')}"
              ] if failed else []
    return {**ok[-1], "train_s": _fmt(median(runs), 4), "job_s": _fmt(median(job_runs), 4),
            "total_s": _fmt(median([r["total_s"] for r in ok]), 3),
            "context_s": _fmt(median([r["context_s"] for r in ok]), 3),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in ok),
            "other_load": max(loads) if loads else None, "train_s_all": runs,
            "job_s_all": job_runs, "notes": "; ".join(dict.fromkeys(filter(None, notes)))}


def _spread_note(runs: list[float], processes: int = 1) -> str:
    """'median of 3 runs (0.12-0.21 s)' for a default job run more than once
    ('median of 9 runs in 3 processes (...)' over several workers)."""
    if len(runs) < 2:
        return ""
    where = f" in {processes} processes" if processes > 1 else ""
    return f"median of {len(runs)} runs{where} ({min(runs):.4g}-{max(runs):.4g} s)"


COMPILE_LINE = re.compile(r"backend (\S+) compiled in (\d+(?:\.\d+)?) s")


def compile_times(results: Path, build_log: Path | None = None) -> dict[str, float]:
    """Compile time per backend: ``results/compile_times.csv`` (columns backend,
    compile_s) and/or build.sh's ``backend X compiled in N s`` lines in build_log
    (the log wins). Missing files give no entries."""
    out: dict[str, float] = {}
    path = results / "compile_times.csv"
    if path.exists():
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                try:
                    out[row["backend"].strip()] = float(row["compile_s"])
                except (KeyError, ValueError, AttributeError):
                    continue
    if build_log is not None and build_log.exists():
        for m in COMPILE_LINE.finditer(build_log.read_text(errors="replace")):
            out[m.group(1)] = float(m.group(2))
    return out


def read_csv(path: Path) -> list[dict]:
    """Rows of a CSV file as dicts (empty when the file does not exist)."""
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def write_csv(path: Path, rows: list[dict], columns: list[str], keys: tuple[str, ...],
              merge: bool = True) -> list[dict]:
    """Write rows; with merge, rows already in the file whose key differs are kept.

    Rows are ordered by key; returns what was written.
    """
    old = read_csv(path) if merge else []
    new_keys = {tuple(str(r[k]) for k in keys) for r in rows}
    kept = [r for r in old if tuple(r.get(k, "") for k in keys) not in new_keys]
    allrows = kept + [{c: r.get(c, "") for c in columns} for r in rows]
    order = {"c": 0, "c-threads": 0.5, "multicore": 1, "opencl": 2, "cuda": 3, "seed_port": 8,
             "torch": 9}
    allrows.sort(key=lambda r: tuple((order.get(str(r.get(k)), 5), str(r.get(k)))
                                     if k == "backend" else str(r.get(k)) for k in keys))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(allrows)
    return allrows
