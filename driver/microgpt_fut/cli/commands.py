"""The command line: ``microgpt-fut train | sample | prepare | eval | export-hf | devices``.

Every error the user can cause is reported as one line ``Error: ...`` on stderr,
never a traceback, with click's exit statuses: 2 for a usage error (an option's
value out of its range, a --config value of the wrong type, or options that cannot
go together: with each other, or with the data, checkpoint or model they name; the
line names the option to change), 1 for the rest (a file missing, unreadable or
unusable, a --config file among them, a run that fails). A signal that stops a run
gives 128 + its number, a closed stdout 141 (SIGPIPE's). stdout holds only a
command's product (samples, eval's scores, devices' list); progress, notes, banners
and errors go to stderr (common.say_note), as tqdm's and logging's.
"""
from __future__ import annotations

import json
import math
import os
import signal
import time
from pathlib import Path

import click
from click.core import ParameterSource
from tqdm import tqdm

from ..backend.runtime import BACKENDS, build_dir, built_backends, opencl_devices
from ..data import prepare as preparation
from ..data.tokenizer import load_tokenizer, train_bpe
from ..errors import DataError, OptionConflict
from ..parallel.mpi_world import World, launched
from ..training import checkpoint as ckpt
from ..training import choices, curves, hf, plan
from ..training.family import FAMILIES, FLOAT32_MAX, family_of
from ..training.kinds import KINDS
from . import mpi as cli_mpi
from ..interrupt import is_stdout_closed, stop_on_signals
from ..training.loop import lock_path
from .common import (bad_option, check_memory, check_out, eval_line, exit_if_stdout_closed,
                     exit_saved, exit_with, first_line, lock_out, ranks_here, runtime,
                     sample_rows, saved_step, say_line, say_note, train_and_save, user_errors)
from .sample_output import print_samples

_NO_ARGS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())
# Integer options: the kernels take 64-bit integers, so larger values are refused by
# click with one line (they used to end in an OverflowError traceback).
_INT_MAX = 2**62
INT64_MAX = 2**63 - 1


class _Int64(click.types.IntParamType):
    """click's INTEGER, refusing magnitudes above 2**62 with click's one-line error."""

    def convert(self, value, param, ctx):
        n = super().convert(value, param, ctx)
        if abs(n) > _INT_MAX:
            self.fail(f"{n} is too large (at most 2**62)", param, ctx)
        return n


_INT = _Int64()


class _Float32(click.types.FloatParamType):
    """click's FLOAT, refusing a value that float32 cannot hold (the kernels compute in
    float32: --lr 1e39 would be infinite) with click's one-line error."""

    def convert(self, value, param, ctx):
        x = super().convert(value, param, ctx)
        if math.isfinite(x) and abs(x) > FLOAT32_MAX:
            self.fail(f"{x:g} is too large for float32, which the kernels compute in (at most "
                      f"{FLOAT32_MAX:.4g})", param, ctx)
        return x


_F32 = _Float32()


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
        """click's main; started by an MPI launcher as several processes, cli/mpi.py's: rank
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


def _path_not_empty(ctx, param, value):
    """A path option's value as a Path; "" (which Path reads as '.') is a usage error."""
    if value is not None and str(value) == "":
        raise click.BadParameter("is empty; give a file name")
    return None if value is None else Path(value)


_CHECKS = {"lr": _check_lr}


def _check_threads(threads: int, backend: str) -> None:
    if threads > 1 and backend != "c":
        raise bad_option(f"--threads {threads} applies to --backend c only (multicore, "
                          "opencl and cuda run their own parallel kernels)")


def _load_config(ctx, param, value):
    """--config FILE (TOML): option values (the options' own names, with - or _, not
    nanoGPT's) used where the command line gives none; read before the other options (eager). Each value must
    have its option's type (``config_value``); paths are relative to the file."""
    if value is None:
        return None
    import tomllib

    where = repr(str(value))
    # a file missing, unreadable or not TOML: status 1, as any unusable file (its values
    # of the wrong type or an unknown key, below, are usage errors: 2)
    try:
        with open(value, "rb") as f:
            table = tomllib.load(f)
    except OSError as e:
        raise click.ClickException(f"cannot read --config {where}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise click.ClickException(f"--config {where} is not UTF-8 text, as TOML must be (byte "
                                   f"0x{e.object[e.start]:02x} at offset {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise click.ClickException(f"--config {where} is not valid TOML: "
                                   f"{first_line(str(e))}") from None
    params = {p.name: p for p in ctx.command.params if p.name != "config"}
    defaults = {}
    for key, v in table.items():
        name = key.replace("-", "_")
        if name not in params:
            raise click.BadParameter(f"{where}: unknown setting {key!r}: a setting is an "
                                     "option's name (lr, steps, eval_every, ...; see --help)")
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


def _where(name: str, text: str) -> str:
    """An option's help, prefixed with where it applies (plan.applies_to)."""
    values = plan.applies_to(name)[1]
    return f"{', '.join(values)}: {text}" if values else text


def _defaults(name: str) -> str:
    """An optimiser option's defaults, from the families' declarations."""
    per = [f"{f.arch} {f.optimizer_options[name]}" for f in FAMILIES.values()
           if name in f.optimizer_options]
    return f"  [default: {'; '.join(per)}]"


def _sample_defaults(attr: str) -> str:
    """The samples' defaults (-n, --temperature), from the kinds' declarations."""
    return (f"  [default: {getattr(KINDS['lines'], attr)} names; "
            f"{getattr(KINDS['text'], attr)} text]")


def _optimizer_opt(name: str, type_, text: str):
    return click.option("--" + name.replace("_", "-"), type=type_, default=None,
                        callback=_CHECKS.get(name), help=_where(name, text) + _defaults(name))


_RESUME_HELP = """With --resume FILE the run saved in FILE continues: its model and
tokenizer, --steps (the run's total, which fixes the learning-rate schedule), the
optimiser's options, --seed, --batch-size and the evaluations are the checkpoint's;
give them only with the same values. The data is read again from the file or folder
the checkpoint names (or --data) and must be the same. --out defaults to FILE. On the
c backend the result is bit-identical to an uninterrupted run with the same --threads
(multicore sums are not bit-reproducible even between two identical runs, so there it
agrees to about 1e-6). An option that the run's model family and data do not read is
refused, naming where it applies."""


@main.command(epilog=_RESUME_HELP)
@click.option("--data", type=click.Path(path_type=Path), default=None,
              help="lines: a text file, one document per line (default: built-in US first "
                   "names); text: a text file; tokens: a folder of token shards.")
@click.option("--encoding", default=None,
              help=_where("encoding", "text encoding of --data.  [default: utf-8]"))
@_backend_opt
@_device_opt
@click.option("--steps", type=_INT, default=1000, show_default=True, callback=_check_positive,
              help="Training steps (optimiser updates) of the whole run; with --resume, the "
                   "checkpoint's (it cannot change).")
@click.option("--batch-size", type=_INT, default=1, show_default=True, callback=_check_positive,
              help="Rows per step (per micro-batch with --grad-accum): documents, or windows "
                   "of a stream.")
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
@_optimizer_opt("lr", _F32, "peak learning rate: microgpt's Adam decays it linearly to 0; "
                            "nanoGPT's recipe warms up to it and decays it to --min-lr.")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=42, show_default=True,
              help="Seed for the shuffle, the initial weights and the samples.")
@click.option("--steps-per-call", type=_INT, default=50, show_default=True,
              callback=_check_positive,
              help="The most training steps fused into one kernel call (calls are also cut "
                   "to about 0.5 s, so that Ctrl-C never waits long).")
@click.option("--arch", type=click.Choice(list(FAMILIES)), default="microgpt",
              show_default=True, help="The model: microgpt's (rmsnorm, ReLU, no biases, Adam) "
                                      "or GPT-2's (LayerNorm, GELU, tied head, AdamW recipe).")
@click.option("--data-format", type=click.Choice(list(KINDS)), default=None,
              help="lines: one document per line with BOS (names); text: the whole file as "
                   "one token stream; tokens: a folder of token shards (`prepare`). Any "
                   "--arch trains on any of them.  [default: lines; text with --arch gpt2; "
                   "with --resume or --init-from, the model's]")
@click.option("--bias/--no-bias", default=None,
              help=_where("bias", "biases in the linear layers and LayerNorms (nanoGPT's "
                                  "bias).  [default: --bias]"))
@click.option("--val-fraction", type=click.FloatRange(0, 1, max_open=True), default=None,
              help=_where("val_fraction", "the last fraction of the text held out for "
                          "validation (0: none; the run then evaluates the training split "
                          "only).  [default: 0.1]"))
@click.option("--tokenizer", default=None, metavar="char|bpe|PATH",
              help=_where("tokenizer", "char (the text's characters), bpe (a byte-level BPE "
                          "trained on the training text, see --vocab-size), or a "
                          "tokenizer.json, vocab.json (beside merges.txt) or a folder holding "
                          "them.  [default: char; tokens: the shards' own]"))
@click.option("--vocab-size", type=_INT, default=None, callback=_check_positive,
              help=_where("vocab_size", "with --tokenizer bpe, the BPE's vocabulary, at least 257 "
                          "(256 bytes, then merges, then <|endoftext|>; GPT-2 has 50257)."))
@click.option("--grad-accum", type=_INT, default=None, callback=_check_positive,
              help=_where("grad_accum", "micro-batches of --batch-size accumulated per "
                                        "step.  [default: 1]"))
@_optimizer_opt("min_lr", _F32, "learning rate at the end of the cosine decay.")
@_optimizer_opt("warmup_steps", click.IntRange(0, _INT_MAX), "steps of linear warm-up.")
@_optimizer_opt("lr_decay_steps", _INT, "step where the cosine decay reaches --min-lr.")
@_optimizer_opt("beta1", _F32, "Adam's beta1.")
@_optimizer_opt("beta2", _F32, "Adam's beta2.")
@_optimizer_opt("weight_decay", _F32, "AdamW weight decay of the >= 2-D tensors.")
@_optimizer_opt("grad_clip", _F32, "clip the gradient to this global norm (0: off).")
@click.option("--eval-every", type=_INT, default=None, callback=_check_positive,
              help=_where("eval_every", "evaluate both splits every N steps (and at the "
                                        "end).  [default: 250]"))
@click.option("--eval-iters", type=_INT, default=None, callback=_check_positive,
              help=_where("eval_iters", "batches per split and evaluation.  [default: 20]"))
@click.option("--eval-choices", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help=_where("eval_choices", "also score these multiple-choice questions "
                          "(HellaSwag's jsonl, as `eval --choices`) at each evaluation: acc "
                          "and acc_norm in its line, the CSV and the plot.  [default with "
                          "--resume: the run's]"))
@click.option("--config", type=click.Path(path_type=Path), default=None, is_eager=True,
              expose_value=False, callback=_load_config,
              help="TOML file of option values under the option names, - or _ alike "
                   "(e.g. weight_decay = 0.1, lr = 1e-3, steps = 5000), each of its option's "
                   "type (an integer for --steps, a string for a path), paths relative to "
                   "the file; the command line wins.")
@click.option("--threads", type=_INT, default=1, show_default=True, callback=_check_positive,
              help="c backend: split each step's rows over N CPU threads, one kernel context "
                   "each (use at most the cores; more than the rows is cut to them); their "
                   "gradients make one optimiser step. Pays off when a step takes more than "
                   "a few ms (--n-embd 64 and up, or larger batches).")
@click.option("--out", type=click.Path(), default="model.safetensors",
              show_default=True, callback=_path_not_empty, help="Checkpoint file to write (with --resume: FILE).")
@click.option("--overwrite", is_flag=True,
              help="Replace a checkpoint of another run that --out holds (refused otherwise).")
@click.option("--save-every", type=_INT, default=None, callback=_check_positive,
              help="Also save the checkpoint to --out every N steps (atomically: a crash "
                   "leaves the previous one).")
@click.option("--resume", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="Continue the run saved in checkpoint FILE (see below).")
@click.option("--init-from", type=click.Path(path_type=Path), default=None, metavar="MODEL",
              help="Start a new run from the weights of MODEL, a checkpoint or a Hugging Face "
                   "GPT-2 folder (its sizes and tokenizer; a smaller --block-size crops its "
                   "positions; fresh optimiser state, this run's own steps, lr and data): to "
                   "train more or fine-tune on other data.")
@click.option("--samples", type=click.IntRange(0, _INT_MAX), default=None,
              help="Samples to print after training." + _sample_defaults("samples"))
@click.option("--temperature", type=_F32, default=None, callback=_check_temperature,
              help="Sampling temperature (0 = greedy)." + _sample_defaults("temperature"))
@click.option("--quiet", "-q", is_flag=True, help="Print only the samples.")
@click.pass_context
def train(ctx, **o):
    """Train a model and save it to --out, then print samples (microgpt's defaults).

    Ctrl-C (or SIGTERM, SIGHUP) stops after the current kernel call, saves the
    checkpoint to --out and exits with status 130 (143, 129); `train --resume`
    continues it. Progress goes to stderr and only the samples to stdout: `train ...
    | head -2` trains to the end, then prints samples until the reader has gone
    (status 141, as SIGPIPE). A loss or weights that become NaN or infinite stop training with an
    error naming the step, and no such checkpoint is ever saved (--out keeps the
    last finite one).

    `mpirun -n N microgpt-fut train ...` trains one run over N processes: each
    step's batch is split among them (each on its own device; --threads splits
    a process's share further), and rank 0 alone prints and saves.
    """
    world = ctx.find_object(World)
    quiet = o["quiet"]
    say = (lambda *a, **k: None) if quiet else say_note  # progress: stderr
    given = _given(ctx)
    _check_threads(o["threads"], o["backend"])
    with user_errors():
        p = plan.make(o, given)
    s, kind = p.settings, p.kind
    rows = s.batch_size * s.grad_accum
    cli_mpi.check_split(world, rows, f"--batch-size {s.batch_size}" + (
        f" x --grad-accum {s.grad_accum} = {rows} windows a step" if kind.evaluates else ""))
    out = p.out
    check_out(out, p.data, p.resume_path, o["overwrite"])
    lock_out(ctx, out)
    if kind.evaluates:
        with user_errors():
            curves.check_writable(out)
    device = (cli_mpi.local_device(o["backend"], o["device"], world.local_rank)
              if world is not None else o["device"])
    rt = runtime(o["backend"], device, quiet, program=p.family.program)
    with user_errors():
        data = kind.open(p)
        config = p.config(data)
    T = config.block_size
    check_memory(config, o["backend"], rt, s.batch_size, s.steps_per_call,
                 kind.data_tokens(data, T), s.grad_accum, s.contexts * ranks_here(world),
                 s.eval_iters if kind.evaluates else 0, out)
    line, warning = kind.describe(data, T)
    say(line)
    if warning and not quiet:
        click.echo(warning, err=True)
    if p.init is not None:
        say(f"starting from the weights of {str(p.init_path)!r}"
            + (f" (step {p.init.step} of its run)" if p.init.step else ""))
    biases = f", {'with' if config.bias else 'no'} biases" if hasattr(config, "bias") else ""
    say(f"model: {config.arch}, {config.n_layer} layers, {config.n_head} heads, n_embd "
        f"{config.n_embd}, block size {T}{biases} | vocab size {config.vocab_size} | num params: "
        f"{config.num_params():,} | backend: {o['backend']}"
        + cli_mpi.describe(world, s.contexts) + (f" ({rt.device.name})" if rt.device else ""))
    exchange = world.exchange if world is not None else None
    with user_errors():
        run = p.start(rt, data, config, exchange)
        if p.eval_choices is not None:
            examples = choices.read_examples(p.eval_choices)
            choices.check_fits(examples, data.vocab, T, f"--eval-choices {str(p.eval_choices)!r}")
            run.choices = (str(Path(p.eval_choices).resolve()), examples)
    if p.resume is not None:
        say(f"resuming {str(p.resume_path)!r} at step {run.step} of {run.num_steps}"
            + (": the run is complete, nothing to train" if run.done else ""))
    if world is not None:
        cli_mpi.share_run(world, cli_mpi.RunSpec(run.checkpoint(), run.dataset, s, o["backend"],
                                                 o["device"], o["save_every"], str(out)), run)
    ours = (p.resume.step if p.resume is not None and out.exists()
            and os.path.samefile(out, p.resume_path) else None)
    stopped = train_and_save(run, out, o["save_every"], say, quiet, ours, world,
                             curves_beside=kind.evaluates)
    if stopped:
        exit_saved(ctx, stopped, run, out, f" --threads {s.threads}" if s.contexts > 1 else "",
                   world)
    trained = run.step - (p.resume.step if p.resume is not None else 0)
    if trained:
        say(f"trained {trained} steps in {run.seconds:.2f} s "
            f"({run.positions / max(run.seconds, 1e-9):,.0f} tok/s)")
    if run.evals:
        say(f"final: {eval_line(*run.evals[-1])}")
    elif not kind.evaluates:
        last = min(100, run.num_steps)
        say(f"mean loss of the last {last} steps: {float(run.losses[-last:].mean()):.4f}")
    say(f"saved {out}" + (", {}, {}".format(*curves.paths(out)) if kind.evaluates else ""))
    exit_if_stdout_closed(ctx, saved_step(run, out))
    n = kind.samples if o["samples"] is None else o["samples"]
    temperature = kind.temperature if o["temperature"] is None else o["temperature"]
    tok = run.dataset.vocab
    prompts = kind.default_prompts(tok)
    rows = sample_rows(run.model.config, s.contexts, strict=False)
    with user_errors():
        print_samples(kind.iter_samples(run.model, tok, n, temperature, s.seed, prompts,
                                        max_rows=rows),
                      n * max(1, len(prompts)), "text" if kind.evaluates else "names",
                      header=not quiet)


def _given(ctx) -> dict:
    """The options the user gave (on the command line, in the environment or --config),
    with their values; the others take the plan's defaults."""
    return {name: ctx.params[name] for name in ctx.params
            if ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE,
                                                  ParameterSource.ENVIRONMENT,
                                                  ParameterSource.DEFAULT_MAP)}


@main.command()
@click.option("-n", "--num", type=click.IntRange(0, _INT_MAX), default=None,
              help="Number of samples (of each prompt)." + _sample_defaults("samples"))
@click.option("--temperature", type=_F32, default=None, callback=_check_temperature,
              help="Sampling temperature (0 = greedy)." + _sample_defaults("temperature"))
@click.option("--checkpoint", type=click.Path(path_type=Path),
              default=Path("model.safetensors"), show_default=True,
              help="Checkpoint to load, or a Hugging Face GPT-2 folder (config.json, "
                   "model.safetensors, tokenizer files).")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=42, show_default=True,
              help="Sampling seed (sample i uses random stream i).")
@click.option("--prompt", multiple=True,
              help="Text models: the text to continue; give it several times for several "
                   "prompts, continued together (-n samples of each).  [default: a newline, "
                   "or the vocabulary's first character when it has no newline]")
@click.option("--max-new-tokens", type=click.IntRange(0, _INT_MAX), default=500,
              show_default=True,
              help="Text models: tokens to generate after the prompt (characters for a "
                   "character vocabulary; a byte-level BPE's tokens are bytes and merges of "
                   "them).")
@click.option("--top-k", type=click.IntRange(0, _INT_MAX), default=0, show_default=True,
              help="Text models: draw only from the k likeliest tokens (0: all).")
@_backend_opt
@_device_opt
@click.option("--threads", type=_INT, default=1, show_default=True, callback=_check_positive,
              help="c backend: split the samples over N CPU threads (the samples are the "
                   "same).")
@click.option("--plain", is_flag=True,
              help="One sample per line and nothing else, for pipes: names as they are, "
                   "text samples as JSON strings.")
@click.pass_context
def sample(ctx, **o):
    """Print samples of a trained checkpoint: new names, or continuations of --prompt
    for a text model (nanoGPT's sample.py), each as soon as it is made. Ctrl-C (or
    SIGTERM, SIGHUP) keeps what was printed and says how many."""
    _check_threads(o["threads"], o["backend"])
    path = o["checkpoint"]
    with user_errors():
        ck = hf.load_model(path)
    kind = KINDS[ck.data_format]
    given = _given(ctx)
    for name in set(given) - {"num", "temperature", "checkpoint", "seed", "backend", "device",
                              "threads", "plain"} - set(kind.sample_options):
        where = " and ".join(k.name for k in KINDS.values() if name in k.sample_options)
        raise bad_option(f"{plan.opt(name)} applies to models of {where}; {str(path)!r} is a "
                         f"model of {kind.name}")
    n = kind.samples if o["num"] is None else o["num"]
    temperature = kind.temperature if o["temperature"] is None else o["temperature"]
    tok = kind.model_tokenizer(ck)
    prompts = list(o["prompt"]) or kind.default_prompts(tok)
    T = ck.config.block_size
    for p in prompts:  # before the backend starts; a prompt the model cannot read: usage
        with user_errors():
            try:
                length = len(tok.prompt_ids(p, "--prompt"))
            except DataError as e:
                chars = getattr(tok, "chars", None)  # a character model: what it can read
                raise OptionConflict(str(e) if chars is None or not p else
                                     f"{e}: write --prompt with the model's characters "
                                     f"{_shown(chars)}") from None
        if length > T:
            short = repr(p if len(p) <= 30 else p[:30] + "...")
            click.echo(f"note: --prompt {short} has {length} tokens, more than the model's "
                       f"context of {T}: it sees the last {T}", err=True)
    total = n * max(1, len(prompts))
    if total > INT64_MAX:  # sample i draws from the kernels' int64 stream i
        raise bad_option(f"-n {n} with {len(prompts)} prompts makes {total} samples, more "
                         f"than the kernels' random streams (2^63 - 1): at most -n "
                         f"{INT64_MAX // len(prompts)}")
    if total == 0:
        return
    family = family_of(ck.config)
    contexts = min(o["threads"], total)
    rows = sample_rows(ck.config, contexts)  # before anything is allocated
    rt = runtime(o["backend"], o["device"], quiet=False, program=family.program)
    with user_errors():
        model = family.model(rt, ck.config, 0, contexts, None, ck.params, step=ck.step)
        print_samples(kind.iter_samples(model, tok, n, temperature, o["seed"], prompts,
                                        o["max_new_tokens"], o["top_k"], rows),
                      total, "text" if kind.evaluates else "names", o["plain"])

def _shown(chars: str, limit: int = 100) -> str:
    """A vocabulary's characters for a message: repr, cut after ``limit`` of them."""
    return repr(chars[:limit]) + (f" (and {len(chars) - limit} more)" if len(chars) > limit
                                  else "")


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
    say_note(f"wrote {folder}: {', '.join(files)}")


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
        ck = hf.load_model(checkpoint)
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
@click.argument("inputs", nargs=-1, required=True, type=click.Path())
@click.option("--out", required=True, type=click.Path(),
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
                                      "(not with --val).")
@click.option("--val", "val_inputs", multiple=True, type=click.Path(),
              help="A text file for the validation split (repeatable) instead of "
                   "--val-fraction.")
@click.option("--name", default=None,
              help="The shards' name: NAME_train_000000.bin.  [default: the first input's stem]")
@click.option("--overwrite", is_flag=True,
              help="Replace the token set that --out holds (shards, tokenizer.json, vocab.json "
                   "and merges.txt, nanoGPT's train.bin, val.bin and meta.pkl); other files "
                   "stay.")
@click.pass_context
def prepare_command(ctx, inputs, out, tokenizer, vocab_size, bpe_sample_mb, shard_tokens,
                    val_fraction, val_inputs, name, overwrite):
    """Tokenize text INPUTS (any size, streamed) into llm.c token shards in --out, for
    `train --data-format tokens --data DIR`: NAME_train_*.bin, NAME_val_*.bin and
    tokenizer.json. Every input is one document. The set is written beside the old one
    and moved into place at the end: a failure, Ctrl-C or SIGTERM leaves --out as it
    was."""
    P = preparation
    # paths as given (an empty one would be the current folder once a Path)
    for label, given in [("--out", [out]), ("INPUTS", inputs), ("--val", val_inputs)]:
        if any(not g for g in given):
            raise bad_option(f"{label} is an empty path: give a "
                             + ("folder" if label == "--out" else "text file"))
    inputs, val_inputs, out = list(map(Path, inputs)), list(map(Path, val_inputs)), Path(out)
    if tokenizer.lower() in ("char", "bpe") and not os.path.lexists(tokenizer):
        tokenizer = tokenizer.lower()  # --tokenizer BPE: the kind, unless such a file exists
    with user_errors():
        if (tokenizer == "bpe") != (vocab_size is not None):
            raise bad_option("--vocab-size goes with --tokenizer bpe" if tokenizer != "bpe"
                              else "--tokenizer bpe needs --vocab-size N (e.g. 512)")
        given = _given(ctx)
        if "bpe_sample_mb" in given and tokenizer != "bpe":
            raise bad_option("--bpe-sample-mb goes with --tokenizer bpe")
        if "val_fraction" in given and val_inputs:
            raise bad_option("--val-fraction and --val both choose the validation split: "
                             "give one, not both")
        P.check_distinct(inputs, val_inputs)
        name = inputs[0].stem if name is None else name
        P.check_name(name)
        P.check_out_folder(out)
        lock = Path(os.path.abspath(out))
        # the folders above --out that it makes go again unless it succeeds (after the
        # lock, which lies in them: call_on_close runs the last registered first)
        made, succeeded = P.missing_parents(out), []
        ctx.call_on_close(lambda: succeeded or P.remove_empty(made))
        try:  # the lock lies beside --out (as train's beside its checkpoint)
            out.parent.mkdir(parents=True, exist_ok=True)
            lock_out(ctx, lock)
        except OSError as e:
            raise P.out_error(out, e) from None
        P.remove_stale(out)  # a killed run's (kill -9): no other holds the lock now
    with stop_on_signals() as stop, user_errors():
        # a second signal ends the process at once: the unfinished set goes (prepare's
        # cleanup), and the lock file, as train's
        stop.on_second = lambda: _interrupted_twice(out, made)
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
        say_note(f"wrote {out}: {done.train_tokens:,} train tokens in {len(done.train)} "
                 f"shard(s), {done.val_tokens:,} val tokens in {len(done.val)}, tokenizer.json "
                 f"(vocab_size {tok.size})")
        succeeded.append(True)
    exit_if_stdout_closed(ctx, f"wrote {str(out)!r}")


def _interrupted_twice(out: Path, made: list[Path]) -> str:
    """The line of a second signal during prepare, after its cleanup (the folders
    ``made`` above --out are removed here, last): --out is as it was, and the
    unfinished set's hidden folder is named if it could not be removed."""
    left = preparation.stages(out)
    preparation.remove_empty(made)
    return (f"interrupted twice: --out {str(out)!r} is as it was" + (
        f"; remove the unfinished {str(left[0])!r} (the next prepare into it does)"
        if left else ""))


def _prepare(inputs, out, tokenizer, vocab_size, bpe_sample_mb, shard_tokens, val_fraction,
             val_inputs, name, overwrite, should_stop, cleanups):
    """prepare's work after its checks and lock: the tokenizer, then prepare.prepare with
    a progress bar on stderr; (Prepared, tokenizer). Raises prepare.Stopped when
    should_stop() turns true, DataError as prepare.prepare."""
    P = preparation
    if tokenizer in ("char", "bpe"):
        P.check_rereadable(inputs, f"--tokenizer {tokenizer}", val_inputs)
    learned = []
    if tokenizer == "char":
        tok = P.char_vocab(inputs, should_stop, val_inputs)
    elif tokenizer == "bpe":
        # the train split only: the inputs, of which --val-fraction's end validates
        size = sum(p.stat().st_size for p in inputs if p.is_file())  # bad ones: prepare says
        limit = int(bpe_sample_mb * 1e6)
        if not val_inputs:  # the split is in tokens, found later: a margin (checked)
            limit = min(limit, int(size * (1 - val_fraction) * P.TRAIN_MARGIN))
        sample = P.text_sample(inputs, limit)
        learned = [len(t.encode("utf-8")) for t in sample]
        n = sum(learned)
        say_note(f"training a BPE of {vocab_size} tokens on the inputs' first {n:,} "
                 f"bytes" + (" (all of them)" if n >= size else
                             f" of {size:,} (--bpe-sample-mb {bpe_sample_mb:g}"
                             + ("" if val_inputs else f", --val-fraction {val_fraction:g}")
                             + ")"))
        tok = train_bpe(sample, vocab_size)
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
                         progress=progress, learned_bytes=learned, should_stop=should_stop,
                         cleanups=cleanups), tok
    finally:
        bar.close()


@main.command()
@click.pass_context
def devices(ctx):
    """List OpenCL devices (numbered as --device expects) and the built backends."""
    devs = opencl_devices()
    if devs:
        say_line("OpenCL devices (--backend opencl --device N):")
        for d in devs:
            say_line(f"  {d.index}: {d.name} [{d.platform}]" + (" (GPU)" if d.is_gpu else ""))
    else:
        say_line("no OpenCL devices found (install pocl-opencl-icd or a GPU driver)")
    built = built_backends()
    say_line(f"built backends: {', '.join(built) if built else 'none'} (in {build_dir()})")
    if is_stdout_closed():  # `devices | head -1`: as SIGPIPE, quietly (nothing to keep)
        ctx.exit(141)


if __name__ == "__main__":  # pragma: no cover
    main(prog_name="microgpt-fut")
