// NEON (AArch64) kernels: activation quantization (Q8_K32, Q8_0) and the
// integer tile kernels Q4_K/Q5_K/Q6_K x Q8_K32 and Q8_0 x Q8_0. Compiled only
// when dispatch.hpp selected NEON; float kernels come from
// detail/float_simd.hpp (xsimd).
//
// 16 x int8 products are summed into 4 int32 lanes by vdotq_s32 when the CPU
// has the dot-product extension (__ARM_FEATURE_DOTPROD, e.g.
// -march=armv8.2-a+dotprod), else by vmull_s8 + vpadalq_s16 (the products,
// at most 128 * 127, fit int16). All weights are unpacked to values that fit
// int8 (0..31 for Q4_K/Q5_K, q - 32 in -32..31 for Q6_K), so both paths are
// exact.
//
// K-quants: the integer sums of each 32-value sub-block (the activation's
// scale granularity) are gathered four at a time into one int32x4 with
// pairwise adds, and the float scales (weight d times activation d[s]) are
// applied per sub-block with one FMA per four sub-blocks. Each sub-block's
// integer equals the scalar reference's; the float summation order differs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../core/fp16.hpp"
#include "../quant/blocks.hpp"
#include "activations.hpp"
#include "detail/float_simd.hpp"
#include "dispatch.hpp"
#include "scalar.hpp"

#if defined(SMOL_KERNELS_NEON)

namespace smol {
inline namespace SMOL_KERNEL_NS {
namespace kernels {
namespace neon {

// acc + sum over groups of 4 of a[i] * b[i].
inline int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) noexcept {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, a, b);
#else
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
#endif
}

// ---- activation quantization (bit-identical to kernels::scalar) ----------------

// 16 int32 in [-127, 127] (four vectors) -> 16 int8.
inline int8x16_t narrow_16(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) noexcept {
    const int16x8_t ab = vcombine_s16(vmovn_s32(a), vmovn_s32(b));
    const int16x8_t cd = vcombine_s16(vmovn_s32(c), vmovn_s32(d));
    return vcombine_s8(vmovn_s16(ab), vmovn_s16(cd));
}

inline int32x4_t quantize_4(const float* x, float scale) noexcept {
    const int32x4_t q = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x), scale));  // round half to even
    return vmaxq_s32(vminq_s32(q, vdupq_n_s32(127)), vdupq_n_s32(-127));
}

inline void quantize_row_q8_k32(const float* x, BlockQ8K32* y, size_t n) noexcept {
    for (size_t b = 0; b < n / QK_K; ++b) {
        BlockQ8K32& block = y[b];
        for (int s = 0; s < QK_K / 32; ++s, x += 32) {
            float32x4_t max_lanes = vdupq_n_f32(0.0f);
            for (int i = 0; i < 32; i += 4) max_lanes = vmaxq_f32(max_lanes, vabsq_f32(vld1q_f32(x + i)));
            const float d = q8k32_scale(vmaxvq_f32(max_lanes));
            const float inverse_d = d != 0.0f ? 1.0f / d : 0.0f;
            block.d[s] = d;
            for (int i = 0; i < 32; i += 16) {
                const int32x4_t q0 = quantize_4(x + i, inverse_d), q1 = quantize_4(x + i + 4, inverse_d);
                const int32x4_t q2 = quantize_4(x + i + 8, inverse_d), q3 = quantize_4(x + i + 12, inverse_d);
                block.bsums[2 * s + i / 16] = int16_t(vaddvq_s32(vaddq_s32(vaddq_s32(q0, q1), vaddq_s32(q2, q3))));
                vst1q_s8(block.qs + 32 * s + i, narrow_16(q0, q1, q2, q3));
            }
        }
    }
}

inline void quantize_row_q8_0(const float* x, BlockQ8_0* y, size_t n) noexcept {
    for (size_t b = 0; b < n / QK8_0; ++b, x += QK8_0) {
        float32x4_t max_lanes = vdupq_n_f32(0.0f);
        for (int i = 0; i < QK8_0; i += 4) max_lanes = vmaxq_f32(max_lanes, vabsq_f32(vld1q_f32(x + i)));
        const float d = vmaxvq_f32(max_lanes) / 127.0f;
        const float inverse_d = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = fp32_to_fp16(d);
        for (int i = 0; i < QK8_0; i += 16) {
            vst1q_s8(y[b].qs + i, narrow_16(quantize_4(x + i, inverse_d), quantize_4(x + i + 4, inverse_d),
                                            quantize_4(x + i + 8, inverse_d), quantize_4(x + i + 12, inverse_d)));
        }
    }
}

template <class Block>
inline const Block* block_row(const uint8_t* base, size_t row_bytes, size_t row) noexcept {
    return reinterpret_cast<const Block*>(base + row * row_bytes);
}

// ---- Q4_K / Q5_K x Q8_K32 -------------------------------------------------------

template <bool has_high_bit, class Block, int n_cols>
inline void tile_k4(const uint8_t* w, size_t w_row_bytes, size_t n_rows, const uint8_t* x, size_t x_row_bytes,
                    size_t cols, float* y, size_t y_stride) {
    const size_t n_blocks = cols / QK_K;
    const uint8x16_t low_nibble = vdupq_n_u8(0x0f);
    const BlockQ8K32* xs[n_cols];
    for (int c = 0; c < n_cols; ++c) xs[c] = block_row<BlockQ8K32>(x, x_row_bytes, size_t(c));

    for (size_t r = 0; r < n_rows; ++r) {
        const Block* row = block_row<Block>(w, w_row_bytes, r);
        float32x4_t acc[n_cols];
        for (int c = 0; c < n_cols; ++c) acc[c] = vdupq_n_f32(0.0f);
        for (size_t b = 0; b < n_blocks; ++b) {
            const Block& block = row[b];
            int32_t scales[8];
            int16_t mins[8];
            for (int s = 0; s < 8; ++s) {
                int scale, min;
                detail::k4_scale_min(block.scales, s, scale, min);
                scales[s] = scale;
                mins[s] = int16_t(min);
            }
            const int16x8_t min_vector = vld1q_s16(mins);
            const float d = fp16_to_fp32(block.d);
            const float dmin = fp16_to_fp32(block.dmin);

            int32x4_t pair[n_cols];  // sub-blocks 4q, 4q + 1 as [a, a, b, b] partial sums
            uint8x16_t high_bits[2];
            if constexpr (has_high_bit) {
                high_bits[0] = vld1q_u8(block.qh);
                high_bits[1] = vld1q_u8(block.qh + 16);
            }
            for (int j = 0; j < 4; ++j) {  // 64 weights: sub-blocks 2j (low nibbles), 2j + 1 (high)
                const uint8x16_t packed0 = vld1q_u8(block.qs + 32 * j);
                const uint8x16_t packed1 = vld1q_u8(block.qs + 32 * j + 16);
                uint8x16_t low0 = vandq_u8(packed0, low_nibble), low1 = vandq_u8(packed1, low_nibble);
                uint8x16_t high0 = vshrq_n_u8(packed0, 4), high1 = vshrq_n_u8(packed1, 4);
                if constexpr (has_high_bit) {
                    // Bit 2j of qh[i] -> 16 for the low nibble, bit 2j + 1 for the high one.
                    const uint8x16_t bit_low = vdupq_n_u8(uint8_t(1u << (2 * j)));
                    const uint8x16_t bit_high = vdupq_n_u8(uint8_t(2u << (2 * j)));
                    const uint8x16_t sixteen = vdupq_n_u8(16);
                    low0 = vorrq_u8(low0, vandq_u8(vtstq_u8(high_bits[0], bit_low), sixteen));
                    low1 = vorrq_u8(low1, vandq_u8(vtstq_u8(high_bits[1], bit_low), sixteen));
                    high0 = vorrq_u8(high0, vandq_u8(vtstq_u8(high_bits[0], bit_high), sixteen));
                    high1 = vorrq_u8(high1, vandq_u8(vtstq_u8(high_bits[1], bit_high), sixteen));
                }
                const int quad = j / 2;  // sub-blocks 4 * quad .. 4 * quad + 3
                const int32x4_t quad_scales = vld1q_s32(scales + 4 * quad);
                for (int c = 0; c < n_cols; ++c) {
                    const int8_t* q8 = xs[c][b].qs + 64 * j;
                    int32x4_t low_dot = dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(low0), vld1q_s8(q8));
                    low_dot = dot16(low_dot, vreinterpretq_s8_u8(low1), vld1q_s8(q8 + 16));
                    int32x4_t high_dot = dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(high0), vld1q_s8(q8 + 32));
                    high_dot = dot16(high_dot, vreinterpretq_s8_u8(high1), vld1q_s8(q8 + 48));
                    if (j % 2 == 0) {
                        pair[c] = vpaddq_s32(low_dot, high_dot);
                        continue;
                    }
                    // [sub-block 4q, 4q + 1, 4q + 2, 4q + 3] sums, times their scales.
                    const int32x4_t dots =
                        vmulq_s32(vpaddq_s32(pair[c], vpaddq_s32(low_dot, high_dot)), quad_scales);
                    // Sums of q8 per sub-block: adjacent pairs of the 8 bsums of this quad.
                    const int16x8_t group_sums = vld1q_s16(xs[c][b].bsums + 8 * quad);
                    const int16x4_t sub_sums = vmovn_s32(vpaddlq_s16(group_sums));
                    const int32x4_t min_terms =
                        vmull_s16(sub_sums, quad == 0 ? vget_low_s16(min_vector) : vget_high_s16(min_vector));
                    const float32x4_t x_scales = vld1q_f32(xs[c][b].d + 4 * quad);
                    acc[c] = vfmaq_f32(acc[c], vmulq_n_f32(x_scales, d), vcvtq_f32_s32(dots));
                    acc[c] = vfmsq_f32(acc[c], vmulq_n_f32(x_scales, dmin), vcvtq_f32_s32(min_terms));
                }
            }
        }
        for (int c = 0; c < n_cols; ++c) y[size_t(c) * y_stride + r] = vaddvq_f32(acc[c]);
    }
}

template <int n_cols>
void tile_q4k(const uint8_t* w, size_t w_row_bytes, size_t n_rows, const uint8_t* x, size_t x_row_bytes,
              size_t cols, float* y, size_t y_stride) {
    tile_k4<false, BlockQ4K, n_cols>(w, w_row_bytes, n_rows, x, x_row_bytes, cols, y, y_stride);
}

template <int n_cols>
void tile_q5k(const uint8_t* w, size_t w_row_bytes, size_t n_rows, const uint8_t* x, size_t x_row_bytes,
              size_t cols, float* y, size_t y_stride) {
    tile_k4<true, BlockQ5K, n_cols>(w, w_row_bytes, n_rows, x, x_row_bytes, cols, y, y_stride);
}

// ---- Q6_K x Q8_K32 ---------------------------------------------------------------
//
// The 6-bit weights minus 32 fit int8 (-32..31), so the products are signed
// int8 x int8 and the bsums are not needed.

template <int n_cols>
void tile_q6k(const uint8_t* w, size_t w_row_bytes, size_t n_rows, const uint8_t* x, size_t x_row_bytes,
              size_t cols, float* y, size_t y_stride) {
    const size_t n_blocks = cols / QK_K;
    const uint8x16_t low_nibble = vdupq_n_u8(0x0f);
    const int8x16_t offset = vdupq_n_s8(32);
    const BlockQ8K32* xs[n_cols];
    for (int c = 0; c < n_cols; ++c) xs[c] = block_row<BlockQ8K32>(x, x_row_bytes, size_t(c));

    for (size_t r = 0; r < n_rows; ++r) {
        const BlockQ6K* row = block_row<BlockQ6K>(w, w_row_bytes, r);
        float32x4_t acc[n_cols];
        for (int c = 0; c < n_cols; ++c) acc[c] = vdupq_n_f32(0.0f);
        for (size_t b = 0; b < n_blocks; ++b) {
            const BlockQ6K& block = row[b];
            const float d = fp16_to_fp32(block.d);
            int32x4_t previous[n_cols], pair[n_cols];
            for (int h = 0; h < 2; ++h) {
                for (int k = 0; k < 4; ++k) {  // sub-block 4h + k: weights 128h + 32k .. + 31
                    int8x16_t q[2];
                    for (int part = 0; part < 2; ++part) {  // 16 weights each, one scale each
                        const uint8x16_t high = vld1q_u8(block.qh + 32 * h + 16 * part);
                        const uint8x16_t low = vld1q_u8(block.ql + 64 * h + 32 * (k & 1) + 16 * part);
                        const uint8x16_t low4 = k < 2 ? vandq_u8(low, low_nibble) : vshrq_n_u8(low, 4);
                        // bits 2k, 2k + 1 of qh: a variable shift (negative = right).
                        const uint8x16_t high2 = vandq_u8(vshlq_u8(high, vdupq_n_s8(int8_t(-2 * k))), vdupq_n_u8(3));
                        q[part] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(low4, vshlq_n_u8(high2, 4))), offset);
                    }
                    const int sub = 4 * h + k;
                    const int scale0 = block.scales[2 * sub], scale1 = block.scales[2 * sub + 1];
                    for (int c = 0; c < n_cols; ++c) {
                        const int8_t* q8 = xs[c][b].qs + 32 * sub;
                        int32x4_t dot = vmulq_n_s32(dot16(vdupq_n_s32(0), q[0], vld1q_s8(q8)), scale0);
                        dot = vmlaq_n_s32(dot, dot16(vdupq_n_s32(0), q[1], vld1q_s8(q8 + 16)), scale1);
                        if (k % 2 == 0) {
                            previous[c] = dot;
                        } else if (k == 1) {
                            pair[c] = vpaddq_s32(previous[c], dot);
                        } else {
                            // [sub-block 4h .. 4h + 3] sums.
                            const int32x4_t dots = vpaddq_s32(pair[c], vpaddq_s32(previous[c], dot));
                            acc[c] = vfmaq_f32(acc[c], vmulq_n_f32(vld1q_f32(xs[c][b].d + 4 * h), d),
                                               vcvtq_f32_s32(dots));
                        }
                    }
                }
            }
        }
        for (int c = 0; c < n_cols; ++c) y[size_t(c) * y_stride + r] = vaddvq_f32(acc[c]);
    }
}

// ---- Q8_0 x Q8_0 ----------------------------------------------------------------

template <int n_cols>
void tile_q8_0(const uint8_t* w, size_t w_row_bytes, size_t n_rows, const uint8_t* x, size_t x_row_bytes,
               size_t cols, float* y, size_t y_stride) {
    const size_t n_blocks = cols / QK8_0;
    const BlockQ8_0* xs[n_cols];
    for (int c = 0; c < n_cols; ++c) xs[c] = block_row<BlockQ8_0>(x, x_row_bytes, size_t(c));
    for (size_t r = 0; r < n_rows; ++r) {
        const BlockQ8_0* row = block_row<BlockQ8_0>(w, w_row_bytes, r);
        float acc[n_cols] = {};
        for (size_t b = 0; b < n_blocks; ++b) {
            const int8x16_t w0 = vld1q_s8(row[b].qs), w1 = vld1q_s8(row[b].qs + 16);
            const float d = fp16_to_fp32(row[b].d);
            for (int c = 0; c < n_cols; ++c) {
                const int32x4_t dot = dot16(dot16(vdupq_n_s32(0), w0, vld1q_s8(xs[c][b].qs)), w1,
                                            vld1q_s8(xs[c][b].qs + 16));
                acc[c] += d * fp16_to_fp32(xs[c][b].d) * float(vaddvq_s32(dot));
            }
        }
        for (int c = 0; c < n_cols; ++c) y[size_t(c) * y_stride + r] = acc[c];
    }
}

}  // namespace neon

namespace simd {
using neon::tile_q4k;
using neon::tile_q5k;
using neon::tile_q6k;
using neon::tile_q8_0;
}  // namespace simd

}  // namespace kernels
}  // namespace SMOL_KERNEL_NS
}  // namespace smol

#endif  // SMOL_KERNELS_NEON
