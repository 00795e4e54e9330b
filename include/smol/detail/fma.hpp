// detail::fma: a fused multiply-add of floats, rounded once, on every
// platform. The scalar kernels (the spec every SIMD level is compared with bit
// for bit) and the cache's key rotation call it where they are compiled
// without an FMA instruction, so the C library's fmaf runs. MinGW-w64's is not
// fused (a quarter of random inputs round twice), which made the Windows
// scalar path disagree with the SIMD ones; there the product is formed
// exactly in double, the sum rounded to odd, and that rounded to float, which
// is the correctly rounded result (53 >= 24 + 2 bits).
#pragma once

#include "abi.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>

SMOL_NAMESPACE_BEGIN
namespace detail {

inline float fma(float a, float b, float c) noexcept {
#if defined(__MINGW32__)
    const double p = double(a) * double(b);  // exact: 24 + 24 bits
    double s = p + double(c);
    if (std::isfinite(s)) {
        // The sum's rounding error, exactly (TwoSum).
        const double v = s - p;
        const double e = (p - (s - v)) + (double(c) - v);
        uint64_t bits;
        std::memcpy(&bits, &s, sizeof bits);
        if (e != 0 && (bits & 1) == 0) {  // round to odd: one step towards the exact sum
            bits += ((e > 0) == (s > 0)) ? 1 : uint64_t(-1);
            std::memcpy(&s, &bits, sizeof s);
        }
    }
    return float(s);
#else
    return std::fma(a, b, c);
#endif
}

}  // namespace detail
SMOL_NAMESPACE_END
