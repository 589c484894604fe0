"""The plan of a train command: the only rules for a fresh run, ``--init-from`` and ``--resume``.

From the options (click's names; ``given``: those the user gave, on the command line
or in --config) ``make`` decides the model family and the kind of dataset, refuses an
option that neither reads (naming where it applies), and fixes what the run is:

- a fresh run: every setting from the options, the family's defaults for the rest
  (family.Family.optimizer), the model's sizes from the options and its vocabulary
  from the data (the kind's tokenizer: the characters, --tokenizer bpe or PATH);
- ``--init-from MODEL``: a new run from MODEL's weights, which keep their sizes
  (a smaller --block-size crops the positional table, nanoGPT's crop_block_size) and
  their tokenizer (data it cannot read is refused by the kind), on any data format that
  tokenizer covers (a model of lines reads text with BOS as the newline; a model of text
  trains on lines when it is a character model whose last token is the newline:
  kinds.Kind.check_model); the settings are this run's own;
- ``--resume FILE``: the checkpoint's run. Its model, tokenizer, total steps (and so
  the schedule), batch, seed, optimiser, evaluations and split are fixed: a given one
  must agree, or is refused naming it. Only how it runs may change (--steps-per-call,
  --threads, --backend, --device, --save-every, --out), and the data is read again
  from where the checkpoint names (or --data) and must be the same.

Nothing here knows click: errors are errors.OptionConflict (a usage error) and
errors.ResumeError (a checkpoint that cannot serve), one line each.
"""
from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass
from pathlib import Path

from . import checkpoint as ckpt
from . import hf
from .checkpoint import Checkpoint
from ..data.shards import shard_file
from ..data.tokenizer import BPE_MIN_VOCAB, find_tokenizer_files, tokenizer_choice
from ..errors import DataError, OptionConflict, ResumeConflict, ResumeError
from .family import FAMILIES, Family
from .kinds import KINDS, Kind
from .run import Run
from .settings import DEFAULTS as SETTINGS_DEFAULTS, Settings
from ..wording import shown_path

# The defaults of how a fresh run reads its data, where the option is not given.
DATA_DEFAULTS = {"encoding": "utf-8", "val_fraction": 0.1}

# The train options every run reads (click's names); the others are the families'
# (family.Family.size_options, optimizer_options) and the kinds' (kinds.Kind.options).
EVERY_RUN = ("data", "backend", "device", "steps", "batch_size", "seed", "steps_per_call",
             "arch", "data_format", "threads", "out", "overwrite", "save_every", "resume",
             "init_from", "samples", "temperature", "quiet")
# Options a checkpoint fixes -> their train entries (one the checkpoint lacks: not checked).
FIXED = {"steps": "num_steps", "batch_size": "batch_size", "seed": "seed",
         "grad_accum": "grad_accum", "eval_every": "eval_every", "eval_iters": "eval_iters",
         "val_fraction": "val_fraction", "lr": "lr", "min_lr": "min_lr",
         "warmup_steps": "warmup_steps", "lr_decay_steps": "lr_decay_steps", "beta1": "beta1",
         "beta2": "beta2", "weight_decay": "weight_decay", "grad_clip": "grad_clip"}


def opt(name: str) -> str:
    """The command line's spelling of the option click calls ``name``."""
    return "--bias/--no-bias" if name == "bias" else "--" + name.replace("_", "-")


def given_as(name: str, value) -> str:
    """An option with its value as the command line spells it: "--n-embd 32", and for a
    flag "--bias" or "--no-bias" (never Python's True/False)."""
    if isinstance(value, bool):
        flag = name.replace("_", "-")
        return f"--{flag}" if value else f"--no-{flag}"
    return f"{opt(name)} {value}"


def applies_to(name: str) -> tuple[str, list[str]]:
    """Where a train option applies, from the declarations: ("--arch", ["gpt2"]),
    ("--data-format", ["text", "tokens"]), or ("", []) for every run."""
    if name in EVERY_RUN:
        return "", []
    archs = [f.arch for f in FAMILIES.values()
             if name in f.size_options or name in f.optimizer_options]
    if archs:
        return ("", []) if len(archs) == len(FAMILIES) else ("--arch", archs)
    kinds = [k.name for k in KINDS.values() if name in k.options]
    return ("", []) if len(kinds) == len(KINDS) else ("--data-format", kinds)


def reads(family: Family, kind: Kind, name: str) -> bool:
    """Whether a run of ``family`` on ``kind`` reads the option ``name``."""
    return (name in EVERY_RUN or name in family.size_options or name in family.optimizer_options
            or name in kind.options)


@dataclass
class Plan:
    """What a train command runs: the family, the kind, the settings, --out, the data
    (None: the built-in names) and how to read it, and where the model comes from:
    ``resume`` (its checkpoint, ``where`` naming it), ``init`` (the --init-from model)
    or neither (a fresh model of ``sizes``). ``tokenizer``: the model's (init, resume),
    else None and ``tokenizer_choice`` (char, bpe or a path; None: the kind's)."""

    family: Family
    kind: Kind
    settings: Settings
    out: Path
    data: Path | None
    encoding: str
    val_fraction: float
    sizes: dict
    tokenizer: object = None
    tokenizer_choice: str | None = None
    vocab_size: int | None = None
    resume: Checkpoint | None = None
    resume_path: Path | None = None
    init: Checkpoint | None = None
    init_path: Path | None = None
    eval_choices: Path | None = None

    @property
    def where(self) -> str:
        """The model's source as messages name it."""
        if self.resume is not None:
            return f"checkpoint {str(self.resume_path)!r}"
        if self.init is not None:
            return f"--init-from {str(self.init_path)!r}"
        return "the data"

    @property
    def model(self) -> Checkpoint | None:
        """The checkpoint the model comes from (resume or init), or None."""
        return self.resume if self.resume is not None else self.init

    @property
    def block_size(self) -> int:
        return self.model.config.block_size if self.model is not None else \
            self.sizes["block_size"]

    def config(self, data):
        """The model's config: the checkpoint's, else the family's of the sizes and the
        vocabulary of the opened data. Raises DataError naming --data when that
        vocabulary is smaller than the family's least (a text of one character)."""
        if self.model is not None:
            return self.model.config
        config = self.family.config(data.vocab.size, self.sizes)
        if config.vocab_size < config.min_vocab:
            raise DataError(f"--data {str(self.data)!r}: its tokenizer has {config.vocab_size} "
                            f"token(s); a model needs at least {config.min_vocab} (give a text "
                            "of more characters)")
        return config

    def start(self, rt, data, config, exchange=None) -> Run:
        """The run.Run on ``data`` (the kind's ``open``, checked there): the checkpoint's
        run resumed, or a fresh run of ``config`` (``config(data)``) from the init model's
        weights or the family's initialisation. exchange: an MPIExchange when MPI ranks
        share each step. The device holds the weights (and moments) from then on, so the
        plan drops its checkpoint's host arrays: at GPT-2 124M they were 0.5 GB
        (--init-from) or 1.5 GB (--resume) held for the whole run."""
        if self.resume is not None:
            run = Run.resume(rt, self.resume, data, self.settings, exchange)
            self.resume = dataclasses.replace(self.resume, params={}, m=None, v=None)
        elif self.init is not None:
            run = Run.start(rt, data, self.settings, config, self.init.params,
                            str(Path(self.init_path).resolve()), exchange)
            self.init = dataclasses.replace(self.init, params={})
        else:
            run = Run.start(rt, data, self.settings, config, None, "", exchange)
        return run


def _source(o: dict) -> tuple[str, Path] | None:
    if o["resume"] is not None:
        return "--resume", o["resume"]
    if o["init_from"] is not None:
        return "--init-from", o["init_from"]
    return None


def family_and_kind(o: dict, given: dict) -> tuple[Family, Kind]:
    """The family and kind of a train command: the ones given; else those of the model
    --resume or --init-from names (a Hugging Face folder: gpt2 on text); else microgpt,
    and lines (text with --arch gpt2). Where no --data-format is given, --data decides
    for a fresh or --init-from run: a folder (`prepare`'s token shards) is read as tokens,
    and a file given to a model of tokens as text. Raises OptionConflict when a given one
    conflicts with the model's or with --data (an --init-from model may train on another
    data format: _init checks that its tokenizer can; a resumed run keeps its own)."""
    arch, fmt, source = o["arch"], o["data_format"], _source(o)
    data = None if o["data"] is None else Path(o["data"])
    folder = data is not None and data.is_dir()
    shard = data is not None and data.is_file() and shard_file(data)
    if shard:  # one file of a set: the folder is what trains (its splits, its tokenizer)
        folder_hint = f"--data {shlex.quote(shown_path(data.parent))}"
        if source is not None and source[0] == "--resume" and not hf.is_folder(source[1]):
            theirs = ckpt.read_metadata(source[1]).get("data_format", "lines")
            if theirs != "tokens":
                raise OptionConflict(f"--data {str(data)!r} is {shard}, and --resume "
                                     f"{str(source[1])!r} continues a model of {theirs}: give "
                                     "its data file with --data (or leave --data out: the "
                                     "run's own)")
        if fmt in ("lines", "text"):  # not the folder, which this format refuses in turn
            raise OptionConflict(f"--data {str(data)!r} is {shard}, and --data-format {fmt} "
                                 f"reads a text file: give one (or the shards' folder, "
                                 f"{folder_hint}, without --data-format)")
        raise OptionConflict(f"--data {str(data)!r} is {shard}: give the folder that holds "
                             f"it, {folder_hint}")
    if folder and fmt in ("lines", "text"):
        raise OptionConflict(f"--data {str(data)!r} is a folder, and --data-format {fmt} reads "
                             "a text file: give --data-format tokens for its token shards (or "
                             "leave --data-format out)")
    if fmt == "tokens" and data is not None and data.is_file():
        raise OptionConflict(f"--data {str(data)!r} is a file, not a folder of token shards "
                             "(--data-format tokens): give --data-format text for a text file "
                             "(or leave --data-format out), or make shards of it with "
                             "`microgpt-fut prepare`")
    if fmt is None and folder and (source is None or source[0] == "--init-from"):
        fmt = "tokens"
    if source is None:
        fmt = fmt or ("text" if arch == "gpt2" and "arch" in given else "lines")
        return FAMILIES[arch], KINDS[fmt]
    option, path = source
    if hf.is_folder(path):
        their_arch, their_fmt = "gpt2", "text"
    else:
        meta = ckpt.read_metadata(path)
        their_arch, their_fmt = meta.get("arch", "microgpt"), meta.get("data_format", "lines")
    what = f"a {their_arch} model of {their_fmt}"
    if "arch" in given and arch != their_arch:
        raise OptionConflict(f"--arch {arch} conflicts with {option} {str(path)!r}, {what}: "
                             f"leave --arch out (or give --arch {their_arch})")
    if option == "--resume" and data is not None and data.exists() and folder != (
            their_fmt == "tokens"):
        raise OptionConflict(f"--data {str(data)!r} is a {'folder' if folder else 'file'}, "
                             f"and --resume {str(path)!r} continues {what}: give its "
                             f"{'folder' if their_fmt == 'tokens' else 'data file'} with "
                             "--data (or leave --data out: the run's own)")
    if option == "--init-from" and fmt is None and their_fmt == "tokens" and data is not None \
            and data.is_file():
        fmt = "text"
    if fmt is not None and fmt != their_fmt and option == "--resume":
        raise OptionConflict(f"--data-format {fmt} conflicts with {option} {str(path)!r}, "
                             f"{what}: leave --data-format out (or give --data-format "
                             f"{their_fmt})")
    return FAMILIES[their_arch], KINDS[fmt or their_fmt]


def make(o: dict, given: dict) -> Plan:
    """The plan of a train command. o: every option's value (click's names; None where
    the family or kind gives the default); given: the options the user gave, with their
    values. Raises OptionConflict (a usage error naming the option) and ResumeError (a
    checkpoint that cannot be read or resumed); errors.CheckpointError and
    DataError for unreadable files."""
    if o["resume"] is not None and o["init_from"] is not None:
        raise OptionConflict("--init-from starts a new run from a model's weights and --resume "
                             "continues a run: give one of them")
    if o["resume"] is not None and hf.is_folder(o["resume"]):
        raise OptionConflict(f"--resume {str(o['resume'])!r} is a Hugging Face model folder, "
                             "which holds no training run to continue: start a run from its "
                             f"weights with --init-from {str(o['resume'])}")
    family, kind = family_and_kind(o, given)
    for name in given:
        if not reads(family, kind, name):
            where, values = applies_to(name)
            raise OptionConflict(f"{opt(name)} applies to {where} {' and '.join(values)}; this "
                                 f"run is --arch {family.arch} on --data-format {kind.name}")
    if o["resume"] is not None:
        return _resume(o, given, family, kind)
    pick = lambda k, defaults: defaults[k] if o[k] is None else o[k]  # noqa: E731
    settings = Settings(o["steps"], o["batch_size"], family.optimizer(o, o["steps"]),
                        *(pick(k, SETTINGS_DEFAULTS)
                          for k in ("grad_accum", "eval_every", "eval_iters")),
                        o["seed"], o["steps_per_call"], o["threads"])  # checked: Settings
    sizes = {k: o.get(k) for k in family.size_options}
    p = Plan(family, kind, settings, o["out"], o["data"],
             o["encoding"] or DATA_DEFAULTS["encoding"], pick("val_fraction", DATA_DEFAULTS),
             sizes, eval_choices=o["eval_choices"])
    if kind.needs_data and p.data is None:
        raise OptionConflict(f"--data-format {kind.name} needs --data "
                             + ("FILE (a text file, e.g. tinyshakespeare.txt)" if kind.name == "text"
                                else "DIR (a folder of token shards: `microgpt-fut prepare`)"))
    if o["init_from"] is not None:
        _init(p, o, given)
    else:
        if o["n_embd"] % o["n_head"]:
            raise OptionConflict(f"--n-embd {o['n_embd']} is not divisible by --n-head "
                                 f"{o['n_head']}")
        _tokenizer(p, o)
    return p


def _tokenizer(p: Plan, o: dict) -> None:
    """A fresh run's tokenizer choice: --tokenizer char|bpe|PATH (text), PATH (tokens);
    the kinds in any case, as prepare reads them, unless a file has that name."""
    choice, size = o.get("tokenizer"), o.get("vocab_size")
    if choice is not None:
        choice = tokenizer_choice(choice)
    if p.kind.name == "tokens" and choice in ("char", "bpe"):
        raise OptionConflict(f"--tokenizer {choice} does not apply to --data-format tokens: "
                             "shards are read with the tokenizer that made them"
                             + _shards_tokenizer(p.data))
    if size is not None and choice != "bpe":
        raise OptionConflict("--vocab-size applies to --tokenizer bpe (the other tokenizers "
                             "have their own)")
    if choice == "bpe" and size is None:
        raise OptionConflict("--tokenizer bpe needs --vocab-size N (e.g. 1024; GPT-2 has 50257)")
    if choice == "bpe" and size < BPE_MIN_VOCAB:
        raise OptionConflict(f"--vocab-size {size} is too small for --tokenizer bpe: at least "
                             f"{BPE_MIN_VOCAB} (its 256 bytes and <|endoftext|>)")
    p.tokenizer_choice, p.vocab_size = choice, size


def _shards_tokenizer(folder: Path | None) -> str:
    """Where a folder of token shards has the tokenizer that made them, for a message
    (its end, after "...made them"): its file (leave --tokenizer out), or none there
    (give it with --tokenizer PATH)."""
    if folder is None or not Path(folder).is_dir():
        return ": their folder's tokenizer.json (or nanoGPT's meta.pkl), else --tokenizer PATH"
    files = find_tokenizer_files(folder) or (
        [Path(folder) / "meta.pkl"] if (Path(folder) / "meta.pkl").is_file() else [])
    if files:
        return (f", and --data {str(folder)!r} has it ({' and '.join(f.name for f in files)}): "
                "leave --tokenizer out")
    return (f", and --data {str(folder)!r} holds none (no tokenizer.json, vocab.json and "
            "merges.txt, or meta.pkl): give it with --tokenizer PATH")


def _init(p: Plan, o: dict, given: dict) -> None:
    """--init-from: the model (weights, sizes, tokenizer; no optimiser state), its
    positional table cropped to a smaller --block-size."""
    path = p.init_path = o["init_from"]
    where = f"--init-from {str(path)!r}"
    init = hf.load_model(path)
    if init.arch != p.family.arch:
        raise OptionConflict(f"{where} is a {init.arch} model of {init.data_format}; this run "
                             f"trains {p.family.arch} on {p.kind.name}")
    p.kind.check_model(init, where)  # another data format: where its tokenizer can read it
    for name in ("tokenizer", "vocab_size"):
        if given.get(name) is not None:
            raise ResumeConflict(f"{opt(name)} conflicts with {where}: the run keeps the "
                                 "model's tokenizer")
    for name in p.family.size_options:
        value, have = given.get(name), getattr(init.config, name)
        if value is None or value == have or (name == "block_size" and value < have):
            continue
        has = (("biases" if have else "no biases") if name == "bias" else have)
        raise ResumeConflict(f"{given_as(name, value)} conflicts with {where}, whose model has "
                             f"{has}; leave it out (the model keeps its sizes; --block-size "
                             "may only be smaller)")
    T = given.get("block_size")
    if T is not None and T < init.config.block_size:  # nanoGPT's crop_block_size
        init.config = dataclasses.replace(init.config, block_size=T)
        init.params = {**init.params, "wpe": init.params["wpe"][:T].copy()}
    p.init, p.tokenizer = init, p.kind.model_tokenizer(init)


def further(path: Path, data, steps: int) -> str:
    """How to train a complete run's model further (a resumed run keeps its --steps,
    which fix its learning-rate schedule): a command of a new run from its weights on
    ``data`` (the run's; None or "": the built-in names), ``steps`` more steps, to a new
    --out beside it (NAME_more.safetensors)."""
    on = f" --data {shlex.quote(shown_path(data))}" if data else ""
    more = Path(path).with_name(f"{Path(path).stem}_more{Path(path).suffix}")
    return (f"to train further, start a new run from its weights: microgpt-fut train "
            f"--init-from {shlex.quote(shown_path(path))}{on} --steps {steps} "
            f"--out {shlex.quote(shown_path(more))}")


def complete(p: Plan) -> str | None:
    """For a plan that resumes a run already at its last step: the line that says so
    (nothing to train, nothing written, and how to train further); else None."""
    if p.resume is None or p.resume.step < p.settings.num_steps:
        return None
    return (f"checkpoint {str(p.resume_path)!r}: the run is complete at step {p.resume.step} "
            f"of {p.settings.num_steps}, nothing to train (nothing written); a resumed run "
            f"keeps its --steps, so "
            f"{further(p.resume_path, p.data, p.settings.num_steps)}")


def _resume(o: dict, given: dict, family: Family, kind: Kind) -> Plan:
    """--resume: the checkpoint's run, checked against the options given."""
    path = o["resume"]
    where = f"checkpoint {str(path)!r}"
    ck = ckpt.load(path)
    kind.check_resumable(ck, where)
    t = ck.train
    for name in ("tokenizer", "vocab_size"):
        if given.get(name) is not None:
            raise ResumeConflict(f"{opt(name)} conflicts with --resume: a resumed run keeps "
                                 "its tokenizer; leave it out")
    steps = given.get("steps")
    if steps is not None and steps != t["num_steps"]:
        raise ResumeConflict(
            f"--steps {steps} does not match {where}: its run has {t['num_steps']} steps in "
            f"total (the learning rate's schedule ends at step {t['num_steps']}); "
            + (f"the run is complete: {further(path, o['data'] or t['data_path'], steps)}"
               if ck.step >= t["num_steps"]
               else "leave --steps out to finish that run"))
    try:
        settings = Settings.from_train(t, o["steps_per_call"], o["threads"])
    except KeyError as e:
        raise ResumeError(f"{where} lacks the {e.args[0]!r} metadata its run needs to "
                          "resume") from None
    for name, key in FIXED.items():
        # a setting the checkpoint leaves out has its optimiser's default (microgpt's
        # weight_decay and grad_clip: 0)
        have = t[key] if key in t else getattr(settings.optimizer, key, None)
        if given.get(name) is not None and have is not None and given[name] != have:
            raise ResumeConflict(f"{opt(name)} {given[name]} conflicts with {where}, whose run "
                                 f"has {opt(name)} {have}; leave it out when resuming")
    block = given.get("block_size")
    if block is not None and block > ck.config.block_size:
        raise ResumeConflict(f"--block-size {block} is larger than the positional table of "
                             f"{where} (wpe has {ck.config.block_size} positions)")
    for name in family.size_options:
        have = getattr(ck.config, name)
        if given.get(name) is not None and given[name] != have:
            raise ResumeConflict(f"{given_as(name, given[name])} conflicts with {where}, which "
                                 f"has {given_as(name, have)}; a resumed run keeps the checkpoint's "
                                 "model sizes")
    data = o["data"] if o["data"] is not None else kind.stored_data(ck, where)
    choices = o["eval_choices"] or t.get("eval_choices")
    return Plan(family, kind, settings, o["out"] if "out" in given else path, data,
                o["encoding"] or t["encoding"],
                t.get("val_fraction", DATA_DEFAULTS["val_fraction"]), {},
                kind.model_tokenizer(ck), resume=ck, resume_path=path,
                eval_choices=Path(choices) if choices else None)
