"""The benchmark harness (bench/): workers, time limits, CSV, tables, targets, plots.

Runs on the c backend with tiny budgets; needs neither torch nor matplotlib
(the plot test is skipped without matplotlib).
"""
from __future__ import annotations

import csv
import re

import pytest

from bench import report, sweep
from bench.configs import CONFIGS, BenchConfig, select
from conftest import need_library

FAST = sweep.Settings(min_time=0.05, train_budget_s=2.0, sample_budget_s=2.0, kill_slack_s=5.0)


@pytest.fixture(scope="module")
def need_c():
    need_library("c")


def test_cell_on_c_has_rates_and_memory(need_c):
    """Config A on c: positive rates, peak RSS >= idle RSS > 0, no notes."""
    row = sweep.measure_cell("c", CONFIGS["A"], FAST, {"c": 12.0}, sweep.vocab_size("names"))
    assert row["train_tok_s"] > 0 and row["sample_samples_s"] > 0, row["notes"]
    assert row["peak_rss_mb"] >= row["idle_rss_mb"] > 0
    assert row["compile_s"] == 12.0 and row["n_params"] == 4192 and row["data"] == "names"
    assert 0 < row["sample_len"] <= 16


def test_cell_on_c_threads(need_c):
    """Config B on c-threads (2 contexts): positive rates; a default sweep lists it
    after c when threads > 1, and not otherwise."""
    import dataclasses

    from bench.__main__ import backends_to_run

    row = sweep.measure_cell("c-threads", CONFIGS["B"], dataclasses.replace(FAST, threads=2),
                             {"c": 12.0}, sweep.vocab_size("names"))
    assert row["train_tok_s"] > 0 and row["sample_samples_s"] > 0, row["notes"]
    assert row["compile_s"] == 12.0  # c's library
    two, one = backends_to_run(None, 2), backends_to_run(None, 1)
    assert [b for b in two if b != "seed_port"][:2] == ["c", "c-threads"]
    assert "c-threads" not in one
    assert [b for b in two if b != "c-threads"] == one


def test_slow_call_is_killed_and_recorded(need_c):
    """A warm-up call far beyond its limit: the worker is killed, the cell says timeout."""
    heavy = BenchConfig("H", 256, 8, 4, 128, 64, 64)
    s = sweep.Settings(min_time=0.05, warmup_budget_s=0.0, kill_slack_s=0.5)
    row = sweep.measure_cell("c", heavy, s, {}, sweep.vocab_size("shakespeare"),
                             skip={"sample": "skipped: not needed here"})
    assert row["train_tok_s"] == "timeout"
    assert "killed" in row["notes"] and "warm-up" in row["notes"]
    assert row["sample_samples_s"] == "skipped"


def test_bad_config_is_an_error(need_c):
    """n_embd not divisible by n_head: both phases report the error."""
    bad = BenchConfig("X", 10, 4, 1, 16, 1, 4)
    row = sweep.measure_cell("c", bad, FAST, {}, sweep.vocab_size("names"))
    assert row["train_tok_s"] == "error" and row["sample_samples_s"] == "error"
    assert "not divisible" in row["notes"]


def test_default_job_on_c(need_c):
    """microgpt's 1000-step job: a time (the median of FAST.job_repeats runs, their
    spread in the notes), and microgpt's loss range."""
    row = sweep.measure_default_job("c", FAST)
    assert row["train_s"] > 0, row["notes"]
    assert 1.5 < row["loss_last100"] < 3.0
    assert row["total_s"] >= row["job_s"] >= row["train_s"]
    spread = rf"median of {FAST.job_repeats} runs \((\S+)-(\S+) s\)"
    low, high = map(float, re.search(spread, row["notes"]).groups())
    assert low * 0.999 <= row["train_s"] <= high * 1.001  # all rounded to 4 digits


@pytest.fixture(scope="module")
def need_seed_port():
    from bench import seed_port

    if not seed_port.built():  # `./build.sh all` builds it
        pytest.fail("the seed_port baseline is not built: run `./build.sh all` (or "
                    "BACKENDS=seed_port ./build.sh)", pytrace=False)


def test_seed_port_computes_microgpts_job(need_c, need_seed_port):
    """The seed port's formulation (token-by-token through a KV cache inside vjp2)
    against the float64 reference and our c backend (whole sequence, causal mask):
    same initialisation, first loss = the reference loss, 30 steps of one document
    each = c's 30 losses with num_steps 30."""
    import numpy as np
    import reference as R

    from bench.datasets import load_docs
    from bench.seed_port import SeedPort
    from conftest import get_runtime
    from microgpt_fut.data.lines import Vocab, shuffled
    from microgpt_fut.models.microgpt import MicrogptConfig, MicrogptModel
    from microgpt_fut.training.optimizer import Adam

    docs, _ = load_docs("names", 16)
    vocab = Vocab.from_docs(docs)
    tokens, n_pos, _ = vocab.encode(shuffled(docs, 42), 16)
    S = 30
    losses = SeedPort().job(vocab.size, 42, tokens[:S], n_pos[:S])
    assert losses.shape == (S,) and losses.dtype == np.float32
    model = MicrogptModel.init(get_runtime("c"), MicrogptConfig(vocab.size), 42)
    assert losses[0] == pytest.approx(
        R.batch_loss(model.params(), tokens[:1], n_pos[:1], 4), rel=1e-5)
    ours = model.train(tokens[:S, None], n_pos[:S, None], Adam(), S)[0]
    np.testing.assert_allclose(losses, ours, rtol=2e-4)
    assert losses[-10:].mean() < losses[:10].mean() - 0.2  # it learns
    with pytest.raises(ValueError, match=r"seed_port: tokens must be \[S, 17\]"):
        SeedPort().job(vocab.size, 42, tokens[:2, :16], n_pos[:2])
    with pytest.raises(ValueError, match=r"seed_port: n_pos must be in 1\.\.16"):
        SeedPort().job(vocab.size, 42, tokens[:2], n_pos[:2] * 0)
    with pytest.raises(ValueError, match=r"seed_port: token ids must be in 0\.\.26"):
        SeedPort().job(vocab.size, 42, tokens[:2] + vocab.size, n_pos[:2])


def test_default_job_on_seed_port(need_c, need_seed_port):
    """The baseline's row of default_job.csv: a time, microgpt's loss range, the
    whole job in one call; the targets line puts it beside our best."""
    row = sweep.measure_default_job("seed_port", FAST)
    assert row["train_s"] > 0, row["notes"]
    assert 1.5 < row["loss_last100"] < 3.0 and row["steps_per_call"] == 1000
    from bench.__main__ import backends_to_run

    assert backends_to_run(None, 1)[:2] == ["c", "seed_port"]  # side by side in the job's rounds
    assert backends_to_run("seed_port") == ["seed_port"]


def test_default_jobs_in_rounds(monkeypatch):
    """Fast backends get job_processes workers in interleaved rounds, a slow or failed
    one a single worker; the rows combine every run of a backend's good workers,
    and a backend stops getting workers once one failed."""
    import dataclasses

    calls = []
    fake = {"c": [[0.10, 0.12, 0.30], [0.11, 0.20, 0.13], None],
            "multicore": [[0.3, 0.3, 0.3], None], "torch": [[3.0, 3.2, 2.9]], "opencl": [None]}

    def measure(backend, s):
        calls.append(backend)
        runs = fake[backend][sum(c == backend for c in calls) - 1]
        if runs is None:
            return {"backend": backend, "train_s": "timeout", "notes": "killed after 240 s"}
        return {"backend": backend, "train_s": sorted(runs)[1], "job_s": sorted(runs)[1] + 1,
                "train_s_all": runs, "job_s_all": [r + 1 for r in runs], "total_s": 2.0,
                "context_s": 0.5, "loss_last100": 2.28, "peak_rss_mb": 40.0 + len(calls),
                "other_load": 0.0, "notes": f"median of 3 runs (x); busy; run {len(calls)}"}

    monkeypatch.setattr(sweep, "measure_default_job", measure)
    rows = sweep.measure_default_jobs(["c", "multicore", "opencl", "torch"],
                                      dataclasses.replace(FAST, job_processes=4))
    assert calls == ["c", "multicore", "opencl", "torch", "c", "multicore", "c"]
    c, multicore, opencl, torch = rows
    assert c["train_s"] == 0.125 and c["job_s"] == 1.125 and c["peak_rss_mb"] == 45.0
    assert c["notes"] == ("median of 6 runs in 2 processes (0.1-0.3 s); busy; run 1; run 5; "
                          "1 of 3 workers failed: killed after 240 s")
    assert multicore["train_s"] == 0.3 and "1 of 2 workers failed" in multicore["notes"]
    assert opencl["train_s"] == "timeout" and torch["train_s"] == 3.0
    assert torch["notes"] == "median of 3 runs (x); busy; run 4"


@pytest.mark.parametrize("opt", ["--job-repeats", "--job-processes"])
def test_job_counts_must_be_positive(need_c, opt):
    """A count below 1 stops the bench with one line naming the option, before any
    measurement or any CSV is written."""
    from bench.__main__ import main

    with pytest.raises(SystemExit, match=f"^{opt} must be at least 1, not 0$"):
        main([opt, "0", "--backends", "c", "--no-sweep", "--results", "/nonexistent/x"])


def test_skip_rule():
    """After a timeout, configurations that are more work are skipped, cheaper ones not."""
    rule, v = sweep.SkipRule(), 66
    rule.record("c", CONFIGS["D"], v, {"train_tok_s": "timeout", "sample_samples_s": 9.0})
    assert "train" in rule.reasons("c", CONFIGS["E"], v)
    assert "sample" not in rule.reasons("c", CONFIGS["E"], v)
    assert rule.reasons("c", CONFIGS["C"], v) == {} and rule.reasons("torch", CONFIGS["F"], v) == {}
    assert sweep.SkipRule(enabled=False).reasons("c", CONFIGS["F"], v) == {}


def test_select_configs():
    assert [c.name for c in select(None, quick=True)] == ["A", "B", "C"]
    assert [c.name for c in select("b, a")] == ["B", "A"]
    assert CONFIGS["C"].data == "shakespeare" and CONFIGS["B"].data == "names"
    with pytest.raises(ValueError, match="Z"):
        select("A,Z")


def test_compile_times_from_csv_and_log(tmp_path):
    (tmp_path / "compile_times.csv").write_text("backend,compile_s\nc,40\nopencl,x\n")
    log = tmp_path / "build.log"
    log.write_text("==> backend multicore compiled in 55 s\n==> backend c compiled in 41 s\n")
    assert sweep.compile_times(tmp_path) == {"c": 40.0}
    assert sweep.compile_times(tmp_path, log) == {"c": 41.0, "multicore": 55.0}
    assert sweep.compile_times(tmp_path / "missing") == {}


def rows():
    base = {"n_embd": 16, "n_layer": 1, "block_size": 16, "batch": 32, "n_params": 4192,
            "data": "names", "compile_s": "", "notes": ""}
    return [{**base, "config": "B", "backend": "c", "train_tok_s": 30000,
             "sample_samples_s": 5000, "peak_rss_mb": 45, "idle_rss_mb": 37},
            {**base, "config": "B", "backend": "torch", "train_tok_s": 10000,
             "sample_samples_s": 1000, "peak_rss_mb": 344, "idle_rss_mb": 250},
            {**base, "config": "C", "backend": "c", "train_tok_s": "timeout",
             "sample_samples_s": 100, "peak_rss_mb": "", "idle_rss_mb": 37},
            {**base, "config": "C", "backend": "torch", "train_tok_s": 30000,
             "sample_samples_s": 2000, "peak_rss_mb": 360, "idle_rss_mb": 250}]


def test_write_csv_merges_by_key(tmp_path):
    path = tmp_path / "s.csv"
    sweep.write_csv(path, rows(), sweep.SWEEP_COLUMNS, ("config", "backend"))
    new = {**rows()[0], "train_tok_s": 1}
    out = sweep.write_csv(path, [new], sweep.SWEEP_COLUMNS, ("config", "backend"))
    assert len(out) == 4
    with path.open() as f:
        back = list(csv.DictReader(f))
    assert [(r["config"], r["backend"]) for r in back] == [("B", "c"), ("B", "torch"),
                                                             ("C", "c"), ("C", "torch")]
    assert back[0]["train_tok_s"] == "1"
    assert len(sweep.write_csv(path, [new], sweep.SWEEP_COLUMNS, ("config", "backend"),
                               merge=False)) == 1


def test_tables_and_targets(tmp_path):
    r = rows()
    md = report.markdown(report.sweep_table(r))
    assert md.splitlines()[0].startswith("| config | backend |")
    assert "| 3.00x |" in md and "timeout" in md
    job = [{"backend": "c", "train_s": 0.04, "loss_last100": 2.30, "job_s": 0.1},
           {"backend": "seed_port", "train_s": 0.2, "loss_last100": 2.31},
           {"backend": "torch", "train_s": 2.0, "loss_last100": 2.32}]
    lines = report.targets(r, job)
    assert lines[0].startswith("default job") and lines[0].endswith("met")
    assert "c 0.040 s" in lines[0] and "5.0x the seed port's formulation, 0.200 s" in lines[0]
    assert "seed port" not in report.targets(r, [job[0], job[2]])[0]
    assert any(line.startswith("tokens/s vs torch at B >= 3x: met") for line in lines)
    assert "default job >= 4.6x the seed port's formulation's speed: met (5.0x)" in lines
    assert any(line.startswith("tokens/s vs torch at C >= 1.5x: missed") for line in lines)
    assert any(line.startswith("samples/s vs torch at B >= 1x: met (best 5.00x") for line in lines)
    assert any(line.startswith("samples/s vs torch at C >= 1x: missed (best 0.05x")
               for line in lines)
    assert any(line.startswith("peak RSS <= 1.5x torch at B: met") for line in lines)
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{report.README_START}\nold\n{report.README_END}\nend\n")
    assert report.update_readme(readme, r, job)
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("end\n") and "old" not in text
    assert "| B | c |" in text
    assert not report.update_readme(tmp_path / "none.md", r, job)


def test_plots(tmp_path):
    pytest.importorskip("matplotlib")
    from bench import plots

    paths = plots.write_all(rows(), tmp_path)
    assert [p.name for p in paths] == ["tokens_per_s.png", "ratio_vs_torch.png"]
    assert all(p.stat().st_size > 10_000 for p in paths)
