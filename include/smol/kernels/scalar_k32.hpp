// The scalar spec of Q2_K, Q3_K, IQ4_XS and the codebook types (IQ2_XXS,
// IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) against Q8_K activations, and of
// their rows converted for long batches: the third part of the scalar spec
// (kernels/scalar.hpp's top comment has these types' formulas and the float
// order; kernels/scalar_float.hpp the float kernels).
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "../core/fp16.hpp"
#include "../detail/fma.hpp"
#include "../quant/blocks.hpp"
#include "../quant/codebook.hpp"
#include "../quant/types.hpp"
#include "activations.hpp"
#include "scalar.hpp"

SMOL_NAMESPACE_BEGIN
namespace kernels {
namespace scalar {

// ---- Q2_K, Q3_K, IQ4_XS against Q8_K activations (lane s: sub-block s) -----------

// The scale of sub-block s of an activation block: Q8_K32's own, Q8_K's one.
inline float activation_scale(const BlockQ8K32& x, int s) noexcept {
    return x.d[s];
}
inline float activation_scale(const BlockQ8K& x, int) noexcept {
    return x.d;
}

inline float dot_q2k_q8k(const uint8_t* w, const BlockQ8K* x, size_t n_blocks) noexcept {
    float lane[8] = {};
    for (size_t b = 0; b < n_blocks; ++b) {
        const uint8_t* block = w + b * sizeof(BlockQ2K);
        const uint8_t* scales = block + offsetof(BlockQ2K, scales);
        const uint8_t* qs = block + offsetof(BlockQ2K, qs);
        const float d = fp16_to_fp32(load_u16(block + offsetof(BlockQ2K, d)));
        const float dmin = fp16_to_fp32(load_u16(block + offsetof(BlockQ2K, dmin)));
        for (int s = 0; s < 8; ++s) {
            int32_t dot = 0, min_term = 0;
            for (int g = 2 * s; g < 2 * s + 2; ++g) {
                int32_t group_dot = 0;
                for (int i = 16 * g; i < 16 * g + 16; ++i)
                    group_dot += smol::detail::k2_bits(qs, i) * x[b].qs[i];
                dot += (scales[g] & 0x0F) * group_dot;
                min_term += (scales[g] >> 4) * x[b].bsums[g];
            }
            lane[s] = smol::detail::fma(d * activation_scale(x[b], s), float(dot), lane[s]);
            lane[s] =
                smol::detail::fma(-(dmin * activation_scale(x[b], s)), float(min_term), lane[s]);
        }
    }
    return sum_lanes(lane);
}

inline float dot_q3k_q8k(const uint8_t* w, const BlockQ8K* x, size_t n_blocks) noexcept {
    float lane[8] = {};
    for (size_t b = 0; b < n_blocks; ++b) {
        const uint8_t* block = w + b * sizeof(BlockQ3K);
        const uint8_t* hmask = block + offsetof(BlockQ3K, hmask);
        const uint8_t* qs = block + offsetof(BlockQ3K, qs);
        const uint8_t* scales = block + offsetof(BlockQ3K, scales);
        const float d = fp16_to_fp32(load_u16(block + offsetof(BlockQ3K, d)));
        for (int s = 0; s < 8; ++s) {
            int32_t dot = 0;
            for (int g = 2 * s; g < 2 * s + 2; ++g) {
                int32_t group_dot = 0;
                for (int i = 16 * g; i < 16 * g + 16; ++i) {
                    const int q = smol::detail::k2_bits(qs, i) -
                                  (smol::detail::q3k_high_bit(hmask, i) ? 0 : 4);
                    group_dot += q * x[b].qs[i];
                }
                dot += smol::detail::q3k_scale(scales, g) * group_dot;
            }
            lane[s] = smol::detail::fma(d * activation_scale(x[b], s), float(dot), lane[s]);
        }
    }
    return sum_lanes(lane);
}

// IQ4_XS: one integer dot per block, the sub-blocks' dots times their scales
// summed (|dot| <= 8 * 32 * 32 * 127 * 127 < 2^31), and one fma per block into
// one accumulator, so a kernel may hold rows in its lanes (the interleaved
// tiles), as the 32-weight formats' rule (kernels/scalar.hpp, dot_legacy32_q8k32).
inline float dot_iq4xs_q8k(const uint8_t* w, const BlockQ8K* x, size_t n_blocks) noexcept {
    float acc = 0;
    for (size_t b = 0; b < n_blocks; ++b) {
        const uint8_t* block = w + b * sizeof(BlockIQ4XS);
        const uint8_t* scales_l = block + offsetof(BlockIQ4XS, scales_l);
        const uint16_t scales_h = load_u16(block + offsetof(BlockIQ4XS, scales_h));
        const uint8_t* qs = block + offsetof(BlockIQ4XS, qs);
        const float d = fp16_to_fp32(load_u16(block + offsetof(BlockIQ4XS, d)));
        int32_t dot = 0;
        for (int s = 0; s < 8; ++s) {
            int32_t sub = 0;
            for (int j = 0; j < 32; ++j)
                sub += kIQ4Values[smol::detail::nibble_of(qs + 16 * s, j)] * x[b].qs[32 * s + j];
            dot += sub * smol::detail::iq4xs_scale(scales_l, scales_h, s);
        }
        acc = smol::detail::fma(d * x[b].d, float(dot), acc);
    }
    return acc;
}

// A codebook type (quant/codebook.hpp) against Q8_K, from its integer form
// (weight i = D * scale[i / 16] * value[i]): per sub-block s of 32 (lane s)
//   dot_s = scale[2s] * sum_{16} value * q8 + scale[2s + 1] * sum_{16} value * q8
//   lane[s] = fma(D * d(x), float(dot_s), lane[s])
// all integer sums exact (|dot_s| <= 31 * 32 * 62 * 128).
template <GGMLType type>
inline float dot_codebook_q8k(const uint8_t* w, const BlockQ8K* x, size_t n_blocks) noexcept {
    float lane[8] = {};
    CodebookForm form;
    for (size_t b = 0; b < n_blocks; ++b) {
        decode_codebook<type>(w + b * type_traits(type).type_size, form);
        for (int s = 0; s < 8; ++s) {
            int32_t dot = 0;
            for (int g = 2 * s; g < 2 * s + 2; ++g) {
                int32_t group_dot = 0;
                for (int i = 16 * g; i < 16 * g + 16; ++i) group_dot += form.value[i] * x[b].qs[i];
                dot += form.scale[g] * group_dot;
            }
            lane[s] = smol::detail::fma(form.d * activation_scale(x[b], s), float(dot), lane[s]);
        }
    }
    return sum_lanes(lane);
}

// ---- long batches of Q2_K, Q3_K, IQ4_XS: rows converted to 8 bits per 256 ----------
//
// From 32 tokens on the golden engine multiplies these types' rows converted
// to one int8 per weight and one fp16 scale per 256 weights (its Q8_K_R8),
// against the same Q8_K activations; smol converts the same way from the same
// batch size (WeightTraits::convert_min_tokens), so long prompts meet its bits:
//   Q2_K: v_i = fma(float((sc & 15) * q_i), d, (-dmin) * float(sc >> 4)) per group of 16,
//         m = max|v| / 127, S = fp16_round(m), q_i = round_half_even(v_i * (1 / m)) (0 if m = 0)
//   Q3_K, IQ4_XS: v_i = scale * q_i as integers (|v| <= 128, <= 4064), M = max|v|,
//         m = M / 127 (Q3_K) or M * (1 / 127) (IQ4_XS); when m < 1: q_i = v_i and S = d,
//         else q_i = round_half_even(v_i * (1 / m)) and S = fp16_round(d * m)
//   result += (S * d(x)) * sum_i q_i * q8_i (exact integer), one accumulator, blocks in order.
//   codebook types: v_i = scale[i / 16] * value_i (integers, |v| <= 1,922), M = max|v|,
//         m = M * step (step 1/124, IQ3_S 1/127, IQ1_S and IQ1_M 1/126: the engine's);
//         when m < 1: q_i = v_i and S = fp16_round(D), else q_i = round_half_even(v_i * (1 / m))
//         and S = fp16_round(D * m)
// Codes saturate to [-128, 127] (the engine packs with saturation).
constexpr size_t kConvertedQ8KBytes = 2 + QK_K;  // fp16 S, then 256 int8 codes

namespace convert_detail {
inline int8_t saturate_i8(int q) noexcept {
    return int8_t(q > 127 ? 127 : (q < -128 ? -128 : q));
}
// The integer weights v (|v| <= 4064) of a Q3_K / IQ4_XS block, scale by scale.
template <GGMLType type>
inline void integer_weights(const uint8_t* block, int v[QK_K]) noexcept {
    if constexpr (type == GGMLType::Q3_K) {
        const uint8_t* hmask = block + offsetof(BlockQ3K, hmask);
        const uint8_t* qs = block + offsetof(BlockQ3K, qs);
        const uint8_t* scales = block + offsetof(BlockQ3K, scales);
        for (int i = 0; i < QK_K; ++i)
            v[i] = smol::detail::q3k_scale(scales, i / 16) *
                   (smol::detail::k2_bits(qs, i) - (smol::detail::q3k_high_bit(hmask, i) ? 0 : 4));
    } else {
        const uint8_t* scales_l = block + offsetof(BlockIQ4XS, scales_l);
        const uint16_t scales_h = load_u16(block + offsetof(BlockIQ4XS, scales_h));
        const uint8_t* qs = block + offsetof(BlockIQ4XS, qs);
        for (int i = 0; i < QK_K; ++i)
            v[i] = smol::detail::iq4xs_scale(scales_l, scales_h, i / 32) *
                   kIQ4Values[smol::detail::nibble_of(qs + 16 * (i / 32), i % 32)];
    }
}
}  // namespace convert_detail

// The conversion's step per largest integer weight of a codebook type.
constexpr float codebook_convert_step(GGMLType type) noexcept {
    return type == GGMLType::IQ3_S                                ? 1.0f / 127
           : (type == GGMLType::IQ1_S || type == GGMLType::IQ1_M) ? 1.0f / 126
                                                                  : 1.0f / 124;
}

// One Q2_K, Q3_K, IQ4_XS or codebook block converted into kConvertedQ8KBytes at out.
template <GGMLType type>
inline void convert_q8k_block(const uint8_t* block, uint8_t* out) noexcept {
    int8_t* q = reinterpret_cast<int8_t*>(out + 2);
    if constexpr (is_codebook_type(type)) {
        CodebookForm form;
        decode_codebook<type>(block, form);
        int v[QK_K];
        int largest = 0;
        for (int i = 0; i < QK_K; ++i) {
            v[i] = form.scale[i / 16] * form.value[i];
            largest = std::max(largest, std::abs(v[i]));
        }
        const float m = float(largest) * codebook_convert_step(type);
        const bool scaled = !(m < 1.0f);
        const uint16_t stored = fp32_to_fp16(form.d * (scaled ? m : 1.0f));
        std::memcpy(out, &stored, 2);
        const float inverse = scaled ? 1 / m : 1.0f;
        for (int i = 0; i < QK_K; ++i)
            q[i] = scaled ? convert_detail::saturate_i8(detail::round_even(float(v[i]) * inverse))
                          : int8_t(v[i]);
    } else if constexpr (type == GGMLType::Q2_K) {
        const uint8_t* scales = block + offsetof(BlockQ2K, scales);
        const uint8_t* qs = block + offsetof(BlockQ2K, qs);
        const float d = fp16_to_fp32(load_u16(block + offsetof(BlockQ2K, d)));
        const float dmin = fp16_to_fp32(load_u16(block + offsetof(BlockQ2K, dmin)));
        float v[QK_K];
        float largest = 0;
        for (int i = 0; i < QK_K; ++i) {
            const uint8_t sc = scales[i / 16];
            v[i] = smol::detail::fma(float((sc & 15) * smol::detail::k2_bits(qs, i)), d,
                                     -dmin * float(sc >> 4));
            largest = std::fmax(largest, std::fabs(v[i]));
        }
        const float m = largest / 127;
        const float inverse = m != 0.0f ? 1 / m : 0.0f;
        const uint16_t stored = fp32_to_fp16(m);
        std::memcpy(out, &stored, 2);
        for (int i = 0; i < QK_K; ++i)
            q[i] = convert_detail::saturate_i8(detail::round_even(v[i] * inverse));
    } else {
        static_assert(type == GGMLType::Q3_K || type == GGMLType::IQ4_XS,
                      "convert_q8k_block: Q2_K, Q3_K or IQ4_XS");
        using Block = std::conditional_t<type == GGMLType::Q3_K, BlockQ3K, BlockIQ4XS>;
        const float d = fp16_to_fp32(load_u16(block + offsetof(Block, d)));
        int v[QK_K];
        convert_detail::integer_weights<type>(block, v);
        int largest = 0;
        for (int i = 0; i < QK_K; ++i) largest = std::max(largest, std::abs(v[i]));
        const float m =
            type == GGMLType::Q3_K ? float(largest) / 127 : float(largest) * (1.0f / 127);
        const uint16_t stored =
            m < 1.0f ? load_u16(block + offsetof(Block, d)) : fp32_to_fp16(d * m);
        std::memcpy(out, &stored, 2);
        const float inverse = m < 1.0f ? 1.0f : 1 / m;
        for (int i = 0; i < QK_K; ++i)
            q[i] = m < 1.0f
                       ? int8_t(v[i])
                       : convert_detail::saturate_i8(detail::round_even(float(v[i]) * inverse));
    }
}

// One converted block against its activation block, added to acc.
inline float converted_q8k_block_dot(const uint8_t* block, const BlockQ8K& x, float acc) noexcept {
    const int8_t* q = reinterpret_cast<const int8_t*>(block + 2);
    int32_t dot = 0;
    for (int i = 0; i < QK_K; ++i) dot += q[i] * x.qs[i];
    return smol::detail::fma(fp16_to_fp32(load_u16(block)) * x.d, float(dot), acc);
}

// Converted blocks (kConvertedQ8KBytes each, any address) against Q8_K activations.
inline float dot_converted_q8k(const uint8_t* w, const BlockQ8K* x, size_t n_blocks) noexcept {
    float acc = 0;
    for (size_t b = 0; b < n_blocks; ++b)
        acc = converted_q8k_block_dot(w + b * kConvertedQ8KBytes, x[b], acc);
    return acc;
}

// The converted dot over stored rows (each block converted on the fly): the spec.
template <GGMLType type>
inline float dot_converted_q8k_stored(const uint8_t* w, const BlockQ8K* x,
                                      size_t n_blocks) noexcept {
    float acc = 0;
    uint8_t converted[kConvertedQ8KBytes];
    for (size_t b = 0; b < n_blocks; ++b) {
        convert_q8k_block<type>(w + b * type_traits(type).type_size, converted);
        acc = converted_q8k_block_dot(converted, x[b], acc);
    }
    return acc;
}

// Packed rows for the tiles: n_rows rows of `cols` values, each block converted.
inline size_t converted_q8k_row_bytes(size_t cols) noexcept {
    return cols / QK_K * kConvertedQ8KBytes;
}
template <GGMLType type>
void pack_converted_q8k(const uint8_t* w, size_t w_row_bytes, size_t n_rows, size_t cols,
                        uint8_t* out) {
    const size_t out_row_bytes = converted_q8k_row_bytes(cols);
    for (size_t r = 0; r < n_rows; ++r)
        for (size_t b = 0; b < cols / QK_K; ++b)
            convert_q8k_block<type>(w + r * w_row_bytes + b * type_traits(type).type_size,
                                    out + r * out_row_bytes + b * kConvertedQ8KBytes);
}

}  // namespace scalar
}  // namespace kernels
SMOL_NAMESPACE_END
