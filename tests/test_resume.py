"""Nothing lost: exact resume, periodic and atomic saves, Ctrl-C, divergence, resume errors.

A run trained 25 steps, saved, loaded and continued for 35 must equal the run
trained 60 steps straight: every parameter, Adam moment and logged loss, bit for
bit, on every backend whose runs are bit-reproducible (c, and multicore for a given
thread count since build.sh fixes its reductions' split: docs/reproducibility.md;
the GPU backends' resumed runs must match within RESUME_ATOL).
The data is 7 names in batches of 3, so the cursor (step * 3) wraps around the
shuffled documents several times and step 26, the first after the resume, takes
documents 5, 6 and 0: it crosses the end of an epoch.
"""
from __future__ import annotations

import dataclasses
import gc
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import weakref
from pathlib import Path

import numpy as np
import pytest

from click.testing import CliRunner

from cli_helpers import (assert_one_line_error, broken_checkpoints, diverge, lines_run,
                         need_backend, sigint_at_step, small_data, without_metadata_sum)
from microgpt_fut.training import checkpoint as ckpt
from microgpt_fut.cli.commands import main
from microgpt_fut.data.lines import batch_indices, load_data
from microgpt_fut.models.microgpt import MicrogptConfig, MicrogptModel
from microgpt_fut.training.run import Run
from microgpt_fut.training.optimizer import Adam
from microgpt_fut.training.settings import Settings

SEVEN = ["emma", "olivia", "ava", "isabella", "sophia", "mia", "amelia"]
RESUME_ATOL = 1e-4  # for backends that are not bit-reproducible run to run (opencl, cuda)


def run(*args, **kw):
    return CliRunner().invoke(main, [str(a) for a in args], **kw)


def seven(folder: Path) -> Path:
    path = folder / "seven.txt"
    path.write_text("\n".join(SEVEN) + "\n")
    return path


def settings(k: int, steps: int = 60) -> Settings:
    return Settings(num_steps=steps, batch_size=3, steps_per_call=k)


def state(t: Run) -> dict[str, np.ndarray]:
    """Everything a run's future depends on, plus its logged losses, as host arrays."""
    m, v = t.model.adam()
    out = {f"p.{n}": a for n, a in t.model.params().items()}
    out.update({f"m.{n}": a for n, a in m.items()})
    out.update({f"v.{n}": a for n, a in v.items()})
    out["losses"] = t.losses[:t.step].copy()
    out["step"] = np.array([t.step, t.model.step()])
    return out


def straight(rt, folder: Path, k: int = 50) -> dict[str, np.ndarray]:
    docs, info = load_data(seven(folder))
    config = MicrogptConfig(len(set("".join(docs))) + 1)
    t = lines_run(rt, docs, settings(k), config, info)
    t.run()
    return state(t)


def assert_same(a: dict, b: dict, exact: bool) -> None:
    assert a.keys() == b.keys()
    for name in a:
        if exact:
            assert np.array_equal(a[name], b[name]), name
        else:
            assert np.allclose(a[name], b[name], rtol=0, atol=RESUME_ATOL), name


def test_step_26_crosses_the_end_of_an_epoch():
    assert batch_indices(25, 1, 3, 7).tolist() == [[5, 6, 0]]


def test_resume_is_bit_identical(rt, tmp_path):
    """60 straight == 25 + save + load + 35, fused as K=50 (25 then 35 in one call each)."""
    docs, info = load_data(seven(tmp_path))
    config = MicrogptConfig(len(set("".join(docs))) + 1)
    ref = straight(rt, tmp_path)
    # c and multicore promise the same bits run to run (multicore: for one thread
    # count); the GPU backends' scheduling is theirs: RESUME_ATOL there
    exact = rt.backend in ("c", "multicore")
    if exact:
        again = straight(rt, tmp_path)
        assert all(np.array_equal(ref[n], again[n]) for n in ref), \
            f"the {rt.backend} backend must be bit-reproducible"

    first = lines_run(rt, docs, settings(50), config, info)
    first.run(until=25)
    assert first.step == 25 and first.model.step() == 25
    path = tmp_path / "at25.safetensors"
    ckpt.save(path, first.checkpoint())
    del first

    ck = ckpt.load(path)
    assert ck.step == 25 and ck.train["cursor"] == 75 and ck.train["num_steps"] == 60
    assert ck.losses.shape == (25,) and ck.losses.dtype == np.float32
    for k in (50, 7):  # one call of 35 steps, or calls of 7
        resumed = lines_run(rt, docs, settings(k), info=info, ck=ck)
        resumed.run()
        got = state(resumed)
        assert_same(got, ref, exact)
        ckpt.save(tmp_path / "final.safetensors", resumed.checkpoint())
        final = ckpt.load(tmp_path / "final.safetensors")
        assert np.array_equal(final.losses, got["losses"]) and final.losses.shape == (60,)


def test_steps_per_call_does_not_change_the_result(tmp_path):
    """The Futhark loop is the same whatever K: K=50, 7 and 1 give identical runs (c)."""
    need_backend("c")
    from conftest import get_runtime

    rt = get_runtime("c")
    ref = straight(rt, tmp_path, 50)
    for k in (7, 1):
        assert_same(straight(rt, tmp_path, k), ref, exact=True)


# --- through the command line -------------------------------------------------------------

def _ck_arrays(path: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(path))


def test_cli_interrupt_and_resume_equal_straight_run(tmp_path, monkeypatch):
    need_backend("c")
    data = seven(tmp_path)
    common = ["--data", data, "--batch-size", 3, "--steps", 60, "--samples", 5]
    full = run("train", *common, "--out", tmp_path / "full.safetensors")
    assert full.exit_code == 0, full.output

    part = tmp_path / "part.safetensors"
    with monkeypatch.context() as m:
        sigint_at_step(m, MicrogptModel, 25)
        r = run("train", *common, "--steps-per-call", 5, "--out", part)
    assert r.exit_code == 130, r.output
    assert f"saved the checkpoint of step 25 of 60 to {str(part)!r}" in r.stderr
    assert "--resume" in r.stderr and "sample" not in r.stdout
    assert ckpt.load(part).step == 25

    r2 = run("train", "--resume", part, "--samples", 5)  # --out defaults to --resume
    assert r2.exit_code == 0, r2.output
    assert "resuming" in r2.stderr and "at step 25 of 60" in r2.stderr
    a, b = _ck_arrays(part), _ck_arrays(tmp_path / "full.safetensors")
    assert a.keys() == b.keys() and "train.losses" in a and a["train.losses"].shape == (60,)
    for name in a:
        assert np.array_equal(a[name], b[name]), name
    assert ckpt.load(part).train == ckpt.load(tmp_path / "full.safetensors").train
    samples = lambda out: [ln for ln in out.splitlines() if ln.startswith("sample")]  # noqa: E731
    assert samples(r2.stdout) == samples(full.stdout) and len(samples(full.stdout)) == 5


def test_resume_with_explicit_out_keeps_the_checkpoint(tmp_path, monkeypatch):
    need_backend("c")
    data = seven(tmp_path)
    part = tmp_path / "part.safetensors"
    with monkeypatch.context() as m:
        sigint_at_step(m, MicrogptModel, 10)
        r = run("train", "--data", data, "--steps", 20, "--steps-per-call", 5, "--out", part)
    assert r.exit_code == 130, r.output
    before = part.read_bytes()
    done = tmp_path / "done.safetensors"
    r = run("train", "--resume", part, "--out", done, "--samples", 0, "--steps", 20,
            "--seed", 42, "--n-embd", 16)  # agreeing options are fine
    assert r.exit_code == 0, r.output
    assert part.read_bytes() == before
    assert ckpt.load(done).step == 20
    r = run("train", "--resume", done, "--samples", 0)
    assert r.exit_code == 0 and "the run is complete at step 20 of 20" in r.stderr


def test_resuming_a_complete_run_writes_nothing(saved, tmp_path):
    """`train --resume` of a run at its last step, given its documents under another
    path: status 0, one line on stderr (complete at step 30, nothing to train, how to
    train further: --init-from with more --steps, as --steps of a resumed run cannot
    change), nothing on stdout, the checkpoint untouched (not saved again with the
    other path); more --steps is refused naming --init-from."""
    _, data, out = saved
    copy = tmp_path / "copy.txt"
    copy.write_bytes(data.read_bytes())
    before, mtime = out.read_bytes(), out.stat().st_mtime_ns
    r = run("train", "--resume", out, "--data", copy)
    assert r.exit_code == 0, r.output
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    more = out.with_name(out.stem + "_more.safetensors")
    for fragment in (str(out), "complete at step 30 of 30", "nothing to train",
                     "nothing written", f"microgpt-fut train --init-from {out}",
                     f"--data {copy}", "--steps 30", f"--out {more}"):
        assert fragment in lines[0], (fragment, lines[0])
    assert out.read_bytes() == before and out.stat().st_mtime_ns == mtime
    assert ckpt.load(out).train["data_path"] == str(data.resolve())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.txt"]
    r = run("train", "--resume", out, "-q")  # the outcome, even with -q
    assert r.exit_code == 0 and "nothing to train" in r.stderr, r.output
    hint = shlex.split(lines[0].split("from its weights: microgpt-fut ")[1])
    r = run(*hint, "--samples", 0)  # the hint as given works
    assert r.exit_code == 0, r.output
    assert ckpt.load(more).step == 30 and out.read_bytes() == before
    more.unlink()
    for extra in tmp_path.glob(more.stem + ".losses.*"):
        extra.unlink()
    r = run("train", "--resume", out, "--steps", 60)
    assert_one_line_error(r, "--steps 60 does not match", "complete", f"--init-from {out}",
                          "--steps 60")
    assert r.exit_code == 2 and out.read_bytes() == before


def test_periodic_saves_land_on_multiples(tmp_path, monkeypatch):
    need_backend("c")
    steps_saved = []
    real = ckpt.save
    monkeypatch.setattr(ckpt, "save", lambda p, ck: (steps_saved.append(ck.step), real(p, ck)))
    out = tmp_path / "m.safetensors"
    r = run("train", "--data", seven(tmp_path), "--steps", 25, "--save-every", 10,
            "--steps-per-call", 7, "--out", out, "--samples", 0)
    assert r.exit_code == 0, r.output
    assert steps_saved == [10, 20, 25]
    assert "saved checkpoint" in r.stderr and "(step 20 of 25)" in r.stderr


def test_failed_periodic_save_keeps_the_previous_one(tmp_path, monkeypatch):
    need_backend("c")
    out = tmp_path / "m.safetensors"
    calls = []
    real_write = ckpt._write_all

    def fail_second(f, data):
        calls.append(len(data))
        if len(calls) == 2:
            f.write(data[:len(data) // 2])
            raise OSError(28, "No space left on device")
        real_write(f, data)

    monkeypatch.setattr(ckpt, "_write_all", fail_second)
    r = run("train", "--data", seven(tmp_path), "--steps", 40, "--save-every", 10,
            "--out", out, "--samples", 0)
    msg = assert_one_line_error(r, "No space left on device", str(out),
                                "still holds this run's checkpoint of step 10")
    assert "Traceback" not in msg
    ck = ckpt.load(out)
    assert ck.step == 10 and ck.losses.shape == (10,)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors", "seven.txt"]


def test_huge_step_count_costs_nothing_up_front(tmp_path):
    """--steps 10**12 must not allocate a loss per step before training."""
    need_backend("c")
    from conftest import get_runtime

    docs, info = load_data(seven(tmp_path))
    t = lines_run(get_runtime("c"), docs, Settings(num_steps=10**12, steps_per_call=4),
                  MicrogptConfig(len(set("".join(docs))) + 1), info)
    t.run(until=10)
    ck = t.checkpoint()
    assert ck.step == 10 and ck.losses.shape == (10,) and ck.train["num_steps"] == 10**12


# --- divergence ---------------------------------------------------------------------------

def _diverged_step(result) -> int:
    msg = assert_one_line_error(result, "training diverged at step", "--lr")
    return int(re.search(r"at step (\d+) of", msg).group(1))


def test_huge_lr_stops_naming_the_first_bad_step(tmp_path):
    need_backend("c")
    out = tmp_path / "m.safetensors"
    args = ["train", "--data", seven(tmp_path), "--steps", 50, "--lr", "1e30", "--out", out]
    step_one_by_one = _diverged_step(run(*args, "--steps-per-call", 1))
    step_fused = _diverged_step(run(*args, "--steps-per-call", 7))
    assert 1 <= step_fused == step_one_by_one <= 50
    assert not out.exists()
    assert "nothing was saved" in run(*args).stderr


def test_training_left_at_last_good_step(tmp_path):
    need_backend("c")
    from conftest import get_runtime

    rt = get_runtime("c")
    docs, info = load_data(seven(tmp_path))
    config = MicrogptConfig(len(set("".join(docs))) + 1)
    diverge(lines_run(rt, docs, Settings(num_steps=50, optimizer=Adam(lr=1e30), steps_per_call=9),
                      config, info))


def test_a_finite_call_lets_the_state_before_it_go(tmp_path):
    """After each call the run holds one state, the new one: the state before the call
    (the initial one here) was consumed by it and is freed, not kept to go back to (a
    step that would break the state is never taken; GPT-2 124M: 1.5 GB)."""
    need_backend("c")
    from conftest import get_runtime

    rt = get_runtime("c")
    docs, info = load_data(seven(tmp_path))
    config = MicrogptConfig(len(set("".join(docs))) + 1)
    training = lines_run(rt, docs, Settings(num_steps=6, steps_per_call=2), config, info)
    first = weakref.ref(training.model.state)
    training.run(until=2)
    second = weakref.ref(training.model.state)
    training.run(until=4)
    gc.collect()
    assert first() is None and second() is None
    assert training.step == 4 and np.isfinite(training.losses).all()


def test_divergence_after_a_periodic_save_keeps_it(tmp_path, monkeypatch):
    """A blow-up at step 21 (lr made huge from then on) leaves the step-20 checkpoint."""
    need_backend("c")
    real = MicrogptModel.train

    def huge_lr_from_step_20(self, tokens, n_pos, optimizer, *a):
        if self.step() >= 20:
            optimizer = dataclasses.replace(optimizer, lr=optimizer.lr * 1e32)
        return real(self, tokens, n_pos, optimizer, *a)

    monkeypatch.setattr(MicrogptModel, "train", huge_lr_from_step_20)
    out = tmp_path / "m.safetensors"
    args = ["train", "--data", small_data(tmp_path, 100), "--steps", 60, "--save-every", 10,
            "--out", out, "--samples", 0]
    one_by_one = _diverged_step(run(*args, "--steps-per-call", 1))
    before = ckpt.load(out)
    saves = []
    real_save = ckpt.save
    monkeypatch.setattr(ckpt, "save", lambda p, ck: (saves.append(ck.step), real_save(p, ck)))
    r = run(*args, "--steps-per-call", 7, "--overwrite")  # --out holds the first run's
    assert _diverged_step(r) == one_by_one and one_by_one > 20
    assert "still holds this run's checkpoint of step 20" in r.stderr
    assert saves == [10, 20]
    ck = ckpt.load(out)
    assert ck.step == before.step == 20
    for name in ck.params:
        assert np.array_equal(ck.params[name], before.params[name]), name
    for group in (ck.params, ck.m, ck.v):
        assert all(np.isfinite(a).all() for a in group.values())
    assert np.isfinite(ck.losses).all()


# --- bad resumes: one line, nothing lost ---------------------------------------------------

@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A finished 30-step run (block size 12, batch 3): (folder, data, checkpoint)."""
    need_backend("c")
    folder = tmp_path_factory.mktemp("resume")
    data = seven(folder)
    out = folder / "m.safetensors"
    r = run("train", "--data", data, "--steps", 30, "--batch-size", 3, "--out", out,
            "--samples", 0, "--block-size", 12)
    assert r.exit_code == 0, r.output
    return folder, data, out


@pytest.mark.parametrize("args, fragments", [
    (["--n-embd", "32"], ["--n-embd 32 conflicts", "--n-embd 16"]),
    (["--n-head", "2"], ["--n-head 2 conflicts"]),
    (["--n-layer", "2"], ["--n-layer 2 conflicts"]),
    (["--mlp-width", "8"], ["--mlp-width 8 conflicts"]),
    (["--block-size", "8"], ["--block-size 8 conflicts"]),
    (["--block-size", "32"], ["--block-size 32 is larger than the positional table",
                              "12 positions"]),
    (["--steps", "100"], ["--steps 100 does not match", "30 steps in total"]),
    (["--steps", "10"], ["--steps 10 does not match"]),
    (["--lr", "0.02"], ["--lr 0.02 conflicts"]),
    (["--seed", "7"], ["--seed 7 conflicts"]),
    (["--batch-size", "1"], ["--batch-size 1 conflicts"]),
])
def test_resume_option_conflicts(saved, args, fragments):
    _, _, out = saved
    before = out.read_bytes()
    r = run("train", "--resume", out, *args)
    assert_one_line_error(r, *fragments, str(out))
    assert r.exit_code == 2 and out.read_bytes() == before


def test_resume_on_other_data_is_refused(saved, tmp_path):
    _, _, out = saved
    before = out.read_bytes()
    other = tmp_path / "other.txt"
    other.write_text("\n".join(SEVEN[:-1] + ["ameliA"]) + "\n")
    assert_one_line_error(run("train", "--resume", out, "--data", other),
                          "refusing to resume", "other data", str(other),
                          "give --data the documents it was trained on")
    same = tmp_path / "same.txt"  # the same documents, other layout: accepted
    same.write_bytes(("\r\n\n".join(SEVEN) + "\r\n").encode())
    r = run("train", "--resume", out, "--data", same, "--out", tmp_path / "x.safetensors",
            "--samples", 0)
    assert r.exit_code == 0, r.output
    assert out.read_bytes() == before


def test_resume_when_the_data_file_is_gone(saved, tmp_path):
    _, data, _ = saved
    gone = tmp_path / "gone.txt"
    gone.write_text(data.read_text())
    out = tmp_path / "g.safetensors"
    r = run("train", "--data", gone, "--steps", 2, "--out", out, "--samples", 0)
    assert r.exit_code == 0, r.output
    gone.unlink()
    assert_one_line_error(run("train", "--resume", out), "is not there any more", "--data")
    r = run("train", "--resume", out, "--data", data, "--samples", 0)  # found elsewhere
    assert r.exit_code == 0, r.output


def test_resume_bad_checkpoints(saved, tmp_path):
    _, _, out = saved
    for path, fragment in broken_checkpoints(tmp_path, out):
        assert_one_line_error(run("train", "--resume", path), fragment)
    # a checkpoint without the resume metadata (e.g. made by other tools)
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file
    with safe_open(str(out), framework="numpy") as f:
        meta = dict(f.metadata())
    del meta["data_sha256"]
    bare = tmp_path / "bare.safetensors"
    save_file(load_file(str(out)), str(bare), metadata=without_metadata_sum(meta))
    assert_one_line_error(run("train", "--resume", bare), "cannot be resumed", "data_sha256")
    assert run("sample", "--checkpoint", bare, "-n", 2).exit_code == 0  # still samples


# --- Ctrl-C on a real process --------------------------------------------------------------

def test_sigint_saves_and_resume_finishes(tmp_path):
    """`python -m microgpt_fut.cli.commands train`, SIGINT after its first progress line: exit 130,
    a checkpoint named in the message, and resuming it finishes the run exactly."""
    need_backend("c")
    data = small_data(tmp_path, 2000)
    out = tmp_path / "run.safetensors"
    total = 6000
    args = ["--data", str(data), "--steps", str(total), "--n-embd", "8", "--n-head", "2",
            "--block-size", "8", "--steps-per-call", "5", "--samples", "0"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "microgpt_fut.cli.commands", "train", *args,
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        for line in proc.stderr:  # progress goes to stderr
            if re.match(r"step +\d+ / 6000", line):
                break
            assert time.monotonic() < deadline
        else:
            pytest.fail(f"no progress line; stdout: {proc.stdout.read()}")
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (stdout, stderr)
    assert "Traceback" not in stderr
    assert f"to {str(out)!r}" in stderr and f"--resume {out}" in stderr, stderr
    ck = ckpt.load(out)
    assert 1 <= ck.step < total and ck.losses.shape == (ck.step,)
    assert f"step {ck.step} of {total}" in stderr

    r = subprocess.run([sys.executable, "-m", "microgpt_fut", "train", "--resume", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert ckpt.load(out).step == total

    from conftest import get_runtime
    docs, info = load_data(data)
    t = lines_run(get_runtime("c"), docs, Settings(num_steps=total, steps_per_call=50),
                  MicrogptConfig(ck.config.vocab_size, 8, 2, 1, 8), info)
    t.run()
    final = ckpt.load(out)
    for name, arr in t.model.params().items():
        assert np.array_equal(final.params[name], arr), name
    assert np.array_equal(final.losses, t.losses)


def test_python_dash_m_names_the_program():
    r = subprocess.run([sys.executable, "-m", "microgpt_fut.cli.commands", "--help"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "Usage: microgpt-fut" in r.stdout
    r = subprocess.run([sys.executable, "-m", "microgpt_fut", "train", "--help"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "--resume FILE" in r.stdout and "--save-every" in r.stdout


def test_resume_refuses_a_damaged_checkpoint(saved, tmp_path):
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    _, _, out = saved
    with safe_open(str(out), framework="numpy") as f:
        meta = dict(f.metadata())
    tensors = load_file(str(out))
    tensors["adam.v.layer0.mlp_fc1"][3, 2] = np.nan
    damaged = tmp_path / "damaged.safetensors"
    save_file(tensors, str(damaged), metadata=meta)
    assert_one_line_error(run("train", "--resume", damaged), str(damaged),
                          "'adam.v.layer0.mlp_fc1' holds NaN", "unusable")
