// The kernel level a CPU should get, judged without smol's own detection:
// the compiler's __builtin_cpu_supports on x86-64, /proc/cpuinfo's
// "asimddp" on aarch64 Linux. Where the CPU is emulated (qemu-user shows the
// host's /proc/cpuinfo), the CI script that chose the emulated CPU says what
// it has in SMOL_TEST_EXPECT_LEVEL, which then wins. Used by test_kernels and
// by the flagless consumer (tests/consumer).
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif

namespace smol_test {

inline std::string expected_cpu_level() {
    std::string expected = "scalar";
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                      __builtin_cpu_supports("f16c");
    if (avx2) expected = "avx2";
#if defined(__clang__) || __GNUC__ >= 11
    if (avx2 && __builtin_cpu_supports("avxvnni")) expected = "avxvnni";
#endif
    if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
        expected = "avx512";
#if defined(__linux__) && \
    ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && __GNUC__ >= 11))
    // AMX-TILE + AMX-INT8 (cpuid leaf 7 EDX bits 24, 25), the tile state in
    // XCR0 (bits 17, 18) and Linux's permission for it (arch_prctl
    // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): what the amx level needs.
    if (expected == "avx512") {
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && ((edx >> 24) & 3) == 3) {
            unsigned xcr0_low = 0, xcr0_high = 0;
            __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
            if (((xcr0_low >> 17) & 3) == 3 && syscall(SYS_arch_prctl, 0x1023, 18) == 0)
                expected = "amx";
        }
    }
#endif
#elif defined(__aarch64__)
    expected = "neon";
#if defined(__linux__)
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
        if (line.rfind("Features", 0) != 0) continue;
        const bool dotprod = (line + " ").find(" asimddp ") != std::string::npos;
        if (dotprod) expected = "dotprod";
        if (dotprod && (line + " ").find(" i8mm ") != std::string::npos) expected = "i8mm";
    }
#endif
#endif
    if (const char* told = std::getenv("SMOL_TEST_EXPECT_LEVEL")) expected = told;
    return expected;
}

}  // namespace smol_test
