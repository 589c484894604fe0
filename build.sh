#!/usr/bin/env bash
# Set up microgpt-fut on a fresh Debian 12/13 machine and compile the kernels.
#
#   ./build.sh                 system packages, futhark, venv, and the c backend's
#                              libraries (microgpt's and GPT-2's): what `train` needs
#   ./build.sh all             the same, and every backend (what the tests need)
#   BACKENDS="c multicore" ./build.sh    only these targets
#   GENERATE_ONLY=1 BACKENDS="cuda gpt2_cuda" MICROGPT_FUT_BUILD=DIR ./build.sh
#                              only the C that futhark generates (no CFFI module), to be
#                              compiled on another machine (bench/gpu/prepare)
#
# A target is a backend (microgpt's library), gpt2_<backend> (GPT-2's) or seed_port.
# `all` also compiles seed_port, the benchmark's baseline of the seed port's
# formulation (bench/seed_port.fut, futhark c), which the driver never loads; if that
# one fails, build.sh only warns.
#
# Idempotent: each step checks what is already there; kernels are recompiled only
# when a file under futhark/ (or bench/seed_port.fut), the compiler or the C flags
# changed (opencl compiles take minutes).
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
TOOLS=$ROOT/.toolchain          # private prefix for the Futhark compiler (git-ignored)
VENV=${VENV:-$ROOT/.venv}
BUILD=${MICROGPT_FUT_BUILD:-$ROOT/build}  # compiled libraries, one folder per backend (the driver reads the same variable)
FUTHARK_MIN=0.25.32
FUTHARK_PKGS="futhark libc6 libgmp10 libffi8 libnuma1 libtinfo6 zlib1g libcmark-gfm0.29.0.gfm.13 libcmark-gfm-extensions0.29.0.gfm.13"

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
die() { printf 'build.sh: error: %s\n' "$*" >&2; exit 1; }
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
case ${1:-} in
  all) ALL=1 ;;
  "") ALL=0 ;;
  *) die "unknown argument '$1' (use: ./build.sh, or ./build.sh all for every backend)" ;;
esac

# --- 1. system packages ------------------------------------------------------
need_pkgs=""
# openmpi-bin, libopenmpi-dev: `mpirun -n N microgpt-fut train` (mpi4py loads libmpi)
for p in ocl-icd-opencl-dev pocl-opencl-icd clinfo gcc python3-venv openmpi-bin libopenmpi-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need_pkgs="$need_pkgs $p"
done
# python3-venv is only needed when the python3 on PATH is Debian's own
if [ "$(command -v python3)" != /usr/bin/python3 ]; then need_pkgs=${need_pkgs// python3-venv/}; fi
if [ -n "${GENERATE_ONLY:-}" ]; then
  say "GENERATE_ONLY: no system packages or virtual environment needed"
elif [ -n "${need_pkgs// /}" ]; then
  say "installing Debian packages:$need_pkgs"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q $need_pkgs
else
  say "Debian packages present (OpenCL loader + headers, pocl, clinfo, gcc, Open MPI)"
fi

# --- 2. Futhark compiler -------------------------------------------------------
version_ok() {  # version_ok BINARY -> prints version, succeeds if >= FUTHARK_MIN
  local v
  v=$("$1" --version 2>/dev/null | sed -n 's/^Futhark \([0-9][0-9.]*[0-9]\).*/\1/p' | head -n1) || return 1
  [ -n "$v" ] || return 1
  echo "$v"
  [ "$(printf '%s\n%s\n' "$FUTHARK_MIN" "$v" | sort -V | head -n1)" = "$FUTHARK_MIN" ]
}
FUT=""
for cand in "${FUTHARK:-}" "$(command -v futhark || true)" "$TOOLS/bin/futhark"; do
  [ -n "$cand" ] && [ -x "$cand" ] || continue
  if v=$(version_ok "$cand"); then FUT=$cand; break; fi
  [ -n "$v" ] && say "ignoring $cand: Futhark $v is older than $FUTHARK_MIN"
done
if [ -z "$FUT" ]; then
  # Debian unstable's futhark needs a newer glibc than Debian 12/13 have, so it runs
  # through its own suite's loader from a private prefix; the system's APT sources are
  # not touched (see README, "How the compiler is installed").
  say "fetching futhark from Debian unstable into $TOOLS (private prefix, ~16 MB)"
  APTDIR=$TOOLS/apt
  mkdir -p "$APTDIR/sources" "$APTDIR/lists/partial" "$APTDIR/debs" "$TOOLS/prefix" "$TOOLS/bin"
  cat > "$APTDIR/sources/sid.sources" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  APTOPT=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$APTDIR/sources"
          -o Dir::State::Lists="$APTDIR/lists" -o Dir::Cache="$APTDIR/cache"
          -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
  mkdir -p "$APTDIR/cache/archives/partial"
  apt-get "${APTOPT[@]}" update -q || die "could not read Debian unstable's package index (is deb.debian.org reachable?)"
  (cd "$APTDIR/debs" && rm -f ./*.deb && apt-get "${APTOPT[@]}" download $FUTHARK_PKGS) \
    || die "could not download futhark from Debian unstable"
  for d in "$APTDIR"/debs/*.deb; do dpkg-deb -x "$d" "$TOOLS/prefix"; done
  cat > "$TOOLS/bin/futhark" <<WRAP
#!/bin/sh
# Runs Debian unstable's futhark with its own loader and libraries. LD_LIBRARY_PATH is
# not exported, so the C compiler that futhark starts keeps the system's libraries.
P="$TOOLS/prefix/usr/lib/x86_64-linux-gnu"
exec "\$P/ld-linux-x86-64.so.2" --library-path "\$P" "$TOOLS/prefix/usr/bin/futhark" "\$@"
WRAP
  chmod +x "$TOOLS/bin/futhark"
  v=$(version_ok "$TOOLS/bin/futhark") || die "futhark from Debian unstable is ${v:-unusable}; need >= $FUTHARK_MIN"
  FUT=$TOOLS/bin/futhark
fi
say "using $FUT (Futhark $("$FUT" --version | sed -n 's/^Futhark \([0-9][0-9.]*[0-9]\).*/\1/p' | head -n1))"

# --- 3. Python virtual environment --------------------------------------------
if [ -n "${GENERATE_ONLY:-}" ]; then
  :  # futhark alone generates the C
else
  if [ ! -x "$VENV/bin/python" ]; then
    say "creating virtual environment $VENV"
    python3 -m venv "$VENV"
  fi
  if ! "$VENV/bin/python" -c "import microgpt_fut, futhark_ffi, pytest, mpi4py" 2>/dev/null \
     || [ pyproject.toml -nt "$VENV/.installed" ]; then
    say "installing microgpt-fut (editable) with test extras into $VENV"
    "$VENV/bin/pip" install -q --upgrade pip
    "$VENV/bin/pip" install -q -e ".[test]"
    touch "$VENV/.installed"
  else
    say "virtual environment up to date"
  fi
fi

# --- 4. compile the kernels, one library per backend ---------------------------
default_backends="c multicore opencl seed_port gpt2_c gpt2_multicore gpt2_opencl"
CUDA_DIR=${CUDA_HOME:-/usr/local/cuda}  # the CUDA toolkit, when its headers are not in /usr/include
if command -v nvcc >/dev/null && [ -e /usr/include/cuda.h -o -e "$CUDA_DIR/include/cuda.h" ] \
   && ldconfig -p | grep -q 'libcuda\.so'; then
  default_backends="$default_backends cuda gpt2_cuda"
else
  say "cuda backend skipped: no CUDA toolkit with a driver library (libcuda) here"
fi
if [ "$ALL" = 1 ]; then BACKENDS=${BACKENDS:-$default_backends}; else BACKENDS=${BACKENDS:-c gpt2_c}; fi
# A target is a backend (microgpt's library), gpt2_<backend> (GPT-2's library,
# futhark/gpt2.fut) or seed_port.
futhark_backend() {  # futhark_backend TARGET: the futhark compiler command that builds it
  case $1 in seed_port) echo c ;; gpt2_*) echo "${1#gpt2_}" ;; *) echo "$1" ;; esac
}
cpu_backend() {  # cpu_backend TARGET: true for c/multicore targets, whose kernels are the generated C
  case $(futhark_backend "$1") in c|multicore) return 0 ;; *) return 1 ;; esac
}
program() {  # program TARGET: the Futhark source it is compiled from
  case $1 in seed_port) echo bench/seed_port.fut ;; gpt2_*) echo futhark/gpt2.fut ;;
             *) echo futhark/microgpt.fut ;; esac
}
# clang, when there is one (pocl depends on it), for the c/multicore kernels:
# it vectorises the generated loops, where gcc 12 leaves the big training
# function scalar (measured 4-6x faster training from n_embd 64 up).
CLANG=$(command -v clang || ls /usr/bin/clang-[0-9]* 2>/dev/null | sort -V | tail -n1 || true)
kernel_cc() {  # kernel_cc BACKEND: the C compiler for futhark-ffi's build of the generated C
  if cpu_backend "$1" && [ -n "$CLANG" ]; then echo "$CLANG"; else echo "${CC:-cc}"; fi
}
kernel_cflags() {  # kernel_cflags BACKEND: C flags for futhark-ffi's build of the generated C
  # c/multicore with clang: this machine's vector instructions, and float sums may be
  # reassociated (and fused into FMAs) so that dot products vectorise; the library is
  # built where it runs.  No -ffinite-math-only: the causal mask is -inf.
  # Reproducibility (docs/reproducibility.md): a seeded run must give the same bits
  # wherever its arrays land in memory.  clang's vectorised remainder loops
  # ("epilogue vectorisation", on where a float vector holds 16 lanes: AVX-512) are
  # entered through an alias check sized for the main loop, which sends short loops
  # to the scalar remainder when two arrays lie within VF*IC elements of each other,
  # and a reassociated sum then rounds differently.  Without vector epilogues the
  # path taken depends on trip counts only.  256-bit vectors keep AVX-512 machines'
  # loops as wide as AVX2's (clang 15 knows no Zen 4 tuning and would use 512 bits,
  # leaving loops under 64 elements scalar); on AVX2 both flags change no code.
  # gcc (used only when there is no clang): no reassociation, so no vectorised sums.
  # GPU backends: only host code, which -O1 compiles 6x faster than -O3 (their
  # kernels are compiled by the driver at run time).
  if cpu_backend "$1"; then
    case $(basename "$(kernel_cc "$1")") in
      clang*) echo "-O3 -g0 -fwrapv -DNDEBUG -march=native -fassociative-math -fno-signed-zeros" \
                   "-fno-trapping-math -ffp-contract=fast -fno-math-errno" \
                   "-mllvm -enable-epilogue-vectorization=false -mprefer-vector-width=256" ;;
      *) echo "-O3 -g0 -fwrapv -DNDEBUG -march=native -fno-math-errno" ;;
    esac
  elif [ "$(futhark_backend "$1")" = cuda ] && [ -d "$CUDA_DIR/include" ]; then
    echo "-O1 -g0 -fwrapv -DNDEBUG -I$CUDA_DIR/include"
  else
    echo "-O1 -g0 -fwrapv -DNDEBUG"
  fi
}
layout() {  # layout BACKEND CONSTANT: that futhark/layout.fut constant's value for BACKEND
  case $2 in
    # GPU backends: Futhark 0.25.32 stops with an internal error on the head slices.
    # seed_port: its vjp2 through sliced reads of the in-place-updated KV cache gives
    # wrong key/value gradients (against finite differences); the reshaped reads do not.
    heads_by_slices) if cpu_backend "$1" && [ "$1" != seed_port ]; then echo true; else echo false; fi ;;
    # c only: it is the fast CPU backend, and this form makes futhark's compile ~3x
    # longer (multicore: 30 -> 91 s of futhark, 72 -> 97 s of clang; GPU: longest already)
    last_layer_apart) if [ "$1" = c ]; then echo true; else echo false; fi ;;  # microgpt's only
    # c only: a sequential backend; the others run a batch's documents in parallel
    # (microgpt's backward by hand takes the whole batch anyway: layout.fut)
    docs_one_at_a_time) if [ "$(futhark_backend "$1")" = c ]; then echo true; else echo false; fi ;;
    # c and multicore: microgpt's hand-written backward (futhark/model_grad.fut); the GPU
    # backends keep vjp2's (on pocl the hand-written one corrupted the heap at batch 64)
    grad_by_hand) if cpu_backend "$1"; then echo true; else echo false; fi ;;
    *) return 1 ;;
  esac
}
layout_constants() {  # layout_constants: the names defined in futhark/layout.fut
  sed -n 's/^def *\([^ :]*\).*/\1/p' futhark/layout.fut
}
build_hash() {  # build_hash BACKEND: changes when the sources or the C flags change
  { cat futhark/*.fut "$(program "$1")"; kernel_cc "$1"; kernel_cflags "$1"
    for c in $(layout_constants); do echo "$c=$(layout "$1" "$c" || true)"; done
    echo "${CFLAGS:-}"; } |
    sha256sum | cut -c1-16
}
kernel_ldflags() {  # kernel_ldflags BACKEND: where the cuda build finds libcudart/libnvrtc
  if [ "$(futhark_backend "$1")" = cuda ] && [ -d "$CUDA_DIR/lib64" ]; then echo "-L$CUDA_DIR/lib64 -L$CUDA_DIR/lib64/stubs"; fi
}
cache_fixup() {  # cache_fixup FILE: Futhark 0.25.32's kernel cache reader, NUL-terminated
  # cache_restore returns the cached bytes without a terminating NUL, and the cuda
  # backend hands them to cuModuleLoadData as a PTX string, which reads past the
  # buffer; one byte more, zeroed, ends the string (harmless for OpenCL binaries).
  # Same substitution in bench/gpu/build.py (tests/test_gpu_bench.py compares them).
  sed -i 's/^  \*buf = malloc(\*buflen);$/  *buf = calloc(*buflen + 1, 1);/' "$1"
}
cuda_fixup() {  # cuda_fixup FILE: Futhark 0.25.32's host code against CUDA 13's cuda.h
  # CUDA 13 maps cuCtxCreate to cuCtxCreate_v4, which takes a parameters pointer
  # (NULL: the defaults); the generated code calls the 3-argument form.
  if grep -qs cuCtxCreate_v4 /usr/include/cuda.h "$CUDA_DIR/include/cuda.h"; then
    sed -i 's/cuCtxCreate(&ctx->cu_ctx, 0, ctx->dev)/cuCtxCreate(\&ctx->cu_ctx, NULL, 0, ctx->dev)/' "$1"
  fi
}
compile_backend() {  # compile_backend NAME: futhark, then the CFFI module; log in build/NAME/build.log
  local b=$1 out=$BUILD/$1 t0 c v
  t0=$(date +%s)
  mkdir -p "$out"
  rm -f "$out/.src_hash"
  {
    # each backend compiles its own copy of futhark/, with layout.fut set for it
    rm -rf "$out/src" && cp -r futhark "$out/src" && cp "$(program "$b")" "$out/src/" &&
    for c in $(layout_constants); do
      v=$(layout "$b" "$c") && grep -q "^def $c : bool = " "$out/src/layout.fut" ||
        { echo "futhark/layout.fut: '$c' must be 'def $c : bool = ...' with a value in build.sh's layout()"; return 1; }
      sed -i "s/^\(def $c : bool =\) .*/\1 $v/" "$out/src/layout.fut" || return 1
    done &&
    "$FUT" "$(futhark_backend "$b")" --library -o "$out/microgpt_$b" \
      "$out/src/$(basename "$(program "$b")")" &&
    if ! cpu_backend "$b"; then cache_fixup "$out/microgpt_$b.c"; fi &&
    if [ -z "${GENERATE_ONLY:-}" ]; then
      if [ "$(futhark_backend "$b")" = cuda ]; then cuda_fixup "$out/microgpt_$b.c"; fi &&
      # setuptools replaces (not extends) Python's own flags with $CFLAGS, so the
      # optimisation level is given here; -g0 halves gcc's time on the generated C.
      (cd "$out" && CC="$(kernel_cc "$b")" CFLAGS="$(kernel_cflags "$b") ${CFLAGS:-}" \
                     LDFLAGS="$(kernel_ldflags "$b") ${LDFLAGS:-}" \
                     "$VENV/bin/build_futhark_ffi" "microgpt_$b")
    fi
  } > "$out/build.log" 2>&1 || return 1
  # the C compiler and flags, for the tests that check what they promise
  printf '%s\n%s\n' "$(kernel_cc "$b")" "$(kernel_cflags "$b") ${CFLAGS:-}" > "$out/compiler.txt"
  build_hash "$b" > "$out/.src_hash"
  if [ -n "${GENERATE_ONLY:-}" ]; then say "backend $b: C generated in $(( $(date +%s) - t0 )) s"
  else say "backend $b compiled in $(( $(date +%s) - t0 )) s (C compiler: $(basename "$(kernel_cc "$b")"))"; fi
}
up_to_date() {  # up_to_date BACKEND: its library (GENERATE_ONLY: its C) is built from the current sources and flags
  [ -f "$BUILD/$1/.src_hash" ] && [ "$(cat "$BUILD/$1/.src_hash")" = "$(build_hash "$1")" ] &&
    if [ -n "${GENERATE_ONLY:-}" ]; then [ -f "$BUILD/$1/microgpt_$1.c" ]
    else ls "$BUILD/$1"/_microgpt_"$1"*.so >/dev/null 2>&1; fi
}
todo=() pids=()
for b in $BACKENDS; do
  if up_to_date "$b"; then say "backend $b up to date"; continue; fi
  todo+=("$b")
  say "compiling backend $b in the background (futhark $(futhark_backend "$b") --library; opencl takes several minutes)"
  compile_backend "$b" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || true; done
failed=""
for b in "${todo[@]}"; do up_to_date "$b" || failed="$failed $b"; done
for b in $failed; do
  printf 'build.sh: compiling backend %s failed; the end of %s:\n' "$b" "$BUILD/$b/build.log" >&2
  tail -n 20 "$BUILD/$b/build.log" >&2
done
failed=${failed/ seed_port/}  # the bench's baseline: the driver works without it
[ -z "$failed" ] || die "backends that failed to compile:$failed"
say "done. Try: $VENV/bin/microgpt-fut train --backend c"
