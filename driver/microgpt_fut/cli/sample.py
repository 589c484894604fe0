"""`microgpt-fut sample`: samples of a trained checkpoint, printed as they are made."""
from __future__ import annotations


import click

from ..errors import DataError, OptionConflict
from ..training import hf
from ..training.family import family_of
from ..training.kinds import KINDS
from .common import backend_of, bad_option, runtime, say_note, user_errors
from .group import main
from .options import check_sample_options, options
from .values import INT64_MAX, check_threads, given_options
from .running import sample_rows
from .sample_output import print_samples, unprinted_start


@main.command()
@options("sample")
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
    check_sample_options(given, kind, path)
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
    # c decodes faster than multicore at every size measured (bench/README.md): work 0
    # picks it, or multicore where only that library is built
    backend = backend_of(o["backend"], family.program, 0, o["threads"] > 1, say_note)
    rt = runtime(backend, o["device"], quiet=False, program=family.program)
    with user_errors():
        model = family.model(rt, ck.config, 0, contexts, None, ck.params, step=ck.step)
        print_samples(kind.iter_samples(model, tok, n, temperature, o["seed"], prompts,
                                        o["max_new_tokens"], o["top_k"], rows),
                      total, "text" if kind.evaluates else "names", o["plain"],
                      unprinted=unprinted_start(prompts, bool(o["prompt"])))

def _shown(chars: str, limit: int = 100) -> str:
    """A vocabulary's characters for a message: repr, cut after ``limit`` of them."""
    return repr(chars[:limit]) + (f" (and {len(chars) - limit} more)" if len(chars) > limit
                                  else "")
