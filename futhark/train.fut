-- | Training, written once for any `gpt_model`: the loss, its gradient by
-- `vjp2`, microgpt's Adam, and nanoGPT's recipe (AdamW, warm-up and cosine
-- decay, clipping by the global gradient norm, gradient accumulation).

import "nn"
import "gpt_model"

module trainer (M: gpt_model) = {
  -- | Optimiser state carried between steps on the device: the weights, Adam's
  -- moments, the number of steps taken, and the model's run-time settings.
  type state [V][C][T][L][F] =
    { params: M.params [V][C][T][L][F], m: M.params [V][C][T][L][F],
      v: M.params [V][C][T][L][F], step: i64, hyper: M.hyper }

  -- | All weights zero (Adam's initial moments).
  def params_zeros [V][C][T][L][F] (p: M.params [V][C][T][L][F]) : M.params [V][C][T][L][F] =
    M.params_map2 (\_ _ -> 0) p p

  -- | How many weights and Adam moments are NaN or infinite (0: the state is
  -- finite).  One reduction on the device, so that the driver checks every call's
  -- result without copying the model to the host.  A count, not a sum of the
  -- values: large finite weights cannot overflow it to infinity.
  def nonfinite_count [V][C][T][L][F] (s: state [V][C][T][L][F]) : f32 =
    let bad (p: M.params [V][C][T][L][F]) =
      M.params_sum_sq (M.params_map2 (\x _ -> if f32.isnan x || f32.isinf x then 1 else 0) p p)
    in bad s.params + bad s.m + bad s.v

  -- | A state at step 0 with these weights and zero moments.
  def fresh [V][C][T][L][F] (p: M.params [V][C][T][L][F]) (hyper: M.hyper) : state [V][C][T][L][F] =
    {params = p, m = params_zeros p, v = params_zeros p, step = 0, hyper}

  -- | Mean next-token negative log-likelihood over the valid positions of a batch
  -- (nn.fut's `mean_nll`) by the model's training forward (`M.loss`).  tokens:
  -- [B][T+1]; n_pos[b] <= T is the number of positions of row b that count
  -- (microgpt: min(T, len(doc)+1); a text window: T).  B = 1 with a names row
  -- is microgpt's loss.
  def compute_loss [V][C][T][L][F][B][T1] (p: M.params [V][C][T][L][F]) (hyper: M.hyper)
                   (tokens: [B][T1]i64) (n_pos: [B]i64) : f32 =
    M.loss p hyper tokens n_pos

  -- | The loss and its gradient with respect to every weight (the model's
  -- `loss_grad`), the whole batch at once.
  def loss_and_grad [V][C][T][L][F][B][T1] (s: state [V][C][T][L][F])
                    (tokens: [B][T1]i64) (n_pos: [B]i64) : (f32, M.params [V][C][T][L][F]) =
    M.loss_grad s.params s.hyper tokens n_pos

  -- | microgpt's Adam settings (its values: lr 0.01, betas 0.85 and 0.99, eps 1e-8).
  type adam_cfg = {lr: f32, beta1: f32, beta2: f32, eps: f32}

  -- | One Adam step (Kingma & Ba 2015, as microgpt): bias-corrected moments, and the
  -- learning rate decayed linearly to 0 over `num_steps`: lr_t = lr (1 - step/num_steps).
  def adam [V][C][T][L][F] (cfg: adam_cfg) (num_steps: i64) (s: state [V][C][T][L][F])
           (grad: M.params [V][C][T][L][F]) : state [V][C][T][L][F] =
    let t = f32.i64 s.step
    let lr_t = cfg.lr * (1 - t / f32.i64 num_steps)
    let m = M.params_map2 (\m g -> cfg.beta1 * m + (1 - cfg.beta1) * g) s.m grad
    let v = M.params_map2 (\v g -> cfg.beta2 * v + (1 - cfg.beta2) * g * g) s.v grad
    let bc1 = 1 - cfg.beta1 ** (t + 1)
    let bc2 = 1 - cfg.beta2 ** (t + 1)
    let params = M.params_map3 (\p m v -> p - lr_t * (m / bc1) / (f32.sqrt (v / bc2) + cfg.eps))
                               s.params m v
    in s with params = params with m = m with v = v with step = s.step + 1

  -- | K microgpt training steps (Adam), batch k from tokens[k]; the new state
  -- and the K losses.
  def train_steps [V][C][T][L][F][K][B][T1] (cfg: adam_cfg) (num_steps: i64)
                  (s: state [V][C][T][L][F]) (tokens: [K][B][T1]i64) (n_pos: [K][B]i64)
                  : (state [V][C][T][L][F], [K]f32) =
    -- (copy: the loop may not consume `losses` beside the fields of a non-unique `s`)
    let losses = replicate K 0f32
    in loop (s: state [V][C][T][L][F], losses: *[K]f32) = (copy s, losses) for k < K do
      let (loss, grad) = loss_and_grad s tokens[k] n_pos[k]
      in (adam cfg num_steps s grad, losses with [k] = loss)

  -- | nanoGPT's training recipe (its train.py names): AdamW's settings, the
  -- learning-rate schedule, and the gradient-norm clip (0: none).
  type recipe = { lr: f64, min_lr: f64, warmup_steps: i64, lr_decay_steps: i64,
                  beta1: f32, beta2: f32, eps: f32, weight_decay: f32, grad_clip: f32 }

  -- | nanoGPT's `get_lr(it)`: linear warm-up over `warmup_steps`, then cosine
  -- decay to `min_lr` at `lr_decay_steps`, `min_lr` after (in f64, as Python).
  def get_lr (r: recipe) (it: i64) : f64 =
    if it < r.warmup_steps then r.lr * f64.i64 (it + 1) / f64.i64 (r.warmup_steps + 1)
    else if it > r.lr_decay_steps then r.min_lr
    else let decay_ratio = f64.i64 (it - r.warmup_steps) / f64.i64 (r.lr_decay_steps - r.warmup_steps)
         let coeff = 0.5 * (1 + f64.cos (f64.pi * decay_ratio))
         in r.min_lr + coeff * (r.lr - r.min_lr)

  -- | One AdamW step (Loshchilov & Hutter 2019, as torch.optim.AdamW) at
  -- learning rate lr on the gradient scaled by `clip_coef`: decayed tensors
  -- shrink by (1 - lr wd) first, then the bias-corrected Adam update.
  def adamw [V][C][T][L][F] (r: recipe) (lr: f32) (clip_coef: f32) (s: state [V][C][T][L][F])
            (grad: M.params [V][C][T][L][F]) : state [V][C][T][L][F] =
    let t = f32.i64 (s.step + 1)
    let m = M.params_map2 (\m g -> r.beta1 * m + (1 - r.beta1) * (clip_coef * g)) s.m grad
    let v = M.params_map2 (\v g -> let g = clip_coef * g in r.beta2 * v + (1 - r.beta2) * g * g)
                          s.v grad
    let step_size = lr / (1 - r.beta1 ** t)
    let bc2_sqrt = f32.sqrt (1 - r.beta2 ** t)
    let update (decay: bool) (p: f32) (m: f32) (v: f32) =
      let p = if decay then p * (1 - lr * r.weight_decay) else p
      in p - step_size * m / (f32.sqrt v / bc2_sqrt + r.eps)
    let params = M.params_map3_decay update s.params m v
    in s with params = params with m = m with v = v with step = s.step + 1

  -- | The loss and gradient of A micro-batches together (gradient accumulation):
  -- each micro-batch weighted by its share of the valid positions, so the result
  -- is the loss and gradient of the one batch that holds them all.
  def accumulated [V][C][T][L][F][A][B][T1] (s: state [V][C][T][L][F])
                  (tokens: [A][B][T1]i64) (n_pos: [A][B]i64) : (f32, M.params [V][C][T][L][F]) =
    let total = f32.i64 (i64.sum (flatten n_pos))
    in loop (loss, grad) = (0, params_zeros s.params) for a < A do
         let (loss_a, grad_a) = loss_and_grad s tokens[a] n_pos[a]
         let w = f32.i64 (i64.sum n_pos[a]) / total
         in (loss + w * loss_a, M.params_map2 (\g g_a -> g + w * g_a) grad grad_a)

  -- | K steps of nanoGPT's recipe: step k accumulates the A micro-batches
  -- tokens[k], clips the gradient to global norm `grad_clip` (torch's
  -- clip_grad_norm_: coefficient grad_clip / (norm + 1e-6), at most 1), and takes
  -- an AdamW step at get_lr(step).  Returns the state, each step's loss and
  -- each step's gradient norm before clipping.
  def recipe_steps [V][C][T][L][F][K][A][B][T1] (r: recipe) (s: state [V][C][T][L][F])
                   (tokens: [K][A][B][T1]i64) (n_pos: [K][A][B]i64)
                   : (state [V][C][T][L][F], [K]f32, [K]f32) =
    let out = replicate K 0f32
    in loop (s: state [V][C][T][L][F], losses: *[K]f32, norms: *[K]f32) = (copy s, out, copy out)
       for k < K do
         let (loss, grad) = accumulated s tokens[k] n_pos[k]
         let norm = f32.sqrt (M.params_sum_sq grad)
         let clip_coef = if r.grad_clip > 0 then f32.min 1 (r.grad_clip / (norm + 1e-6)) else 1
         let lr = f32.f64 (get_lr r s.step)
         in (adamw r lr clip_coef s grad, losses with [k] = loss, norms with [k] = norm)
}
