"""Samples of a model, a device call's worth at a time: names (a model of lines) or
continuations of prompts (a model of a text or of token shards).

Each iterator yields lists of samples, about pacing.CALL_SECONDS of device work at a
time, so that cli/sample_output.py prints them as they come and Ctrl-C waits little.
Sample i draws from the kernels' random stream i under the seed, whatever the chunks.

A continuation is made in paced calls of a few steps (futhark/sample.fut's ``start``
and ``advance``: the KV cache and the RNG state carry over), and comes as ``Piece``s:
the first sample of each call's rows streams as it grows, the others (at most
HELD_TOKENS tokens in all) follow when they end. So memory does not grow with
--max-new-tokens, the text is printed as it is made, and a signal stops it within
a call.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Iterator

from ..data.lines import Vocab
from ..data.tokenizer import Tokenizer
from ..pacing import CALL_SECONDS, CallPacer
from .family import family_of

NAMES_CHUNK = 4096   # the most names one device call makes
TEXT_CHUNK = 256     # the most continuations one device call makes
STEPS_CHUNK = 4096   # the most steps of a continuation one device call takes
HELD_TOKENS = 1 << 20  # the most new tokens of a call's rows held until printed


@dataclass(frozen=True)
class Piece:
    """Part of a text sample: ``text`` continues the sample the last Piece ended (or
    starts a new one); ``end``: the sample is complete."""

    text: str
    end: bool = False


def iter_names(model, vocab: Vocab, n: int, temperature: float, seed: int,
               chunk: int | None = None, max_rows: int | None = None) -> Iterator[list[str]]:
    """n samples (microgpt's inference loop: from BOS to the next BOS) decoded to strings:
    ``chunk`` samples a call, or (None) as many as take about pacing.CALL_SECONDS, at
    most NAMES_CHUNK and ``max_rows`` (what fits in memory: memory.sample_rows).
    temperature 0 is greedy (argmax). Raises ValueError for a negative, NaN or infinite
    temperature or a negative n."""
    if n < 0:
        raise ValueError(f"the number of samples must be at least 0, got {n}")
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"--temperature must be a finite number >= 0, got {temperature}")
    pacer = CallPacer(min(NAMES_CHUNK, max_rows or NAMES_CHUNK))
    first = 0
    while first < n:
        k = min(chunk, n - first) if chunk else pacer.next_k(first, n - first)
        t0 = time.perf_counter()
        rows = family_of(model.config).names(model, seed, k, temperature, first)
        pacer.record(k, time.perf_counter() - t0)
        first += k
        yield [vocab.decode(r) for r in rows]


def iter_continuations(model, vocab: Tokenizer, prompts: list[str], n: int, max_new: int,
                       temperature: float, top_k: int, seed: int,
                       max_rows: int | None = None) -> Iterator[list[Piece]]:
    """n samples of each prompt + max_new generated tokens (nanoGPT's sample.py), in
    prompt order, as Pieces (the module's docstring). Sample j of prompt p draws from
    random stream p*n + j, token j from its uniform number j, whatever the calls; its
    text is the tokenizer's ``decode`` of the prompt's ids and the new ones, as
    transformers decodes ``generate``'s output (a byte-level BPE's incomplete
    character, even at the end, is U+FFFD), decoded as it comes
    (Tokenizer.stream_decoder: a character split across two calls comes whole).

    Rows per call: one at first, then as many as one step of each takes about
    pacing.CALL_SECONDS at the slowest speed measured, at most TEXT_CHUNK, ``max_rows``
    (what fits in memory: memory.sample_rows) and HELD_TOKENS / max_new. Steps per
    call: paced to pacing.CALL_SECONDS (CallPacer), at most STEPS_CHUNK, measured apart
    for the steps through the KV cache and those past block_size (a whole-sequence
    forward each, about block_size times slower), and a call never mixes them.
    An empty prompt starts from <|endoftext|>, which its samples do not print
    (Tokenizer.prompt_ids). Raises DataError for an empty prompt of a model without
    that token, and for text the tokenizer cannot encode."""
    ids = [vocab.prompt_ids(p, "--prompt") for p in prompts]
    shown = [i if p else i[:0] for i, p in zip(ids, prompts)]  # the text printed before
    total = n * len(prompts)
    most = max(1, min(TEXT_CHUNK, max_rows or TEXT_CHUNK, HELD_TOKENS // max(1, max_new)))
    family, T = family_of(model.config), model.config.block_size
    pacers: dict[tuple[int, bool], CallPacer] = {}  # by (rows, past block_size)
    row_step = 0.0  # the slowest seconds per row and step measured
    first = 0
    while first < total:
        rows = (most if max_new == 0 else 1 if row_step == 0  # (nothing to measure)
                else max(1, min(most, int(CALL_SECONDS / row_step))))
        rows_of = [ids[i // n] for i in range(first, min(total, first + rows))]
        first += len(rows_of)
        cont = family.start_continuations(model, seed, temperature, top_k, rows_of,
                                          first - len(rows_of))
        lens = [int(x) for x in cont.lens]  # the prompts as the model sees them (cropped)
        steps = 0 if max_new == 0 else max(lens) + max_new - 1
        decoders = [vocab.stream_decoder() for _ in rows_of]
        texts = [[d.feed(shown[i // n])]
                 for d, i in zip(decoders, range(first - len(rows_of), first))]
        while cont.steps < steps:
            done = cont.steps
            end = min(steps, T) if done < T else steps
            pacer = pacers.setdefault((len(rows_of), done >= T), CallPacer(STEPS_CHUNK))
            k = pacer.next_k(done, end - done)
            t0 = time.perf_counter()
            out = cont.advance(k)
            seconds = time.perf_counter() - t0
            pacer.record(k, seconds)
            row_step = max(row_step, seconds / (k * len(rows_of)))
            for i, row in enumerate(out):
                # column s is position done+s+1: new token j = done + s + 1 - lens[i]
                a, b = max(0, lens[i] - 1 - done), min(k, lens[i] - 1 + max_new - done)
                if a < b:
                    texts[i].append(decoders[i].feed(row[a:b]))
            if cont.steps < steps:  # (the last call's pieces come with the ends below)
                # the first row streams (an empty piece too: the printer reads a stop
                # after each call)
                yield [Piece("".join(texts[0]))]
                texts[0] = []
        for t, d in zip(texts, decoders):
            t.append(d.finish())
        yield [Piece("".join(t), end=True) for t in texts]
