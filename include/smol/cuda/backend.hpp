// smol's optional CUDA backend: the narrow host seam (the only header a
// program using the GPU includes besides smol.hpp). Compiles with any C++17
// compiler and no CUDA headers: it holds declarations and plain C++ only; the
// kernels live in src/cuda/kernels.cu (nvcc) and their host glue in
// src/cuda/backend.cpp (the C++ compiler), compiled into the static
// library smol::cuda (CMake option SMOL_CUDA=ON), which defines
// SMOL_CUDA_ENABLED=1 for whoever links it.
//
// The usual way in is not this header but LoadOptions::device = Device::cuda
// (or automatic): the Model then owns a CudaModel as its backend
// (model/backend.hpp) and every Generator on it runs on the GPU. Directly:
//
//   auto model = smol::Model::load("model.gguf");
//   smol::CudaModel gpu(*model);                  // uploads the weights once
//   smol::CudaKVCache kv = gpu.new_cache();       // one per session (F16, on the GPU)
//   std::vector<float> logits(gpu.vocab_size());
//   gpu.forward(ids.data(), ids.size(), 0, kv, logits.data());   // prefill
//   gpu.forward(&next, 1, ids.size(), kv, logits.data());        // decode (a CUDA graph)
//
// What lives on the GPU: every weight matrix packed exactly as in the file
// (Q4_K, Q5_K, Q6_K, Q8_0; other matrix types are Error(unsupported) naming the
// tensor), norms as F32, the KV cache as F16 in the CPU KVCache's layout
// (one [n_ctx][head_dim] block per (layer, K or V, kv head)), the work
// buffers of one chunk per cache, and one batch workspace per model, grown to
// the largest batched step seen (about 130 KiB per token and 500 KiB per row
// of logits for the 3B shape; not counted against memory_budget). Only the
// logits come back to the host. Activations are quantized to int8 blocks of 32 with the CPU path's
// rounding (kernels/activations.hpp: Q8_K32 for K-quant matrices, Q8_0 for
// Q8_0), so both backends compute the codes the reference engine computes.
//
// CudaModel is a smol::Backend and CudaKVCache a smol::BackendCache
// (model/backend.hpp): forward() is the seam's Backend::forward, so its checks
// and chunking (512 tokens by default and at most) are the CPU's: start_pos <=
// kv.size() and start_pos + n <= kv.n_ctx() (else Error(out_of_range)); n == 0
// or a token outside the vocabulary is Error(invalid_argument); logits are
// [vocab] for the last position or [n][vocab] with all_logits. Cancellation
// is seen between chunks. A cache serializes to the portable format, so
// sessions move between CPU and GPU generators of one model. A CudaModel may
// be shared by threads that each use their own CudaKVCache (each cache owns a
// CUDA stream, its work buffers and its decode graph; batched steps of several
// caches take the model's batch workspace one step at a time); a cache keeps
// its model's device state alive.
//
// Errors: smol::Error. No device (or a build without SMOL_CUDA_ENABLED) is
// ErrorKind::unsupported with the reason; a failing CUDA call is
// ErrorKind::internal naming the call and CUDA's message.
#pragma once

#include "../detail/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "../model/backend.hpp"
#include "../quant/types.hpp"
#include "../quant/weight_matrix.hpp"
#include "../quant/weight_matrix.hpp"

SMOL_NAMESPACE_BEGIN

#if !defined(SMOL_CUDA_ENABLED)
// A unit compiled without SMOL_CUDA_ENABLED gets inline stubs of the classes
// below (end of file). They live in an inline namespace of their own, so in a
// program that mixes such units with units linked against smol::cuda the
// stubs and the real out-of-line definitions are different symbols: neither
// can replace the other at link time (one definition rule).
inline namespace cuda_off {
#endif

namespace cuda_detail {

// The matrices are the CPU model's own WeightMatrix views (host memory, the
// mapped file), so the bytes and names must live until the upload returns.
struct LayerUpload {
    const float* attn_norm = nullptr;  // [hidden]
    const float* ffn_norm = nullptr;   // [hidden]
    WeightMatrix q, k, v, o, gate, up, down;
};

// Everything CudaModel copies to the device, as plain data (so the .cu files
// never see the CPU model's headers).
struct ModelUpload {
    std::string source;  // names the model in messages
    size_t n_layers = 0, hidden = 0, ffn = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
    size_t rope_dims = 0, vocab_size = 0, context_length = 0, nope_interval = 4;
    float rope_freq_base = 0, rms_eps = 0;
    WeightMatrix token_embd, lm_head;
    const float* output_norm = nullptr;  // [hidden]
    std::vector<LayerUpload> layers;
    // Stored copies of matrices the CPU model holds interleaved (its load-time
    // layout, quant/weight_matrix.hpp): the device kernels read stored rows.
    std::vector<std::vector<uint8_t>> restored;

    // Points `w` at a stored copy of its bytes when they are interleaved.
    void restore(WeightMatrix& w) {
        if (w.interleaved_rows == 0) return;
        std::vector<uint8_t>& bytes = restored.emplace_back(w.rows * w.row_bytes);
        w.copy_stored(bytes.data());
        w.data = bytes.data();
        w.interleaved_rows = 0;
    }
};

// Reads a loaded model (smol::Model or smol::SmolLM3: anything with config(),
// weights() and file()) into a ModelUpload. A template so this header needs none of the
// CPU model's headers; the caller has included them.
template <class CpuModel>
ModelUpload describe(const CpuModel& model) {
    const auto& c = model.config();
    const auto& w = model.weights();
    ModelUpload m;
    m.source = model.file().source();
    m.n_layers = c.n_layers;
    m.hidden = c.hidden;
    m.ffn = c.ffn;
    m.n_heads = c.n_heads;
    m.n_kv_heads = c.n_kv_heads;
    m.head_dim = c.head_dim;
    m.rope_dims = c.rope_dims;
    m.vocab_size = c.vocab_size;
    m.context_length = c.context_length;
    m.nope_interval = c.nope_interval;
    m.rope_freq_base = c.rope_freq_base;
    m.rms_eps = c.rms_eps;
    m.token_embd = w.token_embd;
    m.lm_head = w.lm_head;
    m.output_norm = w.output_norm.data();
    for (const auto& l : w.layers) {
        m.layers.push_back(LayerUpload{l.attn_norm.data(), l.ffn_norm.data(), l.attn_q, l.attn_k,
                                       l.attn_v, l.attn_output, l.ffn_gate, l.ffn_up, l.ffn_down});
    }
    m.restore(m.token_embd);
    m.restore(m.lm_head);
    for (LayerUpload& l : m.layers)
        for (WeightMatrix* matrix : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down})
            m.restore(*matrix);
    return m;
}

struct ModelState;  // device weights (src/cuda/backend.cpp)
struct CacheState;  // device KV cache, stream, work buffers, decode graph

}  // namespace cuda_detail

// True when a CUDA device can be used; otherwise false with the reason in *why
// (no driver, no device, a build without SMOL_CUDA_ENABLED).
bool cuda_available(std::string* why = nullptr);

class CudaKVCache;

// The CUDA backend (model/backend.hpp): smol::Model makes one for
// LoadOptions::device cuda/automatic, and Generator drives it through the seam.
class CudaModel final : public Backend {
public:
    // Uploads the weights of `model` (a smol::Model or smol::SmolLM3) to device
    // `device`. The CPU model may be dropped afterwards.
    template <class CpuModel, class = decltype(std::declval<const CpuModel&>().weights())>
    explicit CudaModel(const CpuModel& model, int device = 0)
        : CudaModel(cuda_detail::describe(model), device) {}
    explicit CudaModel(const cuda_detail::ModelUpload& upload, int device = 0);
    ~CudaModel() override;
    CudaModel(CudaModel&&) noexcept;
    CudaModel& operator=(CudaModel&&) noexcept;
    CudaModel(const CudaModel&) = delete;
    CudaModel& operator=(const CudaModel&) = delete;

    // vocab_size(), context_length(), device() (Device::cuda): Backend's.
    int cuda_device() const noexcept;  // the CUDA device index
    std::string device_name() const;
    size_t weight_bytes() const noexcept;  // device memory held by the weights
    std::string name() const override;     // "cuda (NAME, device N)"

    // A cache for this model: n_ctx 0 picks min(4096, context length).
    CudaKVCache new_cache(size_t n_ctx = 0) const;
    // One segment through the seam (see the contract at the top of this file).
    using Backend::forward;
    void forward(const int32_t* tokens, size_t n, size_t start_pos, CudaKVCache& kv,
                 float* logits_host, bool all_logits = false) const;

protected:
    // The seam's make_cache / try_make_cache: F16 only (KVType::f32 is
    // Error(unsupported)); n_ctx kDefaultSize is the default, 0
    // Error(invalid_argument); the device bytes are held against
    // memory_budget like a CPU cache's.
    Expected<std::unique_ptr<BackendCache>> create_cache(size_t n_ctx, KVType type,
                                                         uint64_t memory_budget) const override;
    // One chunk: on its cache's stream (a one-token decode step replays the
    // cache's captured graph). Several chunks (a batched step): one pass over
    // all their tokens on the model's batch workspace and stream, each token
    // with its own position and cache; results equal, bit for bit, those of the
    // chunks run alone. SMOL_CUDA_BATCH=0 runs them one after another instead.
    Status forward_step(const Segment* chunks, size_t n_chunks,
                        const std::atomic<bool>* cancel) const override;

private:
    friend class CudaKVCache;
    std::shared_ptr<cuda_detail::ModelState> state_;
};

// The CUDA backend's cache. size(), n_ctx(), truncate() and clear() are
// BackendCache's (a moved-from cache is empty: truncate(0) is a no-op, more is
// an Error). serialize() copies the valid prefix device -> host in the portable
// format (F16); restore() takes F16 or F32 bytes (F32 rounded to F16) host ->
// device; clone() copies device -> device.
class CudaKVCache final : public BackendCache {
public:
    // n_ctx 0 picks min(4096, the model's context length); more than the context
    // length is Error(invalid_argument).
    explicit CudaKVCache(const CudaModel& model, size_t n_ctx = 0);
    ~CudaKVCache() override;
    CudaKVCache(CudaKVCache&&) noexcept;
    CudaKVCache& operator=(CudaKVCache&&) noexcept;
    CudaKVCache(const CudaKVCache&) = delete;
    CudaKVCache& operator=(const CudaKVCache&) = delete;

    size_t bytes() const noexcept;  // device memory of the K/V entries

    // Reads one stored row back as float: kind 0 keys (after RoPE), 1 values;
    // out[head_dim]. For tests (compare with the CPU KVCache::load_row).
    void load_row(size_t layer, int kind, size_t kv_head, size_t pos, float* out) const;

    std::vector<uint8_t> serialize() const override;
    void restore(const void* data, size_t bytes) override;
    std::unique_ptr<BackendCache> clone() const override;

private:
    friend class CudaModel;
    CudaKVCache(const std::shared_ptr<cuda_detail::ModelState>& model, size_t n_ctx);
    std::shared_ptr<cuda_detail::CacheState>
        state_;  // shared_ptr: the type may stay incomplete here
};

inline CudaKVCache CudaModel::new_cache(size_t n_ctx) const {
    return CudaKVCache(*this, n_ctx);
}

namespace cuda_detail {

// ---- Test hooks: each runs one GPU kernel on host data (tests/test_cuda.cpp
// compares them with the CPU reference). All need a device. ----

// y[t][r] = W[r] . x[t] for n_tokens tokens (1: the decode mat-vec, more: the
// prefill mat-mat), with x quantized to int8 blocks of 32 on the device.
// W: rows x cols of `type` (Q4_K, Q5_K, Q6_K, Q8_0), x: [n_tokens][cols].
void run_matmul(GGMLType type, const void* weights, size_t rows, size_t cols, const float* x,
                size_t n_tokens, float* y);
// out[t] = dequantized row tokens[t] of the table (any type dequantize_row_device handles).
void run_embed(GGMLType type, const void* table, size_t rows, size_t cols, const int32_t* tokens,
               size_t n_tokens, float* out);
// out[t] = rmsnorm(x[t]) * weight, and the int8 blocks of that dequantized into out_quantized.
void run_rmsnorm(const float* x, const float* weight, size_t n_tokens, size_t cols, float eps,
                 float* out, float* out_quantized);
// out = silu(gate) * up elementwise over n values (n a multiple of 32).
void run_swiglu(const float* gate, const float* up, size_t n, float* out);
// RoPE (adjacent pairs, theta = pos * base^(-2i/rope_dims)) on q [n][heads][head_dim] and
// k [n][kv_heads][head_dim] in place for positions start_pos.. (use_rope false: only copies).
void run_rope(float* q, float* k, size_t n_tokens, size_t n_heads, size_t n_kv_heads,
              size_t head_dim, size_t rope_dims, float freq_base, size_t start_pos, bool use_rope);
// Causal GQA attention of n_tokens queries at positions start_pos.. over keys/values
// [n_kv_heads][start_pos + n_tokens][head_dim] (rounded to F16 as the cache stores them):
// out [n_tokens][n_heads][head_dim].
void run_attention(const float* q, const float* keys, const float* values, size_t n_tokens,
                   size_t start_pos, size_t n_heads, size_t n_kv_heads, size_t head_dim,
                   float* out);

// ---- Host emulation (no device needed): the very per-thread code the matmul
// and embedding kernels run, executed on the CPU, so the block decoding can be
// checked on any machine. ----

// W_row . x with x quantized to int8 blocks of 32 as the GPU does (cols % 256 == 0
// for the k-quants, % 32 for Q8_0).
float emulate_dot(GGMLType type, const void* row, size_t cols, const float* x);
// The device's dequantization of one row.
void emulate_dequantize_row(GGMLType type, const void* row, size_t cols, float* out);
// The device's quantization of activations read by `weight_type` matrices:
// codes q[n] and one scale per 32 values, d[n / 32] (n a multiple of 32).
void emulate_quantize_activations(GGMLType weight_type, const float* x, size_t n, int8_t* q,
                                  float* d);

}  // namespace cuda_detail

#if !defined(SMOL_CUDA_ENABLED)
// A build that does not link smol::cuda: the seam still compiles and reports why
// nothing runs (every entry point is Error(unsupported)).
namespace cuda_detail {
inline ErrorInfo not_built_error() {
    return ErrorInfo{ErrorKind::unsupported,
                     "cuda: smol was built without its CUDA backend (configure with -DSMOL_CUDA=ON "
                     "and link smol::cuda)"};
}
[[noreturn]] inline void not_built() {
    detail::fail(not_built_error());
}
}  // namespace cuda_detail
inline bool cuda_available(std::string* why) {
    if (why) *why = "smol was built without its CUDA backend (SMOL_CUDA=OFF)";
    return false;
}
inline CudaModel::CudaModel(const cuda_detail::ModelUpload&, int) {
    cuda_detail::not_built();
}
inline CudaModel::~CudaModel() = default;
inline CudaModel::CudaModel(CudaModel&&) noexcept = default;
inline CudaModel& CudaModel::operator=(CudaModel&&) noexcept = default;
inline int CudaModel::cuda_device() const noexcept {
    return -1;
}
inline std::string CudaModel::device_name() const {
    return "none";
}
inline size_t CudaModel::weight_bytes() const noexcept {
    return 0;
}
inline std::string CudaModel::name() const {
    return "cuda (not built)";
}
inline Expected<std::unique_ptr<BackendCache>> CudaModel::create_cache(size_t, KVType,
                                                                       uint64_t) const {
    return cuda_detail::not_built_error();
}
inline void CudaModel::forward(const int32_t*, size_t, size_t, CudaKVCache&, float*, bool) const {
    cuda_detail::not_built();
}
inline Status CudaModel::forward_step(const Segment*, size_t, const std::atomic<bool>*) const {
    return cuda_detail::not_built_error();
}
inline CudaKVCache::CudaKVCache(const CudaModel&, size_t) {
    cuda_detail::not_built();
}
inline CudaKVCache::CudaKVCache(const std::shared_ptr<cuda_detail::ModelState>&, size_t) {
    cuda_detail::not_built();
}
inline CudaKVCache::~CudaKVCache() = default;
inline CudaKVCache::CudaKVCache(CudaKVCache&&) noexcept = default;
inline CudaKVCache& CudaKVCache::operator=(CudaKVCache&&) noexcept = default;
inline size_t CudaKVCache::bytes() const noexcept {
    return 0;
}
inline void CudaKVCache::load_row(size_t, int, size_t, size_t, float*) const {
    cuda_detail::not_built();
}
inline std::vector<uint8_t> CudaKVCache::serialize() const {
    cuda_detail::not_built();
}
inline void CudaKVCache::restore(const void*, size_t) {
    cuda_detail::not_built();
}
inline std::unique_ptr<BackendCache> CudaKVCache::clone() const {
    cuda_detail::not_built();
}
}  // inline namespace cuda_off
#endif

SMOL_NAMESPACE_END
