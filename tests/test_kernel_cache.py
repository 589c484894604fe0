"""The GPU backends' kernel cache (microgpt_fut.backend.kernel_cache and its use by Runtime).

Most tests drive the cache with a stand-in for futhark-ffi's Futhark that writes
what Futhark's runtime writes (its cache.h layout) to the file it is given, so
they run everywhere; the ones at the end use a real GPU backend when one is
built and its device is not pocl (where the cache file is not used), and check
on pocl that it is not.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from microgpt_fut.backend import kernel_cache as kc
from microgpt_fut.backend import runtime

from conftest import REPO_ROOT, get_runtime, no_cuda_reason


def futhark_cache_bytes(payload: bytes = b"PTX" * 1000) -> bytes:
    """A file as Futhark's cache_store writes it: header, total size, hash, payload."""
    size = len(kc.HEADER) + 8 + 32 + len(payload)
    return kc.HEADER + size.to_bytes(8, "little") + bytes(range(32)) + payload


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    """An empty cache folder, named by $MICROGPT_FUT_KERNEL_CACHE."""
    d = tmp_path / "kernels"
    monkeypatch.setenv(kc.ENV, str(d))
    return d


@pytest.fixture
def library(tmp_path) -> Path:
    lib = tmp_path / "lib" / "_microgpt_cuda.so"
    lib.parent.mkdir()
    lib.write_bytes(b"a compiled library")
    return lib


def compile_into(cache: kc.KernelCache, payload: bytes = b"PTX" * 1000) -> None:
    """What Futhark does with a file it was given and could not restore from."""
    cache.path.write_bytes(futhark_cache_bytes(payload))


def test_cache_dir_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(kc.ENV, str(tmp_path / "here"))
    assert kc.cache_dir() == tmp_path / "here"
    for off in ("off", "0", "no", "OFF", ""):
        monkeypatch.setenv(kc.ENV, off)
        assert kc.cache_dir() is None
    monkeypatch.delenv(kc.ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kc.cache_dir() == tmp_path / "xdg" / "microgpt-fut" / "kernels"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert kc.cache_dir() == Path.home() / ".cache" / "microgpt-fut" / "kernels"


def test_miss_then_commit_then_hit(folder, library):
    miss = kc.open_cache("cuda", library, "dev A")
    assert not miss.hit and not miss.damaged and miss.path != miss.final
    assert miss.path.parent == folder and not miss.final.exists()
    compile_into(miss)
    assert miss.commit()
    assert miss.final.exists() and not miss.path.exists()
    assert miss.digest_file.read_text().strip() == kc.file_digest(miss.final)
    hit = kc.open_cache("cuda", library, "dev A")
    assert hit.hit and hit.path == hit.final == miss.final
    assert not hit.commit()  # nothing new to store
    assert hit.final.exists()


def test_key_is_library_build_and_device(folder, library):
    a = kc.open_cache("cuda", library, "dev A")
    compile_into(a)
    a.commit()
    assert kc.open_cache("cuda", library, "dev A").hit
    assert not kc.open_cache("cuda", library, "dev B").hit
    assert not kc.open_cache("gpt2_cuda", library, "dev A").hit
    time.sleep(0.01)
    library.write_bytes(b"a rebuilt library")
    assert not kc.open_cache("cuda", library, "dev A").hit


@pytest.mark.parametrize("damage", ["flipped byte", "cut short", "no digest", "not futhark"])
def test_damaged_file_is_removed_and_compiled_again(folder, library, damage):
    first = kc.open_cache("cuda", library, "dev")
    compile_into(first)
    first.commit()
    data = bytearray(first.final.read_bytes())
    if damage == "flipped byte":  # passes Futhark's own checks: only the digest sees it
        data[-10] ^= 0xFF
    elif damage == "cut short":
        data = data[:-100]
    elif damage == "not futhark":
        data[:8] = b"NOTFUTH\0"
    if damage == "no digest":
        first.digest_file.unlink()
    else:
        first.final.write_bytes(bytes(data))
    again = kc.open_cache("cuda", library, "dev")
    assert again.damaged and not again.hit and again.path != again.final
    assert not again.final.exists() and not again.digest_file.exists()
    compile_into(again)
    assert again.commit()
    assert kc.open_cache("cuda", library, "dev").hit


def test_incomplete_compile_is_not_stored(folder, library):
    c = kc.open_cache("cuda", library, "dev")
    c.path.write_bytes(futhark_cache_bytes()[:-1])  # killed mid-write
    assert not c.commit()
    assert not c.final.exists() and not c.path.exists()
    c = kc.open_cache("cuda", library, "dev")
    assert not c.commit()  # Futhark wrote nothing (e.g. its folder went away)
    assert not c.final.exists()


def test_discard_removes_the_given_file(folder, library):
    c = kc.open_cache("cuda", library, "dev")
    compile_into(c)
    c.discard()
    assert not c.path.exists() and not c.final.exists()
    c = kc.open_cache("cuda", library, "dev")
    compile_into(c)
    c.commit()
    hit = kc.open_cache("cuda", library, "dev")
    hit.discard()  # a context given these kernels failed: they go
    assert not hit.final.exists() and not hit.digest_file.exists()


def test_rewritten_file_gets_its_new_digest(folder, library):
    c = kc.open_cache("cuda", library, "dev")
    compile_into(c)
    c.commit()
    hit = kc.open_cache("cuda", library, "dev")
    time.sleep(0.01)
    hit.final.write_bytes(futhark_cache_bytes(b"recompiled" * 100))  # Futhark's own store
    assert hit.commit()
    assert kc.open_cache("cuda", library, "dev").hit


def test_old_builds_are_pruned(folder, library):
    names = []
    for i in range(kc.KEEP + 2):
        library.write_bytes(f"build {i}".encode())
        os.utime(library, ns=(i * 10**9, i * 10**9))
        c = kc.open_cache("cuda", library, "dev")
        compile_into(c)
        c.commit()
        os.utime(c.final, ns=((i + 1) * 10**9, (i + 1) * 10**9))
        names.append(c.final.name)
    other = kc.open_cache("gpt2_cuda", library, "dev")
    compile_into(other)
    other.commit()
    kept = sorted(p.name for p in folder.glob("cuda-*.bin"))
    assert len(kept) == kc.KEEP and kept == sorted(names[-kc.KEEP:])
    assert other.final.exists()


def test_no_cache_when_off_or_unwritable(monkeypatch, tmp_path, library):
    monkeypatch.setenv(kc.ENV, "off")
    assert kc.open_cache("cuda", library, "dev") is None
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv(kc.ENV, str(blocker / "kernels"))
    assert kc.open_cache("cuda", library, "dev") is None
    monkeypatch.setenv(kc.ENV, str(tmp_path / "k"))
    assert kc.open_cache("cuda", tmp_path / "missing.so", "dev") is None
    monkeypatch.setenv(kc.ENV, str(tmp_path / "kérnels"))
    assert kc.open_cache("cuda", library, "dev") is None


# --- Runtime with a stand-in for futhark-ffi -------------------------------------


class FakeFuthark:
    """futhark-ffi's Futhark as far as the cache goes: restores from the file it is
    given when it looks complete, else "compiles" (counted) and stores there.
    ``fail_on_restore``: a context from restored kernels fails (a bad binary)."""

    compiles = 0
    given: list = []
    fail_on_restore = False

    def __init__(self, mod, **kwargs):
        self.ctx = None
        self.lib = type("Lib", (), {"futhark_context_sync": staticmethod(lambda ctx: 0)})()
        path = kwargs.get("cache_file_path")
        FakeFuthark.given.append(path)
        if path and kc.looks_complete(Path(path)):
            if FakeFuthark.fail_on_restore:
                raise ValueError("Compilation of OpenCL program failed.\nBuild log: ...")
            return
        FakeFuthark.compiles += 1
        if path:
            Path(path).write_bytes(futhark_cache_bytes())


@pytest.fixture
def fake_cuda(monkeypatch, library, folder):
    """Runtime("cuda") on the stand-in, with a device the driver "describes"."""
    monkeypatch.setattr(runtime, "module_path", lambda target: library)
    monkeypatch.setattr(runtime, "import_module", lambda t, p: type("Mod", (), {"lib": None}))
    monkeypatch.setattr(runtime, "Futhark", FakeFuthark)
    monkeypatch.setattr(runtime, "cuda_device_description", lambda index: "fake H200 sm_90")
    monkeypatch.setattr(runtime, "_ANNOUNCED", set())
    FakeFuthark.compiles, FakeFuthark.given, FakeFuthark.fail_on_restore = 0, [], False
    return folder


def test_runtime_compiles_once_and_says_so_once(fake_cuda, capsys):
    rt = runtime.Runtime("cuda")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "compiling the cuda kernels of microgpt" in err[0]
    assert str(fake_cuda) in err[0]
    assert FakeFuthark.compiles == 1 and not rt.kernel_cache.hit
    assert rt.kernel_cache.final.exists()
    rt2 = runtime.Runtime("cuda")
    assert rt2.kernel_cache.hit and FakeFuthark.compiles == 1
    assert FakeFuthark.given[-1] == str(rt2.kernel_cache.final)
    assert capsys.readouterr().err == ""
    runtime.Runtime("cuda", quiet=True, program="gpt2")  # compiles, quietly
    assert FakeFuthark.compiles == 2 and capsys.readouterr().err == ""


def test_runtime_recompiles_a_damaged_cache(fake_cuda, capsys):
    runtime.Runtime("cuda", quiet=True)
    cached = next(fake_cuda.glob("cuda-*.bin"))
    data = bytearray(cached.read_bytes())
    data[-1] ^= 1
    cached.write_bytes(bytes(data))
    rt = runtime.Runtime("cuda")
    assert FakeFuthark.compiles == 2 and rt.kernel_cache.damaged
    assert "failed their check" in capsys.readouterr().err
    assert runtime.Runtime("cuda").kernel_cache.hit


def test_runtime_retries_when_cached_kernels_fail(fake_cuda):
    runtime.Runtime("cuda", quiet=True)
    FakeFuthark.fail_on_restore = True
    rt = runtime.Runtime("cuda", quiet=True)  # the cached file is dropped, compiled again
    assert FakeFuthark.compiles == 2 and not rt.kernel_cache.hit
    assert FakeFuthark.given[-2] == str(rt.kernel_cache.final) != FakeFuthark.given[-1]


def test_runtime_without_cache(fake_cuda, monkeypatch, capsys):
    rt = runtime.Runtime("cuda", kernel_cache=False)
    assert rt.kernel_cache is None and FakeFuthark.given == [None]
    assert capsys.readouterr().err == ""  # kernel_cache=False: the caller's choice
    monkeypatch.setenv(kc.ENV, "off")
    rt = runtime.Runtime("cuda")
    assert rt.kernel_cache is None and FakeFuthark.given[-1] is None
    assert "kernel cache is off" in capsys.readouterr().err
    monkeypatch.setattr(runtime, "cuda_device_description", lambda index: None)
    monkeypatch.setenv(kc.ENV, str(fake_cuda))
    assert runtime.Runtime("cuda").kernel_cache is None  # the driver cannot be asked


def test_a_second_process_finds_the_file(fake_cuda, library):
    """Two processes, the same folder: the first compiles and stores, the second loads."""
    script = textwrap.dedent(f"""
        from pathlib import Path
        from microgpt_fut.backend import kernel_cache
        from microgpt_fut.backend import runtime
        compiled = []

        class Fake:  # Futhark: restore from a complete file, else compile and store
            def __init__(self, mod, cache_file_path=None, **kwargs):
                self.ctx, self.lib = None, None
                if not kernel_cache.looks_complete(Path(cache_file_path)):
                    compiled.append(1)
                    Path(cache_file_path).write_bytes({futhark_cache_bytes()!r})

        runtime.module_path = lambda target: Path({str(library)!r})
        runtime.import_module = lambda t, p: type("Mod", (), {{"lib": None}})
        runtime.Futhark = Fake
        runtime.cuda_device_description = lambda index: "fake H200 sm_90"
        rt = runtime.Runtime("cuda", quiet=True)
        print(rt.kernel_cache.hit, len(compiled))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO_ROOT / "driver"), os.environ.get("PYTHONPATH", "")]))
    outs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, timeout=60) for _ in range(2)]
    assert [o.stdout.split() for o in outs] == [["False", "1"], ["True", "0"]], outs
    assert len(list(fake_cuda.glob("cuda-*.bin"))) == 1
    assert not list(fake_cuda.glob("*.tmp-*"))


def test_cuda_description_without_a_driver(monkeypatch):
    monkeypatch.setattr(runtime, "_libcuda", lambda: None)
    assert runtime.cuda_device_description(None) is None
    assert runtime.cuda_device_count() is None


# --- real backends ----------------------------------------------------------------


def gpu_cache_backends() -> list:
    """cuda (skipped without a CUDA toolkit), and opencl where it runs on a device other
    than pocl (pocl keeps its own cache: test_pocl_uses_no_cache_file)."""
    out = [pytest.param("cuda", marks=pytest.mark.skip(reason=no_cuda_reason()))
           if runtime.module_path("cuda") is None else "cuda"]
    dev = runtime.choose_opencl_device(None) if runtime.opencl_devices() else None
    if runtime.module_path("opencl") is not None and dev is not None and not dev.is_pocl:
        out.append("opencl")
    return out


@pytest.mark.parametrize("backend", gpu_cache_backends())
def test_second_process_loads_cached_kernels(backend):
    """A context of this session's cache's library, then one in a fresh process: the
    second finds the file (a hit) and starts in seconds, not minutes."""
    rt = get_runtime(backend)  # compiles, if the cache was cold
    assert rt.kernel_cache is not None and rt.kernel_cache.final.exists()
    script = (f"import time; t = time.perf_counter(); from microgpt_fut.backend.runtime import Runtime; "
              f"rt = Runtime({backend!r}, quiet=True); "
              f"print(rt.kernel_cache.hit, time.perf_counter() - t)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(REPO_ROOT / "driver"), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=300)
    hit, seconds = out.stdout.split()
    assert hit == "True", out.stderr
    assert float(seconds) < 30


def test_pocl_uses_no_cache_file():
    """On pocl the runtime gives Futhark no cache file (there, a context with one
    did not finish in minutes): pocl keeps its own cache of compiled kernels."""
    devs = [d for d in runtime.opencl_devices() if d.is_pocl]
    if runtime.module_path("opencl") is None or not devs:
        pytest.skip("no opencl build on pocl here")
    rt = get_runtime("opencl")
    if not rt.device.is_pocl:
        pytest.skip("the session's opencl runtime is not on pocl")
    assert rt.kernel_cache is None and rt._device_description(None) is None
