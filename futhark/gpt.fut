-- | Entry points of the microgpt-fut libraries (what the Python driver calls),
-- the same for every model family: `family` is the target's (family.fut, which
-- build.sh makes family_microgpt.fut or family_gpt2.fut: targets.txt), a
-- `gpt_model` (gpt_model.fut).
--
-- The state (parameters, AdamW's moments, step, n_head, bias) is an opaque value
-- that stays on the device between calls.  Parameters cross as flat float32
-- vectors: the tensors one after another in the family's order (the driver's
-- `config.shapes()`).  Results the host reads are arrays, never bare scalars:
-- futhark-ffi reads scalars without a context sync.

import "nn"
import "family"
import "train"
import "sample"

module Train = trainer family
module Sample = sampler family
type state [V][C][T][L][F][W] = Train.state [V][C][T][L][F][W]

-- | A fresh model: the family's initialisation under `seed`, moments zero, step 0.
entry init (seed: i64) (vocab_size: i64) (n_embd: i64) (n_head: i64) (n_layer: i64)
           (block_size: i64) (mlp_width: i64) (bias: bool)
           : state [vocab_size][n_embd][block_size][n_layer][mlp_width] [] =
  Train.fresh (i64.sum (family.tensor_sizes vocab_size n_embd block_size n_layer mlp_width))
              (family.init seed vocab_size n_embd block_size n_layer mlp_width)
              (family.hyper n_head bias)

-- | A state from host vectors (a checkpoint): [parameters, AdamW's m, v], each flat.
entry make_state [P] (vocab_size: i64) (n_embd: i64) (n_head: i64) (n_layer: i64)
                 (block_size: i64) (mlp_width: i64) (bias: bool) (step: i64) (flat: [3][P]f32)
                 : state [vocab_size][n_embd][block_size][n_layer][mlp_width] [P] =
  { params = family.unflat vocab_size n_embd block_size n_layer mlp_width flat[0],
    m = copy flat[1], v = copy flat[2], step, hyper = family.hyper n_head bias }

-- | A state from the parameters alone, the moments zero (sampling a checkpoint or a
-- Hugging Face folder, a --threads context: no host copy of two zero models).
entry make_state_params [P] (vocab_size: i64) (n_embd: i64) (n_head: i64) (n_layer: i64)
                        (block_size: i64) (mlp_width: i64) (bias: bool) (step: i64)
                        (flat: [P]f32)
                        : state [vocab_size][n_embd][block_size][n_layer][mlp_width] [P] =
  Train.fresh P (family.unflat vocab_size n_embd block_size n_layer mlp_width flat)
              (family.hyper n_head bias)
  with step = step

-- | The parameters, flat.
entry get_params [V][C][T][L][F][W] (s: state [V][C][T][L][F][W]) : []f32 = family.flat s.params
-- | AdamW's first moments, flat.
entry get_adam_m [V][C][T][L][F][W] (s: state [V][C][T][L][F][W]) : *[W]f32 = copy s.m
-- | AdamW's second moments, flat.
entry get_adam_v [V][C][T][L][F][W] (s: state [V][C][T][L][F][W]) : *[W]f32 = copy s.v
-- | [the number of NaN or infinite weights and moments] (0: finite), one
-- reduction on the device (train.fut's `nonfinite_count`).
entry nonfinite_count [V][C][T][L][F][W] (s: state [V][C][T][L][F][W]) : [1]f32 =
  [Train.nonfinite_count s]
-- | [step, n_head, bias (0/1)] as an array (scalars can be stale when read through
-- futhark-ffi).
entry get_counters [V][C][T][L][F][W] (s: state [V][C][T][L][F][W]) : [3]i64 =
  let h = family.counters s.hyper in [s.step, h[0], h[1]]

-- | K training steps (train.fut's `train_steps`): step k accumulates the A
-- micro-batches tokens[k] ([B][block_size+1] each, n_pos valid positions per
-- row), clips to global norm grad_clip (0: none) and takes an AdamW step at
-- learning rate lrs[k] (weight_decay 0 and grad_clip 0: microgpt's Adam).  A
-- step whose loss, norm or update is not finite is not taken and ends the call
-- (the state's step count says how many were).  The state is consumed: AdamW's
-- moments are written in place.  Returns the state, the K losses and the K
-- gradient norms (before clipping; NaN after a step not taken).
entry train [V][C][T][L][F][W][K][A][B][T1] ({params, m, v, step, hyper}: *state [V][C][T][L][F][W])
            (tokens: [K][A][B][T1]i64) (n_pos: [K][A][B]i64) (lrs: [K]f32)
            (beta1: f32) (beta2: f32) (eps: f32) (weight_decay: f32) (grad_clip: f32)
            : (state [V][C][T][L][F][W], [K]f32, [K]f32) =
  Train.train_steps {beta1, beta2, eps, weight_decay, grad_clip} {params, m, v, step, hyper}
                    tokens n_pos lrs

-- | One optimiser step on a gradient the host summed (flat, as `get_params`:
-- --threads contexts and MPI ranks), as `train`'s: the clip, then AdamW at lr,
-- taken only when the norm and the update are finite.  The state is consumed.
-- Returns the state and [the gradient norm before clipping, 1 if the step was
-- taken else 0].
entry apply_gradient [V][C][T][L][F][W] ({params, m, v, step, hyper}: *state [V][C][T][L][F][W])
                     (grad: [W]f32) (lr: f32)
                     (beta1: f32) (beta2: f32) (eps: f32) (weight_decay: f32) (grad_clip: f32)
                     : (state [V][C][T][L][F][W], [2]f32) =
  let (params, m, v, step, norm, taken) =
    Train.step {beta1, beta2, eps, weight_decay, grad_clip} lr true params m v step
               (family.unflat V C T L F grad)
  in ({params, m, v, step, hyper}, [norm, if taken then 1 else 0])

-- | A copy of the state (what `train` and `apply_gradient` consume), for a
-- caller that keeps the original.
entry copy_state [V][C][T][L][F][W] (s: state [V][C][T][L][F][W]) : *state [V][C][T][L][F][W] = copy s

-- | The mean loss of each of I batches, without gradients (evaluation).
entry losses [V][C][T][L][F][W][I][B][T1] (s: state [V][C][T][L][F][W])
             (tokens: [I][B][T1]i64) (n_pos: [I][B]i64) : [I]f32 =
  map2 (Train.compute_loss s.params s.hyper) tokens n_pos

-- | Training-path logits (whole sequence, causal mask): tokens [B][n] -> [B][n][V], n <= T.
entry logits_seq [V][C][T][L][F][W][B][n] (s: state [V][C][T][L][F][W]) (tokens: [B][n]i64)
                 : [B][n][V]f32 =
  map (family.gpt_seq s.params s.hyper) tokens

-- | Sampling-path logits (one token at a time through the KV cache): [T] -> [T][V].
entry logits_cached [V][C][T][L][F][W] (s: state [V][C][T][L][F][W]) (tokens: [T]i64) : [T][V]f32 =
  Sample.cached_logits s.params s.hyper tokens

-- | Continuations of n different prompts (row i: prompts[i, :lens[i]], the
-- rest padding; 1 <= lens[i] <= P), max_new tokens each, row i as sample
-- first+i under seed, with the KV cache (sample.fut's `continue_prompts`);
-- temperature 0 is greedy, top_k 0 keeps every token; a row ends at the token
-- `stop` and is `stop` after (-1: none).  Names: n prompts [BOS], stop BOS.
entry generate_prompts [V][C][T][L][F][W][n][P] (s: state [V][C][T][L][F][W]) (seed: i64) (first: i64)
                       (temperature: f32) (top_k: i64) (stop: i64) (prompts: [n][P]i64)
                       (lens: [n]i64) (max_new: i64) : [n][max_new]i64 =
  Sample.continue_prompts s.params s.hyper seed first temperature top_k stop prompts lens max_new

-- | Prompt continuation in paced calls (sample.fut's `start` and `advance`):
-- the continuation of n prompts (row i: prompts[i, :lens[i]], the rest
-- padding; 1 <= lens[i] <= P <= block_size), row i as sample first+i under
-- seed; temperature 0 is greedy, top_k 0 keeps every token, `stop` ends a row
-- (-1: none).  An opaque value holding the KV cache, the last block_size tokens
-- and the step count.
entry start_prompts [V][C][T][L][F][W][n][P] (s: state [V][C][T][L][F][W]) (seed: i64) (first: i64)
                    (temperature: f32) (top_k: i64) (stop: i64) (prompts: [n][P]i64)
                    (lens: [n]i64) : Sample.continuation [L][n][T][C] =
  Sample.start s.params seed first temperature top_k stop prompts lens

-- | k more steps of a continuation: the new one and [n][k] tokens, column j
-- the token at position t + j + 1 of each row (t: the steps taken before;
-- prompt tokens while that position is inside the row's prompt).
entry advance [V][C][T][L][F][W][n] (s: state [V][C][T][L][F][W]) (c: Sample.continuation [L][n][T][C])
              (k: i64) : (Sample.continuation [L][n][T][C], [n][k]i64) =
  Sample.advance s.params s.hyper c k

-- | A whole-array i64 sum, the minimal repro of pocl 3.1's reduction bug: a second
-- call with other input returns the first result unless the workaround is on.
entry sum_i64 (xs: []i64) : [1]i64 = [i64.sum xs]
