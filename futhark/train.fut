-- | Training: the loss, its gradient by `vjp2`, and Adam.

import "nn"
import "model"
import "layout"

-- | Mean next-token negative log-likelihood over the valid positions of a batch.
-- tokens: [B][T+1] rows BOS+doc+BOS padded; n_pos[b] = min(T, len(doc)+1) is the
-- number of positions of row b that count.  B = 1 is microgpt's loss exactly.
-- Only the first max(n_pos) positions are computed: later ones are padding in
-- every row, and the causal mask keeps them from affecting earlier positions.
def compute_loss [V][C][T][L][F][B][T1] (p: params [V][C][T][L][F]) (n_head: i64)
                 (tokens: [B][T1]i64) (n_pos: [B]i64) : f32 =
  let n = i64.min T (i64.maximum n_pos)
  let doc_loss (row: [T1]i64) (n_valid: i64) : f32 =
    let logits = gpt_seq p n_head row[:n]
    let targets = row[1:n + 1] :> [n]i64
    in f32.sum (map3 (\pos lg tgt -> if pos < n_valid then nll lg tgt else 0)
                     (iota n) logits targets)
  in f32.sum (map2 doc_loss tokens n_pos) / f32.i64 (i64.sum n_pos)

-- | Adam's hyper-parameters (microgpt's values in `default_adam`).
type adam_cfg = {lr: f32, beta1: f32, beta2: f32, eps: f32}
def default_adam : adam_cfg = {lr = 0.01, beta1 = 0.85, beta2 = 0.99, eps = 1e-8}

-- | Optimiser state carried between steps on the device.
type state [V][C][T][L][F] =
  { params: params [V][C][T][L][F], m: params [V][C][T][L][F], v: params [V][C][T][L][F],
    step: i64, n_head: i64 }

-- | One Adam step (Kingma & Ba 2015, as microgpt): bias-corrected moments, and the
-- learning rate decayed linearly to 0 over `num_steps`: lr_t = lr (1 - step/num_steps).
def adam [V][C][T][L][F] (cfg: adam_cfg) (num_steps: i64) (s: state [V][C][T][L][F])
         (grad: params [V][C][T][L][F]) : state [V][C][T][L][F] =
  let t = f32.i64 s.step
  let lr_t = cfg.lr * (1 - t / f32.i64 num_steps)
  let m = params_map2 (\m g -> cfg.beta1 * m + (1 - cfg.beta1) * g) s.m grad
  let v = params_map2 (\v g -> cfg.beta2 * v + (1 - cfg.beta2) * g * g) s.v grad
  let bc1 = 1 - cfg.beta1 ** (t + 1)
  let bc2 = 1 - cfg.beta2 ** (t + 1)
  let params = params_map3 (\p m v -> p - lr_t * (m / bc1) / (f32.sqrt (v / bc2) + cfg.eps))
                           s.params m v
  in {params, m, v, step = s.step + 1, n_head = s.n_head}

-- | The loss and its gradient with respect to every weight, by reverse-mode AD.
-- With `docs_one_at_a_time` (layout.fut), the documents go one after another,
-- each through code compiled for B = 1, and the batch's loss and gradient are
-- the documents' weighted by their share of the valid positions (the loss is a
-- mean over positions): the same function, computed without the map over
-- documents, its gradient accumulators, or the padding up to the longest row.
def loss_and_grad [V][C][T][L][F][B][T1] (s: state [V][C][T][L][F])
                  (tokens: [B][T1]i64) (n_pos: [B]i64) : (f32, params [V][C][T][L][F]) =
  let loss_grad [b] (tokens: [b][T1]i64) (n_pos: [b]i64) =
    vjp2 (\p -> compute_loss p s.n_head tokens n_pos) s.params 1
  in if docs_one_at_a_time
     then let total = f32.i64 (i64.sum n_pos)
          in loop (loss, grad) = (0, params_zeros s.params) for b < B do
               if n_pos[b] == 0 then (loss, grad) else
               let (loss_b, grad_b) = loss_grad (tokens[b:b + 1] :> [1][T1]i64)
                                                (n_pos[b:b + 1] :> [1]i64)
               let w = f32.i64 n_pos[b] / total
               in (loss + w * loss_b, params_map2 (\g g_b -> g + w * g_b) grad grad_b)
     else loss_grad tokens n_pos

-- | K training steps, batch k from tokens[k]; returns the new state and K losses.
def train_steps [V][C][T][L][F][K][B][T1] (cfg: adam_cfg) (num_steps: i64)
                (s: state [V][C][T][L][F]) (tokens: [K][B][T1]i64) (n_pos: [K][B]i64)
                : (state [V][C][T][L][F], [K]f32) =
  -- (copy: the loop may not consume `losses` beside the fields of a non-unique `s`)
  let losses = replicate K 0f32
  in loop (s: state [V][C][T][L][F], losses: *[K]f32) = (copy s, losses) for k < K do
    let (loss, grad) = loss_and_grad s tokens[k] n_pos[k]
    in (adam cfg num_steps s grad, losses with [k] = loss)
