-- | GPT-2's family (gpt2_model.fut, gpt2_grad.fut) as the libraries' `family`:
-- build.sh copies this file as family.fut into the targets whose family is
-- gpt2 (targets.txt), and gpt.fut's entry points serve it.
import "gpt_model"
import "gpt2_grad"
module family : gpt_model = gpt2_model
