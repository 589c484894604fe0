"""One Run over every model family and dataset (run.py, family.py, datasets.py).

Every combination of microgpt and GPT-2 with names as lines, a text stream and token
shards trains through the same ``Run``: a run stopped and resumed from its checkpoint
is bit-identical to the uninterrupted one; a divergence inside a call leaves the run
at the last good step with the losses of the good steps before it; the new
combinations (GPT-2 on lines, microgpt on text) compute the float64 references'
losses (tests/reference.py, tests/reference_gpt2.py); and runs on `prepare`d token
shards equal runs on the text they came from.
"""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

import reference as RM
import reference_gpt2 as RG
from cli_helpers import lines_run, names_lines, shakespeare_file
from conftest import get_runtime
from microgpt_fut.training import checkpoint as ckpt
from microgpt_fut.training import family as fam
from microgpt_fut.cli.commands import main
from microgpt_fut.training.optimizer import Adam, optimizer_from_train
from microgpt_fut.models.gpt2 import GPT2Config
from microgpt_fut.training.optimizer import Recipe
from microgpt_fut.models.microgpt import MicrogptConfig
from microgpt_fut.errors import Diverged
from microgpt_fut.training.run import Run
from microgpt_fut.data.shards import load_tokens
from microgpt_fut.data.text import load_text
from microgpt_fut.data.datasets import Stream
from microgpt_fut.training.settings import Settings

COMBOS = [("microgpt", "lines"), ("gpt2", "lines"), ("microgpt", "text"), ("gpt2", "text"),
          ("gpt2", "tokens"), ("microgpt", "tokens")]
RECIPE = Recipe(lr=1e-2, min_lr=1e-3, warmup_steps=2, lr_decay_steps=8)
T = 16


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    return shakespeare_file(tmp_path_factory.mktemp("text"), 30_000)


@pytest.fixture(scope="module")
def shard_dir(text_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("shards") / "sh"
    r = CliRunner().invoke(main, ["prepare", str(text_file), "--out", str(out),
                                  "--shard-tokens", "7000"])
    assert r.exit_code == 0, r.output
    return out


def settings(arch: str, fmt: str, steps: int = 8, spc: int = 4, threads: int = 1):
    if fmt == "lines" and arch == "microgpt":
        return Settings(num_steps=steps, batch_size=4, steps_per_call=spc, threads=threads)
    opt = RECIPE if arch == "gpt2" else Adam()
    return Settings(steps, 4, opt, 1 if fmt == "lines" else 2, 4, 2, 42, spc, threads)


def make(arch: str, fmt: str, text_file, shard_dir, spc: int = 4, threads: int = 1):
    """A fresh run of the combination (c backend), and the function that resumes one."""
    rt = get_runtime("c", arch)
    s = settings(arch, fmt, spc=spc, threads=threads)
    cls = MicrogptConfig if arch == "microgpt" else GPT2Config
    if fmt == "lines":
        docs = [d for d in names_lines() if d][:60]
        from microgpt_fut.data.lines import Vocab
        config = cls(Vocab.from_docs(docs).size, 16, 2, 1, T)
        return (lines_run(rt, docs, s, config),
                lambda ck: lines_run(rt, docs, s, ck=ck))
    data = load_text(text_file, T) if fmt == "text" else load_tokens(shard_dir, T)
    config = cls(data.vocab.size, 16, 2, 1, T)
    return (Run.start(rt, Stream(data, fmt), s, config),
            lambda ck: Run.resume(rt, ck, Stream(data, fmt), s))


@pytest.mark.parametrize("arch,fmt", COMBOS)
def test_stop_save_resume_is_bit_identical(arch, fmt, text_file, shard_dir, tmp_path):
    whole, _ = make(arch, fmt, text_file, shard_dir)
    whole.run()
    part, resume = make(arch, fmt, text_file, shard_dir)
    part.run(until=3)
    path = tmp_path / "ck.safetensors"
    ckpt.save(path, part.checkpoint())
    ck = ckpt.load(path)
    assert (ck.arch, ck.data_format, ck.step) == (arch, fmt, 3)
    again = resume(ck)
    again.run()
    assert again.step == 8
    assert np.array_equal(again.losses, whole.losses)
    assert np.array_equal(again.norms, whole.norms)
    for name, a in whole.model.params().items():
        assert np.array_equal(again.model.params()[name], a), name
    assert again.evals == whole.evals
    final = again.checkpoint()
    assert final.data_format == fmt and np.array_equal(final.losses, whole.losses)
    assert np.array_equal(final.norms, whole.norms)


@pytest.mark.parametrize("arch,fmt", COMBOS[:4])
def test_divergence_at_a_step_inside_a_call(arch, fmt, text_file, shard_dir, monkeypatch):
    """Step 3, the third step of the first call (j = 2 > 0), gets an infinite learning
    rate: the kernels do not take it and end the call there, so the run stops at step 2
    with the losses of steps 1-2 as an uninterrupted run has them, and continues from
    there exactly (the drift issue 28 found by reading)."""
    whole, _ = make(arch, fmt, text_file, shard_dir)
    whole.run()
    run, _ = make(arch, fmt, text_file, shard_dir)
    optimizer = type(run.settings.optimizer)
    real = optimizer.lrs
    bad = {3}

    def lrs(self, first, k, num_steps=None):
        out = real(self, first, k, num_steps)
        for j in range(k):
            if first + j + 1 in bad:
                out[j] = np.inf
        return out

    monkeypatch.setattr(optimizer, "lrs", lrs)
    with pytest.raises(Diverged) as e:
        run.run()
    assert e.value.step == 3 and "step 3 of 8" in str(e.value)
    assert run.step == 2 == run.model.step()
    assert np.array_equal(run.losses, whole.losses[:2])
    assert all(ev[0] <= 2 for ev in run.evals)
    ck = run.checkpoint()
    assert ck.step == 2 and np.array_equal(ck.losses, whole.losses[:2])
    bad.clear()
    run.run()
    assert np.array_equal(run.losses, whole.losses)
    assert run.evals == whole.evals


@pytest.mark.parametrize("arch,fmt", [("gpt2", "lines"), ("microgpt", "text")])
def test_threads_take_their_share(arch, fmt, text_file, shard_dir):
    """--threads 2 (host-state models) trains the new combinations too, to float32
    rounding of one context."""
    one, _ = make(arch, fmt, text_file, shard_dir)
    one.run()
    two, _ = make(arch, fmt, text_file, shard_dir, threads=2)
    two.run()
    np.testing.assert_allclose(two.losses, one.losses, rtol=2e-4)


def _ref_lines_loss_gpt2(hf, tokens, n_pos, n_head):
    """Mean NLL over the valid positions of rows [B, T+1] with n_pos [B] (reference_gpt2)."""
    total = 0.0
    for row, n in zip(tokens, n_pos):
        logits = RG.forward(hf, row[None, :n], n_head)[0]
        z = logits - logits.max(axis=-1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
        total -= logp[np.arange(n), row[1:n + 1]].sum()
    return total / n_pos.sum()


def test_gpt2_on_lines_matches_the_float64_reference(text_file, shard_dir):
    """Each step's loss is reference_gpt2's mean over the rows' valid positions at the
    weights before it (the rows of microgpt's order, [BOS] name [BOS])."""
    run, _ = make("gpt2", "lines", text_file, shard_dir, spc=1)
    cfg = run.model.config
    for step in range(3):
        hf = {k: a.astype(np.float64) for k, a in cfg.to_file(run.model.params()).items()}
        tokens, n_pos, _ = run.dataset.batches(step, 1, run.settings)
        ref = _ref_lines_loss_gpt2(hf, tokens[0, 0], n_pos[0, 0], cfg.n_head)
        run.run(until=step + 1)
        assert run.losses[step] == pytest.approx(ref, rel=1e-4)


def test_microgpt_on_text_matches_the_float64_reference(text_file, shard_dir):
    """Each step's loss is reference.py's mean over all positions of the step's windows
    (both micro-batches), and the evaluations are its mean over the same batches; the
    first update is microgpt's Adam (reference.adam_step) of the reference's own
    gradient (central differences in float64), at four entries of every tensor."""
    run, _ = make("microgpt", "text", text_file, shard_dir, spc=1)
    cfg = run.model.config
    full = np.full(8, T)
    params0 = {k: a.astype(np.float64) for k, a in run.model.params().items()}
    for step in range(3):
        params = {k: a.astype(np.float64) for k, a in run.model.params().items()}
        tokens, _, _ = run.dataset.batches(step, 1, run.settings)
        rows = tokens[0].reshape(-1, T + 1)
        ref = RM.batch_loss(params, rows, full, cfg.n_head)
        if step == 0:
            rng = np.random.default_rng(1)
            at = {k: rng.choice(a.size, 4, replace=False) for k, a in params.items()}
            grad = {k: RM.finite_diff_grad(params, rows, full, cfg.n_head, k, at[k])
                    for k in params}
            m, v = ({k: a.reshape(-1)[at[k]] for k, a in g.items()} for g in run.model.adam())
        run.run(until=step + 1)
        assert run.losses[step] == pytest.approx(ref, rel=1e-4)
        if step == 0:
            o = run.settings.optimizer
            before = {k: a.reshape(-1)[at[k]] for k, a in params.items()}
            want, _, _ = RM.adam_step(before, grad, m, v, 0, 8, o.lr, o.beta1, o.beta2, o.eps)
            for k, a in run.model.params().items():
                np.testing.assert_allclose(a.reshape(-1)[at[k]], want[k], rtol=1e-3, atol=1e-5,
                                           err_msg=k)
    # the evaluation at step 0: the reference's mean over the same batches
    data = run.dataset.data
    for split, logged in (("train", run.evals[0][1]), ("val", run.evals[0][2])):
        batches = data.eval_batches(split, 42, 0, 2, 4)
        ref = np.mean([RM.batch_loss(params0, b, np.full(4, T), cfg.n_head) for b in batches])
        assert logged == pytest.approx(ref, rel=1e-4)


def test_tokens_run_equals_the_text_run_on_the_same_data(text_file, shard_dir):
    """The shards `prepare` wrote from the text hold its tokens, so a run on them draws
    the same windows and computes the same losses, bit for bit, as a run on the text;
    only the checkpoint's data identity differs."""
    for arch in ("gpt2", "microgpt"):
        text, _ = make(arch, "text", text_file, shard_dir)
        text.run()
        toks, _ = make(arch, "tokens", text_file, shard_dir)
        toks.run()
        assert np.array_equal(toks.losses, text.losses)
        assert toks.evals == text.evals
        a, b = text.checkpoint(), toks.checkpoint()
        assert (a.data_format, b.data_format) == ("text", "tokens")
        assert b.train["data_sha256"] == load_tokens(shard_dir, T).sha256 != a.train["data_sha256"]


def test_family_table():
    assert fam.family_of(MicrogptConfig(5)).arch == "microgpt"
    assert fam.family_of(GPT2Config(5)).arch == "gpt2"
    assert optimizer_from_train(RECIPE.to_train()) == RECIPE
    assert optimizer_from_train(Adam(0.02).to_train()) == Adam(0.02)


@pytest.mark.parametrize("arch,fmt", [("gpt2", "lines"), ("microgpt", "text"),
                                      ("gpt2", "tokens")])
def test_cli_new_combinations_stop_and_resume_bit_identically(arch, fmt, text_file, shard_dir,
                                                             tmp_path, monkeypatch):
    """`train --arch gpt2 --data-format lines` (GPT-2 on names), `--arch microgpt
    --data-format text` and `--data-format tokens` through the command line: stopped by
    Ctrl-C at step 4 and resumed, the checkpoint equals the uninterrupted run's, and it
    records the arch and data format given (gpt2 on lines used to train on text)."""
    from cli_helpers import sigint_at_step, small_data
    from microgpt_fut.models.gpt2 import GPT2Model
    from microgpt_fut.models.microgpt import MicrogptModel

    data = {"lines": small_data(tmp_path, 80), "text": text_file, "tokens": shard_dir}[fmt]
    args = ["train", "--arch", arch, "--data-format", fmt, "--data", str(data), "--steps", "8",
            "--batch-size", "4", "--n-embd", "16", "--n-head", "2", "--block-size", "16",
            "--steps-per-call", "2", "--samples", "2"]
    if fmt != "lines":
        args += ["--eval-every", "4", "--eval-iters", "2"]
    invoke = lambda *a: CliRunner().invoke(main, [str(x) for x in a])  # noqa: E731
    whole, part = tmp_path / "whole.safetensors", tmp_path / "part.safetensors"
    r = invoke(*args, "--out", whole)
    assert r.exit_code == 0, r.output
    with monkeypatch.context() as m:
        sigint_at_step(m, GPT2Model if arch == "gpt2" else MicrogptModel, 4)
        r = invoke(*args, "--out", part)
    assert r.exit_code == 130, r.output
    assert ckpt.load(part).step == 4
    r = invoke("train", "--resume", part, "--samples", "2")
    assert r.exit_code == 0, r.output
    from safetensors.numpy import load_file
    a, b = load_file(str(part)), load_file(str(whole))
    assert sorted(a) == sorted(b)
    for name in a:
        assert np.array_equal(a[name], b[name]), name
    ck = ckpt.load(part)
    assert (ck.arch, ck.data_format, ck.step) == (arch, fmt, 8)
    r = invoke("sample", "--checkpoint", part, "-n", "2", "--plain")
    assert r.exit_code == 0 and len(r.stdout.splitlines()) == 2, r.output
    if (arch, fmt) == ("gpt2", "tokens"):  # a GPT-2 on shards is a text model: it exports
        r = invoke("export-hf", part, tmp_path / "hf")
        assert r.exit_code == 0 and (tmp_path / "hf" / "config.json").exists(), r.output


def test_resume_of_gpt2_on_lines_keeps_the_recipe(tmp_path):
    """The recipe's options are fixed at --resume for GPT-2 on lines as for text runs
    (resume.check_fixed): a different one is refused in one line, not ignored."""
    from cli_helpers import assert_one_line_error, small_data

    out = tmp_path / "g.safetensors"
    r = CliRunner().invoke(main, ["train", "--arch", "gpt2", "--data-format", "lines", "--data",
                                  str(small_data(tmp_path, 40)), "--steps", "4", "--n-embd",
                                  "16", "--n-head", "2", "--samples", "0", "--out", str(out)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["train", "--resume", str(out), "--min-lr", "0.5"])
    line = assert_one_line_error(r, "--min-lr 0.5 conflicts with", "leave it out when resuming")
    assert r.exit_code == 2, line


@pytest.mark.parametrize("option", ["--weight-decay", "--grad-clip"])
def test_resume_of_microgpt_keeps_its_default_decay_and_clip(tmp_path, option):
    """A microgpt run trained without --weight-decay/--grad-clip (0, which its checkpoint
    leaves out) refuses another value at --resume in one line, as a stored value is
    refused (the trial of issue 42: it was silently dropped); the same value is fine."""
    from cli_helpers import assert_one_line_error, small_data

    out = tmp_path / "m.safetensors"
    r = CliRunner().invoke(main, ["train", "--data", str(small_data(tmp_path, 40)), "--steps",
                                  "4", "--samples", "0", "--out", str(out)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["train", "--resume", str(out), option, "0.1"])
    line = assert_one_line_error(r, f"{option} 0.1 conflicts with", "whose run has",
                                 f"{option} 0.0", "leave it out when resuming")
    assert r.exit_code == 2, line
    r = CliRunner().invoke(main, ["train", "--resume", str(out), option, "0", "--samples", "0"])
    assert r.exit_code == 0, r.output
