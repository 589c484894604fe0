"""Loading the compiled Futhark libraries and choosing an OpenCL device.

Each backend (c, multicore, opencl, cuda) is compiled by build.sh into
``build/<backend>/_microgpt_<backend>*.so``, a CFFI module made by futhark-ffi,
for each program: microgpt's (futhark/microgpt.fut, folder ``<backend>``) and
GPT-2's (futhark/gpt2.fut, folder ``gpt2_<backend>``).
This module finds and loads one, applies the pocl workaround where needed,
syncs the context where futhark-ffi does not, and frees every value before its
context (context.OwnedContext).
"""
from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from futhark_ffi import Futhark

from .context import OwnedContext

BACKENDS = ("c", "multicore", "opencl", "cuda")
# The Futhark programs: --arch microgpt (futhark/microgpt.fut) and gpt2 (futhark/gpt2.fut).
PROGRAMS = ("microgpt", "gpt2")
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


def library_name(backend: str, program: str = "microgpt") -> str:
    """build.sh's target (the folder under build/) of ``program`` on ``backend``:
    "c" for microgpt on c, "gpt2_c" for GPT-2 on c."""
    return backend if program == "microgpt" else f"{program}_{backend}"


def built_backends(program: str = "microgpt") -> list[str]:
    """Backends whose library of ``program`` build.sh has compiled, in BACKENDS order."""
    return [b for b in BACKENDS if module_path(library_name(b, program)) is not None]


def module_path(backend: str) -> Path | None:
    """build.sh's CFFI module for ``backend`` (a name under build/, e.g. "c" or the
    bench's "seed_port"): ``build/<backend>/_microgpt_<backend>*.so``, or None."""
    folder = build_dir() / backend
    found = sorted(folder.glob(f"_microgpt_{backend}*.so")) if folder.is_dir() else []
    return found[0] if found else None


def import_module(backend: str, path: Path):
    """The CFFI module at ``path`` (from ``module_path``), imported once per process
    as ``_microgpt_<backend>``; raises ImportError when it cannot be loaded."""
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
    memory: int = 0  # global memory in bytes (0: unknown)

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
                                    bool(d.type & cl.device_type.GPU),
                                    int(getattr(d, "global_mem_size", 0) or 0)))
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


def cuda_device_count() -> int | None:
    """Number of CUDA devices the driver reports (0 when it finds none), or None
    when there is no CUDA driver library to ask."""
    import ctypes

    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        return None
    try:
        if lib.cuInit(0) != 0:  # e.g. CUDA_ERROR_NO_DEVICE
            return 0
        n = ctypes.c_int(0)
        if lib.cuDeviceGetCount(ctypes.byref(n)) != 0:
            return None
        return n.value
    except AttributeError:
        return None


def check_cuda_device(index: int) -> None:
    """Raise BackendError when ``--device index`` names no CUDA device.

    Futhark's CUDA backend takes "#N" as the N-th device (skipping compute-prohibited
    ones) and silently falls back to the device of highest compute capability when
    there is none, so the index is checked here. When the driver cannot be asked,
    the index is passed on unchecked.
    """
    if index < 0:
        raise BackendError(f"--device {index} is out of range: CUDA devices are numbered from 0")
    n = cuda_device_count()
    if n == 0:
        raise BackendError("no CUDA device found: use --backend opencl or c")
    if n is not None and index >= n:
        raise BackendError(f"--device {index} is out of range: there are {n} CUDA devices "
                           f"(0..{n - 1})")


# OpenCL build options that avoid pocl 3.1's miscompiled whole-array reduction:
# pocl's optimiser drops the reset of the work-group counter in Futhark's
# single-pass reduction, so every call after the first returns stale memory.
# The other verified fix (every *.segred_tblock_size_* tuned to 1) is faster but
# crashed pocl in our batched training kernel (B >= 2), so this one is used.
POCL_BUILD_OPTIONS = ("-cl-opt-disable",)


class _LibWithBuildOptions:
    """A futhark-ffi ``lib`` whose new context configs carry OpenCL build options.

    futhark-ffi creates the config and the context in one constructor, with no
    hook in between; this proxy adds ``futhark_context_config_add_build_option``
    calls to ``futhark_context_config_new`` and forwards everything else.
    """

    def __init__(self, lib, options):
        self._lib = lib
        self._options = [o.encode() for o in options]

    def __getattr__(self, name):
        return getattr(self._lib, name)

    def __dir__(self):  # futhark-ffi takes the C type of every listed name: list C functions only
        return [n for n in dir(self._lib) if n != "futhark_context_config_new"]

    def futhark_context_config_new(self):
        cfg = self._lib.futhark_context_config_new()
        for opt in self._options:
            self._lib.futhark_context_config_add_build_option(cfg, opt)
        return cfg


class Runtime:
    """One loaded backend: a futhark-ffi context plus helpers that sync.

    ``entry(name, *args)`` calls an entry point; ``numpy(*values)`` copies
    results to NumPy after a ``futhark_context_sync``. ``device`` numbers an
    OpenCL device as ``opencl_devices`` does, or a CUDA device as the driver
    does; both are passed to Futhark as ``"#N"`` (its syntax for the N-th
    device). Raises BackendError when the backend is unknown, was not built,
    the device does not exist, or the context cannot be created.

    ``program`` picks the library: "microgpt" (default) or "gpt2".

    ``close()`` syncs and frees every value the context made, then the context;
    it also runs when the Runtime is collected and at interpreter exit. Values
    (e.g. a Model's state) must not be used after it.
    """

    def __init__(self, backend: str, device: int | None = None, quiet: bool = False,
                 pocl_workaround: bool = True, program: str = "microgpt"):
        if backend not in BACKENDS:
            raise BackendError(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")
        target = library_name(backend, program)
        path = module_path(target)
        if path is None:
            what = f"backend {backend!r}" if program == "microgpt" else f"{program} on backend {backend!r}"
            raise BackendError(f"{what} was not built (no library in "
                               f"{build_dir() / target}): run `BACKENDS={target} ./build.sh`")
        self.backend = backend
        self.program = program
        self.device: OpenCLDevice | None = None
        self.build_options: tuple[str, ...] = ()
        mod = import_module(target, path)
        kwargs = {}
        if backend == "opencl":
            self.device = choose_opencl_device(device)
            # Futhark (rts/c/backends/opencl.h) lists the devices of all platforms in
            # the order pyopencl does; "#N" with no name picks the N-th of them (a name
            # could match several devices, and a str would not pass through cffi).
            kwargs["device"] = f"#{self.device.index}".encode()
            if self.device.is_pocl and pocl_workaround:
                self.build_options = POCL_BUILD_OPTIONS
                mod = SimpleNamespace(lib=_LibWithBuildOptions(mod.lib, POCL_BUILD_OPTIONS),
                                      ffi=mod.ffi)
                if not quiet:
                    print(f"note: OpenCL device is pocl ({self.device.name}); building its "
                          f"kernels with {' '.join(POCL_BUILD_OPTIONS)} (pocl reduction bug "
                          "workaround)", file=sys.stderr)
        elif backend == "cuda" and device is not None:
            check_cuda_device(device)
            kwargs["device"] = f"#{device}".encode()
        elif device is not None:
            raise BackendError(f"--device applies to the opencl and cuda backends, not {backend!r}")
        # Futhark 0.25.32 copies the device string; older runtimes kept the pointer.
        self._device_arg = kwargs.get("device")
        try:
            self.fut = Futhark(mod, **kwargs)
        except ValueError as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else "unknown error"
            raise BackendError(f"cannot start the {backend} backend: {first}") from None
        self.lib = self.fut.lib
        self._ctx = OwnedContext(self.fut)

    def entry(self, name: str, *args):
        """Call entry point ``name``; raises RuntimeError with Futhark's message on failure
        (context.ContextClosed, a RuntimeError, after ``close``)."""
        try:
            return self._ctx.call(name, *args)
        except ValueError as e:
            raise RuntimeError(f"{self.backend} entry point {name} failed: {e}") from None

    def numpy(self, *values):
        """Copy Futhark arrays to NumPy (syncs first, so results are never stale)."""
        return self._ctx.numpy(*values)

    def sync(self) -> None:
        """Wait for all queued device work (futhark_context_sync)."""
        self._ctx.sync()

    def close(self) -> None:
        """Sync, free every value of this context, then the context (idempotent)."""
        self._ctx.close()

    @property
    def closed(self) -> bool:
        return self._ctx.closed
