"""`--backend`'s default: c, or multicore for a large step when its library is built.

The rule (backend/runtime.default_backend) is checked against build folders that hold
chosen libraries; the command line against this build (README's test command builds
every CPU backend). Which backend is faster is bench's to measure (bench/README.md,
"The default backend"), not a test's.
"""
from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner

from conftest import DATA_DIR, need_library
from microgpt_fut.backend.runtime import MULTICORE_WORK, build_dir, default_backend
from microgpt_fut.cli.commands import main

SHAKESPEARE = DATA_DIR / "tinyshakespeare.txt"
# nanoGPT's recipe shape: 12 x 64 positions x 809,856 parameters, 6.2e8 (multicore);
# the small one: 4 x 16 x 5,152, 3.3e5 (c)
RECIPE = ["--n-layer", "4", "--n-head", "4", "--n-embd", "128", "--block-size", "64",
          "--batch-size", "12"]
SMALL = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16",
         "--batch-size", "4"]


def fake_build(folder, *targets):
    """A build folder whose only libraries are ``targets`` (empty files: the rule looks
    for them, nothing loads them)."""
    for t in targets:
        (folder / t).mkdir(parents=True)
        (folder / t / f"_microgpt_{t}.cpython-311-x86_64-linux-gnu.so").touch()
    return folder


def test_the_rule_follows_the_work_the_split_and_the_builds(tmp_path, monkeypatch):
    both = fake_build(tmp_path / "both", "gpt2_c", "gpt2_multicore", "c")
    monkeypatch.setenv("MICROGPT_FUT_BUILD", str(both))
    assert default_backend("gpt2", MULTICORE_WORK) == ("multicore", None)
    assert default_backend("gpt2", MULTICORE_WORK - 1) == ("c", None)
    assert default_backend("gpt2", 10 * MULTICORE_WORK, split=True) == ("c", None)
    # microgpt's multicore library is not in this folder: c, and the note names it
    backend, note = default_backend("microgpt", MULTICORE_WORK)
    assert backend == "c" and "`BACKENDS=multicore ./build.sh`" in note
    only_c = fake_build(tmp_path / "only_c", "gpt2_c")
    monkeypatch.setenv("MICROGPT_FUT_BUILD", str(only_c))
    backend, note = default_backend("gpt2", MULTICORE_WORK)
    assert backend == "c" and "`BACKENDS=gpt2_multicore ./build.sh`" in note
    assert default_backend("gpt2", MULTICORE_WORK - 1) == ("c", None)
    # only multicore built: it runs every size (but --threads needs c)
    only_mc = fake_build(tmp_path / "only_multicore", "gpt2_multicore")
    monkeypatch.setenv("MICROGPT_FUT_BUILD", str(only_mc))
    assert default_backend("gpt2", 1) == ("multicore", None)
    assert default_backend("gpt2", MULTICORE_WORK, split=True) == ("c", None)
    # nothing built: no note beside Runtime's error, which names the build command
    monkeypatch.setenv("MICROGPT_FUT_BUILD", str(tmp_path / "none"))
    assert default_backend("gpt2", MULTICORE_WORK) == ("c", None)


def train(tmp_path, name, sizes, *extra):
    out = tmp_path / f"{name}.safetensors"
    r = CliRunner().invoke(main, [
        "train", "--arch", "gpt2", "--data-format", "text", "--data", str(SHAKESPEARE),
        *sizes, "--steps", "3", "--eval-every", "3", "--eval-iters", "1", "--samples", "0",
        "--out", str(out), *extra])
    assert r.exit_code == 0, r.output
    with open(out.with_name(f"{name}.losses.csv"), newline="") as f:
        return r.stderr, list(csv.DictReader(f))


def test_train_takes_multicore_for_the_recipe_and_c_for_a_small_model(tmp_path):
    need_library("multicore", "gpt2")
    err, rows = train(tmp_path, "recipe", RECIPE)
    assert "backend: multicore" in err and "note:" not in err
    # the same run as --backend multicore, bit for bit (its sums have a fixed split)
    _, explicit = train(tmp_path, "explicit", RECIPE, "--backend", "multicore")
    assert rows == explicit
    err, _ = train(tmp_path, "small", SMALL)
    assert "backend: c" in err
    err, _ = train(tmp_path, "threads", RECIPE, "--threads", "2")
    assert "backend: c on 2 threads" in err
    # --threads asks for c even where a batch of 1 row leaves one context
    err, _ = train(tmp_path, "one_row", [*RECIPE[:-1], "1"], "--threads", "2")
    assert "backend: c" in err and "note:" not in err


@pytest.mark.parametrize("given,built", [([], "all"), (["--backend", "c"], "all"),
                                         ([], "only gpt2_c")])
def test_the_resume_hint_names_the_backend_where_the_default_is_another(
        tmp_path, monkeypatch, given, built):
    """A run pinned to c at the recipe's shape, stopped, continues bit for bit only on
    c: the hint says --backend c, as it does for a run on c for want of the multicore
    library (which the note says to build); a run on the default needs nothing more."""
    need_library("multicore", "gpt2")
    from cli_helpers import sigint_at_step
    from microgpt_fut.models.gpt2 import GPT2Model

    if built != "all":
        (tmp_path / "build").mkdir()
        (tmp_path / "build" / "gpt2_c").symlink_to(build_dir() / "gpt2_c")
        monkeypatch.setenv("MICROGPT_FUT_BUILD", str(tmp_path / "build"))
    out = tmp_path / "run.safetensors"
    with monkeypatch.context() as m:
        sigint_at_step(m, GPT2Model, 2)
        r = CliRunner().invoke(main, [
            "train", "--arch", "gpt2", "--data-format", "text", "--data", str(SHAKESPEARE),
            *RECIPE, "--steps", "4", "--steps-per-call", "2", "--eval-every", "4",
            "--eval-iters", "1", "--samples", "0", "--out", str(out), *given])
    assert r.exit_code == 130, r.output
    hint = r.stderr.strip().splitlines()[-1]
    assert hint.endswith(f"continue with: microgpt-fut train --resume {out}"
                         + (" --backend c" if given or built != "all" else "")), hint


def test_sample_runs_on_multicore_where_only_that_library_is_built(tmp_path, monkeypatch):
    """sample's default is c; with only multicore built it runs there (its text may
    differ from c's in a draw where float rounding tips it, so only its form is checked)."""
    need_library("multicore", "gpt2")
    train(tmp_path, "small", SMALL)
    args = ["sample", "--checkpoint", str(tmp_path / "small.safetensors"), "--prompt", "A",
            "--max-new-tokens", "20", "--plain"]
    on_c = CliRunner().invoke(main, args)
    assert on_c.exit_code == 0, on_c.output
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "gpt2_multicore").symlink_to(build_dir() / "gpt2_multicore")
    monkeypatch.setenv("MICROGPT_FUT_BUILD", str(tmp_path / "build"))
    on_mc = CliRunner().invoke(main, args)
    assert on_mc.exit_code == 0, on_mc.output
    for r in (on_c, on_mc):
        text = json.loads(r.stdout)
        assert text.startswith("A") and len(text) > 1


def test_without_the_multicore_library_the_note_says_how_to_build_it(tmp_path, monkeypatch):
    need_library("c", "gpt2")
    only_c = tmp_path / "build"
    only_c.mkdir()
    (only_c / "gpt2_c").symlink_to(build_dir() / "gpt2_c")
    monkeypatch.setenv("MICROGPT_FUT_BUILD", str(only_c))
    err, rows = train(tmp_path, "recipe", RECIPE)
    assert "backend: c" in err
    notes = [ln for ln in err.splitlines() if ln.startswith("note:")]
    assert notes == ["note: running on c; `BACKENDS=gpt2_multicore ./build.sh` (minutes, once) "
                     "builds the multicore library, which runs a model this size faster and "
                     "is then the default"]
    err, _ = train(tmp_path, "quiet", RECIPE, "--quiet")
    assert err == ""
