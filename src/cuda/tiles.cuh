// The tensor-core tiles of a prefill chunk: the per-thread code of the int8
// mat-mat (matmul_tiles.cu), written as __host__ __device__ functions like the
// block code (blocks.cuh), so the host emulation (test_hooks.cpp) runs the very
// same decoding, fragment loads and float epilogue on the CPU.
//
// A thread block multiplies a tile of kTileRows weight rows by kTileTokens
// tokens, kTileK weights (one 256-weight super-block; eight Q8_0 blocks) at a
// time:
//   1. decode: the rows' next kTileK weights become int8 codes in shared memory
//      (TileShared::w [row][k]) with one float scale per group of weights
//      (kGroup: 32, or 16 for Q6_K) and, for Q4_K / Q5_K, the group's "min"
//      term; the tokens' next 8 activation blocks are copied beside them
//      (TileShared::a [token][k], with each block's d and s = d * sum(q));
//   2. multiply: each of the 4 warps takes 32 rows x 32 tokens, 2 x 4 int8
//      mma tiles of 16 rows x 8 tokens, one group of k at a time; the group's
//      exact int32 sums (the integers the mat-vec's __dp4a chain computes) are
//      scaled into float accumulators:
//        acc[r][t] += (w_scale[g][r] * a_d[g][t]) * isum - w_min[g][r] * a_s[g][t].
// Each output's sum runs over the groups in order whatever the tile, the other
// tokens or rows, so a token's result is a function of its row and its
// activations alone (the rule batched steps rely on); it differs from the
// mat-vec's only in float rounding (its lanes add in another order), which is
// why a chunk takes one path for all its tokens (kernels.cuh: TokenRun).
#pragma once

#include <smol/detail/abi.hpp>

#include <cstddef>
#include <cstdint>

#include "blocks.cuh"

SMOL_NAMESPACE_BEGIN
namespace cuda_detail {

constexpr int kTileRows = 64, kTileTokens = 64, kTileK = 256, kTileThreads = 128;
constexpr int kTileBlocks = kTileK / kActBlock;  // activation blocks per k step (8)
// A row's 256 codes are 64 words; 4 more put row r + 1 four banks on, so the
// 8 rows x 4 words an mma fragment load touches hit 32 different banks.
constexpr int kTileWords = kTileK / 4 + 4;

// The scales are stored permuted (scale_slot, token_slot) so that the 4 rows
// and 8 tokens one lane's outputs need lie side by side: one 16-byte load per
// 4 (shared-memory traffic was the tiles' limit: ncu on an H200, 2026-11-30).
struct TileShared {
    int w[kTileRows][kTileWords];                       // weight codes, 4 per word, k ascending
    int a[kTileTokens][kTileWords];                     // activation codes
    alignas(16) float w_scale[kTileK / 16][kTileRows];  // [group][scale_slot(row)]
    alignas(16) float w_min[kTileBlocks][kTileRows];
    alignas(16) float a_d[kTileBlocks][kTileTokens];  // [block][token_slot(token)]
    alignas(16) float a_s[kTileBlocks][kTileTokens];
};
static_assert(sizeof(TileShared) <= 48 * 1024, "static shared memory limit");

// Row r = 32 w + 16 mi + 8 h + g of a warp's rows sits at 32 w + 4 g + 2 mi + h.
SMOL_HD int scale_slot(int row) {
    return (row & ~31) | ((row & 7) << 2) | ((row >> 3) & 3);
}
// Token t = 32 w + 8 ni + 2 q + h sits at 32 w + 8 q + 2 ni + h.
SMOL_HD int token_slot(int token) {
    return (token & ~31) | (((token & 7) >> 1) << 3) | (((token >> 3) & 3) << 1) | (token & 1);
}

// Stores of 4 and 8 words to 16-byte aligned shared memory, as wide stores.
SMOL_HD void store_words(int* dst, const int* src, int n) {
#if defined(__CUDA_ARCH__)
    for (int k = 0; k < n; k += 4)
        *reinterpret_cast<int4*>(dst + k) = make_int4(src[k], src[k + 1], src[k + 2], src[k + 3]);
#else
    for (int k = 0; k < n; ++k) dst[k] = src[k];
#endif
}

// ---- how a format's slice lands in the tile ----
// TileCodec<Format>: kSliceWeights weights per slice (Format::load), kGroup
// weights per scale, kHasMin whether groups carry a min term; store() writes
// slice `s` (of the kTileK / kSliceWeights in a k step) of row `row`.
template <class F>
struct TileCodec;

template <>
struct TileCodec<FormatQ4K> {
    static constexpr int kSliceWeights = 64, kGroup = 32;
    static constexpr bool kHasMin = true;
    SMOL_HD static void store(const FormatQ4K::Slice& u, int s, int row, TileShared& t) {
        int* dst = t.w[row] + 16 * s;  // sub-blocks 2s (low nibbles), 2s + 1 (high)
        store_words(dst, u.lo, 8);
        store_words(dst + 8, u.hi, 8);
        const int slot = scale_slot(row);
        t.w_scale[2 * s][slot] = u.d_scale_lo;
        t.w_scale[2 * s + 1][slot] = u.d_scale_hi;
        t.w_min[2 * s][slot] = u.dmin_min_lo;
        t.w_min[2 * s + 1][slot] = u.dmin_min_hi;
    }
};
template <>
struct TileCodec<FormatQ5K> : TileCodec<FormatQ4K> {};  // the same Slice

template <>
struct TileCodec<FormatQ6K> {
    static constexpr int kSliceWeights = 32, kGroup = 16;
    static constexpr bool kHasMin = false;
    SMOL_HD static void store(const FormatQ6K::Slice& u, int s, int row, TileShared& t) {
        store_words(t.w[row] + 8 * s, u.q, 8);
        t.w_scale[2 * s][scale_slot(row)] = u.d_scale_lo;
        t.w_scale[2 * s + 1][scale_slot(row)] = u.d_scale_hi;
    }
};

template <>
struct TileCodec<FormatQ8_0> {
    static constexpr int kSliceWeights = 32, kGroup = 32;
    static constexpr bool kHasMin = false;
    SMOL_HD static void store(const FormatQ8_0::Slice& u, int s, int row, TileShared& t) {
        store_words(t.w[row] + 8 * s, u.q, 8);
        t.w_scale[s][scale_slot(row)] = u.d;
    }
};

// Whether a format has tiles (the others keep the mat-vec for every chunk).
template <class F, class = void>
struct HasTiles {
    static constexpr bool value = false;
};
template <class F>
struct HasTiles<F, decltype(void(TileCodec<F>::kGroup))> {
    static constexpr bool value = true;
};

// ---- step 1: one k step's weights and activations into shared memory ----
// Thread `tid` of the block. rows: the tile's first row of the matrix (valid
// ones: rows_left); chunk: the k step (weights 256 chunk ..); act: the tile's
// first token's activation blocks (stride act_stride; valid tokens:
// tokens_left). Rows and tokens past the end get zero codes and scales.
template <class F>
SMOL_HD void tile_load(TileShared& t, int tid, const uint8_t* rows, size_t row_bytes, int rows_left,
                       int chunk, const ActBlock* act, int act_stride, int tokens_left) {
    using C = TileCodec<F>;
    constexpr int kPerRow = kTileK / C::kSliceWeights;
    for (int i = tid; i < kTileRows * kPerRow; i += kTileThreads) {
        const int row = i / kPerRow, s = i % kPerRow;
        if (row < rows_left) {
            C::store(F::load(rows + size_t(row) * row_bytes, chunk * kPerRow + s), s, row, t);
        } else {
            const int zeros[16] = {};
            store_words(t.w[row] + s * (C::kSliceWeights / 4), zeros, C::kSliceWeights / 4);
            for (int g = 0; g < C::kSliceWeights / C::kGroup; ++g) {
                t.w_scale[s * (C::kSliceWeights / C::kGroup) + g][scale_slot(row)] = 0.0f;
                if (C::kHasMin)
                    t.w_min[s * (C::kSliceWeights / C::kGroup) + g][scale_slot(row)] = 0.0f;
            }
        }
    }
    for (int i = tid; i < kTileTokens * kTileBlocks; i += kTileThreads) {
        const int token = i / kTileBlocks, b = i % kTileBlocks;
        int words[8] = {};
        float d = 0.0f, sum = 0.0f;
        if (token < tokens_left) {
            const ActBlock& block = act[size_t(token) * act_stride + chunk * kTileBlocks + b];
            load_8_words_a8(reinterpret_cast<const uint8_t*>(block.q), words);
            d = block.d;
            sum = block.s;
        }
        store_words(t.a[token] + 8 * b, words, 8);
        t.a_d[b][token_slot(token)] = d;
        t.a_s[b][token_slot(token)] = sum;
    }
}

// ---- step 2: fragments, the mma, the epilogue ----
// The int8 mma of 16 rows x 8 tokens over kGroup k (mma.sync m16n8k32, or
// m16n8k16 for 16-weight groups). Lane l = 4 g + q holds (PTX ISA, "Matrix
// Fragments for mma.m16n8k32" with .s8):
//   A (16 x 32, row-major): word 0 row g, k 4q..4q+3; word 1 row g + 8, same k;
//     words 2, 3 the same rows at k 16 + 4q.. (m16n8k16: words 0, 1 only);
//   B (32 x 8): word 0 token g, k 4q..4q+3; word 1 token g, k 16 + 4q..;
//   C: c0, c1 row g, tokens 2q, 2q + 1; c2, c3 row g + 8, same tokens.
template <int kGroup>
struct TileMma {
    static constexpr int kAWords = kGroup / 8, kBWords = kGroup / 16;
};

// Fragment words of group `group` for rows row0.. (A) and tokens token0.. (B).
template <int kGroup>
SMOL_HD void tile_fragment_a(const TileShared& t, int row0, int group, int lane, int* a) {
    const int g = lane / 4, q = lane % 4, word = group * (kGroup / 4) + q;
    a[0] = t.w[row0 + g][word];
    a[1] = t.w[row0 + g + 8][word];
    if (kGroup == 32) {
        a[2] = t.w[row0 + g][word + 4];
        a[3] = t.w[row0 + g + 8][word + 4];
    }
}
template <int kGroup>
SMOL_HD void tile_fragment_b(const TileShared& t, int token0, int group, int lane, int* b) {
    const int g = lane / 4, q = lane % 4, word = group * (kGroup / 4) + q;
    b[0] = t.a[token0 + g][word];
    if (kGroup == 32) b[1] = t.a[token0 + g][word + 4];
}

// An exact int -> float for |v| < 2^22 (every group sum here: at most
// 32 * 127 * 127): the integer added to the bits of 1.5 * 2^23, minus it. Two
// full-rate instructions instead of one quarter-rate conversion.
SMOL_HD float exact_int_to_float(int v) {
#if defined(__CUDA_ARCH__)
    return __int_as_float(0x4B400000 + v) - 12582912.0f;
#else
    return float(v);
#endif
}

// The scales one lane's outputs need for group `group`, read once per group
// (not once per output: shared-memory loads were the tiles' first limit, 2026-11-30
// on an H200): ws / wm for rows row0 + g and + 8 of each of the warp's row
// tiles, ad / as for tokens token0 + 2q and + 1 of each token tile.
template <int kGroup, bool kHasMin>
SMOL_HD void tile_scales(const TileShared& t, int row0, int token0, int group, int lane,
                         float (*ws)[2], float (*wm)[2], float (*ad)[2], float (*as)[2]) {
    const int g = lane / 4, q = lane % 4, block = group * kGroup / kActBlock;
    // The lane's 4 rows at scale_slot(row0 + g) on, its 8 tokens at token_slot(token0 + 2q) on.
    float w4[4], m4[4] = {}, d8[8], s8[8] = {};
    const float* ws_at = &t.w_scale[group][scale_slot(row0 + g)];
    const float* wm_at = &t.w_min[kHasMin ? group : 0][scale_slot(row0 + g)];
    const float* ad_at = &t.a_d[block][token_slot(token0 + 2 * q)];
    const float* as_at = &t.a_s[block][token_slot(token0 + 2 * q)];
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<float4*>(w4) = *reinterpret_cast<const float4*>(ws_at);
    *reinterpret_cast<float4*>(d8) = *reinterpret_cast<const float4*>(ad_at);
    *reinterpret_cast<float4*>(d8 + 4) = *reinterpret_cast<const float4*>(ad_at + 4);
    if (kHasMin) {
        *reinterpret_cast<float4*>(m4) = *reinterpret_cast<const float4*>(wm_at);
        *reinterpret_cast<float4*>(s8) = *reinterpret_cast<const float4*>(as_at);
        *reinterpret_cast<float4*>(s8 + 4) = *reinterpret_cast<const float4*>(as_at + 4);
    }
#else
    for (int i = 0; i < 4; ++i) {
        w4[i] = ws_at[i];
        if (kHasMin) m4[i] = wm_at[i];
    }
    for (int i = 0; i < 8; ++i) {
        d8[i] = ad_at[i];
        if (kHasMin) s8[i] = as_at[i];
    }
#endif
    for (int mi = 0; mi < 2; ++mi)
        for (int h = 0; h < 2; ++h) {
            ws[mi][h] = w4[2 * mi + h];
            wm[mi][h] = m4[2 * mi + h];
        }
    for (int ni = 0; ni < 4; ++ni)
        for (int h = 0; h < 2; ++h) {
            ad[ni][h] = d8[2 * ni + h];
            as[ni][h] = s8[2 * ni + h];
        }
}

// acc (one mma's 4 outputs: rows g, g + 8 by j / 2, tokens 2q, 2q + 1 by j % 2)
// += the group's scaled sums c.
template <bool kHasMin>
SMOL_HD void tile_epilogue(const float* ws, const float* wm, const float* ad, const float* as,
                           const int* c, float* acc) {
    for (int j = 0; j < 4; ++j) {
        const float scale = ws[j / 2] * ad[j % 2];
        acc[j] = fmaf(scale, exact_int_to_float(c[j]), acc[j]);
        if (kHasMin) acc[j] = fmaf(-wm[j / 2], as[j % 2], acc[j]);
    }
}

// Split-K: a matrix whose row tiles would leave the GPU idle (v's 8, o's and
// down's 32 on a 2,048-wide model) splits its k steps over up to 8 blocks per
// tile, which write partial sums to scratch [split][token][row of the launch]
// that tile_reduce adds in split order. The count depends on the matrix's shape
// alone (never on the chunk's tokens), so a token's bits are the same in every
// chunk: the largest power of two up to 8 that keeps row tiles x splits within
// kSplitRowTiles and at least 2 k steps per split.
// split_row_tiles: the budget (kSplitRowTiles; SMOL_CUDA_SPLIT_TILES overrides
// it for tuning runs, 1 to kSplitRowTiles, 1 = no split; one value per process).
constexpr int kSplitRowTiles = 256, kMaxSplits = 8;
// Scratch floats per token any launch needs: splits x row tiles <= kSplitRowTiles.
constexpr int kSplitScratchPerToken = kSplitRowTiles * kTileRows;
int split_row_tiles();
SMOL_HD int tile_splits(int row_tiles, int chunks, int budget) {
    int splits = 1;
    while (splits < kMaxSplits && row_tiles * splits * 2 <= budget && chunks >= 4 * splits)
        splits *= 2;
    return splits;
}
// The k steps split `s` of `splits` takes: [first, end).
SMOL_HD void split_range(int chunks, int splits, int s, int& first, int& end) {
    const int per = (chunks + splits - 1) / splits;
    first = s * per < chunks ? s * per : chunks;
    end = first + per < chunks ? first + per : chunks;
}

// The warp's share of a block: warp w takes rows 32 (w / 2).. and tokens
// 32 (w % 2)..; acc[mi][ni][j]: mma tile (mi: 16 rows, ni: 8 tokens), output j.
constexpr int kWarpRowTiles = 2, kWarpTokenTiles = 4;
SMOL_HD int warp_row0(int warp) {
    return 32 * (warp / 2);
}
SMOL_HD int warp_token0(int warp) {
    return 32 * (warp % 2);
}

// The host's model of one warp-wide mma (the emulation: every lane's
// fragments in, every lane's c out), by the layout above.
template <int kGroup>
inline void emulate_mma(const int (*a)[4], const int (*b)[2], int (*c)[4]) {
    auto byte = [](int word, int i) { return int(int8_t(uint32_t(word) >> (8 * i))); };
    for (int lane = 0; lane < 32; ++lane)
        for (int j = 0; j < 4; ++j) c[lane][j] = 0;
    for (int row = 0; row < 16; ++row)
        for (int token = 0; token < 8; ++token) {
            int sum = 0;
            for (int k = 0; k < kGroup; ++k) {
                const int q = (k % 16) / 4, hi = k / 16;
                const int a_lane = 4 * (row % 8) + q, a_word = (row / 8) + 2 * hi;
                const int b_lane = 4 * token + q, b_word = hi;
                sum += byte(a[a_lane][a_word], k % 4) * byte(b[b_lane][b_word], k % 4);
            }
            const int lane = 4 * (row % 8) + token / 2, j = 2 * (row / 8) + token % 2;
            c[lane][j] = sum;
        }
}

}  // namespace cuda_detail
SMOL_NAMESPACE_END
