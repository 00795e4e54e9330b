// Reference (scalar) dequantization and quantization of the weight formats smol
// reads and writes: F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K (and Q8_K, the
// activation format, for dequantization and tests).
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
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "../core/fp16.hpp"
#include "../error.hpp"
#include "blocks.hpp"
#include "types.hpp"

SMOL_NAMESPACE_BEGIN

namespace detail {

// Q4_K / Q5_K pack eight 6-bit scales and eight 6-bit mins into 12 bytes:
//   bytes 0-3:  scale[0..3] in bits 0-5; bits 6-7 hold bits 4-5 of scale[4..7]
//   bytes 4-7:  min[0..3]   in bits 0-5; bits 6-7 hold bits 4-5 of min[4..7]
//   bytes 8-11: low 4 bits of scale[4..7] (low nibble) and of min[4..7] (high nibble)
inline void unpack_scale_min_k4(const uint8_t* packed, int sub_block, uint8_t& scale,
                                uint8_t& min) noexcept {
    const int j = sub_block;
    if (j < 4) {
        scale = packed[j] & 63;
        min = packed[j + 4] & 63;
    } else {
        scale = uint8_t((packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4));
        min = uint8_t((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4));
    }
}

inline void pack_scales_mins_k4(const uint8_t scales[8], const uint8_t mins[8],
                                uint8_t packed[K_SCALE_SIZE]) noexcept {
    for (int j = 0; j < 4; ++j) {
        packed[j] = uint8_t((scales[j] & 63) | ((scales[j + 4] >> 4) << 6));
        packed[j + 4] = uint8_t((mins[j] & 63) | ((mins[j + 4] >> 4) << 6));
        packed[j + 8] = uint8_t((scales[j + 4] & 0x0F) | ((mins[j + 4] & 0x0F) << 4));
    }
}

inline void require_block_multiple(GGMLType type, size_t n, const char* what) {
    const TypeTraits traits = type_traits(type);
    if (traits.block_size == 0 || n % traits.block_size != 0)
        fail(ErrorKind::invalid_argument,
             std::string(what) + ": " + std::to_string(n) + " elements is not a multiple of the " +
                 type_name(type) + " block size " + std::to_string(traits.block_size));
}

}  // namespace detail

// ---------------------------------------------------------------------------
// Dequantization: n elements (a multiple of the block size) -> n floats.
// ---------------------------------------------------------------------------

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

inline void dequantize_row_q4_k(const BlockQ4K* src, float* dst, size_t n) noexcept {
    for (size_t b = 0; b < n / QK_K; ++b) {
        const BlockQ4K& block = src[b];
        const float d = fp16_to_fp32(block.d);
        const float dmin = fp16_to_fp32(block.dmin);
        float* out = dst + b * QK_K;
        for (int chunk = 0; chunk < 4; ++chunk) {
            uint8_t scale_lo, min_lo, scale_hi, min_hi;
            detail::unpack_scale_min_k4(block.scales, 2 * chunk, scale_lo, min_lo);
            detail::unpack_scale_min_k4(block.scales, 2 * chunk + 1, scale_hi, min_hi);
            const float step_lo = d * float(scale_lo), offset_lo = dmin * float(min_lo);
            const float step_hi = d * float(scale_hi), offset_hi = dmin * float(min_hi);
            const uint8_t* qs = block.qs + 32 * chunk;
            for (int i = 0; i < 32; ++i) {
                out[64 * chunk + i] = step_lo * float(qs[i] & 0x0F) - offset_lo;
                out[64 * chunk + 32 + i] = step_hi * float(qs[i] >> 4) - offset_hi;
            }
        }
    }
}

inline void dequantize_row_q5_k(const BlockQ5K* src, float* dst, size_t n) noexcept {
    for (size_t b = 0; b < n / QK_K; ++b) {
        const BlockQ5K& block = src[b];
        const float d = fp16_to_fp32(block.d);
        const float dmin = fp16_to_fp32(block.dmin);
        float* out = dst + b * QK_K;
        for (int chunk = 0; chunk < 4; ++chunk) {
            uint8_t scale_lo, min_lo, scale_hi, min_hi;
            detail::unpack_scale_min_k4(block.scales, 2 * chunk, scale_lo, min_lo);
            detail::unpack_scale_min_k4(block.scales, 2 * chunk + 1, scale_hi, min_hi);
            const float step_lo = d * float(scale_lo), offset_lo = dmin * float(min_lo);
            const float step_hi = d * float(scale_hi), offset_hi = dmin * float(min_hi);
            const uint8_t* qs = block.qs + 32 * chunk;
            const uint8_t bit_lo = uint8_t(1u << (2 * chunk));
            const uint8_t bit_hi = uint8_t(1u << (2 * chunk + 1));
            for (int i = 0; i < 32; ++i) {
                const int q_lo = (qs[i] & 0x0F) | ((block.qh[i] & bit_lo) ? 16 : 0);
                const int q_hi = (qs[i] >> 4) | ((block.qh[i] & bit_hi) ? 16 : 0);
                out[64 * chunk + i] = step_lo * float(q_lo) - offset_lo;
                out[64 * chunk + 32 + i] = step_hi * float(q_hi) - offset_hi;
            }
        }
    }
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

// True for the types dequantize_row handles: F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K, Q8_K.
inline bool can_dequantize(GGMLType type) noexcept {
    switch (type) {
        case GGMLType::F32:
        case GGMLType::F16:
        case GGMLType::BF16:
        case GGMLType::Q8_0:
        case GGMLType::Q4_K:
        case GGMLType::Q5_K:
        case GGMLType::Q6_K:
        case GGMLType::Q8_K:
            return true;
        default:
            return false;
    }
}

// Dequantizes n elements (n a multiple of the type's block size) from src to dst.
// Throws smol::Error(unsupported) naming the type otherwise (invalid_argument
// for a bad n).
inline void dequantize_row(GGMLType type, const void* src, float* dst, size_t n) {
    if (!can_dequantize(type))
        detail::fail(ErrorKind::unsupported,
                     "dequantize_row: type " + type_name(type) + " is not supported");
    detail::require_block_multiple(type, n, "dequantize_row");
    // general.alignment = 1 is legal GGUF, so src may sit where the block
    // struct (or float) cannot be read in place: copy whole blocks to aligned
    // storage, a few KiB at a time, and dequantize from there.
    const size_t alignment = type == GGMLType::F32 ? alignof(float) : alignof(uint16_t);
    if (reinterpret_cast<uintptr_t>(src) % alignment != 0) {
        const TypeTraits traits = type_traits(type);
        alignas(16) uint8_t aligned[4096];
        const size_t blocks_per_copy = sizeof aligned / traits.type_size;
        const uint8_t* bytes = static_cast<const uint8_t*>(src);
        for (size_t block = 0, n_blocks = n / traits.block_size; block < n_blocks; block += blocks_per_copy) {
            const size_t count = std::min(blocks_per_copy, n_blocks - block);
            std::memcpy(aligned, bytes + block * traits.type_size, count * traits.type_size);
            dequantize_row(type, aligned, dst + block * traits.block_size, count * traits.block_size);
        }
        return;
    }
    switch (type) {
        case GGMLType::F32:
            dequantize_row_f32(static_cast<const float*>(src), dst, n);
            break;
        case GGMLType::F16:
            dequantize_row_f16(static_cast<const uint16_t*>(src), dst, n);
            break;
        case GGMLType::BF16:
            dequantize_row_bf16(static_cast<const uint16_t*>(src), dst, n);
            break;
        case GGMLType::Q8_0:
            dequantize_row_q8_0(static_cast<const BlockQ8_0*>(src), dst, n);
            break;
        case GGMLType::Q4_K:
            dequantize_row_q4_k(static_cast<const BlockQ4K*>(src), dst, n);
            break;
        case GGMLType::Q5_K:
            dequantize_row_q5_k(static_cast<const BlockQ5K*>(src), dst, n);
            break;
        case GGMLType::Q6_K:
            dequantize_row_q6_k(static_cast<const BlockQ6K*>(src), dst, n);
            break;
        case GGMLType::Q8_K:
            dequantize_row_q8_k(static_cast<const BlockQ8K*>(src), dst, n);
            break;
        default:
            break;
    }
}

// ---------------------------------------------------------------------------
// Quantization: n floats (a multiple of the block size) -> blocks.
// ---------------------------------------------------------------------------

namespace detail {

// Round to nearest (ties to even) for |v| < 2^22: adding 1.5 * 2^23 pushes the
// fraction out of the mantissa, whose low bits then hold the integer. Branch-free
// and vectorizable, unlike lrint. Callers clamp first.
inline int round_to_int(float v) noexcept {
    const float shifted = v + 12582912.0f;
    int32_t bits;
    std::memcpy(&bits, &shifted, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

// The integer level nearest to v, clamped to [lowest, highest].
inline int nearest_level(float v, int lowest, int highest) noexcept {
    return round_to_int(std::min(std::max(v, float(lowest)), float(highest)));
}

// fp16 of a (non-negative) block scale, saturating at the largest finite half
// so that huge inputs degrade instead of turning into inf/NaN.
inline uint16_t fp16_scale(float scale) noexcept {
    const uint16_t h = fp32_to_fp16(scale);
    return (h & 0x7fffu) >= 0x7c00u ? uint16_t((h & 0x8000u) | 0x7bffu) : h;
}

// Smallest magnitude we treat as a non-zero block (below it a sub-block is all zeros).
constexpr float kTinyGroupMax = 1e-15f;

// Nearest integer level to v as a float, clamped to [lowest, highest]. Pure float
// arithmetic (the 1.5 * 2^23 trick), so loops over it vectorize.
inline float nearest_level_f(float v, float lowest, float highest) noexcept {
    const float clamped = std::min(std::max(v, lowest), highest);
    return (clamped + 12582912.0f) - 12582912.0f;
}

// Weighted sums over one sub-block for a candidate grid, accumulated in 8 lanes
// so the compiler can vectorize them (float reductions are otherwise sequential).
struct GridSums {
    float wq = 0, wqq = 0, wqx = 0;
};

template <int N>
inline GridSums grid_sums(const float* x, const float* weights, float inverse, float origin,
                          float lowest, float highest) noexcept {
    static_assert(N % 8 == 0, "sub-blocks are multiples of 8");
    float wq[8] = {}, wqq[8] = {}, wqx[8] = {};
    for (int i = 0; i < N; i += 8) {
        for (int lane = 0; lane < 8; ++lane) {
            const float q = nearest_level_f(inverse * (x[i + lane] - origin), lowest, highest);
            const float w_q = weights[i + lane] * q;
            wq[lane] += w_q;
            wqq[lane] += w_q * q;
            wqx[lane] += w_q * x[i + lane];
        }
    }
    GridSums sums;
    for (int lane = 0; lane < 8; ++lane) {
        sums.wq += wq[lane];
        sums.wqq += wqq[lane];
        sums.wqx += wqx[lane];
    }
    return sums;
}

// Affine fit of one sub-block: x[i] ~= scale * q[i] - offset with integer q in
// [0, max_q] and offset >= 0 (the "min" of Q4_K/Q5_K, subtracted), minimizing
//   E = sum weights[i] * (scale * q[i] - offset - x[i])^2.
// For each candidate inverse scale (max_q + first_step + k * step_size) / (max - min),
// k = 0..steps, the q are rounded on that grid and (scale, offset) re-solved in
// closed form by weighted least squares on those q; the candidate with the smallest
// E wins. Plain min/max rounding is the first contender. E is expanded from the
// sums (no second pass): E = s^2 Swqq + 2 s m Swq + m^2 Sw - 2 s Swqx - 2 m Swx + Swxx,
// with m = -offset.
struct AffineFit {
    float scale = 0;
    float offset = 0;  // subtracted: x ~= scale * q - offset
};

template <int N>
inline AffineFit fit_affine(const float* x, const float* weights, int max_q, float first_step,
                            float step_size, int steps) noexcept {
    float lo = x[0], hi = x[0];
    for (int i = 1; i < N; ++i) {
        lo = std::min(lo, x[i]);
        hi = std::max(hi, x[i]);
    }
    if (lo > 0) lo = 0;  // the offset only ever moves the grid down: the grid always contains 0
    AffineFit best;
    if (hi <= lo) {  // constant (<= 0) sub-block: scale 0, the offset reproduces it
        best.offset = -lo;
        return best;
    }
    float sum_w = 0, sum_wx = 0, sum_wxx = 0;
    for (int i = 0; i < N; ++i) {
        sum_w += weights[i];
        sum_wx += weights[i] * x[i];
        sum_wxx += weights[i] * x[i] * x[i];
    }
    auto error_of = [&](const GridSums& g, float scale, float min_value) {
        return scale * scale * g.wqq + 2 * scale * min_value * g.wq +
               min_value * min_value * sum_w - 2 * scale * g.wqx - 2 * min_value * sum_wx + sum_wxx;
    };
    const float range = hi - lo;
    const float top = float(max_q);
    // Contender 0: plain rounding between min and max.
    best.scale = range / top;
    best.offset = -lo;
    float best_error = error_of(grid_sums<N>(x, weights, top / range, lo, 0, top), best.scale, lo);

    for (int k = 0; k <= steps; ++k) {
        const float inverse = (top + first_step + step_size * float(k)) / range;
        const GridSums g = grid_sums<N>(x, weights, inverse, lo, 0, top);
        // Normal equations of min over (scale, m) of sum w (scale * q + m - x)^2.
        const float det = sum_w * g.wqq - g.wq * g.wq;
        if (det <= 0) continue;
        float scale = (sum_w * g.wqx - sum_wx * g.wq) / det;
        float min_value = (g.wqq * sum_wx - g.wq * g.wqx) / det;
        if (min_value > 0) {  // the format needs m <= 0: refit the scale alone with m = 0
            min_value = 0;
            scale = g.wqx / g.wqq;
        }
        if (!(scale > 0)) continue;
        const float error = error_of(g, scale, min_value);
        if (error < best_error) {
            best_error = error;
            best.scale = scale;
            best.offset = -min_value;
        }
    }
    return best;
}

// Symmetric fit of one Q6_K sub-block: x[i] ~= scale * q[i] with integer q in
// [-half_range, half_range - 1], minimizing sum x[i]^2 * (scale * q[i] - x[i])^2
// (errors on large weights matter most). The scale's sign is chosen so that the
// largest-magnitude value lands on the longer, negative end of the range.
// Candidate inverse scales around half_range / max are tried, each solved in
// closed form; the error is sum w x^2 - Swqx^2 / Swqq, so the largest
// Swqx^2 / Swqq wins.
template <int N>
inline float fit_symmetric(const float* x, int half_range) noexcept {
    float extreme = 0, extreme_abs = 0;
    for (int i = 0; i < N; ++i) {
        const float a = std::fabs(x[i]);
        if (a > extreme_abs) {
            extreme_abs = a;
            extreme = x[i];
        }
    }
    if (extreme_abs < kTinyGroupMax) return 0;
    float weights[N];
    for (int i = 0; i < N; ++i) weights[i] = x[i] * x[i];
    const float lowest = float(-half_range), highest = float(half_range - 1);
    float best_scale = 0, best_gain = -1;
    for (int k = 0; k <= 19; ++k) {
        // k = 0 is the plain grid; then offsets -0.9 .. +0.9 around it.
        const float offset = k == 0 ? 0.0f : 0.1f * float(k - 10);
        const float inverse = -(float(half_range) + offset) / extreme;
        const GridSums g = grid_sums<N>(x, weights, inverse, 0, lowest, highest);
        if (g.wqq <= 0) continue;
        const float gain = g.wqx * g.wqx / g.wqq;
        if (gain > best_gain) {
            best_gain = gain;
            best_scale = g.wqx / g.wqq;
        }
    }
    return best_scale;
}

// Squared error of one 32-weight sub-block quantized on the grid step * q - offset.
template <int kMaxQ>
inline float k4_grid_error(const float* x, float step, float offset) noexcept {
    float error[8] = {};
    const float inverse = step > 0 ? 1 / step : 0;
    for (int i = 0; i < 32; i += 8) {
        for (int lane = 0; lane < 8; ++lane) {
            const float q = nearest_level_f((x[i + lane] + offset) * inverse, 0, float(kMaxQ));
            const float diff = step * q - offset - x[i + lane];
            error[lane] += diff * diff;
        }
    }
    float total = 0;
    for (float e : error) total += e;
    return total;
}

template <int kMaxQ>
inline void refine_k4_codes(const float* x, float d, float dmin, uint8_t& scale_code,
                            uint8_t& offset_code) noexcept {
    int best_scale = scale_code, best_offset = offset_code;
    float best_error = k4_grid_error<kMaxQ>(x, d * float(scale_code), dmin * float(offset_code));
    for (int ds = -1; ds <= 1; ++ds) {
        for (int dm = -1; dm <= 1; ++dm) {
            const int sc = scale_code + ds, m = offset_code + dm;
            if ((ds == 0 && dm == 0) || sc < 0 || sc > 63 || m < 0 || m > 63) continue;
            const float error = k4_grid_error<kMaxQ>(x, d * float(sc), dmin * float(m));
            if (error < best_error) {
                best_error = error;
                best_scale = sc;
                best_offset = m;
            }
        }
    }
    scale_code = uint8_t(best_scale);
    offset_code = uint8_t(best_offset);
}

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

// True for the types quantize_row writes: Q4_K, Q5_K, Q6_K, Q8_0, F16, BF16, F32
// (and Q8_K, the activation format).
inline bool can_quantize(GGMLType type) noexcept {
    switch (type) {
        case GGMLType::F32:
        case GGMLType::F16:
        case GGMLType::BF16:
        case GGMLType::Q8_0:
        case GGMLType::Q4_K:
        case GGMLType::Q5_K:
        case GGMLType::Q6_K:
        case GGMLType::Q8_K:
            return true;
        default:
            return false;
    }
}

// Quantizes n floats (n a multiple of the type's block size) into row_bytes(type, n)
// bytes at dst. Throws smol::Error(unsupported) naming the type for other types.
inline void quantize_row(GGMLType type, const float* src, void* dst, size_t n,
                         QuantizeEffort effort = QuantizeEffort::standard) {
    if (!can_quantize(type))
        detail::fail(ErrorKind::unsupported,
                     "quantize_row: type " + type_name(type) + " is not supported");
    detail::require_block_multiple(type, n, "quantize_row");
    switch (type) {
        case GGMLType::F32:
            quantize_row_f32(src, static_cast<float*>(dst), n);
            break;
        case GGMLType::F16:
            quantize_row_f16(src, static_cast<uint16_t*>(dst), n);
            break;
        case GGMLType::BF16:
            quantize_row_bf16(src, static_cast<uint16_t*>(dst), n);
            break;
        case GGMLType::Q8_0:
            quantize_row_q8_0(src, static_cast<BlockQ8_0*>(dst), n);
            break;
        case GGMLType::Q4_K:
            quantize_row_q4_k(src, static_cast<BlockQ4K*>(dst), n, effort);
            break;
        case GGMLType::Q5_K:
            quantize_row_q5_k(src, static_cast<BlockQ5K*>(dst), n, effort);
            break;
        case GGMLType::Q6_K:
            quantize_row_q6_k(src, static_cast<BlockQ6K*>(dst), n);
            break;
        case GGMLType::Q8_K:
            quantize_row_q8_k(src, static_cast<BlockQ8K*>(dst), n);
            break;
        default:
            break;
    }
}

SMOL_NAMESPACE_END
