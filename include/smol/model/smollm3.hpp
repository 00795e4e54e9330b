// smol::SmolLM3: the forward pass of SmolLM3 over a bound GGUF file, with the
// quantized kernels. Prefill, single-token decode and batched decode of several
// sequences are one code path: a pass over m rows runs every layer as mat-mats
// (m = 1 is the decode mat-vec); each row is one token of some sequence, with
// its own position and its own KVCache (the caller owns the caches).
//
// Per pass (x: residual stream [m][hidden]; row r: position pos_r, cache kv_r;
// the rows of one chunk are consecutive positions of one sequence):
//   x = token_embd rows
//   for each layer l:
//     a = rmsnorm(x) * attn_norm                       [m][hidden]
//     q = Wq a [m][heads][head_dim], k = Wk a, v = Wv a [m][kv_heads][head_dim]
//     RoPE(q, k) at pos_r on adjacent pairs, unless l is a NoPE layer ((l + 1) % 4 == 0)
//     kv_r[l][pos_r] = (k_r, v_r)
//     o[r][h] = sum_{p <= pos_r} softmax_p(q[r][h] . K_r[h / group][p] / sqrt(head_dim)) V_r[h /
//     group][p] x += Wo o f = rmsnorm(x) * ffn_norm;  x += Wdown (silu(Wgate f) * Wup f)
//   logits = lm_head (rmsnorm(x) * output_norm)  for each chunk's last row (or all its rows)
// The matrices are read once per pass whatever the number of sequences in it;
// decode is bound by reading them (and by unpacking them: the multi-row tiles
// unpack each weight block once for all rows), so a pass over N sequences costs
// far less than N passes.
// Each matrix input is quantized once (Q8_K32 for the K-quants, see
// kernels/activations.hpp); q/k/v and gate/up, which read the same input, each
// run as one matmul_batch.
//
// CpuBackend (end of file) puts this forward pass behind the backend seam of
// model/backend.hpp; forward() below is that seam over one segment, so the
// argument checks and the chunking exist once, in Backend::forward.
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

    // One row of a step: a token at position `pos` of the sequence whose keys
    // and values live in *kv.
    struct Row {
        KVCache* kv;
        size_t pos;
    };

    // Work buffers of one forward_step, sized for its largest pass.
    struct Scratch {
        explicit Scratch(const kernels::KernelSet& k) : input(k) {}
        // [m] rows; a decode step of up to kInlineRows sequences takes no allocation for them.
        Row* rows(size_t m) {
            if (m <= kInlineRows) return inline_rows;
            heap_rows.resize(m);
            return heap_rows.data();
        }
        static constexpr size_t kInlineRows = 16;
        Row inline_rows[kInlineRows];
        std::vector<Row> heap_rows;
        std::vector<float> x, normed, q, k, v, attn, out, gate, up, scores, rope_cos, rope_sin,
            logits;
        std::vector<size_t> sequence_sizes;  // rows per chunk of the pass (or per chunk's logits)
        QuantizedInput input;
    };

    // y_j = W_j x for matrices that read the same input x [m][cols] (q/k/v, gate/up):
    // x is quantized once per activation format and the matrices wanting that format
    // run as one matmul_batch (one pool wake-up and barrier for all of them). With
    // the K-quants sharing Q8_K32, a Q4_K_M layer's q, k and v are one batch.
    static void matmul_shared_input(const MatmulJob* jobs, size_t n_jobs, const float* x, size_t m,
                                    size_t cols, QuantizedInput& input, ThreadPool& pool) {
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
            input.quantize(jobs[i].w.type, x, m, cols, &pool);
            matmul_batch(batch, n_batch, input, pool);
        }
    }

    SmolLM3(std::shared_ptr<const gguf::File> file, Config config, Weights weights,
            const kernels::KernelSet& kernel_set)
        : file_(std::move(file)),
          config_(std::move(config)),
          weights_(std::move(weights)),
          kernels_(&kernel_set),
          rope_(config_) {}

    // One pass over every row of `chunks` (distinct caches, as the seam checked):
    // the matrices read once for all of them. Error(cancelled) when *cancel is
    // set between layers (the chunks' K/V are then partly written: the seam
    // does not count them).
    Status run_pass(const Segment* chunks, size_t n_chunks, ThreadPool& pool,
                    const std::atomic<bool>* cancel, Scratch& s) const {
        const Config& c = config_;
        const size_t hidden = c.hidden, q_dim = c.q_dim(), kv_dim = c.kv_dim(), ffn = c.ffn;
        size_t m = 0;
        for (size_t i = 0; i < n_chunks; ++i) m += chunks[i].n_tokens;
        Row* rows = s.rows(m);
        s.x.resize(m * hidden);
        s.normed.resize(m * hidden);
        s.q.resize(m * q_dim);
        s.k.resize(m * kv_dim);
        s.v.resize(m * kv_dim);
        s.attn.resize(m * q_dim);
        s.out.resize(m * hidden);
        s.gate.resize(m * ffn);
        s.up.resize(m * ffn);

        // Each chunk's rows are one sequence; batching leaves a sequence's
        // numbers as they are alone (QuantizedInput::set_sequences).
        s.sequence_sizes.resize(n_chunks);
        for (size_t i = 0; i < n_chunks; ++i) s.sequence_sizes[i] = chunks[i].n_tokens;
        s.input.set_sequences(s.sequence_sizes.data(), n_chunks);
        for (size_t i = 0, r = 0; i < n_chunks; ++i) {
            const Segment& chunk = chunks[i];
            // The seam checked that every cache is a KVCache (device cpu, the CPU owner tag).
            KVCache* kv = static_cast<KVCache*>(chunk.cache);
            for (size_t t = 0; t < chunk.n_tokens; ++t, ++r) {
                rows[r] = Row{kv, chunk.start + t};
                weights_.embed(chunk.tokens[t], &s.x[r * hidden]);
            }
        }
        rope_table(rows, m, s);

        for (size_t li = 0; li < c.n_layers; ++li) {
            if (cancel && cancel->load(std::memory_order_relaxed))
                return Status(ErrorKind::cancelled, "forward: cancelled");
            const LayerWeights& lw = weights_.layers[li];

            // --- attention block ---
            for (size_t r = 0; r < m; ++r)
                kernels_->rmsnorm(&s.x[r * hidden], lw.attn_norm.data(), &s.normed[r * hidden],
                                  hidden, c.rms_eps);
            const MatmulJob qkv[3] = {{lw.attn_q, s.q.data(), q_dim},
                                      {lw.attn_k, s.k.data(), kv_dim},
                                      {lw.attn_v, s.v.data(), kv_dim}};
            matmul_shared_input(qkv, 3, s.normed.data(), m, hidden, s.input, pool);
            if (c.layer_uses_rope(li)) {
                for (size_t r = 0; r < m; ++r) {
                    for (size_t h = 0; h < c.n_heads; ++h)
                        rope(&s.q[r * q_dim + h * c.head_dim], r, s);
                    for (size_t h = 0; h < c.n_kv_heads; ++h)
                        rope(&s.k[r * kv_dim + h * c.head_dim], r, s);
                }
            }
            for (size_t r = 0; r < m; ++r)
                rows[r].kv->store(li, rows[r].pos, &s.k[r * kv_dim], &s.v[r * kv_dim]);
            attention(li, rows, m, pool, s);
            s.input.quantize(lw.attn_output.type, s.attn.data(), m, q_dim, &pool);
            matmul(lw.attn_output, s.input, s.out.data(), hidden, pool);
            for (size_t i = 0; i < m * hidden; ++i) s.x[i] += s.out[i];

            // --- SwiGLU MLP ---
            for (size_t r = 0; r < m; ++r)
                kernels_->rmsnorm(&s.x[r * hidden], lw.ffn_norm.data(), &s.normed[r * hidden],
                                  hidden, c.rms_eps);
            const MatmulJob gate_up[2] = {{lw.ffn_gate, s.gate.data(), ffn},
                                          {lw.ffn_up, s.up.data(), ffn}};
            matmul_shared_input(gate_up, 2, s.normed.data(), m, hidden, s.input, pool);
            kernels_->swiglu(s.gate.data(), s.up.data(), s.gate.data(), m * ffn);
            s.input.quantize(lw.ffn_down.type, s.gate.data(), m, ffn, &pool);
            matmul(lw.ffn_down, s.input, s.out.data(), hidden, pool);
            for (size_t i = 0; i < m * hidden; ++i) s.x[i] += s.out[i];
        }
        if (cancel && cancel->load(std::memory_order_relaxed))
            return Status(ErrorKind::cancelled, "forward: cancelled");
        lm_head(chunks, n_chunks, pool, s);
        return {};
    }

    // The LM head over the rows whose logits were asked for (a chunk's last
    // row, or all of them with all_logits), as one mat-mat: the head is the
    // largest matrix, read once per pass however many chunks want logits.
    void lm_head(const Segment* chunks, size_t n_chunks, ThreadPool& pool, Scratch& s) const {
        const size_t hidden = config_.hidden, vocab = config_.vocab_size;
        size_t wanted = 0, n_wanting = 0;
        float* only = nullptr;  // the logits of the one chunk that wants them
        s.sequence_sizes.clear();
        for (size_t i = 0, first = 0; i < n_chunks; first += chunks[i].n_tokens, ++i) {
            const Segment& chunk = chunks[i];
            if (!chunk.logits) continue;
            s.sequence_sizes.push_back(chunk.all_logits ? chunk.n_tokens : 1);
            for (size_t t = chunk.all_logits ? 0 : chunk.n_tokens - 1; t < chunk.n_tokens;
                 ++t, ++wanted)
                kernels_->rmsnorm(&s.x[(first + t) * hidden], weights_.output_norm.data(),
                                  &s.normed[wanted * hidden], hidden, config_.rms_eps);
            ++n_wanting;
            only = chunk.logits;
        }
        if (wanted == 0) return;
        s.input.set_sequences(s.sequence_sizes.data(), s.sequence_sizes.size());
        s.input.quantize(weights_.lm_head.type, s.normed.data(), wanted, hidden, &pool);
        if (n_wanting == 1) {  // rows [wanted][vocab] are that chunk's buffer: no copy (every
                               // decode of one sequence)
            matmul(weights_.lm_head, s.input, only, vocab, pool);
            return;
        }
        // Each chunk's logits live in its own buffer, and a tile writes its
        // columns at one stride: [wanted][vocab] here, then copied out.
        s.logits.resize(wanted * vocab);
        matmul(weights_.lm_head, s.input, s.logits.data(), vocab, pool);
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
    void rope_table(const Row* rows, size_t m, Scratch& s) const {
        const size_t pairs = rope_.pairs();
        s.rope_cos.resize(m * pairs);
        s.rope_sin.resize(m * pairs);
        for (size_t r = 0; r < m; ++r)
            rope_.encode(rows[r].pos, &s.rope_cos[r * pairs], &s.rope_sin[r * pairs]);
    }

    // Rotates the pairs (v[2i], v[2i+1]), i < rope_dims / 2, of one head of row r.
    void rope(float* v, size_t r, const Scratch& s) const noexcept {
        const size_t pairs = rope_.pairs();
        kernels_->rope(v, &s.rope_cos[r * pairs], &s.rope_sin[r * pairs], pairs);
    }

    // s.attn[r][h] for the pass's m rows, each against its own cache up to its
    // own position (causal). Work items are (row, kv head): the `group` query
    // heads that share a KV head are scored together, so each key and value row
    // is read once per group (GQA), not once per query head.
    void attention(size_t layer, const Row* rows, size_t m, ThreadPool& pool, Scratch& s) const {
        const Config& c = config_;
        const size_t hd = c.head_dim, q_dim = c.q_dim(), group = c.heads_per_kv();
        size_t max_positions = 0, total_positions = 0;
        for (size_t r = 0; r < m; ++r) {
            max_positions = std::max(max_positions, rows[r].pos + 1);
            total_positions += rows[r].pos + 1;
        }
        const float scale = 1.0f / std::sqrt(float(hd));
        const size_t per_thread = group * max_positions;  // scores [group][positions]
        s.scores.resize(size_t(pool.size()) * per_thread);
        auto work = [&](size_t begin, size_t end, int thread) {
            kernels::AttentionHead head;
            head.group = group;
            head.head_dim = hd;
            head.scale = scale;
            head.scores = &s.scores[size_t(thread) * per_thread];
            for (size_t item = begin; item < end; ++item) {
                const size_t r = item / c.n_kv_heads, kv_head = item % c.n_kv_heads;
                const KVCache& kv = *rows[r].kv;  // the rows of one pass may mix F16 and F32 caches
                head.row_bytes = hd * kv.element_bytes();
                head.f16 = kv.type() == KVType::f16;
                head.n_positions = rows[r].pos + 1;
                head.q = &s.q[r * q_dim + kv_head * group * hd];       // [group][hd]
                head.out = &s.attn[r * q_dim + kv_head * group * hd];  // [group][hd]
                head.keys = static_cast<const uint8_t*>(kv.keys(layer, kv_head));
                head.values = static_cast<const uint8_t*>(kv.values(layer, kv_head));
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
};

// The CPU backend: SmolLM3 on a thread pool behind the Backend seam. Both are
// borrowed (smol::Model owns them). forward_step runs every chunk of a step as
// one pass (SmolLM3::run_pass): the rows of all chunks go through each matrix
// together, so a decode step of N sequences reads and unpacks the weights once,
// not N times.
class CpuBackend final : public Backend {
public:
    CpuBackend(const SmolLM3& net, ThreadPool& pool) noexcept
        : Backend(Device::cpu, &detail::kCpuCacheOwner, net.config().vocab_size,
                  net.config().context_length, net.config().n_layers, net.config().n_kv_heads,
                  net.config().head_dim, /*max_chunk=*/0, ForwardOptions::kDefaultChunk),
          net_(&net),
          pool_(&pool) {
        batch_rows_ = size_t(kernels::kMaxTileCols);
    }

    std::string name() const override {
        return std::string("cpu (") + cpu_level_name(net_->kernels().level) + ", " +
               std::to_string(pool_->size()) + (pool_->size() == 1 ? " thread)" : " threads)");
    }

    const SmolLM3& network() const noexcept { return *net_; }
    ThreadPool& thread_pool() const noexcept { return *pool_; }

protected:
    Expected<std::unique_ptr<BackendCache>> do_make_cache(size_t n_ctx, KVType type,
                                                          uint64_t memory_budget) const override {
        SMOL_TRY_ASSIGN(KVCache cache,
                        KVCache::try_create(net_->config(), n_ctx, type, memory_budget));
        return std::unique_ptr<BackendCache>(new KVCache(std::move(cache)));
    }
    Status do_erase(BackendCache& cache, size_t first, size_t count) const override {
        // The seam checked that the cache is a KVCache (device cpu, the CPU owner tag).
        static_cast<KVCache&>(cache).erase_positions(first, count, net_->config(), net_->rope());
        return {};
    }

    // Passes of whole chunks, at most kMaxPassRows rows each (or one longer
    // chunk): the work buffers grow with the rows ([rows][ffn] twice), and past
    // a few hundred rows a weight read is already shared by so many that
    // another pass costs little.
    static constexpr size_t kMaxPassRows = 2 * ForwardOptions::kDefaultChunk;

    Status forward_step(const Segment* chunks, size_t n_chunks,
                        const std::atomic<bool>* cancel) const override {
        SmolLM3::Scratch scratch(net_->kernels());
        for (size_t first = 0; first < n_chunks;) {
            size_t end = first + 1, rows = chunks[first].n_tokens;
            while (end < n_chunks && rows + chunks[end].n_tokens <= kMaxPassRows)
                rows += chunks[end++].n_tokens;
            SMOL_TRY(net_->run_pass(chunks + first, end - first, *pool_, cancel, scratch));
            first = end;
        }
        return {};
    }

private:
    const SmolLM3* net_;
    ThreadPool* pool_;
};

inline void SmolLM3::forward(const int32_t* tokens, size_t n, size_t start_pos, KVCache& kv,
                             float* logits, ThreadPool& pool, const ForwardOptions& options) const {
    CpuBackend(*this, pool)
        .forward(Segment{tokens, n, start_pos, &kv, logits, options.all_logits}, options);
}

SMOL_NAMESPACE_END
