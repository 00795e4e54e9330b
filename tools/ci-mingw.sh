#!/usr/bin/env bash
# CI stage: Windows cross-compile with MinGW-w64 (x86_64, posix threads model).
# Compiles a TU that includes <smol/smol.hpp> (baseline x86-64 and AVX2 flags)
# and links it, then compiles and links every example that exists, against an
# include directory that holds only xsimd and nlohmann-json (not /usr/include
# whole), so a stray POSIX header in the library fails here. Prints its time.
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

fail=0
build() {  # build NAME FLAGS... SOURCE
  local name=$1; shift
  say "compile $name"
  if ! $SMOL_LAUNCHER "$CXX" "${COMMON[@]}" "$@" -c -o "$OUT/$name.o" 2> "$OUT/$name.log" ||
     ! "$CXX" "$OUT/$name.o" -o "$OUT/$name.exe" -static-libgcc -static-libstdc++ 2>> "$OUT/$name.log"; then
    cat "$OUT/$name.log" >&2
    echo "FAILED: $name" >&2
    fail=1
  elif [ -s "$OUT/$name.log" ]; then
    cat "$OUT/$name.log"
  fi
}

build smol_headers_baseline "$OUT/smol_headers.cpp"
build smol_headers_avx2 -mavx2 -mfma -mf16c "$OUT/smol_headers.cpp"
for src in "$ROOT"/examples/*.cpp; do
  [ -e "$src" ] || continue
  build "$(basename "$src" .cpp)" -mavx2 -mfma -mf16c "$src"
done

ls -la "$OUT"/*.exe 2>/dev/null || true
if [ "$fail" != 0 ]; then say "FAILED"; exit 1; fi
say "passed"
