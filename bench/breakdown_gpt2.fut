-- | The parts of GPT-2's training step, each alone, for `python -m bench.breakdown
-- --gpt2`: what futhark/gpt2_grad.fut's `loss_grad` and train.fut's `accumulated`,
-- `step` and `adamw` compute, through the same functions in the same form, one part
-- per entry point.  Shapes as gpt2_grad.fut: a batch of B rows of n positions,
-- N = B*n, C = n_embd, H = n_head, F = MLP width (4 C), V = vocab_size, T =
-- block_size, L = n_layer; activations are [N][C] (or [N][F]), weights [out][in].
-- Per-layer parts compute one layer's call; bench/breakdown.py counts how often the
-- step makes it; two entries are the step's stores of every layer's saved
-- activations and weight gradients.  The timing runs read random inputs;
-- tests/test_breakdown.py holds every entry's output against PyTorch's op on the
-- same inputs (the stores against their inputs).

import "../futhark/nn"
import "../futhark/gemm"
import "../futhark/layers"
import "../futhark/gpt2_model"
import "../futhark/gpt2_grad"
import "../futhark/train"
import "../futhark/tensor"

module Train = trainer gpt2_model

-- | The embeddings alone as a `params` record without layers (the other tensors
-- empty): what `embed` reads.
def emb_params [V][C][T] (wte: [V][C]f32) (wpe: [T][C]f32) : params [V][C][T][0][0] =
  let z1 (m: i64) : [0][m]f32 = replicate 0 (replicate m 0)
  let z2 (r: i64) (c: i64) : [0][r][c]f32 = replicate 0 (replicate r (replicate c 0))
  in { wte, wpe, ln_1_w = z1 C, ln_1_b = z1 C,
       c_attn_w = replicate 0 (replicate 3 (replicate C (replicate C 0))),
       c_attn_b = replicate 0 (replicate 3 (replicate C 0)),
       attn_proj_w = z2 C C, attn_proj_b = z1 C, ln_2_w = z1 C, ln_2_b = z1 C,
       c_fc_w = z2 0 C, c_fc_b = z1 0, mlp_proj_w = z2 C 0, mlp_proj_b = z1 C,
       ln_f_w = replicate C 0, ln_f_b = replicate C 0 }

-- | The step's first part: a batch tokens: [B][T+1] (n_pos valid positions a row)
-- cut into inputs and targets (`batch_rows`, `flat_batch`), and the first block's
-- input wte[token] + wpe[position] (`embed`).  Returns x: [N][C], the targets [N]
-- and the loss weights [N].
entry embedding_fwd [B][T1][V][C][T] (tokens: [B][T1]i64) (n_pos: [B]i64) (wte: [V][C]f32)
                                     (wpe: [T][C]f32) =
  let (inputs, targets) = batch_rows T tokens n_pos
  let n = length inputs[0]
  let N = B * n
  let (inputs, targets, positions, weights) = flat_batch N inputs targets n_pos
  in (embed (emb_params wte wpe) inputs positions, targets, weights)

-- | The embeddings' backward for dx: [N][C] (the first block's input gradient):
-- wte's gradient, the head's d_wte_head: [V][C] plus the rows the tokens read, and
-- wpe's: [T][C] (`embedding_backward`, as `loss_grad`'s last lines).
entry embedding_bwd [N][C][V] (T: i64) (inputs: [N]i64) (positions: [N]i64) (dx: [N][C]f32)
                              (d_wte_head: [V][C]f32) : ([V][C]f32, [T][C]f32) =
  (add2 d_wte_head (embedding_backward V inputs dx), embedding_backward T positions dx)

-- | LayerNorm (eps 1e-5) of every row of x: [N][C] with weight w and bias b (b
-- unread without `bias`): ln_1, ln_2 or ln_f.
entry layer_norm_fwd [N][C] (bias: bool) (w: [C]f32) (b: [C]f32) (x: [N][C]f32) : [N][C]f32 =
  map (layer_norm bias w b) x

-- | LayerNorm's backward at x: [N][C] for dy: [N][C], as `block_backward` takes it
-- (`layer_norm_backward`): dx, then the weight's and bias's gradients (the bias's
-- zero without `bias`).
entry layer_norm_bwd [N][C] (bias: bool) (w: [C]f32) (x: [N][C]f32) (dy: [N][C]f32)
                            : ([N][C]f32, [C]f32, [C]f32) =
  layer_norm_backward bias w x dy

-- | c_attn's forward on xn: [N][C]: q, k, v, each `dense` of its [C][C] slice of
-- w: [3][C][C] and b: [3][C].
entry c_attn_fwd [N][C] (bias: bool) (w: [3][C][C]f32) (b: [3][C]f32) (xn: [N][C]f32)
                        : ([N][C]f32, [N][C]f32, [N][C]f32) =
  (dense bias w[0] b[0] xn, dense bias w[1] b[1] xn, dense bias w[2] b[2] xn)

-- | c_attn's dx for dq, dk, dv: [N][C]: each `dense_backward`'s dx (`matmul_backward`'s
-- dy w: `matmul_nn`), summed as `block_backward` sums them.
entry c_attn_dx [N][C] (w: [3][C][C]f32) (dq: [N][C]f32) (dk: [N][C]f32) (dv: [N][C]f32)
                       : [N][C]f32 =
  add2 (matmul_nn dq w[0]) (add2 (matmul_nn dk w[1]) (matmul_nn dv w[2]))

-- | c_attn's weight and bias gradients at xn: [N][C] for dq, dk, dv: each
-- `dense_backward`'s dW (`matmul_backward`'s opaque dy^T x: `matmul_tn`) and db
-- (`col_sums`; zero without `bias`).
entry c_attn_dw [N][C] (bias: bool) (xn: [N][C]f32) (dq: [N][C]f32) (dk: [N][C]f32)
                       (dv: [N][C]f32) : ([3][C][C]f32, [3][C]f32) =
  let dw (dy: [N][C]f32) = opaque (matmul_tn dy xn)
  let db (dy: [N][C]f32) = if bias then col_sums dy else replicate C 0
  in ([dw dq, dw dk, dw dv], [db dq, db dk, db dv])

-- | A linear layer's forward (`dense`): x: [N][K], w: [M][K], b: [M] -> [N][M]
-- (attn.c_proj, mlp.c_fc, mlp.c_proj).
entry dense_fwd [N][K][M] (bias: bool) (w: [M][K]f32) (b: [M]f32) (x: [N][K]f32) : [N][M]f32 =
  dense bias w b x

-- | Its dx (`dense_backward`'s: dy w, `matmul_nn`): dy: [N][M] -> [N][K].
entry dense_dx [N][K][M] (w: [M][K]f32) (dy: [N][M]f32) : [N][K]f32 = matmul_nn dy w

-- | Its dW and db (`dense_backward`'s: opaque dy^T x by `matmul_tn`, `col_sums` dy).
entry dense_dw [N][K][M] (bias: bool) (x: [N][K]f32) (dy: [N][M]f32) : ([M][K]f32, [M]f32) =
  (opaque (matmul_tn dy x), if bias then col_sums dy else replicate M 0)

-- | Causal attention over the B rows of n = N / B positions of q, k, v: [N][C]
-- (`attention_rows`, H heads): its output [N][C] and weights [B][H][n][n].
entry attention_fwd [N][C] (H: i64) (B: i64) (q: [N][C]f32) (k: [N][C]f32) (v: [N][C]f32) =
  attention_rows H B (N / B) q k v

-- | Its backward for da: [N][C] from the weights att: [B][H][n][n] the forward
-- returned (`attention_rows_backward`): dq, dk, dv.
entry attention_bwd [N][C][B][H][n] (q: [N][C]f32) (k: [N][C]f32) (v: [N][C]f32)
                                    (att: [B][H][n][n]f32) (da: [N][C]f32)
                                    : ([N][C]f32, [N][C]f32, [N][C]f32) =
  attention_rows_backward q k v att da

-- | A residual add (`add2`): a + b, both [N][C].
entry residual_add [N][C] (a: [N][C]f32) (b: [N][C]f32) : [N][C]f32 = add2 a b

-- | GELU (tanh form) of the MLP's hidden layer h: [N][F] (`act_map gelu`).
entry gelu_fwd [N][F] (h: [N][F]f32) : [N][F]f32 = act_map gelu h

-- | GELU's backward at h: [N][F] for dy: [N][F] (`act_map2 gelu_backward`).
entry gelu_bwd [N][F] (h: [N][F]f32) (dy: [N][F]f32) : [N][F]f32 = act_map2 gelu_backward h dy

-- | The head tied to wte: logits = xf wte^T, xf: [N][C] (ln_f's output), wte:
-- [V][C] -> [N][V] (`head_loss_backward`'s `matmul_nt`).
entry head_logits [N][C][V] (xf: [N][C]f32) (wte: [V][C]f32) : [N][V]f32 = matmul_nt xf wte

-- | The cross-entropy of logits: [N][V] against targets: [N], summed with the
-- weights: [N] (`weighted_nll`; 1/N each: the mean), as [loss].
entry cross_entropy_fwd [N][V] (logits: [N][V]f32) (targets: [N]i64) (weights: [N]f32) : [1]f32 =
  [weighted_nll logits targets weights]

-- | Its gradient with respect to the logits: weight (softmax - onehot) a row
-- (`head_loss_backward`'s `map3 nll_backward`).
entry cross_entropy_bwd [N][V] (logits: [N][V]f32) (targets: [N]i64) (weights: [N]f32)
                                : [N][V]f32 =
  map3 nll_backward weights logits targets

-- | The head's dx: dlogits wte, dlogits: [N][V] -> [N][C] (`matmul_backward`'s
-- `matmul_nn`).
entry head_dx [N][C][V] (dlogits: [N][V]f32) (wte: [V][C]f32) : [N][C]f32 = matmul_nn dlogits wte

-- | The head's part of wte's gradient: dlogits^T xf -> [V][C] (`matmul_backward`'s
-- opaque `matmul_tn`).
entry head_dw [N][C][V] (dlogits: [N][V]f32) (xf: [N][C]f32) : [V][C]f32 =
  opaque (matmul_tn dlogits xf)

-- | The gradient of A micro-batches summed (train.fut's `accumulated` through its
-- `add_micro_batch`, each weighted 1/A here) and its global L2 norm (`step`'s sqrt
-- of `params_sum` of the squares), gs: [A][P] flat as the library's parameters
-- (gpt2_model's `unflat` of V C T L F), as [norm].  One micro-batch (the recipe's
-- and 124M's) is the norm alone: the library's loop hands its one gradient on as
-- it came (no copy of a gradient in the step's copy census on c), while a loop
-- here, over slices of gs, copied every tensor (at 124M 3.2x PyTorch's time).
entry grad_sum_norm [A][P] (V: i64) (C: i64) (T: i64) (L: i64) (F: i64) (gs: [A][P]f32) : [1]f32 =
  let g (a: i64) = gpt2_model.unflat V C T L F gs[a]
  let w = 1 / f32.i64 A
  let norm grad = [f32.sqrt (gpt2_model.params_sum (\x -> x * x) grad)]
  in if A == 1 then norm (g 0)
     else norm (loop acc = (0, g 0) for a < A do Train.add_micro_batch A a w acc (0, g a)).1

-- | One AdamW step (train.fut's `adamw`: the new weights and their check, then the
-- moments written in place; decay on the embeddings and the linear layers'
-- weights, bias correction at step + 1) at lr on the gradient g scaled by
-- clip_coef, from the weights p and moments m, v after `step` steps, all [P] flat
-- as the library's parameters; the recipe's betas (0.9, 0.99), eps 1e-8, decay
-- 0.1.  The moments are consumed, written in place as the library writes its own.
-- Returns the new weights and moments.
def adamw_step [P] (V: i64) (C: i64) (T: i64) (L: i64) (F: i64) (step: i64) (lr: f32)
               (clip_coef: f32) (p: [P]f32) (m: *[P]f32) (v: *[P]f32) (g: [P]f32) =
  let u (xs: [P]f32) = gpt2_model.unflat V C T L F xs
  let cfg = {beta1 = 0.9, beta2 = 0.99, eps = 1e-8, weight_decay = 0.1, grad_clip = 1}
  let (new, m, v, _, ok) = Train.adamw cfg lr clip_coef true (u p) m v step (u g)
  in assert ok (new, m, v)

-- | `adamw_step` timed: the new state (an opaque value: only the time matters here).
-- The moments are consumed (the timing program gives each run its own copy of them,
-- outside the time: until 2026-12-07 they were copied inside, 0.5 ms of the recipe's
-- 3.8 ms).
entry adamw [P] (V: i64) (C: i64) (T: i64) (L: i64) (F: i64) (H: i64) (bias: bool) (step: i64)
                (lr: f32) (clip_coef: f32) (p: [P]f32) (m: *[P]f32) (v: *[P]f32) (g: [P]f32)
                : Train.state [V][C][T][L][F][P] =
  let (params, m, v) = adamw_step V C T L F step lr clip_coef p m v g
  in {params, m, v, step = step + 1, hyper = gpt2_model.hyper H bias}

-- | `adamw`'s new weights and moments, flat (for the test; the flattening copies).
entry adamw_flat [P] (V: i64) (C: i64) (T: i64) (L: i64) (F: i64) (H: i64) (bias: bool) (step: i64)
                     (lr: f32) (clip_coef: f32) (p: [P]f32) (m: [P]f32) (v: [P]f32) (g: [P]f32)
                     : ([]f32, [P]f32, [P]f32) =
  let _ = (H, bias)
  let (p, m, v) = adamw_step V C T L F step lr clip_coef p (copy m) (copy v) g
  in (gpt2_model.flat p, m, v)

-- | The forward's store of what each layer's backward reads (`loss_grad`'s loop):
-- `saved_zeros` for all L layers, then each layer's record (here the same one, x, q,
-- k, v, a, x_mid: [N][C], h: [N][F], att: [B][H][n][n]) written at its index.
-- Returns the store's arrays, [L] of each.
entry activation_store [N][C][F][B][H][n] (L: i64) (x: [N][C]f32) (q: [N][C]f32) (k: [N][C]f32)
                                          (v: [N][C]f32) (att: [B][H][n][n]f32) (a: [N][C]f32)
                                          (x_mid: [N][C]f32) (h: [N][F]f32) =
  let saves = loop saves = saved_zeros L N B n C F H for li < L do
                saves with [li] = {x, q, k, v, att, a, x_mid, h}
  in (map (.x) saves, map (.q) saves, map (.k) saves, map (.v) saves, map (.att) saves,
      map (.a) saves, map (.x_mid) saves, map (.h) saves)

-- | The backward's store of the layers' weight gradients (`loss_grad`'s loop over the
-- blocks in reverse): zeros for all L layers, then each layer's (here the same ones)
-- written at its index, as `block_grad`'s fields.  Returns the [L] stacks.
entry gradient_store [C][F] (L: i64) (c_attn_w: [3][C][C]f32) (c_attn_b: [3][C]f32)
                            (attn_proj_w: [C][C]f32) (attn_proj_b: [C]f32) (ln_w: [C]f32)
                            (ln_b: [C]f32) (c_fc_w: [F][C]f32) (c_fc_b: [F]f32)
                            (mlp_proj_w: [C][F]f32) (mlp_proj_b: [C]f32) =
  let z1 (k: i64) (m: i64) : *[L][m]f32 = zeros_2d k L m
  let z2 (k: i64) (r: i64) (c: i64) : *[L][r][c]f32 = zeros_3d k L r c
  in loop (w, b, pw, pb, l1w, l1b, l2w, l2b, fw, fb, mw, mb) =
          (map unflatten (z2 0 (3 * C) C) :> *[L][3][C][C]f32,
           map unflatten (z1 1 (3 * C)) :> *[L][3][C]f32,
           z2 2 C C, z1 3 C, z1 4 C, z1 5 C, z1 6 C, z1 7 C, z2 8 F C, z1 9 F, z2 10 C F, z1 11 C)
     for i < L do
       let li = L - 1 - i
       in (w with [li] = c_attn_w, b with [li] = c_attn_b, pw with [li] = attn_proj_w,
           pb with [li] = attn_proj_b, l1w with [li] = ln_w, l1b with [li] = ln_b,
           l2w with [li] = ln_w, l2b with [li] = ln_b, fw with [li] = c_fc_w, fb with [li] = c_fc_b,
           mw with [li] = mlp_proj_w, mb with [li] = mlp_proj_b)
