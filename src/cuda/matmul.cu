// The quantized mat-vec / mat-mat of the CUDA backend (int8 dot products,
// __dp4a, over the weight formats of blocks.cuh) and its launchers; contracts
// in kernels.cuh.
#include <smol/detail/abi.hpp>
#include "kernels.cuh"
#include "env.hpp"
#include "launch.cuh"

#include <climits>
#include <cstdlib>

SMOL_NAMESPACE_BEGIN
namespace cuda_detail {

namespace {

// ---------------------------------------------------------------------------
// Quantized mat-vec / mat-mat over up to kMaxMatmulParts matrices of one type
// and width that read the same activations (q, k, v; gate, up): one launch,
// their rows numbered one after another. A block of kMatmulThreads threads
// takes kMatmulThreads / LPR rows, LPR lanes per row; lane i of a row takes
// slices i, i + LPR, ... (blocks.cuh: consecutive lanes read consecutive
// bytes), two per iteration with both loads issued before either is used, and
// applies each slice to the NT tokens of its tile. A token's sum runs in the
// same order whatever the tile width or the other tokens of the step, so a
// batched step equals its parts alone bit for bit. Grid: one block per (row
// block, token tile), the tiles of one row block adjacent, so a prefill reads
// each weight byte from DRAM about once (then from L2).
constexpr int kMatmulThreads = 128;

struct MatmulPart {
    const uint8_t* weights;
    size_t row_bytes;
    int rows;
    float* y;  // [n_tokens][rows]
    int accumulate;
};
struct MatmulGroup {
    MatmulPart part[kMaxMatmulParts];
    int count;
};

template <class Format, int NT, int LPR>
__global__ void __launch_bounds__(kMatmulThreads)
    matmul_kernel(MatmulGroup group, int total_rows, int slices, const ActBlock* act,
                  int act_stride, int n_tokens, int token_tiles) {
    await_previous_kernel();
    constexpr int kRowsPerBlock = kMatmulThreads / LPR;
    const int token_tile = int(blockIdx.x) % token_tiles;
    const int row_block = int(blockIdx.x) / token_tiles;
    const int lane = int(threadIdx.x) % LPR;
    const int global_row = row_block * kRowsPerBlock + int(threadIdx.x) / LPR;
    // Which matrix the row is in (no dynamic index into the parameter struct).
    MatmulPart part = group.part[0];
    int row = global_row;
    if (group.count > 1 && row >= part.rows) {
        row -= part.rows;
        part = group.part[1];
        if (group.count > 2 && row >= part.rows) {
            row -= part.rows;
            part = group.part[2];
        }
    }
    const int token0 = token_tile * NT;
    const int count = min(NT, n_tokens - token0);
    const ActBlock* act0 = act + size_t(token0) * act_stride;
    float sum[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) sum[t] = 0.0f;
    if (global_row < total_rows) {
        const uint8_t* weight_row = part.weights + size_t(row) * part.row_bytes;
        int slice = lane;
        for (; slice + LPR < slices; slice += 2 * LPR) {
            const typename Format::Slice u0 = Format::load(weight_row, slice);
            const typename Format::Slice u1 = Format::load(weight_row, slice + LPR);
#pragma unroll
            for (int t = 0; t < NT; ++t)
                if (t < count)
                    sum[t] += Format::dot(u0, act0 + size_t(t) * act_stride) +
                              Format::dot(u1, act0 + size_t(t) * act_stride);
        }
        if (slice < slices) {
            const typename Format::Slice u = Format::load(weight_row, slice);
#pragma unroll
            for (int t = 0; t < NT; ++t)
                if (t < count) sum[t] += Format::dot(u, act0 + size_t(t) * act_stride);
        }
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) sum[t] = warp_sum(sum[t]);
    if (LPR >
        32) {  // the row's warps add up through shared memory (every thread reaches the barrier)
        constexpr int kWarps = kMatmulThreads / 32;
        __shared__ float partial[kWarps][NT];
        const int warp = int(threadIdx.x) / 32;
        if (threadIdx.x % 32 == 0)
#pragma unroll
            for (int t = 0; t < NT; ++t) partial[warp][t] = sum[t];
        __syncthreads();
        if (lane != 0) return;
#pragma unroll
        for (int t = 0; t < NT; ++t)
            for (int w = 1; w < LPR / 32; ++w) sum[t] += partial[warp + w][t];
    }
    if (lane == 0 && global_row < total_rows) {
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            if (t >= count) break;
            float* out = part.y + size_t(token0 + t) * part.rows + row;
            *out = part.accumulate ? *out + sum[t] : sum[t];
        }
    }
}

// Lanes per row for rows of `slices` slices: the fewest (32, 64 or 128) that
// leave each lane at most 4 slices, so short rows pack several rows into a
// block and long rows get four warps' loads in flight (4 measured best of
// 1, 2, 4 on an H200, 2026-11-28: RESULTS.md "GPU").
// SMOL_CUDA_SLICES_PER_LANE overrides it (1 to 16) for tuning runs; a
// process uses one value throughout, so results stay deterministic.
int slices_per_lane() {
    static const int value = env_int("SMOL_CUDA_SLICES_PER_LANE", 4, 1, 16);
    return value;
}
int lanes_per_row(int slices) {
    const int per_lane = slices_per_lane();
    for (int lanes : {32, 64})
        if (slices <= lanes * per_lane) return lanes;
    return 128;
}

template <class Format, int NT, int LPR>
void matmul_launch(const MatmulGroup& group, int total_rows, int slices, const ActBlock* act,
                   int act_stride, int n_tokens, cudaStream_t stream) {
    constexpr int kRowsPerBlock = kMatmulThreads / LPR;
    const int token_tiles = (n_tokens + NT - 1) / NT;
    const unsigned blocks =
        unsigned((total_rows + kRowsPerBlock - 1) / kRowsPerBlock) * unsigned(token_tiles);
    launch(matmul_kernel<Format, NT, LPR>, blocks, kMatmulThreads, stream, group, total_rows,
           slices, act, act_stride, n_tokens, token_tiles);
}

template <class Format, int NT>
void matmul_tile(const MatmulGroup& group, int total_rows, int cols, const ActBlock* act,
                 int n_tokens, cudaStream_t stream) {
    const int slices = (cols / Format::kBlockWeights) * Format::kSlices;
    const int act_stride = cols / kActBlock;
    switch (lanes_per_row(slices)) {
        case 32:
            return matmul_launch<Format, NT, 32>(group, total_rows, slices, act, act_stride,
                                                 n_tokens, stream);
        case 64:
            return matmul_launch<Format, NT, 64>(group, total_rows, slices, act, act_stride,
                                                 n_tokens, stream);
        default:
            return matmul_launch<Format, NT, 128>(group, total_rows, slices, act, act_stride,
                                                  n_tokens, stream);
    }
}

template <class Format>
void matmul_for(const MatmulGroup& group, int total_rows, int cols, const ActBlock* act,
                int n_tokens, cudaStream_t stream) {
    // Tiles of 1, 2, 4 or 8 tokens: a batched decode step of a few sequences
    // keeps its accumulators without the idle lanes of a wider tile.
    if (n_tokens == 1)
        matmul_tile<Format, 1>(group, total_rows, cols, act, n_tokens, stream);
    else if (n_tokens == 2)
        matmul_tile<Format, 2>(group, total_rows, cols, act, n_tokens, stream);
    else if (n_tokens <= 4)
        matmul_tile<Format, 4>(group, total_rows, cols, act, n_tokens, stream);
    else
        matmul_tile<Format, 8>(group, total_rows, cols, act, n_tokens, stream);
}

}  // namespace

bool matmul_supports(GGMLType type) {
    bool supported = false;
    visit_weight_type<Format>(type, [&](auto format) { supported = decltype(format)::matmul; });
    return supported;
}

int tile_min_tokens() {
    // SMOL_CUDA_TILE_MIN=0 (or less): never (the path before the tiles).
    static const int value = [] {
        const int parsed = env_int("SMOL_CUDA_TILE_MIN", 32, INT_MIN, INT_MAX);
        return parsed <= 0 ? 1 << 30 : parsed;
    }();
    return value;
}

void launch_matmuls(const MatmulTarget* targets, int count, const ActBlock* act,
                    const TokenRun* runs, int n_runs, float* scratch, cudaStream_t stream) {
    // Consecutive targets of one type and width (at most kMaxMatmulParts) share
    // a launch per run; other types are rejected at upload (matmul_supports).
    for (int first = 0; first < count;) {
        const DeviceMatrix& w = *targets[first].w;
        int n = 1;
        while (first + n < count && n < kMaxMatmulParts && targets[first + n].w->type == w.type &&
               targets[first + n].w->cols == w.cols)
            ++n;
        const int act_stride = w.cols / kActBlock;
        const bool tiles = tiles_support(w.type, w.cols);
        for (int r = 0; r < n_runs; ++r) {
            const TokenRun& run = runs[r];
            if (run.count <= 0) continue;
            MatmulTarget shifted[kMaxMatmulParts];
            for (int i = 0; i < n; ++i) {
                shifted[i] = targets[first + i];
                shifted[i].y += size_t(run.begin) * size_t(shifted[i].w->rows);
            }
            const ActBlock* run_act = act + size_t(run.begin) * act_stride;
            if (run.tiles && tiles) {
                launch_matmul_tiles(shifted, n, run_act, run.count, scratch, stream);
                continue;
            }
            MatmulGroup group{};
            int total_rows = 0;
            for (int i = 0; i < n; ++i) {
                const MatmulTarget& t = shifted[i];
                group.part[i] =
                    MatmulPart{t.w->data, t.w->row_bytes, t.w->rows, t.y, t.accumulate ? 1 : 0};
                total_rows += t.w->rows;
            }
            group.count = n;
            visit_weight_type<Format>(w.type, [&](auto format) {
                using F = decltype(format);
                if constexpr (F::matmul)
                    matmul_for<typename F::type>(group, total_rows, w.cols, run_act, run.count,
                                                 stream);
            });
        }
        first += n;
    }
}

}  // namespace cuda_detail
SMOL_NAMESPACE_END
