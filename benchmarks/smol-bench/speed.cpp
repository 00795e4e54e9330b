// smol-bench's first tests: load, time to first token, prefill (pp) and
// generation (tg) rates, memory, and the memory-bandwidth roofline, with the
// table that reports them (main.cpp's top comment says what each one is).
#include <smol/kernels/bandwidth.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#if defined(__linux__)
#include <sys/resource.h>
#endif

#include "bench.hpp"

namespace smol_bench {

// Peak resident set in MiB: VmHWM where /proc has it, else getrusage.
double peak_rss_mib() {
#if defined(__linux__)
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmHWM:", 0) == 0)
            return double(std::strtoull(line.c_str() + 6, nullptr, 10)) / 1024.0;
    }
    struct rusage usage {};
    if (getrusage(RUSAGE_SELF, &usage) == 0)
        return double(usage.ru_maxrss) / 1024.0;  // KiB on Linux
#endif
    return 0;
}

double current_rss_mib() {
#if defined(__linux__)
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmRSS:", 0) == 0)
            return double(std::strtoull(line.c_str() + 6, nullptr, 10)) / 1024.0;
    }
#endif
    return 0;
}

namespace {

// CPU seconds (user + system) this process has used so far.
double process_cpu_seconds() {
#if defined(__linux__)
    struct rusage usage {};
    if (getrusage(RUSAGE_SELF, &usage) == 0)
        return double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
               double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
#endif
    return 0;
}

std::string load_average() {
#if defined(__linux__)
    std::ifstream in("/proc/loadavg");
    std::string a, b, c;
    if (in >> a >> b >> c) return a + " " + b + " " + c;
#endif
    return "?";
}

std::string human_bytes(double bytes) {
    char buf[64];
    if (bytes >= 1024.0 * 1024 * 1024)
        std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
    else
        std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024));
    return buf;
}

// Bytes a decode step reads from weights: every tensor except the token
// embedding, which contributes one row, unless it is also the (tied) LM head.
double weight_bytes_per_token(const smol::gguf::File& file) {
    bool separate_head = false;
    for (const auto& t : file.tensors())
        if (t.name == "output.weight") separate_head = true;
    double bytes = 0;
    for (const auto& t : file.tensors()) {
        if (t.name == "token_embd.weight" && separate_head)
            bytes += double(t.n_bytes) / double(std::max<uint64_t>(1, t.rows()));
        else
            bytes += double(t.n_bytes);
    }
    return bytes;
}

double parameter_count(const smol::gguf::File& file) {
    double n = 0;
    for (const auto& t : file.tensors()) n += double(t.n_elements);
    return n;
}

}  // namespace

SpeedResults measure_speed(const Options& options, const smol::LoadOptions& load_options,
                           const smol::ForwardOptions& forward_options) {
    const std::string& model_path = options.model_path;
    const long n_prompt = options.n_prompt, n_gen = options.n_gen, depth = options.depth,
               repeats = options.repeats, n_ctx_arg = options.n_ctx,
               ttft_tokens = options.ttft_tokens;
    const bool bandwidth = options.bandwidth;
    auto run = [&](const smol::Model& model, smol::BackendCache& cache, const int32_t* tokens,
                   size_t n, size_t start, std::vector<float>& out) {
        run_forward(model, cache, tokens, n, start, out, forward_options);
    };
    SpeedResults results;
    const std::string load_before = load_average();

    // --- load + time to first token (fresh process: the first forward pass pages the weights
    // in) ---
    const auto t_load = Clock::now();
    auto model = smol::Model::load(model_path, load_options);
    const double load_ms = ms_since(t_load);
    size_t interleaved_bytes = 0;
    for (const smol::LayerWeights& layer : model->weights().layers)
        for (const smol::WeightMatrix* w :
             {&layer.attn_q, &layer.attn_k, &layer.attn_v, &layer.attn_output, &layer.ffn_gate,
              &layer.ffn_up, &layer.ffn_down})
            if (w->interleaved_rows > 0) interleaved_bytes += w->rows * w->row_bytes;
    const std::string interleaved_note =
        interleaved_bytes > 0
            ? "incl. interleaving " + std::to_string(interleaved_bytes >> 20) + " MiB"
            : std::string("weights as stored");
    const smol::Config& config = model->config();
    const size_t vocab = config.vocab_size;
    const int threads = model->thread_pool().size();

    const size_t tg_context = size_t(std::max(depth, 1L)) + size_t(n_gen);
    size_t needed = std::max({size_t(n_prompt), tg_context, size_t(ttft_tokens)});
    size_t n_ctx = n_ctx_arg ? size_t(n_ctx_arg)
                             : std::max(std::min<size_t>(4096, config.context_length), needed);
    n_ctx = std::min(n_ctx, config.context_length);
    if (needed > n_ctx)
        throw std::invalid_argument("the tests need " + std::to_string(needed) +
                                    " positions, the cache has " + std::to_string(n_ctx) +
                                    " (model context " + std::to_string(config.context_length) +
                                    ")");
    auto cache = model->backend().make_cache(n_ctx, options.kv_type);
    smol::BackendCache& kv = *cache;
    const bool on_cpu = model->device() == smol::Device::cpu;
    std::vector<float> logits(vocab);

    results.ids = std::make_unique<RandomIds>(vocab);
    RandomIds& random_ids = *results.ids;

    const std::vector<int32_t> ttft_prompt = random_ids(size_t(ttft_tokens));
    const auto t_first = Clock::now();
    run(*model, kv, ttft_prompt.data(), ttft_prompt.size(), 0, logits);
    const int32_t first_token = argmax(logits);
    const double first_ms = ms_since(t_first);
    const double ttft_ms = load_ms + first_ms;
    // Warm-up: one decode step, so the tests below start from a warm pool.
    run(*model, kv, &first_token, 1, kv.size(), logits);

    // --- pp: prefill from an empty cache ---
    // CPU share: process CPU time / (wall time x threads). Below ~100% the OS
    // gave our threads less than their cores (a shared machine); spinning
    // workers count as busy, so 100% does not mean useful work.
    std::vector<double> pp_rates;
    double pp_cpu = 0, pp_wall = 0, tg_cpu = 0, tg_wall = 0;
    if (n_prompt > 0) {
        const std::vector<int32_t> prompt = random_ids(size_t(n_prompt));
        for (long r = 0; r < repeats; ++r) {
            const double cpu0 = process_cpu_seconds();
            const auto start = Clock::now();
            run(*model, kv, prompt.data(), prompt.size(), 0, logits);
            (void)argmax(logits);
            const double seconds = ms_since(start) / 1000.0;
            pp_rates.push_back(double(n_prompt) / seconds);
            pp_wall += seconds;
            pp_cpu += process_cpu_seconds() - cpu0;
        }
    }

    // --- tg: greedy decode after a 1-token prompt or DEPTH tokens (prefilled once) ---
    std::vector<double> tg_rates;
    double depth_prefill_ms = 0;
    const size_t context = size_t(std::max(depth, 1L));
    if (n_gen > 0) {
        const std::vector<int32_t> prefix = random_ids(context);
        const auto start = Clock::now();
        run(*model, kv, prefix.data(), prefix.size(), 0, logits);
        depth_prefill_ms = ms_since(start);
        const int32_t after_prefix = argmax(logits);
        for (long r = 0; r < repeats; ++r) {
            kv.truncate(context);
            int32_t token = after_prefix;
            const double cpu0 = process_cpu_seconds();
            const auto t0 = Clock::now();
            for (long i = 0; i < n_gen; ++i) {
                run(*model, kv, &token, 1, kv.size(), logits);
                token = argmax(logits);
            }
            const double seconds = ms_since(t0) / 1000.0;
            tg_rates.push_back(double(n_gen) / seconds);
            tg_wall += seconds;
            tg_cpu += process_cpu_seconds() - cpu0;
        }
    }

    const double peak_mib = peak_rss_mib();
    const double rss_mib = current_rss_mib();
    const std::string load_after = load_average();

    const Stats pp = stats_of(pp_rates), tg = stats_of(tg_rates);
    const double file_bytes = double(model->file().size());
    const double kv_bytes = double(kv.n_ctx()) * 2.0 * double(config.n_layers) *
                            double(config.n_kv_heads) *
                            double(smol::kv_row_bytes(options.kv_type, config.head_dim));
    const double kv_bytes_per_position = kv_bytes / double(kv.n_ctx());
    const double weight_bytes = weight_bytes_per_token(model->file());
    // KV read per step at the middle of the generation test.
    const double kv_read = kv_bytes_per_position * (double(context) + double(n_gen) / 2.0);
    const double bytes_per_token = weight_bytes + kv_read;

    double bandwidth_gbs = 0;
    if (bandwidth && n_gen > 0 && on_cpu)
        bandwidth_gbs = smol::measure_read_bandwidth(model->kernels(), threads);
    const double roofline_tps = bandwidth_gbs > 0 ? bandwidth_gbs * 1e9 / bytes_per_token : 0;

    // --- human output ---
    const std::string model_name = model_path.substr(model_path.find_last_of('/') + 1);
    const double params = parameter_count(model->file());
    std::printf("model: %s (%s, %.2f %s params, %zu layers, hidden %zu, vocab %zu)\n",
                model_name.c_str(), human_bytes(file_bytes).c_str(),
                params >= 1e9 ? params / 1e9 : params / 1e6, params >= 1e9 ? "B" : "M",
                config.n_layers, config.hidden, vocab);
    std::printf(
        "backend: %s | threads: %d | kernels: %s (best %s) | repetitions: %ld | KV cache: %zu "
        "positions "
        "%s, %s | load average %s -> %s\n",
        model->backend().name().c_str(), threads, smol::cpu_level_name(model->cpu_level()),
        smol::cpu_level_name(smol::best_cpu_level()), repeats, kv.n_ctx(),
        smol::kv_type_name(options.kv_type), human_bytes(kv_bytes).c_str(), load_before.c_str(),
        load_after.c_str());
    const smol::kernels::TuneReport& tuning = model->tuning();
    // The tuning's time is part of the load time above.
    std::printf("kernel params: %s\n", tuning.text().c_str());
    if (options.tune_times)
        for (const smol::kernels::TuneTiming& t : tuning.timings) {
            std::printf("  tune %-20s | %s | %.2f GB/s (faster half of %d samples):", t.setting,
                        smol::kernels::kernel_params_text(t.params).c_str(),
                        t.ns_per_mib > 0 ? 1048576.0 / t.ns_per_mib : 0.0, t.samples);
            for (double run : t.runs) std::printf(" %.2f", run > 0 ? 1048576.0 / run : 0.0);
            std::printf("\n");
        }
    auto cpu_share = [&](double cpu, double wall) {
        return wall > 0 ? 100.0 * cpu / (wall * threads) : 0.0;
    };
    std::printf(
        "\n| model | size | threads | test | t/s | CPU share |\n|---|---|---|---|---|---|\n");
    char test[64];
    if (!pp_rates.empty()) {
        std::snprintf(test, sizeof test, "pp%ld", n_prompt);
        std::printf("| %s | %s | %d | %s | %.2f ± %.2f | %.0f%% |\n", model_name.c_str(),
                    human_bytes(file_bytes).c_str(), threads, test, pp.mean, pp.stddev,
                    cpu_share(pp_cpu, pp_wall));
    }
    if (!tg_rates.empty()) {
        if (depth > 0)
            std::snprintf(test, sizeof test, "tg%ld @ d%ld", n_gen, depth);
        else
            std::snprintf(test, sizeof test, "tg%ld", n_gen);
        std::printf("| %s | %s | %d | %s | %.2f ± %.2f | %.0f%% |\n", model_name.c_str(),
                    human_bytes(file_bytes).c_str(), threads, test, tg.mean, tg.stddev,
                    cpu_share(tg_cpu, tg_wall));
    }
    auto print_runs = [](const char* what, const std::vector<double>& rates) {
        if (rates.size() < 2) return;
        std::printf("%s runs (t/s):", what);
        for (double r : rates) std::printf(" %.2f", r);
        std::printf("\n");
    };
    print_runs("pp", pp_rates);
    print_runs("tg", tg_rates);
    std::printf(
        "\nload: %.1f ms (%s) | time to first token (%ld-token prompt, incl. load): %.1f ms "
        "(prefill + argmax %.1f ms)\n",
        load_ms, interleaved_note.c_str(), ttft_tokens, ttft_ms, first_ms);
    if (depth > 0)
        std::printf("depth prefill (%ld tokens, untimed in tg): %.1f ms = %.2f tok/s\n", depth,
                    depth_prefill_ms, double(depth) / (depth_prefill_ms / 1000.0));
    std::printf(
        "memory: peak RSS %.1f MiB (now %.1f MiB) | file %.1f MiB + KV %.1f MiB (allocated; "
        "touched "
        "only as filled) = %.1f MiB\n",
        peak_mib, rss_mib, file_bytes / 1048576.0, kv_bytes / 1048576.0,
        (file_bytes + kv_bytes) / 1048576.0);
    if (bandwidth_gbs > 0) {
        std::printf(
            "roofline: read bandwidth %.1f GB/s (%d threads, 1 GiB, best of 3) / %.1f MB per "
            "token "
            "(weights %.1f + KV %.1f) = %.2f tok/s; tg = %.0f%% of it\n",
            bandwidth_gbs, threads, bytes_per_token / 1e6, weight_bytes / 1e6, kv_read / 1e6,
            roofline_tps, 100.0 * tg.mean / roofline_tps);
    }

    results.model = model;
    results.cache = std::move(cache);
    results.context = context;
    results.pp_rates = pp_rates;
    results.tg_rates = tg_rates;
    results.pp = pp;
    results.tg = tg;
    results.pp_cpu_share = cpu_share(pp_cpu, pp_wall);
    results.tg_cpu_share = cpu_share(tg_cpu, tg_wall);
    results.load_ms = load_ms;
    results.ttft_ms = ttft_ms;
    results.peak_mib = peak_mib;
    results.file_bytes = file_bytes;
    results.kv_bytes = kv_bytes;
    results.bandwidth_gbs = bandwidth_gbs;
    results.bytes_per_token = bytes_per_token;
    results.roofline_tps = roofline_tps;
    return results;
}

}  // namespace smol_bench
