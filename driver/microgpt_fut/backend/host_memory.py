"""glibc's malloc set to keep freed memory in the process, for the CPU backends.

Futhark's c and multicore code frees a function's arrays when it returns (its
free list keeps only the blocks of the context's own values), and glibc hands
every block over 32 MB back to the kernel at once (``munmap``). GPT-2 124M's
step allocated and freed its saved activations, logits and gradients this way,
about 1.7 GB a step, each page faulted in afresh on its next use: 434k page
faults a step, a quarter of the process's CPU time in the kernel. With every
block from the heap (``M_MMAP_MAX`` 0) and the heap never trimmed
(``M_TRIM_THRESHOLD``), the next step reuses the same pages: multicore's
fine-tuning ran 120 -> 135 tokens/s, with the same peak RSS (9.3 GB, 4 steps,
bench.recipe --model gpt2-124m; bench/README.md, "Freed memory kept").
"""
from __future__ import annotations

import ctypes
import sys

# mallopt's parameters, from glibc's <malloc.h>.
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4

# The same settings for a child program that is not Python (glibc reads them at its
# start; the environment takes a byte count, where mallopt's -1 means "never").
ENVIRONMENT = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 40)}

_kept = False


def keep_freed_memory() -> bool:
    """Set this process's glibc malloc to serve every block from its heap and never
    trim it (``mallopt(M_MMAP_MAX, 0)``, ``mallopt(M_TRIM_THRESHOLD, -1)``), once.

    Returns whether the settings are in force: False off Linux, or where the C
    library has no ``mallopt`` (musl) or refuses a setting. Raises nothing. Blocks
    too large for the heap still come from ``mmap`` (glibc's fallback), and the
    process's memory stays at its high-water mark until it exits.
    """
    global _kept
    if _kept or not sys.platform.startswith("linux"):
        return _kept
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success, 0 on error; a trim threshold of -1 turns trimming off
    # (mallopt(3))
    _kept = bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, -1))
    return _kept
