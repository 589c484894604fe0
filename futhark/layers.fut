-- | Forward/backward pairs of the layers, written out by hand as llm.c's
-- train_gpt2.c does: each `_backward` takes what its forward saw and the
-- gradient of its output, and returns the gradients of its inputs.
--
-- A linear layer's three products (y = x w^T, dx = dy w, dW = dy^T x) are
-- gemm.fut's, each reading its operands as they lie (no transposed copies).
-- Attention's per-head products are gemm.fut's too, each in the orientation
-- it needs.  What reverse AD (`vjp2`)
-- makes of the same forward instead accumulates each weight's gradient one
-- position at a time (a rank-1 update of the whole matrix per position).
--
-- Shapes: N positions (rows), K inputs, M outputs; one head of attention sees
-- n positions of D = C / H channels.

import "gemm"
import "nn"
import "tensor"

-- | The backward of a linear layer y = x w^T (`matmul_nt`): dx = dy w: [N][K]
-- and dw = dy^T x: [M][K] for dy: [N][M] (llm.c's matmul_backward).  dw is
-- made an array of its own (`opaque`): fused into the optimiser's flat loop
-- over the weights (tensor.fut), its products were indexed through integer
-- divisions.
def matmul_backward [N][K][M] (x: [N][K]f32) (w: [M][K]f32) (dy: [N][M]f32)
                    : ([N][K]f32, [M][K]f32) =
  (matmul_nn dy w, opaque (matmul_tn dy x))

-- | The backward of `rmsnorm` (nn.fut) at x: [n] for dy: [n].  With
-- s = (mean(x^2) + 1e-5)^(-1/2), y = s x, so dx = s dy - s^3 (x . dy) / n x.
def rmsnorm_backward [n] (x: [n]f32) (dy: [n]f32) : [n]f32 =
  let s = 1 / f32.sqrt (dot x x / f32.i64 n + 1e-5)
  let c = s * s * s * dot x dy / f32.i64 n
  in map2 (\xi dyi -> s * dyi - c * xi) x dy

-- | x's mean and 1 / sqrt(var + eps) (biased var, eps 1e-5): `normalised`'s two
-- scalars, z = (x - mean) r.
def norm_stat [n] (x: [n]f32) : (f32, f32) =
  let mean = f32.sum x / f32.i64 n
  let xc = map (\v -> v - mean) x
  in (mean, 1 / f32.sqrt (dot xc xc / f32.i64 n + 1e-5))

-- | x: [n] minus its mean, over its standard deviation (biased, eps 1e-5):
-- LayerNorm before its weight and bias.
def normalised [n] (x: [n]f32) : [n]f32 =
  let (mean, r) = norm_stat x
  in map (\v -> (v - mean) * r) x

-- | LayerNorm (Ba et al. 2016) with eps 1e-5, as torch's: (x - mean) /
-- sqrt(var + eps) * w (+ b), var biased.
def layer_norm [n] (bias: bool) (w: [n]f32) (b: [n]f32) (x: [n]f32) : [n]f32 =
  map3 (\z w b -> let y = z * w in if bias then y + b else y) (normalised x) w b

-- | The sum of the N rows of a: [N][M] (a bias's or LayerNorm's parameters'
-- gradient), as a reduction of rows by vector adds, each row read as it lies
-- (in order: on c one row after another; on multicore a fixed split, see
-- build.sh).  Summed column by column over a transposed copy instead, every
-- element of the copy was read from another cache line (at GPT-2 124M's
-- [1024][768], another page): LayerNorm's backward took 5x PyTorch's time there.
-- Alone at [1024][3072], 0.7 ms against 12.8 on c, 0.35 against 15.3 on
-- multicore (as a loop over the rows, each row's adds a parallel map there: 2.4).
def col_sums [N][M] (a: [N][M]f32) : [M]f32 = reduce (map2 (+)) (replicate M 0) a

-- | The backward of `layer_norm` at each row of xs: [N][n] for dys: [N][n], as
-- llm.c's layernorm_backward: (dx: [N][n], the weight's and the bias's gradients:
-- [n] each, the bias's zero without `bias`).  Per row, with z = normalised x and
-- g = w dy, dx = (g - mean(g) - z mean(g z)) / sqrt(var + eps); dw = sum over the
-- rows of z dy, db = sum of dy.  Each row's scalars first (`norm_stat`, once for
-- all three; then mean(g) and mean(g z)), then one map over the elements: a row
-- made by a function of its own inside a `map` was computed into an array of its
-- own and copied into the result, one runtime copy a row (6,144 of the recipe's
-- 26,804 copies a step on c).
def layer_norm_backward [N][n] (bias: bool) (w: [n]f32) (xs: [N][n]f32) (dys: [N][n]f32)
                        : ([N][n]f32, [n]f32, [n]f32) =
  let stats = map norm_stat xs
  let means = map3 (\x dy (mean, r) ->
                      (f32.sum (map2 (*) w dy) / f32.i64 n,
                       f32.sum (map3 (\v w d -> w * d * ((v - mean) * r)) x w dy) / f32.i64 n))
                   xs dys stats
  let dx = map4 (\x dy (mean, r) (mg, mgz) ->
                   map3 (\v w d -> let z = (v - mean) * r in (w * d - mg - z * mgz) * r) x w dy)
                xs dys stats means
  let dw = col_sums (map3 (\x dy (mean, r) -> map2 (\v d -> (v - mean) * r * d) x dy) xs dys stats)
  in (dx, dw, if bias then col_sums dys else replicate n 0)

-- | GPT-2's GELU, the tanh approximation (Hendrycks & Gimpel 2016), with
-- `tanh_fast` (vectorised; f32.tanh took half of a training step's time).
-- Inlined: Futhark keeps a function used in many places as a C function, and
-- a call per element keeps clang from vectorising the loop around it (13 % of
-- the recipe's step went to `futrts_gelu` and `futrts_tanh_fast` calls).
#[inline]
def gelu (x: f32) : f32 =
  0.5 * x * (1 + tanh_fast (0.7978845608028654 * (x + 0.044715 * x * x * x)))

-- | The backward of `gelu` at x for dy (llm.c's gelu_backward, with sech^2 as
-- 1 - tanh^2).  Inlined, as `gelu`.
#[inline]
def gelu_backward (x: f32) (dy: f32) : f32 =
  let s = 0.7978845608028654f32
  let t = tanh_fast (s * (x + 0.044715 * x * x * x))
  in dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * s * (1 + 3 * 0.044715 * x * x))

-- | A linear layer on every row of x: [N][K]: x w^T (+ b), w: [M][K] (`matmul_nt`).
def dense [N][K][M] (bias: bool) (w: [M][K]f32) (b: [M]f32) (x: [N][K]f32) : [N][M]f32 =
  let y = matmul_nt x w
  in if bias then map (map2 (+) b) y else y

-- | The backward of `dense` for dy: [N][M]: dx, dw and db (zero without `bias`).
def dense_backward [N][K][M] (bias: bool) (x: [N][K]f32) (w: [M][K]f32) (dy: [N][M]f32)
                   : ([N][K]f32, [M][K]f32, [M]f32) =
  let (dx, dw) = matmul_backward x w dy
  in (dx, dw, if bias then col_sums dy else replicate M 0)

-- | Head h's D = C/H columns of every row of x: [n][C], as [H][n][D], copied
-- into an array of their own: fused into the products that read them, these
-- index computations ran inside the dot products' loops (integer divisions).
-- Written element by element into one flat array by sequential loops (as
-- `panels`): as nested `tabulate`s, each row of D went through a temporary and
-- two runtime copies, with a bounds check per element that kept clang from
-- vectorising (a fifth of attention's forward at GPT-2 124M's shape).
def heads_of [n][C] (H: i64) (x: [n][C]f32) : [H][n][C / H]f32 =
  let D = C / H
  -- every index is in bounds: h D + d < H D <= C
  let y = #[unsafe]
          loop y = replicate (H * n * D) 0 for h < H do
            loop y for t < n do
              loop y for d < D do
                y with [(h * n + t) * D + d] = x[t, h * D + d]
  in unflatten_3d y :> [H][n][C / H]f32

-- | The inverse of `heads_of`, also by sequential loops into one flat array:
-- o: [H][n][D] -> [n][H D].
def merge_heads_of [H][n][D] (o: [H][n][D]f32) : [n][H * D]f32 =
  let y = #[unsafe]
          loop y = replicate (n * (H * D)) 0 for t < n do
            loop y for h < H do
              loop y for d < D do
                y with [(t * H + h) * D + d] = o[h, t, d]
  in unflatten y

-- | Causal multi-head attention over one sequence (microgpt's attention for all
-- n positions at once): q, k, v: [n][C] -> the heads' outputs, concatenated,
-- [n][C], and the attention weights [H][n][n] that the backward reads.
-- Position t attends to positions s <= t, softmax(q_t . k_s / sqrt D).
def attention_forward [n][C] (H: i64) (q: [n][C]f32) (k: [n][C]f32) (v: [n][C]f32)
                      : ([n][C]f32, [H][n][n]f32) =
  let scale = 1 / f32.sqrt (f32.i64 (C / H))
  let head (qh: [n][C / H]f32) (kh: [n][C / H]f32) (vh: [n][C / H]f32) =
    -- the scores scaled as the product stores them: a map (* scale) here was fused
    -- into the max's loop, whose stores then kept clang from vectorising it
    let att = map2 (\t row -> masked_softmax_fwd (t + 1) row) (iota n)
                   (matmul_nt_lower scale qh kh)
    in (matmul_nn_lower att vh, att)
  let (o, att) = unzip (map3 head (heads_of H q) (heads_of H k) (heads_of H v))
  in (merge_heads_of o :> [n][C]f32, att)

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
    let dp = matmul_nt_lower 1 doh vh
    let dv = matmul_tn_lower p doh
    let ds = map2 (\pr dpr -> let c = dot pr dpr in map2 (\pi dpi -> scale * pi * (dpi - c)) pr dpr)
                  p dp
    let dq = matmul_nn_lower ds kh
    let dk = matmul_tn_lower ds qh
    in (dq, dk, dv)
  let (dq, dk, dv) = unzip3 (map5 head (heads_of H q) (heads_of H k) (heads_of H v) att
                                       (heads_of H dout))
  let merge (x: [H][n][C / H]f32) = merge_heads_of x :> [n][C]f32
  in (merge dq, merge dk, merge dv)

-- | The gradient of w * nll(logits, target) with respect to the logits:
-- w (softmax(logits) - onehot(target)).
def nll_backward [V] (w: f32) (logits: [V]f32) (target: i64) : [V]f32 =
  map2 (\i p -> w * (p - f32.bool (i == target))) (iota V) (softmax_fwd logits)

-- | A batch's N = B*n positions (row b*n + t is position t of row b), from
-- `batch_rows`'s inputs and targets [B][n]: each one's input token, target,
-- position, and weight in the mean loss (1/total where it counts, else 0).
def flat_batch [B][n] (N: i64) (inputs: [B][n]i64) (targets: [B][n]i64) (n_pos: [B]i64)
               : ([N]i64, [N]i64, [N]i64, [N]f32) =
  let total = f32.i64 (i64.sum n_pos)
  let flat 't (a: [B][n]t) : [N]t = flatten a :> [N]t
  in (flat inputs, flat targets, flat (replicate B (iota n)),
      flat (map (\np -> map (\t -> if t < np then 1 / total else 0) (iota n)) n_pos))

-- | f on every element of an activation a: [N][C], row by row.  Not one flat
-- loop (tensor.fut's `map_2d`, for the optimiser's state): gemm's results are
-- row slices of a larger array, and a flat index into them cost an integer
-- division per element, with a copy through a scratch array on c.
def act_map [N][C] (f: f32 -> f32) (a: [N][C]f32) : [N][C]f32 = map (map f) a

-- | f on the elements of a and b: [N][C], row by row (as `act_map`).
def act_map2 [N][C] (f: f32 -> f32 -> f32) (a: [N][C]f32) (b: [N][C]f32) : [N][C]f32 =
  map2 (map2 f) a b

-- | a + b, two activations (a residual add).
def add2 [N][C] (a: [N][C]f32) (b: [N][C]f32) : [N][C]f32 = act_map2 (+) a b

-- | Row b's n positions of x: [N][C].
def doc [N][C] (n: i64) (x: [N][C]f32) (b: i64) : [n][C]f32 = x[b * n:(b + 1) * n] :> [n][C]f32

-- | What a block's backward reads of its forward, both models' (their attention
-- and MLP have the same shape): activations [N][C] of the N = B*n positions
-- (the block's input x, attention's q, k, v and output a, the residual stream
-- between attention and MLP x_mid), the attention weights `att` [B][H][n][n],
-- and the MLP's hidden layer before its activation `h` [N][F].
type saved [N][B][n][C][F][H] =
  { x: [N][C]f32, q: [N][C]f32, k: [N][C]f32, v: [N][C]f32,
    att: [B][H][n][n]f32, a: [N][C]f32, x_mid: [N][C]f32, h: [N][F]f32 }

-- | L layers' stores of all zeros, the loop's initial value before the forward
-- fills each layer's (made layer by layer in parallel: tensor.fut's `zero_at`).
def saved_zeros (L: i64) (N: i64) (B: i64) (n: i64) (C: i64) (F: i64) (H: i64)
                : *[L](saved [N][B][n][C][F][H]) =
  let layer (l: i64) : saved [N][B][n][C][F][H] =
    let zeros (k: i64) (m: i64) : [N][m]f32 = replicate N (replicate m (zero_at k l))
    in { x = zeros 0 C, q = zeros 1 C, k = zeros 2 C, v = zeros 3 C, a = zeros 4 C,
         x_mid = zeros 5 C, h = zeros 6 F,
         att = replicate B (replicate H (replicate n (replicate n (zero_at 7 l)))) }
  in tabulate L layer

-- | `attention_forward` on each of the B rows of n positions of q, k, v: [N][C].
def attention_rows [N][C] (H: i64) (B: i64) (n: i64) (q: [N][C]f32) (k: [N][C]f32) (v: [N][C]f32)
                   : ([N][C]f32, [B][H][n][n]f32) =
  let (a, att) = unzip (tabulate B (\b -> attention_forward H (doc n q b) (doc n k b) (doc n v b)))
  in (flatten a :> [N][C]f32, att)

-- | The backward of `attention_rows` for da: [N][C]: (dq, dk, dv).
def attention_rows_backward [N][C][B][H][n] (q: [N][C]f32) (k: [N][C]f32) (v: [N][C]f32)
                            (att: [B][H][n][n]f32) (da: [N][C]f32)
                            : ([N][C]f32, [N][C]f32, [N][C]f32) =
  let (dq, dk, dv) = unzip3 (tabulate B (\b -> attention_backward (doc n q b) (doc n k b)
                                                                  (doc n v b) att[b] (doc n da b)))
  in (flatten dq :> [N][C]f32, flatten dk :> [N][C]f32, flatten dv :> [N][C]f32)

-- | The positions' NLLs (logits: [N][V]) summed with `weights` (`flat_batch`'s:
-- the mean loss).
def weighted_nll [N][V] (logits: [N][V]f32) (targets: [N]i64) (weights: [N]f32) : f32 =
  f32.sum (map3 (\l t w -> if w > 0 then w * nll_fwd l t else 0) logits targets weights)

-- | The output head for x: [N][C] and w: [V][C] (logits x w^T): the loss
-- (`weighted_nll`), and its gradient with respect to x and w.
def head_loss_backward [N][C][V] (x: [N][C]f32) (w: [V][C]f32) (targets: [N]i64) (weights: [N]f32)
                       : (f32, [N][C]f32, [V][C]f32) =
  let logits = matmul_nt x w
  let loss = weighted_nll logits targets weights
  let (dx, dw) = matmul_backward x w (map3 nll_backward weights logits targets)
  in (loss, dx, dw)

-- | The gradient of an embedding table [m][C] whose rows is: [N] were read:
-- the sum of d: [N][C] over the positions that read each row, added in
-- position order (indices outside [0, m) add nothing, as `reduce_by_index`).
-- Sequential loops of in-place updates (N x C adds, small beside the
-- products): multicore's `reduce_by_index` adds a row's terms by atomics, in
-- whatever order its threads reach them, so its seeded runs differed.  (A
-- `map2` per row here became a parallel task per position on multicore.)
def embedding_backward [N][C] (m: i64) (is: [N]i64) (d: [N][C]f32) : [m][C]f32 =
  loop g = replicate m (replicate C 0) for n < N do
    let i = is[n]
    in if i >= 0 && i < m then loop g for c < C do g with [i, c] = g[i, c] + d[n, c] else g
