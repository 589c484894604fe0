-- | microgpt's model: the parameters and the GPT forward pass.
--
-- Sizes are run-time values carried in the types: V = vocab_size, C = n_embd,
-- T = block_size, L = n_layer, F = MLP width (4*C in microgpt).  n_head is a
-- run-time argument; head_dim = C / n_head.  Two forwards share the layers:
-- `gpt_seq` takes a whole sequence at once with a causal mask (training),
-- `gpt_token` takes one token and a KV cache (sampling), as microgpt's `gpt`.

import "nn"
import "rng"
import "layout"
import "tensor"
import "attention"

-- | microgpt's state_dict.  Per-layer matrices are stacked on a leading [L]
-- axis: attn_wq[li] is microgpt's `layer{li}.attn_wq`.  Matrices are [out][in].
type params [V][C][T][L][F] =
  { wte: [V][C]f32, wpe: [T][C]f32, lm_head: [V][C]f32,
    attn_wq: [L][C][C]f32, attn_wk: [L][C][C]f32,
    attn_wv: [L][C][C]f32, attn_wo: [L][C][C]f32,
    mlp_fc1: [L][F][C]f32, mlp_fc2: [L][C][F]f32 }

-- | Apply `f` to every pair of corresponding weights (the seed port's name).
def params_map2 [V][C][T][L][F] (f: f32 -> f32 -> f32)
                (a: params [V][C][T][L][F]) (b: params [V][C][T][L][F])
                : params [V][C][T][L][F] =
  { wte = map2_2d f a.wte b.wte, wpe = map2_2d f a.wpe b.wpe, lm_head = map2_2d f a.lm_head b.lm_head,
    attn_wq = map2_3d f a.attn_wq b.attn_wq, attn_wk = map2_3d f a.attn_wk b.attn_wk,
    attn_wv = map2_3d f a.attn_wv b.attn_wv, attn_wo = map2_3d f a.attn_wo b.attn_wo,
    mlp_fc1 = map2_3d f a.mlp_fc1 b.mlp_fc1, mlp_fc2 = map2_3d f a.mlp_fc2 b.mlp_fc2 }

-- | The number of weights of each tensor, in `flat`'s order.
def tensor_sizes (V: i64) (C: i64) (T: i64) (L: i64) (F: i64) : [9]i64 =
  [V * C, T * C, V * C, L * C * C, L * C * C, L * C * C, L * C * C, L * F * C, L * C * F]

-- | The new weights of an optimiser's step: `f decay p m v g` of every weight p,
-- its moments m, v (flat in `flat`'s order) and its gradient g, into new arrays.
-- `decay` says whether the tensor takes weight decay (nanoGPT: every tensor of two
-- or more dimensions, not biases or norms).
def params_map4_decay [V][C][T][L][F][P] (f: bool -> f32 -> f32 -> f32 -> f32 -> f32)
                      (p: params [V][C][T][L][F]) (m: [P]f32) (v: [P]f32)
                      (g: params [V][C][T][L][F]) : *params [V][C][T][L][F] =
  let o = offsets P (tensor_sizes V C T L F)
  let d = f true
  in {wte = map4_at_2d d p.wte m v o[0] g.wte,
      wpe = map4_at_2d d p.wpe m v o[1] g.wpe,
      lm_head = map4_at_2d d p.lm_head m v o[2] g.lm_head,
      attn_wq = map4_at_3d d p.attn_wq m v o[3] g.attn_wq,
      attn_wk = map4_at_3d d p.attn_wk m v o[4] g.attn_wk,
      attn_wv = map4_at_3d d p.attn_wv m v o[5] g.attn_wv,
      attn_wo = map4_at_3d d p.attn_wo m v o[6] g.attn_wo,
      mlp_fc1 = map4_at_3d d p.mlp_fc1 m v o[7] g.mlp_fc1,
      mlp_fc2 = map4_at_3d d p.mlp_fc2 m v o[8] g.mlp_fc2}

-- | Adam's moments updated in place: m and v, flat in `flat`'s order, take `f m v g`
-- for every weight (g: its gradient), tensor by tensor (tensor.fut's `moments_at`).
def params_moments [V][C][T][L][F][P] (f: f32 -> f32 -> f32 -> (f32, f32)) (m: *[P]f32)
                   (v: *[P]f32) (g: params [V][C][T][L][F]) : (*[P]f32, *[P]f32) =
  let o = offsets P (tensor_sizes V C T L F)
  let (m, v) = moments_at f m v o[0] (flatten g.wte)
  let (m, v) = moments_at f m v o[1] (flatten g.wpe)
  let (m, v) = moments_at f m v o[2] (flatten g.lm_head)
  let (m, v) = moments_at f m v o[3] (flatten_3d g.attn_wq)
  let (m, v) = moments_at f m v o[4] (flatten_3d g.attn_wk)
  let (m, v) = moments_at f m v o[5] (flatten_3d g.attn_wv)
  let (m, v) = moments_at f m v o[6] (flatten_3d g.attn_wo)
  let (m, v) = moments_at f m v o[7] (flatten_3d g.mlp_fc1)
  let (m, v) = moments_at f m v o[8] (flatten_3d g.mlp_fc2)
  in (m, v)

-- | The sum of `f` over every weight (with `f x = x * x`: the squared global L2
-- norm).
def params_sum [V][C][T][L][F] (f: f32 -> f32) (p: params [V][C][T][L][F]) : f32 =
  sum_2d f p.wte + sum_2d f p.wpe + sum_2d f p.lm_head + sum_3d f p.attn_wq + sum_3d f p.attn_wk
  + sum_3d f p.attn_wv + sum_3d f p.attn_wo + sum_3d f p.mlp_fc1 + sum_3d f p.mlp_fc2

-- | microgpt's initialisation: every weight N(0, 0.08), each tensor from its own
-- RNG stream under `seed`, element i from counter i.
def mk_params (seed: i64) (V: i64) (C: i64) (T: i64) (L: i64) (F: i64)
              : params [V][C][T][L][F] =
  let std = 0.08f32
  let matrix (stream: i64) (nout: i64) (nin: i64) : [nout][nin]f32 =
    let k = key seed stream
    in tabulate_2d nout nin (\i j -> std * normal k (i * nin + j))
  let layers (stream: i64) (nout: i64) (nin: i64) : [L][nout][nin]f32 =
    tabulate L (\li -> matrix (stream + 6 * li) nout nin)
  in { wte = matrix 0 V C, wpe = matrix 1 T C, lm_head = matrix 2 V C,
    attn_wq = layers 3 C C, attn_wk = layers 4 C C, attn_wv = layers 5 C C,
    attn_wo = layers 6 C C, mlp_fc1 = layers 7 F C, mlp_fc2 = layers 8 C F }

-- | The MLP half of a block on one position: x + fc2(relu(fc1(rmsnorm x))).
def mlp [C][F] (mlp_fc1: [F][C]f32) (mlp_fc2: [C][F]f32) (x: [C]f32) : [C]f32 =
  -- `opaque` keeps fc1's outputs an array that the reverse pass reads; fused
  -- with relu, every fc1 dot product was recomputed for relu's derivative
  -- (4% fewer instructions per training step, measured at n_embd 16 and 64).
  let h = map relu (opaque (linear (rmsnorm x) mlp_fc1))
  in map2 (+) (linear h mlp_fc2) x

-- | Multi-head attention on xn: [T][C] (rmsnorm'ed), projected by attn_wo,
-- as microgpt: q, k, v for all heads, heads concatenated, then attn_wo.
-- With run-time sizes, the reshapes (split/merge) are indexed through integer
-- divisions in the innermost loops of the c and multicore code.
def attention_by_reshapes [C][T] (n_head: i64) (attn_wq: [C][C]f32) (attn_wk: [C][C]f32)
                          (attn_wv: [C][C]f32) (attn_wo: [C][C]f32) (xn: [T][C]f32) : [T][C]f32 =
  let q = map (`linear` attn_wq) xn
  let k = map (`linear` attn_wk) xn
  let v = map (`linear` attn_wv) xn
  let heads = map3 causal_attention (split_heads n_head q) (split_heads n_head k)
                                    (split_heads n_head v)
  in map (`linear` attn_wo) (merge_heads C heads)

-- | The same sums without reshaping activations: each head projects xn with its
-- own rows of attn_wq/wk/wv, and attn_wo's output is the sum over heads of the
-- head's columns of attn_wo times its output (1.8-3.2x faster training on c, but
-- Futhark 0.25.32's GPU pipeline stops on it with an internal error).
def attention_by_slices [C][T] (n_head: i64) (attn_wq: [C][C]f32) (attn_wk: [C][C]f32)
                        (attn_wv: [C][C]f32) (attn_wo: [C][C]f32) (xn: [T][C]f32) : [T][C]f32 =
  let head (wq: [C / n_head][C]f32) (wk: [C / n_head][C]f32) (wv: [C / n_head][C]f32)
           (wo: [C][C / n_head]f32) : [T][C]f32 =
    let q = map (`linear` wq) xn
    let k = map (`linear` wk) xn
    let v = map (`linear` wv) xn
    in map (`linear` wo) (causal_attention q k v)
  in reduce_comm (map2 (map2 (+))) (replicate T (replicate C 0))
                 (map4 head (head_rows n_head attn_wq) (head_rows n_head attn_wk)
                            (head_rows n_head attn_wv) (head_cols n_head attn_wo))

-- | One transformer block (microgpt's loop body) over a whole sequence x: [T][C].
-- `heads_by_slices` is a build-time constant (layout.fut): the two
-- formulations compute the same function.
def block [C][T][F] (n_head: i64)
          (attn_wq: [C][C]f32) (attn_wk: [C][C]f32) (attn_wv: [C][C]f32)
          (attn_wo: [C][C]f32) (mlp_fc1: [F][C]f32) (mlp_fc2: [C][F]f32)
          (x: [T][C]f32) : [T][C]f32 =
  -- 1) multi-head attention
  let x_residual = x
  let xn = map rmsnorm x
  let x_attn = if heads_by_slices
               then attention_by_slices n_head attn_wq attn_wk attn_wv attn_wo xn
               else attention_by_reshapes n_head attn_wq attn_wk attn_wv attn_wo xn
  let x = map2 (map2 (+)) x_attn x_residual
  -- 2) MLP
  in map (mlp mlp_fc1 mlp_fc2) x

-- | The training forward: logits at every position of one sequence, all at once.
-- tokens: [n]i64 with n <= T (position t sees tokens[0..t]); result [n][V]f32.
def gpt_seq [V][C][T][L][F][n] (p: params [V][C][T][L][F]) (n_head: i64)
            (tokens: [n]i64) : [n][V]f32 =
  let x = map2 (\tok pos -> rmsnorm (map2 (+) p.wte[tok] p.wpe[pos])) tokens (iota n)
  let layer (li: i64) (x: [n][C]f32) : [n][C]f32 =
    block n_head p.attn_wq[li] p.attn_wk[li] p.attn_wv[li] p.attn_wo[li]
          p.mlp_fc1[li] p.mlp_fc2[li] x
  -- microgpt's `for li in range(n_layer)`
  let x = loop x for li < L do layer li x
  in map (`linear` p.lm_head) x

-- | `mlp` on n positions at once, weights outermost (`linear_rows`): sampling's form.
def mlp_rows [n][C][F] (mlp_fc1: [F][C]f32) (mlp_fc2: [C][F]f32) (x: [n][C]f32) : [n][C]f32 =
  let h = map (map relu) (linear_rows mlp_fc1 (map rmsnorm x))
  in map2 (map2 (+)) (linear_rows mlp_fc2 h) x

-- | microgpt's `gpt` for n independent sequences at once: logits [n][V] for one
-- token each, all at position `pos`, appending their keys and values to the
-- caches keys, values: [L][n][T][C] (rows > pos are unused).  n = 1 is microgpt.
-- The linear layers take the n tokens together (`linear_rows`), so a batch
-- reads the weights once per position, not once per sequence.
def gpt_tokens [V][C][T][L][F][n] (p: params [V][C][T][L][F]) (n_head: i64)
               (tokens: [n]i64) (pos: i64) (keys: *[L][n][T][C]f32) (values: *[L][n][T][C]f32)
               : ([n][V]f32, *[L][n][T][C]f32, *[L][n][T][C]f32) =
  let x = map (\tok -> rmsnorm (map2 (+) p.wte[tok] p.wpe[pos])) tokens
  let (x, keys, values) =
    loop (x: [n][C]f32, keys: *[L][n][T][C]f32, values: *[L][n][T][C]f32) = (x, keys, values)
    for li < L do
      -- 1) multi-head attention over the cache
      let x_residual = x
      let xn = map rmsnorm x
      let q = linear_rows p.attn_wq[li] xn
      let keys = keys with [li, :, pos] = linear_rows p.attn_wk[li] xn
      let values = values with [li, :, pos] = linear_rows p.attn_wv[li] xn
      let x_attn = map3 (cached_heads n_head pos) q keys[li] values[li]
      let x = map2 (map2 (+)) (linear_rows p.attn_wo[li] x_attn) x_residual
      -- 2) MLP
      in (mlp_rows p.mlp_fc1[li] p.mlp_fc2[li] x, keys, values)
  in (linear_rows p.lm_head x, keys, values)
