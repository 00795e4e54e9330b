// Scalar reference kernels: the readable spec every SIMD kernel is tested
// against, and the fallback on CPUs without AVX2/NEON.
//
// Quantized dot products never dequantize to float: a weight block and the
// matching block of the quantized activation are multiplied as integers per
// 32-value sub-block (the activation's scale granularity), and the float scales
// are applied once per sub-block to that integer sum.
//
//   Q4_K x Q8_K32, per 256-weight block, per sub-block s of 32:
//     dot_s = scale[s] * sum_{i in s} q4[i] * q8[i]              (integer)
//     sum8_s = bsums[2s] + bsums[2s+1]                           (integer, no weights touched)
//     result += (d(w) * d_s(x)) * dot_s - (dmin(w) * d_s(x)) * (min[s] * sum8_s)
//   Q5_K x Q8_K32: as Q4_K with q5 = q4 + 16 * high_bit.
//   Q6_K x Q8_K32: per sub-block s, over its two 16-groups g = 2s, 2s + 1 (one scale each):
//     dot_s = sum_g scale[g] * (sum_{i in g} q6[i] * q8[i] - 32 * bsums[g])   (integer)
//     result += (d(w) * d_s(x)) * dot_s
//   Q8_0 x Q8_0, per 32: result += d(w) * d(x) * sum q(w) * q(x).
//   F32/F16/BF16 x F32: plain float dot (F16/BF16 widened exactly to float first).
//
// Activation quantization: Q8_K32 as specified in activations.hpp. Q8_0, per
// 32: d = max|x| / 127 stored as fp16, q = round_half_even(x / d). An all-zero
// block gives d = 0 and q = 0. Quantized activations stay within [-127, 127]
// (never -128), which the SIMD sign tricks rely on.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../core/fp16.hpp"
#include "../quant/blocks.hpp"
#include "activations.hpp"
#include "dispatch.hpp"

namespace smol {
inline namespace SMOL_KERNEL_NS {
namespace kernels {

namespace detail {

// Q4_K/Q5_K sub-block s (0..7): its 6-bit scale and 6-bit min from the 12 packed bytes.
//   bytes 0-3:  scale[0..3] (bits 0-5), bits 6-7 = high bits of scale[4..7]
//   bytes 4-7:  min[0..3]   (bits 0-5), bits 6-7 = high bits of min[4..7]
//   bytes 8-11: low nibble = low 4 bits of scale[4..7], high nibble = of min[4..7]
inline void k4_scale_min(const uint8_t* packed, int s, int& scale, int& min) noexcept {
    if (s < 4) {
        scale = packed[s] & 63;
        min = packed[s + 4] & 63;
    } else {
        scale = (packed[s + 4] & 0x0f) | ((packed[s - 4] >> 6) << 4);
        min = (packed[s + 4] >> 4) | ((packed[s] >> 6) << 4);
    }
}

// Round half to even, the rounding the SIMD conversions use by default.
inline int round_even(float v) noexcept { return int(std::nearbyint(v)); }

}  // namespace detail

namespace scalar {

// ---- activation quantization ------------------------------------------------

// n a multiple of 256.
inline void quantize_row_q8_k32(const float* x, BlockQ8K32* y, size_t n) noexcept {
    for (size_t b = 0; b < n / QK_K; ++b) {
        BlockQ8K32& block = y[b];
        for (int s = 0; s < QK_K / 32; ++s, x += 32) {
            float max_abs = 0.0f;
            for (int i = 0; i < 32; ++i) max_abs = std::fmax(max_abs, std::fabs(x[i]));
            const float d = q8k32_scale(max_abs);
            const float inverse_d = d != 0.0f ? 1.0f / d : 0.0f;
            block.d[s] = d;
            for (int i = 0; i < 32; ++i) {
                const int q = detail::round_even(x[i] * inverse_d);
                block.qs[32 * s + i] = int8_t(q > 127 ? 127 : (q < -127 ? -127 : q));
            }
        }
        for (int g = 0; g < QK_K / 16; ++g) {
            int sum = 0;
            for (int i = 0; i < 16; ++i) sum += block.qs[16 * g + i];
            block.bsums[g] = int16_t(sum);
        }
    }
}

// n a multiple of 32.
inline void quantize_row_q8_0(const float* x, BlockQ8_0* y, size_t n) noexcept {
    for (size_t b = 0; b < n / QK8_0; ++b, x += QK8_0) {
        float max_abs = 0.0f;
        for (int i = 0; i < QK8_0; ++i) max_abs = std::fmax(max_abs, std::fabs(x[i]));
        const float d = max_abs / 127.0f;
        const float inverse_d = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = fp32_to_fp16(d);
        for (int i = 0; i < QK8_0; ++i) {
            const int q = detail::round_even(x[i] * inverse_d);
            y[b].qs[i] = int8_t(q > 127 ? 127 : (q < -127 ? -127 : q));
        }
    }
}

// ---- quantized dot products (n_blocks super-blocks / blocks) ------------------

// Q4_K and Q5_K (has_high_bit): weight i of sub-block s is the low or high
// nibble of qs[32 * (s / 2) + i], plus 16 * bit s of qh[i] for Q5_K.
template <bool has_high_bit, class Block>
inline float dot_k4_q8k32(const Block* w, const BlockQ8K32* x, size_t n_blocks) noexcept {
    float sum = 0.0f;
    for (size_t b = 0; b < n_blocks; ++b) {
        const float d = fp16_to_fp32(w[b].d), dmin = fp16_to_fp32(w[b].dmin);
        for (int s = 0; s < 8; ++s) {
            int scale, min;
            detail::k4_scale_min(w[b].scales, s, scale, min);
            const uint8_t* bytes = w[b].qs + 32 * (s / 2);
            const int8_t* q8 = x[b].qs + 32 * s;
            int32_t dot = 0;
            for (int i = 0; i < 32; ++i) {
                int q = (s % 2 == 0) ? (bytes[i] & 0x0f) : (bytes[i] >> 4);
                if constexpr (has_high_bit) q += 16 * ((w[b].qh[i] >> s) & 1);
                dot += q * q8[i];
            }
            const int32_t min_term = min * (x[b].bsums[2 * s] + x[b].bsums[2 * s + 1]);
            sum += (d * x[b].d[s]) * float(scale * dot) - (dmin * x[b].d[s]) * float(min_term);
        }
    }
    return sum;
}

inline float dot_q4k_q8k32(const BlockQ4K* w, const BlockQ8K32* x, size_t n_blocks) noexcept {
    return dot_k4_q8k32<false>(w, x, n_blocks);
}

inline float dot_q5k_q8k32(const BlockQ5K* w, const BlockQ8K32* x, size_t n_blocks) noexcept {
    return dot_k4_q8k32<true>(w, x, n_blocks);
}

// The 6-bit value of Q6_K weight i (0..255) of a block, 0..63 (subtract 32 for the signed value).
inline int q6k_value(const BlockQ6K& block, int i) noexcept {
    const int half = i / 128, j = i % 128;
    const int quarter = j / 32, l = j % 32;
    const uint8_t low_byte = block.ql[64 * half + l + 32 * (quarter & 1)];
    const int low = (quarter < 2) ? (low_byte & 0x0f) : (low_byte >> 4);
    const int high = (block.qh[32 * half + l] >> (2 * quarter)) & 3;
    return low | (high << 4);
}

inline float dot_q6k_q8k32(const BlockQ6K* w, const BlockQ8K32* x, size_t n_blocks) noexcept {
    float sum = 0.0f;
    for (size_t b = 0; b < n_blocks; ++b) {
        const float d = fp16_to_fp32(w[b].d);
        for (int s = 0; s < 8; ++s) {
            int32_t dot = 0;
            for (int g = 2 * s; g < 2 * s + 2; ++g) {
                int32_t group_dot = 0;
                for (int i = 16 * g; i < 16 * g + 16; ++i) group_dot += q6k_value(w[b], i) * x[b].qs[i];
                dot += w[b].scales[g] * (group_dot - 32 * x[b].bsums[g]);
            }
            sum += (d * x[b].d[s]) * float(dot);
        }
    }
    return sum;
}

inline float dot_q8_0_q8_0(const BlockQ8_0* w, const BlockQ8_0* x, size_t n_blocks) noexcept {
    float sum = 0.0f;
    for (size_t b = 0; b < n_blocks; ++b) {
        int32_t dot = 0;
        for (int i = 0; i < QK8_0; ++i) dot += int32_t(w[b].qs[i]) * x[b].qs[i];
        sum += fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d) * float(dot);
    }
    return sum;
}

// ---- float dot products (n elements) ------------------------------------------

inline float dot_f32(const float* a, const float* b, size_t n) noexcept {
    float sum = 0.0f;
    for (size_t i = 0; i < n; ++i) sum += a[i] * b[i];
    return sum;
}

inline float dot_f16_f32(const uint16_t* w, const float* x, size_t n) noexcept {
    float sum = 0.0f;
    for (size_t i = 0; i < n; ++i) sum += fp16_to_fp32(w[i]) * x[i];
    return sum;
}

inline float dot_bf16_f32(const uint16_t* w, const float* x, size_t n) noexcept {
    float sum = 0.0f;
    for (size_t i = 0; i < n; ++i) sum += bf16_to_fp32(w[i]) * x[i];
    return sum;
}

// ---- float helpers --------------------------------------------------------------

// out = x / sqrt(mean(x^2) + eps) * weight (out may alias x). The mean is summed
// in double, as the reference engine does.
inline void rmsnorm(const float* x, const float* weight, float* out, size_t n, float eps) noexcept {
    double sum_squares = 0.0;
    for (size_t i = 0; i < n; ++i) sum_squares += double(x[i]) * double(x[i]);
    const float mean = float(sum_squares / double(n ? n : 1));
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (size_t i = 0; i < n; ++i) out[i] = (x[i] * scale) * weight[i];
}

// out = silu(gate) * up, silu(g) = g / (1 + exp(-g)) (out may alias gate or up).
inline void swiglu(const float* gate, const float* up, float* out, size_t n) noexcept {
    for (size_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

// In-place softmax over n values (max subtracted first, so large logits are safe).
inline void softmax(float* x, size_t n) noexcept {
    if (n == 0) return;
    float max_value = x[0];
    for (size_t i = 1; i < n; ++i) max_value = std::fmax(max_value, x[i]);
    double sum = 0.0;
    for (size_t i = 0; i < n; ++i) {
        x[i] = std::exp(x[i] - max_value);
        sum += x[i];
    }
    const float inverse = float(1.0 / sum);
    for (size_t i = 0; i < n; ++i) x[i] *= inverse;
}

}  // namespace scalar
}  // namespace kernels
}  // namespace SMOL_KERNEL_NS
}  // namespace smol
