"""Loading the compiled Futhark libraries and choosing an OpenCL device.

Each backend (c, multicore, opencl, cuda) is compiled by build.sh into
``build/<backend>/_microgpt_<backend>*.so``, a CFFI module made by futhark-ffi.
This module finds and loads one, applies the pocl workaround where needed,
and syncs the context where futhark-ffi does not.
"""
from __future__ import annotations

import atexit
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from futhark_ffi import Futhark

BACKENDS = ("c", "multicore", "opencl", "cuda")
POCL_PLATFORM = "Portable Computing Language"


class BackendError(RuntimeError):
    """A backend cannot be used; the message is one line meant for the user."""


def build_dir() -> Path:
    """Folder holding one sub-folder of compiled libraries per backend.

    ``$MICROGPT_FUT_BUILD`` when set, else ``build/`` at the repository root
    (the package is installed editable from the repository by build.sh).
    """
    env = os.environ.get("MICROGPT_FUT_BUILD")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "build"


def built_backends() -> list[str]:
    """Backends whose library build.sh has compiled, in BACKENDS order."""
    return [b for b in BACKENDS if _module_path(b) is not None]


def _module_path(backend: str) -> Path | None:
    folder = build_dir() / backend
    found = sorted(folder.glob(f"_microgpt_{backend}*.so")) if folder.is_dir() else []
    return found[0] if found else None


def _import_module(backend: str, path: Path):
    name = f"_microgpt_{backend}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules[name] = mod
    return mod


@dataclass(frozen=True)
class OpenCLDevice:
    """One OpenCL device as pyopencl lists it; ``index`` is its number in `devices`."""

    index: int
    platform: str
    name: str
    is_gpu: bool

    @property
    def is_pocl(self) -> bool:
        return POCL_PLATFORM in self.platform


def opencl_devices() -> list[OpenCLDevice]:
    """All OpenCL devices of all platforms, numbered in order (empty when none)."""
    try:
        import pyopencl as cl

        platforms = cl.get_platforms()
    except Exception:  # no ICD loader, or no platform at all
        return []
    out = []
    for p in platforms:
        try:
            devs = p.get_devices()
        except Exception:
            continue
        for d in devs:
            out.append(OpenCLDevice(len(out), p.name.strip(), d.name.strip(),
                                    bool(d.type & cl.device_type.GPU)))
    return out


def choose_opencl_device(index: int | None) -> OpenCLDevice:
    """The device numbered ``index``, or by default the first GPU, else the first device.

    Raises BackendError when there is no OpenCL device or the index is out of range.
    """
    devs = opencl_devices()
    if not devs:
        raise BackendError("no OpenCL platform found: install pocl-opencl-icd (build.sh does) "
                           "or a GPU driver, or use --backend c")
    if index is None:
        gpus = [d for d in devs if d.is_gpu]
        return gpus[0] if gpus else devs[0]
    if not 0 <= index < len(devs):
        raise BackendError(f"--device {index} is out of range: there are {len(devs)} OpenCL "
                           f"devices (0..{len(devs) - 1}); see `microgpt-fut devices`")
    return devs[index]


def pocl_tuning(lib) -> dict[str, int]:
    """Tuning that avoids pocl 3.1's miscompiled whole-array reduction.

    pocl drops the reset of the work-group counter in Futhark's single-pass
    reduction, so every call after the first returns stale memory. With one
    thread per reduction block (``*.segred_tblock_size_*`` = 1) the kernel takes
    a path that pocl compiles correctly; this was faster than the other verified
    fix (``-cl-opt-disable``). See shared notes and tests/test_pocl.py.
    """
    names = [lib.futhark_get_tuning_param_name(i) for i in range(lib.futhark_get_tuning_param_count())]
    from cffi import FFI

    ffi = FFI()
    names = [ffi.string(n).decode() for n in names]
    return {n: 1 for n in names if ".segred_tblock_size_" in n}


class Runtime:
    """One loaded backend: a futhark-ffi context plus helpers that sync.

    ``entry(name, *args)`` calls an entry point; ``numpy(*values)`` copies
    results to NumPy after a ``futhark_context_sync``. Raises BackendError when
    the backend is unknown, was not built, or its context cannot be created.
    """

    def __init__(self, backend: str, device: int | None = None, quiet: bool = False,
                 pocl_workaround: bool = True):
        if backend not in BACKENDS:
            raise BackendError(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")
        path = _module_path(backend)
        if path is None:
            raise BackendError(f"backend {backend!r} was not built (no library in "
                               f"{build_dir() / backend}): run `BACKENDS={backend} ./build.sh`")
        self.backend = backend
        self.device: OpenCLDevice | None = None
        mod = _import_module(backend, path)
        kwargs = {}
        if backend == "opencl":
            self.device = choose_opencl_device(device)
            kwargs["platform"] = self.device.platform
            kwargs["device"] = self.device.name
            if self.device.is_pocl and pocl_workaround:
                kwargs["tuning"] = pocl_tuning(mod.lib)
                if not quiet:
                    print(f"note: OpenCL device is pocl ({self.device.name}); applying the "
                          "reduction workaround (segred block size 1)", file=sys.stderr)
        elif device is not None and backend != "cuda":
            raise BackendError(f"--device applies to the opencl and cuda backends, not {backend!r}")
        try:
            self.fut = Futhark(mod, **kwargs)
        except ValueError as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else "unknown error"
            raise BackendError(f"cannot start the {backend} backend: {first}") from None
        self.lib = self.fut.lib
        atexit.register(self.sync)

    def entry(self, name: str, *args):
        """Call entry point ``name``; raises RuntimeError with Futhark's message on failure."""
        try:
            return getattr(self.fut, name)(*args)
        except ValueError as e:
            raise RuntimeError(f"{self.backend} entry point {name} failed: {e}") from None

    def numpy(self, *values):
        """Copy Futhark arrays to NumPy (syncs first, so results are never stale)."""
        return self.fut.from_futhark(*values)

    def sync(self) -> None:
        """Wait for all queued device work (futhark_context_sync)."""
        fut = getattr(self, "fut", None)
        if fut is not None:
            fut.lib.futhark_context_sync(fut.ctx)
