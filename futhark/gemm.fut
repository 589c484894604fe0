-- | Matrix products for the c and multicore backends, written in the form of a
-- BLAS micro-kernel (Goto and van de Geijn 2008), which clang turns into one:
-- a block of 6 x W results is held in scalar accumulators over the whole sum,
-- each step broadcasts one element of the left operand per row and reads W
-- consecutive elements of the right operand, packed beforehand into panels of
-- W columns (`panels`).  W and the rows' operations come from block.fut, which
-- build.sh chooses for the machine: 16 columns in two 256-bit registers a row
-- (block_256.fut), or 32 in two 512-bit ones (block_512.fut, Intel's AVX-512
-- cores).  Written with `f32.fma` on tuples, clang's SLP vectoriser packs the
-- columns into vector registers: 12 vector accumulators, 2 vector loads and 6
-- broadcasts per 12 FMAs.  (Written as `acc + a * b`, its loop vectoriser took
-- each accumulator for a separate reduction over k instead and spilled.)  Every
-- result is the same chain of FMAs over k in order whatever W, so the same bits.
-- Measured against NumPy's one-thread OpenBLAS in bench/README.md ("Products at
-- BLAS speed", "512-bit blocks on an Intel Xeon").
--
-- Futhark's CPU backends tile no loops, so the tiling is written out here; the
-- GPU backends never call these (layout.fut's `grad_by_hand` is false there).

import "block"

-- | The six rows of a block.
type block = (row, row, row, row, row, row)


-- | The block after one step k of the sum: row d += a(i_d, k) * p[k].
def block_step [K] (a: i64 -> i64 -> f32) ((i0, i1, i2, i3, i4, i5): (i64, i64, i64, i64, i64, i64))
                   (p: [K][W]f32) (k: i64) ((c0, c1, c2, c3, c4, c5): block) : block =
  let b = row_load p[k]
  in (row_fma (a i0 k) b c0, row_fma (a i1 k) b c1, row_fma (a i2 k) b c2,
      row_fma (a i3 k) b c3, row_fma (a i4 k) b c4, row_fma (a i5 k) b c5)

-- | Row d of the block is the sum over lo <= k < hi of a(i_d, k) * p[k], in
-- order of k.  Two steps per iteration: with one, clang kept each
-- accumulator's previous value alive for the loop's exit and copied all 12
-- registers every step (0.6 of the speed at K = 128).
def block_sum [K] (a: i64 -> i64 -> f32) (is: (i64, i64, i64, i64, i64, i64)) (p: [K][W]f32)
              (lo: i64) (hi: i64) : block =
  let z = row_zero
  let len = hi - lo
  let acc = loop acc = (z, z, z, z, z, z) for k2 < len / 2 do
              block_step a is p (lo + 2 * k2 + 1) (block_step a is p (lo + 2 * k2) acc)
  in if len % 2 == 1 then block_step a is p (hi - 1) acc else acc

-- | The panels of w columns of an operand [K][M] given by its elements (b k col,
-- col < M), flat: p[(j K + k) w + c] = b k (w j + c), zero past M, L = J K w
-- for J = (M + w - 1) / w (w = W: `gemm`'s right operand; 6: `pack_strips`).
-- Written element by element into one flat array by sequential loops: as a
-- `tabulate` of [W] rows, each row went through a temporary array and a
-- runtime copy (`lmad_copy`), and the whole result was copied once more (5 % of
-- the recipe's step); as a transposed view of b, the panels' reads went through
-- b's layout in the training step, with integer divisions and gathers.
def pack (w: i64) (L: i64) (K: i64) (M: i64) (b: i64 -> i64 -> f32) : [L]f32 =
  let J = (M + w - 1) / w
  -- every index is in bounds: c < w, columns past M are not read, L = J K w
  in #[unsafe]
     loop p = replicate L 0 for j < J do
       loop p for k < K do
         loop p for c < w do
           let col = w * j + c
           in p with [(j * K + k) * w + c] = if col < M then b k col else 0

-- | `pack` with its panels made in parallel, each as `pack` makes one: the
-- operands of the linear layers' products are packed at the top level of the
-- step, where the multicore backend made them on one core while the other
-- waited (3-4 % of the recipe's step).  Inside a parallel map (attention's
-- heads) `pack` stays sequential.
def pack_panels (w: i64) (L: i64) (K: i64) (M: i64) (b: i64 -> i64 -> f32) : [L]f32 =
  let J = (M + w - 1) / w
  in flatten (tabulate J (\j -> pack w (K * w) K (i64.min w (M - w * j)) (\k c -> b k (w * j + c))))
     :> [L]f32

-- | b: [K][M] as panels of W columns, [(M + W - 1) / W][K][W], p[j][k][c] =
-- b[k][W j + c] (zero past M): the right operand of `gemm`, each panel read
-- along k as one contiguous stream (`pack`).  Inlined: for attention's
-- products, per head inside a parallel map.
def panels [K][M] (b: [K][M]f32) : [(M + W - 1) / W][K][W]f32 =
  let J = (M + W - 1) / W
  in unflatten_3d (pack W (J * K * W) K M (\k col -> b[k, col]))

-- | `panels` of w's transpose, from w: [M][K] as it lies: p[j][k][c] = w[W j + c][k].
def panels_t [M][K] (w: [M][K]f32) : [(M + W - 1) / W][K][W]f32 =
  let J = (M + W - 1) / W
  in unflatten_3d (pack W (J * K * W) K M (\k row -> w[row, k]))

-- | `panels` for the linear layers' products (`tasks_rows`, `tasks_cols`), first-
-- order and not inlined, with the flat size L = J K W a parameter, so that the
-- panels are a block of their own, as a function's argument must be (packed
-- inline, they were copied once more on their way in).  Not for code inside a
-- parallel map: there each call's block came from a worker thread's arena,
-- page-faulted in afresh (7x the page faults of multicore's recipe step).
#[noinline]
def pack_rows [K][M] (L: i64) (b: [K][M]f32) : [L]f32 = pack_panels W L K M (\k col -> b[k, col])

-- | `panels_t`'s, as `pack_rows`.
#[noinline]
def pack_cols [M][K] (L: i64) (w: [M][K]f32) : [L]f32 = pack_panels W L K M (\k row -> w[row, k])

-- | `panels` by `pack_rows`.
def panels_dense [K][M] (b: [K][M]f32) : [(M + W - 1) / W][K][W]f32 =
  let J = (M + W - 1) / W
  in unflatten_3d (pack_rows (J * K * W) b :> [J * K * W]f32)

-- | `panels_t` by `pack_cols`.
def panels_t_dense [M][K] (w: [M][K]f32) : [(M + W - 1) / W][K][W]f32 =
  let J = (M + W - 1) / W
  in unflatten_3d (pack_cols (J * K * W) w :> [J * K * W]f32)

-- | The blocks of `gemm`'s tasks, [T][R m] for R = 6 G: task t holds rows R t ..
-- R t + R - 1 one after another (row i clamped to n - 1), each row m columns.
-- The left operand is read through a, row i's k-th element as a (at i) k, the
-- sum for the block of rows i0..i5 runs over [lo, hi) = band i0 i5, and a task
-- whose last row is i computes panels_of i panels (the rest of its columns stay
-- 0).  Each sum is multiplied by alpha as it is stored (by 1 exactly, for the
-- plain products).
def tasks [K][J] (T: i64) (G: i64) (n: i64) (m: i64) (Rm: i64) (alpha: f32) (at: i64 -> i64)
                 (band: i64 -> i64 -> (i64, i64)) (panels_of: i64 -> i64)
                 (a: i64 -> i64 -> f32) (p: [J][K][W]f32) : [T][Rm]f32 =
  let R = 6 * G
  let rows t =
    -- every index is in bounds: rows clamped to n, columns below m, Rm = R m
    #[unsafe]
    loop y = replicate Rm 0 for j < i64.min J (panels_of (i64.min (R * t + R - 1) (n - 1))) do
      loop y for g < G do
        let i d = i64.min (R * t + 6 * g + d) (n - 1)
        let (lo, hi) = band (i 0) (i 5)
        let (c0, c1, c2, c3, c4, c5) =
          block_sum a (at (i 0), at (i 1), at (i 2), at (i 3), at (i 4), at (i 5)) p[j] lo hi
        let (c0, c1, c2, c3, c4, c5) = (row_scale alpha c0, row_scale alpha c1, row_scale alpha c2,
                                        row_scale alpha c3, row_scale alpha c4, row_scale alpha c5)
        let (o, r) = (W * j, 6 * g * m)
        in if o + W <= m
           then row_put (r + 5 * m + o) c5 (row_put (r + 4 * m + o) c4 (row_put (r + 3 * m + o) c3
                  (row_put (r + 2 * m + o) c2 (row_put (r + m + o) c1 (row_put (r + o) c0 y)))))
           else -- the last panel, past m: whole rows into b, then its first m - o
                -- columns element by element (slices of b's rows were one runtime copy
                -- each: 275 of the 484 a step in microgpt's, a fifth of its time)
                let b = row_put (5 * W) c5 (row_put (4 * W) c4 (row_put (3 * W) c3 (row_put (2 * W) c2
                          (row_put W c1 (row_put 0 c0 (replicate (6 * W) 0))))))
                in loop y for d < 6 do
                     loop y for e < m - o do y with [r + d * m + o + e] = b[W * d + e]
  in tabulate T rows

-- | G, the blocks of 6 rows a task of `tasks` computes: 8 where the panels (J K W
-- 4 bytes), streamed once per 6 rows, would move over 4 GiB, or pass block.fut's
-- `group_above`, and 16 tasks of 48 rows remain, else 1.
def blocks_per_task (n: i64) (J: i64) (K: i64) : i64 =
  let bytes = J * K * W * 4
  in if ((n + 5) / 6 * bytes <= 1 << 32 && bytes <= group_above) || n < 16 * 48 then 1 else 8

-- | The first n rows of `tasks`' result y: [T][R m] (R rows a task), as [n][m].
-- The flattened blocks are `opaque`: otherwise Futhark folds the reshape into
-- every later read, and an element-wise map over the result turned each flat
-- index back into (block, row, column) by three integer divisions per element
-- (GELU's backward alone took 11 % of the recipe's step on multicore).
def first_rows [T][Rm] (R: i64) (n: i64) (m: i64) (y: [T][Rm]f32) : [n][m]f32 =
  (unflatten (opaque (flatten y) :> [(T * R) * m]f32))[:n]

-- | `tasks` over the whole sum and every panel, with the left operand a: [r][c]
-- read by rows from its column lo (a(i, k) = a[i, lo + k]).  First-order and not
-- inlined, with every size a parameter: clang compiles it alone into the
-- micro-kernel (c's recipe step 1.2-1.4x faster than with every product inlined
-- into the training step), and the blocks are written in place into the array it returns
-- (inlined, Futhark 0.25 copied the whole result once more: it did not see the
-- map's strides R*m and m*R as equal).  Its arguments are copied instead where
-- they lie in a loop's buffer or are a slice (a layer's weights): as many bytes
-- a step as before.
#[noinline]
def tasks_rows [r][c][K][J] (T: i64) (G: i64) (n: i64) (m: i64) (Rm: i64) (lo: i64)
                            (a: [r][c]f32) (p: [J][K][W]f32) : [T][Rm]f32 =
  tasks T G n m Rm 1 id (\_ _ -> (0, K)) (\_ -> J) (\i k -> #[unsafe] a[i, lo + k]) p

-- | As `tasks_rows`, with a: [r][c] read by columns (a(i, k) = a[k, i]), passed
-- flattened (rc = r c): as [r][c], multicore copied a whole before the product.
#[noinline]
def tasks_cols [rc][K][J] (T: i64) (G: i64) (n: i64) (m: i64) (Rm: i64)
                           (c: i64) (a: [rc]f32) (p: [J][K][W]f32) : [T][Rm]f32 =
  tasks T G n m Rm 1 id (\_ _ -> (0, K)) (\_ -> J) (\i k -> #[unsafe] a[k * c + i]) p

-- | The strips of 6 columns of a: [r][c] (flattened, rc = r c), as BLAS packs
-- its left operand: `pack` 6, s[(t r + k) 6 + d] = a[k][6 t + d] for strip t <
-- (c + 5) / 6 (zero past c: `tasks_strips` never reads there, its rows being
-- clamped to c - 1), L = 6 r ((c + 5) / 6), so that a block of `tasks_strips`
-- reads its six rows of a^T as one stream.  Not inlined, as `pack_rows`.
#[noinline]
def pack_strips [rc] (L: i64) (r: i64) (c: i64) (a: [rc]f32) : [L]f32 =
  pack_panels 6 L r c (\k col -> #[unsafe] a[k * c + col])

-- | As `tasks_cols`, with a^T's rows read from `pack_strips`' strips of a (K = r
-- the sum's length): row i's k-th element at s[(i / 6) 6 K + 6 k + i % 6].
#[noinline]
def tasks_strips [L][K][J] (T: i64) (G: i64) (n: i64) (m: i64) (Rm: i64)
                            (s: [L]f32) (p: [J][K][W]f32) : [T][Rm]f32 =
  tasks T G n m Rm 1 (\i -> i / 6 * 6 * K + i % 6) (\_ _ -> (0, K)) (\_ -> J)
        (\o k -> #[unsafe] s[o + 6 * k]) p

-- | c[i][j] = sum over k of a(i, k) * b[k][j], for i < n and j < m <= W J, with
-- b as `panels` p and a: [r][c] read by rows (a(i, k) = a[i, k]) or, `by_cols`,
-- by columns (a[k, i]).  Tasks of G blocks of 6 rows run in parallel (on
-- multicore), each reading panel after panel once for its G blocks: G is 1
-- unless the panels, streamed from memory once per 6 rows, would move over
-- 4 GiB, as at GPT-2's head (V = 50257), where G = 8 halved the forward's and
-- dx's time (bench/README.md), or pass block.fut's `group_above` (on Intel's
-- cores: GPT-2 124M's products).  The sums are the same, so are the bits.  The
-- last task repeats row n - 1 where n is not a multiple of 6 G, so that every
-- block is written whole, and those rows are dropped (a slice of rows from the
-- start, which keeps the result's layout and needs no copy).  A panel past m
-- (m not a multiple of W) is written through a small array.  Read by
-- columns with rows of c >= 768 elements (GPT-2 124M's dW), a block's six
-- elements a step lie on another page each step: there a is packed into strips
-- of 6 columns first (`pack_strips`), the same sums 1.25-1.5x faster alone
-- (bench/README.md), except where G = 8 and a is over 64 MB (the head, whose
-- strips would copy the logits' gradient: 206 MB at 124M).
def gemm [r][c][K][J] (n: i64) (m: i64) (by_cols: bool) (a: [r][c]f32) (p: [J][K][W]f32)
                      : [n][m]f32 =
  let G = blocks_per_task n J K
  let T = (n + 6 * G - 1) / (6 * G)
  let y = if by_cols && c >= 768 && (G == 1 || r * c <= 1 << 24)
          then tasks_strips T G n m (6 * G * m) (pack_strips (6 * r * ((c + 5) / 6)) r c (flatten a)) p
          else if by_cols then tasks_cols T G n m (6 * G * m) c (flatten a) p
          else tasks_rows T G n m (6 * G * m) 0 a p
  in first_rows (6 * G) n m y

-- | `gemm` by rows over K of a's columns from column lo: c[i][j] = sum over k < K
-- of a[i, lo + k] * b[k][j] (p: b's panels), for the sums that `matmul_nn` splits.
def gemm_rows_from [r][c][K][J] (lo: i64) (n: i64) (m: i64) (a: [r][c]f32) (p: [J][K][W]f32)
                               : [n][m]f32 =
  let G = blocks_per_task n J K
  let T = (n + 6 * G - 1) / (6 * G)
  in first_rows (6 * G) n m (tasks_rows T G n m (6 * G * m) lo a p)

-- | `tasks` inlined where it is used, for attention's causal products, called
-- per head inside a parallel map over the heads: through `tasks_rows`, each call
-- was a parallel task nested in the heads' (with `pack_rows`, multicore's recipe
-- step 13,662-16,750 tokens/s against 16,811-18,385).  Each block's sum runs
-- over [lo, hi) = band i0 i5, where a(i, k) is known to be 0 outside it (a
-- triangular left operand: the terms left out would add zeros, so for finite
-- operands the bits are the same), and a task whose last row is i computes
-- panels_of i panels (a triangular result: the columns of the panels left out
-- are 0).  Each sum is multiplied by alpha as it is stored.
def gemm_band [K][J] (n: i64) (m: i64) (alpha: f32) (band: i64 -> i64 -> (i64, i64))
                     (panels_of: i64 -> i64) (a: i64 -> i64 -> f32) (p: [J][K][W]f32)
                     : [n][m]f32 =
  let T = (n + 5) / 6
  in first_rows 6 n m (tasks T 1 n m (6 * m) alpha id band panels_of a p)

-- | x w^T: x: [N][K], w: [M][K] -> [N][M] (a linear layer's forward, llm.c's
-- matmul_forward without the bias).
def matmul_nt [N][K][M] (x: [N][K]f32) (w: [M][K]f32) : [N][M]f32 =
  gemm N M false x (panels_t_dense w)

-- | dy w: dy: [N][M], w: [M][K] -> [N][K] (a linear layer's dx).  A sum over
-- more than 2 kc terms (GPT-2's head: M = V = 50257) runs as products over
-- chunks of kc = 2048 of them, added in order: a chunk's rows of w, packed, are
-- 6 MB at 124M, which stay in the cache for every block of rows, where the whole
-- sum's panels (154 MB) streamed from memory once per task of 48 rows.  The head's
-- dx at GPT-2 124M alone on c: 0.78-0.89 s against 0.92-1.36 whole and NumPy's
-- 0.78-0.81 (bench/README.md).  (dy's chunk is read where it lies: copied into
-- rows of its own, as a slice passed to `tasks_rows` is, it took 0.93-1.14 s.)
def matmul_nn [N][M][K] (dy: [N][M]f32) (w: [M][K]f32) : [N][K]f32 =
  let kc = 2048
  in if M <= 2 * kc then gemm N K false dy (panels_dense w)
     else loop acc = replicate N (replicate K 0) for c < (M + kc - 1) / kc do
            let lo = c * kc
            let p = panels_dense w[lo:lo + i64.min kc (M - lo)]
            in map2 (map2 (+)) acc (gemm_rows_from lo N K dy p)

-- | dy^T x: dy: [N][M], x: [N][K] -> [M][K] (a linear layer's dW): dy read by
-- columns, six consecutive elements of a row per step, no transpose (in place,
-- or from strips of 6 columns for M >= 768: `gemm`).
def matmul_tn [N][M][K] (dy: [N][M]f32) (x: [N][K]f32) : [M][K]f32 =
  gemm M K true dy (panels_dense x)

-- | The lower triangle of alpha x y^T for x, y: [n][D] (attention's scaled
-- scores q k^T / sqrt D, and dP = dO V^T in its backward): c[i][j] = alpha (x_i .
-- y_j) for j <= i, the dot product as `matmul_nt` computes it, times alpha as
-- it is stored (the same bits as a map (* alpha) after it, without a pass of its
-- own); above the diagonal, whole panels past a task's last row are left 0 (the
-- causal mask discards them), about half of the product.
def matmul_nt_lower [n][D] (alpha: f32) (x: [n][D]f32) (y: [n][D]f32) : [n][n]f32 =
  let x = opaque x
  in gemm_band n n alpha (\_ _ -> (0, D)) (\i -> i / W + 1) (\i k -> x[i, k]) (panels_t y)

-- | l w for l: [n][n] lower triangular (l[i][k] = 0 for k > i; attention's
-- weights P, or dS) and w: [n][D]: `matmul_nn`'s sums with their trailing zero
-- terms left out (rows i0..i5 sum over k <= i5), the same bits.
def matmul_nn_lower [n][D] (l: [n][n]f32) (w: [n][D]f32) : [n][D]f32 =
  let l = opaque l
  in gemm_band n D 1 (\_ i5 -> (0, i5 + 1)) (\_ -> (D + W - 1) / W) (\i k -> l[i, k]) (panels w)

-- | l^T x for l: [n][n] lower triangular and x: [n][D] (attention's dV = P^T dO
-- and dK = dS^T Q): `matmul_tn`'s sums with their leading zero terms left out
-- (rows i0..i5 sum over k >= i0; the accumulators start at +0 either way), the
-- same bits.
def matmul_tn_lower [n][D] (l: [n][n]f32) (x: [n][D]f32) : [n][D]f32 =
  let l = opaque l
  in gemm_band n D 1 (\i0 _ -> (i0, n)) (\_ -> (D + W - 1) / W) (\m i -> l[i, m]) (panels x)
