"""gemm.fut's products with each block that build.sh can choose (futhark/block_256.fut:
6 x 16 in 256-bit vectors; block_512.fut: 6 x 32 in 512-bit vectors), whichever one this
machine's libraries use: each compiled alone with the c library's compiler and flags at the
block's vector width, every product equals float64 NumPy's at shapes that leave blocks,
panels, strips, chunks and tasks of 48 rows partial, and the two blocks give the same bits
(every result is the same chain of FMAs over k, in order, whatever the block's width).

Needs the c library's compiler record (``./build.sh``) and the Futhark compiler.
"""
from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

from bench import breakdown as bd
from conftest import REPO_ROOT, need_library
from microgpt_fut.backend.runtime import build_dir

PROGRAM = """
import "futhark/gemm"
import "futhark/block"
entry nt [N][K][M] (x: [N][K]f32) (w: [M][K]f32) : [N][M]f32 = matmul_nt x w
entry nn [N][M][K] (dy: [N][M]f32) (w: [M][K]f32) : [N][K]f32 = matmul_nn dy w
entry tn [N][M][K] (dy: [N][M]f32) (x: [N][K]f32) : [M][K]f32 = matmul_tn dy x
entry nt_lower [n][D] (alpha: f32) (x: [n][D]f32) (y: [n][D]f32) : [n][n]f32 =
  matmul_nt_lower alpha x y
entry nn_lower [n][D] (l: [n][n]f32) (w: [n][D]f32) : [n][D]f32 = matmul_nn_lower l w
entry tn_lower [n][D] (l: [n][n]f32) (x: [n][D]f32) : [n][D]f32 = matmul_tn_lower l x
entry group (n: i64) (K: i64) (M: i64) : i64 = blocks_per_task n ((M + W - 1) / W) K
"""
BLOCKS = ("256", "512")


def _compile(folder, bits: str):
    """PROGRAM against a copy of futhark/ whose block.fut is block_<bits>.fut, built with
    the c library's compiler and flags, -mprefer-vector-width set to the block's width."""
    need_library("c")
    cc, flags = (build_dir() / "c" / "compiler.txt").read_text().splitlines()[:2]
    flags = re.sub(r"-mprefer-vector-width=\d+", f"-mprefer-vector-width={bits}", flags)
    shutil.copytree(REPO_ROOT / "futhark", folder / "futhark")
    (folder / "futhark" / "block.fut").write_text(f'open import "block_{bits}"\n')
    (folder / "prog.fut").write_text(PROGRAM)
    r = subprocess.run([bd.futhark(), "c", "prog.fut", "-o", "prog"], cwd=folder,
                       env={"PATH": "/usr/bin:/bin", "CC": cc, "CFLAGS": flags},
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return folder / "prog"


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    return {bits: _compile(tmp_path_factory.mktemp(f"block{bits}"), bits) for bits in BLOCKS}


def normal(g, *shape) -> np.ndarray:
    return g.standard_normal(shape).astype(np.float32)


def _cases():
    """(entry, inputs, float64 reference) at awkward shapes."""
    g = np.random.default_rng(43)
    x, w = normal(g, 37, 45), normal(g, 70, 45)  # 37 rows, 70 columns: partial blocks, panels
    yield "nt", [x, w], x.astype(np.float64) @ w.astype(np.float64).T
    dy, w = normal(g, 13, 4200), normal(g, 4200, 40)  # a sum over 4,200: chunks of 2,048
    yield "nn", [dy, w], dy.astype(np.float64) @ w.astype(np.float64)
    dy, x = normal(g, 21, 770), normal(g, 21, 20)  # dW from strips of dy's 770 columns
    yield "tn", [dy, x], dy.astype(np.float64).T @ x.astype(np.float64)
    # panels of 1.1 MB: tasks of 48 rows with block_512.fut (group_above), 770 rows
    x, w = normal(g, 770, 300), normal(g, 900, 300)
    yield "nt", [x, w], x.astype(np.float64) @ w.astype(np.float64).T
    dy, x = normal(g, 300, 770), normal(g, 300, 900)  # the same, read from strips
    yield "tn", [dy, x], dy.astype(np.float64).T @ x.astype(np.float64)
    n, D = 23, 10
    a, b = normal(g, n, D), normal(g, n, D)
    scores = 0.3 * (a.astype(np.float64) @ b.astype(np.float64).T)
    yield "nt_lower", [np.float32(0.3), a, b], np.tril(scores)
    lower = np.tril(normal(g, n, n))
    yield "nn_lower", [lower, b], lower.astype(np.float64) @ b.astype(np.float64)
    yield "tn_lower", [lower, a], lower.astype(np.float64).T @ a.astype(np.float64)


def test_blocks_match_numpy_and_each_other(programs, tmp_path):
    """Every product with either block within 1e-5 of float64 NumPy's (relative to the
    result's scale; matmul_nt_lower's triangle only), and the two blocks' results equal
    bit for bit."""
    for entry, inputs, ref in _cases():
        got = {bits: bd.call_entry(exe, entry, inputs, tmp_path)[0]
               for bits, exe in programs.items()}
        if entry == "nt_lower":  # above the diagonal: whatever whole panels hold
            got = {bits: np.tril(out) for bits, out in got.items()}
        for bits, out in got.items():
            assert out.shape == ref.shape, (entry, bits)
            np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max(),
                                       err_msg=f"{entry} {ref.shape} with block_{bits}.fut")
        assert np.array_equal(got["256"], got["512"]), f"{entry} {ref.shape}: blocks differ"


def test_tasks_of_48_rows_where_the_block_asks(programs, tmp_path):
    """The 1.1 MB panels above take tasks of 8 blocks with block_512.fut (an Intel core's
    L3 is too slow to stream them once per 6 rows) and of 1 with block_256.fut; GPT-2's
    head (panels streamed over 4 GiB) takes 8 with both, the recipe's products 1."""
    def group(bits, n, K, M):
        return int(bd.call_entry(programs[bits], "group",
                                 [np.int64(n), np.int64(K), np.int64(M)],
                                 tmp_path)[0])
    assert [group(b, 770, 300, 900) for b in BLOCKS] == [1, 8]
    assert [group(b, 1024, 768, 50257) for b in BLOCKS] == [8, 8]
    assert [group(b, 768, 128, 512) for b in BLOCKS] == [1, 1]
    assert [group(b, 700, 300, 900) for b in BLOCKS] == [1, 1]  # fewer than 16 tasks of 48
