"""``train`` and ``sample`` for text models (``--data-format text``, ``--arch gpt2``).

The command line itself (options, one-line errors, Ctrl-C, atomic saves) is
cli.py's; this module is what those commands do for a GPT-2 trained on a
stream of characters with nanoGPT's recipe (text_training.py).
"""
from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Iterator

import click
import numpy as np

from . import checkpoint as ckpt
from . import cli_mpi, hf
from . import curves
from . import cli as _cli
from .cli import _bad_option, _check_out, _runtime, _user_errors
from .data_parallel import DataParallelGPT2, runtimes
from .gpt2 import GPT2Config, GPT2Model, Recipe
from .interrupt import stdout_closed
from .pacing import CallPacer
from .sample_output import print_samples
from .data import DataError, read_text
from .text import CharVocab, load_text
from .tokenizer import BPE_MIN_VOCAB, Tokenizer, load_tokenizer, train_bpe
from .text_training import TextSettings, TextTraining

# Options of text runs (click's names) that the checkpoint fixes when resuming.
_FIXED = {"steps": "num_steps", "batch_size": "batch_size", "grad_accum": "grad_accum",
          "eval_every": "eval_every", "eval_iters": "eval_iters", "seed": "seed", "lr": "lr",
          "min_lr": "min_lr", "warmup_steps": "warmup_steps", "lr_decay_steps": "lr_decay_steps",
          "beta1": "beta1", "beta2": "beta2", "weight_decay": "weight_decay",
          "grad_clip": "grad_clip", "val_fraction": "val_fraction"}
_SIZES = ("n_embd", "n_head", "n_layer", "block_size", "mlp_width", "bias")
SAMPLE_TOKENS = 200    # continuation printed after training
SAMPLE_CHUNK = 256     # the most samples one generate call makes


def _opt(name: str) -> str:
    return "--" + name.replace("_", "-")


def settings_from_options(o: dict) -> TextSettings:
    """TextSettings from the train command's options (None: the text recipe's default:
    nanoGPT's AdamW betas (0.9, 0.95), weight decay 0.1, clip 1.0, lr 1e-3 decayed
    to lr/10 at the last step after min(100, steps/10) warm-up steps)."""
    steps = o["steps"]
    lr = o["lr"] if o["lr"] is not None else 1e-3
    pick = lambda name, default: o[name] if o[name] is not None else default  # noqa: E731
    recipe = Recipe(lr=lr, min_lr=pick("min_lr", lr / 10),
                    warmup_steps=pick("warmup_steps", min(100, steps // 10)),
                    lr_decay_steps=pick("lr_decay_steps", steps), beta1=pick("beta1", 0.9),
                    beta2=pick("beta2", 0.95), weight_decay=pick("weight_decay", 0.1),
                    grad_clip=pick("grad_clip", 1.0))
    return TextSettings(steps, o["batch_size"], recipe, o["grad_accum"], pick("eval_every", 250),
                        pick("eval_iters", 20), o["seed"], o["steps_per_call"], o["threads"])


def _resume_plan(resume: Path, given: dict, steps_per_call: int, threads: int):
    """(checkpoint, settings, data path, encoding, val_fraction) of a text run to
    resume; a one-line error when a given option conflicts with it."""
    where = f"checkpoint {str(resume)!r}"
    with _user_errors():
        ck = ckpt.load(resume)
    for name in ("tokenizer", "vocab_size"):
        if given.get(name) is not None:
            raise _bad_option(f"{_opt(name)} conflicts with --resume: a resumed run keeps its "
                              "tokenizer; leave it out")
    t = ck.train
    for name, key in _FIXED.items():
        if name in given and given[name] is not None and key in t and given[name] != t[key]:
            raise _bad_option(f"{_opt(name)} {given[name]} conflicts with {where}, whose run has "
                              f"{_opt(name)} {t[key]}; leave it out when resuming")
    for name in _SIZES:
        if given.get(name) is not None and given[name] != getattr(ck.config, name):
            shown = _opt(name) if name != "bias" else "--bias/--no-bias"
            raise _bad_option(f"{shown} {given[name]} conflicts with {where}, which has "
                              f"{getattr(ck.config, name)}; a resumed run keeps its model")
    try:
        settings = TextSettings.from_train(t, steps_per_call, threads)
    except KeyError as e:
        raise click.ClickException(f"{where} lacks the {e.args[0]!r} metadata a text run "
                                   "needs to resume") from None
    data = given.get("data") or Path(t.get("data_path", ""))
    if not data.is_file():
        raise click.ClickException(f"{where} was trained on data file {str(data)!r}, which is "
                                   "not there any more; pass --data FILE with the same text")
    return ck, settings, data, given.get("encoding") or t.get("encoding", "utf-8"), t["val_fraction"]


def train(ctx, o: dict, given: dict, say, quiet: bool, world=None) -> None:
    """`train --data-format text`: a GPT-2 on the text with nanoGPT's recipe, evaluated
    every --eval-every steps, saved to --out with its loss curves beside it. ``world``:
    the MPI job (cli_mpi.py) whose ranks share each step's windows, or None."""
    source = next(((f"--{name.replace('_', '-')}", o[name]) for name in ("init_from", "resume")
                   if o[name] is not None), None)
    if o["arch"] != "gpt2" and source is None:
        raise _bad_option(f"--data-format text trains --arch gpt2, not --arch {o['arch']} "
                          "(microgpt's model trains on --data-format lines)")
    if o["arch"] != "gpt2" and "arch" in given:
        raise _bad_option(f"--arch {o['arch']} conflicts with {source[0]} {str(source[1])!r}, "
                          "a gpt2 text model: leave --arch out (or give --arch gpt2)")
    resume, out = o["resume"], o["out"]
    ck = init = None
    if o["init_from"] is not None:
        init = _init_source(o["init_from"], given)
    elif resume is None and o["vocab_size"] is not None and o["tokenizer"] != "bpe":
        raise _bad_option("--vocab-size applies to --tokenizer bpe (the other tokenizers have "
                          "their own)")
    if resume is None:
        if o["data"] is None:
            raise _bad_option("--data-format text needs --data FILE (a text file, e.g. "
                              "tinyshakespeare.txt)")
        settings = settings_from_options(o)
        r = settings.recipe
        if o["lr_decay_steps"] is None and r.warmup_steps >= r.lr_decay_steps:
            raise _bad_option(f"--warmup-steps {r.warmup_steps} must be less than --steps "
                              f"{o['steps']}, where the learning rate's decay ends (or give "
                              "--lr-decay-steps beyond the warm-up)")
        try:
            settings.validate()
        except ValueError as e:
            raise _bad_option(str(e)) from None
        if init is None and o["n_embd"] % o["n_head"]:
            raise _bad_option(f"--n-embd {o['n_embd']} is not divisible by --n-head {o['n_head']}")
        data_path, encoding, val_fraction = o["data"], o["encoding"], o["val_fraction"]
    else:
        ck, settings, data_path, encoding, val_fraction = _resume_plan(
            resume, given, o["steps_per_call"], o["threads"])
        out = out if "out" in given else resume
    windows = settings.batch_size * settings.grad_accum
    cli_mpi.check_split(world, windows, f"--batch-size {settings.batch_size} x --grad-accum "
                                        f"{settings.grad_accum} = {windows} windows a step")
    _check_out(out, data_path, resume, o["overwrite"])
    _cli._lock_out(ctx, out)
    with _user_errors():
        curves.check_writable(out)
    device = (cli_mpi.local_device(o["backend"], o["device"], world.local_rank)
              if world is not None else o["device"])
    rt = _runtime(o["backend"], device, quiet, program="gpt2")
    with _user_errors():
        if ck is not None:
            config, tok = ck.config, ck.text_tokenizer()
        elif init is not None:
            config, tok = init.config, init.text_tokenizer()
        else:
            tok = _new_tokenizer(o, data_path, encoding, val_fraction)
        data = load_text(data_path, ck.config.block_size if ck else
                         init.config.block_size if init else o["block_size"],
                         val_fraction, encoding, tok)
        if ck is None and init is None:
            config = GPT2Config(data.vocab.size, o["n_embd"], o["n_head"], o["n_layer"],
                                o["block_size"], o["mlp_width"], o["bias"])
        config.validate()
    _cli._check_memory(config, o["backend"], rt, settings.batch_size, settings.steps_per_call,
                       data.n_tokens, settings.grad_accum,
                       settings.threads * _cli._ranks_here(world), settings.eval_iters, out)
    exchange = world.exchange if world is not None else None
    with _user_errors():
        if ck is not None:
            run = TextTraining.resume(rt, ck, data, settings, exchange)
        elif init is not None:
            run = TextTraining.start(rt, data, settings, config, init.params,
                                     _source_name(o["init_from"]), exchange)
        else:
            run = TextTraining.start(rt, data, settings, config, exchange=exchange)
    kind = "characters" if isinstance(data.vocab, CharVocab) else "byte-level BPE"
    say(f"data: {data.path} | {data.n_chars:,} characters, {data.n_tokens:,} tokens, vocab "
        f"size {data.vocab.size} ({kind}) | train {len(data.train):,} tokens, "
        + (f"val {len(data.val):,}" if len(data.val) else "no validation (--val-fraction 0)"))
    if init is not None:
        say(f"starting from the weights of {str(o['init_from'])!r}"
            + (f" (step {init.step} of its run)" if init.step else ""))
    say(f"model: gpt2, {config.n_layer} layers, {config.n_head} heads, n_embd {config.n_embd}, "
        f"block size {config.block_size}, {'with' if config.bias else 'no'} biases | "
        f"num params: {config.num_params() / 1e6:.2f}M | backend: {o['backend']}"
        + cli_mpi.describe(world, settings.threads)
        + (f" ({rt.device.name})" if rt.device else ""))
    if ck is not None:
        say(f"resuming {str(resume)!r} at step {run.step} of {run.num_steps}"
            + (": the run is complete, nothing to train" if run.done else ""))
    if world is not None:
        cli_mpi.share_run(world, cli_mpi.RunSpec("text", run.checkpoint(), (data,), settings,
                                                 o["backend"], o["device"], o["save_every"],
                                                 str(out)), run)
    ours = ck.step if ck is not None and out == resume else None
    stopped = _train_and_save(run, out, o["save_every"], say, quiet, ours, world)
    if stopped:
        _cli._exit_saved(ctx, stopped, run, out, world=world)
    if run.seconds:
        say(f"trained {run.step - (ck.step if ck else 0)} steps in {run.seconds:.1f} s "
            f"({run.positions / max(run.seconds, 1e-9):,.0f} tok/s)")
    if run.evals:
        say(f"final: {_eval_line(*run.evals[-1])}")
    csv_path, png_path = curves.paths(out)
    say(f"saved {out}, {csv_path.name}, {png_path.name}")
    _cli.exit_if_stdout_closed(ctx, out, run)
    n = o["samples"] if o["samples"] is not None else 1
    temperature = o["temperature"] if o["temperature"] is not None else 0.8
    with _user_errors():
        print_samples(iter_continuations(run.model, data.vocab, ["\n"], n, SAMPLE_TOKENS,
                                         temperature, 0, settings.seed), n, "text")


def _source_name(path: Path) -> str:
    return str(Path(path).resolve())


def _init_source(path: Path, given: dict) -> ckpt.Checkpoint:
    """The model of --init-from: a text checkpoint of ours or a Hugging Face GPT-2
    folder (weights, sizes, tokenizer; no optimiser state). A --block-size below the
    model's crops its positional table (nanoGPT's crop_block_size). One-line errors
    when it cannot be read, is not a GPT-2 text model, or an option conflicts."""
    where = f"--init-from {str(path)!r}"
    with _user_errors():
        init = hf.load_checkpoint(path) if hf.is_folder(path) else ckpt.load(path, adam=False)
    if init.arch != "gpt2" or init.data_format != "text":
        raise _bad_option(f"{where} is a {init.arch} model of {init.data_format}; a text run "
                          "starts from a gpt2 text model")
    for name in ("tokenizer", "vocab_size"):
        if given.get(name) is not None:
            raise _bad_option(f"{_opt(name)} conflicts with {where}: the run keeps the "
                              "model's tokenizer")
    for name in _SIZES:
        value = given.get(name)
        if value is None or value == getattr(init.config, name):
            continue
        if name == "block_size" and value < init.config.block_size:
            continue
        shown = _opt(name) if name != "bias" else "--bias/--no-bias"
        raise _bad_option(f"{shown} {value} conflicts with {where}, whose model has "
                          f"{getattr(init.config, name)}; leave it out (the model keeps its "
                          "sizes; --block-size may only be smaller)")
    T = given.get("block_size")
    if T is not None and T < init.config.block_size:  # nanoGPT's crop_block_size
        import dataclasses

        init.config = dataclasses.replace(init.config, block_size=T)
        init.params = {**init.params, "wpe": init.params["wpe"][:T].copy()}
    return init


def _new_tokenizer(o: dict, data_path: Path, encoding: str, val_fraction: float):
    """The tokenizer of a fresh text run (--tokenizer): None for the text's characters
    (load_text builds them), a byte-level BPE trained on the training split's text, or
    the tokenizer read from a path."""
    choice = o["tokenizer"] or "char"
    if choice == "char":
        return None
    if choice == "bpe":
        if o["vocab_size"] is None:
            raise _bad_option("--tokenizer bpe needs --vocab-size N (e.g. 1024; GPT-2 has 50257)")
        if o["vocab_size"] < BPE_MIN_VOCAB:
            raise _bad_option(f"--vocab-size {o['vocab_size']} is too small for --tokenizer bpe: "
                              f"at least {BPE_MIN_VOCAB} (its 256 bytes and <|endoftext|>)")
        text = read_text(data_path, encoding)
        # train on the training split only (the text's first 1 - val_fraction)
        return train_bpe(text[:int(len(text) * (1 - val_fraction))], o["vocab_size"])
    return load_tokenizer(choice)


def _train_and_save(run: TextTraining, out: Path, save_every: int | None, say, quiet: bool,
                    ours: int | None, world=None) -> bool:
    """cli's _train_and_save with a text run's display (a tqdm bar on a terminal, else
    progress lines; nanoGPT's evaluation lines) and its loss curves written beside
    --out at each save (``world``: rank 0 of an MPI job, as there). The StopRequest
    when a signal stopped it (saved), else None."""
    bar = None
    if not quiet and sys.stderr.isatty():
        from tqdm import tqdm
        bar = tqdm(total=run.num_steps, initial=run.step, unit="step", dynamic_ncols=True,
                   file=sys.stderr)
    def write(message: str) -> None:
        """A line on stdout, above the bar when there is one (tqdm.write prints to
        stdout): a closed stdout stops the run as in cli's say."""
        if bar is None:
            return say(message)
        try:
            bar.write(message)
        except BrokenPipeError:
            stdout_closed()

    title = f"{Path(run.data.path).name}: gpt2 {run.model.config.num_params() / 1e6:.2f}M params"

    def progress(step, total, loss, norm, rate, first):
        if bar is not None:
            bar.update(step - bar.n)
            bar.set_postfix_str(f"loss {loss:.4f} | norm {norm:.2f} | {rate:,.0f} tok/s")
        else:
            say(f"step {step:{len(str(total))}d} / {total} | {_cli.mean_loss(loss, first, step)} "
                f"| grad norm {norm:.4f} (step {step}) | {rate:,.0f} tok/s")

    def on_eval(step, train_loss, val_loss):
        write(_eval_line(step, train_loss, val_loss))

    def advance(until, should_stop):
        run.run(until, progress, on_eval, report_every=10 if bar else 100,
                should_stop=should_stop)

    def curves_beside():
        try:
            curves.write(out, run.losses, run.norms, run.evals, title, len(run.data.val) > 0)
        except OSError as e:
            raise click.ClickException(f"cannot write the loss curves beside {str(out)!r}: "
                                       f"{e.strerror or e}; the checkpoint is saved") from None

    try:
        return _cli._train_and_save(run, out, save_every, write, ours, advance, curves_beside,
                                    world)
    finally:
        if bar is not None:
            bar.close()


def _eval_line(step: int, train_loss: float, val_loss: float) -> str:
    """nanoGPT's evaluation line; without a validation split (--val-fraction 0, its val
    loss NaN) the train loss alone."""
    line = f"step {step}: train loss {train_loss:.4f}"
    return line if math.isnan(val_loss) else f"{line}, val loss {val_loss:.4f}"


def iter_continuations(model: GPT2Model, vocab: Tokenizer, prompts: list[str], n: int,
                       max_new: int, temperature: float, top_k: int, seed: int
                       ) -> Iterator[list[str]]:
    """n samples of each prompt + max_new generated tokens (nanoGPT's sample.py), in
    prompt order, a device call's worth at a time (about pacing.CALL_SECONDS, at most
    SAMPLE_CHUNK samples). Sample j of prompt p draws from random stream p*n + j,
    whatever the chunks; each is the tokenizer's ``decode`` of the prompt's ids and the
    new ones, as transformers decodes ``generate``'s output (a byte-level BPE's
    incomplete character, even at the end, is U+FFFD). Raises ValueError for an empty
    prompt and DataError
    for text the tokenizer cannot encode."""
    if any(not p for p in prompts):
        raise ValueError("--prompt is empty; give at least one character")
    ids = [vocab.encode(p, "--prompt") for p in prompts]
    total = n * len(prompts)
    pacer, first = CallPacer(SAMPLE_CHUNK), 0
    while first < total:
        k = pacer.next_k(first, total - first)
        rows_of = [ids[i // n] for i in range(first, first + k)]
        t0 = time.perf_counter()
        if not max_new:
            rows = np.zeros((k, 0), np.int64)
        elif len(prompts) == 1:
            rows = model.generate(seed, k, temperature, top_k, ids[0], max_new, first)
        else:
            rows = model.generate_prompts(seed, temperature, top_k, rows_of, max_new, first)
        pacer.record(k, time.perf_counter() - t0)
        out = []
        for i, row in enumerate(rows):
            p = (first + i) // n
            out.append(vocab.decode([*ids[p], *row]))
        first += k
        yield out


def continuations(model: GPT2Model, vocab: Tokenizer, prompt: str, n: int, max_new: int,
                  temperature: float, top_k: int, seed: int) -> list[str]:
    """The samples of ``iter_continuations`` of one prompt, as one list."""
    return [t for part in iter_continuations(model, vocab, [prompt], n, max_new, temperature,
                                             top_k, seed) for t in part]


def sample(ck: ckpt.Checkpoint, o: dict) -> None:
    """`sample` of a text checkpoint (ours or a Hugging Face GPT-2 folder):
    continuations of each --prompt, -n of each."""
    if o["max_new_tokens"] < 0:
        raise _bad_option(f"--max-new-tokens must be at least 0, got {o['max_new_tokens']}")
    n = o["num"] if o["num"] is not None else 1
    temperature = o["temperature"] if o["temperature"] is not None else 0.8
    prompts = list(o["prompt"]) or ["\n"]
    vocab = ck.text_tokenizer()
    if any(not p for p in prompts):
        raise _bad_option("--prompt is empty; give at least one character")
    try:  # before the backend starts; a prompt the model cannot read is a usage error
        lengths = [len(vocab.encode(p, "--prompt")) for p in prompts]
    except DataError as e:
        raise _bad_option(str(e)) from None
    T = ck.config.block_size
    for p, length in zip(prompts, lengths):
        if length > T:
            click.echo(f"note: --prompt {_short(p)} has {length} tokens, more than the model's "
                       f"context of {T}: it sees the last {T}", err=True)
    rt = _runtime(o["backend"], o["device"], quiet=False, program="gpt2")
    with _user_errors():
        if min(o["threads"], n * len(prompts)) > 1:
            model = DataParallelGPT2.from_arrays(
                runtimes(rt, min(o["threads"], n * len(prompts))), ck.config, ck.params)
        else:
            model = GPT2Model.from_arrays(rt, ck.config, ck.params, step=ck.step)
        print_samples(iter_continuations(model, vocab, prompts, n, o["max_new_tokens"],
                                         temperature, o["top_k"], o["seed"]),
                      n * len(prompts), "text", o["plain"])


def _short(text: str, width: int = 30) -> str:
    return repr(text if len(text) <= width else text[:width] + "...")
