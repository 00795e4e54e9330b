// x86-64 kernels: the avx2, avxvnni and avx512 levels (kernels/cpu.hpp),
// compiled in every translation unit whatever its -m flags, each inside a
// target region so its intrinsics are legal there and nowhere else.
//
//   kernels::avx2     AVX2 + FMA + F16C: activation quantization, the Q8_K32
//                     permutation the K-quant tiles read (interleave_q8k32), the
//                     float ops (dot, rmsnorm, swiglu, softmax, RoPE, attention,
//                     F32/F16/BF16 tiles) and the integer tiles (detail/x86_tiles.inc).
//   kernels::avxvnni  the integer tiles again with AVX-VNNI's vpdpbusd (VEX);
//                     everything else is avx2's.
//   kernels::avx512   the integer tiles with AVX-512 VNNI (EVEX vpdpbusd): the
//                     K-quants at 512 bits with their own activation layout
//                     (detail/x86_avx512_tiles.inc), Q8_0 at 256; attention at
//                     512 bits (detail/x86_avx512_attention.inc); everything
//                     else is avx2's.
//
// A function defined in a target region may only be called where the CPU has
// that target; the dispatcher (kernels/dispatch.hpp) guarantees it by handing
// out a level's KernelSet only after cpu_supports(level). Helpers called from
// a region are defined inside it (or in a lesser one: avx2 helpers inline into
// avx512 code; never the reverse).
//
// Float results differ from the scalar reference only by summation order
// (several accumulators, then a horizontal sum) and, for swiglu and softmax,
// by exp_ps's ~2 ulp. xsimd is not used here: xsimd 8.1 picks its
// architecture from the unit's predefined macros, so in a unit built without
// -mavx2 it offers no AVX2 batch at all.
#pragma once

#include "../detail/abi.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../core/fp16.hpp"
#include "../quant/blocks.hpp"
#include "activations.hpp"
#include "kernel_set.hpp"

#if defined(SMOL_ARCH_X86_64) && (defined(__GNUC__) || defined(__clang__) || defined(_MSC_VER))
#define SMOL_HAS_X86_KERNELS 1
#include <immintrin.h>

// Target regions: GCC's push_options/target pragmas, Clang's attribute
// push, nothing for MSVC (which needs no flags for intrinsics).
#define SMOL_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define SMOL_TARGET_BEGIN(targets) \
    SMOL_PRAGMA(clang attribute push(__attribute__((target(targets))), apply_to = function))
#define SMOL_TARGET_END SMOL_PRAGMA(clang attribute pop)
#elif defined(__GNUC__)
#define SMOL_TARGET_BEGIN(targets) SMOL_PRAGMA(GCC push_options) SMOL_PRAGMA(GCC target(targets))
#define SMOL_TARGET_END SMOL_PRAGMA(GCC pop_options)
#else
#define SMOL_TARGET_BEGIN(targets)
#define SMOL_TARGET_END
#endif

// Fully unroll the short compile-time loops over rows/columns/chunks so that
// per-column accumulators live in registers (GCC at -O2 keeps them in memory).
#if defined(__clang__)
#define SMOL_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define SMOL_UNROLL _Pragma("GCC unroll 8")
#else
#define SMOL_UNROLL
#endif

SMOL_TARGET_BEGIN("avx2,fma,f16c,bmi,bmi2,popcnt")

SMOL_NAMESPACE_BEGIN
namespace kernels {
namespace avx2 {

inline float horizontal_sum(__m256 v) noexcept {
    __m128 sum = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
    sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
    return _mm_cvtss_f32(sum);
}

inline int horizontal_sum_i32(__m256i v) noexcept {
    __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0x4e));
    sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0xb1));
    return _mm_cvtsi128_si32(sum);
}

inline float half_to_float(uint16_t h) noexcept {
    return _cvtsh_ss(h);
}

inline __m256i load256(const void* p) noexcept {
    return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// 32 int32 (four vectors of 8) -> 32 int8 in order (values already in [-127, 127]).
inline __m256i pack_32(__m256i a, __m256i b, __m256i c, __m256i d) noexcept {
    const __m256i ab = _mm256_packs_epi32(a, b);  // per 128-bit lane: a0-3 b0-3 | a4-7 b4-7
    const __m256i cd = _mm256_packs_epi32(c, d);
    const __m256i bytes =
        _mm256_packs_epi16(ab, cd);  // lanes: a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7
    return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// ---- activation quantization (bit-identical to kernels::scalar) ----------------

inline void quantize_row_q8_k32(const float* x, BlockQ8K32* y, size_t n) noexcept {
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    const __m256i limit = _mm256_set1_epi32(127), neg_limit = _mm256_set1_epi32(-127);
    for (size_t b = 0; b < n / QK_K; ++b) {
        BlockQ8K32& block = y[b];
        for (int s = 0; s < QK_K / 32; ++s, x += 32) {
            __m256 v[4];
            __m256 max_abs_lanes = _mm256_setzero_ps();
            SMOL_UNROLL
            for (int k = 0; k < 4; ++k) {
                v[k] = _mm256_loadu_ps(x + 8 * k);
                max_abs_lanes = _mm256_max_ps(max_abs_lanes, _mm256_andnot_ps(sign_bit, v[k]));
            }
            __m128 m = _mm_max_ps(_mm256_castps256_ps128(max_abs_lanes),
                                  _mm256_extractf128_ps(max_abs_lanes, 1));
            m = _mm_max_ps(m, _mm_movehl_ps(m, m));
            m = _mm_max_ss(m, _mm_movehdup_ps(m));
            const float d = q8k32_scale(_mm_cvtss_f32(m));
            const float inverse_d = d != 0.0f ? 1.0f / d : 0.0f;
            block.d[s] = d;
            const __m256 scale = _mm256_set1_ps(inverse_d);
            __m256i q[4];
            SMOL_UNROLL
            for (int k = 0; k < 4; ++k) {
                q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], scale));  // round half to even
                q[k] = _mm256_max_epi32(_mm256_min_epi32(q[k], limit), neg_limit);
            }
            block.bsums[2 * s] = int16_t(horizontal_sum_i32(_mm256_add_epi32(q[0], q[1])));
            block.bsums[2 * s + 1] = int16_t(horizontal_sum_i32(_mm256_add_epi32(q[2], q[3])));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(block.qs + 32 * s),
                                pack_32(q[0], q[1], q[2], q[3]));
        }
    }
}

inline void quantize_row_q8_0(const float* x, BlockQ8_0* y, size_t n) noexcept {
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    const __m256i limit = _mm256_set1_epi32(127), neg_limit = _mm256_set1_epi32(-127);
    for (size_t b = 0; b < n / QK8_0; ++b, x += QK8_0) {
        __m256 v[4];
        __m256 max_abs_lanes = _mm256_setzero_ps();
        SMOL_UNROLL
        for (int k = 0; k < 4; ++k) {
            v[k] = _mm256_loadu_ps(x + 8 * k);
            max_abs_lanes = _mm256_max_ps(max_abs_lanes, _mm256_andnot_ps(sign_bit, v[k]));
        }
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(max_abs_lanes),
                              _mm256_extractf128_ps(max_abs_lanes, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        const float d = _mm_cvtss_f32(m) / 127.0f;
        const float inverse_d = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = fp32_to_fp16(d);
        const __m256 scale = _mm256_set1_ps(inverse_d);
        __m256i q[4];
        SMOL_UNROLL
        for (int k = 0; k < 4; ++k) {
            q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], scale));
            q[k] = _mm256_max_epi32(_mm256_min_epi32(q[k], limit), neg_limit);
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs), pack_32(q[0], q[1], q[2], q[3]));
    }
}

// ---- K-quant scale unpacking ---------------------------------------------------

// The 12 packed bytes of a Q4_K/Q5_K block -> 16 bytes: scale[0..7], min[0..7]
// (see smol::detail::unpack_scale_min_k4 in quant/blocks.hpp for the bit layout). Reads 16 bytes:
// the 4 after the scales are the block's own qs/qh and are ignored.
inline __m128i unpack_k4_scales(const uint8_t* packed) noexcept {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));
    // Low bits: scale[0..3] = b[0..3] & 63, scale[4..7] = b[8..11] & 15,
    //           min[0..3] = b[4..7] & 63,   min[4..7] = b[8..11] >> 4.
    const __m128i low_source =
        _mm_shuffle_epi8(bytes, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i low_source_high_nibble = _mm_srli_epi16(low_source, 4);
    const __m128i low = _mm_and_si128(
        _mm_blend_epi16(low_source, low_source_high_nibble, 0xc0),
        _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15));
    // High bits 4-5 of scale[4..7] / min[4..7]: bits 6-7 of b[0..3] / b[4..7].
    const __m128i high_source = _mm_shuffle_epi8(
        bytes, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m128i high = _mm_and_si128(_mm_srli_epi16(high_source, 2), _mm_set1_epi8(0x30));
    return _mm_or_si128(low, high);
}

template <class Block>
inline const Block* block_row(const uint8_t* base, size_t row_bytes, size_t row) noexcept {
    return reinterpret_cast<const Block*>(base + row * row_bytes);
}

// ---- K-quant layout ---------------------------------------------------------------
//
// Multiplying one 32-weight sub-block per vector needs one madd per vector to
// apply that sub-block's scale: per 256 weights and token, 8 maddubs + 8 madd +
// 8 add (measured 115 GOPS per core for Q4_K). The kernels below first transpose the weights in
// registers so that every vector holds 4 weights of each of 4 sub-blocks (one per
// 32-bit element): then int16 maddubs results of several vectors can be summed
// before a single madd applies all the scales (per-lane scale vector), giving
// 8 maddubs + 6 add16 + 2 madd + 1 add per block and token. The activations are
// permuted the same way once, when they are quantized (interleave_q8k32), so
// each weight still meets its own activation.
//
// After the transposition, int32 element e of each 128-bit lane of a half's
// sums belongs to sub-block 4h + e (h = 0 for weights 0-127, 1 for 128-255);
// combine_halves adds the two 128-bit lanes and puts the halves side by side,
// giving one int32 per sub-block in natural order. Then each sub-block gets
// its float scales (weight d times the activation's d[s]) in one FMA per 8
// sub-blocks: the float work is per 32 values, not per value.
//
// The transposition of 4 vectors S0..S3 (32 bytes each; Sk[d] = 4-byte group d):
//   T_v, v = 0..3: low 128-bit lane = S0[v] S1[v] S2[v] S3[v],
//                  high lane        = S0[v+4] S1[v+4] S2[v+4] S3[v+4].
inline void transpose_4x8(const __m256i s[4], __m256i t[4]) noexcept {
    const __m256i s01_low = _mm256_unpacklo_epi32(s[0], s[1]);  // S0[0] S1[0] S0[1] S1[1] | [4] [5]
    const __m256i s01_high =
        _mm256_unpackhi_epi32(s[0], s[1]);  // S0[2] S1[2] S0[3] S1[3] | [6] [7]
    const __m256i s23_low = _mm256_unpacklo_epi32(s[2], s[3]);
    const __m256i s23_high = _mm256_unpackhi_epi32(s[2], s[3]);
    t[0] = _mm256_unpacklo_epi64(s01_low, s23_low);
    t[1] = _mm256_unpackhi_epi64(s01_low, s23_low);
    t[2] = _mm256_unpacklo_epi64(s01_high, s23_high);
    t[3] = _mm256_unpackhi_epi64(s01_high, s23_high);
}

// Q8_K32 activations in the order the interleaved kernels read: the 8 natural
// 32-value sub-blocks, transposed four at a time like the weights (d and bsums
// unchanged). n_blocks blocks from `natural` to `interleaved`.
inline void interleave_q8k32(const BlockQ8K32* natural, BlockQ8K32* interleaved,
                             size_t n_blocks) noexcept {
    for (size_t b = 0; b < n_blocks; ++b) {
        std::memcpy(interleaved[b].d, natural[b].d, sizeof natural[b].d);
        std::memcpy(interleaved[b].bsums, natural[b].bsums, sizeof natural[b].bsums);
        for (int half = 0; half < 2; ++half) {
            __m256i s[4], t[4];
            for (int k = 0; k < 4; ++k) s[k] = load256(natural[b].qs + 128 * half + 32 * k);
            transpose_4x8(s, t);
            for (int v = 0; v < 4; ++v) {
                _mm256_storeu_si256(
                    reinterpret_cast<__m256i*>(interleaved[b].qs + 128 * half + 32 * v), t[v]);
            }
        }
    }
}

// first: sums of half 0 ([sub-blocks 0-3 | 0-3] partial sums), second: of half 1
// ([4-7 | 4-7]) -> one int32 per sub-block, [0-3 | 4-7].
inline __m256i combine_halves(__m256i first, __m256i second) noexcept {
    return _mm256_add_epi32(_mm256_permute2x128_si256(first, second, 0x20),
                            _mm256_permute2x128_si256(first, second, 0x31));
}

// ---- float kernels ----------------------------------------------------------------

// 8 weights of a float type at any byte address, widened to float.
template <GGMLType type>
inline __m256 load_widened(const uint8_t* p) noexcept {
    if constexpr (type == GGMLType::F32) {
        return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    } else if constexpr (type == GGMLType::F16) {
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    } else {  // BF16: the top half of a float
        const __m256i wide =
            _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
    }
}

// F32/F16/BF16 weight rows x F32 activation rows (see kernels::TileKernel).
template <GGMLType type, int n_cols>
void tile_float(const uint8_t* w, size_t w_row_bytes, size_t n_rows, const uint8_t* x,
                size_t x_row_bytes, size_t cols, float* y, size_t y_stride) {
    constexpr size_t element_bytes = type == GGMLType::F32 ? 4 : 2;
    const size_t vector_end = cols / 8 * 8;
    for (size_t r = 0; r < n_rows; ++r) {
        const uint8_t* row = w + r * w_row_bytes;
        __m256 acc[n_cols];
        SMOL_UNROLL
        for (int c = 0; c < n_cols; ++c) acc[c] = _mm256_setzero_ps();
        for (size_t i = 0; i < vector_end; i += 8) {
            const __m256 weights = load_widened<type>(row + i * element_bytes);
            SMOL_UNROLL
            for (int c = 0; c < n_cols; ++c) {
                const float* xc = reinterpret_cast<const float*>(x + size_t(c) * x_row_bytes);
                acc[c] = _mm256_fmadd_ps(weights, _mm256_loadu_ps(xc + i), acc[c]);
            }
        }
        for (int c = 0; c < n_cols; ++c) {
            const float* xc = reinterpret_cast<const float*>(x + size_t(c) * x_row_bytes);
            float sum = horizontal_sum(acc[c]);
            for (size_t i = vector_end; i < cols; ++i)
                sum = std::fma(scalar::widen_one<type>(row + i * element_bytes), xc[i], sum);
            y[size_t(c) * y_stride + r] = sum;
        }
    }
}

inline float dot_f32(const float* a, const float* b, size_t n) noexcept {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    float sum = horizontal_sum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; ++i) sum = std::fma(a[i], b[i], sum);
    return sum;
}

// Sum of squares in float lanes (the scalar reference sums in double; for the
// n of a hidden state the difference is ~1e-7 relative).
inline void rmsnorm(const float* x, const float* weight, float* out, size_t n, float eps) noexcept {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
        acc0 = _mm256_fmadd_ps(v0, v0, acc0);
        acc1 = _mm256_fmadd_ps(v1, v1, acc1);
    }
    double sum_squares = double(horizontal_sum(_mm256_add_ps(acc0, acc1)));
    for (; i < n; ++i) sum_squares += double(x[i]) * double(x[i]);
    const float mean = float(sum_squares / double(n ? n : 1));
    const float scale = 1.0f / std::sqrt(mean + eps);
    const __m256 scale8 = _mm256_set1_ps(scale);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), scale8),
                                                _mm256_loadu_ps(weight + i)));
    for (; i < n; ++i) out[i] = (x[i] * scale) * weight[i];
}

// e^x for 8 floats: x = n ln2 + r with |r| <= ln2 / 2, e^r by a degree-6
// polynomial (the Cephes expf coefficients), times 2^n built in the exponent
// bits. Inputs are clamped to [-87.3, 88.7], where the result stays a normal
// float; relative error ~2 ulp.
inline __m256 exp_ps(__m256 x) noexcept {
    x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.7f)), _mm256_set1_ps(-87.3f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r =
        _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);  // ln 2 split in two for accuracy
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i exponent =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(exponent));
}

inline void swiglu(const float* gate, const float* up, float* out, size_t n) noexcept {
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_loadu_ps(gate + i);
        const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, exp_ps(_mm256_xor_ps(g, sign))));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
    }
    for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

inline void softmax(float* x, size_t n) noexcept {
    if (n == 0) return;
    float max_value = x[0];
    size_t i = 0;
    if (n >= 8) {
        __m256 max_lanes = _mm256_loadu_ps(x);
        for (i = 8; i + 8 <= n; i += 8)
            max_lanes = _mm256_max_ps(max_lanes, _mm256_loadu_ps(x + i));
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, max_lanes);
        for (float v : lanes) max_value = std::fmax(max_value, v);
    }
    for (; i < n; ++i) max_value = std::fmax(max_value, x[i]);
    const __m256 max8 = _mm256_set1_ps(max_value);
    __m256 sum_lanes = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), max8));
        _mm256_storeu_ps(x + i, e);
        sum_lanes = _mm256_add_ps(sum_lanes, e);
    }
    double sum = double(horizontal_sum(sum_lanes));
    for (; i < n; ++i) {
        x[i] = std::exp(x[i] - max_value);
        sum += x[i];
    }
    const float inverse = float(1.0 / sum);
    const __m256 inverse8 = _mm256_set1_ps(inverse);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inverse8));
    for (; i < n; ++i) x[i] *= inverse;
}

// RoPE on adjacent pairs, 4 pairs (8 floats) per step: the even lanes get
// x0 cos - x1 sin, the odd ones x0 sin + x1 cos (fmaddsub of x * cos with the
// pair-swapped x * sin).
inline void rope(float* v, const float* cos, const float* sin, size_t pairs) noexcept {
    size_t i = 0;
    const __m256i duplicate = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    for (; i + 4 <= pairs; i += 4) {
        const __m256 c =
            _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(cos + i)), duplicate);
        const __m256 s =
            _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(sin + i)), duplicate);
        const __m256 x = _mm256_loadu_ps(v + 2 * i);
        const __m256 swapped = _mm256_permute_ps(x, 0xb1);  // x1 x0 per pair
        _mm256_storeu_ps(v + 2 * i, _mm256_fmaddsub_ps(x, c, _mm256_mul_ps(swapped, s)));
    }
    for (; i < pairs; ++i) {
        const float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * cos[i] - x1 * sin[i];
        v[2 * i + 1] = x0 * sin[i] + x1 * cos[i];
    }
}

// 8 cached elements (F16 or F32) at any byte address, as floats.
inline __m256 load_cache8(const uint8_t* p, bool f16) noexcept {
    return f16 ? _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))
               : _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}

namespace detail {

// Scores of n_heads (1-4) query heads of a group against one key row: the key
// is loaded and widened once per 8 values and feeds every head's accumulator.
// Per head the order is the spec's (one 8-lane accumulator, then sum_lanes).
template <int n_heads>
inline void score_heads(const AttentionHead& a, size_t first_head, size_t p,
                        const uint8_t* key) noexcept {
    const size_t hd = a.head_dim, vector_end = hd / 8 * 8, element = a.f16 ? 2 : 4;
    __m256 acc[n_heads];
    SMOL_UNROLL
    for (int h = 0; h < n_heads; ++h) acc[h] = _mm256_setzero_ps();
    for (size_t i = 0; i < vector_end; i += 8) {
        const __m256 k = load_cache8(key + i * element, a.f16);
        SMOL_UNROLL
        for (int h = 0; h < n_heads; ++h)
            acc[h] = _mm256_fmadd_ps(_mm256_loadu_ps(a.q + (first_head + size_t(h)) * hd + i), k,
                                     acc[h]);
    }
    SMOL_UNROLL
    for (int h = 0; h < n_heads; ++h) {
        const float* q = a.q + (first_head + size_t(h)) * hd;
        float dot = horizontal_sum(acc[h]);
        for (size_t i = vector_end; i < hd; ++i)
            dot = std::fma(q[i], scalar::cache_value(key, i, a.f16), dot);
        a.scores[(first_head + size_t(h)) * a.n_positions + p] = dot * a.scale;
    }
}

// out[h][i0 .. i0 + 8 * n_vectors) for n_heads (1-4) heads, summed over every
// position in the accumulators: each value element gets the spec's sequence of
// fused multiply-adds in position order, and the outputs stay in registers
// instead of being loaded and stored once per position.
template <int n_heads, int n_vectors>
inline void accumulate_values(const AttentionHead& a, size_t first_head, size_t i0) noexcept {
    const size_t element = a.f16 ? 2 : 4;
    __m256 acc[n_heads][n_vectors];
    SMOL_UNROLL
    for (int h = 0; h < n_heads; ++h) SMOL_UNROLL
    for (int k = 0; k < n_vectors; ++k) acc[h][k] = _mm256_setzero_ps();
    for (size_t p = 0; p < a.n_positions; ++p) {
        const uint8_t* value = a.values + p * a.row_bytes + i0 * element;
        __m256 v[n_vectors];
        SMOL_UNROLL
        for (int k = 0; k < n_vectors; ++k)
            v[k] = load_cache8(value + 8 * size_t(k) * element, a.f16);
        SMOL_UNROLL
        for (int h = 0; h < n_heads; ++h) {
            const __m256 weight =
                _mm256_set1_ps(a.scores[(first_head + size_t(h)) * a.n_positions + p]);
            SMOL_UNROLL
            for (int k = 0; k < n_vectors; ++k)
                acc[h][k] = _mm256_fmadd_ps(weight, v[k], acc[h][k]);
        }
    }
    SMOL_UNROLL
    for (int h = 0; h < n_heads; ++h) SMOL_UNROLL
    for (int k = 0; k < n_vectors; ++k)
        _mm256_storeu_ps(a.out + (first_head + size_t(h)) * a.head_dim + i0 + 8 * size_t(k),
                         acc[h][k]);
}

// Calls f(std::integral_constant<int, n>{}, first_head) for the heads of the
// group in blocks of up to four.
template <class F>
inline void for_head_blocks(size_t group, F&& f) {
    for (size_t first = 0; first < group; first += 4) {
        switch (group - first) {
            case 1:
                f(std::integral_constant<int, 1>{}, first);
                break;
            case 2:
                f(std::integral_constant<int, 2>{}, first);
                break;
            case 3:
                f(std::integral_constant<int, 3>{}, first);
                break;
            default:
                f(std::integral_constant<int, 4>{}, first);
                break;
        }
    }
}

}  // namespace detail

// See kernels::scalar::attend. The query heads of the group go in blocks of
// four: each key and value row is loaded once per block (once for the usual
// GQA group of 4), and the value sums stay in registers across positions.
inline void attend(const AttentionHead& a) noexcept {
    detail::for_head_blocks(a.group, [&](auto n_heads, size_t first) {
        for (size_t p = 0; p < a.n_positions; ++p)
            detail::score_heads<decltype(n_heads)::value>(a, first, p, a.keys + p * a.row_bytes);
    });
    for (size_t g = 0; g < a.group; ++g) softmax(a.scores + g * a.n_positions, a.n_positions);
    const size_t hd = a.head_dim, vector_end = hd / 8 * 8;
    detail::for_head_blocks(a.group, [&](auto n_heads, size_t first) {
        constexpr int n = decltype(n_heads)::value;
        size_t i = 0;
        for (; i + 32 <= vector_end; i += 32) detail::accumulate_values<n, 4>(a, first, i);
        for (; i < vector_end; i += 8) detail::accumulate_values<n, 1>(a, first, i);
    });
    for (size_t i = vector_end; i < hd; ++i) {  // head_dim % 8 leftovers, as the spec
        for (size_t g = 0; g < a.group; ++g) a.out[g * hd + i] = 0.0f;
        for (size_t p = 0; p < a.n_positions; ++p) {
            const float v = scalar::cache_value(a.values + p * a.row_bytes, i, a.f16);
            for (size_t g = 0; g < a.group; ++g)
                a.out[g * hd + i] = std::fma(a.scores[g * a.n_positions + p], v, a.out[g * hd + i]);
        }
    }
}

inline uint64_t sum_bytes(const uint8_t* begin, size_t n) noexcept {
    __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
    __m256i acc2 = _mm256_setzero_si256(), acc3 = _mm256_setzero_si256();
    for (const uint8_t* p = begin; p + 128 <= begin + n; p += 128) {
        acc0 = _mm256_add_epi64(acc0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
        acc1 = _mm256_add_epi64(acc1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32)));
        acc2 = _mm256_add_epi64(acc2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 64)));
        acc3 = _mm256_add_epi64(acc3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 96)));
    }
    const __m256i acc =
        _mm256_add_epi64(_mm256_add_epi64(acc0, acc1), _mm256_add_epi64(acc2, acc3));
    alignas(32) uint64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

}  // namespace avx2

#define SMOL_X86_TILES_NS avx2
#define SMOL_X86_TILES_VNNI 0
#include "detail/x86_tiles.inc"
#undef SMOL_X86_TILES_NS
#undef SMOL_X86_TILES_VNNI

}  // namespace kernels
SMOL_NAMESPACE_END
SMOL_TARGET_END

SMOL_TARGET_BEGIN("avx2,fma,f16c,bmi,bmi2,popcnt,avxvnni")
SMOL_NAMESPACE_BEGIN
namespace kernels {
#define SMOL_X86_TILES_NS avxvnni
#define SMOL_X86_TILES_VNNI 1
#include "detail/x86_tiles.inc"
#undef SMOL_X86_TILES_NS
#undef SMOL_X86_TILES_VNNI
}  // namespace kernels
SMOL_NAMESPACE_END
SMOL_TARGET_END

SMOL_TARGET_BEGIN("avx2,fma,f16c,bmi,bmi2,popcnt,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")
SMOL_NAMESPACE_BEGIN
namespace kernels {
#define SMOL_X86_TILES_NS avx512
#define SMOL_X86_TILES_VNNI 2
#include "detail/x86_tiles.inc"
#undef SMOL_X86_TILES_NS
#undef SMOL_X86_TILES_VNNI
#include "detail/x86_avx512_tiles.inc"
#include "detail/x86_avx512_attention.inc"
}  // namespace kernels
SMOL_NAMESPACE_END
SMOL_TARGET_END

SMOL_NAMESPACE_BEGIN
namespace kernels {
namespace detail {

// The x86 KernelSet of `level` (avx2, avxvnni or avx512): avx2's quantizers
// and float ops, the level's own integer tiles and the Q8_K32 layout they read.
template <template <GGMLType> class Tiles>
KernelSet make_x86_kernel_set(CpuLevel level, void (*layout_q8_k32)(const BlockQ8K32*, BlockQ8K32*,
                                                                    size_t)) noexcept {
    KernelSet set;
    set.level = level;
    set.quantize_q8_k32 = &avx2::quantize_row_q8_k32;
    set.quantize_q8_0 = &avx2::quantize_row_q8_0;
    set.layout_q8_k32 = layout_q8_k32;
    set_all_tiles<Tiles>(set);
    set.dot_f32 = &avx2::dot_f32;
    set.rmsnorm = &avx2::rmsnorm;
    set.swiglu = &avx2::swiglu;
    set.softmax = &avx2::softmax;
    set.rope = &avx2::rope;
    set.attend = &avx2::attend;
    set.sum_bytes = &avx2::sum_bytes;
    return set;
}

}  // namespace detail
}  // namespace kernels
SMOL_NAMESPACE_END

#endif  // x86-64
