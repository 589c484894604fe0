"""Checkpoints written by 7cc6169 (tests/data/7cc6169, its README says how) load and
resume under one Run, as a run of today's code from the start: bit-identical for
microgpt; for GPT-2 to float32 rounding, since its first four steps were taken with
7cc6169's gradient (vjp2), and today's on c is the backward written by hand, which sums
in another order."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from safetensors.numpy import load_file

from cli_helpers import need_backend
from microgpt_fut.training import checkpoint as ckpt
from microgpt_fut.cli.commands import main

OLD = Path(__file__).resolve().parent / "data" / "7cc6169"
SIZES = ["--n-embd", "4", "--n-head", "2", "--n-layer", "1", "--block-size", "8", "--seed", "7",
         "--steps", "8"]
CASES = {
    "lines": ("names.txt", ["--batch-size", "4"]),
    "text": ("text.txt", ["--arch", "gpt2", "--data-format", "text", "--batch-size", "2",
                          "--eval-every", "4", "--eval-iters", "2"]),
}


def run(*args):
    return CliRunner().invoke(main, [*map(str, args), "--samples", "0", "-q"])


@pytest.mark.parametrize("kind", CASES)
def test_an_old_checkpoint_resumes_as_a_fresh_run_today(kind, tmp_path):
    need_backend("c")
    data, options = CASES[kind]
    old = tmp_path / "old.safetensors"
    shutil.copy(OLD / f"{kind}_7cc6169.safetensors", old)
    ck = ckpt.load(old)
    assert ck.step == 4 and ck.data_format == kind
    assert ck.arch == ("microgpt" if kind == "lines" else "gpt2")
    r = run("train", "--resume", old, "--data", OLD / data)
    assert r.exit_code == 0, r.output
    fresh = tmp_path / "fresh.safetensors"
    r = run("train", "--data", OLD / data, *SIZES, *options, "--out", fresh)
    assert r.exit_code == 0, r.output
    a, b = load_file(str(old)), load_file(str(fresh))
    assert sorted(a) == sorted(b)
    for name in a:
        if kind == "lines":
            assert np.array_equal(a[name], b[name]), name
        else:
            scale = float(np.abs(b[name]).max()) or 1.0
            np.testing.assert_allclose(a[name], b[name], rtol=0, atol=1e-5 * scale,
                                       err_msg=name)
    assert ckpt.load(old).step == 8
    np.testing.assert_allclose(np.array(ckpt.load(old).evals, dtype=float),
                               np.array(ckpt.load(fresh).evals, dtype=float), rtol=1e-6)
