"""The command line: `microgpt-fut train | sample | prepare | eval | export-hf | devices`.

The console script `microgpt-fut` is ``microgpt_fut.cli:main``."""
from .commands import main

__all__ = ["main"]
