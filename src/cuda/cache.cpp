// The session side of the CUDA backend: CudaKVCache (an F16 cache on the
// device with its stream, work buffers and decode graph: CacheState in
// state.hpp), its serialization, clones, row access, and the erase that
// re-rotates the moved keys on the device.
#include <smol/detail/abi.hpp>
#include <smol/cuda/backend.hpp>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "state.hpp"

SMOL_NAMESPACE_BEGIN

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

SMOL_NAMESPACE_END
