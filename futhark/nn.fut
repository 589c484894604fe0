-- | The small building blocks of microgpt, one function each, as in microgpt.py.

def dot [n] (a: [n]f32) (b: [n]f32) : f32 = f32.sum (map2 (*) a b)

-- | microgpt's `linear`: y = W x, with w: [nout][nin] (no bias).
def linear [nin][nout] (x: [nin]f32) (w: [nout][nin]f32) : [nout]f32 =
  map (\wo -> dot wo x) w

-- | W x for each of n inputs xs: [n][nin] -> [n][nout], w: [nout][nin], with the
-- weights in the outer loop, so that a step of batched decoding (`gpt_tokens`)
-- reads each weight row once for all n sequences instead of once per sequence
-- (the same dot products as `map (\x -> linear x w) xs`).  The [nout][n]
-- results are gathered into a new [n][nout] array: a `transpose` (even copied)
-- stays a view of the [nout][n] memory, and the next layer's dot products would
-- read each input with a stride of n (measured 7x slower at n = 8).
def linear_rows [n][nin][nout] (w: [nout][nin]f32) (xs: [n][nin]f32) : [n][nout]f32 =
  let r = map (\wo -> map (dot wo) xs) w
  in opaque (tabulate n (\i -> tabulate nout (\o -> r[o, i])))

-- | microgpt's `rmsnorm`: x / sqrt(mean(x^2) + 1e-5), no learned gain.
def rmsnorm [n] (x: [n]f32) : [n]f32 =
  let ms = dot x x / f32.i64 n
  let scale = 1 / f32.sqrt (ms + 1e-5)
  in map (* scale) x

def relu (x: f32) : f32 = f32.max x 0

-- | e^x for x <= 0 (below -87: e^-87), in arithmetic that the C compiler
-- vectorises (libm's expf and tanhf are scalar calls: GPT-2's GELU spent more
-- time in them than in its products): x = n ln2 + r, |r| <= ln2/2, e^r by its
-- Taylor polynomial of degree 6 (relative error 2.5e-7 at most), 2^n by the exponent's bits.
#[inline]
def exp_nonpos (x: f32) : f32 =
  let x = if x < -87 then -87 else x  -- not f32.max, which turns NaN into -87
  let n = f32.floor (x * 1.442695041 + 0.5)
  -- ln2 in two parts (Cody & Waite), so that r is exact
  let r = x - n * 0.693359375 + n * 2.12194440e-4
  let p = 1 + r * (1 + r * (0.5 + r * (0.16666667 + r * (0.041666668 + r * (0.008333334
                                                                          + r * 0.0013888889)))))
  in p * f32.from_bits (u32.i32 ((i32.f32 n + 127) << 23))

-- | tanh by `exp_nonpos`: (1 - e) / (1 + e) with e = e^(-2|x|), x's sign
-- (absolute error under 1e-6 of f32.tanh: tested below).  |x| by a branch, not
-- f32.abs and copysign, whose derivatives under `vjp2` are 0 at x = 0.
#[inline]
def tanh_fast (x: f32) : f32 =
  let neg = x < 0
  let e = exp_nonpos (2 * (if neg then x else -x))
  let t = (1 - e) / (1 + e)
  in if neg then -t else t

-- | Index of the largest element (the first one on ties).
def argmax [n] (xs: [n]f32) : i64 =
  let pick (i, a) (j, b) = if a > b || (a == b && i < j) then (i, a) else (j, b)
  in (reduce_comm pick (n, -f32.inf) (zip (iota n) xs)).0

-- | softmax over the first `n_valid` logits shifted by `max_val`, the largest
-- of them; the others get probability 0 (a causal mask).  The shifted logits
-- are <= 0, so e^x is `exp_nonpos`, which clang vectorises (libm's expf was a
-- call per element).
def shifted_softmax [n] (n_valid: i64) (max_val: f32) (logits: [n]f32) : [n]f32 =
  let exps = map2 (\i v -> if i < n_valid then exp_nonpos (v - max_val) else 0) (iota n) logits
  let total = f32.sum exps
  in map (/ total) exps

-- | The largest of the first `n_valid` elements of xs, by a max-reduction, which
-- clang vectorises: `argmax`'s (index, value) pairs compile to scalar compares
-- and moves (most of attention's softmax in the recipe's step).  For code that
-- training does not differentiate by `vjp2` (the `_fwd` functions below): a
-- derivative through it goes through the reduction, right but slower.
def max_valid [n] (n_valid: i64) (xs: [n]f32) : f32 =
  f32.maximum (map2 (\i v -> if i < n_valid then v else -f32.inf) (iota n) xs)

-- | softmax over the first `n_valid` logits; the others get probability 0
-- (a causal mask).  The shift for stability is the largest valid logit, read
-- at its index: softmax is shift-invariant, and reverse AD then differentiates
-- one indexing instead of a max-reduction (6x cheaper attention backward).
def masked_softmax [n] (n_valid: i64) (logits: [n]f32) : [n]f32 =
  let masked = map2 (\i v -> if i < n_valid then v else -f32.inf) (iota n) logits
  in shifted_softmax n_valid logits[argmax masked] logits

-- | `masked_softmax`, the same values, with the shift by `max_valid`: for the
-- backward by hand and sampling, which no `vjp2` differentiates.
def masked_softmax_fwd [n] (n_valid: i64) (logits: [n]f32) : [n]f32 =
  shifted_softmax n_valid (max_valid n_valid logits) logits

-- | microgpt's `softmax`.
def softmax [n] (logits: [n]f32) : [n]f32 = masked_softmax n logits

-- | `softmax` by `masked_softmax_fwd`.
def softmax_fwd [n] (logits: [n]f32) : [n]f32 = masked_softmax_fwd n logits

-- | -log softmax(logits)[target] with logits shifted by `max_val`, their
-- largest: log-sum-exp minus the target logit.
def shifted_nll [n] (max_val: f32) (logits: [n]f32) (target: i64) : f32 =
  let lse = max_val + f32.log (f32.sum (map (\v -> exp_nonpos (v - max_val)) logits))
  in lse - logits[target]

-- | -log softmax(logits)[target] (the shift taken at its index, as in
-- `masked_softmax`).
def nll [n] (logits: [n]f32) (target: i64) : f32 = shifted_nll logits[argmax logits] logits target

-- | `nll`, the same value, with the shift by `max_valid` (as `masked_softmax_fwd`).
def nll_fwd [n] (logits: [n]f32) (target: i64) : f32 =
  shifted_nll (max_valid n logits) logits target

-- | A batch's inputs and next-token targets, each [B][n]: the first n =
-- min(T, max n_pos) positions of every row of tokens: [B][T1].  Later positions
-- count in no row (row b counts its first n_pos[b]), and the causal mask keeps
-- them from affecting earlier ones, so they are not computed.
def batch_rows [B][T1] (T: i64) (tokens: [B][T1]i64) (n_pos: [B]i64) : ?[n].([B][n]i64, [B][n]i64) =
  let n = i64.min T (i64.maximum n_pos)
  in (map (\r -> r[:n]) tokens, map (\r -> r[1:n + 1] :> [n]i64) tokens)

-- | The mean next-token negative log-likelihood over the valid positions of a
-- batch (microgpt's loss for B = 1): logits [B][n][V], targets [B][n], row b
-- counting its first n_pos[b] positions.
def mean_nll [B][n][V] (logits: [B][n][V]f32) (targets: [B][n]i64) (n_pos: [B]i64) : f32 =
  let row_loss (lg: [n][V]f32) (tg: [n]i64) (n_valid: i64) =
    f32.sum (map3 (\pos l t -> if pos < n_valid then nll l t else 0) (iota n) lg tg)
  in f32.sum (map3 row_loss logits targets n_pos) / f32.i64 (i64.sum n_pos)

-- | Draw an index with probability proportional to `weights` (microgpt's
-- `random.choices`): the inverse of the cumulative distribution, built by a
-- `scan`, at u * total, for u uniform on [0, 1).
def weighted_sample [n] (weights: [n]f32) (u: f32) : i64 =
  let cdf = scan (+) 0 weights
  let target = u * cdf[n - 1]
  let below = i64.sum (map (\c -> i64.bool (c <= target)) cdf)
  in i64.min below (n - 1)

-- Tests: `futhark test futhark/nn.fut`. Expected values computed by hand / NumPy.

-- ==
-- entry: test_softmax
-- input { [1f32, 2f32, 3f32] }
-- output { [0.09003057f32, 0.24472847f32, 0.66524096f32] }
-- input { [1000f32, 1000f32] }
-- output { [0.5f32, 0.5f32] }
entry test_softmax (xs: []f32) : []f32 = softmax xs

-- | The same values by `max_valid`'s shift; logits past `n_valid` are masked
-- (a shift taken over all of them, or none, fails these: e^89 is past f32).
-- ==
-- entry: test_masked_softmax_fwd
-- input { 3i64 [1f32, 2f32, 3f32] }
-- output { [0.09003057f32, 0.24472847f32, 0.66524096f32] }
-- input { 2i64 [300f32, 301f32, 1000f32] }
-- output { [0.26894142f32, 0.73105858f32, 0f32] }
-- input { 2i64 [1000f32, 1000f32, 2000f32] }
-- output { [0.5f32, 0.5f32, 0f32] }
-- input { 2i64 [89f32, 88f32, 0f32] }
-- output { [0.73105858f32, 0.26894142f32, 0f32] }
entry test_masked_softmax_fwd [n] (n_valid: i64) (xs: [n]f32) : [n]f32 = masked_softmax_fwd n_valid xs

-- ==
-- entry: test_rmsnorm
-- input { [3f32, 4f32] }
-- output { [0.84852749f32, 1.13136999f32] }
-- input { [0f32, 0f32, 0f32] }
-- output { [0f32, 0f32, 0f32] }
entry test_rmsnorm (xs: []f32) : []f32 = rmsnorm xs

-- | Index i is drawn for u in [cdf[i-1], cdf[i]) / total; zero weights are never drawn.
-- ==
-- entry: test_weighted_sample
-- input { [0.1f32, 0.0f32, 0.3f32, 0.6f32] [0f32, 0.099f32, 0.1f32, 0.399f32, 0.4f32, 0.999f32] }
-- output { [0i64, 0i64, 2i64, 2i64, 3i64, 3i64] }
-- input { [2f32, 2f32] [0.25f32, 0.75f32] }
-- output { [0i64, 1i64] }
entry test_weighted_sample [n][m] (ws: [n]f32) (us: [m]f32) : [m]i64 =
  map (weighted_sample ws) us

-- | Frequencies over many uniforms match the weights within 0.01.
-- ==
-- entry: test_weighted_sample_freq
-- input { [1f32, 2f32, 3f32, 4f32] 200000i64 } output { true }
entry test_weighted_sample_freq [n] (ws: [n]f32) (m: i64) : bool =
  let draws = map (\i -> weighted_sample ws (f32.i64 i / f32.i64 m)) (iota m)
  let counts = hist (+) 0 n draws (replicate m 1i64)
  let total = f32.sum ws
  in all (\(c, w) -> f32.abs (f32.i64 c / f32.i64 m - w / total) < 0.01) (zip counts ws)

-- ==
-- entry: test_nll
-- input { [1f32, 2f32, 3f32] 2i64 } output { 0.40760596f32 }
entry test_nll (xs: []f32) (t: i64) : f32 = nll xs t

-- ==
-- entry: test_nll_fwd
-- input { [1f32, 2f32, 3f32] 2i64 } output { 0.40760596f32 }
-- input { [300f32, 301f32, 302f32] 2i64 } output { 0.40760596f32 }
entry test_nll_fwd (xs: []f32) (t: i64) : f32 = nll_fwd xs t

-- | `tanh_fast` within 1e-6 of f32.tanh on [-20, 20] in steps of 1e-3, and
-- `exp_nonpos` within 5e-7 relative of f32.exp on [-80, 0] (measured: 1.2e-7, 2.5e-7);
-- tanh_fast's derivative by `vjp2` at 0 is 1.
-- ==
-- entry: test_tanh_fast
-- input { } output { true }
entry test_tanh_fast : bool =
  let xs = map (\i -> f32.i64 (i - 20000) / 1000) (iota 40001)
  let es = map (\i -> -f32.i64 i / 500) (iota 40001)
  in all (\x -> f32.abs (tanh_fast x - f32.tanh x) < 1e-6) xs
     && (vjp2 tanh_fast 0 1).1 == 1  -- its derivative at 0 (reverse AD: GPU backends)
     && all (\x -> f32.abs (exp_nonpos x - f32.exp x) <= 5e-7 * f32.exp x) es
