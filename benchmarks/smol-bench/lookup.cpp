// smol-bench --lookup K: what lookup decoding (GenerateParams::lookup,
// generation/lookup.hpp) costs and gains.
//   1. The verify step on the backend: one sequence after a 64-token prompt,
//      a step of 1 token (the last position's logits) against a step of K + 1
//      tokens with every row's logits, alternated, the cache cut back after
//      each so both run at the same position; -r x 8 steps each. Target for
//      K = 4: ratio <= 1.3.
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

    // 1. One step of 1 row against one of k + 1 rows with every row's logits.
    auto cache = model->backend().make_cache(kPrompt + k + 1);
    std::vector<float> last(vocab), rows((k + 1) * vocab);
    const std::vector<int32_t> prompt = random_ids(kPrompt);
    run_forward(*model, *cache, prompt.data(), prompt.size(), 0, last, forward_options);
    const std::vector<int32_t> chunk = random_ids(k + 1);
    std::vector<double> one_ms, verify_ms;
    for (size_t step = 0; step < size_t(repeats) * kStepsPerRun; ++step) {
        for (int wide = 0; wide < 2; ++wide) {
            smol::Segment segment;
            segment.tokens = chunk.data();
            segment.n_tokens = wide ? k + 1 : 1;
            segment.start = kPrompt;
            segment.cache = cache.get();
            segment.logits = wide ? rows.data() : last.data();
            segment.all_logits = wide != 0;
            const auto t0 = Clock::now();
            model->backend().forward(segment, forward_options);
            (wide ? verify_ms : one_ms).push_back(ms_between(t0, Clock::now()));
            cache->truncate(kPrompt);
        }
    }
    const Spread one = spread_of(one_ms), verify = spread_of(verify_ms);
    const double step_ratio = one.median > 0 ? verify.median / one.median : 0;
    std::printf(
        "\nlookup decoding, k = %zu: one verify step (%zu rows, every row's logits) against a "
        "one-token step, after a %zu-token prompt; median of %ld x %zu steps [min-max]\n"
        "  1 row    %.2f ms [%.2f-%.2f]\n  %zu rows   %.2f ms [%.2f-%.2f]\n"
        "  ratio    %.3f (target for k = 4: <= 1.3)\n",
        k, k + 1, kPrompt, repeats, kStepsPerRun, one.median, one.min, one.max, k + 1,
        verify.median, verify.min, verify.max, step_ratio);
    std::fflush(stdout);

    // 2. Whole decodes.
    nlohmann::json out = {{"k", k},
                          {"one_row_step_ms", spread_json(one, one_ms)},
                          {"verify_step_ms", spread_json(verify, verify_ms)},
                          {"verify_step_ratio", step_ratio}};
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
            p.lookup.enabled = v > 0;
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
