"""`microgpt-fut devices`: the OpenCL devices and the built backends."""
from __future__ import annotations

import click

from ..backend.runtime import build_dir, built_backends, opencl_devices
from ..interrupt import is_stdout_closed
from .common import say_line
from .group import main

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

