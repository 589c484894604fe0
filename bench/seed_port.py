"""The seed port's formulation of microgpt's default job (bench/seed_port.fut).

build.sh compiles it with ``futhark c`` and our c backend's C compiler and flags
into ``build/seed_port/`` (``BACKENDS=seed_port ./build.sh`` alone); the driver
never loads it. Its one entry point runs the whole job: microgpt's sizes as
compile-time constants, one document per step, each document's loss a
token-by-token loop through a KV cache inside ``vjp2``, Adam.
"""
from __future__ import annotations

import numpy as np

NAME = "seed_port"
N_EMBD, N_HEAD, N_LAYER, BLOCK_SIZE = 16, 4, 1, 16  # the constants of seed_port.fut


def built() -> bool:
    """Whether build.sh has compiled the seed-port library."""
    return _module_path() is not None


def _module_path():
    from microgpt_fut.runtime import build_dir

    folder = build_dir() / NAME
    found = sorted(folder.glob(f"_microgpt_{NAME}*.so")) if folder.is_dir() else []
    return found[0] if found else None


class SeedPort:
    """A context of the seed-port library.

    Raises RuntimeError (one line) when it is not built.
    """

    def __init__(self) -> None:
        import importlib.util

        from futhark_ffi import Futhark

        path = _module_path()
        if path is None:
            raise RuntimeError(f"the {NAME} baseline is not built: run "
                               f"BACKENDS={NAME} ./build.sh")
        spec = importlib.util.spec_from_file_location(f"_microgpt_{NAME}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        self._fut = Futhark(mod)

    def job(self, vocab_size: int, seed: int, tokens: np.ndarray,
            n_pos: np.ndarray) -> np.ndarray:
        """len(tokens) Adam steps from microgpt's initialisation under ``seed``
        (lr 0.01 decayed linearly to 0 over them, beta1 0.85, beta2 0.99), step s on
        the document in row s.

        tokens: int64 [S, 17], rows BOS + document + BOS padded with BOS (as
        ``Vocab.encode`` with block_size 16); n_pos: int64 [S], the positions of
        each row that count. Returns float32 [S], each step's loss (mean
        negative log-likelihood, nats). Raises ValueError on other shapes.
        """
        tokens = np.ascontiguousarray(tokens, dtype=np.int64)
        n_pos = np.ascontiguousarray(n_pos, dtype=np.int64)
        if tokens.ndim != 2 or tokens.shape[1] != BLOCK_SIZE + 1 or n_pos.shape != tokens.shape[:1]:
            raise ValueError(f"{NAME}: tokens must be [S, {BLOCK_SIZE + 1}] and n_pos [S], "
                             f"not {tokens.shape} and {n_pos.shape}")
        # an array result: reading it waits for the computation (no stale scalar)
        return np.asarray(self._fut.from_futhark(self._fut.job(vocab_size, seed, tokens, n_pos)))
