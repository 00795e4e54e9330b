// Scalar reference kernels: the readable spec every SIMD kernel is tested
// against, and the "scalar" level (kernels/cpu.hpp) on CPUs without SIMD.
//
// Float order. A 3B model amplifies rounding: on long prompts a different
// summation order moves logits by ~0.5, enough to flip a greedy step the
// goldens call unambiguous. So the spec fixes the order, and it is the order
// of the 8-lane kernels (and of the golden engine's AVX2 kernels): products
// accumulate into 8 lanes with fused multiply-adds (std::fma, one rounding),
// lane k of a K-quant block holding sub-block k, lane k of a float dot every
// 8th element from k; the lanes are then added as (0+4)+(2+6) + (1+5)+(3+7)
// (sum_lanes); leftover elements follow one by one.
// Weight blocks are read through byte pointers (blocks.hpp: load_u16 and
// offsetof), so a block at any byte address is fine.
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
//   Q4_0 / Q5_0 / IQ4_NL x Q8_K32: weight block j meets activation sub-block j (32
//     values, scale d_j(x)), q(w) the block's signed integer value (q - 8, q - 16,
//     kIQ4Values[q]), one accumulator: result += (d(w) * d_j(x)) * sum q(w) * q8;
//     Q4_1 / Q5_1: q(w) unsigned, and result then adds m(w) * (d_j(x) * sum q8).
//   Q2_K x Q8_K, per sub-block s of 32 (lane s), over its two 16-groups g = 2s, 2s + 1:
//     dot_s = sum_g (sc[g] & 15) * sum_{i in g} q2[i] * q8[i],  min_s = sum_g (sc[g] >> 4) *
//     bsums[g] result += (d(w) * d(x)) * dot_s - (dmin(w) * d(x)) * min_s
//   Q3_K x Q8_K: dot_s = sum_g scale[g] * sum_{i in g} q3[i] * q8[i] (q3 in [-4, 3]),
//     result += (d(w) * d(x)) * dot_s
//   IQ4_XS x Q8_K, one accumulator: dot = sum_s scale[s] * sum_{i in s}
//     kIQ4Values[q[i]] * q8[i] (integer), result += (d(w) * d(x)) * dot
//   (These three keep one accumulator, as the golden engine's repacked rows do,
//   so their kernels may hold a row per lane: kernels/detail/x86_interleaved_vectors.inc.)
//   codebook types (IQ2_*, IQ3_*, IQ1_*) x Q8_K, from their integer form (quant/codebook.hpp):
//     dot_s = sum_g scale[g] * sum_{i in g} value[i] * q8[i], result += (D(w) * d(x)) * dot_s
//   F32/F16/BF16 x F32: plain float dot (F16/BF16 widened exactly to float first).
//
// Activation quantization: Q8_K32 as specified in activations.hpp. Q8_0, per
// 32: d = max|x| / 127 stored as fp16, q = round_half_even(x / d). An all-zero
// block gives d = 0 and q = 0. Quantized activations stay within [-127, 127]
// (never -128), which the SIMD sign tricks rely on.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <type_traits>
#include <cmath>
#include <cstdlib>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../core/fp16.hpp"
#include "../detail/fma.hpp"
#include "../quant/blocks.hpp"
#include "activations.hpp"
#include "scalar_float.hpp"

SMOL_NAMESPACE_BEGIN
namespace kernels {

namespace detail {

// Round half to even, the rounding the SIMD conversions use by default.
inline int round_even(float v) noexcept {
    return int(std::nearbyint(v));
}

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

// Q8_K activations, n a multiple of 256: per 256 values d = max|x| / 127 and
// q = round_half_even(x * (127 / max|x|)) (|q| <= 127), all 0 for an all-zero
// block; the golden engine's x86 rule (its scale is not rounded).
inline void quantize_row_q8_k_activations(const float* x, BlockQ8K* y, size_t n) noexcept {
    for (size_t b = 0; b < n / QK_K; ++b, x += QK_K) {
        float max_abs = 0.0f;
        for (int i = 0; i < QK_K; ++i) max_abs = std::fmax(max_abs, std::fabs(x[i]));
        y[b].d = max_abs / 127.0f;
        const float inverse = max_abs != 0.0f ? 127.0f / max_abs : 0.0f;
        for (int i = 0; i < QK_K; ++i) {
            const int q = detail::round_even(x[i] * inverse);
            y[b].qs[i] = int8_t(q > 127 ? 127 : (q < -127 ? -127 : q));
        }
        for (int g = 0; g < QK_K / 16; ++g) {
            int sum = 0;
            for (int i = 0; i < 16; ++i) sum += y[b].qs[16 * g + i];
            y[b].bsums[g] = int16_t(sum);
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
// w: n_blocks blocks at any byte address. Lane s accumulates sub-block s.
template <bool has_high_bit, class Block>
inline float dot_k4_q8k32(const uint8_t* w, const BlockQ8K32* x, size_t n_blocks) noexcept {
    float lane[8] = {};
    for (size_t b = 0; b < n_blocks; ++b) {
        const uint8_t* block = w + b * sizeof(Block);
        const float d = fp16_to_fp32(load_u16(block + offsetof(Block, d)));
        const float dmin = fp16_to_fp32(load_u16(block + offsetof(Block, dmin)));
        const uint8_t* packed_scales = block + offsetof(Block, scales);
        const uint8_t* qs = block + offsetof(Block, qs);
        const uint8_t* qh = nullptr;
        if constexpr (has_high_bit) qh = block + offsetof(Block, qh);
        for (int s = 0; s < 8; ++s) {
            uint8_t scale, min;
            smol::detail::unpack_scale_min_k4(packed_scales, s, scale, min);
            const uint8_t* bytes = qs + 32 * (s / 2);
            const int8_t* q8 = x[b].qs + 32 * s;
            int32_t dot = 0;
            for (int i = 0; i < 32; ++i) {
                int q = (s % 2 == 0) ? (bytes[i] & 0x0f) : (bytes[i] >> 4);
                if constexpr (has_high_bit) q += 16 * ((qh[i] >> s) & 1);
                dot += q * q8[i];
            }
            const int32_t min_term = min * (x[b].bsums[2 * s] + x[b].bsums[2 * s + 1]);
            // lane += (d * d_s) * (scale * dot) - (dmin * d_s) * min_term, one rounding per step
            lane[s] = smol::detail::fma(d * x[b].d[s], float(scale * dot), lane[s]);
            lane[s] = smol::detail::fma(-(dmin * x[b].d[s]), float(min_term), lane[s]);
        }
    }
    return sum_lanes(lane);
}

inline float dot_q4k_q8k32(const uint8_t* w, const BlockQ8K32* x, size_t n_blocks) noexcept {
    return dot_k4_q8k32<false, BlockQ4K>(w, x, n_blocks);
}

inline float dot_q5k_q8k32(const uint8_t* w, const BlockQ8K32* x, size_t n_blocks) noexcept {
    return dot_k4_q8k32<true, BlockQ5K>(w, x, n_blocks);
}

// The 6-bit value of Q6_K weight i (0..255) of a block, 0..63 (subtract 32 for the signed value).
inline int q6k_value(const uint8_t* block, int i) noexcept {
    const uint8_t* ql = block + offsetof(BlockQ6K, ql);
    const uint8_t* qh = block + offsetof(BlockQ6K, qh);
    const int half = i / 128, j = i % 128;
    const int quarter = j / 32, l = j % 32;
    const uint8_t low_byte = ql[64 * half + l + 32 * (quarter & 1)];
    const int low = (quarter < 2) ? (low_byte & 0x0f) : (low_byte >> 4);
    const int high = (qh[32 * half + l] >> (2 * quarter)) & 3;
    return low | (high << 4);
}

// Lane s accumulates sub-block s.
inline float dot_q6k_q8k32(const uint8_t* w, const BlockQ8K32* x, size_t n_blocks) noexcept {
    float lane[8] = {};
    for (size_t b = 0; b < n_blocks; ++b) {
        const uint8_t* block = w + b * sizeof(BlockQ6K);
        const int8_t* scales = reinterpret_cast<const int8_t*>(block + offsetof(BlockQ6K, scales));
        const float d = fp16_to_fp32(load_u16(block + offsetof(BlockQ6K, d)));
        for (int s = 0; s < 8; ++s) {
            int32_t dot = 0;
            for (int g = 2 * s; g < 2 * s + 2; ++g) {
                int32_t group_dot = 0;
                for (int i = 16 * g; i < 16 * g + 16; ++i)
                    group_dot += q6k_value(block, i) * x[b].qs[i];
                dot += scales[g] * (group_dot - 32 * x[b].bsums[g]);
            }
            lane[s] = smol::detail::fma(d * x[b].d[s], float(dot), lane[s]);
        }
    }
    return sum_lanes(lane);
}

// ---- long batches: K-quant rows converted to 8 bits -------------------------------
//
// For a product with many activation rows (a prompt) the golden engine
// (ik_llama.cpp) does not multiply K-quant blocks as stored: it first converts
// each weight row to one small integer per weight and one float pair per 32
// weights, rounded to fp16, and runs a row-interleaved 8-bit GEMM over that
// (it does so from 32 activation rows for Q4_K/Q5_K and from 64 for Q6_K).
// So its prompts run on slightly different weights than its decode steps.
// smol converts the same way from the same batch sizes
// (WeightTypeInfo::convert_min_tokens): the long-prompt logits then sit about
// twice as close to the goldens (last-position max error 1.3 % -> 0.7 % of the
// range on the 251- and 630-token prompts), and the converted rows are what
// the fast mat-mat kernels want anyway.
//
//   Q4_K / Q5_K, per sub-block s of 32:
//     D_s = fp16_round(d * scale[s]), M_s = fp16_round(-dmin * min[s]), q[i] = q4/q5 as stored
//     result += (D_s * d_s(x)) * sum_i q[i] * q8[i] + M_s * (d_s(x) * sum8_s)
//   Q6_K, per sub-block s of 32: v[i] = (q6[i] - 32) * scale[i / 16] (|v| <= 4096),
//     m = max|v| / 127, S_s = fp16_round(d * m),
//     q[i] = round_half_even(v[i] * (1 / m)) (in [-127, 127]; all 0 when every v is 0)
//     result += (S_s * d_s(x)) * sum_i q[i] * q8[i]
// fp16_round is round to nearest even (what F16C does). One accumulator, the
// sub-blocks in order, one fma per term: the converted kernels keep one weight
// row per vector lane, so this order costs them nothing.

// One K-quant block converted: per sub-block its scale and offset (0 for Q6_K)
// and 256 integer weights, in [0, 31] for Q4_K/Q5_K, [-127, 127] for Q6_K.
struct ConvertedBlock {
    float scale[8];
    float offset[8];
    int8_t q[256];
};

inline float fp16_round(float v) noexcept {
    return fp16_to_fp32(fp32_to_fp16(v));
}

template <bool has_high_bit, class Block>
inline void convert_k4_block(const uint8_t* block, ConvertedBlock& out) noexcept {
    const float d = fp16_to_fp32(load_u16(block + offsetof(Block, d)));
    const float dmin = fp16_to_fp32(load_u16(block + offsetof(Block, dmin)));
    const uint8_t* qs = block + offsetof(Block, qs);
    const uint8_t* qh = nullptr;
    if constexpr (has_high_bit) qh = block + offsetof(Block, qh);
    for (int s = 0; s < 8; ++s) {
        uint8_t scale, min;
        smol::detail::unpack_scale_min_k4(block + offsetof(Block, scales), s, scale, min);
        out.scale[s] = fp16_round(d * float(scale));
        out.offset[s] = fp16_round(-dmin * float(min));
        const uint8_t* bytes = qs + 32 * (s / 2);
        for (int i = 0; i < 32; ++i) {
            int q = (s % 2 == 0) ? (bytes[i] & 0x0f) : (bytes[i] >> 4);
            if constexpr (has_high_bit) q += 16 * ((qh[i] >> s) & 1);
            out.q[32 * s + i] = int8_t(q);
        }
    }
}

inline void convert_q6k_block(const uint8_t* block, ConvertedBlock& out) noexcept {
    const int8_t* scales = reinterpret_cast<const int8_t*>(block + offsetof(BlockQ6K, scales));
    const float d = fp16_to_fp32(load_u16(block + offsetof(BlockQ6K, d)));
    for (int s = 0; s < 8; ++s) {
        int v[32];
        int largest = 0;
        for (int i = 0; i < 32; ++i) {
            v[i] = (q6k_value(block, 32 * s + i) - 32) * scales[2 * s + i / 16];
            largest = std::max(largest, std::abs(v[i]));
        }
        const float m = float(largest) / 127;
        out.scale[s] = fp16_round(d * m);
        out.offset[s] = 0;
        const float inverse = largest ? 1 / m : 0.0f;
        for (int i = 0; i < 32; ++i)
            out.q[32 * s + i] = int8_t(detail::round_even(float(v[i]) * inverse));
    }
}

// A converted block against its activation block, added to acc in the spec's order.
inline float converted_block_dot(const ConvertedBlock& w, const BlockQ8K32& x, float acc) noexcept {
    for (int s = 0; s < 8; ++s) {
        int32_t dot = 0;
        for (int i = 32 * s; i < 32 * s + 32; ++i) dot += w.q[i] * x.qs[i];
        const int32_t sum8 = x.bsums[2 * s] + x.bsums[2 * s + 1];
        acc = smol::detail::fma(w.scale[s] * x.d[s], float(dot), acc);
        // Q6_K's offset is 0: kernels may skip this step (it changes at most a zero's sign).
        acc = smol::detail::fma(w.offset[s], x.d[s] * float(sum8), acc);
    }
    return acc;
}

template <void (*convert)(const uint8_t*, ConvertedBlock&), size_t block_bytes>
inline float dot_converted_q8k32(const uint8_t* w, const BlockQ8K32* x, size_t n_blocks) noexcept {
    float acc = 0;
    ConvertedBlock converted;
    for (size_t b = 0; b < n_blocks; ++b) {
        convert(w + b * block_bytes, converted);
        acc = converted_block_dot(converted, x[b], acc);
    }
    return acc;
}

// w: Q8_0 blocks at any byte address; x: our own (aligned) activation blocks.
// Lane k accumulates the integer sum of values 4k .. 4k + 3 of every block
// (what one int32 lane of the 8-lane kernels holds).
inline float dot_q8_0_q8_0(const uint8_t* w, const BlockQ8_0* x, size_t n_blocks) noexcept {
    float lane[8] = {};
    for (size_t b = 0; b < n_blocks; ++b) {
        const uint8_t* block = w + b * sizeof(BlockQ8_0);
        const int8_t* q = reinterpret_cast<const int8_t*>(block + offsetof(BlockQ8_0, qs));
        const float scale =
            fp16_to_fp32(load_u16(block + offsetof(BlockQ8_0, d))) * fp16_to_fp32(x[b].d);
        for (int k = 0; k < 8; ++k) {
            int32_t dot = 0;
            for (int i = 4 * k; i < 4 * k + 4; ++i) dot += int32_t(q[i]) * x[b].qs[i];
            lane[k] = smol::detail::fma(scale, float(dot), lane[k]);
        }
    }
    return sum_lanes(lane);
}

// ---- the 32-weight formats against Q8_K32 activations --------------------------
//
// One entry per format: its block, the integer value of weight j (signed for
// Q4_0 / Q5_0 / IQ4_NL, unsigned for Q4_1 / Q5_1, which add m), whether it
// has the offset m, and the zero point its stored codes carry (value = code -
// zero_point; 0 where the code is the value or a table index). Every block
// starts with its fp16 d.
template <class Block>
struct Legacy32;
template <>
struct Legacy32<BlockQ4_0> {
    static constexpr int zero_point = 8;
    static constexpr bool has_min = false;
    static int value(const uint8_t* block, int j) noexcept {
        return smol::detail::nibble_of(block + offsetof(BlockQ4_0, qs), j) - zero_point;
    }
};
template <>
struct Legacy32<BlockQ4_1> {
    static constexpr int zero_point = 0;
    static constexpr bool has_min = true;
    static int value(const uint8_t* block, int j) noexcept {
        return smol::detail::nibble_of(block + offsetof(BlockQ4_1, qs), j);
    }
};
template <>
struct Legacy32<BlockQ5_0> {
    static constexpr int zero_point = 16;
    static constexpr bool has_min = false;
    static int value(const uint8_t* block, int j) noexcept {
        return (smol::detail::nibble_of(block + offsetof(BlockQ5_0, qs), j) |
                (smol::detail::q5_high_bit(block + offsetof(BlockQ5_0, qh), j) << 4)) -
               zero_point;
    }
};
template <>
struct Legacy32<BlockQ5_1> {
    static constexpr int zero_point = 0;
    static constexpr bool has_min = true;
    static int value(const uint8_t* block, int j) noexcept {
        return smol::detail::nibble_of(block + offsetof(BlockQ5_1, qs), j) |
               (smol::detail::q5_high_bit(block + offsetof(BlockQ5_1, qh), j) << 4);
    }
};
template <>
struct Legacy32<BlockIQ4NL> {
    static constexpr int zero_point = 0;
    static constexpr bool has_min = false;
    static int value(const uint8_t* block, int j) noexcept {
        return kIQ4Values[smol::detail::nibble_of(block + offsetof(BlockIQ4NL, qs), j)];
    }
};

// The activations' sum over 32-weight block b (Q8_K32 sub-block b % 8 of block
// b / 8) from its two 16-value sums: what a kernel subtracts a zero point's
// share with, or multiplies m by.
inline int32_t legacy32_activation_sum(const BlockQ8K32* x, size_t b) noexcept {
    const int16_t* bsums = x[b / 8].bsums + 2 * (b % 8);
    return int32_t(bsums[0]) + int32_t(bsums[1]);
}

// Long batches of the 32-weight formats (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL): from 32
// tokens the golden engine multiplies these rows repacked to 8 bits per
// weight (its Q8_0_R8 / Q8_1 rows: the same values, so lossless) with one
// accumulator per row and one fma per block of 32, the rule of the stored
// rows' dot below too. smol follows it, as ConvertedBlocks of 8
// blocks: scale[s] = d, offset[s] = m (Q4_1 / Q5_1) or 0, q = the values
// (signed for Q4_0 / Q5_0 / IQ4_NL, unsigned for Q4_1 / Q5_1), multiplied by
// converted_block_dot. IQ4_NL's values use the whole int8 range (the AVX2
// tiles take them by the sign trick, x86_converted_tiles.inc).
template <class Block>
inline void convert_legacy32_blocks(const uint8_t* blocks, ConvertedBlock& out) noexcept {
    using Format = Legacy32<Block>;
    for (int s = 0; s < 8; ++s) {
        const uint8_t* block = blocks + size_t(s) * sizeof(Block);
        out.scale[s] = fp16_to_fp32(load_u16(block));
        out.offset[s] = Format::has_min ? fp16_to_fp32(load_u16(block + 2)) : 0.0f;
        for (int j = 0; j < 32; ++j) out.q[32 * s + j] = int8_t(Format::value(block, j));
    }
}

// w: n_blocks 32-weight blocks at any byte address; x: Q8_K32 blocks, one per
// 8 weight blocks (the reference engine's x86 kernels meet these formats with
// its Q8_2 activations: per 32 values a bf16 scale and codes rounded against
// it, the Q8_K32 rule; with ggml's Q8_0, fp16 scales, long prompts' greedy
// paths leave the goldens at unambiguous steps). One accumulator, one fma per
// block of the block's whole integer dot, and for Q4_1 / Q5_1 one more for m
// times the activations' sum: the long batches' rule above (converted_block_dot,
// which adds a zero offset for the other formats) and the reference's repacked
// rows' order. A kernel may hold rows in its lanes this way (the interleaved
// tiles: one lane per row), where the old 8 lanes per row cost a float vector
// per row and block.
template <class Block>
inline float dot_legacy32_q8k32(const uint8_t* w, const BlockQ8K32* x, size_t n_blocks) noexcept {
    using Format = Legacy32<Block>;
    float acc = 0;
    for (size_t b = 0; b < n_blocks; ++b) {
        const uint8_t* block = w + b * sizeof(Block);
        const float dx = x[b / 8].d[b % 8];
        const int8_t* q8 = x[b / 8].qs + 32 * (b % 8);
        int32_t dot = 0, sum = 0;
        for (int j = 0; j < 32; ++j) {
            dot += Format::value(block, j) * q8[j];
            sum += q8[j];
        }
        acc = smol::detail::fma(fp16_to_fp32(load_u16(block)) * dx, float(dot), acc);
        if constexpr (Format::has_min)
            acc = smol::detail::fma(fp16_to_fp32(load_u16(block + 2)), dx * float(sum), acc);
    }
    return acc;
}

}  // namespace scalar
}  // namespace kernels
SMOL_NAMESPACE_END
