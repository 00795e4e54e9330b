#!/usr/bin/env bash
# CI stage: the optional CUDA backend. If nvcc exists, configures build-cuda
# with -DSMOL_CUDA=ON (CUDA architectures 80 and 90), builds only smol::cuda,
# test_cuda and smol-generate (the --device plumbing of examples/common, which
# smol-chat shares; smol-bench and bench_cuda are built by tools/gpu-check.sh on
# a GPU machine, or here with SMOL_CUDA_EXTRA_TARGETS), and
# runs test_cuda: on a machine without a GPU it checks the host emulation of the
# kernels' block code, that the backend reports "unsupported" and that
# LoadOptions::device auto falls back to the CPU, and skips the GPU cases with a
# message; with a GPU it runs the kernel checks, the CPU comparison, the fixture
# goldens and Generator on the GPU (sessions CPU <-> GPU). Then smol-generate
# --device auto generates a few tokens from the tiny fixture (the GPU when there
# is one, else the CPU; the device line says which). If nvcc is absent it says
# so and exits 0. Prints its time. Run from anywhere:
#   tools/ci-cuda.sh
# Environment: SMOL_FIXTURES (default ../shared/fixtures beside the repo),
# SMOL_JOBS (default 2), SMOL_CUDA_ARCHITECTURES (default "80;90"),
# SMOL_CUDA_EXTRA_TARGETS (more targets to build, e.g. "smol-bench smol-chat"),
# SMOL_CUDA_BENCH_MODEL (a GGUF file: also build and run benchmarks/bench_cuda on
# it, which prints pp512 / tg128 throughput when there is a GPU). Compiles through
# ccache (tools/ci-ccache.sh), nvcc included.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. "$ROOT/tools/ci-ccache.sh"
. "$ROOT/tools/ci-generator.sh"
START=$(date +%s)
say() { echo "=== [cuda] $* ($(( $(date +%s) - START )) s)"; }

NVCC=""
if command -v nvcc >/dev/null 2>&1; then
  NVCC=$(command -v nvcc)
elif [ -x /usr/local/cuda/bin/nvcc ]; then
  NVCC=/usr/local/cuda/bin/nvcc
fi
if [ -z "$NVCC" ]; then
  say "nvcc not found: skipping the CUDA backend build (nothing to check)"
  exit 0
fi

JOBS=${SMOL_JOBS:-2}
if [ -n "${SMOL_CUDA_BENCH_MODEL:-}" ]; then
  SMOL_CUDA_EXTRA_TARGETS="${SMOL_CUDA_EXTRA_TARGETS:-} bench_cuda"
fi
ARCHS=${SMOL_CUDA_ARCHITECTURES:-"80;90"}
export SMOL_FIXTURES=${SMOL_FIXTURES:-$ROOT/../shared/fixtures}
export SMOL_REQUIRE_FIXTURES=${SMOL_REQUIRE_FIXTURES:-1}
# The main CI stage sums golden cases from this log before this stage runs.
unset SMOL_GOLDEN_LOG

say "configure build-cuda ($("$NVCC" --version | tail -n 2 | head -n 1), architectures $ARCHS)"
smol_generator build-cuda
cmake -S . -B build-cuda "${SMOL_GENERATOR_FLAGS[@]}" -DCMAKE_BUILD_TYPE=Release -DSMOL_CUDA=ON \
  -DCMAKE_CUDA_COMPILER="$NVCC" "-DCMAKE_CUDA_ARCHITECTURES=$ARCHS" \
  -DSMOL_BUILD_TESTS=ON -DSMOL_BUILD_EXAMPLES=ON -DSMOL_BUILD_BENCHMARKS=ON \
  -DSMOL_BUILD_TOOLS=OFF "${SMOL_CCACHE_FLAGS[@]}" \
  ${SMOL_LAUNCHER:+-DCMAKE_CUDA_COMPILER_LAUNCHER=$SMOL_LAUNCHER} >/dev/null

say "build smol::cuda, test_cuda and smol-generate${SMOL_CUDA_EXTRA_TARGETS:+ (and $SMOL_CUDA_EXTRA_TARGETS)}"
cmake --build build-cuda -j"$JOBS" --target smol_cuda test_cuda smol-generate ${SMOL_CUDA_EXTRA_TARGETS:-}

say "run test_cuda"
./build-cuda/test_cuda

if [ -n "${SMOL_CUDA_BENCH_MODEL:-}" ]; then
  say "bench_cuda on $SMOL_CUDA_BENCH_MODEL"
  status=0
  ./build-cuda/benchmarks/bench_cuda "$SMOL_CUDA_BENCH_MODEL" || status=$?
  [ "$status" = 0 ] || [ "$status" = 77 ] || exit "$status"  # 77: no GPU, skipped
fi

if [ -f "$SMOL_FIXTURES/tiny-q4km.gguf" ]; then
  say "smol-generate --device auto on tiny-q4km"
  ./build-cuda/examples/smol-generate -m "$SMOL_FIXTURES/tiny-q4km.gguf" -p "Once upon a time" -n 8 \
    --temp 0 --device auto
fi

say "done"
