"""Multiple-choice evaluation (choices.py, `microgpt-fut eval`) against hellaswag.py's
computation done with transformers on the same random GPT-2 folder."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from cli_helpers import assert_one_line_error, sigint_at_step
from conftest import get_runtime
from hf_helpers import need, random_hf_model, save_hf_folder, small_bpe
from microgpt_fut.training import choices
from microgpt_fut.training import hf
from microgpt_fut.cli.commands import main
from microgpt_fut.data.lines import DataError
from microgpt_fut.models.gpt2 import GPT2Model

EXAMPLES = Path(__file__).parent / "data" / "choices_example.jsonl"


def theirs(model, tok, ex):
    """hellaswag.py's evaluate loop for one example, in torch: summed and mean losses."""
    torch = need("torch")
    F = torch.nn.functional
    ctx = tok.encode(ex["ctx"], "ctx").tolist()
    rows = [ctx + tok.encode(" " + e, "end").tolist() for e in ex["endings"]]
    n = max(map(len, rows))
    tokens = torch.zeros((len(rows), n), dtype=torch.long)
    mask = torch.zeros((len(rows), n), dtype=torch.long)
    for i, r in enumerate(rows):
        tokens[i, :len(r)] = torch.tensor(r)
        mask[i, len(ctx):len(r)] = 1
    with torch.no_grad():
        logits = model(tokens).logits
    shift_logits = logits[..., :-1, :].contiguous()
    shift_tokens = tokens[..., 1:].contiguous()
    losses = F.cross_entropy(shift_logits.view(-1, shift_logits.size(-1)),
                             shift_tokens.view(-1), reduction="none").view(tokens.size(0), -1)
    shift_mask = mask[..., 1:].contiguous()
    masked = losses * shift_mask
    total = masked.sum(dim=1)
    return total.numpy(), (total / shift_mask.sum(dim=1)).numpy()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    tok = small_bpe()
    model = random_hf_model(tok.size, n_positions=128, std=0.1)
    return save_hf_folder(tmp_path_factory.mktemp("hf") / "m", model, tok), model, tok


def test_scores_equal_hellaswag_py_with_transformers(folder, gpt2_backend):
    path, model, tok = folder
    config, params, _ = hf.load_folder(path)
    ours = GPT2Model.from_arrays(get_runtime(gpt2_backend, "gpt2"), config, params)
    examples = choices.read_examples(EXAMPLES)
    s = choices.evaluate(examples, tok, ours.logits_seq, config.block_size)
    raw = [json.loads(ln) for ln in EXAMPLES.read_text().splitlines()]
    for i, ex in enumerate(raw):
        total, mean = theirs(model, tok, ex)
        np.testing.assert_allclose(s.sum_loss[i], total, rtol=1e-5)
        np.testing.assert_allclose(s.avg_loss[i], mean, rtol=1e-5)
        assert s.pred[i] == total.argmin() and s.pred_norm[i] == mean.argmin()
    # acc and acc_norm from transformers' losses, not from our own picks
    picks = [theirs(model, tok, ex) for ex in raw]
    assert s.acc == np.mean([t.argmin() == e["label"] for (t, _), e in zip(picks, raw)])
    assert s.acc_norm == np.mean([m.argmin() == e["label"] for (_, m), e in zip(picks, raw)])


def test_eval_command_prints_acc_and_acc_norm(folder, tmp_path):
    path, model, tok = folder
    r = CliRunner().invoke(main, ["eval", "--checkpoint", str(path), "--choices", str(EXAMPLES)])
    assert r.exit_code == 0, r.output
    raw = [json.loads(ln) for ln in EXAMPLES.read_text().splitlines()]
    picks = [theirs(model, tok, ex) for ex in raw]
    acc = np.mean([t.argmin() == e["label"] for (t, _), e in zip(picks, raw)])
    acc_norm = np.mean([m.argmin() == e["label"] for (_, m), e in zip(picks, raw)])
    assert r.output.strip().splitlines()[-1] == \
        f"{len(raw)} examples: acc {acc:.4f}, acc_norm {acc_norm:.4f}"


@pytest.mark.parametrize("line, fragment", [
    ("not json", "line 2 is not JSON"),
    ("[1, 2]", "line 2: want an object with ctx"),
    ('{"ctx": "a", "endings": ["b", "c"]}', "line 2: label .* got nothing .it is missing."),
    ('{"ctx": "a", "endings": ["b", "c"], "label": 2}',
     "line 2: label 2 is out of range for 2 endings .0 to 1."),
    ('{"ctx": "a", "endings": ["b", "c"], "label": "2"}', "line 2: label 2 is out of range"),
    ('{"ctx": "a", "endings": ["b", "c"], "label": 1.0}', "line 2: label must be .* got 1.0"),
    ('{"ctx": "a", "endings": ["b", "c"], "label": "one"}', 'line 2: label .* got "one"'),
    ('{"ctx": "a", "endings": ["b", "c"], "label": true}', "line 2: label .* got true"),
    ('{"ctx": "a", "endings": ["b"], "label": 0}', "line 2: endings must be a list of two"),
    ('{"ctx": 3, "endings": ["b", "c"], "label": 0}', "line 2: ctx must be a text, got 3"),
    # an empty ending or context has no token to score: its loss 0 (or NaN) would win
    ('{"ctx": "a", "endings": ["b", ""], "label": 0}', "line 2: ending 1 is empty"),
    ('{"ctx": "a", "endings": [" ", "c"], "label": 0}', "line 2: ending 0 is empty"),
    ('{"ctx": "", "endings": ["b", "c"], "label": 0}', "line 2: ctx is empty"),
])
def test_bad_choices_lines_are_named(tmp_path, line, fragment):
    bad = tmp_path / "c.jsonl"
    bad.write_text(EXAMPLES.read_text().splitlines()[0] + "\n" + line + "\n")
    with pytest.raises(DataError, match=fragment):
        choices.read_examples(bad)
    # the command names the same fault, with the file, before it looks for the checkpoint
    r = CliRunner().invoke(main, ["eval", "--checkpoint", str(tmp_path / "none"),
                                  "--choices", str(bad)])
    line = assert_one_line_error(r, f"choices file {str(bad)!r} line 2")
    assert re.search(fragment, line), (fragment, line)


def test_string_labels_of_hugging_faces_hellaswag_are_read(tmp_path):
    """datasets' HellaSwag has "label": "1"; a string of digits is that index."""
    rows = [json.loads(ln) for ln in EXAMPLES.read_text().splitlines()]
    f = tmp_path / "hf.jsonl"
    f.write_text("".join(json.dumps({**r, "label": str(r["label"])}) + "\n" for r in rows))
    assert [e.label for e in choices.read_examples(f)] == [r["label"] for r in rows]


def tiny_text_model(tmp_path, block_size: int):
    """A one-step GPT-2 of the characters of a short text, saved as tmp_path/m.safetensors;
    returns the text's path."""
    text = tmp_path / "t.txt"
    text.write_text("the cat sat on the mat. a dog ran.\n" * 40)
    r = CliRunner().invoke(main, ["train", "--arch", "gpt2", "--data", str(text), "--steps", "1",
                                  "--n-embd", "8", "--n-head", "2", "--n-layer", "1",
                                  "--block-size", str(block_size), "--batch-size", "2",
                                  "--samples", "0", "--out", str(tmp_path / "m.safetensors"),
                                  "--quiet"])
    assert r.exit_code == 0, r.output
    return text


def test_eval_checks_every_example_before_scoring(tmp_path):
    """A character the model's vocabulary lacks, in the third example, is named with the
    file and the example, before the backend starts (as train --eval-choices)."""
    tiny_text_model(tmp_path, 32)
    good = {"ctx": "the cat", "endings": ["sat", "ran"], "label": 0}
    f = tmp_path / "c.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in
                           [good, good, {**good, "endings": ["sat", "jumped"]}]) + "\n")
    r = CliRunner().invoke(main, ["eval", "--checkpoint", str(tmp_path / "m.safetensors"),
                                  "--choices", str(f), "--backend", "c"])
    line = assert_one_line_error(r, f"--choices {str(f)!r}, example 3", "ending 1",
                                 "'j'")
    assert "a choices" not in line


def test_train_eval_choices_scores_each_evaluation(tmp_path):
    """`train --eval-choices FILE` (issue 30): each evaluation line, the CSV and the
    checkpoint carry acc and acc_norm, the last ones equal `eval --choices` on the saved
    model, and a resumed run keeps scoring the same file (the checkpoint names it)."""
    from conftest import DATA_DIR
    from microgpt_fut.training import checkpoint as ckpt

    out = tmp_path / "m.safetensors"
    args = ["train", "--arch", "gpt2", "--data-format", "text", "--data",
            str(DATA_DIR / "tinyshakespeare.txt"), "--steps", "6", "--batch-size", "2",
            "--n-embd", "16", "--n-head", "2", "--n-layer", "1", "--block-size", "128",
            "--eval-every", "3", "--eval-iters", "1", "--samples", "0"]
    r = CliRunner().invoke(main, [*args, "--eval-choices", str(EXAMPLES), "--out", str(out)])
    assert r.exit_code == 0, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("step ") and "acc_norm" in ln]
    assert [ln.split(":")[0] for ln in lines] == ["step 0", "step 3", "step 6"]
    ck = ckpt.load(out)
    assert [len(e) for e in ck.evals] == [5, 5, 5]
    assert ck.train["eval_choices"] == str(EXAMPLES.resolve())
    header = out.with_suffix(".losses.csv").read_text().splitlines()[0]
    assert header.endswith("eval_acc,eval_acc_norm")
    r = CliRunner().invoke(main, ["eval", "--checkpoint", str(out), "--choices", str(EXAMPLES)])
    assert r.exit_code == 0, r.output
    assert f"acc {ck.evals[-1][3]:.4f}, acc_norm {ck.evals[-1][4]:.4f}" in r.stdout
    # interrupted after step 3 (saved then), resumed without --eval-choices: the resumed
    # run scores the file its checkpoint names, with the same scores as the run above
    part = tmp_path / "p.safetensors"
    with pytest.MonkeyPatch.context() as m:
        sigint_at_step(m, GPT2Model, 3)
        r = CliRunner().invoke(main, [*args, "--eval-choices", str(EXAMPLES), "--out", str(part)])
    assert r.exit_code == 130, r.output
    first = ckpt.load(part)
    assert first.step == 3 and first.evals == ck.evals[:1]  # saved before step 3's evaluation
    r = CliRunner().invoke(main, ["train", "--resume", str(part), "--data",
                                  str(DATA_DIR / "tinyshakespeare.txt"), "--samples", "0"])
    assert r.exit_code == 0, r.output
    resumed = ckpt.load(part)
    assert resumed.step == 6 and resumed.evals == ck.evals


def test_train_eval_choices_is_refused_where_it_cannot_score(tmp_path):
    from conftest import DATA_DIR

    text = DATA_DIR / "tinyshakespeare.txt"
    common = ["train", "--arch", "gpt2", "--data-format", "text", "--data", str(text),
              "--steps", "2", "--n-embd", "16", "--n-head", "2", "--n-layer", "1",
              "--eval-choices", str(EXAMPLES)]
    r = CliRunner().invoke(main, [*common, "--block-size", "16"])
    assert_one_line_error(r, "--eval-choices", "example 1", "block_size 16")
    short = tmp_path / "t.txt"  # a character vocabulary without 'J'
    short.write_text(text.read_text()[:5000])
    r = CliRunner().invoke(main, [*common, "--block-size", "128", "--data", str(short)])
    assert_one_line_error(r, "--eval-choices", "example 1", "not in the model's vocabulary")
    r = CliRunner().invoke(main, ["train", "--data-format", "lines", "--eval-choices",
                                  str(EXAMPLES), "--steps", "2"])
    assert_one_line_error(r, "--eval-choices applies to --data-format text")


def test_a_bom_is_read_and_a_long_example_names_the_fix(tmp_path):
    """A jsonl saved with a UTF-8 byte-order mark (as Windows editors do) is read as
    without it; an example longer than the model's context names the fix, before the
    backend starts."""
    rows = EXAMPLES.read_text(encoding="utf-8")
    f = tmp_path / "bom.jsonl"
    f.write_bytes(b"\xef\xbb\xbf" + rows.encode("utf-8"))
    want = [json.loads(ln)["label"] for ln in rows.splitlines() if ln.strip()]
    assert [e.label for e in choices.read_examples(f)] == want
    text = tiny_text_model(tmp_path, 16)
    long = tmp_path / "long.jsonl"
    long.write_bytes(b"\xef\xbb\xbf" + json.dumps(
        {"ctx": "the cat sat on the mat. " * 3, "endings": ["a dog", "the mat"], "label": 0}
    ).encode("utf-8") + b"\n")
    r = CliRunner().invoke(main, ["eval", "--checkpoint", str(tmp_path / "m.safetensors"),
                                  "--choices", str(long), "--backend", "c"])
    assert_one_line_error(r, "example 1", "block_size 16", "shorten")
    assert r.exit_code == 2  # the file and the model cannot go together: a usage error
    r = CliRunner().invoke(main, ["train", "--arch", "gpt2", "--data", str(text), "--steps", "1",
                                  "--n-embd", "8", "--n-head", "2", "--n-layer", "1",
                                  "--block-size", "16", "--batch-size", "2", "--samples", "0",
                                  "--eval-choices", str(long), "--overwrite",
                                  "--out", str(tmp_path / "m.safetensors"), "--quiet"])
    assert_one_line_error(r, "--eval-choices", "example 1", "block_size 16", "shorten")
    assert r.exit_code == 2
