// Host side of smol's CUDA backend: device discovery, the weight upload
// (CudaModel), the per-session device state (CudaKVCache: F16 cache, stream,
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

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include <smol/core/fp16.hpp>

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
    };
    DeviceMatrix token_embd, lm_head;
    const float* output_norm = nullptr;
    const double* inverse_frequency = nullptr;  // [rope_pairs]
    std::vector<Layer> layers;
    std::vector<DeviceBuffer> buffers;  // owns every allocation above
    size_t weight_bytes = 0;

    size_t q_dim() const { return n_heads * head_dim; }
    size_t kv_dim() const { return n_kv_heads * head_dim; }

    ~ModelState() {
        const DeviceGuard guard(device, std::nothrow);
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
    // Work buffers for max_chunk tokens.
    DeviceBuffer x, q, k, v, attn, gate, up, act, logits, ints;  // ints: [start, tokens...]
    DeviceBuffer all_logits;     // [rows][vocab], grown on demand (not used by the graph)
    int32_t* staging = nullptr;  // pinned [1 + max_chunk]: start, tokens
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t graph_exec = nullptr;
    bool graph_failed = false;  // capture or instantiation failed once: decode without a graph

    ~CacheState() {
        const DeviceGuard guard(model->device, std::nothrow);
        if (graph_exec) cudaGraphExecDestroy(graph_exec);
        if (graph) cudaGraphDestroy(graph);
        if (staging) cudaFreeHost(staging);
        if (stream) cudaStreamDestroy(stream);
    }

    const int* start_device() const { return ints.get<const int>(); }
    const int32_t* tokens_device() const { return ints.get<const int32_t>() + 1; }

    __half* cache_block(size_t layer, int kind) const {
        const ModelState& m = *model;
        return kv.get<__half>() + (layer * 2 + size_t(kind)) * m.n_kv_heads * n_ctx * m.head_dim;
    }

    // Captures one single-token decode step (enqueue_chunk(1, 1, logits)) as a
    // graph and instantiates it. On any failure the stream leaves capture mode,
    // the partial graph is destroyed, the error state is cleared and
    // graph_failed is set, so later steps run the kernels directly instead of
    // retrying (and leaking) a capture each step; a real launch problem then
    // shows up on the direct path with its own message.
    bool capture_decode_graph() {
        if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
            cudaGetLastError();
            graph_failed = true;
            return false;
        }
        bool enqueued = true;
        try {
            enqueue_chunk(1, 1, logits.get<float>());
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

    // Enqueues the whole forward pass of m tokens whose ids and start position are
    // already in `ints`. logits_rows 0: no LM head; 1: the last token's logits into
    // `logits`; m: every token's into `out_logits`.
    void enqueue_chunk(size_t m, size_t logits_rows, float* out_logits) {
        const ModelState& w = *model;
        const int n = int(m), hidden = int(w.hidden), ffn = int(w.ffn);
        const size_t head_stride = n_ctx * w.head_dim;
        launch_embed(w.token_embd, tokens_device(), n, x.get<float>(), stream);
        for (size_t li = 0; li < w.n_layers; ++li) {
            const ModelState::Layer& l = w.layers[li];
            ActBlock* a = act.get<ActBlock>();
            launch_rmsnorm_quantize(x.get<float>(), l.attn_norm, n, hidden, w.rms_eps, a, nullptr,
                                    stream);
            launch_matmul(l.q, a, n, q.get<float>(), false, stream);
            launch_matmul(l.k, a, n, k.get<float>(), false, stream);
            launch_matmul(l.v, a, n, v.get<float>(), false, stream);
            launch_rope_store(q.get<float>(), k.get<float>(), v.get<float>(), n, start_device(),
                              w.inverse_frequency, int(w.rope_pairs), l.uses_rope, int(w.n_heads),
                              int(w.n_kv_heads), int(w.head_dim), cache_block(li, 0),
                              cache_block(li, 1), head_stride, nullptr, stream);
            launch_attention(q.get<float>(), cache_block(li, 0), cache_block(li, 1), head_stride,
                             start_device(), n, int(w.n_heads), int(w.n_kv_heads), int(w.head_dim),
                             attn.get<float>(), stream);
            launch_quantize(attn.get<float>(), n, int(w.q_dim()), a, stream);
            launch_matmul(l.o, a, n, x.get<float>(), true, stream);

            launch_rmsnorm_quantize(x.get<float>(), l.ffn_norm, n, hidden, w.rms_eps, a, nullptr,
                                    stream);
            launch_matmul(l.gate, a, n, gate.get<float>(), false, stream);
            launch_matmul(l.up, a, n, up.get<float>(), false, stream);
            launch_swiglu_quantize(gate.get<float>(), up.get<float>(), n, ffn, a, nullptr, stream);
            launch_matmul(l.down, a, n, x.get<float>(), true, stream);
        }
        if (logits_rows == 0) return;
        const size_t first = m - logits_rows;
        ActBlock* a = act.get<ActBlock>();
        launch_rmsnorm_quantize(x.get<float>() + first * w.hidden, w.output_norm, int(logits_rows),
                                hidden, w.rms_eps, a, nullptr, stream);
        launch_matmul(w.lm_head, a, int(logits_rows), out_logits, false, stream);
    }
};

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

CudaModel::CudaModel(const cuda_detail::ModelUpload& up, int device) {
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
    std::vector<double> inverse_frequency(s.rope_pairs);
    for (size_t i = 0; i < s.rope_pairs; ++i)  // as the CPU path: base^(-2i / rope_dims) in double
        inverse_frequency[i] =
            std::pow(double(up.rope_freq_base), -2.0 * double(i) / double(up.rope_dims));
    s.buffers.push_back(upload_vector(inverse_frequency.data(), std::max<size_t>(1, s.rope_pairs)));
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

CudaModel::~CudaModel() = default;
CudaModel::CudaModel(CudaModel&&) noexcept = default;
CudaModel& CudaModel::operator=(CudaModel&&) noexcept = default;

int CudaModel::cuda_device() const noexcept {
    return state_ ? state_->device : -1;
}
std::string CudaModel::device_name() const {
    return state_ ? state_->device_name : "none";
}
size_t CudaModel::weight_bytes() const noexcept {
    return state_ ? state_->weight_bytes : 0;
}
std::string CudaModel::name() const {
    if (!state_) return "cuda (empty)";
    return "cuda (" + state_->device_name + ", device " + std::to_string(state_->device) + ")";
}

Expected<std::unique_ptr<BackendCache>> CudaModel::create_cache(size_t n_ctx, KVType type,
                                                                uint64_t memory_budget) const {
    using namespace cuda_detail;
    if (!state_)
        return ErrorInfo{ErrorKind::invalid_argument,
                         "CudaKVCache: the CudaModel is empty (moved from)"};
    if (type != KVType::f16)
        return ErrorInfo{ErrorKind::unsupported,
                         "CudaKVCache: the GPU cache stores F16 only (KVType::f32 is CPU-only)"};
    if (n_ctx == 0)
        return ErrorInfo{ErrorKind::invalid_argument, "CudaKVCache: n_ctx must be positive"};
    if (n_ctx == BackendCache::kDefaultSize) n_ctx = 0;  // the constructor's default
    const ModelState& m = *state_;
    if (n_ctx > m.context_length)
        return ErrorInfo{ErrorKind::invalid_argument, "CudaKVCache: n_ctx " +
                                                          std::to_string(n_ctx) +
                                                          " exceeds the model's context length " +
                                                          std::to_string(m.context_length)};
    const size_t positions = n_ctx ? n_ctx : std::min<size_t>(4096, m.context_length);
    SMOL_TRY_ASSIGN(
        const size_t total,
        detail::checked_product("CudaKVCache", {uint64_t(positions), m.head_dim, 2, m.n_layers,
                                                m.n_kv_heads, sizeof(__half)}));
    SMOL_TRY(detail::check_budget("CudaKVCache of " + std::to_string(positions) + " positions",
                                  total, memory_budget));
    return std::unique_ptr<BackendCache>(new CudaKVCache(state_, n_ctx));
}

CudaKVCache::CudaKVCache(const CudaModel& model, size_t n_ctx) {
    if (!model.state_)
        detail::fail(ErrorKind::invalid_argument,
                     "CudaKVCache: the CudaModel is empty (moved from)");
    *this = CudaKVCache(model.state_, n_ctx);
}

CudaKVCache::CudaKVCache(const std::shared_ptr<cuda_detail::ModelState>& model, size_t n_ctx) {
    using namespace cuda_detail;
    const ModelState& m = *model;
    if (n_ctx == 0) n_ctx = std::min<size_t>(4096, m.context_length);
    if (n_ctx > m.context_length)
        detail::fail(ErrorKind::invalid_argument, "CudaKVCache: n_ctx " + std::to_string(n_ctx) +
                                                      " exceeds the model's context length " +
                                                      std::to_string(m.context_length));
    const DeviceGuard device_guard(m.device);
    auto state = std::make_shared<CacheState>();
    CacheState& s = *state;
    s.model = model;
    s.n_ctx = n_ctx;
    s.max_chunk = std::min<size_t>(kMaxChunk, n_ctx);
    SMOL_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    SMOL_CUDA_CHECK(
        cudaMallocHost(reinterpret_cast<void**>(&s.staging), (1 + s.max_chunk) * sizeof(int32_t)));
    s.kv = DeviceBuffer(2 * m.n_layers * m.n_kv_heads * n_ctx * m.head_dim * sizeof(__half));
    const size_t c = s.max_chunk;
    s.x = DeviceBuffer(c * m.hidden * sizeof(float));
    s.q = DeviceBuffer(c * m.q_dim() * sizeof(float));
    s.k = DeviceBuffer(c * m.kv_dim() * sizeof(float));
    s.v = DeviceBuffer(c * m.kv_dim() * sizeof(float));
    s.attn = DeviceBuffer(c * m.q_dim() * sizeof(float));
    s.gate = DeviceBuffer(c * m.ffn * sizeof(float));
    s.up = DeviceBuffer(c * m.ffn * sizeof(float));
    const size_t widest = std::max({m.hidden, m.ffn, m.q_dim()});
    s.act = DeviceBuffer(act_blocks(c, widest) * sizeof(ActBlock));
    s.logits = DeviceBuffer(m.vocab_size * sizeof(float));
    s.ints = DeviceBuffer((1 + c) * sizeof(int32_t));
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
    const detail::KVImage image =
        detail::parse_kv_image(data, bytes, m.n_layers, m.n_kv_heads, m.head_dim, state_->n_ctx);
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

void CudaKVCache::load_row(size_t layer, int kind, size_t kv_head, size_t pos, float* out) const {
    using namespace cuda_detail;
    if (!state_) detail::fail(ErrorKind::invalid_argument, "CudaKVCache: empty (moved from)");
    const ModelState& m = *state_->model;
    if (layer >= m.n_layers || (kind != 0 && kind != 1) || kv_head >= m.n_kv_heads ||
        pos >= state_->n_ctx)
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

void CudaModel::forward(const int32_t* tokens, size_t n, size_t start_pos, CudaKVCache& kv,
                        float* logits_host, bool all_logits) const {
    forward(Segment{tokens, n, start_pos, &kv, logits_host, all_logits});
}

// Backend::forward (model/backend.hpp) checked the arguments, truncated each
// cache to its start and split the segments into chunks of at most kMaxChunk
// tokens; it sets the caches' sizes after this returns.
Status CudaModel::forward_step(const Segment* chunks, size_t n_chunks,
                               const std::atomic<bool>*) const {
    using namespace cuda_detail;
    if (!state_)
        detail::fail(ErrorKind::invalid_argument,
                     "cuda forward: the CudaModel is empty (moved from)");
    const ModelState& m = *state_;
    const DeviceGuard device_guard(m.device);
    const char* graph_env = std::getenv("SMOL_CUDA_GRAPH");
    const bool graphs = !(graph_env && std::string(graph_env) == "0");
    for (size_t i = 0; i < n_chunks; ++i) {
        const Segment& c = chunks[i];
        CudaKVCache& kv = static_cast<CudaKVCache&>(*c.cache);  // owner checked by the seam
        if (!kv.state_)
            detail::fail(ErrorKind::invalid_argument,
                         "cuda forward: the CudaKVCache is empty (moved from)");
        CacheState& cs = *kv.state_;
        const size_t chunk = c.n_tokens;
        // The previous chunk finished (synchronized below), so the staging buffer is free.
        cs.staging[0] = int32_t(c.start);
        std::memcpy(cs.staging + 1, c.tokens, chunk * sizeof(int32_t));
        SMOL_CUDA_CHECK(cudaMemcpyAsync(cs.ints.get(), cs.staging, (1 + chunk) * sizeof(int32_t),
                                        cudaMemcpyHostToDevice, cs.stream));
        if (c.all_logits) {
            const size_t need = chunk * m.vocab_size * sizeof(float);
            if (cs.all_logits.bytes() < need) cs.all_logits = DeviceBuffer(need);
            cs.enqueue_chunk(chunk, chunk, cs.all_logits.get<float>());
            SMOL_CUDA_CHECK(cudaMemcpyAsync(c.logits, cs.all_logits.get(), need,
                                            cudaMemcpyDeviceToHost, cs.stream));
        } else if (chunk == 1 && graphs && !cs.graph_failed &&
                   (cs.graph_exec || cs.capture_decode_graph())) {
            SMOL_CUDA_CHECK(cudaGraphLaunch(cs.graph_exec, cs.stream));
        } else {
            cs.enqueue_chunk(chunk, c.logits ? 1 : 0, cs.logits.get<float>());
        }
        SMOL_CUDA_CHECK(cudaGetLastError());  // a failed launch of this chunk
        if (c.logits && !c.all_logits)
            SMOL_CUDA_CHECK(cudaMemcpyAsync(c.logits, cs.logits.get(), m.vocab_size * sizeof(float),
                                            cudaMemcpyDeviceToHost, cs.stream));
        SMOL_CUDA_CHECK(cudaStreamSynchronize(cs.stream));
    }
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
    launch_quantize(in.get<float>(), int(n_tokens), int(cols), act.get<ActBlock>(), nullptr);
    launch_matmul(m, act.get<ActBlock>(), int(n_tokens), out.get<float>(), false, nullptr);
    SMOL_CUDA_CHECK(cudaGetLastError());
    out.download(y, n_tokens * rows * sizeof(float));
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
    launch_rmsnorm_quantize(in.get<float>(), w.get<float>(), int(n_tokens), int(cols), eps,
                            act.get<ActBlock>(), result.get<float>(), nullptr);
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
                           result.get<float>(), nullptr);
    SMOL_CUDA_CHECK(cudaGetLastError());
    result.download(out, n * sizeof(float));
}

void run_rope(float* q, float* k, size_t n_tokens, size_t n_heads, size_t n_kv_heads,
              size_t head_dim, size_t rope_dims, float freq_base, size_t start_pos, bool use_rope) {
    require_any_device();
    const DeviceGuard device_guard(0);
    const size_t q_count = n_tokens * n_heads * head_dim,
                 k_count = n_tokens * n_kv_heads * head_dim;
    std::vector<double> inverse_frequency(std::max<size_t>(1, rope_dims / 2));
    for (size_t i = 0; i < rope_dims / 2; ++i)
        inverse_frequency[i] = std::pow(double(freq_base), -2.0 * double(i) / double(rope_dims));
    const int32_t start = int32_t(start_pos);
    DeviceBuffer dq = upload_vector(q, q_count), dk = upload_vector(k, k_count);
    DeviceBuffer dv(k_count * sizeof(float)), k_out(k_count * sizeof(float));
    SMOL_CUDA_CHECK(cudaMemset(dv.get(), 0, dv.bytes()));
    DeviceBuffer freq = upload_vector(inverse_frequency.data(), inverse_frequency.size());
    DeviceBuffer dstart = upload_vector(&start, 1);
    const size_t head_stride = (start_pos + n_tokens) * head_dim;
    DeviceBuffer kc(n_kv_heads * head_stride * sizeof(__half)),
        vc(n_kv_heads * head_stride * sizeof(__half));
    launch_rope_store(dq.get<float>(), dk.get<float>(), dv.get<float>(), int(n_tokens),
                      dstart.get<int>(), freq.get<double>(), int(rope_dims / 2), use_rope,
                      int(n_heads), int(n_kv_heads), int(head_dim), kc.get<__half>(),
                      vc.get<__half>(), head_stride, k_out.get<float>(), nullptr);
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
    const size_t positions = start_pos + n_tokens;
    std::vector<uint16_t> k16(n_kv_heads * positions * head_dim), v16(k16.size());
    for (size_t i = 0; i < k16.size(); ++i) {
        k16[i] = fp32_to_fp16(keys[i]);
        v16[i] = fp32_to_fp16(values[i]);
    }
    const int32_t start = int32_t(start_pos);
    DeviceBuffer dq = upload_vector(q, n_tokens * n_heads * head_dim);
    DeviceBuffer dk = upload_vector(k16.data(), k16.size()),
                 dv = upload_vector(v16.data(), v16.size());
    DeviceBuffer dstart = upload_vector(&start, 1),
                 result(n_tokens * n_heads * head_dim * sizeof(float));
    launch_attention(dq.get<float>(), dk.get<__half>(), dv.get<__half>(), positions * head_dim,
                     dstart.get<int>(), int(n_tokens), int(n_heads), int(n_kv_heads), int(head_dim),
                     result.get<float>(), nullptr);
    SMOL_CUDA_CHECK(cudaGetLastError());
    result.download(out, n_tokens * n_heads * head_dim * sizeof(float));
}

// ---------------------------------------------------------------------------
// Host emulation: the kernels' per-unit code on the CPU.

namespace {

template <class Format>
float emulate_dot_for(const uint8_t* row, size_t cols, const std::vector<ActBlock>& act) {
    const int units = int(cols / Format::kBlockWeights) * Format::kUnits;
    // The same split as the kernel: lane l sums units l, l + 32, ...; then the lanes are added.
    float lanes[32] = {};
    for (int unit = 0; unit < units; ++unit) {
        const typename Format::Unit u = Format::load(row, unit);
        lanes[unit % 32] += Format::dot(u, act.data());
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
    for (size_t b = 0; b < act.size(); ++b) quantize_act_block_host(x + b * kActBlock, act[b]);
    const uint8_t* bytes = static_cast<const uint8_t*>(row);
    switch (type) {
        case GGMLType::Q4_K:
            return emulate_dot_for<FormatQ4K>(bytes, cols, act);
        case GGMLType::Q5_K:
            return emulate_dot_for<FormatQ5K>(bytes, cols, act);
        case GGMLType::Q6_K:
            return emulate_dot_for<FormatQ6K>(bytes, cols, act);
        case GGMLType::Q8_0:
            return emulate_dot_for<FormatQ8_0>(bytes, cols, act);
        default:
            return 0;
    }
}

void emulate_dequantize_row(GGMLType type, const void* row, size_t cols, float* out) {
    const uint8_t* bytes = static_cast<const uint8_t*>(row);
    switch (type) {
        case GGMLType::Q4_K:
            emulate_dequantize_for<FormatQ4K>(bytes, cols, out);
            break;
        case GGMLType::Q5_K:
            emulate_dequantize_for<FormatQ5K>(bytes, cols, out);
            break;
        case GGMLType::Q6_K:
            emulate_dequantize_for<FormatQ6K>(bytes, cols, out);
            break;
        case GGMLType::Q8_0:
            emulate_dequantize_for<FormatQ8_0>(bytes, cols, out);
            break;
        case GGMLType::F32:
            emulate_dequantize_for<FormatF32>(bytes, cols, out);
            break;
        case GGMLType::F16:
            emulate_dequantize_for<FormatF16>(bytes, cols, out);
            break;
        case GGMLType::BF16:
            emulate_dequantize_for<FormatBF16>(bytes, cols, out);
            break;
        default:
            detail::fail(ErrorKind::unsupported,
                         "cuda emulate_dequantize_row: type " + type_name(type));
    }
}

}  // namespace cuda_detail
SMOL_NAMESPACE_END
