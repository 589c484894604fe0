"""The command line (click): train -> checkpoint -> sample, and one-line errors."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

from click.testing import CliRunner

from cli_helpers import (NAMES_TXT, assert_one_line_error, broken_checkpoints, lines_run,
                         names_lines, need_backend, small_data, without_metadata_sum)
from microgpt_fut.training import checkpoint as ckpt
from microgpt_fut.errors import BackendError
from microgpt_fut.cli.commands import main
from microgpt_fut.data.lines import Vocab, read_docs
from microgpt_fut.models.microgpt import MicrogptConfig, MicrogptModel
from microgpt_fut.backend.runtime import Runtime
from microgpt_fut.training.sampling import iter_names
from microgpt_fut.training.settings import Settings

SAMPLE_RE = re.compile(r"sample +(\d+): (.*)")



def _names(model, vocab, n, temperature, seed, chunk=None):
    """The n names of sampling.iter_names, as one list."""
    return [x for part in iter_names(model, vocab, n, temperature, seed, chunk) for x in part]

def run(*args, **kw):
    return CliRunner().invoke(main, [str(a) for a in args], **kw)


def samples(output: str) -> list[str]:
    return [m.group(2) for m in map(SAMPLE_RE.fullmatch, output.splitlines()) if m]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """`train --steps 30` on 300 names: (folder, data file, checkpoint, result)."""
    need_backend("c")
    folder = tmp_path_factory.mktemp("cli")
    data = small_data(folder)
    out = folder / "m.safetensors"
    result = run("train", "--data", data, "--steps", 30, "--steps-per-call", 7,
                 "--out", out, "--samples", 12)
    assert result.exit_code == 0, result.output
    return folder, data, out, result


def test_train_prints_progress_on_stderr_and_samples_on_stdout(trained):
    """As tqdm and logging: the data, model, progress, saved lines and the samples'
    banner on stderr; stdout holds the 12 samples and nothing else (they used to share
    stdout, so that `train | head -1` read the data line)."""
    _, data, out, result = trained
    text = result.stderr
    assert out.is_file()
    assert f"data: {data}: 300 documents" in text
    line = re.search(r"^step 30 / 30 \| loss (\d+\.\d{4}) \(mean of steps 1-30\) \| grad norm "
                     r"\d+\.\d{4} \(step 30\) \| [\d,]+ tok/s$", text, re.M)
    assert line, text
    # the label says what it is: the mean of those steps' losses, as the checkpoint has them
    losses = ckpt.load(out).losses
    assert float(line.group(1)) == pytest.approx(float(np.mean(losses[:30])), abs=6e-5)
    assert re.search(r"^mean loss of the last 30 steps: \d+\.\d{4}$", text, re.M)
    assert "--- inference (new, hallucinated names) ---" in text
    assert re.search(rf"^saved {re.escape(str(out))}$", text, re.M)
    lines = result.stdout.splitlines()
    assert len(lines) == 12 and all(SAMPLE_RE.fullmatch(ln) for ln in lines), result.stdout
    assert lines[0].startswith("sample  1: ") and lines[-1].startswith("sample 12: ")


def test_train_piped_to_head_trains_to_the_end(tmp_path):
    """`train | head -1` reads the first sample: the run is not stopped by the reader
    (it used to read the data line and stop the run at step 0, status 141)."""
    need_backend("c")
    out = tmp_path / "m.safetensors"
    p = subprocess.Popen([sys.executable, "-m", "microgpt_fut", "train", "--data",
                          str(small_data(tmp_path)), "--steps", "20", "--samples", "3",
                          "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    first = p.stdout.readline()
    p.stdout.close()  # as head -1
    err = p.stderr.read()
    assert p.wait(timeout=120) in (0, 141), err  # 141: the other samples met a closed pipe
    assert SAMPLE_RE.fullmatch(first.rstrip("\n")), first
    assert ckpt.load(out).step == 20 and "Traceback" not in err


def test_sample_prints_only_the_samples_on_stdout(trained):
    """sample's banner goes to stderr: stdout is one line per sample."""
    _, _, out, _ = trained
    r = run("sample", "--checkpoint", out, "-n", 4)
    assert r.exit_code == 0, r.output
    assert "--- inference (new, hallucinated names) ---" in r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 4 and all(SAMPLE_RE.fullmatch(ln) for ln in lines), r.stdout


def test_checkpoint_holds_the_run(trained):
    _, data, out, _ = trained
    ck = ckpt.load(out)
    assert ck.step == 30 and ck.train["num_steps"] == 30 and ck.train["seed"] == 42
    assert ck.config.vocab_size == len(ck.vocab) + 1 == Vocab.from_docs(read_docs(data)).size
    assert str(data) in ck.train["data"]


def test_sample_from_checkpoint_equals_samples_after_training(trained):
    _, _, out, result = trained
    again = run("sample", "--checkpoint", out, "-n", 12, "--seed", 42)
    assert again.exit_code == 0, again.output
    assert samples(again.stdout) == samples(result.stdout)
    assert len(samples(again.stdout)) == 12


def test_round_trip_in_memory_model(tmp_path):
    need_backend("c")
    docs = read_docs(small_data(tmp_path))
    rt = Runtime("c")
    res = lines_run(rt, docs, Settings(num_steps=20, steps_per_call=6, batch_size=3),
                    MicrogptConfig(Vocab.from_docs(docs).size, n_layer=2, block_size=8))
    res.run()
    path = tmp_path / "r.safetensors"
    ckpt.save(path, res.checkpoint())
    ck = ckpt.load(path)
    params, (m, v) = res.model.params(), res.model.adam()
    for name in params:
        assert np.array_equal(ck.params[name], params[name]), name
        assert np.array_equal(ck.m[name], m[name]) and np.array_equal(ck.v[name], v[name])
    loaded = MicrogptModel.from_arrays(rt, ck.config, ck.params, ck.m, ck.v, ck.step)
    assert loaded.step() == res.model.step() == 20
    for name, arr in loaded.params().items():
        assert np.array_equal(arr, params[name])
    a = _names(res.model, res.dataset.vocab, 40, 0.7, seed=5)
    b = _names(loaded, Vocab(tuple(ck.vocab)), 40, 0.7, seed=5)
    c = _names(loaded, Vocab(tuple(ck.vocab)), 40, 0.7, seed=5, chunk=6)
    assert a == b == c
    assert _names(loaded, res.dataset.vocab, 40, 0.7, seed=6) != a


def test_sample_zero_prints_nothing(trained):
    _, _, out, _ = trained
    r = run("sample", "--checkpoint", out, "-n", 0)
    assert r.exit_code == 0 and r.output == ""


def test_temperature_zero_is_greedy(trained):
    _, _, out, _ = trained
    outs = [run("sample", "--checkpoint", out, "-n", 5, "--temperature", 0, "--seed", s)
            for s in (1, 2, 99)]
    assert all(r.exit_code == 0 for r in outs)
    names = [samples(r.stdout) for r in outs]
    assert names[0] == names[1] == names[2] and len(set(names[0])) == 1


def test_large_n_in_chunks(trained):
    _, _, out, _ = trained
    r = run("sample", "--checkpoint", out, "-n", 5000, "--seed", 3)
    assert r.exit_code == 0
    got = samples(r.stdout)
    assert len(got) == 5000
    first = run("sample", "--checkpoint", out, "-n", 10, "--seed", 3)
    assert samples(first.stdout) == got[:10]


@pytest.mark.parametrize("value", ["-0.5", "nan", "inf"])
def test_bad_temperature(trained, value):
    _, _, out, _ = trained
    assert_one_line_error(run("sample", "--checkpoint", out, "--temperature", value),
                          "--temperature")
    assert_one_line_error(run("train", "--out", out.parent / "t.safetensors",
                              "--temperature", value), "--temperature")
    assert not (out.parent / "t.safetensors").exists()


def test_sample_bad_checkpoints(tmp_path, trained):
    _, _, out, _ = trained
    for path, fragment in broken_checkpoints(tmp_path, out):
        assert_one_line_error(run("sample", "--checkpoint", path), fragment)
    bad = tmp_path / "bad.safetensors"
    data = bytearray(out.read_bytes())
    data[8:12] = b"\x00\x01\x02\x03"  # corrupt the JSON header
    bad.write_bytes(bytes(data))
    assert_one_line_error(run("sample", "--checkpoint", bad), "not a safetensors file")


def test_data_errors(tmp_path):
    need_backend("c")
    out = tmp_path / "m.safetensors"
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    blank = tmp_path / "blank.txt"
    blank.write_bytes(b"\n \n\t\n")
    latin = tmp_path / "latin.txt"
    latin.write_bytes("emma\nolivia\nzoë\n".encode("latin-1"))
    # a folder is read as token shards (--data-format's default there): this one has none
    cases = [(tmp_path / "missing.txt", "does not exist"), (tmp_path, "holds no token shards"),
             (empty, "is empty"), (blank, "only blank lines"), (latin, "line 3")]
    for path, fragment in cases:
        assert_one_line_error(run("train", "--data", path, "--out", out, "--steps", 2),
                              fragment, str(path))
        assert not out.exists()
    r = run("train", "--data", latin, "--encoding", "latin-1", "--out", out, "--steps", 2,
            "--samples", 0)
    assert r.exit_code == 0, r.output
    assert "ë" in ckpt.load(out).vocab


def test_single_document_trains(tmp_path):
    need_backend("c")
    data = tmp_path / "one.txt"
    data.write_text("anna\n")
    r = run("train", "--data", data, "--out", tmp_path / "m.safetensors", "--steps", 60,
            "--samples", 3, "--temperature", 0)
    assert r.exit_code == 0, r.output
    assert samples(r.stdout) == ["anna"] * 3


def test_long_documents_warn(tmp_path):
    need_backend("c")
    data = tmp_path / "long.txt"
    data.write_text("abcdefghij\nab\n")
    r = run("train", "--data", data, "--out", tmp_path / "m.safetensors", "--steps", 2,
            "--block-size", 4, "--samples", 0)
    assert r.exit_code == 0, r.output
    assert "1 of 2 documents is longer" in r.stderr


@pytest.mark.parametrize("args, fragment", [
    (["--steps", "0"], "--steps"),
    (["--batch-size", "-2"], "--batch-size"),
    (["--n-embd", "0"], "--n-embd"),
    (["--n-layer", "0"], "--n-layer"),
    (["--block-size", "0"], "--block-size"),
    (["--mlp-width", "0"], "--mlp-width"),
    (["--steps-per-call", "0"], "--steps-per-call"),
    (["--n-embd", "10", "--n-head", "4"], "not divisible by --n-head"),
    (["--lr", "nan"], "--lr"),
    (["--lr", "-1"], "--lr"),
    (["--seed", "-1"], "--seed"),
    (["--steps", "many"], "--steps"),
    (["--backend", "tpu"], "--backend"),
    (["--bogus"], "--bogus"),
    (["--device", "0"], "--device"),
])
def test_bad_train_options(tmp_path, args, fragment):
    if "--device" in args:
        need_backend("c")  # the error comes from the loaded backend
    out = tmp_path / "m.safetensors"
    r = run("train", "--out", out, "--steps", 3, *args)
    assert_one_line_error(r, fragment)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_out_must_be_writable_before_training(tmp_path):
    r = run("train", "--out", tmp_path / "missing" / "m.safetensors", "--steps", 3)
    msg = assert_one_line_error(r, "does not exist")
    assert "step" not in r.stdout and "missing" in msg
    assert_one_line_error(run("train", "--out", tmp_path, "--steps", 3), "directory")


def test_backend_not_built(tmp_path, monkeypatch):
    monkeypatch.setenv("MICROGPT_FUT_BUILD", str(tmp_path / "empty-build"))
    (tmp_path / "empty-build").mkdir()
    out = tmp_path / "m.safetensors"
    for backend in ("c", "multicore", "opencl", "cuda"):
        r = run("train", "--backend", backend, "--out", out, "--steps", 2)
        assert_one_line_error(r, f"backend '{backend}' was not built", "build.sh")
        assert not out.exists()


def test_unknown_command_and_no_traceback():
    assert_one_line_error(run("fly"), "No such command")


def test_devices_lists_or_says_none():
    r = run("devices")
    assert r.exit_code == 0, r.output
    assert ("OpenCL devices" in r.stdout and re.search(r"^  0: ", r.stdout, re.M)) \
        or "no OpenCL devices found" in r.stdout
    assert "built backends:" in r.stdout


def test_help_and_version():
    assert run("--help").exit_code == 0
    assert "0.1.0" in run("--version").stdout
    for cmd in ("train", "sample", "devices"):
        assert run(cmd, "--help").exit_code == 0


def test_integer_ranges_show_their_lower_bound_and_refuse_past_64_bits():
    """--help shows a count's range as x>=min, not the kernels' bound of 2**62 (or 2**63 - 1
    for --seed) in 19 digits; a value past that bound is one line naming it, and one
    below the range one line giving the range."""
    for cmd in ("train", "sample", "prepare", "eval", "export-hf"):
        text = " ".join(run(cmd, "--help").stdout.split())
        assert not re.search(r"\d{10,}", text), (cmd, re.findall(r"\S*\d{10,}\S*", text))
    assert "[default: 0; x>=0]" in " ".join(run("sample", "--help").stdout.split())
    assert_one_line_error(run("sample", "--top-k", 2**62 + 1), "--top-k",
                          f"{2**62 + 1} is too large (at most 2**62)")
    assert_one_line_error(run("train", "--seed", 2**63), "--seed",
                          f"{2**63} is too large (at most 2**63 - 1)")
    assert_one_line_error(run("sample", "--top-k", -1), "--top-k", "-1 is not in the range x>=0")
    assert_one_line_error(run("sample", "--top-k", "1.5"), "--top-k", "'1.5' is not a valid integer.")
    assert_one_line_error(run("prepare", "--vocab-size", 256, "x.txt"), "--vocab-size",
                          "256 is not in the range x>=257")


@pytest.mark.slow
def test_microgpt_job_end_to_end():
    """microgpt.py's exact job: names.txt, B=1, 1000 steps, seed 42, its sizes, on c."""
    need_backend("c")
    names_lines()  # skips without the shared data
    docs = read_docs(NAMES_TXT)
    rt = Runtime("c")
    t0 = time.perf_counter()
    res = lines_run(rt, docs, Settings(), MicrogptConfig(Vocab.from_docs(docs).size))
    res.run()
    elapsed = time.perf_counter() - t0
    assert res.losses.shape == (1000,) and np.all(np.isfinite(res.losses))
    mean = float(np.mean(res.losses[-100:]))
    print(f"\n1000 steps on c: {elapsed:.2f} s, mean loss of steps 901-1000: {mean:.4f}")
    assert mean <= 2.40  # microgpt.py itself: 2.276
    names = _names(res.model, res.dataset.vocab, 20, 0.5, seed=42)
    print(names)
    good = [n for n in names if re.fullmatch(r"[a-z]{2,15}", n)]
    assert len(good) >= 15, names


# --- issue 4: every bad input answered in one line, nothing lost ---------------------------

@pytest.mark.parametrize("args, fragments", [
    (["--device", "1"], ["--device applies to the opencl and cuda backends"]),
    (["--encoding", "nosuch"], ["unknown encoding 'nosuch'", "--encoding"]),
    (["--out", "{tmp}"], ["--out", "is a directory"]),
    (["--out", ""], ["--out", "is empty"]),
    # Path("") is ".": these ran on the current folder (an unset shell variable)
    (["--data", ""], ["--data", "is empty"]),
    (["--resume", ""], ["--resume", "is empty"]),
    (["--init-from", ""], ["--init-from", "is empty"]),
], ids=["device-on-c", "encoding", "out-directory", "out-empty", "data-empty", "resume-empty",
        "init-from-empty"])
def test_usage_errors_exit_2(tmp_path, args, fragments):
    """Options that cannot be used as given are usage errors: one line, status 2."""
    need_backend("c")
    data = small_data(tmp_path, 20)
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    r = run("train", "--data", data, "--steps", 2, "--backend", "c", *args)
    msg = assert_one_line_error(r, *fragments)
    assert r.exit_code == 2, msg
    assert "'.'" not in msg


def test_an_empty_path_is_refused_by_every_command(tmp_path):
    """An empty path, on the command line or in a --config file, is a usage error naming
    the option (it was read as '.', the current folder: `--data ""` trained on the
    shards there)."""
    toml = tmp_path / "run.toml"
    toml.write_text('data = ""\nsteps = 1\n')
    for args, option in ((["sample", "--checkpoint", ""], "--checkpoint"),
                         (["eval", "--checkpoint", "", "--choices", toml], "--checkpoint"),
                         (["eval", "--choices", ""], "--choices"),
                         (["export-hf", "", tmp_path / "hf"], "CHECKPOINT"),
                         (["train", "--config", toml], "data = \"\": is empty")):
        r = run(*args)
        msg = assert_one_line_error(r, option, "is empty")
        assert r.exit_code == 2, msg


def test_a_file_with_a_trailing_slash_is_not_a_directory(tmp_path):
    """`--data names.txt/` (a file, then /) read the file: pathlib drops the /. It is
    refused as the OS refuses it (not a directory), one line naming the option, status 2,
    by every command; a folder with a / is fine."""
    need_backend("c")
    data = small_data(tmp_path, 20)
    ck = tmp_path / "m.safetensors"
    assert run("train", "--data", data, "--steps", 1, "--samples", 0, "--out", ck).exit_code == 0
    slash = lambda p: str(p) + "/"  # noqa: E731
    for args, option, path in (
            (["train", "--data", slash(data), "--steps", 1, "--out", tmp_path / "x"], "--data",
             data),
            (["train", "--resume", slash(ck)], "--resume", ck),
            (["train", "--data", data, "--out", slash(ck), "--overwrite"], "--out", ck),
            (["sample", "--checkpoint", slash(ck)], "--checkpoint", ck),
            (["prepare", slash(data), "--out", tmp_path / "s"], "INPUTS", data)):
        r = run(*args)
        assert_one_line_error(r, option, repr(slash(path)), "not a directory")
        assert r.exit_code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors", "names.txt"]
    r = run("sample", "--checkpoint", ck, "-n", 1)
    assert r.exit_code == 0, r.output


def test_a_broken_symbolic_link_is_named_with_its_target(tmp_path):
    """A path to read that is a broken symbolic link (was: "does not exist") is a usage
    error that says so and names where it points, for every command; --out may be one
    (a checkpoint not written yet)."""
    need_backend("c")
    data = small_data(tmp_path, 20)
    link = tmp_path / "link.txt"
    link.symlink_to("gone.txt")
    toml = tmp_path / "run.toml"
    toml.write_text('data = "link.txt"\nsteps = 1\n')
    for args, option in ((["train", "--data", link], "--data"),
                         (["train", "--resume", link], "--resume"),
                         (["train", "--data", data, "--init-from", link], "--init-from"),
                         (["train", "--config", toml], "data = \"link.txt\""),
                         (["train", "--data", data, "--eval-choices", link], "--eval-choices"),
                         (["sample", "--checkpoint", link], "--checkpoint"),
                         (["eval", "--checkpoint", link, "--choices", data], "--checkpoint"),
                         (["export-hf", link, tmp_path / "hf"], "CHECKPOINT"),
                         (["prepare", link, "--out", tmp_path / "s"], "INPUTS")):
        r = run(*args)
        assert_one_line_error(r, option, "is a broken symbolic link to 'gone.txt'",
                              "which does not exist", "fix the link")
        assert r.exit_code == 2
    out = tmp_path / "out.safetensors"
    out.symlink_to("new.safetensors")
    r = run("train", "--data", data, "--steps", 1, "--samples", 0, "--out", out)
    assert r.exit_code == 0, r.output
    assert out.is_symlink() and ckpt.load(tmp_path / "new.safetensors").step == 1


def test_paths_a_run_cannot_record_or_write(tmp_path):
    """A name that is not UTF-8 (a run records its paths as text: the run trained, then
    its save failed with a traceback and the training was lost) is a usage error naming
    the option, before any work; so is --out NAME/ for a checkpoint not made yet (it
    wrote a file NAME). A save through a link writes the file it points to and keeps the
    link (the atomic save renamed its new file over the link)."""
    need_backend("c")
    data = small_data(tmp_path, 20)
    bad = tmp_path / os.fsdecode(b"bad\xffname.txt")
    bad.write_bytes(data.read_bytes())
    for args, option in ((["train", "--data", bad, "--steps", 1], "--data"),
                         (["train", "--data", data, "--out", tmp_path / os.fsdecode(b"o\xff")],
                          "--out"),
                         (["prepare", bad, "--out", tmp_path / "s"], "INPUTS")):
        r = run(*args)
        assert_one_line_error(r, option, "the name is not UTF-8", "rename it")
        assert r.exit_code == 2
    r = run("train", "--data", data, "--steps", 1, "--out", str(tmp_path / "newdir") + "/")
    assert_one_line_error(r, "--out", "ends with /", "give a file name")
    assert r.exit_code == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([bad.name, "names.txt"])
    real, link = tmp_path / "real.safetensors", tmp_path / "link.safetensors"
    assert run("train", "--data", data, "--steps", 1, "--samples", 0, "--out", real).exit_code == 0
    link.symlink_to(real.name)
    r = run("train", "--data", data, "--steps", 2, "--samples", 0, "--out", link, "--overwrite")
    assert r.exit_code == 0, r.output
    assert link.is_symlink() and ckpt.load(real).step == 2
    loop = tmp_path / "loop.safetensors"
    loop.symlink_to(loop.name)  # a link to itself: nothing to write through
    r = run("train", "--data", data, "--steps", 1, "--out", loop)
    assert_one_line_error(r, "--out", "symbolic link in a loop", "give another name")
    assert r.exit_code == 2 and loop.is_symlink()
    # the same for the folders that prepare and export-hf write (they said "is a file")
    folder = tmp_path / "loop_folder"
    folder.symlink_to(folder.name)
    for args, option in ((["prepare", data, "--out", folder], "--out"),
                         (["export-hf", real, folder], "FOLDER")):
        r = run(*args)
        assert_one_line_error(r, option, "symbolic link in a loop", "give another name")
        assert r.exit_code == 2 and folder.is_symlink()
    # and a folder to write through a broken link (a folder is not made through one)
    broken = tmp_path / "broken_folder"
    broken.symlink_to("nowhere")
    for args, option in ((["prepare", data, "--out", broken], "--out"),
                         (["export-hf", real, broken], "FOLDER")):
        r = run(*args)
        assert_one_line_error(r, option, "broken symbolic link to 'nowhere', which does not "
                              "exist", "give the folder it should point to")
        assert r.exit_code == 2 and broken.is_symlink() and not (tmp_path / "nowhere").exists()


def test_out_parent_is_a_file_or_out_is_not_a_checkpoint(tmp_path):
    need_backend("c")
    data = small_data(tmp_path, 20)
    r = run("train", "--data", data, "--out", data / "m.safetensors", "--steps", 2)
    assert_one_line_error(r, "is not a folder", str(data))
    before = data.read_bytes()
    r = run("train", "--data", data, "--out", data, "--steps", 2)
    assert_one_line_error(r, "--out", "is the data file")
    assert r.exit_code == 2  # a usage error
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    r = run("train", "--data", data, "--out", notes, "--steps", 2)
    assert_one_line_error(r, "is not a microgpt-fut checkpoint", "refusing to overwrite")
    assert data.read_bytes() == before and notes.read_text() == "my notes\n"
    assert "step" not in r.stdout


@pytest.mark.parametrize("args, fragment", [
    (["--save-every", "0"], "--save-every"),
    (["--save-every", "-3"], "--save-every"),
    (["--n-head", "0"], "--n-head"),
    (["--steps", "-5"], "--steps"),
    (["--batch-size", "0"], "--batch-size"),
])
def test_more_bad_train_options(tmp_path, args, fragment):
    out = tmp_path / "m.safetensors"
    r = run("train", "--out", out, "--steps", 3, *args)  # a later --steps wins
    assert_one_line_error(r, fragment)
    assert r.exit_code == 2 and not out.exists()


def test_bad_bytes_offer_encoding(tmp_path):
    need_backend("c")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"emma\n\xff\xfeolivia\n")
    assert_one_line_error(run("train", "--data", bad, "--out", tmp_path / "m.safetensors"),
                          "line 2", "--encoding", str(bad))


def test_opencl_device_out_of_range():
    need_backend("opencl")
    r = run("train", "--backend", "opencl", "--device", 99, "--steps", 2)
    msg = assert_one_line_error(r)
    assert ("--device 99 is out of range" in msg or "no OpenCL platform" in msg), msg


def test_no_opencl_platform(monkeypatch):
    from microgpt_fut.backend import runtime

    monkeypatch.setattr(runtime, "opencl_devices", lambda: [])
    for index in (None, 0, 3):
        with pytest.raises(BackendError) as e:
            runtime.choose_opencl_device(index)
        assert "no OpenCL platform" in str(e.value) and "\n" not in str(e.value)


class _FakeFuthark:
    """Stands in for futhark_ffi.Futhark: records its keyword arguments."""

    kwargs: dict = {}

    def __init__(self, mod, **kwargs):
        _FakeFuthark.kwargs = kwargs
        self.ctx = None
        self.lib = type("Lib", (), {"futhark_context_sync": staticmethod(lambda ctx: 0)})()


def _fake_backends(monkeypatch, tmp_path):
    from microgpt_fut.backend import runtime

    monkeypatch.setattr(runtime, "module_path", lambda b: tmp_path / f"_microgpt_{b}.so")
    monkeypatch.setattr(runtime, "import_module", lambda b, p: type("Mod", (), {"lib": None}))
    monkeypatch.setattr(runtime, "Futhark", _FakeFuthark)
    return runtime


def test_cuda_device_is_passed_to_futhark_or_rejected(monkeypatch, tmp_path):
    runtime = _fake_backends(monkeypatch, tmp_path)
    monkeypatch.setattr(runtime, "cuda_device_count", lambda: 2)
    runtime.Runtime("cuda", device=1)
    assert _FakeFuthark.kwargs["device"] == b"#1"  # Futhark's syntax for the 2nd device
    runtime.Runtime("cuda")
    assert "device" not in _FakeFuthark.kwargs
    for bad, fragment in ((2, "the CUDA devices here are numbered 0..1"), (-1, "numbered from 0")):
        with pytest.raises(BackendError, match=re.escape(fragment)):
            runtime.Runtime("cuda", device=bad)
    monkeypatch.setattr(runtime, "cuda_device_count", lambda: 0)
    with pytest.raises(BackendError, match="no CUDA device"):
        runtime.Runtime("cuda", device=0)
    monkeypatch.setattr(runtime, "cuda_device_count", lambda: None)  # no driver to ask
    runtime.Runtime("cuda", device=5)
    assert _FakeFuthark.kwargs["device"] == b"#5"


def test_cuda_device_out_of_range_through_the_cli(monkeypatch, tmp_path):
    runtime = _fake_backends(monkeypatch, tmp_path)
    monkeypatch.setattr(runtime, "cuda_device_count", lambda: 1)
    out = tmp_path / "m.safetensors"
    r = run("train", "--backend", "cuda", "--device", 3, "--out", out, "--steps", 2)
    assert_one_line_error(r, "--device 3 is out of range",
                          "there is one CUDA device here, number 0")
    assert not out.exists()


def test_opencl_device_is_passed_by_number(monkeypatch, tmp_path):
    runtime = _fake_backends(monkeypatch, tmp_path)
    devs = [runtime.OpenCLDevice(0, "Vendor A", "Same Name", True),
            runtime.OpenCLDevice(1, "Vendor A", "Same Name", True)]
    monkeypatch.setattr(runtime, "opencl_devices", lambda: devs)
    rt = runtime.Runtime("opencl", device=1)
    assert rt.device == devs[1] and _FakeFuthark.kwargs["device"] == b"#1"
    assert "platform" not in _FakeFuthark.kwargs
    with pytest.raises(BackendError, match="--device 2 is out of range"):
        runtime.Runtime("opencl", device=2)


def test_sample_incompatible_checkpoints(trained, tmp_path):
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    _, _, out, _ = trained
    with safe_open(str(out), framework="numpy") as f:
        meta = dict(f.metadata())
    tensors = load_file(str(out))
    newer = tmp_path / "newer.safetensors"
    save_file(tensors, str(newer),
              metadata=without_metadata_sum(dict(meta, format="microgpt-fut/2")))
    assert_one_line_error(run("sample", "--checkpoint", newer), "microgpt-fut/2",
                          "this version reads")
    other = tmp_path / "other.safetensors"
    save_file(tensors, str(other), metadata=without_metadata_sum(dict(meta, config=meta[
        "config"].replace('"n_embd": 16', '"n_embd": 24'))))
    assert_one_line_error(run("sample", "--checkpoint", other), "wte", "(27, 24)")
    odd = tmp_path / "odd.safetensors"
    save_file(tensors, str(odd), metadata=without_metadata_sum(dict(meta, config=meta[
        "config"].replace('"n_head": 4', '"n_head": 3'))))
    assert_one_line_error(run("sample", "--checkpoint", odd), "not divisible")
    foreign = tmp_path / "foreign.safetensors"
    save_file({"weight": np.zeros((2, 2), np.float32)}, str(foreign))
    assert_one_line_error(run("sample", "--checkpoint", foreign), "not a microgpt-fut checkpoint")


def test_batch_larger_than_the_data_is_refused(tmp_path):
    data = tmp_path / "three.txt"
    data.write_text("emma\nava\nmia\n")
    r = run("train", "--data", data, "--batch-size", 4, "--out", tmp_path / "m.safetensors")
    assert r.exit_code == 2
    assert_one_line_error(r, "--batch-size 4 is larger than the data (", "3 documents",
                          "use at most 3")
    assert not (tmp_path / "m.safetensors").exists()
    assert run("train", "--data", data, "--batch-size", 3, "--steps", 2, "--samples", 0,
               "--out", tmp_path / "m.safetensors").exit_code == 0


def test_the_out_lock_is_taken_on_the_resolved_path(tmp_path):
    """train's checkpoint lock (and prepare's --out lock): a symlink to --out, or to its
    folder, is the same --out; the lock is free again once its command ends."""
    import click

    from microgpt_fut.cli.common import lock_out

    (tmp_path / "d").mkdir()
    (tmp_path / "dlink").symlink_to("d")
    (tmp_path / "d" / "m.safetensors").write_bytes(b"")
    (tmp_path / "mlink").symlink_to("d/m.safetensors")
    with click.Context(click.Command("train")) as first:
        lock_out(first, tmp_path / "d" / "m.safetensors")
        for other in (tmp_path / "dlink" / "m.safetensors", tmp_path / "mlink"):
            with click.Context(click.Command("train")) as second:
                with pytest.raises(click.ClickException, match="another microgpt-fut process"):
                    lock_out(second, other)
    with click.Context(click.Command("train")) as again:
        lock_out(again, tmp_path / "mlink")


def test_an_out_name_too_long_for_its_folder_is_a_usage_error(tmp_path):
    """A --out name longer than the folder takes (with the 16 bytes its atomic save and
    loss files add) is refused before training, in one line naming --out, exit 2 (the
    trial of issue 41: a 40-line OSError traceback from Path.is_dir)."""
    data = small_data(tmp_path)
    r = run("train", "--data", data, "--steps", 1, "--out", tmp_path / ("L" * 250 + ".safetensors"))
    assert r.exit_code == 2
    assert_one_line_error(r, "--out", "shorter name")
    assert not list(tmp_path.glob("L*"))


def test_devices_into_a_closed_pipe_exits_141_quietly(tmp_path):
    """`devices | head -1` where the reader is gone before the list is written: exit
    141 as SIGPIPE, nothing on stderr (the trial of issue 41: exit 1, no message)."""
    p = subprocess.Popen([sys.executable, "-m", "microgpt_fut", "devices"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    p.stdout.close()  # the reader goes away before the child's first write
    _, err = p.communicate(timeout=120)
    assert p.returncode == 141, err.decode()
    assert err.decode() == ""
