-- | Eight f32 lanes as a tuple, one 256-bit register's worth: the pieces of
-- gemm.fut's blocks (block_256.fut, block_512.fut), which clang's SLP
-- vectoriser packs into vector registers (two of them into one 512-bit
-- register where build.sh asks for 512-bit vectors).

-- | Eight lanes of accumulators or operands: one 256-bit register.
type v8 = (f32, f32, f32, f32, f32, f32, f32, f32)

def v8_zero : v8 = (0, 0, 0, 0, 0, 0, 0, 0)

-- | a * b + c in every lane.
def v8_fma (a: f32) ((b0, b1, b2, b3, b4, b5, b6, b7): v8) ((c0, c1, c2, c3, c4, c5, c6, c7): v8) : v8 =
  (f32.fma a b0 c0, f32.fma a b1 c1, f32.fma a b2 c2, f32.fma a b3 c3,
   f32.fma a b4 c4, f32.fma a b5 c5, f32.fma a b6 c6, f32.fma a b7 c7)

-- | p[o:o+8].
def v8_load [n] (p: [n]f32) (o: i64) : v8 =
  (p[o], p[o + 1], p[o + 2], p[o + 3], p[o + 4], p[o + 5], p[o + 6], p[o + 7])

-- | y[o:o+8] = v, as eight in-place updates: stores straight into y, which
-- clang merges into one vector store.  An array literal copied into y instead
-- cost one runtime copy (`lmad_copy`) per row of every block, 40 % of the
-- product at K = 128.
def v8_put [L] (o: i64) ((c0, c1, c2, c3, c4, c5, c6, c7): v8) (y: *[L]f32) : *[L]f32 =
  let y[o] = c0
  let y[o + 1] = c1
  let y[o + 2] = c2
  let y[o + 3] = c3
  let y[o + 4] = c4
  let y[o + 5] = c5
  let y[o + 6] = c6
  let y[o + 7] = c7
  in y

-- | a * v in every lane.
def v8_scale (a: f32) ((c0, c1, c2, c3, c4, c5, c6, c7): v8) : v8 =
  (a * c0, a * c1, a * c2, a * c3, a * c4, a * c5, a * c6, a * c7)
