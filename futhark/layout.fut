-- | Build-time choice between two formulations of the same model, for the
-- backend being compiled.  build.sh compiles each backend from its own copy of
-- futhark/ and rewrites this file there; this default is the CPU choice.

-- | true: multi-head attention by weight slices (`attention_by_slices`), and
-- sampling's KV cache read by column slices (`gpt_tokens`): no integer divisions
-- in c/multicore inner loops; false: by reshaping the activations
-- (`attention_by_reshapes`, `split_heads`), the form the GPU backends compile.
def heads_by_slices : bool = true
