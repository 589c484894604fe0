"""The command line of Hugging Face GPT-2 folders and BPE: `sample --checkpoint DIR`,
`train --init-from DIR`, `train --tokenizer bpe --vocab-size N`, `export-hf`, and
the one-line refusals around them. The library underneath is tested against
transformers in test_hf.py; here every check compares with transformers or with
our own earlier outputs through another path."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from cli_helpers import assert_one_line_error, need_backend, sigint_at_step, small_data
from conftest import backend_params, get_runtime
from hf_helpers import SHAKESPEARE, need, random_hf_model, save_hf_folder, shakespeare, small_bpe
from microgpt_fut.training import checkpoint as ckpt
from microgpt_fut.cli.commands import main
from microgpt_fut.models.gpt2 import GPT2Model

SIZES = ["--n-embd", "32", "--n-layer", "2", "--n-head", "2", "--block-size", "32"]


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "shakespeare_40k.txt"
    path.write_text(shakespeare()[:40000], encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def bpe_run(text_file, tmp_path_factory):
    """A 30-step text run with a 300-id byte-level BPE trained by --tokenizer bpe."""
    need_backend("c")
    out = tmp_path_factory.mktemp("bpe") / "bpe.safetensors"
    r = run("train", "--arch", "gpt2", "--data-format", "text", "--data", text_file, *SIZES,
            "--tokenizer", "bpe", "--vocab-size", 300, "--batch-size", 4, "--steps", 30,
            "--eval-every", 10, "--eval-iters", 2, "--samples", 0, "--out", out)
    assert r.exit_code == 0, r.output
    assert "vocab size 300 (byte-level BPE)" in r.output
    return out


def test_bpe_run_exports_to_a_folder_transformers_loads_with_our_logits(bpe_run, tmp_path):
    torch, transformers = need("torch"), need("transformers")
    ck = ckpt.load(bpe_run)
    tok = ck.text_tokenizer()
    assert tok.size == 300 and ck.config.vocab_size == 300 and ck.vocab == []
    # the BPE was trained on the training split: its merges encode the text compactly
    ids = tok.encode(SHAKESPEARE.read_text(encoding="utf-8")[:2000], "text")
    assert len(ids) < 2000 * 0.75
    folder = tmp_path / "hf"
    r = run("export-hf", bpe_run, folder)
    assert r.exit_code == 0 and f"wrote {folder}" in r.output
    model = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
    auto = transformers.AutoTokenizer.from_pretrained(folder)
    prompt = "ROMEO:\nWhat light through yonder"
    ours_ids = tok.encode(prompt, "prompt")
    assert auto(prompt)["input_ids"] == ours_ids.tolist()
    ours = GPT2Model.from_arrays(get_runtime("c", "gpt2"), ck.config, ck.params).logits_seq(
        ours_ids[None])
    with torch.no_grad():
        theirs = model(torch.tensor(ours_ids[None])).logits.numpy()
    assert np.abs(ours - theirs).max() <= 1e-4 * np.abs(theirs).max()
    again = run("export-hf", bpe_run, folder)
    assert_one_line_error(again, "exists and is not empty")
    assert run("export-hf", bpe_run, folder, "--overwrite").exit_code == 0


def test_an_empty_prompt_starts_from_endoftext(bpe_run):
    """--prompt "" continues GPT-2's <|endoftext|> (nanoGPT's and transformers' start of
    text) and prints only the new text: what the prompt "<|endoftext|>" (that token)
    prints after it, greedily. It used to be refused for every model."""
    def greedy(prompt):
        r = run("sample", "--checkpoint", bpe_run, "--prompt", prompt, "--temperature", 0,
                "--max-new-tokens", 12, "--plain")
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    assert "<|endoftext|>" + greedy("") == greedy("<|endoftext|>")
    assert len(greedy("")) > 0


def test_bpe_run_resumes_bit_for_bit(bpe_run, text_file, tmp_path, monkeypatch):
    """A real SIGINT after the call ending at step 20 saves; `train --resume` (which
    reads the BPE back from the checkpoint) then ends with the straight run's bits."""
    part = tmp_path / "part.safetensors"
    with monkeypatch.context() as m:
        sigint_at_step(m, GPT2Model, 20)
        r = run("train", "--arch", "gpt2", "--data-format", "text", "--data", text_file,
                *SIZES, "--tokenizer", "bpe", "--vocab-size", 300, "--batch-size", 4,
                "--steps", 30, "--eval-every", 10, "--eval-iters", 2, "--samples", 0,
                "--out", part)
    assert r.exit_code == 130 and ckpt.load(part).step == 20, r.output
    r = run("train", "--resume", part, "--tokenizer", "char")
    assert r.exit_code == 2
    assert_one_line_error(r, "--tokenizer conflicts with --resume")
    assert run("train", "--resume", part, "--samples", 0).exit_code == 0
    a, b = ckpt.load(part), ckpt.load(bpe_run)
    for k in b.params:
        np.testing.assert_array_equal(a.params[k], b.params[k])
    np.testing.assert_array_equal(a.losses, b.losses)
    assert a.evals == b.evals and a.text_tokenizer() == b.text_tokenizer()


@pytest.mark.parametrize("backend", backend_params("gpt2"))
def test_sample_a_hf_folder_equals_transformers_generate(tmp_path, backend):
    """Greedy continuations of two prompts of different lengths, given together, are
    the tokens of transformers' generate(do_sample=False), decoded, on every backend."""
    torch = need("torch")
    tok = small_bpe()
    model = random_hf_model(tok.size)
    folder = save_hf_folder(tmp_path / "hf", model, tok)
    prompts = ["ROMEO:", "To be, or not to be"]
    r = run("sample", "--checkpoint", folder, "--prompt", prompts[0], "--prompt", prompts[1],
            "--max-new-tokens", 12, "--temperature", 0, "--plain", "--backend", backend)
    assert r.exit_code == 0, r.output
    got = [json.loads(line) for line in r.stdout.splitlines()]
    for prompt, text in zip(prompts, got):
        ids = tok.encode(prompt, "prompt")
        with torch.no_grad():
            out = model.generate(torch.tensor(ids[None]), max_new_tokens=12, do_sample=False,
                                 pad_token_id=0)[0, len(ids):].numpy()
        assert text == reference_decode(tok, [*ids, *out])


def reference_decode(tok, ids) -> str:
    """GPT-2's own decode (tests/reference_bpe.py) of ids, from tok's vocab.json and
    merges.txt."""
    import tempfile
    from pathlib import Path

    from reference_bpe import ReferenceBPE

    vocab, merges = tok.vocab_merges()
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "vocab.json").write_text(vocab, encoding="utf-8")
        (Path(d) / "merges.txt").write_text(merges, encoding="utf-8")
        return ReferenceBPE(Path(d) / "vocab.json", Path(d) / "merges.txt").decode(ids)


def test_sample_prints_the_decoded_tail_of_an_incomplete_character(tmp_path):
    """Greedy `sample --plain` of a byte-level BPE model, prompt "Café 🎉", as many new
    tokens as end inside a character: the text is the decode of all the ids, U+FFFD
    included, as transformers' generate + decode gives (it used to print the prompt
    alone, holding the incomplete tail back)."""
    torch = need("torch")
    need_backend("c")
    tok = small_bpe()
    model = random_hf_model(tok.size, seed=3)  # its tokens are mostly lone bytes (>= 0x80)
    folder = save_hf_folder(tmp_path / "hf", model, tok)
    prompt = "Café 🎉"
    ids = tok.encode(prompt, "prompt")
    with torch.no_grad():
        new = model.generate(torch.tensor(ids[None]), max_new_tokens=20, do_sample=False,
                             pad_token_id=0)[0, len(ids):].numpy()
    texts = [reference_decode(tok, [*ids, *new[:k]]) for k in range(len(new) + 1)]
    cut = [k for k, t in enumerate(texts) if t.endswith("\ufffd")]
    assert cut, "the model's continuation never ends inside a character: pick another seed"
    for k in (cut[0], cut[-1], len(new)):
        r = run("sample", "--checkpoint", folder, "--prompt", prompt, "--max-new-tokens", k,
                "--temperature", 0, "--plain")
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout) == texts[k]


def test_init_from_a_hf_folder_fine_tunes(tmp_path, text_file):
    """From a random GPT-2 folder with a cropped context (--block-size 16 of its 32
    positions): the evaluations' val loss falls over the run, and the checkpoint
    keeps the folder's tokenizer and weights' shapes."""
    need_backend("c")
    tok = small_bpe()
    folder = save_hf_folder(tmp_path / "hf", random_hf_model(tok.size), tok)
    out = tmp_path / "ft.safetensors"
    r = run("train", "--init-from", folder, "--data", text_file, "--block-size", 16,
            "--batch-size", 8, "--steps", 40, "--lr", 3e-3, "--eval-every", 20,
            "--eval-iters", 4, "--samples", 0, "--out", out)
    assert r.exit_code == 0, r.output
    assert f"starting from the weights of {str(folder)!r}" in r.output
    ck = ckpt.load(out)
    assert ck.config.block_size == 16 and ck.params["wpe"].shape == (16, 32)
    assert ck.text_tokenizer() == tok and ck.train["init_from"] == str(folder.resolve())
    (s0, _, v0), *_, (s1, _, v1) = ck.evals
    assert (s0, s1) == (0, 40) and v1 < v0


@pytest.mark.parametrize("args, fragment", [
    (["--tokenizer", "bpe"], "--tokenizer bpe needs --vocab-size"),
    (["--vocab-size", "300"], "--vocab-size applies to --tokenizer bpe"),
    (["--tokenizer", "bpe", "--vocab-size", "100"], "257"),
    (["--tokenizer", "nope/tokenizer.json"], "does not exist"),
])
def test_tokenizer_option_errors(text_file, tmp_path, args, fragment):
    r = run("train", "--arch", "gpt2", "--data-format", "text", "--data", text_file, *SIZES,
            "--steps", 2, "--out", tmp_path / "x.safetensors", *args)
    assert_one_line_error(r, fragment)
    assert not (tmp_path / "x.safetensors").exists()


def test_a_prompt_longer_than_the_context_gets_a_note(bpe_run):
    long = "O Romeo, Romeo! wherefore art thou Romeo? " * 4
    r = run("sample", "--checkpoint", bpe_run, "--prompt", long, "--max-new-tokens", 3)
    assert r.exit_code == 0, r.output
    assert r.stderr.startswith("note: --prompt 'O Romeo, Romeo! wherefore art ...' has ")
    assert "more than the model's context of 32: it sees the last 32" in r.stderr


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    """A random GPT-2 folder with the small BPE's tokenizer."""
    need("torch")
    tok = small_bpe()
    return save_hf_folder(tmp_path_factory.mktemp("hf") / "gpt2", random_hf_model(tok.size), tok)


def test_a_gpt2_folder_on_lines_says_why_and_reads_them_as_text(hf_folder, tmp_path):
    """An exported GPT-2 onto a list of names: --data-format lines is refused in one line
    saying why (lines take a character model's last token as BOS; a byte-level BPE is
    not one) and how (leave it out); left out, the names train as a text."""
    names = small_data(tmp_path, 200)
    out = tmp_path / "x.safetensors"
    r = run("train", "--init-from", hf_folder, "--data-format", "lines", "--data", names,
            "--out", out)
    assert_one_line_error(r, "--data-format lines conflicts with", str(hf_folder),
                          "byte-level BPE", "leave --data-format out")
    assert r.exit_code == 2 and not out.exists()
    r = run("train", "--init-from", hf_folder, "--data", names, "--block-size", 16, "--steps", 1,
            "--eval-iters", 1, "--samples", 0, "--out", out)
    assert r.exit_code == 0, r.output
    assert ckpt.load(out).data_format == "text"


def test_messages_name_what_was_given_and_the_fix(hf_folder, bpe_run, text_file, tmp_path):
    """Each refusal names the option the user gave and the one that fixes it (they used
    to blame --data-format text or a directory, and not name --init-from or
    --overwrite)."""
    out = tmp_path / "x.safetensors"
    r = run("train", "--arch", "microgpt", "--init-from", hf_folder, "--data", text_file,
            "--out", out)
    line = assert_one_line_error(r, "--arch microgpt conflicts with --init-from",
                                 str(hf_folder), "leave --arch out")
    assert "--data-format" not in line and r.exit_code == 2
    r = run("train", "--resume", hf_folder, "--out", out)
    assert_one_line_error(r, f"--resume {str(hf_folder)!r} is a Hugging Face model folder",
                          f"--init-from {hf_folder}")
    bare = tmp_path / "weights_only"
    bare.mkdir()
    (bare / "model.safetensors").write_bytes((hf_folder / "model.safetensors").read_bytes())
    for args in (["sample", "--checkpoint", bare], ["train", "--init-from", bare, "--data",
                                                    text_file, "--out", out]):
        line = assert_one_line_error(run(*args), str(bare), "without config.json",
                                     "nor a Hugging Face model folder")
        assert "directory" not in line
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    r = run("export-hf", bpe_run, full)
    assert_one_line_error(r, str(full), "not empty", "--overwrite")
    assert [p.name for p in full.iterdir()] == ["keep.txt"] and not out.exists()
