-- | The GPU layout: the formulations that opencl and cuda compile (build.sh
-- copies this file to layout.fut in each GPU target's source, as targets.txt
-- says).  layout_cpu.fut defines the same names for c and multicore.

-- | Multi-head attention by reshaping the activations (`attention_by_reshapes`,
-- `split_heads`): Futhark 0.25.32 stops with an internal error on the GPU
-- backends when it compiles the head slices.
def heads_by_slices : bool = false

-- | The loss gradient by `vjp2` of `gpt_seq` over the whole batch: on pocl the
-- backward written by hand corrupted the heap at batch 64 (docs/setup.md).
def grad_by_hand : bool = false

-- | Elements per chunk of the optimiser's update in place (tensor.fut's
-- `moments_at`): few kernel launches (GPT-2 124M: about 40 chunks a step).
def update_chunk : i64 = 4194304
