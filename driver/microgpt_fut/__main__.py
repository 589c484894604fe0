"""``python -m microgpt_fut``: the command line (same as ``microgpt-fut``), through the
console script's ``cli.main``, which loads the commands under its Ctrl-C guard."""
from .cli import main

main(prog_name="microgpt-fut")
