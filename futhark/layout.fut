-- | The layout when futhark/ is compiled as it is (`futhark check`,
-- bench/gpt2_grad_forms.fut): the CPU one.  build.sh replaces this file, in each
-- target's copy of futhark/, by layout_cpu.fut or layout_gpu.fut (targets.txt).
open import "layout_cpu"
