"""Runs that would not fit are refused before anything is allocated, in one line naming
the option; the estimate (memory.py) is checked against measured peak memory."""
from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from cli_helpers import need_backend, small_data
from conftest import SHARED_DATA
from microgpt_fut import memory
from microgpt_fut.model import GPTConfig

SHAKESPEARE = SHARED_DATA / "tinyshakespeare.txt"


def _train(tmp_path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "microgpt_fut", "train", *map(str, args),
                           "--out", tmp_path / "m.safetensors"], capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("args, option", [
    (["--n-embd", "20000"], "lower --n-embd/--n-layer"),
    (["--block-size", "100000000"], "--block-size"),
    (["--arch", "gpt2", "--data-format", "text", "--data", SHAKESPEARE, "--batch-size",
      "1000000000"], "lower --batch-size, --steps-per-call, --eval-iters or --block-size"),
    (["--arch", "gpt2", "--data-format", "text", "--data", SHAKESPEARE, "--eval-iters",
      "1000000000000"], "--eval-iters"),
    (["--arch", "gpt2", "--data-format", "text", "--data", SHAKESPEARE, "--n-embd", "8192",
      "--n-layer", "24", "--n-head", "8"], "lower --n-embd/--n-layer"),
], ids=["n_embd", "block_size", "text_batch", "eval_iters", "text_model"])
def test_too_large_is_refused_before_allocating(tmp_path, args, option):
    need_backend("c")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    r = _train(tmp_path, *args)
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert r.returncode == 1 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: this run needs about "), r.stderr
    assert "available" in lines[0] and option in lines[0]
    assert max(peak_kib, before) < 1_000_000  # under 1 GB: nothing of that size was made
    assert list(tmp_path.iterdir()) == []


def test_estimate_covers_the_measured_peak():
    """A run of 1.6M parameters on c (train, then save) measured in a child process: the
    estimate is above what it used beyond a tiny run's baseline, and not 3x above."""
    need_backend("c")
    code = """
import resource, sys
from microgpt_fut.runtime import Runtime
from microgpt_fut.model import GPTConfig
from microgpt_fut.data import load_data
from microgpt_fut.trainer import Training, TrainSettings
from microgpt_fut import checkpoint as ckpt
rt = Runtime("c", None, quiet=True)
docs, info = load_data(None)
C = int(sys.argv[1])
t = Training.start(rt, docs, TrainSettings(num_steps=2, batch_size=8), GPTConfig(27, C, 4, 2, 16), info)
t.run()
ckpt.save(sys.argv[2], t.checkpoint())
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        peak = {C: int(subprocess.run([sys.executable, "-c", code, str(C), f"{d}/m.safetensors"],
                                      capture_output=True, text=True, check=True).stdout)
                for C in (16, 256)}
    config = GPTConfig(27, 256, 4, 2, 16)
    need = memory.training_need(config, "c", 8, 50, 5163 * 17)
    used = peak[256] - peak[16]
    assert used <= need.total <= 3 * used, (used, need)


def test_checkpoint_larger_than_the_disk_and_device_memory(tmp_path):
    need = memory.MemoryNeed(state=10**6, activations=10**6, tokens=0, checkpoint=10**18)
    with pytest.raises(memory.RunTooLarge, match="the checkpoint will take about .* and the "
                                                 "disk holding --out .* free"):
        memory.check_run(need, tmp_path / "m.safetensors")
    need = memory.MemoryNeed(state=10**9, activations=3 * 10**9, tokens=0, checkpoint=0)
    with pytest.raises(memory.RunTooLarge, match="of device memory and the device has 1.0 GiB: "
                                                 "lower --batch-size or --block-size"):
        memory.check_run(need, tmp_path / "m.safetensors", device_memory=2**30,
                         available=10**12)
    memory.check_run(need, tmp_path / "m.safetensors", available=10**12)  # fits: no error


def test_batch_and_threads_count_where_they_are_held():
    """c and multicore take a batch one document at a time (the peak does not grow with
    --batch-size, measured); opencl and cuda hold every document's activations."""
    config = GPTConfig(27, 64, 4, 2, 32)
    c32, c128 = (memory.training_need(config, "c", b, 1, 0) for b in (32, 128))
    assert c32.activations == c128.activations and c128.tokens > c32.tokens
    o32, o128 = (memory.training_need(config, "opencl", b, 1, 0) for b in (32, 128))
    assert o128.activations == 4 * o32.activations
    assert memory.training_need(config, "c", 32, 1, 0, contexts=2).state > c32.state
