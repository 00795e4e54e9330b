// AVX2 kernels: activation quantization (Q8_K32, Q8_0), the Q8_K32 permutation
// the K-quant kernels read (interleave_q8k32), and the integer tile kernels
// Q4_K/Q5_K/Q6_K x Q8_K32 and Q8_0 x Q8_0. Compiled only when dispatch.hpp
// selected AVX2 (-mavx2 -mfma -mf16c); the float kernels come from
// detail/float_simd.hpp (xsimd).
//
// The u8 x s8 products use _mm256_maddubs_epi16 (32 byte pairs -> 16 int16
// pair sums) and _mm256_madd_epi16 (int16 pairs -> int32, here also applying
// the sub-block scales). Nothing saturates or overflows: a maddubs pair sum is
// at most 2 * 63 * 127, the int16 sums of several maddubs results stay below
// 32,767 (bounds at each kernel), and Q8_0 uses |w| <= 128 against activations
// in [-127, 127] (the sign trick moves w's sign onto x). So every 32-value
// sub-block's integer sum equals the scalar reference exactly; only the float
// accumulation order differs (8 lanes, one per sub-block, summed once per row). The float
// operations are the same for every column count, so a token's result does not
// depend on how many tokens share the call.
//
// With AVX-512 VNNI (+VL) or AVX-VNNI in the flags (e.g. -march=native on Zen 4
// or Sapphire Rapids; dispatch.hpp defines SMOL_KERNELS_VNNI), the K-quant
// kernels use vpdpbusd (u8 x s8 sums of 4 into int32 in one instruction) and
// one int32 multiply by the scales: the same integer sums, fewer instructions.
//
// Tile layout (kernels::TileKernel): one weight row at a time against n_cols
// activation rows. A weight block is loaded and unpacked once, then multiplied
// with the matching block of every column, so prefill reads and unpacks
// weights once per n_cols tokens; per-column integer sums stay in registers
// within a block and float accumulators across blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../core/fp16.hpp"
#include "../quant/blocks.hpp"
#include "activations.hpp"
#include "detail/float_simd.hpp"
#include "dispatch.hpp"

#if defined(SMOL_KERNELS_AVX2)

// Fully unroll the short compile-time loops over rows/columns/chunks so that
// per-column accumulators live in registers (GCC at -O2 keeps them in memory).
#if defined(__clang__)
#define SMOL_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define SMOL_UNROLL _Pragma("GCC unroll 8")
#else
#define SMOL_UNROLL
#endif

namespace smol {
inline namespace SMOL_KERNEL_NS {
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

inline float half_to_float(uint16_t h) noexcept { return _cvtsh_ss(h); }

inline __m256i load256(const void* p) noexcept {
    return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// 32 int32 (four vectors of 8) -> 32 int8 in order (values already in [-127, 127]).
inline __m256i pack_32(__m256i a, __m256i b, __m256i c, __m256i d) noexcept {
    const __m256i ab = _mm256_packs_epi32(a, b);  // per 128-bit lane: a0-3 b0-3 | a4-7 b4-7
    const __m256i cd = _mm256_packs_epi32(c, d);
    const __m256i bytes = _mm256_packs_epi16(ab, cd);  // lanes: a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7
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
            __m128 m = _mm_max_ps(_mm256_castps256_ps128(max_abs_lanes), _mm256_extractf128_ps(max_abs_lanes, 1));
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
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(block.qs + 32 * s), pack_32(q[0], q[1], q[2], q[3]));
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
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(max_abs_lanes), _mm256_extractf128_ps(max_abs_lanes, 1));
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

#if defined(SMOL_KERNELS_VNNI)
namespace detail {
// acc + sums of 4 adjacent u8 x s8 products per int32 lane, in one instruction.
inline __m256i dot_u8_s8_accumulate(__m256i acc, __m256i u8, __m256i s8) noexcept {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(acc, u8, s8);
#else
    return _mm256_dpbusd_avx_epi32(acc, u8, s8);
#endif
}
}  // namespace detail
#endif

// ---- K-quant scale unpacking ---------------------------------------------------

// The 12 packed bytes of a Q4_K/Q5_K block -> 16 bytes: scale[0..7], min[0..7]
// (see kernels::detail::k4_scale_min for the bit layout). Reads 16 bytes: the
// 4 after the scales are the block's own qs/qh and are ignored.
inline __m128i unpack_k4_scales(const uint8_t* packed) noexcept {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));
    // Low bits: scale[0..3] = b[0..3] & 63, scale[4..7] = b[8..11] & 15,
    //           min[0..3] = b[4..7] & 63,   min[4..7] = b[8..11] >> 4.
    const __m128i low_source = _mm_shuffle_epi8(bytes, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i low_source_high_nibble = _mm_srli_epi16(low_source, 4);
    const __m128i low = _mm_and_si128(_mm_blend_epi16(low_source, low_source_high_nibble, 0xc0),
                                      _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15));
    // High bits 4-5 of scale[4..7] / min[4..7]: bits 6-7 of b[0..3] / b[4..7].
    const __m128i high_source = _mm_shuffle_epi8(bytes, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m128i high = _mm_and_si128(_mm_srli_epi16(high_source, 2), _mm_set1_epi8(0x30));
    return _mm_or_si128(low, high);
}

template <class Block>
inline const Block* block_row(const uint8_t* base, size_t row_bytes, size_t row) noexcept {
    return reinterpret_cast<const Block*>(base + row * row_bytes);
}

// ---- K-quant kernels (Q4_K, Q5_K, Q6_K x Q8_K32) ------------------------------------
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
    const __m256i s01_low = _mm256_unpacklo_epi32(s[0], s[1]);   // S0[0] S1[0] S0[1] S1[1] | [4] [5]
    const __m256i s01_high = _mm256_unpackhi_epi32(s[0], s[1]);  // S0[2] S1[2] S0[3] S1[3] | [6] [7]
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
inline void interleave_q8k32(const BlockQ8K32* natural, BlockQ8K32* interleaved, size_t n_blocks) noexcept {
    for (size_t b = 0; b < n_blocks; ++b) {
        std::memcpy(interleaved[b].d, natural[b].d, sizeof natural[b].d);
        std::memcpy(interleaved[b].bsums, natural[b].bsums, sizeof natural[b].bsums);
        for (int half = 0; half < 2; ++half) {
            __m256i s[4], t[4];
            for (int k = 0; k < 4; ++k) s[k] = load256(natural[b].qs + 128 * half + 32 * k);
            transpose_4x8(s, t);
            for (int v = 0; v < 4; ++v) {
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(interleaved[b].qs + 128 * half + 32 * v), t[v]);
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

// Q4_K / Q5_K against interleaved Q8_K32. Weights <= 31, so an int16 lane can sum
// 4 maddubs results (8 products of at most 31 * 127 = 31,496).
template <bool has_high_bit, class Block, int n_cols>
void tile_k4(const uint8_t* w, size_t w_row_bytes, size_t n_rows, const uint8_t* x, size_t x_row_bytes,
             size_t cols, float* y, size_t y_stride) {
    const size_t n_blocks = cols / QK_K;
    const __m256i low_nibble = _mm256_set1_epi8(0x0f);
    const __m256i bit0 = _mm256_set1_epi8(0x01);
#if !defined(SMOL_KERNELS_VNNI)
    // int16 scale per lane after the transposition: 32-bit element e of a vector
    // holds sub-block e (first half) or 4 + e (second half).
    const __m256i first_half_scales = _mm256_setr_epi8(0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7, 0, 1, 0, 1,
                                                       2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7);
    const __m256i second_half_scales = _mm256_setr_epi8(8, 9, 8, 9, 10, 11, 10, 11, 12, 13, 12, 13, 14, 15, 14, 15,
                                                        8, 9, 8, 9, 10, 11, 10, 11, 12, 13, 12, 13, 14, 15, 14, 15);
#endif
    const BlockQ8K32* xs[n_cols];
    SMOL_UNROLL
    for (int c = 0; c < n_cols; ++c) xs[c] = block_row<BlockQ8K32>(x, x_row_bytes, size_t(c));

    for (size_t r = 0; r < n_rows; ++r) {
        const Block* row = block_row<Block>(w, w_row_bytes, r);
        __m256 acc[n_cols];
        SMOL_UNROLL
        for (int c = 0; c < n_cols; ++c) acc[c] = _mm256_setzero_ps();
        for (size_t b = 0; b < n_blocks; ++b) {
            const Block& block = row[b];
            const __m128i scales_mins = unpack_k4_scales(block.scales);
#if !defined(SMOL_KERNELS_VNNI)
            const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scales_mins));
#endif
            const __m256i mins_paired = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(
                scales_mins, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15)));
            __m256i high_bits;
            if constexpr (has_high_bit) high_bits = load256(block.qh);
            __m256i sums[n_cols];  // per sub-block: scale[s] * (q . q8 over s)

            auto half = [&](auto half_index) {
                constexpr int h = decltype(half_index)::value;
                // Sub-blocks 4h .. 4h + 3: the two nibbles of chunks 2h and 2h + 1.
                __m256i s[4], t[4];
                SMOL_UNROLL
                for (int k = 0; k < 2; ++k) {
                    constexpr int first_chunk = 2 * h;
                    const int j = first_chunk + k;
                    const __m256i packed = load256(block.qs + 32 * j);
                    s[2 * k] = _mm256_and_si256(packed, low_nibble);
                    s[2 * k + 1] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibble);
                    if constexpr (has_high_bit) {
                        s[2 * k] = _mm256_or_si256(
                            s[2 * k], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high_bits, 2 * j), bit0), 4));
                        s[2 * k + 1] = _mm256_or_si256(
                            s[2 * k + 1],
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high_bits, 2 * j + 1), bit0), 4));
                    }
                }
                transpose_4x8(s, t);
#if defined(SMOL_KERNELS_VNNI)
                // int32 element e sums sub-block 4h + e directly: one multiply by its scale.
                const __m256i lane_scales = _mm256_permutevar8x32_epi32(
                    _mm256_cvtepu8_epi32(scales_mins),
                    h == 0 ? _mm256_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3) : _mm256_setr_epi32(4, 5, 6, 7, 4, 5, 6, 7));
                SMOL_UNROLL
                for (int c = 0; c < n_cols; ++c) {
                    const int8_t* q8 = xs[c][b].qs + 128 * h;
                    __m256i dot32 = detail::dot_u8_s8_accumulate(_mm256_setzero_si256(), t[0], load256(q8));
                    dot32 = detail::dot_u8_s8_accumulate(dot32, t[1], load256(q8 + 32));
                    dot32 = detail::dot_u8_s8_accumulate(dot32, t[2], load256(q8 + 64));
                    dot32 = detail::dot_u8_s8_accumulate(dot32, t[3], load256(q8 + 96));
                    const __m256i scaled = _mm256_mullo_epi32(dot32, lane_scales);
                    if constexpr (h == 0) sums[c] = scaled;
                    else sums[c] = combine_halves(sums[c], scaled);
                }
#else
                const __m256i lane_scales = _mm256_shuffle_epi8(scales, h == 0 ? first_half_scales : second_half_scales);
                SMOL_UNROLL
                for (int c = 0; c < n_cols; ++c) {
                    const int8_t* q8 = xs[c][b].qs + 128 * h;
                    __m256i dot16 = _mm256_maddubs_epi16(t[0], load256(q8));
                    dot16 = _mm256_add_epi16(dot16, _mm256_maddubs_epi16(t[1], load256(q8 + 32)));
                    dot16 = _mm256_add_epi16(dot16, _mm256_maddubs_epi16(t[2], load256(q8 + 64)));
                    dot16 = _mm256_add_epi16(dot16, _mm256_maddubs_epi16(t[3], load256(q8 + 96)));
                    const __m256i scaled = _mm256_madd_epi16(dot16, lane_scales);
                    if constexpr (h == 0) sums[c] = scaled;
                    else sums[c] = combine_halves(sums[c], scaled);
                }
#endif
            };
            half(std::integral_constant<int, 0>{});
            half(std::integral_constant<int, 1>{});

            const __m256 d = _mm256_set1_ps(half_to_float(block.d));
            const __m256 dmin = _mm256_set1_ps(half_to_float(block.dmin));
            SMOL_UNROLL
            for (int c = 0; c < n_cols; ++c) {
                // Per sub-block s: min[s] * (sum of q8 over s), then
                // acc[s] += (d * x.d[s]) * sums[s] - (dmin * x.d[s]) * min_terms[s].
                const __m256i min_terms = _mm256_madd_epi16(load256(xs[c][b].bsums), mins_paired);
                const __m256 x_scales = _mm256_loadu_ps(xs[c][b].d);
                acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(d, x_scales), _mm256_cvtepi32_ps(sums[c]), acc[c]);
                acc[c] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, x_scales), _mm256_cvtepi32_ps(min_terms), acc[c]);
            }
        }
        SMOL_UNROLL
        for (int c = 0; c < n_cols; ++c) y[size_t(c) * y_stride + r] = horizontal_sum(acc[c]);
    }
}

// Q6_K against interleaved Q8_K32. Weights <= 63: an int16 lane sums 2 maddubs
// results (4 products, at most 4 * 63 * 127 = 32,004).
template <int n_cols>
void tile_q6k(const uint8_t* w, size_t w_row_bytes, size_t n_rows, const uint8_t* x, size_t x_row_bytes,
              size_t cols, float* y, size_t y_stride) {
    const size_t n_blocks = cols / QK_K;
    const __m256i low_nibble = _mm256_set1_epi8(0x0f);
    const __m256i bits01 = _mm256_set1_epi8(0x03), bits23 = _mm256_set1_epi8(0x0c);
    const __m256i bits45 = _mm256_set1_epi8(0x30), bits67 = _mm256_set1_epi8(char(0xc0));
#if !defined(SMOL_KERNELS_VNNI)
    // After the transposition, 32-bit element e of the low lane holds 16-group
    // 8h + 2e and of the high lane 8h + 2e + 1 (lanes hold scale[8h .. 8h + 7]).
    const __m256i group_scales = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 2, 3, 2, 3, 6,
                                                  7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15);
#endif
    const BlockQ8K32* xs[n_cols];
    SMOL_UNROLL
    for (int c = 0; c < n_cols; ++c) xs[c] = block_row<BlockQ8K32>(x, x_row_bytes, size_t(c));

    for (size_t r = 0; r < n_rows; ++r) {
        const BlockQ6K* row = block_row<BlockQ6K>(w, w_row_bytes, r);
        __m256 acc[n_cols];
        SMOL_UNROLL
        for (int c = 0; c < n_cols; ++c) acc[c] = _mm256_setzero_ps();
        for (size_t b = 0; b < n_blocks; ++b) {
            const BlockQ6K& block = row[b];
            const __m256i scales16 =
                _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block.scales)));
            __m256i sums[n_cols];  // per sub-block: sum_g scale[g] * (q . q8 over g), q in 0..63
            auto half = [&](auto half_index) {
                constexpr int h = decltype(half_index)::value;
#if defined(SMOL_KERNELS_VNNI)
                // int32 element e: group 8h + 2e (low lane), 8h + 2e + 1 (high lane).
                const __m256i lane_scales = _mm256_cvtepi8_epi32(_mm_shuffle_epi8(
                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.scales)),
                    _mm_setr_epi8(8 * h, 8 * h + 2, 8 * h + 4, 8 * h + 6, 8 * h + 1, 8 * h + 3, 8 * h + 5, 8 * h + 7, 0,
                                  0, 0, 0, 0, 0, 0, 0)));
#else
                const __m256i lane_scales = _mm256_shuffle_epi8(
                    h == 0 ? _mm256_permute2x128_si256(scales16, scales16, 0x00)
                           : _mm256_permute2x128_si256(scales16, scales16, 0x11),
                    group_scales);
#endif
                const __m256i high = load256(block.qh + 32 * h);
                const __m256i low0 = load256(block.ql + 64 * h);
                const __m256i low1 = load256(block.ql + 64 * h + 32);
                __m256i s[4], t[4];
                s[0] = _mm256_or_si256(_mm256_and_si256(low0, low_nibble),
                                       _mm256_slli_epi16(_mm256_and_si256(high, bits01), 4));
                s[1] = _mm256_or_si256(_mm256_and_si256(low1, low_nibble),
                                       _mm256_slli_epi16(_mm256_and_si256(high, bits23), 2));
                s[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(low0, 4), low_nibble),
                                       _mm256_and_si256(high, bits45));
                s[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(low1, 4), low_nibble),
                                       _mm256_srli_epi16(_mm256_and_si256(high, bits67), 2));
                transpose_4x8(s, t);
#if defined(SMOL_KERNELS_VNNI)
                SMOL_UNROLL
                for (int c = 0; c < n_cols; ++c) {
                    const int8_t* q8 = xs[c][b].qs + 128 * h;
                    __m256i dot32 = detail::dot_u8_s8_accumulate(_mm256_setzero_si256(), t[0], load256(q8));
                    dot32 = detail::dot_u8_s8_accumulate(dot32, t[1], load256(q8 + 32));
                    dot32 = detail::dot_u8_s8_accumulate(dot32, t[2], load256(q8 + 64));
                    dot32 = detail::dot_u8_s8_accumulate(dot32, t[3], load256(q8 + 96));
                    const __m256i scaled = _mm256_mullo_epi32(dot32, lane_scales);
                    if constexpr (h == 0) sums[c] = scaled;
                    else sums[c] = combine_halves(sums[c], scaled);
                }
#else
                SMOL_UNROLL
                for (int c = 0; c < n_cols; ++c) {
                    const int8_t* q8 = xs[c][b].qs + 128 * h;
                    const __m256i dot01 = _mm256_add_epi16(_mm256_maddubs_epi16(t[0], load256(q8)),
                                                           _mm256_maddubs_epi16(t[1], load256(q8 + 32)));
                    const __m256i dot23 = _mm256_add_epi16(_mm256_maddubs_epi16(t[2], load256(q8 + 64)),
                                                           _mm256_maddubs_epi16(t[3], load256(q8 + 96)));
                    const __m256i scaled =
                        _mm256_add_epi32(_mm256_madd_epi16(dot01, lane_scales), _mm256_madd_epi16(dot23, lane_scales));
                    if constexpr (h == 0) sums[c] = scaled;
                    else sums[c] = combine_halves(sums[c], scaled);
                }
#endif
            };
            half(std::integral_constant<int, 0>{});
            half(std::integral_constant<int, 1>{});
            const __m256 d = _mm256_set1_ps(half_to_float(block.d));
            SMOL_UNROLL
            for (int c = 0; c < n_cols; ++c) {
                // q - 32 instead of q: per sub-block, 32 * sum_g scale[g] * bsums[g] (its two 16-groups).
                const __m256i offsets = _mm256_slli_epi32(_mm256_madd_epi16(load256(xs[c][b].bsums), scales16), 5);
                const __m256i dots = _mm256_sub_epi32(sums[c], offsets);
                acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_loadu_ps(xs[c][b].d)), _mm256_cvtepi32_ps(dots), acc[c]);
            }
        }
        SMOL_UNROLL
        for (int c = 0; c < n_cols; ++c) y[size_t(c) * y_stride + r] = horizontal_sum(acc[c]);
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

// ---- Q8_0 x Q8_0 ----------------------------------------------------------------

template <int n_cols>
void tile_q8_0(const uint8_t* w, size_t w_row_bytes, size_t n_rows, const uint8_t* x, size_t x_row_bytes,
               size_t cols, float* y, size_t y_stride) {
    const size_t n_blocks = cols / QK8_0;
    const __m256i ones16 = _mm256_set1_epi16(1);
    const BlockQ8_0* xs[n_cols];
    SMOL_UNROLL
    for (int c = 0; c < n_cols; ++c) xs[c] = block_row<BlockQ8_0>(x, x_row_bytes, size_t(c));

    for (size_t r = 0; r < n_rows; ++r) {
        const BlockQ8_0* row = block_row<BlockQ8_0>(w, w_row_bytes, r);
        __m256 acc[n_cols];
        SMOL_UNROLL
        for (int c = 0; c < n_cols; ++c) acc[c] = _mm256_setzero_ps();
        for (size_t b = 0; b < n_blocks; ++b) {
            const __m256i weights = load256(row[b].qs);
            const __m256i magnitude = _mm256_sign_epi8(weights, weights);  // |w|, -128 -> 128 as u8
            const float d = half_to_float(row[b].d);
            SMOL_UNROLL
            for (int c = 0; c < n_cols; ++c) {
                const __m256i signed_x = _mm256_sign_epi8(load256(xs[c][b].qs), weights);
                const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, signed_x), ones16);
                acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d * half_to_float(xs[c][b].d)), _mm256_cvtepi32_ps(dot), acc[c]);
            }
        }
        SMOL_UNROLL
        for (int c = 0; c < n_cols; ++c) y[size_t(c) * y_stride + r] = horizontal_sum(acc[c]);
    }
}

}  // namespace avx2

namespace simd {
using avx2::tile_q4k;
using avx2::tile_q5k;
using avx2::tile_q6k;
using avx2::tile_q8_0;
}  // namespace simd

}  // namespace kernels
}  // namespace SMOL_KERNEL_NS
}  // namespace smol

#endif  // SMOL_KERNELS_AVX2
