// AVX2 kernels: activation quantization (Q8_K, Q8_0) and the integer tile
// kernels Q4_K/Q5_K/Q6_K x Q8_K and Q8_0 x Q8_0. Compiled only when
// dispatch.hpp selected AVX2 (-mavx2 -mfma -mf16c); the float kernels come
// from detail/float_simd.hpp (xsimd).
//
// The u8 x s8 products use _mm256_maddubs_epi16 (32 byte pairs -> 16 int16
// pair sums) and _mm256_madd_epi16 (int16 pairs -> int32, here also applying
// the sub-block scale). Neither saturates for these formats: the largest pair
// sum is 2 * 63 * 127 (6-bit weights) and Q8_0 uses |w| <= 128 against
// activations in [-127, 127] (the sign trick moves w's sign onto x). So every
// block's integer sum equals the scalar reference exactly; only the float
// accumulation order differs (8 lanes, summed once per row).
//
// Tile layout (kernels::TileKernel): one weight row at a time against n_cols
// activation rows. A weight block is loaded and unpacked once, then multiplied
// with the matching block of every column, so prefill reads weights once per
// n_cols tokens; per-column int32 sums stay in registers within a block and
// float accumulators across blocks (one horizontal sum per row and column).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../core/fp16.hpp"
#include "../quant/blocks.hpp"
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

inline void quantize_row_q8_k(const float* x, BlockQ8K* y, size_t n) noexcept {
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    const __m256i limit = _mm256_set1_epi32(127), neg_limit = _mm256_set1_epi32(-127);
    for (size_t b = 0; b < n / QK_K; ++b, x += QK_K) {
        __m256 max_abs_lanes = _mm256_setzero_ps();
        for (int i = 0; i < QK_K; i += 8) {
            max_abs_lanes = _mm256_max_ps(max_abs_lanes, _mm256_andnot_ps(sign_bit, _mm256_loadu_ps(x + i)));
        }
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(max_abs_lanes), _mm256_extractf128_ps(max_abs_lanes, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        const float max_abs = _mm_cvtss_f32(m);
        BlockQ8K& block = y[b];
        if (max_abs == 0.0f) {
            std::memset(&block, 0, sizeof block);
            continue;
        }
        // The first element of largest magnitude gives the sign, as in the reference.
        const __m256 max_abs_batch = _mm256_set1_ps(max_abs);
        float max_value = max_abs;
        for (int i = 0; i < QK_K; i += 8) {
            const int hits = _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_andnot_ps(sign_bit, _mm256_loadu_ps(x + i)), max_abs_batch, _CMP_EQ_OQ));
            if (hits) {
                max_value = x[i + __builtin_ctz(unsigned(hits))];
                break;
            }
        }
        const float inverse_scale = -127.0f / max_value;
        const __m256 scale = _mm256_set1_ps(inverse_scale);
        for (int i = 0; i < QK_K; i += 32) {
            __m256i q[4];
            SMOL_UNROLL
            for (int k = 0; k < 4; ++k) {
                q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(scale, _mm256_loadu_ps(x + i + 8 * k)));
                q[k] = _mm256_max_epi32(_mm256_min_epi32(q[k], limit), neg_limit);
            }
            block.bsums[i / 16] = int16_t(horizontal_sum_i32(_mm256_add_epi32(q[0], q[1])));
            block.bsums[i / 16 + 1] = int16_t(horizontal_sum_i32(_mm256_add_epi32(q[2], q[3])));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(block.qs + i), pack_32(q[0], q[1], q[2], q[3]));
        }
        block.d = 1.0f / inverse_scale;
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

// ---- K-quant scale unpacking ---------------------------------------------------

// The 12 packed bytes of a Q4_K/Q5_K block -> 16 bytes: scale[0..7], min[0..7]
// (see kernels::detail::k4_scale_min for the bit layout).
inline __m128i unpack_k4_scales(const uint8_t* packed) noexcept {
    uint32_t word[3];
    std::memcpy(word, packed, sizeof word);
    const uint32_t low6 = 0x3f3f3f3fu, low4 = 0x0f0f0f0fu, low2 = 0x03030303u;
    const uint32_t scales_0_3 = word[0] & low6;
    const uint32_t mins_0_3 = word[1] & low6;
    const uint32_t scales_4_7 = (word[2] & low4) | (((word[0] >> 6) & low2) << 4);
    const uint32_t mins_4_7 = ((word[2] >> 4) & low4) | (((word[1] >> 6) & low2) << 4);
    return _mm_setr_epi32(int(scales_0_3), int(scales_4_7), int(mins_0_3), int(mins_4_7));
}

// Broadcast int16 element k of each 128-bit lane to the whole lane.
template <int k>
inline __m256i broadcast_i16(__m256i v) noexcept {
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16(short((2 * k + 1) << 8 | (2 * k))));
}

// Low lane: int16 element k of the lane everywhere; high lane: element k + 1.
template <int k>
inline __m256i broadcast_i16_pair(__m256i v) noexcept {
    return _mm256_shuffle_epi8(
        v, _mm256_setr_epi8(2 * k, 2 * k + 1, 2 * k, 2 * k + 1, 2 * k, 2 * k + 1, 2 * k, 2 * k + 1, 2 * k,
                            2 * k + 1, 2 * k, 2 * k + 1, 2 * k, 2 * k + 1, 2 * k, 2 * k + 1, 2 * k + 2,
                            2 * k + 3, 2 * k + 2, 2 * k + 3, 2 * k + 2, 2 * k + 3, 2 * k + 2, 2 * k + 3,
                            2 * k + 2, 2 * k + 3, 2 * k + 2, 2 * k + 3, 2 * k + 2, 2 * k + 3, 2 * k + 2,
                            2 * k + 3));
}

inline __m256i dot_u8_s8(__m256i weights_u8, __m256i x_s8, __m256i scale_i16) noexcept {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(weights_u8, x_s8), scale_i16);
}

template <class Block>
inline const Block* block_row(const uint8_t* base, size_t row_bytes, size_t row) noexcept {
    return reinterpret_cast<const Block*>(base + row * row_bytes);
}

// ---- Q4_K / Q5_K x Q8_K ---------------------------------------------------------

// Shared by Q4_K and Q5_K: the weights differ only in the optional 5th bit.
// One call computes n_rows x n_cols dot products: each weight block is unpacked
// once for all columns, and each activation vector is loaded once for all rows.
template <bool has_high_bit, class Block, int n_rows, int n_cols>
inline void k4_rows(const Block* const* rows, const BlockQ8K* const* xs, size_t n_blocks, float* y,
                    size_t y_stride) {
    const __m256i low_nibble = _mm256_set1_epi8(0x0f);
    const __m256i bit0 = _mm256_set1_epi8(0x01);
    // The same float operations in the same order for every n_rows/n_cols, so
    // a token's result never depends on how many tokens share the call.
    __m256 acc[n_rows][n_cols];
    SMOL_UNROLL
    for (int i = 0; i < n_rows; ++i) {
        SMOL_UNROLL
        for (int c = 0; c < n_cols; ++c) acc[i][c] = _mm256_setzero_ps();
    }
    for (size_t b = 0; b < n_blocks; ++b) {
        __m256i scales[n_rows], mins_paired[n_rows], high_bits[n_rows];
        SMOL_UNROLL
        for (int i = 0; i < n_rows; ++i) {
            const Block& block = rows[i][b];
            const __m128i scales_mins = unpack_k4_scales(block.scales);
            // int16 scale[0..7] in both lanes; int16 (min0, min0, min1, min1, ..., min7, min7).
            scales[i] = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scales_mins));
            mins_paired[i] = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(
                scales_mins, _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15)));
            if constexpr (has_high_bit) high_bits[i] = load256(block.qh);
        }
        __m256i sums[n_rows][n_cols];
        SMOL_UNROLL
        for (int i = 0; i < n_rows; ++i) {
            SMOL_UNROLL
            for (int c = 0; c < n_cols; ++c) sums[i][c] = _mm256_setzero_si256();
        }
        auto chunk = [&](auto chunk_index) {
            constexpr int j = decltype(chunk_index)::value;
            __m256i low[n_rows], high[n_rows], scale_low[n_rows], scale_high[n_rows];
            SMOL_UNROLL
            for (int i = 0; i < n_rows; ++i) {
                const __m256i packed = load256(rows[i][b].qs + 32 * j);
                low[i] = _mm256_and_si256(packed, low_nibble);
                high[i] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibble);
                if constexpr (has_high_bit) {
                    low[i] = _mm256_or_si256(
                        low[i], _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high_bits[i], 2 * j), bit0), 4));
                    high[i] = _mm256_or_si256(
                        high[i],
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high_bits[i], 2 * j + 1), bit0), 4));
                }
                scale_low[i] = broadcast_i16<2 * j>(scales[i]);
                scale_high[i] = broadcast_i16<2 * j + 1>(scales[i]);
            }
            SMOL_UNROLL
            for (int c = 0; c < n_cols; ++c) {
                const int8_t* q8 = xs[c][b].qs + 64 * j;
                const __m256i x_low = load256(q8), x_high = load256(q8 + 32);
                SMOL_UNROLL
                for (int i = 0; i < n_rows; ++i) {
                    sums[i][c] = _mm256_add_epi32(sums[i][c], dot_u8_s8(low[i], x_low, scale_low[i]));
                    sums[i][c] = _mm256_add_epi32(sums[i][c], dot_u8_s8(high[i], x_high, scale_high[i]));
                }
            }
        };
        chunk(std::integral_constant<int, 0>{});
        chunk(std::integral_constant<int, 1>{});
        chunk(std::integral_constant<int, 2>{});
        chunk(std::integral_constant<int, 3>{});

        SMOL_UNROLL
        for (int c = 0; c < n_cols; ++c) {
            const __m256i x_sums = load256(xs[c][b].bsums);
            const float dx = xs[c][b].d;
            SMOL_UNROLL
            for (int i = 0; i < n_rows; ++i) {
                const __m256i min_terms = _mm256_madd_epi16(x_sums, mins_paired[i]);
                const float d = half_to_float(rows[i][b].d) * dx;
                const float dmin = half_to_float(rows[i][b].dmin) * dx;
                acc[i][c] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sums[i][c]), acc[i][c]);
                acc[i][c] = _mm256_fnmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(min_terms), acc[i][c]);
            }
        }
    }
    SMOL_UNROLL
    for (int i = 0; i < n_rows; ++i) {
        SMOL_UNROLL
        for (int c = 0; c < n_cols; ++c) y[size_t(c) * y_stride + size_t(i)] = horizontal_sum(acc[i][c]);
    }
}

// Rows in groups of kRowGroup (one token: several rows share each activation
// load and their FMA chains overlap); several tokens: one row at a time.
template <bool has_high_bit, class Block, int n_cols>
inline void tile_k4(const uint8_t* w, size_t w_row_bytes, size_t n_rows, const uint8_t* x, size_t x_row_bytes,
                    size_t cols, float* y, size_t y_stride) {
    constexpr int kRowGroup = 1;
    const size_t n_blocks = cols / QK_K;
    const BlockQ8K* xs[n_cols];
    SMOL_UNROLL
    for (int c = 0; c < n_cols; ++c) xs[c] = block_row<BlockQ8K>(x, x_row_bytes, size_t(c));
    size_t r = 0;
    for (; r + kRowGroup <= n_rows; r += kRowGroup) {
        const Block* rows[kRowGroup];
        for (int i = 0; i < kRowGroup; ++i) rows[i] = block_row<Block>(w, w_row_bytes, r + size_t(i));
        k4_rows<has_high_bit, Block, kRowGroup, n_cols>(rows, xs, n_blocks, y + r, y_stride);
    }
    for (; r < n_rows; ++r) {
        const Block* rows[1] = {block_row<Block>(w, w_row_bytes, r)};
        k4_rows<has_high_bit, Block, 1, n_cols>(rows, xs, n_blocks, y + r, y_stride);
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

// sum (q - 32) * x = sum q * x - 32 * sum x: the unsigned 6-bit q goes through
// maddubs, and 32 * scale[g] * bsums[g] is subtracted once per block.
template <int n_cols>
void tile_q6k(const uint8_t* w, size_t w_row_bytes, size_t n_rows, const uint8_t* x, size_t x_row_bytes,
              size_t cols, float* y, size_t y_stride) {
    const size_t n_blocks = cols / QK_K;
    const __m256i low_nibble = _mm256_set1_epi8(0x0f);
    const __m256i bits01 = _mm256_set1_epi8(0x03), bits23 = _mm256_set1_epi8(0x0c);
    const __m256i bits45 = _mm256_set1_epi8(0x30), bits67 = _mm256_set1_epi8(char(0xc0));
    const BlockQ8K* xs[n_cols];
    SMOL_UNROLL
    for (int c = 0; c < n_cols; ++c) xs[c] = block_row<BlockQ8K>(x, x_row_bytes, size_t(c));

    for (size_t r = 0; r < n_rows; ++r) {
        const BlockQ6K* row = block_row<BlockQ6K>(w, w_row_bytes, r);
        __m256 acc[n_cols];
        SMOL_UNROLL
        for (int c = 0; c < n_cols; ++c) acc[c] = _mm256_setzero_ps();

        for (size_t b = 0; b < n_blocks; ++b) {
            const BlockQ6K& block = row[b];
            const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block.scales)));
            __m256i sums[n_cols];
            SMOL_UNROLL
            for (int c = 0; c < n_cols; ++c) {
                // 32 * sum_g scale[g] * bsums[g], as 8 int32 partial sums, subtracted up front.
                sums[c] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                           _mm256_slli_epi32(_mm256_madd_epi16(load256(xs[c][b].bsums), scales16), 5));
            }
            auto half = [&](auto half_index) {
                constexpr int h = decltype(half_index)::value;
                // scale[8h .. 8h + 7] as int16 in both lanes.
                const __m256i lane_scales = h == 0 ? _mm256_permute2x128_si256(scales16, scales16, 0x00)
                                                   : _mm256_permute2x128_si256(scales16, scales16, 0x11);
                const __m256i high = load256(block.qh + 32 * h);
                const __m256i low0 = load256(block.ql + 64 * h);
                const __m256i low1 = load256(block.ql + 64 * h + 32);
                __m256i q[4];
                q[0] = _mm256_or_si256(_mm256_and_si256(low0, low_nibble),
                                       _mm256_slli_epi16(_mm256_and_si256(high, bits01), 4));
                q[1] = _mm256_or_si256(_mm256_and_si256(low1, low_nibble),
                                       _mm256_slli_epi16(_mm256_and_si256(high, bits23), 2));
                q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(low0, 4), low_nibble),
                                       _mm256_and_si256(high, bits45));
                q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(low1, 4), low_nibble),
                                       _mm256_srli_epi16(_mm256_and_si256(high, bits67), 2));
                const __m256i scale[4] = {broadcast_i16_pair<0>(lane_scales), broadcast_i16_pair<2>(lane_scales),
                                          broadcast_i16_pair<4>(lane_scales), broadcast_i16_pair<6>(lane_scales)};
                SMOL_UNROLL
                for (int c = 0; c < n_cols; ++c) {
                    const int8_t* q8 = xs[c][b].qs + 128 * h;
                    SMOL_UNROLL
                    for (int k = 0; k < 4; ++k) {
                        sums[c] = _mm256_add_epi32(sums[c], dot_u8_s8(q[k], load256(q8 + 32 * k), scale[k]));
                    }
                }
            };
            half(std::integral_constant<int, 0>{});
            half(std::integral_constant<int, 1>{});

            const float d = half_to_float(block.d);
            SMOL_UNROLL
            for (int c = 0; c < n_cols; ++c) {
                acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d * xs[c][b].d), _mm256_cvtepi32_ps(sums[c]), acc[c]);
            }
        }
        SMOL_UNROLL
        for (int c = 0; c < n_cols; ++c) y[size_t(c) * y_stride + r] = horizontal_sum(acc[c]);
    }
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
