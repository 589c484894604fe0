-- | The family when futhark/ is compiled as it is (`futhark check futhark/gpt.fut`):
-- microgpt's.  build.sh replaces this file, in each target's copy of futhark/, by
-- family_microgpt.fut or family_gpt2.fut (targets.txt), as layout.fut.
open import "family_microgpt"
