"""Shared fixtures: the built backends, one cached Runtime per backend, a tiny model.

A test that takes the ``backend`` fixture runs once per backend in
``microgpt_fut.runtime.BACKENDS``; backends without a compiled library are
reported as skipped with the reason. Runtimes are created once per session
(a futhark context is not free, and opencl on pocl compiles each kernel on
its first call) and shared by all tests through ``get_runtime``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from microgpt_fut.model import GPTConfig
from microgpt_fut.runtime import BACKENDS, PROGRAMS, Runtime, built_backends, library_name

REPO_ROOT = Path(__file__).resolve().parents[1]
# The data the project ships (data/README.md: names.txt, tinyshakespeare.txt).
DATA_DIR = REPO_ROOT / "data"
# Backends that CI builds (build.sh's defaults) and therefore must be present there.
REQUIRED_IN_CI = ("c", "multicore", "opencl")

_BUILT = built_backends()
_BUILT_BY_PROGRAM = {p: built_backends(p) for p in PROGRAMS}
_RUNTIMES: dict[tuple[str, str], Runtime] = {}


def in_ci() -> bool:
    """True when the CI environment variable is set to a true value."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def backend_params(program: str = "microgpt") -> list:
    """One pytest.param per backend; those without ``program``'s library carry a skip
    mark with the reason (CI checks separately that the default ones are built)."""
    out = []
    for b in BACKENDS:
        target = library_name(b, program)
        if b in _BUILT_BY_PROGRAM[program]:
            out.append(pytest.param(b, id=b))
        else:
            out.append(pytest.param(b, id=b, marks=pytest.mark.skip(
                reason=f"{target} not built (no build/{target}/_microgpt_{target}*.so); "
                       f"run `BACKENDS={target} ./build.sh`")))
    return out


def get_runtime(backend: str, program: str = "microgpt") -> Runtime:
    """The session's Runtime for ``program`` on ``backend`` (created quietly on first use)."""
    key = (program, backend)
    if key not in _RUNTIMES:
        if backend not in _BUILT_BY_PROGRAM[program]:
            pytest.skip(f"{library_name(backend, program)} not built")
        _RUNTIMES[key] = Runtime(backend, quiet=True, program=program)
    return _RUNTIMES[key]


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

    config: GPTConfig
    params: dict
    tokens: np.ndarray
    n_pos: np.ndarray


def make_tiny_case(seed: int = 0, std: float = 0.3) -> TinyCase:
    """A TinyCase from a seeded NumPy RNG (see TinyCase)."""
    from reference import random_params

    cfg = GPTConfig(vocab_size=7, n_embd=8, n_head=2, n_layer=2, block_size=6, mlp_width=12)
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
