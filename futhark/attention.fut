-- | Causal self-attention, head by head: the pieces both models share.
--
-- A sequence's activations are [T][C]; head h owns columns h*D .. (h+1)*D-1,
-- D = C / n_head.  `causal_attention` is one head over a whole sequence (with
-- the causal mask), `cached_attention` one head for the newest token over a KV
-- cache.

import "nn"

-- | [T][C] activations as per-head arrays [n_head][T][C/n_head].
def split_heads [T][C] (n_head: i64) (x: [T][C]f32) : [n_head][T][C / n_head]f32 =
  transpose (map (\r -> unflatten (r :> [n_head * (C / n_head)]f32)) x)

-- | The inverse of `split_heads`.
def merge_heads [H][T][D] (C: i64) (heads: [H][T][D]f32) : [T][C]f32 =
  map flatten (transpose heads) :> [T][C]f32

-- | One head of causal self-attention over a whole sequence: position t attends
-- to positions s <= t (microgpt's KV cache holds exactly those).  The scores
-- are one [T][T] product, so both of its adjoints are products too.
def causal_attention [T][D] (q: [T][D]f32) (k: [T][D]f32) (v: [T][D]f32) : [T][D]f32 =
  let scale = 1 / f32.sqrt (f32.i64 D)
  let attn_logits = map (\q_t -> map (\k_s -> dot q_t k_s * scale) k) q
  let attn_weights = map2 (\t row -> masked_softmax (t + 1) row) (iota T) attn_logits
  let vt = transpose v
  in map (\w -> map (dot w) vt) attn_weights

-- | Head h's rows of a query/key/value weight: the weights of its D outputs.
def head_rows [C] (n_head: i64) (w: [C][C]f32) : [n_head][C / n_head][C]f32 =
  let D = C / n_head
  in tabulate n_head (\h -> w[h * D:(h + 1) * D] :> [D][C]f32)

-- | Head h's D columns of w: of attn_wo, the weights that read its outputs; of a
-- KV cache [T][C], its keys or values.
def head_cols [R][C] (n_head: i64) (w: [R][C]f32) : [n_head][R][C / n_head]f32 =
  let D = C / n_head
  in tabulate n_head (\h -> w[:, h * D:(h + 1) * D] :> [R][D]f32)

-- | One head's attention for the newest token at `pos`, over a KV cache whose
-- rows 0..pos are filled.  q: [D], ks, vs: [T][D].
def cached_attention [T][D] (pos: i64) (q: [D]f32) (ks: [T][D]f32) (vs: [T][D]f32) : [D]f32 =
  let scale = 1 / f32.sqrt (f32.i64 D)
  let attn_weights = masked_softmax (pos + 1) (map (\k_s -> dot q k_s * scale) ks)
  in map (dot attn_weights) (transpose vs)
