"""Counts in the messages, in English: ``counted(1, "layer")`` is "1 layer",
``counted(12, "layer")`` "12 layers" (with thousands separators: "18,000 tokens")."""
from __future__ import annotations


def counted(n: int, noun: str) -> str:
    """``n`` and the noun, singular for exactly 1, else with an "s".

    n: a count (an int, or a NumPy integer); written with ``,`` between thousands.
    Raises nothing for any int.
    """
    return f"{n:,} {noun if n == 1 else noun + 's'}"
