-- | GPT-2's training loss and its gradient, the backward pass written out layer
-- by layer as llm.c's train_gpt2.c (gpt2_forward/gpt2_backward; layers.fut's
-- pairs), as model_grad.fut does for microgpt: the forward saves each block's
-- activations, every linear layer is one product over the batch's N = B*n
-- positions, attention runs per row and head, and the backward walks the
-- blocks in reverse.  The same function as `compute_loss` in train.fut over
-- gpt2_model.fut's `gpt_seq` (the tests hold it against `vjp2` of that and
-- against float64 central differences).
--
-- Shapes as gpt2_model.fut: V, C, T, L, F; H = n_head; a batch is B rows of
-- n = min(T, max n_pos) positions.

import "nn"
import "gpt2_model"
import "gemm"
import "layers"
import "layout"
import "tensor"

-- | One block's forward (gpt2_model.fut's `block`) on x: [N][C], B rows of n
-- positions, and what its backward needs (LayerNorm's outputs and GELU's are
-- recomputed there from x, x_mid and h).
def block_forward [V][C][T][L][F][N] (p: params [V][C][T][L][F]) (h: hyper) (H: i64) (B: i64)
                  (n: i64) (li: i64) (x: [N][C]f32) : ([N][C]f32, saved [N][B][n][C][F][H]) =
  let xn = map (layer_norm h.bias p.ln_1_w[li] p.ln_1_b[li]) x
  let (w, b) = (p.c_attn_w[li], p.c_attn_b[li])
  let (q, k, v) = (dense h.bias w[0] b[0] xn, dense h.bias w[1] b[1] xn, dense h.bias w[2] b[2] xn)
  let (a, att) = attention_rows H B n q k v
  let x_mid = add2 x (dense h.bias p.attn_proj_w[li] p.attn_proj_b[li] a)
  let xn2 = map (layer_norm h.bias p.ln_2_w[li] p.ln_2_b[li]) x_mid
  let hid = dense h.bias p.c_fc_w[li] p.c_fc_b[li] xn2
  let x_out = add2 x_mid (dense h.bias p.mlp_proj_w[li] p.mlp_proj_b[li] (act_map gelu hid))
  in (x_out, {x, q, k, v, att, a, x_mid, h = hid})

-- | One block's gradients: c_attn's weight [3][C][C] and bias [3][C], then
-- attn.c_proj's, ln_1's, ln_2's, c_fc's and mlp.c_proj's (weights, biases).
type block_grad [C][F] =
  { c_attn_w: [3][C][C]f32, c_attn_b: [3][C]f32, attn_proj_w: [C][C]f32, attn_proj_b: [C]f32,
    ln_1_w: [C]f32, ln_1_b: [C]f32, ln_2_w: [C]f32, ln_2_b: [C]f32,
    c_fc_w: [F][C]f32, c_fc_b: [F]f32, mlp_proj_w: [C][F]f32, mlp_proj_b: [C]f32 }

-- | One block's backward for dx_out: [N][C]: the gradient of its input and of
-- its weights.
def block_backward [V][C][T][L][F][N][B][n][H] (p: params [V][C][T][L][F]) (h: hyper) (li: i64)
                   (s: saved [N][B][n][C][F][H]) (dx_out: [N][C]f32) : ([N][C]f32, block_grad [C][F]) =
  -- MLP: x_out = x_mid + c_proj(gelu(c_fc(ln_2 x_mid)))
  let (dg, d_proj_w, d_proj_b) = dense_backward h.bias (act_map gelu s.h) p.mlp_proj_w[li] dx_out
  let dhid = act_map2 gelu_backward s.h dg
  let xn2 = map (layer_norm h.bias p.ln_2_w[li] p.ln_2_b[li]) s.x_mid
  let (dxn2, d_fc_w, d_fc_b) = dense_backward h.bias xn2 p.c_fc_w[li] dhid
  let (dx_ln2, d_ln2_w, d_ln2_b) = layer_norm_backward h.bias p.ln_2_w[li] s.x_mid dxn2
  let dx_mid = add2 dx_out dx_ln2
  -- attention: x_mid = x + c_proj(attention(c_attn(ln_1 x)))
  let (da, d_aproj_w, d_aproj_b) = dense_backward h.bias s.a p.attn_proj_w[li] dx_mid
  let (dq, dk, dv) = attention_rows_backward s.q s.k s.v s.att da
  let xn = map (layer_norm h.bias p.ln_1_w[li] p.ln_1_b[li]) s.x
  let w = p.c_attn_w[li]
  let (dxq, d_wq, d_bq) = dense_backward h.bias xn w[0] dq
  let (dxk, d_wk, d_bk) = dense_backward h.bias xn w[1] dk
  let (dxv, d_wv, d_bv) = dense_backward h.bias xn w[2] dv
  let dxn = add2 dxq (add2 dxk dxv)
  let (dx_ln1, d_ln1_w, d_ln1_b) = layer_norm_backward h.bias p.ln_1_w[li] s.x dxn
  let dx = add2 dx_mid dx_ln1
  in (dx, { c_attn_w = [d_wq, d_wk, d_wv], c_attn_b = [d_bq, d_bk, d_bv],
            attn_proj_w = d_aproj_w, attn_proj_b = d_aproj_b,
            ln_1_w = d_ln1_w, ln_1_b = d_ln1_b, ln_2_w = d_ln2_w, ln_2_b = d_ln2_b,
            c_fc_w = d_fc_w, c_fc_b = d_fc_b, mlp_proj_w = d_proj_w, mlp_proj_b = d_proj_b })

-- | The first block's input: wte[token] + wpe[position] at each of the N = B*n
-- positions (`flat_batch`'s inputs and positions).
def embed [V][C][T][L][F][N] (p: params [V][C][T][L][F]) (inputs: [N]i64) (positions: [N]i64)
          : [N][C]f32 =
  map2 (\tok t -> map2 (+) p.wte[tok] p.wpe[t]) inputs positions

-- | The mean next-token NLL of a batch computed over all its positions at once
-- (each linear layer one product), without saving anything: the forward that
-- `loss_grad_vjp2` differentiates, and what the evaluation (the `losses` entry)
-- runs on c and multicore.
def batch_loss [V][C][T][L][F][B][T1] (p: params [V][C][T][L][F]) (h: hyper) (tokens: [B][T1]i64)
               (n_pos: [B]i64) : f32 =
  let (inputs, targets) = batch_rows T tokens n_pos
  let n = length inputs[0]
  let N = B * n
  let (inputs, targets, positions, weights) = flat_batch N inputs targets n_pos
  let x = loop x = embed p inputs positions for li < L do (block_forward p h h.n_head B n li x).0
  let logits = matmul_nt (map (layer_norm h.bias p.ln_f_w p.ln_f_b) x) p.wte
  in weighted_nll logits targets weights

-- | `vjp2` of `batch_loss`: the issue's first form (a reverse pass derived from
-- a forward whose linear layers are products over all positions), measured
-- beside `loss_grad` in bench/README.md.
def loss_grad_vjp2 [V][C][T][L][F][B][T1] (p: params [V][C][T][L][F]) (h: hyper)
                   (tokens: [B][T1]i64) (n_pos: [B]i64) : (f32, params [V][C][T][L][F]) =
  vjp2 (\q -> batch_loss q h tokens n_pos) p 1

-- | The mean next-token NLL over the valid positions of tokens: [B][T1] (row b
-- counts its first n_pos[b] positions; `compute_loss` in train.fut) and its
-- gradient with respect to every weight, by the backward written by hand.
def loss_grad [V][C][T][L][F][B][T1] (p: params [V][C][T][L][F]) (h: hyper)
              (tokens: [B][T1]i64) (n_pos: [B]i64) : (f32, params [V][C][T][L][F]) =
  let (inputs, targets) = batch_rows T tokens n_pos
  let n = length inputs[0]
  let N = B * n
  let H = h.n_head
  let (inputs, targets, positions, weights) = flat_batch N inputs targets n_pos
  -- forward, saving each block's activations
  let (x, saves) =
    loop (x, saves) = (embed p inputs positions, saved_zeros L N B n C F H) for li < L do
      let (x, s) = block_forward p h H B n li x
      in (x, saves with [li] = s)
  -- the head tied to wte: logits = ln_f(x) wte^T
  let xf = map (layer_norm h.bias p.ln_f_w p.ln_f_b) x
  let (loss, dxf, d_wte_head) = head_loss_backward xf p.wte targets weights
  let (dx, d_lnf_w, d_lnf_b) = layer_norm_backward h.bias p.ln_f_w x dxf
  -- the blocks in reverse, each one's gradients stored at its layer
  let z1 (k: i64) (m: i64) : *[L][m]f32 = zeros_2d k L m
  let z2 (k: i64) (r: i64) (c: i64) : *[L][r][c]f32 = zeros_3d k L r c
  let (dx, g) =
    loop (dx, { c_attn_w, c_attn_b, attn_proj_w, attn_proj_b, ln_1_w, ln_1_b, ln_2_w, ln_2_b,
                c_fc_w, c_fc_b, mlp_proj_w, mlp_proj_b }) =
         (dx, { c_attn_w = map unflatten (z2 0 (3 * C) C) :> *[L][3][C][C]f32,
                c_attn_b = map unflatten (z1 1 (3 * C)) :> *[L][3][C]f32,
                attn_proj_w = z2 2 C C, attn_proj_b = z1 3 C, ln_1_w = z1 4 C, ln_1_b = z1 5 C,
                ln_2_w = z1 6 C, ln_2_b = z1 7 C, c_fc_w = z2 8 F C, c_fc_b = z1 9 F,
                mlp_proj_w = z2 10 C F, mlp_proj_b = z1 11 C })
    for i < L do
      let li = L - 1 - i
      -- opaque: else Futhark's multicore pipeline copied seven of the saved arrays,
      -- whole, into the same layout before this loop (6 % of the recipe's step)
      let (dx, d) = block_backward p h li (opaque saves[li]) dx
      in (dx, { c_attn_w = c_attn_w with [li] = d.c_attn_w, c_attn_b = c_attn_b with [li] = d.c_attn_b,
                attn_proj_w = attn_proj_w with [li] = d.attn_proj_w,
                attn_proj_b = attn_proj_b with [li] = d.attn_proj_b,
                ln_1_w = ln_1_w with [li] = d.ln_1_w, ln_1_b = ln_1_b with [li] = d.ln_1_b,
                ln_2_w = ln_2_w with [li] = d.ln_2_w, ln_2_b = ln_2_b with [li] = d.ln_2_b,
                c_fc_w = c_fc_w with [li] = d.c_fc_w, c_fc_b = c_fc_b with [li] = d.c_fc_b,
                mlp_proj_w = mlp_proj_w with [li] = d.mlp_proj_w,
                mlp_proj_b = mlp_proj_b with [li] = d.mlp_proj_b })
  -- the embeddings: x0 = wte[token] + wpe[position]; wte also has the head's gradient
  let d_wte = add2 d_wte_head (embedding_backward V inputs dx)
  in (loss, { wte = d_wte, wpe = embedding_backward T positions dx,
              c_attn_w = g.c_attn_w, c_attn_b = g.c_attn_b, attn_proj_w = g.attn_proj_w,
              attn_proj_b = g.attn_proj_b, ln_1_w = g.ln_1_w, ln_1_b = g.ln_1_b, ln_2_w = g.ln_2_w,
              ln_2_b = g.ln_2_b, c_fc_w = g.c_fc_w, c_fc_b = g.c_fc_b, mlp_proj_w = g.mlp_proj_w,
              mlp_proj_b = g.mlp_proj_b, ln_f_w = d_lnf_w, ln_f_b = d_lnf_b })

-- | GPT-2 as a `gpt_model` (gpt_model.fut).
module gpt2_model = {
  type hyper = hyper
  type params [V][C][T][L][F] = params [V][C][T][L][F]
  def hyper (n_head: i64) (bias: bool) : hyper = {n_head, bias}
  def counters (h: hyper) : [2]i64 = [h.n_head, i64.bool h.bias]
  def init (seed: i64) (V: i64) (C: i64) (T: i64) (L: i64) (F: i64) : params [V][C][T][L][F] =
    init_params seed V C T L F
  def flat [V][C][T][L][F] (p: params [V][C][T][L][F]) : []f32 =
    flatten p.wte ++ flatten p.wpe ++ flatten p.ln_1_w ++ flatten p.ln_1_b
    ++ flatten_4d p.c_attn_w ++ flatten_3d p.c_attn_b ++ flatten_3d p.attn_proj_w
    ++ flatten p.attn_proj_b ++ flatten p.ln_2_w ++ flatten p.ln_2_b ++ flatten_3d p.c_fc_w
    ++ flatten p.c_fc_b ++ flatten_3d p.mlp_proj_w ++ flatten p.mlp_proj_b ++ p.ln_f_w ++ p.ln_f_b
  def unflat (V: i64) (C: i64) (T: i64) (L: i64) (F: i64) (xs: []f32) : params [V][C][T][L][F] =
    let o = offsets (length xs) (tensor_sizes V C T L F)
    in { wte = take_2d xs o[0] V C, wpe = take_2d xs o[1] T C,
         ln_1_w = take_2d xs o[2] L C, ln_1_b = take_2d xs o[3] L C,
         c_attn_w = take_4d xs o[4] L 3 C C, c_attn_b = take_3d xs o[5] L 3 C,
         attn_proj_w = take_3d xs o[6] L C C, attn_proj_b = take_2d xs o[7] L C,
         ln_2_w = take_2d xs o[8] L C, ln_2_b = take_2d xs o[9] L C,
         c_fc_w = take_3d xs o[10] L F C, c_fc_b = take_2d xs o[11] L F,
         mlp_proj_w = take_3d xs o[12] L C F, mlp_proj_b = take_2d xs o[13] L C,
         ln_f_w = take_1d xs o[14] C, ln_f_b = take_1d xs o[15] C }
  def params_map2 [V][C][T][L][F] f (a: params [V][C][T][L][F]) b = params_map2 f a b
  def tensor_sizes (V: i64) (C: i64) (T: i64) (L: i64) (F: i64) : []i64 =
    tensor_sizes V C T L F
  def params_map4_decay [V][C][T][L][F][P] f (p: params [V][C][T][L][F]) (m: [P]f32)
                        (v: [P]f32) g =
    params_map4_decay f p m v g
  def params_moments [V][C][T][L][F][P] f (m: *[P]f32) (v: *[P]f32) (g: params [V][C][T][L][F]) =
    params_moments f m v g
  def params_sum [V][C][T][L][F] f (p: params [V][C][T][L][F]) = params_sum f p
  def gpt_seq [V][C][T][L][F][n] (p: params [V][C][T][L][F]) (h: hyper) (tokens: [n]i64) =
    gpt_seq p h tokens
  -- by hand (`grad_by_hand`, layout.fut), the whole batch at once, or by reverse
  -- AD of `gpt_seq`
  def loss_grad [V][C][T][L][F][B][T1] (p: params [V][C][T][L][F]) (h: hyper) (tokens: [B][T1]i64)
                (n_pos: [B]i64) =
    if grad_by_hand then loss_grad p h tokens n_pos
    else let (rows, targets) = batch_rows T tokens n_pos
         in vjp2 (\q -> mean_nll (map (gpt_seq q h) rows) targets n_pos) p 1
  -- the same forward as `loss_grad`'s (`batch_loss`), or `gpt_seq` row by row
  def loss [V][C][T][L][F][B][T1] (p: params [V][C][T][L][F]) (h: hyper) (tokens: [B][T1]i64)
           (n_pos: [B]i64) : f32 =
    if grad_by_hand then batch_loss p h tokens n_pos
    else let (rows, targets) = batch_rows T tokens n_pos
         in mean_nll (map (gpt_seq p h) rows) targets n_pos
  def gpt_tokens [V][C][T][L][F][n] (p: params [V][C][T][L][F]) (h: hyper) (tokens: [n]i64)
                 (pos: i64) (keys: *[L][n][T][C]f32) (values: *[L][n][T][C]f32) =
    gpt_tokens p h tokens pos keys values
}
