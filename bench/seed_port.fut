-- | The seed port's formulation of microgpt's default job, as a baseline for
-- `python -m bench` (backend "seed_port").  Not our training path: the public
-- Futhark port (mmjjnn/futhark-microgpt) keeps microgpt's sizes as compile-time
-- constants, trains one document per step with a token-by-token loop (one token
-- through a KV cache, as microgpt's `gpt`) inside `vjp2`, and runs the whole
-- job in one call.  This file does the same with our own pieces (`mk_params`,
-- the trainer's AdamW `step`, `nll`, and `seed_gpt_tokens` below: our one-token
-- forward as it was when this baseline was measured first, one sample at a time,
-- kept here so that later changes to sampling's forward do not move the
-- baseline), so that the bench times that formulation beside ours in the same
-- run, compiled by the same compiler and flags as our c backend.
-- build.sh compiles it with futhark/ and the CPU layout (`BACKENDS=seed_port
-- ./build.sh`; targets.txt).  `seed_gpt_tokens` reads the KV cache by reshapes
-- whatever the layout: read by column slices, Futhark 0.25.32's `vjp2` of this
-- loop gave wrong key and value gradients (checked against finite differences).

import "nn"
import "model"
import "model_grad"
import "attention"
import "train"
import "gpt_model"


-- microgpt's sizes, fixed at compile time as in the seed port.
def n_embd : i64 = 16
def n_head : i64 = 4
def n_layer : i64 = 1
def block_size : i64 = 16
def mlp_width : i64 = 4 * n_embd

-- | One head's attention for the newest token at `pos` over a KV cache whose rows
-- 0..pos are filled (q: [D], ks, vs: [T][D]; the causal mask hides the rest).
def cached_attention [T][D] (pos: i64) (q: [D]f32) (ks: [T][D]f32) (vs: [T][D]f32) : [D]f32 =
  let scale = 1 / f32.sqrt (f32.i64 D)
  let attn_weights = masked_softmax (pos + 1) (map (\k_s -> dot q k_s * scale) ks)
  in map (dot attn_weights) (transpose vs)

-- | microgpt's `gpt` for n sequences, each through its own linear layers, the
-- heads read from the cache by reshapes: logits [n][V] at position `pos`, the
-- token's keys and values appended to the caches [L][n][T][C].
def seed_gpt_tokens [V][C][T][L][F][n] (p: params [V][C][T][L][F]) (n_head: i64)
                    (tokens: [n]i64) (pos: i64) (keys: *[L][n][T][C]f32) (values: *[L][n][T][C]f32)
                    : ([n][V]f32, *[L][n][T][C]f32, *[L][n][T][C]f32) =
  let x = map (\tok -> rmsnorm (map2 (+) p.wte[tok] p.wpe[pos])) tokens
  let (x, keys, values) =
    loop (x: [n][C]f32, keys: *[L][n][T][C]f32, values: *[L][n][T][C]f32) = (x, keys, values)
    for li < L do
      let x_residual = x
      let xn = map rmsnorm x
      let q = map (`linear` p.attn_wq[li]) xn
      let keys = keys with [li, :, pos] = map (`linear` p.attn_wk[li]) xn
      let values = values with [li, :, pos] = map (`linear` p.attn_wv[li]) xn
      let attend (q_i: [C]f32) (ks: [T][C]f32) (vs: [T][C]f32) : [C]f32 =
        flatten (map3 (cached_attention pos) (unflatten (q_i :> [n_head * (C / n_head)]f32))
                      (split_heads n_head ks) (split_heads n_head vs)) :> [C]f32
      let x_attn = map3 attend q keys[li] values[li]
      let x = map2 (map2 (+)) (map (`linear` p.attn_wo[li]) x_attn) x_residual
      in (map (mlp p.mlp_fc1[li] p.mlp_fc2[li]) x, keys, values)
  in (map (`linear` p.lm_head) x, keys, values)

-- | microgpt's loss on one document: tokens [block_size+1] (BOS + doc + BOS,
-- padded), the first n_valid positions predicted one token at a time through
-- the KV cache, as microgpt's training loop does.
def doc_loss [V] (p: params [V][n_embd][block_size][n_layer][mlp_width])
             (tokens: [block_size + 1]i64) (n_valid: i64) : f32 =
  let keys = replicate n_layer (replicate 1 (replicate block_size (replicate n_embd 0f32)))
  let values = replicate n_layer (replicate 1 (replicate block_size (replicate n_embd 0f32)))
  let (loss, _, _) =
    loop (loss, keys, values) = (0f32, keys, values) for pos < n_valid do
      let (logits, keys, values) = seed_gpt_tokens p n_head [tokens[pos]] pos keys values
      in (loss + nll logits[0] tokens[pos + 1], keys, values)
  in loss / f32.i64 n_valid

-- | S steps of the trainer's AdamW (train.fut's `step`) from the weights p0 (P of
-- them, moments zero), step k's loss and gradient from `loss_grad k`: the loop is
-- written over a `gpt_model` so that the weights are one opaque value to the type
-- checker (a record variable counts as aliasing itself, and the loop consumes the
-- moments beside it).
module adam_loop (M: gpt_model) = {
  module Tr = trainer M
  def run [V][C][T][L][F] (S: i64) (P: i64) (p0: M.params [V][C][T][L][F])
          (loss_grad: i64 -> M.params [V][C][T][L][F] -> (f32, M.params [V][C][T][L][F]))
          : [S]f32 =
    let (_, _, _, _, losses) =
      loop (p, m: *[P]f32, v: *[P]f32, t, losses: *[S]f32) =
        (p0, replicate P 0, replicate P 0, 0, replicate S 0)
      for k < S do
        let (loss, grad) = loss_grad k p
        -- microgpt's linear decay; its Adam is the trainer's AdamW without decay or
        -- clipping
        let lr = 0.01 * (1 - f32.i64 k / f32.i64 S)
        let adam = {beta1 = 0.85, beta2 = 0.99, eps = 1e-8, weight_decay = 0, grad_clip = 0}
        let (p, m, v, t, _, _) = Tr.step adam lr true p m v t grad
        in (p, m, v, t, losses with [k] = loss)
    in losses
}
module Seed = adam_loop microgpt_model

-- | microgpt's whole job in one call: step s trains on docs[s] (tokens [S][T+1],
-- n_pos [S], as the driver encodes them) with Adam and microgpt's linear lr
-- decay over S steps, from microgpt's initialisation under `seed`.  Returns the
-- S losses (an array: futhark-ffi reads scalars without a sync).
entry job [S] (vocab_size: i64) (seed: i64) (tokens: [S][block_size + 1]i64) (n_pos: [S]i64)
    : [S]f32 =
  let P = i64.sum (tensor_sizes vocab_size n_embd block_size n_layer mlp_width)
  in Seed.run S P (mk_params seed vocab_size n_embd block_size n_layer mlp_width)
              (\k p -> vjp2 (\p -> doc_loss p tokens[k] n_pos[k]) p 1)
