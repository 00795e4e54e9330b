// Host side of smol's CUDA backend (compiled by the C++ compiler, not nvcc:
// cmake/smolCuda.cmake says why): device discovery, the weight upload
// (CudaBackend), the per-session device state (CudaKVCache: F16 cache, stream,
// work buffers, decode graph), the forward pass that strings the kernels of
// kernels.cu together, and the test hooks / host emulation declared in
// include/smol/cuda/backend.hpp.
//
// Forward, per chunk of m tokens (x: residual stream [m][hidden] on the device):
//   x = embed(tokens)
//   per layer: act = q8(rmsnorm(x) * attn_norm); q, k, v = W act; RoPE + store K/V;
//              attn = attention(q, cache); x += Wo q8(attn);
//              act = q8(rmsnorm(x) * ffn_norm); g, u = W act; x += Wdown q8(silu(g) * u)
//   logits = lm_head q8(rmsnorm(x) * output_norm) for the last (or every) position
// A single-token decode without all_logits runs as a CUDA graph captured on the
// first such call; the token and the position reach it through device memory.
#include <smol/detail/abi.hpp>
#include <smol/cuda/backend.hpp>
#include "test_hooks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include <smol/core/fp16.hpp>
#include <smol/model/smollm3.hpp>

#include "blocks.cuh"
#include "kernels.cuh"

SMOL_NAMESPACE_BEGIN
namespace cuda_detail {

namespace {

// cudaGetLastError() resets the thread's last-error state, which clears a
// non-sticky error (a bad launch configuration, an allocation failure) so the
// next call starts clean. It cannot clear a sticky one (an illegal address, a
// device-side trap): those leave the CUDA context unusable, every later call
// fails the same way, and only a new process can use the device again.
void check(cudaError_t status, const char* call, const char* file, int line) {
    if (status == cudaSuccess) return;
    cudaGetLastError();
    detail::fail(ErrorKind::internal, std::string("cuda: ") + call +
                                          " failed: " + cudaGetErrorString(status) + " (" + file +
                                          ":" + std::to_string(line) + ")");
}
#define SMOL_CUDA_CHECK(call) check((call), #call, __FILE__, __LINE__)

// Makes `device` current for the calling thread and gives the thread its
// previous device back on exit, so a program (or another library) that works
// on another device is never left on ours. The nothrow form is for
// destructors: failures there are ignored.
class DeviceGuard {
public:
    explicit DeviceGuard(int device) {
        if (cudaGetDevice(&previous_) != cudaSuccess) {
            cudaGetLastError();
            previous_ = -1;
        }
        if (previous_ != device) {
            SMOL_CUDA_CHECK(cudaSetDevice(device));
            restore_ = previous_ >= 0;
        }
    }
    DeviceGuard(int device, std::nothrow_t) noexcept {
        if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
        if (previous_ != device && cudaSetDevice(device) == cudaSuccess) restore_ = previous_ >= 0;
        cudaGetLastError();
    }
    ~DeviceGuard() {
        if (restore_) cudaSetDevice(previous_);
    }
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;

private:
    int previous_ = -1;
    bool restore_ = false;
};

// One device allocation, freed on destruction.
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
        if (bytes) SMOL_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
    }
    ~DeviceBuffer() {
        if (ptr_) cudaFree(ptr_);
    }
    DeviceBuffer(DeviceBuffer&& other) noexcept : ptr_(other.ptr_), bytes_(other.bytes_) {
        other.ptr_ = nullptr;
        other.bytes_ = 0;
    }
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
        std::swap(ptr_, other.ptr_);
        std::swap(bytes_, other.bytes_);
        return *this;
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    template <class T = void>
    T* get() const noexcept {
        return static_cast<T*>(ptr_);
    }
    size_t bytes() const noexcept { return bytes_; }

    void upload(const void* src, size_t bytes) {
        SMOL_CUDA_CHECK(cudaMemcpy(ptr_, src, bytes, cudaMemcpyHostToDevice));
    }
    void download(void* dst, size_t bytes) const {
        SMOL_CUDA_CHECK(cudaMemcpy(dst, ptr_, bytes, cudaMemcpyDeviceToHost));
    }

private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

template <class T>
DeviceBuffer upload_vector(const T* data, size_t count) {
    DeviceBuffer buffer(count * sizeof(T));
    buffer.upload(data, count * sizeof(T));
    return buffer;
}

int device_count(std::string* why) {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        cudaGetLastError();
        if (why)
            *why = std::string("no usable CUDA driver or device (cudaGetDeviceCount: ") +
                   cudaGetErrorString(status) + ")";
        return 0;
    }
    if (count == 0 && why) *why = "no CUDA device found";
    return count;
}

// The kernels use __dp4a and are built for compute capability 8.0 and 9.0 (with PTX).
constexpr int kMinComputeMajor = 8;

void require_device(int device) {
    std::string why;
    const int count = device_count(&why);
    if (count == 0) detail::fail(ErrorKind::unsupported, "cuda: " + why);
    if (device < 0 || device >= count)
        detail::fail(ErrorKind::invalid_argument, "cuda: device " + std::to_string(device) +
                                                      " does not exist (" + std::to_string(count) +
                                                      " found)");
    cudaDeviceProp prop{};
    SMOL_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    if (prop.major < kMinComputeMajor)
        detail::fail(ErrorKind::unsupported,
                     "cuda: device " + std::to_string(device) + " (" + prop.name +
                         ") has compute capability " + std::to_string(prop.major) + "." +
                         std::to_string(prop.minor) + "; smol::cuda needs 8.0 or newer");
}

// The longest chunk one forward step takes (the work buffers of a cache hold it).
constexpr size_t kMaxChunk = 512;

// The device's number of activation blocks for n_tokens rows of cols values.
size_t act_blocks(size_t n_tokens, size_t cols) {
    return n_tokens * (cols / kActBlock);
}

}  // namespace

// ---------------------------------------------------------------------------

// The work buffers of one forward pass over up to `tokens` tokens of up to
// `seqs` sequences, and its inputs: staged in pinned host memory and moved to
// `input` in one copy per step. Shapes per token t of the step:
//   x [t][hidden] (the residual stream), q / attn [t][q_dim], k / v [t][kv_dim],
//   gate / up [t][ffn], act: int8 blocks of the widest of those rows;
//   logits [logit_rows][vocab] (the LM head's rows, see rows below).
//   input: tokens i32 [tokens], slots TokenSlot [tokens], rows i32 [tokens]
//   (the steps' tokens whose logits are wanted), seqs SeqCache [seqs].
struct Workspace {
    size_t tokens = 0, seqs = 0, logit_rows = 0;
    DeviceBuffer x, q, k, v, attn, gate, up, act, logits, input;
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
void enqueue_forward(const ModelState& w, const Workspace& ws, size_t m, size_t n_logit_rows,
                     float* out_logits, cudaStream_t stream);

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

// Enqueues the whole forward pass of the m tokens staged in ws (already
// uploaded): ids, slots (position and sequence per token) and the sequences'
// caches. n_logit_rows 0: no LM head; else the logits of the tokens listed in
// ws's rows into out_logits [n_logit_rows][vocab].
void enqueue_forward(const ModelState& w, const Workspace& ws, size_t m, size_t n_logit_rows,
                     float* out_logits, cudaStream_t stream) {
    const int n = int(m), hidden = int(w.hidden), ffn = int(w.ffn);
    float* x = ws.x.get<float>();
    float* q = ws.q.get<float>();
    ActBlock* a = ws.act.get<ActBlock>();
    launch_embed(w.token_embd, ws.device_tokens(), n, x, stream);
    for (size_t li = 0; li < w.n_layers; ++li) {
        const ModelState::Layer& l = w.layers[li];
        launch_rmsnorm_quantize(x, l.attn_norm, nullptr, n, hidden, w.rms_eps, a, nullptr, l.qkv_in,
                                stream);
        const MatmulTarget qkv[] = {
            {&l.q, q, false}, {&l.k, ws.k.get<float>(), false}, {&l.v, ws.v.get<float>(), false}};
        launch_matmuls(qkv, 3, a, n, stream);
        launch_rope_store(q, ws.k.get<float>(), ws.v.get<float>(), n, ws.device_slots(),
                          ws.device_seqs(), int(li), w.inverse_frequency, int(w.rope_pairs),
                          w.rope_mscale, l.uses_rope, int(w.n_heads), int(w.n_kv_heads),
                          int(w.head_dim), nullptr, stream);
        launch_attention(q, ws.device_slots(), ws.device_seqs(), int(li), n, int(w.n_heads),
                         int(w.n_kv_heads), int(w.head_dim), ws.attn.get<float>(), stream);
        launch_quantize(ws.attn.get<float>(), n, int(w.q_dim()), a, l.o_in, stream);
        launch_matmul(l.o, a, n, x, true, stream);

        launch_rmsnorm_quantize(x, l.ffn_norm, nullptr, n, hidden, w.rms_eps, a, nullptr,
                                l.gate_up_in, stream);
        const MatmulTarget gate_up[] = {{&l.gate, ws.gate.get<float>(), false},
                                        {&l.up, ws.up.get<float>(), false}};
        launch_matmuls(gate_up, 2, a, n, stream);
        launch_swiglu_quantize(ws.gate.get<float>(), ws.up.get<float>(), n, ffn, a, nullptr,
                               l.down_in, stream);
        launch_matmul(l.down, a, n, x, true, stream);
    }
    if (n_logit_rows == 0) return;
    launch_rmsnorm_quantize(x, w.output_norm, ws.device_rows(), int(n_logit_rows), hidden,
                            w.rms_eps, a, nullptr, w.lm_head_in, stream);
    launch_matmul(w.lm_head, a, int(n_logit_rows), out_logits, false, stream);
}

}  // namespace cuda_detail

// ---------------------------------------------------------------------------

bool cuda_available(std::string* why) {
    const int count = cuda_detail::device_count(why);
    if (count == 0) return false;
    for (int device = 0; device < count; ++device) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, device) == cudaSuccess &&
            prop.major >= cuda_detail::kMinComputeMajor)
            return true;
    }
    cudaGetLastError();
    if (why) *why = "no CUDA device of compute capability 8.0 or newer";
    return false;
}

namespace {

// The factory's create: the upload's errors (thrown by the constructor, which
// runs in this exception-enabled library) as a value for the model layer.
Expected<std::unique_ptr<Backend>> create_cuda_backend(const SmolLM3& net, int device) {
    try {
        return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(net, device));
    } catch (const Error& e) {
        return ErrorInfo{e.kind(), e.what()};
    } catch (const std::bad_alloc&) {
        return ErrorInfo{ErrorKind::resource, "cuda: out of host memory while uploading"};
    }
}

bool cuda_backend_available(std::string* why) {
    return cuda_available(why);
}

}  // namespace

DeviceBackendFactory cuda_backend() {
    DeviceBackendFactory factory;
    factory.device = Device::cuda;
    factory.available = &cuda_backend_available;
    factory.create = &create_cuda_backend;
    return factory;
}

CudaBackend::CudaBackend(const cuda_detail::ModelUpload& up, int device) {
    using namespace cuda_detail;
    require_device(device);
    const DeviceGuard device_guard(device);
    auto state = std::make_shared<ModelState>();
    ModelState& s = *state;
    s.device = device;
    cudaDeviceProp prop{};
    SMOL_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    s.device_name = prop.name;
    s.source = up.source;
    s.n_layers = up.n_layers;
    s.hidden = up.hidden;
    s.ffn = up.ffn;
    s.n_heads = up.n_heads;
    s.n_kv_heads = up.n_kv_heads;
    s.head_dim = up.head_dim;
    s.rope_pairs = up.rope_dims / 2;
    s.vocab_size = up.vocab_size;
    s.context_length = up.context_length;
    s.rms_eps = up.rms_eps;
    if (up.layers.size() != up.n_layers || up.n_layers == 0 || up.n_kv_heads == 0 ||
        up.n_heads % up.n_kv_heads != 0 || up.output_norm == nullptr)
        detail::fail(ErrorKind::invalid_argument,
                     "cuda: " + up.source + ": inconsistent model description");
    if (!attention_supports(int(up.head_dim)))
        detail::fail(ErrorKind::unsupported, "cuda: " + up.source + ": head dim " +
                                                 std::to_string(up.head_dim) +
                                                 " (the CUDA attention handles 32, 64, 128, 256)");
    if (up.hidden % kActBlock != 0 || up.ffn % kActBlock != 0)
        detail::fail(ErrorKind::unsupported,
                     "cuda: " + up.source + ": hidden and ffn widths must be multiples of 32");

    s.token_embd = s.upload_matrix(up.token_embd, false);
    s.lm_head = up.lm_head.data == up.token_embd.data && up.lm_head.type == up.token_embd.type &&
                        matmul_supports(up.lm_head.type)
                    ? s.token_embd
                    : s.upload_matrix(up.lm_head, true);
    s.output_norm = s.upload_floats(up.output_norm, up.hidden);
    const DeviceMatrix* lm_head = &s.lm_head;
    s.lm_head_in = act_rule_for(&lm_head, 1);
    // The CPU path's RopeRule (model/rope.hpp), read by describe().
    if (up.rope_frequency.size() != s.rope_pairs)
        detail::fail(ErrorKind::internal,
                     "cuda: the upload's RoPE frequencies do not match rope_dims");
    s.rope_frequency = up.rope_frequency;
    s.rope_mscale = up.rope_mscale;
    s.nope_interval = up.nope_interval;
    s.buffers.push_back(upload_vector(s.rope_frequency.data(), std::max<size_t>(1, s.rope_pairs)));
    s.inverse_frequency = s.buffers.back().get<const double>();
    for (size_t li = 0; li < up.n_layers; ++li) {
        const LayerUpload& l = up.layers[li];
        ModelState::Layer d;
        d.attn_norm = s.upload_floats(l.attn_norm, up.hidden);
        d.ffn_norm = s.upload_floats(l.ffn_norm, up.hidden);
        d.q = s.upload_matrix(l.q, true);
        d.k = s.upload_matrix(l.k, true);
        d.v = s.upload_matrix(l.v, true);
        d.o = s.upload_matrix(l.o, true);
        d.gate = s.upload_matrix(l.gate, true);
        d.up = s.upload_matrix(l.up, true);
        d.down = s.upload_matrix(l.down, true);
        d.uses_rope = up.nope_interval == 0 || (li + 1) % up.nope_interval != 0;
        const DeviceMatrix* qkv[] = {&d.q, &d.k, &d.v};
        d.qkv_in = act_rule_for(qkv, 3);
        const DeviceMatrix* gate_up[] = {&d.gate, &d.up};
        d.gate_up_in = act_rule_for(gate_up, 2);
        const DeviceMatrix* o = &d.o;
        d.o_in = act_rule_for(&o, 1);
        const DeviceMatrix* down = &d.down;
        d.down_in = act_rule_for(&down, 1);
        s.layers.push_back(d);
    }
    state_ = std::move(state);
    // The seam's view of this backend (model/backend.hpp): its caches are those
    // made on this device state; chunks of up to 512 tokens (CacheState::max_chunk).
    device_ = Device::cuda;
    cache_owner_ = state_.get();
    vocab_size_ = s.vocab_size;
    context_length_ = s.context_length;
    n_layers_ = s.n_layers;
    n_kv_heads_ = s.n_kv_heads;
    head_dim_ = s.head_dim;
    max_chunk_ = kMaxChunk;
    default_chunk_ = kMaxChunk;
}

CudaBackend::~CudaBackend() = default;
CudaBackend::CudaBackend(CudaBackend&&) noexcept = default;
CudaBackend& CudaBackend::operator=(CudaBackend&&) noexcept = default;

int CudaBackend::cuda_device() const noexcept {
    return state_ ? state_->device : -1;
}
std::string CudaBackend::device_name() const {
    return state_ ? state_->device_name : "none";
}
size_t CudaBackend::weight_bytes() const noexcept {
    return state_ ? state_->weight_bytes : 0;
}
std::string CudaBackend::name() const {
    if (!state_) return "cuda (empty)";
    return "cuda (" + state_->device_name + ", device " + std::to_string(state_->device) + ")";
}

Expected<std::unique_ptr<BackendCache>> CudaBackend::do_make_cache(size_t n_ctx, KVType type,
                                                                   uint64_t memory_budget) const {
    using namespace cuda_detail;
    if (!state_)
        return ErrorInfo{ErrorKind::invalid_argument,
                         "CudaKVCache: the CudaBackend is empty (moved from)"};
    if (type != KVType::f16)
        return ErrorInfo{
            ErrorKind::unsupported,
            "CudaKVCache: the GPU cache stores F16 only (KVType::f32 and q8_0 are CPU-only)"};
    const ModelState& m = *state_;
    SMOL_TRY_ASSIGN(const size_t positions,
                    detail::resolve_n_ctx(n_ctx, m.context_length, "CudaKVCache"));
    SMOL_TRY_ASSIGN(
        const size_t total,
        detail::checked_product("CudaKVCache", {uint64_t(positions), m.head_dim, 2, m.n_layers,
                                                m.n_kv_heads, sizeof(__half)}));
    SMOL_TRY(detail::check_budget("CudaKVCache of " + std::to_string(positions) + " positions",
                                  total, memory_budget));
    return std::unique_ptr<BackendCache>(new CudaKVCache(state_, positions));
}

Status CudaBackend::do_erase(BackendCache& cache, size_t first, size_t count) const {
    using namespace cuda_detail;
    try {
        // The seam checked that the cache is one of this backend's.
        CudaKVCache& kv = static_cast<CudaKVCache&>(cache);
        CacheState& c = *kv.state_;
        const ModelState& m = *state_;
        if (m.rope_pairs > size_t(kMaxShiftPairs))
            return Status(
                ErrorKind::unsupported,
                "cuda: erase supports at most " + std::to_string(kMaxShiftPairs) + " RoPE pairs");
        const size_t moved = kv.size() - first - count;
        const size_t row = m.head_dim * sizeof(__half), blocks = 2 * m.n_layers * m.n_kv_heads;
        KeyShift shift;
        shift.pairs = int(m.rope_pairs);
        for (size_t i = 0; i < m.rope_pairs; ++i) {  // RopeRule::shift(-count), model/rope.hpp
            const double theta = -double(count) * m.rope_frequency[i];
            shift.cos[i] = float(std::cos(theta));
            shift.sin[i] = float(std::sin(theta));
        }
        const DeviceGuard device_guard(m.device);
        DeviceBuffer scratch(blocks * moved * row);
        uint8_t* base = c.kv.get<uint8_t>();
        SMOL_CUDA_CHECK(cudaMemcpy2DAsync(scratch.get(), moved * row, base + (first + count) * row,
                                          c.n_ctx * row, moved * row, blocks,
                                          cudaMemcpyDeviceToDevice, c.stream));
        launch_shift_keys(scratch.get<__half>(), blocks, moved, int(m.head_dim), shift,
                          int(m.n_kv_heads), int(m.nope_interval), c.stream);
        SMOL_CUDA_CHECK(cudaGetLastError());
        SMOL_CUDA_CHECK(cudaMemcpy2DAsync(base + first * row, c.n_ctx * row, scratch.get(),
                                          moved * row, moved * row, blocks,
                                          cudaMemcpyDeviceToDevice, c.stream));
        SMOL_CUDA_CHECK(cudaStreamSynchronize(c.stream));  // before the scratch is freed
        return {};
    } catch (const Error& e) {
        return Status(e.kind(), e.what());
    }
}

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

CudaKVCache::CudaKVCache(const CudaBackend& model, size_t n_ctx) {
    if (!model.state_)
        detail::fail(ErrorKind::invalid_argument,
                     "CudaKVCache: the CudaBackend is empty (moved from)");
    *this = CudaKVCache(model.state_, n_ctx);
}

CudaKVCache::CudaKVCache(const std::shared_ptr<cuda_detail::ModelState>& model, size_t n_ctx) {
    using namespace cuda_detail;
    const ModelState& m = *model;
    n_ctx = detail::value_or_fail(detail::resolve_n_ctx(n_ctx, m.context_length, "CudaKVCache"));
    const DeviceGuard device_guard(m.device);
    auto state = std::make_shared<CacheState>();
    CacheState& s = *state;
    s.model = model;
    s.n_ctx = n_ctx;
    s.max_chunk = std::min<size_t>(kMaxChunk, n_ctx);
    SMOL_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    s.kv = DeviceBuffer(2 * m.n_layers * m.n_kv_heads * n_ctx * m.head_dim * sizeof(__half));
    m.allocate(s.ws, s.max_chunk, 1, 1);
    state_ = std::move(state);
    device_ = Device::cuda;
    owner_ = model.get();
    n_layers_ = m.n_layers;
    n_kv_heads_ = m.n_kv_heads;
    head_dim_ = m.head_dim;
    n_ctx_ = n_ctx;
    size_ = 0;
}

CudaKVCache::~CudaKVCache() = default;
CudaKVCache::CudaKVCache(CudaKVCache&&) noexcept = default;
CudaKVCache& CudaKVCache::operator=(CudaKVCache&&) noexcept = default;

size_t CudaKVCache::bytes() const noexcept {
    return state_ ? state_->kv.bytes() : 0;
}

CacheMemory CudaKVCache::memory() const noexcept {
    return CacheMemory{bytes(), 0};  // one device buffer of its own, shared with no other cache
}

// The K/V buffer is [layer][K, V][kv head] blocks of [n_ctx][head_dim] F16, in
// the order of the portable format, so the valid prefix of every block moves
// as one 2D copy: height = the number of blocks, width = size() rows.
std::vector<uint8_t> CudaKVCache::serialize() const {
    using namespace cuda_detail;
    if (!state_) detail::fail(ErrorKind::invalid_argument, "CudaKVCache: empty (moved from)");
    const ModelState& m = *state_->model;
    const size_t row = m.head_dim * sizeof(__half), blocks = 2 * m.n_layers * m.n_kv_heads;
    std::vector<uint8_t> out;
    detail::append_kv_header(out, KVType::f16, m.n_layers, m.n_kv_heads, m.head_dim, size_);
    const size_t header = out.size();
    out.resize(header + blocks * size_ * row);
    if (size_ == 0) return out;
    const DeviceGuard device_guard(m.device);
    SMOL_CUDA_CHECK(cudaStreamSynchronize(state_->stream));
    SMOL_CUDA_CHECK(cudaMemcpy2D(out.data() + header, size_ * row, state_->kv.get(),
                                 state_->n_ctx * row, size_ * row, blocks, cudaMemcpyDeviceToHost));
    return out;
}

void CudaKVCache::restore(const void* data, size_t bytes) {
    using namespace cuda_detail;
    if (!state_) detail::fail(ErrorKind::invalid_argument, "CudaKVCache: empty (moved from)");
    const ModelState& m = *state_->model;
    const detail::KVImage image = detail::value_or_fail(detail::try_parse_kv_image(
        data, bytes, m.n_layers, m.n_kv_heads, m.head_dim, state_->n_ctx));
    if (image.type == KVType::q8_0)
        detail::fail(
            ErrorKind::unsupported,
            "CudaKVCache: a q8_0 session restores on the CPU only (the GPU cache stores F16)");
    const size_t row = m.head_dim * sizeof(__half), blocks = 2 * m.n_layers * m.n_kv_heads;
    const void* src = image.payload;
    std::vector<uint16_t> converted;
    if (image.type == KVType::f32) {  // a CPU F32 session: rounded to F16 as the GPU stores it
        converted.resize(blocks * image.size * m.head_dim);
        for (size_t i = 0; i < converted.size(); ++i) {
            float value;
            std::memcpy(&value, image.payload + i * sizeof(float), sizeof(float));
            converted[i] = fp32_to_fp16(value);
        }
        src = converted.data();
    }
    const DeviceGuard device_guard(m.device);
    SMOL_CUDA_CHECK(cudaStreamSynchronize(state_->stream));
    size_ = 0;  // a copy that fails half way leaves an empty cache, never a mixed one
    if (image.size > 0)
        SMOL_CUDA_CHECK(cudaMemcpy2D(state_->kv.get(), state_->n_ctx * row, src, image.size * row,
                                     image.size * row, blocks, cudaMemcpyHostToDevice));
    size_ = image.size;
}

std::unique_ptr<BackendCache> CudaKVCache::clone() const {
    using namespace cuda_detail;
    if (!state_) detail::fail(ErrorKind::invalid_argument, "CudaKVCache: empty (moved from)");
    const ModelState& m = *state_->model;
    std::unique_ptr<CudaKVCache> copy(new CudaKVCache(state_->model, state_->n_ctx));
    const size_t row = m.head_dim * sizeof(__half), blocks = 2 * m.n_layers * m.n_kv_heads;
    if (size_ > 0) {
        const DeviceGuard device_guard(m.device);
        SMOL_CUDA_CHECK(cudaStreamSynchronize(state_->stream));
        SMOL_CUDA_CHECK(cudaMemcpy2D(copy->state_->kv.get(), state_->n_ctx * row, state_->kv.get(),
                                     state_->n_ctx * row, size_ * row, blocks,
                                     cudaMemcpyDeviceToDevice));
    }
    copy->size_ = size_;
    return copy;
}

void CudaKVCache::load_row(size_t layer, KVPart part, size_t kv_head, size_t pos,
                           float* out) const {
    using namespace cuda_detail;
    if (!state_) detail::fail(ErrorKind::invalid_argument, "CudaKVCache: empty (moved from)");
    const ModelState& m = *state_->model;
    const size_t kind = size_t(part);
    if (layer >= m.n_layers || kind > 1 || kv_head >= m.n_kv_heads || pos >= state_->n_ctx)
        detail::fail(ErrorKind::out_of_range, "CudaKVCache::load_row: index out of range");
    const DeviceGuard device_guard(m.device);
    SMOL_CUDA_CHECK(cudaStreamSynchronize(state_->stream));
    std::vector<uint16_t> row(m.head_dim);
    const __half* src =
        state_->cache_block(layer, kind) + (kv_head * state_->n_ctx + pos) * m.head_dim;
    SMOL_CUDA_CHECK(
        cudaMemcpy(row.data(), src, m.head_dim * sizeof(uint16_t), cudaMemcpyDeviceToHost));
    for (size_t d = 0; d < m.head_dim; ++d) out[d] = fp16_to_fp32(row[d]);
}

void CudaBackend::forward(const int32_t* tokens, size_t n, size_t start_pos, CudaKVCache& kv,
                          float* logits_host, bool all_logits) const {
    forward(Segment{tokens, n, start_pos, &kv, logits_host, all_logits});
}

namespace cuda_detail {
namespace {

bool env_off(const char* name) {
    const char* value = std::getenv(name);
    return value && std::string(value) == "0";
}

// One chunk on its own cache's stream and workspace; a single-token decode
// step that wants the last logits replays the cache's captured graph.
// The rows of logits a chunk wants: none, its last token's, or every token's.
size_t logit_rows_of(const Segment& c) {
    return c.logits == nullptr ? 0 : c.all_logits ? c.n_tokens : 1;
}

// Stages chunk c in ws as sequence `seq`, its tokens from index `token` on and
// its logit rows (logit_rows_of(c), its last tokens) from index `row` on. The
// previous step on ws has finished (every step ends synchronized), so the
// staging buffer is free.
void stage_chunk(const Workspace& ws, const Segment& c, const CacheState& cs, size_t seq,
                 size_t token, size_t row) {
    std::memcpy(ws.staged_tokens() + token, c.tokens, c.n_tokens * sizeof(int32_t));
    for (size_t t = 0; t < c.n_tokens; ++t)
        ws.staged_slots()[token + t] = TokenSlot{int(c.start + t), int(seq)};
    ws.staged_seqs()[seq] = cs.seq_cache();
    const size_t wanted = logit_rows_of(c);
    for (size_t r = 0; r < wanted; ++r)
        ws.staged_rows()[row + r] = int32_t(token + c.n_tokens - wanted + r);
}

void run_chunk(const ModelState& m, const Segment& c, CacheState& cs, bool graphs) {
    Workspace& ws = cs.ws;
    const size_t n = c.n_tokens, rows = logit_rows_of(c);
    stage_chunk(ws, c, cs, 0, 0, 0);
    ws.upload(cs.stream);
    float* out = ws.logits.get<float>();
    if (rows > ws.logit_rows) {
        const size_t need = rows * m.vocab_size * sizeof(float);
        if (cs.all_logits.bytes() < need) cs.all_logits = DeviceBuffer(need);
        out = cs.all_logits.get<float>();
    }
    if (n == 1 && rows == 1 && graphs && !cs.graph_failed &&
        (cs.graph_exec || cs.capture_decode_graph())) {
        SMOL_CUDA_CHECK(cudaGraphLaunch(cs.graph_exec, cs.stream));
    } else {
        enqueue_forward(m, ws, n, rows, out, cs.stream);
    }
    SMOL_CUDA_CHECK(cudaGetLastError());  // a failed launch of this chunk
    if (rows > 0)
        SMOL_CUDA_CHECK(cudaMemcpyAsync(c.logits, out, rows * m.vocab_size * sizeof(float),
                                        cudaMemcpyDeviceToHost, cs.stream));
    SMOL_CUDA_CHECK(cudaStreamSynchronize(cs.stream));
}

// Every chunk of a step as one pass on the model's batch workspace: the
// chunks' tokens one after another, so each matrix is read once for all of
// them, each token with its own position and cache (TokenSlot, SeqCache).
void run_batched(ModelState& m, const Segment* chunks, const CacheState* const* caches,
                 size_t n_chunks) {
    ModelState::Batch& batch = *m.batch;
    const std::lock_guard<std::mutex> lock(batch.mutex);
    size_t tokens = 0, rows = 0;
    for (size_t i = 0; i < n_chunks; ++i) {
        tokens += chunks[i].n_tokens;
        rows += logit_rows_of(chunks[i]);
    }
    Workspace& ws = batch.ws;
    if (batch.stream == nullptr)
        SMOL_CUDA_CHECK(cudaStreamCreateWithFlags(&batch.stream, cudaStreamNonBlocking));
    if (ws.tokens < tokens || ws.seqs < n_chunks || ws.logit_rows < rows) {
        // Grown in steps, so that a Batcher's varying steps settle on one size.
        auto round_up = [](size_t v, size_t to) { return (v + to - 1) / to * to; };
        m.allocate(ws, round_up(std::max(tokens, ws.tokens), 64),
                   round_up(std::max(n_chunks, ws.seqs), 8),
                   round_up(std::max(rows, ws.logit_rows), 8));
    }
    size_t token = 0, row = 0;
    for (size_t i = 0; i < n_chunks; ++i) {
        stage_chunk(ws, chunks[i], *caches[i], i, token, row);
        token += chunks[i].n_tokens;
        row += logit_rows_of(chunks[i]);
    }
    ws.upload(batch.stream);
    enqueue_forward(m, ws, tokens, rows, ws.logits.get<float>(), batch.stream);
    SMOL_CUDA_CHECK(cudaGetLastError());
    row = 0;
    for (size_t i = 0; i < n_chunks; ++i) {
        const size_t wanted = logit_rows_of(chunks[i]);
        if (wanted == 0) continue;
        SMOL_CUDA_CHECK(cudaMemcpyAsync(
            chunks[i].logits, ws.logits.get<float>() + row * m.vocab_size,
            wanted * m.vocab_size * sizeof(float), cudaMemcpyDeviceToHost, batch.stream));
        row += wanted;
    }
    SMOL_CUDA_CHECK(cudaStreamSynchronize(batch.stream));
}

}  // namespace
}  // namespace cuda_detail

// Backend::forward (model/backend.hpp) checked the arguments, truncated each
// cache to its start and split the segments into chunks of at most kMaxChunk
// tokens; it sets the caches' sizes after this returns. A step of several
// chunks runs as one batched pass (SMOL_CUDA_BATCH=0: one after another, for
// comparison); SMOL_CUDA_GRAPH=0 turns the decode graph off.
Status CudaBackend::forward_step(const Segment* chunks, size_t n_chunks,
                                 const std::atomic<bool>*) const {
    using namespace cuda_detail;
    if (!state_)
        detail::fail(ErrorKind::invalid_argument,
                     "cuda forward: the CudaBackend is empty (moved from)");
    ModelState& m = *state_;
    const DeviceGuard device_guard(m.device);
    auto cache_of = [](const Segment& c) -> CacheState& {
        const CudaKVCache& kv = static_cast<const CudaKVCache&>(*c.cache);  // owner checked
        if (!kv.state_)
            detail::fail(ErrorKind::invalid_argument,
                         "cuda forward: the CudaKVCache is empty (moved from)");
        return *kv.state_;
    };
    if (n_chunks > 1 && !env_off("SMOL_CUDA_BATCH")) {
        std::vector<const CacheState*> caches(n_chunks);
        for (size_t i = 0; i < n_chunks; ++i) caches[i] = &cache_of(chunks[i]);
        run_batched(m, chunks, caches.data(), n_chunks);
        return {};
    }
    const bool graphs = !env_off("SMOL_CUDA_GRAPH");
    for (size_t i = 0; i < n_chunks; ++i) run_chunk(m, chunks[i], cache_of(chunks[i]), graphs);
    return {};
}

// ---------------------------------------------------------------------------
// Test hooks: one kernel each on host data, on the default stream.

namespace cuda_detail {

namespace {

// The test hooks run on device 0 and leave the caller's current device as it was.
void require_any_device() {
    require_device(0);
}

}  // namespace

void run_matmul(GGMLType type, const void* weights, size_t rows, size_t cols, const float* x,
                size_t n_tokens, float* y) {
    require_any_device();
    const DeviceGuard device_guard(0);
    if (!matmul_supports(type))
        detail::fail(ErrorKind::unsupported, "cuda run_matmul: type " + type_name(type));
    const size_t bytes = rows * row_bytes(type, cols);
    DeviceBuffer w(bytes), in = upload_vector(x, n_tokens * cols),
                           out(n_tokens * rows * sizeof(float));
    DeviceBuffer act(act_blocks(n_tokens, cols) * sizeof(ActBlock));
    w.upload(weights, bytes);
    DeviceMatrix m;
    m.data = w.get<const uint8_t>();
    m.type = type;
    m.rows = int(rows);
    m.cols = int(cols);
    m.row_bytes = row_bytes(type, cols);
    launch_quantize(in.get<float>(), int(n_tokens), int(cols), act.get<ActBlock>(),
                    act_rule_of(type), nullptr);
    launch_matmul(m, act.get<ActBlock>(), int(n_tokens), out.get<float>(), false, nullptr);
    SMOL_CUDA_CHECK(cudaGetLastError());
    out.download(y, n_tokens * rows * sizeof(float));
}

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
    launch_matmuls(targets.data(), int(count), act.get<ActBlock>(), int(n_tokens), nullptr);
    SMOL_CUDA_CHECK(cudaGetLastError());
    for (size_t i = 0; i < count; ++i) out[i].download(y[i], n_tokens * rows[i] * sizeof(float));
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
    launch_attention(dq.get<float>(), sequence.slots.get<TokenSlot>(),
                     sequence.seqs.get<SeqCache>(), 0, int(n_tokens), int(n_heads), int(n_kv_heads),
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
    const bool known = visit_weight_type<Format>(type, [&](auto format) {
        emulate_dequantize_for<typename decltype(format)::type>(bytes, cols, out);
    });
    if (!known)
        detail::fail(ErrorKind::unsupported,
                     "cuda emulate_dequantize_row: type " + type_name(type));
}

}  // namespace cuda_detail
SMOL_NAMESPACE_END
