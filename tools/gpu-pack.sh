#!/usr/bin/env bash
# Packs what a lent GPU machine needs to run tools/gpu-check.sh without
# building there, inside the device tool's 64 MiB (the working tree included):
# the binaries of BUILD (a -DSMOL_CUDA=ON build with test_cuda, smol-bench and
# smol-generate built) and smol-make-model, stripped, as bin.tar.xz; the tiny
# Q4_K_M fixture (xz), its goldens and dequant/. Writes DIR (default
# build-gpucarry/, git-ignored as a /build*/ folder) and DIR/run.sh, the
# command for the device. Run from anywhere:
#   tools/gpu-pack.sh [BUILD [DIR]]      (default BUILD: build-cuda)
# then, with the device tool, carrying DIR:
#   bash DIR/run.sh                      (logs as $OUT/logs.tar.xz, summary $OUT/summary.txt)
# The repository's tracked files travel too: where they and DIR pass 64 MiB,
# move tests/data/types/ (36 MB, not read by test_cuda) aside for the call.
# Environment: SMOL_FIXTURES (default ../shared/fixtures beside the repo),
# SMOL_MAKE_MODEL (a smol-make-model binary; default: found under build*/),
# SMOL_GPU_REFERENCE (a reference llama-bench built with CUDA, xz-packed, and
# the libgomp.so.1 beside it if there is one: packed too, and run.sh sets
# IK_CUDA_BENCH for the side by side; at ~53 MB it leaves no room for the
# fixture, so SMOL_GPU_NO_FIXTURE=1 leaves that out: test_cuda's fixture cases
# then skip).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build-cuda}" && pwd)
DIR=${2:-$ROOT/build-gpucarry}
FIXTURES=${SMOL_FIXTURES:-$ROOT/../shared/fixtures}
find_bin() { find "$1" -name "$2" -type f -perm -u+x | head -n 1; }
MAKE_MODEL=${SMOL_MAKE_MODEL:-$(find_bin "$ROOT" smol-make-model)}
[ -n "$MAKE_MODEL" ] || { echo "gpu-pack: no smol-make-model (build the tools)" >&2; exit 1; }
rm -rf "$DIR/bin" "$DIR/bin.tar.xz" "$DIR/fixtures"
mkdir -p "$DIR/bin" "$DIR/fixtures/golden" "$DIR/fixtures/dequant"
for name in test_cuda smol-bench smol-generate; do
  bin=$(find_bin "$BUILD" "$name")
  [ -n "$bin" ] || { echo "gpu-pack: $name not built in $BUILD" >&2; exit 1; }
  strip -o "$DIR/bin/$name" "$bin"
done
strip -o "$DIR/bin/smol-make-model" "$MAKE_MODEL"
(cd "$DIR" && tar cf - bin | xz -T0 -6 >bin.tar.xz && rm -rf bin)
if [ "${SMOL_GPU_NO_FIXTURE:-0}" != 1 ]; then
  xz -T0 -6 -c "$FIXTURES/tiny-q4km.gguf" >"$DIR/fixtures/tiny-q4km.gguf.xz"
  cp "$FIXTURES"/golden/tiny-q4km.gguf.* "$DIR/fixtures/golden/"
  cp "$FIXTURES"/dequant/* "$DIR/fixtures/dequant/"
fi
rm -rf "$DIR/lib" "$DIR/llama-bench-cuda.xz"
if [ -n "${SMOL_GPU_REFERENCE:-}" ]; then
  cp "$SMOL_GPU_REFERENCE" "$DIR/llama-bench-cuda.xz"
  gomp=$(dirname "$SMOL_GPU_REFERENCE")/libgomp.so.1
  if [ -f "$gomp" ]; then mkdir -p "$DIR/lib" && cp "$gomp" "$DIR/lib/"; fi
fi
cat >"$DIR/run.sh" <<'RUN'
#!/usr/bin/env bash
# On the device: unpack, run tools/gpu-check.sh (GPU_T seconds at most), pack its logs into $OUT.
set -u
C=$(cd "$(dirname "$0")" && pwd)
cd "$C/.."
mkdir -p "$C/bin" && tar xJf "$C/bin.tar.xz" -C "$C"
[ -f "$C/fixtures/tiny-q4km.gguf.xz" ] && xz -d -k -f "$C/fixtures/tiny-q4km.gguf.xz"
export SMOL_FIXTURES=$C/fixtures SMOL_GPU_BIN=$C/bin
[ -d "$C/lib" ] && export LD_LIBRARY_PATH=$C/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
if [ -f "$C/llama-bench-cuda.xz" ]; then  # a reference llama-bench built with CUDA, if packed
  xz -dc "$C/llama-bench-cuda.xz" >/tmp/llama-bench-cuda && chmod +x /tmp/llama-bench-cuda
  export IK_CUDA_BENCH=/tmp/llama-bench-cuda
fi
timeout "${GPU_T:-460}" tools/gpu-check.sh /tmp/gpu-logs >"$OUT/summary.txt" 2>&1
echo "gpu-check exit $?" >>"$OUT/summary.txt"
tar cJf "$OUT/logs.tar.xz" -C /tmp gpu-logs
RUN
chmod +x "$DIR/run.sh"
du -sh "$DIR"
