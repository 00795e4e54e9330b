#!/usr/bin/env bash
# Builds a libFuzzer target from tests/fuzz/ with clang (address + undefined
# sanitizers) and runs it for SECONDS, starting from a seed corpus made from the
# fixtures. Crashes land in build-fuzz/artifacts/TARGET/; turn each into a
# regression test (see tests/fuzz/README.md).
#   tools/fuzz.sh TARGET SECONDS      e.g. tools/fuzz.sh fuzz_gguf 600
#   tools/fuzz.sh TARGET --replay F   run one input (a crash file) and exit
# Environment: SMOL_FIXTURES (default ../shared/fixtures), CLANGXX (default
# clang++, else clang++-14), FUZZ_JOBS (parallel fuzzing processes, default 1).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${1:?usage: tools/fuzz.sh TARGET SECONDS}
SECONDS_TO_RUN=${2:?usage: tools/fuzz.sh TARGET SECONDS}
export SMOL_FIXTURES=${SMOL_FIXTURES:-$ROOT/../shared/fixtures}
SRC=$ROOT/tests/fuzz/$TARGET.cpp
OUT=$ROOT/build-fuzz
START=$(date +%s)
say() { echo "=== [fuzz] $* ($(( $(date +%s) - START )) s)"; }

[ -f "$SRC" ] || { echo "no such fuzz target: $SRC" >&2; exit 2; }
CLANGXX=${CLANGXX:-}
if [ -z "$CLANGXX" ]; then
  for c in clang++ clang++-14 clang++-15 clang++-16; do
    if command -v "$c" >/dev/null; then CLANGXX=$c; break; fi
  done
fi
if [ -z "$CLANGXX" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends clang >/dev/null
    CLANGXX=clang++
  else
    echo "clang++ not found (libFuzzer needs clang)" >&2; exit 2
  fi
fi

mkdir -p "$OUT/artifacts/$TARGET" "$OUT/corpus/$TARGET" "$OUT/seeds/$TARGET"
FLAGS=(-std=c++17 -O1 -g -fno-omit-frame-pointer -I"$ROOT/include"
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all)
case "$(uname -m)" in x86_64) FLAGS+=(-mavx2 -mfma -mf16c) ;; esac

say "build $TARGET with $CLANGXX"
"$CLANGXX" "${FLAGS[@]}" "$SRC" -o "$OUT/$TARGET" -lpthread

if [ "$SECONDS_TO_RUN" = "--replay" ]; then
  "$OUT/$TARGET" "${3:?--replay needs a file}"
  exit $?
fi

# Seeds: the GGUF seed files for the reader; text seeds for the text targets.
say "seed corpus"
case $TARGET in
  fuzz_gguf)
    "$CLANGXX" -std=c++17 -O1 -I"$ROOT/include" "$ROOT/tests/fuzz/make_seeds.cpp" -o "$OUT/make_seeds"
    "$OUT/make_seeds" "$SMOL_FIXTURES" "$OUT/seeds/$TARGET"
    ;;
  fuzz_loader|fuzz_session)
    "$CLANGXX" -std=c++17 -O1 -I"$ROOT/include" "$ROOT/tests/fuzz/make_model_seeds.cpp" -o "$OUT/make_model_seeds" -lpthread
    "$OUT/make_model_seeds" "$TARGET" "$OUT/seeds/$TARGET"
    ;;
  *)
    "$CLANGXX" -std=c++17 -O1 -I"$ROOT/include" "$ROOT/tests/fuzz/make_text_seeds.cpp" -o "$OUT/make_text_seeds"
    "$OUT/make_text_seeds" "$SMOL_FIXTURES" "$TARGET" "$OUT/seeds/$TARGET"
    ;;
esac
# The loader's micro models reach ~80 KiB (F32 embeddings); everything else fits 64 KiB.
case $TARGET in fuzz_loader) FUZZ_MAX_LEN=${FUZZ_MAX_LEN:-131072} ;; esac
DICT=()
[ -f "$ROOT/tests/fuzz/${TARGET#fuzz_}.dict" ] && DICT=(-dict="$ROOT/tests/fuzz/${TARGET#fuzz_}.dict")

PARALLEL=()  # -jobs makes libFuzzer fork and log to fuzz-N.log: only when asked
[ "${FUZZ_JOBS:-1}" -gt 1 ] && PARALLEL=(-jobs="$FUZZ_JOBS" -workers="$FUZZ_JOBS")

say "run $TARGET for $SECONDS_TO_RUN s"
LOG=$OUT/$TARGET.log
set +e
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1} \
"$OUT/$TARGET" "$OUT/corpus/$TARGET" "$OUT/seeds/$TARGET" "${DICT[@]}" \
  -max_total_time="$SECONDS_TO_RUN" -max_len=${FUZZ_MAX_LEN:-65536} -timeout=10 -rss_limit_mb=2048 \
  "${PARALLEL[@]}" -print_final_stats=1 \
  -artifact_prefix="$OUT/artifacts/$TARGET/" 2>&1 | tee "$LOG" | grep -E "INITED|DONE|pulse|NEW_FUNC|ERROR|SUMMARY|stat::" | tail -40
rc=${PIPESTATUS[0]}
set -e
say "finished with exit code $rc; corpus: $(ls "$OUT/corpus/$TARGET" | wc -l) files; crashes: $(ls "$OUT/artifacts/$TARGET" | wc -l)"
grep -E "^#[0-9]+ +DONE" "$LOG" | tail -1 || true
exit "$rc"
