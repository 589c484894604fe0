-- | gemm.fut's block for 512-bit vectors (Intel's AVX-512 cores, with two
-- 512-bit FMA units on Xeons): rows of 32 columns, two registers each, so
-- 6 x 32 blocks of 12 accumulators, enough to keep both units busy through
-- the FMA's latency.  The 6 x 16 block of block_256.fut has only 6 such
-- registers, and left half of an Intel core's FMA throughput unused
-- (bench/README.md).  As block_256.fut, copied to block.fut by build.sh.

import "v8"

-- | The columns of a row of a block, and of a panel.
def W : i64 = 32

-- | One row of a block: W columns, four 256-bit halves, two 512-bit registers.
type row = (v8, v8, v8, v8)

def row_zero : row = (v8_zero, v8_zero, v8_zero, v8_zero)

-- | p[0:W].
def row_load [n] (p: [n]f32) : row = (v8_load p 0, v8_load p 8, v8_load p 16, v8_load p 24)

-- | y[o:o+W] = v.
def row_put [L] (o: i64) ((v0, v1, v2, v3): row) (y: *[L]f32) : *[L]f32 =
  v8_put (o + 24) v3 (v8_put (o + 16) v2 (v8_put (o + 8) v1 (v8_put o v0 y)))

-- | a * b + c in every column.
def row_fma (a: f32) ((b0, b1, b2, b3): row) ((c0, c1, c2, c3): row) : row =
  (v8_fma a b0 c0, v8_fma a b1 c1, v8_fma a b2 c2, v8_fma a b3 c3)

-- | a * c in every column.
def row_scale (a: f32) ((c0, c1, c2, c3): row) : row =
  (v8_scale a c0, v8_scale a c1, v8_scale a c2, v8_scale a c3)

-- | The bytes of panels above which each task of a product takes 8 blocks of
-- rows (`blocks_per_task`), so that a panel read from beyond the L2 serves 48
-- rows: 1 MB, half this machine's L2.  An Intel Xeon's L3 feeds a core about
-- half what the 6 x 32 block computes: at GPT-2 124M's shapes (panels of
-- 2.4-9.4 MB) the products ran at 0.5 of NumPy's speed, once per 6 rows, and
-- at 0.7-0.98 once per 48 (bench/README.md).
def group_above : i64 = 1 << 20
