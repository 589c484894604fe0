"""Counts in the messages, in English: ``counted(1, "layer")`` is "1 layer",
``counted(12, "layer")`` "12 layers" (with thousands separators: "18,000 tokens"); and
paths in the lines that name them unquoted (``shown_path``)."""
from __future__ import annotations


def counted(n: int, noun: str) -> str:
    """``n`` and the noun, singular for exactly 1, else with an "s".

    n: a count (an int, or a NumPy integer); written with ``,`` between thousands.
    Raises nothing for any int.
    """
    return f"{n:,} {noun if n == 1 else noun + 's'}"


def shown_path(path) -> str:
    """A path as an unquoted line prints it ("data: ...", "saved ..."): as str(path), and
    "./-names.txt" for a relative path that starts with "-" (pathlib drops the "./" the
    user gave, and "-names.txt" reads as an option). path: a str or Path, or anything
    else as str() writes it (an MPI worker's --out is None, in a line it never prints)."""
    text = str(path)
    return "./" + text if text.startswith("-") else text
