-- | microgpt's training loss and its gradient, the backward pass written out
-- layer by layer (layers.fut; llm.c's gpt2_forward/gpt2_backward) instead of
-- derived by `vjp2`: the forward saves each layer's activations, the backward
-- walks the layers in reverse.  The same function as `compute_loss` in
-- train.fut over model.fut's `gpt_seq` (the tests hold both against float64
-- finite differences).
--
-- A batch is B rows of n = min(T, max n_pos) positions, every linear layer one
-- product over all N = B*n positions.  Shapes as model.fut: V, C, T, L, F, H = n_head.

import "nn"
import "model"
import "gemm"
import "layers"
import "layout"
import "tensor"

-- | One block's forward (model.fut's `block`) on x: [N][C], B rows of n
-- positions, and what its backward needs.
def block_forward [V][C][T][L][F][N] (p: params [V][C][T][L][F]) (H: i64) (B: i64) (n: i64)
                  (li: i64) (x: [N][C]f32) : ([N][C]f32, saved [N][B][n][C][F][H]) =
  let xn = map rmsnorm x
  let q = matmul_nt xn p.attn_wq[li]
  let k = matmul_nt xn p.attn_wk[li]
  let v = matmul_nt xn p.attn_wv[li]
  let (a, att) = attention_rows H B n q k v
  let x_mid = add2 x (matmul_nt a p.attn_wo[li])
  let h = matmul_nt (map rmsnorm x_mid) p.mlp_fc1[li]
  let x_out = add2 x_mid (matmul_nt (act_map relu h) p.mlp_fc2[li])
  in (x_out, {x, q, k, v, att, a, x_mid, h})

-- | One block's backward for dx_out: [N][C]: the gradient of its input and of
-- its six weights (wq, wk, wv, wo, fc1, fc2).
def block_backward [V][C][T][L][F][N][B][n][H] (p: params [V][C][T][L][F]) (li: i64)
                   (s: saved [N][B][n][C][F][H]) (dx_out: [N][C]f32) =
  -- MLP: x_out = x_mid + fc2(relu(fc1(rmsnorm x_mid)))
  let (dhr, d_fc2) = matmul_backward (act_map relu s.h) p.mlp_fc2[li] dx_out
  let dh = act_map2 (\d h -> if h > 0 then d else 0) dhr s.h
  let (dxn2, d_fc1) = matmul_backward (map rmsnorm s.x_mid) p.mlp_fc1[li] dh
  let dx_mid = add2 dx_out (map2 rmsnorm_backward s.x_mid dxn2)
  -- attention: x_mid = x + wo(attention(wq xn, wk xn, wv xn)), xn = rmsnorm x
  let (da, d_wo) = matmul_backward s.a p.attn_wo[li] dx_mid
  let (dq, dk, dv) = attention_rows_backward s.q s.k s.v s.att da
  let xn = map rmsnorm s.x
  let (dxq, d_wq) = matmul_backward xn p.attn_wq[li] dq
  let (dxk, d_wk) = matmul_backward xn p.attn_wk[li] dk
  let (dxv, d_wv) = matmul_backward xn p.attn_wv[li] dv
  let dx = add2 dx_mid (map2 rmsnorm_backward s.x (add2 dxq (add2 dxk dxv)))
  in (dx, (d_wq, d_wk, d_wv, d_wo, d_fc1, d_fc2))

-- | The mean next-token NLL over the valid positions of tokens: [B][T1] (row b
-- counts its first n_pos[b] positions; `compute_loss` in train.fut) and its
-- gradient with respect to every weight.
def loss_grad [V][C][T][L][F][B][T1] (p: params [V][C][T][L][F]) (H: i64)
              (tokens: [B][T1]i64) (n_pos: [B]i64) : (f32, params [V][C][T][L][F]) =
  let (inputs, targets) = batch_rows T tokens n_pos
  let n = length inputs[0]
  let N = B * n
  let (inputs, targets, positions, weights) = flat_batch N inputs targets n_pos
  -- forward (model.fut's gpt_seq), saving each layer's activations
  let emb = map2 (\tok t -> map2 (+) p.wte[tok] p.wpe[t]) inputs positions
  let (x, saves) =
    loop (x, saves) = (map rmsnorm emb, saved_zeros L N B n C F H) for li < L do
      let (x, s) = block_forward p H B n li x
      in (x, saves with [li] = s)
  -- the head, and the backward
  let (loss, dx, d_lm_head) = head_loss_backward x p.lm_head targets weights
  let zeros (k: i64) (r: i64) (c: i64) : *[L][r][c]f32 = zeros_3d k L r c
  let (dx, d_wq, d_wk, d_wv, d_wo, d_fc1, d_fc2) =
    loop (dx, d_wq, d_wk, d_wv, d_wo, d_fc1, d_fc2) =
         (dx, zeros 0 C C, zeros 1 C C, zeros 2 C C, zeros 3 C C, zeros 4 F C, zeros 5 C F)
    for i < L do
      let li = L - 1 - i
      -- opaque, as gpt2_grad.fut's: else Futhark's multicore pipeline copied the saved
      -- arrays, whole, into the same layout before this loop
      let (dx, (wq, wk, wv, wo, fc1, fc2)) = block_backward p li (opaque saves[li]) dx
      in (dx, d_wq with [li] = wq, d_wk with [li] = wk, d_wv with [li] = wv, d_wo with [li] = wo,
          d_fc1 with [li] = fc1, d_fc2 with [li] = fc2)
  -- the embeddings: x0 = rmsnorm(wte[token] + wpe[position])
  let demb = map2 rmsnorm_backward emb dx
  in (loss, { wte = embedding_backward V inputs demb, wpe = embedding_backward T positions demb,
              lm_head = d_lm_head,
              attn_wq = d_wq, attn_wk = d_wk, attn_wv = d_wv, attn_wo = d_wo,
              mlp_fc1 = d_fc1, mlp_fc2 = d_fc2 })

-- | The mean next-token NLL of a batch (`compute_loss` in train.fut), by
-- `loss_grad`'s forward over all positions at once, saving nothing: what the
-- evaluation (the `loss` entry) runs on c and multicore.
def batch_loss [V][C][T][L][F][B][T1] (p: params [V][C][T][L][F]) (H: i64)
               (tokens: [B][T1]i64) (n_pos: [B]i64) : f32 =
  let (inputs, targets) = batch_rows T tokens n_pos
  let n = length inputs[0]
  let N = B * n
  let (inputs, targets, positions, weights) = flat_batch N inputs targets n_pos
  let emb = map2 (\tok t -> map2 (+) p.wte[tok] p.wpe[t]) inputs positions
  let x = loop x = map rmsnorm emb for li < L do (block_forward p H B n li x).0
  in weighted_nll (matmul_nt x p.lm_head) targets weights

-- | microgpt as a `gpt_model` (gpt_model.fut): its hyper-parameter is n_head.
module microgpt_model = {
  type hyper = i64
  type params [V][C][T][L][F] = params [V][C][T][L][F]
  -- microgpt's linear layers have no biases: `bias` must be false
  def hyper (n_head: i64) (bias: bool) : hyper = assert (!bias) n_head
  def counters (n_head: hyper) : [2]i64 = [n_head, 0]
  def init (seed: i64) (V: i64) (C: i64) (T: i64) (L: i64) (F: i64) : params [V][C][T][L][F] =
    mk_params seed V C T L F
  def flat [V][C][T][L][F] (p: params [V][C][T][L][F]) : []f32 =
    flatten p.wte ++ flatten p.wpe ++ flatten p.lm_head ++ flatten_3d p.attn_wq
    ++ flatten_3d p.attn_wk ++ flatten_3d p.attn_wv ++ flatten_3d p.attn_wo
    ++ flatten_3d p.mlp_fc1 ++ flatten_3d p.mlp_fc2
  def unflat (V: i64) (C: i64) (T: i64) (L: i64) (F: i64) (xs: []f32) : params [V][C][T][L][F] =
    let o = offsets (length xs) (tensor_sizes V C T L F)
    in { wte = take_2d xs o[0] V C, wpe = take_2d xs o[1] T C, lm_head = take_2d xs o[2] V C,
         attn_wq = take_3d xs o[3] L C C, attn_wk = take_3d xs o[4] L C C,
         attn_wv = take_3d xs o[5] L C C, attn_wo = take_3d xs o[6] L C C,
         mlp_fc1 = take_3d xs o[7] L F C, mlp_fc2 = take_3d xs o[8] L C F }
  def params_map2 [V][C][T][L][F] f (a: params [V][C][T][L][F]) b = params_map2 f a b
  def tensor_sizes (V: i64) (C: i64) (T: i64) (L: i64) (F: i64) : []i64 =
    tensor_sizes V C T L F
  def params_map4_decay [V][C][T][L][F][P] f (p: params [V][C][T][L][F]) (m: [P]f32)
                        (v: [P]f32) g =
    params_map4_decay f p m v g
  def params_moments [V][C][T][L][F][P] f (m: *[P]f32) (v: *[P]f32) (g: params [V][C][T][L][F]) =
    params_moments f m v g
  def params_sum [V][C][T][L][F] f (p: params [V][C][T][L][F]) = params_sum f p
  def gpt_seq [V][C][T][L][F][n] (p: params [V][C][T][L][F]) (n_head: i64) (tokens: [n]i64) =
    gpt_seq p n_head tokens
  -- by hand (`grad_by_hand`, layout.fut), or by reverse AD of `gpt_seq`
  def loss_grad [V][C][T][L][F][B][T1] (p: params [V][C][T][L][F]) (n_head: i64)
                (tokens: [B][T1]i64) (n_pos: [B]i64) =
    if grad_by_hand then loss_grad p n_head tokens n_pos
    else let (rows, targets) = batch_rows T tokens n_pos
         in vjp2 (\q -> mean_nll (map (gpt_seq q n_head) rows) targets n_pos) p 1
  -- the same forward as `loss_grad`'s (`batch_loss`), or `gpt_seq` row by row
  def loss [V][C][T][L][F][B][T1] (p: params [V][C][T][L][F]) (n_head: i64)
           (tokens: [B][T1]i64) (n_pos: [B]i64) : f32 =
    if grad_by_hand then batch_loss p n_head tokens n_pos
    else let (rows, targets) = batch_rows T tokens n_pos
         in mean_nll (map (gpt_seq p n_head) rows) targets n_pos
  def gpt_tokens [V][C][T][L][F][n] (p: params [V][C][T][L][F]) (n_head: i64) (tokens: [n]i64)
                 (pos: i64) (keys: *[L][n][T][C]f32) (values: *[L][n][T][C]f32) =
    gpt_tokens p n_head tokens pos keys values
}
