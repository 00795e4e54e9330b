// Host side of smol's CUDA backend (compiled by the C++ compiler, not nvcc:
// cmake/smolCuda.cmake says why): device discovery, the weight upload
// (CudaBackend), the per-session device state (CudaKVCache: F16 cache, stream,
// work buffers, decode graph) and the forward pass that strings the kernels of
// kernels.cu and matmul.cu together. The tests' hooks are in test_hooks.cpp,
// the device plumbing both use in device.hpp.
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
#include "env.hpp"
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
#include "device.hpp"
#include "kernels.cuh"
#include "state.hpp"

SMOL_NAMESPACE_BEGIN
namespace cuda_detail {

// Enqueues the whole forward pass of the m tokens staged in ws (already
// uploaded): ids, slots (position and sequence per token) and the sequences'
// caches. n_logit_rows 0: no LM head; else the logits of the tokens listed in
// ws's rows into out_logits [n_logit_rows][vocab].
void enqueue_forward(const ModelState& w, const Workspace& ws, size_t m, size_t n_logit_rows,
                     float* out_logits, cudaStream_t stream, const StepRuns* runs) {
    const int n = int(m), hidden = int(w.hidden), ffn = int(w.ffn);
    // One chunk: one run of each, by its own counts (no allocation).
    const TokenRun chunk_tokens = chunk_run(0, n);
    const TokenRun chunk_rows = chunk_run(0, int(n_logit_rows));
    const TokenRun* token_runs = runs ? runs->tokens.data() : &chunk_tokens;
    const int n_token_runs = runs ? int(runs->tokens.size()) : 1;
    const TokenRun* row_runs = runs ? runs->logit_rows.data() : &chunk_rows;
    const int n_row_runs = runs ? int(runs->logit_rows.size()) : 1;
    float* scratch = ws.partials.get<float>();
    auto matmul = [&](const DeviceMatrix& matrix, float* y, bool accumulate) {
        const MatmulTarget target{&matrix, y, accumulate};
        launch_matmuls(&target, 1, ws.act.get<ActBlock>(), token_runs, n_token_runs, scratch,
                       stream);
    };
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
        launch_matmuls(qkv, 3, a, token_runs, n_token_runs, scratch, stream);
        launch_rope_store(q, ws.k.get<float>(), ws.v.get<float>(), n, ws.device_slots(),
                          ws.device_seqs(), int(li), w.inverse_frequency, int(w.rope_pairs),
                          w.rope_mscale, l.uses_rope, int(w.n_heads), int(w.n_kv_heads),
                          int(w.head_dim), nullptr, stream);
        launch_attention_runs(q, ws.device_slots(), ws.device_seqs(), int(li), token_runs,
                              n_token_runs, int(w.n_heads), int(w.n_kv_heads), int(w.head_dim),
                              ws.attn.get<float>(), stream);
        launch_quantize(ws.attn.get<float>(), n, int(w.q_dim()), a, l.o_in, stream);
        matmul(l.o, x, true);

        launch_rmsnorm_quantize(x, l.ffn_norm, nullptr, n, hidden, w.rms_eps, a, nullptr,
                                l.gate_up_in, stream);
        const MatmulTarget gate_up[] = {{&l.gate, ws.gate.get<float>(), false},
                                        {&l.up, ws.up.get<float>(), false}};
        launch_matmuls(gate_up, 2, a, token_runs, n_token_runs, scratch, stream);
        launch_swiglu_quantize(ws.gate.get<float>(), ws.up.get<float>(), n, ffn, a, nullptr,
                               l.down_in, stream);
        matmul(l.down, x, true);
    }
    if (n_logit_rows == 0) return;
    launch_rmsnorm_quantize(x, w.output_norm, ws.device_rows(), int(n_logit_rows), hidden,
                            w.rms_eps, a, nullptr, w.lm_head_in, stream);
    const MatmulTarget head{&w.lm_head, out_logits, false};
    launch_matmuls(&head, 1, a, row_runs, n_row_runs, scratch, stream);
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

void CudaBackend::forward(const int32_t* tokens, size_t n, size_t start_pos, CudaKVCache& kv,
                          float* logits_host, bool all_logits) const {
    forward(Segment{tokens, n, start_pos, &kv, logits_host, all_logits});
}

namespace cuda_detail {
namespace {
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
    StepRuns runs;
    for (size_t i = 0; i < n_chunks; ++i) {
        stage_chunk(ws, chunks[i], *caches[i], i, token, row);
        token += chunks[i].n_tokens;
        row += logit_rows_of(chunks[i]);
        StepRuns::add(runs.tokens, int(chunks[i].n_tokens));
        StepRuns::add(runs.logit_rows, int(logit_rows_of(chunks[i])));
    }
    ws.upload(batch.stream);
    enqueue_forward(m, ws, tokens, rows, ws.logits.get<float>(), batch.stream, &runs);
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
SMOL_NAMESPACE_END
