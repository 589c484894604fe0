"""`microgpt-fut train`: the plan (training/plan.py), the run, its progress, its
checkpoint and the samples after it."""
from __future__ import annotations

import os
from pathlib import Path

import click

from ..backend.runtime import default_backend, fastest_cpu_backend
from ..parallel.mpi_world import World
from ..training import choices, curves, plan
from ..wording import counted, shown_path
from . import mpi as cli_mpi
from .common import (backend_of, check_out, exit_if_stdout_closed, lock_out, runtime,
                     saved_step, say_note, user_errors)
from .group import main
from .options import options
from .values import check_threads, given_options
from .running import (check_memory, eval_line, exit_saved, ranks_here, sample_rows,
                      train_and_save)
from .sample_output import print_samples, unprinted_start

_RESUME_HELP = """With --resume FILE the run saved in FILE continues: its model and
tokenizer, --steps (the run's total, which fixes the learning-rate schedule), the
optimiser's options, --seed, --batch-size and the evaluations are the checkpoint's;
give them only with the same values. The data is read again from the file or folder
the checkpoint names (or --data) and must be the same. --out defaults to FILE. On c
the result is bit-identical to an uninterrupted run with the same --threads, and on
multicore to one on as many cores (the hint after a stop names the --backend and
--threads that do). An option that the run's model family and data do not read is
refused, naming where it applies."""


@main.command(epilog=_RESUME_HELP)
@options("train")
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
    done = plan.complete(p)
    if done is not None:  # a no-op (status 0), once the data is the run's own: no backend,
        with user_errors():  # nothing written, no samples
            kind.open(p)
        say_note(done)  # the outcome, even with -q: nothing happened
        return
    rows = s.batch_size * s.grad_accum
    cli_mpi.check_split(world, rows, f"--batch-size {s.batch_size}" + (
        f" x --grad-accum {s.grad_accum} = {rows} windows a step" if kind.evaluates else ""))
    # through a link to its target: the atomic save renames a new file over --out, which
    # replaced the link itself (the user's real.safetensors stayed as it was)
    out = p.out
    if os.path.islink(out):  # written through (a loop is refused as --out is read)
        out = Path(os.path.realpath(out))
    check_out(out, p.data, p.resume_path, o["overwrite"])
    lock_out(ctx, out)
    if kind.evaluates:
        with user_errors():
            curves.check_writable(out)
    with user_errors():
        data = kind.open(p)
        config = p.config(data)
    T = config.block_size
    work = s.batch_size * T * config.num_params()
    backend = backend_of(o["backend"], p.family.program, work,
                         o["threads"] > 1 or world is not None, say)
    device = (cli_mpi.local_device(backend, o["device"], world.local_rank)
              if world is not None else o["device"])
    rt = runtime(backend, device, quiet, program=p.family.program)
    check_memory(config, backend, rt, s.batch_size, min(s.steps_per_call, s.num_steps),
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
    say(f"model: {config.arch}, {counted(config.n_layer, 'layer')}, "
        f"{counted(config.n_head, 'head')}, n_embd "
        f"{config.n_embd}, block size {T}{biases} | vocab size {config.vocab_size} | num params: "
        f"{config.num_params():,} | backend: {backend}"
        + cli_mpi.describe(world, s.contexts) + (f" ({rt.device.name})" if rt.device else ""))
    exchange = world.exchange if world is not None else None
    with user_errors():
        run = p.start(rt, data, config, exchange)
        if p.eval_choices is not None:
            examples = choices.read_examples(p.eval_choices)
            choices.check_fits(examples, data.vocab, T, f"--eval-choices {str(p.eval_choices)!r}")
            run.choices = (str(Path(p.eval_choices).resolve()), examples)
    if p.resume is not None:
        say(f"resuming {str(p.resume_path)!r} at step {run.step} of {run.num_steps}")
    if world is not None:
        cli_mpi.share_run(world, cli_mpi.RunSpec(run.checkpoint(), run.dataset, s, backend,
                                                 o["device"], o["save_every"], str(out)), run)
    ours = (p.resume.step if p.resume is not None and out.exists()
            and os.path.samefile(out, p.resume_path) else None)
    stopped = train_and_save(run, out, o["save_every"], say, quiet, ours, world,
                             curves_beside=kind.evaluates)
    if stopped:
        # the command that continues it bit for bit: its --threads, and its backend
        # where that command's default is another, or would be once every library is
        # built (a run on c for want of multicore)
        threads = f" --threads {s.threads}" if s.contexts > 1 else ""
        split = bool(threads) or world is not None
        again, _ = default_backend(p.family.program, work, split)
        pin = backend != again or backend != fastest_cpu_backend(work, split)
        exit_saved(ctx, stopped, run, out, (f" --backend {backend}" if pin else "") + threads,
                   world)
    trained = run.step - (p.resume.step if p.resume is not None else 0)
    if trained:
        say(f"trained {counted(trained, 'step')} in {run.seconds:.2f} s "
            f"({run.positions / max(run.seconds, 1e-9):,.0f} tok/s)")
    if run.evals:
        say(f"final: {eval_line(*run.evals[-1])}")
    elif not kind.evaluates:
        last = min(100, run.num_steps)
        say(f"mean loss of the last {counted(last, 'step')}: "
            f"{float(run.losses[-last:].mean()):.4f}")
    say(f"saved {shown_path(out)}" + (", {}, {}".format(*map(shown_path, curves.paths(out)))
                                       if kind.evaluates else ""))
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
                      header=not quiet, unprinted=unprinted_start(prompts, False))



def plan_of(args: list[str]) -> plan.Plan:
    """The plan of ``microgpt-fut train ARGS`` (its options parsed and checked as the
    command's, then plan.make): how bench builds its runs, so that they are train's.
    Raises click's exceptions for a bad option, plan.make's errors."""
    ctx = train.make_context("train", list(args))
    with ctx:
        return plan.make(ctx.params, given_options(ctx))
