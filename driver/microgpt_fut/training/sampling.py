"""Samples of a model, a device call's worth at a time: names (a model of lines) or
continuations of prompts (a model of a text or of token shards).

Each iterator yields lists of strings, about pacing.CALL_SECONDS of device work at a
time, so that cli/sample_output.py prints them as they come and Ctrl-C waits little.
Sample i draws from the kernels' random stream i under the seed, whatever the chunks.
"""
from __future__ import annotations

import math
import time
from typing import Iterator

from ..data.lines import Vocab
from ..data.tokenizer import Tokenizer
from ..pacing import CallPacer
from .family import family_of

NAMES_CHUNK = 4096   # the most names one device call makes
TEXT_CHUNK = 256     # the most continuations one device call makes


def iter_names(model, vocab: Vocab, n: int, temperature: float, seed: int,
               chunk: int | None = None) -> Iterator[list[str]]:
    """n samples (microgpt's inference loop: from BOS to the next BOS) decoded to strings:
    ``chunk`` samples a call, or (None) as many as take about pacing.CALL_SECONDS, at
    most NAMES_CHUNK. temperature 0 is greedy (argmax). Raises ValueError for a
    negative, NaN or infinite temperature or a negative n."""
    if n < 0:
        raise ValueError(f"the number of samples must be at least 0, got {n}")
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"--temperature must be a finite number >= 0, got {temperature}")
    pacer = CallPacer(NAMES_CHUNK)
    first = 0
    while first < n:
        k = min(chunk, n - first) if chunk else pacer.next_k(first, n - first)
        t0 = time.perf_counter()
        rows = family_of(model.config).names(model, seed, k, temperature, first)
        pacer.record(k, time.perf_counter() - t0)
        first += k
        yield [vocab.decode(r) for r in rows]


def iter_continuations(model, vocab: Tokenizer, prompts: list[str], n: int, max_new: int,
                       temperature: float, top_k: int, seed: int) -> Iterator[list[str]]:
    """n samples of each prompt + max_new generated tokens (nanoGPT's sample.py), in
    prompt order, at most TEXT_CHUNK a call. Sample j of prompt p draws from random
    stream p*n + j; each is the tokenizer's ``decode`` of the prompt's ids and the new
    ones, as transformers decodes ``generate``'s output (a byte-level BPE's incomplete
    character, even at the end, is U+FFFD). An empty prompt starts from <|endoftext|>,
    which its samples do not print (Tokenizer.prompt_ids). Raises DataError for an empty
    prompt of a model without that token, and for text the tokenizer cannot encode."""
    ids = [vocab.prompt_ids(p, "--prompt") for p in prompts]
    shown = [i if p else i[:0] for i, p in zip(ids, prompts)]  # the text printed before
    total = n * len(prompts)
    pacer, first = CallPacer(TEXT_CHUNK), 0
    while first < total:
        k = pacer.next_k(first, total - first)
        rows_of = [ids[i // n] for i in range(first, first + k)]
        t0 = time.perf_counter()
        rows = family_of(model.config).continuations(model, seed, temperature, top_k, rows_of,
                                                     max_new, first)
        pacer.record(k, time.perf_counter() - t0)
        yield [vocab.decode([*shown[(first + i) // n], *row]) for i, row in enumerate(rows)]
        first += k
