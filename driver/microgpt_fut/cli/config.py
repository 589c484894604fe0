"""--config FILE: a TOML file of option values, checked as the command line's."""
from __future__ import annotations

import json
from pathlib import Path

import click

from ..training.loop import first_line


def load_config(ctx, param, value):
    """--config FILE (TOML): option values (the options' own names, with - or _, not
    nanoGPT's) used where the command line gives none; read before the other options
    (eager). Each value must have its option's type (``config_value``); paths are
    relative to the file."""
    if value is None:
        return None
    import tomllib

    where = repr(str(value))
    # a file missing, unreadable or not TOML: status 1, as any unusable file (its values
    # of the wrong type or an unknown key, below, are usage errors: 2)
    try:
        with open(value, "rb") as f:
            table = tomllib.load(f)
    except OSError as e:
        raise click.ClickException(f"cannot read --config {where}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise click.ClickException(f"--config {where} is not UTF-8 text, as TOML must be (byte "
                                   f"0x{e.object[e.start]:02x} at offset {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise click.ClickException(f"--config {where} is not valid TOML: "
                                   f"{first_line(str(e))}") from None
    params = {p.name: p for p in ctx.command.params if p.name != "config"}
    defaults = {}
    for key, v in table.items():
        name = key.replace("-", "_")
        if name not in params:
            raise click.BadParameter(f"{where}: unknown setting {key!r}: a setting is an "
                                     "option's name (lr, steps, eval_every, ...; see --help)")
        defaults[name] = config_value(ctx, params[name], key, v, Path(value))
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    return value


# TOML's types (as tomllib gives them), for messages; bool before int (a bool is an int)
_TOML_TYPES = ((bool, "a boolean"), (int, "an integer"), (float, "a float"), (str, "a string"),
               (list, "an array"), (dict, "a table"))


def config_value(ctx, param: click.Parameter, key: str, value, path: Path):
    """The value of setting ``key`` of the --config file ``path`` for the option
    ``param``, checked as the same value on the command line is (click's type and the
    option's callback) with no coercion between TOML's types: an integer option takes
    an integer (not 5.5, not true), a number option an integer or a float, a flag a
    boolean, the others a string. A path is relative to the file's folder (so is
    --tokenizer's, unless char or bpe). Raises click.BadParameter, one line naming the
    key, the file and the type expected."""
    t, opt = param.type, "/".join(param.opts + param.secondary_opts)
    if getattr(param, "is_flag", False) or isinstance(t, click.types.BoolParamType):
        ok, expected = isinstance(value, bool), "true or false"
    elif isinstance(t, click.types.IntParamType):
        ok, expected = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif isinstance(t, click.types.FloatParamType):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        expected = "a number"
    elif isinstance(t, click.Choice):
        ok, expected = isinstance(value, str), "one of " + ", ".join(map(repr, t.choices))
    elif isinstance(t, click.Path):
        ok, expected = isinstance(value, str), "a path (a string, relative to the config file)"
    else:
        ok, expected = isinstance(value, str), "a string"
    shown = json.dumps(value, default=str, ensure_ascii=False)
    where = f"{str(path)!r}: {key} = {shown}"
    if not ok:
        kind = next((n for cls, n in _TOML_TYPES if isinstance(value, cls)), "a date or time")
        raise click.BadParameter(f"{where} is {kind}; {opt} takes {expected}")
    if (isinstance(t, click.Path) or (param.name == "tokenizer" and value not in ("char", "bpe"))
            ) and value != "":  # "" stays empty: the option's type refuses it
        value = str(path.parent / value)
    try:
        value = param.type_cast_value(ctx, value)
        return param.callback(ctx, param, value) if param.callback else value
    except click.BadParameter as e:
        raise click.BadParameter(f"{where}: {first_line(e.message)}") from None

