"""The command group `microgpt-fut`: one-line usage errors, Ctrl-C and MemoryError as
one-line errors, and MPI launches (cli/mpi.py). The commands register on ``main``."""
from __future__ import annotations

import sys

import click

from ..parallel.mpi_world import launched
from . import mpi as cli_mpi
from .common import exit_with, failed_on_stdout, first_line

NO_ARGS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


def one_line_usage(e: click.UsageError) -> click.ClickException:
    """A usage error as one line (click prints usage and a hint on extra lines)."""
    msg = first_line(e.format_message())
    if e.ctx is not None:
        msg += f" (see '{e.ctx.command_path} --help')"
    out = click.ClickException(msg)
    out.exit_code = e.exit_code
    return out


class OneLineUsage:
    """Mixin: usage errors while parsing arguments become one-line errors."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:
            if NO_ARGS_HELP and isinstance(e, NO_ARGS_HELP):
                raise
            raise one_line_usage(e) from None


class Command(OneLineUsage, click.Command):
    pass


class Group(OneLineUsage, click.Group):
    command_class = Command

    def main(self, args=None, prog_name=None, **extra):
        """click's main; started by an MPI launcher as several processes, cli/mpi.py's: rank
        0 runs the command, and for ``train`` the other ranks train with it."""
        if launched()[1] > 1 and extra.get("standalone_mode", True):
            cli_mpi.main(lambda **kw: super(Group, self).main(args, prog_name,
                                                               **{**extra, **kw}), args)
        try:
            return super().main(args, prog_name, **extra)
        except OSError as e:  # a stdout that takes no writes; a closed pipe is click's
            if not failed_on_stdout(e):
                raise
            click.echo(f"Error: cannot write to stdout: {e.strerror or e}", err=True)
            sys.exit(1)

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
            raise one_line_usage(e) from None



@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
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
