// smol-bench --ops N: where the time of N decode steps goes, op by op. The
// steps are ordinary Model::forward calls at the generation test's depth; a
// smol::ForwardZoneRecorder collects the timing zones the forward pass
// carries (model/smollm3.hpp, ForwardZone), so the profile follows the forward
// order by construction. Each zone's time includes its pool barrier; what no
// zone covers (the argument checks, the layer loop) is the remainder.
#include <atomic>
#include <cstdio>

#include "bench.hpp"

namespace smol_bench {
namespace {

// The table's name for a zone: the forward pass's name, with what it counts.
std::string zone_label(smol::ForwardZone zone) {
    std::string label = smol::forward_zone_name(zone);
    switch (zone) {
        case smol::ForwardZone::rmsnorm:
            return label + " (2/layer + head)";
        case smol::ForwardZone::quantize:
            return label + " activations (one per input format of each y = Wx)";
        case smol::ForwardZone::attn_qkv:
        case smol::ForwardZone::ffn_gate_up:
            return label + " (one matmul_batch)";
        default:
            return label;
    }
}

}  // namespace

void profile_ops(const smol::Model& model, smol::KVCache& kv, size_t depth, int steps,
                 const smol::ForwardOptions& forward_options) {
    smol::ThreadPool& pool = model.thread_pool();
    std::vector<float> logits(model.config().vocab_size);
    kv.truncate(std::min(kv.size(), depth));
    const size_t base = kv.size();
    int32_t token = 1;
    model.forward(&token, 1, base, kv, logits.data(), forward_options);  // warm-up
    smol::ForwardZoneTimes zones;
    double step_ms = 0;
    {
        const smol::ForwardZoneRecorder recorder(zones);
        const auto start = Clock::now();
        for (int step = 0; step < steps; ++step) {
            model.forward(&token, 1, base + size_t(step), kv, logits.data(), forward_options);
            token = smol::greedy_token(logits.data(), logits.size());
        }
        step_ms = ms_since(start) / steps;
    }
    kv.truncate(base);

    std::printf(
        "\nop profile (%d decode steps, %d threads, context %zu; per step; timing zones of the "
        "forward pass):\n",
        steps, pool.size(), base);
    std::printf("| op | ms/step | %% of forward | GB/s |\n|---|---|---|---|\n");
    double parts_ms = 0;
    for (size_t z = 0; z < smol::kForwardZones; ++z) {
        const double ms = zones.ms[z] / steps, bytes = zones.weight_bytes[z] / steps;
        parts_ms += ms;
        const std::string label = zone_label(smol::ForwardZone(z));
        if (bytes > 0)
            std::printf("| %s | %.2f | %.1f | %.1f |\n", label.c_str(), ms, 100.0 * ms / step_ms,
                        bytes / (ms / 1000.0) / 1e9);
        else
            std::printf("| %s | %.2f | %.1f | |\n", label.c_str(), ms, 100.0 * ms / step_ms);
    }
    std::printf("| sum of the ops above | %.2f | %.1f | |\n", parts_ms, 100.0 * parts_ms / step_ms);
    std::printf("| forward() decode step (measured) | %.2f | 100 | |\n", step_ms);
    std::printf(
        "| remainder: argument checks, the layer loop, outside any zone | %.2f | %.1f | |\n",
        step_ms - parts_ms, 100.0 * (step_ms - parts_ms) / step_ms);
    // The cost of one pool job by itself (wake-up + barrier), back to back as in a decode step.
    if (pool.size() > 1) {
        std::vector<double> us;
        std::atomic<int> sink{0};
        for (int i = 0; i < 5000; ++i) {
            const auto t0 = Clock::now();
            pool.run([&](int thread, int) { sink.fetch_add(thread, std::memory_order_relaxed); });
            us.push_back(ms_since(t0) * 1000.0);
        }
        std::sort(us.begin(), us.end());
        double total = 0;
        for (double u : us) total += u;
        std::printf(
            "| (pool) empty ThreadPool::run, 5000 back to back: mean %.1f us, p50 %.1f, p99 %.1f, "
            "max %.0f us | | | |\n",
            total / double(us.size()), us[us.size() / 2], us[us.size() * 99 / 100], us.back());
    }
}

}  // namespace smol_bench
