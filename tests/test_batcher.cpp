// smol::Batcher (generation/batcher.hpp): generators that share forward passes.
//
// The rule for "the same output": a row of a batched step gets the bits it
// gets alone (the multi-column tiles add each column as the one-column tiles
// do: tests/test_lookup.cpp), but a prompt split into shares may read exact
// rows where an unbatched prefill reads converted ones (long prompts), so
// logits may differ from an unbatched run in the last bits. As for the goldens
// (fixtures README), greedy ids must then be
// identical until the first step where they differ, and at that step the
// unbatched run's top-1/top-2 logit gap must be below 0.25 (an ambiguous step;
// after it the paths may legitimately part).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/generator_testutil.hpp"

// In a namespace of its own: tests/CMakeLists.txt compiles it in one unit with
// the other files of its group.
namespace test_batcher {

namespace {

using smol_test::greedy;
using smol_test::made_model;
using smol_test::rendezvous;

const std::vector<std::string> kPrompts = {"The blacksmith said",
                                           "Once upon a time in a village by the sea,",
                                           "Guard: Halt! Who goes",
                                           "The merchant counted the coins and",
                                           "A long time ago",
                                           "Rain fell on the roofs of",
                                           "The old wizard opened the book",
                                           "Traveller, have you heard"};

// One greedy run: the ids and, per step, the gap between the two largest logits.
struct Run {
    std::vector<int32_t> ids;
    std::vector<float> gaps;
    smol::StopReason stop = smol::StopReason::error;
};

smol::GenerateParams recording(int max_tokens, Run& run) {
    smol::GenerateParams p = greedy(max_tokens);
    p.logits_hook = [&run](float* logits, size_t n) {
        float first = -1e30f, second = -1e30f;
        for (size_t i = 0; i < n; ++i) {
            if (logits[i] > first) {
                second = first;
                first = logits[i];
            } else if (logits[i] > second) {
                second = logits[i];
            }
        }
        run.gaps.push_back(first - second);
    };
    return p;
}

Run run_alone(const std::shared_ptr<const smol::Model>& model, const std::string& prompt,
              int max_tokens) {
    smol::Generator gen(model);
    Run run;
    auto r = gen.generate(prompt, recording(max_tokens, run));
    run.ids = r.tokens;
    run.stop = r.stop_reason;
    return run;
}

// The greedy rule above, `batched` against `alone`.
void check_same_output(const Run& alone, const Run& batched, const std::string& what) {
    INFO(what);
    const size_t common = smol_test::common_prefix(alone.ids, batched.ids);
    if (common == alone.ids.size() && common == batched.ids.size()) return;
    REQUIRE(common < alone.gaps.size());
    CHECK_MESSAGE(alone.gaps[common] < 0.25f, "first difference at step " << common
                                                                          << ", where the gap is "
                                                                          << alone.gaps[common]);
}

}  // namespace

TEST_CASE("batcher: one generator with a batcher gives exactly what it gives without") {
    auto model = made_model(1);
    const Run alone = run_alone(model, kPrompts[1], 24);
    smol::GeneratorOptions options;
    options.batcher = std::make_shared<smol::Batcher>(model);
    smol::Generator gen(model, options);
    Run run;
    auto r = gen.generate(kPrompts[1], recording(24, run));
    CHECK(r.tokens == alone.ids);
    CHECK(run.gaps == alone.gaps);  // one request per step: the same kernels, bit for bit
    CHECK(options.batcher->stats().widest == 1);
}

TEST_CASE("batcher: concurrent generators share steps and match their runs alone") {
    auto model = made_model(1);
    const int kTokens = 24;
    for (size_t n : {2u, 4u, 8u}) {
        CAPTURE(n);
        std::vector<Run> alone;
        for (size_t i = 0; i < n; ++i) alone.push_back(run_alone(model, kPrompts[i], kTokens));

        smol::GeneratorOptions options;
        options.batcher = std::make_shared<smol::Batcher>(model);
        std::vector<std::unique_ptr<smol::Generator>> gens;
        for (size_t i = 0; i < n; ++i)
            gens.push_back(std::make_unique<smol::Generator>(model, options));
        std::vector<Run> batched(n);
        std::vector<smol::AsyncGeneration> runs;
        auto arrived = std::make_shared<std::atomic<size_t>>(0);
        for (size_t i = 0; i < n; ++i) {
            smol::GenerateParams p = recording(kTokens, batched[i]);
            rendezvous(p, arrived, n);
            runs.push_back(gens[i]->generate_async(kPrompts[i], p));
        }
        for (size_t i = 0; i < n; ++i) {
            auto r = runs[i].wait();
            batched[i].ids = r.tokens;
            CHECK(r.stop_reason == smol::StopReason::max_tokens);
        }
        for (size_t i = 0; i < n; ++i) check_same_output(alone[i], batched[i], kPrompts[i]);
        const smol::Batcher::Stats stats = options.batcher->stats();
        CHECK(stats.widest > 1);  // steps were shared
        CHECK(stats.widest <= options.batcher->options().max_batch);
        CHECK(stats.steps < n * kTokens);  // fewer passes than tokens
    }
}

TEST_CASE("batcher: a long prompt is prefilled in shares while others decode") {
    auto model = made_model(1);
    std::string long_prompt;
    for (int i = 0; i < 20; ++i) long_prompt += kPrompts[size_t(i) % kPrompts.size()] + " ";
    const Run alone_long = run_alone(model, long_prompt, 8);
    const Run alone_short = run_alone(model, kPrompts[0], 40);

    smol::BatcherOptions batcher_options;
    batcher_options.prefill_shared = 8;
    smol::GeneratorOptions options;
    options.batcher = std::make_shared<smol::Batcher>(model, batcher_options);
    smol::Generator decoder(model, options), prompter(model, options);
    Run short_run, long_run;
    auto a = decoder.generate_async(kPrompts[0], recording(40, short_run));
    while (a.poll().empty() && !a.done()) std::this_thread::yield();  // decoding has begun
    auto b = prompter.generate_async(long_prompt, recording(8, long_run));
    short_run.ids = a.wait().tokens;
    long_run.ids = b.wait().tokens;
    check_same_output(alone_short, short_run, "the decoding generator");
    check_same_output(alone_long, long_run, "the long prompt");
}

TEST_CASE("batcher: a prompt's share ends a step on a multiple of the backend's row group") {
    using smol::detail::prefill_share;
    // The CPU tiles take 8 rows at a time: a 9th row starts a second pass.
    CHECK(made_model(1)->backend().batch_rows() == 8);
    // Room for 9.5 rows beside 3 decoders: 5 prompt rows make 8, not 6 make 9.
    CHECK(prefill_share(9.5, 3, 64, 8) == 5);
    CHECK(prefill_share(20.0, 3, 64, 8) == 13);  // 16 rows, not 20
    CHECK(prefill_share(7.9, 3, 64, 8) == 4);    // under one group: as the budget says
    CHECK(prefill_share(8.0, 3, 64, 8) == 5);
    CHECK(prefill_share(9.5, 7, 64, 8) == 1);    // 7 others: the multiple leaves 1
    CHECK(prefill_share(9.5, 3, 4, 8) == 4);     // the cap first
    CHECK(prefill_share(20.0, 3, 64, 0) == 17);  // no row group known
    CHECK(prefill_share(2.0, 3, 64, 8) == 1);    // no room: still 1, the prompt advances
    CHECK(prefill_share(std::numeric_limits<double>::quiet_NaN(), 3, 64, 8) == 1);
    CHECK(prefill_share(1e30, 3, 64, 8) == 61);  // the cap, then down to 64 rows
}

TEST_CASE("batcher: one member cancelled or out of context leaves the others' output unchanged") {
    auto model = made_model(1);
    const int kTokens = 24;
    const Run alone0 = run_alone(model, kPrompts[0], kTokens);
    const Run alone2 = run_alone(model, kPrompts[2], kTokens);

    smol::GeneratorOptions options;
    options.batcher = std::make_shared<smol::Batcher>(model);
    smol::GeneratorOptions tight = options;
    tight.n_ctx = 24;  // the prompt and a few tokens: context_full mid-run
    smol::Generator g0(model, options), g1(model, options), g2(model, options), g3(model, tight);
    Run r0, r1, r2, r3;
    auto a0 = g0.generate_async(kPrompts[0], recording(kTokens, r0));
    // g1 stops itself (its hook cancels it) after 5 tokens.
    smol::GenerateParams p1 = recording(kTokens, r1);
    auto hook1 = p1.logits_hook;
    p1.logits_hook = [&, hook1](float* logits, size_t n) {
        hook1(logits, n);
        if (r1.gaps.size() == 5) g1.cancel();
    };
    auto a1 = g1.generate_async(kPrompts[1], p1);
    auto a2 = g2.generate_async(kPrompts[2], recording(kTokens, r2));
    auto a3 = g3.generate_async(kPrompts[3], recording(kTokens, r3));
    r0.ids = a0.wait().tokens;
    const auto res1 = a1.wait();
    r2.ids = a2.wait().tokens;
    const auto res3 = a3.wait();
    CHECK(res1.stop_reason == smol::StopReason::cancelled);
    CHECK(res1.tokens.size() <= 6);
    CHECK(res3.stop_reason == smol::StopReason::context_full);
    check_same_output(alone0, r0, "member 0");
    check_same_output(alone2, r2, "member 2");
}

TEST_CASE("batcher: a batcher of another model is refused; bad options are errors") {
    auto model = made_model(1);
    auto other = made_model(2);
    smol::GeneratorOptions options;
    options.batcher = std::make_shared<smol::Batcher>(other);
    smol::ErrorInfo error;
    CHECK(smol::Generator::try_create(model, options, &error) == nullptr);
    CHECK(error.kind == smol::ErrorKind::invalid_argument);
    smol::BatcherOptions zero;
    zero.max_batch = 0;
    CHECK_THROWS_AS(smol::Batcher(model, zero), smol::Error);
}

TEST_CASE("batcher: 8 generators on 4 threads start, cancel and go away at random moments") {
    auto model = made_model(1);
    smol::GeneratorOptions options;
    options.batcher = std::make_shared<smol::Batcher>(model);
    std::atomic<int> finished{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            std::mt19937 rng(uint32_t(100 + t));
            for (int round = 0; round < 3; ++round) {
                auto a = std::make_unique<smol::Generator>(model, options);
                auto b = std::make_unique<smol::Generator>(model, options);
                smol::GenerateParams p = greedy(int(4 + rng() % 12));
                auto ra = a->generate_async(kPrompts[rng() % kPrompts.size()], p);
                auto rb = b->generate_async(kPrompts[rng() % kPrompts.size()], p);
                switch (rng() % 4) {
                    case 0:
                        ra.cancel();
                        break;  // cancel one at once
                    case 1:
                        b.reset();
                        break;  // destroy one mid-run
                    case 2:
                        std::this_thread::yield();
                        break;
                    default:
                        a->cancel();
                        break;  // cancel through the generator
                }
                const auto result = ra.wait();
                CHECK((result.stop_reason == smol::StopReason::max_tokens ||
                       result.stop_reason == smol::StopReason::cancelled));
                if (b) rb.wait();
                finished.fetch_add(1);
            }
        });
    }
    for (auto& thread : threads) thread.join();
    CHECK(finished.load() == 12);
}

}  // namespace test_batcher
