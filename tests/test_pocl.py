"""pocl 3.1's miscompiles, and the Runtime's workaround for them.

Without the workaround a second call of a reducing entry point returns the first
call's result (pocl drops the reset of Futhark's work-group counter). The Runtime
builds exactly the kernels with such a counter unoptimised, and the others by the
work-group method "loops" (runtime.py); these tests check which kernels it marks,
that it fixes the bug, that the bug is still there without it (so the fresh-sum test
would catch a removed or broken workaround), and that the Runtime's one-line note
appears only when not quiet. That the optimised kernels compute right on every call
is shown by every opencl test (test_kernels: 20 training steps equal to c's, fresh
losses at every call, gradients against finite differences).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import get_runtime
from microgpt_fut.backend import runtime as runtime_mod
from microgpt_fut.backend.runtime import (PROGRAMS, Runtime, built_backends, import_module,
                                          library_name, module_path, opencl_devices,
                                          pocl_program)

A = np.arange(1, 100_001, dtype=np.int64)            # sum 5_000_050_000
B = np.arange(1, 100_001, dtype=np.int64)[::-1] * 3  # sum 15_000_150_000
C = np.full(777, -2, dtype=np.int64)                # sum -1554


def find_pocl_index() -> int | None:
    """Index (as in opencl_devices) of the first pocl device, or None when there is none
    or the opencl backend was not built."""
    if "opencl" not in built_backends():
        return None
    return next((d.index for d in opencl_devices() if d.is_pocl), None)


def pocl_device_index() -> int:
    """Like find_pocl_index, but skips the test when there is no pocl device."""
    if "opencl" not in built_backends():
        pytest.skip("backend opencl not built")
    idx = find_pocl_index()
    if idx is None:
        pytest.skip("no pocl OpenCL device here (the bug and its workaround are pocl-specific)")
    return idx


_POCL_RT: dict[int, Runtime] = {}


def pocl_runtime() -> Runtime:
    """A Runtime on the pocl device (the session's opencl one when that is pocl)."""
    idx = pocl_device_index()
    rt = get_runtime("opencl")
    if rt.device is not None and rt.device.index == idx:
        return rt
    if idx not in _POCL_RT:
        _POCL_RT[idx] = Runtime("opencl", device=idx, quiet=True)
    return _POCL_RT[idx]


def sum_i64(rt: Runtime, xs: np.ndarray) -> int:
    """The sum_i64 entry point: xs int64 [n] -> int."""
    return int(rt.numpy(rt.entry("sum_i64", xs))[0])


def opencl_program(program: str) -> str:
    """The OpenCL program text embedded in ``program``'s opencl library."""
    target = library_name("opencl", program)
    path = module_path(target)
    if path is None:
        pytest.fail(f"{target} not built: run `./build.sh all` first", pytrace=False)
    mod = import_module(target, path)
    cfg = mod.lib.futhark_context_config_new()
    try:
        return mod.ffi.string(mod.lib.futhark_context_config_get_program(cfg)).decode()
    finally:
        mod.lib.futhark_context_config_free(cfg)


def kernels(source: str) -> dict[str, str]:
    """Each kernel's name and text (from its `void NAME(` line to the next kernel's)."""
    heads = list(re.finditer(r"^FUTHARK_KERNEL(?:_SIZED\([^)]*\))?\n(.*?)void (\w+)\(",
                             source, re.M | re.S))
    ends = [h.start() for h in heads[1:]] + [len(source)]
    return {h.group(2): source[h.start():end] for h, end in zip(heads, ends)}


@pytest.mark.parametrize("program", PROGRAMS)
def test_pocl_program_marks_exactly_the_counter_kernels(program):
    """pocl_program marks optnone every kernel whose last block resets a block counter
    (an atomic add to counters_mem, the pattern pocl miscompiles), and no other kernel;
    the rest of the program is unchanged and its first line names the work-group method."""
    source = opencl_program(program)
    edited, marked = pocl_program(source)
    before, after = kernels(source), kernels(edited)
    counter = {n for n, text in before.items()
               if re.search(r"atomic_add_i32_global\(&\(\(volatile __global int \*\) "
                            r"counters_mem_\d+\)", text)}
    assert counter and len(counter) < len(before) / 2, (len(counter), len(before))
    assert set(marked) == counter and len(marked) == len(counter)
    assert after.keys() == before.keys()
    for name, text in after.items():
        assert text.count("__attribute__((optnone))") == (name in counter), name
    first, rest = edited.split("\n", 1)
    assert first == "// built with POCL_WORK_GROUP_METHOD=loops"
    assert rest.replace("__attribute__((optnone)) ", "") == source


def test_pocl_runtime_sets_program_and_work_group_method():
    """The pocl Runtime's context was given pocl_program's program (the marked kernels
    are the library's counter kernels) and pocl reads the work-group method "loops"."""
    rt = pocl_runtime()
    assert rt.pocl_unoptimised == pocl_program(opencl_program("microgpt"))[1]
    assert os.environ.get("POCL_WORK_GROUP_METHOD") == "loops"


def test_sum_i64_fresh_on_pocl_with_workaround():
    """With our Runtime, consecutive sums of different arrays are each right."""
    rt = pocl_runtime()
    got = [sum_i64(rt, xs) for xs in (A, B, C, A)]
    assert got == [int(A.sum()), int(B.sum()), int(C.sum()), int(A.sum())]


_NO_WORKAROUND = textwrap.dedent("""
    import json, sys
    import numpy as np
    from microgpt_fut.backend.runtime import Runtime
    rt = Runtime("opencl", device=int(sys.argv[1]), quiet=True, pocl_workaround=False)
    out = []
    for xs in (np.arange(1, 100_001, dtype=np.int64),
               np.arange(1, 100_001, dtype=np.int64)[::-1] * 3):
        out.append(int(rt.numpy(rt.entry("sum_i64", np.ascontiguousarray(xs)))[0]))
    print(json.dumps(out))
""")


def test_pocl_bug_present_without_workaround():
    """In a subprocess without the workaround the second sum repeats the first.

    This shows test_sum_i64_fresh_on_pocl_with_workaround would fail if the workaround
    were removed. If pocl has fixed the bug, this test skips saying so.
    """
    idx = pocl_device_index()
    # (its context compiles every kernel again, without the workaround: ~40 s on pocl
    # with a cold kernel cache; running it beside the other tests was slower still)
    proc = subprocess.run([sys.executable, "-c", _NO_WORKAROUND, str(idx)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (f"subprocess failed ({proc.returncode}):\n"
                                  f"{proc.stdout}\n{proc.stderr}")
    first, second = json.loads(proc.stdout.strip().splitlines()[-1])
    assert first == int(A.sum()), f"first call already wrong: {first}"
    if second == int(B.sum()):
        pytest.skip("pocl no longer shows the reduction bug: without the workaround the second "
                    "call was right; the workaround in runtime.py may be unnecessary")
    assert second == first, f"second call is neither right nor stale: {second}"


class _FakeFuthark:
    """Stands in for futhark_ffi.Futhark: creates no context (so no kernel compile)."""

    def __init__(self, mod, **kwargs):
        self.ctx = None
        self.lib = SimpleNamespace(futhark_context_sync=lambda ctx: 0)


def test_workaround_note_only_when_not_quiet(monkeypatch, capsys):
    """On pocl, Runtime prints one note line on stderr unless quiet (or no workaround).

    (That the workaround is in effect when quiet is shown by the session's quiet
    Runtime passing test_sum_i64_fresh_on_pocl_with_workaround.)
    """
    idx = pocl_device_index()
    monkeypatch.setattr(runtime_mod, "Futhark", _FakeFuthark)

    Runtime("opencl", device=idx, quiet=False)
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1, err
    assert "pocl" in lines[0] and "workaround" in lines[0]

    Runtime("opencl", device=idx, quiet=True)
    out, err = capsys.readouterr()
    assert out == "" and err == ""

    Runtime("opencl", device=idx, quiet=False, pocl_workaround=False)
    out, err = capsys.readouterr()
    assert out == "" and err == ""
