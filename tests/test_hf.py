"""Hugging Face GPT-2 folders (driver/microgpt_fut/hf.py) against transformers itself.

A randomly initialised small ``GPT2LMHeadModel`` (n_embd 32, 2 layers, 2 heads, 32
positions) with a byte-level BPE of 320 ids trained on Shakespeare is saved with
``save_pretrained``; loaded here, every backend's logits, loss, gradient and greedy
continuations are compared with transformers' and PyTorch's. Our trained
checkpoints exported to a folder load in transformers with the same logits, and
their tokenizer in ``AutoTokenizer`` with the same ids. Every refusal is one line.
Tests that take ``gpt2_rt`` run on each backend with GPT-2's library (conftest.py).
"""
from __future__ import annotations

import copy
import json
import shutil
import time

import numpy as np
import pytest

from conftest import get_runtime
from cli_helpers import load_under_optimize
from hf_helpers import need, random_hf_model, save_hf_folder, shakespeare, small_bpe
from microgpt_fut.errors import CheckpointError, HFError
from microgpt_fut.training import checkpoint as ckpt
from microgpt_fut.training import hf
from microgpt_fut.models.gpt2 import GPT2Config, GPT2Model
from microgpt_fut.training.optimizer import Recipe
from microgpt_fut.data.tokenizer import CharVocab

torch = need("torch")
transformers = need("transformers")

T = 32          # n_positions of the small model
RTOL = 1e-4     # the bound: max |ours - theirs| / max |theirs|


def rel(ours, theirs) -> float:
    """The largest difference relative to the largest reference value."""
    theirs = np.asarray(theirs, np.float64)
    return float(np.abs(np.asarray(ours, np.float64) - theirs).max() / np.abs(theirs).max())


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """(folder, the transformers model, the tokenizer) of the small random GPT-2."""
    tok = small_bpe()
    model = random_hf_model(tok.size, n_positions=T)
    folder = save_hf_folder(tmp_path_factory.mktemp("hf") / "small", model, tok)
    return folder, model, tok


def _theirs(model, ids) -> np.ndarray:
    with torch.no_grad():
        return model(torch.as_tensor(np.asarray(ids, np.int64))).logits.numpy()


def _ours(rt, folder) -> GPT2Model:
    config, params, _ = hf.load_folder(folder)
    return GPT2Model.from_arrays(rt, config, params)


def _prompts(tok, n: int = 4) -> list[np.ndarray]:
    """n prompts of different lengths (4 .. 16 tokens) from Shakespeare."""
    ids = tok.encode(shakespeare()[:3000], "t")
    return [ids[100 * i: 100 * i + 4 + 4 * i] for i in range(n)]


# --------------------------------------------------------------------------- loading
def test_load_folder_reads_config_tensors_and_tokenizer(small):
    folder, model, tok = small
    config, params, got_tok = hf.load_folder(folder)
    assert config == GPT2Config(vocab_size=tok.size, n_embd=32, n_head=2, n_layer=2,
                                block_size=T, mlp_width=128, bias=True)
    assert got_tok == tok
    theirs = {k.removeprefix("transformer."): v.numpy() for k, v in model.state_dict().items()
              if k != "lm_head.weight"}
    ours = config.to_file(params)
    assert sorted(ours) == sorted(theirs)
    for k in ours:
        np.testing.assert_array_equal(ours[k], theirs[k], err_msg=k)
    ck = hf.load_checkpoint(folder)
    assert ck.data_format == "text" and ck.step == 0 and ck.tokenizer == tok and ck.vocab == []
    assert hf.is_folder(folder) and not hf.is_folder(folder / "config.json")


def test_logits_match_transformers(small, gpt2_rt):
    """A batch of windows (training path), prompts of several lengths, and the KV-cache
    path, each within 1e-4 of transformers' logits (relative to the largest)."""
    folder, model, tok = small
    ours = _ours(gpt2_rt, folder)
    ids = tok.encode(shakespeare()[:5000], "t")
    batch = np.stack([ids[s:s + T] for s in (0, 301, 777, 1200)])
    assert rel(ours.logits_seq(batch), _theirs(model, batch)) < RTOL
    for p in _prompts(tok):
        assert rel(ours.logits_seq(p[None]), _theirs(model, p[None])) < RTOL, len(p)
    assert rel(ours.logits_cached(batch[1]), _theirs(model, batch[1:2])[0]) < RTOL


def test_loss_and_gradient_match_pytorch(small, gpt2_rt):
    """The mean cross-entropy of a batch of windows and its gradient with respect to
    every tensor (the tied wte collecting the head's part), against PyTorch's autograd."""
    folder, model, tok = small
    ours = _ours(gpt2_rt, folder)
    ids = tok.encode(shakespeare()[:5000], "t")
    w = np.stack([ids[s:s + T + 1] for s in (5, 400, 900)])
    loss, grad = ours.loss_grad(w)
    model.zero_grad()
    x = torch.as_tensor(w)
    logits = model(x[:, :-1]).logits
    ref = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                            x[:, 1:].reshape(-1))
    ref.backward()
    assert loss == pytest.approx(ref.item(), rel=1e-5)
    got = ours.config.to_file(grad)
    for name, p in model.named_parameters():
        short = name.removeprefix("transformer.")
        expected = p.grad.numpy()
        scale = np.abs(expected).max()
        assert scale > 0, name
        assert np.abs(got[short] - expected).max() <= 1e-4 * scale, name
    model.zero_grad()


def _hf_greedy(model, prompt, max_new: int) -> list[int]:
    out = model.generate(torch.as_tensor(prompt[None]), attention_mask=torch.ones(1, len(prompt),
                         dtype=torch.long), max_new_tokens=max_new, do_sample=False,
                         pad_token_id=0)
    return out[0, len(prompt):].tolist()


def test_greedy_continuation_matches_transformers_generate(small, gpt2_rt):
    """Greedy continuations of prompts of different lengths, decoded as one batch with
    the KV cache, equal model.generate(do_sample=False) token for token; so does the
    single-prompt entry."""
    folder, model, tok = small
    ours = _ours(gpt2_rt, folder)
    prompts = _prompts(tok)
    max_new = T - max(len(p) for p in prompts)  # transformers stops at n_positions
    got = ours.generate_prompts(seed=0, temperature=0.0, top_k=0, prompts=prompts,
                                max_new=max_new)
    assert got.shape == (len(prompts), max_new)
    for p, row in zip(prompts, got):
        assert row.tolist() == _hf_greedy(model, p, max_new), len(p)
    one = ours.generate_prompts(0, 0.0, 0, [prompts[1]], max_new)
    assert one[0].tolist() == got[1].tolist()


def test_batched_prompts_past_the_context(small, gpt2_rt):
    """Past n_positions the model sees the last 32 tokens (nanoGPT's crop): greedy
    continuations of a batch crossing the context, and a prompt longer than it, equal
    argmax of transformers' logits of the cropped sequence, step by step."""
    folder, model, tok = small
    ours = _ours(gpt2_rt, folder)
    ids = tok.encode(shakespeare()[:3000], "t")
    prompts = [ids[:3], ids[50:70], ids[200:245]]  # 45 tokens: longer than the context
    got = ours.generate_prompts(0, 0.0, 0, prompts, 20)
    for p, row in zip(prompts, got):
        seq = list(p)
        for _ in range(20):
            seq.append(int(np.argmax(_theirs(model, [seq[-T:]])[0, -1])))
        assert row.tolist() == seq[len(p):], len(p)
    cropped = ours.generate_prompts(0, 0.0, 0, [prompts[2][-T:]], 20)
    assert cropped[0].tolist() == got[2].tolist()


def test_sampled_rows_equal_single_prompt_samples(small, gpt2_rt):
    """Row i of a sampled batch (temperature, top-k) is sample first+i of its prompt
    alone: the batch changes nothing but the speed."""
    folder, _, tok = small
    ours = _ours(gpt2_rt, folder)
    prompts = _prompts(tok)
    for temperature, top_k in ((1.0, 0), (0.8, 5)):
        got = ours.generate_prompts(7, temperature, top_k, prompts, 12, first=3)
        for i, p in enumerate(prompts):
            alone = ours.generate_prompts(7, temperature, top_k, [p], 12, first=3 + i)
            assert got[i].tolist() == alone[0].tolist(), (temperature, i)
    assert len({tuple(r) for r in ours.generate_prompts(7, 1.0, 0, [prompts[0]] * 6, 12)}) > 1
    assert ours.generate_prompts(7, 1.0, 0, prompts, 0).shape == (4, 0)
    with pytest.raises(ValueError):
        ours.generate_prompts(7, 1.0, 0, [prompts[0], []], 3)


# --------------------------------------------------------------------------- export
def _trained_checkpoint(tok, bias: bool) -> ckpt.Checkpoint:
    """A small GPT-2 of ours after 3 recipe steps on Shakespeare windows (c backend)."""
    rt = get_runtime("c", "gpt2")
    config = GPT2Config(vocab_size=tok.size, n_embd=32, n_head=4, n_layer=2, block_size=16,
                        bias=bias)
    model = GPT2Model.init(rt, config, seed=5)
    ids = tok.encode(shakespeare()[:20000], "t")
    starts = np.random.default_rng(0).integers(0, len(ids) - 17, size=(3, 1, 8))
    model.train(ids[starts[..., None] + np.arange(17)], None, Recipe(lr=1e-2, warmup_steps=0,
                                                                     lr_decay_steps=3))
    m, v = model.adam()
    vocab = list(tok.chars) if isinstance(tok, CharVocab) else []
    return ckpt.Checkpoint(config, vocab, model.params(), m, v, model.step(),
                           data_format="text", tokenizer=tok)


@pytest.mark.parametrize("kind,bias", [("bpe", True), ("bpe", False), ("char", False)])
def test_export_loads_in_transformers_with_our_logits(tmp_path, kind, bias):
    """export_folder of our checkpoint: from_pretrained gives our logits, AutoTokenizer our
    ids and text, and load_folder gives back the weights (zero biases for a no-bias
    model) and the tokenizer."""
    tok = small_bpe() if kind == "bpe" else CharVocab.from_text(shakespeare())
    ck = _trained_checkpoint(tok, bias)
    folder = tmp_path / "export"
    names = hf.export_folder(ck, folder)
    assert sorted(p.name for p in folder.iterdir()) == sorted(names)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left
    theirs = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
    text = "ROMEO:\nWhat say'st thou?"
    ids = tok.encode(text, "t")
    ours = GPT2Model.from_arrays(get_runtime("c", "gpt2"), ck.config, ck.params)
    assert rel(ours.logits_seq(ids[None, :16]), _theirs(theirs, ids[None, :16])) < RTOL
    auto = transformers.AutoTokenizer.from_pretrained(folder)
    assert auto(text)["input_ids"] == ids.tolist()
    assert auto.decode(ids.tolist()) == text
    config, params, back_tok = hf.load_folder(folder)
    assert back_tok == tok
    assert config == GPT2Config(**{**ck.config.to_dict(), "bias": True})
    for k, a in params.items():
        np.testing.assert_array_equal(a, ck.params[k] if bias or not k.endswith("_b")
                                      else np.zeros_like(ck.params[k]), err_msg=k)
    meta = json.loads((folder / "config.json").read_text())
    assert meta["n_positions"] == 16 and meta["activation_function"] == "gelu_new"
    assert meta["eos_token_id"] == (tok.size - 1 if kind == "bpe" else None)
    if kind == "bpe":  # GPT-2's pair of files too, which give the same tokenizer
        assert {"vocab.json", "merges.txt"} <= set(names)
        (folder / "tokenizer.json").unlink()
        assert hf.read_tokenizer(folder).encode(text, "t").tolist() == ids.tolist()


def test_export_refusals_and_overwrite(tmp_path):
    tok = small_bpe()
    ck = _trained_checkpoint(tok, True)
    folder = tmp_path / "out"
    folder.mkdir()  # an empty folder is fine
    hf.export_folder(ck, folder)
    with pytest.raises(HFError) as e:
        hf.export_folder(ck, folder)
    assert "not empty" in _one_line(e) and str(folder) in str(e.value)
    assert {"vocab.json", "merges.txt"} <= {p.name for p in folder.iterdir()}
    # --overwrite replaces the export's files only: the user's files and folders stay
    (folder / "extra.txt").write_text("old")
    (folder / "runs").mkdir()
    (folder / "runs" / "log.txt").write_text("keep")
    (folder / "generation_config.json").write_text("{}")  # transformers' save_pretrained's
    chars = CharVocab.from_text(shakespeare()[:20000])
    hf.export_folder(_trained_checkpoint(chars, True), folder, overwrite=True)
    assert (folder / "extra.txt").read_text() == "old"
    assert (folder / "runs" / "log.txt").read_text() == "keep"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["extra.txt", "runs", "config.json", "model.safetensors", "tokenizer.json",
         "tokenizer_config.json"])  # the BPE's vocab.json and merges.txt are gone
    from tokenizers import Tokenizer

    text = shakespeare()[:300]
    assert Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text).ids == \
        [chars.chars.index(c) for c in text]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(HFError) as e:
        hf.export_folder(ck, tmp_path / "file")
    assert "is a file" in _one_line(e)
    from microgpt_fut.models.microgpt import MicrogptConfig

    cfg = MicrogptConfig(vocab_size=3)
    micro = ckpt.Checkpoint(cfg, ["a", "b"], {n: np.zeros(s, np.float32)
                                               for n, s in cfg.shapes().items()})
    from microgpt_fut.errors import OptionConflict

    with pytest.raises(OptionConflict) as e:  # the argument, not a file: a usage error
        hf.export_folder(micro, tmp_path / "m")
    assert "microgpt" in _one_line(e) and not (tmp_path / "m").exists()


# --------------------------------------------------------------------------- refusals
def _one_line(exc_info) -> str:
    msg = str(exc_info.value)
    assert msg and "\n" not in msg and msg.strip() == msg
    return msg


def _copy(small, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(small[0], folder)
    return folder


def _edit_config(folder, **changes):
    path = folder / "config.json"
    cfg = json.loads(path.read_text())
    cfg.update(changes)
    path.write_text(json.dumps(cfg))


def _edit_tensors(folder, fn):
    from safetensors.numpy import load_file, save_file

    path = folder / "model.safetensors"
    tensors = load_file(path)
    save_file(fn(dict(tensors)), path, metadata={"format": "pt"})


def _drop(name):
    def fn(t):
        del t[name]
        return t
    return fn


def _set(name, value):
    def fn(t):
        t[name] = value(t) if callable(value) else value
        return t
    return fn


W = "transformer.wpe.weight"
REFUSALS = {
    "activation": (lambda f: _edit_config(f, activation_function="relu"), "activation_function"),
    "gelu_erf": (lambda f: _edit_config(f, activation_function="gelu"),
                 '\'activation_function\' "gelu" is not supported'),
    "epsilon": (lambda f: _edit_config(f, layer_norm_epsilon=1e-6), "layer_norm_epsilon"),
    "model_type": (lambda f: _edit_config(f, model_type="gpt_neo"),
                   "'model_type' is \"gpt_neo\""),
    "size_null": (lambda f: _edit_config(f, n_embd=None), "'n_embd' must be a positive "
                                                          "integer, got null"),
    # config.json's own JSON values in the message (true, false), not Python's
    "inverse_layer_scale": (lambda f: _edit_config(f, scale_attn_by_inverse_layer_idx=True),
                            "'scale_attn_by_inverse_layer_idx' true is not supported"),
    "unscaled_attention": (lambda f: _edit_config(f, scale_attn_weights=False),
                           "'scale_attn_weights' false is not supported (the kernels' "
                           "attention needs true)"),
    "cross_attention": (lambda f: _edit_config(f, add_cross_attention=True),
                        "'add_cross_attention' true is not supported"),
    "heads": (lambda f: _edit_config(f, n_head=3), "n_head"),
    "size": (lambda f: _edit_config(f, n_layer=0), "n_layer"),
    "missing_tensor": (lambda f: _edit_tensors(f, _drop("transformer.h.1.mlp.c_fc.bias")),
                       "h.1.mlp.c_fc.bias"),
    "wrong_shape": (lambda f: _edit_tensors(f, _set(W, lambda t: t[W][:16].copy())), W),
    "unexpected": (lambda f: _edit_tensors(f, _set("transformer.h.0.crossattention.q_attn.weight",
                                                   np.zeros((32, 32), np.float32))),
                   "crossattention"),
    "untied_head": (lambda f: _edit_tensors(f, _set("lm_head.weight", lambda t: t[
        "transformer.wte.weight"] + np.float32(0.01))), "lm_head.weight"),
    "untied_no_head": (lambda f: _edit_config(f, tie_word_embeddings=False), "tie_word_embeddings"),
    "integer_tensor": (lambda f: _edit_tensors(f, _set("transformer.ln_f.bias",
                                                       np.zeros(32, np.int32))), "ln_f.bias"),
    "no_weights": (lambda f: (f / "model.safetensors").rename(f / "pytorch_model.bin"),
                   "model.safetensors"),
    "no_tokenizer": (lambda f: (f / "tokenizer.json").unlink(), "tokenizer"),
    "tokenizer_too_big": (lambda f: _edit_config(f, vocab_size=100) or _edit_tensors(
        f, _set("transformer.wte.weight", lambda t: t["transformer.wte.weight"][:100].copy())),
        "vocab_size 100"),
    "truncated": (lambda f: (f / "model.safetensors").write_bytes(
        (f / "model.safetensors").read_bytes()[:5000]), "model.safetensors"),
    "no_config": (lambda f: (f / "config.json").unlink(), "config.json"),
    "nan_weight": (lambda f: _edit_tensors(f, _set("transformer.ln_f.weight", lambda t: np.full(
        32, np.nan, np.float32))), "'ln_f.weight' holds NaN"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refusals_are_one_line_naming_the_key(small, tmp_path, case):
    edit, named = REFUSALS[case]
    folder = _copy(small, tmp_path)
    edit(folder)
    with pytest.raises(HFError) as e:
        hf.load_folder(folder)
    msg = _one_line(e)
    assert str(folder) in msg and named in msg, msg
    assert isinstance(e.value, CheckpointError)  # the CLI's one-line errors


@pytest.mark.parametrize("edit, what", [
    (lambda f: (f / "config.json").write_text("[1, 2]"), "cannot read config.json: not a "
                                                        "JSON object"),
    (REFUSALS["truncated"][0], "model.safetensors is truncated or damaged at tensor"),
])
def test_refusals_hold_under_python_optimize(small, tmp_path, edit, what):
    """``python -O`` strips asserts: a config.json that is not an object, or tensors past
    the end of the file, are still refused in one line."""
    folder = _copy(small, tmp_path)
    edit(folder)
    line = load_under_optimize("microgpt_fut.training.hf.load_folder", folder)
    assert line.startswith(f"HFError: Hugging Face folder {str(folder)!r}: {what}"), line


def test_name_and_dtype_variants_load_the_same(small, tmp_path):
    """No ``transformer.`` prefix (OpenAI's GPT-2 on the Hub), a tied lm_head.weight
    written out, the old attn.bias / masked_bias buffers, shards with an index, float16
    and bfloat16 tensors, GPT-2's vocab.json + merges.txt instead of tokenizer.json."""
    folder, model, tok = small
    _, params, _ = hf.load_folder(folder)
    from safetensors.numpy import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    bare = _copy(small, tmp_path)
    t = {k.removeprefix("transformer."): a for k, a in tensors.items()}
    t["lm_head.weight"] = t["wte.weight"]
    t["h.0.attn.bias"] = np.tril(np.ones((1, 1, T, T), np.float32))
    t["h.0.attn.masked_bias"] = np.array(-1e4, np.float32)
    save_file(t, bare / "model.safetensors", metadata={"format": "pt"})
    vocab, merges = tok.vocab_merges()
    (bare / "tokenizer.json").unlink()
    (bare / "vocab.json").write_text(vocab, encoding="utf-8")
    (bare / "merges.txt").write_text(merges, encoding="utf-8")
    got = hf.load_folder(bare)
    assert got.tokenizer.encode("ROMEO: well", "t").tolist() == \
        tok.encode("ROMEO: well", "t").tolist()
    for k in params:
        np.testing.assert_array_equal(got.params[k], params[k], err_msg=k)
    sharded = tmp_path / "sharded"
    model.save_pretrained(sharded, max_shard_size="40KB")
    assert (sharded / "model.safetensors.index.json").is_file()
    shutil.copy(folder / "tokenizer.json", sharded)
    got = hf.load_folder(sharded)
    for k in params:
        np.testing.assert_array_equal(got.params[k], params[k], err_msg=k)
    for dtype in (torch.float16, torch.bfloat16):
        half = tmp_path / str(dtype)
        copy.deepcopy(model).to(dtype).save_pretrained(half)
        shutil.copy(folder / "tokenizer.json", half)
        got = hf.load_folder(half)
        for k in params:
            expected = torch.tensor(params[k]).to(dtype).to(torch.float32).numpy()
            np.testing.assert_array_equal(got.params[k], expected, err_msg=(dtype, k))


# --------------------------------------------------------------------------- GPT-2 small's shape
@pytest.mark.slow
def test_124m_shape_loads_and_greedy_samples_as_transformers(tmp_path):
    """A random GPT-2 of the 124M shape (n_embd 768, 12 layers, 12 heads, 1024 positions,
    vocab 50257; transformers' own initialisation) saved with save_pretrained: it loads
    on the c backend, its logits are transformers' to 1e-4, and greedy continuations of
    two prompts, decoded as one batch, are model.generate's token for token."""
    rt = get_runtime("c", "gpt2")
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config()).eval()
    model.save_pretrained(tmp_path)
    t0 = time.perf_counter()
    config, params, tok = hf.load_folder(tmp_path, require_tokenizer=False)
    assert tok is None and config.num_params() == 124_439_808
    ours = GPT2Model.from_arrays(rt, config, params)
    del params
    load_s = time.perf_counter() - t0
    rng = np.random.default_rng(1)
    prompts = [rng.integers(0, 50257, size=n) for n in (5, 9)]
    assert rel(ours.logits_seq(prompts[1][None]), _theirs(model, prompts[1][None])) < RTOL
    t0 = time.perf_counter()
    got = ours.generate_prompts(0, 0.0, 0, prompts, 6)
    ours_s = time.perf_counter() - t0
    for p, row in zip(prompts, got):
        assert row.tolist() == _hf_greedy(model, p, 6)
    print(f"124M: load {load_s:.1f} s, 2 prompts x 6 tokens in {ours_s:.1f} s")


def test_an_exported_character_tokenizer_encodes_unknown_characters(tmp_path):
    """A character vocabulary's tokenizer.json declares no unknown token that its vocab
    lacks: AutoTokenizer and tokenizers load it and encode a character outside the
    vocabulary without an error (it is left out: no id the model lacks), the known
    characters with our ids; load_folder gives back the CharVocab, and a tokenizer.json
    of the former kind (WordLevel, unk_token "<unk>" missing from its vocab) still
    loads as it."""
    from tokenizers import Tokenizer, models

    from microgpt_fut.data.tokenizer import load_tokenizer

    chars = CharVocab.from_text(shakespeare()[:20000])
    folder = tmp_path / "hf1"
    hf.export_folder(_trained_checkpoint(chars, False), folder)
    text = "First € Citizen\u2603!"
    want = [chars.chars.index(c) for c in text if c in chars.chars]
    auto = transformers.AutoTokenizer.from_pretrained(folder)
    assert auto(text)["input_ids"] == want
    assert auto("€")["input_ids"] == []
    hf_tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    assert hf_tok.encode(text).ids == want
    assert hf.load_folder(folder)[2] == chars
    old = Tokenizer(models.WordLevel({c: i for i, c in enumerate(chars.chars)}, unk_token="<unk>"))
    old.pre_tokenizer, old.decoder = hf_tok.pre_tokenizer, hf_tok.decoder
    old.save(str(tmp_path / "old.json"))
    assert load_tokenizer(tmp_path / "old.json") == chars


def test_export_into_a_missing_folder_names_it(tmp_path):
    """export-hf C nn/a/b with nn/a missing: one line naming the missing folder and the
    fix, nothing written; a folder above that is a file is named as one."""
    ck = _trained_checkpoint(CharVocab.from_text(shakespeare()[:20000]), False)
    with pytest.raises(HFError) as e:
        hf.export_folder(ck, tmp_path / "nn" / "a" / "b")
    line = _one_line(e)
    assert f"{str(tmp_path / 'nn' / 'a')!r} does not exist" in line and "mkdir -p" in line
    (tmp_path / "f").write_text("x")
    with pytest.raises(HFError) as e:
        hf.export_folder(ck, tmp_path / "f" / "b")
    assert f"{str(tmp_path / 'f')!r} is a file" in _one_line(e)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]
