"""The rules of a train command (training/plan.py), one set for every model family and
dataset: issue 36's wrong results, each tried as a new user would, and the options
that the family and the data do not read."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from cli_helpers import assert_one_line_error, need_backend, shakespeare_file, sigint_at_step
from microgpt_fut.cli.commands import main
from microgpt_fut.data.tokenizer import load_tokenizer
from microgpt_fut.models.gpt2 import GPT2Model
from microgpt_fut.training import checkpoint as ckpt

SIZES = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16",
         "--batch-size", "2", "--eval-every", "4", "--eval-iters", "2"]


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    return shakespeare_file(tmp_path_factory.mktemp("plan"), 20000)


@pytest.fixture(scope="module")
def bpe_model(text, tmp_path_factory):
    """A GPT-2 of a 300-token BPE (2 steps), and its tokenizer.json."""
    need_backend("c")
    folder = tmp_path_factory.mktemp("bpe")
    out = folder / "bpe.safetensors"
    r = run("train", "--arch", "gpt2", "--data", text, "--tokenizer", "bpe", "--vocab-size", 300,
            "--steps", 2, *SIZES, "--samples", 0, "--out", out)
    assert r.exit_code == 0, r.output
    tok = folder / "tokenizer.json"
    tok.write_text(ckpt.load(out).tokenizer.to_json())
    return out, tok


def test_init_from_refuses_shards_of_another_tokenizer(text, bpe_model, tmp_path):
    """Wrong result 1: a 300-token BPE model trained on character shards saved a model
    with vocab 300 and a character tokenizer, then failed with an IndexError. The shards'
    tokenizer must be the model's: refused in one line naming --data, with --init-from
    and with --tokenizer alike; shards made with the model's tokenizer train, and the
    checkpoint keeps that tokenizer."""
    model, tok = bpe_model
    chars = tmp_path / "chars"
    assert run("prepare", text, "--out", chars).exit_code == 0
    out = tmp_path / "x.safetensors"
    fixes = [[f"`microgpt-fut export-hf {model} DIR`", "`microgpt-fut prepare TEXT --tokenizer DIR`"],
             [f"`microgpt-fut prepare TEXT --tokenizer {tok}`"]]
    for args, fix in zip((["--init-from", model], ["--arch", "gpt2", "--tokenizer", tok, *SIZES]),
                         fixes):
        r = run("train", "--data-format", "tokens", "--data", chars, *args, "--steps", 2,
                "--samples", 0, "--out", out)
        msg = assert_one_line_error(r, f"--data {str(chars)!r}", "another tokenizer",
                                    "vocab size 300", *fix)
        assert "''s" not in msg and "--data-format text" not in msg  # a BPE model
        assert r.exit_code == 2 and not out.exists()
    same = tmp_path / "bpe_shards"
    assert run("prepare", text, "--out", same, "--tokenizer", tok).exit_code == 0
    r = run("train", "--data-format", "tokens", "--data", same, "--init-from", model,
            "--steps", 2, "--eval-iters", 2, "--samples", 1, "--out", out)
    assert r.exit_code == 0, r.output
    saved = ckpt.load(out)
    assert saved.config.vocab_size == 300 == saved.tokenizer.size
    assert saved.tokenizer.to_json() == tok.read_text()


def test_resume_keeps_the_checkpoints_tokenizer(text, bpe_model, tmp_path, monkeypatch):
    """Wrong result 2: nanoGPT's raw train.bin/val.bin without meta.pkl, trained with
    --tokenizer, could never be resumed (the folder has no tokenizer, and --tokenizer is
    refused with --resume). A resumed run reads its shards with its checkpoint's
    tokenizer, and ends as the uninterrupted run ends, bit for bit."""
    _, tok = bpe_model
    bins = tmp_path / "bins"
    bins.mkdir()
    ids = load_tokenizer(tok).encode(text.read_text(), "text")
    n = int(len(ids) * 0.9)
    np.asarray(ids[:n], np.uint16).tofile(bins / "train.bin")
    np.asarray(ids[n:], np.uint16).tofile(bins / "val.bin")
    args = ["train", "--arch", "gpt2", "--data-format", "tokens", "--data", bins, "--tokenizer",
            tok, *SIZES, "--steps", 8, "--samples", 0]
    whole, part = tmp_path / "whole.safetensors", tmp_path / "part.safetensors"
    assert run(*args, "--out", whole).exit_code == 0
    with monkeypatch.context() as m:
        sigint_at_step(m, GPT2Model, 4)
        r = run(*args, "--steps-per-call", 4, "--out", part)
    assert r.exit_code == 130 and ckpt.load(part).step == 4, r.output
    r = run("train", "--resume", part, "--samples", 0)
    assert r.exit_code == 0, r.output
    a, b = ckpt.load(whole), ckpt.load(part)
    assert b.step == 8 and b.tokenizer.to_json() == tok.read_text()
    assert all(np.array_equal(a.params[k], b.params[k]) for k in a.params)


def test_a_character_model_of_text_without_a_newline_samples(tmp_path):
    """Wrong result 3: a character model of a text with no newline saved, then exited 1
    with "--prompt: character '\\n' is not in the model's vocabulary" (train has no
    --prompt), and `sample` did the same. Without a newline the default prompt is the
    vocabulary's first character."""
    need_backend("c")
    text = tmp_path / "one_line.txt"
    raw = shakespeare_file(tmp_path, 5000).read_text().replace("\n", " ")
    text.write_text(raw)
    out = tmp_path / "m.safetensors"
    for arch in ("gpt2", "microgpt"):
        r = run("train", "--arch", arch, "--data-format", "text", "--data", text, *SIZES,
                "--steps", 2, "--samples", 1, "--out", out, "--overwrite")
        assert r.exit_code == 0, r.output
        r = run("sample", "--checkpoint", out, "-n", 2, "--max-new-tokens", 5, "--plain")
        assert r.exit_code == 0, r.output
        got = [json.loads(line) for line in r.stdout.splitlines()]
        first = sorted(set(raw))[0]
        assert len(got) == 2 and all(s[0] == first and len(s) == 6 for s in got), got


@pytest.mark.parametrize("fmt", ["text", "tokens"])
def test_resume_names_the_runs_data_not_the_users(text, tmp_path, fmt):
    """Wrong result 4: `train --resume run --data elsewhere` said the checkpoint "was
    trained on ... 'elsewhere'", the user's new path. A missing --data is named as
    --data's; the run's own data, when gone, by the path the checkpoint holds."""
    need_backend("c")
    data = tmp_path / "text.txt"
    data.write_bytes(text.read_bytes())
    if fmt == "tokens":
        data = tmp_path / "shards"
        assert run("prepare", text, "--out", data).exit_code == 0
    out = tmp_path / "m.safetensors"
    r = run("train", "--arch", "gpt2", "--data-format", fmt, "--data", data, *SIZES,
            "--steps", 2, "--samples", 0, "--out", out)
    assert r.exit_code == 0, r.output
    elsewhere = tmp_path / "elsewhere"
    r = run("train", "--resume", out, "--data", elsewhere, "--samples", 0)
    line = assert_one_line_error(r, str(elsewhere))
    assert "trained on" not in line and r.exit_code == 1
    data.rename(tmp_path / "moved")
    r = run("train", "--resume", out, "--samples", 0)
    line = assert_one_line_error(r, "was trained on", str(data.resolve()), "pass --data")
    assert r.exit_code == 1


@pytest.mark.parametrize("args, fragment", [
    (["--min-lr", "1e-4"], "--min-lr applies to --arch gpt2; this run is --arch microgpt on "
                           "--data-format lines"),
    (["--no-bias"], "--bias/--no-bias applies to --arch gpt2"),
    (["--grad-accum", "2"], "--grad-accum applies to --data-format text and tokens"),
    (["--eval-every", "5"], "--eval-every applies to --data-format text and tokens"),
    (["--tokenizer", "char"], "--tokenizer applies to --data-format text and tokens"),
    (["--val-fraction", "0.2"], "--val-fraction applies to --data-format text;"),
    (["--lr", "1e39"], "--lr"),
    (["--beta2", "1e39"], "--beta2"),
    (["--arch", "gpt2", "--data-format", "lines", "--weight-decay", "1e39"], "--weight-decay"),
])
def test_an_option_the_run_does_not_read_is_refused(tmp_path, args, fragment):
    """An option that the run's family and data do not read is one line naming where it
    applies, the same on every combination (microgpt took --beta1 on text but refused it
    on lines; GPT-2 took --grad-accum's default silently). A value that float32 cannot
    hold (--lr 1e39 overflowed to inf with a NumPy RuntimeWarning on stderr and a
    diverged step) is refused as an option. Usage errors: status 2, nothing written."""
    out = tmp_path / "m.safetensors"
    r = run("train", *args, "--steps", 2, "--samples", 0, "--out", out)
    line = assert_one_line_error(r, fragment)
    assert r.exit_code == 2 and not out.exists() and "Warning" not in r.stderr, line


def test_microgpt_reads_its_betas_on_every_dataset(tmp_path):
    """microgpt's --beta1/--beta2 are read on lines as on text (lines refused them), and
    kept in the checkpoint."""
    need_backend("c")
    out = tmp_path / "m.safetensors"
    r = run("train", "--beta1", 0.5, "--beta2", 0.9, "--steps", 2, "--samples", 0, "--out", out)
    assert r.exit_code == 0, r.output
    t = ckpt.load(out).train
    assert (t["beta1"], t["beta2"]) == (0.5, 0.9)


def test_the_resume_hint_keeps_threads_on_every_dataset(text, tmp_path, monkeypatch):
    """After Ctrl-C the hint repeats --threads for a run on text as for one on lines (it
    did on lines only): a resumed run is bit-identical only with the same contexts."""
    need_backend("c")
    from microgpt_fut.parallel.host_state import DataParallelModel

    out = tmp_path / "m.safetensors"
    with monkeypatch.context() as m:
        sigint_at_step(m, DataParallelModel, 4)
        r = run("train", "--data-format", "text", "--data", text, *SIZES, "--threads", 2,
                "--steps", 8, "--steps-per-call", 4, "--samples", 0, "--out", out)
    assert r.exit_code == 130, r.output
    assert r.stderr.strip().endswith(f"--resume {out} --threads 2"), r.stderr


def test_sample_refuses_prompt_options_for_a_names_model(tmp_path):
    """sample's --prompt, --max-new-tokens and --top-k apply to models of text and
    tokens (the kinds' declarations): for a model of lines each is one line, status 2."""
    need_backend("c")
    out = tmp_path / "m.safetensors"
    assert run("train", "--steps", 2, "--samples", 0, "--out", out).exit_code == 0
    for args in (["--prompt", "em"], ["--max-new-tokens", 5], ["--top-k", 3]):
        r = run("sample", "--checkpoint", out, *args)
        assert_one_line_error(r, f"{args[0]} applies to models of text and tokens",
                              f"{str(out)!r} is a model of lines")
        assert r.exit_code == 2


@pytest.mark.parametrize("arch, fmt", [("microgpt", "text"), ("gpt2", "text"),
                                       ("gpt2", "tokens")])
def test_a_text_of_one_character_is_refused_by_every_family(tmp_path, arch, fmt):
    """One token predicts nothing (loss 0): every family refuses a tokenizer of fewer than
    2 tokens, with one line naming --data."""
    need_backend("c")
    one = tmp_path / "a.txt"
    one.write_text("a" * 5000)
    data = one
    if fmt == "tokens":
        data = tmp_path / "shards"
        r = run("prepare", one, "--out", data)
        assert r.exit_code == 0, r.output
    r = run("train", "--arch", arch, "--data-format", fmt, "--data", data, "--steps", 2,
            "--samples", 0, "--out", tmp_path / "m.safetensors",
            *(SIZES if arch == "gpt2" else []))
    assert_one_line_error(r, f"--data {str(data)!r}", "has 1 token(s)", "at least 2")
    assert not (tmp_path / "m.safetensors").exists()


def test_init_from_and_resume_name_bias_as_the_command_line_does(bpe_model, text, tmp_path):
    """--no-bias against a model with biases: the options and the model in words, never
    Python's True/False."""
    model, _ = bpe_model
    out = tmp_path / "x.safetensors"
    r = run("train", "--data", text, "--init-from", model, "--no-bias", "--out", out)
    msg = assert_one_line_error(r, "--no-bias conflicts with --init-from", "whose model has "
                                "biases")
    assert "True" not in msg and "False" not in msg and r.exit_code == 2
    r = run("train", "--resume", model, "--no-bias")
    msg = assert_one_line_error(r, "--no-bias conflicts with checkpoint", "which has --bias;")
    assert "True" not in msg and "False" not in msg and r.exit_code == 2


def test_a_tokens_model_on_a_text_file_names_data_format_text(text, tmp_path):
    """--init-from a model of token shards with --data FILE.txt and --data-format tokens:
    the one-line error says that a text file trains with --data-format text (without
    --data-format, the file is read as text: test_a_folder_of_shards_trains_...)."""
    need_backend("c")
    shards = tmp_path / "chars"
    assert run("prepare", text, "--out", shards).exit_code == 0
    model = tmp_path / "tokens.safetensors"
    r = run("train", "--arch", "gpt2", "--data-format", "tokens", "--data", shards, *SIZES,
            "--steps", 1, "--samples", 0, "--out", model)
    assert r.exit_code == 0, r.output
    r = run("train", "--init-from", model, "--data", text, "--data-format", "tokens",
            "--steps", 1, "--samples", 0, "--out", tmp_path / "x.safetensors")
    assert_one_line_error(r, f"--data {str(text)!r}", "not a folder of token shards",
                          "--data-format text")
    assert r.exit_code == 2  # a usage error, as a folder with --data-format text is


@pytest.mark.parametrize("source", ["--resume", "--init-from"])
def test_the_plan_lets_go_of_the_checkpoints_arrays_once_the_device_has_them(
        text, bpe_model, tmp_path, source):
    """At GPT-2 124M a plan that kept them held 0.5 GB (--init-from) or 1.5 GB (--resume)
    beside the device's copy for the whole run. The run's state is the checkpoint's."""
    from conftest import get_runtime
    from microgpt_fut.cli.train import plan_of

    path, _ = bpe_model
    saved = ckpt.load(path)
    extra = [] if source == "--resume" else ["--data", text, "--eval-iters", "2"]
    p = plan_of([source, str(path), "--out", str(tmp_path / "x.safetensors"), *extra])
    data = p.kind.open(p)
    run = p.start(get_runtime("c", "gpt2"), data, p.config(data))
    held = p.resume if source == "--resume" else p.init
    assert held.params == {} and held.m is None and held.v is None
    state = run.checkpoint()
    assert all(np.array_equal(state.params[k], saved.params[k]) for k in saved.params)
    if source == "--resume":
        assert all(np.array_equal(state.m[k], saved.m[k]) for k in saved.m)


def test_a_folder_of_shards_trains_without_data_format(text, tmp_path):
    """`train --data FOLDER` reads `prepare`'s token shards without --data-format tokens
    (it used to read the folder as a text file and fail), with either --arch and with
    --init-from; the run is the one --data-format tokens gives (the same losses); a folder
    given --data-format lines or text is refused in one line naming --data-format tokens;
    and a resumed run keeps its own format."""
    need_backend("c")
    shards = tmp_path / "shards"
    assert run("prepare", text, "--out", shards).exit_code == 0
    for arch in ("microgpt", "gpt2"):
        outs = []
        for fmt in ([], ["--data-format", "tokens"]):
            out = tmp_path / f"{arch}{len(fmt)}.safetensors"
            r = run("train", "--arch", arch, *fmt, "--data", shards, *SIZES, "--steps", 2,
                    "--samples", 0, "--out", out)
            assert r.exit_code == 0, r.output
            assert "token shards" in r.stderr
            outs.append(ckpt.load(out))
        assert outs[0].data_format == outs[1].data_format == "tokens"
        assert np.array_equal(outs[0].losses, outs[1].losses)
    names = tmp_path / "names.safetensors"  # a names model: its hint is --data-format lines
    assert run("train", "--steps", 1, "--samples", 0, "--out", names).exit_code == 0
    r = run("train", "--init-from", names, "--data", shards, "--steps", 1,
            "--out", tmp_path / "n2.safetensors")
    assert_one_line_error(r, "another tokenizer", "train on its names file with --data-format "
                          "lines")
    r = run("train", "--init-from", tmp_path / "gpt20.safetensors", "--data", shards,
            "--steps", 1, "--eval-iters", 2, "--samples", 0, "--out", tmp_path / "i.safetensors")
    assert r.exit_code == 0, r.output
    assert ckpt.load(tmp_path / "i.safetensors").data_format == "tokens"
    for fmt in ("lines", "text"):
        for source in ([], ["--init-from", tmp_path / "gpt20.safetensors"]):
            r = run("train", "--data-format", fmt, "--data", shards, *source, "--steps", 1,
                    "--out", tmp_path / "x.safetensors")
            assert_one_line_error(r, f"--data {str(shards)!r} is a folder",
                                  f"--data-format {fmt} reads a text file",
                                  "give --data-format tokens")
            assert r.exit_code == 2
    model = tmp_path / "text.safetensors"
    r = run("train", "--arch", "gpt2", "--data", text, *SIZES, "--steps", 1, "--samples", 0,
            "--out", model)
    assert r.exit_code == 0, r.output
    r = run("train", "--resume", model, "--data", shards, "--steps", 1)
    assert_one_line_error(r, f"--data {str(shards)!r} is a folder", "a gpt2 model of text",
                          "give its data file with --data")
    # the other way round: a model of tokens resumed on a file, or started from on one
    r = run("train", "--resume", tmp_path / "gpt20.safetensors", "--data", text, "--steps", 2)
    assert_one_line_error(r, f"--data {str(text)!r} is a file", "a gpt2 model of tokens",
                          "give its folder with --data")
    assert r.exit_code == 2
    r = run("train", "--init-from", tmp_path / "gpt20.safetensors", "--data", text, "--steps", 1,
            "--eval-iters", 2, "--samples", 0, "--out", tmp_path / "t.safetensors")
    assert r.exit_code == 0, r.output
    assert ckpt.load(tmp_path / "t.safetensors").data_format == "text"
    for source in ([], ["--resume", tmp_path / "gpt20.safetensors"]):
        r = run("train", "--data-format", "tokens", "--data", tmp_path / "nowhere", *source,
                "--steps", 2, "--out", tmp_path / "y.safetensors")
        assert_one_line_error(r, f"--data {str(tmp_path / 'nowhere')!r} does not exist")


def test_tokenizer_kinds_in_any_case_as_prepare_reads_them(text, tmp_path):
    """`train --tokenizer CHAR` is --tokenizer char, as prepare reads it (it was taken for
    a path: "tokenizer 'CHAR' does not exist"); a file of that name is still a path."""
    need_backend("c")
    outs = []
    for kind in ("char", "CHAR"):
        outs.append(tmp_path / f"{kind}.safetensors")
        r = run("train", "--arch", "gpt2", "--data", text, "--tokenizer", kind, *SIZES,
                "--steps", 1, "--samples", 0, "--out", outs[-1])
        assert r.exit_code == 0, r.output
    assert ckpt.load(outs[0]).tokenizer.to_json() == ckpt.load(outs[1]).tokenizer.to_json()
    (tmp_path / "Bpe").write_text("not a tokenizer")
    r = run("train", "--arch", "gpt2", "--data", text, "--tokenizer", tmp_path / "Bpe", *SIZES,
            "--steps", 1, "--out", tmp_path / "b.safetensors")
    assert r.exit_code != 0 and "Bpe" in r.output
