"""The way of a train command's settings from the command line to the kernel (issue 42):
--lr reaches the ``train`` entry point within a few frames of click's callback, the
plan makes the run itself (no adapter per kind of data between them), and a fresh run
checks its optimiser and its config once each."""
from __future__ import annotations

import inspect
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from cli_helpers import need_backend, shakespeare_file, small_data
from microgpt_fut.backend.runtime import Runtime
from microgpt_fut.cli.commands import main
from microgpt_fut.models.microgpt import GPTConfigBase
from microgpt_fut.training.optimizer import Adam, Recipe
from microgpt_fut.training.run import Run

LR = 0.0123  # an --lr no default has, found again among the entry's arguments
SMALL = ["--steps", "3", "--n-embd", "16", "--n-head", "2", "--n-layer", "1", "--block-size",
         "8", "--batch-size", "2", "--samples", "0", "-q", "--lr", str(LR)]


def frames_below(code) -> int:
    """Frames from the caller's caller up to the running frame of ``code``: 1 when the
    caller's caller is that frame. Raises AssertionError when it is not on the stack."""
    f, n = sys._getframe(2), 1
    while f is not None and f.f_code is not code:
        f, n = f.f_back, n + 1
    assert f is not None, "not called below the train command"
    return n


def train_traced(monkeypatch, tmp_path, *args) -> dict:
    """Run ``train *args`` (c backend) and measure, from its click callback, the frames
    down to each call of the ``train`` entry point (and its float arguments, as float32)
    and down to where the Run is made; and count the checks of the optimiser and of the
    config."""
    callback = inspect.unwrap(main.commands["train"].callback).__code__
    seen = {"entry": [], "args": [], "run": [], "optimizer": 0, "config": 0}
    entry, init = Runtime.entry, Run.__init__
    check_adam, check_recipe, check_config = Adam.validate, Recipe.validate, GPTConfigBase.validate

    def traced_entry(self, name, *a):
        if name == "train":
            seen["entry"].append(frames_below(callback))
            seen["args"].append(a[3])  # the steps' learning rates, float32 [K]
        return entry(self, name, *a)

    def traced_init(self, *a, **k):
        seen["run"].append(frames_below(callback))
        init(self, *a, **k)

    def counted(key, check):
        def call(*a):
            seen[key] += 1
            return check(*a)
        return call

    monkeypatch.setattr(Runtime, "entry", traced_entry)
    monkeypatch.setattr(Run, "__init__", traced_init)
    monkeypatch.setattr(Adam, "validate", counted("optimizer", check_adam))
    monkeypatch.setattr(Recipe, "validate", counted("optimizer", check_recipe))
    monkeypatch.setattr(GPTConfigBase, "validate", counted("config", check_config))
    r = CliRunner().invoke(main, ["train", *map(str, args), *SMALL,
                                  "--out", str(tmp_path / "m.safetensors")])
    assert r.exit_code == 0, r.output
    return seen


@pytest.mark.parametrize("arch,fmt", [("microgpt", "lines"), ("gpt2", "text")])
def test_lr_reaches_the_kernel_within_ten_frames(monkeypatch, tmp_path, arch, fmt):
    """--lr goes from the train command to the ``train`` entry point in at most 10 frames
    (it took 8, and the Run was made 5 frames down through Kind.start, Training.start
    and Run.start; now 3: Plan.start, Run.start). The entry gets the option's value."""
    need_backend("c")
    data = (small_data(tmp_path, 40) if fmt == "lines" else
            shakespeare_file(tmp_path, 5000))
    seen = train_traced(monkeypatch, tmp_path, "--arch", arch, "--data-format", fmt,
                        "--data", data, *(["--eval-iters", "1"] if fmt == "text" else []))
    assert seen["entry"] and max(seen["entry"]) <= 10, seen["entry"]
    assert seen["run"] == [3], seen["run"]
    # the entry takes each step's learning rate (float32), from the host's schedule:
    # microgpt's starts at --lr, the recipe's reaches it after the warm-up
    lrs = np.concatenate(seen["args"])
    assert lrs.dtype == np.float32 and lrs.max() == pytest.approx(LR, rel=1e-6), lrs


@pytest.mark.parametrize("arch,fmt", [("microgpt", "lines"), ("gpt2", "text")])
def test_a_fresh_run_checks_its_optimizer_and_config_once(monkeypatch, tmp_path, arch, fmt):
    """Settings check the optimiser when they are made and the model its config when it
    is made: once each (a fresh run checked each three times: in the plan or the command,
    in Run.start, in the model)."""
    need_backend("c")
    data = (small_data(tmp_path, 40) if fmt == "lines" else
            shakespeare_file(tmp_path, 5000))
    seen = train_traced(monkeypatch, tmp_path, "--arch", arch, "--data-format", fmt,
                        "--data", data, *(["--eval-iters", "1"] if fmt == "text" else []))
    assert (seen["optimizer"], seen["config"]) == (1, 1)
