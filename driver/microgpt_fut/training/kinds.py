"""The kinds of dataset a run trains on, each declared once: ``lines`` (one document per
line, microgpt's names), ``text`` (a text file as one token stream) and ``tokens`` (a
folder of token shards, `prepare`'s).

A kind says which train options it reads (beyond every run's and the model family's),
whether it evaluates, whether a checkpoint can be resumed, how it opens its data for a
plan (training/plan.py) as the run's dataset (data/datasets.py: Lines or Stream),
checked once to be a resumed run's own, what a run of it prints about its data, and
how its models are sampled (names, or continuations of a prompt whose default the kind
gives).
"""
from __future__ import annotations

import hashlib
import shlex
from pathlib import Path

from .checkpoint import Checkpoint
from ..data.datasets import Lines, Stream, other_documents, other_stream
from ..data.lines import Vocab, load_data, read_text
from ..data.shards import folder_tokenizer, find_splits, load_tokens, shards_digest
from ..data.text import load_text
from ..data.tokenizer import CharVocab, Tokenizer, load_tokenizer, train_bpe
from ..errors import DataError, OptionConflict, ResumeError
from ..wording import counted, shown_path
from .sampling import iter_continuations, iter_names

# Options every stream reads: nanoGPT's micro-batches and evaluations.
STREAM_OPTIONS = ("grad_accum", "eval_every", "eval_iters", "eval_choices")


class Kind:
    """A kind of dataset (the checkpoint's ``data_format``)."""

    name: str
    options: tuple[str, ...]   # the train options it reads (click's names)
    evaluates: bool            # evaluations, loss curves beside --out
    samples: int               # samples printed after train, and sample's -n default
    temperature: float         # their default temperature
    needs_data: str = ""       # the --data a fresh run needs ("" when there is a default)
    sample_options: tuple[str, ...] = ()  # the sample options its models read

    def check_resumable(self, ck: Checkpoint, where: str) -> None:
        """Raise ResumeError unless ck holds what its run needs to continue."""
        if ck.m is None or ck.v is None:
            raise ResumeError(f"{where} cannot be resumed: it has no Adam moments")
        if ck.losses is None:
            raise ResumeError(f"{where} cannot be resumed: it has no loss history "
                              "'train.losses'")
        for key in self.required:
            if key not in ck.train:
                raise ResumeError(f"{where} cannot be resumed: it lacks the {key!r} metadata "
                                  "(only checkpoints written by `microgpt-fut train` can)")
        total = ck.train["num_steps"]
        if not 0 <= ck.step <= total or total < 1 or ck.train["batch_size"] < 1:
            raise ResumeError(f"{where} is inconsistent: step {ck.step} of {total} steps")

    required = ("num_steps", "lr", "beta1", "beta2", "eps", "seed", "batch_size",
                "data_path", "data_sha256", "encoding")

    def stored_data(self, ck: Checkpoint, where: str) -> Path | None:
        """The data ck's run was trained on, as its checkpoint names it (None: the
        built-in names). Raises ResumeError, naming that path, when it is gone."""
        stored = ck.train["data_path"]
        if not stored and not self.needs_data:
            return None
        if not self._exists(Path(stored)):
            raise ResumeError(f"{where} was trained on {self.what} {stored!r}, which is not "
                              f"there any more; pass --data with the same {self.same}")
        return Path(stored)

    def _exists(self, path: Path) -> bool:
        return path.is_file()

    what, same = "data file", "documents"


class LinesKind(Kind):
    """One document per line, each a row [BOS] + characters + [BOS] (microgpt's names);
    no evaluations; samples are names."""

    name, options, evaluates, samples, temperature = "lines", ("encoding",), False, 20, 0.5
    required = Kind.required + ("n_docs", "cursor")

    def check_resumable(self, ck, where):
        """Kind.check_resumable's, and the data cursor is step x batch size."""
        super().check_resumable(ck, where)
        t = ck.train
        if t["cursor"] != ck.step * t["batch_size"]:
            raise ResumeError(f"{where} is inconsistent: data cursor {t['cursor']} is not "
                              f"step {ck.step} x batch size {t['batch_size']}")

    def open(self, plan) -> Lines:
        """The documents of plan.data (None: the built-in names) as the run's dataset, in
        the order of plan.settings.seed, rows of plan.block_size + 1 tokens of the model's
        vocabulary: the data's characters, or the fixed model's, which must hold every
        character of the data. Raises DataError naming the file, OptionConflict for a
        --batch-size larger than the data, ResumeError for other documents than a
        resumed run's (datasets.other_documents)."""
        docs, info = load_data(plan.data, plan.encoding)
        if plan.resume is not None and info.sha256 != plan.resume.train["data_sha256"]:
            raise ResumeError(other_documents(info, plan.resume.train))  # identity first
        vocab = plan.tokenizer if plan.tokenizer is not None else Vocab.from_docs(docs)
        unknown = sorted(set("".join(docs)) - set(vocab.chars))
        if unknown:
            raise DataError(f"{info.description}: characters {''.join(unknown)!r} are not in "
                            f"the vocabulary of {plan.where}, whose model knows "
                            f"{''.join(vocab.chars)!r}")
        if plan.settings.batch_size > len(docs):
            raise OptionConflict(f"--batch-size {plan.settings.batch_size} is larger than the "
                                 f"data ({info.description}): a step would take some documents "
                                 f"twice; use at most {len(docs):,}")
        return Lines(docs, info, vocab, plan.settings.seed, plan.block_size)

    def data_tokens(self, data: Lines, block_size: int) -> int:
        """Tokens the run holds on the host (memory.py)."""
        return len(data.docs) * (block_size + 1)

    def describe(self, data: Lines, block_size: int) -> tuple[str, str]:
        """(the line that says what the data is, a warning for stderr or "")."""
        n_long = sum(len(d) > block_size - 1 for d in data.docs)
        are = "is" if n_long == 1 else "are"
        warn = (f"warning: {n_long:,} of {counted(len(data.docs), 'document')} {are} longer "
                f"than block size - 1 = {block_size - 1} characters and {are} cut"
                if n_long else "")
        return f"data: {data.info.description}", warn

    def model_tokenizer(self, ck: Checkpoint) -> Vocab:
        """A model's vocabulary as this kind reads it: a model of lines, its characters
        (BOS after them); a model of text or tokens, a character vocabulary whose last
        character, the newline, serves as BOS (``check_model`` refuses the others)."""
        if ck.data_format == "lines":
            return Vocab(tuple(ck.vocab))
        return Vocab(tuple(ck.text_tokenizer().chars[:-1]))

    def check_model(self, ck: Checkpoint, where: str) -> None:
        """Raise OptionConflict (one line saying why) unless ck, a model of another
        kind (--init-from), can train on lines: a document is [BOS] + characters + [BOS]
        with BOS the last token, so the model must be a character model whose last
        character is the newline (one first trained on lines is)."""
        tok = ck.text_tokenizer()
        if ck.data_format == "lines" or (isinstance(tok, CharVocab) and tok.chars.endswith("\n")
                                         and tok.size == ck.config.vocab_size):
            return
        has = ("a byte-level BPE" if not isinstance(tok, CharVocab) else
               "a character vocabulary whose last token is not a newline")
        raise OptionConflict(
            f"--data-format lines conflicts with {where}, a {ck.arch} model of {ck.data_format} "
            f"with {has}: lines need a character model whose last token, a newline, can "
            "start and end each line as BOS; leave --data-format out to read the file as "
            "text (a newline between its lines)")

    def iter_samples(self, model, tokenizer, n: int, temperature: float, seed: int,
                     prompts=(), max_new: int = 0, top_k: int = 0, max_rows: int | None = None):
        """Names: sampling.iter_names (a lines model has no prompt); at most ``max_rows``
        a call (memory.sample_rows)."""
        return iter_names(model, tokenizer, n, temperature, seed, max_rows=max_rows)

    def default_prompts(self, tokenizer) -> list[str]:
        return []


class StreamKind(Kind):
    """One stream of tokens split into train and val; a step's windows and the
    evaluations as nanoGPT's get_batch and estimate_loss (data/text.py)."""

    evaluates, samples, temperature, needs_data = True, 1, 0.8, "--data"
    sample_options = ("prompt", "max_new_tokens", "top_k")
    required = Kind.required
    max_new = 200  # tokens continued after train

    def check_resumable(self, ck, where):
        """Kind.check_resumable's, and a GPT-2 run has its gradient norms."""
        super().check_resumable(ck, where)
        if ck.arch == "gpt2" and ck.norms is None:
            raise ResumeError(f"{where} cannot be resumed: it lacks its gradient norms "
                              "('train.grad_norms')")

    def open(self, plan) -> Stream:
        """plan's stream (``_load``: the text or the shards) as the run's dataset; a
        resumed run's must be its own (its SHA-256): else ResumeError naming both paths
        (datasets.other_stream), checked first (``_identity``): other data is told so,
        not that it is too short for the run's --block-size or --val-fraction, which a
        resumed run cannot change."""
        if plan.resume is not None:
            sha = self._identity(plan)
            if sha is not None and sha != plan.resume.train["data_sha256"]:
                raise ResumeError(other_stream(str(plan.data), self.name, plan.resume.train))
        stream = Stream(self._load(plan), self.name)
        if plan.resume is not None and stream.sha256 != plan.resume.train["data_sha256"]:
            raise ResumeError(stream.other_data(plan.resume.train))
        return stream

    def _load(self, plan):
        raise NotImplementedError

    def _identity(self, plan) -> str | None:
        """The SHA-256 that identifies plan.data as a run records it (None: unreadable,
        ``_load`` says why)."""
        raise NotImplementedError

    def data_tokens(self, data: Stream, block_size: int) -> int:
        return data.data.n_tokens

    def model_tokenizer(self, ck: Checkpoint) -> Tokenizer:
        """A model's tokenizer (a model of lines: its characters, then BOS as the
        newline: Checkpoint.text_tokenizer)."""
        return ck.text_tokenizer()

    def check_model(self, ck: Checkpoint, where: str) -> None:
        """Any model trains on a stream: its tokenizer must cover the data (``open``)."""

    def iter_samples(self, model, tokenizer, n, temperature, seed, prompts=(), max_new=None,
                     top_k=0, max_rows=None):
        """Continuations of each prompt (sampling.iter_continuations), at most ``max_rows``
        a call (memory.sample_rows)."""
        return iter_continuations(model, tokenizer, list(prompts), n,
                                  self.max_new if max_new is None else max_new, temperature,
                                  top_k, seed, max_rows)

    def default_prompts(self, tokenizer: Tokenizer) -> list[str]:
        """nanoGPT's start, a newline, when the model can read it; else the first token of
        its vocabulary (a character model of a text without a newline)."""
        try:
            tokenizer.encode("\n", "--prompt")
            return ["\n"]
        except DataError:
            return [tokenizer.decode([0])]

    def _kind_of(self, data: Stream) -> str:
        return "characters" if isinstance(data.vocab, CharVocab) else "byte-level BPE"

    no_val = ""  # the data line's words for a stream without a validation split

    def _held(self, data) -> str:
        """What the data line says the stream is made of, before its token count."""
        raise NotImplementedError

    def describe(self, stream: Stream, block_size: int) -> tuple[str, str]:
        data = stream.data
        return (f"data: {shown_path(data.path)} | {self._held(data)}"
                f"{counted(data.n_tokens, 'token')}, "
                f"vocab size {data.vocab.size} ({self._kind_of(stream)}) | train "
                f"{counted(len(data.train), 'token')}, "
                + (f"val {len(data.val):,}" if len(data.val) else self.no_val), "")


class TextKind(StreamKind):
    """A text file as one stream (data/text.py): its characters, a BPE trained on its
    training split, or a given tokenizer."""

    name = "text"
    options = ("encoding", "val_fraction", "tokenizer", "vocab_size") + STREAM_OPTIONS
    what, same = "data file", "text"

    def _load(self, plan):
        """The text of plan.data (text.TextData) with the fixed model's tokenizer, or a
        fresh run's (--tokenizer char, bpe or PATH). Raises DataError naming the file,
        OptionConflict naming the option."""
        tok = plan.tokenizer
        if tok is None and plan.tokenizer_choice == "bpe":
            text = read_text(plan.data, plan.encoding)
            # the training split only (the text's first 1 - val_fraction)
            tok = train_bpe(text[:int(len(text) * (1 - plan.val_fraction))], plan.vocab_size)
        elif tok is None and plan.tokenizer_choice not in (None, "char"):
            tok = load_tokenizer(plan.tokenizer_choice)
        return load_text(plan.data, plan.block_size, plan.val_fraction, plan.encoding, tok)

    def _identity(self, plan) -> str | None:
        """The SHA-256 of the file's bytes (text.load_text's), None when it cannot be read."""
        try:
            return hashlib.sha256(Path(plan.data).read_bytes()).hexdigest()
        except OSError:
            return None

    no_val = "no validation (--val-fraction 0)"

    def _held(self, data) -> str:
        return f"{counted(data.n_chars, 'character')}, "


class TokensKind(StreamKind):
    """A folder of token shards (data/shards.py), tokenized by `prepare`: the folder's
    tokenizer, or --tokenizer PATH where the folder has none. A model's tokenizer
    (--init-from, or --tokenizer) must be the shards' own."""

    name = "tokens"
    options = ("tokenizer",) + STREAM_OPTIONS
    what, same = "token shards in", "shards"

    def _exists(self, path: Path) -> bool:
        return path.is_dir()

    def _identity(self, plan) -> str | None:
        """The digest of the shard set (shards.shards_digest, as load_tokens records it).
        Raises DataError as shards.find_splits and open_shard do."""
        return shards_digest(plan.data)

    def _load(self, plan):
        """The shards of plan.data (text.TextData) read with the model's tokenizer: a
        resumed run's always (its shards are checked by their identity: ``open``); an
        --init-from model's or --tokenizer PATH's, refused when the folder's own
        tokenizer is another (the shards' ids would mean other tokens). Raises DataError
        naming the folder and OptionConflict for another tokenizer."""
        tok = plan.tokenizer
        if tok is None and plan.tokenizer_choice is not None:
            tok = load_tokenizer(plan.tokenizer_choice)
        if tok is not None and plan.resume is None:
            theirs = folder_tokenizer(Path(plan.data), find_splits(plan.data)[2])
            if theirs is not None and (type(theirs) is not type(tok) or
                                       theirs.to_json() != tok.to_json()):
                raise OptionConflict(
                    f"--data {str(plan.data)!r} holds shards made by another tokenizer "
                    f"(vocab size {theirs.size}"
                    + (", the same size with other tokens" if theirs.size == tok.size else "")
                    + f") than {_tokenizer_fix(plan, tok)}")
        return load_tokens(plan.data, plan.block_size, tok)

    no_val = "no validation shards"

    def _held(self, data) -> str:
        return "token shards, "

    def data_tokens(self, data: Stream, block_size: int) -> int:
        return 0  # memory-mapped


def _tokenizer_fix(plan, tok: Tokenizer) -> str:
    """The end of the error for shards of another tokenizer: the tokenizer's source
    (--init-from or --tokenizer), its vocab size, and how to make shards of it: prepare
    --tokenizer of a folder or file as it is, of a .safetensors model after export-hf
    wrote its folder (a GPT-2's; a microgpt model has none); a character model may train on
    the text with --data-format text, a names model on names with --data-format lines."""
    if plan.init is None:
        source = path = str(plan.tokenizer_choice)
        where = f"--tokenizer {source!r}"
    else:
        source = str(plan.init_path)
        where = f"the model of --init-from {source!r}"
        path = source if Path(source).is_dir() else "DIR"
    fix = f"`microgpt-fut prepare TEXT --tokenizer {shlex.quote(path)}`"
    # a character model trains on text itself; a names model (BOS, no newline) on names
    itself = ("its names file with --data-format lines"
              if plan.init is not None and plan.init.data_format == "lines"
              else "the text itself with --data-format text")
    if path == "DIR" and plan.init.arch != "gpt2":  # export-hf writes GPT-2 models only
        return f"{where} (vocab size {tok.size}): train on {itself}"
    if path == "DIR":
        fix = f"`microgpt-fut export-hf {shlex.quote(source)} DIR`, then " + fix
    if isinstance(tok, CharVocab):
        fix += f", or train on {itself}"
    return f"{where} (vocab size {tok.size}): make shards of it with {fix}"


KINDS: dict[str, Kind] = {k.name: k for k in (LinesKind(), TextKind(), TokensKind())}
