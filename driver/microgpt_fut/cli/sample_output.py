"""Printing samples as they are made, for `sample` and the samples after `train`.

Samples arrive a device call's worth at a time (training/sampling.py: iter_names,
iter_continuations) and are printed and flushed at once, so a long
`sample -n 1000000` shows its first samples within a second, and Ctrl-C,
SIGTERM or SIGHUP during a call (the last one too) keep everything printed so far,
that call's samples included (the command then ends with status 128 + the
signal's number and says how many were printed).

A text sample may come in Pieces (training/sampling.py: a long continuation is
printed as each paced call makes it); a signal in the middle of one ends the
piece's line (a --plain JSON string is closed) before the command stops.

Formats: microgpt's (``sample  1: emma``, after a header line on stderr: stdout holds
only the samples) and nanoGPT's (each
text followed by a separator line) by default; ``plain`` prints one sample per
line and nothing else, for pipes: a name as it is, a text sample as a JSON string
(its newlines escaped, so that it stays on one line). The default prompt, a newline
(``unprinted_start``), starts each text sample in the JSON strings only: in nanoGPT's
format it would make every sample's first line empty (``sample | head -1`` printed
an empty line), so a sample there begins with its first generated line.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Iterable

import click

from ..interrupt import stdout_closed, stop_on_signals
from ..training.sampling import Piece
from ..wording import counted

NAMES_HEADER = "\n--- inference (new, hallucinated names) ---"
SEPARATOR = "---------------"  # nanoGPT sample.py's line after each sample


def unprinted_start(prompts: list[str], given: bool) -> str:
    """What nanoGPT's format leaves out at the start of each text sample: the default
    prompt when it is a newline (nanoGPT's start, and an empty first line); "" for
    prompts the user gave (``given``) or another default (the vocabulary's first
    character, which is text)."""
    return "\n" if not given and list(prompts) == ["\n"] else ""


def _drop(pending: str, text: str) -> tuple[str, str]:
    """(what is still to leave out of a sample's start, the text to print) after a piece
    ``text`` of it, of which the start ``pending`` is left out where the text begins
    with it (or is a start of it); a sample that begins otherwise is printed whole."""
    n = len(os.path.commonprefix([pending, text]))
    if n == len(pending) or n == len(text):
        return pending[n:], text[n:]
    return "", text


def _line(kind: str, plain: bool, i: int, sample: str) -> str:
    if kind == "names":
        return sample if plain else f"sample {i + 1:2d}: {sample}"
    return json.dumps(sample, ensure_ascii=False) if plain else f"{sample}\n{SEPARATOR}"


def _piece(plain: bool, text: str, starts: bool, ends: bool) -> str:
    """A text sample's piece as _line prints the whole sample: the concatenation of a
    sample's pieces is its line (JSON escapes character by character)."""
    body = json.dumps(text, ensure_ascii=False)[1:-1] if plain else text
    head = '"' if plain and starts else ""
    tail = ('"\n' if plain else f"\n{SEPARATOR}\n") if ends else ""
    return head + body + tail


def print_samples(chunks: Iterable[list], n: int, kind: str, plain: bool = False,
                  header: bool = True, unprinted: str = "") -> None:
    """Print the samples of ``chunks`` (lists of whole samples, str, or of Pieces of
    text samples; n samples in all) as they come. ``unprinted``: the start of each text
    sample that nanoGPT's format leaves out (``unprinted_start``; --plain prints it).

    kind: "names" (microgpt's format, with its header line unless ``header`` is
    False or ``plain``) or "text" (nanoGPT's). A signal stops the printing after the
    chunk whose device call it came in (the last one too): one line on stderr says how
    many of n were printed, and the command exits with 128 + the signal's number (click.exceptions.Exit). A
    closed pipe (``| head``) ends it quietly with status 141, as SIGPIPE would.
    """
    printed, inside = 0, False  # inside: a sample's pieces have begun, not its end
    hide = "" if plain or kind != "text" else unprinted
    pending = ""  # what is still to leave out of the start of the sample being printed
    try:
        with stop_on_signals() as stop:
            of_n = f"of {counted(n, 'sample')}"
            stop.on_second = lambda: f"interrupted twice: printed {printed:,} {of_n}"
            for part in chunks:
                if printed == 0 and kind == "names" and header and not plain and part:
                    click.echo(NAMES_HEADER, err=True)  # a banner: stdout holds the samples
                for sample in part:
                    if isinstance(sample, Piece):
                        pending, text = _drop(pending if inside else hide, sample.text)
                        click.echo(_piece(plain, text, not inside, sample.end), nl=False)
                        inside = not sample.end
                        printed += sample.end
                    else:
                        click.echo(_line(kind, plain, printed, _drop(hide, sample)[1]))
                        printed += 1
                sys.stdout.flush()
                if stop():  # even after the last chunk: the signal came during its call
                    if inside:  # end the cut sample's line, as its end would
                        click.echo(_piece(plain, "", False, True), nl=False)
                        sys.stdout.flush()
                    how = "interrupted" if stop.name == "SIGINT" else f"stopped by {stop.name}"
                    cut = " and the start of the next" if inside else ""
                    click.echo(f"{how}: printed {printed:,} {of_n}{cut}", err=True)
                    raise click.exceptions.Exit(128 + stop.signum)
    except BrokenPipeError:
        # the reader went away: nothing more to say (Python would print a traceback
        # when it flushes stdout at exit: stdout_closed points it at /dev/null)
        stdout_closed()
        raise click.exceptions.Exit(141) from None
