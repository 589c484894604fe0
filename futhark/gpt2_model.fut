-- | GPT-2's model (Radford et al. 2019; nanoGPT's model.py): the parameters,
-- GPT-2's initialisation and the forward pass, as a `gpt_model`.
--
-- Sizes as in model.fut: V = vocab_size, C = n_embd, T = block_size,
-- L = n_layer, F = MLP width (4*C in GPT-2).  Matrices are [out][in] (y = W x
-- + b); the driver converts to and from Hugging Face's Conv1D layout ([in][out],
-- y = x W + b) at the checkpoint.  Per-layer tensors are stacked on a leading
-- [L] axis.  With `bias = false` (nanoGPT's `bias = False`) the bias tensors
-- are kept, all zero, and no function reads them: their gradients are zero and
-- AdamW leaves them at zero.

import "nn"
import "rng"
import "layout"
import "tensor"
import "attention"
import "layers"

-- | Run-time settings that are not sizes: the number of heads, and whether the
-- linear layers and LayerNorms have biases.
type hyper = {n_head: i64, bias: bool}

-- | Hugging Face GPT-2's tensors (`h.{i}.attn.c_attn.weight` is c_attn_w[i],
-- with q, k, v on the [3] axis; `h.{i}.attn.c_proj` is attn_proj, `h.{i}.mlp.c_proj`
-- is mlp_proj; `_w`/`_b` are `.weight`/`.bias`).
type params [V][C][T][L][F] =
  { wte: [V][C]f32, wpe: [T][C]f32,
    ln_1_w: [L][C]f32, ln_1_b: [L][C]f32,
    c_attn_w: [L][3][C][C]f32, c_attn_b: [L][3][C]f32,
    attn_proj_w: [L][C][C]f32, attn_proj_b: [L][C]f32,
    ln_2_w: [L][C]f32, ln_2_b: [L][C]f32,
    c_fc_w: [L][F][C]f32, c_fc_b: [L][F]f32,
    mlp_proj_w: [L][C][F]f32, mlp_proj_b: [L][C]f32,
    ln_f_w: [C]f32, ln_f_b: [C]f32 }

-- | Apply `f` to every pair of corresponding weights.
def params_map2 [V][C][T][L][F] (f: f32 -> f32 -> f32)
                (a: params [V][C][T][L][F]) (b: params [V][C][T][L][F]) : params [V][C][T][L][F] =
  { wte = map2_2d f a.wte b.wte, wpe = map2_2d f a.wpe b.wpe,
    ln_1_w = map2_2d f a.ln_1_w b.ln_1_w, ln_1_b = map2_2d f a.ln_1_b b.ln_1_b,
    c_attn_w = map2_4d f a.c_attn_w b.c_attn_w, c_attn_b = map2_3d f a.c_attn_b b.c_attn_b,
    attn_proj_w = map2_3d f a.attn_proj_w b.attn_proj_w, attn_proj_b = map2_2d f a.attn_proj_b b.attn_proj_b,
    ln_2_w = map2_2d f a.ln_2_w b.ln_2_w, ln_2_b = map2_2d f a.ln_2_b b.ln_2_b,
    c_fc_w = map2_3d f a.c_fc_w b.c_fc_w, c_fc_b = map2_2d f a.c_fc_b b.c_fc_b,
    mlp_proj_w = map2_3d f a.mlp_proj_w b.mlp_proj_w, mlp_proj_b = map2_2d f a.mlp_proj_b b.mlp_proj_b,
    ln_f_w = map2 f a.ln_f_w b.ln_f_w, ln_f_b = map2 f a.ln_f_b b.ln_f_b }

-- | The number of weights of each tensor, in `flat`'s order.
def tensor_sizes (V: i64) (C: i64) (T: i64) (L: i64) (F: i64) : [16]i64 =
  [V * C, T * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C, L * C, L * C,
   L * F * C, L * F, L * C * F, L * C, C, C]

-- | The new weights of an optimiser's step: `f decay p m v g` of every weight p,
-- its moments m, v (flat in `flat`'s order) and its gradient g, into new arrays.
-- `decay` says whether the tensor takes weight decay (nanoGPT: every tensor of two
-- or more dimensions, not biases or norms).
def params_map4_decay [V][C][T][L][F][P] (f: bool -> f32 -> f32 -> f32 -> f32 -> f32)
                      (p: params [V][C][T][L][F]) (m: [P]f32) (v: [P]f32)
                      (g: params [V][C][T][L][F]) : *params [V][C][T][L][F] =
  let o = offsets P (tensor_sizes V C T L F)
  let (d, n) = (f true, f false)
  in {wte = map4_at_2d d p.wte m v o[0] g.wte,
      wpe = map4_at_2d d p.wpe m v o[1] g.wpe,
      ln_1_w = map4_at_2d n p.ln_1_w m v o[2] g.ln_1_w,
      ln_1_b = map4_at_2d n p.ln_1_b m v o[3] g.ln_1_b,
      c_attn_w = map4_at_4d d p.c_attn_w m v o[4] g.c_attn_w,
      c_attn_b = map4_at_3d n p.c_attn_b m v o[5] g.c_attn_b,
      attn_proj_w = map4_at_3d d p.attn_proj_w m v o[6] g.attn_proj_w,
      attn_proj_b = map4_at_2d n p.attn_proj_b m v o[7] g.attn_proj_b,
      ln_2_w = map4_at_2d n p.ln_2_w m v o[8] g.ln_2_w,
      ln_2_b = map4_at_2d n p.ln_2_b m v o[9] g.ln_2_b,
      c_fc_w = map4_at_3d d p.c_fc_w m v o[10] g.c_fc_w,
      c_fc_b = map4_at_2d n p.c_fc_b m v o[11] g.c_fc_b,
      mlp_proj_w = map4_at_3d d p.mlp_proj_w m v o[12] g.mlp_proj_w,
      mlp_proj_b = map4_at_2d n p.mlp_proj_b m v o[13] g.mlp_proj_b,
      ln_f_w = map4_at_1d n p.ln_f_w m v o[14] g.ln_f_w,
      ln_f_b = map4_at_1d n p.ln_f_b m v o[15] g.ln_f_b}

-- | Adam's moments updated in place: m and v, flat in `flat`'s order, take `f m v g`
-- for every weight (g: its gradient), tensor by tensor (tensor.fut's `moments_at`).
def params_moments [V][C][T][L][F][P] (f: f32 -> f32 -> f32 -> (f32, f32)) (m: *[P]f32)
                   (v: *[P]f32) (g: params [V][C][T][L][F]) : (*[P]f32, *[P]f32) =
  let o = offsets P (tensor_sizes V C T L F)
  let (m, v) = moments_at f m v o[0] (flatten g.wte)
  let (m, v) = moments_at f m v o[1] (flatten g.wpe)
  let (m, v) = moments_at f m v o[2] (flatten g.ln_1_w)
  let (m, v) = moments_at f m v o[3] (flatten g.ln_1_b)
  let (m, v) = moments_at f m v o[4] (flatten_4d g.c_attn_w)
  let (m, v) = moments_at f m v o[5] (flatten_3d g.c_attn_b)
  let (m, v) = moments_at f m v o[6] (flatten_3d g.attn_proj_w)
  let (m, v) = moments_at f m v o[7] (flatten g.attn_proj_b)
  let (m, v) = moments_at f m v o[8] (flatten g.ln_2_w)
  let (m, v) = moments_at f m v o[9] (flatten g.ln_2_b)
  let (m, v) = moments_at f m v o[10] (flatten_3d g.c_fc_w)
  let (m, v) = moments_at f m v o[11] (flatten g.c_fc_b)
  let (m, v) = moments_at f m v o[12] (flatten_3d g.mlp_proj_w)
  let (m, v) = moments_at f m v o[13] (flatten g.mlp_proj_b)
  let (m, v) = moments_at f m v o[14] g.ln_f_w
  let (m, v) = moments_at f m v o[15] g.ln_f_b
  in (m, v)

-- | The sum of `f` over every weight (with `f x = x * x`: the squared global L2
-- norm).
def params_sum [V][C][T][L][F] (f: f32 -> f32) (p: params [V][C][T][L][F]) : f32 =
  sum_2d f p.wte + sum_2d f p.wpe + sum_2d f p.ln_1_w + sum_2d f p.ln_1_b + sum_4d f p.c_attn_w
  + sum_3d f p.c_attn_b + sum_3d f p.attn_proj_w + sum_2d f p.attn_proj_b + sum_2d f p.ln_2_w
  + sum_2d f p.ln_2_b + sum_3d f p.c_fc_w + sum_2d f p.c_fc_b + sum_3d f p.mlp_proj_w
  + sum_2d f p.mlp_proj_b + sum_1d f p.ln_f_w + sum_1d f p.ln_f_b

-- | GPT-2's initialisation (nanoGPT's `_init_weights`): linear weights and
-- embeddings N(0, 0.02), the residual projections (attn.c_proj, mlp.c_proj)
-- N(0, 0.02/sqrt(2 n_layer)), biases 0, LayerNorm weights 1 and biases 0.
-- Each matrix from its own RNG stream under `seed`, element i from counter i.
def init_params (seed: i64) (V: i64) (C: i64) (T: i64) (L: i64) (F: i64) : params [V][C][T][L][F] =
  let matrix (stream: i64) (std: f32) (nout: i64) (nin: i64) : [nout][nin]f32 =
    let k = key seed stream
    in tabulate_2d nout nin (\i j -> std * normal k (i * nin + j))
  let layers (part: i64) (std: f32) (nout: i64) (nin: i64) : [L][nout][nin]f32 =
    tabulate L (\li -> matrix (2 + 4 * li + part) std nout nin)
  let proj_std = 0.02 / f32.sqrt (2 * f32.i64 L)
  let ones (n: i64) = replicate L (replicate n 1f32)
  let zeros (n: i64) = replicate L (replicate n 0f32)
  in { wte = matrix 0 0.02 V C, wpe = matrix 1 0.02 T C,
       ln_1_w = ones C, ln_1_b = zeros C,
       c_attn_w = map unflatten (layers 0 0.02 (3 * C) C) :> [L][3][C][C]f32,
       c_attn_b = replicate L (replicate 3 (replicate C 0)),
       attn_proj_w = layers 1 proj_std C C, attn_proj_b = zeros C,
       ln_2_w = ones C, ln_2_b = zeros C,
       c_fc_w = layers 2 0.02 F C, c_fc_b = zeros F,
       mlp_proj_w = layers 3 proj_std C F, mlp_proj_b = zeros C,
       ln_f_w = replicate C 1, ln_f_b = replicate C 0 }

-- | A linear layer: W x (+ b), w: [nout][nin].
def affine [nin][nout] (bias: bool) (w: [nout][nin]f32) (b: [nout]f32) (x: [nin]f32) : [nout]f32 =
  map2 (\wo bo -> let y = dot wo x in if bias then y + bo else y) w b

-- | `affine` on each of n inputs, as `linear_rows`.
def affine_rows [n][nin][nout] (bias: bool) (w: [nout][nin]f32) (b: [nout]f32)
                (xs: [n][nin]f32) : [n][nout]f32 =
  let y = linear_rows w xs
  in if bias then map (map2 (+) b) y else y

-- | Causal self-attention on xn: [T][C] (LayerNorm'ed): q, k, v = c_attn(xn),
-- heads of D = C/n_head columns, then c_proj.  Two formulations of the same
-- sums, chosen per backend (layout.fut, as microgpt's `block`): per-head
-- slices of the weights (c and multicore), or reshaped activations (GPU).
def attention [T][C] (h: hyper) (w: [3][C][C]f32) (b: [3][C]f32) (wo: [C][C]f32) (bo: [C]f32)
              (xn: [T][C]f32) : [T][C]f32 =
  if heads_by_slices then
    let D = C / h.n_head
    let head (hh: i64) : [T][C]f32 =
      let rows = tabulate 3 (\j -> (head_rows h.n_head w[j])[hh])
      let bs = tabulate 3 (\j -> b[j, hh * D:(hh + 1) * D] :> [C / h.n_head]f32)
      let q = map (affine h.bias rows[0] bs[0]) xn
      let k = map (affine h.bias rows[1] bs[1]) xn
      let v = map (affine h.bias rows[2] bs[2]) xn
      in map (`linear` (head_cols h.n_head wo)[hh]) (causal_attention q k v)
    let summed = reduce_comm (map2 (map2 (+))) (replicate T (replicate C 0)) (map head (iota h.n_head))
    in map (\y -> if h.bias then map2 (+) y bo else y) summed
  else
    let q = map (affine h.bias w[0] b[0]) xn
    let k = map (affine h.bias w[1] b[1]) xn
    let v = map (affine h.bias w[2] b[2]) xn
    let heads = map3 causal_attention (split_heads h.n_head q) (split_heads h.n_head k)
                                      (split_heads h.n_head v)
    in map (affine h.bias wo bo) (merge_heads C heads)

-- | The MLP half of a block on one position: x + c_proj(gelu(c_fc(ln_2 x))).
def mlp [C][F] (h: hyper) (ln_w: [C]f32) (ln_b: [C]f32) (fc_w: [F][C]f32) (fc_b: [F]f32)
        (proj_w: [C][F]f32) (proj_b: [C]f32) (x: [C]f32) : [C]f32 =
  -- `opaque`: c_fc's outputs stay an array the reverse pass reads (model.fut's `mlp`)
  let hidden = map gelu (opaque (affine h.bias fc_w fc_b (layer_norm h.bias ln_w ln_b x)))
  in map2 (+) x (affine h.bias proj_w proj_b hidden)

-- | Block li (nanoGPT's `Block`) on a whole sequence x: [n][C]:
-- x + attn(ln_1 x), then x + mlp(ln_2 x).
def block [V][C][T][L][F][n] (p: params [V][C][T][L][F]) (h: hyper) (li: i64) (x: [n][C]f32) : [n][C]f32 =
  let xn = map (layer_norm h.bias p.ln_1_w[li] p.ln_1_b[li]) x
  let x = map2 (map2 (+)) x (attention h p.c_attn_w[li] p.c_attn_b[li] p.attn_proj_w[li]
                                        p.attn_proj_b[li] xn)
  in map (mlp h p.ln_2_w[li] p.ln_2_b[li] p.c_fc_w[li] p.c_fc_b[li] p.mlp_proj_w[li] p.mlp_proj_b[li]) x

-- | `mlp` on n positions at once, weights outermost (`affine_rows`): sampling's form.
def mlp_rows [n][C][F] (h: hyper) (ln_w: [C]f32) (ln_b: [C]f32) (fc_w: [F][C]f32) (fc_b: [F]f32)
             (proj_w: [C][F]f32) (proj_b: [C]f32) (x: [n][C]f32) : [n][C]f32 =
  let hidden = map (map gelu) (affine_rows h.bias fc_w fc_b (map (layer_norm h.bias ln_w ln_b) x))
  in map2 (map2 (+)) x (affine_rows h.bias proj_w proj_b hidden)

-- | The output head tied to wte (GPT-2): logits = ln_f(x) wte^T.
def head [V][C][T][L][F] (p: params [V][C][T][L][F]) (h: hyper) (x: [C]f32) : [V]f32 =
  linear (layer_norm h.bias p.ln_f_w p.ln_f_b x) p.wte

-- | The training forward (nanoGPT's `GPT.forward`): logits [n][V] at every
-- position of tokens: [n]i64, n <= T, with the causal mask.
def gpt_seq [V][C][T][L][F][n] (p: params [V][C][T][L][F]) (h: hyper) (tokens: [n]i64) : [n][V]f32 =
  let x = map2 (\tok pos -> map2 (+) p.wte[tok] p.wpe[pos]) tokens (iota n)
  let x = loop x for li < L do block p h li x
  in map (head p h) x

-- | The sampling forward: one token of each of n sequences at position `pos`,
-- keys and values appended to the caches [L][n][T][C]; logits [n][V].  The
-- linear layers and the head take the n tokens together (`affine_rows`), so a
-- batch streams the weights once per position.
def gpt_tokens [V][C][T][L][F][n] (p: params [V][C][T][L][F]) (h: hyper) (tokens: [n]i64) (pos: i64)
               (keys: *[L][n][T][C]f32) (values: *[L][n][T][C]f32)
               : ([n][V]f32, *[L][n][T][C]f32, *[L][n][T][C]f32) =
  let x = map (\tok -> map2 (+) p.wte[tok] p.wpe[pos]) tokens
  let (x, keys, values) =
    loop (x: [n][C]f32, keys: *[L][n][T][C]f32, values: *[L][n][T][C]f32) = (x, keys, values)
    for li < L do
      let xn = map (layer_norm h.bias p.ln_1_w[li] p.ln_1_b[li]) x
      let w = p.c_attn_w[li]
      let b = p.c_attn_b[li]
      let q = affine_rows h.bias w[0] b[0] xn
      let keys = keys with [li, :, pos] = affine_rows h.bias w[1] b[1] xn
      let values = values with [li, :, pos] = affine_rows h.bias w[2] b[2] xn
      let x_attn = map3 (cached_heads h.n_head pos) q keys[li] values[li]
      let x = map2 (map2 (+)) x (affine_rows h.bias p.attn_proj_w[li] p.attn_proj_b[li] x_attn)
      in (mlp_rows h p.ln_2_w[li] p.ln_2_b[li] p.c_fc_w[li] p.c_fc_b[li] p.mlp_proj_w[li]
                   p.mlp_proj_b[li] x,
          keys, values)
  -- the head (`head`) with wte's rows outermost
  in (linear_rows p.wte (map (layer_norm h.bias p.ln_f_w p.ln_f_b) x), keys, values)
