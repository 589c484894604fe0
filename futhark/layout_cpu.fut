-- | The CPU layout: the formulations that c and multicore compile (build.sh
-- copies this file to layout.fut in each CPU target's source, as targets.txt
-- says).  The GPU targets take layout_gpu.fut, which defines the same names.

-- | Multi-head attention by weight slices (`attention_by_slices`, GPT-2's
-- `attention`), and sampling's KV cache read by column slices (`cached_heads`):
-- no integer divisions in c/multicore inner loops.
def heads_by_slices : bool = true

-- | The loss gradient by the backward written by hand (microgpt's
-- model_grad.fut, GPT-2's gpt2_grad.fut: one product per linear layer over the
-- batch's positions, no per-position accumulation into the weights'
-- gradients).  GPT-2 at the Shakespeare recipe's shape (n_embd 128, 4 layers,
-- B 12 x 64 positions), c, seconds per 3 steps (bench/gpt2_grad_forms.fut):
-- `vjp2` one document at a time 0.8-1.0, `vjp2` of the forward over all
-- positions 0.58, by hand 0.38-0.40.  microgpt: training on c at n_embd 64 and
-- 128 ran 1.8-2.4x faster than with `vjp2`; at n_embd 16 (microgpt's job,
-- batches of names) `vjp2` one document at a time was ~15 % faster on c, but
-- compiling both forms doubled the c library's compile (76 -> 171 s), past
-- what README's first command allows.
def grad_by_hand : bool = true

-- | Elements per chunk of the optimiser's update in place (tensor.fut's
-- `moments_at`): a chunk's two results (512 KB) stay in L2 until they are written back.
def update_chunk : i64 = 65536
