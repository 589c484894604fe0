"""The command line: ``microgpt-fut train | sample | prepare | eval | export-hf | devices``.

Every error the user can cause is reported as one line ``Error: ...`` on stderr,
never a traceback, with click's exit statuses: 2 for a usage error (an option's
value out of its range, a --config value of the wrong type, or options that cannot
go together: with each other, or with the data, checkpoint or model they name; the
line names the option to change), 1 for the rest (a file missing, unreadable or
unusable, a run that fails). A signal that stops a run gives 128 + its number, a
closed stdout 141 (SIGPIPE's).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import shlex
import signal
import time
from pathlib import Path

import click
from click.core import ParameterSource
from tqdm import tqdm

from ..training import checkpoint as ckpt
from ..training import choices
from . import mpi as cli_mpi
from . import text as cli_text
from ..training import hf
from ..data import prepare as preparation
from ..training import resume as resume_rules
from ..data.lines import Vocab, load_data
from ..training.family import FAMILIES, family_of
from ..models.gpt2 import GPT2Config
from ..models.microgpt import GPTConfig
from ..parallel.mpi_world import World, launched
from ..interrupt import stop_on_signals
from ..training.loop import lock_path
from ..backend.runtime import BACKENDS, build_dir, built_backends, opencl_devices
from .sample_output import print_samples
from ..data.tokenizer import load_tokenizer, train_bpe
from ..training.lines import Training, TrainSettings, iter_names
from .common import (bad_option, check_memory, check_out, exit_if_stdout_closed, exit_saved,
                     exit_with, first_line, lock_out, ranks_here, runtime, saved_step,
                     say_line, train_and_save, user_errors)

_NO_ARGS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())
# Integer options: the kernels take 64-bit integers, so larger values are refused by
# click with one line (they used to end in an OverflowError traceback).
_INT_MAX = 2**62


class _Int64(click.types.IntParamType):
    """click's INTEGER, refusing magnitudes above 2**62 with click's one-line error."""

    def convert(self, value, param, ctx):
        n = super().convert(value, param, ctx)
        if abs(n) > _INT_MAX:
            self.fail(f"{n} is too large (at most 2**62)", param, ctx)
        return n


_INT = _Int64()


def _one_line_usage(e: click.UsageError) -> click.ClickException:
    """A usage error as one line (click prints usage and a hint on extra lines)."""
    msg = first_line(e.format_message())
    if e.ctx is not None:
        msg += f" (see '{e.ctx.command_path} --help')"
    out = click.ClickException(msg)
    out.exit_code = e.exit_code
    return out


class _OneLineUsage:
    """Mixin: usage errors while parsing arguments become one-line errors."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:
            if _NO_ARGS_HELP and isinstance(e, _NO_ARGS_HELP):
                raise
            raise _one_line_usage(e) from None


class _Command(_OneLineUsage, click.Command):
    pass


class _Group(_OneLineUsage, click.Group):
    command_class = _Command

    def main(self, args=None, prog_name=None, **extra):
        """click's main; started by an MPI launcher as several processes, cli_mpi's: rank
        0 runs the command, and for ``train`` the other ranks train with it."""
        if launched()[1] > 1 and extra.get("standalone_mode", True):
            cli_mpi.main(lambda **kw: super(_Group, self).main(args, prog_name,
                                                               **{**extra, **kw}), args)
        return super().main(args, prog_name, **extra)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # Ctrl-C outside training (which handles its own)
            raise exit_with(130, "interrupted") from None
        except MemoryError:
            raise click.ClickException("out of memory: try smaller sizes, --batch-size or "
                                       "--steps-per-call") from None

    def resolve_command(self, ctx, args):
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as e:
            raise _one_line_usage(e) from None


def _check_temperature(ctx, param, value):
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise click.BadParameter(f"must be a finite number >= 0 (0 is greedy), got {value}")
    return value


def _check_lr(ctx, param, value):
    if value is not None and not (math.isfinite(value) and value > 0):
        raise click.BadParameter(f"must be a positive number, got {value}")
    return value


def _check_positive(ctx, param, value):
    if value is not None and value < 1:
        raise click.BadParameter(f"must be at least 1, got {value}")
    return value


def _check_threads(threads: int, backend: str) -> None:
    if threads > 1 and backend != "c":
        raise bad_option(f"--threads {threads} applies to --backend c only (multicore, "
                          "opencl and cuda run their own parallel kernels)")


def _load_config(ctx, param, value):
    """--config FILE (TOML): option values (nanoGPT's names, with - or _) used where the
    command line gives none; read before the other options (eager). Each value must
    have its option's type (``config_value``); paths are relative to the file."""
    if value is None:
        return None
    import tomllib

    where = repr(str(value))
    try:
        with open(value, "rb") as f:
            table = tomllib.load(f)
    except OSError as e:
        raise click.BadParameter(f"cannot read {where}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise click.BadParameter(f"{where} is not UTF-8 text, as TOML must be (byte "
                                 f"0x{e.object[e.start]:02x} at offset {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise click.BadParameter(f"{where} is not valid TOML: {first_line(str(e))}") from None
    params = {p.name: p for p in ctx.command.params if p.name != "config"}
    defaults = {}
    for key, v in table.items():
        name = key.replace("-", "_")
        if name not in params:
            raise click.BadParameter(f"{where}: unknown setting {key!r}")
        defaults[name] = config_value(ctx, params[name], key, v, Path(value))
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    return value


# TOML's types (as tomllib gives them), for messages; bool before int (a bool is an int)
_TOML_TYPES = ((bool, "a boolean"), (int, "an integer"), (float, "a float"), (str, "a string"),
               (list, "an array"), (dict, "a table"))


def config_value(ctx, param: click.Parameter, key: str, value, path: Path):
    """The value of setting ``key`` of the --config file ``path`` for the option
    ``param``, checked as the same value on the command line is (click's type and the
    option's callback) with no coercion between TOML's types: an integer option takes
    an integer (not 5.5, not true), a number option an integer or a float, a flag a
    boolean, the others a string. A path is relative to the file's folder (so is
    --tokenizer's, unless char or bpe). Raises click.BadParameter, one line naming the
    key, the file and the type expected."""
    t, opt = param.type, "/".join(param.opts + param.secondary_opts)
    if getattr(param, "is_flag", False) or isinstance(t, click.types.BoolParamType):
        ok, expected = isinstance(value, bool), "true or false"
    elif isinstance(t, click.types.IntParamType):
        ok, expected = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif isinstance(t, click.types.FloatParamType):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        expected = "a number"
    elif isinstance(t, click.Choice):
        ok, expected = isinstance(value, str), "one of " + ", ".join(map(repr, t.choices))
    elif isinstance(t, click.Path):
        ok, expected = isinstance(value, str), "a path (a string, relative to the config file)"
    else:
        ok, expected = isinstance(value, str), "a string"
    shown = json.dumps(value, default=str, ensure_ascii=False)
    where = f"{str(path)!r}: {key} = {shown}"
    if not ok:
        kind = next((n for cls, n in _TOML_TYPES if isinstance(value, cls)), "a date or time")
        raise click.BadParameter(f"{where} is {kind}; {opt} takes {expected}")
    if isinstance(t, click.Path) or (param.name == "tokenizer" and value not in ("char", "bpe")):
        value = str(path.parent / value)
    try:
        value = param.type_cast_value(ctx, value)
        return param.callback(ctx, param, value) if param.callback else value
    except click.BadParameter as e:
        raise click.BadParameter(f"{where}: {first_line(e.message)}") from None


_backend_opt = click.option(
    "--backend", type=click.Choice(BACKENDS), default="c", show_default=True,
    help="Compiled kernels to run on. c (one CPU core) is the fastest on CPUs for "
         "microgpt's tiny sizes; multicore/opencl/cuda pay off for large batches.")
_device_opt = click.option("--device", type=_INT, default=None,
                           help="OpenCL device number (see `microgpt-fut devices`; default: "
                                "the first GPU, else the first device), or CUDA device number "
                                "(default: Futhark's choice).")


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="microgpt-fut")
def main():
    """Karpathy's microgpt (a tiny GPT that learns to make up names), on Futhark kernels.

    \b
    microgpt-fut train                 train on built-in US first names, save model.safetensors
    microgpt-fut train --data FILE     one document per line (e.g. a list of names)
    microgpt-fut sample -n 10          new names from the saved model
    microgpt-fut devices               OpenCL devices for --backend opencl
    microgpt-fut export-hf M.safetensors DIR   a GPT-2 checkpoint as a Hugging Face folder
    microgpt-fut prepare FILE... --out DIR     text to token shards (--data-format tokens)
    microgpt-fut eval --choices FILE.jsonl     HellaSwag-style multiple-choice accuracy
    """


_RESUME_HELP = """With --resume FILE the run saved in FILE continues: its sizes, --steps (the
run's total, which fixes the learning-rate schedule), --lr, --seed and
--batch-size are the checkpoint's; give them only with the same values. The
data is read again from the file the checkpoint names (or --data) and must be
the same documents. --out defaults to FILE. On the c backend the result is
bit-identical to an uninterrupted run with the same --threads (multicore sums
are not bit-reproducible even between two identical runs, so there it agrees to
about 1e-6)."""


@main.command(epilog=_RESUME_HELP)
@click.option("--data", type=click.Path(path_type=Path), default=None,
              help="lines: a text file, one document per line (default: built-in US first "
                   "names); text: a text file, one token stream; tokens: a folder of token "
                   "shards (`prepare`).")
@click.option("--encoding", default="utf-8", show_default=True, help="Text encoding of --data.")
@_backend_opt
@_device_opt
@click.option("--steps", type=_INT, default=1000, show_default=True, callback=_check_positive,
              help="Training steps (Adam updates) of the whole run; with --resume, the "
                   "checkpoint's (it cannot change).")
@click.option("--batch-size", type=_INT, default=1, show_default=True, callback=_check_positive,
              help="Documents per step.")
@click.option("--n-embd", type=_INT, default=16, show_default=True, callback=_check_positive,
              help="Embedding width.")
@click.option("--n-head", type=_INT, default=4, show_default=True, callback=_check_positive,
              help="Attention heads (must divide --n-embd).")
@click.option("--n-layer", type=_INT, default=1, show_default=True, callback=_check_positive,
              help="Transformer layers.")
@click.option("--block-size", type=_INT, default=16, show_default=True, callback=_check_positive,
              help="Context length in tokens; longer documents are cut.")
@click.option("--mlp-width", type=_INT, default=None, callback=_check_positive,
              help="Hidden width of the MLP.  [default: 4 * n-embd]")
@click.option("--lr", type=float, default=None, callback=_check_lr,
              help="Peak learning rate: microgpt's Adam decays it linearly to 0; text runs "
                   "warm up to it and decay it to --min-lr.  [default: 0.01 names; 1e-3 text]")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=42, show_default=True,
              help="Seed for the shuffle, the initial weights and the samples.")
@click.option("--steps-per-call", type=_INT, default=50, show_default=True,
              callback=_check_positive,
              help="The most training steps fused into one kernel call (calls are also cut "
                   "to about 0.5 s, so that Ctrl-C never waits long).")
@click.option("--arch", type=click.Choice(["microgpt", "gpt2"]), default="microgpt",
              show_default=True, help="The model: microgpt's (rmsnorm, ReLU, no biases, Adam) "
                                      "or GPT-2's (LayerNorm, GELU, tied head, AdamW recipe).")
@click.option("--data-format", type=click.Choice(["lines", "text", "tokens"]), default=None,
              help="lines: one document per line with BOS (names); text: the whole file as "
                   "one token stream; tokens: a folder of token shards (`prepare`). Any "
                   "--arch trains on any of them.  [default: lines; text with --arch gpt2; "
                   "with --resume or --init-from, the model's]")
@click.option("--bias/--no-bias", default=True, show_default=True,
              help="gpt2: biases in the linear layers and LayerNorms (nanoGPT's bias).")
@click.option("--val-fraction", type=click.FloatRange(0, 1, max_open=True), default=0.1,
              show_default=True,
              help="text: the last fraction of the text held out for validation (0: none; "
                   "the run then evaluates the training split only).")
@click.option("--tokenizer", default=None, metavar="char|bpe|PATH",
              help="text: char (the text's characters), bpe (a byte-level BPE trained on the "
                   "training text, see --vocab-size), or a tokenizer.json, vocab.json (beside "
                   "merges.txt) or a folder holding them.  [default: char]")
@click.option("--vocab-size", type=_INT, default=None, callback=_check_positive,
              help="text, --tokenizer bpe: the BPE's vocabulary, at least 257 (256 bytes, "
                   "then merges, then <|endoftext|>; GPT-2 has 50257).")
@click.option("--grad-accum", type=_INT, default=1, show_default=True, callback=_check_positive,
              help="text, tokens: micro-batches of --batch-size accumulated per step.")
@click.option("--min-lr", type=float, default=None,
              help="text, tokens: learning rate at the end of the cosine decay.  [default: lr/10]")
@click.option("--warmup-steps", type=click.IntRange(0, _INT_MAX), default=None,
              help="text, tokens: steps of linear warm-up.  [default: min(100, steps/10)]")
@click.option("--lr-decay-steps", type=_INT, default=None,
              help="text, tokens: step where the cosine decay reaches --min-lr.  "
                   "[default: --steps]")
@click.option("--beta1", type=float, default=None,
              help="text, tokens: AdamW beta1.  [default: 0.9]")
@click.option("--beta2", type=float, default=None,
              help="text, tokens: AdamW beta2.  [default: 0.95]")
@click.option("--weight-decay", type=float, default=None,
              help="text, tokens: AdamW weight decay of the >= 2-D tensors.  [default: 0.1]")
@click.option("--grad-clip", type=float, default=None,
              help="text, tokens: clip the gradient to this global norm (0: off).  "
                   "[default: 1.0]")
@click.option("--eval-every", type=_INT, default=None, callback=_check_positive,
              help="text, tokens: evaluate both splits every N steps (and at the end).  "
                   "[default: 250]")
@click.option("--eval-iters", type=_INT, default=None, callback=_check_positive,
              help="text, tokens: batches per split and evaluation.  [default: 20]")
@click.option("--eval-choices", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="text, tokens: also score these multiple-choice questions (HellaSwag's "
                   "jsonl, as `eval --choices`) at each evaluation: acc and acc_norm in its "
                   "line, the CSV and the plot.  [default with --resume: the run's]")
@click.option("--config", type=click.Path(path_type=Path), default=None, is_eager=True,
              expose_value=False, callback=_load_config,
              help="TOML file of option values (e.g. weight_decay = 0.1), each of its option's "
                   "type (an integer for --steps, a string for a path), paths relative to "
                   "the file; the command line wins.")
@click.option("--threads", type=_INT, default=1, show_default=True, callback=_check_positive,
              help="c backend: split each batch over N CPU threads, one kernel context each "
                   "(use at most the cores; more than --batch-size is cut to it); their "
                   "gradients make one "
                   "Adam step. Pays off when a step takes more than a few ms (--n-embd 64 and "
                   "up, or larger batches).")
@click.option("--out", type=click.Path(path_type=Path), default=Path("model.safetensors"),
              show_default=True, help="Checkpoint file to write (with --resume: FILE).")
@click.option("--overwrite", is_flag=True,
              help="Replace a checkpoint of another run that --out holds (refused otherwise).")
@click.option("--save-every", type=_INT, default=None, callback=_check_positive,
              help="Also save the checkpoint to --out every N steps (atomically: a crash "
                   "leaves the previous one).")
@click.option("--resume", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="Continue the run saved in checkpoint FILE (see below).")
@click.option("--init-from", type=click.Path(path_type=Path), default=None, metavar="MODEL",
              help="Start a new run from the weights of checkpoint MODEL (its sizes and "
                   "vocabulary; fresh optimiser state, this run's own steps, lr and data): "
                   "to train more or fine-tune on other data.")
@click.option("--samples", type=click.IntRange(0, _INT_MAX), default=None,
              help="Samples to print after training.  [default: 20 names; 1 text]")
@click.option("--temperature", type=float, default=None, callback=_check_temperature,
              help="Sampling temperature (0 = greedy).  [default: 0.5 names; 0.8 text]")
@click.option("--quiet", "-q", is_flag=True, help="Print only the samples.")
@click.pass_context
def train(ctx, data, encoding, backend, device, steps, batch_size, n_embd, n_head, n_layer,
          block_size, mlp_width, lr, seed, steps_per_call, arch, data_format, bias,
          val_fraction, tokenizer, vocab_size, grad_accum, min_lr, warmup_steps,
          lr_decay_steps, beta1, beta2, weight_decay, grad_clip, eval_every, eval_iters, eval_choices, threads, out, overwrite, save_every,
          resume, init_from, samples, temperature, quiet):
    """Train a model and save it to --out, then print samples (microgpt's defaults).

    Ctrl-C (or SIGTERM, SIGHUP) stops after the current kernel call, saves the
    checkpoint to --out and exits with status 130 (143, 129); `train --resume`
    continues it. A closed stdout (`train ... | head -2`) does the same, as SIGPIPE:
    status 141. A loss or weights that become NaN or infinite stop training with an
    error naming the step, and no such checkpoint is ever saved (--out keeps the
    last finite one).

    `mpirun -n N microgpt-fut train ...` trains one run over N processes: each
    step's batch is split among them (each on its own device; --threads splits
    a process's share further), and rank 0 alone prints and saves.
    """
    world = ctx.find_object(World)
    say = (lambda *a, **k: None) if quiet else say_line
    given = {name: ctx.params[name] for name in ctx.params
             if ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE,
                                                   ParameterSource.ENVIRONMENT,
                                                   ParameterSource.DEFAULT_MAP)}
    _check_threads(threads, backend)
    if resume is not None and init_from is not None:
        raise bad_option("--init-from starts a new run from a model's weights and --resume "
                          "continues a run: give one of them")
    if resume is not None and hf.is_folder(resume):
        raise bad_option(f"--resume {str(resume)!r} is a Hugging Face model folder, which "
                          "holds no training run to continue: start a run from its weights "
                          f"with --init-from {shlex.quote(str(resume))}")
    arch, data_format = _resolve_run(given, arch, data_format, resume, init_from)
    o = {**ctx.params, "arch": arch, "data_format": data_format}
    if data_format != "lines":
        return cli_text.train(ctx, o, given, say, quiet, world)
    reads = _LINES_READS[arch]
    for name in _TEXT_ONLY:
        if name in reads:
            continue
        if name in given and given[name] != ctx.command.params[_param_index(ctx, name)].default:
            raise bad_option(f"{_opt_name(name)} applies to "
                             + "--data-format text and tokens runs (a run on lines has no "
                               "evaluations and one batch a step)")
    samples = 20 if samples is None else samples
    temperature = 0.5 if temperature is None else temperature
    ck = None
    if resume is None:
        if arch == "gpt2":  # nanoGPT's recipe, as text runs have it
            settings = cli_text.settings_from_options({**o, "grad_accum": 1})
            cli_text.check_schedule(o, settings)
        else:
            settings = TrainSettings(num_steps=steps, batch_size=batch_size,
                                     lr=0.01 if lr is None else lr, seed=seed,
                                     steps_per_call=steps_per_call, threads=threads)
        try:
            settings.validate()
        except ValueError as e:
            raise bad_option(str(e)) from None
        if n_embd % n_head:
            raise bad_option(f"--n-embd {n_embd} is not divisible by --n-head {n_head}")
    else:
        ck, settings, data, encoding = _plan_resume(resume, given, steps_per_call)
        settings = dataclasses.replace(settings, threads=threads)
        out = out if "out" in given else resume
    init = _init_source(init_from, given, arch) if init_from is not None else None
    cli_mpi.check_split(world, settings.batch_size, f"--batch-size {settings.batch_size}")
    check_out(out, data, resume, overwrite)
    lock_out(ctx, out)
    rt = runtime(backend, cli_mpi.local_device(backend, device, world.local_rank)
                 if world is not None else device, quiet, program=FAMILIES[arch].program)
    with user_errors():
        docs, info = load_data(data, encoding)
        if ck is not None:
            resume_rules.check_data(ck, info, f"checkpoint {str(resume)!r}")
    if settings.batch_size > len(docs):
        raise bad_option(f"--batch-size {settings.batch_size} is larger than the data "
                          f"({info.description}): a step would take some documents twice; "
                          f"use at most {len(docs):,}")
    if init is not None:
        vocab, config = Vocab(tuple(init.vocab)), init.config
        unknown = sorted(set("".join(docs)) - set(vocab.chars))
        if unknown:
            raise click.ClickException(
                f"{info.description}: characters {''.join(unknown)!r} are not in the vocabulary "
                f"of --init-from {str(init_from)!r}, whose model knows {''.join(vocab.chars)!r}")
    else:
        vocab = Vocab.from_docs(docs)
        config = ck.config if ck is not None else (
            GPTConfig(vocab.size, n_embd, n_head, n_layer, block_size, mlp_width)
            if arch == "microgpt" else
            GPT2Config(vocab.size, n_embd, n_head, n_layer, block_size, mlp_width, bias))
    T = config.block_size
    check_memory(config, backend, rt, settings.batch_size, settings.steps_per_call,
                  len(docs) * (T + 1), 1, settings.contexts * ranks_here(world), 0, out)
    say(f"data: {info.description}")
    if init is not None:
        say(f"starting from the weights of {str(init_from)!r} (step {init.step} of its run)")
    n_long = sum(len(d) > T - 1 for d in docs)
    if n_long and not quiet:
        click.echo(f"warning: {n_long} of {len(docs)} documents are longer than block size - 1 "
                   f"= {T - 1} characters and are cut", err=True)
    say(f"num docs: {len(docs)} | vocab size: {vocab.size} | num params: "
        f"{config.num_params():,} | backend: {backend}"
        + cli_mpi.describe(world, settings.contexts)
        + (f" ({rt.device.name})" if rt.device else ""))
    exchange = world.exchange if world is not None else None
    with user_errors():
        if init is not None:
            run = Training.start(rt, docs, settings, config, info, vocab, init.params,
                                 exchange=exchange)
            run.init_from = str(init_from.resolve())
        elif ck is None:
            run = Training.start(rt, docs, settings, config, info, exchange=exchange)
        else:
            run = Training.resume(rt, ck, docs, settings, info, exchange)
            say(f"resuming {str(resume)!r} at step {run.step} of {run.num_steps}"
                + (": the run is complete, nothing to train" if run.done else ""))
    if world is not None:
        cli_mpi.share_run(world, cli_mpi.RunSpec(run.checkpoint(), run.dataset,
                                                 settings, backend, device, save_every,
                                                 str(out)), run)
    ours = run.step if ck is not None and out.exists() and os.path.samefile(out, resume) else None
    stopped = train_and_save(run, out, save_every, say, ours, world=world)
    if stopped:
        same = f" --threads {settings.threads}" if settings.contexts > 1 else ""
        exit_saved(ctx, stopped, run, out, same, world)
    trained = run.step - (ck.step if ck is not None else 0)
    if trained:
        say(f"trained {trained} steps in {run.seconds:.2f} s "
            f"({run.positions / max(run.seconds, 1e-9):,.0f} tok/s)")
    last = min(100, run.num_steps)
    say(f"mean loss of the last {last} steps: {float(run.losses[-last:].mean()):.4f}")
    say(f"saved {out}")
    exit_if_stdout_closed(ctx, saved_step(run, out))
    with user_errors():
        print_samples(iter_names(run.model, run.vocab, samples, temperature, settings.seed),
                      samples, "names", header=not quiet)


def _resolve_run(given: dict, arch: str, data_format: str | None, resume: Path | None,
                 init_from: Path | None) -> tuple[str, str]:
    """(arch, data format) of a train command: the ones given; else those of the model
    --resume or --init-from names (a Hugging Face folder: gpt2 on text); else microgpt,
    and lines (text with --arch gpt2, as before lines were open to GPT-2). One-line
    errors when a given one conflicts with the model's."""
    source = next(((f"--{n.replace('_', '-')}", p) for n, p in (("resume", resume),
                                                                ("init_from", init_from))
                   if p is not None), None)
    if source is None:
        fmt = data_format or ("text" if arch == "gpt2" and "arch" in given else "lines")
        return arch, fmt
    opt, path = source
    if hf.is_folder(path):
        their_arch, their_fmt = "gpt2", "text"
    else:
        with user_errors():
            meta = ckpt.read_metadata(path)
        their_arch, their_fmt = meta.get("arch", "microgpt"), meta.get("data_format", "lines")
    what = f"a {their_arch} model of {their_fmt}"
    if "arch" in given and arch != their_arch:
        raise bad_option(f"--arch {arch} conflicts with {opt} {str(path)!r}, {what}: leave "
                         f"--arch out (or give --arch {their_arch})")
    if data_format is not None and data_format != their_fmt and (
            opt == "--resume" or "lines" in (data_format, their_fmt)):
        raise bad_option(f"--data-format {data_format} conflicts with {opt} {str(path)!r}, "
                         f"{what}: leave --data-format out (or give --data-format {their_fmt})")
    return their_arch, data_format or their_fmt


# Options that only text runs read.
_TEXT_ONLY = ("bias", "val_fraction", "tokenizer", "vocab_size", "grad_accum", "min_lr", "warmup_steps", "lr_decay_steps",
              "beta1", "beta2", "weight_decay", "grad_clip", "eval_every", "eval_iters",
              "eval_choices")


# Of those, the ones a run on lines reads, by arch: GPT-2 takes nanoGPT's recipe.
_LINES_READS = {"microgpt": (), "gpt2": ("bias", "min_lr", "warmup_steps", "lr_decay_steps",
                                         "beta1", "beta2", "weight_decay", "grad_clip")}


def _param_index(ctx, name: str) -> int:
    return [p.name for p in ctx.command.params].index(name)


def _opt_name(name: str) -> str:
    return "--no-bias" if name == "bias" else "--" + name.replace("_", "-")


_SIZE_OPTIONS = ("n_embd", "n_head", "n_layer", "block_size", "mlp_width", "bias")


def _init_source(path: Path, given: dict, arch: str) -> ckpt.Checkpoint:
    """The checkpoint of --init-from (without Adam's moments), or a one-line error: it
    cannot be read, is another arch, or a size option given conflicts with it."""
    where = f"--init-from {str(path)!r}"
    with user_errors():
        init = ckpt.load(path, adam=False)
    if init.arch != arch:
        raise bad_option(f"{where} is a {init.arch} model; this run trains {arch}")
    for name in _SIZE_OPTIONS:
        if given.get(name) is not None and given[name] != getattr(init.config, name, None):
            raise bad_option(f"{_opt_name(name)} {given[name]} conflicts with {where}, whose "
                              f"model has {getattr(init.config, name, None)}; leave it out (the "
                              "model keeps its sizes)")
    return init


def _plan_resume(resume: Path, given: dict, steps_per_call: int):
    """(checkpoint, its TrainSettings, data file or None, encoding) for --resume, or a
    one-line click error (status 2 when a given option conflicts with the checkpoint)."""
    where = f"checkpoint {str(resume)!r}"
    with user_errors():
        ck = ckpt.load(resume)
    try:
        settings = resume_rules.settings_for(ck, given, steps_per_call, where)
        data, encoding = resume_rules.data_source(ck, given.get("data"), given.get("encoding"),
                                                  where)
    except resume_rules.ResumeConflict as e:
        raise bad_option(str(e)) from None
    except resume_rules.ResumeError as e:
        raise click.ClickException(str(e)) from None
    return ck, settings, data, encoding


@main.command()
@click.option("-n", "--num", type=click.IntRange(0, _INT_MAX), default=None,
              help="Number of samples.  [default: 20 names; 1 text]")
@click.option("--temperature", type=float, default=None, callback=_check_temperature,
              help="Sampling temperature (0 = greedy).  [default: 0.5 names; 0.8 text]")
@click.option("--checkpoint", type=click.Path(path_type=Path),
              default=Path("model.safetensors"), show_default=True,
              help="Checkpoint to load, or a Hugging Face GPT-2 folder (config.json, "
                   "model.safetensors, tokenizer files).")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=42, show_default=True,
              help="Sampling seed (sample i uses random stream i).")
@click.option("--prompt", multiple=True,
              help="Text models: the text to continue; give it several times for several "
                   "prompts, continued together (-n samples of each).  [default: a newline]")
@click.option("--max-new-tokens", type=_INT, default=500, show_default=True,
              help="Text models: tokens to generate after the prompt (characters for a "
                   "character vocabulary; a byte-level BPE's tokens are bytes and merges of "
                   "them).")
@click.option("--top-k", type=click.IntRange(0, _INT_MAX), default=0, show_default=True,
              help="Text models: draw only from the k likeliest tokens (0: all).")
@_backend_opt
@_device_opt
@click.option("--threads", type=_INT, default=1, show_default=True, callback=_check_positive,
              help="c backend: split the samples over N CPU threads (the names are the same).")
@click.option("--plain", is_flag=True,
              help="One sample per line and nothing else, for pipes: names as they are, "
                   "text samples as JSON strings.")
@click.pass_context
def sample(ctx, num, temperature, checkpoint, seed, prompt, max_new_tokens, top_k, backend,
           device, threads, plain):
    """Print samples of a trained checkpoint: new names, or continuations of --prompt
    for a text model (nanoGPT's sample.py), each as soon as it is made. Ctrl-C (or
    SIGTERM, SIGHUP) keeps what was printed and says how many."""
    _check_threads(threads, backend)
    with user_errors():
        ck = (hf.load_checkpoint(checkpoint) if hf.is_folder(checkpoint) else
              ckpt.load(checkpoint, adam=False))
    if ck.data_format != "lines":
        return cli_text.sample(ck, dict(ctx.params))
    for name in ("prompt", "max_new_tokens", "top_k"):
        if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE:
            raise bad_option(f"--{name.replace('_', '-')} applies to text models; "
                              f"{str(checkpoint)!r} is a names model")
    num = 20 if num is None else num
    temperature = 0.5 if temperature is None else temperature
    if num == 0:
        return
    family = family_of(ck.config)
    rt = runtime(backend, device, quiet=False, program=family.program)
    with user_errors():
        model = family.model(rt, ck.config, 0, min(threads, num), None, ck.params, step=ck.step)
        print_samples(iter_names(model, Vocab(tuple(ck.vocab)), num, temperature, seed), num,
                      "names", plain)


@main.command("export-hf")
@click.argument("checkpoint", type=click.Path(path_type=Path))
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--overwrite", is_flag=True,
              help="Write into a FOLDER that is not empty: the files an export writes are "
                   "replaced, every other file and folder stays.")
def export_hf(checkpoint, folder, overwrite):
    """Write the GPT-2 text CHECKPOINT as a Hugging Face folder FOLDER (config.json,
    model.safetensors, tokenizer files), which transformers' GPT2LMHeadModel and
    AutoTokenizer load with from_pretrained."""
    with user_errors():
        ck = ckpt.load(checkpoint, adam=False)
        files = hf.export_folder(ck, folder, overwrite)
    click.echo(f"wrote {folder}: {', '.join(files)}")


@main.command("eval")
@click.option("--checkpoint", type=click.Path(path_type=Path),
              default=Path("model.safetensors"), show_default=True,
              help="A text checkpoint, or a Hugging Face GPT-2 folder.")
@click.option("--choices", "choices_file", required=True, type=click.Path(path_type=Path),
              help="Questions in HellaSwag's jsonl (ctx, endings, label), e.g. "
                   "hellaswag_val.jsonl.")
@_backend_opt
@_device_opt
@click.pass_context
def eval_command(ctx, checkpoint, choices_file, backend, device):
    """Multiple-choice accuracy as the seed's hellaswag.py: each ending is scored by the
    loss of its tokens after the context; acc picks the lowest summed loss, acc_norm
    the lowest mean loss per token."""
    with user_errors():
        examples = choices.read_examples(choices_file)
        ck = (hf.load_checkpoint(checkpoint) if hf.is_folder(checkpoint) else
              ckpt.load(checkpoint, adam=False))
    if ck.data_format == "lines":
        raise bad_option(f"--checkpoint {str(checkpoint)!r} is a names model; eval scores "
                          "text models")
    tok = ck.text_tokenizer()
    with user_errors():  # every example, before the backend starts
        choices.check_fits(examples, tok, ck.config.block_size,
                           f"--choices {str(choices_file)!r}")
    family = family_of(ck.config)
    rt = runtime(backend, device, quiet=False, program=family.program)
    with user_errors():
        model = family.model(rt, ck.config, 0, params=ck.params, step=ck.step)
        s = choices.evaluate(examples, tok, lambda t: family.logits(model, t),
                             ck.config.block_size)
    say_line(f"{len(examples)} examples: acc {s.acc:.4f}, acc_norm {s.acc_norm:.4f}")
    exit_if_stdout_closed(ctx, f"scored {len(examples)} examples")


@main.command("prepare")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", required=True, type=click.Path(path_type=Path),
              help="The folder for the shards and tokenizer.json (made if missing).")
@click.option("--tokenizer", default="char", show_default=True, metavar="char|bpe|PATH",
              help="char (the inputs' characters), bpe (a byte-level BPE trained on the "
                   "inputs' first --bpe-sample-mb MB, see --vocab-size), or a tokenizer.json, "
                   "vocab.json (beside merges.txt) or a folder holding them.")
@click.option("--vocab-size", type=click.IntRange(257, _INT_MAX), default=None,
              help="--tokenizer bpe: the BPE's vocabulary (256 bytes, merges, <|endoftext|>).")
@click.option("--bpe-sample-mb", type=click.FloatRange(0, min_open=True), default=10.0,
              show_default=True, help="--tokenizer bpe: MB of the inputs the BPE learns from.")
@click.option("--shard-tokens", type=click.IntRange(1, _INT_MAX), default=100_000_000,
              show_default=True,
              help="Tokens per shard (llm.c's .bin: uint16 tokens up to a vocabulary of "
                   "65,536, else uint32).")
@click.option("--val-fraction", type=click.FloatRange(0, 1, max_open=True), default=0.1,
              show_default=True, help="The last fraction of all tokens held out for validation "
                                      "(ignored with --val).")
@click.option("--val", "val_inputs", multiple=True, type=click.Path(path_type=Path),
              help="A text file for the validation split (repeatable) instead of "
                   "--val-fraction.")
@click.option("--name", default=None,
              help="The shards' name: NAME_train_000000.bin.  [default: the first input's stem]")
@click.option("--overwrite", is_flag=True, help="Replace the shards that --out holds.")
@click.pass_context
def prepare_command(ctx, inputs, out, tokenizer, vocab_size, bpe_sample_mb, shard_tokens,
                    val_fraction, val_inputs, name, overwrite):
    """Tokenize text INPUTS (any size, streamed) into llm.c token shards in --out, for
    `train --data-format tokens --data DIR`: NAME_train_*.bin, NAME_val_*.bin and
    tokenizer.json. Every input is one document. The set is written beside the old one
    and moved into place at the end: a failure, Ctrl-C or SIGTERM leaves --out as it
    was."""
    P = preparation
    inputs, val_inputs = list(inputs), list(val_inputs)
    with user_errors():
        if (tokenizer == "bpe") != (vocab_size is not None):
            raise bad_option("--vocab-size goes with --tokenizer bpe" if tokenizer != "bpe"
                              else "--tokenizer bpe needs --vocab-size N (e.g. 512)")
        name = name or Path(inputs[0]).stem
        P.check_name(name)
        P.check_out_folder(out)
        lock = Path(os.path.abspath(out))
        try:  # the lock lies beside --out (as train's beside its checkpoint)
            out.parent.mkdir(parents=True, exist_ok=True)
            lock_out(ctx, lock)
        except OSError as e:
            raise P.out_error(out, e) from None
        P.remove_stale(out)  # a killed run's (kill -9): no other holds the lock now
    with stop_on_signals() as stop, user_errors():
        # a second signal ends the process at once: the unfinished set goes (prepare's
        # cleanup), and the lock file, as train's
        stop.on_second = lambda: f"interrupted twice: --out {str(out)!r} is as it was"
        stop.cleanups.append(lambda: lock_path(lock).unlink(missing_ok=True))
        # a closed stdout (SIGPIPE) does not stop prepare: its work is kept, then 141
        stopping = lambda: stop() and stop.signum != signal.SIGPIPE  # noqa: E731
        try:
            done, tok = _prepare(inputs, out, tokenizer, vocab_size, bpe_sample_mb, shard_tokens,
                                 val_fraction, val_inputs, name, overwrite, stopping,
                                 stop.cleanups)
        except preparation.Stopped:
            how = "interrupted" if stop.signum == signal.SIGINT else f"stopped by {stop.name}"
            raise exit_with(128 + stop.signum, f"{how}: --out {str(out)!r} is as it was "
                            "(nothing written)") from None
        say_line(f"wrote {out}: {done.train_tokens:,} train tokens in {len(done.train)} "
                 f"shard(s), {done.val_tokens:,} val tokens in {len(done.val)}, tokenizer.json "
                 f"(vocab_size {tok.size})")
    exit_if_stdout_closed(ctx, f"wrote {str(out)!r}")


def _prepare(inputs, out, tokenizer, vocab_size, bpe_sample_mb, shard_tokens, val_fraction,
             val_inputs, name, overwrite, should_stop, cleanups):
    """prepare's work after its checks and lock: the tokenizer, then prepare.prepare with
    a progress bar on stderr; (Prepared, tokenizer). Raises prepare.Stopped when
    should_stop() turns true, DataError as prepare.prepare."""
    P = preparation
    if tokenizer in ("char", "bpe"):
        P.check_rereadable(inputs + val_inputs, f"--tokenizer {tokenizer}")
    learned = 0
    if tokenizer == "char":
        tok = P.char_vocab(inputs + val_inputs, should_stop)
    elif tokenizer == "bpe":
        # the train split only: the inputs, of which --val-fraction's end validates
        size = sum(p.stat().st_size for p in inputs if p.is_file())  # bad ones: prepare says
        limit = int(bpe_sample_mb * 1e6)
        if not val_inputs:  # the split is in tokens, found later: a margin (checked)
            limit = min(limit, int(size * (1 - val_fraction) * P.TRAIN_MARGIN))
        sample = P.text_sample(inputs, limit)
        n = sum(len(t.encode("utf-8")) for t in sample)
        say_line(f"training a BPE of {vocab_size} tokens on the inputs' first {n:,} "
                 f"bytes" + (" (all of them)" if n >= size else
                             f" of {size:,} (--bpe-sample-mb {bpe_sample_mb:g}"
                             + ("" if val_inputs else f", --val-fraction {val_fraction:g}")
                             + ")"))
        tok = train_bpe(sample, vocab_size)
        learned = 0 if val_inputs else P.sample_tokens(tok, sample)
    else:
        tok = load_tokenizer(tokenizer)
    total = sum(p.stat().st_size for p in [*inputs, *val_inputs] if p.is_file())
    bar = tqdm(total=total, unit="B", unit_scale=True, disable=None, leave=False,
               desc="tokenizing")
    seen = {"tokens": 0, "t0": time.perf_counter()}

    def progress(n_bytes, n_tokens):
        seen["tokens"] += n_tokens
        bar.update(n_bytes)
        rate = seen["tokens"] / max(time.perf_counter() - seen["t0"], 1e-9)
        bar.set_postfix_str(f"{rate:,.0f} tok/s", refresh=False)

    try:
        return P.prepare(inputs, out, tok, name=name, shard_tokens=shard_tokens,
                         val_fraction=val_fraction, val_inputs=val_inputs, overwrite=overwrite,
                         progress=progress, learned_tokens=learned, should_stop=should_stop,
                         cleanups=cleanups), tok
    finally:
        bar.close()


@main.command()
def devices():
    """List OpenCL devices (numbered as --device expects) and the built backends."""
    devs = opencl_devices()
    if devs:
        click.echo("OpenCL devices (--backend opencl --device N):")
        for d in devs:
            click.echo(f"  {d.index}: {d.name} [{d.platform}]" + (" (GPU)" if d.is_gpu else ""))
    else:
        click.echo("no OpenCL devices found (install pocl-opencl-icd or a GPU driver)")
    built = built_backends()
    click.echo(f"built backends: {', '.join(built) if built else 'none'} (in {build_dir()})")


if __name__ == "__main__":  # pragma: no cover
    main(prog_name="microgpt-fut")
