// NEON (AArch64) kernels: activation quantization (Q8_K, Q8_0) and the
// integer tile kernels Q4_K/Q5_K/Q6_K x Q8_K and Q8_0 x Q8_0. Compiled only
// when dispatch.hpp selected NEON; float kernels come from
// detail/float_simd.hpp (xsimd).
//
// 16 x int8 products are summed into 4 int32 lanes by vdotq_s32 when the CPU
// has the dot-product extension (__ARM_FEATURE_DOTPROD, e.g.
// -march=armv8.2-a+dotprod), else by vmull_s8 + vpadalq_s16 (the products,
// at most 128 * 127, fit int16). All weights are unpacked to values that fit
// int8 (0..63 for the k-quants), so both paths are exact.
//
// Each block's integer sums are reduced to scalars and the float scales are
// applied exactly as the scalar reference does, so NEON results equal the
// reference bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../core/fp16.hpp"
#include "../quant/blocks.hpp"
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

inline void quantize_row_q8_k(const float* x, BlockQ8K* y, size_t n) noexcept {
    for (size_t b = 0; b < n / QK_K; ++b, x += QK_K) {
        float32x4_t max_lanes = vdupq_n_f32(0.0f);
        for (int i = 0; i < QK_K; i += 4) max_lanes = vmaxq_f32(max_lanes, vabsq_f32(vld1q_f32(x + i)));
        const float max_abs = vmaxvq_f32(max_lanes);
        BlockQ8K& block = y[b];
        if (max_abs == 0.0f) {
            std::memset(&block, 0, sizeof block);
            continue;
        }
        float max_value = max_abs;
        for (int i = 0; i < QK_K; ++i) {
            if (std::fabs(x[i]) == max_abs) {
                max_value = x[i];
                break;
            }
        }
        const float inverse_scale = -127.0f / max_value;
        for (int i = 0; i < QK_K; i += 16) {
            const int32x4_t q0 = quantize_4(x + i, inverse_scale), q1 = quantize_4(x + i + 4, inverse_scale);
            const int32x4_t q2 = quantize_4(x + i + 8, inverse_scale), q3 = quantize_4(x + i + 12, inverse_scale);
            block.bsums[i / 16] = int16_t(vaddvq_s32(vaddq_s32(vaddq_s32(q0, q1), vaddq_s32(q2, q3))));
            vst1q_s8(block.qs + i, narrow_16(q0, q1, q2, q3));
        }
        block.d = 1.0f / inverse_scale;
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

// ---- Q4_K / Q5_K x Q8_K ---------------------------------------------------------

template <bool has_high_bit, class Block, int n_cols>
inline void tile_k4(const uint8_t* w, size_t w_row_bytes, size_t n_rows, const uint8_t* x, size_t x_row_bytes,
                    size_t cols, float* y, size_t y_stride) {
    const size_t n_blocks = cols / QK_K;
    const uint8x16_t low_nibble = vdupq_n_u8(0x0f);
    const BlockQ8K* xs[n_cols];
    for (int c = 0; c < n_cols; ++c) xs[c] = block_row<BlockQ8K>(x, x_row_bytes, size_t(c));

    for (size_t r = 0; r < n_rows; ++r) {
        const Block* row = block_row<Block>(w, w_row_bytes, r);
        float acc[n_cols] = {};
        for (size_t b = 0; b < n_blocks; ++b) {
            const Block& block = row[b];
            int scales[8], mins[8];
            for (int s = 0; s < 8; ++s) detail::k4_scale_min(block.scales, s, scales[s], mins[s]);
            int16_t mins16[8];
            for (int s = 0; s < 8; ++s) mins16[s] = int16_t(mins[s]);
            const int16x8_t min_vector = vld1q_s16(mins16);

            int32x4_t sums[n_cols];
            for (int c = 0; c < n_cols; ++c) sums[c] = vdupq_n_s32(0);
            uint8x16_t high_bits[2];
            if constexpr (has_high_bit) {
                high_bits[0] = vld1q_u8(block.qh);
                high_bits[1] = vld1q_u8(block.qh + 16);
            }
            for (int j = 0; j < 4; ++j) {
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
                for (int c = 0; c < n_cols; ++c) {
                    const int8_t* q8 = xs[c][b].qs + 64 * j;
                    int32x4_t low_dot = dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(low0), vld1q_s8(q8));
                    low_dot = dot16(low_dot, vreinterpretq_s8_u8(low1), vld1q_s8(q8 + 16));
                    int32x4_t high_dot = dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(high0), vld1q_s8(q8 + 32));
                    high_dot = dot16(high_dot, vreinterpretq_s8_u8(high1), vld1q_s8(q8 + 48));
                    sums[c] = vmlaq_n_s32(sums[c], low_dot, scales[2 * j]);
                    sums[c] = vmlaq_n_s32(sums[c], high_dot, scales[2 * j + 1]);
                }
            }
            const float d = fp16_to_fp32(block.d);
            const float dmin = fp16_to_fp32(block.dmin);
            for (int c = 0; c < n_cols; ++c) {
                // Per sub-block sums of q8: adjacent pairs of the 16 bsums.
                const int16x8_t sub_sums = vpaddq_s16(vld1q_s16(xs[c][b].bsums), vld1q_s16(xs[c][b].bsums + 8));
                const int32x4_t min_products = vmlal_s16(vmull_s16(vget_low_s16(sub_sums), vget_low_s16(min_vector)),
                                                         vget_high_s16(sub_sums), vget_high_s16(min_vector));
                const int32_t scaled_dot = vaddvq_s32(sums[c]);
                const int32_t min_term = vaddvq_s32(min_products);
                const float dx = xs[c][b].d;
                acc[c] += (d * dx) * float(scaled_dot) - (dmin * dx) * float(min_term);
            }
        }
        for (int c = 0; c < n_cols; ++c) y[size_t(c) * y_stride + r] = acc[c];
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

// ---- Q6_K x Q8_K ----------------------------------------------------------------

template <int n_cols>
void tile_q6k(const uint8_t* w, size_t w_row_bytes, size_t n_rows, const uint8_t* x, size_t x_row_bytes,
              size_t cols, float* y, size_t y_stride) {
    const size_t n_blocks = cols / QK_K;
    const uint8x16_t low_nibble = vdupq_n_u8(0x0f);
    const uint8x16_t bits01 = vdupq_n_u8(0x03), bits23 = vdupq_n_u8(0x0c);
    const uint8x16_t bits45 = vdupq_n_u8(0x30), bits67 = vdupq_n_u8(0xc0);
    const BlockQ8K* xs[n_cols];
    for (int c = 0; c < n_cols; ++c) xs[c] = block_row<BlockQ8K>(x, x_row_bytes, size_t(c));

    for (size_t r = 0; r < n_rows; ++r) {
        const BlockQ6K* row = block_row<BlockQ6K>(w, w_row_bytes, r);
        float acc[n_cols] = {};
        for (size_t b = 0; b < n_blocks; ++b) {
            const BlockQ6K& block = row[b];
            const int8x16_t scales8 = vld1q_s8(block.scales);
            const int16x8_t scales_low = vmovl_s8(vget_low_s8(scales8)), scales_high = vmovl_s8(vget_high_s8(scales8));
            int32x4_t sums[n_cols];
            for (int c = 0; c < n_cols; ++c) sums[c] = vdupq_n_s32(0);
            for (int h = 0; h < 2; ++h) {
                for (int part = 0; part < 2; ++part) {  // 16 of the 32 columns of each quarter
                    const int offset = 16 * part;
                    const uint8x16_t high = vld1q_u8(block.qh + 32 * h + offset);
                    const uint8x16_t low0 = vld1q_u8(block.ql + 64 * h + offset);
                    const uint8x16_t low1 = vld1q_u8(block.ql + 64 * h + 32 + offset);
                    int8x16_t q[4];
                    q[0] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(low0, low_nibble), vshlq_n_u8(vandq_u8(high, bits01), 4)));
                    q[1] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(low1, low_nibble), vshlq_n_u8(vandq_u8(high, bits23), 2)));
                    q[2] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(low0, 4), vandq_u8(high, bits45)));
                    q[3] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(low1, 4), vshrq_n_u8(vandq_u8(high, bits67), 2)));
                    for (int k = 0; k < 4; ++k) {
                        const int group = 8 * h + 2 * k + part;  // 16 weights per scale
                        const int scale = block.scales[group];
                        for (int c = 0; c < n_cols; ++c) {
                            const int32x4_t dot = dot16(vdupq_n_s32(0), q[k], vld1q_s8(xs[c][b].qs + 16 * group));
                            sums[c] = vmlaq_n_s32(sums[c], dot, scale);
                        }
                    }
                }
            }
            const float d = fp16_to_fp32(block.d);
            for (int c = 0; c < n_cols; ++c) {
                // sum (q - 32) * x = sum q * x - 32 * sum_g scale[g] * bsums[g].
                const int16x8_t bsums_low = vld1q_s16(xs[c][b].bsums), bsums_high = vld1q_s16(xs[c][b].bsums + 8);
                int32x4_t bias = vmull_s16(vget_low_s16(bsums_low), vget_low_s16(scales_low));
                bias = vmlal_s16(bias, vget_high_s16(bsums_low), vget_high_s16(scales_low));
                bias = vmlal_s16(bias, vget_low_s16(bsums_high), vget_low_s16(scales_high));
                bias = vmlal_s16(bias, vget_high_s16(bsums_high), vget_high_s16(scales_high));
                const int32_t scaled_dot = vaddvq_s32(sums[c]) - 32 * vaddvq_s32(bias);
                acc[c] += d * xs[c][b].d * float(scaled_dot);
            }
        }
        for (int c = 0; c < n_cols; ++c) y[size_t(c) * y_stride + r] = acc[c];
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
