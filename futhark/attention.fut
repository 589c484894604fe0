-- | Causal self-attention, head by head: the pieces both models share.
--
-- A sequence's activations are [T][C]; head h owns columns h*D .. (h+1)*D-1,
-- D = C / n_head.  `causal_attention` is one head over a whole sequence (with
-- the causal mask), `cached_heads` every head for the newest token over a KV
-- cache (sampling).

import "nn"
import "layout"

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

-- | Multi-head attention of the newest token at `pos` over its KV cache (ks, vs:
-- [T][C], rows 0..pos filled; q: [C]): per head, softmax of the scaled dot
-- products with the keys, then the weighted sum of the values (microgpt's
-- attention for one token).  It reads only the pos+1 filled rows, and each
-- head's D columns where they lie (by slices on c/multicore, by reshapes on the
-- GPU backends: layout.fut): per-head copies of the whole cache (`head_cols`)
-- cost more than the rest of a 124M-shaped model's step at T = 1024.
def cached_heads [T][C] (n_head: i64) (pos: i64) (q: [C]f32) (ks: [T][C]f32) (vs: [T][C]f32)
                 : [C]f32 =
  let D = C / n_head
  let scale = 1 / f32.sqrt (f32.i64 D)
  let (ks, vs) = (ks[:pos + 1], vs[:pos + 1])
  in if heads_by_slices then
       -- the softmax's numerators e, then the value rows' sum weighted by them,
       -- row by row into one array updated in place (contiguous reads; a
       -- reduction of rows made an array per row), divided by e's sum once
       let head (hh: i64) : [D]f32 =
         let cols (r: [C]f32) = r[hh * D:(hh + 1) * D] :> [D]f32
         let qh = cols q
         let s = map (\k -> dot qh (cols k) * scale) ks
         let s_max = f32.maximum s
         let e = map (\x -> exp_nonpos (x - s_max)) s
         let acc = loop acc = replicate D 0f32 for j < pos + 1 do
                     let (w, v) = (e[j], cols vs[j])
                     in loop acc for d < D do acc with [d] = acc[d] + w * v[d]
         in map (/ f32.sum e) acc
       in flatten (tabulate n_head head) :> [C]f32
     else
       -- weighted sum of the value rows, accumulated row by row (contiguous reads)
       let mix [m] (w: [m]f32) (rows: [m][D]f32) : [D]f32 =
         reduce_comm (map2 (+)) (replicate D 0) (map2 (\wt r -> map (* wt) r) w rows)
       let split (r: [C]f32) = unflatten (r :> [n_head * D]f32)
       let (qh, kh, vh) = (split q, map split ks, map split vs)
       in flatten (map (\hh -> mix (softmax (map (\k -> dot qh[hh] k[hh] * scale) kh))
                                   (map (\v -> v[hh]) vh))
                       (iota n_head)) :> [C]f32
