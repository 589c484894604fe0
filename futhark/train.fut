-- | Training, written once for any `gpt_model`: the loss, its gradient (the
-- model's `loss_grad`), gradient accumulation, clipping by the global gradient
-- norm and AdamW, the one optimiser (microgpt's Adam is AdamW without decay or
-- clipping; the learning-rate schedules are the host's).

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

  -- | AdamW's settings (torch.optim.AdamW's names) and the gradient-norm clip
  -- (0: none).  microgpt's Adam is weight_decay 0 and grad_clip 0.  The learning
  -- rate is not here: the host gives each step's, from its schedule (microgpt's
  -- linear decay or nanoGPT's get_lr: the driver's training/optimizer.py).
  type adamw_cfg = {beta1: f32, beta2: f32, eps: f32, weight_decay: f32, grad_clip: f32}

  -- | One AdamW step (Loshchilov & Hutter 2019, as torch.optim.AdamW) at
  -- learning rate lr on the gradient scaled by `clip_coef`: decayed tensors
  -- (the model's `params_map3_decay`) shrink by (1 - lr wd) first, then the
  -- bias-corrected Adam update (Kingma & Ba 2015).
  def adamw [V][C][T][L][F] (cfg: adamw_cfg) (lr: f32) (clip_coef: f32) (s: state [V][C][T][L][F])
            (grad: M.params [V][C][T][L][F]) : state [V][C][T][L][F] =
    let t = f32.i64 (s.step + 1)
    let m = M.params_map2 (\m g -> cfg.beta1 * m + (1 - cfg.beta1) * (clip_coef * g)) s.m grad
    let v = M.params_map2 (\v g -> let g = clip_coef * g in cfg.beta2 * v + (1 - cfg.beta2) * g * g)
                          s.v grad
    let step_size = lr / (1 - cfg.beta1 ** t)
    let bc2_sqrt = f32.sqrt (1 - cfg.beta2 ** t)
    let update (decay: bool) (p: f32) (m: f32) (v: f32) =
      let p = if decay then p * (1 - lr * cfg.weight_decay) else p
      in p - step_size * m / (f32.sqrt v / bc2_sqrt + cfg.eps)
    let params = M.params_map3_decay update s.params m v
    in s with params = params with m = m with v = v with step = s.step + 1

  -- | One optimiser step on a batch's gradient: its global norm, the clip
  -- (torch's clip_grad_norm_: coefficient grad_clip / (norm + 1e-6), at most 1),
  -- and AdamW at lr.  Returns the state and the norm before clipping.
  def step [V][C][T][L][F] (cfg: adamw_cfg) (lr: f32) (s: state [V][C][T][L][F])
           (grad: M.params [V][C][T][L][F]) : (state [V][C][T][L][F], f32) =
    let norm = f32.sqrt (M.params_sum_sq grad)
    let clip_coef = if cfg.grad_clip > 0 then f32.min 1 (cfg.grad_clip / (norm + 1e-6)) else 1
    in (adamw cfg lr clip_coef s grad, norm)

  -- | (loss, grad) after micro-batch a of A, of weight w, adds its loss_a and
  -- grad_a: w loss_a + loss and w grad_a + grad (the first: w loss_a and w grad_a,
  -- the sum's start ignored; one alone has weight 1: grad_a as it is).  No
  -- zeros to start from and no pass over the weights for one micro-batch: the
  -- zeroed gradient and its sum were two more passes over every weight and one
  -- more gradient held a step (GPT-2 124M on c: peak RSS 7.30 -> 6.75 GB).  The
  -- same values: 0 + w x is w x, and 1 x is x.
  def add_micro_batch [V][C][T][L][F] (A: i64) (a: i64) (w: f32)
                      ((loss, grad): (f32, M.params [V][C][T][L][F]))
                      ((loss_a, grad_a): (f32, M.params [V][C][T][L][F]))
                      : (f32, M.params [V][C][T][L][F]) =
    if a == 0 then (w * loss_a, if A == 1 then grad_a else M.params_map2 (\g _ -> w * g) grad_a grad_a)
    else (loss + w * loss_a, M.params_map2 (\g g_a -> g + w * g_a) grad grad_a)

  -- | The loss and gradient of A micro-batches together (gradient accumulation):
  -- each micro-batch weighted by its share of the valid positions, so the result
  -- is the loss and gradient of the one batch that holds them all.
  def accumulated [V][C][T][L][F][A][B][T1] (s: state [V][C][T][L][F])
                  (tokens: [A][B][T1]i64) (n_pos: [A][B]i64) : (f32, M.params [V][C][T][L][F]) =
    -- (one call site: each would inline the whole backward pass; the loop starts from
    -- s.params, which add_micro_batch ignores at a = 0)
    let total = f32.i64 (i64.sum (flatten n_pos))
    in loop acc = (0, s.params) for a < A do
         add_micro_batch A a (f32.i64 (i64.sum n_pos[a]) / total) acc
                         (loss_and_grad s tokens[a] n_pos[a])

  -- | K training steps: step k accumulates the A micro-batches tokens[k]
  -- ([B][T+1] each, n_pos valid positions per row) and takes `step` at lrs[k].
  -- Returns the state, each step's loss (before its update) and each step's
  -- gradient norm (before clipping).
  def train_steps [V][C][T][L][F][K][A][B][T1] (cfg: adamw_cfg) (s: state [V][C][T][L][F])
                  (tokens: [K][A][B][T1]i64) (n_pos: [K][A][B]i64) (lrs: [K]f32)
                  : (state [V][C][T][L][F], [K]f32, [K]f32) =
    -- (copy: the loop may not consume the outputs beside the fields of a non-unique `s`)
    let out = replicate K 0f32
    in loop (s: state [V][C][T][L][F], losses: *[K]f32, norms: *[K]f32) = (copy s, out, copy out)
       for k < K do
         let (loss, grad) = accumulated s tokens[k] n_pos[k]
         let (s, norm) = step cfg lrs[k] s grad
         in (s, losses with [k] = loss, norms with [k] = norm)
}
