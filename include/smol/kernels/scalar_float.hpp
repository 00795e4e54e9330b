// The scalar spec's float kernels: the float dots, RMS norm, SwiGLU,
// softmax, RoPE and attention that each level's SIMD versions are tested
// against, and the attention call's description (AttentionHead). Part of the
// scalar spec: kernels/scalar.hpp includes it, and its top comment fixes the
// float order these follow (8 fma lanes, then sum_lanes).
#pragma once

#include "../detail/abi.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../core/fp16.hpp"
#include "../detail/fma.hpp"
#include "../quant/blocks.hpp"

SMOL_NAMESPACE_BEGIN
namespace kernels {

// How the cached rows store their head_dim values: F32, F16, or GGUF Q8_0
// blocks (per 32 values an fp16 scale d and 32 int8 q, value = d * q; head_dim
// a multiple of 32).
enum class CacheFormat : uint8_t { f32, f16, q8_0 };

// The work of one attend() call: the `group` query heads of one token that
// share a KV head, against that head's cached positions 0 .. n_positions - 1.
// The cache is in blocks of 2^block_shift positions (model/kv_blocks.hpp):
// position p's key is row p mod 2^block_shift of the rows starting keys_offset
// bytes into blocks[p >> block_shift], row_bytes apart (values the same from
// values_offset). Rows in one flat buffer: one block, block_shift 63.
struct AttentionHead {
    const float* q = nullptr;                // [group][head_dim]
    const uint8_t* const* blocks = nullptr;  // [n_positions >> block_shift, rounded up]
    unsigned block_shift = 63;
    size_t keys_offset = 0, values_offset = 0;
    size_t row_bytes = 0;
    CacheFormat format = CacheFormat::f16;
    size_t group = 1, head_dim = 0, n_positions = 0;
    float scale = 1.0f;       // 1 / sqrt(head_dim)
    float* scores = nullptr;  // scratch [group][n_positions]
    float* out = nullptr;     // [group][head_dim], overwritten

    const uint8_t* key(size_t p) const noexcept { return row(p) + keys_offset; }
    const uint8_t* value(size_t p) const noexcept { return row(p) + values_offset; }

private:
    // Row p of the stream at offset 0 of its block.
    const uint8_t* row(size_t p) const noexcept {
        return blocks[p >> block_shift] + (p & ((size_t(1) << block_shift) - 1)) * row_bytes;
    }
};

namespace scalar {

// The 8 lanes of a vector accumulator, added in the order the 8-lane
// kernels' horizontal sum uses.
inline float sum_lanes(const float lane[8]) noexcept {
    return ((lane[0] + lane[4]) + (lane[2] + lane[6])) +
           ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

// ---- float dot products (n elements) ------------------------------------------

// One F32/F16/BF16 weight at any byte address, as a float (the SIMD float
// tiles use it for the values after their last full vector).
template <GGMLType type>
inline float widen_one(const uint8_t* p) noexcept {
    if constexpr (type == GGMLType::F32) {
        float v;
        std::memcpy(&v, p, sizeof v);
        return v;
    } else {
        return type == GGMLType::F16 ? fp16_to_fp32(load_u16(p)) : bf16_to_fp32(load_u16(p));
    }
}

// sum_i w(i) * x[i] in the lane order (see the top of kernels/scalar.hpp); w(i) reads
// weight i as a float.
template <class Weight>
inline float dot_in_lanes(Weight w, const float* x, size_t n) noexcept {
    float lane[8] = {};
    const size_t vector_end = n / 8 * 8;
    for (size_t i = 0; i < vector_end; ++i)
        lane[i % 8] = smol::detail::fma(w(i), x[i], lane[i % 8]);
    float sum = sum_lanes(lane);
    // std::fma, not a * b + c: whether the compiler contracts that is its choice,
    // and it chose differently for two copies of the same loop.
    for (size_t i = vector_end; i < n; ++i) sum = smol::detail::fma(w(i), x[i], sum);
    return sum;
}

inline float dot_f32(const float* a, const float* b, size_t n) noexcept {
    return dot_in_lanes([a](size_t i) { return a[i]; }, b, n);
}

// w: n 16-bit values at any byte address.
inline float dot_f16_f32(const uint8_t* w, const float* x, size_t n) noexcept {
    return dot_in_lanes([w](size_t i) { return widen_one<GGMLType::F16>(w + 2 * i); }, x, n);
}

inline float dot_bf16_f32(const uint8_t* w, const float* x, size_t n) noexcept {
    return dot_in_lanes([w](size_t i) { return widen_one<GGMLType::BF16>(w + 2 * i); }, x, n);
}

// w: n floats at any byte address.
inline float dot_f32_unaligned(const uint8_t* w, const float* x, size_t n) noexcept {
    return dot_in_lanes([w](size_t i) { return widen_one<GGMLType::F32>(w + 4 * i); }, x, n);
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

// Rotates the adjacent pairs (v[2i], v[2i + 1]), i < pairs, by the angles whose
// cosines and sines are cos[i], sin[i] (RoPE, the GGUF "normal" layout).
// Each output is one fused multiply-add over one rounded product.
inline void rope(float* v, const float* cos, const float* sin, size_t pairs) noexcept {
    for (size_t i = 0; i < pairs; ++i) {
        const float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = smol::detail::fma(x0, cos[i], -(x1 * sin[i]));
        v[2 * i + 1] = smol::detail::fma(x1, cos[i], x0 * sin[i]);
    }
}

// Element i of a cached key or value row (see CacheFormat). A Q8_0 value
// d * q is exact in float (an 11-bit d times an 8-bit q), so every level that
// widens the same d and q gets the same bits whatever its instructions.
inline float cache_value(const uint8_t* row, size_t i, CacheFormat format) noexcept {
    if (format == CacheFormat::f16) return fp16_to_fp32(load_u16(row + 2 * i));
    if (format == CacheFormat::q8_0) {
        const uint8_t* block = row + i / 32 * 34;
        return fp16_to_fp32(load_u16(block)) * float(int8_t(block[2 + i % 32]));
    }
    float v;
    std::memcpy(&v, row + 4 * i, sizeof v);
    return v;
}

// The attention of the `group` query heads that share one KV head, for one
// token (see AttentionHead): scores = q . K^T * scale, softmax per head over
// the positions, out = scores V. Every key and value row is read once for the
// whole group.
inline void attend(const AttentionHead& a) noexcept {
    for (size_t p = 0; p < a.n_positions; ++p) {
        const uint8_t* key = a.key(p);
        for (size_t g = 0; g < a.group; ++g) {
            const float dot =
                dot_in_lanes([key, &a](size_t i) { return cache_value(key, i, a.format); },
                             a.q + g * a.head_dim, a.head_dim);
            a.scores[g * a.n_positions + p] = dot * a.scale;
        }
    }
    for (size_t g = 0; g < a.group; ++g) softmax(a.scores + g * a.n_positions, a.n_positions);
    for (size_t i = 0; i < a.group * a.head_dim; ++i) a.out[i] = 0.0f;
    for (size_t p = 0; p < a.n_positions; ++p) {
        const uint8_t* value = a.value(p);
        for (size_t g = 0; g < a.group; ++g) {
            const float weight = a.scores[g * a.n_positions + p];
            float* out = a.out + g * a.head_dim;
            for (size_t i = 0; i < a.head_dim; ++i)
                out[i] = smol::detail::fma(weight, cache_value(value, i, a.format), out[i]);
        }
    }
}

inline uint64_t sum_bytes(const uint8_t* begin, size_t n) noexcept {
    uint64_t sum = 0;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        uint64_t v;
        std::memcpy(&v, begin + i, 8);
        sum += v;
    }
    return sum;
}

}  // namespace scalar
}  // namespace kernels
SMOL_NAMESPACE_END
