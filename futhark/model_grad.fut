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
import "layers"
import "layout"

-- | What the backward reads of one layer's forward: activations [N][C] of the
-- N = B*n positions (row b*n + t is position t of row b), the attention weights
-- `att` [B][H][n][n], and fc1's outputs before relu `h` [N][F].
type saved [N][B][n][C][F][H] =
  { x: [N][C]f32, q: [N][C]f32, k: [N][C]f32, v: [N][C]f32,
    att: [B][H][n][n]f32, a: [N][C]f32, x_mid: [N][C]f32, h: [N][F]f32 }

def add2 [N][C] (a: [N][C]f32) (b: [N][C]f32) : [N][C]f32 = map2 (map2 (+)) a b

-- | Row b's n positions of x: [N][C].
def doc [N][C] (n: i64) (x: [N][C]f32) (b: i64) : [n][C]f32 = x[b * n:(b + 1) * n] :> [n][C]f32

-- | One block's forward (model.fut's `block`) on x: [N][C], B rows of n
-- positions, and what its backward needs.
def block_forward [V][C][T][L][F][N] (p: params [V][C][T][L][F]) (H: i64) (B: i64) (n: i64)
                  (li: i64) (x: [N][C]f32) : ([N][C]f32, saved [N][B][n][C][F][H]) =
  let xn = map rmsnorm x
  let q = matmul4 xn p.attn_wq[li]
  let k = matmul4 xn p.attn_wk[li]
  let v = matmul4 xn p.attn_wv[li]
  let (a, att) = unzip (tabulate B (\b -> attention_forward H (doc n q b) (doc n k b) (doc n v b)))
  let a = flatten a :> [N][C]f32
  let x_mid = add2 x (matmul4 a p.attn_wo[li])
  let h = matmul4 (map rmsnorm x_mid) p.mlp_fc1[li]
  let x_out = add2 x_mid (matmul4 (map (map relu) h) p.mlp_fc2[li])
  in (x_out, {x, q, k, v, att, a, x_mid, h})

-- | One block's backward for dx_out: [N][C]: the gradient of its input and of
-- its six weights (wq, wk, wv, wo, fc1, fc2).
def block_backward [V][C][T][L][F][N][B][n][H] (p: params [V][C][T][L][F]) (li: i64)
                   (s: saved [N][B][n][C][F][H]) (dx_out: [N][C]f32) =
  -- MLP: x_out = x_mid + fc2(relu(fc1(rmsnorm x_mid)))
  let (dhr, d_fc2) = matmul_backward (map (map relu) s.h) p.mlp_fc2[li] dx_out
  let dh = map2 (map2 (\d h -> if h > 0 then d else 0)) dhr s.h
  let (dxn2, d_fc1) = matmul_backward (map rmsnorm s.x_mid) p.mlp_fc1[li] dh
  let dx_mid = add2 dx_out (map2 rmsnorm_backward s.x_mid dxn2)
  -- attention: x_mid = x + wo(attention(wq xn, wk xn, wv xn)), xn = rmsnorm x
  let (da, d_wo) = matmul_backward s.a p.attn_wo[li] dx_mid
  let (dq, dk, dv) = unzip3 (tabulate B (\b -> attention_backward (doc n s.q b) (doc n s.k b)
                                                                  (doc n s.v b) s.att[b] (doc n da b)))
  let (dq, dk, dv) = (flatten dq :> [N][C]f32, flatten dk :> [N][C]f32, flatten dv :> [N][C]f32)
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
  let (inputs, targets) = (flatten inputs :> [N]i64, flatten targets :> [N]i64)
  let positions = flatten (replicate B (iota n)) :> [N]i64
  -- each position's weight in the mean: 1/total where it counts, else 0
  let total = f32.i64 (i64.sum n_pos)
  let weights = flatten (map (\np -> map (\t -> if t < np then 1 / total else 0) (iota n)) n_pos)
                :> [N]f32
  -- forward (model.fut's gpt_seq), saving each layer's activations
  let emb = map2 (\tok t -> map2 (+) p.wte[tok] p.wpe[t]) inputs positions
  let zeros (m: i64) : [N][m]f32 = replicate N (replicate m 0)
  let empty : saved [N][B][n][C][F][H] =
    { x = zeros C, q = zeros C, k = zeros C, v = zeros C, a = zeros C, x_mid = zeros C,
      h = zeros F, att = replicate B (replicate H (replicate n (replicate n 0))) }
  let (x, saves) =
    loop (x, saves) = (map rmsnorm emb, replicate L empty) for li < L do
      let (x, s) = block_forward p H B n li x
      in (x, saves with [li] = s)
  let logits = matmul4 x p.lm_head
  let loss = f32.sum (map3 (\l t w -> if w > 0 then w * nll l t else 0) logits targets weights)
  -- backward
  let (dx, d_lm_head) = matmul_backward x p.lm_head (map3 nll_backward weights logits targets)
  let zeros (r: i64) (c: i64) : *[L][r][c]f32 = replicate L (replicate r (replicate c 0))
  let (dx, d_wq, d_wk, d_wv, d_wo, d_fc1, d_fc2) =
    loop (dx, d_wq, d_wk, d_wv, d_wo, d_fc1, d_fc2) =
         (dx, zeros C C, zeros C C, zeros C C, zeros C C, zeros F C, zeros C F)
    for i < L do
      let li = L - 1 - i
      let (dx, (wq, wk, wv, wo, fc1, fc2)) = block_backward p li saves[li] dx
      in (dx, d_wq with [li] = wq, d_wk with [li] = wk, d_wv with [li] = wv, d_wo with [li] = wo,
          d_fc1 with [li] = fc1, d_fc2 with [li] = fc2)
  -- the embeddings: x0 = rmsnorm(wte[token] + wpe[position])
  let demb = map2 rmsnorm_backward emb dx
  let scatter_add (m: i64) (is: [N]i64) = reduce_by_index (replicate m (replicate C 0)) (map2 (+))
                                                         (replicate C 0) is demb
  in (loss, { wte = scatter_add V inputs, wpe = scatter_add T positions, lm_head = d_lm_head,
              attn_wq = d_wq, attn_wk = d_wk, attn_wv = d_wv, attn_wo = d_wo,
              mlp_fc1 = d_fc1, mlp_fc2 = d_fc2 })

-- | microgpt as a `gpt_model` (gpt_model.fut): its hyper-parameter is n_head.
module microgpt_model = {
  type hyper = i64
  type params [V][C][T][L][F] = params [V][C][T][L][F]
  def params_map2 [V][C][T][L][F] f (a: params [V][C][T][L][F]) b = params_map2 f a b
  def params_map3 [V][C][T][L][F] f (a: params [V][C][T][L][F]) b c = params_map3 f a b c
  def params_map3_decay [V][C][T][L][F] f (a: params [V][C][T][L][F]) b c = params_map3_decay f a b c
  def params_sum_sq [V][C][T][L][F] (p: params [V][C][T][L][F]) = params_sum_sq p
  def gpt_seq [V][C][T][L][F][n] (p: params [V][C][T][L][F]) (n_head: i64) (tokens: [n]i64) =
    gpt_seq p n_head tokens
  -- the backward by hand takes the whole batch at once (layout.fut)
  def by_document = !grad_by_hand
  -- by hand (`grad_by_hand`, layout.fut), or by reverse AD of `gpt_seq`
  def loss_grad [V][C][T][L][F][B][T1] (p: params [V][C][T][L][F]) (n_head: i64)
                (tokens: [B][T1]i64) (n_pos: [B]i64) =
    if grad_by_hand then loss_grad p n_head tokens n_pos
    else let (rows, targets) = batch_rows T tokens n_pos
         in vjp2 (\q -> mean_nll (map (gpt_seq q n_head) rows) targets n_pos) p 1
  def gpt_tokens [V][C][T][L][F][n] (p: params [V][C][T][L][F]) (n_head: i64) (tokens: [n]i64)
                 (pos: i64) (keys: *[L][n][T][C]f32) (values: *[L][n][T][C]f32) =
    gpt_tokens p n_head tokens pos keys values
}
