// Reference (scalar) quantization of floats into the weight formats smol
// writes: F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K (and Q8_K, the activation
// format, for tests), one function per type. Part of quant/reference.hpp,
// which holds quantize_row(type, ...), the entry that picks among them.
//
// Quantization follows the approach of the reference k-quant quantizers (facts,
// not code, carried over): per sub-block, a weighted least-squares fit of
// (scale, min) tried over a sweep of candidate inverse scales; then the
// sub-block scales/mins are themselves quantized to 6 bits (Q4_K/Q5_K) or int8
// (Q6_K) against a per-super-block fp16 scale, and the weights re-quantized
// against the scales actually stored. Q4_K/Q5_K then nudge each 6-bit
// (scale, min) code pair by +-1 where that lowers the sub-block's squared error.
// Input must be finite; bit-exactness with other quantizers is not a goal, only
// format compatibility and comparable error.
// The search: quant/detail/scale_search.hpp; one block: quant/detail/block_quantizers.hpp.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../core/fp16.hpp"
#include "blocks.hpp"
#include "detail/block_quantizers.hpp"
#include "detail/rounding.hpp"
#include "types.hpp"

SMOL_NAMESPACE_BEGIN

// ---------------------------------------------------------------------------
// Quantization: n floats (a multiple of the block size) -> blocks.
// ---------------------------------------------------------------------------

// How hard the Q4_K/Q5_K scale search works. `standard`: the reference quantizers'
// sweep sizes plus a final +-1 refinement of the 6-bit codes (Gaussian RMSE / std:
// Q4_K 0.070, Q5_K 0.035, Q6_K 0.0177). `fast`: a third of the sweep and no
// refinement, ~3x faster (Q4_K 0.074, Q5_K 0.037), used for multi-gigabyte random
// models. Q6_K and Q8_0 ignore it.
enum class QuantizeEffort { standard, fast };

inline void quantize_row_f32(const float* src, float* dst, size_t n) noexcept {
    std::memcpy(dst, src, n * sizeof(float));
}

inline void quantize_row_f16(const float* src, uint16_t* dst, size_t n) noexcept {
    for (size_t i = 0; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

inline void quantize_row_bf16(const float* src, uint16_t* dst, size_t n) noexcept {
    for (size_t i = 0; i < n; ++i) dst[i] = fp32_to_bf16(src[i]);
}

// Q8_0: per 32 weights, d = max|x| / 127 (fp16), q = round(x / d).
inline void quantize_row_q8_0(const float* src, BlockQ8_0* dst, size_t n) noexcept {
    for (size_t b = 0; b < n / QK8_0; ++b) {
        const float* x = src + b * QK8_0;
        float max_abs = 0;
        for (int i = 0; i < QK8_0; ++i) max_abs = std::max(max_abs, std::fabs(x[i]));
        const float d = max_abs / 127;
        const float inverse = d > 0 ? 1 / d : 0;
        dst[b].d = detail::fp16_scale(d);
        for (int i = 0; i < QK8_0; ++i)
            dst[b].qs[i] = int8_t(detail::nearest_level(x[i] * inverse, -127, 127));
    }
}

// Q8_K (activation format): per 256 values, float d = max|x| / 127, q = round(x / d)
// in [-127, 127], and bsums = the sum of each 16 q (used by the Q4_K/Q5_K min term).
inline void quantize_row_q8_k(const float* src, BlockQ8K* dst, size_t n) noexcept {
    for (size_t b = 0; b < n / QK_K; ++b) {
        const float* x = src + b * QK_K;
        float max_abs = 0;
        for (int i = 0; i < QK_K; ++i) max_abs = std::max(max_abs, std::fabs(x[i]));
        BlockQ8K& block = dst[b];
        block.d = max_abs / 127;
        const float inverse = max_abs > 0 ? 127 / max_abs : 0;
        for (int i = 0; i < QK_K; ++i)
            block.qs[i] = int8_t(detail::nearest_level(x[i] * inverse, -127, 127));
        for (int g = 0; g < QK_K / 16; ++g) {
            int sum = 0;
            for (int i = 0; i < 16; ++i) sum += block.qs[16 * g + i];
            block.bsums[g] = int16_t(sum);
        }
    }
}

inline void quantize_row_q4_k(const float* src, BlockQ4K* dst, size_t n,
                              QuantizeEffort effort = QuantizeEffort::standard) noexcept {
    const int steps = effort == QuantizeEffort::standard ? 20 : 6;
    const bool refine = effort == QuantizeEffort::standard;
    for (size_t b = 0; b < n / QK_K; ++b)
        detail::quantize_block_k4<4>(src + b * QK_K, dst[b], steps, refine);
}

inline void quantize_row_q5_k(const float* src, BlockQ5K* dst, size_t n,
                              QuantizeEffort effort = QuantizeEffort::standard) noexcept {
    const int steps = effort == QuantizeEffort::standard ? 15 : 5;
    const bool refine = effort == QuantizeEffort::standard;
    for (size_t b = 0; b < n / QK_K; ++b)
        detail::quantize_block_k4<5>(src + b * QK_K, dst[b], steps, refine);
}

inline void quantize_row_q6_k(const float* src, BlockQ6K* dst, size_t n) noexcept {
    for (size_t b = 0; b < n / QK_K; ++b) detail::quantize_block_q6_k(src + b * QK_K, dst[b]);
}

SMOL_NAMESPACE_END
