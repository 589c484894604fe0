"""The command line: `microgpt-fut train | sample | prepare | eval | export-hf | devices`.

The console script `microgpt-fut` is ``microgpt_fut.cli:main``."""
import sys


def main(*args, **kwargs):
    """The console script: commands.main, imported here rather than at the package's
    import, so that a Ctrl-C while numpy, click and the commands load ends the process
    as one inside a command does (``Error: interrupted``, exit 130), not with a
    traceback of the imports."""
    try:
        if sys.stdout is None:  # started with stdout closed (>&-)
            from .common import ClosedStdout
            sys.stdout = ClosedStdout()
        from .commands import main as commands
    except KeyboardInterrupt:
        sys.stderr.write("Error: interrupted\n")
        raise SystemExit(130) from None
    return commands(*args, **kwargs)


__all__ = ["main"]
