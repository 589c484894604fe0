-- | microgpt's family (model.fut, model_grad.fut) as the libraries' `family`:
-- build.sh copies this file as family.fut into the targets whose family is
-- microgpt (targets.txt), and gpt.fut's entry points serve it.
import "gpt_model"
import "model_grad"
module family : gpt_model = microgpt_model
