"""Loading the compiled Futhark libraries and choosing an OpenCL device.

Each backend (c, multicore, opencl, cuda) is compiled by build.sh into
``build/<backend>/_microgpt_<backend>*.so``, a CFFI module made by futhark-ffi,
for each program: microgpt's (folder ``<backend>``) and GPT-2's (folder
``gpt2_<backend>``), both futhark/gpt.fut's entry points over the family's model.
This module finds and loads one, applies the pocl workaround where needed,
keeps the GPU backends' compiled kernels between processes (kernel_cache),
keeps the CPU backends' freed memory in the process (host_memory),
syncs the context where futhark-ffi does not, and frees every value before its
context (context.OwnedContext).
"""
from __future__ import annotations

import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from futhark_ffi import Futhark

from ..errors import BackendError, OptionConflict
from . import kernel_cache as kernel_cache_mod
from .context import OwnedContext
from .host_memory import keep_freed_memory

BACKENDS = ("c", "multicore", "opencl", "cuda")
# The Futhark programs: --arch microgpt and gpt2 (futhark/gpt.fut over family_<arch>.fut).
PROGRAMS = ("microgpt", "gpt2")
POCL_PLATFORM = "Portable Computing Language"


def build_dir() -> Path:
    """Folder holding one sub-folder of compiled libraries per backend.

    ``$MICROGPT_FUT_BUILD`` when set, else ``build/`` at the repository root
    (the package is installed editable from the repository by build.sh).
    """
    env = os.environ.get("MICROGPT_FUT_BUILD")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "build"


def library_name(backend: str, program: str = "microgpt") -> str:
    """build.sh's target (the folder under build/) of ``program`` on ``backend``:
    "c" for microgpt on c, "gpt2_c" for GPT-2 on c."""
    return backend if program == "microgpt" else f"{program}_{backend}"


def built_backends(program: str = "microgpt") -> list[str]:
    """Backends whose library of ``program`` build.sh has compiled, in BACKENDS order."""
    return [b for b in BACKENDS if module_path(library_name(b, program)) is not None]


# A step's work per micro-batch (rows x positions x parameters, about a sixth of its
# training FLOPs) from which multicore trains faster than c on 2 vCPUs: since idle
# workers poll for work, 1.6-1.8x at 1.4e7 (microgpt, n_embd 32, 2 layers, B 32 x T 16),
# 1.04-2.3x at 5.3e7 (README's names example) and 2.2x at 2.9e7 (GPT-2, n_embd 32, B 32 x
# T 32); below it c was as fast or faster in some runs (0.72-1.58x at 7.4e6), and 4x faster
# at microgpt's job (B 1, 6.7e4) (bench/README.md, "The default backend").
MULTICORE_WORK = 10**7


def fastest_cpu_backend(work: int, split: bool = False) -> str:
    """The CPU backend that runs ``work`` fastest when every library is built (the
    measured rule of ``default_backend``, whatever is built here)."""
    return "c" if split or work < MULTICORE_WORK else "multicore"


def default_backend(program: str, work: int, split: bool = False) -> tuple[str, str | None]:
    """The CPU backend that ``--backend`` defaults to for ``work``, and a note (one line,
    or None) when the faster library is not built.

    ``work``: rows x positions x parameters of one call (an int, no unit: train, a
    micro-batch, about a sixth of its training FLOPs; eval, an example's endings x
    block size). ``split``: the run is spread over CPU threads (--threads) or MPI
    ranks, each running one thread: c. Otherwise ``fastest_cpu_backend``'s choice
    where its library is built (multicore's reductions have a fixed split, so seeded
    runs repeat bit for bit for a given core count), c where multicore is not (with
    the note naming the command that builds it), and multicore where only it is.
    Raises nothing: a missing library is Runtime's error.
    """
    target = library_name("multicore", program)
    multicore = module_path(target) is not None
    c = module_path(library_name("c", program)) is not None
    fastest = fastest_cpu_backend(work, split)
    if multicore and not split and (fastest == "multicore" or not c):
        return "multicore", None
    if multicore or fastest == "c" or not c:
        return "c", None  # a missing c library: Runtime's error names the build command
    return "c", (f"note: running on c; `BACKENDS={target} ./build.sh` (minutes, once) builds "
                 f"the multicore library, which runs a model this size faster and is then "
                 f"the default")


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
    version: str = ""  # platform, device and driver versions (the kernel cache's key)

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
            version = "; ".join(str(getattr(o, a, "")).strip() for o, a in (
                (p, "version"), (d, "version"), (d, "driver_version")))
            out.append(OpenCLDevice(len(out), p.name.strip(), d.name.strip(),
                                    bool(d.type & cl.device_type.GPU),
                                    int(getattr(d, "global_mem_size", 0) or 0), version))
    return out


def _numbered(n: int, kind: str) -> str:
    """How n >= 1 devices of ``kind`` are numbered, for an out-of-range --device."""
    return (f"there is one {kind} device here, number 0" if n == 1 else
            f"the {kind} devices here are numbered 0..{n - 1}")


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
        raise BackendError(f"--device {index} is out of range: {_numbered(len(devs), 'OpenCL')}"
                           "; see `microgpt-fut devices`")
    return devs[index]


def _libcuda():
    """The CUDA driver library (ctypes), or None when there is none."""
    import ctypes

    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def cuda_device_count() -> int | None:
    """Number of CUDA devices the driver reports (0 when it finds none), or None
    when there is no CUDA driver library to ask."""
    import ctypes

    lib = _libcuda()
    if lib is None:
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


def cuda_device_description(index: int | None) -> str | None:
    """The driver version, name and compute capability of CUDA device ``index``
    (None: of every device, since Futhark then picks the one of highest compute
    capability), as one line; None when the driver cannot be asked."""
    import ctypes

    lib = _libcuda()
    if lib is None:
        return None
    try:
        version, count = ctypes.c_int(0), ctypes.c_int(0)
        if (lib.cuInit(0) != 0 or lib.cuDriverGetVersion(ctypes.byref(version)) != 0
                or lib.cuDeviceGetCount(ctypes.byref(count)) != 0):
            return None
        parts = [f"cuda driver {version.value}"]
        for i in range(count.value) if index is None else [index]:
            dev, major, minor = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
            name = ctypes.create_string_buffer(256)
            if (lib.cuDeviceGet(ctypes.byref(dev), i) != 0
                    or lib.cuDeviceGetName(name, 255, dev) != 0
                    or lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev) != 0  # CC major
                    or lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev) != 0):  # minor
                return None
            parts.append(f"#{i} {name.value.decode(errors='replace')} "
                         f"sm_{major.value}{minor.value}")
        return "; ".join(parts)
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
        raise BackendError(f"--device {index} is out of range: {_numbered(n, 'CUDA')}")


# Two pocl 3.1 miscompiles, each worked around on pocl only (tests/test_pocl.py):
# 1. Futhark's reductions that count finished thread blocks in a global counter
#    (segred_nonseg: whole-array reductions; segred_large: segments spread over
#    several blocks): pocl's optimised work-group code drops the last block's reset
#    of the counter, so every call after the first finds it non-zero and returns
#    stale memory. Those kernels, and only those, are built unoptimised: clang's
#    `optnone` on a kernel does what `-cl-opt-disable` (the former workaround, 118x
#    slower than c on microgpt's job) does to all of them. They are recognised by
#    their counter parameter, which Futhark names counters_mem_N.
# 2. Under pocl's default work-group method ("loopvec": work-item loops vectorised
#    across work-items), our optimised loss and training kernels segfault in their
#    first call (seen: a store in trainzisegmap_N's work-group function); under
#    "loops" (work-item loops, not vectorised across them) they run right. pocl
#    reads POCL_WORK_GROUP_METHOD when it compiles a kernel, i.e. on its first call.
#    Its kernel cache is keyed by the program's text, which therefore names the method.
POCL_UNOPTIMISED = "__attribute__((optnone))"
POCL_WORK_GROUP_METHOD = "loops"
_COUNTER_KERNEL = re.compile(r"^void (\w+)\((?=[^)]*\bcounters_mem_\d+\b)", re.M)


def pocl_program(source: str) -> tuple[str, list[str]]:
    """Futhark's OpenCL program ``source`` with every kernel that takes a block
    counter marked ``optnone`` (POCL_UNOPTIMISED) and a first line naming the
    work-group method, and the names of those kernels."""
    names: list[str] = []

    def mark(m: re.Match) -> str:
        names.append(m.group(1))
        return f"{POCL_UNOPTIMISED} {m.group(0)}"

    program = _COUNTER_KERNEL.sub(mark, source)
    return f"// built with POCL_WORK_GROUP_METHOD={POCL_WORK_GROUP_METHOD}\n{program}", names


class _PoclLib:
    """A futhark-ffi ``lib`` whose new context configs carry ``pocl_program``'s
    version of the library's OpenCL program (``futhark_context_config_set_program``).

    futhark-ffi creates the config and the context in one constructor, with no
    hook in between; this proxy sets the program in ``futhark_context_config_new``
    and forwards everything else. ``unoptimised`` lists the kernels marked.
    """

    def __init__(self, lib, ffi):
        self._lib = lib
        cfg = lib.futhark_context_config_new()
        try:
            source = ffi.string(lib.futhark_context_config_get_program(cfg)).decode()
        finally:
            lib.futhark_context_config_free(cfg)
        program, self.unoptimised = pocl_program(source)
        self._program = program.encode()

    def __getattr__(self, name):
        return getattr(self._lib, name)

    def __dir__(self):  # futhark-ffi takes the C type of every listed name: list C functions only
        return [n for n in dir(self._lib) if n != "futhark_context_config_new"]

    def futhark_context_config_new(self):
        cfg = self._lib.futhark_context_config_new()
        self._lib.futhark_context_config_set_program(cfg, self._program)
        return cfg


_ANNOUNCED: set[str] = set()


def _announce(backend: str, program: str, target: str, cache) -> None:
    """Say once per process and library, in one line on stderr, that the kernels are
    being compiled (when no cached ones are there) and where they will be kept."""
    if (cache is not None and cache.hit) or target in _ANNOUNCED:
        return
    _ANNOUNCED.add(target)
    folder = kernel_cache_mod.cache_dir()
    if cache is not None:
        where = f"kept in {cache.final.parent} for later runs"
        if cache.damaged:
            where = "the cached ones failed their check; " + where
    elif folder is None:
        where = f"not kept: the kernel cache is off (${kernel_cache_mod.ENV})"
    else:
        where = f"not kept: {folder} cannot be written"
    print(f"note: compiling the {backend} kernels of {program} (can take minutes; {where})",
          file=sys.stderr, flush=True)


class Runtime:
    """One loaded backend: a futhark-ffi context plus helpers that sync.

    ``entry(name, *args)`` calls an entry point; ``numpy(*values)`` copies
    results to NumPy after a ``futhark_context_sync``. ``device`` numbers an
    OpenCL device as ``opencl_devices`` does, or a CUDA device as the driver
    does; both are passed to Futhark as ``"#N"`` (its syntax for the N-th
    device). Raises BackendError when the backend is unknown, was not built,
    the device does not exist, or the context cannot be created.

    ``program`` picks the library: "microgpt" (default) or "gpt2".

    cuda, and opencl on a device other than pocl, compile every kernel when the
    context is created (minutes); their compiled kernels are kept between
    processes in the per-user kernel cache (``kernel_cache``; ``kernel_cache=False``
    or ``$MICROGPT_FUT_KERNEL_CACHE=off`` turns it off), and a context that
    compiles says so once per process in one line on stderr, unless ``quiet``.
    pocl compiles each kernel on its first call and keeps its own cache
    (``~/.cache/pocl``): Futhark's cache file is not used there (with one, creating
    microgpt's context had not finished after 240 s here, 55 CPU-seconds, where it
    takes 9 s without).

    ``close()`` syncs and frees every value the context made, then the context;
    it also runs when the Runtime is collected and at interpreter exit. Values
    (e.g. a MicrogptModel's state) must not be used after it.
    """

    def __init__(self, backend: str, device: int | None = None, quiet: bool = False,
                 pocl_workaround: bool = True, program: str = "microgpt",
                 kernel_cache: bool = True):
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
        # the kernels built unoptimised against pocl's reduction bug (pocl_program)
        self.pocl_unoptimised: list[str] = []
        mod = import_module(target, path)
        if backend in ("c", "multicore"):  # their arrays are host memory
            keep_freed_memory()
        kwargs = {}
        if backend == "opencl":
            self.device = choose_opencl_device(device)
            # Futhark (rts/c/backends/opencl.h) lists the devices of all platforms in
            # the order pyopencl does; "#N" with no name picks the N-th of them (a name
            # could match several devices, and a str would not pass through cffi).
            kwargs["device"] = f"#{self.device.index}".encode()
            if self.device.is_pocl and pocl_workaround:
                os.environ["POCL_WORK_GROUP_METHOD"] = POCL_WORK_GROUP_METHOD
                pocl_lib = _PoclLib(mod.lib, mod.ffi)
                self.pocl_unoptimised = pocl_lib.unoptimised
                mod = SimpleNamespace(lib=pocl_lib, ffi=mod.ffi)
                if not quiet:
                    print(f"note: OpenCL device is pocl ({self.device.name}); building its "
                          f"{len(pocl_lib.unoptimised)} kernels with a block counter "
                          f"unoptimised and the rest by work-group method "
                          f"{POCL_WORK_GROUP_METHOD} (pocl miscompile workaround)", file=sys.stderr)
        elif backend == "cuda" and device is not None:
            check_cuda_device(device)
            kwargs["device"] = f"#{device}".encode()
        elif device is not None:
            raise OptionConflict(f"--device applies to the opencl and cuda backends, not "
                                 f"{backend!r}")
        # Futhark 0.25.32 copies the device string; older runtimes kept the pointer.
        self._device_arg = kwargs.get("device")
        self.kernel_cache: kernel_cache_mod.KernelCache | None = None
        describe = self._device_description(device) if kernel_cache else None
        cache = (kernel_cache_mod.open_cache(target, path, describe)
                 if describe is not None else None)
        if describe is not None and not quiet:
            _announce(backend, program, target, cache)
        self.fut = self._create(mod, kwargs, cache, target, path, describe)
        self.lib = self.fut.lib
        self._ctx = OwnedContext(self.fut)

    def _device_description(self, device: int | None) -> str | None:
        """What identifies the device to the kernel cache, or None where the cache is
        not used (c, multicore, pocl, or a CUDA driver that cannot be asked)."""
        if self.backend == "cuda":
            return cuda_device_description(device)
        if self.backend == "opencl" and self.device is not None and not self.device.is_pocl:
            d = self.device
            return f"opencl {d.platform} | {d.name} | {d.version}"
        return None

    def _create(self, mod, kwargs: dict, cache, target: str, path: Path,
                describe: str | None) -> Futhark:
        """The futhark-ffi context, given the cache file when there is one. When a
        context given cached kernels fails, that file is removed and the kernels are
        compiled afresh, once. Raises BackendError with Futhark's first line."""
        while True:
            args = dict(kwargs, cache_file_path=str(cache.path)) if cache else kwargs
            try:
                fut = Futhark(mod, **args)
            except ValueError as e:
                if cache is not None:
                    cache.discard()
                    if cache.hit:  # the cached kernels may be the cause
                        cache = kernel_cache_mod.open_cache(target, path, describe)
                        continue
                first = str(e).strip().splitlines()[0] if str(e).strip() else "unknown error"
                raise BackendError(f"cannot start the {self.backend} backend: {first}") from None
            if cache is not None:
                cache.commit()
            self.kernel_cache = cache
            return fut

    def peak_memory(self) -> int | None:
        """Peak bytes of this context's arrays alive at once since it was created or
        ``reset_peak_memory`` ran, as Futhark counts them: device memory on the GPU
        backends, host memory on c and multicore (excluding its free-list cache)."""
        import json

        memory = json.loads(self.fut.report()).get("memory", {})
        value = memory.get("space 'device'", memory.get("default space"))
        return None if value is None else int(value)

    def reset_peak_memory(self) -> None:
        """Restart ``peak_memory``'s count (futhark_context_clear_caches; values alive stay
        valid). On c and multicore (Futhark 0.25.32) that is all it does: their free
        list is not emptied (build.sh's free_list_fixup returns large blocks to malloc as
        they are freed instead)."""
        self._ctx.sync()
        self.lib.futhark_context_clear_caches(self.fut.ctx)

    def entry(self, name: str, *args):
        """Call entry point ``name``; raises RuntimeError with Futhark's message on failure
        (errors.ContextClosed, a RuntimeError, after ``close``)."""
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
