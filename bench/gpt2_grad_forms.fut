-- | GPT-2's loss gradient in three forms, for bench/README.md's comparison at
-- the recipe's shape (n_embd 128, 4 layers, B 12 x 64 positions, vocab 65):
-- K plain gradient steps (p - 1e-3 g) from GPT-2's initialisation on batches
-- tokens: [K][B][T+1], each form computing the whole batch's gradient; the
-- mean loss and the sum of the squared gradient norms come out.  The norms
-- keep every gradient alive: with the loss alone, Futhark 0.25.32 compiled
-- `batched_vjp2` to a program that ran as fast as the forward alone and whose
-- updates did not follow the gradient (its mean loss was that of the initial
-- weights).  Compile and run (build.sh's clang and flags, build/c/compiler.txt):
--
--   CC=clang-15 CFLAGS="..." futhark c bench/gpt2_grad_forms.fut -o /tmp/forms
--   (echo 1i64; echo 4i64; futhark dataset -b --i64-bounds=0:64 -g '[3][12][65]i64') > /tmp/in
--   /tmp/forms -e by_hand -b -r 3 -t /dev/stderr < /tmp/in > /dev/null
--
-- ==
-- entry: by_document batched_vjp2 by_hand forward_only
-- compiled random input { 3i64 4i64 [3][12][65]i64 }

import "../futhark/nn"
import "../futhark/gpt2_model"
import "../futhark/gpt2_grad"

def V : i64 = 65
def C : i64 = 128
def L : i64 = 4

def steps [K][B][T1] (grad: params [V][C][T1 - 1][L][4 * C] -> hyper -> [B][T1]i64 -> [B]i64
                            -> (f32, params [V][C][T1 - 1][L][4 * C]))
          (seed: i64) (n_head: i64) (tokens: [K][B][T1]i64) : [2]f32 =
  let tokens = map (map (map (\t -> (t % V + V) % V))) tokens
  let p = init_params seed V C (T1 - 1) L (4 * C)
  let h = {n_head, bias = false}
  let n_pos = replicate B (T1 - 1)
  let (_, loss, norm) =
    loop (p, total, norm) = (p, 0, 0) for k < K do
      let (loss, g) = grad p h tokens[k] n_pos
      in (params_map2 (\w d -> w - 1e-3 * d) p g, total + loss, norm + params_sum (\x -> x * x) g)
  in [loss / f32.i64 K, norm]

-- | The form GPT-2 trained by on c before: `vjp2` of `gpt_seq`, one document
-- at a time (train.fut's `loss_and_grad` with `by_document`).
def vjp2_by_document [B][T1] (p: params [V][C][T1 - 1][L][4 * C]) (h: hyper) (tokens: [B][T1]i64)
                     (n_pos: [B]i64) : (f32, params [V][C][T1 - 1][L][4 * C]) =
  let total = f32.i64 (i64.sum n_pos)
  in loop (loss, grad) = (0, params_map2 (\_ _ -> 0) p p) for b < B do
       let (rows, targets) = batch_rows (T1 - 1) (tokens[b:b + 1] :> [1][T1]i64)
                                        (n_pos[b:b + 1] :> [1]i64)
       let (loss_b, grad_b) = vjp2 (\q -> mean_nll (map (gpt_seq q h) rows) targets
                                                   (n_pos[b:b + 1] :> [1]i64)) p 1
       let w = f32.i64 n_pos[b] / total
       in (loss + w * loss_b, params_map2 (\g g_b -> g + w * g_b) grad grad_b)

-- | Each form as K steps.
entry by_document [K][B][T1] (seed: i64) (n_head: i64) (tokens: [K][B][T1]i64) : [2]f32 =
  steps vjp2_by_document seed n_head tokens

entry batched_vjp2 [K][B][T1] (seed: i64) (n_head: i64) (tokens: [K][B][T1]i64) : [2]f32 =
  steps loss_grad_vjp2 seed n_head tokens

entry by_hand [K][B][T1] (seed: i64) (n_head: i64) (tokens: [K][B][T1]i64) : [2]f32 =
  steps loss_grad seed n_head tokens

-- | The forward over all positions alone (no gradient: the weights stay), for scale.
entry forward_only [K][B][T1] (seed: i64) (n_head: i64) (tokens: [K][B][T1]i64) : [2]f32 =
  steps (\p h t n -> (batch_loss p h t n, params_map2 (\_ _ -> 0) p p)) seed n_head tokens
