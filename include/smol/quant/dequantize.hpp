// Reference (scalar) dequantization of the weight formats smol reads: F32,
// F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K, IQ4_XS, the codebook types (and Q8_K, the activation format, for tests), one function per
// type. Part of quant/reference.hpp, which holds dequantize_row(type, ...), the entry that picks
// among them.
//
// This file is the readable spec of what each block means; the SIMD kernels are
// tested against it. Element order inside a block (see blocks.hpp for the bytes):
//   Q4_K / Q5_K: 256 weights = 4 chunks of 64. In chunk c, byte qs[32c + i] holds
//     weight 64c + i in its low nibble (sub-block 2c) and weight 64c + 32 + i in its
//     high nibble (sub-block 2c + 1). Q5_K's 5th bit of those two weights is bit 2c
//     and bit 2c + 1 of qh[i]. Weight = d * scale[s] * q - dmin * min[s].
//   Q6_K: 256 weights = 2 halves of 128. In half h, for i in 0..31:
//     weight 128h + i      = low nibble of ql[64h + i]       + bits 0-1 of qh[32h + i]
//     weight 128h + i + 32 = low nibble of ql[64h + i + 32]  + bits 2-3 of qh[32h + i]
//     weight 128h + i + 64 = high nibble of ql[64h + i]      + bits 4-5 of qh[32h + i]
//     weight 128h + i + 96 = high nibble of ql[64h + i + 32] + bits 6-7 of qh[32h + i]
//     (the 2 high bits above the 4 low ones), and weight = d * scales[w / 16] * (q - 32).
//   Q8_0: weight = d * q. Q8_K: weight = d * q (float d).
//   Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL (32 weights): weight j's 4 low bits are the low
//     nibble of qs[j] (j < 16) or the high nibble of qs[j - 16]; Q5's 5th bit is bit j
//     of qh. Q4_0: d * (q - 8); Q4_1: d * q + m; Q5_0: d * (q - 16); Q5_1: d * q + m;
//     IQ4_NL: d * kIQ4Values[q].
//   Q2_K / Q3_K (256 weights = 2 halves of 128): weight 128h + 32k + l (k < 4, l < 32)
//     is bits 2k, 2k + 1 of qs[32h + l]; Q3_K's third bit is bit 4h + k of hmask[l],
//     and its value is the 2 bits minus 4 when that bit is 0. Group g = weight / 16.
//     Q2_K: d * (scales[g] & 15) * q - dmin * (scales[g] >> 4);
//     Q3_K: d * q3k_scale(g) * q3.
//   IQ4_XS: sub-block s of 32 = the 16 bytes qs[16s ..] read as an IQ4_NL block's,
//     weight = d * iq4xs_scale(s) * kIQ4Values[q].
//   IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M: quant/codebook.hpp
//     (decode_codebook: weight i = D * scale[i / 16] * value[i]).
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../core/fp16.hpp"
#include "blocks.hpp"
#include "codebook.hpp"
#include "types.hpp"

SMOL_NAMESPACE_BEGIN

// ---------------------------------------------------------------------------
// Dequantization: n elements (a multiple of the block size) -> n floats.
// ---------------------------------------------------------------------------

// One entry per type the reference converts: its block (or element) type and
// the two row functions over untyped bytes (quant/reference.hpp reads the table:
// quantize_row, dequantize_row). The types smol only reads have their entry here,
// beside the function that is the spec of their bytes; the types smol also writes
// have theirs in quant/reference.hpp, beside their quantizer. The weight types'
// entries are the base of the kernels' weight table (kernels/weight_types.hpp).
template <GGMLType type>
struct RowCodec;

namespace detail {
// A type smol reads but does not write: no quantizer (quantizes = false; the
// reference's quantize_row refuses the type before it would call quantize).
template <GGMLType id, class BlockT, void (*dequantize_fn)(const BlockT*, float*, size_t)>
struct RowCodecReadOnly {
    static constexpr GGMLType type = id;
    static constexpr bool quantizes = false;
    using Block = BlockT;
    template <class Effort>
    static void quantize(const float*, void*, size_t, Effort) {}
    static void dequantize(const void* src, float* dst, size_t n) {
        dequantize_fn(static_cast<const BlockT*>(src), dst, n);
    }
};
}  // namespace detail

inline void dequantize_row_f32(const float* src, float* dst, size_t n) noexcept {
    std::memcpy(dst, src, n * sizeof(float));
}

inline void dequantize_row_f16(const uint16_t* src, float* dst, size_t n) noexcept {
    for (size_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}

inline void dequantize_row_bf16(const uint16_t* src, float* dst, size_t n) noexcept {
    for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(src[i]);
}

inline void dequantize_row_q8_0(const BlockQ8_0* src, float* dst, size_t n) noexcept {
    for (size_t b = 0; b < n / QK8_0; ++b) {
        const float d = fp16_to_fp32(src[b].d);
        for (int i = 0; i < QK8_0; ++i) dst[b * QK8_0 + i] = d * float(src[b].qs[i]);
    }
}

inline void dequantize_row_q8_k(const BlockQ8K* src, float* dst, size_t n) noexcept {
    for (size_t b = 0; b < n / QK_K; ++b) {
        for (int i = 0; i < QK_K; ++i) dst[b * QK_K + i] = src[b].d * float(src[b].qs[i]);
    }
}

namespace detail {
// Q4_K and Q5_K: per 64-weight chunk c, sub-block 2c takes the low nibbles of
// qs[32c..32c+31] and 2c + 1 the high ones, each weight d * scale * q - dmin *
// min; Q5_K adds bit 2c (low) / 2c + 1 (high) of qh[i] as the fifth bit.
template <bool has_high_bit, class Block>
inline void dequantize_row_k4(const Block* src, float* dst, size_t n) noexcept {
    for (size_t b = 0; b < n / QK_K; ++b) {
        const Block& block = src[b];
        const float d = fp16_to_fp32(block.d);
        const float dmin = fp16_to_fp32(block.dmin);
        float* out = dst + b * QK_K;
        for (int chunk = 0; chunk < 4; ++chunk) {
            uint8_t scale_lo, min_lo, scale_hi, min_hi;
            unpack_scale_min_k4(block.scales, 2 * chunk, scale_lo, min_lo);
            unpack_scale_min_k4(block.scales, 2 * chunk + 1, scale_hi, min_hi);
            const float step_lo = d * float(scale_lo), offset_lo = dmin * float(min_lo);
            const float step_hi = d * float(scale_hi), offset_hi = dmin * float(min_hi);
            const uint8_t* qs = block.qs + 32 * chunk;
            for (int i = 0; i < 32; ++i) {
                int q_lo = qs[i] & 0x0F, q_hi = qs[i] >> 4;
                if constexpr (has_high_bit) {
                    q_lo |= ((block.qh[i] >> (2 * chunk)) & 1) << 4;
                    q_hi |= ((block.qh[i] >> (2 * chunk + 1)) & 1) << 4;
                }
                out[64 * chunk + i] = step_lo * float(q_lo) - offset_lo;
                out[64 * chunk + 32 + i] = step_hi * float(q_hi) - offset_hi;
            }
        }
    }
}
}  // namespace detail

inline void dequantize_row_q4_k(const BlockQ4K* src, float* dst, size_t n) noexcept {
    detail::dequantize_row_k4<false>(src, dst, n);
}

inline void dequantize_row_q5_k(const BlockQ5K* src, float* dst, size_t n) noexcept {
    detail::dequantize_row_k4<true>(src, dst, n);
}

inline void dequantize_row_q6_k(const BlockQ6K* src, float* dst, size_t n) noexcept {
    for (size_t b = 0; b < n / QK_K; ++b) {
        const BlockQ6K& block = src[b];
        const float d = fp16_to_fp32(block.d);
        float* out = dst + b * QK_K;
        for (int half = 0; half < 2; ++half) {
            const uint8_t* ql = block.ql + 64 * half;
            const uint8_t* qh = block.qh + 32 * half;
            const int8_t* scales = block.scales + 8 * half;  // 8 sub-blocks of 16 per half
            float* y = out + 128 * half;
            for (int i = 0; i < 32; ++i) {
                const int sub = i / 16;
                const int q0 = ((ql[i] & 0x0F) | (((qh[i] >> 0) & 3) << 4)) - 32;
                const int q1 = ((ql[i + 32] & 0x0F) | (((qh[i] >> 2) & 3) << 4)) - 32;
                const int q2 = ((ql[i] >> 4) | (((qh[i] >> 4) & 3) << 4)) - 32;
                const int q3 = ((ql[i + 32] >> 4) | (((qh[i] >> 6) & 3) << 4)) - 32;
                y[i] = d * float(scales[sub + 0]) * float(q0);
                y[i + 32] = d * float(scales[sub + 2]) * float(q1);
                y[i + 64] = d * float(scales[sub + 4]) * float(q2);
                y[i + 96] = d * float(scales[sub + 6]) * float(q3);
            }
        }
    }
}

// ---- the 32-weight formats ----

namespace detail {
// Weight j of a 32-weight block is step * value(q_j, j) + offset.
template <class Block, class Value>
inline void dequantize_row_32(const Block* src, float* dst, size_t n, Value value) noexcept {
    for (size_t b = 0; b < n / QK8_0; ++b)
        for (int j = 0; j < QK8_0; ++j) dst[b * QK8_0 + j] = value(src[b], j);
}
}  // namespace detail

inline void dequantize_row_q4_0(const BlockQ4_0* src, float* dst, size_t n) noexcept {
    detail::dequantize_row_32(src, dst, n, [](const BlockQ4_0& b, int j) {
        return fp16_to_fp32(b.d) * float(detail::nibble_of(b.qs, j) - 8);
    });
}
template <>
struct RowCodec<GGMLType::Q4_0>
    : detail::RowCodecReadOnly<GGMLType::Q4_0, BlockQ4_0, &dequantize_row_q4_0> {};

inline void dequantize_row_q4_1(const BlockQ4_1* src, float* dst, size_t n) noexcept {
    detail::dequantize_row_32(src, dst, n, [](const BlockQ4_1& b, int j) {
        return fp16_to_fp32(b.d) * float(detail::nibble_of(b.qs, j)) + fp16_to_fp32(b.m);
    });
}
template <>
struct RowCodec<GGMLType::Q4_1>
    : detail::RowCodecReadOnly<GGMLType::Q4_1, BlockQ4_1, &dequantize_row_q4_1> {};

inline void dequantize_row_q5_0(const BlockQ5_0* src, float* dst, size_t n) noexcept {
    detail::dequantize_row_32(src, dst, n, [](const BlockQ5_0& b, int j) {
        const int q = detail::nibble_of(b.qs, j) | (detail::q5_high_bit(b.qh, j) << 4);
        return fp16_to_fp32(b.d) * float(q - 16);
    });
}
template <>
struct RowCodec<GGMLType::Q5_0>
    : detail::RowCodecReadOnly<GGMLType::Q5_0, BlockQ5_0, &dequantize_row_q5_0> {};

inline void dequantize_row_q5_1(const BlockQ5_1* src, float* dst, size_t n) noexcept {
    detail::dequantize_row_32(src, dst, n, [](const BlockQ5_1& b, int j) {
        const int q = detail::nibble_of(b.qs, j) | (detail::q5_high_bit(b.qh, j) << 4);
        return fp16_to_fp32(b.d) * float(q) + fp16_to_fp32(b.m);
    });
}
template <>
struct RowCodec<GGMLType::Q5_1>
    : detail::RowCodecReadOnly<GGMLType::Q5_1, BlockQ5_1, &dequantize_row_q5_1> {};

inline void dequantize_row_iq4_nl(const BlockIQ4NL* src, float* dst, size_t n) noexcept {
    detail::dequantize_row_32(src, dst, n, [](const BlockIQ4NL& b, int j) {
        return fp16_to_fp32(b.d) * float(kIQ4Values[detail::nibble_of(b.qs, j)]);
    });
}
template <>
struct RowCodec<GGMLType::IQ4_NL>
    : detail::RowCodecReadOnly<GGMLType::IQ4_NL, BlockIQ4NL, &dequantize_row_iq4_nl> {};

// ---- the 256-weight formats Q2_K, Q3_K, IQ4_XS ----

inline void dequantize_row_q2_k(const BlockQ2K* src, float* dst, size_t n) noexcept {
    for (size_t b = 0; b < n / QK_K; ++b) {
        const BlockQ2K& block = src[b];
        const float d = fp16_to_fp32(block.d), dmin = fp16_to_fp32(block.dmin);
        for (int i = 0; i < QK_K; ++i) {
            const uint8_t sc = block.scales[i / 16];
            dst[b * QK_K + i] =
                d * float(sc & 0x0F) * float(detail::k2_bits(block.qs, i)) - dmin * float(sc >> 4);
        }
    }
}
template <>
struct RowCodec<GGMLType::Q2_K>
    : detail::RowCodecReadOnly<GGMLType::Q2_K, BlockQ2K, &dequantize_row_q2_k> {};

inline void dequantize_row_q3_k(const BlockQ3K* src, float* dst, size_t n) noexcept {
    for (size_t b = 0; b < n / QK_K; ++b) {
        const BlockQ3K& block = src[b];
        const float d = fp16_to_fp32(block.d);
        for (int i = 0; i < QK_K; ++i) {
            const int q =
                detail::k2_bits(block.qs, i) - (detail::q3k_high_bit(block.hmask, i) ? 0 : 4);
            dst[b * QK_K + i] = d * float(detail::q3k_scale(block.scales, i / 16)) * float(q);
        }
    }
}
template <>
struct RowCodec<GGMLType::Q3_K>
    : detail::RowCodecReadOnly<GGMLType::Q3_K, BlockQ3K, &dequantize_row_q3_k> {};

inline void dequantize_row_iq4_xs(const BlockIQ4XS* src, float* dst, size_t n) noexcept {
    for (size_t b = 0; b < n / QK_K; ++b) {
        const BlockIQ4XS& block = src[b];
        const float d = fp16_to_fp32(block.d);
        for (int s = 0; s < QK_K / 32; ++s) {
            const float step = d * float(detail::iq4xs_scale(block.scales_l, block.scales_h, s));
            for (int j = 0; j < 32; ++j)
                dst[b * QK_K + 32 * s + j] =
                    step * float(kIQ4Values[detail::nibble_of(block.qs + 16 * s, j)]);
        }
    }
}
template <>
struct RowCodec<GGMLType::IQ4_XS>
    : detail::RowCodecReadOnly<GGMLType::IQ4_XS, BlockIQ4XS, &dequantize_row_iq4_xs> {};

// ---- the codebook formats (quant/codebook.hpp) ----

template <GGMLType type, class Block>
inline void dequantize_row_codebook(const Block* src, float* dst, size_t n) noexcept {
    CodebookForm form;
    for (size_t b = 0; b < n / QK_K; ++b) {
        decode_codebook<type>(reinterpret_cast<const uint8_t*>(src + b), form);
        for (int i = 0; i < QK_K; ++i)
            dst[b * QK_K + i] = form.d * float(form.scale[i / 16]) * float(form.value[i]);
    }
}

template <>
struct RowCodec<GGMLType::IQ2_XXS>
    : detail::RowCodecReadOnly<GGMLType::IQ2_XXS, BlockIQ2XXS,
                               &dequantize_row_codebook<GGMLType::IQ2_XXS, BlockIQ2XXS>> {};
template <>
struct RowCodec<GGMLType::IQ2_XS>
    : detail::RowCodecReadOnly<GGMLType::IQ2_XS, BlockIQ2XS,
                               &dequantize_row_codebook<GGMLType::IQ2_XS, BlockIQ2XS>> {};
template <>
struct RowCodec<GGMLType::IQ2_S>
    : detail::RowCodecReadOnly<GGMLType::IQ2_S, BlockIQ2S,
                               &dequantize_row_codebook<GGMLType::IQ2_S, BlockIQ2S>> {};
template <>
struct RowCodec<GGMLType::IQ3_XXS>
    : detail::RowCodecReadOnly<GGMLType::IQ3_XXS, BlockIQ3XXS,
                               &dequantize_row_codebook<GGMLType::IQ3_XXS, BlockIQ3XXS>> {};
template <>
struct RowCodec<GGMLType::IQ3_S>
    : detail::RowCodecReadOnly<GGMLType::IQ3_S, BlockIQ3S,
                               &dequantize_row_codebook<GGMLType::IQ3_S, BlockIQ3S>> {};
template <>
struct RowCodec<GGMLType::IQ1_S>
    : detail::RowCodecReadOnly<GGMLType::IQ1_S, BlockIQ1S,
                               &dequantize_row_codebook<GGMLType::IQ1_S, BlockIQ1S>> {};
template <>
struct RowCodec<GGMLType::IQ1_M>
    : detail::RowCodecReadOnly<GGMLType::IQ1_M, BlockIQ1M,
                               &dequantize_row_codebook<GGMLType::IQ1_M, BlockIQ1M>> {};

SMOL_NAMESPACE_END
