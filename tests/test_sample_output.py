"""`sample` prints samples as they are made: a long run shows its first ones at once,
Ctrl-C keeps what was printed and says how many, --plain prints one per line for
pipes, and a closed pipe ends it quietly."""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time

import pytest

from click.testing import CliRunner

from cli_helpers import need_backend, small_data
from conftest import DATA_DIR
from microgpt_fut import host_memory
from microgpt_fut.cli.commands import main
from microgpt_fut.host_memory import format_bytes
from microgpt_fut.models.base import Continuation
from microgpt_fut.training import memory, sampling

N = 1_000_000  # samples asked for: minutes of work at once


def _cli(*args) -> list[str]:
    return [sys.executable, "-m", "microgpt_fut", *map(str, args)]


@pytest.fixture(scope="module")
def names_ckpt(tmp_path_factory):
    need_backend("c")
    folder = tmp_path_factory.mktemp("names")
    out = folder / "m.safetensors"
    subprocess.run(_cli("train", "--data", small_data(folder), "--steps", 30, "--samples", 0,
                        "--out", out), check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def text_ckpt(tmp_path_factory):
    need_backend("c")
    folder = tmp_path_factory.mktemp("text")
    text = folder / "t.txt"
    text.write_text((DATA_DIR / "tinyshakespeare.txt").read_text(encoding="utf-8")[:20000])
    out = folder / "t.safetensors"
    subprocess.run(_cli("train", "--arch", "gpt2", "--data-format", "text", "--data", text,
                        "--n-embd", 16, "--n-layer", 1, "--block-size", 16, "--batch-size", 2,
                        "--steps", 10, "--eval-iters", 1, "--samples", 0, "--out", out),
                   check=True, capture_output=True)
    return out


def _samples(chunks) -> list[str]:
    """The whole samples that iter_continuations' lists of Pieces spell."""
    texts, current = [], ""
    for piece in (piece for chunk in chunks for piece in chunk):
        current += piece.text
        if piece.end:
            texts.append(current)
            current = ""
    return texts


def test_ctrl_c_keeps_the_samples_printed_and_counts_them(names_ckpt):
    p = subprocess.Popen(_cli("sample", "--checkpoint", names_ckpt, "-n", N, "--plain"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = [p.stdout.readline() for _ in range(5)]  # printed while the rest is made
    p.send_signal(signal.SIGINT)
    rest = p.stdout.read()  # (not communicate(): it would skip what readline buffered)
    err = p.stderr.read()
    assert p.wait(timeout=60) == 130, err
    lines = [ln.rstrip("\n") for ln in first] + rest.splitlines()
    assert err.strip().splitlines() == [f"interrupted: printed {len(lines):,} of {N:,} samples"]
    assert 5 <= len(lines) < N
    # the kept samples are the run's first ones: the same as a run asking for that many
    again = subprocess.run(_cli("sample", "--checkpoint", names_ckpt, "-n", len(lines),
                                "--plain"), capture_output=True, text=True, check=True)
    assert again.stdout.splitlines() == lines


def test_plain_prints_one_name_per_line_and_the_default_microgpts_format(names_ckpt):
    plain = subprocess.run(_cli("sample", "--checkpoint", names_ckpt, "-n", 12, "--plain"),
                           capture_output=True, text=True, check=True).stdout.splitlines()
    pretty = subprocess.run(_cli("sample", "--checkpoint", names_ckpt, "-n", 12),
                            capture_output=True, text=True, check=True)
    assert len(plain) == 12
    # microgpt's banner on stderr, the samples alone on stdout
    assert pretty.stderr.splitlines() == ["", "--- inference (new, hallucinated names) ---"]
    assert pretty.stdout.splitlines() == [f"sample {i + 1:2d}: {name}"
                                          for i, name in enumerate(plain)]


def test_plain_text_samples_are_json_lines(text_ckpt):
    args = ("sample", "--checkpoint", text_ckpt, "-n", 3, "--max-new-tokens", 40, "--prompt",
            "ROMEO:")
    plain = subprocess.run(_cli(*args, "--plain"), capture_output=True, text=True,
                           check=True).stdout.splitlines()
    pretty = subprocess.run(_cli(*args), capture_output=True, text=True, check=True).stdout
    texts = [json.loads(line) for line in plain]
    assert len(texts) == 3 and all(t.startswith("ROMEO:") and len(t) == 46 for t in texts)
    assert pretty == "".join(f"{t}\n---------------\n" for t in texts)


def test_the_default_prompt_leaves_no_empty_first_line(text_ckpt):
    """Without --prompt (the default, a newline), `sample | head -1` printed an empty
    line: each sample began with that newline. nanoGPT's format now begins each sample
    with its first generated line, the rest as before (the --plain JSON strings, which
    hold the newline, less that newline); a --prompt given is printed as given. In
    subprocesses, with the pacing a user gets (several calls, pieces)."""
    args = ("sample", "--checkpoint", text_ckpt, "-n", 3, "--max-new-tokens", 60)
    plain = subprocess.run(_cli(*args, "--plain"), capture_output=True, text=True,
                           check=True).stdout.splitlines()
    pretty = subprocess.run(_cli(*args), capture_output=True, text=True, check=True).stdout
    texts = [json.loads(line) for line in plain]
    assert len(texts) == 3 and all(t.startswith("\n") for t in texts)
    assert pretty == "".join(f"{t[1:]}\n---------------\n" for t in texts)
    assert pretty.split("\n")[0] == texts[0].split("\n")[1] != ""
    given = subprocess.run(_cli(*args, "--prompt", "\n"), capture_output=True, text=True,
                           check=True).stdout
    assert given == "".join(f"{t}\n---------------\n" for t in texts)


def test_print_samples_leaves_out_the_unprinted_start_of_each_text_sample(capsys):
    """print_samples(unprinted="\\n"): dropped at each text sample's start, also from a
    sample whose first pieces are empty; kept where a sample begins otherwise, in --plain
    and in names."""
    from microgpt_fut.cli.sample_output import print_samples, unprinted_start
    from microgpt_fut.training.sampling import Piece

    assert unprinted_start(["\n"], False) == "\n"
    assert unprinted_start(["\n"], True) == unprinted_start(["a"], False) == ""
    chunks = [[Piece("\nab")], [Piece("c\nd", end=True)], [Piece(""), Piece("")],
              [Piece("\nx", end=True), Piece("y\n", end=True)]]
    print_samples(chunks, 3, "text", unprinted="\n")
    assert capsys.readouterr().out == ("abc\nd\n---------------\nx\n---------------\n"
                                       "y\n\n---------------\n")
    print_samples(chunks, 3, "text", plain=True, unprinted="\n")
    assert capsys.readouterr().out == '"\\nabc\\nd"\n"\\nx"\n"y\\n"\n'
    print_samples([["\nann"]], 1, "names", header=False, unprinted="\n")
    assert capsys.readouterr().out == "sample  1: \nann\n"


def test_a_closed_pipe_ends_sampling_quietly(names_ckpt):
    """`sample -n 1000000 --plain | head -3`: no traceback, status 141 (SIGPIPE's)."""
    p = subprocess.Popen(_cli("sample", "--checkpoint", names_ckpt, "-n", N, "--plain"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = [p.stdout.readline() for _ in range(3)]
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=60) == 141 and err == b"" and all(head)


@pytest.mark.parametrize("n, sig, status", [(1, signal.SIGINT, 130), (2, signal.SIGTERM, 143)],
                         ids=["only-SIGINT", "last-of-2-SIGTERM"])
def test_a_signal_during_the_last_sample_stops_with_its_status(text_ckpt, monkeypatch, n, sig,
                                                               status):
    """A signal that comes while the last (or only) sample's device call runs: that call's
    samples are printed, one line says how many, and the exit status is the signal's."""
    real, ended = Continuation.advance, [0]

    def advance_then_signal(self, k):
        out = real(self, k)
        if self.steps == int(self.lens.max()) + 20 - 1:  # the call that ends its rows
            ended[0] += len(self.lens)
            if ended[0] == n:  # ... and the last sample
                os.kill(os.getpid(), sig)
        return out

    monkeypatch.setattr(Continuation, "advance", advance_then_signal)
    r = CliRunner().invoke(main, ["sample", "--checkpoint", str(text_ckpt), "-n", str(n),
                                  "--max-new-tokens", "20", "--plain"])
    assert r.exit_code == status, r.output
    assert len(r.stdout.splitlines()) == n
    how = "interrupted" if sig == signal.SIGINT else "stopped by SIGTERM"
    samples = "1 sample" if n == 1 else f"{n} samples"
    assert r.stderr.strip().splitlines() == [f"{how}: printed {n} of {samples}"]


def _read_some(p: subprocess.Popen, n: int, timeout: float = 60) -> bytes:
    """At least n bytes of p's stdout (fewer if it ends), waiting at most ``timeout`` s."""
    got, fd = b"", p.stdout.fileno()
    end = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < end:
        if select.select([fd], [], [], 0.2)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            got += chunk
    return got


def test_a_huge_max_new_tokens_streams_into_a_closed_pipe(text_ckpt):
    """Issue 41: `sample -n 1 --max-new-tokens 2**62 --plain | head -c 100` used to
    corrupt the heap (an allocation of 8 * 2**62 bytes wrapped to almost nothing;
    munmap_chunk abort, status 134): the sample is now made in paced calls whose memory
    does not grow with its length, printed as it comes, and the closed pipe ends it
    quietly."""
    p = subprocess.Popen(_cli("sample", "--checkpoint", text_ckpt, "-n", 1, "--max-new-tokens",
                              2**62, "--plain"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = _read_some(p, 100)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=60) == 141 and err == b"", err
    assert len(head) >= 100 and head.startswith(b'"\\n')  # the default prompt, a newline


@pytest.mark.parametrize("sig, status, how", [(signal.SIGINT, 130, "interrupted"),
                                              (signal.SIGTERM, 143, "stopped by SIGTERM")])
def test_a_long_text_sample_prints_as_it_goes_and_stops_at_a_signal(text_ckpt, sig, status,
                                                                   how):
    """Issue 41: -n 3 --max-new-tokens 10**9 printed nothing and grew past 15 GB, and a
    signal waited for the whole sample. Now the first sample streams: a signal stops it
    within seconds, its JSON line closed, with the usual line and status."""
    p = subprocess.Popen(_cli("sample", "--checkpoint", text_ckpt, "-n", 3, "--max-new-tokens",
                              10**9, "--plain", "--prompt", "ROMEO:"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        head = _read_some(p, 200)
        assert len(head) >= 200, "nothing printed while the sample is made"
        t0 = time.monotonic()
        p.send_signal(sig)
        rest = p.stdout.read()
        err = p.stderr.read().decode()
        assert p.wait(timeout=60) == status, err
    finally:
        p.kill()
    assert time.monotonic() - t0 < 15
    lines = (head + rest).decode().splitlines()
    assert len(lines) == 1 and json.loads(lines[0]).startswith("ROMEO:")
    assert err.strip().splitlines() == [f"{how}: printed 0 of 3 samples and the start of the next"]


@pytest.mark.parametrize("steps_chunk", [1, 3, 4096])
def test_text_samples_do_not_depend_on_the_pacing(text_ckpt, monkeypatch, steps_chunk):
    """Issue 41: the same seed gives the same text whether a continuation is made in
    calls of 1 step, 3 steps or as many as the pacer likes, and that text is the
    tokenizer's decode of one ``generate_prompts`` call (past the context of 16 too;
    a prompt longer than the context; rows of 2 calls of 2 rows)."""
    from microgpt_fut.backend.runtime import Runtime
    from microgpt_fut.training import checkpoint as ckpt
    from microgpt_fut.training.family import family_of

    ck = ckpt.load(text_ckpt, adam=False)
    tok = ck.text_tokenizer()
    family = family_of(ck.config)
    model = family.model(Runtime("c", program=family.program), ck.config, 0, 1, None, ck.params)
    prompts, n, max_new = ["ROMEO:", "To be, or not to be, that is the question"], 2, 40
    ids = [tok.encode(p, "--prompt") for p in prompts]
    rows = [ids[i // n] for i in range(n * len(prompts))]
    one = model.generate_prompts(5, 0.9, 0, rows, max_new)
    expected = [tok.decode([*r, *new]) for r, new in zip(rows, one)]
    monkeypatch.setattr(sampling, "STEPS_CHUNK", steps_chunk)
    assert _samples(sampling.iter_continuations(model, tok, prompts, n, max_new, 0.9, 0, 5,
                                                max_rows=2)) == expected


def test_stream_decoders_are_decode_of_the_whole(tmp_path):
    """Issue 41: a sample printed piece by piece decodes as the whole: a byte-level BPE's
    character split across two pieces comes whole (invalid bytes as U+FFFD, as
    ``decode``), for random ids cut at random places; the windowed decoder of other
    tokenizers and the character one too."""
    import numpy as np

    from microgpt_fut.data.tokenizer import ByteLevelDecoder, CharVocab, WindowDecoder, train_bpe

    bpe = train_bpe("héllo wörld, ça va? 日本語のテキスト 🙂🙂 naïve café\n" * 40, 300)
    chars = CharVocab("abcé日\n")
    rng = np.random.default_rng(0)
    for tok, make in ((bpe, bpe.stream_decoder), (bpe, lambda: WindowDecoder(bpe)),
                      (chars, chars.stream_decoder)):
        assert tok is chars or isinstance(bpe.stream_decoder(), ByteLevelDecoder)
        for _ in range(500):
            ids = rng.integers(0, tok.size, rng.integers(0, 30))
            cuts = sorted(rng.integers(0, len(ids) + 1, 3))
            dec = make()
            got = "".join(dec.feed(ids[a:b]) for a, b in zip([0, *cuts], [*cuts, len(ids)]))
            assert got + dec.finish() == tok.decode(ids), ids.tolist()
    # one character's bytes in two tokens, fed in two pieces: nothing, then the character
    euro = [bpe.tok.token_to_id(t) for t in ("â", "Ĥ", "¬")]  # E2 82 AC, GPT-2's byte map
    if None not in euro:
        dec = bpe.stream_decoder()
        assert dec.feed(euro[:1]) == "" and dec.feed(euro[1:]) == "€"


def test_sample_refuses_what_cannot_fit_in_one_line(text_ckpt, monkeypatch):
    """Issue 41: sampling is checked against the machine's memory before anything is
    allocated (memory.sampling_need, as train's estimate): one line, exit 2, naming the
    option and the most that fits; -n times the prompts beyond the kernels' int64
    random streams too."""
    from microgpt_fut.training import checkpoint as ckpt

    config = ckpt.load(text_ckpt, adam=False).config
    need = memory.sampling_need(config, 1, sampling.STEPS_CHUNK)
    # room for the model on 2 contexts and one row, not for 8 contexts
    one = need.state // memory.SAMPLE_STATE_FLOATS
    room = need.total(1) + memory.SAMPLE_CONTEXT_FLOATS * one
    monkeypatch.setattr(host_memory, "available_memory", lambda: room)
    r = CliRunner().invoke(main, ["sample", "--checkpoint", str(text_ckpt), "--threads", "8",
                                  "-n", "8"])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        f"Error: --threads 8: sampling needs about {format_bytes(memory.sampling_need(config, 8, sampling.STEPS_CHUNK).total(1))} "
        f"of memory and the machine has {format_bytes(room)} available: at most --threads 2 fits"]
    monkeypatch.setattr(host_memory, "available_memory", lambda: need.total(1) - 1)
    r = CliRunner().invoke(main, ["sample", "--checkpoint", str(text_ckpt)])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.output
    assert "sampling this model needs about" in r.stderr
    monkeypatch.undo()
    r = CliRunner().invoke(main, ["sample", "--checkpoint", str(text_ckpt), "-n", str(2**62),
                                  "--prompt", "a", "--prompt", "b"])
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        f"Error: -n {2**62} with 2 prompts makes {2**63} samples, more than the kernels' "
        f"random streams (2^63 - 1): at most -n {(2**63 - 1) // 2}"]


def test_a_bpe_sample_split_into_one_token_calls_decodes_as_one_call(monkeypatch):
    """Issue 41: a random GPT-2 over a byte-level BPE at temperature 1 draws bytes of
    multi-byte characters (and invalid ones) that calls of one step each split: the
    printed text is decode of the one-call tokens, U+FFFD where decode has it."""
    import numpy as np

    need_backend("c")
    from microgpt_fut.backend.runtime import Runtime
    from microgpt_fut.data.tokenizer import train_bpe
    from microgpt_fut.models.gpt2 import GPT2Config, GPT2Model

    tok = train_bpe("héllo wörld, ça va? 日本語のテキスト 🙂🙂 naïve café\n" * 40, 300)
    config = GPT2Config(tok.size, n_embd=16, n_head=2, n_layer=1, block_size=8)
    rng = np.random.default_rng(3)
    params = {k: rng.normal(0, 0.3, s).astype(np.float32) for k, s in config.shapes().items()}
    model = GPT2Model.from_arrays(Runtime("c", program="gpt2"), config, params)
    prompts, n, max_new = ["日本", "café 🙂"], 2, 30
    ids = [tok.encode(p, "--prompt") for p in prompts]
    rows = [ids[i // n] for i in range(n * len(prompts))]
    one = model.generate_prompts(8, 1.0, 0, rows, max_new)
    expected = [tok.decode([*r, *new]) for r, new in zip(rows, one)]
    assert any("\ufffd" in t for t in expected) and any(ord(c) > 127 for c in "".join(expected))
    monkeypatch.setattr(sampling, "STEPS_CHUNK", 1)
    assert _samples(sampling.iter_continuations(model, tok, prompts, n, max_new, 1.0, 0,
                                                8)) == expected
