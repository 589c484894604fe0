"""SIGTERM and SIGHUP stop a training run as Ctrl-C does: the current device call
finishes, the checkpoint is saved, and the exit status is 128 + the signal's number."""
from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from cli_helpers import need_backend, small_data
from conftest import SHARED_DATA
from microgpt_fut import checkpoint as ckpt

STEPS = 1_000_000


def _run_until_progress(args: list[str]) -> subprocess.Popen:
    """A training subprocess, returned once it printed its first progress line."""
    p = subprocess.Popen([sys.executable, "-m", "microgpt_fut", "train", *args, "--steps",
                          str(STEPS), "--samples", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    for line in p.stdout:
        if line.startswith("step ") and "/" in line:
            return p
    p.kill()
    raise AssertionError(f"no progress line; stderr: {p.stderr.read()}")


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)],
                         ids=["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("kind", ["names", "text"])
def test_signal_saves_and_exits_with_its_status(tmp_path, sig, status, kind):
    need_backend("c")
    out = tmp_path / "m.safetensors"
    if kind == "names":
        args = ["--data", str(small_data(tmp_path)), "--out", str(out)]
    else:
        text = tmp_path / "t.txt"
        text.write_text((SHARED_DATA / "tinyshakespeare.txt").read_text(encoding="utf-8")[:20000])
        args = ["--arch", "gpt2", "--data-format", "text", "--data", str(text), "--n-embd", "16",
                "--n-layer", "1", "--block-size", "16", "--batch-size", "2", "--eval-every",
                "100000", "--eval-iters", "1", "--out", str(out)]
    p = _run_until_progress(args)
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    assert p.returncode == status, err
    name = signal.Signals(sig).name
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"stopped by {name}: saved the checkpoint of step")
    step = ckpt.load(out).step
    assert 0 < step < STEPS and f"step {step} of {STEPS}" in lines[0]


def test_two_runs_never_write_one_out_at_once(tmp_path):
    """While one training holds --out, a second one started on the same --out is refused
    with one line naming the first's pid; the first ends normally; afterwards the lock
    is gone."""
    need_backend("c")
    out = tmp_path / "m.safetensors"
    first = _run_until_progress(["--data", str(small_data(tmp_path)), "--out", str(out)])
    second = subprocess.run([sys.executable, "-m", "microgpt_fut", "train", "--data",
                             str(small_data(tmp_path)), "--steps", "5", "--out", str(out)],
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 1
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1 and f"another microgpt-fut process (pid {first.pid})" in lines[0]
    first.send_signal(signal.SIGINT)
    _, err = first.communicate(timeout=120)
    assert first.returncode == 130, err
    assert ckpt.load(out).step > 0
    assert not (tmp_path / ".m.safetensors.lock").exists()
