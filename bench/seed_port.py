"""The seed port's formulation of microgpt's default job (bench/seed_port.fut).

build.sh compiles it with ``futhark c`` and our c backend's C compiler and flags
into ``build/seed_port/`` (``BACKENDS=seed_port ./build.sh`` alone); the driver
never loads it. Its one entry point runs the whole job: n_embd, n_head, n_layer
and block_size fixed at compile time (microgpt's), one document per step, each
document's loss a token-by-token loop through a KV cache inside ``vjp2``, Adam.
"""
from __future__ import annotations

import numpy as np

NAME = "seed_port"
BLOCK_SIZE = 16  # seed_port.fut's block_size


def built() -> bool:
    """Whether build.sh has compiled the seed-port library."""
    from microgpt_fut.backend.runtime import module_path

    return module_path(NAME) is not None


class SeedPort:
    """A context of the seed-port library.

    Raises RuntimeError (one line) when it is not built.
    """

    def __init__(self) -> None:
        from futhark_ffi import Futhark
        from microgpt_fut.backend.context import OwnedContext
        from microgpt_fut.backend.runtime import import_module, module_path

        path = module_path(NAME)
        if path is None:
            raise RuntimeError(f"the {NAME} baseline is not built: run "
                               f"BACKENDS={NAME} ./build.sh")
        self._ctx = OwnedContext(Futhark(import_module(NAME, path)))

    def job(self, vocab_size: int, seed: int, tokens: np.ndarray,
            n_pos: np.ndarray) -> np.ndarray:
        """len(tokens) Adam steps from microgpt's initialisation under ``seed``
        (lr 0.01 decayed linearly to 0 over them, beta1 0.85, beta2 0.99), step s on
        the document in row s.

        tokens: int64 [S, 17], rows BOS + document + BOS padded with BOS, ids below
        vocab_size (as ``Vocab.encode`` with block_size 16); n_pos: int64 [S], the
        positions of each row that count, 1..16. Returns float32 [S], each step's
        loss (mean negative log-likelihood, nats). Raises ValueError on other
        shapes or out-of-range values.
        """
        tokens = np.ascontiguousarray(tokens, dtype=np.int64)
        n_pos = np.ascontiguousarray(n_pos, dtype=np.int64)
        if tokens.ndim != 2 or tokens.shape[1] != BLOCK_SIZE + 1 or n_pos.shape != tokens.shape[:1]:
            raise ValueError(f"{NAME}: tokens must be [S, {BLOCK_SIZE + 1}] and n_pos [S], "
                             f"not {tokens.shape} and {n_pos.shape}")
        if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab_size):
            raise ValueError(f"{NAME}: token ids must be in 0..{vocab_size - 1}")
        if n_pos.size and (n_pos.min() < 1 or n_pos.max() > BLOCK_SIZE):
            raise ValueError(f"{NAME}: n_pos must be in 1..{BLOCK_SIZE}")
        # an array result: reading it waits for the computation (no stale scalar)
        return np.asarray(self._ctx.numpy(self._ctx.call("job", vocab_size, seed, tokens, n_pos)))
