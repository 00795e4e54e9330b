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
#      usable GPU fails instead of skipping) (test_cuda.log); with
#      SMOL_GPU_PDL_CHECK=1 again with programmatic dependent launch off;
#   4. greedy tokens of smol-generate on the tiny fixture, --device cuda against
#      --device cpu (generate.log): the rule of the fixtures' goldens, i.e. the
#      same tokens until the first step where the CPU's top-2 logit gap is small;
#   5. a 3B-shaped Q4_K_M file made here (smol-make-model --preset 3b, so it
#      need not travel), then smol-bench --device cuda on it: pp512, tg128, and
#      the Batcher's aggregate at N = 1, 2, 4, 8 (bench.log; its last line is JSON);
#      The same --parallel 8 with SMOL_CUDA_BATCH=0 (segments one after another)
#      for comparison; pp512 with the tensor-core tiles off (SMOL_CUDA_TILE_MIN=0)
#      and pp2048; ncu's time per kernel of one 512-token prefill
#      (ncu-prefill.log, summed by tools/ncu-summary.py) and, with
#      SMOL_GPU_NCU_DECODE=1, of a short generation (ncu.log);
#   6. compute-sanitizer memcheck over the kernel and batched-step cases
#      (sanitizer.log), when the tool exists (the whole forward cases take
#      minutes under it).
#   7. side by side on the 3B-shaped file, when SMOL_GPU_OLD_BENCH (an earlier
#      smol-bench) or a reference llama-bench built with CUDA is at hand (from
#      IK_CUDA_BENCH, or built here in the background from the source folder
#      IK_CUDA_SRC while steps 3-6 run: its log is ik-build.log, and the binary
#      is kept as $LOGS/llama-bench-cuda.xz for the next run): rounds of
#      `-p 512 -n 128` alternate between the engines (side.log, and each round
#      in the summary), then the reference's own table;
#   8. with SMOL_GPU_SWEEP set: pp512 / tg128 at each SMOL_CUDA_SLICES_PER_LANE
#      of it (the mat-vec's lanes per row) and with programmatic dependent
#      launch off (SMOL_CUDA_PDL=0).
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
#   SMOL_GPU_OLD_BENCH  an earlier smol-bench built with CUDA (before/after).
#   IK_CUDA_BENCH   a reference llama-bench built with CUDA (side by side).
#   IK_CUDA_SRC     a reference source folder (llama.cpp family) to build here
#                   with CUDA for the architectures above (llama-bench only),
#                   in the background; SMOL_GPU_IK_WAIT: how long step 7 waits
#                   for it (seconds, default 240).
#   SMOL_GPU_ROUNDS side-by-side rounds (default 3).
#   SMOL_GPU_SWEEP  SMOL_CUDA_SLICES_PER_LANE values to time (default none: step 8 off).
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
  . "$ROOT/tools/ci-generator.sh"
  smol_generator "$dir"
  {
    echo "nvcc: $("$NVCC" --version | tail -n 2 | head -n 1); architectures $archs; jobs $JOBS"
    cmake -S "$ROOT" -B "$dir" "${SMOL_GENERATOR_FLAGS[@]}" -DCMAKE_BUILD_TYPE=Release -DSMOL_CUDA=ON \
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
IK_PID=""
if [ -z "${IK_CUDA_BENCH:-}" ] && [ -n "${IK_CUDA_SRC:-}" ]; then
  say "2d. building the reference llama-bench in the background (ik-build.log)"
  archs=${SMOL_CUDA_ARCHITECTURES:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '.')}
  (cd "$IK_CUDA_SRC" && nice -n 19 cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
     "-DCMAKE_CUDA_ARCHITECTURES=${archs:-90}" -DCMAKE_CUDA_COMPILER="$NVCC" -DBUILD_SHARED_LIBS=OFF \
     -DLLAMA_CURL=OFF -DGGML_NATIVE=ON -DGGML_CUDA_FA_ALL_QUANTS=OFF -DLLAMA_BUILD_TESTS=OFF \
     -DLLAMA_BUILD_SERVER=OFF ${IK_CUDA_CMAKE_ARGS:-} &&
     nice -n 19 cmake --build build-cuda -j"$((JOBS > 4 ? JOBS - 4 : 1))" --target llama-bench) \
    >"$LOGS/ik-build.log" 2>&1 &
  IK_PID=$!
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
# Programmatic dependent launch is on by default on sm_90 (src/cuda/launch.cuh):
# with SMOL_GPU_PDL_CHECK=1, every case again with it off, the plain stream
# order of earlier GPUs.
if [ "${SMOL_GPU_PDL_CHECK:-0}" = 1 ]; then
  if SMOL_CUDA_PDL=0 SMOL_REQUIRE_DEVICE=1 timeout 180 "$TEST_CUDA" >"$LOGS/test_cuda_pdl.log" 2>&1; then
    note "test_cuda with SMOL_CUDA_PDL=0: passed ($(grep -E '^\[doctest\] test cases' "$LOGS/test_cuda_pdl.log" | tr -s ' '))"
  else
    grep -E 'ERROR|FATAL|error:|failed' "$LOGS/test_cuda_pdl.log" | head -n 20
    note "test_cuda with SMOL_CUDA_PDL=0: FAILED (test_cuda_pdl.log)"
  fi
fi

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
  say "5e. prefill with the tensor-core tiles off (SMOL_CUDA_TILE_MIN=0: the mat-vec, as before)"
  note "pp512 with the tiles off: $(SMOL_CUDA_TILE_MIN=0 timeout 60 "$BENCH" -m "$MODEL3B" --device cuda -p 512 -n 0 -r 3 --no-bandwidth --json 2>/dev/null | python3 -c 'import json,sys; print("%.1f" % json.loads(sys.stdin.read().strip().splitlines()[-1])["pp_tokens_per_s"])')"
  for knobs in SMOL_CUDA_SPLIT_TILES=1 SMOL_CUDA_SPLIT_TILES=128 SMOL_CUDA_ATTN_TILES=0 ${SMOL_GPU_KNOBS:-}; do
    note "pp512 with $knobs: $(env "$knobs" timeout 60 "$BENCH" -m "$MODEL3B" --device cuda -p 512 -n 0 -r 3 --no-bandwidth --json 2>/dev/null | python3 -c 'import json,sys; print("%.1f" % json.loads(sys.stdin.read().strip().splitlines()[-1])["pp_tokens_per_s"])')"
  done
  note "pp2048 (chunks of 512): $(timeout 60 "$BENCH" -m "$MODEL3B" --device cuda -p 2048 -n 0 -r 2 --no-bandwidth --json 2>/dev/null | python3 -c 'import json,sys; print("%.1f" % json.loads(sys.stdin.read().strip().splitlines()[-1])["pp_tokens_per_s"])')"
  if command -v ncu >/dev/null 2>&1; then
    say "5f. ncu: time per kernel of one 512-token prefill (ncu-prefill.log)"
    timeout 150 ncu --csv --page raw --metrics gpu__time_duration.sum \
      "$BENCH" -m "$MODEL3B" --device cuda -p 512 -n 0 -r 1 --no-bandwidth --tune off \
      >"$LOGS/ncu-prefill.log" 2>&1
    note "ncu prefill: exit $?; $(python3 "$ROOT/tools/ncu-summary.py" "$LOGS/ncu-prefill.log" 8 2>&1 | tr '\n' ';')"
    if [ "${SMOL_GPU_NCU_DECODE:-0}" = 1 ]; then
      say "5g. ncu: time per kernel of a prompt and a few decode steps (ncu.log)"
      timeout 120 ncu --metrics gpu__time_duration.sum --print-summary per-kernel --launch-count 2000 \
        "$GENERATE" -m "$MODEL3B" -p "Hello there" -n 4 --temp 0 --device cuda >"$LOGS/ncu.log" 2>&1
      note "ncu: exit $? ($(grep -c 'gpu__time_duration.sum' "$LOGS/ncu.log") kernel kinds)"
    fi
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

if [ -f "$MODEL3B" ]; then
  py_smol='import json,sys
d=json.loads(sys.stdin.read().strip().splitlines()[-1])
print("%.1f %.1f" % (d["pp_tokens_per_s"], d["tg_tokens_per_s"]))'
  py_ik='import json,sys
d=json.load(sys.stdin)
pp=[x["avg_ts"] for x in d if x["n_prompt"]>0]; tg=[x["avg_ts"] for x in d if x["n_gen"]>0]
print("%.1f %.1f" % (pp[0], tg[0]))'
  if [ -n "$IK_PID" ]; then
    say "7a. waiting for the reference build (at most ${SMOL_GPU_IK_WAIT:-240} s)"
    waited=0
    while kill -0 "$IK_PID" 2>/dev/null && [ "$waited" -lt "${SMOL_GPU_IK_WAIT:-240}" ]; do
      sleep 5
      waited=$((waited + 5))
    done
    built=$(find "$IK_CUDA_SRC/build-cuda" -name llama-bench -type f -perm -u+x 2>/dev/null | head -n 1)
    if [ -n "$built" ]; then
      IK_CUDA_BENCH=$built
      xz -T0 -c "$built" >"$LOGS/llama-bench-cuda.xz"
      note "reference: built here ($(tail -n 1 "$LOGS/ik-build.log"))"
    else
      kill "$IK_PID" 2>/dev/null
      note "reference: not built in time ($(grep -c 'Building' "$LOGS/ik-build.log") objects; ik-build.log)"
    fi
  fi
  if [ -n "${SMOL_GPU_OLD_BENCH:-}${IK_CUDA_BENCH:-}" ]; then
    say "7. side by side, rounds alternated (side.log)"
    for r in $(seq 1 "${SMOL_GPU_ROUNDS:-3}"); do
      line="round $r: smol $(timeout 60 "$BENCH" -m "$MODEL3B" --device cuda -p 512 -n 128 -r 1 --no-bandwidth --json 2>>"$LOGS/side.log" | python3 -c "$py_smol")"
      if [ -n "${SMOL_GPU_OLD_BENCH:-}" ]; then
        line="$line | earlier smol $(timeout 60 "$SMOL_GPU_OLD_BENCH" -m "$MODEL3B" --device cuda -p 512 -n 128 -r 1 --no-bandwidth --json 2>>"$LOGS/side.log" | python3 -c "$py_smol")"
      fi
      if [ -n "${IK_CUDA_BENCH:-}" ]; then
        line="$line | reference $(timeout 90 "$IK_CUDA_BENCH" -m "$MODEL3B" -ngl 99 -fa 1 -p 512 -n 128 -r 1 -o json 2>>"$LOGS/side.log" | python3 -c "$py_ik")"
      fi
      echo "$line" | tee -a "$LOGS/side.log"
    done
    note "side by side (pp512 tg128 per engine, each round): $(grep '^round' "$LOGS/side.log" | tr '\n' ';')"
    [ -n "${IK_CUDA_BENCH:-}" ] && timeout 60 "$IK_CUDA_BENCH" -m "$MODEL3B" -ngl 99 -fa 1 -p 512 -n 128 -r 2 >>"$LOGS/side.log" 2>&1
  fi
  if [ -n "${SMOL_GPU_SWEEP:-}" ]; then
    say "8. SMOL_CUDA_SLICES_PER_LANE and SMOL_CUDA_PDL"
    for v in $SMOL_GPU_SWEEP; do
      note "pp512 tg128 with SMOL_CUDA_SLICES_PER_LANE=$v: $(SMOL_CUDA_SLICES_PER_LANE=$v timeout 60 "$BENCH" -m "$MODEL3B" --device cuda -p 512 -n 128 -r 2 --no-bandwidth --json 2>/dev/null | python3 -c "$py_smol")"
    done
    note "pp512 tg128 with SMOL_CUDA_PDL=0: $(SMOL_CUDA_PDL=0 timeout 60 "$BENCH" -m "$MODEL3B" --device cuda -p 512 -n 128 -r 2 --no-bandwidth --json 2>/dev/null | python3 -c "$py_smol")"
  fi
fi

say "summary"
printf '%s\n' "${SUMMARY[@]}"
