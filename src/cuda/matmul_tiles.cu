// The tensor-core mat-mat of a prefill chunk (int8 mma.sync over the weights
// as stored, decoded per k step into shared memory); the per-thread code and
// the tile's layout are in tiles.cuh, the contract in kernels.cuh
// (launch_matmul_tiles).
#include <smol/detail/abi.hpp>
#include "kernels.cuh"
#include "env.hpp"
#include "launch.cuh"
#include "tiles.cuh"

#include <cstdlib>

SMOL_NAMESPACE_BEGIN
namespace cuda_detail {

namespace {

struct TilePart {
    const uint8_t* weights;
    size_t row_bytes;
    int rows;
    int first_tile;  // the part's first row tile in the launch
    float* y;        // [n_tokens][rows]
    int accumulate;
};
struct TileGroup {
    TilePart part[kMaxMatmulParts];
    int count;
};

template <int kGroup>
__device__ __forceinline__ void mma_s8(const int* a, const int* b, int* c) {
    if constexpr (kGroup == 32) {
        asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7}, {%8, %9}, {%10, %10, %10, %10};"
            : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(0));
    } else {
        asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, "
            "{%4, %5}, {%6}, {%7, %7, %7, %7};"
            : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(0));
    }
}

// Grid: one block per (row tile, split, token tile), the token tiles of a row
// tile's split adjacent (a wave reads each weight tile from DRAM about once).
// splits > 1: the block writes its partial sums to scratch [split][token]
// [row_tiles * kTileRows] (tile_reduce adds them); else to the part's y.
template <class F>
__global__ void __launch_bounds__(kTileThreads)
    matmul_tiles_kernel(TileGroup group, int chunks, int splits, const ActBlock* act,
                        int act_stride, int n_tokens, int token_tiles, float* scratch,
                        int scratch_stride) {
    await_previous_kernel();
    using C = TileCodec<F>;
    constexpr int kGroups = kTileK / C::kGroup;
    __shared__ TileShared tile;
    const int token_tile = int(blockIdx.x) % token_tiles;
    const int split = (int(blockIdx.x) / token_tiles) % splits;
    const int row_tile = int(blockIdx.x) / token_tiles / splits;
    TilePart part = group.part[0];
    if (group.count > 1 && row_tile >= group.part[1].first_tile) part = group.part[1];
    if (group.count > 2 && row_tile >= group.part[2].first_tile) part = group.part[2];
    const int row_first = (row_tile - part.first_tile) * kTileRows;
    const int rows_left = part.rows - row_first;
    const int token_first = token_tile * kTileTokens;
    const int tokens_left = n_tokens - token_first;
    const uint8_t* rows = part.weights + size_t(row_first) * part.row_bytes;
    const ActBlock* tokens = act + size_t(token_first) * act_stride;
    int chunk_first, chunk_end;
    split_range(chunks, splits, split, chunk_first, chunk_end);

    const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32;
    const int row0 = warp_row0(warp), token0 = warp_token0(warp);
    float acc[kWarpRowTiles][kWarpTokenTiles][4];
#pragma unroll
    for (int mi = 0; mi < kWarpRowTiles; ++mi)
#pragma unroll
        for (int ni = 0; ni < kWarpTokenTiles; ++ni)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[mi][ni][j] = 0.0f;

    for (int chunk = chunk_first; chunk < chunk_end; ++chunk) {
        __syncthreads();  // the previous step's reads are done
        tile_load<F>(tile, tid, rows, part.row_bytes, rows_left, chunk, tokens, act_stride,
                     tokens_left);
        __syncthreads();
#pragma unroll 2
        for (int g = 0; g < kGroups; ++g) {
            int a[kWarpRowTiles][4], b[kWarpTokenTiles][2];
            float ws[kWarpRowTiles][2], wm[kWarpRowTiles][2], ad[kWarpTokenTiles][2],
                as[kWarpTokenTiles][2];
#pragma unroll
            for (int mi = 0; mi < kWarpRowTiles; ++mi)
                tile_fragment_a<C::kGroup>(tile, row0 + 16 * mi, g, lane, a[mi]);
#pragma unroll
            for (int ni = 0; ni < kWarpTokenTiles; ++ni)
                tile_fragment_b<C::kGroup>(tile, token0 + 8 * ni, g, lane, b[ni]);
            tile_scales<C::kGroup, C::kHasMin>(tile, row0, token0, g, lane, ws, wm, ad, as);
#pragma unroll
            for (int mi = 0; mi < kWarpRowTiles; ++mi)
#pragma unroll
                for (int ni = 0; ni < kWarpTokenTiles; ++ni) {
                    int c[4];
                    mma_s8<C::kGroup>(a[mi], b[ni], c);
                    tile_epilogue<C::kHasMin>(ws[mi], wm[mi], ad[ni], as[ni], c, acc[mi][ni]);
                }
        }
    }
    const int g = lane / 4, q = lane % 4;
#pragma unroll
    for (int mi = 0; mi < kWarpRowTiles; ++mi)
#pragma unroll
        for (int ni = 0; ni < kWarpTokenTiles; ++ni)
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int row = row0 + 16 * mi + g + 8 * (j / 2);
                const int token = token0 + 8 * ni + 2 * q + j % 2;
                if (row >= rows_left || token >= tokens_left) continue;
                if (splits > 1) {
                    scratch[(size_t(split) * n_tokens + token_first + token) * scratch_stride +
                            row_tile * kTileRows + row] = acc[mi][ni][j];
                    continue;
                }
                float* out = part.y + size_t(token_first + token) * part.rows + row_first + row;
                *out = part.accumulate ? *out + acc[mi][ni][j] : acc[mi][ni][j];
            }
}

// y[t][r] (+)= the splits' partial sums, added in split order; one thread per
// (token, row of the launch), padding rows of partial tiles skipped.
__global__ void tile_reduce_kernel(TileGroup group, int splits, int n_tokens, const float* scratch,
                                   int scratch_stride) {
    await_previous_kernel();
    const long long index = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (index >= (long long)n_tokens * scratch_stride) return;
    const int token = int(index / scratch_stride), launch_row = int(index % scratch_stride);
    const int row_tile = launch_row / kTileRows;
    TilePart part = group.part[0];
    if (group.count > 1 && row_tile >= group.part[1].first_tile) part = group.part[1];
    if (group.count > 2 && row_tile >= group.part[2].first_tile) part = group.part[2];
    const int row = launch_row - part.first_tile * kTileRows;
    if (row >= part.rows) return;
    float total = scratch[size_t(token) * scratch_stride + launch_row];
    for (int s = 1; s < splits; ++s)
        total += scratch[(size_t(s) * n_tokens + token) * scratch_stride + launch_row];
    float* out = part.y + size_t(token) * part.rows + row;
    *out = part.accumulate ? *out + total : total;
}

}  // namespace

int split_row_tiles() {
    static const int value = env_int("SMOL_CUDA_SPLIT_TILES", kSplitRowTiles, 1, kSplitRowTiles);
    return value;
}

bool tiles_support(GGMLType type, int cols) {
    bool supported = false;
    visit_weight_type<Format>(type, [&](auto format) {
        using F = decltype(format);
        if constexpr (F::matmul) supported = HasTiles<typename F::type>::value;
    });
    return supported && cols % kTileK == 0;
}

void launch_matmul_tiles(const MatmulTarget* targets, int count, const ActBlock* act, int n_tokens,
                         float* scratch, cudaStream_t stream) {
    const DeviceMatrix& w = *targets[0].w;
    TileGroup group{};
    int row_tiles = 0;
    for (int i = 0; i < count; ++i) {
        const DeviceMatrix& m = *targets[i].w;
        group.part[i] = TilePart{m.data,    m.row_bytes,  m.rows,
                                 row_tiles, targets[i].y, targets[i].accumulate ? 1 : 0};
        row_tiles += (m.rows + kTileRows - 1) / kTileRows;
    }
    group.count = count;
    const int chunks = w.cols / kTileK;
    const int splits = tile_splits(row_tiles, chunks, split_row_tiles());
    const int scratch_stride = row_tiles * kTileRows;
    const int token_tiles = (n_tokens + kTileTokens - 1) / kTileTokens;
    const unsigned blocks = unsigned(row_tiles) * unsigned(splits) * unsigned(token_tiles);
    visit_weight_type<Format>(w.type, [&](auto format) {
        using F = decltype(format);
        if constexpr (F::matmul) {
            if constexpr (HasTiles<typename F::type>::value)
                launch(matmul_tiles_kernel<typename F::type>, blocks, kTileThreads, stream, group,
                       chunks, splits, act, w.cols / kActBlock, n_tokens, token_tiles, scratch,
                       scratch_stride);
        }
    });
    if (splits > 1) {
        const long long outputs = (long long)n_tokens * scratch_stride;
        const int threads = 256;
        launch(tile_reduce_kernel, unsigned((outputs + threads - 1) / threads), threads, stream,
               group, splits, n_tokens, static_cast<const float*>(scratch), scratch_stride);
    }
}

}  // namespace cuda_detail
SMOL_NAMESPACE_END
