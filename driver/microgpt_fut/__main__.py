"""``python -m microgpt_fut``: the command line (same as ``microgpt-fut``)."""
from .cli.commands import main

main(prog_name="microgpt-fut")
