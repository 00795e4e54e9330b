// smol's optional CUDA backend: the narrow host seam, for programs linked with
// smol::cuda (CMake option SMOL_CUDA=ON), which defines SMOL_CUDA_ENABLED=1
// for whoever links it. Compiles with any C++17 compiler and no CUDA headers:
// declarations and plain C++ only; the kernels live in src/cuda/kernels.cu
// (nvcc) and their host glue in src/cuda/backend.cpp (the C++ compiler). The
// model layer never includes this header: a program hands the backend to the
// Model through its factory,
//
//   smol::LoadOptions options;
//   options.device = smol::Device::cuda;            // or automatic
//   options.device_backend = smol::cuda_backend();  // this header
//   auto model = smol::Model::load("model.gguf", options);
//
// and every Generator on that model then runs on the GPU. Directly:
//
//   smol::CudaBackend gpu(*model);                 // uploads the weights once
//   smol::CudaKVCache kv(gpu);                     // one per session (F16, on the GPU)
//   std::vector<float> logits(gpu.vocab_size());
//   gpu.forward(ids.data(), ids.size(), 0, kv, logits.data());   // prefill
//   gpu.forward(&next, 1, ids.size(), kv, logits.data());        // decode (a CUDA graph)
//
// What lives on the GPU: every weight matrix packed exactly as in the file
// (Q4_K, Q5_K, Q6_K, Q8_0; other matrix types are Error(unsupported) naming the
// tensor), norms as F32, the KV cache as F16 in the CPU KVCache's layout
// (one [n_ctx][head_dim] block per (layer, K or V, kv head)), the work
// buffers of one chunk per cache, and one batch workspace per backend, grown to
// the largest batched step seen (about 130 KiB per token and 500 KiB per row
// of logits for the 3B shape; not counted against memory_budget). Only the
// logits come back to the host. Activations are quantized to int8 blocks of 32
// with the CPU path's rounding (kernels/activations.hpp: Q8_K32 for K-quant
// matrices, Q8_0 for Q8_0), so both backends compute the codes the reference
// engine computes.
//
// CudaBackend is a smol::Backend and CudaKVCache a smol::BackendCache
// (model/backend.hpp): forward() is the seam's Backend::forward, so its checks
// and chunking (512 tokens by default and at most) are the CPU's: start_pos <=
// kv.size() and start_pos + n <= kv.n_ctx() (else Error(out_of_range)); n == 0
// or a token outside the vocabulary is Error(invalid_argument); logits are
// [vocab] for the last position or [n][vocab] with all_logits. Cancellation
// is seen between chunks. A cache serializes to the portable format, so
// sessions move between CPU and GPU generators of one model. A CudaBackend may
// be shared by threads that each use their own CudaKVCache (each cache owns a
// CUDA stream, its work buffers and its decode graph; batched steps of several
// caches take the backend's batch workspace one step at a time); a cache keeps
// its backend's device state alive.
//
// Errors: smol::Error. No device is ErrorKind::unsupported with the reason; a
// failing CUDA call is ErrorKind::internal naming the call and CUDA's message.
#pragma once

#if !defined(SMOL_CUDA_ENABLED)
#error \
    "smol/cuda/backend.hpp is for programs linked with smol::cuda (configure smol with -DSMOL_CUDA=ON and target_link_libraries(... smol::cuda)); a CPU-only program leaves it out"
#endif

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
#include "../model/rope.hpp"
#include "../quant/types.hpp"
#include "../quant/weight_matrix.hpp"

SMOL_NAMESPACE_BEGIN

namespace cuda_detail {

// The matrices are the CPU model's own WeightMatrix views (host memory, the
// mapped file), so the bytes and names must live until the upload returns.
struct LayerUpload {
    const float* attn_norm = nullptr;  // [hidden]
    const float* ffn_norm = nullptr;   // [hidden]
    WeightMatrix q, k, v, o, gate, up, down;
};

// Everything CudaBackend copies to the device, as plain data (so the .cu files
// never see the CPU model's headers).
struct ModelUpload {
    std::string source;  // names the model in messages
    size_t n_layers = 0, hidden = 0, ffn = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
    size_t rope_dims = 0, vocab_size = 0, context_length = 0, nope_interval = 4;
    float rope_freq_base = 0, rms_eps = 0;
    std::vector<double> rope_frequency;  // [rope_dims / 2]: RopeRule::frequency (model/rope.hpp)
    float rope_mscale = 1.0f;            // RopeRule::mscale (YaRN)
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
    const RopeRule rope(c);
    for (size_t i = 0; i < rope.pairs(); ++i) m.rope_frequency.push_back(rope.frequency(i));
    m.rope_mscale = rope.mscale();
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
// (no driver, no device).
bool cuda_available(std::string* why = nullptr);

// The CUDA backend's factory for LoadOptions::device_backend (model/backend.hpp):
// cuda_available, and a CudaBackend over the network with the errors of its
// upload as a value. smol::cuda is built with exceptions, so a -fno-exceptions
// unit (another ABI tag, detail/abi.hpp) cannot link it.
DeviceBackendFactory cuda_backend();

class CudaKVCache;

// The CUDA backend (model/backend.hpp): smol::Model makes one for
// LoadOptions::device cuda/automatic, and Generator drives it through the seam.
class CudaBackend final : public Backend {
public:
    // Uploads the weights of `model` (a smol::Model or smol::SmolLM3) to device
    // `device`. The CPU model may be dropped afterwards.
    template <class CpuModel, class = decltype(std::declval<const CpuModel&>().weights())>
    explicit CudaBackend(const CpuModel& model, int device = 0)
        : CudaBackend(cuda_detail::describe(model), device) {}
    explicit CudaBackend(const cuda_detail::ModelUpload& upload, int device = 0);
    ~CudaBackend() override;
    CudaBackend(CudaBackend&&) noexcept;
    CudaBackend& operator=(CudaBackend&&) noexcept;
    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;

    // vocab_size(), context_length(), device() (Device::cuda): Backend's.
    int cuda_device() const noexcept;  // the CUDA device index
    std::string device_name() const;
    size_t weight_bytes() const noexcept;  // device memory held by the weights
    std::string name() const override;     // "cuda (NAME, device N)"

    // One segment through the seam (see the contract at the top of this file).
    using Backend::forward;
    void forward(const int32_t* tokens, size_t n, size_t start_pos, CudaKVCache& kv,
                 float* logits_host, bool all_logits = false) const;

protected:
    // The seam's make_cache / try_make_cache: F16 only (KVType::f32 and q8_0
    // are Error(unsupported)); n_ctx kDefaultSize is the default, 0
    // Error(invalid_argument); the device bytes are held against
    // memory_budget like a CPU cache's.
    Expected<std::unique_ptr<BackendCache>> do_make_cache(size_t n_ctx, KVType type,
                                                          uint64_t memory_budget) const override;
    // One chunk: on its cache's stream (a one-token decode step replays the
    // cache's captured graph). Several chunks (a batched step): one pass over
    // all their tokens on the model's batch workspace and stream, each token
    // with its own position and cache; results equal, bit for bit, those of the
    // chunks run alone. SMOL_CUDA_BATCH=0 runs them one after another instead.
    Status forward_step(const Segment* chunks, size_t n_chunks,
                        const std::atomic<bool>* cancel) const override;
    // Backend::erase on the device: the moved rows of every block go through a
    // scratch copy (the ranges overlap), the RoPE layers' keys rotated there
    // with the CPU's arithmetic (src/cuda/blocks.cuh shift_pair).
    Status do_erase(BackendCache& cache, size_t first, size_t count) const override;

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
    // n_ctx kDefaultSize picks min(4096, the model's context length); 0 or
    // more than the context length is Error(invalid_argument).
    explicit CudaKVCache(const CudaBackend& backend, size_t n_ctx = kDefaultSize);
    ~CudaKVCache() override;
    CudaKVCache(CudaKVCache&&) noexcept;
    CudaKVCache& operator=(CudaKVCache&&) noexcept;
    CudaKVCache(const CudaKVCache&) = delete;
    CudaKVCache& operator=(const CudaKVCache&) = delete;

    size_t bytes() const noexcept;                 // device memory of the K/V entries
    CacheMemory memory() const noexcept override;  // {bytes(), 0}

    // Reads one stored row back as float (keys after RoPE): out[head_dim]. For
    // tests (compare with the CPU KVCache::load_row).
    void load_row(size_t layer, KVPart part, size_t kv_head, size_t pos, float* out) const;

    std::vector<uint8_t> serialize() const override;
    void restore(const void* data, size_t bytes) override;
    std::unique_ptr<BackendCache> clone() const override;

private:
    friend class CudaBackend;
    CudaKVCache(const std::shared_ptr<cuda_detail::ModelState>& model, size_t n_ctx);
    std::shared_ptr<cuda_detail::CacheState>
        state_;  // shared_ptr: the type may stay incomplete here
};

SMOL_NAMESPACE_END
