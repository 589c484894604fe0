"""Building a library's CFFI module from carried C, as build.sh would (futhark-ffi's
build step, the compiler and flags of the target's row in targets.txt, build.sh's
fix-ups), on a machine without build.sh's set-up.

On the GPU machine: the payload's CUDA C with the system's cc and CUDA toolkit
(host code only, -O1: the kernels are compiled by NVRTC when a context is
created). In the dry run: the c libraries' C from this checkout's build/, with
their rows' compiler and flags, and the CUDA C is only fixed up and its header parsed.

``python -m bench.gpu.build TARGET SOURCE_DIR BUILD_ROOT`` builds one (the run
starts it as a subprocess, which it can kill at its deadline).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .. import REPO_ROOT

# build.sh's cache_fixup: Futhark 0.25.32's cache_restore returns the cached PTX
# without a terminating NUL, and cuModuleLoadData reads it as a string.
CACHE_FIXUP = (re.compile(r"^  \*buf = malloc\(\*buflen\);$", re.M),
               "  *buf = calloc(*buflen + 1, 1);")
# build.sh's cuda_fixup: CUDA 13's cuda.h maps cuCtxCreate to cuCtxCreate_v4.
CUDA_CTX = ("cuCtxCreate(&ctx->cu_ctx, 0, ctx->dev)", "cuCtxCreate(&ctx->cu_ctx, NULL, 0, ctx->dev)")
TABLE = REPO_ROOT / "targets.txt"  # the build targets, build.sh's table
COLUMNS = ("program", "backend", "layout", "compiler", "flags", "family")


class BuildError(RuntimeError):
    """A module could not be built; the message is one line."""


def table_rows(kind: str, table: Path = TABLE) -> list[list[str]]:
    """targets.txt's rows of one kind ("target", "cflags", "ldflags"), without the kind."""
    rows = (line.split() for line in table.read_text().splitlines())
    return [r[1:] for r in rows if r and r[0] == kind]


def target_row(name: str) -> dict[str, str]:
    """A target's row of targets.txt: its program, backend, layout, compiler, flags and
    model family."""
    for row in table_rows("target"):
        if row[0] == name:
            return dict(zip(COLUMNS, row[1:]))
    raise BuildError(f"unknown target '{name}' (not in {TABLE})")


def targets_of(backend: str) -> tuple[str, ...]:
    """The targets that futhark's ``backend`` compiles ("cuda" -> ("cuda", "gpt2_cuda"))."""
    return tuple(row[0] for row in table_rows("target") if row[2] == backend)


def backend_of(name: str) -> str:
    """The Futhark backend of a build target ("gpt2_cuda" -> "cuda")."""
    return target_row(name)["backend"]


def compiler(name: str) -> str:
    """The target's C compiler as build.sh picks it: "clang" in the table is $CLANG, else
    the newest /usr/bin/clang-N, else clang on PATH, else $CC or cc, as "cc" is."""
    if target_row(name)["compiler"] == "clang":
        versions = sorted((p for p in Path("/usr/bin").glob("clang-[0-9]*")
                           if re.fullmatch(r"clang-\d+", p.name)),
                          key=lambda p: int(p.name.split("-")[1]))
        found = (os.environ.get("CLANG") or (versions and str(versions[-1]))
                 or shutil.which("clang"))
        if found:
            return found
    return os.environ.get("CC", "cc")


def cuda_dir() -> Path | None:
    """The CUDA toolkit: the first of $CUDA_HOME, /usr/local/cuda (build.sh's two) and
    the folder above nvcc's that has include/cuda.h; None when none has."""
    nvcc = shutil.which("nvcc")
    for d in (os.environ.get("CUDA_HOME"), "/usr/local/cuda",
              nvcc and Path(os.path.realpath(nvcc)).parent.parent):
        if d and (Path(d) / "include" / "cuda.h").is_file():
            return Path(d)
    return None


def fix_up(c_file: Path, backend: str, cuda: Path | None) -> list[str]:
    """Apply build.sh's fix-ups to generated C in place; returns the ones applied.

    The cache fix-up applies to GPU backends (build.sh applies it when generating,
    so carried C already has it: then it is reported as present); the cuCtxCreate
    one where the toolkit's cuda.h (or /usr/include/cuda.h) has cuCtxCreate_v4.
    Raises BuildError when a GPU backend's C has neither form of the cache reader.
    """
    text = c_file.read_text()
    done = []
    if backend in ("cuda", "opencl"):
        text, n = CACHE_FIXUP[0].subn(CACHE_FIXUP[1], text)
        if n:
            done.append("cache reader NUL-terminated")
        elif CACHE_FIXUP[1] in text:
            done.append("cache reader NUL-terminated (already)")
        else:
            raise BuildError(f"{c_file}: Futhark's cache_restore is not the form build.sh "
                             "fixes up (another Futhark version?)")
    if backend == "cuda":
        headers = [p / "include" / "cuda.h" for p in (cuda,) if p] + [Path("/usr/include/cuda.h")]
        if any(h.exists() and "cuCtxCreate_v4" in h.read_text(errors="replace") for h in headers):
            if CUDA_CTX[0] in text:
                text = text.replace(CUDA_CTX[0], CUDA_CTX[1])
                done.append("cuCtxCreate for CUDA 13")
    c_file.write_text(text)
    return done


def vector_bits(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The products' vector width as build.sh picks it: $VECTOR_BITS (256 or 512), else
    "512" on an Intel core with AVX-512 (``cpuinfo``'s vendor_id and flags), else "256".
    Raises BuildError for another $VECTOR_BITS."""
    try:
        lines = cpuinfo.read_text().splitlines()
    except OSError:
        lines = []
    intel = any(re.match(r"vendor_id.*GenuineIntel", line) for line in lines)
    avx512 = any(re.match(r"flags.* avx512f", line) for line in lines)
    machine = "512" if intel and avx512 else "256"
    given = os.environ.get("VECTOR_BITS", "")
    if given and given not in ("256", "512"):
        raise BuildError(f"VECTOR_BITS is '{given}'; give 256 or 512, or leave it unset for "
                         f"this machine's width ({machine} here)")
    return given or machine


def flags(name: str, cuda: Path | None) -> dict[str, str]:
    """CC, CFLAGS and LDFLAGS for futhark-ffi's build of target ``name``: its row's
    compiler and flag set for that compiler, $CUDA as ``cuda`` (flags naming it are left
    out without one) and $VECTOR_BITS as ``vector_bits()``."""
    cc = compiler(name)
    kind = "clang" if Path(cc).name.startswith("clang") else "other"
    env, flag_set, bits = {"CC": cc}, target_row(name)["flags"], vector_bits()
    for key in ("cflags", "ldflags"):
        words = [w for row in table_rows(key) if row[0] == flag_set
                 and row[1] in ("any", kind) for w in row[2:]]
        env[key.upper()] = " ".join(w.replace("$CUDA", str(cuda)).replace("$VECTOR_BITS", bits)
                                    for w in words if cuda is not None or "$CUDA" not in w)
    return env


def stage(target: str, source: Path, build_root: Path) -> Path:
    """Copy ``source``'s microgpt_<target>.{c,h,json} into build_root/<target> (emptied
    first), the C from ``.c.xz`` when that is what ``source`` holds (the payload);
    returns that folder. Raises BuildError when a file is missing."""
    import lzma

    out = build_root / target
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for ext in ("c", "h", "json"):
        src = source / f"microgpt_{target}.{ext}"
        packed = src.with_name(src.name + ".xz")
        if ext == "c" and not src.is_file() and packed.is_file():
            with lzma.open(packed) as f, open(out / src.name, "wb") as g:
                shutil.copyfileobj(f, g, 1 << 20)
            continue
        if not src.is_file():
            raise BuildError(f"{src} is missing")
        shutil.copy2(src, out / src.name)
    return out


def build(target: str, source: Path, build_root: Path) -> float:
    """Stage, fix up and compile ``target``'s CFFI module into build_root/<target>
    (where microgpt_fut.backend.runtime finds it through $MICROGPT_FUT_BUILD); returns the
    seconds it took. Raises BuildError with the compiler's last line on failure."""
    t0 = time.perf_counter()
    backend = backend_of(target)
    cuda = cuda_dir() if backend == "cuda" else None
    out = stage(target, source, build_root)
    applied = fix_up(out / f"microgpt_{target}.c", backend, cuda)
    env = {**os.environ, **flags(target, cuda)}
    print(f"building {target}: {env['CC']} {env['CFLAGS']} {env['LDFLAGS']}".rstrip()
          + (f"; fix-ups: {', '.join(applied)}" if applied else ""), flush=True)
    code = ("import sys; from futhark_ffi.build import build; "
            f"build('microgpt_{target}', 'microgpt_{target}').compile()")
    proc = subprocess.run([sys.executable, "-c", code], cwd=out, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    (out / "build.log").write_text(proc.stdout)
    if proc.returncode != 0:
        last = [ln for ln in proc.stdout.splitlines() if ln.strip()][-1:] or ["no output"]
        raise BuildError(f"building {target} failed: {last[0][:300]} (see {out}/build.log)")
    if not list(out.glob(f"_microgpt_{target}*.so")):
        raise BuildError(f"building {target} made no _microgpt_{target}*.so")
    return time.perf_counter() - t0


def check_header(target: str, source: Path, scratch: Path) -> list[str]:
    """The dry run's look at carried CUDA C that cannot be compiled here: stage it, apply
    the fix-ups against this machine's cuda.h when there is one, and parse its header
    as futhark-ffi's build step does (cffi's cdef). Returns the fix-ups applied."""
    from futhark_ffi.build import build as ffi_build

    out = stage(target, source, scratch)
    applied = fix_up(out / f"microgpt_{target}.c", backend_of(target), cuda_dir())
    cwd = os.getcwd()
    try:
        os.chdir(out)
        ffi_build(f"microgpt_{target}", f"microgpt_{target}")
    finally:
        os.chdir(cwd)
    return applied


def main(argv: list[str]) -> int:
    """``TARGET SOURCE_DIR BUILD_ROOT``: build one module; ``--check-header`` first:
    only stage, fix up and parse (the dry run's look at the CUDA C)."""
    check = argv[:1] == ["--check-header"]
    argv = argv[1:] if check else argv
    if len(argv) != 3:
        print("usage: python -m bench.gpu.build [--check-header] TARGET SOURCE_DIR BUILD_ROOT",
              file=sys.stderr)
        return 2
    target, source, root = argv[0], Path(argv[1]), Path(argv[2])
    try:
        if check:
            applied = check_header(target, source, root)
            print(f"{target}: header parsed; fix-ups: {', '.join(applied) or 'none'}")
        else:
            print(f"built {target} in {build(target, source, root):.1f} s")
    except (BuildError, OSError) as e:
        print(f"build: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
