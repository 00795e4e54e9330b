#!/usr/bin/env bash
# Cross-compiles the kernel tests (tests/test_kernels.cpp + tests/test_main.cpp)
# for AArch64 with Debian's g++-aarch64-linux-gnu, without any -march
# extension, and runs them under qemu-user on a CPU with the dot-product and
# int8 matrix extensions (every level: scalar, neon, dotprod, i8mm), on one
# with dot products only (dotprod) and on one with neither (neon). Installs the cross compiler and qemu
# with apt-get if they are missing (CI runs this as root).
#
#   tools/ci-aarch64.sh [build-dir]      (default: build-aarch64)
#
# The compiler sees an include directory holding only symlinks to xsimd and
# doctest (never the host's /usr/include as a whole, whose headers are for x86).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROOT=$repo
. "$repo/tools/ci-ccache.sh"  # each unit compiled apart, so ccache can keep it
build="${1:-$repo/build-aarch64}"
cxx=aarch64-linux-gnu-g++

if ! command -v "$cxx" >/dev/null || ! command -v qemu-aarch64 >/dev/null; then
    echo "ci-aarch64: installing g++-aarch64-linux-gnu and qemu-user"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y g++-aarch64-linux-gnu qemu-user
fi

find_header_dir() {  # the directory that holds $1 (e.g. xsimd/xsimd.hpp)
    for dir in /usr/include /usr/local/include; do
        if [ -e "$dir/$1" ]; then echo "$dir/${1%%/*}"; return 0; fi
    done
    echo "ci-aarch64: cannot find $1" >&2
    return 1
}

mkdir -p "$build/include"
ln -sfn "$(find_header_dir xsimd/xsimd.hpp)" "$build/include/xsimd"
ln -sfn "$(find_header_dir doctest/doctest.h)" "$build/include/doctest"

# One flagless build (-march=armv8-a): the neon, dotprod and i8mm levels are all
# compiled in and chosen at run time, so the emulated CPU decides what runs.
echo "ci-aarch64: building test_kernels (-march=armv8-a, run-time dispatch)"
# The two units compile side by side (CI has two cores).
pids=()
for unit in test_kernels test_main; do
    $SMOL_LAUNCHER "$cxx" -std=c++17 -O2 -Wall -Wextra -march=armv8-a -pthread \
        -DSMOL_TEST_NO_FIXTURES -I "$repo/include" -I "$repo/tests" -isystem "$build/include" \
        -c "$repo/tests/$unit.cpp" -o "$build/$unit.o" &
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
"$cxx" -static -pthread "$build/test_kernels.o" "$build/test_main.o" -o "$build/test_kernels"

run_on() {  # qemu CPU model, the level it must select; output in $build/run-<cpu>.log
    SMOL_TEST_EXPECT_LEVEL="$2" qemu-aarch64 -cpu "$1" -L /usr/aarch64-linux-gnu "$build/test_kernels" \
        > "$build/run-$1.log" 2>&1
}

# The emulated CPUs run side by side (qemu-user is one thread each).
echo "ci-aarch64: running test_kernels under qemu -cpu max (expects i8mm), -cpu cortex-a76 (expects dotprod) and -cpu cortex-a53 (expects neon)"
run_on max i8mm &           # has SDOT and SMMLA: tests the scalar, neon, dotprod and i8mm levels
max_pid=$!
run_on cortex-a76 dotprod & # ARMv8.2 with SDOT, no SMMLA: i8mm is skipped
a76_pid=$!
run_on cortex-a53 neon &    # ARMv8.0: dotprod and i8mm are skipped, neon is the best
a53_pid=$!
status=0
for run in "max:$max_pid" "cortex-a76:$a76_pid" "cortex-a53:$a53_pid"; do
    cpu=${run%%:*}
    if wait "${run#*:}"; then
        echo "ci-aarch64: -cpu $cpu passed"; tail -n 4 "$build/run-$cpu.log"
    else
        echo "ci-aarch64: -cpu $cpu FAILED" >&2; cat "$build/run-$cpu.log" >&2; status=1
    fi
done
[ "$status" = 0 ] || exit 1
echo "ci-aarch64: all passed"
