// The CUDA backend's test hooks and host emulation (src/cuda/test_hooks.hpp):
// single kernels run on host data on the default stream, and the kernels'
// per-slice block code run on the CPU. Only tests/test_cuda.cpp calls them.
#include <smol/detail/abi.hpp>
#include <smol/cuda/backend.hpp>
#include "test_hooks.hpp"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "blocks.cuh"
#include "device.hpp"
#include "kernels.cuh"
#include "tiles.cuh"

SMOL_NAMESPACE_BEGIN
// Test hooks: one kernel each on host data, on the default stream.

namespace cuda_detail {

namespace {

// The test hooks run on device 0 and leave the caller's current device as it was.
void require_any_device() {
    require_device(0);
}

}  // namespace

void run_matmul_group(GGMLType type, const void* const* weights, const size_t* rows, size_t count,
                      size_t cols, const float* x, size_t n_tokens, float* const* y,
                      const bool* accumulate) {
    require_any_device();
    const DeviceGuard device_guard(0);
    if (!matmul_supports(type))
        detail::fail(ErrorKind::unsupported, "cuda run_matmul_group: type " + type_name(type));
    if (count == 0 || count > size_t(kMaxMatmulParts))
        detail::fail(ErrorKind::invalid_argument,
                     "cuda run_matmul_group: " + std::to_string(count) + " matrices");
    std::vector<DeviceBuffer> w, out;
    std::vector<DeviceMatrix> m(count);
    std::vector<MatmulTarget> targets(count);
    for (size_t i = 0; i < count; ++i) {
        const size_t bytes = rows[i] * row_bytes(type, cols);
        w.emplace_back(bytes);
        w.back().upload(weights[i], bytes);
        out.push_back(upload_vector(y[i], n_tokens * rows[i]));  // accumulate reads it
        m[i].data = w.back().get<const uint8_t>();
        m[i].type = type;
        m[i].rows = int(rows[i]);
        m[i].cols = int(cols);
        m[i].row_bytes = row_bytes(type, cols);
        targets[i] = MatmulTarget{&m[i], out.back().get<float>(), accumulate[i]};
    }
    DeviceBuffer in = upload_vector(x, n_tokens * cols);
    DeviceBuffer act(act_blocks(n_tokens, cols) * sizeof(ActBlock));
    launch_quantize(in.get<float>(), int(n_tokens), int(cols), act.get<ActBlock>(),
                    act_rule_of(type), nullptr);
    // One chunk: one run, by its length (as a forward pass runs it).
    const TokenRun run = chunk_run(0, int(n_tokens));
    DeviceBuffer scratch(run.tiles ? n_tokens * kSplitScratchPerToken * sizeof(float) : 0);
    launch_matmuls(targets.data(), int(count), act.get<ActBlock>(), &run, 1, scratch.get<float>(),
                   nullptr);
    SMOL_CUDA_CHECK(cudaGetLastError());
    for (size_t i = 0; i < count; ++i) out[i].download(y[i], n_tokens * rows[i] * sizeof(float));
}

// One matrix: a group of one (launch_matmul is launch_matmuls of one target).
void run_matmul(GGMLType type, const void* weights, size_t rows, size_t cols, const float* x,
                size_t n_tokens, float* y) {
    const void* const matrices[] = {weights};
    const size_t row_counts[] = {rows};
    float* const outputs[] = {y};
    const bool accumulate[] = {false};
    run_matmul_group(type, matrices, row_counts, 1, cols, x, n_tokens, outputs, accumulate);
}

void run_embed(GGMLType type, const void* table, size_t rows, size_t cols, const int32_t* tokens,
               size_t n_tokens, float* out) {
    require_any_device();
    const DeviceGuard device_guard(0);
    if (!embed_supports(type))
        detail::fail(ErrorKind::unsupported, "cuda run_embed: type " + type_name(type));
    const size_t bytes = rows * row_bytes(type, cols);
    DeviceBuffer t(bytes), ids = upload_vector(tokens, n_tokens),
                           x(n_tokens * cols * sizeof(float));
    t.upload(table, bytes);
    DeviceMatrix m;
    m.data = t.get<const uint8_t>();
    m.type = type;
    m.rows = int(rows);
    m.cols = int(cols);
    m.row_bytes = row_bytes(type, cols);
    launch_embed(m, ids.get<const int32_t>(), int(n_tokens), x.get<float>(), nullptr);
    SMOL_CUDA_CHECK(cudaGetLastError());
    x.download(out, n_tokens * cols * sizeof(float));
}

void run_rmsnorm(const float* x, const float* weight, size_t n_tokens, size_t cols, float eps,
                 float* out, float* out_quantized) {
    require_any_device();
    const DeviceGuard device_guard(0);
    DeviceBuffer in = upload_vector(x, n_tokens * cols), w = upload_vector(weight, cols);
    DeviceBuffer result(n_tokens * cols * sizeof(float)), dq(n_tokens * cols * sizeof(float));
    DeviceBuffer act(act_blocks(n_tokens, cols) * sizeof(ActBlock));
    launch_rmsnorm_quantize(in.get<float>(), w.get<float>(), nullptr, int(n_tokens), int(cols), eps,
                            act.get<ActBlock>(), result.get<float>(), ActRule::kquant, nullptr);
    launch_dequantize_act(act.get<ActBlock>(), int(act_blocks(n_tokens, cols)), dq.get<float>(),
                          nullptr);
    SMOL_CUDA_CHECK(cudaGetLastError());
    result.download(out, n_tokens * cols * sizeof(float));
    dq.download(out_quantized, n_tokens * cols * sizeof(float));
}

void run_swiglu(const float* gate, const float* up, size_t n, float* out) {
    require_any_device();
    const DeviceGuard device_guard(0);
    DeviceBuffer g = upload_vector(gate, n), u = upload_vector(up, n), result(n * sizeof(float));
    DeviceBuffer act(act_blocks(1, n) * sizeof(ActBlock));
    launch_swiglu_quantize(g.get<float>(), u.get<float>(), 1, int(n), act.get<ActBlock>(),
                           result.get<float>(), ActRule::kquant, nullptr);
    SMOL_CUDA_CHECK(cudaGetLastError());
    result.download(out, n * sizeof(float));
}

namespace {

// The slots of one sequence's tokens at positions start.. and its cache table,
// on the device.
struct OneSequence {
    DeviceBuffer slots, seqs;
    OneSequence(size_t start, size_t n_tokens, __half* kv, size_t n_ctx) {
        std::vector<TokenSlot> host(n_tokens);
        for (size_t t = 0; t < n_tokens; ++t) host[t] = TokenSlot{int(start + t), 0};
        slots = upload_vector(host.data(), host.size());
        const SeqCache seq{kv, static_cast<long long>(n_ctx)};
        seqs = upload_vector(&seq, 1);
    }
};

}  // namespace

void run_rope(float* q, float* k, size_t n_tokens, size_t n_heads, size_t n_kv_heads,
              size_t head_dim, size_t rope_dims, float freq_base, size_t start_pos, bool use_rope) {
    require_any_device();
    const DeviceGuard device_guard(0);
    const size_t q_count = n_tokens * n_heads * head_dim,
                 k_count = n_tokens * n_kv_heads * head_dim;
    std::vector<double> inverse_frequency(std::max<size_t>(1, rope_dims / 2));
    for (size_t i = 0; i < rope_dims / 2; ++i)
        inverse_frequency[i] = std::pow(double(freq_base), -2.0 * double(i) / double(rope_dims));
    DeviceBuffer dq = upload_vector(q, q_count), dk = upload_vector(k, k_count);
    DeviceBuffer dv(k_count * sizeof(float)), k_out(k_count * sizeof(float));
    SMOL_CUDA_CHECK(cudaMemset(dv.get(), 0, dv.bytes()));
    DeviceBuffer freq = upload_vector(inverse_frequency.data(), inverse_frequency.size());
    // A one-layer cache of start_pos + n_tokens positions.
    const size_t n_ctx = start_pos + n_tokens;
    DeviceBuffer cache(2 * n_kv_heads * n_ctx * head_dim * sizeof(__half));
    const OneSequence sequence(start_pos, n_tokens, cache.get<__half>(), n_ctx);
    launch_rope_store(dq.get<float>(), dk.get<float>(), dv.get<float>(), int(n_tokens),
                      sequence.slots.get<TokenSlot>(), sequence.seqs.get<SeqCache>(), 0,
                      freq.get<double>(), int(rope_dims / 2), 1.0f, use_rope, int(n_heads),
                      int(n_kv_heads), int(head_dim), k_out.get<float>(), nullptr);
    SMOL_CUDA_CHECK(cudaGetLastError());
    dq.download(q, q_count * sizeof(float));
    k_out.download(k, k_count * sizeof(float));
}

void run_attention(const float* q, const float* keys, const float* values, size_t n_tokens,
                   size_t start_pos, size_t n_heads, size_t n_kv_heads, size_t head_dim,
                   float* out) {
    require_any_device();
    const DeviceGuard device_guard(0);
    if (!attention_supports(int(head_dim)))
        detail::fail(ErrorKind::unsupported,
                     "cuda run_attention: head dim " + std::to_string(head_dim));
    // A one-layer cache holding exactly the given positions: K heads, then V heads.
    const size_t positions = start_pos + n_tokens, per_kind = n_kv_heads * positions * head_dim;
    std::vector<uint16_t> kv16(2 * per_kind);
    for (size_t i = 0; i < per_kind; ++i) {
        kv16[i] = fp32_to_fp16(keys[i]);
        kv16[per_kind + i] = fp32_to_fp16(values[i]);
    }
    DeviceBuffer dq = upload_vector(q, n_tokens * n_heads * head_dim);
    DeviceBuffer cache = upload_vector(kv16.data(), kv16.size());
    const OneSequence sequence(start_pos, n_tokens, cache.get<__half>(), positions);
    DeviceBuffer result(n_tokens * n_heads * head_dim * sizeof(float));
    // One chunk: the tiles from tile_min_tokens() tokens on, as a forward pass.
    const TokenRun run = chunk_run(0, int(n_tokens));
    launch_attention_runs(dq.get<float>(), sequence.slots.get<TokenSlot>(),
                          sequence.seqs.get<SeqCache>(), 0, &run, 1, int(n_heads), int(n_kv_heads),
                          int(head_dim), result.get<float>(), nullptr);
    SMOL_CUDA_CHECK(cudaGetLastError());
    result.download(out, n_tokens * n_heads * head_dim * sizeof(float));
}

// ---------------------------------------------------------------------------
// Host emulation: the kernels' per-slice code on the CPU.

namespace {

template <class Format>
float emulate_dot_for(const uint8_t* row, size_t cols, const std::vector<ActBlock>& act) {
    const int slices = int(cols / Format::kBlockWeights) * Format::kSlices;
    // Lane l sums slices l, l + 32, ... (the 32-lanes-per-row kernel's split, up
    // to the order within a lane); then the lanes are added.
    float lanes[32] = {};
    for (int slice = 0; slice < slices; ++slice) {
        const typename Format::Slice u = Format::load(row, slice);
        lanes[slice % 32] += Format::dot(u, act.data());
    }
    float total = 0;
    for (float v : lanes) total += v;
    return total;
}

// One thread block of the tile kernel (matmul_tiles.cu) on the host, over k
// steps [chunk_first, chunk_end): its 128 threads' loads, then each warp's
// fragments, scales, the mma (emulate_mma, by the PTX layout) and epilogue,
// group by group; out[token][row] (stride out_stride) gets the sums.
template <class Format>
void emulate_tile_block(TileShared& tile, const uint8_t* rows, size_t row_bytes, int rows_left,
                        int chunk_first, int chunk_end, const ActBlock* act, int act_stride,
                        int tokens_left, float* out, int out_stride) {
    using C = TileCodec<Format>;
    constexpr int kGroups = kTileK / C::kGroup;
    float acc[4][32][kWarpRowTiles][kWarpTokenTiles][4] = {};
    for (int chunk = chunk_first; chunk < chunk_end; ++chunk) {
        for (int tid = 0; tid < kTileThreads; ++tid)
            tile_load<Format>(tile, tid, rows, row_bytes, rows_left, chunk, act, act_stride,
                              tokens_left);
        for (int warp = 0; warp < 4; ++warp)
            for (int g = 0; g < kGroups; ++g) {
                const int row0 = warp_row0(warp), token0 = warp_token0(warp);
                int a[kWarpRowTiles][32][4] = {}, b[kWarpTokenTiles][32][2] = {};
                float ws[32][kWarpRowTiles][2], wm[32][kWarpRowTiles][2],
                    ad[32][kWarpTokenTiles][2], as[32][kWarpTokenTiles][2];
                for (int lane = 0; lane < 32; ++lane) {
                    for (int mi = 0; mi < kWarpRowTiles; ++mi)
                        tile_fragment_a<C::kGroup>(tile, row0 + 16 * mi, g, lane, a[mi][lane]);
                    for (int ni = 0; ni < kWarpTokenTiles; ++ni)
                        tile_fragment_b<C::kGroup>(tile, token0 + 8 * ni, g, lane, b[ni][lane]);
                    tile_scales<C::kGroup, C::kHasMin>(tile, row0, token0, g, lane, ws[lane],
                                                       wm[lane], ad[lane], as[lane]);
                }
                for (int mi = 0; mi < kWarpRowTiles; ++mi)
                    for (int ni = 0; ni < kWarpTokenTiles; ++ni) {
                        int c[32][4];
                        emulate_mma<C::kGroup>(a[mi], b[ni], c);
                        for (int lane = 0; lane < 32; ++lane)
                            tile_epilogue<C::kHasMin>(ws[lane][mi], wm[lane][mi], ad[lane][ni],
                                                      as[lane][ni], c[lane],
                                                      acc[warp][lane][mi][ni]);
                    }
            }
    }
    for (int warp = 0; warp < 4; ++warp)
        for (int lane = 0; lane < 32; ++lane)
            for (int mi = 0; mi < kWarpRowTiles; ++mi)
                for (int ni = 0; ni < kWarpTokenTiles; ++ni)
                    for (int j = 0; j < 4; ++j) {
                        const int row = warp_row0(warp) + 16 * mi + lane / 4 + 8 * (j / 2);
                        const int token = warp_token0(warp) + 8 * ni + 2 * (lane % 4) + j % 2;
                        if (row < rows_left && token < tokens_left)
                            out[size_t(token) * out_stride + row] = acc[warp][lane][mi][ni][j];
                    }
}

template <class Format>
void emulate_dequantize_for(const uint8_t* row, size_t cols, float* out) {
    for (size_t i = 0; i < cols; ++i) out[i] = Format::element(row, i);
}

}  // namespace

float emulate_dot(GGMLType type, const void* row, size_t cols, const float* x) {
    if (!matmul_supports(type))
        detail::fail(ErrorKind::unsupported, "cuda emulate_dot: type " + type_name(type));
    if (cols % size_t(type_traits(type).block_size) != 0 || cols % kActBlock != 0)
        detail::fail(ErrorKind::invalid_argument,
                     "cuda emulate_dot: " + std::to_string(cols) + " columns");
    std::vector<ActBlock> act(cols / kActBlock);
    const ActRule rule = act_rule_of(type);
    for (size_t b = 0; b < act.size(); ++b)
        quantize_act_block_host(x + b * kActBlock, act[b], rule);
    const uint8_t* bytes = static_cast<const uint8_t*>(row);
    float result = 0;
    visit_weight_type<Format>(type, [&](auto format) {
        using F = decltype(format);
        if constexpr (F::matmul) result = emulate_dot_for<typename F::type>(bytes, cols, act);
    });
    return result;
}

void emulate_matmul_tiles(GGMLType type, const void* weights, size_t rows, size_t cols,
                          const float* x, size_t n_tokens, float* y) {
    if (!tiles_support(type, int(cols)))
        detail::fail(ErrorKind::unsupported, "cuda emulate_matmul_tiles: type " + type_name(type) +
                                                 ", " + std::to_string(cols) + " columns");
    const size_t stride = cols / kActBlock;
    std::vector<ActBlock> act(n_tokens * stride);
    const ActRule rule = act_rule_of(type);
    for (size_t b = 0; b < act.size(); ++b)
        quantize_act_block_host(x + b * kActBlock, act[b], rule);
    const uint8_t* bytes = static_cast<const uint8_t*>(weights);
    const size_t row_size = row_bytes(type, cols);
    const int chunks = int(cols / kTileK);
    const int splits =
        tile_splits(int((rows + kTileRows - 1) / kTileRows), chunks, split_row_tiles());
    auto tile = std::make_unique<TileShared>();
    // Split-K as the device runs it: each split's partial sums, then added in
    // split order (tile_reduce_kernel).
    std::vector<float> partial(splits > 1 ? n_tokens * rows : 0);
    visit_weight_type<Format>(type, [&](auto format) {
        using F = decltype(format);
        if constexpr (F::matmul) {
            if constexpr (HasTiles<typename F::type>::value)
                for (int s = 0; s < splits; ++s) {
                    int first, end;
                    split_range(chunks, splits, s, first, end);
                    float* out = s == 0 ? y : partial.data();
                    for (size_t r = 0; r < rows; r += kTileRows)
                        for (size_t t = 0; t < n_tokens; t += kTileTokens)
                            emulate_tile_block<typename F::type>(
                                *tile, bytes + r * row_size, row_size, int(rows - r), first, end,
                                act.data() + t * stride, int(stride), int(n_tokens - t),
                                out + t * rows + r, int(rows));
                    if (s > 0)
                        for (size_t i = 0; i < n_tokens * rows; ++i) y[i] += partial[i];
                }
        }
    });
}

void emulate_quantize_activations(GGMLType weight_type, const float* x, size_t n, int8_t* q,
                                  float* d) {
    const ActRule rule = act_rule_of(weight_type);
    for (size_t b = 0; b < n / kActBlock; ++b) {
        ActBlock block;
        quantize_act_block_host(x + b * kActBlock, block, rule);
        std::memcpy(q + b * kActBlock, block.q, kActBlock);
        d[b] = block.d;
    }
}

void emulate_dequantize_row(GGMLType type, const void* row, size_t cols, float* out) {
    const uint8_t* bytes = static_cast<const uint8_t*>(row);
    bool known = false;
    visit_weight_type<Format>(type, [&](auto format) {
        using F = decltype(format);
        if constexpr (F::embeds) {
            emulate_dequantize_for<typename F::type>(bytes, cols, out);
            known = true;
        }
    });
    if (!known)
        detail::fail(ErrorKind::unsupported,
                     "cuda emulate_dequantize_row: type " + type_name(type));
}

}  // namespace cuda_detail

void cuda_detail::emulate_shift_row(uint16_t* row, const float* cos, const float* sin,
                                    size_t pairs) {
    KeyShift shift;
    shift.pairs = int(pairs);
    for (size_t i = 0; i < pairs && i < size_t(kMaxShiftPairs); ++i) {
        shift.cos[i] = cos[i];
        shift.sin[i] = sin[i];
    }
    static_assert(sizeof(__half) == sizeof(uint16_t), "F16 rows");
    __half* h = reinterpret_cast<__half*>(row);
    for (int pair = 0; pair < shift.pairs; ++pair) shift_pair(h, pair, shift);
}

SMOL_NAMESPACE_END
