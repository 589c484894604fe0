"""The named configurations of the sweep (issue 3) and how to pick them."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class BenchConfig:
    """One point of the sweep: model sizes, batch size and the sampling batch.

    ``data`` is "names" or "shakespeare": names are at most 15 characters, so
    configurations with block_size > 16 train on tinyshakespeare cut into
    documents of block_size - 1 characters (every row then has block_size
    valid positions). ``sample_n`` is the number of samples per generate call.
    """

    name: str
    n_embd: int
    n_head: int
    n_layer: int
    block_size: int
    batch: int
    sample_n: int
    note: str = ""

    @property
    def data(self) -> str:
        return "names" if self.block_size <= 16 else "shakespeare"

    def to_dict(self) -> dict:
        return asdict(self)


CONFIGS: dict[str, BenchConfig] = {c.name: c for c in (
    BenchConfig("A", 16, 4, 1, 16, 1, 256, "microgpt's default"),
    BenchConfig("B", 16, 4, 1, 16, 32, 256, "microgpt sizes, batch 32"),
    BenchConfig("C", 64, 4, 2, 32, 32, 256),
    BenchConfig("D", 128, 4, 4, 64, 32, 64),
    BenchConfig("E", 256, 8, 4, 128, 16, 16),
    BenchConfig("F", 512, 8, 6, 256, 8, 8),
    BenchConfig("G", 16, 4, 1, 16, 64, 256, "microgpt sizes, batch 64"),
)}
QUICK = ("A", "B", "C")


def select(names: str | None, quick: bool = False) -> list[BenchConfig]:
    """Configurations named in a comma-separated list (all when None; A-C when quick).

    Raises ValueError naming an unknown configuration.
    """
    if names:
        picked = [n.strip().upper() for n in names.split(",") if n.strip()]
    else:
        picked = list(QUICK if quick else CONFIGS)
    unknown = [n for n in picked if n not in CONFIGS]
    if unknown:
        raise ValueError(f"unknown configuration(s) {', '.join(unknown)}: choose from "
                         f"{', '.join(CONFIGS)}")
    return [CONFIGS[n] for n in picked]
