// smol::SmolLM3: the forward pass of SmolLM3 over a bound GGUF file, with the
// quantized kernels. Prefill, single-token decode and batched decode of several
// sequences are one code path: a pass over m rows runs every layer as mat-mats
// (m = 1 is the decode mat-vec); each row is one token of some sequence, with
// its own position and its own KVCache (the caller owns the caches).
//
// clang-format off
// Per pass (x: residual stream [m][hidden]; row r: position pos_r, cache kv_r;
// the rows of one chunk are consecutive positions of one sequence); on the
// right, the step of run_pass that computes the lines:
//   x = token_embd rows                                                       embed
//   for each layer l:
//     a = rmsnorm(x) * attn_norm                         [m][hidden]          attention_block
//     q = Wq a [m][heads][head_dim], k = Wk a, v = Wv a  [m][kv_heads][head_dim]
//     RoPE(q, k) at pos_r on adjacent pairs, unless l is a NoPE layer ((l + 1) % 4 == 0)
//     kv_r[l][pos_r] = (k_r, v_r)
//     o[r][h] = sum_{p <= pos_r} softmax_p(q[r][h] . K_r[h / group][p] / sqrt(head_dim)) V_r[h / group][p]
//     x += Wo o
//     f = rmsnorm(x) * ffn_norm;  x += Wdown (silu(Wgate f) * Wup f)         mlp_block
//   logits = Wlm_head (rmsnorm(x) * output_norm)                              lm_head
//            for each chunk's last row (or all its rows)
// clang-format on
// The matrices are read once per pass whatever the number of sequences in it;
// decode is bound by reading them (and by unpacking them: the multi-row tiles
// unpack each weight block once for all rows), so a pass over N sequences costs
// far less than N passes.
// Each matrix input is quantized once (Q8_K32 for the K-quants, see
// kernels/activations.hpp); q/k/v and gate/up, which read the same input, each
// run as one matmul_batch.
// The work buffers of a pass (Workspace, model/detail/forward_workspace.hpp)
// come from a small pool the SmolLM3 keeps (WorkspacePool): once warm, a decode
// step allocates nothing. Each step opens a timing zone (model/forward_zones.hpp).
//
// CpuBackend (model/cpu_backend.hpp, included at the end) puts this forward
// pass behind the backend seam of model/backend.hpp; forward() below is that
// seam over one segment, so the argument checks and the chunking exist once,
// in Backend::forward.
//
// Contract of forward(tokens, n, start_pos, kv, logits, pool, options):
//   - start_pos <= kv.size() (positions from start_pos on are overwritten) and
//     start_pos + n <= kv.n_ctx(), else smol::Error(out_of_range); n == 0, a
//     token outside the vocabulary or a cache of another geometry is
//     Error(invalid_argument). Nothing is changed when these checks fail.
//   - logits: [vocab] for the last position, or [n][vocab] with all_logits.
//   - Cancellation: options.cancel is read between layers; once set, forward
//     fails with Error(cancelled). Then, as after any error, kv.size() covers
//     exactly the chunks that completed (start_pos + k * chunk_size).
//   - Results do not depend on the thread count, the chunk size or which
//     sequences share a pass beyond float rounding of the multi-row tiles (the
//     kernels never split a reduction).
// Many threads may call forward on one SmolLM3 at once with different caches
// (jobs queue on a shared pool).
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../core/fp16.hpp"
#include "../core/threadpool.hpp"
#include "../detail/aligned.hpp"
#include "../error.hpp"
#include "../gguf/gguf.hpp"
#include "../kernels/kernels.hpp"
#include "backend.hpp"
#include "config.hpp"
#include "detail/forward_workspace.hpp"
#include "forward_zones.hpp"
#include "kv_cache.hpp"
#include "weights.hpp"

SMOL_NAMESPACE_BEGIN
class SmolLM3 {
public:
    // Reads the config and binds the weights of `file` (kept alive by the model);
    // every op runs with `kernel_set` (kernels/dispatch.hpp). try_create
    // returns the errors of Config::try_from_gguf and Weights::try_bind as a
    // value; the constructor throws them.
    explicit SmolLM3(std::shared_ptr<const gguf::File> file,
                     const kernels::KernelSet& kernel_set = kernels::default_kernels())
        : SmolLM3(detail::value_or_fail(try_create(std::move(file), kernel_set))) {}
    static Expected<SmolLM3> try_create(
        std::shared_ptr<const gguf::File> file,
        const kernels::KernelSet& kernel_set = kernels::default_kernels()) {
        SMOL_TRY_ASSIGN(Config config, Config::try_from_gguf(*file));
        SMOL_TRY_ASSIGN(Weights weights, Weights::try_bind(*file, config));
        return SmolLM3(std::move(file), std::move(config), std::move(weights), kernel_set);
    }

    const Config& config() const noexcept { return config_; }
    const Weights& weights() const noexcept { return weights_; }
    const gguf::File& file() const noexcept { return *file_; }
    const kernels::KernelSet& kernels() const noexcept { return *kernels_; }
    // Runs every op with `kernel_set` from now on: one of kernels().level with
    // other speed-only settings (kernels/dispatch.hpp, kernel_set(level, params)),
    // so the results stay the same bits. For the load, before any pass runs.
    void use_kernels(const kernels::KernelSet& kernel_set) noexcept { kernels_ = &kernel_set; }
    // How positions are encoded into queries and keys (RoPE or YaRN).
    const RopeRule& rope() const noexcept { return rope_; }
    const std::shared_ptr<const gguf::File>& file_ptr() const noexcept { return file_; }

    // Moves the layers' matrices (and an untied LM head) whose type kernels()
    // has interleaved tiles for (KernelSet::interleaves) into one buffer in the
    // interleaved layout (quant/weight_matrix.hpp), and lets the file's pages
    // of them leave the resident set, so the weights stay in memory once.
    // Same results; decode streams them faster. Returns the bytes moved: 0
    // when nothing qualifies, when they would pass `budget` bytes (0: no
    // limit) or when the buffer cannot be allocated (the rows then stay as
    // stored; *wanted, if given, says how many bytes would have moved). The
    // token embedding stays as stored (embed reads its rows).
    size_t interleave_weights(ThreadPool& pool, uint64_t budget = 0, size_t* wanted = nullptr) {
        std::vector<WeightMatrix*> matrices;
        auto consider = [&](WeightMatrix& w) {
            if (w.interleaved_rows == 0 && w.rows >= kInterleaveRows &&
                kernels_->interleaves(w.type) && can_interleave(w.row_bytes))
                matrices.push_back(&w);
        };
        for (LayerWeights& l : weights_.layers)
            for (WeightMatrix* w : {&l.attn_q, &l.attn_k, &l.attn_v, &l.attn_output, &l.ffn_gate,
                                    &l.ffn_up, &l.ffn_down})
                consider(*w);
        if (!weights_.tied_embeddings) consider(weights_.lm_head);
        size_t total = 0;
        for (const WeightMatrix* w : matrices) total += w->rows * w->row_bytes;
        if (wanted) *wanted = total;
        if (total == 0 || (budget != 0 && total > budget)) return 0;
        uint8_t* buffer = static_cast<uint8_t*>(detail::aligned_allocate_or_null(total));
        if (buffer == nullptr) return 0;
        interleaved_.reset(buffer, detail::AlignedDelete());
        detail::advise_huge_pages(buffer, total);
        for (WeightMatrix* w : matrices) {
            const WeightMatrix copy = w->interleaved_copy(buffer, [&](size_t n, auto&& write) {
                pool.parallel_for(n, [&](size_t begin, size_t end, int) { write(begin, end); });
            });
            file_->mapping().release_pages(w->data, w->rows * w->row_bytes);
            buffer += w->rows * w->row_bytes;
            *w = copy;
        }
        return total;
    }

    // See the contract at the top of this file. The checks and the chunking
    // are Backend::forward's (model/backend.hpp): this runs a CpuBackend made
    // on the spot (a few words on the stack) over one segment.
    void forward(const int32_t* tokens, size_t n, size_t start_pos, KVCache& kv, float* logits,
                 ThreadPool& pool, const ForwardOptions& options = {}) const;

private:
    friend class CpuBackend;

    // One row of a pass (a token, its position and cache) and the work
    // buffers of a pass with their pool: the run state
    // (model/detail/forward_workspace.hpp).
    using Row = detail::ForwardRow;
    using Workspace = detail::ForwardWorkspace;
    using WorkspacePool = detail::ForwardWorkspacePool;

    // What one row of a pass takes in a workspace's row buffers (the logits aside).
    size_t workspace_bytes_per_row() const noexcept {
        const Config& c = config_;
        return sizeof(Row) + sizeof(float) * (3 * c.hidden + 2 * c.q_dim() + 2 * c.kv_dim() +
                                              2 * c.ffn + 2 * rope_.pairs());
    }

    // v holds at least n elements afterwards; never shrinks (see Workspace).
    template <class T>
    static T* grow(std::vector<T>& v, size_t n) {
        if (v.size() < n) v.resize(n);
        return v.data();
    }

    // A workspace from the pool for one scope (a backend step of `rows` rows).
    class WorkspaceLease {
    public:
        WorkspaceLease(const SmolLM3& net, size_t rows)
            : pool_(*net.workspaces_),
              workspace_(pool_.take(*net.kernels_, rows * net.workspace_bytes_per_row())) {}
        ~WorkspaceLease() { pool_.give_back(std::move(workspace_)); }
        WorkspaceLease(const WorkspaceLease&) = delete;
        WorkspaceLease& operator=(const WorkspaceLease&) = delete;
        Workspace& operator*() const noexcept { return *workspace_; }

    private:
        WorkspacePool& pool_;
        std::unique_ptr<Workspace> workspace_;
    };

    SmolLM3(std::shared_ptr<const gguf::File> file, Config config, Weights weights,
            const kernels::KernelSet& kernel_set)
        : file_(std::move(file)),
          config_(std::move(config)),
          weights_(std::move(weights)),
          kernels_(&kernel_set),
          rope_(config_),
          workspaces_(std::make_shared<WorkspacePool>()) {}

    // One pass over every row of `chunks` (distinct caches, as the seam checked):
    // the matrices read once for all of them. Error(cancelled) when *cancel is
    // set between layers (the chunks' K/V are then partly written: the seam
    // does not count them).
    Status run_pass(const Segment* chunks, size_t n_chunks, ThreadPool& pool,
                    const std::atomic<bool>* cancel, Workspace& s) const {
        s.zones = detail::forward_zone_times;
        if (s.zones) ++s.zones->passes;
        size_t m = 0;
        for (size_t i = 0; i < n_chunks; ++i) m += chunks[i].n_tokens;

        // Each chunk's rows are one sequence; batching leaves a sequence's
        // numbers as they are alone (QuantizedInput::set_sequences).
        s.sequence_sizes.resize(n_chunks);
        for (size_t i = 0; i < n_chunks; ++i) s.sequence_sizes[i] = chunks[i].n_tokens;
        s.input.set_sequences(s.sequence_sizes.data(), n_chunks);

        embed(chunks, n_chunks, m, s);
        for (size_t li = 0; li < config_.n_layers; ++li) {
            if (cancel && cancel->load(std::memory_order_relaxed))
                return Status(ErrorKind::cancelled, "forward: cancelled");
            attention_block(li, m, pool, s);
            mlp_block(li, m, pool, s);
        }
        if (cancel && cancel->load(std::memory_order_relaxed))
            return Status(ErrorKind::cancelled, "forward: cancelled");
        lm_head(chunks, n_chunks, pool, s);
        return {};
    }

    // x = the token embedding rows; each row's cache and position; the RoPE
    // table of their positions. Sizes the row buffers for m rows.
    void embed(const Segment* chunks, size_t n_chunks, size_t m, Workspace& s) const {
        const detail::ZoneTimer zone(s.zones, ForwardZone::embed);
        const Config& c = config_;
        Row* rows = grow(s.rows, m);
        grow(s.x, m * c.hidden);
        grow(s.normed, m * c.hidden);
        grow(s.q, m * c.q_dim());
        grow(s.k, m * c.kv_dim());
        grow(s.v, m * c.kv_dim());
        grow(s.attn, m * c.q_dim());
        grow(s.out, m * c.hidden);
        grow(s.gate, m * c.ffn);
        grow(s.up, m * c.ffn);
        for (size_t i = 0, r = 0; i < n_chunks; ++i) {
            const Segment& chunk = chunks[i];
            // The seam checked that every cache is a KVCache (device cpu, the CPU owner tag).
            KVCache* kv = static_cast<KVCache*>(chunk.cache);
            for (size_t t = 0; t < chunk.n_tokens; ++t, ++r) {
                rows[r] = Row{kv, chunk.start + t};
                weights_.embed(chunk.tokens[t], &s.x[r * c.hidden]);
            }
        }
        rope_table(rows, m, s);
    }

    // x += Wo attention(q, k, v), from a = rmsnorm(x) * attn_norm (top of this file).
    void attention_block(size_t li, size_t m, ThreadPool& pool, Workspace& s) const {
        const Config& c = config_;
        const LayerWeights& lw = weights_.layers[li];
        const size_t q_dim = c.q_dim(), kv_dim = c.kv_dim();
        rmsnorm_rows(s.x.data(), lw.attn_norm.data(), s.normed.data(), m, s);
        const MatmulJob qkv[3] = {{lw.attn_q, s.q.data(), q_dim},
                                  {lw.attn_k, s.k.data(), kv_dim},
                                  {lw.attn_v, s.v.data(), kv_dim}};
        linear(ForwardZone::attn_qkv, qkv, 3, s.normed.data(), m, c.hidden, pool, s);
        if (c.layer_uses_rope(li)) {
            const detail::ZoneTimer zone(s.zones, ForwardZone::rope);
            for (size_t r = 0; r < m; ++r) {
                for (size_t h = 0; h < c.n_heads; ++h) rope(&s.q[r * q_dim + h * c.head_dim], r, s);
                for (size_t h = 0; h < c.n_kv_heads; ++h)
                    rope(&s.k[r * kv_dim + h * c.head_dim], r, s);
            }
        }
        {
            const detail::ZoneTimer zone(s.zones, ForwardZone::kv_store);
            for (size_t r = 0; r < m; ++r)
                s.rows[r].kv->store(li, s.rows[r].pos, &s.k[r * kv_dim], &s.v[r * kv_dim]);
        }
        attention(li, s.rows.data(), m, pool, s);
        const MatmulJob o{lw.attn_output, s.out.data(), c.hidden};
        linear(ForwardZone::attn_output, &o, 1, s.attn.data(), m, q_dim, pool, s);
        add_residual(m, s);
    }

    // x += Wdown (silu(Wgate f) * Wup f), f = rmsnorm(x) * ffn_norm: the SwiGLU MLP.
    void mlp_block(size_t li, size_t m, ThreadPool& pool, Workspace& s) const {
        const Config& c = config_;
        const LayerWeights& lw = weights_.layers[li];
        rmsnorm_rows(s.x.data(), lw.ffn_norm.data(), s.normed.data(), m, s);
        const MatmulJob gate_up[2] = {{lw.ffn_gate, s.gate.data(), c.ffn},
                                      {lw.ffn_up, s.up.data(), c.ffn}};
        linear(ForwardZone::ffn_gate_up, gate_up, 2, s.normed.data(), m, c.hidden, pool, s);
        {
            const detail::ZoneTimer zone(s.zones, ForwardZone::swiglu);
            kernels_->swiglu(s.gate.data(), s.up.data(), s.gate.data(), m * c.ffn);
        }
        const MatmulJob down{lw.ffn_down, s.out.data(), c.hidden};
        linear(ForwardZone::ffn_down, &down, 1, s.gate.data(), m, c.ffn, pool, s);
        add_residual(m, s);
    }

    // out[r] = rmsnorm(x[r]) * weight for m rows of [hidden].
    void rmsnorm_rows(const float* x, const float* weight, float* out, size_t m,
                      Workspace& s) const {
        const detail::ZoneTimer zone(s.zones, ForwardZone::rmsnorm);
        const size_t hidden = config_.hidden;
        for (size_t r = 0; r < m; ++r)
            kernels_->rmsnorm(x + r * hidden, weight, out + r * hidden, hidden, config_.rms_eps);
    }

    // x += out over the pass's m rows.
    void add_residual(size_t m, Workspace& s) const {
        const detail::ZoneTimer zone(s.zones, ForwardZone::residual);
        float* x = s.x.data();
        const float* out = s.out.data();
        for (size_t i = 0; i < m * config_.hidden; ++i) x[i] += out[i];
    }

    // y_j = W_j x for matrices that read the same input x [m][cols] (q/k/v,
    // gate/up, or one matrix): the one way the pass multiplies by a weight
    // matrix. x is quantized once per activation format and the matrices
    // wanting that format run as one matmul_batch (one pool wake-up and barrier
    // for all of them). With the K-quants sharing Q8_K32, a Q4_K_M layer's q, k
    // and v are one batch. The quantization counts in zone `quantize`, the
    // products in `zone`.
    static void linear(ForwardZone zone, const MatmulJob* jobs, size_t n_jobs, const float* x,
                       size_t m, size_t cols, ThreadPool& pool, Workspace& s) {
        constexpr size_t kMaxJobs = 4;
        bool done[kMaxJobs] = {};
        for (size_t i = 0; i < n_jobs; ++i) {
            if (done[i]) continue;
            const ActivationType format = activation_type_for(jobs[i].w.type);
            MatmulJob batch[kMaxJobs];
            size_t n_batch = 0;
            for (size_t j = i; j < n_jobs; ++j) {
                if (done[j] || activation_type_for(jobs[j].w.type) != format) continue;
                batch[n_batch++] = jobs[j];
                done[j] = true;
            }
            {
                const detail::ZoneTimer timer(s.zones, ForwardZone::quantize);
                s.input.quantize(jobs[i].w.type, x, m, cols, &pool);
            }
            const detail::ZoneTimer timer(s.zones, zone);
            matmul_batch(batch, n_batch, s.input, pool, s.matmul);
            if (s.zones)
                for (size_t j = 0; j < n_batch; ++j)
                    s.zones->weight_bytes[size_t(zone)] +=
                        double(batch[j].w.rows) * double(batch[j].w.row_bytes);
        }
    }

    // The LM head over the rows whose logits were asked for (a chunk's last
    // row, or all of them with all_logits), as one mat-mat: the head is the
    // largest matrix, read once per pass however many chunks want logits.
    void lm_head(const Segment* chunks, size_t n_chunks, ThreadPool& pool, Workspace& s) const {
        const size_t hidden = config_.hidden, vocab = config_.vocab_size;
        size_t wanted = 0, n_wanting = 0;
        float* only = nullptr;  // the logits of the one chunk that wants them
        s.sequence_sizes.clear();
        for (size_t i = 0, first = 0; i < n_chunks; first += chunks[i].n_tokens, ++i) {
            const Segment& chunk = chunks[i];
            if (!chunk.logits) continue;
            s.sequence_sizes.push_back(chunk.all_logits ? chunk.n_tokens : 1);
            const size_t from = chunk.all_logits ? 0 : chunk.n_tokens - 1;
            rmsnorm_rows(&s.x[(first + from) * hidden], weights_.output_norm.data(),
                         &s.normed[wanted * hidden], chunk.n_tokens - from, s);
            wanted += chunk.n_tokens - from;
            ++n_wanting;
            only = chunk.logits;
        }
        if (wanted == 0) return;
        s.input.set_sequences(s.sequence_sizes.data(), s.sequence_sizes.size());
        if (n_wanting == 1) {  // rows [wanted][vocab] are that chunk's buffer: no copy (every
                               // decode of one sequence)
            const MatmulJob head{weights_.lm_head, only, vocab};
            linear(ForwardZone::lm_head, &head, 1, s.normed.data(), wanted, hidden, pool, s);
            return;
        }
        // Each chunk's logits live in its own buffer, and a tile writes its
        // columns at one stride: [wanted][vocab] here, then copied out.
        const MatmulJob head{weights_.lm_head, grow(s.logits, wanted * vocab), vocab};
        linear(ForwardZone::lm_head, &head, 1, s.normed.data(), wanted, hidden, pool, s);
        const detail::ZoneTimer zone(s.zones, ForwardZone::lm_head);
        const float* from = s.logits.data();
        for (size_t i = 0; i < n_chunks; ++i) {
            const Segment& chunk = chunks[i];
            if (!chunk.logits) continue;
            const size_t n = (chunk.all_logits ? chunk.n_tokens : 1) * vocab;
            std::memcpy(chunk.logits, from, n * sizeof(float));
            from += n;
        }
    }

    // The rotation encoding each row's position (model/rope.hpp: RoPE, or
    // YaRN's): [m][rope_dims / 2].
    void rope_table(const Row* rows, size_t m, Workspace& s) const {
        const size_t pairs = rope_.pairs();
        grow(s.rope_cos, m * pairs);
        grow(s.rope_sin, m * pairs);
        for (size_t r = 0; r < m; ++r)
            rope_.encode(rows[r].pos, &s.rope_cos[r * pairs], &s.rope_sin[r * pairs]);
    }

    // Rotates the pairs (v[2i], v[2i+1]), i < rope_dims / 2, of one head of row r.
    void rope(float* v, size_t r, const Workspace& s) const noexcept {
        const size_t pairs = rope_.pairs();
        kernels_->rope(v, &s.rope_cos[r * pairs], &s.rope_sin[r * pairs], pairs);
    }

    // s.attn[r][h] for the pass's m rows, each against its own cache up to its
    // own position (causal). Work items are (row, kv head): the `group` query
    // heads that share a KV head are scored together, so each key and value row
    // is read once per group (GQA), not once per query head.
    void attention(size_t layer, const Row* rows, size_t m, ThreadPool& pool, Workspace& s) const {
        const detail::ZoneTimer zone(s.zones, ForwardZone::attention);
        const Config& c = config_;
        const size_t hd = c.head_dim, q_dim = c.q_dim(), group = c.heads_per_kv();
        size_t max_positions = 0, total_positions = 0, max_ctx = 0;
        for (size_t r = 0; r < m; ++r) {
            max_positions = std::max(max_positions, rows[r].pos + 1);
            total_positions += rows[r].pos + 1;
            max_ctx = std::max(max_ctx, rows[r].kv->n_ctx());
        }
        const float scale = 1.0f / std::sqrt(float(hd));
        const size_t per_thread = group * max_positions;  // scores [group][positions]
        // Sized for the caches' whole context at once, so that the decode
        // steps that follow, one position longer each, never grow them (a few
        // hundredths of the size of one cache).
        float* scores = grow(s.scores, size_t(pool.size()) * group * max_ctx);
        auto work = [&](size_t begin, size_t end, int thread) {
            kernels::AttentionHead head;
            head.group = group;
            head.head_dim = hd;
            head.scale = scale;
            head.scores = scores + size_t(thread) * per_thread;
            for (size_t item = begin; item < end; ++item) {
                const size_t r = item / c.n_kv_heads, kv_head = item % c.n_kv_heads;
                const KVCache& kv = *rows[r].kv;  // the rows of one pass may mix element types
                head.row_bytes = kv.row_bytes();
                head.format = kv.type() == KVType::f16    ? kernels::CacheFormat::f16
                              : kv.type() == KVType::q8_0 ? kernels::CacheFormat::q8_0
                                                          : kernels::CacheFormat::f32;
                head.n_positions = rows[r].pos + 1;
                head.q = &s.q[r * q_dim + kv_head * group * hd];       // [group][hd]
                head.out = &s.attn[r * q_dim + kv_head * group * hd];  // [group][hd]
                head.blocks = kv.block_table();
                head.block_shift = KVCache::block_shift();
                head.keys_offset = kv.stream_offset(layer, KVPart::keys, kv_head);
                head.values_offset = kv.stream_offset(layer, KVPart::values, kv_head);
                kernels_->attend(head);
            }
        };
        const size_t items = m * c.n_kv_heads;
        if (pool.size() > 1 && total_positions * c.n_kv_heads * hd * group >= 32768)
            pool.parallel_for(items, work);
        else
            work(0, items, 0);
    }

    std::shared_ptr<const gguf::File> file_;
    Config config_;
    Weights weights_;  // the matrices the forward reads: views into *file_ or interleaved_
    std::shared_ptr<uint8_t> interleaved_;  // interleave_weights' buffer, if it ran
    const kernels::KernelSet* kernels_;     // static storage (kernels/dispatch.hpp)
    RopeRule rope_;                         // position encoding (model/rope.hpp)
    // The passes' work buffers; shared by copies of this SmolLM3 (the pool is
    // thread-safe and its workspaces hold nothing but scratch).
    std::shared_ptr<WorkspacePool> workspaces_;
};

SMOL_NAMESPACE_END

// CpuBackend, which SmolLM3::forward runs on the spot.
#include "cpu_backend.hpp"
