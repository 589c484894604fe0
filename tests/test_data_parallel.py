"""--threads: a batch split over several c contexts trains like the whole batch on one.

The references are the single-context kernels: the gradient of the whole batch
from ``MicrogptModel.loss_grad`` and the Adam step of ``MicrogptModel.train`` (train.fut), against
the shards' weighted gradients and the host's NumPy Adam.
"""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from cli_helpers import assert_one_line_error, diverge, lines_run, need_backend, small_data
from microgpt_fut.cli.commands import main
from microgpt_fut.data.lines import load_data
from microgpt_fut.parallel.host_state import DataParallelModel, runtimes, shard_rows
from microgpt_fut.models.microgpt import MicrogptModel
from microgpt_fut.training.family import FAMILIES
from microgpt_fut.training.optimizer import Adam
from microgpt_fut.training.settings import Settings


@pytest.fixture(scope="module")
def rts():
    """Three c contexts."""
    need_backend("c")
    from conftest import get_runtime

    return runtimes(get_runtime("c"), 3)


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


@pytest.mark.parametrize("batch,threads", [(1, 3), (3, 2), (7, 3), (4, 4), (5, 1)])
def test_shard_rows_cover_the_batch_evenly(batch, threads):
    shards = shard_rows(batch, threads)
    assert len(shards) == min(batch, threads)
    rows = [i for s in shards for i in range(s.start, s.stop)]
    assert rows == list(range(batch))
    sizes = [s.stop - s.start for s in shards]
    assert max(sizes) - min(sizes) <= 1


def test_sharded_gradient_is_the_whole_batch_gradient(rts, tiny):
    """Rows of 6, 3 and 1 valid positions on 2 and 3 threads: the shards' gradients,
    weighted by their positions, equal the gradient of the mean over all positions."""
    whole = MicrogptModel.from_arrays(rts[0], tiny.config, tiny.params)
    loss, grad = whole.loss_grad(tiny.tokens, tiny.n_pos)
    for n in (2, 3):
        dp = DataParallelModel(rts[:n], MicrogptModel.from_arrays(rts[0], tiny.config, tiny.params))
        got_loss, got = dp.loss_grad(tiny.tokens, tiny.n_pos)
        assert got_loss == pytest.approx(loss, rel=1e-6)
        for name in grad:
            assert rel_err(got[name], grad[name]) < 1e-6, (n, name)


def test_sharded_adam_steps_equal_the_kernels(rts, tiny):
    """Three steps on 3 threads (the summed gradient, then the kernels' apply_gradient)
    against three steps of the train kernel."""
    tokens = np.stack([tiny.tokens, tiny.tokens[::-1], tiny.tokens])
    n_pos = np.stack([tiny.n_pos, tiny.n_pos[::-1], tiny.n_pos])
    ref = MicrogptModel.from_arrays(rts[0], tiny.config, tiny.params)
    ref_losses = ref.train(tokens, n_pos, Adam(lr=0.05), 10)[0]
    dp = DataParallelModel(rts, MicrogptModel.from_arrays(rts[0], tiny.config, tiny.params))
    losses = dp.train(tokens, n_pos, Adam(lr=0.05), 10)[0]
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    assert dp.step() == ref.step() == 3
    (m, v), (ref_m, ref_v) = dp.adam(), ref.adam()
    for name, p in ref.params().items():
        assert rel_err(dp.params()[name], p) < 1e-5, name
        assert rel_err(m[name], ref_m[name]) < 1e-5, name
        assert rel_err(v[name], ref_v[name]) < 1e-4, name
    # sampling split over the 3 contexts: the single context's samples, row for row
    for n, first in ((7, 0), (2, 5), (0, 0)):
        np.testing.assert_array_equal(
            FAMILIES["microgpt"].names(dp, 11, n, 0.8, first),
            FAMILIES["microgpt"].names(MicrogptModel.from_arrays(rts[0], tiny.config,
                                                                 dp.params()), 11, n, 0.8, first))
    # issue 41: paced continuations split over the contexts, the single context's one call
    prompts = [[1, 2], [3], [0, 4, 2], [5, 1], [2]]
    one = MicrogptModel.from_arrays(rts[0], tiny.config, dp.params()).generate_prompts(
        4, 1.0, 0, prompts, 9, first=3)
    cont = dp.start_prompts(4, 1.0, 0, prompts, first=3)
    out = np.concatenate([cont.advance(k) for k in (2, 1, 8)], axis=1)
    for i, p in enumerate(prompts):
        np.testing.assert_array_equal(out[i, len(p) - 1:len(p) + 8], one[i])


def test_threads_run_is_reproducible_and_resumes_exactly(rts, tmp_path):
    """Two 2-thread runs are bit-identical, and so is one resumed at step 6."""
    docs, info = load_data(small_data(tmp_path, 40))
    from microgpt_fut.models.microgpt import MicrogptConfig

    config = MicrogptConfig(len(set("".join(docs))) + 1, n_embd=8, n_head=2, block_size=8)
    settings = Settings(num_steps=12, batch_size=5, steps_per_call=4, threads=2)
    runs = []
    for _ in range(2):
        t = lines_run(rts[0], docs, settings, config, info)
        t.run()
        runs.append(t)
    a, b = runs
    assert np.array_equal(a.losses, b.losses) and a.step == 12
    half = lines_run(rts[0], docs, settings, config, info)
    half.run(until=6)
    resumed = lines_run(rts[0], docs, settings, info=info, ck=half.checkpoint())
    resumed.run()
    assert np.array_equal(resumed.losses, a.losses)
    for name, p in a.model.params().items():
        assert np.array_equal(resumed.model.params()[name], p), name
    assert isinstance(a.model, DataParallelModel)
    one_row = lines_run(rts[0], docs, Settings(num_steps=2, threads=3), config, info)
    assert isinstance(one_row.model, MicrogptModel)
    # and its losses are one context's, to float32 rounding
    single = lines_run(rts[0], docs, Settings(num_steps=12, batch_size=5), config, info)
    single.run()
    np.testing.assert_allclose(a.losses, single.losses, rtol=1e-4)


def test_cli_threads(tmp_path):
    need_backend("c")
    data = small_data(tmp_path, 60)
    out = tmp_path / "m.safetensors"
    r = CliRunner().invoke(main, ["train", "--data", str(data), "--threads", "2", "--steps", "4",
                                  "--batch-size", "4", "--out", str(out), "--samples", "2"])
    assert r.exit_code == 0, r.output
    assert "backend: c on 2 threads" in r.output and out.exists()
    # one document per step cannot be split: the plain device-resident run
    r = CliRunner().invoke(main, ["train", "--data", str(data), "--threads", "2", "--steps", "4",
                                  "--out", str(tmp_path / "one.safetensors"), "--samples", "0"])
    assert r.exit_code == 0 and "backend: c\n" in r.output, r.output
    one = CliRunner().invoke(main, ["sample", "--checkpoint", str(out), "-n", "9"])
    three = CliRunner().invoke(main, ["sample", "--checkpoint", str(out), "-n", "9",
                                      "--threads", "3"])
    assert one.exit_code == three.exit_code == 0 and one.output == three.output
    assert len(one.output.splitlines()) >= 9
    for args, fragment in ((["--threads", "0"], "--threads"),
                           (["--threads", "2", "--backend", "multicore"], "--threads 2")):
        r = CliRunner().invoke(main, ["train", "--data", str(data), "--out",
                                      str(tmp_path / "x.safetensors"), *args])
        assert_one_line_error(r, fragment)
        assert r.exit_code == 2


def test_cli_interrupt_and_resume_with_threads(tmp_path, monkeypatch):
    """Ctrl-C after step 8 of a 2-thread run: the hint names --threads 2, and resuming
    with it gives the straight 2-thread run's checkpoint bit for bit."""
    import os
    import signal

    from safetensors.numpy import load_file

    need_backend("c")
    data = small_data(tmp_path, 40)
    common = ["train", "--data", str(data), "--batch-size", "3", "--steps", "16",
              "--threads", "2", "--samples", "3", "--steps-per-call", "4"]
    full = CliRunner().invoke(main, [*common, "--out", str(tmp_path / "full.safetensors")])
    assert full.exit_code == 0, full.output
    part = tmp_path / "part.safetensors"
    real = DataParallelModel.train

    def train_then_signal(self, *a, **kw):
        out = real(self, *a, **kw)
        if self.step() == 8:
            os.kill(os.getpid(), signal.SIGINT)
        return out

    with monkeypatch.context() as m:
        m.setattr(DataParallelModel, "train", train_then_signal)
        r = CliRunner().invoke(main, [*common, "--out", str(part)])
    assert r.exit_code == 130 and "--resume" in r.stderr and "--threads 2" in r.stderr, r.output
    r2 = CliRunner().invoke(main, ["train", "--resume", str(part), "--threads", "2",
                                   "--samples", "3"])
    assert r2.exit_code == 0 and "at step 8 of 16" in r2.output, r2.output
    a, b = load_file(str(part)), load_file(str(tmp_path / "full.safetensors"))
    assert a.keys() == b.keys()
    for name in a:
        assert np.array_equal(a[name], b[name]), name


def test_divergence_on_threads_names_the_first_bad_step(rts, tmp_path):
    """lr 1e30 on 2 threads: the same first bad step whether the calls fuse 1 or 5 steps,
    and the run is left at the last good state (finite, step = bad step - 1)."""
    docs, info = load_data(small_data(tmp_path, 40))
    from microgpt_fut.models.microgpt import MicrogptConfig

    config = MicrogptConfig(len(set("".join(docs))) + 1, n_embd=8, n_head=2, block_size=8)
    bad = [diverge(lines_run(rts[0], docs,
                             Settings(num_steps=20, batch_size=4, optimizer=Adam(lr=1e30),
                                      steps_per_call=k, threads=2), config, info))
           for k in (1, 5)]
    assert bad[0] == bad[1]


def test_sample_threads_needs_c(tmp_path):
    r = CliRunner().invoke(main, ["sample", "--threads", "2", "--backend", "multicore",
                                  "--checkpoint", str(tmp_path / "none.safetensors")])
    assert_one_line_error(r, "--threads 2")
    assert r.exit_code == 2
