-- | Build-time choices between formulations of the same model, for the backend
-- being compiled.  build.sh compiles each backend from its own copy of futhark/
-- and sets each constant here per backend (its `layout` function); these
-- defaults are the c backend's choice.

-- | true: multi-head attention by weight slices (`attention_by_slices`), and
-- sampling's KV cache read by column slices (`gpt_tokens`): no integer divisions
-- in c/multicore inner loops; false: by reshaping the activations
-- (`attention_by_reshapes`, `split_heads`), the form the GPU backends compile.
def heads_by_slices : bool = true

-- | true: `gpt_seq` runs layers 0..L-2 in a loop and the last layer after it, so
-- that `vjp2` keeps that layer's intermediate values instead of running its
-- forward again (instructions per training step on c: microgpt's job -16%,
-- n_embd 16 B 32 -21%, n_embd 64 2 layers -10%, n_embd 128 4 layers -5%; but
-- `futhark c` takes 4x longer, fusing the bigger derivative); true on c only.
-- false: all layers in the loop, for multicore (slower than c anyway, and the
-- form tripled its futhark compile) and the GPU backends (the longest compiles).
-- It matters to training only where `grad_by_hand` is false.
def last_layer_apart : bool = true

-- | true: training takes a batch's documents one after another, each through
-- code compiled for B = 1 (`loss_and_grad`), where the model asks for it
-- (`by_document`): with `vjp2`'s gradient, instructions per training step on c
-- -25% at microgpt's job, -46% at n_embd 16 B 32 (no padding to the longest
-- name), -16% at n_embd 64 B 32.  true on c only.  The backwards by hand (both
-- models, `grad_by_hand`) take the whole batch at once: their products then run
-- over all B*n positions
-- and its weights are transposed once a step, not once a document (c,
-- microgpt's tokens/s, two alternating runs each: n_embd 64 B 32 +0-36 %,
-- n_embd 128 B 32 +10-23 %).
def docs_one_at_a_time : bool = true

-- | true: the loss gradient by the backward written by hand (microgpt's
-- model_grad.fut, GPT-2's gpt2_grad.fut: one product per linear layer over the
-- batch's positions, no per-position accumulation into the weights'
-- gradients).  GPT-2 at the Shakespeare recipe's shape (n_embd 128, 4 layers,
-- B 12 x 64 positions), c, seconds per 3 steps (bench/gpt2_grad_forms.fut):
-- `vjp2` one document at a time 0.8-1.0, `vjp2` of the forward over all
-- positions 0.58, by hand 0.38-0.40.  microgpt: training on c at
-- n_embd 64 and 128 ran 1.8-2.4x faster than with `vjp2`; at n_embd 16
-- (microgpt's job, batches of names) `vjp2` one document at a time was ~15 %
-- faster on c, but compiling both forms doubled the c library's compile (76 ->
-- 171 s: `last_layer_apart`'s derivative), past what README's first command
-- allows.  true on c and multicore; false: `vjp2` of `gpt_seq`, for the GPU
-- backends (on pocl the hand-written form corrupted the heap at batch 64).
def grad_by_hand : bool = true
