-- | What training and sampling need of a model: the interface that microgpt
-- (model.fut, model_grad.fut) and GPT-2 (gpt2_model.fut, gpt2_grad.fut) both
-- implement, so that the loss, `vjp2`, the optimiser, sampling (train.fut,
-- sample.fut) and the libraries' entry points (gpt.fut) are written once, over it.
--
-- Sizes are run-time values carried in the types: V = vocab_size, C = n_embd,
-- T = block_size, L = n_layer, F = MLP width.

module type gpt_model = {
  -- | Run-time settings that are not array sizes (n_head; GPT-2's bias flag).
  type hyper

  -- | The weights, a record of arrays.
  type params [V][C][T][L][F]

  -- | The run-time settings of the entries' common arguments: n_head, and whether
  -- the linear layers and norms have biases (a family without biases asserts false).
  val hyper : i64 -> bool -> hyper
  -- | [n_head, bias (0/1)] of the settings.
  val counters : hyper -> [2]i64
  -- | The family's initialisation under a seed: init seed V C T L F.
  val init : i64 -> (V: i64) -> (C: i64) -> (T: i64) -> (L: i64) -> (F: i64)
           -> params [V][C][T][L][F]
  -- | The number of weights of each tensor, in `flat`'s order.
  val tensor_sizes : (V: i64) -> (C: i64) -> (T: i64) -> (L: i64) -> (F: i64) -> []i64
  -- | The weights as one flat vector, the tensors one after another in the
  -- family's order (the driver's `config.shapes()`), and back (unflat V C T L F;
  -- it asserts the vector's length).
  val flat [V][C][T][L][F] : params [V][C][T][L][F] -> []f32
  val unflat [P] : (V: i64) -> (C: i64) -> (T: i64) -> (L: i64) -> (F: i64) -> [P]f32
             -> params [V][C][T][L][F]

  -- | Apply `f` to every pair of corresponding weights.
  val params_map2 [V][C][T][L][F] : (f32 -> f32 -> f32)
                                  -> params [V][C][T][L][F] -> params [V][C][T][L][F]
                                  -> params [V][C][T][L][F]
  -- | The new weights of an optimiser's step: `f decay p m v g` of every weight p,
  -- its moments m, v (flat in `flat`'s order) and gradient g; `decay` says whether
  -- weight decay applies to the tensor (nanoGPT's rule: tensors of two or more
  -- dimensions, not biases or norms).
  val params_map4_decay [V][C][T][L][F][P] : (bool -> f32 -> f32 -> f32 -> f32 -> f32)
                                           -> params [V][C][T][L][F] -> [P]f32 -> [P]f32
                                           -> params [V][C][T][L][F] -> *params [V][C][T][L][F]
  -- | Adam's moments m and v, flat in `flat`'s order, take `f m v g` for every
  -- weight (g: its gradient), in place: both are consumed and returned.
  val params_moments [V][C][T][L][F][P] : (f32 -> f32 -> f32 -> (f32, f32))
                                        -> *[P]f32 -> *[P]f32 -> params [V][C][T][L][F]
                                        -> (*[P]f32, *[P]f32)
  -- | The sum of `f` over every weight (`f x = x * x`: the squared L2 norm).
  val params_sum [V][C][T][L][F] : (f32 -> f32) -> params [V][C][T][L][F] -> f32

  -- | The training forward: logits [n][V] for every position of one sequence of
  -- n <= T tokens, with the causal mask (position t sees tokens 0..t).
  val gpt_seq [V][C][T][L][F][n] : params [V][C][T][L][F] -> hyper -> [n]i64 -> [n][V]f32

  -- | The mean next-token NLL over the valid positions of a batch (nn.fut's
  -- `batch_rows` and `mean_nll` over `gpt_seq`: tokens [B][T+1], row b counting
  -- its first n_pos[b] positions) and its gradient with respect to every weight.
  val loss_grad [V][C][T][L][F][B][T1] : params [V][C][T][L][F] -> hyper -> [B][T1]i64 -> [B]i64
                                       -> (f32, params [V][C][T][L][F])

  -- | The mean next-token NLL over the valid positions of a batch, as
  -- `loss_grad`'s loss, without the gradient (evaluation).
  val loss [V][C][T][L][F][B][T1] : params [V][C][T][L][F] -> hyper -> [B][T1]i64 -> [B]i64 -> f32

  -- | The sampling forward: logits [n][V] for one token of each of n sequences,
  -- all at position `pos`, appending their keys and values to the caches
  -- [L][n][T][C] (rows 0..pos-1 filled by earlier calls).
  val gpt_tokens [V][C][T][L][F][n] : params [V][C][T][L][F] -> hyper -> [n]i64 -> i64
                                    -> *[L][n][T][C]f32 -> *[L][n][T][C]f32
                                    -> ([n][V]f32, *[L][n][T][C]f32, *[L][n][T][C]f32)
}

