"""The command line: ``microgpt-fut train | sample | prepare | eval | export-hf | devices``.

Every error the user can cause is reported as one line ``Error: ...`` on stderr,
never a traceback, with click's exit statuses: 2 for a usage error (an option's
value out of its range, a --config value of the wrong type, or options that cannot
go together: with each other, or with the data, checkpoint or model they name; the
line names the option to change), 1 for the rest (a file missing, unreadable or
unusable, a --config file among them, a run that fails). A signal that stops a run
gives 128 + its number, a closed stdout 141 (SIGPIPE's). stdout holds only a
command's product (samples, eval's scores, devices' list); progress, notes, banners
and errors go to stderr (common.say_note), as tqdm's and logging's.

The group is cli/group.py's ``main``; each command is a module of its own, imported here
so that it registers on the group.
"""
from . import devices, evaluate, export_hf, prepare, sample, train  # noqa: F401  (registers)
from .group import main

__all__ = ["main"]

if __name__ == "__main__":  # pragma: no cover
    main(prog_name="microgpt-fut")
