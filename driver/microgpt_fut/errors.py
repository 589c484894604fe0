"""The errors of the package: the lowest layer, importing nothing from it, so that every
module can raise them and every caller catch them without importing the module that
raises them.

Each message is one line naming the file or option and the fix. The command line
(cli/common.py ``user_errors``) reports an ``OptionConflict`` as a usage error (exit
status 2) and every other one as a failure (status 1); nothing below the command line
knows of click.
"""
from __future__ import annotations


# ------------------------------------------------------------------------ data and options
class DataError(ValueError):
    """The training data cannot be used; the message is one line naming the file."""


class OptionConflict(DataError):
    """The options cannot go together, with each other or with the data, checkpoint or
    model they name (a --block-size longer than the text, a --val-fraction outside
    [0, 1), an option the run does not read); the message names the option to change.
    The command line reports it as a usage error (status 2)."""


class Stopped(Exception):
    """``prepare`` stopped because ``should_stop`` said so (a signal); --out is as before."""


# ----------------------------------------------------------- checkpoints and model folders
class CheckpointError(ValueError):
    """A checkpoint cannot be written or read; the message is one line naming the file."""


class HFError(CheckpointError):
    """A Hugging Face folder cannot be read or written; one line naming the folder."""


class ResumeError(ValueError):
    """A checkpoint cannot be resumed (or started from) as asked; one line naming the
    file or option."""


class ResumeConflict(ResumeError, OptionConflict):
    """An option given with --resume or --init-from disagrees with the checkpoint: a
    usage error (status 2)."""


# -------------------------------------------------------------------------------- backends
class BackendError(RuntimeError):
    """A backend cannot be used; the message is one line meant for the user."""


class ContextClosed(RuntimeError):
    """An entry point was called on a closed context."""


# -------------------------------------------------------------------------------- training
class RunTooLarge(ValueError):
    """The run would not fit; the message is one line naming the option to change."""


class Diverged(RuntimeError):
    """A step's loss, or the state after it, is NaN or infinite.

    ``step`` is the first such step (1-based: step s is the s-th update); the
    run it came from is left at step - 1, the last good state. The message
    is one line naming the step.
    """

    def __init__(self, step: int, num_steps: int, what: str, ranks: tuple[int, ...] = (),
                 hint: str = "try a smaller --lr"):
        by = ""
        if ranks:
            by = (f", in rank {ranks[0]}'s share of the batch" if len(ranks) == 1 else
                  f", in the shares of ranks {', '.join(map(str, ranks))}")
        super().__init__(f"training diverged at step {step} of {num_steps}: {what}{by} "
                         f"({hint})")
        self.step = step


class RunFailed(Exception):
    """A run could not go on (a failed save, a divergence, a failing entry point, out of
    memory): one line, ending with what --out still holds."""


# ------------------------------------------------------------------------------------- MPI
class WatchdogError(RuntimeError):
    """The channel could not be set up (a worker cannot reach rank 0); one line."""
