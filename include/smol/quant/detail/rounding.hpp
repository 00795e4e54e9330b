// Rounding helpers of the quantizers (quant/quantize.hpp and the k-quant
// search): float -> integer level without lrint, so the loops over them
// vectorize, and block scales stored as fp16 without overflowing to inf.
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "../../core/fp16.hpp"

SMOL_NAMESPACE_BEGIN
namespace detail {

// Round to nearest (ties to even) for |v| < 2^22: adding 1.5 * 2^23 pushes the
// fraction out of the mantissa, whose low bits then hold the integer. Branch-free
// and vectorizable, unlike lrint. Callers clamp first.
inline int round_to_int(float v) noexcept {
    const float shifted = v + 12582912.0f;
    int32_t bits;
    std::memcpy(&bits, &shifted, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

// The integer level nearest to v, clamped to [lowest, highest].
inline int nearest_level(float v, int lowest, int highest) noexcept {
    return round_to_int(std::min(std::max(v, float(lowest)), float(highest)));
}

// fp16 of a (non-negative) block scale, saturating at the largest finite half
// so that huge inputs degrade instead of turning into inf/NaN.
inline uint16_t fp16_scale(float scale) noexcept {
    const uint16_t h = fp32_to_fp16(scale);
    return (h & 0x7fffu) >= 0x7c00u ? uint16_t((h & 0x8000u) | 0x7bffu) : h;
}

// Nearest integer level to v as a float, clamped to [lowest, highest]. Pure float
// arithmetic (the 1.5 * 2^23 trick), so loops over it vectorize.
inline float nearest_level_f(float v, float lowest, float highest) noexcept {
    const float clamped = std::min(std::max(v, lowest), highest);
    return (clamped + 12582912.0f) - 12582912.0f;
}

}  // namespace detail
SMOL_NAMESPACE_END
