"""The option table of `train` and `sample`: each option declared once (its click
declaration, type, default, help, check), the click decorators made from it, and where
each applies.

Defaults are not written here but read from their owners: a run's settings from
training/settings.py (Settings), the model's sizes from the config classes, the
optimiser's from the families (family.Family.optimizer_options), the data's from
plan.DATA_DEFAULTS, the samples' from the kinds. Where an option applies comes from the
same declarations (plan.applies_to for train; kinds.Kind.sample_options for sample).
The commands import from here; this module imports none of them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import click

from ..backend.runtime import BACKENDS, MULTICORE_WORK
from ..training import plan
from ..training.family import FAMILIES
from ..training.kinds import KINDS
from ..training.settings import DEFAULTS as RUN
from .common import bad_option
from .config import load_config
from .values import (F32, INT, INT64_MAX, GivenPath, IntFrom, check_lr, check_positive,
                     check_temperature)


@dataclass(frozen=True)
class Option:
    """One option: click's declarations, its help (per command where they differ), and
    the rest of click.option's arguments (type, default, callback, ...)."""

    decls: tuple[str, ...]
    help: str | dict[str, str]
    args: dict = field(default_factory=dict)

    def decorator(self, command: str):
        text = self.help if isinstance(self.help, str) else self.help[command]
        return click.option(*self.decls, help=text, **self.args)


def where(name: str, text: str) -> str:
    """A train option's help, prefixed with where it applies (plan.applies_to)."""
    values = plan.applies_to(name)[1]
    return f"{', '.join(values)}: {text}" if values else text


def _optimizer_options(name: str) -> str:
    per = [f"{f.arch} {f.optimizer_options[name]}" for f in FAMILIES.values()
           if name in f.optimizer_options]
    return f"  [default: {'; '.join(per)}]"


def _sample_defaults(attr: str) -> str:
    """The samples' defaults (-n, --temperature), from the kinds' declarations."""
    return (f"  [default: {getattr(KINDS['lines'], attr)} names; "
            f"{getattr(KINDS['text'], attr)} text]")


def _count(default, **extra) -> dict:
    """A positive integer option (click shows its default when it has one)."""
    args = dict(type=INT, default=default, callback=check_positive, **extra)
    return args if default is None else {**args, "show_default": True}


def _optimizer(name: str, type_, text: str) -> tuple[str, Option]:
    return name, Option(("--" + name.replace("_", "-"),),
                        where(name, text) + _optimizer_options(name),
                        dict(type=type_, default=None,
                             callback=check_lr if name == "lr" else None))


_SIZES = FAMILIES["microgpt"].config_class  # its fields' defaults: train's sizes
_SEED = dict(type=IntFrom(0, INT64_MAX), default=RUN["seed"], show_default=True)

OPTIONS: dict[str, Option] = dict([
    ("data", Option(("--data",), "lines: a text file, one document per line (default: "
                    "built-in US first names); text: a text file; tokens: a folder of token "
                    "shards (`prepare`; a folder is read as tokens by default).",
                    dict(type=GivenPath(), default=None))),
    ("encoding", Option(("--encoding",), where("encoding", "text encoding of --data.  "
                        f"[default: {plan.DATA_DEFAULTS['encoding']}]"), dict(default=None))),
    ("backend", Option(("--backend",), {
        command: "Compiled kernels to run on: c (one CPU core), multicore (every core), "
                 "opencl, cuda.  [default: " + rule + "]"
        for command, rule in [
            ("train", f"multicore when its library is built and a micro-batch's rows x "
                      f"positions x parameters reach {MULTICORE_WORK:,}, else c; c with "
                      "--threads or MPI"),
            ("", f"multicore when its library is built and an example's endings x "
                 f"block size x parameters reach {MULTICORE_WORK:,}, else c"),
            ("sample", "c, or multicore where only its library is built")]},
        dict(type=click.Choice(BACKENDS), default=None))),
    ("device", Option(("--device",), "OpenCL device number (see `microgpt-fut devices`; "
                      "default: the first GPU, else the first device), or CUDA device number "
                      "(default: Futhark's choice).", dict(type=INT, default=None))),
    ("steps", Option(("--steps",), "Training steps (optimiser updates) of the whole run; with "
                     "--resume, the checkpoint's (it cannot change).",
                     _count(RUN["num_steps"]))),
    ("batch_size", Option(("--batch-size",), "Rows per step (per micro-batch with "
                          "--grad-accum): documents, or windows of a stream.",
                          _count(RUN["batch_size"]))),
    ("n_embd", Option(("--n-embd",), "Embedding width.", _count(_SIZES.n_embd))),
    ("n_head", Option(("--n-head",), "Attention heads (must divide --n-embd).",
                      _count(_SIZES.n_head))),
    ("n_layer", Option(("--n-layer",), "Transformer layers.", _count(_SIZES.n_layer))),
    ("block_size", Option(("--block-size",), "Context length in tokens; longer documents are "
                          "cut.", _count(_SIZES.block_size))),
    ("mlp_width", Option(("--mlp-width",), "Hidden width of the MLP.  [default: 4 * n-embd]",
                         _count(None))),
    _optimizer("lr", F32, "peak learning rate: microgpt's Adam decays it linearly to 0; "
                          "nanoGPT's recipe warms up to it and decays it to --min-lr."),
    ("seed", Option(("--seed",), {
        "train": "Seed for the shuffle, the initial weights and the samples.",
        "sample": "Sampling seed (sample i uses random stream i)."}, _SEED)),
    ("steps_per_call", Option(("--steps-per-call",), "The most training steps fused into one "
                              "kernel call (calls are also cut to about 0.5 s, so that Ctrl-C "
                              "never waits long).", _count(RUN["steps_per_call"]))),
    ("arch", Option(("--arch",), "The model: microgpt's (rmsnorm, ReLU, no biases, Adam) or "
                    "GPT-2's (LayerNorm, GELU, tied head, AdamW recipe).",
                    dict(type=click.Choice(list(FAMILIES)), default="microgpt",
                         show_default=True))),
    ("data_format", Option(("--data-format",), "lines: one document per line with BOS "
                           "(names); text: the whole file as one token stream; tokens: a "
                           "folder of token shards (`prepare`). Any --arch trains on any of "
                           "them.  [default: tokens where --data is a folder; else lines "
                           "(text with --arch gpt2); with --resume, the run's; with "
                           "--init-from, the model's (text where a model of tokens is given "
                           "a file)]",
                           dict(type=click.Choice(list(KINDS)), default=None))),
    ("bias", Option(("--bias/--no-bias",), where("bias", "biases in the linear layers and "
                    "LayerNorms (nanoGPT's bias).  [default: "
                    f"{'--bias' if FAMILIES['gpt2'].config_class.bias else '--no-bias'}]"),
                    dict(default=None))),
    ("val_fraction", Option(("--val-fraction",), where("val_fraction", "the last fraction of "
                            "the text held out for validation (0: none; the run then evaluates "
                            "the training split only).  [default: "
                            f"{plan.DATA_DEFAULTS['val_fraction']}]"),
                            dict(type=click.FloatRange(0, 1, max_open=True), default=None))),
    ("tokenizer", Option(("--tokenizer",), where("tokenizer", "char (the text's characters), "
                         "bpe (a byte-level BPE trained on the training text, see "
                         "--vocab-size), or a tokenizer.json, vocab.json (beside merges.txt) "
                         "or a folder holding them.  [default: char; tokens: the shards' own]"),
                         dict(default=None, metavar="char|bpe|PATH"))),
    ("vocab_size", Option(("--vocab-size",), where("vocab_size", "with --tokenizer bpe, the "
                          "BPE's vocabulary, at least 257 (256 bytes, then merges, then "
                          "<|endoftext|>; GPT-2 has 50257)."), _count(None))),
    ("grad_accum", Option(("--grad-accum",), where("grad_accum", "micro-batches of "
                          f"--batch-size accumulated per step.  [default: {RUN['grad_accum']}]"),
                          _count(None))),
    _optimizer("min_lr", F32, "learning rate at the end of the cosine decay."),
    _optimizer("warmup_steps", IntFrom(0), "steps of linear warm-up."),
    _optimizer("lr_decay_steps", INT, "step where the cosine decay reaches --min-lr."),
    _optimizer("beta1", F32, "Adam's beta1."),
    _optimizer("beta2", F32, "Adam's beta2."),
    _optimizer("weight_decay", F32, "AdamW weight decay of the >= 2-D tensors."),
    _optimizer("grad_clip", F32, "clip the gradient to this global norm (0: off)."),
    ("eval_every", Option(("--eval-every",), where("eval_every", "evaluate both splits every N "
                          f"steps (and at the end).  [default: {RUN['eval_every']}]"),
                          _count(None))),
    ("eval_iters", Option(("--eval-iters",), where("eval_iters", "batches per split and "
                          f"evaluation.  [default: {RUN['eval_iters']}]"), _count(None))),
    ("eval_choices", Option(("--eval-choices",), where("eval_choices", "also score these "
                            "multiple-choice questions (HellaSwag's jsonl, as `eval --choices`) "
                            "at each evaluation: acc and acc_norm in its line, the CSV and the "
                            "plot.  [default with --resume: the run's]"),
                            dict(type=GivenPath(), default=None,
                                 metavar="FILE"))),
    ("config", Option(("--config",), "TOML file of option values under the option names, - or "
                      "_ alike (e.g. weight_decay = 0.1, lr = 1e-3, steps = 5000), each of its "
                      "option's type (an integer for --steps, a string for a path), paths "
                      "relative to the file; the command line wins.",
                      dict(type=GivenPath(), default=None, is_eager=True,
                           expose_value=False, callback=load_config))),
    ("threads", Option(("--threads",), {
        "train": "c backend: split each step's rows over N CPU threads, one kernel context "
                 "each (use at most the cores; more than the rows is cut to them); their "
                 "gradients make one optimiser step. Pays off when a step takes more than a "
                 "few ms (--n-embd 64 and up, or larger batches).",
        "sample": "c backend: split the samples over N CPU threads (the samples are the "
                  "same)."}, _count(RUN["threads"]))),
    ("out", Option(("--out",), "Checkpoint file to write (with --resume: FILE).",
                   dict(type=GivenPath(reads=False), default="model.safetensors",
                        show_default=True))),
    ("overwrite", Option(("--overwrite",), "Replace a checkpoint of another run that --out "
                         "holds (refused otherwise).", dict(is_flag=True))),
    ("save_every", Option(("--save-every",), "Also save the checkpoint to --out every N steps "
                          "(atomically: a crash leaves the previous one).", _count(None))),
    ("resume", Option(("--resume",), "Continue the run saved in checkpoint FILE (see below).",
                      dict(type=GivenPath(), default=None, metavar="FILE"))),
    ("init_from", Option(("--init-from",), "Start a new run from the weights of MODEL, a "
                         "checkpoint or a Hugging Face GPT-2 folder (its sizes and tokenizer; a "
                         "smaller --block-size crops its positions; fresh optimiser state, this "
                         "run's own steps, lr and data): to train more or fine-tune on other "
                         "data.", dict(type=GivenPath(), default=None,
                                       metavar="MODEL"))),
    ("samples", Option(("--samples",), "Samples to print after training."
                       + _sample_defaults("samples"),
                       dict(type=IntFrom(0), default=None))),
    ("num", Option(("-n", "--num"), "Number of samples (of each prompt)."
                   + _sample_defaults("samples"),
                   dict(type=IntFrom(0), default=None))),
    ("temperature", Option(("--temperature",), "Sampling temperature (0 = greedy)."
                           + _sample_defaults("temperature"),
                           dict(type=F32, default=None, callback=check_temperature))),
    ("quiet", Option(("--quiet", "-q"), "Print only the samples.", dict(is_flag=True))),
    ("checkpoint", Option(("--checkpoint",), "Checkpoint to load, or a Hugging Face GPT-2 "
                          "folder (config.json, model.safetensors, tokenizer files).",
                          dict(type=GivenPath(),
                               default=Path("model.safetensors"), show_default=True))),
    ("prompt", Option(("--prompt",), "Text models: the text to continue; give it several "
                      "times for several prompts, continued together (-n samples of each).  "
                      "[default: a newline, not printed before each sample but in --plain's "
                      "JSON; or the vocabulary's first character when it has no newline]",
                      dict(multiple=True))),
    ("max_new_tokens", Option(("--max-new-tokens",), "Text models: tokens to generate after "
                              "the prompt (characters for a character vocabulary; a byte-level "
                              "BPE's tokens are bytes and merges of them).",
                              dict(type=IntFrom(0),
                                   default=500, show_default=True))),
    ("top_k", Option(("--top-k",), "Text models: draw only from the k likeliest tokens (0: "
                     "all).", dict(type=IntFrom(0), default=0,
                                   show_default=True))),
    ("plain", Option(("--plain",), "One sample per line and nothing else, for pipes: names as "
                     "they are, text samples as JSON strings.", dict(is_flag=True))),
])

# Each command's options, in --help's order.
COMMANDS = {
    "train": ("data", "encoding", "backend", "device", "steps", "batch_size", "n_embd",
              "n_head", "n_layer", "block_size", "mlp_width", "lr", "seed", "steps_per_call",
              "arch", "data_format", "bias", "val_fraction", "tokenizer", "vocab_size",
              "grad_accum", "min_lr", "warmup_steps", "lr_decay_steps", "beta1", "beta2",
              "weight_decay", "grad_clip", "eval_every", "eval_iters", "eval_choices",
              "config", "threads", "out", "overwrite", "save_every", "resume", "init_from",
              "samples", "temperature", "quiet"),
    "sample": ("num", "temperature", "checkpoint", "seed", "prompt", "max_new_tokens",
               "top_k", "backend", "device", "threads", "plain"),
}


def options(command: str):
    """The decorator adding ``command``'s options of the table, in --help's order."""
    def decorate(f):
        for name in reversed(COMMANDS[command]):
            f = OPTIONS[name].decorator(command)(f)
        return f
    return decorate


def option(name: str, command: str = ""):
    """The decorator of one option of the table, for another command (eval's --backend)."""
    return OPTIONS[name].decorator(command)


def check_sample_options(given: dict, kind, path: Path) -> None:
    """Refuse (a usage error naming it) a sample option the model's kind does not read:
    an option some kind declares (kinds.Kind.sample_options) applies to the models of
    those kinds only; the others to every model."""
    for name in given:
        kinds = [k.name for k in KINDS.values() if name in k.sample_options]
        if kinds and kind.name not in kinds:
            raise bad_option(f"{plan.opt(name)} applies to models of {' and '.join(kinds)}; "
                             f"{str(path)!r} is a model of {kind.name}")
