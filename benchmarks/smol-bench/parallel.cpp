// smol-bench --parallel N[,N...] and --parallel-arrival: smol::Generators
// sharing one smol::Batcher, each on its own thread (main.cpp's top comment
// says what each figure is).
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "bench.hpp"

namespace smol_bench {
namespace {

// Holds every generator thread until all of them are ready, so that they all
// start within microseconds of each other (thread creation is not timed).
class StartLine {
public:
    explicit StartLine(size_t threads) : threads_(threads) {}
    void arrive_and_wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        ++arrived_;
        changed_.notify_all();
        changed_.wait(lock, [&] { return go_; });
    }
    Clock::time_point release() {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return arrived_ == threads_; });
        go_ = true;
        changed_.notify_all();
        return Clock::now();
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    size_t threads_, arrived_ = 0;
    bool go_ = false;
};

// Greedy and past end-of-generation, so that every generator makes exactly
// max_tokens tokens; the hook stamps each token. GenerateParams::logits_hook
// runs once per generated token, right after the forward pass that produced
// that token's logits (the first one: after the prefill), so consecutive stamps
// are the per-token latency the generator saw, waiting for shared steps included.
smol::GenerateParams stamping_params(long max_tokens, std::function<void()> on_token) {
    smol::GenerateParams params;
    params.temperature = 0;
    params.max_tokens = int(max_tokens);
    params.ignore_eos = true;
    params.logits_hook = [on_token = std::move(on_token)](float*, size_t) { on_token(); };
    return params;
}

constexpr size_t kParallelPromptTokens = 24;

// Each generator gets its own short prompt (random ids, one per generator), so
// no two share a prefix or a sequence of tokens.
std::vector<std::vector<int32_t>> parallel_prompts(size_t count, size_t vocab) {
    std::mt19937_64 rng(4321);
    std::uniform_int_distribution<int32_t> pick(0, int32_t(vocab) - 1);
    std::vector<std::vector<int32_t>> prompts(count, std::vector<int32_t>(kParallelPromptTokens));
    for (auto& prompt : prompts)
        for (auto& id : prompt) id = pick(rng);
    return prompts;
}

// One repetition of N concurrent generations.
struct ParallelRun {
    // Decode throughput while all N decode: from the moment the last generator
    // got its first token (every prefill is over) to the moment the first one
    // got its last token (none has finished), the tokens all generators
    // produced in that window over its length.
    double aggregate_tps = 0;
    bool overlapped = true;       // false: no such window; then all tokens after each first
                                  // one, over first first token .. last last token
    std::vector<double> gaps_ms;  // every generator's gaps between consecutive tokens
    // Batcher counters from the moment every generator had its first token to
    // the end (the steps that ran only decode rows; no batcher: 0).
    double rows_per_step = 0;
    size_t widest = 0;
};

ParallelRun run_parallel(std::vector<std::unique_ptr<smol::Generator>>& generators,
                         const std::vector<std::vector<int32_t>>& prompts, long n_gen,
                         smol::Batcher* batcher) {
    const size_t n = generators.size();
    std::vector<std::vector<Clock::time_point>> stamps(n);
    for (auto& s : stamps) s.reserve(size_t(n_gen));
    std::atomic<size_t> started{0};
    smol::Batcher::Stats at_decode;  // written by the hook of the last generator to start decoding
    std::vector<std::exception_ptr> errors(n);
    std::vector<size_t> produced(n, 0);
    StartLine start(n);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < n; ++i) {
        generators[i]->reset();
        threads.emplace_back([&, i] {
            const smol::GenerateParams params = stamping_params(n_gen, [&, i] {
                stamps[i].push_back(Clock::now());
                if (stamps[i].size() == 1 && started.fetch_add(1) + 1 == n && batcher)
                    at_decode = batcher->stats();
            });
            start.arrive_and_wait();
            try {
                produced[i] = generators[i]->generate_tokens(prompts[i], params).tokens.size();
            } catch (...) {
                errors[i] = std::current_exception();
            }
        });
    }
    start.release();
    for (auto& t : threads) t.join();
    for (const auto& e : errors)
        if (e) std::rethrow_exception(e);
    for (size_t i = 0; i < n; ++i)
        if (produced[i] != size_t(n_gen) || stamps[i].size() != size_t(n_gen))
            throw std::runtime_error("--parallel: a generator made " + std::to_string(produced[i]) +
                                     " of " + std::to_string(n_gen) + " tokens");

    ParallelRun run;
    Clock::time_point all_decoding = stamps[0].front(), first_done = stamps[0].back();
    Clock::time_point earliest = stamps[0].front(), latest = stamps[0].back();
    for (const auto& s : stamps) {
        all_decoding = std::max(all_decoding, s.front());
        first_done = std::min(first_done, s.back());
        earliest = std::min(earliest, s.front());
        latest = std::max(latest, s.back());
        for (size_t k = 1; k < s.size(); ++k) run.gaps_ms.push_back(ms_between(s[k - 1], s[k]));
    }
    size_t in_window = 0;
    for (const auto& s : stamps)
        for (const auto& t : s) in_window += t > all_decoding && t <= first_done;
    if (first_done > all_decoding && in_window > 0) {
        run.aggregate_tps = double(in_window) / (ms_between(all_decoding, first_done) / 1000.0);
    } else {
        run.overlapped = false;
        run.aggregate_tps = double(n * size_t(n_gen - 1)) / (ms_between(earliest, latest) / 1000.0);
    }
    if (batcher) {
        const smol::Batcher::Stats end = batcher->stats();
        const uint64_t steps = end.steps - at_decode.steps;
        if (steps > 0) run.rows_per_step = double(end.rows - at_decode.rows) / double(steps);
        run.widest = end.widest;
    }
    return run;
}

// One repetition of "a prompt arrives while 3 others decode".
struct ArrivalRun {
    double ttft_ms = 0;        // the new prompt: submitted .. its first token
    double median_gap_ms = 0;  // the decoders' gaps that ended before it was submitted (pooled)
    double worst_gap_ms = 0;   // the decoders' largest gap that overlaps its prefill
    size_t tokens_during = 0;  // decoder tokens stamped during its prefill
    bool complete = true;      // every decoder was still decoding when its prefill ended
    // The batcher's steps from its submission to its first token, and their rows.
    uint64_t steps = 0, rows = 0;
};

constexpr size_t kArrivalDecoders = 3;
constexpr size_t kArrivalWarmTokens = 16;  // each decoder's tokens before the prompt arrives

ArrivalRun run_arrival(std::vector<std::unique_ptr<smol::Generator>>& decoders,
                       smol::Generator& newcomer, const std::vector<std::vector<int32_t>>& prompts,
                       const std::vector<int32_t>& long_prompt, long decoder_tokens,
                       smol::Batcher& batcher) {
    const size_t n = decoders.size();
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<std::vector<Clock::time_point>> stamps(n);  // guarded by mutex until the join
    std::vector<bool> finished(n, false);
    std::vector<std::exception_ptr> errors(n);
    StartLine start(n);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < n; ++i) {
        decoders[i]->reset();
        threads.emplace_back([&, i] {
            const smol::GenerateParams params = stamping_params(decoder_tokens, [&, i] {
                const auto now = Clock::now();
                {
                    std::lock_guard<std::mutex> lock(mutex);
                    stamps[i].push_back(now);
                }
                changed.notify_all();
            });
            start.arrive_and_wait();
            try {
                decoders[i]->generate_tokens(prompts[i], params);
            } catch (...) {
                errors[i] = std::current_exception();
            }
            {
                std::lock_guard<std::mutex> lock(mutex);
                finished[i] = true;
            }
            changed.notify_all();
        });
    }
    // Every decoder has `tokens` stamps, or has stopped.
    auto wait_for_tokens = [&](auto tokens_needed) {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [&] {
            for (size_t i = 0; i < n; ++i)
                if (!finished[i] && stamps[i].size() < tokens_needed(i)) return false;
            return true;
        });
    };
    newcomer.reset();
    start.release();
    wait_for_tokens([](size_t) { return kArrivalWarmTokens; });

    std::optional<Clock::time_point> first_token;
    smol::Batcher::Stats at_first_token;
    const smol::Batcher::Stats at_submit = batcher.stats();
    const auto submitted = Clock::now();
    const smol::GenerateParams params = stamping_params(1, [&] {
        if (first_token) return;
        first_token = Clock::now();
        at_first_token = batcher.stats();
    });
    std::exception_ptr newcomer_error;
    try {
        newcomer.generate_tokens(long_prompt, params);
    } catch (...) {
        newcomer_error = std::current_exception();
    }
    // A few more tokens each, so that the gap in which the prefill ended is complete.
    if (first_token) {
        std::vector<size_t> need(n);
        {
            std::lock_guard<std::mutex> lock(mutex);
            for (size_t i = 0; i < n; ++i) need[i] = stamps[i].size() + 2;
        }
        wait_for_tokens([&](size_t i) { return need[i]; });
    }
    for (auto& d : decoders) d->cancel();
    for (auto& t : threads) t.join();
    if (newcomer_error) std::rethrow_exception(newcomer_error);
    for (const auto& e : errors)
        if (e) std::rethrow_exception(e);
    if (!first_token)
        throw std::runtime_error("--parallel-arrival: the new prompt produced no token");

    ArrivalRun run;
    run.ttft_ms = ms_between(submitted, *first_token);
    run.steps = at_first_token.steps - at_submit.steps;
    run.rows = at_first_token.rows - at_submit.rows;
    std::vector<double> before;
    for (const auto& s : stamps) {
        if (s.empty() || s.back() < *first_token) run.complete = false;
        for (size_t k = 1; k < s.size(); ++k) {
            const double gap = ms_between(s[k - 1], s[k]);
            if (s[k] <= submitted)
                before.push_back(gap);
            else if (s[k - 1] < *first_token)
                run.worst_gap_ms = std::max(run.worst_gap_ms, gap);
            run.tokens_during += s[k] > submitted && s[k] <= *first_token;
        }
    }
    run.median_gap_ms = percentile(before, 0.5);
    return run;
}

// A generator on `model` for `positions` positions, on `batcher` (null: alone).
std::unique_ptr<smol::Generator> make_generator(const std::shared_ptr<const smol::Model>& model,
                                                std::shared_ptr<smol::Batcher> batcher,
                                                size_t positions) {
    smol::GeneratorOptions options;
    options.n_ctx = std::min(positions, model->config().context_length);
    options.batcher = std::move(batcher);
    return std::make_unique<smol::Generator>(model, options);
}

// "pp<N>": the name of the pp test in the table.
std::string pp_test_name(long n_prompt) {
    char name[32];
    std::snprintf(name, sizeof name, "pp%ld", n_prompt);
    return name;
}

}  // namespace

// Through smol::Generator (sampling, text, the batcher), unlike pp/tg, which
// call the backend directly; tg1 is measured the same way so that the
// comparison is like for like.
nlohmann::json parallel_decode(const Options& args, const std::shared_ptr<const smol::Model>& model,
                               double pp_rate) {
    const std::vector<long>& parallel = args.parallel;
    const long n_gen = args.n_gen, repeats = args.repeats;
    const size_t vocab = model->config().vocab_size;
    const std::string pp_name = pp_test_name(args.n_prompt);
    const size_t widest_n = size_t(*std::max_element(parallel.begin(), parallel.end()));
    const std::vector<std::vector<int32_t>> prompts = parallel_prompts(widest_n, vocab);
    const size_t positions = kParallelPromptTokens + size_t(n_gen);

    // tg1: one generator alone, without a batcher.
    std::vector<double> tg1_runs;
    {
        std::vector<std::unique_ptr<smol::Generator>> alone;
        alone.push_back(make_generator(model, nullptr, positions));
        for (long r = 0; r < repeats; ++r)
            tg1_runs.push_back(run_parallel(alone, prompts, n_gen, nullptr).aggregate_tps);
    }
    const Spread tg1 = spread_of(tg1_runs);

    std::printf(
        "\nparallel decode: N generators sharing one smol::Batcher, each a different "
        "%zu-token prompt "
        "(random ids), then %ld greedy tokens (ignore_eos), started together; median of "
        "%ld runs "
        "[min-max]\n",
        kParallelPromptTokens, n_gen, repeats);
    std::printf(
        "  aggregate t/s: tokens all generators made while all N were decoding (from the "
        "last one's "
        "first token to the first one's last token) / that time; prefill excluded\n");
    std::printf(
        "  token gap: time between consecutive tokens of one generator (every generator's, "
        "pooled); "
        "rows/step: the batcher's rows per forward pass after every prefill\n");
    std::printf(
        "  target: 0.8 x min(N x tg1, %s), tg1 = one generator alone, no batcher, measured "
        "the same "
        "way%s\n",
        pp_name.c_str(), pp_rate > 0 ? "" : " (pp not measured in this run: 0.8 x N x tg1)");
    std::printf(
        "\n| N | aggregate t/s | per generator t/s | token gap p50 ms | token gap p99 ms | "
        "rows/step | "
        "target t/s | met |\n|---|---|---|---|---|---|---|---|\n");
    auto range = [](const Spread& s, const char* format) {
        char a[32], b[32], c[32], out[112];
        std::snprintf(a, sizeof a, format, s.median);
        std::snprintf(b, sizeof b, format, s.min);
        std::snprintf(c, sizeof c, format, s.max);
        std::snprintf(out, sizeof out, "%s [%s-%s]", a, b, c);
        return std::string(out);
    };
    std::printf("| 1 (tg1, no batcher) | %s | %s | | | | | |\n", range(tg1, "%.2f").c_str(),
                range(tg1, "%.2f").c_str());

    nlohmann::json results = nlohmann::json::array();
    std::string not_overlapped;  // the Ns for which some run had no all-decoding window
    for (const long n : parallel) {
        smol::BatcherOptions batcher_options;
        batcher_options.max_batch = std::max(batcher_options.max_batch, size_t(n));
        auto batcher = std::make_shared<smol::Batcher>(model, batcher_options);
        std::vector<std::unique_ptr<smol::Generator>> generators;
        for (long i = 0; i < n; ++i)
            generators.push_back(make_generator(model, batcher, positions));
        std::vector<double> rates, p50s, p99s, rows;
        size_t widest = 0;
        bool overlapped = true;
        for (long r = 0; r < repeats; ++r) {
            const ParallelRun run = run_parallel(generators, prompts, n_gen, batcher.get());
            rates.push_back(run.aggregate_tps);
            p50s.push_back(percentile(run.gaps_ms, 0.50));
            p99s.push_back(percentile(run.gaps_ms, 0.99));
            rows.push_back(run.rows_per_step);
            widest = std::max(widest, run.widest);
            overlapped = overlapped && run.overlapped;
        }
        const Spread rate = spread_of(rates), p50 = spread_of(p50s), p99 = spread_of(p99s),
                     row = spread_of(rows);
        const double ideal = double(n) * tg1.median;
        const double target = 0.8 * (pp_rate > 0 ? std::min(ideal, pp_rate) : ideal);
        const bool met = rate.median >= target;
        const Spread per_generator{rate.median / double(n), rate.min / double(n),
                                   rate.max / double(n)};
        std::printf("| %ld | %s | %s | %s | %s | %s | %.2f | %s |\n", n,
                    range(rate, "%.2f").c_str(), range(per_generator, "%.2f").c_str(),
                    range(p50, "%.2f").c_str(), range(p99, "%.2f").c_str(),
                    range(row, "%.1f").c_str(), target, met ? "yes" : "no");
        if (!overlapped) not_overlapped += (not_overlapped.empty() ? "" : ", ") + std::to_string(n);
        results.push_back({{"n", n},
                           {"max_batch", batcher_options.max_batch},
                           {"aggregate_tokens_per_s", spread_json(rate, rates)},
                           {"token_gap_p50_ms", spread_json(p50, p50s)},
                           {"token_gap_p99_ms", spread_json(p99, p99s)},
                           {"rows_per_step", spread_json(row, rows)},
                           {"widest_step", widest},
                           {"all_decoding_window", overlapped},
                           {"target_tokens_per_s", target},
                           {"target_met", met}});
    }
    if (pp_rate > 0)
        std::printf("(%s = %.2f t/s: the prefill rate bounds what any batch can reach)\n",
                    pp_name.c_str(), pp_rate);
    if (!not_overlapped.empty())
        std::printf(
            "(N = %s: in some run the generators never all decoded at once (a generator "
            "finished before "
            "the last one started); there aggregate t/s is all tokens after each one's "
            "first / first "
            "first token .. last last token)\n",
            not_overlapped.c_str());
    const smol::BatcherOptions defaults;
    std::fflush(stdout);
    return {{"prompt_tokens", kParallelPromptTokens},
            {"n_gen", n_gen},
            {"tg1_tokens_per_s", spread_json(tg1, tg1_runs)},
            {"pp_tokens_per_s", pp_rate > 0 ? nlohmann::json(pp_rate) : nlohmann::json()},
            {"prefill_shared", defaults.prefill_shared},
            {"results", results}};
}

// A long prompt arrives while 3 generators decode.
nlohmann::json prompt_arrival(const Options& args, const std::shared_ptr<const smol::Model>& model,
                              double pp_rate, RandomIds& random_ids) {
    const smol::Config& config = model->config();
    const long repeats = args.repeats, arrival_tokens = args.arrival_tokens;
    const size_t vocab = config.vocab_size;
    const std::string pp_name = pp_test_name(args.n_prompt);
    const size_t long_tokens = size_t(arrival_tokens);
    if (long_tokens + 1 > config.context_length)
        throw std::invalid_argument("--arrival-tokens: the model's context is " +
                                    std::to_string(config.context_length) + " positions");
    const std::vector<std::vector<int32_t>> prompts = parallel_prompts(kArrivalDecoders + 1, vocab);
    const std::vector<int32_t> long_prompt = random_ids(long_tokens);
    auto batcher = std::make_shared<smol::Batcher>(model);
    const smol::BatcherOptions& bo = batcher->options();
    // Enough tokens for the decoders to outlast the prefill even if every one
    // of its steps produced two decoder tokens; they are cancelled once it is over.
    const size_t prefill_steps = (long_tokens + bo.prefill_shared - 1) / bo.prefill_shared;
    const long decoder_tokens = long(kArrivalWarmTokens + 4 * prefill_steps + 64);
    std::vector<std::unique_ptr<smol::Generator>> decoders;
    for (size_t i = 0; i < kArrivalDecoders; ++i)
        decoders.push_back(
            make_generator(model, batcher, kParallelPromptTokens + size_t(decoder_tokens)));
    const auto newcomer = make_generator(model, batcher, long_tokens + 1);
    std::vector<double> ttfts, medians, worsts, ratios;
    long met_runs = 0;
    bool complete = true;
    size_t tokens_during = 0;
    std::vector<double> steps, rows_per_step;
    for (long r = 0; r < repeats; ++r) {
        const ArrivalRun run =
            run_arrival(decoders, *newcomer, prompts, long_prompt, decoder_tokens, *batcher);
        ttfts.push_back(run.ttft_ms);
        medians.push_back(run.median_gap_ms);
        worsts.push_back(run.worst_gap_ms);
        const double ratio = run.median_gap_ms > 0 ? run.worst_gap_ms / run.median_gap_ms : 0;
        ratios.push_back(ratio);
        met_runs += ratio <= 2.0;
        complete = complete && run.complete;
        tokens_during = std::max(tokens_during, run.tokens_during);
        steps.push_back(double(run.steps));
        rows_per_step.push_back(run.steps ? double(run.rows) / double(run.steps) : 0.0);
    }
    const Spread ttft = spread_of(ttfts), median = spread_of(medians), worst = spread_of(worsts),
                 ratio = spread_of(ratios), step = spread_of(steps), row = spread_of(rows_per_step);
    std::printf(
        "\nprompt arrival: %zu generators decode (%zu-token prompts, greedy) sharing one "
        "smol::Batcher "
        "(max_batch %zu, prefill_shared %zu); once each has %zu tokens a 4th gets a "
        "%zu-token prompt; "
        "median of %ld runs [min-max]\n",
        kArrivalDecoders, kParallelPromptTokens, bo.max_batch, bo.prefill_shared,
        kArrivalWarmTokens, long_tokens, repeats);
    std::printf("\n| figure | median | min | max |\n|---|---|---|---|\n");
    std::printf("| decoders' median token gap before the prompt (ms) | %.2f | %.2f | %.2f |\n",
                median.median, median.min, median.max);
    std::printf("| decoders' worst token gap overlapping its prefill (ms) | %.2f | %.2f | %.2f |\n",
                worst.median, worst.min, worst.max);
    std::printf("| worst / median (target <= 2) | %.2f | %.2f | %.2f |\n", ratio.median, ratio.min,
                ratio.max);
    std::printf("| the 4th's time to first token (ms) | %.1f | %.1f | %.1f |\n", ttft.median,
                ttft.min, ttft.max);
    std::printf("| batcher steps during its prefill | %.0f | %.0f | %.0f |\n", step.median,
                step.min, step.max);
    std::printf("| rows per step during its prefill | %.1f | %.1f | %.1f |\n", row.median, row.min,
                row.max);
    std::printf(
        "target worst <= 2 x median: met in %ld of %ld runs; decoders made up to %zu "
        "tokens during "
        "the prefill",
        met_runs, repeats, tokens_during);
    if (pp_rate > 0)
        std::printf("; alone, %zu tokens at the %s rate take about %.1f ms", long_tokens,
                    pp_name.c_str(), 1000.0 * double(long_tokens) / pp_rate);
    std::printf("\n");
    if (!complete)
        std::printf(
            "(a decoder ran out of tokens before the prefill ended: the worst gap covers "
            "part of it)\n");
    std::fflush(stdout);
    return {{"decoders", kArrivalDecoders},
            {"prompt_tokens", long_tokens},
            {"warm_tokens", kArrivalWarmTokens},
            {"median_gap_ms", spread_json(median, medians)},
            {"worst_gap_ms", spread_json(worst, worsts)},
            {"worst_over_median", spread_json(ratio, ratios)},
            {"ttft_ms", spread_json(ttft, ttfts)},
            {"prefill_steps", spread_json(step, steps)},
            {"prefill_rows_per_step", spread_json(row, rows_per_step)},
            {"target_met_runs", met_runs},
            {"complete", complete}};
}

}  // namespace smol_bench
