-- | Sampling: many samples in parallel, each with its own RNG stream and KV cache.

import "nn"
import "rng"
import "model"

-- | n samples as microgpt's inference loop, all advancing one position per step:
-- start from BOS, draw each next token from softmax(logits / temperature) until
-- BOS or block_size tokens (temperature 0: greedy argmax).  Sample i draws from
-- RNG stream first+i under `seed`, so results do not depend on how a large
-- request is split into calls.  Returns [n][T] tokens, BOS after each end.
def generate_samples [V][C][T][L][F] (p: params [V][C][T][L][F]) (n_head: i64) (seed: i64)
                     (first: i64) (n: i64) (temperature: f32) : [n][T]i64 =
  let bos = V - 1
  let streams = map (\i -> key seed (first + i)) (iota n)
  let keys = replicate L (replicate n (replicate T (replicate C 0f32)))
  let values = replicate L (replicate n (replicate T (replicate C 0f32)))
  let draw (k: u64) (pos_id: i64) (logits: [V]f32) : i64 =
    if temperature == 0 then argmax logits
    else weighted_sample (softmax (map (/ temperature) logits)) (uniform k pos_id)
  let (_, _, _, out, _, _) =
    loop (token_ids, keys, values, out, done, pos_id) =
         (replicate n bos, keys, values, replicate n (replicate T bos), replicate n false, 0)
    while pos_id < T && !(and done) do
      let (logits, keys, values) = gpt_tokens p n_head token_ids pos_id keys values
      let next = map3 draw streams (replicate n pos_id) logits
      let done = map2 (\d t -> d || t == bos) done next
      let out = out with [:, pos_id] = map2 (\d t -> if d then bos else t) done next
      in (next, keys, values, out, done, pos_id + 1)
  in out
