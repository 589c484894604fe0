-- | Forward/backward pairs of the layers, written out by hand as llm.c's
-- train_gpt2.c does: each `_backward` takes what its forward saw and the
-- gradient of its output, and returns the gradients of its inputs.
--
-- Every product is one `matmul` (rows of one operand against rows of the
-- other, contiguous dot products).  A backward's transposes are copied into
-- fresh arrays first (`transposed`), O(N C) work beside the O(N C^2) products,
-- so that no dot product reads memory with a stride.  What reverse AD (`vjp2`)
-- makes of the same forward instead accumulates each weight's gradient one
-- position at a time (a rank-1 update of the whole matrix per position).
--
-- Shapes: N positions (rows), K inputs, M outputs; one head of attention sees
-- n positions of D = C / H channels.

import "nn"

-- | a as [m][n], laid out afresh in row-major order (a bare `transpose`, even
-- copied, stays a strided view of a's memory).  Element by element: a tiled
-- copy (64 x 64 tiles through the runtime's transposing copy) was 2.2x faster
-- on a [2048][512] array alone, but slower in training, whose documents'
-- [n][C] arrays are small enough to stay in the cache.
def transposed [n][m] (a: [n][m]f32) : [m][n]f32 =
  opaque (tabulate m (\i -> tabulate n (\j -> a[j, i])))

-- | y = x w^T: x: [N][K], w: [M][K] -> [N][M], microgpt's `linear` on every row
-- (llm.c's matmul_forward, without a bias).  Both operands are arrays of their
-- own (`opaque`): an element-wise producer (rmsnorm, relu) fused into the
-- product is recomputed for every dot product.
def matmul [N][K][M] (x: [N][K]f32) (w: [M][K]f32) : [N][M]f32 =
  let (x, w) = (opaque x, opaque w)
  in map (\xr -> map (dot xr) w) x

-- | The dot products of w with each of the four rows xs: [4][K], in one pass.
def dot4 [K] (w: [K]f32) (xs: [4][K]f32) : (f32, f32, f32, f32) =
  reduce_comm (\(a, b, c, d) (e, f, g, h) -> (a + e, b + f, c + g, d + h)) (0, 0, 0, 0)
              (map2 (\wk (a, b, c, d) -> (wk * a, wk * b, wk * c, wk * d))
                    w (zip4 xs[0] xs[1] xs[2] xs[3]))

-- | `matmul` with four rows of x through each row of w together (`dot4`), so
-- that each weight is read once per four positions (x is padded with zero rows
-- to a multiple of 4): 1.1-1.4x faster at [2048][128] by [512][128] on c, and
-- the linear layers' form.  Only where it is not inside a `map`: in
-- attention's per-head products Futhark 0.25.32 compiled it to wrong results.
def matmul4 [N][K][M] (x: [N][K]f32) (w: [M][K]f32) : [N][M]f32 =
  let G = (N + 3) / 4
  let (x, w) = (opaque x, opaque w)
  let x4 = opaque (tabulate (4 * G) (\i -> if i < N then x[i] else replicate K 0))
  let y4 = tabulate G (\g -> let (a, b, c, d) = unzip4 (map (`dot4` (x4[4 * g:4 * g + 4] :> [4][K]f32)) w)
                             in [a, b, c, d])
  in opaque (tabulate N (\i -> y4[i / 4, i % 4]))

-- | The backward of `matmul` (and `matmul4`): dx = dy w: [N][K] and dw = dy^T x:
-- [M][K] for dy: [N][M] (llm.c's matmul_backward), both by `matmul4`.  dw is made an array of its own
-- (`opaque`): fused into the optimiser's flat loop over the weights
-- (tensor.fut), its dot products were indexed through integer divisions.
def matmul_backward [N][K][M] (x: [N][K]f32) (w: [M][K]f32) (dy: [N][M]f32)
                    : ([N][K]f32, [M][K]f32) =
  (matmul4 dy (transposed w), opaque (matmul4 (transposed dy) (transposed x)))

-- | The backward of `rmsnorm` (nn.fut) at x: [n] for dy: [n].  With
-- s = (mean(x^2) + 1e-5)^(-1/2), y = s x, so dx = s dy - s^3 (x . dy) / n x.
def rmsnorm_backward [n] (x: [n]f32) (dy: [n]f32) : [n]f32 =
  let s = 1 / f32.sqrt (dot x x / f32.i64 n + 1e-5)
  let c = s * s * s * dot x dy / f32.i64 n
  in map2 (\xi dyi -> s * dyi - c * xi) x dy

-- | Head h's D = C/H columns of every row of x: [n][C], as [H][n][D].  Copied
-- into an array of their own (`opaque`): fused into the products that read them,
-- these index computations ran inside the dot products' loops (integer divisions).
def heads_of [n][C] (H: i64) (x: [n][C]f32) : [H][n][C / H]f32 =
  let D = C / H
  in opaque (tabulate H (\h -> tabulate n (\t -> tabulate D (\d -> x[t, h * D + d]))))

-- | The inverse of `heads_of` (also copied), built from whole rows of D: an
-- element-wise index o[c / D, t, c % D] cost two integer divisions per element.
def merge_heads_of [H][n][D] (C: i64) (o: [H][n][D]f32) : [n][C]f32 =
  opaque (tabulate n (\t -> flatten (tabulate H (\h -> o[h, t])) :> [C]f32))

-- | Causal multi-head attention over one sequence (microgpt's attention for all
-- n positions at once): q, k, v: [n][C] -> the heads' outputs, concatenated,
-- [n][C], and the attention weights [H][n][n] that the backward reads.
-- Position t attends to positions s <= t, softmax(q_t . k_s / sqrt D).
def attention_forward [n][C] (H: i64) (q: [n][C]f32) (k: [n][C]f32) (v: [n][C]f32)
                      : ([n][C]f32, [H][n][n]f32) =
  let scale = 1 / f32.sqrt (f32.i64 (C / H))
  let head (qh: [n][C / H]f32) (kh: [n][C / H]f32) (vh: [n][C / H]f32) =
    let att = map2 (\t row -> masked_softmax (t + 1) (map (* scale) row)) (iota n) (matmul qh kh)
    in (matmul att (transposed vh), att)
  let (o, att) = unzip (map3 head (heads_of H q) (heads_of H k) (heads_of H v))
  in (merge_heads_of C o, att)

-- | The backward of `attention_forward` for dout: [n][C]: (dq, dk, dv), each
-- [n][C].  Per head, with P the attention weights and S the scaled scores:
-- dP = dO V^T, dV = P^T dO, dS = P * (dP - rowsum(P * dP)) (softmax's
-- backward), dQ = dS K scale, dK = dS^T Q scale.
def attention_backward [n][C][H] (q: [n][C]f32) (k: [n][C]f32) (v: [n][C]f32)
                       (att: [H][n][n]f32) (dout: [n][C]f32)
                       : ([n][C]f32, [n][C]f32, [n][C]f32) =
  let scale = 1 / f32.sqrt (f32.i64 (C / H))
  let head (qh: [n][C / H]f32) (kh: [n][C / H]f32) (vh: [n][C / H]f32) (p: [n][n]f32)
           (doh: [n][C / H]f32) =
    let dp = matmul doh vh
    let dv = matmul (transposed p) (transposed doh)
    let ds = map2 (\pr dpr -> let c = dot pr dpr in map2 (\pi dpi -> scale * pi * (dpi - c)) pr dpr)
                  p dp
    let dq = matmul ds (transposed kh)
    let dk = matmul (transposed ds) (transposed qh)
    in (dq, dk, dv)
  let (dq, dk, dv) = unzip3 (map5 head (heads_of H q) (heads_of H k) (heads_of H v) att
                                       (heads_of H dout))
  in (merge_heads_of C dq, merge_heads_of C dk, merge_heads_of C dv)

-- | The gradient of w * nll(logits, target) with respect to the logits:
-- w (softmax(logits) - onehot(target)).
def nll_backward [V] (w: f32) (logits: [V]f32) (target: i64) : [V]f32 =
  map2 (\i p -> w * (p - f32.bool (i == target))) (iota V) (softmax logits)
