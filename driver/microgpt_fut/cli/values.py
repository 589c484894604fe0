"""The command line's option types and value checks (click callbacks), and which options
the user gave. The option table (options.py) and the commands import from here; this
module imports none of them."""
from __future__ import annotations

import errno
import math
import os
from pathlib import Path

import click
from click.core import ParameterSource

from ..training.optimizer import FLOAT32_MAX
from .common import bad_option

# Integer options: the kernels take 64-bit integers, so larger values are refused by
# click with one line (they used to end in an OverflowError traceback).
INT_MAX = 2**62
INT64_MAX = 2**63 - 1
_BOUND_NAMES = {INT_MAX: "2**62", INT64_MAX: "2**63 - 1"}


def too_large(n: int, bound: int) -> str:
    """The message for an integer option's value n past ``bound`` (named as 2**62)."""
    return f"{n} is too large (at most {_BOUND_NAMES.get(bound, bound)})"


class Int64(click.types.IntParamType):
    """click's INTEGER, refusing magnitudes above 2**62 with click's one-line error."""

    def convert(self, value, param, ctx):
        n = super().convert(value, param, ctx)
        if abs(n) > INT_MAX:
            self.fail(too_large(n, INT_MAX), param, ctx)
        return n


INT = Int64()


class IntFrom(click.IntRange):
    """click's IntRange from ``min`` up, also refusing values above ``max`` (default
    2**62: the kernels' 64-bit integers) with click's one-line error. --help shows the
    range as x>=min: the upper bound is there for the kernels, not a choice to offer (as
    a closed range, help printed 0<=x<=4611686018427387904). Named an integer, as the
    other integer options are ('1.5' is not a valid integer, not integer range)."""

    name = "integer"

    def __init__(self, min: int, max: int = INT_MAX):
        super().__init__(min=min)
        self.upper = max

    def convert(self, value, param, ctx):
        n = super().convert(value, param, ctx)
        if n > self.upper:
            self.fail(too_large(n, self.upper), param, ctx)
        return n


class Float32(click.types.FloatParamType):
    """click's FLOAT, refusing a value that float32 cannot hold (the kernels compute in
    float32: --lr 1e39 would be infinite) with click's one-line error."""

    def convert(self, value, param, ctx):
        x = super().convert(value, param, ctx)
        if math.isfinite(x) and abs(x) > FLOAT32_MAX:
            self.fail(f"{x:g} is too large for float32, which the kernels compute in (at most "
                      f"{FLOAT32_MAX:.4g})", param, ctx)
        return x


F32 = Float32()


def check_temperature(ctx, param, value):
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise click.BadParameter(f"must be a finite number >= 0 (0 is greedy), got {value}")
    return value


def check_lr(ctx, param, value):
    if value is not None and not (math.isfinite(value) and value > 0):
        raise click.BadParameter(f"must be a positive number, got {value}")
    return value


def check_positive(ctx, param, value):
    if value is not None and value < 1:
        raise click.BadParameter(f"must be at least 1, got {value}")
    return value


def path_problem(value: str, reads: bool = True, folder: bool = False) -> str | None:
    """What is wrong with a path as given, before pathlib reads it, or None: "" (Path("")
    is "."), a name that is not UTF-8 (a run records its paths as text: such a name failed
    at the save, after the training), a trailing / after a name that is not a folder
    (pathlib drops the /, and names.txt/ read the file: the OS says "not a directory"),
    a file to write (not ``reads`` nor ``folder``) named with a trailing / (--out
    newdir/ wrote a file "newdir"), for a path to read (``reads``; not --out, which
    may name a new file through a link) a broken symbolic link, named with its target
    (it was said not to exist, the link being there; so for a folder to write, which
    is not made through a link: prepare said it "is a file"), and for a path written a symbolic
    link in a loop (train's --out replaced it with a file; prepare's and export-hf's
    said it "is a file")."""
    if value == "":
        return "is empty; give a path"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return (f"{value!r}: the name is not UTF-8 (a byte shown as \\udcXX); rename it "
                "with UTF-8 characters")
    link = value.rstrip("/") or value
    if os.path.islink(link) and not os.path.exists(link):
        try:
            os.stat(link)
            why = ""
        except FileNotFoundError:
            why = ", which does not exist"
        except OSError as e:
            if e.errno == errno.ELOOP and not reads:
                return (f"{value!r} is a symbolic link in a loop ({e.strerror}): fix the "
                        "link, or give another name")
            why = f" ({e.strerror or e})"
        if reads or folder:  # a file to write is written through a dangling link
            return (f"{value!r} is a broken symbolic link to {os.readlink(link)!r}{why}: fix "
                    f"the link, or give the {'folder' if folder else 'file'} it should "
                    "point to")
    if value.endswith("/") and os.path.lexists(value.rstrip("/")) and not os.path.isdir(value):
        return (f"{value!r}: not a directory (a file named with a trailing /); give it "
                "without the /")
    if not reads and not folder and value.endswith("/") and not os.path.isdir(value):
        return f"{value!r} ends with /, as a folder's name does; give a file name"
    return None


class GivenPath(click.Path):
    """click.Path as a pathlib.Path that refuses what ``path_problem`` finds, for every
    path option (--out, --data, --resume, --init-from, --checkpoint ...): Path("") is
    ".", so an empty value (an unset shell variable) named the current folder, and
    `--data ""` trained on the shards there; `--data names.txt/` read the file; a
    broken link was said not to exist. reads: False for a path written (--out), which
    may be a link to a file not made yet; folder: True for a folder written (export-hf's
    FOLDER), which may be named with a trailing /."""

    def __init__(self, reads: bool = True, folder: bool = False, **kw):
        super().__init__(**kw)
        self.reads, self.folder = reads, folder

    def convert(self, value, param, ctx):
        problem = (path_problem(value, self.reads, self.folder) if isinstance(value, str)
                   else None)
        if problem:
            self.fail(problem, param, ctx)
        return Path(super().convert(value, param, ctx))


def check_threads(threads: int, backend: str | None) -> None:
    """Refuse --threads N > 1 with a --backend other than c (None: the default, which is
    c then)."""
    if threads > 1 and backend not in (None, "c"):
        raise bad_option(f"--threads {threads} applies to --backend c only (multicore, "
                          "opencl and cuda run their own parallel kernels)")


def given_options(ctx) -> dict:
    """The options the user gave (on the command line, in the environment or --config),
    with their values; the others take the plan's defaults."""
    return {name: ctx.params[name] for name in ctx.params
            if ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE,
                                                  ParameterSource.ENVIRONMENT,
                                                  ParameterSource.DEFAULT_MAP)}
