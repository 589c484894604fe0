"""`train --arch gpt2 --data-format text` and `sample --prompt`: the text recipe end to end.

Small runs on the first characters of tinyshakespeare.txt, c backend. Expected
values come from the float64 reference (tests/reference_gpt2.py) on the
checkpoint's own Hugging Face tensors, from an uninterrupted run (resume), and
from the definitions (CSV rows, nanoGPT's log format).
"""
from __future__ import annotations

import csv
import re

import numpy as np
import pytest
from click.testing import CliRunner

import reference_gpt2 as R
from cli_helpers import assert_one_line_error, sigint_at_step
from conftest import DATA_DIR, get_runtime
from microgpt_fut.training import checkpoint as ckpt
from microgpt_fut.cli.commands import main
from microgpt_fut.data.text import load_text
from microgpt_fut.data.datasets import Stream
from microgpt_fut.training.run import Run
from microgpt_fut.training.settings import Settings
from microgpt_fut.models.gpt2 import GPT2Config
from microgpt_fut.training.optimizer import Recipe

SHAKESPEARE = DATA_DIR / "tinyshakespeare.txt"
SIZES = ["--n-layer", "2", "--n-head", "2", "--n-embd", "16", "--block-size", "16"]


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    """The first 20,000 characters of tinyshakespeare.txt (65 characters' vocabulary or close)."""
    path = tmp_path_factory.mktemp("text") / "shakespeare_20k.txt"
    path.write_text(SHAKESPEARE.read_text(encoding="utf-8")[:20000], encoding="utf-8")
    return path


def run_cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def train_args(text_file, out, *extra):
    return ["train", "--arch", "gpt2", "--data-format", "text", "--data", text_file, *SIZES,
            "--batch-size", "4", "--steps", "24", "--eval-every", "8", "--eval-iters", "3",
            "--out", out, "--samples", "0", *extra]


def test_text_run_logs_saves_and_plots(text_file, tmp_path):
    """nanoGPT's eval lines at steps 0, 8, 16, 24; a checkpoint with HF names (no biases
    with --no-bias); the CSV holds every step and the evaluations; the PNG is a PNG;
    each logged evaluation equals the float64 reference's mean loss over the same
    batches with the checkpoint's final weights (the last one)."""
    get_runtime("c", "gpt2")
    out = tmp_path / "run.safetensors"
    r = run_cli(*train_args(text_file, out, "--no-bias"))
    assert r.exit_code == 0, r.output
    evals = re.findall(r"^step (\d+): train loss (\d+\.\d{4}), val loss (\d+\.\d{4})$", r.output,
                       re.M)
    assert [int(s) for s, _, _ in evals] == [0, 8, 16, 24]
    ck = ckpt.load(out)
    assert ck.arch == "gpt2" and ck.data_format == "text" and ck.step == 24
    assert not ck.config.bias
    assert ck.config.file_shapes() == R.hf_shapes(ck.config.vocab_size, 16, 2, 16, False)
    assert [e[0] for e in ck.evals] == [0, 8, 16, 24]
    # the plain log's progress line labels its loss: the mean of the steps it names
    line = re.search(r"^step 24 / 24 \| loss (\d+\.\d{4}) \(mean of steps (\d+)-24\) \| grad norm "
                     r"(\d+\.\d{4}) \(step 24\) \| [\d,]+ tok/s$", r.output, re.M)
    assert line, r.output
    first = int(line.group(2))
    assert float(line.group(1)) == pytest.approx(float(np.mean(ck.losses[first - 1:24])), abs=6e-5)
    assert float(line.group(3)) == pytest.approx(float(ck.norms[-1]), abs=6e-5)
    # the last evaluation against the reference on the same batches
    from safetensors.numpy import load_file
    hf = {k: v.astype(np.float64) for k, v in load_file(out).items() if not k.startswith(("adam.", "train."))}
    data = load_text(text_file, 16)
    for split, logged in (("train", ck.evals[-1][1]), ("val", ck.evals[-1][2])):
        batches = data.eval_batches(split, 42, 24, 3, 4)
        ref = np.mean([R.loss(hf, b, 2) for b in batches])
        assert logged == pytest.approx(ref, rel=1e-4)
    with open(out.with_suffix(".losses.csv")) as f:
        rows = list(csv.DictReader(f))
    assert [int(row["step"]) for row in rows] == list(range(0, 25))
    assert [float(row["loss"]) for row in rows[1:]] == pytest.approx(ck.losses.tolist(), abs=1e-6)
    assert {int(row["step"]) for row in rows if row["eval_val"]} == {0, 8, 16, 24}
    assert out.with_suffix(".losses.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_resume_is_bit_identical(text_file, tmp_path):
    """A run stopped at step 13 (mid-call, mid-evaluation interval), saved, loaded and
    resumed gives the uninterrupted run's weights, moments, losses and evaluations."""
    rt = get_runtime("c", "gpt2")
    data = load_text(text_file, 16)
    settings = Settings(24, 4, Recipe(lr=3e-3, min_lr=3e-4, warmup_steps=4,
                                          lr_decay_steps=24), grad_accum=2, eval_every=8,
                            eval_iters=2, seed=7, steps_per_call=5)
    config = GPT2Config(data.vocab.size, 16, 2, 2, 16)
    whole = Run.start(rt, Stream(data), settings, config)
    whole.run()
    part = Run.start(rt, Stream(data), settings, config)
    part.run(until=13)
    path = tmp_path / "part.safetensors"
    ckpt.save(path, part.checkpoint())
    resumed = Run.resume(rt, ckpt.load(path), Stream(data), settings)
    resumed.run()
    a, b = whole.checkpoint(), resumed.checkpoint()
    for k in a.params:
        np.testing.assert_array_equal(a.params[k], b.params[k])
        np.testing.assert_array_equal(a.m[k], b.m[k])
        np.testing.assert_array_equal(a.v[k], b.v[k])
    np.testing.assert_array_equal(a.losses, b.losses)
    np.testing.assert_array_equal(a.norms, b.norms)
    assert a.evals == b.evals


def test_cli_resume_and_sample(text_file, tmp_path):
    """`train --resume` of a finished text run trains nothing and keeps the file's
    weights; `sample --prompt` continues the prompt, greedily the same each time."""
    out = tmp_path / "m.safetensors"
    assert run_cli(*train_args(text_file, out)).exit_code == 0
    before = ckpt.load(out).params
    r = run_cli("train", "--resume", out, "--samples", "0")
    assert r.exit_code == 0, r.output
    assert "nothing to train" in r.stderr and r.stdout == ""
    after = ckpt.load(out).params
    assert all(np.array_equal(before[k], after[k]) for k in before)
    outs = [run_cli("sample", "--checkpoint", out, "--prompt", "ROMEO:", "--max-new-tokens",
                    "30", "--temperature", "0", "-n", "2") for _ in range(2)]
    for r in outs:
        assert r.exit_code == 0, r.output
    texts = outs[0].stdout.split("---------------\n")
    assert outs[0].stdout == outs[1].stdout
    assert texts[0].startswith("ROMEO:") and len(texts[0].rstrip("\n")) >= len("ROMEO:")
    assert texts[0] == texts[1]  # greedy: both samples alike


def test_config_file(text_file, tmp_path):
    """--config FILE sets options the command line leaves out (the option names)."""
    cfg = tmp_path / "cfg.toml"
    cfg.write_text("eval_every = 12\nweight-decay = 0.0\n")
    out = tmp_path / "c.safetensors"
    r = run_cli(*train_args(text_file, out)[:-8], "--eval-iters", "2", "--out", out,
                "--samples", "0", "--config", cfg)
    assert r.exit_code == 0, r.output
    ck = ckpt.load(out)
    assert [e[0] for e in ck.evals] == [0, 12, 24]
    assert ck.train["weight_decay"] == 0.0


@pytest.mark.parametrize("extra, fragment", [
    (["--eval-iters", "0"], "--eval-iters"),
    (["--block-size", "19990"], "training split"),
    (["--block-size", "30000"], "has 20,000 characters"),
    (["--val-fraction", "0.0001"], "validation split"),
    (["--threads", "2", "--backend", "multicore"], "--threads"),
    (["--warmup-steps", "30"], "--warmup-steps 30 must be less than --steps 24"),
    (["--warmup-steps", "10", "--lr-decay-steps", "8"],
     "--lr-decay-steps (8) must be larger than --warmup-steps (10)"),
    (["--min-lr", "1"], "--min-lr"),
])
def test_bad_text_options_are_one_line_errors(text_file, tmp_path, extra, fragment):
    """Each bad option or data gives one line `Error: ...` naming it; --out not written."""
    out = tmp_path / "x.safetensors"
    r = run_cli(*train_args(text_file, out, *extra))
    assert_one_line_error(r, fragment)
    assert not out.exists()


def test_other_bad_inputs(text_file, tmp_path):
    """Text without --data, microgpt with a text-only option, integers past 64 bits, a
    prompt outside the vocabulary, and an unknown --config key."""
    assert_one_line_error(run_cli("train", "--arch", "gpt2", "--data-format", "text"), "--data")
    assert_one_line_error(run_cli("train", "--no-bias", "--steps", "1"), "--no-bias")
    # integers beyond 64 bits: one line from click, not an OverflowError traceback
    assert_one_line_error(run_cli("train", "--steps", "9" * 30), "--steps", "too large")
    assert_one_line_error(run_cli("sample", "-n", "9" * 30), "--num")
    out = tmp_path / "m.safetensors"
    assert run_cli(*train_args(text_file, out)).exit_code == 0
    assert_one_line_error(run_cli("sample", "--checkpoint", out, "--prompt", "ROMEO€"),
                          "U+20AC")
    bad = tmp_path / "bad.toml"
    bad.write_text("no_such_option = 1\n")
    assert_one_line_error(run_cli("train", "--config", bad), "no_such_option")


def test_nan_stops_the_run_at_its_first_bad_step(text_file):
    """An infinite weight makes step 1's loss NaN: Diverged names step 1 and the run
    stays at step 0 with its last good (here: initial) state."""
    from microgpt_fut.models.gpt2 import GPT2Model
    from microgpt_fut.errors import Diverged

    rt = get_runtime("c", "gpt2")
    data = load_text(text_file, 16)
    settings = Settings(10, 2, Recipe(lr=1e-3, min_lr=1e-4, warmup_steps=1, lr_decay_steps=10),
                            eval_every=5, eval_iters=1)
    config = GPT2Config(data.vocab.size, 16, 2, 1, 16)
    params = GPT2Model.init(rt, config, 42).params()
    params["wte"][3, 0] = np.inf
    run = Run.start(rt, Stream(data), settings, config, params)
    with pytest.raises(Diverged, match="step 1 of 10"):
        run.run()
    assert run.step == 0 and run.model.step() == 0 and len(run.losses) == 0


def test_resume_on_other_text_and_foreign_csv_are_refused(text_file, tmp_path):
    """Resuming on another text, or a --out whose .losses.csv is someone else's file, is
    a one-line error; the file is left as it was."""
    out = tmp_path / "m.safetensors"
    assert run_cli(*train_args(text_file, out)).exit_code == 0
    other = tmp_path / "other.txt"
    other.write_text(text_file.read_text(encoding="utf-8")[::-1], encoding="utf-8")
    assert_one_line_error(run_cli("train", "--resume", out, "--data", other), "other data")
    mine = tmp_path / "n.losses.csv"
    mine.write_text("name,score\nada,1\n")
    assert_one_line_error(run_cli(*train_args(text_file, tmp_path / "n.safetensors")),
                          "n.losses.csv")
    assert mine.read_text() == "name,score\nada,1\n"


@pytest.mark.parametrize("n_chars", [100, 12])
def test_resume_on_a_short_other_text_names_the_data(text_file, tmp_path, n_chars):
    """Resumed with --data a text too short for the run (its validation split: 10 of 100
    characters, or the whole text: 12, where --block-size 16 needs 17), the error says
    it is not the run's text and to give --data the one it was trained on: not
    --val-fraction or --block-size, which a resumed run refuses."""
    out = tmp_path / "m.safetensors"
    r = run_cli("train", "--data-format", "text", "--data", text_file, "--block-size", 16,
                "--steps", 2, "--eval-iters", 1, "--out", out, "--samples", 0)
    assert r.exit_code == 0, r.output
    short = tmp_path / "short.txt"
    short.write_text(text_file.read_text(encoding="utf-8")[:n_chars], encoding="utf-8")
    r = run_cli("train", "--resume", out, "--data", short)
    line = assert_one_line_error(r, "other data", str(short), str(text_file),
                                 "give --data the text it was trained on")
    assert r.exit_code == 1
    assert "--val-fraction" not in line and "--block-size" not in line


def test_a_foreign_png_beside_out_is_refused_and_kept(text_file, tmp_path):
    """A user's own NAME.losses.png is not replaced by `train --out NAME.safetensors`
    (nor with --overwrite, as the CSV): one line naming it, exit 1, the file unchanged,
    nothing written. The run's own plot is replaced by its next run (--overwrite), and a
    plot beside a loss CSV of an older microgpt-fut (no mark) by its --resume."""
    from PIL import Image

    mine = tmp_path / "shk2.losses.png"
    Image.new("RGB", (4, 3), "red").save(mine)  # a PNG of the user's
    before = mine.read_bytes()
    out = tmp_path / "shk2.safetensors"
    for extra in ((), ("--overwrite",)):
        r = run_cli(*train_args(text_file, out, "--steps", "2", *extra))
        assert_one_line_error(r, repr(str(mine)), "is not a loss plot of microgpt-fut",
                              "refusing to overwrite it")
        assert r.exit_code == 1 and mine.read_bytes() == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["shk2.losses.png"]
    mine.unlink()
    assert run_cli(*train_args(text_file, out, "--steps", "2")).exit_code == 0
    ours = mine.read_bytes()
    assert Image.open(mine).text["microgpt-fut"] == "loss curves"
    r = run_cli(*train_args(text_file, out, "--steps", "3", "--overwrite"))
    assert r.exit_code == 0, r.output
    assert mine.read_bytes() != ours
    # an older version's plot: matplotlib's, unmarked, beside its loss CSV
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = plt.figure()
    fig.savefig(mine, format="png")
    plt.close(fig)
    r = run_cli(*train_args(text_file, out, "--steps", "4", "--overwrite"))
    assert r.exit_code == 0, r.output
    assert "microgpt-fut" in Image.open(mine).text


def test_the_saved_line_names_the_files_where_they_are(text_file, tmp_path):
    """--out in another folder: the saved line gives the loss files' paths in that folder
    (it used to give their bare names, as if in the current folder)."""
    (tmp_path / "cfg").mkdir()
    out = tmp_path / "cfg" / "cfgrun.safetensors"
    r = run_cli(*train_args(text_file, out, "--steps", "2"))
    assert r.exit_code == 0, r.output
    csv_path, png_path = out.with_suffix(".losses.csv"), out.with_suffix(".losses.png")
    assert f"saved {out}, {csv_path}, {png_path}\n" in r.output
    assert csv_path.exists() and png_path.exists()


def test_threads_agree_with_one_context(text_file, tmp_path):
    """--threads 2 (the windows of each step split over two c contexts, the recipe on
    the host) gives one context's losses, evaluations and weights to float32 rounding,
    the same bits when run again, and sample --threads 2 the same texts."""
    outs = {}
    for name, threads in (("one", 1), ("two", 2), ("again", 2)):
        out = tmp_path / f"{name}.safetensors"
        r = run_cli(*train_args(text_file, out, "--threads", threads, "--grad-accum", "2"))
        assert r.exit_code == 0, r.output
        outs[name] = ckpt.load(out)
    one, two, again = outs["one"], outs["two"], outs["again"]
    np.testing.assert_allclose(two.losses, one.losses, rtol=1e-5)
    np.testing.assert_allclose(np.array(two.evals), np.array(one.evals), rtol=1e-5)
    for k in one.params:
        np.testing.assert_allclose(two.params[k], one.params[k], rtol=0, atol=1e-5, err_msg=k)
        np.testing.assert_array_equal(again.params[k], two.params[k])
    texts = [run_cli("sample", "--checkpoint", tmp_path / "one.safetensors", "-n", 3,
                     "--max-new-tokens", 20, "--threads", t).stdout for t in (1, 2)]
    assert texts[0] == texts[1] and texts[0].count("---------------") == 3


def test_ctrl_c_saves_and_resume_equals_the_straight_run(text_file, tmp_path, monkeypatch):
    """A real SIGINT after the call that ends at step 10 (calls end at multiples of 5 and
    at evaluations): exit 130, the checkpoint of step 10 (and its curves) saved;
    `train --resume` then ends with the straight run's bits."""
    from microgpt_fut.models.gpt2 import GPT2Model

    full = tmp_path / "full.safetensors"
    assert run_cli(*train_args(text_file, full)).exit_code == 0
    part = tmp_path / "part.safetensors"
    with monkeypatch.context() as m:
        sigint_at_step(m, GPT2Model, 10)
        r = run_cli(*train_args(text_file, part, "--steps-per-call", "5"))
    assert r.exit_code == 130, r.output
    assert f"saved the checkpoint of step 10 of 24 to {str(part)!r}" in r.stderr
    assert ckpt.load(part).step == 10 and part.with_suffix(".losses.csv").exists()
    r2 = run_cli("train", "--resume", part, "--samples", "0")
    assert r2.exit_code == 0, r2.output
    a, b = ckpt.load(part), ckpt.load(full)
    for k in a.params:
        np.testing.assert_array_equal(a.params[k], b.params[k])
    np.testing.assert_array_equal(a.losses, b.losses)
    assert a.evals == b.evals


def test_another_runs_checkpoint_is_never_overwritten(text_file, tmp_path):
    """--out holding another run's checkpoint is refused (one line saying how to go on:
    --resume only when that run is not complete), and the file is left as it was;
    --overwrite replaces it; --resume of it is fine."""
    out = tmp_path / "precious.safetensors"
    assert run_cli(*train_args(text_file, out)).exit_code == 0
    before = out.read_bytes()
    r = run_cli("train", "--steps", "3", "--samples", "0", "--out", out)  # a names run
    msg = assert_one_line_error(r, "holds the checkpoint of another run", "step 24 of 24, "
                                "complete", "another --out", "--overwrite")
    assert "--resume" not in msg  # it would answer "the run is complete, nothing to train"
    r = run_cli(*train_args(text_file, out))  # the same command again: another run too
    assert_one_line_error(r, "another run")
    part = tmp_path / "part.safetensors"  # a run stopped at step 10 of 24
    ck = ckpt.load(out)
    ck.step, ck.losses, ck.norms = 10, ck.losses[:10], ck.norms[:10]
    ck.evals = [e for e in ck.evals if e[0] <= 10]
    ckpt.save(part, ck)
    r = run_cli(*train_args(text_file, part))
    assert_one_line_error(r, "holds the checkpoint of another run", "step 10,",
                          f"--resume {part}", "--overwrite")
    assert out.read_bytes() == before
    assert run_cli("train", "--resume", out, "--samples", "0").exit_code == 0
    r = run_cli(*train_args(text_file, out, "--steps", "8", "--overwrite"))
    assert r.exit_code == 0, r.output
    assert ckpt.load(out).step == 8


def test_val_fraction_0_runs_without_validation(text_file, tmp_path):
    """--val-fraction 0: no validation split, so no val loss anywhere: the log's
    evaluation lines hold the train loss alone, the CSV has no eval_val column, and the
    checkpoint's evals are strict JSON (null, never NaN); --resume reads them back."""
    import json

    out = tmp_path / "m.safetensors"
    r = run_cli(*train_args(text_file, out, "--val-fraction", "0"))
    assert r.exit_code == 0, r.output
    assert "nan" not in r.output.lower() and "val loss" not in r.output
    assert re.findall(r"^step (\d+): train loss \d+\.\d{4}$", r.output, re.M) == \
        ["0", "8", "16", "24"]
    assert "final: step 24: train loss " in r.output

    def no_constants(name):
        raise ValueError(f"not JSON: {name}")

    from safetensors import safe_open
    with safe_open(str(out), "np") as f:
        evals = json.loads(f.metadata()["evals"], parse_constant=no_constants)
    assert [e[0] for e in evals] == [0, 8, 16, 24] and all(e[2] is None for e in evals)
    assert all(isinstance(e[1], float) and np.isfinite(e[1]) for e in evals)
    text = out.with_suffix(".losses.csv").read_text()
    assert text.splitlines()[0] == "step,loss,grad_norm,eval_train" and "nan" not in text
    ck = ckpt.load(out)
    assert np.isnan([e[2] for e in ck.evals]).all()
    r = run_cli("train", "--resume", out, "--steps", "24", "--samples", "0")
    assert r.exit_code == 0 and "nan" not in r.output.lower(), r.output


def test_config_docs_say_which_names_it_reads():
    """README and --config's help name what a --config file holds: the options' own
    names (nanoGPT's learning_rate or max_iters are not among them)."""
    from pathlib import Path

    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    assert "nanoGPT's names" not in readme and "option names" in readme
    assert "option names" in " ".join(run_cli("train", "--help").output.split())


@pytest.mark.parametrize("line, fragment", [
    ("steps = [1, 2]", "steps = [1, 2] is an array; --steps takes an integer"),
    ("steps = {a = 1}", 'steps = {"a": 1} is a table; --steps takes an integer'),
    ("data = 5", "data = 5 is an integer; --data takes a path"),
    ("steps = 5.5", "steps = 5.5 is a float; --steps takes an integer"),
    ("seed = 1.5", "seed = 1.5 is a float; --seed takes an integer"),
    ("steps = true", "steps = true is a boolean; --steps takes an integer"),
    ("lr = true", "lr = true is a boolean; --lr takes a number"),
    ("bias = 1", "bias = 1 is an integer; --bias/--no-bias takes true or false"),
    ("arch = 2", "arch = 2 is an integer; --arch takes one of 'microgpt', 'gpt2'"),
    ("steps = 0", "steps = 0: must be at least 1, got 0"),
    ("lr = -1", "lr = -1: must be a positive number"),
    ("seed = -3", "seed = -3:"),
    ("learning_rate = 0.001", "unknown setting 'learning_rate': a setting is an option's "
                              "name (lr, steps, eval_every"),
])
def test_config_values_are_checked_as_on_the_command_line(tmp_path, line, fragment):
    """A --config value of the wrong TOML type is one line naming the key, the file and
    the type expected (it used to end in a traceback, or be coerced: 5.5 -> 5 steps,
    true -> 1 step or lr 1.0); a value of the right type passes click's checks of the
    same option. Usage errors: status 2."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(line + "\n")
    r = run_cli("train", "--config", cfg, "--samples", "0", "--out", tmp_path / "m.safetensors")
    assert_one_line_error(r, repr(str(cfg)), fragment)
    assert r.exit_code == 2 and not (tmp_path / "m.safetensors").exists()


def test_config_file_not_utf8_and_paths_relative_to_it(text_file, tmp_path, monkeypatch):
    """A config file with a byte that is not UTF-8 is one line; paths in a config file
    are relative to its folder, not to the working folder."""
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"steps = 5\n\xff\n")
    assert_one_line_error(run_cli("train", "--config", bad), repr(str(bad)), "not UTF-8",
                          "0xff")
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "t.txt").write_text(text_file.read_text(encoding="utf-8"), encoding="utf-8")
    (folder / "c.toml").write_text('data = "t.txt"\nout = "m.safetensors"\narch = "gpt2"\n'
                                   'data_format = "text"\nsteps = 2\nsamples = 0\n'
                                   'n_embd = 16\nn_layer = 1\nblock_size = 16\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    r = run_cli("train", "--config", folder / "c.toml")
    assert r.exit_code == 0, r.output
    assert ckpt.load(folder / "m.safetensors").train["data_path"] == str(folder / "t.txt")
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_loss_curves_follow_the_umask_as_the_checkpoint(text_file, tmp_path, umask, mode):
    """NAME.losses.csv and .png get the mode a plain open() gives under the umask, as the
    checkpoint does (they used to be 0600, mkstemp's)."""
    import os

    out = tmp_path / "m.safetensors"
    old = os.umask(umask)
    try:
        r = run_cli(*train_args(text_file, out, "--steps", "4"))
    finally:
        os.umask(old)
    assert r.exit_code == 0, r.output
    for path in (out, out.with_suffix(".losses.csv"), out.with_suffix(".losses.png")):
        assert path.stat().st_mode & 0o777 == mode == 0o666 & ~umask, path


def test_exit_status_2_for_the_options_1_for_the_rest(text_file, tmp_path):
    """click's convention, one rule: status 2 when the options are wrong (a value out of
    range, or one the data, checkpoint or model given cannot serve), 1 when a file
    cannot be used or the run fails. --val-fraction 1, --vocab-size 100 and a prompt
    character outside the vocabulary used to give 1."""
    out = tmp_path / "m.safetensors"
    usage = [
        (train_args(text_file, out, "--val-fraction", "1"), "--val-fraction"),
        (train_args(text_file, out, "--tokenizer", "bpe", "--vocab-size", "100"),
         "--vocab-size 100 is too small for --tokenizer bpe: at least 257"),
        (train_args(text_file, out, "--block-size", "30000"), "--block-size 30000"),
        (["train", "--steps", "0"], "--steps"),
    ]
    for args, fragment in usage:
        r = run_cli(*args)
        assert_one_line_error(r, fragment)
        assert r.exit_code == 2, (args, r.stderr)
    assert run_cli(*train_args(text_file, out, "--steps", "2")).exit_code == 0
    r = run_cli("sample", "--checkpoint", out, "--prompt", "ROMEO€")
    assert_one_line_error(r, "--prompt", "U+20AC")
    assert r.exit_code == 2
    for args, fragment in [(train_args(tmp_path / "none.txt", tmp_path / "x.safetensors"),
                            "does not exist"),
                           (["sample", "--checkpoint", tmp_path / "none.safetensors"],
                            "does not exist")]:
        r = run_cli(*args)
        assert_one_line_error(r, fragment)
        assert r.exit_code == 1, (args, r.stderr)


def test_exit_statuses_and_messages_follow_the_rule(text_file, tmp_path):
    """Issue 41: a missing, unreadable or broken --config file is 1 as a missing --data
    (it was 2); export-hf of a model that is not GPT-2 is a usage error, 2 (it was 1); a
    --prompt character outside the vocabulary names the fix; prepare, which has no model
    yet, blames the tokenizer's vocabulary (it said "the model's")."""
    for name, content, fragment in [("none.toml", None, "No such file"),
                                    ("bad.toml", b"steps = = 5\n", "is not valid TOML"),
                                    ("latin.toml", b"steps = 5\n\xff\n", "not UTF-8")]:
        cfg = tmp_path / name
        if content is not None:
            cfg.write_bytes(content)
        r = run_cli("train", "--config", cfg)
        assert_one_line_error(r, "--config", repr(str(cfg)), fragment)
        assert r.exit_code == 1, (name, r.stderr)
    names = tmp_path / "names.safetensors"
    data = tmp_path / "n.txt"
    data.write_text("emma\nolivia\nava\n")
    assert run_cli("train", "--data", data, "--steps", 1, "--samples", 0,
                   "--out", names).exit_code == 0
    r = run_cli("export-hf", names, tmp_path / "hf")
    assert_one_line_error(r, "export-hf writes GPT-2 models", "microgpt model of lines",
                          "--arch gpt2")
    assert r.exit_code == 2 and not (tmp_path / "hf").exists()
    out = tmp_path / "m.safetensors"
    assert run_cli(*train_args(text_file, out, "--steps", "2")).exit_code == 0
    r = run_cli("sample", "--checkpoint", out, "--prompt", "ROMEO€")
    line = assert_one_line_error(r, "'€' (U+20AC) is not in the model's vocabulary",
                                 "write --prompt with the model's characters")
    assert repr(ckpt.load(out).text_tokenizer().chars) in line and r.exit_code == 2
    r = run_cli("sample", "--checkpoint", out, "--prompt", "")  # a character model: no start
    assert_one_line_error(r, "--prompt is empty", "no <|endoftext|> token",
                          "give at least one character")
    assert r.exit_code == 2
    tok = tmp_path / "tok.json"
    tok.write_text(ckpt.load(out).text_tokenizer().to_json(), encoding="utf-8")
    euro = tmp_path / "euro.txt"
    euro.write_text("ROMEO costs 5 €\n" * 50, encoding="utf-8")
    r = run_cli("prepare", euro, "--out", tmp_path / "shards", "--tokenizer", tok)
    line = assert_one_line_error(r, "is not in the tokenizer's vocabulary",
                                 "give a tokenizer that has it")
    assert "model" not in line and r.exit_code == 1


def test_sample_help_counts_tokens_not_characters():
    r = run_cli("sample", "--help")
    text = " ".join(r.output.split())
    assert r.exit_code == 0 and "--max-new-tokens" in text
    assert "tokens to generate after the prompt" in text
    assert "characters to generate" not in text
