-- | The parts of microgpt's training step, each alone, for `python -m bench.breakdown`:
-- what futhark/model_grad.fut computes for one layer of a batch of B documents of n
-- positions (N = B*n rows, C = n_embd, F = MLP width, H heads): the linear layers
-- as one product over all N positions, attention one document after another.
-- Inputs are random; only the time matters.

import "../futhark/nn"
import "../futhark/gemm"
import "../futhark/layers"

-- | The six linear layers' forward products (q, k, v, attn_wo, fc1, fc2).
entry linear_fwd [N][C][F] (x: [N][C]f32) (wc: [4][C][C]f32) (w1: [F][C]f32) (w2: [C][F]f32)
                           : [N][C]f32 =
  let (q, k, v) = (matmul_nt x wc[0], matmul_nt x wc[1], matmul_nt x wc[2])
  let o = matmul_nt q wc[3]
  let y = matmul_nt (matmul_nt x w1) w2
  in map5 (map5 (\a b c d e -> a + b + c + d + e)) q k v o y

-- | Their backward: dx of each (`matmul_backward`'s first half).
entry linear_dx [N][C][F] (dy: [N][C]f32) (dh: [N][F]f32) (wc: [4][C][C]f32) (w1: [F][C]f32)
                          (w2: [C][F]f32) : ([N][C]f32, [N][F]f32) =
  let dx (w: [C][C]f32) = matmul_nn dy w
  in (map5 (map5 (\a b c d e -> a + b + c + d + e)) (dx wc[0]) (dx wc[1]) (dx wc[2]) (dx wc[3])
           (matmul_nn dh w1),
      matmul_nn dy w2)

-- | Their backward: dW of each (`matmul_backward`'s second half).
entry linear_dw [N][C][F] (x: [N][C]f32) (dy: [N][C]f32) (h: [N][F]f32) (dh: [N][F]f32)
                          : ([4][C][C]f32, [F][C]f32, [C][F]f32) =
  let dw [M][K] (d: [N][M]f32) (a: [N][K]f32) : [M][K]f32 = opaque (matmul_tn d a)
  in ([dw dy x, dw x dy, dw dy dy, dw x x], dw dh x, dw dy h)

-- | One linear layer's products alone, for their GFLOP/s beside NumPy's: y = x w^T
-- (x: [N][K], w: [M][K]), dx = dy w and dW = dy^T x (dy: [N][M]).
entry product_fwd [N][K][M] (x: [N][K]f32) (w: [M][K]f32) : [N][M]f32 = matmul_nt x w
entry product_dx [N][K][M] (dy: [N][M]f32) (w: [M][K]f32) : [N][K]f32 = matmul_nn dy w
entry product_dw [N][K][M] (dy: [N][M]f32) (x: [N][K]f32) : [M][K]f32 = matmul_tn dy x

-- | Causal attention's forward (scores, softmax, weighted values, head copies),
-- document after document.
entry attention_fwd [B][n][C] (H: i64) (q: [B][n][C]f32) (k: [B][n][C]f32) (v: [B][n][C]f32)
                              : [B][n][C]f32 =
  loop out = replicate B (replicate n (replicate C 0)) for b < B do
    out with [b] = (attention_forward H q[b] k[b] v[b]).0

-- | Its backward, from given attention weights att: [B][H][n][n].
entry attention_bwd [B][n][C][H] (q: [B][n][C]f32) (k: [B][n][C]f32) (v: [B][n][C]f32)
                                 (att: [B][H][n][n]f32) (dout: [B][n][C]f32) : [B][n][C]f32 =
  loop out = replicate B (replicate n (replicate C 0)) for b < B do
    let (dq, dk, dv) = attention_backward q[b] k[b] v[b] att[b] dout[b]
    in out with [b] = map3 (map3 (\a b c -> a + b + c)) dq dk dv

-- | The rest of a layer's forward: two rmsnorms, relu, two residual adds.
entry other_fwd [N][C][F] (x: [N][C]f32) (a: [N][C]f32) (h: [N][F]f32) : ([N][C]f32, [N][F]f32) =
  let xn = opaque (map rmsnorm x)
  let x_mid = opaque (map2 (map2 (+)) x a)
  let xn2 = opaque (map rmsnorm x_mid)
  in (map3 (map3 (\p q s -> p + q + s)) xn x_mid xn2, opaque (map (map relu) h))

-- | The rest of a layer's backward: relu's mask, two rmsnorm backwards, the adds.
entry other_bwd [N][C][F] (x: [N][C]f32) (dx: [N][C]f32) (h: [N][F]f32) (dh: [N][F]f32)
                          : ([N][C]f32, [N][F]f32) =
  let m = opaque (map2 (map2 (\d v -> if v > 0 then d else 0)) dh h)
  let d1 = opaque (map2 rmsnorm_backward x dx)
  let d2 = opaque (map2 rmsnorm_backward x d1)
  in (map3 (map3 (\p q s -> p + q + s)) dx d1 d2, m)

-- | The output head: logits, loss, and lm_head's backward.
entry head [N][C][V] (x: [N][C]f32) (w: [V][C]f32) (targets: [N]i64) : ([N][C]f32, [V][C]f32) =
  let tg = map (\t -> (t % V + V) % V) targets
  let logits = matmul_nt x w
  let loss = f32.sum (map2 nll logits tg)
  in matmul_backward x w (map2 (nll_backward (1 / loss)) logits tg)

-- | microgpt's Adam on P weights (one step: moments, bias correction, update).
entry adam [P] (p: [P]f32) (m: [P]f32) (v: [P]f32) (g: [P]f32) : ([P]f32, [P]f32, [P]f32) =
  let m = map2 (\m g -> 0.85 * m + 0.15 * g) m g
  let v = map2 (\v g -> 0.99 * v + 0.01 * g * g) v g
  in (map3 (\p m v -> p - 0.01 * (m / 0.15) / (f32.sqrt (v / 0.01) + 1e-8)) p m v, m, v)
