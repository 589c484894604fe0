-- | Sampling: many samples in parallel, each with its own RNG stream and KV cache.

import "nn"
import "rng"
import "model"

-- | One sample as microgpt's inference loop: start from BOS, draw each next token
-- from softmax(logits / temperature) until BOS or block_size tokens.  Returns the
-- tokens, padded with BOS after the end.  temperature 0 is greedy argmax.
def sample_one [V][C][T][L][F] (p: params [V][C][T][L][F]) (n_head: i64)
               (k: u64) (temperature: f32) : [T]i64 =
  let bos = V - 1
  let keys = replicate L (replicate T (replicate C 0f32))
  let values = replicate L (replicate T (replicate C 0f32))
  let (_, _, _, out, _) =
    loop (token_id, keys, values, out, done) = (bos, keys, values, replicate T bos, false)
    for pos_id < T do
      if done then (token_id, keys, values, out, done)
      else
        let (logits, keys, values) = gpt_token p n_head token_id pos_id keys values
        let next = if temperature == 0 then argmax logits
                   else weighted_sample (softmax (map (/ temperature) logits)) (uniform k pos_id)
        in if next == bos then (next, keys, values, out, true)
           else (next, keys, values, out with [pos_id] = next, false)
  in out

-- | Samples first .. first+n-1 under `seed`; sample i uses stream i, so results
-- do not depend on how a large request is split into calls.
def generate_samples [V][C][T][L][F] (p: params [V][C][T][L][F]) (n_head: i64) (seed: i64)
             (first: i64) (n: i64) (temperature: f32) : [n][T]i64 =
  map (\i -> sample_one p n_head (key seed (first + i)) temperature) (iota n)
