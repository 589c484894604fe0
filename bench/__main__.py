"""``python -m bench``: run the scaling sweep and microgpt's default job, write
bench/results/{sweep,default_job}.csv and the PNG plots, print a table and the
issue's targets. ``--help`` lists the options."""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

from . import RESULTS_DIR
from .configs import CONFIGS, select


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see --help)."""
    from .sweep import Settings

    d = Settings()
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="configurations A-C only (~3 min)")
    p.add_argument("--configs", help=f"comma-separated, from {','.join(CONFIGS)} (default: all)")
    p.add_argument("--backends", help="comma-separated: our built backends, c-threads, "
                                      "seed_port (microgpt's job only) and/or torch "
                                      "(default: all built ones and torch)")
    # the measurement's settings (sweep.Settings' fields, their defaults; the option is
    # the field's name without "_s")
    measure = {"steps_per_call": "K: training steps fused into one MicrogptModel.train call "
                                 "(default %(default)s)",
               "min_time": "seconds each rate is timed over, at least (default %(default)s)",
               "train_budget_s": "seconds the timed training calls may take, counted after "
                                 "the warm-up (default %(default)s)",
               "sample_budget_s": "the same for sampling (default %(default)s)",
               "warmup_budget_s": "seconds the warm-up call may take (pocl compiles kernels in "
                                  "it; default %(default)s)",
               "kill_slack_s": "seconds past its budget before a worker is killed (default "
                               "%(default)s)",
               "threads": "torch.set_num_threads, and c-threads' contexts (default: nproc = "
                          "%(default)s)",
               "torch_device": "where the PyTorch baseline runs (default %(default)s; cuda: "
                               "PyTorch CUDA, for a GPU machine)",
               "omp_wait_policy": "OMP_WAIT_POLICY for the torch workers (default %(default)s; "
                                  "'' leaves the environment's)"}
    for name, text in measure.items():
        default = getattr(d, name)
        p.add_argument("--" + name.removesuffix("_s").replace("_", "-"), type=type(default),
                       default=default, help=text,
                       choices=("cpu", "cuda") if name == "torch_device" else None)
    p.add_argument("--no-default-job", action="store_true", help="skip microgpt's default job")
    p.add_argument("--job-repeats", type=int, default=d.job_repeats,
                   help="runs of the default job per backend, median reported (default "
                        "%(default)s)")
    p.add_argument("--job-processes", type=int, default=d.job_processes,
                   help="workers per backend for the default job, run in interleaved rounds, "
                        "while each one succeeded with a median training time under %g s "
                        "(default %%(default)s)" % d.job_fast_s)
    p.add_argument("--no-sweep", action="store_true", help="only microgpt's default job")
    p.add_argument("--no-skip", action="store_true",
                   help="measure every cell, even where a cheaper one timed out on the backend")
    p.add_argument("--fresh", action="store_true",
                   help="replace the CSV files instead of merging with earlier rows")
    p.add_argument("--results", type=Path, default=RESULTS_DIR, help="output folder")
    p.add_argument("--build-log", type=Path, help="build.sh output to read compile times from")
    p.add_argument("--report", action="store_true",
                   help="measure nothing: redraw plots, README table and targets from the CSVs")
    return p.parse_args(argv)


def backends_to_run(spec: str | None, threads: int = 1) -> list[str]:
    """Backends named by --backends (checked), or every built one plus torch (and
    c-threads, the c kernels on ``threads`` threads, when threads > 1; and the
    seed_port baseline, for microgpt's job, when build.sh has compiled it)."""
    from microgpt_fut.backend.runtime import BACKENDS, built_backends

    from . import seed_port

    built = built_backends()
    if not spec:
        threaded = ["c-threads"] if "c" in built and threads > 1 else []
        # the baseline right after c: the default job's rounds then time them side by side
        baseline = [seed_port.NAME] if seed_port.built() else []
        return built[:1] + baseline + threaded + built[1:] + ["torch"]
    names = [b.strip() for b in spec.split(",") if b.strip()]
    for b in names:
        if b == seed_port.NAME:
            if not seed_port.built():
                raise SystemExit(f"{b} is not built: run BACKENDS={b} ./build.sh")
            continue
        if b != "torch" and b != "c-threads" and b not in BACKENDS:
            raise SystemExit(f"unknown backend {b!r}: choose from {', '.join(BACKENDS)}, "
                             f"c-threads, {seed_port.NAME}, torch")
        if b == "c-threads" and "c" not in built:
            raise SystemExit("c-threads needs the c backend, which is not built")
        if b not in ("torch", "c-threads") and b not in built:
            raise SystemExit(f"backend {b!r} is not built (built: {', '.join(built) or 'none'})")
        if b == "torch" and importlib.util.find_spec("torch") is None:
            raise SystemExit("torch is not installed: .venv/bin/pip install -e '.[bench]'")
    return names


def check_torch_device(device: str) -> None:
    """Exit with a one-line message when PyTorch cannot use ``device`` ("cuda")."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"--torch-device cuda: PyTorch {torch.__version__} sees no CUDA "
                         "device (a CPU build, or no GPU driver)")


def finish(results: Path, sweep_rows: list[dict], job_rows: list[dict],
           measured: set | None = None, measured_jobs: set | None = None) -> None:
    """Plots and README tables from all rows of the CSVs; the printed tables show the
    rows measured now (``measured``: (config, backend) pairs; ``measured_jobs``:
    backends; None: all), the targets are judged on all rows."""
    from . import plots, report

    for path in plots.write_all(sweep_rows, results):
        print(f"wrote {path}")
    readme = results.parent / "README.md"
    if report.update_readme(readme, sweep_rows, job_rows):
        print(f"updated the tables in {readme}")
    if sweep_rows and measured != set():
        print("\nSweep (x torch = ours / torch on the same configuration):")
        print(report.text(report.sweep_table(sweep_rows, measured)))
    if job_rows and measured_jobs != set():
        print("\nmicrogpt's default job (1000 steps, B=1):")
        print(report.text(report.default_job_table(job_rows, measured_jobs)))
    earlier = (measured is not None and len(measured) < len(sweep_rows)) or (
        measured_jobs is not None and len(measured_jobs) < len(job_rows))
    print("\nTargets (issues 3 and 19)" + (", from all rows of the CSV files (some measured earlier; "
                                   "see measured_at):" if earlier else ":"))
    for line in report.targets(sweep_rows, job_rows):
        print("  " + line)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bench``."""
    from . import report, seed_port, sweep

    args = parse_args(argv)
    results: Path = args.results
    sweep_csv, job_csv = results / "sweep.csv", results / "default_job.csv"
    if args.report:
        # compile times may be recorded after the sweep ran (compile_times.csv, --build-log)
        compile_s = sweep.compile_times(results, args.build_log)
        rows = sweep.read_csv(sweep_csv)
        for r in rows:
            b = report.library(r.get("backend", ""))
            if b in compile_s:
                r["compile_s"] = str(compile_s[b])
        finish(results, rows, sweep.read_csv(job_csv))
        return 0
    try:
        configs = select(args.configs, args.quick)
    except ValueError as e:
        raise SystemExit(str(e))
    backends = backends_to_run(args.backends, args.threads)
    if "torch" in backends and args.torch_device != "cpu":
        check_torch_device(args.torch_device)
    for opt in ("job_repeats", "job_processes"):
        if getattr(args, opt) < 1:
            raise SystemExit(f"--{opt.replace('_', '-')} must be at least 1, "
                             f"not {getattr(args, opt)}")
    s = sweep.Settings(steps_per_call=args.steps_per_call, min_time=args.min_time,
                       train_budget_s=args.train_budget, sample_budget_s=args.sample_budget,
                       warmup_budget_s=args.warmup_budget, kill_slack_s=args.kill_slack,
                       threads=args.threads, job_repeats=args.job_repeats,
                       job_processes=args.job_processes, torch_device=args.torch_device,
                       omp_wait_policy=args.omp_wait_policy)
    load = sweep.background_load()
    if load is not None and load > 0.2:
        print(f"warning: other processes keep {load:.1f} CPUs busy: the numbers will be "
              "noisy (torch with OMP_WAIT_POLICY=ACTIVE suffers most); column other_load "
              "says how busy the machine was during each measurement", flush=True)
    compile_s = sweep.compile_times(results, args.build_log)
    t0 = time.perf_counter()
    sweep_rows, job_rows = [], []
    measured: set = set()
    measured_jobs: set = set()
    if not args.no_default_job:
        def progress(row: dict) -> None:
            print(f"[{time.perf_counter() - t0:6.0f} s] default job {row['backend']:9s} "
                  f"training {row['train_s']} s, loss {row.get('loss_last100', '')} "
                  f"{row['notes']}", flush=True)
        # c-threads: one document per step cannot be split
        job_backends = [b for b in backends if b != "c-threads"]
        job_rows = sweep.measure_default_jobs(job_backends, s, progress)
        measured_jobs.update(job_backends)
        job_rows = sweep.write_csv(job_csv, job_rows, sweep.DEFAULT_JOB_COLUMNS, ("backend",),
                                   merge=not args.fresh)
    if not args.no_sweep:
        vocab = {k: sweep.vocab_size(k) for k in {c.data for c in configs}}
        rule = sweep.SkipRule(enabled=not args.no_skip)
        for cfg in configs:
            for b in backends:
                if b == "c-threads" and cfg.batch < 2:  # one row cannot be split: it is c
                    continue
                if b == seed_port.NAME:  # microgpt's sizes only, fixed at compile time
                    continue
                skip = rule.reasons(b, cfg, vocab[cfg.data])
                row = sweep.measure_cell(b, cfg, s, compile_s, vocab[cfg.data], skip)
                rule.record(b, cfg, vocab[cfg.data], row)
                print(f"[{time.perf_counter() - t0:6.0f} s] {cfg.name} {b:9s} "
                      f"train {row['train_tok_s']} tok/s, sample {row['sample_samples_s']}/s, "
                      f"peak {row['peak_rss_mb']} MB {row['notes']}", flush=True)
                sweep_rows.append(row)
                measured.add((cfg.name, b))
        sweep_rows = sweep.write_csv(sweep_csv, sweep_rows, sweep.SWEEP_COLUMNS,
                                     ("config", "backend"), merge=not args.fresh)
    else:
        sweep_rows = sweep.read_csv(sweep_csv)
    if args.no_default_job:
        job_rows = sweep.read_csv(job_csv)
    print(f"\nmeasured in {time.perf_counter() - t0:.0f} s; CSV files in {results}")
    finish(results, sweep_rows, job_rows, measured, measured_jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
