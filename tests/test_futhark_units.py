"""Futhark's own unit tests of futhark/nn.fut, rng.fut and sample.fut (`futhark test`)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from conftest import REPO_ROOT, in_ci

UNIT_FILES = ("nn.fut", "rng.fut", "sample.fut")


def find_futhark() -> str | None:
    """The futhark compiler: $FUTHARK, else `futhark` on PATH, else .toolchain/bin/futhark."""
    env = os.environ.get("FUTHARK")
    if env and os.access(env, os.X_OK):
        return env
    on_path = shutil.which("futhark")
    if on_path:
        return on_path
    local = REPO_ROOT / ".toolchain" / "bin" / "futhark"
    return str(local) if os.access(local, os.X_OK) else None


def test_futhark_unit_tests_pass(tmp_path):
    """`futhark test --backend=c` on UNIT_FILES reports every test case passed.

    The files are copied to a temporary folder so the compiled test programs do not
    land in futhark/.
    """
    futhark = find_futhark()
    if futhark is None:
        if in_ci():
            pytest.fail("no futhark compiler ($FUTHARK, PATH, .toolchain/bin/futhark) in CI")
        pytest.skip("no futhark compiler found ($FUTHARK, PATH or .toolchain/bin/futhark)")
    for src in (REPO_ROOT / "futhark").glob("*.fut"):  # the tested files and their imports
        shutil.copy(src, tmp_path / src.name)
    proc = subprocess.run([futhark, "test", f"--futhark={futhark}", "--backend=c", *UNIT_FILES],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    report = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"futhark test failed (exit {proc.returncode}):\n{report}"
    # the summary counts programs: "2/2 passed."
    m = re.search(r"(\d+)/(\d+) passed", report)
    assert m, f"unexpected futhark test output:\n{report}"
    assert int(m.group(1)) == int(m.group(2)) == len(UNIT_FILES), report
