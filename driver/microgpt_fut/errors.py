"""The errors a user can cause, each one line naming the file or option and the fix.

The command line (cli/common.py ``user_errors``) reports an ``OptionConflict`` as a
usage error (exit status 2) and every other one as a failure (status 1); nothing
below the command line knows of click.
"""
from __future__ import annotations


class DataError(ValueError):
    """The training data cannot be used; the message is one line naming the file."""


class OptionConflict(DataError):
    """The options cannot go together, with each other or with the data, checkpoint or
    model they name (a --block-size longer than the text, a --val-fraction outside
    [0, 1), an option the run does not read); the message names the option to change.
    The command line reports it as a usage error (status 2)."""


class ResumeError(ValueError):
    """A checkpoint cannot be resumed (or started from) as asked; one line naming the
    file or option."""


class ResumeConflict(ResumeError, OptionConflict):
    """An option given with --resume or --init-from disagrees with the checkpoint: a
    usage error (status 2)."""
