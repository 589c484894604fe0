"""``train`` and ``sample`` for text models (``--data-format text``, ``--arch gpt2``).

The command line itself (options, one-line errors, Ctrl-C, atomic saves) is
cli.py's; this module is what those commands do for a GPT-2 trained on a
stream of characters with nanoGPT's recipe (text_training.py).
"""
from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path
from typing import Iterator

import click

from ..training import checkpoint as ckpt
from . import mpi as cli_mpi
from ..training import choices
from ..training import hf
from ..training import resume as resume_rules
from ..training import curves
from .common import (bad_option, check_memory, check_out, exit_if_stdout_closed, exit_saved,
                         lock_out, ranks_here, runtime, saved_step, train_and_save, user_errors)
from ..training.loop import mean_loss
from ..models.gpt2 import GPT2Config, GPT2Model, Recipe
from ..interrupt import stdout_closed
from ..pacing import CallPacer
from .sample_output import print_samples
from ..data.lines import DataError, read_text
from ..training.family import FAMILIES, Adam, family_of
from ..models.microgpt import GPTConfig
from ..data.shards import load_tokens
from ..data.text import CharVocab, load_text
from ..data.tokenizer import BPE_MIN_VOCAB, Tokenizer, load_tokenizer, train_bpe
from ..training.stream import TextSettings, TextTraining

# Options of nanoGPT's recipe that microgpt's Adam does not read (and gpt2's --no-bias).
RECIPE_ONLY = ("min_lr", "warmup_steps", "lr_decay_steps", "weight_decay", "grad_clip", "bias")
SAMPLE_TOKENS = 200    # continuation printed after training
SAMPLE_CHUNK = 256     # the most samples one generate call makes


def _opt(name: str) -> str:
    return "--" + name.replace("_", "-")


def settings_from_options(o: dict) -> TextSettings:
    """TextSettings from the train command's options (None: the default). --arch gpt2:
    nanoGPT's recipe (AdamW betas (0.9, 0.95), weight decay 0.1, clip 1.0, lr 1e-3
    decayed to lr/10 at the last step after min(100, steps/10) warm-up steps); --arch
    microgpt: microgpt's Adam (lr 0.01 decayed linearly to 0, betas (0.85, 0.99))."""
    steps = o["steps"]
    pick = lambda name, default: o[name] if o.get(name) is not None else default  # noqa: E731
    if o["arch"] == "microgpt":
        optimizer = Adam(lr=pick("lr", 0.01), beta1=pick("beta1", 0.85), beta2=pick("beta2", 0.99))
    else:
        lr = pick("lr", 1e-3)
        optimizer = Recipe(lr=lr, min_lr=pick("min_lr", lr / 10),
                           warmup_steps=pick("warmup_steps", min(100, steps // 10)),
                           lr_decay_steps=pick("lr_decay_steps", steps), beta1=pick("beta1", 0.9),
                           beta2=pick("beta2", 0.95), weight_decay=pick("weight_decay", 0.1),
                           grad_clip=pick("grad_clip", 1.0))
    return TextSettings(steps, o["batch_size"], optimizer, o["grad_accum"],
                        pick("eval_every", 250), pick("eval_iters", 20), o["seed"],
                        o["steps_per_call"], o["threads"])


def check_schedule(o: dict, settings: TextSettings) -> None:
    """Refuse (one line, status 2) a default decay that would end inside the warm-up."""
    r = settings.recipe
    if isinstance(r, Recipe) and o["lr_decay_steps"] is None and \
            r.warmup_steps >= r.lr_decay_steps:
        raise bad_option(f"--warmup-steps {r.warmup_steps} must be less than --steps "
                         f"{o['steps']}, where the learning rate's decay ends (or give "
                         "--lr-decay-steps beyond the warm-up)")


def _resume_plan(resume: Path, given: dict, steps_per_call: int, threads: int):
    """(checkpoint, settings, data path, encoding, val_fraction) of a run on a stream to
    resume (resume.stream_plan's rules); a one-line error when a given option conflicts
    with it (status 2) or it cannot be resumed."""
    where = f"checkpoint {str(resume)!r}"
    with user_errors():
        ck = ckpt.load(resume)
    try:
        return (ck, *resume_rules.stream_plan(ck, given, steps_per_call, threads, where))
    except resume_rules.ResumeConflict as e:
        raise bad_option(str(e)) from None
    except resume_rules.ResumeError as e:
        raise click.ClickException(str(e)) from None


def train(ctx, o: dict, given: dict, say, quiet: bool, world=None) -> None:
    """`train --data-format text` or `tokens`: o["arch"]'s model (GPT-2 with nanoGPT's
    recipe, or microgpt with its Adam) on a text file's stream or on token shards
    (shards.py), evaluated every --eval-every steps, saved to --out with its loss
    curves beside it. o: the options, with "arch" and "data_format" resolved
    (cli._resolve_run). ``world``: the MPI job (cli_mpi.py) whose ranks share each
    step's windows, or None."""
    arch, fmt = o["arch"], o["data_format"]
    resume, out = o["resume"], o["out"]
    ck = init = None
    if arch == "microgpt":
        for name in RECIPE_ONLY:
            if given.get(name) is not None and not (name == "bias" and given[name]):
                shown = "--no-bias" if name == "bias" else _opt(name)
                raise bad_option(f"{shown} applies to --arch gpt2 (nanoGPT's recipe); "
                                 "microgpt trains with Adam (--lr, --beta1, --beta2)")
    if fmt == "tokens":
        for name in ("vocab_size", "val_fraction", "encoding"):
            if given.get(name) is not None:
                raise bad_option(f"{_opt(name)} does not apply to --data-format tokens: the "
                                 "shards were split and tokenized by `prepare`")
        if o["tokenizer"] in ("char", "bpe"):
            raise bad_option(f"--tokenizer {o['tokenizer']} does not apply to --data-format "
                             "tokens: the shards' folder has its tokenizer.json (or give "
                             "--tokenizer PATH)")
    if o["init_from"] is not None:
        init = _init_source(o["init_from"], given, arch)
    elif fmt == "text" and resume is None and o["vocab_size"] is not None and \
            o["tokenizer"] != "bpe":
        raise bad_option("--vocab-size applies to --tokenizer bpe (the other tokenizers have "
                          "their own)")
    if resume is None:
        if o["data"] is None:
            raise bad_option("--data-format text needs --data FILE (a text file, e.g. "
                             "tinyshakespeare.txt)" if fmt == "text" else
                             "--data-format tokens needs --data DIR (a folder of token "
                             "shards: `microgpt-fut prepare`)")
        settings = settings_from_options(o)
        check_schedule(o, settings)
        try:
            settings.validate()
        except ValueError as e:
            raise bad_option(str(e)) from None
        if init is None and o["n_embd"] % o["n_head"]:
            raise bad_option(f"--n-embd {o['n_embd']} is not divisible by --n-head {o['n_head']}")
        data_path, encoding, val_fraction = o["data"], o["encoding"], o["val_fraction"]
    else:
        ck, settings, data_path, encoding, val_fraction = _resume_plan(
            resume, given, o["steps_per_call"], o["threads"])
        out = out if "out" in given else resume
    windows = settings.batch_size * settings.grad_accum
    cli_mpi.check_split(world, windows, f"--batch-size {settings.batch_size} x --grad-accum "
                                        f"{settings.grad_accum} = {windows} windows a step")
    check_out(out, data_path, resume, o["overwrite"])
    lock_out(ctx, out)
    with user_errors():
        curves.check_writable(out)
    device = (cli_mpi.local_device(o["backend"], o["device"], world.local_rank)
              if world is not None else o["device"])
    rt = runtime(o["backend"], device, quiet, program=FAMILIES[arch].program)
    with user_errors():
        block_size = (ck.config.block_size if ck else init.config.block_size if init
                      else o["block_size"])
        if ck is not None:
            config, tok = ck.config, ck.text_tokenizer()
        elif init is not None:
            config, tok = init.config, init.text_tokenizer()
        elif fmt == "tokens":
            tok = load_tokenizer(o["tokenizer"]) if o["tokenizer"] else None
        else:
            tok = _new_tokenizer(o, data_path, encoding, val_fraction)
        if fmt == "tokens":
            data = load_tokens(data_path, block_size, tok if ck is None and init is None
                               else None)
        else:
            data = load_text(data_path, block_size, val_fraction, encoding, tok)
        if ck is None and init is None:
            sizes = (data.vocab.size, o["n_embd"], o["n_head"], o["n_layer"], o["block_size"],
                     o["mlp_width"])
            config = GPT2Config(*sizes, o["bias"]) if arch == "gpt2" else GPTConfig(*sizes)
            if config.vocab_size < config.min_vocab:
                raise DataError(f"--data {str(data_path)!r}: its tokenizer has "
                                f"{config.vocab_size} token(s); a model needs at least "
                                f"{config.min_vocab} (give a text of more characters)")
        config.validate()
    check_memory(config, o["backend"], rt, settings.batch_size, settings.steps_per_call,
                 0 if fmt == "tokens" else data.n_tokens, settings.grad_accum,
                       settings.threads * ranks_here(world), settings.eval_iters, out)
    exchange = world.exchange if world is not None else None
    with user_errors():
        if ck is not None:
            run = TextTraining.resume(rt, ck, data, settings, exchange)
        elif init is not None:
            run = TextTraining.start(rt, data, settings, config, init.params,
                                     _source_name(o["init_from"]), exchange, fmt)
        else:
            run = TextTraining.start(rt, data, settings, config, exchange=exchange,
                                     data_format=fmt)
    choices_file = o["eval_choices"] or (ck.train.get("eval_choices") if ck is not None
                                         else None)
    if choices_file is not None:
        with user_errors():
            examples = choices.read_examples(choices_file)
            choices.check_fits(examples, data.vocab, config.block_size,
                               f"--eval-choices {str(choices_file)!r}")
            run.choices = (str(Path(choices_file).resolve()), examples)
    kind = "characters" if isinstance(data.vocab, CharVocab) else "byte-level BPE"
    if fmt == "tokens":
        say(f"data: {data.path} | token shards, {data.n_tokens:,} tokens, vocab size "
            f"{data.vocab.size} ({kind}) | train {len(data.train):,} tokens, "
            + (f"val {len(data.val):,}" if len(data.val) else "no validation shards"))
    else:
        say(f"data: {data.path} | {data.n_chars:,} characters, {data.n_tokens:,} tokens, vocab "
            f"size {data.vocab.size} ({kind}) | train {len(data.train):,} tokens, "
            + (f"val {len(data.val):,}" if len(data.val) else "no validation (--val-fraction 0)"))
    if init is not None:
        say(f"starting from the weights of {str(o['init_from'])!r}"
            + (f" (step {init.step} of its run)" if init.step else ""))
    biases = f", {'with' if config.bias else 'no'} biases" if arch == "gpt2" else ""
    say(f"model: {arch}, {config.n_layer} layers, {config.n_head} heads, n_embd {config.n_embd}, "
        f"block size {config.block_size}{biases} | "
        f"num params: {config.num_params() / 1e6:.2f}M | backend: {o['backend']}"
        + cli_mpi.describe(world, settings.threads)
        + (f" ({rt.device.name})" if rt.device else ""))
    if ck is not None:
        say(f"resuming {str(resume)!r} at step {run.step} of {run.num_steps}"
            + (": the run is complete, nothing to train" if run.done else ""))
    if world is not None:
        cli_mpi.share_run(world, cli_mpi.RunSpec(run.checkpoint(), run.dataset, settings,
                                                 o["backend"], o["device"], o["save_every"],
                                                 str(out)), run)
    ours = ck.step if ck is not None and out.exists() and os.path.samefile(out, resume) else None
    stopped = _train_and_save(run, out, o["save_every"], say, quiet, ours, world)
    if stopped:
        exit_saved(ctx, stopped, run, out, world=world)
    if run.seconds:
        say(f"trained {run.step - (ck.step if ck else 0)} steps in {run.seconds:.1f} s "
            f"({run.positions / max(run.seconds, 1e-9):,.0f} tok/s)")
    if run.evals:
        say(f"final: {_eval_line(*run.evals[-1])}")
    csv_path, png_path = curves.paths(out)
    say(f"saved {out}, {csv_path.name}, {png_path.name}")
    exit_if_stdout_closed(ctx, saved_step(run, out))
    n = o["samples"] if o["samples"] is not None else 1
    temperature = o["temperature"] if o["temperature"] is not None else 0.8
    with user_errors():
        print_samples(iter_continuations(run.model, data.vocab, ["\n"], n, SAMPLE_TOKENS,
                                         temperature, 0, settings.seed), n, "text")


def _source_name(path: Path) -> str:
    return str(Path(path).resolve())


def _init_source(path: Path, given: dict, arch: str) -> ckpt.Checkpoint:
    """The model of --init-from: a text or tokens checkpoint of ours of ``arch``, or a
    Hugging Face GPT-2 folder (weights, sizes, tokenizer; no optimiser state). A --block-size below the
    model's crops its positional table (nanoGPT's crop_block_size). One-line errors
    when it cannot be read, is not a GPT-2 text model, or an option conflicts."""
    where = f"--init-from {str(path)!r}"
    with user_errors():
        init = hf.load_checkpoint(path) if hf.is_folder(path) else ckpt.load(path, adam=False)
    if init.arch != arch or init.data_format == "lines":
        raise bad_option(f"{where} is a {init.arch} model of {init.data_format}; this run "
                         f"starts from a {arch} model of text or tokens")
    for name in ("tokenizer", "vocab_size"):
        if given.get(name) is not None:
            raise bad_option(f"{_opt(name)} conflicts with {where}: the run keeps the "
                              "model's tokenizer")
    for name in resume_rules.STREAM_SIZES:
        value = given.get(name)
        if value is None or value == getattr(init.config, name):
            continue
        if name == "block_size" and value < init.config.block_size:
            continue
        shown = _opt(name) if name != "bias" else "--bias/--no-bias"
        raise bad_option(f"{shown} {value} conflicts with {where}, whose model has "
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
            raise bad_option("--tokenizer bpe needs --vocab-size N (e.g. 1024; GPT-2 has 50257)")
        if o["vocab_size"] < BPE_MIN_VOCAB:
            raise bad_option(f"--vocab-size {o['vocab_size']} is too small for --tokenizer bpe: "
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

    title = (f"{Path(run.data.path).name}: {run.model.config.arch} "
             f"{run.model.config.num_params() / 1e6:.2f}M params")

    def progress(step, total, loss, norm, rate, first):
        if bar is not None:
            bar.update(step - bar.n)
            grad = "" if math.isnan(norm) else f" | norm {norm:.2f}"
            bar.set_postfix_str(f"loss {loss:.4f}{grad} | {rate:,.0f} tok/s")
        else:
            grad = "" if math.isnan(norm) else f"| grad norm {norm:.4f} (step {step}) "
            say(f"step {step:{len(str(total))}d} / {total} | {mean_loss(loss, first, step)} "
                f"{grad}| {rate:,.0f} tok/s")

    def on_eval(step, *losses_and_scores):
        write(_eval_line(step, *losses_and_scores))

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
        return train_and_save(run, out, save_every, write, ours, advance, curves_beside,
                                    world)
    finally:
        if bar is not None:
            bar.close()


def _eval_line(step: int, train_loss: float, val_loss: float, *scores: float) -> str:
    """nanoGPT's evaluation line; without a validation split (--val-fraction 0, its val
    loss NaN) the train loss alone; with --eval-choices its acc and acc_norm after."""
    line = f"step {step}: train loss {train_loss:.4f}"
    line = line if math.isnan(val_loss) else f"{line}, val loss {val_loss:.4f}"
    if scores:
        line += f", acc {scores[0]:.4f}, acc_norm {scores[1]:.4f}"
    return line


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
        rows = family_of(model.config).continuations(model, seed, temperature, top_k, rows_of,
                                                     max_new, first, len(prompts) == 1)
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
        raise bad_option(f"--max-new-tokens must be at least 0, got {o['max_new_tokens']}")
    n = o["num"] if o["num"] is not None else 1
    temperature = o["temperature"] if o["temperature"] is not None else 0.8
    prompts = list(o["prompt"]) or ["\n"]
    vocab = ck.text_tokenizer()
    if any(not p for p in prompts):
        raise bad_option("--prompt is empty; give at least one character")
    try:  # before the backend starts; a prompt the model cannot read is a usage error
        lengths = [len(vocab.encode(p, "--prompt")) for p in prompts]
    except DataError as e:
        raise bad_option(str(e)) from None
    T = ck.config.block_size
    for p, length in zip(prompts, lengths):
        if length > T:
            click.echo(f"note: --prompt {_short(p)} has {length} tokens, more than the model's "
                       f"context of {T}: it sees the last {T}", err=True)
    family = family_of(ck.config)
    rt = runtime(o["backend"], o["device"], quiet=False, program=family.program)
    with user_errors():
        # microgpt continues text on the host, one call per token for all rows: one context
        contexts = min(o["threads"], n * len(prompts)) if family.arch == "gpt2" else 1
        model = family.model(rt, ck.config, 0, contexts, None, ck.params, step=ck.step)
        print_samples(iter_continuations(model, vocab, prompts, n, o["max_new_tokens"],
                                         temperature, o["top_k"], o["seed"]),
                      n * len(prompts), "text", o["plain"])


def _short(text: str, width: int = 30) -> str:
    return repr(text if len(text) <= width else text[:width] + "...")
