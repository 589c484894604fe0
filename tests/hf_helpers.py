"""Helpers of the Hugging Face tests (test_hf.py, test_tokenizer.py): the Shakespeare
text, a small byte-level BPE trained on it, and random GPT2LMHeadModel folders.

transformers and torch are test dependencies (pyproject's ``test`` extra): missing,
they skip the tests here, except in CI (CI=true), where they fail.
"""
from __future__ import annotations

import functools
from pathlib import Path

import pytest

from conftest import DATA_DIR, in_ci
from microgpt_fut.data.tokenizer import HFTokenizer, train_bpe

SHAKESPEARE = DATA_DIR / "tinyshakespeare.txt"
BPE_SIZE = 320  # 256 bytes, 63 merges, <|endoftext|>


def need(module: str):
    """The module, or a skip when it is missing outside CI (in CI a missing one fails)."""
    if in_ci():
        return __import__(module)
    return pytest.importorskip(module)


@functools.lru_cache(maxsize=None)
def _text() -> str:
    return SHAKESPEARE.read_text(encoding="utf-8")


def shakespeare() -> str:
    """The project's data/tinyshakespeare.txt."""
    return _text()


@functools.lru_cache(maxsize=None)
def _bpe(size: int) -> HFTokenizer:
    return train_bpe(_text(), size)


def small_bpe(size: int = BPE_SIZE) -> HFTokenizer:
    """A byte-level BPE of ``size`` ids trained on Shakespeare (trained once per session)."""
    shakespeare()
    return _bpe(size)


def random_hf_model(vocab_size: int, n_embd: int = 32, n_layer: int = 2, n_head: int = 2,
                    n_positions: int = 32, seed: int = 0, std: float = 0.2, **config):
    """A GPT2LMHeadModel in eval mode with random weights: every tensor N(0, std),
    LayerNorm weights 1 + N(0, std) (transformers' own init has zero biases and unit
    LayerNorms, which would leave those paths untested; std 0.2 gives logits far
    enough apart that greedy choices have no float32 near-ties)."""
    torch = need("torch")
    transformers = need("transformers")
    torch.manual_seed(seed)
    cfg = transformers.GPT2Config(vocab_size=vocab_size, n_embd=n_embd, n_layer=n_layer,
                                  n_head=n_head, n_positions=n_positions, bos_token_id=None,
                                  eos_token_id=None, **config)
    model = transformers.GPT2LMHeadModel(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.normal_(0.0, std)
            if ".ln_" in name and name.endswith(".weight"):
                p.add_(1.0)
    return model.eval()


def save_hf_folder(folder: Path, model, tok=None) -> Path:
    """model.save_pretrained(folder) (safetensors) and the tokenizer's tokenizer.json."""
    model.save_pretrained(folder)
    if tok is not None:
        tok.tok.save(str(folder / "tokenizer.json"))
    return folder
