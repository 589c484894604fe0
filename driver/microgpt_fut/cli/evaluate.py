"""`microgpt-fut eval`: multiple-choice accuracy (HellaSwag) of a text model."""
from __future__ import annotations

from pathlib import Path

import click

from ..training import choices, hf
from ..training.family import family_of
from .common import (backend_of, bad_option, exit_if_stdout_closed, runtime, say_line,
                     say_note, user_errors)
from .group import main
from .options import option
from .values import GivenPath

@main.command("eval")
@click.option("--checkpoint", type=GivenPath(),
              default=Path("model.safetensors"), show_default=True,
              help="A text checkpoint, or a Hugging Face GPT-2 folder.")
@click.option("--choices", "choices_file", required=True, type=GivenPath(),
              help="Questions in HellaSwag's jsonl (ctx, endings, label), e.g. "
                   "hellaswag_val.jsonl.")
@option("backend")
@option("device")
@click.pass_context
def eval_command(ctx, checkpoint, choices_file, backend, device):
    """Multiple-choice accuracy as the seed's hellaswag.py: each ending is scored by the
    loss of its tokens after the context; acc picks the lowest summed loss, acc_norm
    the lowest mean loss per token."""
    with user_errors():
        examples = choices.read_examples(choices_file)
        ck = hf.load_model(checkpoint)
    if ck.data_format == "lines":
        raise bad_option(f"--checkpoint {str(checkpoint)!r} is a names model; eval scores "
                          "text models")
    tok = ck.text_tokenizer()
    with user_errors():  # every example, before the backend starts
        choices.check_fits(examples, tok, ck.config.block_size,
                           f"--choices {str(choices_file)!r}")
    family = family_of(ck.config)
    rows = max(len(e.endings) for e in examples)  # one call's rows: an example's endings
    backend = backend_of(backend, family.program,
                         rows * ck.config.block_size * ck.config.num_params(), False, say_note)
    rt = runtime(backend, device, quiet=False, program=family.program)
    with user_errors():
        model = family.model(rt, ck.config, 0, params=ck.params, step=ck.step)
        s = choices.evaluate(examples, tok, lambda t: family.logits(model, t),
                             ck.config.block_size)
    say_line(f"{len(examples)} examples: acc {s.acc:.4f}, acc_norm {s.acc_norm:.4f}")
    exit_if_stdout_closed(ctx, f"scored {len(examples)} examples")

