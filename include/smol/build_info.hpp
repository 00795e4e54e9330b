// smol::build_info(): what this program runs smol with: the kernel level
// chosen at run time (kernels/cpu.hpp: SMOL_CPU from the environment, else
// the best level the CPU supports), the best level, the levels compiled in,
// whether exceptions are on, and the hardware threads. No ISA flags are
// involved: every unit compiles every level of its architecture. A Generator
// logs a warning through the user's log callback when its model runs the
// scalar kernels, because decoding is then several times slower.
#pragma once

#include "detail/abi.hpp"

#include <string>
#include <thread>

#include "error.hpp"
#include "kernels/cpu.hpp"
#include "version.hpp"

SMOL_NAMESPACE_BEGIN

struct BuildInfo {
    const char* version;   // SMOL_VERSION_STRING
    const char* isa;       // default kernel level: SMOL_CPU if valid, else the best ("avx2", ...)
    const char* best_isa;  // the best level this CPU runs
    bool simd;             // false when the default level is the scalar reference
    bool exceptions;       // false when compiled with -fno-exceptions
    unsigned hardware_threads;  // std::thread::hardware_concurrency() (0 = unknown)
};

inline BuildInfo build_info() noexcept {
    BuildInfo info{};
    info.version = SMOL_VERSION_STRING;
    CpuLevel level = best_cpu_level();
    info.best_isa = cpu_level_name(level);
    const Expected<CpuLevel> requested = try_requested_cpu_level();
    if (requested.ok()) level = requested.value();
    info.isa = cpu_level_name(level);
    info.simd = level != CpuLevel::scalar;
    info.exceptions = SMOL_HAS_EXCEPTIONS != 0;
    info.hardware_threads = std::thread::hardware_concurrency();
    return info;
}

// The levels this build has for its architecture, e.g. "scalar avx2 avxvnni avx512".
inline std::string compiled_isas() {
    size_t count = 0;
    const CpuLevel* levels = compiled_cpu_levels(count);
    std::string out;
    for (size_t i = 0; i < count; ++i) out += std::string(i ? " " : "") + cpu_level_name(levels[i]);
    return out;
}

// One line for logs and --version output, e.g.
// "smol 0.1.0 (isa avx2, best avx2, compiled scalar avx2 avxvnni avx512, exceptions on, 16 hardware
// threads)".
inline std::string build_info_string() {
    const BuildInfo info = build_info();
    return std::string("smol ") + info.version + " (isa " + info.isa + ", best " + info.best_isa +
           ", compiled " + compiled_isas() + ", exceptions " + (info.exceptions ? "on" : "off") +
           ", " + std::to_string(info.hardware_threads) + " hardware threads)";
}

SMOL_NAMESPACE_END
