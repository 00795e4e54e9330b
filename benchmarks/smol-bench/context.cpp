// smol-bench --shift and --chat-turns: what ContextPolicy::shift costs.
//   --shift N: a cache holding N positions (default context: 4,096) drops its
//     oldest N / 2 after a 4-token head through Backend::erase, against a
//     prefill of N / 2 tokens; alternated, -r times each.
//   --chat-turns T: a T-turn chat through one Generator with shift at the
//     model's default context, random-weight replies of up to -n tokens: the
//     mean prefill per turn (tokens and ms) before and after the first shift.
#include <cstdio>

#include "bench.hpp"

namespace smol_bench {

nlohmann::json shift_cost(const Options& args, const std::shared_ptr<const smol::Model>& model,
                          const smol::ForwardOptions& forward_options, RandomIds& random_ids) {
    const size_t positions = size_t(args.shift_positions), half = positions / 2, head = 4;
    const size_t vocab = model->config().vocab_size;
    std::vector<float> logits(vocab);
    std::unique_ptr<smol::BackendCache> cache = model->backend().make_cache(positions);
    const std::vector<int32_t> fill = random_ids(positions);
    std::vector<double> erase_ms, prefill_ms;
    for (long r = 0; r < args.repeats; ++r) {
        // Fill the cache (untimed), then time the erase of half of it.
        cache->clear();
        run_forward(*model, *cache, fill.data(), positions, 0, logits, forward_options);
        auto t0 = Clock::now();
        model->backend().erase(*cache, head, half);
        erase_ms.push_back(ms_between(t0, Clock::now()));
        // A prefill of as many tokens, on top of what the erase left.
        cache->truncate(head);
        t0 = Clock::now();
        run_forward(*model, *cache, fill.data() + head, half, head, logits, forward_options);
        prefill_ms.push_back(ms_between(t0, Clock::now()));
    }
    const Spread e = spread_of(erase_ms), p = spread_of(prefill_ms);
    std::printf(
        "\ncontext shift: erase %zu of %zu cached positions (after a %zu-token head) vs a "
        "prefill of %zu tokens; median of %ld [min-max]\n\n| erase ms | prefill ms | erase / "
        "prefill |\n|---|---|---|\n| %.1f [%.1f-%.1f] | %.1f [%.1f-%.1f] | %.2f %% |\n",
        half, positions, head, half, args.repeats, e.median, e.min, e.max, p.median, p.min, p.max,
        100.0 * e.median / p.median);
    std::fflush(stdout);
    return {{"positions", positions},
            {"erased", half},
            {"erase_ms", spread_json(e, erase_ms)},
            {"prefill_ms", spread_json(p, prefill_ms)},
            {"ratio", e.median / p.median}};
}

nlohmann::json chat_turns(const Options& args, const std::shared_ptr<const smol::Model>& model) {
    smol::GeneratorOptions options;
    options.context_policy = smol::ContextPolicy::shift;
    if (args.n_ctx > 0) options.n_ctx = size_t(args.n_ctx);
    smol::Generator gen(model, options);
    smol::GenerateParams params;
    params.max_tokens = int(args.n_gen);
    params.temperature = 0.0f;
    params.ignore_eos = true;
    params.chat.enable_thinking = false;
    std::vector<smol::ChatMessage> messages = {
        {"system",
         "You are Brannoc, the blacksmith of a mountain village. You answer travellers "
         "briefly and stay in character."}};
    struct Sum {
        double tokens = 0, ms = 0;
        size_t turns = 0;
    } before, after;
    size_t first_shift = 0;
    for (long turn = 0; turn < args.chat_turns; ++turn) {
        messages.push_back({"user", "Turn " + std::to_string(turn) +
                                        ": what news from the mine, and what would you forge "
                                        "for a traveller going north?"});
        const smol::GenerateResult r = gen.chat(messages, params);
        if (r.n_discarded_tokens > 0 && first_shift == 0) first_shift = size_t(turn) + 1;
        Sum& s = first_shift ? after : before;
        s.tokens += double(r.n_prefilled_tokens());
        s.ms += r.prefill_ms;
        ++s.turns;
        messages.push_back({"assistant", r.text, /*model_output=*/true});
    }
    auto mean = [](double total, size_t n) { return n ? total / double(n) : 0.0; };
    const double before_ms = mean(before.ms, before.turns), after_ms = mean(after.ms, after.turns);
    std::printf(
        "\nlong chat with shift: %ld turns at n_ctx %zu, replies of %ld tokens; first shift at "
        "turn %zu\n\n| turns | mean prefill tokens | mean prefill ms |\n|---|---|---|\n"
        "| before the first shift: %zu | %.1f | %.1f |\n| from it on: %zu | %.1f | %.1f |\n"
        "after / before: %.2fx (ms)\n",
        args.chat_turns, gen.n_ctx(), args.n_gen, first_shift, before.turns,
        mean(before.tokens, before.turns), before_ms, after.turns, mean(after.tokens, after.turns),
        after_ms, before_ms > 0 ? after_ms / before_ms : 0.0);
    std::fflush(stdout);
    return {{"turns", args.chat_turns},
            {"n_ctx", gen.n_ctx()},
            {"first_shift_turn", first_shift},
            {"before",
             {{"turns", before.turns},
              {"prefill_tokens", mean(before.tokens, before.turns)},
              {"prefill_ms", before_ms}}},
            {"after",
             {{"turns", after.turns},
              {"prefill_tokens", mean(after.tokens, after.turns)},
              {"prefill_ms", after_ms}}}};
}

}  // namespace smol_bench
