"""Same command, same bits: a seeded run on the c backend does not depend on where its
arrays land in memory (docs/reproducibility.md).

The c library once gave other weights when only the size of an unrelated environment
variable changed (on AVX-512 machines): clang's vectorised remainder loops were chosen
by an alias check whose outcome depends on the distance between two arrays, and a
reassociated float sum rounds differently on the two paths. build.sh's flags remove
those loops. These tests check the flags on a probe program that shows the mechanism,
and the product: the same run in other environments, folders and signal dispositions,
and the same gradient with other heap histories, bit for bit.
"""
from __future__ import annotations

import hashlib
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from cli_helpers import NAMES_TXT, need_backend
from conftest import REPO_ROOT, DATA_DIR
from microgpt_fut.backend.runtime import build_dir

PROBE = REPO_ROOT / "tests" / "c" / "layout_probe.c"
# Makes clang vectorise remainder loops at 8 float lanes too, as it does by default at 16
# (AVX-512): the probe then shows the mechanism on AVX2 machines as well.
EPILOGUES_AT_8_LANES = ["-mllvm", "-epilogue-vectorization-minimum-VF=8"]
NO_EPILOGUES = ["-mllvm", "-enable-epilogue-vectorization=false"]


def _kernel_compiler() -> tuple[str, list[str]]:
    """(C compiler, flags) that build.sh compiled the c library with."""
    need_backend("c")
    path = build_dir() / "c" / "compiler.txt"
    assert path.is_file(), f"{path} missing: run ./build.sh again"
    cc, flags = path.read_text().splitlines()[:2]
    return cc, shlex.split(flags)


def _probe(tmp_path: Path, cc: str, flags: list[str]) -> dict[int, int]:
    """Compile and run tests/c/layout_probe.c: {trip count n: number of distinct sums}."""
    exe = tmp_path / "probe"
    subprocess.run([cc, *flags, str(PROBE), "-o", str(exe)], check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return {int(n): int(k) for n, k in (line.split() for line in out.splitlines())}


def _without(flags: list[str], pair: list[str]) -> list[str]:
    for i in range(len(flags) - 1):
        if flags[i:i + 2] == pair:
            return flags[:i] + flags[i + 2:]
    raise AssertionError(f"{' '.join(pair)} not among the kernel flags {flags}")


def test_kernel_flags_make_vector_sums_layout_independent(tmp_path):
    """With build.sh's flags, a kept-and-summed loop gives one sum whatever the distance
    between its arrays, even where remainder loops would be vectorised (AVX-512)."""
    cc, flags = _kernel_compiler()
    if "clang" not in Path(cc).name:  # gcc: build.sh leaves float sums unreassociated
        assert set(_probe(tmp_path, cc, flags).values()) == {1}
        return
    got = _probe(tmp_path, cc, flags + EPILOGUES_AT_8_LANES)
    assert {n: k for n, k in got.items() if k > 1} == {}, \
        "sums depend on the distance between arrays with the kernels' flags"
    # The probe is able to see it: without the fix its sums do depend on the layout.
    control = _probe(tmp_path, cc, _without(flags, NO_EPILOGUES) + EPILOGUES_AT_8_LANES)
    assert any(k > 1 for k in control.values()), \
        f"{cc} no longer shows the mechanism to the probe; revisit docs/reproducibility.md"


def _train(tmp_path: Path, tag: str, args: list[str], env_pad: int, ignore_sigint: bool = False
           ) -> dict[str, np.ndarray]:
    """One `microgpt-fut train` in a subprocess, in its own folder (the name's length
    varies with tag) and with an environment variable of env_pad bytes."""
    folder = tmp_path / tag
    folder.mkdir()
    env = dict(os.environ, MICROGPT_FUT_PAD="x" * env_pad)
    r = subprocess.run([sys.executable, "-m", "microgpt_fut", "train", *args, "--samples", "0",
                        "-q", "--out", "m.safetensors"], cwd=folder, env=env,
                       capture_output=True, text=True, timeout=300,
                       preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
                       if ignore_sigint else None)
    assert r.returncode == 0, r.stderr
    return load_file(str(folder / "m.safetensors"))


@pytest.mark.parametrize("args", [
    ["--n-embd", "32", "--batch-size", "8", "--seed", "7", "--steps", "300"],
    ["--steps", "300"],  # microgpt's job: n_embd 16, one document per step
    ["--n-embd", "32", "--batch-size", "8", "--threads", "2", "--steps", "100"],
    ["--arch", "gpt2", "--data-format", "text", "--data", str(DATA_DIR / "tinyshakespeare.txt"),
     "--n-embd", "32", "--n-layer", "2", "--block-size", "32", "--batch-size", "4",
     "--steps", "40", "--eval-every", "20", "--eval-iters", "2"],
], ids=["n_embd32_B8", "microgpt", "threads2", "gpt2_text"])
def test_same_run_in_other_environments_is_bit_identical(tmp_path, args):
    """The issue's reproduction: environment size, working folder and an ignored SIGINT
    (a run started in the background of a script) change nothing, bit for bit."""
    need_backend("c")
    if not NAMES_TXT.is_file():
        pytest.fail(f"shared dataset {NAMES_TXT} not found")
    args = ["--backend", "c", *([] if "--data" in args else ["--data", str(NAMES_TXT)]), *args]
    ref = _train(tmp_path, "a", args, 10)
    others = {"environment of 3000 bytes, longer folder name": _train(tmp_path, "b" * 40, args, 3000),
              "environment of 20000 bytes": _train(tmp_path, "c" * 7, args, 20000),
              "SIGINT ignored": _train(tmp_path, "d" * 90, args, 10, ignore_sigint=True)}
    _assert_same(ref, others)


def _assert_same(ref: dict[str, np.ndarray], others: dict[str, dict[str, np.ndarray]]) -> None:
    for how, got in others.items():
        assert got.keys() == ref.keys()
        for name in ref:
            assert np.array_equal(got[name], ref[name]), f"{name} differs with {how}"


@pytest.mark.parametrize("args", [
    ["--n-embd", "32", "--batch-size", "8", "--seed", "7", "--steps", "150"],
    ["--arch", "gpt2", "--data-format", "text", "--data", str(DATA_DIR / "tinyshakespeare.txt"),
     "--n-embd", "128", "--n-layer", "4", "--n-head", "4", "--block-size", "64",
     "--batch-size", "12", "--steps", "40", "--eval-every", "20", "--eval-iters", "2"],
], ids=["n_embd32_B8", "gpt2_text"])
def test_multicore_runs_are_bit_identical(tmp_path, args):
    """multicore, same thread count: the same seeded run three times gives the same bits.
    Futhark's scheduler split each reduction by timing, and its reduce_by_index added an
    embedding row's terms by atomics; build.sh's multicore_fixup fixes the split and
    layers.fut's embedding_backward adds in position order (docs/reproducibility.md)."""
    need_backend("multicore")
    args = ["--backend", "multicore", *([] if "--data" in args else ["--data", str(NAMES_TXT)]),
            *args]
    ref = _train(tmp_path, "a", args, 10)
    _assert_same(ref, {"a second run": _train(tmp_path, "b" * 40, args, 3000),
                       "a third run": _train(tmp_path, "c" * 7, args, 20000)})


@pytest.mark.parametrize("n_embd,batch", [(16, 1), (16, 4), (32, 8)])
def test_gradient_does_not_depend_on_heap_history(n_embd, batch):
    """Thirty loss_grad calls on the same model and batch, with host allocations of random
    sizes between them (so the kernels' arrays land elsewhere; the first call allocates
    fresh memory, later ones reuse Futhark's free list), give one gradient, bit for bit."""
    need_backend("c")
    from conftest import get_runtime
    from microgpt_fut.models.microgpt import MicrogptConfig, MicrogptModel

    rt = get_runtime("c")
    model = MicrogptModel.init(rt, MicrogptConfig(27, n_embd, 4, 1, 16), 7)
    rng = np.random.default_rng(n_embd * 100 + batch)
    tokens = rng.integers(0, 27, size=(batch, 17))
    n_pos = rng.integers(3, 17, size=batch)
    junk, digests = [], set()
    for _ in range(30):
        junk.append(np.empty(int(rng.integers(1, 20000)), np.uint8))
        loss, grad = model.loss_grad(tokens, n_pos)
        h = hashlib.sha256(np.float32(loss).tobytes())
        for name in sorted(grad):
            h.update(grad[name].tobytes())
        digests.add(h.hexdigest())
    assert len(digests) == 1, f"{len(digests)} different gradients from 30 identical calls"


def test_an_evaluation_on_multicore_does_not_depend_on_the_calls_before_it(tmp_path):
    """A run's evaluations, cold (its first calls) and warm, equal the mean of one-batch
    calls' losses, bit for bit. multicore splits a call's sums by how many batches it
    holds, and the calls' batch counts came from timing: a resumed run's first evaluation
    differed from the straight run's in the last bits (new-user trial of issue 43)."""
    need_backend("multicore")
    from conftest import get_runtime
    from microgpt_fut.cli.train import plan_of

    p = plan_of(["--arch", "gpt2", "--data-format", "text", "--data",
                 str(DATA_DIR / "tinyshakespeare.txt"), "--n-embd", "128", "--n-layer", "4",
                 "--n-head", "4", "--block-size", "64", "--batch-size", "12",
                 "--eval-iters", "6", "--out", str(tmp_path / "x.safetensors")])
    data = p.kind.open(p)
    run = p.start(get_runtime("multicore", "gpt2"), data, p.config(data))
    cold, warm = run.evaluate(), run.evaluate()
    want = [float(np.mean([run.model.loss(b) for b in run.dataset.eval_batches(
                split, run.settings, run.step)], dtype=np.float64)) for split in ("train", "val")]
    assert list(cold) == want and list(warm) == want
