"""Checkpoints written by 7cc6169 and e66ae33 (tests/data/<commit>, each README says how)
still keep
their promise under today's code: they load, their settings read as today's code writes
them for the same command, and `--resume` continues the run exactly as a checkpoint of
today's code at the same step with the same weights, moments, losses and evaluations
continues it, on this machine.

Nothing here compares figures computed on another machine: the fixtures' weights came
from their commit on the machine that wrote them (bits hold on one machine and build only,
docs/reproducibility.md), so the reference is today's code continuing those same
weights here, not a fresh run's weights.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from cli_helpers import need_backend, sigint_at_step
from microgpt_fut.cli.commands import main
from microgpt_fut.models.gpt2 import GPT2Model
from microgpt_fut.models.microgpt import MicrogptModel
from microgpt_fut.training import checkpoint as ckpt

DATA = Path(__file__).resolve().parent / "data"
# the fixtures' commands (tests/data/<commit>/README.md)
SIZES = ["--n-embd", "4", "--n-head", "2", "--n-layer", "1", "--block-size", "8", "--seed", "7",
         "--steps", "8", "--save-every", "4"]
GPT2 = ["--arch", "gpt2", "--batch-size", "2", "--eval-every", "4", "--eval-iters", "2"]
CASES = {
    "lines": ("names.txt", ["--batch-size", "4"]),
    "text": ("text.txt", [*GPT2, "--data-format", "text"]),
    "tokens": ("shards", [*GPT2, "--data-format", "tokens"]),  # e66ae33's prepare of text.txt
}
FIXTURES = [("7cc6169", "lines"), ("7cc6169", "text"),
            ("e66ae33", "lines"), ("e66ae33", "text"), ("e66ae33", "tokens")]
# where each run read its data: the fixtures' /tmp path and name, this test's own
WHERE = {"data_path", "data"}


def run(*args):
    return CliRunner().invoke(main, [*map(str, args), "--samples", "0", "-q"])


def metadata(path: Path) -> dict[str, str]:
    with safe_open(str(path), framework="numpy") as f:
        return dict(f.metadata())


@pytest.mark.parametrize("commit, kind", FIXTURES)
def test_an_old_checkpoint_continues_as_todays_checkpoint_does(commit, kind, tmp_path,
                                                               monkeypatch):
    need_backend("c")
    data, options = CASES[kind]
    OLD = DATA / commit
    fixture = OLD / f"{kind}_{commit}.safetensors"
    old = tmp_path / "old.safetensors"
    shutil.copy(fixture, old)
    stored = load_file(str(old))

    # it loads, as what 7cc6169 wrote: the same tensors, step, kind and settings
    ck = ckpt.load(old)
    assert ck.step == 4 and ck.data_format == kind
    assert ck.arch == ("microgpt" if kind == "lines" else "gpt2")
    loaded = {**ck.config.to_file(ck.params, ""), **ck.config.to_file(ck.m, "adam.m."),
              **ck.config.to_file(ck.v, "adam.v.")}
    assert loaded.keys() == stored.keys() - {"train.losses", "train.grad_norms"}
    for name, a in loaded.items():
        assert np.array_equal(a, stored[name]), name
    assert np.array_equal(ck.losses, stored["train.losses"])

    # today's code, on this machine, running the fixtures' command up to the same save
    today = tmp_path / "today.safetensors"
    with monkeypatch.context() as m:
        sigint_at_step(m, MicrogptModel if kind == "lines" else GPT2Model, 4)
        r = run("train", "--data", OLD / data, *SIZES, *options, "--out", today)
    assert r.exit_code == 130, r.output
    now = ckpt.load(today)
    assert now.step == 4
    assert now.config == ck.config and now.vocab == ck.vocab
    assert {k: v for k, v in ck.train.items() if k not in WHERE} == \
        {k: v for k, v in now.train.items() if k not in WHERE}

    # today's file carrying the old run's state: weights, moments, losses, norms, evals
    fresh = load_file(str(today))
    # (today's microgpt files also keep each step's gradient norm; the old ones have none)
    extra = {ckpt.NORMS: (4,)} if kind == "lines" else {}
    assert {k: v.shape for k, v in fresh.items()} == \
        {**{k: v.shape for k, v in stored.items()}, **extra}
    meta = metadata(today)
    if "evals" in meta:
        meta["evals"] = metadata(old)["evals"]
    # the checksums of the tensors it carries (today's code writes them; the old file has none)
    meta["checksums"] = json.dumps({**{name: ckpt.checksum(a) for name, a in stored.items()},
                                    "__metadata__": ckpt.metadata_checksum(meta)})
    same = tmp_path / "same.safetensors"
    save_file(stored, str(same), metadata=meta)

    for path in (old, same):
        r = run("train", "--resume", path, "--data", OLD / data)
        assert r.exit_code == 0, r.output
    a, b = load_file(str(old)), load_file(str(same))
    assert sorted(a) == sorted(b)
    for name in a:
        assert np.array_equal(a[name], b[name]), name
    assert np.array_equal(a["train.losses"][:4], stored["train.losses"])
    ended, reference = ckpt.load(old), ckpt.load(same)
    assert ended.step == reference.step == 8
    assert json.dumps(ended.evals) == json.dumps(reference.evals)
    if kind != "lines":  # the fixture's evaluations at steps 0 and 4 are kept, one more at 8
        assert ended.evals[:2] == json.loads(metadata(fixture)["evals"])
        assert [e[0] for e in ended.evals] == [0, 4, 8]
