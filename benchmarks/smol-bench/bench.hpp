// What smol-bench's modes share: the command line (Options), timing and
// statistics helpers, the random prompts, and each mode's entry point. The
// usage and every figure's meaning: main.cpp's top comment.
#pragma once

#include <smol/smol.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace smol_bench {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

inline double ms_between(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double, std::milli>(to - from).count();
}

// Mean and sample standard deviation (the pp / tg rates).
struct Stats {
    double mean = 0, stddev = 0;
};

inline Stats stats_of(const std::vector<double>& values) {
    Stats s;
    if (values.empty()) return s;
    for (double v : values) s.mean += v;
    s.mean /= double(values.size());
    if (values.size() > 1) {
        double sq = 0;
        for (double v : values) sq += (v - s.mean) * (v - s.mean);
        s.stddev = std::sqrt(sq / double(values.size() - 1));
    }
    return s;
}

// Median with the range (the --parallel, --parallel-arrival and --step-rows figures).
struct Spread {
    double median = 0, min = 0, max = 0;
};

inline Spread spread_of(std::vector<double> values) {
    Spread s;
    if (values.empty()) return s;
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    s.median = n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0;
    s.min = values.front();
    s.max = values.back();
    return s;
}

// Nearest rank: the smallest value with at least p of the values at or below it.
inline double percentile(std::vector<double> values, double p) {
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    const size_t rank = size_t(std::ceil(p * double(values.size())));
    return values[std::min(values.size() - 1, rank > 0 ? rank - 1 : 0)];
}

inline nlohmann::json spread_json(const Spread& s, const std::vector<double>& runs) {
    return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"runs", runs}};
}

// The command line (main.cpp parses it).
struct Options {
    std::string model_path;
    std::optional<std::string> check_prompt;
    bool json = false, bandwidth = true, interleave = true;
    long op_steps = 0;
    long n_prompt = 512, n_gen = 128, depth = 0, repeats = 3, n_ctx = 0, chunk = 0,
         ttft_tokens = 16;
    int n_threads = 0;
    smol::CpuLevel cpu = smol::CpuLevel::automatic;
    smol::Device device = smol::Device::cpu;
    smol::KVType kv_type = smol::KVType::f16;  // the speed test's cache
    std::vector<long> parallel, step_rows;
    bool arrival = false;
    long arrival_tokens = 512;
    std::string json_schema_path;
    long shift_positions = 0, chat_turns = 0;
    long npcs = 0, npc_prefix = 1500, npc_own = 2500;
    bool npc_share = true;
    long lookup = 0;  // --lookup K: drafts per step (0: not run)
    // The kernels' speed-only settings (LoadOptions::tune / kernel_params), and
    // whether to print the tuner's time per candidate.
    smol::TuneMode tune = smol::TuneMode::automatic;
    std::optional<smol::kernels::KernelParams> kernel_params;
    bool tune_times = false;
};

// Random token ids from one fixed-seed stream: the tests draw their prompts
// from it in a fixed order, so every run gets the same ones.
class RandomIds {
public:
    explicit RandomIds(size_t vocab) : pick_(0, int32_t(vocab) - 1) {}
    std::vector<int32_t> operator()(size_t n) {
        std::vector<int32_t> ids(n);
        for (auto& id : ids) id = pick_(rng_);
        return ids;
    }

private:
    std::mt19937_64 rng_{1234};
    std::uniform_int_distribution<int32_t> pick_;
};

// One forward through the model's backend: tokens at start.. into cache, last logits into out.
inline void run_forward(const smol::Model& model, smol::BackendCache& cache, const int32_t* tokens,
                        size_t n, size_t start, std::vector<float>& out,
                        const smol::ForwardOptions& options) {
    smol::Segment segment;
    segment.tokens = tokens;
    segment.n_tokens = n;
    segment.start = start;
    segment.cache = &cache;
    segment.logits = out.data();
    model.backend().forward(segment, options);
}

inline int32_t argmax(const std::vector<float>& logits) {
    return smol::greedy_token(logits.data(), logits.size());
}

// Peak and current resident set in MiB (speed.cpp): VmHWM / VmRSS where /proc
// has them, else getrusage's peak; 0 where neither is known.
double peak_rss_mib();
double current_rss_mib();

// --- the modes, one file each ---------------------------------------------------

// check_prompt.cpp: --check-prompt TEXT (greedy ids instead of the benchmark).
int check_prompt(const Options& options, const smol::LoadOptions& load_options,
                 const smol::ForwardOptions& forward_options);

// speed.cpp: load, time to first token, pp, tg, memory and the roofline; prints
// their table. Keeps the model, its cache and the figures the later modes and
// the JSON line use.
struct SpeedResults {
    std::shared_ptr<const smol::Model> model;
    std::unique_ptr<RandomIds> ids;  // the later tests draw their prompts from it
    std::unique_ptr<smol::BackendCache> cache;
    size_t context = 0;  // the tg test's context before its tokens (depth, at least 1)
    std::vector<double> pp_rates, tg_rates;
    Stats pp, tg;
    double pp_cpu_share = 0, tg_cpu_share = 0;  // percent
    double load_ms = 0, ttft_ms = 0, peak_mib = 0, file_bytes = 0, kv_bytes = 0;
    double bandwidth_gbs = 0, bytes_per_token = 0, roofline_tps = 0;
};
SpeedResults measure_speed(const Options& options, const smol::LoadOptions& load_options,
                           const smol::ForwardOptions& forward_options);

// ops.cpp: --ops N, where N decode steps spend their time, zone by zone.
void profile_ops(const smol::Model& model, smol::KVCache& kv, size_t depth, int steps,
                 const smol::ForwardOptions& forward_options);

// parallel.cpp: --parallel N[,N...] and --parallel-arrival (generators sharing a Batcher).
// pp_rate: the pp test's mean (0: not measured).
nlohmann::json parallel_decode(const Options& options,
                               const std::shared_ptr<const smol::Model>& model, double pp_rate);
nlohmann::json prompt_arrival(const Options& options,
                              const std::shared_ptr<const smol::Model>& model, double pp_rate,
                              RandomIds& ids);

// json_schema.cpp: --json-schema FILE, decode with and without the schema.
nlohmann::json json_schema_cost(const Options& options,
                                const std::shared_ptr<const smol::Model>& model);

// step_rows.cpp: --step-rows N[,N...], one batched decode step of N rows on the backend.
nlohmann::json step_rows(const Options& options, const std::shared_ptr<const smol::Model>& model,
                         const smol::ForwardOptions& forward_options, RandomIds& ids);
// lookup.cpp: --lookup K, the verify step's cost and decodes with lookup decoding.
nlohmann::json lookup_cost(const Options& options, const std::shared_ptr<const smol::Model>& model,
                           const smol::ForwardOptions& forward_options, RandomIds& ids);

// context.cpp: --shift N (erase half of N cached positions vs a prefill of as
// many) and --chat-turns T (a long chat with ContextPolicy::shift).
nlohmann::json shift_cost(const Options& options, const std::shared_ptr<const smol::Model>& model,
                          const smol::ForwardOptions& forward_options, RandomIds& ids);
nlohmann::json chat_turns(const Options& options, const std::shared_ptr<const smol::Model>& model);

// npcs.cpp: --npcs N, a village of N generators sharing one prefilled prefix
// through fork() (or not: --npc-no-share): peak RSS against file + prefix + N x
// own + 150 MiB, and each generator's own and shared cache bytes.
nlohmann::json npc_village(const Options& options, const std::shared_ptr<const smol::Model>& model,
                           RandomIds& ids);

}  // namespace smol_bench
