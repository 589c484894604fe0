"""bench/mpi.py's arithmetic and parsing (its runs are tests/test_mpi.py's commands)."""
from __future__ import annotations

import numpy as np
import pytest
from safetensors.numpy import save_file

from bench import mpi


def test_parse_rate_reads_trains_summary_line():
    out = "data: x\nstep 10 / 10 | loss 3.0 | 5 tok/s\ntrained 10 steps in 2.50 s (10,667 tok/s)\n"
    assert mpi.parse_rate(out) == (10, 2.5, 10667.0)
    with pytest.raises(ValueError, match="no 'trained"):
        mpi.parse_rate("step 10 / 10 | loss 3.0\n")


def test_cost_formulas():
    # a ring Allreduce: reduce-scatter then all-gather, (N-1)/N of the vector each
    assert mpi.ring_bytes(1000, 2) == 4000
    assert mpi.ring_bytes(1000, 8) == 7000
    # 6 N + 12 L T C per token: GPT-2 124M at T = 1024 is ~0.86 GFLOP a token
    assert mpi.flops_per_token(124_439_808, 12, 1024, 768) == pytest.approx(8.6e8, rel=0.01)


def test_compare_measures_losses_and_weights(tmp_path):
    a = {"wte": np.ones((2, 3), np.float32), "train.losses": np.array([2.0, 1.0], np.float32)}
    b = {"wte": np.ones((2, 3), np.float32), "train.losses": np.array([2.0, 1.0], np.float32)}
    save_file(a, str(tmp_path / "a.safetensors"))
    save_file(b, str(tmp_path / "b.safetensors"))
    same = mpi.compare(tmp_path / "a.safetensors", tmp_path / "b.safetensors")
    assert same["identical"] and same["loss_max_rel"] == 0 and same["weights_rel"] == 0
    b["wte"][0, 0] = 2.0  # one entry of six off by one: |d| / |b| = 1 / sqrt(9)
    b["train.losses"][1] = 1.25
    save_file(b, str(tmp_path / "b.safetensors"))
    d = mpi.compare(tmp_path / "a.safetensors", tmp_path / "b.safetensors")
    assert not d["identical"] and d["loss_max_rel"] == pytest.approx(0.2)
    assert d["weights_rel"] == pytest.approx(1 / 3)


def test_commands_of_each_kind(tmp_path):
    one, ranks, threads = (mpi.train_command(k, tmp_path / "d.txt", 5, tmp_path / "o")
                           for k in mpi.KINDS)
    assert "mpirun" not in one and "--threads" not in one
    assert ranks[:3] == ["mpirun", "-n", "2"] and "--threads" not in ranks
    assert threads[-2:] == ["--threads", "2"]
    for cmd in (one, ranks, threads):
        assert cmd[cmd.index("--steps") + 1] == "5" and "--batch-size" in cmd
