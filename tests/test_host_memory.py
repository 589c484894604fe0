"""The CPU backends keep freed memory in the process (backend/host_memory.py): a large
block freed and allocated again is not page-faulted in afresh. Measured by the kernel's
own count of the child's minor page faults (getrusage), each case in a fresh process."""
from __future__ import annotations

import subprocess
import sys

import pytest

from cli_helpers import need_backend

# Allocates, fills and frees a block of 256 MB twice (libc's malloc, as Futhark's
# runtime does) and prints the minor page faults of each round.
_ROUNDS = """
import ctypes, resource, sys
setup = sys.argv[1]
if setup == "keep":
    from microgpt_fut.backend.host_memory import keep_freed_memory
    assert keep_freed_memory()
elif setup != "none":
    from microgpt_fut.backend.runtime import Runtime
    Runtime(setup, quiet=True)
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
size = 256 << 20
for _ in range(2):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    p = libc.malloc(size)
    ctypes.memset(p, 1, size)
    libc.free(p)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(setup: str) -> tuple[int, int]:
    out = subprocess.run([sys.executable, "-c", _ROUNDS, setup], capture_output=True,
                         text=True, check=True).stdout.split()
    return int(out[0]), int(out[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux")
@pytest.mark.parametrize("setup", ["keep", "c", "multicore"])
def test_a_freed_block_is_reused_without_page_faults(setup):
    if setup != "keep":
        need_backend(setup)
    first, second = _faults(setup)
    # the first round maps fresh pages (at least one fault per 2 MB, a huge page); the
    # second reuses them
    assert first >= (256 << 20) // (2 << 20)
    assert second < first / 10, (first, second)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux")
def test_without_it_the_block_is_faulted_in_again():
    # glibc's default, the behaviour the setting replaces: the block is unmapped at free
    first, second = _faults("none")
    assert second >= first / 2, (first, second)
