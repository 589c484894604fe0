"""`train --init-from MODEL`: a new run from another run's weights, with fresh
optimiser state and its own schedule and data (to train more or fine-tune)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from cli_helpers import assert_one_line_error, names_lines, need_backend
from conftest import get_runtime
from microgpt_fut.training import checkpoint as ckpt
from microgpt_fut.cli.commands import main
from microgpt_fut.data.lines import Vocab, batch_indices, load_data, shuffled
from microgpt_fut.models.microgpt import MicrogptModel


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A names model trained 100 steps on the first 500 names of names.txt."""
    need_backend("c")
    folder = tmp_path_factory.mktemp("init")
    data = folder / "first.txt"
    data.write_text("\n".join([n for n in names_lines() if n][:500]) + "\n")
    out = folder / "base.safetensors"
    r = run("train", "--data", data, "--steps", 100, "--batch-size", 4, "--samples", 0,
            "--out", out)
    assert r.exit_code == 0, r.output
    return out


def _other_names(folder, n=200, name="other.txt"):
    path = folder / name
    path.write_text("\n".join([n for n in names_lines() if n][-n:]) + "\n")
    return path


def test_starts_from_the_weights_with_fresh_moments(base, tmp_path):
    """The run's first loss is the base model's loss on the run's first batch, and
    after one Adam step m = (1 - beta1) g, v = (1 - beta2) g^2 with g that batch's
    gradient at the base weights: the moments started at zero, not at the base run's."""
    data = _other_names(tmp_path)
    out = tmp_path / "tuned.safetensors"
    r = run("train", "--data", data, "--init-from", base, "--steps", 1, "--batch-size", 8,
            "--lr", 0.001, "--samples", 0, "--out", out)
    assert r.exit_code == 0, r.output
    assert f"starting from the weights of {str(base)!r} (step 100 of its run)" in r.output
    b, t = ckpt.load(base), ckpt.load(out)
    assert t.step == 1 and t.train["num_steps"] == 1 and t.train["lr"] == 0.001
    assert t.train["init_from"] == str(base.resolve()) and t.vocab == b.vocab
    assert t.config == b.config

    rt = get_runtime("c")
    docs, info = load_data(data)
    order = shuffled(docs, 42)  # the run's document order (default --seed 42)
    rows = batch_indices(0, 1, 8, len(docs))[0]
    order_tokens, order_pos, _ = Vocab(tuple(b.vocab)).encode(order, b.config.block_size)
    loss, g = MicrogptModel.from_arrays(rt, b.config, b.params).loss_grad(order_tokens[rows],
                                                                  order_pos[rows])
    assert t.losses[0] == pytest.approx(loss, rel=1e-6)
    for name in g:
        np.testing.assert_allclose(t.m[name], 0.15 * g[name], rtol=1e-5, atol=1e-9)
        np.testing.assert_allclose(t.v[name], 0.01 * g[name] ** 2, rtol=1e-4, atol=1e-12)


def test_fine_tuning_lowers_the_loss_on_the_new_data(base, tmp_path):
    data = _other_names(tmp_path)
    out = tmp_path / "tuned.safetensors"
    r = run("train", "--data", data, "--init-from", base, "--steps", 60, "--batch-size", 4,
            "--samples", 0, "--out", out)
    assert r.exit_code == 0, r.output
    losses = ckpt.load(out).losses
    assert losses[-20:].mean() < losses[:20].mean()
    again = run("train", "--resume", out, "--samples", 0)  # a finished run resumes as one
    assert again.exit_code == 0 and "nothing to train" in again.output


@pytest.mark.parametrize("args, fragment", [
    (["--n-embd", "32"], "--n-embd 32 conflicts with --init-from"),
    (["--block-size", "32"], "--block-size 32 conflicts with --init-from"),
    (["--resume", "X"], "--init-from starts a new run"),
])
def test_conflicting_options(base, tmp_path, args, fragment):
    r = run("train", "--data", _other_names(tmp_path), "--init-from", base,
            "--out", tmp_path / "x.safetensors", *args)
    assert r.exit_code == 2
    assert_one_line_error(r, fragment)


def test_a_smaller_block_size_crops_the_positions_on_lines_too(base, tmp_path):
    """--init-from with a smaller --block-size crops the model's positional table
    (nanoGPT's crop_block_size) on names as on text (issue 36: it was refused on lines):
    the run's first loss is the base model's loss on its first batch at 8 positions."""
    data = _other_names(tmp_path)
    out = tmp_path / "short.safetensors"
    r = run("train", "--data", data, "--init-from", base, "--block-size", 8, "--steps", 1,
            "--batch-size", 4, "--samples", 0, "--out", out)
    assert r.exit_code == 0, r.output
    b, t = ckpt.load(base), ckpt.load(out)
    assert t.config.block_size == 8 and t.params["wpe"].shape == (8, b.config.n_embd)
    docs, _ = load_data(data)
    tokens, n_pos, _ = Vocab(tuple(b.vocab)).encode(shuffled(docs, 42), 8)
    rows = batch_indices(0, 1, 4, len(docs))[0]
    import dataclasses
    short = dataclasses.replace(b.config, block_size=8)
    params = {**b.params, "wpe": b.params["wpe"][:8]}
    loss, _ = MicrogptModel.from_arrays(get_runtime("c"), short, params).loss_grad(tokens[rows],
                                                                           n_pos[rows])
    assert t.losses[0] == pytest.approx(loss, rel=1e-6)


def test_unknown_characters_and_missing_model(base, tmp_path):
    data = tmp_path / "accents.txt"
    data.write_text("zoë\nanna\n")
    r = run("train", "--data", data, "--init-from", base, "--out", tmp_path / "x.safetensors")
    assert_one_line_error(r, "'ë' are not in the vocabulary of --init-from")
    r = run("train", "--data", data, "--init-from", tmp_path / "nope.safetensors",
            "--out", tmp_path / "x.safetensors")
    assert_one_line_error(r, "nope.safetensors")
    assert not (tmp_path / "x.safetensors").exists()


def _sample(*args) -> list[str]:
    r = run("sample", "--plain", "--temperature", 0, *args)
    assert r.exit_code == 0, r.output
    return r.stdout.splitlines()


def test_a_names_model_trains_on_text_its_bos_the_newline(base, tmp_path):
    """A model of lines (names) starts a text run (issue 41: "--data-format text conflicts
    with --init-from" was refused): its characters read the text and its BOS token, which
    starts and ends each name, is the newline between them. With a negligible --lr the
    weights stay the names model's, so a greedy continuation of "\\n" is its greedy name
    between two newlines; the text model then trains on lines again."""
    text = _other_names(tmp_path, 300, "other_names.txt")  # a text: names, newlines
    out = tmp_path / "text.safetensors"
    r = run("train", "--init-from", base, "--data-format", "text", "--data", text, "--steps", 1,
            "--lr", 1e-30, "--batch-size", 2, "--eval-iters", 1, "--samples", 0, "--out", out)
    assert r.exit_code == 0, r.output
    b, t = ckpt.load(base), ckpt.load(out)
    assert t.data_format == "text" and t.config == b.config and t.vocab == [*b.vocab, "\n"]
    for name in b.params:
        np.testing.assert_allclose(t.params[name], b.params[name], rtol=1e-6)
    name = _sample("--checkpoint", base, "-n", 1)[0]
    assert _sample("--checkpoint", out, "--prompt", "\n", "--max-new-tokens",
                   len(name) + 1) == [json.dumps("\n" + name + "\n")]
    # and back: a character model whose last token is the newline trains on lines
    back = tmp_path / "lines.safetensors"
    r = run("train", "--init-from", out, "--data-format", "lines", "--data", text, "--steps", 1,
            "--lr", 1e-30, "--samples", 0, "--out", back)
    assert r.exit_code == 0, r.output
    lines = ckpt.load(back)
    assert lines.data_format == "lines" and lines.vocab == b.vocab
    assert _sample("--checkpoint", back, "-n", 1) == [name]


def test_across_data_formats_only_what_cannot_work_is_refused(base, tmp_path):
    """Refused in one line saying why: a text whose characters the names model lacks
    (exit 1, naming the character), and lines for a text model whose last token is not a
    newline (exit 2: lines need one as BOS; the fix: read the file as text)."""
    prose = tmp_path / "prose.txt"
    prose.write_text("the quick brown fox jumps over the lazy dog\n" * 10)
    r = run("train", "--init-from", base, "--data-format", "text", "--data", prose,
            "--samples", 0, "--out", tmp_path / "x.safetensors")
    assert_one_line_error(r, str(prose), "' '", "not in the model's vocabulary")
    assert r.exit_code == 1
    model = tmp_path / "prose.safetensors"  # characters sorted: the newline is the first
    r = run("train", "--data-format", "text", "--data", prose, "--steps", 1, "--batch-size", 2,
            "--eval-iters", 1, "--samples", 0, "--out", model)
    assert r.exit_code == 0, r.output
    r = run("train", "--init-from", model, "--data-format", "lines",
            "--data", _other_names(tmp_path), "--out", tmp_path / "x.safetensors")
    assert_one_line_error(r, "--data-format lines conflicts with --init-from", str(model),
                          "last token is not a newline", "leave --data-format out")
    assert r.exit_code == 2 and not (tmp_path / "x.safetensors").exists()
