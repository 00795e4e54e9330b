# Sourced by .ci/run and the tools/ci-*.sh stages (not run on its own): puts
# Debian's ccache in front of every compiler of the CI builds, so a run after
# local builds of the same sources (or after an earlier run) reuses their
# objects. The cache lies under the home folder and the settings match a
# local shell's, so the hashes agree:
#   CCACHE_DIR          $HOME/.ccache
#   CCACHE_BASEDIR      the checkout's parent folder: paths below it are hashed
#                       relative to the build folder, so a clone elsewhere hits
#   CCACHE_NOHASHDIR=1  the build folder stays out of the hash (-g builds too)
#   CCACHE_COMPILERCHECK=content   the compiler is known by its bytes, not its mtime
# Each may be set beforehand to override it. CMake (3.17 and later) reads
# CMAKE_CXX_COMPILER_LAUNCHER / CMAKE_CUDA_COMPILER_LAUNCHER from the
# environment when it configures a new build folder, which reaches the
# README's verbatim command and the consumer tests' nested builds alike; the
# stages also pass "${SMOL_CCACHE_FLAGS[@]}" to cmake explicitly, and
# $SMOL_LAUNCHER prefixes direct compiler calls. Without ccache (or with
# SMOL_CCACHE=off) both are empty and nothing is exported.
# Expects ROOT (the checkout).
SMOL_CCACHE_FLAGS=()
SMOL_LAUNCHER=""
if [ "${SMOL_CCACHE:-}" != off ] && command -v ccache >/dev/null 2>&1; then
  SMOL_LAUNCHER=ccache
  export CCACHE_DIR=${CCACHE_DIR:-$HOME/.ccache}
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(cd "$ROOT/.." && pwd)}
  export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
  export CCACHE_COMPILERCHECK=${CCACHE_COMPILERCHECK:-content}
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CMAKE_CUDA_COMPILER_LAUNCHER=ccache
  SMOL_CCACHE_FLAGS=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
