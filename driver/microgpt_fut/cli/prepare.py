"""`microgpt-fut prepare`: text to llm.c token shards and tokenizer.json, replaced
atomically."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import click
from tqdm import tqdm

from ..data import prepare as preparation
from ..data.tokenizer import load_tokenizer, tokenizer_choice, train_bpe
from ..errors import Stopped
from ..interrupt import stop_on_signals
from ..training.loop import lock_path
from ..wording import counted, shown_path
from .common import bad_option, exit_if_stdout_closed, exit_with, lock_out, say_note, user_errors
from .group import main
from .values import IntFrom, given_options, path_problem

@main.command("prepare")
@click.argument("inputs", nargs=-1, required=True, type=click.Path())
@click.option("--out", required=True, type=click.Path(),
              help="The folder for the shards and tokenizer.json (made if missing).")
@click.option("--tokenizer", default="char", show_default=True, metavar="char|bpe|PATH",
              help="char (the inputs' characters), bpe (a byte-level BPE trained on the "
                   "inputs' first --bpe-sample-mb MB, see --vocab-size), or a tokenizer.json, "
                   "vocab.json (beside merges.txt) or a folder holding them.")
@click.option("--vocab-size", type=IntFrom(257), default=None,
              help="--tokenizer bpe: the BPE's vocabulary (256 bytes, merges, <|endoftext|>).")
@click.option("--bpe-sample-mb", type=click.FloatRange(0, min_open=True), default=10.0,
              show_default=True, help="--tokenizer bpe: MB of the inputs the BPE learns from.")
@click.option("--shard-tokens", type=IntFrom(1), default=100_000_000,
              show_default=True,
              help="Tokens per shard (llm.c's .bin: uint16 tokens up to a vocabulary of "
                   "65,536, else uint32).")
@click.option("--val-fraction", type=click.FloatRange(0, 1, max_open=True), default=0.1,
              show_default=True, help="The last fraction of all tokens held out for validation "
                                      "(not with --val).")
@click.option("--val", "val_inputs", multiple=True, type=click.Path(),
              help="A text file for the validation split (repeatable) instead of "
                   "--val-fraction.")
@click.option("--name", default=None,
              help="The shards' name: NAME_train_000000.bin.  [default: the first input's stem]")
@click.option("--overwrite", is_flag=True,
              help="Replace the token set that --out holds (shards, tokenizer.json, vocab.json "
                   "and merges.txt, nanoGPT's train.bin, val.bin and meta.pkl); other files "
                   "stay.")
@click.pass_context
def prepare_command(ctx, inputs, out, tokenizer, vocab_size, bpe_sample_mb, shard_tokens,
                    val_fraction, val_inputs, name, overwrite):
    """Tokenize text INPUTS (any size, streamed) into llm.c token shards in --out, for
    `train --data-format tokens --data DIR`: NAME_train_*.bin, NAME_val_*.bin and
    tokenizer.json. Every input is one document. The set is written beside the old one
    and moved into place at the end: a failure, Ctrl-C or SIGTERM leaves --out as it
    was."""
    P = preparation
    # paths as given (an empty one would be the current folder once a Path)
    for label, given in [("--out", [out]), ("INPUTS", inputs), ("--val", val_inputs)]:
        if any(not g for g in given):
            raise bad_option(f"{label} is an empty path: give a "
                             + ("folder" if label == "--out" else "text file"))
        # input.txt/ (not a folder), a broken link to read
        for problem in filter(None, (path_problem(g, label != "--out", label == "--out")
                                      for g in given)):
            raise bad_option(f"{label} {problem}")
    inputs, val_inputs, out = list(map(Path, inputs)), list(map(Path, val_inputs)), Path(out)
    tokenizer = tokenizer_choice(tokenizer)
    with user_errors():
        if (tokenizer == "bpe") != (vocab_size is not None):
            raise bad_option("--vocab-size goes with --tokenizer bpe" if tokenizer != "bpe"
                              else "--tokenizer bpe needs --vocab-size N (e.g. 512)")
        given = given_options(ctx)
        if "bpe_sample_mb" in given and tokenizer != "bpe":
            raise bad_option("--bpe-sample-mb goes with --tokenizer bpe")
        if "val_fraction" in given and val_inputs:
            raise bad_option("--val-fraction and --val both choose the validation split: "
                             "give one, not both")
        P.check_distinct(inputs, val_inputs)
        name = inputs[0].stem if name is None else name
        P.check_name(name)
        P.check_out_folder(out)
        lock = Path(os.path.abspath(out))
        # the folders above --out that it makes go again unless it succeeds (after the
        # lock, which lies in them: call_on_close runs the last registered first)
        made, succeeded = P.missing_parents(out), []
        ctx.call_on_close(lambda: succeeded or P.remove_empty(made))
        try:  # the lock lies beside --out (as train's beside its checkpoint)
            out.parent.mkdir(parents=True, exist_ok=True)
            lock_out(ctx, lock)
        except OSError as e:
            raise P.out_error(out, e) from None
        P.remove_stale(out)  # a killed run's (kill -9): no other holds the lock now
    with stop_on_signals() as stop, user_errors():
        # a second signal ends the process at once: the unfinished set goes (prepare's
        # cleanup), and the lock file, as train's
        stop.on_second = lambda: _interrupted_twice(out, made)
        stop.cleanups.append(lambda: lock_path(lock).unlink(missing_ok=True))
        # a closed stdout (SIGPIPE) does not stop prepare: its work is kept, then 141
        stopping = lambda: stop() and stop.signum != signal.SIGPIPE  # noqa: E731
        try:
            done, tok = _prepare(inputs, out, tokenizer, vocab_size, bpe_sample_mb, shard_tokens,
                                 val_fraction, val_inputs, name, overwrite, stopping,
                                 stop.cleanups)
        except Stopped:
            how = "interrupted" if stop.signum == signal.SIGINT else f"stopped by {stop.name}"
            raise exit_with(128 + stop.signum, f"{how}: --out {str(out)!r} is as it was "
                            "(nothing written)") from None
        say_note(f"wrote {shown_path(out)}: {counted(done.train_tokens, 'train token')} in "
                 f"{counted(len(done.train), 'shard')}, {counted(done.val_tokens, 'val token')} "
                 f"in {counted(len(done.val), 'shard')}, tokenizer.json "
                 f"(vocab_size {tok.size})")
        succeeded.append(True)
    exit_if_stdout_closed(ctx, f"wrote {str(out)!r}")


def _interrupted_twice(out: Path, made: list[Path]) -> str:
    """The line of a second signal during prepare, after its cleanup (the folders
    ``made`` above --out are removed here, last): --out is as it was, and the
    unfinished set's hidden folder is named if it could not be removed."""
    left = preparation.stages(out)
    preparation.remove_empty(made)
    return (f"interrupted twice: --out {str(out)!r} is as it was" + (
        f"; remove the unfinished {str(left[0])!r} (the next prepare into it does)"
        if left else ""))


def _prepare(inputs, out, tokenizer, vocab_size, bpe_sample_mb, shard_tokens, val_fraction,
             val_inputs, name, overwrite, should_stop, cleanups):
    """prepare's work after its checks and lock: the tokenizer, then prepare.prepare with
    a progress bar on stderr; (Prepared, tokenizer). Raises prepare.Stopped when
    should_stop() turns true, DataError as prepare.prepare."""
    P = preparation
    if tokenizer in ("char", "bpe"):
        P.check_rereadable(inputs, f"--tokenizer {tokenizer}", val_inputs)
    learned = []
    if tokenizer == "char":
        tok = P.char_vocab(inputs, should_stop, val_inputs)
    elif tokenizer == "bpe":
        # the train split only: the inputs, of which --val-fraction's end validates
        size = sum(p.stat().st_size for p in inputs if p.is_file())  # bad ones: prepare says
        limit = int(bpe_sample_mb * 1e6)
        if not val_inputs:  # the split is in tokens, found later: a margin (checked)
            limit = min(limit, int(size * (1 - val_fraction) * P.TRAIN_MARGIN))
        sample = P.text_sample(inputs, limit)
        learned = [len(t.encode("utf-8")) for t in sample]
        n = sum(learned)
        say_note(f"training a BPE of {vocab_size:,} tokens on the inputs' first "
                 f"{counted(n, 'byte')}" + (" (all of them)" if n >= size else
                             f" of {size:,} (--bpe-sample-mb {bpe_sample_mb:g}"
                             + ("" if val_inputs else f", --val-fraction {val_fraction:g}")
                             + ")"))
        tok = train_bpe(sample, vocab_size)
        if tok.size < vocab_size:
            say_note(f"the BPE has {counted(tok.size, 'token')}, fewer than --vocab-size "
                     f"{vocab_size:,}: the sample has no more pairs of tokens to merge")
    else:
        tok = load_tokenizer(tokenizer)
    total = sum(p.stat().st_size for p in [*inputs, *val_inputs] if p.is_file())
    bar = tqdm(total=total, unit="B", unit_scale=True, disable=None, leave=False,
               desc="tokenizing")
    seen = {"tokens": 0, "t0": time.perf_counter()}

    def progress(n_bytes, n_tokens):
        seen["tokens"] += n_tokens
        bar.update(n_bytes)
        rate = seen["tokens"] / max(time.perf_counter() - seen["t0"], 1e-9)
        bar.set_postfix_str(f"{rate:,.0f} tok/s", refresh=False)

    try:
        return P.prepare(inputs, out, tok, name=name, shard_tokens=shard_tokens,
                         val_fraction=val_fraction, val_inputs=val_inputs, overwrite=overwrite,
                         progress=progress, learned_bytes=learned, should_stop=should_stop,
                         cleanups=cleanups), tok
    finally:
        bar.close()

