"""`mpirun -n 2 microgpt-fut train ...`: one run over two MPI ranks.

The references are one-process runs of the same command: `--threads 2` (the same
split of each batch, summed in the same order: bit for bit) and one context
(other float32 sums: to rounding). Faults are injected on one rank by
tests/mpi_fault.py. Each test starts mpirun (about 2 s here); they need Open MPI's
mpirun and mpi4py (build.sh installs both), and fail instead of skipping in CI.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from safetensors import safe_open
from safetensors.numpy import load_file

from cli_helpers import need_backend, small_data
from conftest import DATA_DIR, in_ci
from microgpt_fut.training import checkpoint as ckpt
from microgpt_fut.cli.commands import main

FAULT = Path(__file__).with_name("mpi_fault.py")
# Open MPI's shared-memory transport copies large messages with process_vm_readv, which
# containers often forbid (ptrace); the tests' messages are small: plain copies do
MPI_ENV = {"OMPI_MCA_btl_vader_single_copy_mechanism": "none"}


def need_mpi() -> None:
    """Skip without mpirun or mpi4py (fail in CI, where build.sh installs them)."""
    need_backend("c")
    missing = [what for what, ok in (("mpirun (Debian's openmpi-bin)", shutil.which("mpirun")),
                                     ("mpi4py", importlib.util.find_spec("mpi4py")))
               if not ok]
    if missing:
        msg = f"{' and '.join(missing)} not installed: run ./build.sh"
        if in_ci():
            pytest.fail(msg)
        pytest.skip(msg)


def mpirun(n: int = 2) -> list[str]:
    """The launcher: n ranks on this machine's cores (oversubscribed if need be), without
    mpirun's own help messages (-q), as root where the tests run as root."""
    cmd = ["mpirun", "-n", str(n), "--oversubscribe", "-q"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


def mpi_train(args: list[str], n: int = 2, fault: tuple = (), env: dict | None = None,
              timeout: float = 120) -> subprocess.CompletedProcess:
    """`mpirun -n n python -m microgpt_fut train ARGS` (through mpi_fault.py when fault =
    (rank, kind, call) is given); its stdout and stderr as text."""
    entry = [str(FAULT), *map(str, fault)] if fault else ["-m", "microgpt_fut"]
    return subprocess.run([*mpirun(n), sys.executable, *entry, "train", *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **MPI_ENV, **(env or {})})


def one_process(args: list[str]):
    r = CliRunner().invoke(main, ["train", *args])
    assert r.exit_code == 0, r.output
    return r


def tensors(path: Path) -> dict[str, np.ndarray]:
    return load_file(str(path))


def assert_identical(a: Path, b: Path) -> None:
    x, y = tensors(a), tensors(b)
    assert x.keys() == y.keys()
    for name in x:
        assert np.array_equal(x[name], y[name]), name


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def test_two_ranks_train_the_one_process_run(tmp_path):
    """microgpt on 2 ranks: bit-identical to one process with --threads 2 (losses, weights,
    Adam's moments, samples) and to a second 2-rank run paced differently; equal to
    one context (device Adam, other sums) to 1e-6 relative. Rank 0 alone prints."""
    need_mpi()
    data = small_data(tmp_path, 60)
    common = ["--data", str(data), "--batch-size", "6", "--steps", "8", "--n-embd", "16",
              "--block-size", "16", "--samples", "4"]
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    r = mpi_train([*common, "--out", str(a)])
    assert r.returncode == 0, r.stderr
    # rank 0 alone prints: its progress on stderr, the samples alone on stdout
    assert "backend: c on 2 MPI ranks" in r.stderr and r.stderr.count("data: ") == 1
    assert "Error" not in r.stderr and "Traceback" not in r.stderr
    r2 = mpi_train([*common, "--out", str(b), "--steps-per-call", "3", "--quiet"])
    assert r2.returncode == 0, r2.stderr
    assert_identical(a, b)
    threads = one_process([*common, "--threads", "2", "--out", str(tmp_path / "t.safetensors")])
    assert_identical(a, tmp_path / "t.safetensors")
    samples = [ln for ln in r.stdout.splitlines() if ln.startswith("sample ")]
    assert samples == r.stdout.splitlines()
    assert len(samples) == 4 and samples == [ln for ln in threads.output.splitlines()
                                             if ln.startswith("sample ")]
    assert [ln for ln in r2.stdout.splitlines() if ln.startswith("sample ")] == samples
    one_process([*common, "--out", str(tmp_path / "one.safetensors")])
    assert_close_to_one_process(tensors(a), tensors(tmp_path / "one.safetensors"))


def assert_close_to_one_process(mine: dict, one: dict, per_tensor: float = 1e-6) -> None:
    """Losses to 1e-6 relative; the weights and each of Adam's moments, as one vector,
    to 1e-6 relative, and each tensor to ``per_tensor`` (a small bias vector's sum
    cancels, so its own relative error is larger)."""
    np.testing.assert_allclose(mine["train.losses"], one["train.losses"], rtol=1e-6)
    for group in ("weights", "adam.m.", "adam.v."):
        names = [n for n in one if (n.startswith(group) if group != "weights"
                                    else not n.startswith(("adam.", "train.")))]
        flat = lambda d: np.concatenate([d[n].ravel() for n in names])  # noqa: E731
        assert rel_err(flat(mine), flat(one)) < 1e-6, group
        for name in names:
            assert rel_err(mine[name], one[name]) < per_tensor, name


def test_two_ranks_on_opencl_each_use_a_device(tmp_path):
    """--backend opencl (pocl here): each rank computes its share on its own OpenCL
    context, and the run equals the one-process opencl run to float32 rounding."""
    need_mpi()
    need_backend("opencl")
    common = ["--backend", "opencl", "--data", str(small_data(tmp_path, 60)), "--batch-size",
              "4", "--steps", "3", "--n-embd", "8", "--n-head", "2", "--samples", "0"]
    a, one = tmp_path / "a.safetensors", tmp_path / "one.safetensors"
    r = mpi_train([*common, "--out", str(a)], timeout=300)
    assert r.returncode == 0 and "backend: opencl on 2 MPI ranks" in r.stderr, r.stderr
    one_process([*common, "--out", str(one)])
    assert_close_to_one_process(tensors(a), tensors(one), per_tensor=1e-5)


def _text_args(tmp_path: Path, windows: int = 3) -> list[str]:
    text = tmp_path / "t.txt"
    text.write_text((DATA_DIR / "tinyshakespeare.txt").read_text(encoding="utf-8")[:20000])
    return ["--arch", "gpt2", "--data-format", "text", "--data", str(text), "--n-embd", "16",
            "--n-layer", "1", "--block-size", "16", "--batch-size", str(windows),
            "--grad-accum", "2", "--steps", "6", "--eval-every", "4", "--eval-iters", "3",
            "--samples", "1"]


def test_two_ranks_train_the_one_process_text_run(tmp_path):
    """GPT-2 on text, 2 ranks: each step's 6 windows split 3 + 3 and the evaluations'
    batches split too: the --threads 2 run bit for bit (weights, norms, evaluations),
    one context to float32 rounding."""
    need_mpi()
    common = _text_args(tmp_path)
    a, t, one = (tmp_path / f"{n}.safetensors" for n in ("a", "t", "one"))
    r = mpi_train([*common, "--out", str(a)])
    assert r.returncode == 0, r.stderr
    assert "on 2 MPI ranks" in r.stderr and r.stderr.count("step 4: train loss") == 1
    one_process([*common, "--threads", "2", "--out", str(t)])
    assert_identical(a, t)
    with safe_open(str(a), "np") as f, safe_open(str(t), "np") as g:
        assert f.metadata()["evals"] == g.metadata()["evals"]
    one_process([*common, "--out", str(one)])
    assert_close_to_one_process(tensors(a), tensors(one), per_tensor=1e-4)


def test_weights_broken_by_an_update_are_saved_by_no_rank(tmp_path):
    """--lr 1e38 without clipping breaks the weights in step 1's update (its loss is
    finite): with --save-every 1 the job ends with one line naming step 1, and nothing
    is saved (it used to save NaN weights at step 1 and blame step 2)."""
    need_mpi()
    out = tmp_path / "m.safetensors"
    r = mpi_train([*_text_args(tmp_path), "--grad-clip", "0", "--warmup-steps", "0", "--lr",
                   "1e38", "--save-every", "1", "--quiet", "--out", str(out)])
    lines = r.stderr.strip().splitlines()  # --quiet: no progress on stderr
    assert r.returncode == 1 and len(lines) == 1, r.stderr
    assert "training diverged at step 1 of 6" in lines[0] and "nothing was saved" in lines[0]
    assert not out.exists()


def test_sigint_to_mpirun_saves_and_one_process_resumes_exactly(tmp_path):
    """Ctrl-C to mpirun (which sends SIGTERM to every rank, SIGKILL a second later):
    the ranks stop after the same call, rank 0 saves and says so in one line; one
    process with --threads 2 resumes it to the 2-rank run's end, bit for bit. Rank 1
    holds its 40th call until the run has seen the signal (mpi_fault.py's ``hold``), so
    the signal always lands inside the run, however fast the machine. (Setting Open
    MPI's odls_base_sigkill_timeout, to give a loaded machine longer than a second,
    made this mpirun 4.1 forward no SIGTERM at all.)"""
    need_mpi()
    data = small_data(tmp_path, 60)
    common = ["--data", str(data), "--batch-size", "2", "--steps", "3000", "--n-embd", "8",
              "--n-head", "2", "--block-size", "16", "--samples", "0"]
    out = tmp_path / "m.safetensors"
    p = subprocess.Popen([*mpirun(), sys.executable, str(FAULT), "1", "hold", "40", "train",
                          *common, "--out", str(out)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         env={**os.environ, **MPI_ENV})
    for line in p.stdout:
        if line.strip() == "held":
            break
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    lines = [ln for ln in err.strip().splitlines()  # rank 0's progress lines aside
             if not ln.startswith(("data: ", "model: ", "step "))]
    assert p.returncode != 0 and len(lines) == 1, err
    step = ckpt.load(out).step
    how, _, rest = lines[0].partition(": ")
    # Open MPI 4's mpirun sends SIGTERM; a launcher that forwards SIGINT: "interrupted"
    assert how in ("stopped by SIGTERM", "interrupted"), lines[0]
    assert rest == (f"saved the checkpoint of step {step} of 3000 to {str(out)!r}; continue "
                    f"with: mpirun -n 2 microgpt-fut train --resume {out}")
    assert 0 < step < 3000
    one_process(["--resume", str(out), "--threads", "2", "--samples", "0"])
    one_process([*common, "--threads", "2", "--out", str(tmp_path / "straight.safetensors")])
    assert_identical(out, tmp_path / "straight.safetensors")


@pytest.mark.parametrize("fault, rank, expected", [
    ("kill", 1, "Error: rank 1 died (killed or crashed; pid "),
    ("oom", 1, "Error: rank 1 failed: out of memory"),
    ("error", 1, "Error: rank 1 failed: injected failure of a kernel call"),
    ("nan", 1, "in rank 1's share of the batch"),
    ("stop", 1, "Error: rank 1 has not answered for 5 s (stopped or frozen; pid "),
    ("kill", 0, "Error: rank 0 died (killed or crashed; pid ")])
def test_a_failing_rank_ends_the_job_with_one_line(tmp_path, fault, rank, expected):
    """A rank killed, out of memory, failing, giving NaN or frozen at its 25th step ends
    the job by itself (mpi_train's generous timeout raises if it hangs): one line (rank
    0's, naming the rank; rank 1's when rank 0 itself died), a non-zero status, and
    --out still holds the checkpoint saved at step 20 (--save-every 10)."""
    need_mpi()
    out = tmp_path / "m.safetensors"
    r = mpi_train(["--data", str(small_data(tmp_path, 60)), "--batch-size", "4", "--steps",
                   "60", "--save-every", "10", "--n-embd", "8", "--n-head", "2", "--block-size",
                   "16", "--samples", "0", "--quiet", "--out", str(out)],
                  fault=(rank, fault, 25), timeout=300,
                  env={"MICROGPT_FUT_RANK_TIMEOUT": "5"} if fault == "stop" else None)
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1, r.stderr
    assert expected in lines[0], lines[0]
    assert ckpt.load(out).step == 20
    left = sorted(p.name for p in tmp_path.iterdir())
    if rank == 1:
        assert lines[0].endswith(f"{str(out)!r} still holds this run's checkpoint of step 20")
        assert left == ["m.safetensors", "names.txt"]  # no partial file, no lock
    else:  # a killed rank 0 leaves its lock file (not the lock: flock ends with it)
        assert left == [".m.safetensors.lock", "m.safetensors", "names.txt"]


@pytest.mark.parametrize("args, fragment", [
    (["--batch-size", "1"], "--batch-size 1 cannot be split over 2 MPI ranks"),
    (["--batch-size", "4", "--threads", "2", "--backend", "multicore"], "--threads 2 applies"),
    (["--arch", "gpt2", "--data-format", "text", "--batch-size", "1"],
     "--batch-size 1 x --grad-accum 1 = 1 windows a step cannot be split over 2 MPI ranks")])
def test_bad_options_are_refused_once(tmp_path, args, fragment):
    """Options are rank 0's alone: a bad one is refused in one line (status 2), nothing
    is written, and no rank is left waiting."""
    need_mpi()
    r = mpi_train(["--data", str(small_data(tmp_path, 60)), "--steps", "3",
                   "--out", str(tmp_path / "m.safetensors"), *args], timeout=60)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("Error: "), r.stderr
    assert fragment in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["names.txt"]


def test_other_commands_run_on_rank_0_alone(tmp_path):
    """`sample` (or --help) under mpirun prints once: rank 0 runs it, the others leave."""
    need_mpi()
    out = tmp_path / "m.safetensors"
    one_process(["--data", str(small_data(tmp_path, 60)), "--steps", "3", "--samples", "0",
                 "--out", str(out)])
    r = subprocess.run([*mpirun(), sys.executable, "-m", "microgpt_fut", "sample",
                        "--checkpoint", str(out), "-n", "3", "--plain"], capture_output=True,
                       text=True, timeout=60, env={**os.environ, **MPI_ENV})
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 3, r.stdout + r.stderr
    r = mpi_train(["--help"], timeout=60)
    assert r.returncode == 0 and r.stdout.count("Usage:") == 1, r.stderr


def _env_of(**kw) -> dict:
    return {k: str(v) for k, v in kw.items()}


def test_launch_is_read_from_the_launchers_environment():
    from microgpt_fut.parallel.mpi_world import launched, rank_timeout

    assert launched({}) == (0, 1)
    assert launched(_env_of(OMPI_COMM_WORLD_SIZE=4, OMPI_COMM_WORLD_RANK=3)) == (3, 4)
    assert launched(_env_of(PMI_SIZE=2, PMI_RANK=1)) == (1, 2)
    assert rank_timeout({}) == 30.0 and rank_timeout({"MICROGPT_FUT_RANK_TIMEOUT": "2.5"}) == 2.5
    for bad in ("0", "-1", "soon"):
        with pytest.raises(ValueError, match="MICROGPT_FUT_RANK_TIMEOUT"):
            rank_timeout({"MICROGPT_FUT_RANK_TIMEOUT": bad})


class _FakeComm:
    """One rank of a job (for MPIExchange's sharing of rows)."""

    def __init__(self, rank: int, size: int):
        self.rank, self.size = rank, size

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.size


class _FakeExchange:
    """One rank's collectives, where the other ranks contribute ``others`` to a MAX and
    rank 0 broadcasts 7."""

    def __init__(self, rank: int, others: int = 0):
        self.rank, self.others, self.sent = rank, others, []

    def max_int(self, value: int) -> int:
        return max(value, self.others)

    def rank0_int(self, value):
        self.sent.append(value)
        return value if self.rank == 0 else 7


def test_shared_stop_and_pacer_take_the_jobs_decision():
    """A signal to any rank stops every rank after the same call (MAX of the flags;
    sticky); every rank takes rank 0's number of steps."""
    from microgpt_fut.interrupt import StopRequest
    from microgpt_fut.parallel.mpi_world import SharedPacer, SharedStop
    from microgpt_fut.pacing import CallPacer

    local = StopRequest()
    stop = SharedStop(_FakeExchange(0), local)
    assert not stop() and stop.name == ""
    stop.exchange.others = int(signal.SIGTERM)  # another rank got SIGTERM
    assert stop() and stop.signum == signal.SIGTERM and stop.name == "SIGTERM"
    stop.exchange.others = 0
    assert stop()  # decided once for all
    assert SharedPacer(_FakeExchange(0), CallPacer(5)).next_k(0, 10) == 1
    worker = _FakeExchange(1)
    assert SharedPacer(worker, CallPacer(5)).next_k(0, 10) == 7 and worker.sent == [None]


def test_each_rank_takes_its_share_of_the_rows():
    from microgpt_fut.parallel.host_state import local_shards
    from microgpt_fut.parallel.exchange import Exchange, MPIExchange

    shares = [MPIExchange(_FakeComm(r, 3)).rows(8) for r in range(3)]
    assert shares == [slice(0, 2), slice(2, 5), slice(5, 8)]
    assert MPIExchange(_FakeComm(2, 3)).rows(2) == slice(2, 2)  # nothing left for rank 2
    assert local_shards(MPIExchange(_FakeComm(1, 2)), 7, 2) == [slice(3, 5), slice(5, 7)]
    assert local_shards(Exchange(), 5, 2) == [slice(0, 2), slice(2, 5)]
    assert local_shards(MPIExchange(_FakeComm(2, 3)), 2, 2) == []


def test_local_sum_is_the_weighted_sum_in_order():
    from microgpt_fut.parallel.exchange import Exchange

    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(5).astype(np.float32) for _ in range(3)]
    weights, losses = [0.5, 0.3, 0.2], [1.0, 2.0, 4.0]
    want = np.zeros(5, np.float32)
    for w, g in zip(weights, grads):
        want += np.float32(w) * g
    loss, grad = Exchange().combine(zip(weights, losses, [g.copy() for g in grads]), 5)
    assert loss == pytest.approx(0.5 + 0.6 + 0.8) and np.array_equal(grad, want)


def test_local_device_is_the_rank_on_its_node_mod_the_gpus(monkeypatch):
    from microgpt_fut.cli import mpi as cli_mpi
    from microgpt_fut.backend import runtime

    assert cli_mpi.local_device("c", None, 3) is None
    assert cli_mpi.local_device("cuda", 1, 3) == 1  # --device: every rank the same
    monkeypatch.setattr(runtime, "cuda_device_count", lambda: 4)
    assert [cli_mpi.local_device("cuda", None, r) for r in range(6)] == [0, 1, 2, 3, 0, 1]
    monkeypatch.setattr(runtime, "cuda_device_count", lambda: 1)
    assert cli_mpi.local_device("cuda", None, 1) is None  # one GPU: the backend's choice


def _pair(timeout: float = 30.0):
    """Rank 0's and rank 1's Watchdog over loopback, and what each was told."""
    import threading

    from microgpt_fut.parallel.watchdog import Watchdog, listen

    told = {0: [], 1: []}
    srv, port, token = listen("127.0.0.1")
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("w0", Watchdog.serve(
        srv, token, 1, lambda r, w: told[0].append(("fail", r, w)),
        lambda r, s: told[0].append(("bye", r, s)), timeout)))
    t.start()
    w1 = Watchdog.connect(1, ["127.0.0.1"], port, token,
                          lambda r, w: told[1].append(("fail", r, w)),
                          lambda r, s: told[1].append(("bye", r, s)), timeout)
    t.join(10)
    w0 = box["w0"]
    w0.start()
    w1.start()
    return w0, w1, told


def _wait_for(cond, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_watchdog_reports_errors_deaths_and_silence_but_not_orderly_ends():
    w0, w1, told = _pair()
    w1.report("out of memory")
    _wait_for(lambda: told[0])
    assert told[0] == [("fail", 1, "failed: out of memory")]
    w1.close()
    w0.close()
    w0, w1, told = _pair()
    w1.bye(0)
    w1.close()  # an orderly end: no failure
    assert w0.join(60)  # rank 0's reader has seen the bye and the connection's end
    assert told[0] == [("bye", 1, 0)]
    w0.close()
    w0, w1, told = _pair()
    w1.peers[0].sock.close()  # the kernel closes a dead process's connection
    w1._closed = True
    _wait_for(lambda: told[0])
    assert told[0][0][:2] == ("fail", 1) and told[0][0][2].startswith("died (killed or crashed")
    w0.close()
    w0, w1, told = _pair(timeout=0.6)
    w1._closed = True  # a frozen process: its heartbeats stop
    _wait_for(lambda: told[0])
    assert told[0] and told[0][0][2].startswith("has not answered for 1 s")
    w0.close()
    w1.close()


def test_watchdog_reads_what_a_peer_sent_before_blaming_its_silence(monkeypatch):
    """A process stopped (or its reader thread kept from the GIL) just after a select
    that found nothing reads what its peer sent meanwhile before it judges the peer:
    rank 1, resumed after rank 0's heartbeats went on, must not call rank 0 frozen (CI
    once saw that second line when mpirun woke a stopped rank to end it)."""
    import select as select_module
    import threading
    import types

    from microgpt_fut.parallel import watchdog

    stall, stalled, thread = threading.Event(), threading.Event(), []

    def select(r, w, x, t):
        out = select_module.select(r, w, x, t)
        if stall.is_set() and not out[0] and threading.current_thread() in thread \
                and not stalled.is_set():
            stalled.set()
            time.sleep(2.0)  # stopped past the 0.6 s timeout while rank 0 beats on
        return out

    monkeypatch.setattr(watchdog, "select", types.SimpleNamespace(select=select))
    monkeypatch.setattr(watchdog, "HEARTBEAT", 0.1)
    w0, w1, told = _pair(timeout=0.6)
    w0.timeout = 60.0  # rank 0 does not judge rank 1's stop here
    thread.append(w1._thread)
    stall.set()
    _wait_for(stalled.is_set, 10)
    time.sleep(3.0)
    assert stalled.is_set() and told[1] == []
    w1.close()
    w0.close()


def test_a_token_is_needed_to_pose_as_a_rank():
    import socket
    import threading

    from microgpt_fut.errors import WatchdogError
    from microgpt_fut.parallel.watchdog import Watchdog, listen

    srv, port, token = listen("127.0.0.1")
    errors = []

    def serve():
        try:
            Watchdog.serve(srv, token, 1, print, print, connect_seconds=1)
        except WatchdogError as e:
            errors.append(str(e))

    t = threading.Thread(target=serve)
    t.start()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"hello wrong 1 2 host\n")
        t.join(5)
    assert errors and errors[0].startswith("rank 1 did not connect")
    with pytest.raises(WatchdogError, match="cannot reach rank 0"):
        Watchdog.connect(1, ["127.0.0.1"], port, token, print, print)
