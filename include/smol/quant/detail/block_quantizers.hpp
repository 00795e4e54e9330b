// One super-block of 256 floats -> one Q4_K, Q5_K or Q6_K block: the scale
// search of scale_search.hpp per sub-block, then the sub-block scales
// quantized against the block's fp16 scale and every weight rounded against
// the scales actually stored. Internals of quantize_row_q4_k / q5_k / q6_k.
#pragma once

#include "../../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "../../core/fp16.hpp"
#include "../blocks.hpp"
#include "rounding.hpp"
#include "scale_search.hpp"

SMOL_NAMESPACE_BEGIN
namespace detail {

// Q4_K and Q5_K share everything but the number of levels and where the 5th bit goes.
// Search effort: steps of the candidate sweep (the reference quantizers use 20 for
// Q4_K and 15 for Q5_K).
template <int kBits, class Block>
inline void quantize_block_k4(const float* x, Block& block, int steps, bool refine_codes) noexcept {
    constexpr int kMaxQ = (1 << kBits) - 1;
    const float first_step = kBits == 4 ? -1.0f : -0.5f;
    float scales[8], offsets[8], weights[32];
    float max_scale = 0, max_offset = 0;
    for (int s = 0; s < 8; ++s) {
        const float* xs = x + 32 * s;
        float sum_sq = 0;
        for (int i = 0; i < 32; ++i) sum_sq += xs[i] * xs[i];
        const float rms = std::sqrt(sum_sq / 32);
        for (int i = 0; i < 32; ++i) weights[i] = rms + std::fabs(xs[i]);
        const AffineFit fit = fit_affine<32>(xs, weights, kMaxQ, first_step, 0.1f, steps);
        scales[s] = fit.scale;
        offsets[s] = fit.offset;
        max_scale = std::max(max_scale, fit.scale);
        max_offset = std::max(max_offset, fit.offset);
    }
    // Super-block scales: the largest sub-block scale/offset maps to 63. The 6-bit
    // sub-block values are rounded against the fp16 value actually stored.
    block.d = fp16_scale(max_scale / 63);
    block.dmin = fp16_scale(max_offset / 63);
    const float d = fp16_to_fp32(block.d);
    const float dmin = fp16_to_fp32(block.dmin);
    uint8_t scale_codes[8], offset_codes[8];
    for (int s = 0; s < 8; ++s) {
        scale_codes[s] = uint8_t(d > 0 ? nearest_level(scales[s] / d, 0, 63) : 0);
        offset_codes[s] = uint8_t(dmin > 0 ? nearest_level(offsets[s] / dmin, 0, 63) : 0);
    }
    // Rounding the scale and offset to 6 bits moved them off their optimum; nudging
    // each code by one step and keeping the pair with the smallest squared error
    // (with the weights re-rounded to that grid) wins back part of the loss.
    if (refine_codes) {
        for (int s = 0; s < 8; ++s)
            refine_k4_codes<kMaxQ>(x + 32 * s, d, dmin, scale_codes[s], offset_codes[s]);
    }
    pack_scales_mins_k4(scale_codes, offset_codes, block.scales);

    // Re-quantize every weight against the stored (scale, offset) of its sub-block.
    uint8_t q[QK_K];
    for (int s = 0; s < 8; ++s) {
        const float step = d * float(scale_codes[s]);
        const float offset = dmin * float(offset_codes[s]);
        for (int i = 0; i < 32; ++i) {
            const float v = x[32 * s + i];
            q[32 * s + i] = uint8_t(step > 0 ? nearest_level((v + offset) / step, 0, kMaxQ) : 0);
        }
    }
    if constexpr (kBits == 5) std::memset(block.qh, 0, sizeof block.qh);
    for (int chunk = 0; chunk < 4; ++chunk) {
        for (int i = 0; i < 32; ++i) {
            const uint8_t lo = q[64 * chunk + i], hi = q[64 * chunk + 32 + i];
            block.qs[32 * chunk + i] = uint8_t((lo & 0x0F) | ((hi & 0x0F) << 4));
            if constexpr (kBits == 5) {
                block.qh[i] |= uint8_t(((lo >> 4) << (2 * chunk)) | ((hi >> 4) << (2 * chunk + 1)));
            }
        }
    }
}

inline void quantize_block_q6_k(const float* x, BlockQ6K& block) noexcept {
    float scales[16];
    float extreme = 0, extreme_abs = 0;  // the sub-block scale of largest magnitude, signed
    for (int s = 0; s < 16; ++s) {
        scales[s] = fit_symmetric<16>(x + 16 * s, 32);
        if (std::fabs(scales[s]) > extreme_abs) {
            extreme_abs = std::fabs(scales[s]);
            extreme = scales[s];
        }
    }
    // The extreme sub-block scale maps to -128 (int8's longer end); d carries the sign.
    block.d = extreme_abs == 0 ? uint16_t(0) : fp16_scale(-extreme / 128);
    const float d = fp16_to_fp32(block.d);
    for (int s = 0; s < 16; ++s)
        block.scales[s] = int8_t(d != 0 ? nearest_level(scales[s] / d, -128, 127) : 0);

    uint8_t q[QK_K];
    for (int s = 0; s < 16; ++s) {
        const float step = d * float(block.scales[s]);
        for (int i = 0; i < 16; ++i) {
            const int value = step != 0 ? nearest_level(x[16 * s + i] / step, -32, 31) : 0;
            q[16 * s + i] = uint8_t(value + 32);
        }
    }
    for (int half = 0; half < 2; ++half) {
        const uint8_t* qq = q + 128 * half;
        for (int i = 0; i < 32; ++i) {
            block.ql[64 * half + i] = uint8_t((qq[i] & 0x0F) | ((qq[i + 64] & 0x0F) << 4));
            block.ql[64 * half + i + 32] =
                uint8_t((qq[i + 32] & 0x0F) | ((qq[i + 96] & 0x0F) << 4));
            block.qh[32 * half + i] = uint8_t((qq[i] >> 4) | ((qq[i + 32] >> 4) << 2) |
                                              ((qq[i + 64] >> 4) << 4) | ((qq[i + 96] >> 4) << 6));
        }
    }
}

}  // namespace detail
SMOL_NAMESPACE_END
