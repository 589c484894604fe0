"""`microgpt-fut sample`: samples of a trained checkpoint, printed as they are made."""
from __future__ import annotations

from pathlib import Path

import click

from ..errors import DataError, OptionConflict
from ..training import hf, plan
from ..training.family import family_of
from ..training.kinds import KINDS
from .common import bad_option, runtime, user_errors
from .group import main
from .options import (F32, INT, INT_MAX, backend_opt, check_positive, check_temperature,
                      check_threads, device_opt, given_options, sample_defaults)
from .running import sample_rows
from .sample_output import print_samples

INT64_MAX = 2**63 - 1

@main.command()
@click.option("-n", "--num", type=click.IntRange(0, INT_MAX), default=None,
              help="Number of samples (of each prompt)." + sample_defaults("samples"))
@click.option("--temperature", type=F32, default=None, callback=check_temperature,
              help="Sampling temperature (0 = greedy)." + sample_defaults("temperature"))
@click.option("--checkpoint", type=click.Path(path_type=Path),
              default=Path("model.safetensors"), show_default=True,
              help="Checkpoint to load, or a Hugging Face GPT-2 folder (config.json, "
                   "model.safetensors, tokenizer files).")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=42, show_default=True,
              help="Sampling seed (sample i uses random stream i).")
@click.option("--prompt", multiple=True,
              help="Text models: the text to continue; give it several times for several "
                   "prompts, continued together (-n samples of each).  [default: a newline, "
                   "or the vocabulary's first character when it has no newline]")
@click.option("--max-new-tokens", type=click.IntRange(0, INT_MAX), default=500,
              show_default=True,
              help="Text models: tokens to generate after the prompt (characters for a "
                   "character vocabulary; a byte-level BPE's tokens are bytes and merges of "
                   "them).")
@click.option("--top-k", type=click.IntRange(0, INT_MAX), default=0, show_default=True,
              help="Text models: draw only from the k likeliest tokens (0: all).")
@backend_opt
@device_opt
@click.option("--threads", type=INT, default=1, show_default=True, callback=check_positive,
              help="c backend: split the samples over N CPU threads (the samples are the "
                   "same).")
@click.option("--plain", is_flag=True,
              help="One sample per line and nothing else, for pipes: names as they are, "
                   "text samples as JSON strings.")
@click.pass_context
def sample(ctx, **o):
    """Print samples of a trained checkpoint: new names, or continuations of --prompt
    for a text model (nanoGPT's sample.py), each as soon as it is made. Ctrl-C (or
    SIGTERM, SIGHUP) keeps what was printed and says how many."""
    check_threads(o["threads"], o["backend"])
    path = o["checkpoint"]
    with user_errors():
        ck = hf.load_model(path)
    kind = KINDS[ck.data_format]
    given = given_options(ctx)
    for name in set(given) - {"num", "temperature", "checkpoint", "seed", "backend", "device",
                              "threads", "plain"} - set(kind.sample_options):
        where = " and ".join(k.name for k in KINDS.values() if name in k.sample_options)
        raise bad_option(f"{plan.opt(name)} applies to models of {where}; {str(path)!r} is a "
                         f"model of {kind.name}")
    n = kind.samples if o["num"] is None else o["num"]
    temperature = kind.temperature if o["temperature"] is None else o["temperature"]
    tok = kind.model_tokenizer(ck)
    prompts = list(o["prompt"]) or kind.default_prompts(tok)
    T = ck.config.block_size
    for p in prompts:  # before the backend starts; a prompt the model cannot read: usage
        with user_errors():
            try:
                length = len(tok.prompt_ids(p, "--prompt"))
            except DataError as e:
                chars = getattr(tok, "chars", None)  # a character model: what it can read
                raise OptionConflict(str(e) if chars is None or not p else
                                     f"{e}: write --prompt with the model's characters "
                                     f"{_shown(chars)}") from None
        if length > T:
            short = repr(p if len(p) <= 30 else p[:30] + "...")
            click.echo(f"note: --prompt {short} has {length} tokens, more than the model's "
                       f"context of {T}: it sees the last {T}", err=True)
    total = n * max(1, len(prompts))
    if total > INT64_MAX:  # sample i draws from the kernels' int64 stream i
        raise bad_option(f"-n {n} with {len(prompts)} prompts makes {total} samples, more "
                         f"than the kernels' random streams (2^63 - 1): at most -n "
                         f"{INT64_MAX // len(prompts)}")
    if total == 0:
        return
    family = family_of(ck.config)
    contexts = min(o["threads"], total)
    rows = sample_rows(ck.config, contexts)  # before anything is allocated
    rt = runtime(o["backend"], o["device"], quiet=False, program=family.program)
    with user_errors():
        model = family.model(rt, ck.config, 0, contexts, None, ck.params, step=ck.step)
        print_samples(kind.iter_samples(model, tok, n, temperature, o["seed"], prompts,
                                        o["max_new_tokens"], o["top_k"], rows),
                      total, "text" if kind.evaluates else "names", o["plain"])

def _shown(chars: str, limit: int = 100) -> str:
    """A vocabulary's characters for a message: repr, cut after ``limit`` of them."""
    return repr(chars[:limit]) + (f" (and {len(chars) - limit} more)" if len(chars) > limit
                                  else "")
