"""Counts in messages (microgpt_fut/wording.py), and the lines that print them."""
from __future__ import annotations

import numpy as np
from click.testing import CliRunner

from cli_helpers import need_backend, shakespeare_file
from microgpt_fut.cli.commands import main
from microgpt_fut.wording import counted


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
