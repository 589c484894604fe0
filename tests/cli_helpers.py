"""Helpers shared by the tests of the driver (CLI, data, checkpoints, resume, threads)."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

NAMES_TXT = Path(__file__).resolve().parents[1] / "data" / "names.txt"  # shipped (data/README.md)


def names_lines() -> list[str]:
    """The lines of the project's data/names.txt."""
    return NAMES_TXT.read_text(encoding="utf-8").split("\n")


def small_data(folder: Path, n: int = 300, name: str = "names.txt") -> Path:
    """A data file with the first n names of names.txt."""
    lines = [ln for ln in names_lines() if ln.strip()][:n]
    path = folder / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def shakespeare_file(folder: Path, n_chars: int, name: str = "shakespeare.txt") -> Path:
    """A text file with the first n_chars characters of data/tinyshakespeare.txt."""
    text = NAMES_TXT.with_name("tinyshakespeare.txt").read_text(encoding="utf-8")
    path = folder / name
    path.write_text(text[:n_chars], encoding="utf-8")
    return path


def need_backend(backend: str = "c") -> None:
    """Return if build.sh compiled microgpt's library for this backend (else: conftest's
    need_library: a skip for cuda, a failure for any other backend)."""
    from conftest import need_library

    need_library(backend)


# The progress lines of a run (train's, prepare's BPE), which go to stderr (as tqdm's
# and logging's) before an error that stops it.
PROGRESS = ("data: ", "model: ", "step ", "saved checkpoint ", "starting from the weights ",
            "resuming ", "training a BPE of ", "the BPE has ")


def progress_aside(stderr: str) -> list[str]:
    """stderr's lines without a training run's progress lines (PROGRESS)."""
    return [ln for ln in stderr.strip().splitlines() if not ln.startswith(PROGRESS)]


def assert_one_line_error(result, *fragments: str) -> str:
    """A CliRunner result that failed with exactly one line `Error: ...` on stderr
    (beside the progress lines of a run that had started) and nothing on stdout."""
    assert result.exit_code != 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    assert "Traceback" not in result.output
    assert result.stdout == "", result.stdout
    lines = progress_aside(result.stderr)
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: "), lines[0]
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


def sigint_at_step(monkeypatch, model_class, step: int) -> None:
    """Make the device call (``model_class.train``, of MicrogptModel or GPT2Model) that ends at
    ``step`` be followed by a real SIGINT to this process."""
    real = model_class.train

    def train_then_signal(self, *a, **kw):
        out = real(self, *a, **kw)
        if self.step() == step:
            os.kill(os.getpid(), signal.SIGINT)
        return out

    monkeypatch.setattr(model_class, "train", train_then_signal)


def broken_checkpoints(folder: Path, good: Path) -> list[tuple[Path, str]]:
    """Checkpoint files that must be refused, each with a fragment of the expected error:
    a missing file, a text file, and ``good`` with its last 100 bytes cut off."""
    text = folder / "names.safetensors"
    text.write_text("emma\nolivia\n" * 20)
    cut = folder / "cut.safetensors"
    cut.write_bytes(good.read_bytes()[:-100])
    return [(folder / "none.safetensors", "does not exist"), (text, "not a safetensors file"),
            (cut, "truncated")]


def overwrite_float(path: Path, name: str, value: float, index: int = 0) -> None:
    """Overwrite float32 number ``index`` of tensor ``name`` in the safetensors file, in
    place (its offset from the header: an 8-byte length, the JSON, then the data)."""
    import json
    import struct

    data = bytearray(path.read_bytes())
    n = struct.unpack("<Q", data[:8])[0]
    start = 8 + n + json.loads(data[8:8 + n])[name]["data_offsets"][0] + 4 * index
    data[start:start + 4] = struct.pack("<f", value)
    path.write_bytes(bytes(data))


def lines_run(rt, docs: list[str], settings, config=None, info=None, ck=None):
    """A run.Run on the documents (datasets.Lines in settings.seed's order; info None:
    the documents' own), as ``train`` makes one: fresh of ``config``, or the run of
    checkpoint ``ck`` resumed (its config and vocabulary)."""
    from microgpt_fut.data.datasets import Lines
    from microgpt_fut.data.lines import Vocab
    from microgpt_fut.training.run import Run

    if ck is None:
        return Run.start(rt, Lines(docs, info, None, settings.seed, config.block_size),
                         settings, config)
    dataset = Lines(docs, info, Vocab(tuple(ck.vocab)), settings.seed, ck.config.block_size)
    return Run.resume(rt, ck, dataset, settings)


def diverge(training) -> int:
    """Run a run.Run that must diverge; check that it is left at the last good step
    (finite state and losses, step = first bad step - 1) and return the bad step."""
    import numpy as np

    from microgpt_fut.errors import Diverged

    with pytest.raises(Diverged) as e:
        training.run()
    assert training.step == e.value.step - 1 == training.model.step()
    ck = training.checkpoint()
    assert all(np.isfinite(a).all() for a in ck.params.values())
    assert np.isfinite(ck.losses).all() and ck.losses.shape == (training.step,)
    return e.value.step


def without_metadata_sum(meta: dict) -> dict:
    """meta with its ``checksums`` but for the metadata's own sum: a file whose metadata
    a test rewrites stands for one written elsewhere, checked on its tensors alone."""
    import json
    out = dict(meta)
    if "checksums" in out:
        sums = json.loads(out["checksums"])
        sums.pop("__metadata__", None)
        out["checksums"] = json.dumps(sums)
    return out


OPTIMIZED_LOAD = """
import importlib, sys
from microgpt_fut.errors import CheckpointError
module, name = sys.argv[1].rsplit(".", 1)
print("optimize", sys.flags.optimize)
try:
    getattr(importlib.import_module(module), name)(sys.argv[2])
except CheckpointError as e:
    print(f"{type(e).__name__}: {e}")
else:
    print("loaded")
"""


def load_under_optimize(load: str, path: Path) -> str:
    """What ``load`` (a function's dotted name) says of path under ``python -O``, which
    strips asserts: the CheckpointError's class and line, or "loaded"."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-O", "-c", OPTIMIZED_LOAD, load, str(path)],
                       capture_output=True, text=True, timeout=120)
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines[0] == "optimize 1" and len(lines) == 2, (r.stdout,
                                                                                 r.stderr)
    return lines[1]
