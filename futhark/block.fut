-- | The block when futhark/ is compiled as it is (`futhark check`): 256-bit.
-- build.sh replaces this file, in each target's copy of futhark/, by
-- block_256.fut or block_512.fut, for the vector width of the machine it
-- builds on (targets.txt's $VECTOR_BITS), as layout.fut.
open import "block_256"
