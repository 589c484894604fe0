"""`microgpt-fut export-hf`: a GPT-2 text checkpoint as a Hugging Face folder."""
from __future__ import annotations

from pathlib import Path

import click

from ..training import checkpoint as ckpt
from ..training import hf
from .common import say_note, user_errors
from .group import main
from .values import GivenPath

@main.command("export-hf")
@click.argument("checkpoint", type=GivenPath())
@click.argument("folder", type=GivenPath(reads=False, folder=True))
@click.option("--overwrite", is_flag=True,
              help="Write into a FOLDER that is not empty: the files an export writes are "
                   "replaced, every other file and folder stays.")
def export_hf(checkpoint, folder, overwrite):
    """Write the GPT-2 text CHECKPOINT as a Hugging Face folder FOLDER (config.json,
    model.safetensors, tokenizer files), which transformers' GPT2LMHeadModel and
    AutoTokenizer load with from_pretrained."""
    with user_errors():
        ck = ckpt.load(checkpoint, adam=False)
        files = hf.export_folder(ck, folder, overwrite)
    say_note(f"wrote {folder}: {', '.join(files)}")

