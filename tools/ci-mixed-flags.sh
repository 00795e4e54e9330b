#!/usr/bin/env bash
# CI stage: the mixed-flags program (tests/mixed_flags/: a unit built without
# ISA flags plus an optional module built with -mavx2 -mfma -mf16c, both using
# smol), linked in both orders, run under qemu-user on a CPU without AVX
# (-cpu Nehalem: the baseline unit must pick the scalar kernels and must not
# meet any AVX2 code through the linker) and on one with AVX2 (-cpu Haswell:
# both units must pick the avx2 level), each time within the fixtures'
# tolerances. The native runs are ctest cases of the main build. Installs
# qemu-user if missing. Run from anywhere:
#   tools/ci-mixed-flags.sh [build-dir]      (default: build, as the README's test command leaves it)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
START=$(date +%s)
say() { echo "=== [mixed-flags] $* ($(( $(date +%s) - START )) s)"; }
case "$(uname -m)" in
  x86_64|amd64) ;;
  *) say "not an x86-64 machine: nothing to run"; exit 0 ;;
esac
if ! command -v qemu-x86_64 >/dev/null; then
  say "installing qemu-user"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends qemu-user
fi
export SMOL_FIXTURES=${SMOL_FIXTURES:-$ROOT/../shared/fixtures}

# The link-time hazard itself, independent of which path a run happens to take:
# a weak symbol the avx2 module defines with VEX-encoded code that the baseline
# unit also defines or calls is one symbol after linking, and in the avx2-first
# order the baseline unit's calls land in the -mavx2 copy. smol's own code is
# tagged apart (detail/abi.hpp); this finds what is left: standard templates
# over plain types that the compiler did not inline (detail/unit_vector.hpp
# says how to give smol's internal ones the tag).
objects="$BUILD/tests/CMakeFiles"
module="$objects/smol_mixed_flags_avx2.dir/mixed_flags/module_avx2.cpp.o"
baseline="$objects/smol_mixed_flags_main.dir/mixed_flags/main.cpp.o"
for o in "$module" "$baseline"; do
  [ -f "$o" ] || { echo "ci-mixed-flags: $o is missing (build the tests first)" >&2; exit 1; }
done
say "shared weak symbols with AVX code"
shared=$(comm -12 \
  <(objdump -d --no-show-raw-insn "$module" |
      awk '/^[0-9a-f]+ <.*>:$/ { f = substr($2, 2, length($2) - 3) }
           /\tv[a-z0-9]+ .*%[xyz]mm/ { print f }' | sort -u) \
  <(nm "$module" | awk '$2 == "W" || $2 == "V" { print $3 }' | sort -u |
      comm -12 - <(nm "$baseline" | awk '{ print $NF }' | sort -u)))
if [ -n "$shared" ]; then
  echo "ci-mixed-flags: the baseline unit shares these weak symbols with the avx2 module's" >&2
  echo "AVX-encoded copies (a CPU without AVX would run them in the avx2-first link order):" >&2
  echo "$shared" | c++filt | cut -c1-240 >&2
  exit 1
fi
for order in baseline_first avx2_first; do
  binary="$BUILD/tests/test_mixed_flags_$order"
  [ -x "$binary" ] || { echo "ci-mixed-flags: $binary is missing (build the tests first)" >&2; exit 1; }
  for cpu in Nehalem Haswell; do
    say "$order under qemu-x86_64 -cpu $cpu"
    # qemu warns about host-only CPUID bits it cannot emulate; those lines are noise.
    out=$(qemu-x86_64 -cpu "$cpu" "$binary" 2>&1) || { echo "$out"; echo "ci-mixed-flags: failed ($order, $cpu)" >&2; exit 1; }
    echo "$out" | grep -v "TCG doesn't support requested feature" || true
    want=$([ "$cpu" = Nehalem ] && echo "kernels scalar" || echo "kernels avx2")
    if ! echo "$out" | grep -q "\[baseline unit\] $want"; then
      echo "ci-mixed-flags: the baseline unit did not select '$want' on $cpu" >&2; exit 1
    fi
  done
done
say "all passed"
