-- | Sampling, written once for any `gpt_model`: the continuation of many
-- prompts in parallel, each with its own RNG stream and KV cache, in paced
-- calls or in one, ended by a stop token or by its length.

import "nn"
import "rng"
import "gpt_model"

-- | A float's bits as an unsigned key with the same order (for -inf .. +inf).
def f32_key (x: f32) : u32 =
  let b = f32.to_bits x
  in if b >> 31 == 1 then !b else b | 0x8000_0000

-- | nanoGPT's top-k filter: logits below the k-th largest become -inf (ties
-- with it stay).  k <= 0 or k >= n keeps all.  The k-th largest key is found
-- bit by bit, from the top, as the largest key t with at least k keys >= t:
-- 32 counting passes, no sort.
def top_k [n] (k: i64) (logits: [n]f32) : [n]f32 =
  if k <= 0 || k >= n then logits else
  let keys = map f32_key logits
  let kth = loop t = 0u32 for i < 32 do
              let cand = t | (1u32 << u32.i64 (31 - i))
              in if i64.sum (map (\key -> i64.bool (key >= cand)) keys) >= k then cand else t
  in map2 (\x key -> if key < kth then -f32.inf else x) logits keys

-- | One next token from `logits`: greedy (argmax) at temperature 0, otherwise a
-- draw from softmax(top_k(logits / temperature)) with uniform number `ctr` of
-- stream `k` (nanoGPT's `generate`; microgpt's with top_k 0).
def draw [V] (temperature: f32) (k_top: i64) (k: u64) (ctr: i64) (logits: [V]f32) : i64 =
  if temperature == 0 then argmax logits
  else weighted_sample (softmax_fwd (top_k k_top (map (/ temperature) logits))) (uniform k ctr)

-- | Whether an array of these dimensions, `bytes` bytes an element, has a byte
-- count that fits in i64: Futhark's allocation sizes wrap silently (8 * 2^62 is
-- 0: a corrupted heap, issue 41), so the sampling entries `assert` it before
-- they allocate (the driver checks it first, with a message naming the option).
def fits_i64 (bytes: i64) (dims: []i64) : bool =
  (loop (ok, p) = (true, bytes) for d in dims do
     (ok && d >= 0 && (d == 0 || p <= i64.highest / d), if d == 0 then 0 else p * d)).0

module sampler (M: gpt_model) = {
  -- | Continuations of n prompts between calls: the KV caches, the last T
  -- tokens of every row (a ring: position q in slot q % T), each row's prompt
  -- length, RNG stream, whether it has drawn the stop token, and the number t of
  -- steps taken.  Carried from one
  -- `advance` to the next, so that a long continuation is made in bounded,
  -- interruptible calls whose memory does not grow with its length.
  type continuation [L][n][T][C] =
    { keys: [L][n][T][C]f32, values: [L][n][T][C]f32, window: [n][T]i64, lens: [n]i64,
      streams: [n]u64, t: i64, temperature: f32, k_top: i64, stop: i64, done: [n]bool }

  -- | Continuations of n different prompts, before their first step: row i's
  -- prompt is prompts[i, :lens[i]] (1 <= lens[i] <= P <= T: the driver crops
  -- longer prompts to their last T tokens, all nanoGPT's model sees; the rest
  -- is padding), drawn as sample first+i under `seed`.  A row ends when it
  -- draws `stop` (microgpt's names: BOS; -1: never, as text), and is `stop`
  -- after.
  def start [V][C][T][L][F][n][P] (_p: M.params [V][C][T][L][F]) (seed: i64) (first: i64)
            (temperature: f32) (k_top: i64) (stop: i64) (prompts: [n][P]i64) (lens: [n]i64)
            : continuation [L][n][T][C] =
    let kv_fits = fits_i64 4 [L, n, T, C]
    in { keys = assert kv_fits (replicate L (replicate n (replicate T (replicate C 0f32)))),
      values = assert kv_fits (replicate L (replicate n (replicate T (replicate C 0f32)))),
      window = map (\s -> concat s (replicate (T - P) 0i64) :> [T]i64) prompts,
      lens, streams = map (\i -> key seed (first + i)) (iota n), t = 0, temperature, k_top,
      stop, done = replicate n false }

  -- | k more steps of `c` (nanoGPT's `generate`, all rows in lockstep so that
  -- they share the KV cache's layout and `gpt_tokens`' single position).  At
  -- step t every row feeds its token at position t (a prompt token while
  -- t < lens[i], else the one it drew at step t-1) and, from its last prompt
  -- token on, draws token j = t + 1 - lens[i] with uniform number j of its
  -- stream (`draw`): a row's tokens do not depend on the batch nor on how its
  -- steps are split into calls.  A row that has drawn `c.stop` gives `c.stop`
  -- from then on, and once every row has, the steps left are not computed
  -- (microgpt's loop: until BOS).  Positions past T see the last T tokens
  -- (whole-sequence forward), as nanoGPT crops `idx_cond`.  Returns the new
  -- state and [n][k] tokens: column s is row i's token at position c.t + s + 1
  -- (a prompt token while that position is below lens[i]).
  def advance [V][C][T][L][F][n] (p: M.params [V][C][T][L][F]) (hyper: M.hyper)
              (c: continuation [L][n][T][C]) (k: i64) : (continuation [L][n][T][C], [n][k]i64) =
    let out = assert (fits_i64 8 [n, k]) (replicate n (replicate k c.stop))
    let (window, keys, values, out, done, _) =
      loop (window, keys, values, out, done, s) = (copy c.window, copy c.keys, copy c.values,
                                                   out, copy c.done, 0)
      while s < k && !(and done) do
        let t = c.t + s
        let (logits, keys, values) =
          if t < T
          then M.gpt_tokens p hyper (map (\w -> w[t]) window) t keys values
          else (map (\w -> last (M.gpt_seq p hyper (map (\q -> w[(t + 1 + q) % T]) (iota T))))
                    window, keys, values)
        -- every row draws (one code path for the compiler); a row keeps the draw
        -- once it is past its prompt, until it has drawn the stop token
        let (next, done) =
          unzip (map5 (\w st len lg d ->
                         let j = t + 1 - len
                         let x = draw c.temperature c.k_top st (i64.max 0 j) lg
                         in if d then (c.stop, true)
                            else if j >= 0 then (x, x == c.stop)
                            else (w[(t + 1) % T], false))
                      window c.streams c.lens logits done)
        in (window with [:, (t + 1) % T] = next, keys, values, out with [:, s] = next, done, s + 1)
    in (c with window = window with keys = keys with values = values with done = done
          with t = c.t + k, out)

  -- | `start` and one `advance` of every step: row i's max_new tokens
  -- ([n][max_new]), in one call (names: n prompts [BOS], stop BOS, max_new T).
  def continue_prompts [V][C][T][L][F][n][P] (p: M.params [V][C][T][L][F]) (hyper: M.hyper)
                       (seed: i64) (first: i64) (temperature: f32) (k_top: i64) (stop: i64)
                       (prompts: [n][P]i64) (lens: [n]i64) (max_new: i64) : [n][max_new]i64 =
    -- the last step reads position longest + max_new - 2 and draws the longest row's last token
    let steps = if max_new == 0 || n == 0 then 0 else i64.maximum lens + max_new - 1
    let steps = assert (max_new <= i64.highest - P) steps  -- (advance checks n * steps)
    let (_, out) = advance p hyper (start p seed first temperature k_top stop prompts lens) steps
    in if steps == 0 then replicate n (replicate max_new 0)
       else map2 (\o len -> o[len - 1:len - 1 + max_new] :> [max_new]i64) out lens

  -- | The sampling path's logits for one sequence of T tokens, one token at a
  -- time through the KV cache: [T] -> [T][V] (to test it against `gpt_seq`).
  def cached_logits [V][C][T][L][F] (p: M.params [V][C][T][L][F]) (hyper: M.hyper)
                    (tokens: [T]i64) : [T][V]f32 =
    let keys = replicate L (replicate 1 (replicate T (replicate C 0f32)))
    let values = replicate L (replicate 1 (replicate T (replicate C 0f32)))
    let (out, _, _) =
      loop (out, keys, values) = (replicate T (replicate V 0f32), keys, values) for pos < T do
        let (logits, keys, values) = M.gpt_tokens p hyper [tokens[pos]] pos keys values
        in (out with [pos] = logits[0], keys, values)
    in out
}

-- Tests: `futhark test futhark/sample.fut`.  Expected values by hand.

-- | Keeps the k largest (ties with the k-th kept), -inf elsewhere.
-- ==
-- entry: test_top_k
-- input { 2i64 [1f32, 5f32, -3f32, 4f32, 0f32] }
-- output { [-f32.inf, 5f32, -f32.inf, 4f32, -f32.inf] }
-- input { 1i64 [-1f32, -0.5f32, -2f32] }
-- output { [-f32.inf, -0.5f32, -f32.inf] }
-- input { 2i64 [3f32, 1f32, 3f32, 3f32] }
-- output { [3f32, -f32.inf, 3f32, 3f32] }
-- input { 0i64 [1f32, 2f32] }
-- output { [1f32, 2f32] }
-- input { 3i64 [-0f32, 0f32, -1e-30f32, 1e-30f32] }
-- output { [-0f32, 0f32, -f32.inf, 1e-30f32] }
entry test_top_k [n] (k: i64) (logits: [n]f32) : [n]f32 = top_k k logits

-- | Byte counts that fit in i64, and those that wrap (8 * 2^62 = 2^65).
-- ==
-- entry: test_fits_i64
-- input { 8i64 [4611686018427387904i64, 1i64] }
-- output { false }
-- input { 8i64 [1152921504606846975i64] }
-- output { true }
-- input { 8i64 [1152921504606846976i64] }
-- output { false }
-- input { 4i64 [12i64, 0i64, 4611686018427387904i64, 4611686018427387904i64] }
-- output { true }
-- input { 4i64 [2i64, 3i64] }
-- output { true }
entry test_fits_i64 (bytes: i64) (dims: []i64) : bool = fits_i64 bytes dims
