"""A clean exit: every Futhark value is freed before its context, on success, on error
and at interpreter exit, so an error exit prints its one line and nothing else.

futhark-ffi frees values and the context from the garbage collector in no fixed
order; a value freed through a freed context printed Futhark's memory log (dozens of
"Unreferencing block ..." lines read from freed memory) after the one-line error.
The subprocesses run with MALLOC_PERTURB_ so that freed memory is overwritten and a
use after free shows.
"""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import cffi
import pytest

from cli_helpers import need_backend, small_data
from microgpt_fut.backend.context import OwnedContext
from microgpt_fut.errors import ContextClosed

ENOSPC_THEN_CLI = textwrap.dedent("""
    import errno, sys
    import microgpt_fut.training.checkpoint as ckpt
    def full(f, data):
        raise OSError(errno.ENOSPC, "No space left on device")
    ckpt._write_all = full  # every save finds the disk full
    from microgpt_fut.cli.commands import main
    main(prog_name="microgpt-fut")
""")


def _python(code: str, *args, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, MALLOC_PERTURB_="165")
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _one_line(r: subprocess.CompletedProcess, *fragments: str) -> str:
    """The run failed with exactly one line on stderr beside the CLI's own progress
    lines, and nothing on stdout (its product, the samples, was never reached)."""
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stdout == "", r.stdout[:2000]
    lines = [ln for ln in r.stderr.splitlines()
             if not ln.startswith(("data: ", "model: ", "step "))]
    assert len(lines) == 1 and lines[0].startswith("Error: "), r.stderr[:2000]
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


@pytest.mark.parametrize("n_embd", [16, 64])
def test_full_disk_at_the_save_prints_one_line(tmp_path, n_embd):
    """The issue's case: training done, the save finds no space: exactly the error line."""
    need_backend("c")
    data = small_data(tmp_path)
    r = _python(ENOSPC_THEN_CLI, "train", "--data", data, "--steps", 50, "--samples", 0,
                "--n-embd", n_embd, "--out", "m.safetensors", cwd=tmp_path)
    _one_line(r, "No space left on device", "nothing was saved to 'm.safetensors'")


def test_failed_save_names_whose_checkpoint_is_kept(tmp_path):
    """--out held another run's checkpoint (replaced with --overwrite): when the save
    fails, the error says the file still holds that run's checkpoint, not this run's."""
    need_backend("c")
    data = small_data(tmp_path)
    first = subprocess.run([sys.executable, "-m", "microgpt_fut", "train", "--data", str(data),
                            "--steps", "7", "--samples", "0", "-q", "--out", "m.safetensors"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    r = _python(ENOSPC_THEN_CLI, "train", "--data", data, "--steps", 20, "--samples", 0,
                "--out", "m.safetensors", "--overwrite", cwd=tmp_path)
    line = _one_line(r, "still holds the checkpoint it held before this run started",
                     "step 7 of another run")
    assert "this run's" not in line


def test_divergence_exit_prints_one_line(tmp_path):
    need_backend("c")
    data = small_data(tmp_path)
    r = _python("from microgpt_fut.cli.commands import main; main(prog_name='microgpt-fut')",
                "train", "--data", data, "--steps", 30, "--lr", "1e30",
                "--out", "m.safetensors", cwd=tmp_path)
    _one_line(r, "training diverged at step", "nothing was saved")


def test_values_left_in_a_cycle_at_exit_are_freed_quietly(tmp_path):
    """A script that leaves a model, its state and the runtime in a reference cycle and
    exits without closing anything: nothing printed, status 0."""
    need_backend("c")
    code = textwrap.dedent("""
        from microgpt_fut.backend.runtime import Runtime
        from microgpt_fut.models.microgpt import MicrogptConfig, MicrogptModel
        from microgpt_fut.training.optimizer import Adam
        import numpy as np
        rt = Runtime("c", quiet=True)
        models = [MicrogptModel.init(rt, MicrogptConfig(27, 32, 4, 2, 16), s) for s in range(4)]
        toks = np.zeros((4, 3, 17), np.int64); n_pos = np.full((4, 3), 16)
        for m in models:
            m.train(toks, n_pos, Adam(), 10)
            m.cycle = models  # garbage only to the cycle collector
        grads = [m.loss_grad(toks[0], n_pos[0]) for m in models]
    """)
    r = _python(code, cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_a_runtime_collected_with_its_values_frees_them_first(tmp_path):
    """A runtime, a model and its state made garbage together in a reference cycle and
    collected mid-run (as an exception's traceback holding a run does): the values are
    freed before the context, nothing is printed (Futhark's memory log, read from the
    freed context, was), status 0."""
    need_backend("c")
    code = textwrap.dedent("""
        import gc
        import numpy as np
        from microgpt_fut.backend.runtime import Runtime
        from microgpt_fut.models.microgpt import MicrogptConfig, MicrogptModel
        from microgpt_fut.training.optimizer import Adam
        rt = Runtime("c", quiet=True)
        m = MicrogptModel.init(rt, MicrogptConfig(27, 32, 4, 2, 16), 0)
        m.train(np.zeros((2, 3, 17), np.int64), np.full((2, 3), 16), Adam(), 10)
        cycle = [rt, m]
        cycle.append(cycle)
        del rt, m, cycle
        gc.collect()
    """)
    r = _python(code, cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_a_context_collected_with_its_values_frees_it_after_them():
    """The cycle collector clears weak references before it runs finalizers: an
    OwnedContext collected in one cycle with a value it returned closes with no value
    left in its weak set, and frees its context only after that value's destructor."""
    ffi = cffi.FFI()
    log = []
    ctx = ffi.gc(ffi.new("int *"), lambda p: log.append("context"))
    value = ffi.gc(ffi.new("int *"), lambda p: log.append("futhark-ffi's destructor"))
    fut = SimpleNamespace(ctx=ctx, ffi=ffi,
                          lib=SimpleNamespace(futhark_context_sync=lambda c: log.append("sync")),
                          types={ffi.typeof(value): SimpleNamespace(
                              free=lambda c, p: log.append("value"))})
    owned = OwnedContext(fut)
    cycle = [owned, owned._track(value)]
    cycle.append(cycle)
    del owned, value, cycle, ctx, fut
    gc.collect()
    assert log == ["sync", "value", "context"]


def test_close_frees_values_before_the_context():
    """OwnedContext.close: sync, then each live value, then the context, once."""
    ffi = cffi.FFI()
    log = []
    ctx = ffi.gc(ffi.new("int *"), lambda p: log.append("context"))
    fut = SimpleNamespace(ctx=ctx, ffi=ffi,
                          lib=SimpleNamespace(futhark_context_sync=lambda c: log.append("sync")))
    owned = OwnedContext(fut)
    kept = [ffi.gc(ffi.new("int *"), lambda p: log.append("value")) for _ in range(3)]
    for v in kept:
        owned._values.add(v)
    dead = ffi.gc(ffi.new("int *"), lambda p: log.append("dead value"))
    owned._values.add(dead)
    del dead  # freed now, through the still-open context
    owned.close()
    assert log == ["dead value", "sync", "value", "value", "value", "context"]
    owned.close()
    del kept
    assert len(log) == 6 and owned.closed
    with pytest.raises(ContextClosed):
        owned.call("anything")


def test_runtime_close_ends_its_values():
    """A closed Runtime refuses entry points with one line; a fresh one works."""
    need_backend("c")
    from microgpt_fut.models.microgpt import MicrogptConfig, MicrogptModel
    from microgpt_fut.backend.runtime import Runtime

    rt = Runtime("c", quiet=True)
    model = MicrogptModel.init(rt, MicrogptConfig(5, 8, 2, 1, 4), 0)
    assert model.step() == 0
    rt.close()
    assert rt.closed
    with pytest.raises(RuntimeError, match="closed"):
        model.step()
    assert MicrogptModel.init(Runtime("c", quiet=True), MicrogptConfig(5, 8, 2, 1, 4),
                              0).step() == 0


CTRL_C_WHILE_IMPORTING = textwrap.dedent("""
    import builtins, runpy, sys
    import microgpt_fut.cli as cli
    real = builtins.__import__
    def ctrl_c_at_commands(name, *a, **kw):  # the signal lands while the commands load
        if name == "commands" or name.endswith("cli.commands"):
            raise KeyboardInterrupt
        return real(name, *a, **kw)
    builtins.__import__ = ctrl_c_at_commands
    sys.argv = ["microgpt-fut", "train", "--steps", "1"]
    {start}
""")


@pytest.mark.parametrize("start", ["cli.main()",
                                   "runpy.run_module('microgpt_fut', run_name='__main__')"],
                         ids=["console_script", "python_-m"])
def test_ctrl_c_while_the_commands_load_prints_one_line(tmp_path, start):
    """The console script (microgpt_fut.cli:main) and ``python -m microgpt_fut``,
    interrupted while numpy, click and the commands are imported, exit 130 with the one
    line a Ctrl-C inside a command gives, not a traceback of the imports."""
    r = subprocess.run([sys.executable, "-c", CTRL_C_WHILE_IMPORTING.replace("{start}", start)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stdout, r.stderr) == (130, "", "Error: interrupted\n")


def _with_stdout(how: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``python -m microgpt_fut ARGS`` with stdout on /dev/full ("full": every write fails
    with ENOSPC) or closed at the start ("closed": Python's sys.stdout is None)."""
    with open("/dev/full", "w") as full:
        return subprocess.run([sys.executable, "-m", "microgpt_fut", *args], cwd=cwd,
                              stdout=full if how == "full" else None,
                              stderr=subprocess.PIPE, text=True, timeout=300,
                              preexec_fn=(lambda: os.close(1)) if how == "closed" else None)


@pytest.mark.parametrize("how,reason", [("full", "No space left on device"),
                                        ("closed", "stdout is closed")])
def test_unwritable_stdout_is_one_line(tmp_path, how, reason):
    """A stdout that takes no writes (a full device; a descriptor closed at the start)
    ends --help, sample and train's samples with one line and exit 1 (they were a
    traceback, or for a closed stdout an AttributeError once the samples were lost);
    train's checkpoint is saved before its samples are printed."""
    need_backend("c")
    data = small_data(tmp_path)
    line = f"Error: cannot write to stdout: {reason}\n"
    for args in (["--help"], ["train", "--help"]):
        r = _with_stdout(how, args, tmp_path)
        assert (r.returncode, r.stderr) == (1, line), args
    r = _with_stdout(how, ["train", "--data", str(data), "--steps", "3", "-q", "--samples", "2",
                           "--out", "m.safetensors"], tmp_path)
    assert (r.returncode, r.stderr.splitlines()[-1:]) == (1, [line.strip()]), r.stderr
    assert "Traceback" not in r.stderr and (tmp_path / "m.safetensors").is_file()
    r = _with_stdout(how, ["sample", "--checkpoint", "m.safetensors", "-n", "3"], tmp_path)
    assert (r.returncode, r.stderr.splitlines()[-1:]) == (1, [line.strip()]), r.stderr
    assert "Traceback" not in r.stderr
