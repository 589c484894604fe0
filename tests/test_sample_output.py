"""`sample` prints samples as they are made: a long run shows its first ones at once,
Ctrl-C keeps what was printed and says how many, --plain prints one per line for
pipes, and a closed pipe ends it quietly."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from click.testing import CliRunner

from cli_helpers import need_backend, small_data
from conftest import DATA_DIR
from microgpt_fut.cli.commands import main
from microgpt_fut.models.microgpt import DeviceModel

N = 1_000_000  # samples asked for: minutes of work at once


def _cli(*args) -> list[str]:
    return [sys.executable, "-m", "microgpt_fut", *map(str, args)]


@pytest.fixture(scope="module")
def names_ckpt(tmp_path_factory):
    need_backend("c")
    folder = tmp_path_factory.mktemp("names")
    out = folder / "m.safetensors"
    subprocess.run(_cli("train", "--data", small_data(folder), "--steps", 30, "--samples", 0,
                        "--out", out), check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def text_ckpt(tmp_path_factory):
    need_backend("c")
    folder = tmp_path_factory.mktemp("text")
    text = folder / "t.txt"
    text.write_text((DATA_DIR / "tinyshakespeare.txt").read_text(encoding="utf-8")[:20000])
    out = folder / "t.safetensors"
    subprocess.run(_cli("train", "--arch", "gpt2", "--data-format", "text", "--data", text,
                        "--n-embd", 16, "--n-layer", 1, "--block-size", 16, "--batch-size", 2,
                        "--steps", 10, "--eval-iters", 1, "--samples", 0, "--out", out),
                   check=True, capture_output=True)
    return out


def test_ctrl_c_keeps_the_samples_printed_and_counts_them(names_ckpt):
    p = subprocess.Popen(_cli("sample", "--checkpoint", names_ckpt, "-n", N, "--plain"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = [p.stdout.readline() for _ in range(5)]  # printed while the rest is made
    p.send_signal(signal.SIGINT)
    rest = p.stdout.read()  # (not communicate(): it would skip what readline buffered)
    err = p.stderr.read()
    assert p.wait(timeout=60) == 130, err
    lines = [ln.rstrip("\n") for ln in first] + rest.splitlines()
    assert err.strip().splitlines() == [f"interrupted: printed {len(lines)} of {N} samples"]
    assert 5 <= len(lines) < N
    # the kept samples are the run's first ones: the same as a run asking for that many
    again = subprocess.run(_cli("sample", "--checkpoint", names_ckpt, "-n", len(lines),
                                "--plain"), capture_output=True, text=True, check=True)
    assert again.stdout.splitlines() == lines


def test_plain_prints_one_name_per_line_and_the_default_microgpts_format(names_ckpt):
    plain = subprocess.run(_cli("sample", "--checkpoint", names_ckpt, "-n", 12, "--plain"),
                           capture_output=True, text=True, check=True).stdout.splitlines()
    pretty = subprocess.run(_cli("sample", "--checkpoint", names_ckpt, "-n", 12),
                            capture_output=True, text=True, check=True)
    assert len(plain) == 12
    # microgpt's banner on stderr, the samples alone on stdout
    assert pretty.stderr.splitlines() == ["", "--- inference (new, hallucinated names) ---"]
    assert pretty.stdout.splitlines() == [f"sample {i + 1:2d}: {name}"
                                          for i, name in enumerate(plain)]


def test_plain_text_samples_are_json_lines(text_ckpt):
    args = ("sample", "--checkpoint", text_ckpt, "-n", 3, "--max-new-tokens", 40, "--prompt",
            "ROMEO:")
    plain = subprocess.run(_cli(*args, "--plain"), capture_output=True, text=True,
                           check=True).stdout.splitlines()
    pretty = subprocess.run(_cli(*args), capture_output=True, text=True, check=True).stdout
    texts = [json.loads(line) for line in plain]
    assert len(texts) == 3 and all(t.startswith("ROMEO:") and len(t) == 46 for t in texts)
    assert pretty == "".join(f"{t}\n---------------\n" for t in texts)


def test_a_closed_pipe_ends_sampling_quietly(names_ckpt):
    """`sample -n 1000000 --plain | head -3`: no traceback, status 141 (SIGPIPE's)."""
    p = subprocess.Popen(_cli("sample", "--checkpoint", names_ckpt, "-n", N, "--plain"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = [p.stdout.readline() for _ in range(3)]
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=60) == 141 and err == b"" and all(head)


@pytest.mark.parametrize("n, sig, status", [(1, signal.SIGINT, 130), (2, signal.SIGTERM, 143)],
                         ids=["only-SIGINT", "last-of-2-SIGTERM"])
def test_a_signal_during_the_last_sample_stops_with_its_status(text_ckpt, monkeypatch, n, sig,
                                                               status):
    """A signal that comes while the last (or only) sample's device call runs: that call's
    samples are printed, one line says how many, and the exit status is the signal's."""
    real = DeviceModel.generate_prompts

    def generate_then_signal(self, seed, temperature, top_k, prompts, max_new, first):
        out = real(self, seed, temperature, top_k, prompts, max_new, first)
        if first + len(prompts) == n:  # the call that makes the last sample
            os.kill(os.getpid(), sig)
        return out

    monkeypatch.setattr(DeviceModel, "generate_prompts", generate_then_signal)
    r = CliRunner().invoke(main, ["sample", "--checkpoint", str(text_ckpt), "-n", str(n),
                                  "--max-new-tokens", "20", "--plain"])
    assert r.exit_code == status, r.output
    assert len(r.stdout.splitlines()) == n
    how = "interrupted" if sig == signal.SIGINT else "stopped by SIGTERM"
    assert r.stderr.strip().splitlines() == [f"{how}: printed {n} of {n} samples"]
