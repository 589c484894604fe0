"""What the machine has: the memory this process can still get, and byte counts as
the one-line errors print them. Below models/ and training/, which both check sizes
against it (models/base.check_array_bytes, training/memory's estimates)."""
from __future__ import annotations

from pathlib import Path

GIB = 2**30


def available_memory() -> int | None:
    """Bytes the machine can give this process now: /proc/meminfo's MemAvailable,
    capped by the cgroup's memory.max (containers); None where unknown."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text())
        if limit != "max" and avail is not None:
            avail = min(avail, int(limit) - used)
    except (OSError, ValueError):
        pass
    return avail


def format_bytes(n: int) -> str:
    """n bytes for a message: "1.5 GiB" from a tenth of a GiB up, "3.17e+29 GiB" from a
    million GiB up (a run sized by mistake, e.g. --block-size 2**62), else "43 MiB"."""
    if n >= GIB * 10**6:
        return f"{n / GIB:.3g} GiB"
    return f"{n / GIB:.1f} GiB" if n >= GIB / 10 else f"{n / 2**20:.0f} MiB"
