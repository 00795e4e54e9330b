// IEEE half (fp16) and bfloat16 <-> float conversion, bit-exact, no hardware
// requirement. Kernels that convert in bulk use F16C/NEON instead; these are the
// scalar reference and what the block formats use for their scales.
#pragma once

#include "../detail/abi.hpp"

#include <cstdint>
#include <cstring>

SMOL_NAMESPACE_BEGIN

namespace detail {

inline float bits_to_float(uint32_t bits) noexcept {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

inline uint32_t float_to_bits(float f) noexcept {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return bits;
}

}  // namespace detail

// fp16 -> fp32, handles subnormals, infinities and NaN exactly.
inline float fp16_to_fp32(uint16_t h) noexcept {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0) {
        if (mantissa == 0) return detail::bits_to_float(sign);
        // Subnormal: value = mantissa * 2^-24, exact in float.
        float value = float(mantissa) * (1.0f / 16777216.0f);
        return sign ? -value : value;
    }
    if (exponent == 31) return detail::bits_to_float(sign | 0x7f800000u | (mantissa << 13));
    return detail::bits_to_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// fp32 -> fp16 with round-to-nearest-even; overflow gives infinity, NaN stays NaN.
inline uint16_t fp32_to_fp16(float f) noexcept {
    const uint32_t bits = detail::float_to_bits(f);
    const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
    const uint32_t abs_bits = bits & 0x7fffffffu;
    if (abs_bits >= 0x7f800000u) {  // inf or NaN
        return uint16_t(sign | 0x7c00u | (abs_bits > 0x7f800000u ? 0x200u : 0u));
    }
    if (abs_bits >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: inf
    if (abs_bits < 0x38800000u) {  // result is subnormal (or zero) in half
        // Scale into the subnormal range; the float add rounds to nearest even for us.
        const float magnitude = detail::bits_to_float(abs_bits);
        const float scaled = magnitude * 16777216.0f;  // units of 2^-24
        // Round half to even on the integer count of 2^-24 units.
        uint32_t units = uint32_t(scaled);
        const float frac = scaled - float(units);
        if (frac > 0.5f || (frac == 0.5f && (units & 1u))) ++units;
        return uint16_t(sign | units);
    }
    // Normal: rebias the exponent and round the 13 dropped mantissa bits to nearest even.
    uint32_t half = ((abs_bits - 0x38000000u) >> 13);
    const uint32_t dropped = abs_bits & 0x1fffu;
    if (dropped > 0x1000u || (dropped == 0x1000u && (half & 1u))) ++half;
    return uint16_t(sign | half);
}

inline float bf16_to_fp32(uint16_t b) noexcept {
    return detail::bits_to_float(uint32_t(b) << 16);
}

// fp32 -> bf16, round-to-nearest-even; NaN stays a (quiet) NaN.
inline uint16_t fp32_to_bf16(float f) noexcept {
    const uint32_t bits = detail::float_to_bits(f);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40u);
    const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
    return uint16_t((bits + rounding) >> 16);
}

SMOL_NAMESPACE_END
