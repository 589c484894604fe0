#!/usr/bin/env bash
# Set up microgpt-fut on a fresh Debian 12/13 machine and compile the kernels.
#
#   ./build.sh                 system packages, futhark, venv, and the c backend's
#                              libraries (microgpt's and GPT-2's): what `train` needs
#   ./build.sh all             the same, and every backend (what the tests need)
#   BACKENDS="c multicore" ./build.sh    only these targets
#   VECTOR_BITS=256 ./build.sh  the products' vector width (256 or 512; by default 512 on
#                              Intel's AVX-512 cores, else 256)
#   ./build.sh targets         each target's program, backend, layout, C compiler and
#                              flags as this machine resolves targets.txt (nothing built)
#   GENERATE_ONLY=1 BACKENDS="cuda gpt2_cuda" MICROGPT_FUT_BUILD=DIR ./build.sh
#                              only the C that futhark generates (no CFFI module), to be
#                              compiled on another machine (bench/gpu/prepare)
#
# A target is a row of targets.txt: a backend (microgpt's library), gpt2_<backend>
# (GPT-2's) or seed_port, with its program, layout, C compiler and flags. Each target
# compiles its own copy of futhark/, whose layout.fut is futhark/layout_cpu.fut or
# futhark/layout_gpu.fut and, for c and multicore, whose block.fut (the products' block)
# is futhark/block_<VECTOR_BITS>.fut. `all` also compiles seed_port, the benchmark's baseline of the seed port's
# formulation (bench/seed_port.fut, futhark c), which the driver never loads; if that
# one fails, build.sh only warns.
#
# Idempotent: each step checks what is already there; kernels are recompiled only
# when a file under futhark/ (or bench/seed_port.fut), the target's row, the compiler,
# the C flags or (c, multicore) the vector width changed (opencl compiles take minutes).
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

# --- the targets: their programs, layouts, compilers and flags ------------------
# One table, targets.txt, which bench/gpu/build.py reads too.
TABLE=$ROOT/targets.txt
all_targets=$(awk '$1 == "target" { printf "%s%s", sep, $2; sep = " " }' "$TABLE")
field() {  # field TARGET COLUMN: the column (program, backend, layout, compiler, flags, family) of TARGET's row
  awk -v t="$1" -v c="$2" '
    $1 == "target" && $2 == t { split("program backend layout compiler flags family", k, " ")
                                for (i = 1; i <= 6; i++) if (k[i] == c) print $(i + 2); found = 1 }
    END { exit !found }' "$TABLE"
}
CUDA_DIR=${CUDA_HOME:-/usr/local/cuda}  # the CUDA toolkit, when its headers are not in /usr/include
flag_set() {  # flag_set cflags|ldflags SET COMPILER: that set's flags for COMPILER, $CUDA and $VECTOR_BITS filled in
  local f
  for f in $(awk -v k="$1" -v s="$2" -v cc="$3" '
               $1 == k && $2 == s && ($3 == "any" || $3 == cc) { for (i = 4; i <= NF; i++) print $i }' "$TABLE"); do
    case $f in *'$CUDA'*) [ -d "$CUDA_DIR" ] || continue; f=${f//\$CUDA/$CUDA_DIR} ;; esac
    f=${f//\$VECTOR_BITS/$VECTOR_BITS}
    printf '%s ' "$f"
  done | sed 's/ $//'
}
# clang for the c/multicore kernels: it vectorises the generated loops, where gcc 12
# leaves the big training function scalar (measured 4-6x faster training from n_embd
# 64 up), and the newer the better (clang 19 and 22 vectorise the products and the
# element-wise loops far better than 15: bench/README.md). The newest /usr/bin/clang-N,
# else clang on PATH; $CLANG picks another. Resolved again after step 1 installs one.
find_clang() {
  ls /usr/bin/clang-[0-9]* 2>/dev/null | grep -E '/clang-[0-9]+$' | sort -V | tail -n1 ||
    command -v clang || true
}
CLANG_SET=${CLANG:-}
CLANG=${CLANG:-$(find_clang)}
# The products' vector width, for the machine that builds (and runs) the kernels: each
# target's block.fut is futhark/block_<bits>.fut, and targets.txt's $VECTOR_BITS is clang's
# -mprefer-vector-width. 512 on Intel's AVX-512 cores, whose two 512-bit FMA units 256-bit
# blocks left half idle (products at 0.4-0.75 of NumPy's, bench/README.md); 256 elsewhere,
# AMD's Zen 4 included (its AVX-512 units work on 256 bits at a time, and its products
# reach NumPy's with 256-bit blocks). $VECTOR_BITS picks.
machine_bits() {  # 512 on an Intel core with AVX-512, else 256
  if grep -q '^vendor_id.*GenuineIntel' /proc/cpuinfo 2>/dev/null &&
     grep -q '^flags.* avx512f' /proc/cpuinfo; then echo 512; else echo 256; fi
}
GIVEN_BITS=${VECTOR_BITS:-}
case ${VECTOR_BITS:-} in
  256|512) ;;
  "") VECTOR_BITS=$(machine_bits) ;;
  *) die "VECTOR_BITS is '$VECTOR_BITS'; give 256 or 512, or leave it unset for this machine's width ($(machine_bits) here)" ;;
esac
block_bits() {  # block_bits TARGET: the block its source takes (GPU targets never call gemm.fut: 256)
  if [ "$(field "$1" layout)" = cpu ]; then echo "$VECTOR_BITS"; else echo 256; fi
}
kernel_cc() {  # kernel_cc TARGET: the C compiler for futhark-ffi's build of the generated C
  if [ "$(field "$1" compiler)" = clang ] && [ -n "$CLANG" ]; then echo "$CLANG"; else echo "${CC:-cc}"; fi
}
cc_kind() {  # cc_kind TARGET: its compiler as targets.txt's flag sets name it (clang, other)
  case $(basename "$(kernel_cc "$1")") in clang*) echo clang ;; *) echo other ;; esac
}
kernel_cflags() {  # kernel_cflags TARGET: C flags for futhark-ffi's build of the generated C
  flag_set cflags "$(field "$1" flags)" "$(cc_kind "$1")"
}
kernel_ldflags() {  # kernel_ldflags TARGET: where the cuda build finds libcudart/libnvrtc
  flag_set ldflags "$(field "$1" flags)" "$(cc_kind "$1")"
}

case ${1:-} in
  all) ALL=1 ;;
  "") ALL=0 ;;
  -h|--help|help)  # the usage above
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
    exit 0 ;;
  targets)  # each target's row as this machine resolves it (tests/test_gpu_bench.py)
    for b in $all_targets; do
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$b" "$(field "$b" program)" "$(field "$b" backend)" \
        "$(field "$b" layout)" "$(kernel_cc "$b")" "$(kernel_cflags "$b")" "$(kernel_ldflags "$b")"
    done
    exit 0 ;;
  *) die "unknown argument '$1' (use: ./build.sh, ./build.sh all for every backend, or ./build.sh targets; ./build.sh --help says more)" ;;
esac
for b in ${BACKENDS:-}; do
  field "$b" backend >/dev/null || die "unknown target '$b' (targets.txt has: $all_targets)"
done

# --- 1. system packages ------------------------------------------------------
need_pkgs=""
# openmpi-bin, libopenmpi-dev: `mpirun -n N microgpt-fut train` (mpi4py loads libmpi)
for p in ocl-icd-opencl-dev pocl-opencl-icd clinfo gcc python3-venv openmpi-bin libopenmpi-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need_pkgs="$need_pkgs $p"
done
# python3-venv is only needed when the python3 on PATH is Debian's own
if [ "$(command -v python3)" != /usr/bin/python3 ]; then need_pkgs=${need_pkgs// python3-venv/}; fi
# the newest clang that Debian offers here (Debian 12: clang-22 from bookworm-security,
# clang-19; pocl brings clang-15), unless one of these or $CLANG is present already
NEW_CLANGS="22 21 20 19"
have_new_clang() { local v; for v in $NEW_CLANGS; do [ -x "/usr/bin/clang-$v" ] && return 0; done; return 1; }
updated=0
if [ -z "${GENERATE_ONLY:-}" ] && [ -z "${CLANG_SET:-}" ] && ! have_new_clang; then
  $SUDO apt-get update -q && updated=1
  for v in $NEW_CLANGS; do
    if apt-cache show "clang-$v" >/dev/null 2>&1; then need_pkgs="$need_pkgs clang-$v"; break; fi
  done
fi
if [ -n "${GENERATE_ONLY:-}" ]; then
  say "GENERATE_ONLY: no system packages or virtual environment needed"
elif [ -n "${need_pkgs// /}" ]; then
  say "installing Debian packages:$need_pkgs"
  [ "$updated" = 1 ] || $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q $need_pkgs
else
  say "Debian packages present (OpenCL loader + headers, pocl, clinfo, gcc, clang, Open MPI)"
fi
[ -n "${CLANG_SET:-}" ] || CLANG=$(find_clang)  # what step 1 installed (pocl's clang-15 at least)

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
default_backends=""
if command -v nvcc >/dev/null && [ -e /usr/include/cuda.h -o -e "$CUDA_DIR/include/cuda.h" ] \
   && ldconfig -p | grep -q 'libcuda\.so'; then
  default_backends=$all_targets
else
  say "cuda backend skipped: no CUDA toolkit with a driver library (libcuda) here"
  for b in $all_targets; do [ "$(field "$b" backend)" = cuda ] || default_backends="$default_backends $b"; done
fi
if [ "$ALL" = 1 ]; then BACKENDS=${BACKENDS:-$default_backends}; else BACKENDS=${BACKENDS:-c gpt2_c}; fi
build_hash() {  # build_hash TARGET: changes when the sources, its row or the C flags change
  { cat futhark/*.fut "$(field "$1" program)"; grep -E "^target +$1 " "$TABLE"
    kernel_cc "$1"; kernel_cflags "$1"; echo "${CFLAGS:-}" "$(block_bits "$1")"
    case $(field "$1" backend) in c) declare -f free_list_fixup ;;
                                  multicore) declare -f multicore_fixup free_list_fixup ;; esac; } |
    sha256sum | cut -c1-16
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
multicore_fixup() {  # multicore_fixup FILE: Futhark 0.25.32's scheduler, reductions split by size alone
  # is_small() times each parallel operation and, from that timing, runs it on one
  # thread or splits it across up to all of them. For a reduction (segred), a
  # histogram or a scan, the split is the summation order, so seeded runs differed;
  # so is the choice between a map's nested and flat versions (nested_fn). Those
  # take its first-call rule, always split: min(iterations, threads) fixed ranges,
  # combined in order, a function of the size and the thread count alone. Other
  # maps and copies keep the timing rule (each element is computed alone); forcing
  # it on them too cost multicore 10-12 % at nanoGPT's recipe (bench/README.md).
  local rule='^  if (task->sched == DYNAMIC || iter == 0) {$'
  grep -q "$rule" "$1" || {
    echo "multicore_fixup: is_small() not found in $1 (another Futhark version?)" >&2; return 1; }
  sed -i "s/$rule/"'  if (task->sched == DYNAMIC || iter == 0 || task->nested_fn != NULL || strstr(task->name, "_segred_") || strstr(task->name, "_seghist_") || strstr(task->name, "_segscan_")) {  \/\* microgpt-fut: build.sh \*\//' "$1"

  # A worker whose queue was empty slept on a condition variable at once, so each
  # split operation waited for the other core to wake (a futex wake-up) while the
  # calling thread finished its half and spun at the join: the second core sat idle
  # or woke for 17 % of the recipe's step (`perf`, bench/README.md). Workers now poll
  # their queue for up to 1 ms before they sleep, as OpenMP's threads spin a while.
  local idle='go back to sleep and wait for work'
  [ "$(grep -c "$idle" "$1")" = 1 ] || {
    echo "multicore_fixup: scheduler_worker's sleep not found once in $1 (another Futhark version?)" >&2; return 1; }
  sed -i "/$idle/r /dev/stdin" "$1" <<'EOF'
      {  /* microgpt-fut: build.sh: poll for work for up to 1 ms before sleeping */
        int64_t poll_until = get_wall_time_ns() + 1000000;
        while (__atomic_load_n(&worker->q.num_used, __ATOMIC_ACQUIRE) == 0 &&
               __atomic_load_n(&scheduler->active_work, __ATOMIC_RELAXED) == 0 &&
               !__atomic_load_n(&worker->dead, __ATOMIC_RELAXED) && get_wall_time_ns() < poll_until) {
#if defined(__x86_64__) || defined(__i386__)
          __builtin_ia32_pause();
#endif
        }
        if (__atomic_load_n(&worker->q.num_used, __ATOMIC_ACQUIRE) != 0 ||
            __atomic_load_n(&scheduler->active_work, __ATOMIC_RELAXED) != 0) continue;
      }
EOF
}
free_list_fixup() {  # free_list_fixup FILE: Futhark 0.25.32's free list, large blocks back to malloc
  # host_free keeps every freed block of 1 MB or more in the context's free list, which
  # serves a later request only from a block under twice its size. At GPT-2 124M the
  # uploaded state vector (495 MB) and blocks of other sizes sat there unused through the
  # training step's peak. Blocks of 8 MB or more now go back to malloc, whose heap the
  # driver keeps (backend/host_memory.py: no trim, no mmap), so any later request reuses
  # them: 124M's peak RSS 7.06 -> 6.15 GB on multicore (bench/README.md). The recipe's
  # blocks are under 8 MB and keep the free list.
  local rule='^  if (is_small_alloc(size)) {$'
  [ "$(grep -c "$rule" "$1")" = 1 ] || {
    echo "free_list_fixup: host_free not found once in $1 (another Futhark version?)" >&2; return 1; }
  sed -i "s/$rule/"'  if (is_small_alloc(size) || size >= ((size_t) 8 << 20)) {  \/\* microgpt-fut: build.sh \*\//' "$1"
}
compile_backend() {  # compile_backend NAME: futhark, then the CFFI module; log in build/NAME/build.log
  local b=$1 out=$BUILD/$1 t0 c v
  t0=$(date +%s)
  mkdir -p "$out"
  rm -f "$out/.src_hash"
  {
    # each target compiles its own copy of futhark/, with its layout as layout.fut, the
    # machine's block as block.fut and its model family as family.fut
    rm -rf "$out/src" && cp -r futhark "$out/src" && cp "$(field "$b" program)" "$out/src/" &&
    cp "futhark/layout_$(field "$b" layout).fut" "$out/src/layout.fut" &&
    cp "futhark/block_$(block_bits "$b").fut" "$out/src/block.fut" &&
    if [ "$(field "$b" family)" != - ]; then
      cp "futhark/family_$(field "$b" family).fut" "$out/src/family.fut"; fi &&
    "$FUT" "$(field "$b" backend)" --library -o "$out/microgpt_$b" \
      "$out/src/$(basename "$(field "$b" program)")" &&
    case $(field "$b" backend) in opencl|cuda) cache_fixup "$out/microgpt_$b.c" ;;
                                  c) free_list_fixup "$out/microgpt_$b.c" ;;
                                  multicore) multicore_fixup "$out/microgpt_$b.c" &&
                                             free_list_fixup "$out/microgpt_$b.c" ;; esac &&
    if [ -z "${GENERATE_ONLY:-}" ]; then
      if [ "$(field "$b" backend)" = cuda ]; then cuda_fixup "$out/microgpt_$b.c"; fi &&
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
for b in $BACKENDS; do  # say once which width the CPU targets take, and why
  [ "$(field "$b" layout)" = cpu ] || continue
  if [ -n "$GIVEN_BITS" ]; then how="VECTOR_BITS"; else how="this machine's: 512 on Intel's AVX-512 cores, else 256; VECTOR_BITS picks"; fi
  say "the products' vector width for c and multicore: $VECTOR_BITS bits ($how)"
  break
done
todo=() pids=()
for b in $BACKENDS; do
  if up_to_date "$b"; then say "backend $b up to date"; continue; fi
  todo+=("$b")
  say "compiling backend $b in the background (futhark $(field "$b" backend) --library; opencl takes several minutes)"
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
