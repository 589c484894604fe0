"""Counts in messages (microgpt_fut/wording.py), and the lines that print them."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from click.testing import CliRunner

from cli_helpers import need_backend, shakespeare_file, small_data
from microgpt_fut.cli.commands import main
from microgpt_fut.wording import counted, shown_path


def test_counted():
    assert counted(1, "layer") == "1 layer"
    assert counted(0, "layer") == "0 layers"
    assert counted(2, "head") == "2 heads"
    assert counted(18000, "token") == "18,000 tokens"
    assert counted(np.int64(1), "token") == "1 token"


def test_train_and_prepare_say_one_layer_and_one_shard(tmp_path):
    """`train --n-layer 1 --n-head 1` said "1 layers, 1 heads"; prepare "1 shard(s)"; a
    BPE smaller than --vocab-size is noted."""
    need_backend("c")
    text = shakespeare_file(tmp_path, 5000)
    r = CliRunner().invoke(main, ["prepare", str(text), "--out", str(tmp_path / "s"),
                                  "--tokenizer", "bpe", "--vocab-size", "5000"])
    assert r.exit_code == 0, r.output
    assert " in 1 shard, " in r.stderr
    assert "fewer than --vocab-size 5,000" in r.stderr
    r = CliRunner().invoke(main, ["train", "--n-layer", "1", "--n-head", "1", "--steps", "1",
                                  "--samples", "0", "--out", str(tmp_path / "m.safetensors")])
    assert r.exit_code == 0, r.output
    assert "microgpt, 1 layer, 1 head, n_embd" in r.stderr
    assert "trained 1 step in" in r.stderr


def test_shown_path_keeps_a_dash_path_from_reading_as_an_option():
    assert shown_path("names.txt") == "names.txt"
    assert shown_path("-names.txt") == "./-names.txt"
    assert shown_path(Path("./-names.txt")) == "./-names.txt"  # pathlib drops the ./
    assert shown_path(Path("/tmp/-x")) == "/tmp/-x"
    assert shown_path(Path("d/-x")) == "d/-x"


def test_train_names_a_dash_file_as_a_path(tmp_path, monkeypatch):
    """`train --data ./-names.txt` printed "data: -names.txt: ...", which reads as an
    option: its data line, and the saved lines, keep the "./"; a text run's too."""
    need_backend("c")
    monkeypatch.chdir(tmp_path)
    small_data(tmp_path, 40, "-names.txt")
    r = CliRunner().invoke(main, ["train", "--data", "./-names.txt", "--steps", "2",
                                  "--save-every", "1", "--samples", "0",
                                  "--out", "./-m.safetensors"])
    assert r.exit_code == 0, r.output
    lines = r.stderr.splitlines()
    assert "data: ./-names.txt: 40 documents" in lines
    assert "saved checkpoint ./-m.safetensors (step 1 of 2)" in lines
    assert "saved ./-m.safetensors" in lines
    shakespeare_file(tmp_path, 3000, "-t.txt")
    r = CliRunner().invoke(main, ["train", "--data", "./-t.txt", "--data-format", "text",
                                  "--steps", "1", "--eval-iters", "1", "--samples", "0",
                                  "--out", "./-t.safetensors"])
    assert r.exit_code == 0, r.output
    assert any(ln.startswith("data: ./-t.txt | 3,000 characters") for ln in r.stderr.splitlines())
    assert ("saved ./-t.safetensors, ./-t.losses.csv, ./-t.losses.png"
            in r.stderr.splitlines())
