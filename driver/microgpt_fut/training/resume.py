"""The rules of ``train --resume``: what a checkpoint fixes, and the data it must see again.

A resumed run is the checkpoint's run: its model sizes, total steps (and so its
learning-rate schedule), lr, seed (initial weights and data order) and batch
size are fixed. An option given on the command line must agree with the
checkpoint; left out, it takes the checkpoint's value. Only how the run is
executed may change: --steps-per-call, --backend, --device, --save-every, --out.
The data must be the same documents (checked by their SHA-256), by default
read again from the file the checkpoint names.
"""
from __future__ import annotations

from pathlib import Path

from .checkpoint import Checkpoint
from ..data.lines import DataInfo
from .stream import TextSettings
from .lines import TrainSettings

# Metadata a checkpoint needs to be resumed (all written by `train`).
REQUIRED = ("num_steps", "lr", "beta1", "beta2", "eps", "seed", "batch_size", "data_path",
            "data_sha256", "n_docs", "encoding", "cursor")
# CLI option (click's parameter name) -> where the checkpoint keeps its value.
_FIXED_SETTINGS = {"steps": "num_steps", "batch_size": "batch_size", "lr": "lr", "seed": "seed"}
_FIXED_SIZES = ("n_embd", "n_head", "n_layer", "block_size", "mlp_width")


# Options of runs on streams and of nanoGPT's recipe (click's names) that the checkpoint
# fixes -> their train entries (an entry the checkpoint lacks is not checked).
STREAM_FIXED = {"steps": "num_steps", "batch_size": "batch_size", "grad_accum": "grad_accum",
                "eval_every": "eval_every", "eval_iters": "eval_iters", "seed": "seed",
                "lr": "lr", "min_lr": "min_lr", "warmup_steps": "warmup_steps",
                "lr_decay_steps": "lr_decay_steps", "beta1": "beta1", "beta2": "beta2",
                "weight_decay": "weight_decay", "grad_clip": "grad_clip",
                "val_fraction": "val_fraction"}
STREAM_SIZES = ("n_embd", "n_head", "n_layer", "block_size", "mlp_width", "bias")


class ResumeError(ValueError):
    """A checkpoint cannot be resumed as asked; one line naming the file or option."""


class ResumeConflict(ResumeError):
    """An option given with --resume disagrees with the checkpoint."""


def _opt(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_resumable(ck: Checkpoint, where: str) -> None:
    """Raise ResumeError unless ck holds everything needed to continue its run.

    where: how to name the file in messages, e.g. ``checkpoint 'm.safetensors'``.
    """
    for key in REQUIRED:
        if key not in ck.train:
            raise ResumeError(f"{where} cannot be resumed: it lacks the {key!r} metadata "
                              "(only checkpoints written by `microgpt-fut train` can)")
    if ck.m is None or ck.v is None:
        raise ResumeError(f"{where} cannot be resumed: it has no Adam moments")
    if ck.losses is None:
        raise ResumeError(f"{where} cannot be resumed: it has no loss history 'train.losses'")
    total, batch = ck.train["num_steps"], ck.train["batch_size"]
    if not 0 <= ck.step <= total or total < 1 or batch < 1:
        raise ResumeError(f"{where} is inconsistent: step {ck.step} of {total} steps")
    if ck.train["cursor"] != ck.step * batch:
        raise ResumeError(f"{where} is inconsistent: data cursor {ck.train['cursor']} is not "
                          f"step {ck.step} x batch size {batch}")


def settings_for(ck: Checkpoint, given: dict, steps_per_call: int,
                 where: str) -> TrainSettings | TextSettings:
    """The checkpoint's settings with the given steps_per_call: TrainSettings (microgpt's
    Adam), or for GPT-2 on lines text_training.TextSettings (nanoGPT's recipe).

    given: the options the user gave explicitly, by click parameter name (steps,
    batch_size, lr, seed, n_embd, n_head, n_layer, block_size, mlp_width; others
    are ignored). Raises ResumeConflict naming the option when one differs from
    the checkpoint (a --block-size beyond the checkpoint's positional table
    says so), ResumeError when ck cannot be resumed at all.
    """
    check_resumable(ck, where)
    t = ck.train
    steps = given.get("steps")
    if steps is not None and steps != t["num_steps"]:
        raise ResumeConflict(
            f"--steps {steps} does not match {where}: its run has {t['num_steps']} steps in "
            f"total (the learning rate decays to 0 at step {t['num_steps']}); leave --steps "
            "out to finish that run")
    for name, key in _FIXED_SETTINGS.items():
        if name in given and given[name] != t[key]:
            raise ResumeConflict(f"{_opt(name)} {given[name]} conflicts with {where}, whose run "
                                 f"has {_opt(name)} {t[key]}; leave it out when resuming")
    block = given.get("block_size")
    if block is not None and block > ck.config.block_size:
        raise ResumeConflict(f"--block-size {block} is larger than the positional table of "
                             f"{where} (wpe has {ck.config.block_size} positions)")
    for name in _FIXED_SIZES:
        have = getattr(ck.config, name)
        if given.get(name) is not None and given[name] != have:
            raise ResumeConflict(f"{_opt(name)} {given[name]} conflicts with {where}, which has "
                                 f"{_opt(name)} {have}; a resumed run keeps the checkpoint's "
                                 "model sizes")
    if ck.arch != "microgpt":  # GPT-2 on lines: nanoGPT's recipe, its options fixed too
        check_fixed(ck, given, where)
        return TextSettings.from_train(t, steps_per_call)
    return TrainSettings(num_steps=t["num_steps"], batch_size=t["batch_size"], lr=t["lr"],
                         beta1=t["beta1"], beta2=t["beta2"], eps=t["eps"], seed=t["seed"],
                         steps_per_call=steps_per_call)


def data_source(ck: Checkpoint, data: Path | None, encoding: str | None,
                where: str) -> tuple[Path | None, str]:
    """(data file or None for the built-in dataset, encoding) to resume ck on.

    data/encoding: the --data/--encoding the user gave, or None to use the
    checkpoint's. Raises ResumeError when the checkpoint's data file is gone.
    """
    enc = encoding if encoding is not None else ck.train["encoding"]
    if data is not None:
        return data, enc
    stored = ck.train["data_path"]
    if not stored:
        return None, enc
    if not Path(stored).is_file():
        raise ResumeError(f"{where} was trained on data file {stored!r}, which is not there "
                          "any more; pass --data FILE with the same documents")
    return Path(stored), enc


def check_data(ck: Checkpoint, info: DataInfo, where: str) -> None:
    """Raise ResumeError unless info describes the documents ck was trained on."""
    t = ck.train
    if info.sha256 == t["data_sha256"]:
        return
    source = repr(info.path) if info.path else "the built-in dataset"
    theirs = repr(t["data_path"]) if t["data_path"] else "the built-in dataset"
    raise ResumeError(f"refusing to resume {where} on other data: {source} has {info.n_docs} "
                      f"documents that differ from the {t['n_docs']} it was trained on "
                      f"(from {theirs}; SHA-256 {t['data_sha256'][:12]}...)")


def check_fixed(ck: Checkpoint, given: dict, where: str) -> None:
    """Raise ResumeConflict naming the option when one of STREAM_FIXED given (click's
    name, as in ``settings_for``) differs from the checkpoint's entry."""
    t = ck.train
    for name, key in STREAM_FIXED.items():
        if name in given and given[name] is not None and key in t and given[name] != t[key]:
            raise ResumeConflict(f"{_opt(name)} {given[name]} conflicts with {where}, whose run "
                                 f"has {_opt(name)} {t[key]}; leave it out when resuming")


def stream_plan(ck: Checkpoint, given: dict, steps_per_call: int, threads: int,
                where: str) -> tuple[TextSettings, Path, str, float]:
    """(settings, data path, encoding, val_fraction) to resume ck, a run on a text file
    or token shards: its settings (text_training's TextSettings.from_train) with the
    given steps_per_call and threads, its data (--data, else the path it names).

    Raises ResumeConflict naming the option when a given one differs from the run's
    (the tokenizer, STREAM_FIXED, the model's sizes), ResumeError when ck lacks an entry
    or its data is gone."""
    for name in ("tokenizer", "vocab_size"):
        if given.get(name) is not None:
            raise ResumeConflict(f"{_opt(name)} conflicts with --resume: a resumed run keeps "
                                 "its tokenizer; leave it out")
    check_fixed(ck, given, where)
    for name in STREAM_SIZES:
        if given.get(name) is not None and given[name] != getattr(ck.config, name):
            shown = _opt(name) if name != "bias" else "--bias/--no-bias"
            raise ResumeConflict(f"{shown} {given[name]} conflicts with {where}, which has "
                                 f"{getattr(ck.config, name)}; a resumed run keeps its model")
    t = ck.train
    try:
        settings = TextSettings.from_train(t, steps_per_call, threads)
    except KeyError as e:
        raise ResumeError(f"{where} lacks the {e.args[0]!r} metadata a text run needs to "
                          "resume") from None
    data = given.get("data") or Path(t.get("data_path", ""))
    if ck.data_format == "tokens" and not data.is_dir():
        raise ResumeError(f"{where} was trained on the token shards in {str(data)!r}, which "
                          "are not there any more; pass --data DIR with the same shards")
    if ck.data_format == "text" and not data.is_file():
        raise ResumeError(f"{where} was trained on data file {str(data)!r}, which is not there "
                          "any more; pass --data FILE with the same text")
    return settings, data, given.get("encoding") or t.get("encoding", "utf-8"), \
        t["val_fraction"]
