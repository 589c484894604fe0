"""No checkpoint holding a NaN or an infinity is ever written, and none is read.

A step's loss is computed before its update, so the update that makes the weights
non-finite shows no bad loss of its own: these runs break the weights with an
infinite learning rate from a chosen step on (the loss of that step is still
finite), and check that the error names that step, that --out keeps the last
finite checkpoint on every path (periodic and final saves, Ctrl-C, --threads,
MPI ranks), and that sample, --resume, --init-from and export-hf refuse a file
that holds a NaN in one line, and (the checkpoint's checksums) one with a finite value
overwritten. The expected steps are the ones the runs were
built to break at; AdamW's first step size lr / (1 - beta1) is computed here in
float32 to show why --lr 1e38 breaks step 1.
"""
from __future__ import annotations

import dataclasses
import math
import os
import signal

import numpy as np
import pytest
from click.testing import CliRunner
from safetensors import safe_open
from safetensors.numpy import save_file

from cli_helpers import (assert_one_line_error, need_backend, overwrite_float, shakespeare_file,
                         small_data)
from microgpt_fut.errors import CheckpointError, HFError
from microgpt_fut.training import checkpoint as ckpt
from microgpt_fut.cli.commands import main
from microgpt_fut.models.gpt2 import GPT2Model
from microgpt_fut.models.microgpt import MicrogptModel

SIZES = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16"]


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    return shakespeare_file(tmp_path_factory.mktemp("text"), 5000, "shakespeare_5k.txt")


def run_cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def text_args(text_file, out, *extra):
    return ["train", "--arch", "gpt2", "--data-format", "text", "--data", text_file, *SIZES,
            "--batch-size", "2", "--eval-iters", "1", "--eval-every", "1000", "--warmup-steps",
            "0", "--out", out, "--samples", "0", *extra]


def infinite_lr_from(monkeypatch, cls, step: int) -> None:
    """Make update ``step`` (1-based) and every later one of ``cls.train`` (GPT2Model or
    MicrogptModel) use an infinite learning rate, whatever the calls' sizes: the weights become
    infinite or NaN in that update, while its loss (computed before) stays finite."""
    real = cls.train

    def train(self, tokens, n_pos, *args):
        done = self.step()
        if done < step - 1 < done + len(tokens):  # split the call at the bad step
            cut = step - 1 - done
            first = train(self, tokens[:cut], None if n_pos is None else n_pos[:cut], *args)
            rest = train(self, tokens[cut:], None if n_pos is None else n_pos[cut:], *args)
            return tuple(np.concatenate([a, b]) for a, b in zip(first, rest))
        if done >= step - 1:  # args: the optimiser (Adam or Recipe), the run's length
            inf = {"min_lr": math.inf} if cls is GPT2Model else {}
            args = (dataclasses.replace(args[0], lr=math.inf, **inf), *args[1:])
        return real(self, tokens, n_pos, *args)

    monkeypatch.setattr(cls, "train", train)


def all_finite(path) -> bool:
    with safe_open(str(path), "np") as f:
        return all(np.isfinite(f.get_tensor(k)).all() for k in f.keys())


def test_lr_1e38_breaks_step_1_and_nothing_is_saved(text_file, tmp_path):
    """The issue's command: one step at --lr 1e38 without clipping. AdamW's step size
    lr / (1 - beta1^1) overflows float32, so step 1's update breaks the weights (its
    loss is finite): the error names step 1 and nothing is written (it used to save
    an all-NaN checkpoint and exit 0)."""
    with np.errstate(over="ignore"):
        assert np.isinf(np.float32(1e38) / (np.float32(1) - np.float32(0.9)))
    out = tmp_path / "d.safetensors"
    r = run_cli(*text_args(text_file, out, "--grad-clip", "0", "--lr", "1e38", "--steps", "1"))
    assert_one_line_error(r, "training diverged at step 1 of 1", "its update made",
                          "--lr", "nothing was saved")
    assert not out.exists() and not out.with_suffix(".losses.csv").exists()
    assert "nan" not in r.stdout  # the evaluation after the bad update is not printed


@pytest.mark.parametrize("threads", ["1", "2"])
def test_save_every_step_names_step_1_not_2(text_file, tmp_path, threads):
    """--save-every 1 used to save step 1's NaN weights and blame step 2; on the device
    state and on the host state of --threads 2 alike."""
    out = tmp_path / "d.safetensors"
    r = run_cli(*text_args(text_file, out, "--grad-clip", "0", "--lr", "1e38", "--steps", "20",
                           "--save-every", "1", "--threads", threads))
    assert_one_line_error(r, "training diverged at step 1 of 20", "nothing was saved")
    assert not out.exists()


def test_a_non_finite_evaluation_of_finite_weights_is_named_at_its_step(text_file, tmp_path,
                                                                          monkeypatch):
    """The weights stay finite, but the evaluation at step 10 gives NaN (its forward made so
    here): the one-line error names step 10 and the evaluation, and nothing is saved."""
    real = GPT2Model.losses

    def losses(self, tokens, n_pos=None):
        out = real(self, tokens, n_pos)
        return out * np.float32("nan") if self.step() >= 10 else out

    monkeypatch.setattr(GPT2Model, "losses", losses)
    out = tmp_path / "e.safetensors"
    r = run_cli(*text_args(text_file, out, "--steps", "20", "--eval-every", "10"))
    assert_one_line_error(r, "training diverged at step 10 of 20", "the evaluation loss is nan",
                          "nothing was saved")
    assert not out.exists()


@pytest.mark.parametrize("spc", ["1", "7"])
def test_a_break_at_a_save_step_keeps_the_previous_checkpoint(text_file, tmp_path,
                                                              monkeypatch, spc):
    """Update 20 breaks the weights, and step 20 is a save: the error names step 20 and
    --out keeps step 10's finite checkpoint (it used to hold NaN weights of step 20)."""
    infinite_lr_from(monkeypatch, GPT2Model, 20)
    out = tmp_path / "m.safetensors"
    r = run_cli(*text_args(text_file, out, "--steps", "40", "--save-every", "10",
                           "--steps-per-call", spc))
    assert_one_line_error(r, "training diverged at step 20 of 40", "its update made",
                          "still holds this run's checkpoint of step 10")
    assert ckpt.load(out).step == 10 and all_finite(out)


def test_a_break_in_the_last_step_is_not_saved_microgpt(tmp_path, monkeypatch):
    """microgpt's runs follow the same rule: update 30 of 30 breaks the weights; the
    error names it and --out keeps step 20 (--save-every 10)."""
    need_backend("c")
    infinite_lr_from(monkeypatch, MicrogptModel, 30)
    out = tmp_path / "m.safetensors"
    r = run_cli("train", "--data", small_data(tmp_path, 50), "--steps", 30, "--save-every", 10,
                "--steps-per-call", 4, "--samples", 0, "--out", out)
    assert_one_line_error(r, "training diverged at step 30 of 30", "its update made",
                          "still holds this run's checkpoint of step 20")
    assert ckpt.load(out).step == 20 and all_finite(out)


def test_ctrl_c_after_a_breaking_update_saves_nothing(text_file, tmp_path, monkeypatch):
    """Ctrl-C right after the call whose update 5 would have broken the weights (the
    kernels refused it): the run ends with the divergence error and saves nothing (it
    used to save NaN weights and exit 130)."""
    infinite_lr_from(monkeypatch, GPT2Model, 5)
    real, sent = GPT2Model.train, []

    def train_then_one_sigint(self, *a):
        out = real(self, *a)
        if self.step() == 4 and not sent:  # the call that ended at the refused step 5
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)
        return out

    monkeypatch.setattr(GPT2Model, "train", train_then_one_sigint)
    out = tmp_path / "m.safetensors"
    r = run_cli(*text_args(text_file, out, "--steps", "40", "--steps-per-call", "5"))
    assert_one_line_error(r, "training diverged at step 5 of 40", "nothing was saved")
    assert r.exit_code == 1 and not out.exists()


def _with_nan(src, dst, name: str) -> None:
    """dst: the checkpoint src (its metadata kept) with one NaN in tensor ``name``."""
    with safe_open(str(src), "np") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    tensors[name] = tensors[name].copy()
    tensors[name].flat[0] = np.nan
    save_file(tensors, str(dst), metadata=meta)


@pytest.fixture(scope="module")
def text_checkpoint(text_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("ck") / "good.safetensors"
    r = run_cli(*text_args(text_file, out, "--steps", "2"))
    assert r.exit_code == 0, r.output
    return out


@pytest.mark.parametrize("tensor", ["h.0.mlp.c_fc.weight", "adam.v.wte.weight"])
def test_resume_refuses_a_file_with_nan(text_checkpoint, tmp_path, tensor):
    bad = tmp_path / "bad.safetensors"
    _with_nan(text_checkpoint, bad, tensor)
    r = run_cli("train", "--resume", bad, "--samples", 0)
    msg = assert_one_line_error(r, str(bad), repr(tensor), "NaN or infinite", "unusable")
    assert "--lr" not in msg  # the tool never saves such a file: no run of it diverged


@pytest.mark.parametrize("command", [
    lambda bad, tmp: ["sample", "--checkpoint", bad, "-n", "1", "--max-new-tokens", "2"],
    lambda bad, tmp: ["export-hf", bad, tmp / "hf"],
    lambda bad, tmp: ["train", "--init-from", bad, "--data", bad.with_name("t.txt"),
                      "--steps", "1", "--out", tmp / "new.safetensors"]],
    ids=["sample", "export-hf", "init-from"])
def test_commands_refuse_weights_with_nan(text_checkpoint, text_file, tmp_path, command):
    bad = tmp_path / "bad.safetensors"
    _with_nan(text_checkpoint, bad, "wte.weight")
    bad.with_name("t.txt").write_text(text_file.read_text(encoding="utf-8"), encoding="utf-8")
    r = run_cli(*command(bad, tmp_path))
    assert_one_line_error(r, str(bad), "'wte.weight'", "NaN or infinite")
    assert not (tmp_path / "hf").exists() and not (tmp_path / "new.safetensors").exists()


@pytest.mark.parametrize("command", [
    lambda bad, tmp: ["sample", "--checkpoint", bad, "-n", "1", "--max-new-tokens", "2",
                      "--temperature", "0"],
    lambda bad, tmp: ["eval", "--checkpoint", bad, "--choices", tmp / "q.jsonl"],
    lambda bad, tmp: ["export-hf", bad, tmp / "hf"],
    lambda bad, tmp: ["train", "--resume", bad, "--samples", "0"],
    lambda bad, tmp: ["train", "--init-from", bad, "--data", bad.with_name("t.txt"),
                      "--steps", "1", "--out", tmp / "new.safetensors"]],
    ids=["sample", "eval", "export-hf", "resume", "init-from"])
def test_commands_refuse_a_corrupted_finite_weight(text_checkpoint, text_file, tmp_path,
                                                   command):
    """4 bytes of wte.weight overwritten with 3.39e38 (finite): every reader refuses the
    file in one line naming it and the tensor, and writes nothing."""
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(text_checkpoint.read_bytes())
    overwrite_float(bad, "wte.weight", 3.39e38, index=5)
    bad.with_name("t.txt").write_text(text_file.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "q.jsonl").write_text(
        '{"ctx": "First", "endings": [" Citizen", " citizen"], "label": 0}\n', encoding="utf-8")
    before = bad.read_bytes()
    r = run_cli(*command(bad, tmp_path))
    assert_one_line_error(r, str(bad), "'wte.weight'", "corrupted")
    assert r.exit_code == 1 and bad.read_bytes() == before
    assert not (tmp_path / "hf").exists() and not (tmp_path / "new.safetensors").exists()


def test_sample_refuses_a_names_checkpoint_with_inf(tmp_path):
    need_backend("c")
    good = tmp_path / "good.safetensors"
    assert run_cli("train", "--data", small_data(tmp_path, 20), "--steps", 3, "--samples", 0,
                   "--out", good).exit_code == 0
    bad = tmp_path / "bad.safetensors"
    _with_nan(good, bad, "lm_head")
    with safe_open(str(bad), "np") as f:
        assert np.isnan(f.get_tensor("lm_head")).any()
    assert_one_line_error(run_cli("sample", "--checkpoint", bad), "'lm_head'", "NaN")


def test_save_refuses_non_finite_tensors(text_checkpoint, tmp_path):
    """The last guard: checkpoint.save writes nothing for a state with an infinity."""
    ck = ckpt.load(text_checkpoint)
    ck.m = {k: a.copy() for k, a in ck.m.items()}
    ck.m["wpe"][0, 0] = np.inf
    out = tmp_path / "x.safetensors"
    with pytest.raises(CheckpointError, match="'adam.m.wpe.weight' holds NaN"):
        ckpt.save(out, ck)
    assert list(tmp_path.iterdir()) == []


def test_hf_folder_with_nan_is_refused(text_checkpoint, tmp_path):
    folder = tmp_path / "hf"
    assert run_cli("export-hf", text_checkpoint, folder).exit_code == 0
    weights = folder / "model.safetensors"
    _with_nan(weights, weights, "transformer.ln_f.weight")
    r = run_cli("sample", "--checkpoint", folder, "-n", "1", "--max-new-tokens", "2")
    assert_one_line_error(r, str(folder), "'ln_f.weight'", "NaN or infinite")


def test_export_folder_refuses_non_finite_weights(text_checkpoint, tmp_path):
    from microgpt_fut.training import hf

    ck = ckpt.load(text_checkpoint, adam=False)
    ck.params = {k: a.copy() for k, a in ck.params.items()}
    ck.params["ln_f_w"][0] = np.nan
    with pytest.raises(HFError, match="'ln_f_w' holds NaN"):
        hf.export_folder(ck, tmp_path / "hf")
    assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize("where", ["params", "m", "v", "none"])
def test_the_device_counts_non_finite_values_without_a_host_copy(backend, tiny, where):
    """MicrogptModel.finite is one reduction on the device (entry nonfinite_count), checked here
    against NumPy's count of NaN and infinities in the same arrays, on every backend;
    values near float32's largest are finite (a sum of squares would overflow)."""
    from conftest import get_runtime

    rt = get_runtime(backend)
    params = {k: a.copy() for k, a in tiny.params.items()}
    m = {k: np.full_like(a, 3e38) for k, a in params.items()}
    v = {k: np.zeros_like(a) for k, a in params.items()}
    groups = {"params": params, "m": m, "v": v}
    if where != "none":
        arrays = groups[where]
        arrays["wte"][0, 1], arrays["lm_head"][2, 0] = np.nan, -np.inf
    model = MicrogptModel.from_arrays(rt, tiny.config, params, m, v)
    want = sum(int((~np.isfinite(a)).sum()) for g in groups.values() for a in g.values())
    got = float(rt.numpy(rt.entry("nonfinite_count", model.state))[0])
    assert got == want == (0 if where == "none" else 2)
    assert model.finite() == (where == "none")


@pytest.mark.parametrize("arch", ["microgpt", "gpt2"])
def test_a_broken_update_ends_the_run_at_its_own_call(arch, text_file, tmp_path, monkeypatch):
    """Update 8, the last of the call of steps 5-8 (--steps-per-call 4), breaks the
    weights while its loss stays finite. That call ends the run, because the kernels
    refuse an update that breaks the weights and end the call there: no call starts at
    step 8 or later, and none trains on broken weights."""
    need_backend("c")
    cls = GPT2Model if arch == "gpt2" else MicrogptModel
    infinite_lr_from(monkeypatch, cls, 8)
    starts, patched = [], cls.train

    def train(self, *a, **kw):
        starts.append(self.step())
        return patched(self, *a, **kw)

    monkeypatch.setattr(cls, "train", train)
    out = tmp_path / "m.safetensors"
    common = ("--steps", "20", "--steps-per-call", "4")
    r = run_cli(*(text_args(text_file, out, *common) if arch == "gpt2" else
                  ("train", "--data", small_data(tmp_path, 50), *common, "--samples", "0",
                   "--out", out)))
    assert_one_line_error(r, "training diverged at step 8 of 20", "its update made")
    assert max(starts) < 8, starts
    assert not out.exists()


@pytest.mark.parametrize("where", ["params", "m", "v", "none"])
def test_gpt2_counts_non_finite_values_on_the_device(gpt2_rt, where):
    """GPT-2's own nonfinite_count (its state: biases, LayerNorms, the tied head) against
    NumPy's count of NaN and infinities in the same arrays, one in every tensor of the
    group (NaNs with the sign bit set and with payloads among them), on every backend;
    values near float32's largest, the largest itself, the smallest subnormal and -0 are
    finite (the kernels read the exponent's bits: train.fut's `nonfinite`)."""
    from microgpt_fut.models.gpt2 import GPT2Config

    cfg = GPT2Config(vocab_size=11, n_embd=8, n_head=2, n_layer=2, block_size=6, bias=True)
    rng = np.random.default_rng(0)
    params = {k: rng.standard_normal(s).astype(np.float32) for k, s in cfg.shapes().items()}
    m = {k: np.full_like(a, -3e38) for k, a in params.items()}
    v = {k: np.full_like(a, 3e38) for k, a in params.items()}
    big, tiny_ = np.finfo(np.float32).max, np.float32(np.finfo(np.float32).smallest_subnormal)
    params["wte"].flat[-4:] = (big, -big, tiny_, -0.0)
    groups = {"params": params, "m": m, "v": v}
    bad = [np.nan, np.inf, -np.inf] + [np.uint32(b).view(np.float32)
                                       for b in (0xFFC00000, 0x7F800001, 0xFFFFFFFF)]
    for i, a in enumerate(groups[where].values() if where != "none" else []):
        a.flat[i % a.size] = bad[i % len(bad)]  # one in every tensor
    model = GPT2Model.from_arrays(gpt2_rt, cfg, params, m, v)
    want = sum(int((~np.isfinite(a)).sum()) for g in groups.values() for a in g.values())
    got = float(gpt2_rt.numpy(gpt2_rt.entry("nonfinite_count", model.state))[0])
    assert got == want == (0 if where == "none" else len(params))
    assert model.finite() == (where == "none")


@pytest.mark.parametrize("arch", ["microgpt", "gpt2"])
def test_a_decay_that_breaks_the_weights_names_weight_decay(tmp_path, arch):
    """AdamW's decay scales each decayed weight by 1 - lr x weight_decay: at 1 or more the
    run diverges whatever --lr's own size, so the one-line error names --weight-decay and
    the product, not --lr (the trial of issue 42: --weight-decay 1e30 said 'try a smaller
    --lr')."""
    need_backend("c")
    out = tmp_path / "m.safetensors"
    r = run_cli("train", "--arch", arch, "--data", small_data(tmp_path, 50), "--steps", "6",
                "--n-embd", "16", "--n-head", "2", "--weight-decay", "1e30", "--samples", "0",
                "--out", out)
    line = assert_one_line_error(r, "training diverged at step", "try a smaller --weight-decay",
                                 "x --weight-decay 1e+30 must stay below 1")
    assert "smaller --lr" not in line
    assert not out.exists()
