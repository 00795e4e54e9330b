// smol-bench --lookup K: what lookup decoding (GenerateParams::lookup,
// generation/lookup.hpp) costs and gains.
//   1. The verify step on the backend: one sequence after a 64-token prompt,
//      a step of 1 token (the last position's logits) against steps of d + 1
//      tokens with every row's logits (d = K, K / 2, .. 1: what the back-off
//      runs), alternated, the cache cut back after each so all run at the same
//      position; -r x 8 steps each. Target for K = 4: ratio <= 1.3. From these
//      ratios, the back-off's worst case computed: every draft wrong over
//      max(-n, 128) tokens, DraftBudget replayed (target <= 0.5 %).
//   2. Whole decodes through smol::Generator (greedy, ignore_eos, -n tokens
//      after a 64-token random prompt), alternated -r times: plain; lookup
//      with its n-gram drafts; lookup with every draft right (the plain run's
//      own continuation, through LookupParams::draft_hook) and with every
//      draft wrong (the same ids plus one). Decode t/s (GenerateResult's
//      decode_ms), the ratio to plain, tokens per decode step and the drafts
//      accepted. Targets: all wrong >= 0.98 x plain, all right >= 2.5 x plain.
//      On random weights the n-gram figure flatters (such models loop).
#include <cstdio>

#include "bench.hpp"

namespace smol_bench {

namespace {

struct Variant {
    const char* name;
    std::vector<double> rates, tokens_per_step, accepted, drafted;
};

}  // namespace

nlohmann::json lookup_cost(const Options& args, const std::shared_ptr<const smol::Model>& model,
                           const smol::ForwardOptions& forward_options, RandomIds& random_ids) {
    const size_t k = size_t(args.lookup), vocab = model->config().vocab_size;
    const long repeats = args.repeats;
    constexpr size_t kPrompt = 64, kStepsPerRun = 8;

    // 1. One step of 1 row against steps of d + 1 rows with every row's
    // logits, for each draft count d the back-off (detail::DraftBudget) runs
    // when every draft is wrong: k, k / 2, .. 1.
    std::vector<size_t> draft_counts;
    for (size_t d = k; d >= 1; d /= 2) draft_counts.push_back(d);
    auto cache = model->backend().make_cache(kPrompt + k + 1);
    std::vector<float> last(vocab), rows((k + 1) * vocab);
    const std::vector<int32_t> prompt = random_ids(kPrompt);
    run_forward(*model, *cache, prompt.data(), prompt.size(), 0, last, forward_options);
    const std::vector<int32_t> chunk = random_ids(k + 1);
    std::vector<double> one_ms;
    std::vector<std::vector<double>> verify_ms(draft_counts.size());
    for (size_t step = 0; step < size_t(repeats) * kStepsPerRun; ++step) {
        for (size_t i = 0; i < draft_counts.size(); ++i) {
            for (int wide = 0; wide < 2; ++wide) {
                if (!wide && i > 0) continue;  // one 1-row step per round
                smol::Segment segment;
                segment.tokens = chunk.data();
                segment.n_tokens = wide ? draft_counts[i] + 1 : 1;
                segment.start = kPrompt;
                segment.cache = cache.get();
                segment.logits = wide ? rows.data() : last.data();
                segment.all_logits = wide != 0;
                const auto t0 = Clock::now();
                model->backend().forward(segment, forward_options);
                (wide ? verify_ms[i] : one_ms).push_back(ms_between(t0, Clock::now()));
                cache->truncate(kPrompt);
            }
        }
    }
    const Spread one = spread_of(one_ms);
    std::vector<double> ratios;
    std::printf(
        "\nlookup decoding, k = %zu: verify steps (d + 1 rows, every row's logits) against a "
        "one-token step, after a %zu-token prompt; median of %ld x %zu steps [min-max]\n"
        "  1 row     %.2f ms [%.2f-%.2f]\n",
        k, kPrompt, repeats, kStepsPerRun, one.median, one.min, one.max);
    nlohmann::json verify_json = nlohmann::json::object();
    for (size_t i = 0; i < draft_counts.size(); ++i) {
        const Spread verify = spread_of(verify_ms[i]);
        ratios.push_back(one.median > 0 ? verify.median / one.median : 0);
        std::printf("  %zu rows    %.2f ms [%.2f-%.2f]  ratio %.3f\n", draft_counts[i] + 1,
                    verify.median, verify.min, verify.max, ratios.back());
        verify_json[std::to_string(draft_counts[i])] = {{"ms", spread_json(verify, verify_ms[i])},
                                                        {"ratio", ratios.back()}};
    }
    std::printf("  target for k = 4: the 5-row ratio <= 1.3\n");

    // The back-off's worst case, computed: every draft wrong for n tokens, the
    // budget replayed, each drafted step's extra cost its measured ratio - 1.
    const size_t n_tokens = size_t(std::max<long>(args.n_gen, 128));
    smol::detail::DraftBudget budget(k);
    double extra = 0;
    size_t drafted_rows = 0, drafted_steps = 0;
    for (size_t t = 0; t < n_tokens; ++t) {
        const size_t d = budget.next();
        if (d == 0) continue;
        const size_t i =
            size_t(std::find(draft_counts.begin(), draft_counts.end(), d) - draft_counts.begin());
        if (i < ratios.size()) extra += ratios[i] - 1;
        drafted_rows += d;
        ++drafted_steps;
        budget.record(d, 0);
    }
    const double worst = extra / double(n_tokens);
    std::printf(
        "  every draft wrong, computed over %zu tokens: %zu steps drafted %zu rows, cost "
        "%.2f %% of plain decoding (target <= 0.5 %%)\n",
        n_tokens, drafted_steps, drafted_rows, 100 * worst);
    std::fflush(stdout);

    // 2. Whole decodes.
    nlohmann::json out = {
        {"k", k},
        {"one_row_step_ms", spread_json(one, one_ms)},
        {"verify_steps", verify_json},
        {"verify_step_ratio", ratios.front()},
        {"all_wrong_cost_computed",
         {{"tokens", n_tokens}, {"drafted_rows", drafted_rows}, {"fraction", worst}}}};
    if (args.n_gen < 2) return out;
    smol::GeneratorOptions options;
    options.n_ctx = std::min(kPrompt + size_t(args.n_gen) + k + 2, model->config().context_length);
    smol::Generator gen(model, options);
    const std::vector<int32_t> ids = random_ids(kPrompt);
    smol::GenerateParams plain;
    plain.temperature = 0;
    plain.max_tokens = int(args.n_gen);
    plain.ignore_eos = true;
    const std::vector<int32_t> truth = gen.generate_tokens(ids, plain).tokens;
    auto forced = [&](bool right) {
        return [&truth, right, vocab](const std::vector<int32_t>& history, size_t max,
                                      std::vector<int32_t>& drafts) {
            const size_t done = history.size() - kPrompt;
            for (size_t i = 0; i < max && done + i < truth.size(); ++i)
                drafts.push_back(right ? truth[done + i] : int32_t((truth[done + i] + 1) % vocab));
        };
    };
    std::vector<Variant> variants = {{"plain", {}, {}, {}, {}},
                                     {"n-gram", {}, {}, {}, {}},
                                     {"all right", {}, {}, {}, {}},
                                     {"all wrong", {}, {}, {}, {}}};
    for (long r = 0; r < repeats; ++r) {
        for (size_t v = 0; v < variants.size(); ++v) {
            smol::GenerateParams p = plain;
            p.lookup.mode = v > 0 ? smol::LookupMode::on : smol::LookupMode::off;
            p.lookup.k = k;
            if (v == 2) p.lookup.draft_hook = forced(true);
            if (v == 3) p.lookup.draft_hook = forced(false);
            gen.reset();  // every run prefills the same prompt
            const smol::GenerateResult result = gen.generate_tokens(ids, p);
            if (result.tokens != truth)
                std::fprintf(stderr, "smol-bench --lookup: the %s run's tokens differ from plain\n",
                             variants[v].name);
            variants[v].rates.push_back(result.decode_tokens_per_s());
            variants[v].tokens_per_step.push_back(
                double(result.tokens.size()) / double(std::max<size_t>(1, result.n_decode_steps)));
            variants[v].accepted.push_back(double(result.n_accepted_drafts));
            variants[v].drafted.push_back(double(result.n_drafted_tokens));
        }
    }
    const double plain_rate = stats_of(variants[0].rates).mean;
    std::printf(
        "\nlookup decoding, k = %zu: %ld tokens after a %zu-token prompt, greedy, %ld runs each "
        "(alternated)\n\n| drafts | decode t/s | vs plain | tokens/step | accepted/drafted |\n"
        "|---|---|---|---|---|\n",
        k, args.n_gen, kPrompt, repeats);
    nlohmann::json runs = nlohmann::json::object();
    for (const Variant& v : variants) {
        const Stats rate = stats_of(v.rates);
        const double ratio = plain_rate > 0 ? rate.mean / plain_rate : 0;
        const double accepted = stats_of(v.accepted).mean, drafted = stats_of(v.drafted).mean;
        std::printf("| %s | %.2f ± %.2f | %.3f | %.2f | %.1f/%.1f |\n", v.name, rate.mean,
                    rate.stddev, ratio, stats_of(v.tokens_per_step).mean, accepted, drafted);
        runs[v.name] = {{"tokens_per_s", rate.mean},
                        {"stddev", rate.stddev},
                        {"vs_plain", ratio},
                        {"tokens_per_step", stats_of(v.tokens_per_step).mean},
                        {"accepted_drafts", accepted},
                        {"drafted_tokens", drafted},
                        {"runs", v.rates}};
    }
    std::printf("targets: all wrong >= 0.98 x plain, all right >= 2.5 x plain (k = 4)\n");
    std::fflush(stdout);
    out["decode"] = runs;
    return out;
}

}  // namespace smol_bench
