// smol::build_info(): what this translation unit compiled smol with: the SIMD
// instruction set its kernels use (chosen at compile time from the consumer's
// flags: -mavx2 -mfma gives avx2, aarch64 gives neon, anything else the
// portable scalar code), whether exceptions are on, and the hardware threads.
// A Generator logs a warning through the user's log callback when the ISA is
// scalar, because decoding is then several times slower.
#pragma once

#include <string>
#include <thread>

#include "error.hpp"
#include "version.hpp"

namespace smol {

struct BuildInfo {
    const char* version;        // SMOL_VERSION_STRING
    const char* isa;            // "avx2", "neon" or "scalar"
    bool simd;                  // false for the scalar fallback
    bool exceptions;            // false when compiled with -fno-exceptions
    unsigned hardware_threads;  // std::thread::hardware_concurrency() (0 = unknown)
};

inline BuildInfo build_info() noexcept {
    BuildInfo info{};
    info.version = SMOL_VERSION_STRING;
#if defined(__AVX2__) && defined(__FMA__)
    info.isa = "avx2";
    info.simd = true;
#elif defined(__ARM_NEON) || defined(__ARM_NEON__)
    info.isa = "neon";
    info.simd = true;
#else
    info.isa = "scalar";
    info.simd = false;
#endif
    info.exceptions = SMOL_HAS_EXCEPTIONS != 0;
    info.hardware_threads = std::thread::hardware_concurrency();
    return info;
}

// One line for logs and --version output, e.g.
// "smol 0.1.0 (isa avx2, exceptions on, 16 hardware threads)".
inline std::string build_info_string() {
    const BuildInfo info = build_info();
    return std::string("smol ") + info.version + " (isa " + info.isa + ", exceptions " +
           (info.exceptions ? "on" : "off") + ", " + std::to_string(info.hardware_threads) +
           " hardware threads)";
}

}  // namespace smol
