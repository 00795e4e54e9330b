// smol::CpuBackend: the SmolLM3 forward pass (model/smollm3.hpp) on a thread
// pool behind the backend seam (model/backend.hpp), and SmolLM3::forward, that
// seam over one segment. Included at the end of model/smollm3.hpp.
#pragma once

#include "../detail/abi.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "../core/threadpool.hpp"
#include "../error.hpp"
#include "../kernels/kernels.hpp"
#include "backend.hpp"
#include "kv_cache.hpp"
#include "smollm3.hpp"

SMOL_NAMESPACE_BEGIN

// The CPU backend: SmolLM3 on a thread pool behind the Backend seam. Both are
// borrowed (smol::Model owns them). forward_step runs every chunk of a step as
// one pass (SmolLM3::run_pass): the rows of all chunks go through each matrix
// together, so a decode step of N sequences reads and unpacks the weights once,
// not N times.
class CpuBackend final : public Backend {
public:
    // Prompt tokens per pass unless ForwardOptions::chunk_size says otherwise:
    // a long batch converts each weight row once per pass (kernels: converted
    // rows), so the conversion is shared by this many tokens. 512, the
    // reference engine's micro-batch too: against 256, the 3B IQ3_XS file's
    // pp512 +9 %, Q4_K_M's unchanged (Zen 5, 2026-12-01); the work buffers
    // grow with it ([rows][ffn] twice: 45 MB at 512 rows on the 3B shape).
    static constexpr size_t kDefaultChunk = 512;

    CpuBackend(const SmolLM3& net, ThreadPool& pool) noexcept
        : Backend(Device::cpu, &detail::kCpuCacheOwner, net.config().vocab_size,
                  net.config().context_length, net.config().n_layers, net.config().n_kv_heads,
                  net.config().head_dim, /*max_chunk=*/0, kDefaultChunk),
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
        return static_cast<KVCache&>(cache).erase_positions(first, count, net_->config(),
                                                            net_->rope());
    }

    // Passes of whole chunks, at most kMaxPassRows rows each (or one longer
    // chunk): the work buffers grow with the rows ([rows][ffn] twice), and past
    // a few hundred rows a weight read is already shared by so many that
    // another pass costs little.
    static constexpr size_t kMaxPassRows = kDefaultChunk;

    // The step's passes share one workspace from the network's pool.
    Status forward_step(const Segment* chunks, size_t n_chunks,
                        const std::atomic<bool>* cancel) const override {
        size_t rows = 0;
        for (size_t i = 0; i < n_chunks; ++i) {
            rows += chunks[i].n_tokens;
            // The seam checked that each cache is a KVCache (device cpu, the CPU owner tag).
            SMOL_TRY(static_cast<KVCache*>(chunks[i].cache)
                         ->prepare_write(chunks[i].start, chunks[i].n_tokens));
        }
        const SmolLM3::WorkspaceLease workspace(*net_, rows);
        for (size_t first = 0; first < n_chunks;) {
            size_t end = first + 1, rows = chunks[first].n_tokens;
            while (end < n_chunks && rows + chunks[end].n_tokens <= kMaxPassRows)
                rows += chunks[end++].n_tokens;
            SMOL_TRY(net_->run_pass(chunks + first, end - first, *pool_, cancel, *workspace));
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
