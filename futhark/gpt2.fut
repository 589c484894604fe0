-- | Entry points of the GPT-2 library (what the Python driver calls for
-- `--arch gpt2`), beside microgpt.fut's.
--
-- The state (parameters, AdamW's moments, step, n_head, bias) stays on the
-- device between calls.  Results the host reads are arrays, never bare
-- scalars: futhark-ffi reads scalars without a context sync.  Tensors cross
-- in this order (HF names, layouts converted by the driver): wte, wpe, ln_1_w,
-- ln_1_b, c_attn_w, c_attn_b, attn_proj_w, attn_proj_b, ln_2_w, ln_2_b,
-- c_fc_w, c_fc_b, mlp_proj_w, mlp_proj_b, ln_f_w, ln_f_b.

import "gpt2_model"
import "gpt2_grad"
import "train"
import "sample"

module Train = trainer gpt2_model
module Sample = sampler gpt2_model
type state [V][C][T][L][F] = Train.state [V][C][T][L][F]

-- | A fresh model: GPT-2's initialisation under `seed`, moments zero, step 0.
entry init (seed: i64) (vocab_size: i64) (n_embd: i64) (n_head: i64) (n_layer: i64)
           (block_size: i64) (mlp_width: i64) (bias: bool)
           : state [vocab_size][n_embd][block_size][n_layer][mlp_width] =
  Train.fresh (init_params seed vocab_size n_embd block_size n_layer mlp_width) {n_head, bias}

-- | A state from host arrays (a checkpoint): each tensor stacked as
-- [parameters, Adam's m, Adam's v].
entry make_state [V][C][T][L][F] (n_head: i64) (bias: bool) (step: i64)
    (wte: [3][V][C]f32) (wpe: [3][T][C]f32) (ln_1_w: [3][L][C]f32) (ln_1_b: [3][L][C]f32)
    (c_attn_w: [3][L][3][C][C]f32) (c_attn_b: [3][L][3][C]f32)
    (attn_proj_w: [3][L][C][C]f32) (attn_proj_b: [3][L][C]f32)
    (ln_2_w: [3][L][C]f32) (ln_2_b: [3][L][C]f32) (c_fc_w: [3][L][F][C]f32) (c_fc_b: [3][L][F]f32)
    (mlp_proj_w: [3][L][C][F]f32) (mlp_proj_b: [3][L][C]f32) (ln_f_w: [3][C]f32) (ln_f_b: [3][C]f32)
    : state [V][C][T][L][F] =
  let p (i: i64) : params [V][C][T][L][F] =
    { wte = wte[i], wpe = wpe[i], ln_1_w = ln_1_w[i], ln_1_b = ln_1_b[i],
      c_attn_w = c_attn_w[i], c_attn_b = c_attn_b[i],
      attn_proj_w = attn_proj_w[i], attn_proj_b = attn_proj_b[i],
      ln_2_w = ln_2_w[i], ln_2_b = ln_2_b[i], c_fc_w = c_fc_w[i], c_fc_b = c_fc_b[i],
      mlp_proj_w = mlp_proj_w[i], mlp_proj_b = mlp_proj_b[i], ln_f_w = ln_f_w[i], ln_f_b = ln_f_b[i] }
  in {params = p 0, m = p 1, v = p 2, step, hyper = {n_head, bias}}

-- | A state from the parameters alone, AdamW's moments zero (sampling a
-- checkpoint or a Hugging Face folder: no host copy of two zero models).
entry make_state_params [V][C][T][L][F] (n_head: i64) (bias: bool) (step: i64)
    (wte: [V][C]f32) (wpe: [T][C]f32) (ln_1_w: [L][C]f32) (ln_1_b: [L][C]f32)
    (c_attn_w: [L][3][C][C]f32) (c_attn_b: [L][3][C]f32)
    (attn_proj_w: [L][C][C]f32) (attn_proj_b: [L][C]f32)
    (ln_2_w: [L][C]f32) (ln_2_b: [L][C]f32) (c_fc_w: [L][F][C]f32) (c_fc_b: [L][F]f32)
    (mlp_proj_w: [L][C][F]f32) (mlp_proj_b: [L][C]f32) (ln_f_w: [C]f32) (ln_f_b: [C]f32)
    : state [V][C][T][L][F] =
  let p : params [V][C][T][L][F] =
    { wte, wpe, ln_1_w, ln_1_b, c_attn_w, c_attn_b, attn_proj_w, attn_proj_b,
      ln_2_w, ln_2_b, c_fc_w, c_fc_b, mlp_proj_w, mlp_proj_b, ln_f_w, ln_f_b }
  let zero = params_map2 (\_ _ -> 0) p p
  in {params = p, m = zero, v = copy zero, step, hyper = {n_head, bias}}

def unpack [V][C][T][L][F] (p: params [V][C][T][L][F]) =
  (p.wte, p.wpe, p.ln_1_w, p.ln_1_b, p.c_attn_w, p.c_attn_b, p.attn_proj_w, p.attn_proj_b,
   p.ln_2_w, p.ln_2_b, p.c_fc_w, p.c_fc_b, p.mlp_proj_w, p.mlp_proj_b, p.ln_f_w, p.ln_f_b)

-- | The parameters, in the order above.
entry get_params [V][C][T][L][F] (s: state [V][C][T][L][F]) = unpack s.params
-- | AdamW's first moments.
entry get_adam_m [V][C][T][L][F] (s: state [V][C][T][L][F]) = unpack s.m
-- | AdamW's second moments.
entry get_adam_v [V][C][T][L][F] (s: state [V][C][T][L][F]) = unpack s.v
-- | [the number of NaN or infinite weights and Adam moments] (0: finite), one
-- reduction on the device (train.fut's `nonfinite_count`).
entry nonfinite_count [V][C][T][L][F] (s: state [V][C][T][L][F]) : [1]f32 =
  [Train.nonfinite_count s]
-- | [step, n_head, bias (0/1)] as an array.
entry get_counters [V][C][T][L][F] (s: state [V][C][T][L][F]) : [3]i64 =
  [s.step, s.hyper.n_head, i64.bool s.hyper.bias]

-- | K steps of nanoGPT's recipe (train.fut's `recipe_steps`): step k
-- accumulates the A micro-batches tokens[k] ([B][block_size+1] each, n_pos
-- valid positions per row), clips to global norm grad_clip (0: none) and takes
-- an AdamW step at get_lr(step).  Returns the state, the K losses and the K
-- gradient norms (before clipping).
entry train [V][C][T][L][F][K][A][B][T1] (s: state [V][C][T][L][F])
            (tokens: [K][A][B][T1]i64) (n_pos: [K][A][B]i64)
            (lr: f64) (min_lr: f64) (warmup_steps: i64) (lr_decay_steps: i64)
            (beta1: f32) (beta2: f32) (eps: f32) (weight_decay: f32) (grad_clip: f32)
            : (state [V][C][T][L][F], [K]f32, [K]f32) =
  Train.recipe_steps {lr, min_lr, warmup_steps, lr_decay_steps, beta1, beta2, eps, weight_decay,
                      grad_clip} s tokens n_pos

-- | The learning rate get_lr(it) for each it in `its` (to test the schedule).
entry learning_rates [n] (lr: f64) (min_lr: f64) (warmup_steps: i64) (lr_decay_steps: i64)
                     (its: [n]i64) : [n]f64 =
  let r = {lr, min_lr, warmup_steps, lr_decay_steps, beta1 = 0, beta2 = 0, eps = 0,
           weight_decay = 0, grad_clip = 0}
  in map (Train.get_lr r) its

-- | The mean loss of each of I batches, without gradients (evaluation).
entry losses [V][C][T][L][F][I][B][T1] (s: state [V][C][T][L][F])
             (tokens: [I][B][T1]i64) (n_pos: [I][B]i64) : [I]f32 =
  map2 (Train.compute_loss s.params s.hyper) tokens n_pos

-- | Training-path logits (whole sequence, causal mask): tokens [B][n] -> [B][n][V].
entry logits_seq [V][C][T][L][F][B][n] (s: state [V][C][T][L][F]) (tokens: [B][n]i64) : [B][n][V]f32 =
  map (gpt_seq s.params s.hyper) tokens

-- | Sampling-path logits (one token at a time through the KV cache): [T] -> [T][V].
entry logits_cached [V][C][T][L][F] (s: state [V][C][T][L][F]) (tokens: [T]i64) : [T][V]f32 =
  Sample.cached_logits s.params s.hyper tokens

-- | n continuations (samples first .. first+n-1 under seed) of `prompt`,
-- max_new tokens each; temperature 0 is greedy, top_k 0 keeps every token.
entry generate [V][C][T][L][F][P] (s: state [V][C][T][L][F]) (seed: i64) (first: i64) (n: i64)
               (temperature: f32) (top_k: i64) (prompt: [P]i64) (max_new: i64) : [n][max_new]i64 =
  let P0 = i64.min P T  -- nanoGPT's model sees the prompt's last block_size tokens
  in Sample.continue_prompts s.params s.hyper seed first temperature top_k
                             (replicate n (prompt[P - P0:] :> [P0]i64)) (replicate n P0) max_new

-- | Continuations of n different prompts (row i: prompts[i, :lens[i]], the
-- rest padding; 1 <= lens[i] <= P), max_new tokens each, row i as sample
-- first+i under seed; temperature 0 is greedy, top_k 0 keeps every token.
entry generate_prompts [V][C][T][L][F][n][P] (s: state [V][C][T][L][F]) (seed: i64) (first: i64)
                       (temperature: f32) (top_k: i64) (prompts: [n][P]i64) (lens: [n]i64)
                       (max_new: i64) : [n][max_new]i64 =
  Sample.continue_prompts s.params s.hyper seed first temperature top_k prompts lens max_new

-- | Prompt continuation in paced calls (sample.fut's `start` and `advance`):
-- the continuation of n prompts (row i: prompts[i, :lens[i]], the rest
-- padding; 1 <= lens[i] <= P <= block_size), row i as sample first+i under
-- seed; temperature 0 is greedy, top_k 0 keeps every token.  An opaque value
-- holding the KV cache, the last block_size tokens and the step count.
entry start_prompts [V][C][T][L][F][n][P] (s: state [V][C][T][L][F]) (seed: i64) (first: i64)
                    (temperature: f32) (top_k: i64) (prompts: [n][P]i64) (lens: [n]i64)
                    : Sample.continuation [L][n][T][C] =
  Sample.start s.params seed first temperature top_k prompts lens

-- | k more steps of a continuation: the new one and [n][k] tokens, column j
-- the token at position t + j + 1 of each row (t: the steps taken before;
-- prompt tokens while that position is inside the row's prompt).
entry advance [V][C][T][L][F][n] (s: state [V][C][T][L][F]) (c: Sample.continuation [L][n][T][C])
              (k: i64) : (Sample.continuation [L][n][T][C], [n][k]i64) =
  Sample.advance s.params s.hyper c k
