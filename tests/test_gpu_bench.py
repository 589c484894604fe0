"""The GPU run's machinery (bench/gpu), on this machine: the payload's manifest, the
build step's fix-ups (the same as build.sh's), the configurations, the worker's
lock and data, the runner's deadlines, and the report. The whole run is
rehearsed by ``bench/gpu/run --dry-run`` (minutes), not here.
"""
from __future__ import annotations

import json
import lzma
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest

from bench.gpu import build as gbuild
from bench.gpu import configs as C
from bench.gpu import payload as P
from bench.gpu import report, runner, worker
from conftest import REPO_ROOT, get_runtime

SAMPLE_C = """static int cache_restore(const char *fname) {
  *buflen = f_size - CACHE_HEADER_SIZE;
  *buf = malloc(*buflen);
  if (fread(*buf, sizeof(char), *buflen, f) != *buflen) {
}
static int setup(void) {
  CUDA_SUCCEED_FATAL(cuCtxCreate(&ctx->cu_ctx, 0, ctx->dev));
}
"""


def _build_sh_sed(function: str) -> str:
    """The sed expression of a build.sh fix-up function."""
    text = (REPO_ROOT / "build.sh").read_text()
    body = text[text.index(f"{function}() {{"):]
    return re.search(r"sed -i '([^']*)'", body).group(1)


def test_fixups_match_build_sh(tmp_path):
    """bench/gpu/build.py applies exactly build.sh's cache_fixup and cuda_fixup."""
    ours = tmp_path / "ours.c"
    ours.write_text(SAMPLE_C)
    cuda = tmp_path / "cuda"
    (cuda / "include").mkdir(parents=True)
    (cuda / "include" / "cuda.h").write_text("#define cuCtxCreate cuCtxCreate_v4\n")
    applied = gbuild.fix_up(ours, "cuda", cuda)
    assert applied == ["cache reader NUL-terminated", "cuCtxCreate for CUDA 13"]
    theirs = tmp_path / "theirs.c"
    theirs.write_text(SAMPLE_C)
    for fn in ("cache_fixup", "cuda_fixup"):
        subprocess.run(["sed", "-i", _build_sh_sed(fn), str(theirs)], check=True)
    assert ours.read_text() == theirs.read_text() != SAMPLE_C
    assert "calloc(*buflen + 1, 1)" in ours.read_text()
    assert gbuild.fix_up(ours, "cuda", cuda) == ["cache reader NUL-terminated (already)"]
    ours.write_text("int main(void) { return 0; }\n")
    with pytest.raises(gbuild.BuildError, match="cache_restore"):
        gbuild.fix_up(ours, "cuda", cuda)
    assert gbuild.fix_up(ours, "c", None) == []  # CPU backends: nothing to fix


def test_build_py_resolves_targets_as_build_sh(tmp_path, monkeypatch):
    """bench/gpu/build.py and build.sh read one table (targets.txt): for every target,
    `./build.sh targets` (build.sh's own functions) and build.py give the same backend,
    compiler and flags, with a CUDA toolkit and without; build.sh has no flags of its own."""
    text = (REPO_ROOT / "build.sh").read_text()
    assert "-O1" not in text and "-O3" not in text
    cuda = tmp_path / "cuda"
    (cuda / "include").mkdir(parents=True)
    monkeypatch.delenv("CC", raising=False)
    for cuda_home, bits in ((cuda, None), (tmp_path / "none", None), (cuda, "256"),
                            (cuda, "512")):
        if bits:
            monkeypatch.setenv("VECTOR_BITS", bits)
        env = {**os.environ, "CUDA_HOME": str(cuda_home)}
        out = subprocess.run(["bash", str(REPO_ROOT / "build.sh"), "targets"], env=env,
                             capture_output=True, text=True, check=True).stdout
        rows = [line.split("\t") for line in out.splitlines()]
        assert [r[0] for r in rows] == [r[0] for r in gbuild.table_rows("target")]
        for name, program, backend, layout, cc, cflags, ldflags in rows:
            row = gbuild.target_row(name)
            assert (row["program"], row["backend"], row["layout"]) == (program, backend, layout)
            have = cuda_home if backend == "cuda" and cuda_home.is_dir() else None
            f = gbuild.flags(name, have)
            assert (f["CC"], f["CFLAGS"], f["LDFLAGS"]) == (cc, cflags, ldflags), name
            assert (REPO_ROOT / program).is_file() and layout in ("cpu", "gpu")
            if bits and backend in ("c", "multicore") and "clang" in cc:
                assert f"-mprefer-vector-width={bits}" in cflags.split(), name
    assert gbuild.flags("gpt2_cuda", cuda) == {
        "CC": "cc", "CFLAGS": f"-O1 -g0 -fwrapv -DNDEBUG -I{cuda}/include",
        "LDFLAGS": f"-L{cuda}/lib64 -L{cuda}/lib64/stubs"}
    assert gbuild.targets_of("cuda") == P.TARGETS == ("cuda", "gpt2_cuda")
    with pytest.raises(gbuild.BuildError, match="unknown target 'cuda2'"):
        gbuild.backend_of("cuda2")


def test_vector_bits_by_machine(tmp_path, monkeypatch):
    """The products' vector width (build.sh's rule, which build.py repeats): 512 on an
    Intel core with AVX-512 only; $VECTOR_BITS overrides it, and another value is an
    error that names it."""
    monkeypatch.delenv("VECTOR_BITS", raising=False)
    cpus = {"GenuineIntel": "fpu sse avx2 fma avx512f avx512dq avx512bw",
            "AuthenticAMD": "fpu sse avx2 fma avx512f avx512dq avx512bw"}
    for vendor, flags in [*cpus.items(), ("GenuineIntel", "fpu sse avx2 fma")]:
        info = tmp_path / "cpuinfo"
        info.write_text(f"processor\t: 0\nvendor_id\t: {vendor}\nflags\t\t: {flags}\n")
        want = "512" if vendor == "GenuineIntel" and "avx512f" in flags else "256"
        assert gbuild.vector_bits(info) == want, (vendor, flags)
        monkeypatch.setenv("VECTOR_BITS", "256")
        assert gbuild.vector_bits(info) == "256"
        monkeypatch.delenv("VECTOR_BITS")
    info.write_text(f"vendor_id\t: GenuineIntel\nflags\t\t: {cpus['GenuineIntel']}\n")
    monkeypatch.setenv("VECTOR_BITS", "1024")
    with pytest.raises(gbuild.BuildError, match=r"VECTOR_BITS is '1024'; give 256 or 512, or "
                       r"leave it unset for this machine's width \(512 here\)"):
        gbuild.vector_bits(info)
    r = subprocess.run(["bash", str(REPO_ROOT / "build.sh"), "targets"], capture_output=True,
                       text=True, env={**os.environ, "VECTOR_BITS": "1024"})
    assert r.returncode == 1 and r.stdout == ""
    monkeypatch.delenv("VECTOR_BITS")
    assert r.stderr.strip() == ("build.sh: error: VECTOR_BITS is '1024'; give 256 or 512, "
                                f"or leave it unset for this machine's width "
                                f"({gbuild.vector_bits()} here)")
    # where a user looks for it: build.sh --help prints the usage of its header
    r = subprocess.run(["bash", str(REPO_ROOT / "build.sh"), "--help"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.startswith("Set up microgpt-fut") and "VECTOR_BITS=256 ./build.sh" in r.stdout


def test_layouts_define_the_same_constants():
    """build.sh swaps futhark/layout_cpu.fut for layout_gpu.fut: both define the same
    names, and targets.txt names only these two layouts."""
    def names(layout: str) -> list[str]:
        src = (REPO_ROOT / "futhark" / f"layout_{layout}.fut").read_text()
        return re.findall(r"^def (\w+) : bool = (?:true|false)$", src, re.M)
    assert names("cpu") == names("gpu") == ["heads_by_slices", "grad_by_hand"]
    assert {gbuild.target_row(r[0])["layout"] for r in gbuild.table_rows("target")} == \
        {"cpu", "gpu"}


def test_stage_unpacks_compressed_c(tmp_path):
    src = tmp_path / "payload" / "cuda"
    src.mkdir(parents=True)
    (src / "microgpt_cuda.c.xz").write_bytes(lzma.compress(SAMPLE_C.encode()))
    (src / "microgpt_cuda.h").write_text("int x;\n")
    (src / "microgpt_cuda.json").write_text("{}")
    out = gbuild.stage("cuda", src, tmp_path / "build")
    assert (out / "microgpt_cuda.c").read_text() == SAMPLE_C
    (src / "microgpt_cuda.h").unlink()
    with pytest.raises(gbuild.BuildError, match="microgpt_cuda.h is missing"):
        gbuild.stage("cuda", src, tmp_path / "build")


def _payload(root: Path) -> Path:
    p = root / "payload"
    for t in P.TARGETS:
        (p / t).mkdir(parents=True)
        for ext in ("c.xz", "h", "json"):
            (p / t / f"microgpt_{t}.{ext}").write_bytes(b"x")
    (p / "wheels").mkdir()
    for w in ("cffi-2.1.1-cp312-cp312-manylinux2014_x86_64.whl", "pycparser-3.12-py3-none-any.whl",
              "futhark_ffi-0.16.0-py3-none-any.whl"):
        (p / "wheels" / w).write_bytes(b"w")
    return p


def test_payload_manifest_round_trip(tmp_path):
    p = _payload(tmp_path)
    m = P.write_manifest(p, "0.25.32")
    assert m["source_digest"] == P.source_digest() and m["futhark"] == "0.25.32"
    assert P.verify(p)["files"] == m["files"]
    (p / "cuda" / "microgpt_cuda.h").write_text("olivia\n")
    with pytest.raises(P.PayloadError, match="microgpt_cuda.h differs"):
        P.verify(p)
    P.write_manifest(p, "0.25.32")
    manifest = json.loads((p / "MANIFEST.json").read_text())
    manifest["source_digest"] = "0" * 16
    (p / "MANIFEST.json").write_text(json.dumps(manifest))
    with pytest.raises(P.PayloadError, match="other futhark/\\*.fut sources"):
        P.verify(p)
    (p / "MANIFEST.json").unlink()
    with pytest.raises(P.PayloadError, match="bench/gpu/prepare"):
        P.verify(p)


def test_payload_needs_everything_and_fits(tmp_path, monkeypatch):
    p = _payload(tmp_path)
    (p / "wheels" / "pycparser-3.12-py3-none-any.whl").unlink()
    (p / "gpt2_cuda" / "microgpt_gpt2_cuda.h").unlink()
    with pytest.raises(P.PayloadError, match=r"missing gpt2_cuda/microgpt_gpt2_cuda.h, "
                                             r"wheels/pycparser-\*.whl"):
        P.write_manifest(p, "v")
    p = _payload(tmp_path / "again")
    monkeypatch.setattr(P, "LIMIT_BYTES", 5)  # the fake payload holds 9 bytes
    with pytest.raises(P.PayloadError, match="MiB, more than"):
        P.write_manifest(p, "v")
    assert not (p / "MANIFEST.json").exists()


def test_configurations():
    full, dry = C.configs(), C.configs(dry_run=True)
    assert [c.name for c in full][:5] == ["A", "B", "G", "C", "D"]
    assert len({c.name for c in full}) == len(full)
    assert {c.batch for c in full if c.name in "HIJ"} == {512, 256, 64}
    gpt2 = C.GPU_CONFIGS["gpt2-124M"]
    assert (gpt2.n_embd, gpt2.n_head, gpt2.n_layer, gpt2.block_size) == (768, 12, 12, 1024)
    assert gpt2.data == "random" and gpt2.sample_n == 0
    assert [c.name for c in full if c.torch_compile] == ["D", "H", "F", "J", "K", "gpt2-124M"]
    assert all(c.block_size > 16 for c in dry if c.torch_compile)  # one shape per config
    assert [c.name for c in dry] == list(C.DRY_RUN)
    for c in dry:
        assert c.n_embd % c.n_head == 0 and c.n_embd <= C.GPU_CONFIGS[c.name].n_embd
    assert C.first_step_config("microgpt").name == "D"
    g = C.first_step_config("gpt2", dry_run=True)
    assert g.n_embd == 48 and g.batch == 1 and g.name == "gpt2-124M-B1"
    assert [c.arch for c in C.configs(arch="gpt2")] == ["gpt2"]


def test_random_stream():
    """GPT-2's GPU data is the driver's Stream over uniform ids: a step's rows are
    windows of block_size+1 consecutive ids of the stream, the same for the same step,
    others for another step, every position counting."""
    from bench.datasets import random_stream
    from microgpt_fut.training.settings import Settings

    ds = random_stream(50257, 8, n_tokens=4096)
    ids = ds.data.train
    assert len(ids) == 4096 and 0 <= ids.min() and ids.max() < 50257
    assert len(np.unique(ids)) > 3000  # drawn, not a constant or a short cycle
    t, n, positions = ds.batches(3, 2, Settings(batch_size=4))
    assert t.shape == (2, 1, 4, 9) and t.dtype == np.int64 and n is None and positions == 64
    for row in t.reshape(-1, 9):
        starts = [i for i in range(len(ids) - 8) if (ids[i:i + 9] == row).all()]
        assert starts, row
    assert (ds.batches(3, 2, Settings(batch_size=4))[0] == t).all()
    assert not (ds.batches(4, 2, Settings(batch_size=4))[0] == t).all()


def test_gpu_lock_is_exclusive_across_processes(tmp_path, monkeypatch):
    lock = tmp_path / "gpu.lock"
    monkeypatch.setenv(worker.LOCK_ENV, str(lock))
    # The other process holds the lock until told to let go (a line on its stdin): the
    # lock must be had only after that, however fast or slow this machine is.
    hold = textwrap.dedent(f"""
        import fcntl, sys
        f = open({str(lock)!r}, "a"); fcntl.flock(f, fcntl.LOCK_EX)
        print("held", flush=True); sys.stdin.readline()
    """)
    proc = subprocess.Popen([sys.executable, "-c", hold], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    got = []  # when this process got the lock

    def take():
        with worker.gpu_lock():
            got.append(time.perf_counter())

    t = threading.Thread(target=take)
    t.start()
    t.join(0.2)
    assert not got  # still held by the other process
    released = time.perf_counter()
    proc.stdin.write("go\n")
    proc.stdin.close()
    t.join(60)
    assert got and got[0] >= released
    assert proc.wait(60) == 0
    monkeypatch.delenv(worker.LOCK_ENV)
    with worker.gpu_lock() as waited:
        assert waited == 0.0


def _run(tmp_path, budget=60.0) -> runner.Run:
    args = Namespace(dry_run=True, out=str(tmp_path / "out"), scratch=str(tmp_path / "s"),
                     payload=str(tmp_path / "payload"), budget=budget, started=time.time())
    return runner.Run(args)


def test_step_kills_at_its_cap_and_keeps_events(tmp_path):
    run = _run(tmp_path)
    code = "import time; print('BENCH {\"event\": \"train\", \"config\": \"A\"}', flush=True); " \
           "time.sleep(30)"
    t0 = time.time()
    st = run.step("sleeper", [sys.executable, "-c", code], cap=2)
    assert time.time() - t0 < 10
    assert st.status == "killed at its deadline" and st.events[0]["config"] == "A"
    assert "sleeper | BENCH" in (tmp_path / "out" / "gpu_run.log").read_text()
    st = run.step("fails", [sys.executable, "-c", "raise SystemExit(3)"], cap=10)
    assert st.status == "failed (exit 3)"
    run.end = time.time() + 1
    assert run.step("late", [sys.executable, "-c", "pass"], cap=10).status == \
        "not run: no time left"


def test_steps_share_the_gpu_lock(tmp_path):
    """The tests step holds the lock in the runner; a worker's lock then waits."""
    run = _run(tmp_path)
    taken = []  # when the worker got the lock

    def other():
        with worker.gpu_lock():
            taken.append(time.monotonic())

    import os
    os.environ[worker.LOCK_ENV] = run.env[worker.LOCK_ENV]
    try:
        with runner.gpu_held(run):
            t = threading.Thread(target=other)
            t.start()
            t.join(0.2)
            assert not taken  # the worker waits while the runner holds the lock
            released = time.monotonic()
        t.join(60)
    finally:
        del os.environ[worker.LOCK_ENV]
    assert taken and taken[0] >= released


def _steps() -> list[runner.Step]:
    cfgs = [c.to_dict() for c in C.configs()]
    a, d = cfgs[0], next(c for c in cfgs if c["name"] == "D")

    def meta(engine, mode, configs, state=""):
        return {"engine": engine, "arch": "microgpt", "mode": mode, "state": state,
                "device": "cuda", "configs": configs}

    train = {"event": "train", "tok_s": 2000.0, "n_params": 4192, "warmup_s": 1.0,
             "step_s": 0.01, "steps_per_call": 10, "timed_s": 1.0, "loss": 3.2,
             "peak_mem_mb": 12.0, "note": ""}
    return [
        runner.Step("torch sweep", "ok", 5.0, [
            {**train, "config": "A", "tok_s": 1000.0},
            {"event": "sample", "config": "A", "samples_s": 100.0},
            {**train, "config": "D", "tok_s": 500.0}], meta=meta("torch", "sweep", [a, d])),
        runner.Step("torch.compile sweep", "ok", 5.0, [{**train, "config": "D", "tok_s": 800.0}],
                    meta=meta("torch.compile", "sweep", [d])),
        runner.Step("cuda sweep", "killed at its deadline", 9.0, [
            {**train, "config": "A"}, {"event": "sample", "config": "A", "samples_s": 50.0},
            {"event": "warm", "config": "D", "warmup_s": 30.0}],
            meta=meta("cuda", "sweep", [a, d])),
        runner.Step("cuda first step (cached)", "ok", 3.0, [
            {"event": "first_step", "total_s": 4.2, "runtime_s": 2.0, "first_step_s": 0.5,
             "kernel_cache": "hit"}], meta=meta("cuda", "first_step", [d], "cached")),
        runner.Step("cuda first step (cold)", "not run: build failed", 0.0,
                    meta=meta("cuda", "first_step", [d], "cold")),
        runner.Step("cuda first step (cold)", "killed at its deadline", 330.0, [
            {"event": "runtime", "runtime_s": 250.0, "kernel_cache": "compiled"}],
            meta=meta("cuda", "first_step", [d], "cold")),
    ]


def test_report_rows_ratios_and_targets():
    sweep = report.sweep_rows(_steps())
    assert [(r["config"], r["engine"]) for r in sweep] == [
        ("A", "cuda"), ("A", "torch"), ("D", "cuda"), ("D", "torch"), ("D", "torch.compile")]
    by = {(r["config"], r["engine"]): r for r in sweep}
    assert by[("A", "cuda")]["x_torch"] == 2.0 and by[("A", "cuda")]["sample_x_torch"] == 0.5
    assert by[("D", "cuda")]["train_tok_s"] == "timeout"
    assert "warm-up of 30.0 s" in by[("D", "cuda")]["notes"]
    assert by[("D", "torch.compile")]["x_torch"] == 1.6
    first = report.first_step_rows(_steps())
    assert [(r["caches"], r["status"]) for r in first] == [  # cold before cached
        ("cold", "not run: build failed"), ("cold", "killed at its deadline"), ("cached", "ok")]
    assert first[1]["runtime_s"] == 250.0 and first[1]["kernel_cache"] == "compiled"
    lines = report.targets(sweep, first, "cuda")
    assert lines[0].endswith("met (A 2.00x)")
    assert "not measured" in lines[1]
    assert lines[2].endswith("missed (A 0.50x)")
    assert "met (microgpt 4.2 s)" in lines[3]


def test_report_files(tmp_path):
    written = report.write(tmp_path, _steps(), False, {"git_commit": "abc", "futhark": "0.25.32"},
                           time.time() - 10)
    assert [p.name for p in written] == ["gpu_sweep.csv", "gpu_first_step.csv",
                                         "gpu_tokens_per_s.png", "gpu_summary.md"]
    assert (tmp_path / "gpu_tokens_per_s.png").read_bytes()[:4] == b"\x89PNG"
    summary = (tmp_path / "gpu_summary.md").read_text()
    assert "| cuda sweep | killed at its deadline | 9.0 |" in summary
    assert "## Targets (issue 17)" in summary
    rows = (tmp_path / "gpu_sweep.csv").read_text().splitlines()
    assert rows[0].startswith("config,arch,engine") and len(rows) == 6


def test_peak_memory_counts_a_model():
    """Runtime.peak_memory (Futhark's count of live arrays) sees a model's state."""
    from microgpt_fut.models.microgpt import MicrogptConfig, MicrogptModel

    rt = get_runtime("c")
    rt.reset_peak_memory()
    before = rt.peak_memory()
    cfg = MicrogptConfig(30, 64, 4, 2, 16)
    m = MicrogptModel.init(rt, cfg, 0)
    m.step()
    assert rt.peak_memory() - before >= 3 * 4 * cfg.num_params()  # params, m, v
