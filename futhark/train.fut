-- | Training, written once for any `gpt_model`: the loss, its gradient (the
-- model's `loss_grad`), gradient accumulation, clipping by the global gradient
-- norm and AdamW, the one optimiser (microgpt's Adam is AdamW without decay or
-- clipping; the learning-rate schedules are the host's).

import "nn"
import "gpt_model"
import "tensor"

module trainer (M: gpt_model) = {
  -- | Optimiser state carried between steps on the device: the weights, Adam's
  -- moments (flat in the model's `flat` order: P numbers each, written in place
  -- by each step), the number of steps taken, and the model's run-time settings.
  type state [V][C][T][L][F][P] =
    { params: M.params [V][C][T][L][F], m: [P]f32, v: [P]f32, step: i64, hyper: M.hyper }

  -- | 1 for a NaN or an infinity, else 0: summed, a count of the values that are
  -- not finite (a count, not a sum of the values: large finite weights cannot
  -- overflow it to infinity).  Read off the bits by integer arithmetic alone: 1
  -- where the exponent's 8 bits are all ones (IEEE 754's binary32), as e + 1
  -- carries into bit 8 only from 255.  Written with f32.isnan and f32.isinf, or
  -- as a choice between 0 and 1, clang-22 vectorised neither the count over the
  -- weights nor AdamW's update that the check is fused into (bench/README.md).
  #[inline]
  def nonfinite (x: f32) : f32 = f32.u32 ((((f32.to_bits x >> 23) & 0xff) + 1) >> 8)

  -- | Neither NaN nor infinite.
  #[inline]
  def finite (x: f32) : bool = nonfinite x == 0

  -- | How many weights and Adam moments are NaN or infinite (0: the state is
  -- finite; `step` never makes one that is not).  One reduction on the device: no
  -- copy of the model to the host.
  def nonfinite_count [V][C][T][L][F][P] (s: state [V][C][T][L][F][P]) : f32 =
    M.params_sum nonfinite s.params + sum_1d nonfinite s.m + sum_1d nonfinite s.v

  -- | A state at step 0 with these weights (P of them) and zero moments.
  def fresh [V][C][T][L][F] (P: i64) (p: M.params [V][C][T][L][F]) (hyper: M.hyper)
            : state [V][C][T][L][F][P] =
    {params = p, m = replicate P 0, v = replicate P 0, step = 0, hyper}

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
  def loss_and_grad [V][C][T][L][F][B][T1] (params: M.params [V][C][T][L][F]) (hyper: M.hyper)
                    (tokens: [B][T1]i64) (n_pos: [B]i64) : (f32, M.params [V][C][T][L][F]) =
    M.loss_grad params hyper tokens n_pos

  -- | AdamW's settings (torch.optim.AdamW's names) and the gradient-norm clip
  -- (0: none).  microgpt's Adam is weight_decay 0 and grad_clip 0.  The learning
  -- rate is not here: the host gives each step's, from its schedule (microgpt's
  -- linear decay or nanoGPT's get_lr: the driver's training/optimizer.py).
  type adamw_cfg = {beta1: f32, beta2: f32, eps: f32, weight_decay: f32, grad_clip: f32}

  -- | A weight's AdamW moments (Kingma & Ba 2015; torch.optim.AdamW's) on its
  -- gradient g scaled by `clip_coef`: the new (m, v).
  #[inline]
  def adam_moments (cfg: adamw_cfg) (clip_coef: f32) (m: f32) (v: f32) (g: f32) : (f32, f32) =
    let g = clip_coef * g
    in (cfg.beta1 * m + (1 - cfg.beta1) * g, cfg.beta2 * v + (1 - cfg.beta2) * g * g)

  -- | A weight's AdamW update (Loshchilov & Hutter 2019, as torch.optim.AdamW) at
  -- learning rate lr from its moments m, v and gradient g (`adam_moments`): a
  -- decayed weight (`decay`: the model's rule) shrinks by (1 - lr wd) first, then
  -- the bias-corrected Adam update with the step's step_size = lr / (1 - beta1^t)
  -- and bc2_sqrt = sqrt (1 - beta2^t).  (Inlined: a function call per weight
  -- would not vectorise.)
  #[inline]
  def adamw_weight (cfg: adamw_cfg) (lr: f32) (clip_coef: f32) (step_size: f32) (bc2_sqrt: f32)
                   (decay: bool) (p: f32) (m: f32) (v: f32) (g: f32) : f32 =
    let (m, v) = adam_moments cfg clip_coef m v g
    let p = if decay then p * (1 - lr * cfg.weight_decay) else p
    in p - step_size * m / (f32.sqrt v / bc2_sqrt + cfg.eps)

  -- | One AdamW step at learning rate lr on the gradient scaled by `clip_coef`,
  -- taken when `take` and every new weight is finite: the new weights in new
  -- arrays and the moments written over the old ones (the model's
  -- `params_moments`); otherwise the state is left as it was.  The moments need
  -- no check: with a finite gradient norm every g^2 is finite, and m, v move
  -- between their old values and g, g^2.  So no step is ever taken back, and
  -- nothing need hold the state before it.  The state comes in pieces (params, m,
  -- v, t: the steps taken) because m and v are consumed while the gradient may
  -- alias params.  Returns the pieces and whether the step was taken.
  def adamw [V][C][T][L][F][P] (cfg: adamw_cfg) (lr: f32) (clip_coef: f32) (take: bool)
            (params: M.params [V][C][T][L][F]) (m: *[P]f32) (v: *[P]f32) (t: i64)
            (grad: M.params [V][C][T][L][F])
            : (M.params [V][C][T][L][F], *[P]f32, *[P]f32, i64, bool) =
    let step_size = lr / (1 - cfg.beta1 ** f32.i64 (t + 1))
    let bc2_sqrt = f32.sqrt (1 - cfg.beta2 ** f32.i64 (t + 1))
    let new = M.params_map4_decay (adamw_weight cfg lr clip_coef step_size bc2_sqrt) params m v grad
    let broken = M.params_sum nonfinite new
    let ok = take && broken == 0
    -- (every moment goes through the update, kept as it was when not ok: a branch
    -- between the moments in place and the moments as they came left their layout
    -- unknown to the compiler, index arithmetic per element and copies of whole
    -- tensors on multicore; the weights' copy is made only when a run diverges)
    let (m, v) = M.params_moments (\m v g -> if ok then adam_moments cfg clip_coef m v g else (m, v))
                                  m v grad
    in (if ok then new else copy params, m, v, if ok then t + 1 else t, ok)

  -- | One optimiser step on a batch's gradient: its global norm, the clip (torch's
  -- clip_grad_norm_: coefficient grad_clip / (norm + 1e-6), at most 1) and `adamw`
  -- at lr, taken when `take` (the batch's loss is finite), the norm is finite and
  -- so is every new weight.  Returns the state's pieces, the norm before clipping,
  -- and whether the step was taken.
  def step [V][C][T][L][F][P] (cfg: adamw_cfg) (lr: f32) (take: bool)
           (params: M.params [V][C][T][L][F]) (m: *[P]f32) (v: *[P]f32) (t: i64)
           (grad: M.params [V][C][T][L][F])
           : (M.params [V][C][T][L][F], *[P]f32, *[P]f32, i64, f32, bool) =
    let norm = f32.sqrt (M.params_sum (\x -> x * x) grad)
    let clip_coef = if cfg.grad_clip > 0 then f32.min 1 (cfg.grad_clip / (norm + 1e-6)) else 1
    let (params, m, v, t, ok) = adamw cfg lr clip_coef (take && finite norm) params m v t grad
    in (params, m, v, t, norm, ok)

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
  def accumulated [V][C][T][L][F][A][B][T1] (params: M.params [V][C][T][L][F]) (hyper: M.hyper)
                  (tokens: [A][B][T1]i64) (n_pos: [A][B]i64) : (f32, M.params [V][C][T][L][F]) =
    -- (one call site: each would inline the whole backward pass; the loop starts from
    -- params, which add_micro_batch ignores at a = 0)
    let total = f32.i64 (i64.sum (flatten n_pos))
    in loop acc = (0, params) for a < A do
         add_micro_batch A a (f32.i64 (i64.sum n_pos[a]) / total) acc
                         (loss_and_grad params hyper tokens[a] n_pos[a])

  -- | K training steps: step k accumulates the A micro-batches tokens[k]
  -- ([B][T+1] each, n_pos valid positions per row) and takes `step` at lrs[k].
  -- The first step that is not taken (a loss, norm or update not finite) ends
  -- the call: the state is the one before it, its loss and norm are recorded,
  -- and the later steps' are NaN.  Returns the state (consumed: its moments are
  -- written in place), each step's loss (before its update) and each step's
  -- gradient norm (before clipping).
  def train_steps [V][C][T][L][F][P][K][A][B][T1] (cfg: adamw_cfg)
                  ({params, m, v, step = t, hyper}: *state [V][C][T][L][F][P])
                  (tokens: [K][A][B][T1]i64) (n_pos: [K][A][B]i64) (lrs: [K]f32)
                  : (state [V][C][T][L][F][P], [K]f32, [K]f32) =
    let (params, m, v, t, losses, norms, _, _) =
      loop (params, m: *[P]f32, v: *[P]f32, t,
            losses: *[K]f32, norms: *[K]f32, k, going) =
           (params, m, v, t, replicate K f32.nan, replicate K f32.nan, 0, true)
      while going && k < K do
        let (loss, grad) = accumulated params hyper tokens[k] n_pos[k]
        let (params, m, v, t, norm, taken) = step cfg lrs[k] (finite loss) params m v t grad
        in (params, m, v, t, losses with [k] = loss, norms with [k] = norm, k + 1, taken)
    in ({params, m, v, step = t, hyper}, losses, norms)
}
