// The CUDA backend's device state, shared by its host files: the work
// buffers of a forward pass (Workspace), the uploaded model (ModelState) and
// one session's cache, stream and decode graph (CacheState). backend.cpp
// uploads and runs the forward pass; cache.cpp is the session side
// (CudaKVCache: save, restore, clone, rows, erase).
#pragma once

#include <smol/detail/abi.hpp>
#include <smol/cuda/backend.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "blocks.cuh"
#include "device.hpp"
#include "kernels.cuh"

SMOL_NAMESPACE_BEGIN
namespace cuda_detail {

// The longest chunk one forward step takes (the work buffers of a cache hold it).
inline constexpr size_t kMaxChunk = 512;

// The work buffers of one forward pass over up to `tokens` tokens of up to
// `seqs` sequences, and its inputs: staged in pinned host memory and moved to
// `input` in one copy per step. Shapes per token t of the step:
//   x [t][hidden] (the residual stream), q / attn [t][q_dim], k / v [t][kv_dim],
//   gate / up [t][ffn], act: int8 blocks of the widest of those rows;
//   partials: the tensor-core tiles' split-K sums (kSplitScratchPerToken
//   floats per token; none for a workspace of fewer tokens than a tiles run);
//   logits [logit_rows][vocab] (the LM head's rows, see rows below).
//   input: tokens i32 [tokens], slots TokenSlot [tokens], rows i32 [tokens]
//   (the steps' tokens whose logits are wanted), seqs SeqCache [seqs].
struct Workspace {
    size_t tokens = 0, seqs = 0, logit_rows = 0;
    DeviceBuffer x, q, k, v, attn, gate, up, act, partials, logits, input;
    void* staging = nullptr;
    size_t slots_at = 0, rows_at = 0, seqs_at = 0, input_bytes = 0;

    Workspace() = default;
    Workspace(const Workspace&) = delete;
    Workspace& operator=(const Workspace&) = delete;
    ~Workspace() {
        if (staging) cudaFreeHost(staging);
    }

    static size_t aligned(size_t bytes) { return (bytes + 15) / 16 * 16; }

    // (Re)allocates for n_tokens tokens of n_seqs sequences and n_logit_rows
    // rows of logits (the device current).
    void allocate(size_t hidden, size_t q_dim, size_t kv_dim, size_t ffn, size_t vocab,
                  size_t n_tokens, size_t n_seqs, size_t n_logit_rows) {
        if (staging) cudaFreeHost(staging);
        staging = nullptr;
        tokens = seqs = logit_rows = 0;
        x = DeviceBuffer(n_tokens * hidden * sizeof(float));
        q = DeviceBuffer(n_tokens * q_dim * sizeof(float));
        k = DeviceBuffer(n_tokens * kv_dim * sizeof(float));
        v = DeviceBuffer(n_tokens * kv_dim * sizeof(float));
        attn = DeviceBuffer(n_tokens * q_dim * sizeof(float));
        gate = DeviceBuffer(n_tokens * ffn * sizeof(float));
        up = DeviceBuffer(n_tokens * ffn * sizeof(float));
        act = DeviceBuffer(act_blocks(n_tokens, std::max({hidden, ffn, q_dim})) * sizeof(ActBlock));
        partials = DeviceBuffer(n_tokens >= size_t(tile_min_tokens())
                                    ? n_tokens * kSplitScratchPerToken * sizeof(float)
                                    : 0);
        logits = DeviceBuffer(n_logit_rows * vocab * sizeof(float));
        slots_at = aligned(n_tokens * sizeof(int32_t));
        rows_at = slots_at + aligned(n_tokens * sizeof(TokenSlot));
        seqs_at = rows_at + aligned(n_tokens * sizeof(int32_t));
        input_bytes = seqs_at + n_seqs * sizeof(SeqCache);
        input = DeviceBuffer(input_bytes);
        SMOL_CUDA_CHECK(cudaMallocHost(&staging, input_bytes));
        tokens = n_tokens;
        seqs = n_seqs;
        logit_rows = n_logit_rows;
    }

    int32_t* staged_tokens() const { return static_cast<int32_t*>(staging); }
    TokenSlot* staged_slots() const {
        return reinterpret_cast<TokenSlot*>(static_cast<uint8_t*>(staging) + slots_at);
    }
    int32_t* staged_rows() const {
        return reinterpret_cast<int32_t*>(static_cast<uint8_t*>(staging) + rows_at);
    }
    SeqCache* staged_seqs() const {
        return reinterpret_cast<SeqCache*>(static_cast<uint8_t*>(staging) + seqs_at);
    }
    const int32_t* device_tokens() const { return input.get<const int32_t>(); }
    const TokenSlot* device_slots() const {
        return reinterpret_cast<const TokenSlot*>(input.get<const uint8_t>() + slots_at);
    }
    const int* device_rows() const {
        return reinterpret_cast<const int*>(input.get<const uint8_t>() + rows_at);
    }
    const SeqCache* device_seqs() const {
        return reinterpret_cast<const SeqCache*>(input.get<const uint8_t>() + seqs_at);
    }
    // The staged inputs to the device, on `stream` (the staging buffer must stay
    // untouched until the stream has passed this copy).
    void upload(cudaStream_t stream) const {
        SMOL_CUDA_CHECK(
            cudaMemcpyAsync(input.get(), staging, input_bytes, cudaMemcpyHostToDevice, stream));
    }
};

struct ModelState;
// The matmul path of a step's tokens and of its logit rows, as runs
// (kernels.cuh: TokenRun); a step of one chunk passes none and gets one run
// each, by the chunk's own counts.
struct StepRuns {
    std::vector<TokenRun> tokens, logit_rows;
    // Appends `count` tokens (or rows) of one chunk to `runs`, merged with the
    // run before when they take the same path.
    static void add(std::vector<TokenRun>& runs, int count) {
        if (count <= 0) return;
        const int begin = runs.empty() ? 0 : runs.back().begin + runs.back().count;
        const TokenRun run = chunk_run(begin, count);
        if (!runs.empty() && runs.back().tiles == run.tiles)
            runs.back().count += count;
        else
            runs.push_back(run);
    }
};
void enqueue_forward(const ModelState& w, const Workspace& ws, size_t m, size_t n_logit_rows,
                     float* out_logits, cudaStream_t stream, const StepRuns* runs = nullptr);

struct ModelState {
    int device = 0;
    std::string device_name;
    std::string source;
    size_t n_layers = 0, hidden = 0, ffn = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
    size_t rope_pairs = 0, vocab_size = 0, context_length = 0;
    float rms_eps = 0;

    struct Layer {
        const float* attn_norm = nullptr;
        const float* ffn_norm = nullptr;
        DeviceMatrix q, k, v, o, gate, up, down;
        bool uses_rope = true;
        // The activation rule of each quantized input (kernels.cuh act_rule_for).
        ActRule qkv_in = ActRule::kquant, o_in = ActRule::kquant, gate_up_in = ActRule::kquant,
                down_in = ActRule::kquant;
    };
    ActRule lm_head_in = ActRule::kquant;
    DeviceMatrix token_embd, lm_head;
    const float* output_norm = nullptr;
    const double* inverse_frequency = nullptr;  // [rope_pairs] on the device
    std::vector<double> rope_frequency;         // [rope_pairs] on the host (erase's rotation)
    float rope_mscale = 1.0f;                   // YaRN's magnitude scale (model/rope.hpp)
    size_t nope_interval = 4;
    std::vector<Layer> layers;
    std::vector<DeviceBuffer> buffers;  // owns every allocation above
    size_t weight_bytes = 0;

    // Batched steps (several sequences in one pass, forward_step with more
    // than one chunk): one workspace and stream for the model, grown to the
    // largest step seen, used by one step at a time.
    struct Batch {
        std::mutex mutex;
        cudaStream_t stream = nullptr;
        Workspace ws;
        ~Batch() {
            if (stream) cudaStreamDestroy(stream);
        }
    };
    std::unique_ptr<Batch> batch = std::make_unique<Batch>();

    size_t q_dim() const { return n_heads * head_dim; }
    size_t kv_dim() const { return n_kv_heads * head_dim; }

    void allocate(Workspace& ws, size_t n_tokens, size_t n_seqs, size_t n_logit_rows) const {
        ws.allocate(hidden, q_dim(), kv_dim(), ffn, vocab_size, n_tokens, n_seqs, n_logit_rows);
    }

    ~ModelState() {
        const DeviceGuard guard(device, std::nothrow);
        batch.reset();
        buffers.clear();
    }

    const float* upload_floats(const float* data, size_t n) {
        buffers.push_back(upload_vector(data, n));
        weight_bytes += n * sizeof(float);
        return buffers.back().get<const float>();
    }

    DeviceMatrix upload_matrix(const WeightMatrix& m, bool for_matmul) {
        const std::string name = m.name.empty() ? std::string("<unnamed>") : std::string(m.name);
        const bool ok = for_matmul ? matmul_supports(m.type) : embed_supports(m.type);
        if (!ok)
            detail::fail(ErrorKind::unsupported,
                         "cuda: " + source + ": tensor '" + name + "' has type " +
                             type_name(m.type) +
                             "; the CUDA backend computes with Q4_K, Q5_K, Q6_K and Q8_0 matrices");
        if (m.data == nullptr && m.rows > 0)
            detail::fail(ErrorKind::invalid_argument,
                         "cuda: " + source + ": tensor '" + name + "' has no data");
        if (m.cols % kActBlock != 0)
            detail::fail(ErrorKind::shape, "cuda: " + source + ": tensor '" + name + "' has " +
                                               std::to_string(m.cols) +
                                               " columns (must be a multiple of 32)");
        if (m.row_bytes != row_bytes(m.type, m.cols))
            detail::fail(ErrorKind::shape,
                         "cuda: " + source + ": tensor '" + name + "' has rows of " +
                             std::to_string(m.row_bytes) + " bytes, but " + std::to_string(m.cols) +
                             " " + type_name(m.type) + " values take " +
                             std::to_string(row_bytes(m.type, m.cols)) +
                             " (the CUDA backend uploads unpadded, contiguous rows)");
        if (m.rows > size_t(1) << 30 || m.cols > size_t(1) << 30)
            detail::fail(ErrorKind::shape,
                         "cuda: " + source + ": tensor '" + name + "' is too large");
        buffers.emplace_back(m.rows * m.row_bytes);
        buffers.back().upload(m.data, m.rows * m.row_bytes);
        weight_bytes += m.rows * m.row_bytes;
        DeviceMatrix d;
        d.data = buffers.back().get<const uint8_t>();
        d.type = m.type;
        d.rows = int(m.rows);
        d.cols = int(m.cols);
        d.row_bytes = m.row_bytes;
        return d;
    }
};

struct CacheState {
    std::shared_ptr<ModelState> model;
    size_t n_ctx = 0, max_chunk = 0;  // the filled size is CudaKVCache's (BackendCache::size())
    cudaStream_t stream = nullptr;
    DeviceBuffer kv;  // F16 [layer][K, V][kv head][n_ctx][head_dim]
    Workspace ws;     // one sequence, max_chunk tokens, one row of logits (the decode graph's)
    DeviceBuffer all_logits;  // [rows][vocab], grown on demand (not used by the graph)
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t graph_exec = nullptr;
    bool graph_failed = false;  // capture or instantiation failed once: decode without a graph

    ~CacheState() {
        const DeviceGuard guard(model->device, std::nothrow);
        if (graph_exec) cudaGraphExecDestroy(graph_exec);
        if (graph) cudaGraphDestroy(graph);
        if (stream) cudaStreamDestroy(stream);
    }

    __half* cache_block(size_t layer, int kind) const {
        const ModelState& m = *model;
        return kv.get<__half>() + (layer * 2 + size_t(kind)) * m.n_kv_heads * n_ctx * m.head_dim;
    }
    SeqCache seq_cache() const { return SeqCache{kv.get<__half>(), static_cast<long long>(n_ctx)}; }

    // Captures one single-token decode step (enqueue_forward of 1 token into
    // ws.logits) as a graph and instantiates it. On any failure the stream
    // leaves capture mode, the partial graph is destroyed, the error state is
    // cleared and graph_failed is set, so later steps run the kernels directly
    // instead of retrying (and leaking) a capture each step; a real launch
    // problem then shows up on the direct path with its own message.
    bool capture_decode_graph() {
        if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
            cudaGetLastError();
            graph_failed = true;
            return false;
        }
        bool enqueued = true;
        try {
            enqueue_forward(*model, ws, 1, 1, ws.logits.get<float>(), stream);
        } catch (...) {
            enqueued = false;
        }
        cudaGraph_t captured = nullptr;
        const cudaError_t ended = cudaStreamEndCapture(stream, &captured);
        bool ok = enqueued && ended == cudaSuccess && captured != nullptr &&
                  cudaGetLastError() == cudaSuccess;
        if (ok && cudaGraphInstantiate(&graph_exec, captured, 0) != cudaSuccess) {
            graph_exec = nullptr;
            ok = false;
        }
        if (!ok) {
            if (captured) cudaGraphDestroy(captured);
            cudaGetLastError();
            graph_failed = true;
            return false;
        }
        graph = captured;
        return true;
    }
};

}  // namespace cuda_detail
SMOL_NAMESPACE_END
