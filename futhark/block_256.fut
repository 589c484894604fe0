-- | gemm.fut's block for 256-bit vectors (AVX2, and AMD's Zen 4, whose AVX-512
-- units work on 256 bits at a time): rows of 16 columns, two registers each,
-- so 6 x 16 blocks of 12 accumulators.  build.sh copies this file or
-- block_512.fut to block.fut in each target's source, with clang's
-- -mprefer-vector-width to match (targets.txt's $VECTOR_BITS).

import "v8"

-- | The columns of a row of a block, and of a panel.
def W : i64 = 16

-- | One row of a block: W columns, two 256-bit registers.
type row = (v8, v8)

def row_zero : row = (v8_zero, v8_zero)

-- | p[0:W].
def row_load [n] (p: [n]f32) : row = (v8_load p 0, v8_load p 8)

-- | y[o:o+W] = v.
def row_put [L] (o: i64) ((v0, v1): row) (y: *[L]f32) : *[L]f32 =
  v8_put (o + 8) v1 (v8_put o v0 y)

-- | a * b + c in every column.
def row_fma (a: f32) ((b0, b1): row) ((c0, c1): row) : row = (v8_fma a b0 c0, v8_fma a b1 c1)

-- | a * c in every column.
def row_scale (a: f32) ((c0, c1): row) : row = (v8_scale a c0, v8_scale a c1)

-- | The bytes of panels above which each task of a product takes 8 blocks of
-- rows (`blocks_per_task`), so that a panel read from beyond the L2 serves 48
-- rows: never, on the machines this block is for.  An AMD EPYC's L3 feeds one
-- block of 6 rows as fast as it computes (tasks of 48 rows gained nothing at
-- GPT-2 124M's 9.4 MB panels, bench/README.md).
def group_above : i64 = i64.highest
