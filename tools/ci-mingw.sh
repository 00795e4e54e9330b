#!/usr/bin/env bash
# CI stage: Windows cross-compile with MinGW-w64 (x86_64, posix threads model).
# Compiles a TU that includes <smol/smol.hpp> (baseline x86-64 and AVX2 flags)
# and links it, then compiles and links every example that exists, against an
# include directory that holds only xsimd and nlohmann-json (not /usr/include
# whole), so a stray POSIX header in the library fails here; then the C ABI's
# smol.dll and its C test, and the kernel tests, run under wine64 (below).
# The compiles run as parallel jobs (SMOL_JOBS, default 2); the examples share
# one unit of the levels' kernels as in the CMake build. Prints its time.
# Installs g++-mingw-w64-x86-64-posix when missing (needs root and apt).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/build-mingw
. "$ROOT/tools/ci-ccache.sh"  # each program compiled, then linked, so ccache can keep the object
START=$(date +%s)
say() { echo "=== [mingw] $* ($(( $(date +%s) - START )) s)"; }

CXX=${MINGW_CXX:-x86_64-w64-mingw32-g++-posix}
if ! command -v "$CXX" >/dev/null; then
  say "installing g++-mingw-w64-x86-64-posix"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends g++-mingw-w64-x86-64-posix >/dev/null
fi
"$CXX" --version | head -1

# Third-party headers only: xsimd for the library, nlohmann for the examples.
rm -rf "$OUT"
mkdir -p "$OUT/include"
for dep in xsimd nlohmann; do
  src=""
  for dir in /usr/include /usr/local/include; do
    [ -d "$dir/$dep" ] && { src="$dir/$dep"; break; }
  done
  [ -n "$src" ] || { echo "missing $dep headers (apt-get install libxsimd-dev nlohmann-json3-dev)" >&2; exit 2; }
  ln -s "$src" "$OUT/include/$dep"
done

COMMON=(-std=c++17 -O1 -Wall -Wextra -Werror=return-type -I"$ROOT/include" -I"$OUT/include")
# A translation unit that uses the public API, so templates get instantiated.
cat > "$OUT/smol_headers.cpp" <<'EOF'
#include <smol/smol.hpp>
#include <cstdio>
int main(int argc, char** argv) {
    if (argc < 2) return 0;
    try {
        auto file = smol::gguf::File::open(argv[1]);
        std::printf("%zu tensors\n", file->tensors().size());
        auto arch = file->find<std::string>("general.architecture");
        std::printf("%s\n", arch ? arch->c_str() : "?");
    } catch (const smol::Error& e) {
        std::printf("error (%s): %s\n", smol::to_string(e.kind()), e.what());
        return 1;
    }
    return 0;
}
EOF

# Every compile below is a job of its own, run SMOL_JOBS (default 2) at a time:
# the units are independent, and one at a time left a core idle. A job that
# fails leaves NAME.failed beside its log; the stage reports every failure.
JOBS=${SMOL_JOBS:-2}
job() {  # job NAME COMMAND...: runs COMMAND in the background, its output in NAME.log
  local name=$1; shift
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  say "start $name"
  ( if ! "$@" > "$OUT/$name.log" 2>&1; then touch "$OUT/$name.failed"; fi ) &
}
finish_jobs() {  # waits for every job, prints the logs with something in them
  wait
  local log
  for log in "$OUT"/*.log; do
    [ -s "$log" ] || continue
    local name; name=$(basename "$log" .log)
    if [ -e "$OUT/$name.failed" ]; then
      cat "$log" >&2; echo "FAILED: $name" >&2
    else
      cat "$log"
    fi
    rm -f "$log"
  done
}
compile() {  # compile OBJECT FLAGS... SOURCE (through ccache)
  local object=$1; shift
  $SMOL_LAUNCHER "$CXX" "${COMMON[@]}" "$@" -c -o "$object"
}
program() {  # program NAME FLAGS... SOURCE: compiled, then linked with the AVX2 kernel sets
  local name=$1; shift
  compile "$OUT/$name.o" "$@" && "$CXX" "$OUT/$name.o" "$OUT/kernel_sets_avx2.o" -o "$OUT/$name.exe" \
    -static-libgcc -static-libstdc++
}
headers_program() {  # headers_program NAME FLAGS...: smol_headers.cpp, every level's kernels in it
  local name=$1; shift
  compile "$OUT/$name.o" "$@" "$OUT/smol_headers.cpp" &&
    "$CXX" "$OUT/$name.o" -o "$OUT/$name.exe" -static-libgcc -static-libstdc++
}
AVX2=(-mavx2 -mfma -mf16c)
# The examples share one unit of the levels' kernels, as in the CMake build
# (cmake/smolKernelSets.cmake, SMOL_SEPARATE_KERNELS); smol_headers.cpp and
# smol.dll compile their own (a consumer's default).
SEPARATE=(-DSMOL_SEPARATE_KERNELS)

# Phase 1: the units that need nothing else.
job kernel_sets_avx2 compile "$OUT/kernel_sets_avx2.o" "${AVX2[@]}" "${SEPARATE[@]}" "$ROOT/src/kernel_sets.cpp"
# The C ABI as smol.dll (static runtime: one file beside the program).
job smol_dll "$CXX" "${COMMON[@]}" -shared -static -static-libgcc -static-libstdc++ "$ROOT/src/smol_c.cpp" \
  -o "$OUT/smol.dll" -Wl,--out-implib,"$OUT/libsmol.dll.a"
job smol_headers_baseline headers_program smol_headers_baseline
job smol_headers_avx2 headers_program smol_headers_avx2 "${AVX2[@]}"
# The kernel tests (every level this CPU runs against the scalar spec, bit
# for bit) as a Windows program, run under wine64 below.
ln -sfn /usr/include/doctest "$OUT/include/doctest"
job test_kernels_unit compile "$OUT/test_kernels.o" -I"$ROOT/tests" "$ROOT/tests/test_kernels.cpp"
job test_main_unit compile "$OUT/test_main.o" -I"$ROOT/tests" "$ROOT/tests/test_main.cpp"
wait
# Phase 2: the examples (against the kernel sets), then the programs that link phase 1's output.
if [ ! -e "$OUT/kernel_sets_avx2.failed" ]; then
  for src in "$ROOT"/examples/*.cpp; do
    [ -e "$src" ] || continue
    job "$(basename "$src" .cpp)" program "$(basename "$src" .cpp)" "${AVX2[@]}" "${SEPARATE[@]}" "$src"
  done
fi
if [ ! -e "$OUT/test_kernels_unit.failed" ] && [ ! -e "$OUT/test_main_unit.failed" ]; then
  job test_kernels "$CXX" "$OUT/test_kernels.o" "$OUT/test_main.o" -o "$OUT/test_kernels.exe" -static \
    -static-libgcc -static-libstdc++
fi
# The C test and the C example against smol.dll; the C test then runs for real
# under wine64 (Windows x64 semantics: its file API, threads, TLS, the DLL's
# exports), on the tiny fixture when SMOL_FIXTURES has it.
CC_MINGW=${MINGW_CC:-x86_64-w64-mingw32-gcc-posix}
if [ ! -e "$OUT/smol_dll.failed" ]; then
  for c in "$ROOT/tests/c_abi/test_c_abi.c" "$ROOT/examples/c-chat.c"; do
    job "$(basename "$c" .c)" "$CC_MINGW" -std=c99 -O1 -Wall -Wextra -Werror -I"$ROOT/include" "$c" \
      "$OUT/libsmol.dll.a" -o "$OUT/$(basename "$c" .c).exe"
  done
fi
finish_jobs
fail=0
ls "$OUT"/*.failed >/dev/null 2>&1 && fail=1
if [ -e "$OUT/smol.dll" ]; then
  exported=$(x86_64-w64-mingw32-objdump -p "$OUT/smol.dll" | awk '/\[Ordinal\/Name Pointer\] Table/ {t=1; next} t && NF == 0 {t=0} t {print $NF}')
  stray=$(printf '%s\n' "$exported" | grep -v '^smol_' || true)
  echo "=== [mingw] smol.dll exports $(printf '%s\n' "$exported" | grep -c '^smol_') smol_* symbols"
  if [ -n "$stray" ]; then echo "FAILED: smol.dll exports more than smol_*: $stray" >&2; fail=1; fi
fi
if [ "$fail" = 0 ] && [ "${SMOL_MINGW_RUN:-1}" = 1 ]; then
  # Debian's wine64 package puts the loader in /usr/lib/wine (the wine package
  # adds the /usr/bin wrappers).
  find_wine() { command -v wine64 || { [ -x /usr/lib/wine/wine64 ] && echo /usr/lib/wine/wine64; } || true; }
  WINE=$(find_wine)
  if [ -z "$WINE" ] && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    say "installing wine64"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends wine64 >/dev/null
    WINE=$(find_wine)
  fi
  if [ -n "$WINE" ]; then
    fixtures=${SMOL_FIXTURES:-$ROOT/../shared/fixtures}
    say "run test_c_abi.exe under wine64 (fixtures: $fixtures)"
    export WINEPREFIX=${WINEPREFIX:-$OUT/wineprefix} WINEDEBUG=${WINEDEBUG:--all}
    # Unix paths reach the program as paths on wine's Z: drive.
    if ! (cd "$OUT" && "$WINE" ./test_c_abi.exe "$fixtures"); then
      echo "FAILED: test_c_abi.exe under wine64" >&2; fail=1
    fi
    say "run test_kernels.exe under wine64 (every kernel level this CPU has)"
    if ! (cd "$OUT" && SMOL_FIXTURES="$fixtures" "$WINE" ./test_kernels.exe); then
      echo "FAILED: test_kernels.exe under wine64" >&2; fail=1
    fi
  elif [ "${SMOL_REQUIRE_WINE:-0}" = 1 ]; then
    echo "FAILED: wine64 not found and SMOL_REQUIRE_WINE=1" >&2; fail=1
  else
    say "wine64 not found: the Windows binaries were built, not run"
  fi
fi

ls -la "$OUT"/*.exe "$OUT"/*.dll 2>/dev/null || true
if [ "$fail" != 0 ]; then say "FAILED"; exit 1; fi
say "passed"
