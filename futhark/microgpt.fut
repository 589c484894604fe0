-- | Entry points of the microgpt-fut library (what the Python driver calls).
--
-- The training state (parameters, Adam moments, step, n_head) is an opaque value
-- that stays on the device between calls.  Results the host reads are arrays,
-- never bare scalars: futhark-ffi reads scalars without a context sync.

import "nn"
import "model"
import "model_grad"
import "train"
import "sample"

module Train = trainer microgpt_model
module Sample = sampler microgpt_model
type state [V][C][T][L][F] = Train.state [V][C][T][L][F]

-- | A fresh model: microgpt's initialisation, Adam moments zero, step 0.
entry init (seed: i64) (vocab_size: i64) (n_embd: i64) (n_head: i64) (n_layer: i64)
           (block_size: i64) (mlp_width: i64) : state [vocab_size][n_embd][block_size][n_layer][mlp_width] =
  Train.fresh (mk_params seed vocab_size n_embd block_size n_layer mlp_width) n_head

-- | A state from host arrays (a checkpoint): parameters, then Adam's m and v.
entry make_state [V][C][T][L][F] (n_head: i64) (step: i64)
    (wte: [V][C]f32) (wpe: [T][C]f32) (lm_head: [V][C]f32)
    (attn_wq: [L][C][C]f32) (attn_wk: [L][C][C]f32) (attn_wv: [L][C][C]f32)
    (attn_wo: [L][C][C]f32) (mlp_fc1: [L][F][C]f32) (mlp_fc2: [L][C][F]f32)
    (m_wte: [V][C]f32) (m_wpe: [T][C]f32) (m_lm_head: [V][C]f32)
    (m_attn_wq: [L][C][C]f32) (m_attn_wk: [L][C][C]f32) (m_attn_wv: [L][C][C]f32)
    (m_attn_wo: [L][C][C]f32) (m_mlp_fc1: [L][F][C]f32) (m_mlp_fc2: [L][C][F]f32)
    (v_wte: [V][C]f32) (v_wpe: [T][C]f32) (v_lm_head: [V][C]f32)
    (v_attn_wq: [L][C][C]f32) (v_attn_wk: [L][C][C]f32) (v_attn_wv: [L][C][C]f32)
    (v_attn_wo: [L][C][C]f32) (v_mlp_fc1: [L][F][C]f32) (v_mlp_fc2: [L][C][F]f32)
    : state [V][C][T][L][F] =
  { params = {wte, wpe, lm_head, attn_wq, attn_wk, attn_wv, attn_wo, mlp_fc1, mlp_fc2},
    m = {wte = m_wte, wpe = m_wpe, lm_head = m_lm_head, attn_wq = m_attn_wq,
         attn_wk = m_attn_wk, attn_wv = m_attn_wv, attn_wo = m_attn_wo,
         mlp_fc1 = m_mlp_fc1, mlp_fc2 = m_mlp_fc2},
    v = {wte = v_wte, wpe = v_wpe, lm_head = v_lm_head, attn_wq = v_attn_wq,
         attn_wk = v_attn_wk, attn_wv = v_attn_wv, attn_wo = v_attn_wo,
         mlp_fc1 = v_mlp_fc1, mlp_fc2 = v_mlp_fc2},
    step, hyper = n_head }

def unpack [V][C][T][L][F] (p: params [V][C][T][L][F]) =
  (p.wte, p.wpe, p.lm_head, p.attn_wq, p.attn_wk, p.attn_wv, p.attn_wo, p.mlp_fc1, p.mlp_fc2)

-- | The parameters, in the order of `make_state`.
entry get_params [V][C][T][L][F] (s: state [V][C][T][L][F]) = unpack s.params
-- | Adam's first moments.
entry get_adam_m [V][C][T][L][F] (s: state [V][C][T][L][F]) = unpack s.m
-- | Adam's second moments.
entry get_adam_v [V][C][T][L][F] (s: state [V][C][T][L][F]) = unpack s.v
-- | [the number of NaN or infinite weights and Adam moments] (0: finite), one
-- reduction on the device (train.fut's `nonfinite_count`).
entry nonfinite_count [V][C][T][L][F] (s: state [V][C][T][L][F]) : [1]f32 =
  [Train.nonfinite_count s]
-- | [step, n_head] as an array (scalars can be stale when read through futhark-ffi).
entry get_counters [V][C][T][L][F] (s: state [V][C][T][L][F]) : [2]i64 = [s.step, s.hyper]

-- | K Adam steps on K batches of B rows of block_size+1 tokens; returns the new
-- state and each step's loss.  lr decays linearly to 0 at step num_steps.
entry train [V][C][T][L][F][K][B][T1] (s: state [V][C][T][L][F])
            (tokens: [K][B][T1]i64) (n_pos: [K][B]i64) (lr: f32) (beta1: f32) (beta2: f32)
            (eps: f32) (num_steps: i64) : (state [V][C][T][L][F], [K]f32) =
  Train.train_steps {lr, beta1, beta2, eps} num_steps s tokens n_pos

-- | The loss of one batch, without a gradient.
entry loss [V][C][T][L][F][B][T1] (s: state [V][C][T][L][F])
           (tokens: [B][T1]i64) (n_pos: [B]i64) : [1]f32 =
  [Train.compute_loss s.params s.hyper tokens n_pos]

-- | Training-path logits (whole sequence, causal mask): tokens [B][T] -> [B][T][V].
entry logits_seq [V][C][T][L][F][B] (s: state [V][C][T][L][F]) (tokens: [B][T]i64) : [B][T][V]f32 =
  map (gpt_seq s.params s.hyper) tokens

-- | Sampling-path logits (one token at a time through the KV cache): [T] -> [T][V].
entry logits_cached [V][C][T][L][F] (s: state [V][C][T][L][F]) (tokens: [T]i64) : [T][V]f32 =
  Sample.cached_logits s.params s.hyper tokens

-- | n samples (first .. first+n-1 under seed) as rows of block_size tokens, each
-- ended and padded by BOS = vocab_size-1.  temperature 0 is greedy.
entry generate [V][C][T][L][F] (s: state [V][C][T][L][F]) (seed: i64) (first: i64)
               (n: i64) (temperature: f32) : [n][T]i64 =
  Sample.generate_samples s.params s.hyper seed first n temperature

-- | Continuations of n different prompts (row i: prompts[i, :lens[i]], the
-- rest padding; 1 <= lens[i] <= P), max_new tokens each, row i as sample
-- first+i under seed, with the KV cache (sample.fut's `continue_prompts`, as
-- gpt2.fut's `generate_prompts`); temperature 0 is greedy, top_k 0 keeps every
-- token.
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

-- | A whole-array i64 sum, the minimal repro of pocl 3.1's reduction bug: a second
-- call with other input returns the first result unless the workaround is on.
entry sum_i64 (xs: []i64) : [1]i64 = [i64.sum xs]
