#!/usr/bin/env bash
# The GPU check: everything the CUDA backend must show on a machine with an
# NVIDIA GPU, in one run that keeps its logs (a lent GPU machine gives minutes,
# so this is the one command to run there). Steps, each logged to $LOGS/:
#   1. nvidia-smi (the card, the driver);
#   2. the build: configure and build build-gpu with the machine's nvcc
#      (build.log), unless SMOL_GPU_BIN names a folder of binaries built
#      elsewhere (test_cuda, smol-generate, smol-bench, smol-make-model); with
#      SMOL_GPU_BIN set and SMOL_GPU_DEPS too, the build still runs, in the
#      background, as a check that it builds there;
#   3. every test_cuda case with SMOL_REQUIRE_DEVICE=1 (a case that finds no
#      usable GPU fails instead of skipping) (test_cuda.log);
#   4. greedy tokens of smol-generate on the tiny fixture, --device cuda against
#      --device cpu (generate.log): the rule of the fixtures' goldens, i.e. the
#      same tokens until the first step where the CPU's top-2 logit gap is small;
#   5. a 3B-shaped Q4_K_M file made here (smol-make-model --preset 3b, so it
#      need not travel), then smol-bench --device cuda on it: pp512, tg128, and
#      the Batcher's aggregate at N = 1, 2, 4, 8 (bench.log; its last line is JSON);
#      The same --parallel 8 with SMOL_CUDA_BATCH=0 (segments one after another)
#      for comparison, and ncu's time per kernel of a short run (ncu.log);
#   6. compute-sanitizer memcheck over the kernel and batched-step cases
#      (sanitizer.log), when the tool exists (the whole forward cases take
#      minutes under it).
# The last lines are a summary. Run from anywhere:
#   tools/gpu-check.sh [LOGS]           (default LOGS: ./gpu-logs)
# Environment:
#   SMOL_FIXTURES   fixtures folder (default ../shared/fixtures beside the repo);
#                   tiny-q4km.gguf and its goldens are what this script needs.
#   SMOL_GPU_BIN    prebuilt binaries (skip the foreground build).
#   SMOL_GPU_DEPS   a folder with include/ and lib/cmake/ of xsimd, doctest,
#                   nlohmann-json and Eigen (a machine without Debian's -dev
#                   packages); added to CMAKE_PREFIX_PATH.
#   SMOL_JOBS       build jobs (default: all cores).
#   SMOL_CUDA_ARCHITECTURES (default: native, else 90).
#   SMOL_GPU_BENCH_GEN  tokens per generator in the --parallel run (default 64).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
LOGS=$(mkdir -p "${1:-$ROOT/gpu-logs}" && cd "${1:-$ROOT/gpu-logs}" && pwd)
START=$(date +%s)
say() { echo "=== [gpu] $* ($(($(date +%s) - START)) s)"; }
SUMMARY=()
note() { SUMMARY+=("$*"); echo "--- $*"; }

export SMOL_FIXTURES=${SMOL_FIXTURES:-$ROOT/../shared/fixtures}
JOBS=${SMOL_JOBS:-$(nproc)}
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)

say "1. nvidia-smi"
nvidia-smi >"$LOGS/nvidia-smi.txt" 2>&1
head -n 15 "$LOGS/nvidia-smi.txt"
{
  echo "## host CPU"
  lscpu | grep -E 'Model name|^CPU\(s\)'
  grep -o -w -E 'avx512[a-z_]*|amx[a-z_]*' /proc/cpuinfo | sort -u | tr '\n' ' '
  echo
} >>"$LOGS/nvidia-smi.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem \
  --format=csv >>"$LOGS/nvidia-smi.txt" 2>&1

build() {  # build DIR: configure + build the GPU targets, log to build.log
  local dir=$1 prefix=""
  if [ -n "${SMOL_GPU_DEPS:-}" ]; then
    # xsimd's config sits under lib/<multiarch>/, which CMake searches only when
    # it knows the multiarch name: point at it.
    local xsimd_config
    xsimd_config=$(find "$SMOL_GPU_DEPS" -name xsimdConfig.cmake | head -n 1)
    prefix="-DCMAKE_PREFIX_PATH=$SMOL_GPU_DEPS -Dxsimd_DIR=$(dirname "$xsimd_config")"
  fi
  local archs=${SMOL_CUDA_ARCHITECTURES:-}
  if [ -z "$archs" ]; then
    archs=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '.')
    archs=${archs:-90}
  fi
  {
    echo "nvcc: $("$NVCC" --version | tail -n 2 | head -n 1); architectures $archs; jobs $JOBS"
    cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DSMOL_CUDA=ON \
      -DCMAKE_CUDA_COMPILER="$NVCC" "-DCMAKE_CUDA_ARCHITECTURES=$archs" $prefix \
      -DSMOL_BUILD_TESTS=ON -DSMOL_BUILD_EXAMPLES=ON -DSMOL_BUILD_BENCHMARKS=ON \
      -DSMOL_BUILD_TOOLS=ON &&
      cmake --build "$dir" -j"$JOBS" --target test_cuda smol-generate smol-bench smol-make-model
  } >"$LOGS/build.log" 2>&1
}

BUILD_PID=""
if [ -n "${SMOL_GPU_BIN:-}" ]; then
  BIN=$(cd "$SMOL_GPU_BIN" && pwd)
  say "2. prebuilt binaries from $BIN"
  if [ -n "${SMOL_GPU_DEPS:-}" ]; then
    say "2b. building here too, in the background (build.log)"
    (nice -n 10 bash -c "$(declare -f build); ROOT=$ROOT LOGS=$LOGS JOBS=$((JOBS / 2)) NVCC=$NVCC SMOL_GPU_DEPS=$SMOL_GPU_DEPS SMOL_CUDA_ARCHITECTURES=${SMOL_CUDA_ARCHITECTURES:-} build $ROOT/build-gpu") &
    BUILD_PID=$!
  fi
else
  say "2. build (build.log)"
  if build "$ROOT/build-gpu"; then
    note "build: ok ($(grep -c 'Building' "$LOGS/build.log") objects)"
  else
    tail -n 40 "$LOGS/build.log"
    note "build: FAILED (build.log)"
    printf '%s\n' "${SUMMARY[@]}"
    exit 1
  fi
  BIN=$ROOT/build-gpu
fi
find_bin() { find "$BIN" -name "$1" -type f -perm -u+x | head -n 1; }
TEST_CUDA=$(find_bin test_cuda)
GENERATE=$(find_bin smol-generate)
BENCH=$(find_bin smol-bench)
MAKE_MODEL=$(find_bin smol-make-model)

MODEL3B=/tmp/smol-3b-q4km.gguf
say "5a. making the 3B-shaped file in the background ($MODEL3B)"
("$MAKE_MODEL" --preset 3b --out "$MODEL3B" --threads "$(nproc)" >"$LOGS/make-model.log" 2>&1) &
MAKE_PID=$!

say "3. test_cuda (SMOL_REQUIRE_DEVICE=1)"
if SMOL_REQUIRE_DEVICE=1 timeout 180 "$TEST_CUDA" --duration=true >"$LOGS/test_cuda.log" 2>&1; then
  note "test_cuda: passed ($(grep -E '^\[doctest\] test cases' "$LOGS/test_cuda.log" | tr -s ' '))"
else
  grep -E 'ERROR|FATAL|error:|failed|CHECK|REQUIRE' "$LOGS/test_cuda.log" | head -n 40
  note "test_cuda: FAILED ($(grep -E '^\[doctest\] test cases' "$LOGS/test_cuda.log" | tr -s ' '))"
fi
grep -E 'skipping' "$LOGS/test_cuda.log" | sort | uniq -c | head -n 10

say "4. smol-generate on tiny-q4km: cuda against cpu, greedy"
TINY=$SMOL_FIXTURES/tiny-q4km.gguf
{
  for dev in cuda cpu; do
    echo "## --device $dev"
    timeout 30 "$GENERATE" -m "$TINY" -p "Once upon a time" -n 48 --temp 0 --device "$dev" --json
  done
} >"$LOGS/generate.log" 2>&1
section_ids() {  # the generated ids printed under "## --device $1"
  awk -v head="## --device $1" '$0 == head {f = 1; next} /^## / {f = 0} f' "$LOGS/generate.log" |
    grep -m1 -o '"generated_ids":\[[^]]*\]'
}
gpu_ids=$(section_ids cuda)
cpu_ids=$(section_ids cpu)
# The goldens' rule needs the logits (test_cuda's golden case applies it); here
# the count of leading tokens the two agree on is reported.
if [ -n "$gpu_ids" ] && [ -n "$cpu_ids" ]; then
  same=$(paste -d' ' <(echo "$gpu_ids" | tr -dc '0-9,' | tr ',' '\n') \
    <(echo "$cpu_ids" | tr -dc '0-9,' | tr ',' '\n') | awk '$1 != $2 {exit} {n++} END {print n + 0}')
  note "generate: cuda and cpu greedy agree on the first $same of 48 tokens"
else
  note "generate: a run failed (generate.log)"
  grep -E 'device|error' "$LOGS/generate.log" | head -n 5
fi

say "5b. waiting for the 3B-shaped file"
if wait "$MAKE_PID" && [ -f "$MODEL3B" ]; then
  say "5c. smol-bench --device cuda (bench.log)"
  timeout 150 "$BENCH" -m "$MODEL3B" --device cuda -p 512 -n 128 -r 3 --no-bandwidth \
    --parallel 1,2,4,8 --step-rows 1,4,8 -c 1024 --json >"$LOGS/bench.log" 2>&1
  grep -E '^\|' "$LOGS/bench.log" | head -n 30
  note "bench: $(grep -E '(pp512|tg128) ' "$LOGS/bench.log" | cut -d'|' -f5,6 | tr -s ' ' | tr '\n' ';')"
  say "5d. the same --parallel 8 with batched steps off (SMOL_CUDA_BATCH=0)"
  SMOL_CUDA_BATCH=0 timeout 60 "$BENCH" -m "$MODEL3B" --device cuda -p 512 -n 64 -r 1 --no-bandwidth \
    --parallel 8 -c 1024 >>"$LOGS/bench.log" 2>&1
  grep -E '^\| 8 ' "$LOGS/bench.log" | tail -n 1
  if command -v ncu >/dev/null 2>&1; then
    say "5e. ncu: time per kernel of a prompt and a few decode steps (ncu.log)"
    timeout 120 ncu --metrics gpu__time_duration.sum --print-summary per-kernel --launch-count 2000 \
      "$GENERATE" -m "$MODEL3B" -p "Hello there" -n 4 --temp 0 --device cuda >"$LOGS/ncu.log" 2>&1
    note "ncu: exit $? ($(grep -c 'gpu__time_duration.sum' "$LOGS/ncu.log") kernel kinds)"
  fi
else
  note "bench: the 3B-shaped file was not made (make-model.log)"
fi

if [ -n "$BUILD_PID" ]; then
  say "2c. waiting for the background build"
  if wait "$BUILD_PID"; then note "build here: ok"; else note "build here: FAILED (build.log)"; fi
  tail -n 3 "$LOGS/build.log"
fi

if command -v compute-sanitizer >/dev/null 2>&1; then
  say "6. compute-sanitizer memcheck on the kernel cases (sanitizer.log)"
  SMOL_REQUIRE_DEVICE=1 timeout 60 compute-sanitizer --tool memcheck --print-limit 20 \
    "$TEST_CUDA" -tc='cuda kernels*,cuda batched*' >"$LOGS/sanitizer.log" 2>&1
  note "sanitizer: $(grep -E 'ERROR SUMMARY' "$LOGS/sanitizer.log" | tail -n 1) (exit $?)"
fi

say "summary"
printf '%s\n' "${SUMMARY[@]}"
