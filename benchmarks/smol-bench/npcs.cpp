// smol-bench --npcs N: a village of N NPCs in little memory. One generator
// prefills a shared prefix (--npc-prefix tokens: the world description), N - 1
// fork() it, and each of the N then prefills --npc-own tokens of its own (its
// conversation so far). The forks share the prefix's cache blocks
// (model/kv_blocks.hpp), so the peak resident set should stay within
//   file + 1 x prefix's cache + N x own tokens' cache + 150 MiB
// (the 150 MiB: work buffers, the copied partial block per fork, the
// allocator). --npc-no-share gives every NPC its own generator that prefills
// the prefix itself: the figure without sharing. Run it in its own process
// (-p 0 -n 0 --no-bandwidth), as the peak covers everything the process did.
#include <cstdio>

#include "bench.hpp"

namespace smol_bench {

nlohmann::json npc_village(const Options& options, const std::shared_ptr<const smol::Model>& model,
                           RandomIds& ids) {
    const size_t n = size_t(options.npcs), prefix_tokens = size_t(options.npc_prefix),
                 own_tokens = size_t(options.npc_own);
    const smol::Config& c = model->config();
    smol::GeneratorOptions go;
    go.kv_type = options.kv_type;
    go.n_ctx = options.n_ctx > 0
                   ? size_t(options.n_ctx)
                   : std::min(c.context_length, std::max<size_t>(4096, prefix_tokens + own_tokens));
    // Bytes one position takes in the cache: keys and values of every layer's kv heads.
    const double per_position =
        double(2 * c.n_layers * c.n_kv_heads * smol::kv_row_bytes(go.kv_type, c.head_dim));
    const double mib = 1024.0 * 1024.0;
    const std::vector<int32_t> prefix = ids(prefix_tokens);
    smol::GenerateParams prefill_only;
    prefill_only.max_tokens = 0;

    const double rss_before = current_rss_mib();
    const Clock::time_point start = Clock::now();
    std::vector<smol::Generator> npcs;
    npcs.reserve(n);
    if (options.npc_share) {
        smol::Generator base(model, go);
        base.generate_tokens(prefix, prefill_only);
        for (size_t i = 1; i < n; ++i) npcs.push_back(base.fork());
        npcs.insert(npcs.begin(), std::move(base));
    } else {
        for (size_t i = 0; i < n; ++i) npcs.emplace_back(model, go);
    }
    size_t prefilled = 0;
    for (smol::Generator& npc : npcs) {
        std::vector<int32_t> tokens = prefix;
        const std::vector<int32_t> own = ids(own_tokens);
        tokens.insert(tokens.end(), own.begin(), own.end());
        const smol::GenerateResult r = npc.generate_tokens(tokens, prefill_only);
        prefilled += r.n_prompt_tokens - r.n_reused_tokens;
    }
    const double seconds = ms_since(start) / 1000.0;
    const double peak = peak_rss_mib();

    uint64_t owned = 0, shared_max = 0;
    for (const smol::Generator& npc : npcs) {
        owned += npc.cache_memory().owned;
        shared_max = std::max(shared_max, npc.cache_memory().shared);
    }
    const double file_mib = double(model->file().size()) / mib;
    const double prefix_mib = per_position * double(prefix_tokens) / mib;
    const double own_mib = per_position * double(own_tokens) / mib;
    const double bound =
        file_mib + (options.npc_share ? 1.0 : double(n)) * prefix_mib + double(n) * own_mib + 150.0;
    std::printf(
        "npcs: %zu NPCs, %s cache, %zu-token prefix %s, %zu tokens each of their own; %zu tokens "
        "prefilled in %.1f s\n",
        n, smol::kv_type_name(go.kv_type), prefix_tokens,
        options.npc_share ? "prefilled once and forked" : "prefilled by each (--npc-no-share)",
        own_tokens, prefilled, seconds);
    std::printf(
        "npcs: peak RSS %.1f MiB (%.1f before the village) against file %.1f + prefix %.1f x %s + "
        "%zu x own %.1f + 150 = %.1f MiB: %s\n",
        peak, rss_before, file_mib, prefix_mib, options.npc_share ? "1" : std::to_string(n).c_str(),
        n, own_mib, bound, peak <= bound ? "within" : "OVER");
    std::printf("npcs: cache bytes held alone %.1f MiB in all, shared %.1f MiB (held once)\n",
                double(owned) / mib, double(shared_max) / mib);
    for (size_t i = 0; i < npcs.size(); ++i) {
        const smol::CacheMemory m = npcs[i].cache_memory();
        std::printf("  npc %zu: %zu positions, own %.1f MiB, shared %.1f MiB\n", i,
                    npcs[i].n_cached(), double(m.owned) / mib, double(m.shared) / mib);
    }
    return {{"npcs", n},
            {"kv_type", smol::kv_type_name(go.kv_type)},
            {"shared_prefix", options.npc_share},
            {"prefix_tokens", prefix_tokens},
            {"own_tokens", own_tokens},
            {"peak_rss_mib", peak},
            {"bound_mib", bound},
            {"owned_mib", double(owned) / mib},
            {"shared_mib", double(shared_max) / mib},
            {"seconds", seconds}};
}

}  // namespace smol_bench
