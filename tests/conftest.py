"""Shared fixtures: the built backends, one cached Runtime per backend, a tiny model.

A test that takes the ``backend`` fixture runs once per backend in
``microgpt_fut.backend.runtime.BACKENDS``. README's test command builds every backend first,
so a missing library fails the test, except cuda's: it is built only where there is a
CUDA toolkit, and its tests are skipped, saying so. Runtimes are created once per
session (a futhark context is not free, and opencl on pocl compiles each kernel on
its first call) and shared by all tests through ``get_runtime``.

Hermetic: every test runs in a temporary working folder; HOME, the XDG folders and
the kernel cache point into one temporary folder for the session; and the session
fails if it left a file in the repository's folder (``pytest_sessionfinish``).
"""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

# Before the driver is imported: nothing a test starts may write to the user's home
# (our kernel cache, pocl's, matplotlib's, torch's and transformers' caches).
_SCRATCH = Path(tempfile.mkdtemp(prefix="microgpt-fut-tests-"))
atexit.register(shutil.rmtree, _SCRATCH, ignore_errors=True)
for _var, _sub in (("HOME", "home"), ("XDG_CACHE_HOME", "cache"), ("XDG_CONFIG_HOME", "config"),
                   ("MICROGPT_FUT_KERNEL_CACHE", "kernels"), ("MPLCONFIGDIR", "matplotlib")):
    (_SCRATCH / _sub).mkdir()
    os.environ[_var] = str(_SCRATCH / _sub)

from microgpt_fut.models.microgpt import MicrogptConfig
from microgpt_fut.backend.runtime import BACKENDS, PROGRAMS, Runtime, built_backends, library_name

REPO_ROOT = Path(__file__).resolve().parents[1]
# The data the project ships (data/README.md: names.txt, tinyshakespeare.txt).
DATA_DIR = REPO_ROOT / "data"
# Backends that `./build.sh all` builds on every machine (cuda only with a CUDA toolkit).
# MICROGPT_FUT_TEST_BACKENDS="cuda": the tests of those backends alone, each required (the
# GPU run, bench/gpu/runner.py, builds one library on a machine of its own)
ONLY = tuple(b for b in os.environ.get("MICROGPT_FUT_TEST_BACKENDS", "").split(",") if b)
REQUIRED_BACKENDS = ONLY or ("c", "multicore", "opencl")

_BUILT = built_backends()
_BUILT_BY_PROGRAM = {p: built_backends(p) for p in PROGRAMS}
_RUNTIMES: dict[tuple[str, str], Runtime] = {}


def in_ci() -> bool:
    """True when the CI environment variable is set to a true value."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def no_cuda_reason(program: str = "microgpt") -> str:
    """The skip reason of a test that needs the unbuilt cuda library of ``program``."""
    return (f"no CUDA toolkit here: {library_name('cuda', program)} is not built (build.sh "
            f"compiles cuda only where nvcc, cuda.h and libcuda are)")


def need_library(backend: str, program: str = "microgpt") -> None:
    """Return if ``program``'s library for ``backend`` is built; else skip the test for
    cuda (no CUDA toolkit) and fail it for any other backend (README's test command
    builds them all: ``./build.sh all``); with MICROGPT_FUT_TEST_BACKENDS, skip the
    backends it leaves out."""
    if backend in _BUILT_BY_PROGRAM[program]:
        return
    if ONLY and backend not in ONLY:
        pytest.skip(f"MICROGPT_FUT_TEST_BACKENDS runs {', '.join(ONLY)}")
    if backend == "cuda" and not ONLY:
        pytest.skip(no_cuda_reason(program))
    target = library_name(backend, program)
    pytest.fail(f"{target} not built (no build/{target}/_microgpt_{target}*.so): run "
                f"`./build.sh all` first", pytrace=False)


def backend_params(program: str = "microgpt") -> list:
    """One pytest.param per backend; an unbuilt cuda carries a skip mark saying why (an
    unbuilt other backend fails in ``get_runtime``)."""
    return [pytest.param(b, id=b, marks=pytest.mark.skip(reason=no_cuda_reason(program)))
            if b == "cuda" and b not in _BUILT_BY_PROGRAM[program] and not ONLY
            else pytest.param(b, id=b) for b in ONLY or BACKENDS]


def get_runtime(backend: str, program: str = "microgpt") -> Runtime:
    """The session's Runtime for ``program`` on ``backend`` (created quietly on first use;
    an unbuilt library: see ``need_library``)."""
    key = (program, backend)
    if key not in _RUNTIMES:
        need_library(backend, program)
        _RUNTIMES[key] = Runtime(backend, quiet=True, program=program)
    return _RUNTIMES[key]


@pytest.fixture(autouse=True)
def in_temporary_folder(tmp_path_factory, monkeypatch):
    """Every test runs in a fresh temporary working folder, never the repository's (the
    CLI's default --out is relative to it)."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


def _repository_files() -> set[str]:
    """The repository's untracked files, ignored ones included, less the build outputs
    that the test session itself makes (bytecode, pytest's cache)."""
    out = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all"],
                         cwd=REPO_ROOT, capture_output=True, text=True).stdout
    return {ln[3:] for ln in out.splitlines()
            if "__pycache__/" not in ln and ".pytest_cache/" not in ln}


_BEFORE = _repository_files() if (REPO_ROOT / ".git").exists() else None


_LEFT: list[str] = []  # files the session left in the repository's folder


def pytest_sessionfinish(session, exitstatus):
    """Fail the session when a test left a new file in the repository's folder."""
    if _BEFORE is not None:
        _LEFT.extend(sorted(_repository_files() - _BEFORE))
    if _LEFT:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    """Name the files that ``pytest_sessionfinish`` found."""
    if _LEFT:
        terminalreporter.write_line(f"FAILED: tests wrote into the repository's folder: "
                                    f"{', '.join(_LEFT[:10])}", red=True)


@pytest.fixture(scope="session")
def built() -> list[str]:
    """Names of the backends with a compiled library, in BACKENDS order."""
    return list(_BUILT)


@pytest.fixture(params=backend_params())
def backend(request) -> str:
    """Each backend in turn (unbuilt ones skipped)."""
    return request.param


@pytest.fixture(params=backend_params("gpt2"))
def gpt2_backend(request) -> str:
    """Each backend with GPT-2's library in turn (unbuilt ones skipped)."""
    return request.param


@pytest.fixture
def gpt2_rt(gpt2_backend) -> Runtime:
    """The cached GPT-2 Runtime of the current ``gpt2_backend``."""
    return get_runtime(gpt2_backend, "gpt2")


@pytest.fixture
def rt(backend) -> Runtime:
    """The cached Runtime of the current ``backend``."""
    return get_runtime(backend)


@pytest.fixture(scope="session")
def runtime_cache():
    """The session's Runtime getter: ``runtime_cache(name) -> Runtime``."""
    return get_runtime


@dataclass(frozen=True)
class TinyCase:
    """A tiny model config, float32 N(0, 0.3) weights and one batch of random tokens.

    tokens: int64 [B, T+1] (random, including non-BOS padding past n_pos);
    n_pos: int64 [B], all different, one equal to T and one shorter.
    """

    config: MicrogptConfig
    params: dict
    tokens: np.ndarray
    n_pos: np.ndarray


def make_tiny_case(seed: int = 0, std: float = 0.3) -> TinyCase:
    """A TinyCase from a seeded NumPy RNG (see TinyCase)."""
    from reference import random_params

    cfg = MicrogptConfig(vocab_size=7, n_embd=8, n_head=2, n_layer=2, block_size=6, mlp_width=12)
    rng = np.random.default_rng(seed)
    params = random_params(cfg.shapes(), rng, std)
    T = cfg.block_size
    tokens = rng.integers(0, cfg.vocab_size, size=(3, T + 1), dtype=np.int64)
    tokens[:, 0] = cfg.vocab_size - 1  # rows start with BOS, as the driver makes them
    n_pos = np.array([T, 3, 1], dtype=np.int64)
    return TinyCase(cfg, params, tokens, n_pos)


@pytest.fixture(scope="session")
def tiny() -> TinyCase:
    """The session's TinyCase (seed 0)."""
    return make_tiny_case(0)
