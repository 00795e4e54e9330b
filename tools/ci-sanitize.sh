#!/usr/bin/env bash
# CI stage: every test executable under AddressSanitizer + UndefinedBehaviorSanitizer
# (build-asan), then the concurrency tests under ThreadSanitizer (build-tsan), with
# the fixtures required. Prints its own timing. Run from anywhere:
#   tools/ci-sanitize.sh            # ASan/UBSan, then TSan
#   SMOL_SANITIZE_STAGES=asan tools/ci-sanitize.sh
#   SMOL_SANITIZE_TESTS="test_gguf test_core" tools/ci-sanitize.sh   # a subset
# Environment: SMOL_FIXTURES (default ../shared/fixtures beside the repo),
# SMOL_JOBS (default 2). -O1 -g1: sanitizer reports keep file:line, and the
# build (the bulk of this stage's time) is faster than at -O2 -g.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. "$ROOT/tools/ci-ccache.sh"
. "$ROOT/tools/ci-generator.sh"
JOBS=${SMOL_JOBS:-2}
STAGES=${SMOL_SANITIZE_STAGES:-"asan tsan"}
export SMOL_FIXTURES=${SMOL_FIXTURES:-$ROOT/../shared/fixtures}
export SMOL_REQUIRE_FIXTURES=${SMOL_REQUIRE_FIXTURES:-1}
# The main CI stage sums golden cases from this log; re-running the same tests
# here must not count them twice.
unset SMOL_GOLDEN_LOG
# Fail on the first report; leaks count as failures; keep stacks readable.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

START=$(date +%s)
say() { echo "=== [sanitize] $* ($(( $(date +%s) - START )) s)"; }

# Test executables that exist in the source tree (tests/CMakeLists.txt builds
# tests/test_<component>.cpp for each listed component that exists).
existing_tests() {
  local names=""
  for src in tests/test_*.cpp; do
    [ -e "$src" ] || continue
    local name; name=$(basename "$src" .cpp)
    [ "$name" = test_main ] && continue
    # Built only with -DSMOL_CUDA=ON, into test_cuda (tools/ci-cuda.sh covers it).
    case "$name" in test_cuda | test_cuda_*) continue ;; esac
    names="$names $name"
  done
  # The C ABI's tests (tests/c_abi/: the shared library built with the same sanitizers).
  [ -e tests/c_abi/test_c_abi.c ] && names="$names test_c_abi test_c_abi_parity"
  echo "$names"
}

run_stage() {  # run_stage DIR SANITIZERS TESTS...
  local dir=$1 sanitizers=$2; shift 2
  local tests="$*"
  if [ -z "$tests" ]; then say "$dir: no tests to build"; return 0; fi
  smol_generator "$ROOT/$dir"
  say "$dir: configure (-DSMOL_SANITIZE=$sanitizers${SMOL_GENERATOR_FLAGS:+ ${SMOL_GENERATOR_FLAGS[*]}})"
  cmake -S "$ROOT" -B "$ROOT/$dir" "${SMOL_GENERATOR_FLAGS[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSMOL_SANITIZE="$sanitizers" -DSMOL_BUILD_BENCHMARKS=OFF "${SMOL_CCACHE_FLAGS[@]}" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DSMOL_FIXTURES_DIR="$SMOL_FIXTURES" >/dev/null
  say "$dir: build$(printf ' %s' $tests)"
  # shellcheck disable=SC2086
  cmake --build "$ROOT/$dir" -j"$JOBS" --target $tests
  local regex; regex="^($(echo $tests | tr ' ' '|'))\$"
  say "$dir: ctest"
  ctest --test-dir "$ROOT/$dir" --output-on-failure -j"$JOBS" -R "$regex"
  say "$dir: passed"
}

for stage in $STAGES; do
  case $stage in
    asan)
      run_stage build-asan "address,undefined" ${SMOL_SANITIZE_TESTS:-$(existing_tests)}
      ;;
    tsan)
      # Only the tests that exercise threads; the rest gain nothing from TSan.
      # They are one test program (tests_generation) and the C ABI's: each
      # more group would compile the library again under TSan.
      tsan_tests=""
      for t in ${SMOL_TSAN_TESTS:-test_threadpool test_generator test_session test_batcher test_c_abi_parity}; do
        [ -e "tests/$t.cpp" ] || [ -e "tests/c_abi/$t.cpp" ] && tsan_tests="$tsan_tests $t"
      done
      run_stage build-tsan "thread" $tsan_tests
      ;;
    *) echo "unknown stage '$stage'" >&2; exit 2 ;;
  esac
done
say "done"
