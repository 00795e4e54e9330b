// What the running CPU can execute, and the kernel levels smol has for it.
//
//   CpuLevel        one complete set of kernels (kernels/kernel_set.hpp), ordered
//                   within an architecture from the portable baseline up:
//                     x86-64:  scalar < avx2 (AVX2+FMA+F16C) < avxvnni (AVX-VNNI,
//                              256-bit, Intel client) < avx512 (F+BW+VL+VNNI)
//                              < amx (avx512 + AMX-TILE/AMX-INT8: the long
//                              batches' converted rows on tiles; Linux only)
//                     aarch64: neon (baseline) < dotprod (SDOT/UDOT) < i8mm
//                              (dotprod + SMMLA: the long batches' converted
//                              rows as 2x8 by 8x2 int8 products)
//                   scalar is the readable spec and runs anywhere.
//   cpu_supports(level)   true when this CPU (and its OS, for the AVX/AVX-512
//                   register state) can run the level, judged from cpuid +
//                   XGETBV on x86-64, HWCAP / sysctl on aarch64. For amx
//                   it also asks Linux for the tile data state, once per
//                   process (arch_prctl ARCH_REQ_XCOMP_PERM); the answer
//                   covers every thread of the process.
//   best_cpu_level()      the highest supported level.
//   parse_cpu_level(text) "scalar", "avx2", "avxvnni", "avx512", "amx", "neon", "dotprod",
//                   "i8mm"
//                   (also "auto" = best); std::nullopt for anything else.
//   requested_cpu_level() the level named by the SMOL_CPU environment variable,
//                   or best; Error(invalid_argument) if SMOL_CPU names a level this
//                   build does not know or this CPU cannot run.
//                   try_requested_cpu_level() returns that error as a value (as
//                   try_resolve_cpu_level() does for resolve_cpu_level()).
//   SMOL_CPU_DISABLE a comma-separated list of features this process treats as
//                   absent (avx2, avxvnni, avx512, avx512vbmi, amx, dotprod,
//                   i8mm), with every level and tile that needs them: to run,
//                   test and time on one CPU what a CPU without them runs (e.g.
//                   avx512vbmi: the avx512 level of a Cascade Lake). Read once,
//                   with the detection; requested_cpu_level() reports a name
//                   that is no feature as Error(invalid_argument).
//
// Detection is done once per process (a function-local static) and never
// uses instructions the CPU might lack: cpuid and xgetbv exist on every
// x86-64 CPU (xgetbv only after cpuid reports OSXSAVE).
#pragma once

#include "../detail/abi.hpp"

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "../error.hpp"

#if defined(__x86_64__) || defined(_M_X64)
#define SMOL_ARCH_X86_64 1
#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#else
#include <cpuid.h>
#endif
// The amx level's kernels need a compiler that knows the AMX targets and
// intrinsics (GCC 11, LLVM 12); the level is offered on Linux only, where the
// process must ask for the tile state before its first tile instruction.
#if defined(__linux__) &&                                                                         \
    ((defined(__clang__) &&                                                                       \
      ((!defined(__apple_build_version__) && __clang_major__ >= 12) || __clang_major__ >= 14)) || \
     (defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11))
#define SMOL_HAS_AMX_KERNELS 1
#include <sys/syscall.h>
#include <unistd.h>
#endif
#elif defined(__aarch64__) || defined(_M_ARM64)
#define SMOL_ARCH_AARCH64 1
#if defined(__linux__)
#include <sys/auxv.h>
#elif defined(__APPLE__)
#include <sys/sysctl.h>
#endif
#endif

SMOL_NAMESPACE_BEGIN

// amx and i8mm come last so that the other levels keep their values; the
// order of the levels is compiled_cpu_levels'.
enum class CpuLevel : uint8_t {
    automatic,
    scalar,
    avx2,
    avxvnni,
    avx512,
    neon,
    dotprod,
    amx,
    i8mm
};

inline const char* cpu_level_name(CpuLevel level) noexcept {
    switch (level) {
        case CpuLevel::automatic:
            return "auto";
        case CpuLevel::scalar:
            return "scalar";
        case CpuLevel::avx2:
            return "avx2";
        case CpuLevel::avxvnni:
            return "avxvnni";
        case CpuLevel::avx512:
            return "avx512";
        case CpuLevel::neon:
            return "neon";
        case CpuLevel::dotprod:
            return "dotprod";
        case CpuLevel::amx:
            return "amx";
        case CpuLevel::i8mm:
            return "i8mm";
    }
    return "?";
}

inline std::optional<CpuLevel> parse_cpu_level(std::string_view text) noexcept {
    for (CpuLevel level :
         {CpuLevel::automatic, CpuLevel::scalar, CpuLevel::avx2, CpuLevel::avxvnni,
          CpuLevel::avx512, CpuLevel::amx, CpuLevel::neon, CpuLevel::dotprod, CpuLevel::i8mm}) {
        if (text == cpu_level_name(level)) return level;
    }
    return std::nullopt;
}

// The levels compiled for this architecture, lowest first.
inline const CpuLevel* compiled_cpu_levels(size_t& count) noexcept {
#if defined(SMOL_ARCH_X86_64)
#if defined(SMOL_HAS_AMX_KERNELS)
    static constexpr CpuLevel levels[] = {CpuLevel::scalar, CpuLevel::avx2, CpuLevel::avxvnni,
                                          CpuLevel::avx512, CpuLevel::amx};
#else
    static constexpr CpuLevel levels[] = {CpuLevel::scalar, CpuLevel::avx2, CpuLevel::avxvnni,
                                          CpuLevel::avx512};
#endif
#elif defined(SMOL_ARCH_AARCH64)
    static constexpr CpuLevel levels[] = {CpuLevel::scalar, CpuLevel::neon, CpuLevel::dotprod,
                                          CpuLevel::i8mm};
#else
    static constexpr CpuLevel levels[] = {CpuLevel::scalar};
#endif
    count = sizeof levels / sizeof levels[0];
    return levels;
}

namespace detail {

// The raw features smol's levels need.
struct CpuFeatures {
    bool avx2 = false;     // AVX2 + FMA + F16C, with the OS saving the YMM state
    bool avxvnni = false;  // AVX-VNNI (VEX-encoded vpdpbusd)
    bool avx512 = false;   // AVX-512 F, BW, VL, VNNI, with the OS saving the ZMM state
    bool amx = false;      // avx512 + AMX-TILE + AMX-INT8, the tile state granted to the process
    // avx512 + AVX512-VBMI (byte permutes, vpmultishiftqb): not a level of its
    // own; the avx512 level's set uses it for some tiles (kernels/x86.hpp).
    bool avx512vbmi = false;
    bool dotprod = false;  // AArch64 SDOT/UDOT
    bool i8mm = false;     // AArch64 SMMLA (with dotprod: every such CPU has both)
};

#if defined(SMOL_ARCH_X86_64)
struct CpuidRegisters {
    uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

inline CpuidRegisters cpuid(uint32_t leaf, uint32_t subleaf) noexcept {
    CpuidRegisters r;
#if defined(_MSC_VER) && !defined(__clang__)
    int regs[4];
    __cpuidex(regs, int(leaf), int(subleaf));
    r.eax = uint32_t(regs[0]), r.ebx = uint32_t(regs[1]), r.ecx = uint32_t(regs[2]),
    r.edx = uint32_t(regs[3]);
#else
    if (leaf > __get_cpuid_max(0, nullptr)) return r;
    __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
#endif
    return r;
}

// XCR0: which register states the OS saves on a context switch. Only called
// once cpuid has reported OSXSAVE, so the instruction exists.
inline uint64_t xgetbv0() noexcept {
#if defined(_MSC_VER) && !defined(__clang__)
    return _xgetbv(0);
#else
    uint32_t low = 0, high = 0;
    __asm__ volatile("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
    return (uint64_t(high) << 32) | low;
#endif
}
#endif

inline CpuFeatures detect_cpu_features() noexcept {
    CpuFeatures f;
#if defined(SMOL_ARCH_X86_64)
    const CpuidRegisters leaf1 = cpuid(1, 0);
    const bool osxsave = (leaf1.ecx >> 27) & 1;
    const bool avx = (leaf1.ecx >> 28) & 1, fma = (leaf1.ecx >> 12) & 1,
               f16c = (leaf1.ecx >> 29) & 1;
    if (!osxsave || !avx) return f;
    const uint64_t xcr0 = xgetbv0();
    const bool os_ymm = (xcr0 & 0x6) == 0x6;              // SSE + AVX state
    const bool os_zmm = os_ymm && (xcr0 & 0xe0) == 0xe0;  // opmask + ZMM0-15 upper + ZMM16-31
    const CpuidRegisters leaf7 = cpuid(7, 0);
    const CpuidRegisters leaf7_1 = cpuid(7, 1);
    const bool avx2 = (leaf7.ebx >> 5) & 1;
    f.avx2 = os_ymm && avx2 && fma && f16c;
    f.avxvnni = f.avx2 && ((leaf7_1.eax >> 4) & 1);
    const bool avx512f = (leaf7.ebx >> 16) & 1, avx512bw = (leaf7.ebx >> 30) & 1;
    const bool avx512vl = (leaf7.ebx >> 31) & 1, avx512vnni = (leaf7.ecx >> 11) & 1;
    f.avx512 = f.avx2 && os_zmm && avx512f && avx512bw && avx512vl && avx512vnni;
    f.avx512vbmi = f.avx512 && ((leaf7.ecx >> 1) & 1);
#if defined(SMOL_HAS_AMX_KERNELS)
    // AMX-TILE and AMX-INT8: leaf 7 EDX bits 24 and 25; the OS saves the tile
    // configuration and data: XCR0 bits 17 and 18. Linux still faults the first
    // tile instruction of a process that has not asked for the data state
    // (ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18); granted once, it
    // holds for every thread of the process, the pool's workers included.
    const bool amx_tile = (leaf7.edx >> 24) & 1, amx_int8 = (leaf7.edx >> 25) & 1;
    const bool os_tiles = (xcr0 & (uint64_t(3) << 17)) == (uint64_t(3) << 17);
    f.amx =
        f.avx512 && amx_tile && amx_int8 && os_tiles && syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#endif
#elif defined(SMOL_ARCH_AARCH64)
#if defined(__linux__)
    f.dotprod = (getauxval(AT_HWCAP) >> 20) & 1;               // HWCAP_ASIMDDP
    f.i8mm = f.dotprod && ((getauxval(AT_HWCAP2) >> 13) & 1);  // HWCAP2_I8MM
#elif defined(__APPLE__)
    int value = 0;
    size_t size = sizeof value;
    f.dotprod =
        sysctlbyname("hw.optional.arm.FEAT_DotProd", &value, &size, nullptr, 0) == 0 && value != 0;
    value = 0;
    size = sizeof value;
    f.i8mm = f.dotprod &&
             sysctlbyname("hw.optional.arm.FEAT_I8MM", &value, &size, nullptr, 0) == 0 &&
             value != 0;
#endif
#endif
    return f;
}

// The features SMOL_CPU_DISABLE may name, and where each one lives.
struct NamedFeature {
    const char* name;
    bool CpuFeatures::*flag;
};
inline constexpr NamedFeature kNamedFeatures[] = {
    {"avx2", &CpuFeatures::avx2},     {"avxvnni", &CpuFeatures::avxvnni},
    {"avx512", &CpuFeatures::avx512}, {"avx512vbmi", &CpuFeatures::avx512vbmi},
    {"amx", &CpuFeatures::amx},       {"dotprod", &CpuFeatures::dotprod},
    {"i8mm", &CpuFeatures::i8mm}};

// The entry of kNamedFeatures called `name`, or nullptr.
inline const NamedFeature* named_feature(std::string_view name) noexcept {
    for (const NamedFeature& feature : kNamedFeatures)
        if (name == feature.name) return &feature;
    return nullptr;
}

// Calls `each` with every comma-separated name of `list` (empty names skipped).
template <class Each>
void for_each_listed(std::string_view list, Each each) {
    while (!list.empty()) {
        const size_t comma = list.find(',');
        const std::string_view name = list.substr(0, comma);
        if (!name.empty()) each(name);
        list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    }
}

// `f` without the features named in `list` (SMOL_CPU_DISABLE: to run, test and
// time on this CPU what a CPU without them runs), and without what needs them.
// Names that are no feature are left to try_requested_cpu_level to report.
inline CpuFeatures without_features(CpuFeatures f, std::string_view list) noexcept {
    for_each_listed(list, [&](std::string_view name) {
        if (const NamedFeature* feature = named_feature(name)) f.*feature->flag = false;
    });
    f.avxvnni = f.avxvnni && f.avx2;
    f.avx512 = f.avx512 && f.avx2;
    f.amx = f.amx && f.avx512;
    f.avx512vbmi = f.avx512vbmi && f.avx512;
    f.i8mm = f.i8mm && f.dotprod;
    return f;
}

inline const char* disabled_features_env() noexcept {
    const char* env = std::getenv("SMOL_CPU_DISABLE");
    return env == nullptr ? "" : env;
}

// The features of this CPU, less those SMOL_CPU_DISABLE names; read once.
inline const CpuFeatures& cpu_features() noexcept {
    static const CpuFeatures features =
        without_features(detect_cpu_features(), disabled_features_env());
    return features;
}

}  // namespace detail

inline bool cpu_supports(CpuLevel level) noexcept {
    const detail::CpuFeatures& f = detail::cpu_features();
    switch (level) {
        case CpuLevel::automatic:
        case CpuLevel::scalar:
            return true;
#if defined(SMOL_ARCH_X86_64)
        case CpuLevel::avx2:
            return f.avx2;
        case CpuLevel::avxvnni:
            return f.avxvnni;
        case CpuLevel::avx512:
            return f.avx512;
        case CpuLevel::amx:
            return f.amx;
#elif defined(SMOL_ARCH_AARCH64)
        case CpuLevel::neon:
            return true;
        case CpuLevel::dotprod:
            return f.dotprod;
        case CpuLevel::i8mm:
            return f.i8mm;
#endif
        default:
            return false;
    }
}

inline CpuLevel best_cpu_level() noexcept {
    size_t count = 0;
    const CpuLevel* levels = compiled_cpu_levels(count);
    CpuLevel best = CpuLevel::scalar;
    for (size_t i = 0; i < count; ++i)
        if (cpu_supports(levels[i])) best = levels[i];
    return best;
}

// "scalar, avx2" etc.: the levels this CPU runs, lowest first.
inline std::string supported_cpu_levels() {
    size_t count = 0;
    const CpuLevel* levels = compiled_cpu_levels(count);
    std::string out;
    for (size_t i = 0; i < count; ++i) {
        if (!cpu_supports(levels[i])) continue;
        if (!out.empty()) out += ", ";
        out += cpu_level_name(levels[i]);
    }
    return out;
}

// `level` itself when this CPU runs it (best for automatic), else
// Error(invalid_argument) naming what it can run. `what` prefixes the message.
inline Expected<CpuLevel> try_resolve_cpu_level(CpuLevel level, const std::string& what) {
    if (level == CpuLevel::automatic) return best_cpu_level();
    size_t count = 0;
    const CpuLevel* levels = compiled_cpu_levels(count);
    bool compiled = false;
    for (size_t i = 0; i < count; ++i) compiled = compiled || levels[i] == level;
    if (!compiled || !cpu_supports(level))
        return ErrorInfo{ErrorKind::invalid_argument,
                         what + ": this CPU cannot run the '" + cpu_level_name(level) +
                             "' kernels (it runs: " + supported_cpu_levels() + ")"};
    return level;
}
inline CpuLevel resolve_cpu_level(CpuLevel level, const std::string& what) {
    return smol::detail::value_or_fail(try_resolve_cpu_level(level, what));
}

// SMOL_CPU from the environment (unset or empty: automatic), resolved; a name
// that is no level, or a level this CPU cannot run, is Error(invalid_argument).
inline Expected<CpuLevel> try_requested_cpu_level() {
    std::string unknown;
    detail::for_each_listed(detail::disabled_features_env(), [&](std::string_view name) {
        if (detail::named_feature(name) == nullptr && unknown.empty()) unknown = std::string(name);
    });
    if (!unknown.empty()) {
        std::string known;
        for (const detail::NamedFeature& feature : detail::kNamedFeatures)
            known += std::string(known.empty() ? "" : ", ") + feature.name;
        return ErrorInfo{ErrorKind::invalid_argument,
                         "SMOL_CPU_DISABLE names '" + unknown +
                             "', which is not a CPU feature (known: " + known + ")"};
    }
    const char* env = std::getenv("SMOL_CPU");
    if (env == nullptr || *env == '\0') return best_cpu_level();
    const std::optional<CpuLevel> level = parse_cpu_level(env);
    if (!level)
        return ErrorInfo{ErrorKind::invalid_argument,
                         std::string("SMOL_CPU=") + env +
                             " is not a kernel level (known: auto, scalar, avx2, avxvnni, avx512, "
                             "amx, neon, dotprod, i8mm)"};
    return try_resolve_cpu_level(*level, std::string("SMOL_CPU=") + env);
}
inline CpuLevel requested_cpu_level() {
    return smol::detail::value_or_fail(try_requested_cpu_level());
}

SMOL_NAMESPACE_END
