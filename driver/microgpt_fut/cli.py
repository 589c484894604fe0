"""The command line: ``microgpt-fut train | sample | devices``.

Every error the user can cause is reported as one line ``Error: ...`` on stderr
with a non-zero exit status (2 for bad options, 1 otherwise), never a traceback.
"""
from __future__ import annotations

import contextlib
import math
import os
import tempfile
from pathlib import Path

import click

from . import checkpoint as ckpt
from .data import DataError, Vocab, load_docs
from .model import GPTConfig, Model
from .runtime import BACKENDS, BackendError, Runtime, build_dir, built_backends, opencl_devices
from .trainer import TrainSettings, generate_names, train as train_loop

_NO_ARGS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


def _first_line(msg: str) -> str:
    lines = [ln.strip() for ln in str(msg).strip().splitlines() if ln.strip()]
    return " ".join(lines) if len(lines) <= 3 else lines[0]


def _one_line_usage(e: click.UsageError) -> click.ClickException:
    """A usage error as one line (click prints usage and a hint on extra lines)."""
    msg = _first_line(e.format_message())
    if e.ctx is not None:
        msg += f" (see '{e.ctx.command_path} --help')"
    out = click.ClickException(msg)
    out.exit_code = e.exit_code
    return out


class _Command(click.Command):
    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:
            if _NO_ARGS_HELP and isinstance(e, _NO_ARGS_HELP):
                raise
            raise _one_line_usage(e) from None


class _Group(click.Group):
    command_class = _Command

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:
            if _NO_ARGS_HELP and isinstance(e, _NO_ARGS_HELP):
                raise
            raise _one_line_usage(e) from None

    def resolve_command(self, ctx, args):
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as e:
            raise _one_line_usage(e) from None


@contextlib.contextmanager
def _user_errors():
    """Turn the library's user-facing errors into one-line click errors."""
    try:
        yield
    except (BackendError, DataError, ckpt.CheckpointError, ValueError) as e:
        raise click.ClickException(_first_line(str(e))) from None
    except RuntimeError as e:  # a failing entry point (e.g. out of device memory)
        raise click.ClickException(_first_line(str(e))) from None


def _bad_option(msg: str) -> click.ClickException:
    """A one-line error about the options (exit status 2, as click's usage errors)."""
    e = click.ClickException(msg)
    e.exit_code = 2
    return e


def _check_temperature(ctx, param, value):
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise click.BadParameter(f"must be a finite number >= 0 (0 is greedy), got {value}")
    return value


def _check_lr(ctx, param, value):
    if not (math.isfinite(value) and value > 0):
        raise click.BadParameter(f"must be a positive number, got {value}")
    return value


def _check_positive(ctx, param, value):
    if value is not None and value < 1:
        raise click.BadParameter(f"must be at least 1, got {value}")
    return value


def _check_out(out: Path) -> None:
    """Fail before training when the checkpoint could not be written."""
    folder = out.parent
    if out.is_dir():
        raise click.ClickException(f"--out {str(out)!r} is a directory; give a file name")
    if not folder.is_dir():
        raise click.ClickException(f"--out: folder {str(folder)!r} does not exist")
    try:
        fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".probe", dir=folder)
        os.close(fd)
        os.unlink(name)
    except OSError as e:
        raise click.ClickException(f"--out: cannot write in folder {str(folder)!r}: "
                                   f"{e.strerror or e}") from None


def _runtime(backend: str, device: int | None, quiet: bool) -> Runtime:
    with _user_errors():
        return Runtime(backend, device, quiet=quiet)


_backend_opt = click.option(
    "--backend", type=click.Choice(BACKENDS), default="c", show_default=True,
    help="Compiled kernels to run on. c (one CPU core) is the fastest on CPUs for "
         "microgpt's tiny sizes; multicore/opencl/cuda pay off for large batches.")
_device_opt = click.option("--device", type=int, default=None,
                           help="OpenCL device number (see `microgpt-fut devices`); "
                                "default: the first GPU, else the first device.")


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="microgpt-fut")
def main():
    """Karpathy's microgpt (a tiny GPT that learns to make up names), on Futhark kernels.

    \b
    microgpt-fut train                 train on built-in US first names, save model.safetensors
    microgpt-fut train --data FILE     one document per line (e.g. a list of names)
    microgpt-fut sample -n 10          new names from the saved model
    microgpt-fut devices               OpenCL devices for --backend opencl
    """


@main.command()
@click.option("--data", type=click.Path(path_type=Path), default=None,
              help="Text file, one document per line. Default: built-in US first names.")
@click.option("--encoding", default="utf-8", show_default=True, help="Text encoding of --data.")
@_backend_opt
@_device_opt
@click.option("--steps", type=int, default=1000, show_default=True, callback=_check_positive,
              help="Training steps (Adam updates).")
@click.option("--batch-size", type=int, default=1, show_default=True, callback=_check_positive,
              help="Documents per step.")
@click.option("--n-embd", type=int, default=16, show_default=True, callback=_check_positive,
              help="Embedding width.")
@click.option("--n-head", type=int, default=4, show_default=True, callback=_check_positive,
              help="Attention heads (must divide --n-embd).")
@click.option("--n-layer", type=int, default=1, show_default=True, callback=_check_positive,
              help="Transformer layers.")
@click.option("--block-size", type=int, default=16, show_default=True, callback=_check_positive,
              help="Context length in tokens; longer documents are cut.")
@click.option("--mlp-width", type=int, default=None, callback=_check_positive,
              help="Hidden width of the MLP.  [default: 4 * n-embd]")
@click.option("--lr", type=float, default=0.01, show_default=True, callback=_check_lr,
              help="Adam learning rate (decays linearly to 0).")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=42, show_default=True,
              help="Seed for the shuffle, the initial weights and the samples.")
@click.option("--steps-per-call", type=int, default=50, show_default=True,
              callback=_check_positive, help="Training steps fused into one kernel call.")
@click.option("--out", type=click.Path(path_type=Path), default=Path("model.safetensors"),
              show_default=True, help="Checkpoint file to write.")
@click.option("--samples", type=click.IntRange(min=0), default=20, show_default=True,
              help="Names to generate after training.")
@click.option("--temperature", type=float, default=0.5, show_default=True,
              callback=_check_temperature, help="Sampling temperature (0 = greedy).")
@click.option("--quiet", "-q", is_flag=True, help="Print only the samples.")
def train(data, encoding, backend, device, steps, batch_size, n_embd, n_head, n_layer,
          block_size, mlp_width, lr, seed, steps_per_call, out, samples, temperature, quiet):
    """Train a model and save it to --out, then print samples (microgpt's defaults)."""
    settings = TrainSettings(num_steps=steps, batch_size=batch_size, lr=lr, seed=seed,
                             steps_per_call=steps_per_call)
    try:
        settings.validate()
    except ValueError as e:
        raise _bad_option(str(e)) from None
    if n_embd % n_head:
        raise _bad_option(f"--n-embd {n_embd} is not divisible by --n-head {n_head}")
    _check_out(out)
    rt = _runtime(backend, device, quiet)
    with _user_errors():
        docs, description = load_docs(data, encoding)
    say = (lambda *a, **k: None) if quiet else click.echo
    say(f"data: {description}")
    vocab = Vocab.from_docs(docs)
    n_long = sum(len(d) > block_size - 1 for d in docs)
    if n_long and not quiet:
        click.echo(f"warning: {n_long} of {len(docs)} documents are longer than block size - 1 "
                   f"= {block_size - 1} characters and are cut", err=True)
    n_params = GPTConfig(vocab.size, n_embd, n_head, n_layer, block_size, mlp_width).num_params()
    say(f"num docs: {len(docs)} | vocab size: {vocab.size} | num params: {n_params:,} | "
        f"backend: {backend}" + (f" ({rt.device.name})" if rt.device else ""))

    def progress(step, total, loss, rate):
        say(f"step {step:{len(str(total))}d} / {total} | loss {loss:.4f} | {rate:,.0f} tok/s")

    with _user_errors():
        result = train_loop(rt, docs, settings, n_embd=n_embd, n_head=n_head, n_layer=n_layer,
                            block_size=block_size, mlp_width=mlp_width, progress=progress)
        say(f"trained {steps} steps in {result.seconds:.2f} s "
            f"({result.tokens / max(result.seconds, 1e-9):,.0f} tok/s)")
        ckpt.save(out, result.checkpoint(description))
    last = min(100, steps)
    loss = result.mean_loss(last)
    if not math.isfinite(loss):
        click.echo("warning: the loss is not finite; try a smaller --lr", err=True)
    say(f"mean loss of the last {last} steps: {loss:.4f}")
    say(f"saved {out}")
    with _user_errors():
        names = generate_names(result.model, result.vocab, samples, temperature, seed)
    _print_samples(names, quiet)


def _print_samples(names: list[str], quiet: bool) -> None:
    if not names:
        return
    if not quiet:
        click.echo("\n--- inference (new, hallucinated names) ---")
    for i, name in enumerate(names):
        click.echo(f"sample {i + 1:2d}: {name}")


@main.command()
@click.option("-n", "--num", type=click.IntRange(min=0), default=20, show_default=True,
              help="Number of samples.")
@click.option("--temperature", type=float, default=0.5, show_default=True,
              callback=_check_temperature, help="Sampling temperature (0 = greedy).")
@click.option("--checkpoint", type=click.Path(path_type=Path),
              default=Path("model.safetensors"), show_default=True, help="Checkpoint to load.")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=42, show_default=True,
              help="Sampling seed (sample i uses random stream i).")
@_backend_opt
@_device_opt
def sample(num, temperature, checkpoint, seed, backend, device):
    """Print names sampled from a trained checkpoint."""
    if num == 0:
        return
    with _user_errors():
        ck = ckpt.load(checkpoint, adam=False)
    rt = _runtime(backend, device, quiet=False)
    with _user_errors():
        model = Model.from_arrays(rt, ck.config, ck.params, step=ck.step)
        names = generate_names(model, Vocab(tuple(ck.vocab)), num, temperature, seed)
    _print_samples(names, quiet=False)


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
    main()
