"""`microgpt-fut train`: the plan (training/plan.py), the run, its progress, its
checkpoint and the samples after it."""
from __future__ import annotations

import os
from pathlib import Path

import click

from ..parallel.mpi_world import World
from ..training import choices, curves, plan
from ..training.family import FAMILIES
from ..training.kinds import KINDS
from . import mpi as cli_mpi
from .common import (check_out, exit_if_stdout_closed, lock_out, runtime, saved_step,
                     say_note, user_errors)
from .config import load_config
from .group import main
from .options import (F32, INT, INT_MAX, backend_opt, check_positive, check_temperature,
                      check_threads, device_opt, given_options, optimizer_opt,
                      path_not_empty, sample_defaults, where)
from .running import (check_memory, eval_line, exit_saved, ranks_here, sample_rows,
                      train_and_save)
from .sample_output import print_samples

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
              help=where("encoding", "text encoding of --data.  [default: utf-8]"))
@backend_opt
@device_opt
@click.option("--steps", type=INT, default=1000, show_default=True, callback=check_positive,
              help="Training steps (optimiser updates) of the whole run; with --resume, the "
                   "checkpoint's (it cannot change).")
@click.option("--batch-size", type=INT, default=1, show_default=True, callback=check_positive,
              help="Rows per step (per micro-batch with --grad-accum): documents, or windows "
                   "of a stream.")
@click.option("--n-embd", type=INT, default=16, show_default=True, callback=check_positive,
              help="Embedding width.")
@click.option("--n-head", type=INT, default=4, show_default=True, callback=check_positive,
              help="Attention heads (must divide --n-embd).")
@click.option("--n-layer", type=INT, default=1, show_default=True, callback=check_positive,
              help="Transformer layers.")
@click.option("--block-size", type=INT, default=16, show_default=True, callback=check_positive,
              help="Context length in tokens; longer documents are cut.")
@click.option("--mlp-width", type=INT, default=None, callback=check_positive,
              help="Hidden width of the MLP.  [default: 4 * n-embd]")
@optimizer_opt("lr", F32, "peak learning rate: microgpt's Adam decays it linearly to 0; "
                            "nanoGPT's recipe warms up to it and decays it to --min-lr.")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=42, show_default=True,
              help="Seed for the shuffle, the initial weights and the samples.")
@click.option("--steps-per-call", type=INT, default=50, show_default=True,
              callback=check_positive,
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
              help=where("bias", "biases in the linear layers and LayerNorms (nanoGPT's "
                                  "bias).  [default: --bias]"))
@click.option("--val-fraction", type=click.FloatRange(0, 1, max_open=True), default=None,
              help=where("val_fraction", "the last fraction of the text held out for "
                          "validation (0: none; the run then evaluates the training split "
                          "only).  [default: 0.1]"))
@click.option("--tokenizer", default=None, metavar="char|bpe|PATH",
              help=where("tokenizer", "char (the text's characters), bpe (a byte-level BPE "
                          "trained on the training text, see --vocab-size), or a "
                          "tokenizer.json, vocab.json (beside merges.txt) or a folder holding "
                          "them.  [default: char; tokens: the shards' own]"))
@click.option("--vocab-size", type=INT, default=None, callback=check_positive,
              help=where("vocab_size", "with --tokenizer bpe, the BPE's vocabulary, at least 257 "
                          "(256 bytes, then merges, then <|endoftext|>; GPT-2 has 50257)."))
@click.option("--grad-accum", type=INT, default=None, callback=check_positive,
              help=where("grad_accum", "micro-batches of --batch-size accumulated per "
                                        "step.  [default: 1]"))
@optimizer_opt("min_lr", F32, "learning rate at the end of the cosine decay.")
@optimizer_opt("warmup_steps", click.IntRange(0, INT_MAX), "steps of linear warm-up.")
@optimizer_opt("lr_decay_steps", INT, "step where the cosine decay reaches --min-lr.")
@optimizer_opt("beta1", F32, "Adam's beta1.")
@optimizer_opt("beta2", F32, "Adam's beta2.")
@optimizer_opt("weight_decay", F32, "AdamW weight decay of the >= 2-D tensors.")
@optimizer_opt("grad_clip", F32, "clip the gradient to this global norm (0: off).")
@click.option("--eval-every", type=INT, default=None, callback=check_positive,
              help=where("eval_every", "evaluate both splits every N steps (and at the "
                                        "end).  [default: 250]"))
@click.option("--eval-iters", type=INT, default=None, callback=check_positive,
              help=where("eval_iters", "batches per split and evaluation.  [default: 20]"))
@click.option("--eval-choices", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help=where("eval_choices", "also score these multiple-choice questions "
                          "(HellaSwag's jsonl, as `eval --choices`) at each evaluation: acc "
                          "and acc_norm in its line, the CSV and the plot.  [default with "
                          "--resume: the run's]"))
@click.option("--config", type=click.Path(path_type=Path), default=None, is_eager=True,
              expose_value=False, callback=load_config,
              help="TOML file of option values under the option names, - or _ alike "
                   "(e.g. weight_decay = 0.1, lr = 1e-3, steps = 5000), each of its option's "
                   "type (an integer for --steps, a string for a path), paths relative to "
                   "the file; the command line wins.")
@click.option("--threads", type=INT, default=1, show_default=True, callback=check_positive,
              help="c backend: split each step's rows over N CPU threads, one kernel context "
                   "each (use at most the cores; more than the rows is cut to them); their "
                   "gradients make one optimiser step. Pays off when a step takes more than "
                   "a few ms (--n-embd 64 and up, or larger batches).")
@click.option("--out", type=click.Path(), default="model.safetensors",
              show_default=True, callback=path_not_empty, help="Checkpoint file to write (with --resume: FILE).")
@click.option("--overwrite", is_flag=True,
              help="Replace a checkpoint of another run that --out holds (refused otherwise).")
@click.option("--save-every", type=INT, default=None, callback=check_positive,
              help="Also save the checkpoint to --out every N steps (atomically: a crash "
                   "leaves the previous one).")
@click.option("--resume", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="Continue the run saved in checkpoint FILE (see below).")
@click.option("--init-from", type=click.Path(path_type=Path), default=None, metavar="MODEL",
              help="Start a new run from the weights of MODEL, a checkpoint or a Hugging Face "
                   "GPT-2 folder (its sizes and tokenizer; a smaller --block-size crops its "
                   "positions; fresh optimiser state, this run's own steps, lr and data): to "
                   "train more or fine-tune on other data.")
@click.option("--samples", type=click.IntRange(0, INT_MAX), default=None,
              help="Samples to print after training." + sample_defaults("samples"))
@click.option("--temperature", type=F32, default=None, callback=check_temperature,
              help="Sampling temperature (0 = greedy)." + sample_defaults("temperature"))
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
    given = given_options(ctx)
    check_threads(o["threads"], o["backend"])
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
        config.validate()
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

