// Lookup decoding (generation/lookup.hpp, GenerateParams::lookup): drafts from
// the context, verified in one batched step.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "support/fixtures.hpp"
#include "support/generator_testutil.hpp"
#include "support/model_testutil.hpp"

// In a namespace of its own: tests/CMakeLists.txt compiles it in one unit with
// the other files of its group.
namespace test_lookup {

namespace {

// A prompt of `n` ids drawn from the vocabulary (fixed seed).
std::vector<int32_t> some_tokens(size_t n, size_t vocab, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> ids(n);
    for (int32_t& id : ids) id = int32_t(rng() % vocab);
    return ids;
}

}  // namespace

// The verify step runs the last token and k drafts as one chunk with every
// row's logits, through the multi-column tiles; plain decoding runs one token
// at a time through the one-column tiles. Greedy lookup decoding equals plain
// decoding bit for bit exactly when these agree: compared here per level and
// per fixture, on the bits of every row.
TEST_CASE("a chunk of k + 1 tokens gives each token the one-token path's bits, at every level") {
    size_t count = 0;
    const smol::CpuLevel* levels = smol::compiled_cpu_levels(count);
    for (const char* name :
         {"tiny-q4km.gguf", "tiny-q8_0.gguf", "tiny-gqa-q5km.gguf", "small-q4km.gguf"}) {
        // Under the sanitizers the tiny fixtures run the same code paths; the
        // wider one (the slowest) is compared in the Release run only.
        if (smol_test::kSanitized && std::string(name) == "small-q4km.gguf") continue;
        const auto path = smol_test::fixture(name);
        if (!path) continue;
        for (size_t i = 0; i < count; ++i) {
            if (!smol::cpu_supports(levels[i])) continue;
            MESSAGE(
                (std::string(name) + ": " + smol::cpu_level_name(levels[i]) + " kernels compared"));
            const bool tiny = std::string(name) == "tiny-q4km.gguf";
            for (const smol::KVType kv_type :
                 {smol::KVType::f16, smol::KVType::f32, smol::KVType::q8_0}) {
                if (!tiny && kv_type != smol::KVType::f16) continue;
                const int threads = kv_type == smol::KVType::f32 ? 1 : 2;
                CAPTURE(name);
                CAPTURE(smol::cpu_level_name(levels[i]));
                CAPTURE(smol::kv_type_name(kv_type));
                smol::LoadOptions options;
                options.n_threads = threads;
                options.cpu = levels[i];
                const auto model = smol::Model::load(*path, options);
                const size_t vocab = model->config().vocab_size;
                const std::vector<int32_t> prompt = some_tokens(23, vocab, 5);
                for (const size_t k : {1, 2, 4, 7}) {
                    // Under the sanitizers one short and the longest chunk.
                    if (smol_test::kSanitized && k != 2 && k != 7) continue;
                    CAPTURE(k);
                    const std::vector<int32_t> step = some_tokens(k + 1, vocab, 11 + uint32_t(k));
                    auto chunk_kv = model->make_cache(64, kv_type),
                         single_kv = model->make_cache(64, kv_type);
                    std::vector<float> last(vocab);
                    model->forward(prompt.data(), prompt.size(), 0, chunk_kv, last.data());
                    model->forward(prompt.data(), prompt.size(), 0, single_kv, last.data());
                    std::vector<float> chunk((k + 1) * vocab), single(vocab);
                    smol::ForwardOptions all;
                    all.all_logits = true;
                    model->forward(step.data(), k + 1, prompt.size(), chunk_kv, chunk.data(), all);
                    for (size_t t = 0; t <= k; ++t) {
                        CAPTURE(t);
                        model->forward(&step[t], 1, prompt.size() + t, single_kv, single.data());
                        CHECK(std::memcmp(single.data(), chunk.data() + t * vocab,
                                          vocab * sizeof(float)) == 0);
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The draft finder, by hand.

TEST_CASE("lookup drafts: the latest longest n-gram match proposes what followed it") {
    using smol::find_lookup_drafts;
    using V = std::vector<int32_t>;
    // Suffix "2 3" occurs at 1 and 5 (latest: 5, followed by 9).
    CHECK(find_lookup_drafts(V{1, 2, 3, 4, 8, 2, 3, 9, 7, 2, 3}, 2, 3) == V{9, 7});
    // n = 3 matches before n = 2: "1 2 3" occurs only at 0, followed by 4 5.
    CHECK(find_lookup_drafts(V{1, 2, 3, 4, 5, 9, 2, 3, 6, 1, 2, 3}, 2, 3) == V{4, 5});
    // With max_ngram 2 the latest "2 3" wins: at 6, followed by 6 1.
    CHECK(find_lookup_drafts(V{1, 2, 3, 4, 5, 9, 2, 3, 6, 1, 2, 3}, 2, 2) == V{6, 1});
    // Only a 1-gram occurs: "5" at 1, followed by 6 7 then the history's end.
    CHECK(find_lookup_drafts(V{4, 5, 6, 7, 5}, 4, 3) == V{6, 7, 5, 6});
    // A continuation that runs into the end goes on through the drafts:
    // "a b a b" repeats with period 2.
    CHECK(find_lookup_drafts(V{7, 1, 2, 1, 2}, 5, 3) == V{1, 2, 1, 2, 1});
    // A run of one token: the 3-gram "3 3 3" at 0 is followed by the last 3.
    CHECK(find_lookup_drafts(V{3, 3, 3, 3}, 4, 3) == V{3, 3, 3, 3});
    // No earlier occurrence of the last token: no drafts.
    CHECK(find_lookup_drafts(V{1, 2, 3, 4}, 4, 3).empty());
    // k == 0, or a history too short to hold a match.
    CHECK(find_lookup_drafts(V{1, 1, 1}, 0, 3).empty());
    CHECK(find_lookup_drafts(V{1}, 4, 3).empty());
    CHECK(find_lookup_drafts(V{}, 4, 3).empty());
    // k = 1: the token after the match only.
    CHECK(find_lookup_drafts(V{5, 6, 5}, 1, 3) == V{6});
}

TEST_CASE("lookup drafts back off while they fail and come back when one is accepted") {
    smol::detail::DraftBudget budget(4);
    CHECK(budget.next() == 1);  // a run starts with one draft per step
    budget.record(1, 0);        // a single draft failed: pauses of 2, 8, 32, 64 plain steps
    CHECK(budget.next() == 0);
    CHECK(budget.next() == 0);
    CHECK(budget.next() == 1);  // probe
    for (const size_t pause : {size_t(8), size_t(32), size_t(64), size_t(64)}) {
        budget.record(1, 0);
        size_t plain_steps = 0;
        while (budget.next() == 0) ++plain_steps;
        CHECK(plain_steps == pause);
    }
    budget.record(0, 0);  // a step without drafts says nothing
    CHECK(budget.next() == 1);
    budget.record(1, 1);  // all accepted: doubled, up to k
    CHECK(budget.next() == 2);
    budget.record(2, 2);
    CHECK(budget.next() == 4);
    budget.record(4, 4);
    CHECK(budget.next() == 4);
    budget.record(4, 2);  // some: one more than were accepted
    CHECK(budget.next() == 3);
    budget.record(3, 0);  // none of several: one
    CHECK(budget.next() == 1);
    budget.record(1, 0);  // and the pauses start again from 2
    CHECK(budget.next() == 0);
    CHECK(budget.next() == 0);
    CHECK(budget.next() == 1);

    // Every draft wrong: 5 rows drafted in the first 128 tokens, one per 65 after.
    smol::detail::DraftBudget wrong(16);
    size_t rows = 0;
    for (size_t t = 0; t < 128 + 65 * 10; ++t) {
        const size_t d = wrong.next();
        rows += d;
        if (d > 0) wrong.record(d, 0);
        if (t + 1 == 128) CHECK(rows == 5);
    }
    CHECK(rows == 5 + 10);
}

// ---------------------------------------------------------------------------
// The acceptance rule: verify_draft over a small hand-made distribution.

namespace {

// Pearson's statistic of `counts` against probabilities `p` over `n` draws.
double chi_square(const std::vector<size_t>& counts, const std::vector<double>& p, size_t n) {
    double x2 = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
        const double expected = p[i] * double(n);
        x2 += (double(counts[i]) - expected) * (double(counts[i]) - expected) / expected;
    }
    return x2;
}

}  // namespace

TEST_CASE("verify_draft accepts with p(draft), else draws from p without the draft") {
    // Logits over 5 tokens at temperature 1, no filter: p = softmax.
    const std::vector<float> base = {1.0f, 0.2f, -0.5f, 0.7f, 0.0f};
    std::vector<double> p(base.size());
    double total = 0;
    for (size_t i = 0; i < base.size(); ++i) total += p[i] = std::exp(double(base[i]));
    for (double& v : p) v /= total;
    smol::SamplingParams params;
    params.temperature = 1.0f;
    params.top_k = 0;
    params.top_p = 1.0f;
    params.min_p = 0.0f;
    params.seed = 1234;
    smol::Sampler sampler(params);
    const std::vector<int32_t> history;  // no penalties: history is not read
    constexpr int32_t kDraft = 3;
    constexpr size_t kDraws = 40000;
    std::vector<size_t> outcome(base.size(), 0), rejected(base.size(), 0);
    size_t accepted = 0;
    std::vector<float> logits;
    for (size_t i = 0; i < kDraws; ++i) {
        logits = base;
        const auto v =
            smol::verify_draft(sampler, logits.data(), logits.size(), history, kDraft).value();
        REQUIRE(v.accepted == (v.token == kDraft));
        ++outcome[size_t(v.token)];
        if (v.accepted)
            ++accepted;
        else
            ++rejected[size_t(v.token)];
    }
    // Acceptance: binomial(kDraws, p(draft)); 5 standard deviations.
    const double rate = double(accepted) / double(kDraws);
    const double sd = std::sqrt(p[kDraft] * (1 - p[kDraft]) / double(kDraws));
    CHECK(std::abs(rate - p[kDraft]) < 5 * sd);
    // Rejected draws follow p without the draft, renormalized: chi-square
    // over the other 4 tokens (3 degrees of freedom; 30 is p < 1e-5).
    std::vector<size_t> others;
    std::vector<double> q;
    for (size_t t = 0; t < base.size(); ++t) {
        if (int32_t(t) == kDraft) continue;
        others.push_back(rejected[t]);
        q.push_back(p[t] / (1 - p[kDraft]));
    }
    const size_t n_rejected = kDraws - accepted;
    CHECK(rejected[kDraft] == 0);
    CHECK(chi_square(others, q, n_rejected) < 30.0);
    // All outcomes together: p itself (4 degrees of freedom).
    CHECK(chi_square(outcome, p, kDraws) < 30.0);
    // The bound has power: the same counts against the rule "always accept
    // the draft when p(draft) > 0" (all mass on it) or against uniform fail.
    const std::vector<double> uniform(4, 0.25);
    CHECK(chi_square(others, uniform, n_rejected) > 30.0);
    CHECK(std::abs(rate - 1.0) > 5 * sd);
}

// ---------------------------------------------------------------------------
// The Generator with lookup decoding against plain decoding.

namespace {

using smol_test::made_model;

// Plain decoding, the baseline: lookup decoding off (the default would run it).
smol::GenerateParams greedy(int max_tokens) {
    smol::GenerateParams p = smol_test::greedy(max_tokens);
    p.lookup.mode = smol::LookupMode::off;
    return p;
}

std::shared_ptr<const smol::Model> fixture_model(const char* name) {
    const auto path = smol_test::fixture(name);
    if (!path) return nullptr;
    smol::LoadOptions options;
    options.n_threads = 2;
    return smol::Model::load(*path, options);
}

smol::GenerateParams with_lookup(smol::GenerateParams p, size_t k = 4) {
    p.lookup.mode = smol::LookupMode::on;
    p.lookup.k = k;
    return p;
}

// Drafts from a known continuation of `prompt`: the next `max` tokens of
// `truth` (all accepted under greedy), or those tokens shifted by one id (all
// rejected).
std::function<void(const std::vector<int32_t>&, size_t, std::vector<int32_t>&)> forced_drafts(
    size_t prompt_size, std::vector<int32_t> truth, bool right, size_t vocab) {
    return [=](const std::vector<int32_t>& history, size_t max, std::vector<int32_t>& drafts) {
        const size_t done = history.size() - prompt_size;  // generated so far
        for (size_t i = 0; i < max && done + i < truth.size(); ++i)
            drafts.push_back(right ? truth[done + i] : int32_t((truth[done + i] + 1) % vocab));
    };
}

struct Streamed {
    std::vector<std::string> pieces;
    smol::TokenCallback callback() {
        return [this](std::string_view piece) {
            pieces.emplace_back(piece);
            return true;
        };
    }
};

}  // namespace

TEST_CASE("greedy lookup decoding gives plain decoding's tokens on the fixtures' prompts") {
    for (const char* name : {"tiny-q4km.gguf", "tiny-q8_0.gguf"}) {
        // One fixture's prompts under the sanitizers (support/sanitized.hpp).
        if (smol_test::kSanitized && std::string(name) != "tiny-q4km.gguf") continue;
        const auto model = fixture_model(name);
        if (!model) continue;
        const auto golden = smol_test::load_golden(name);
        if (!golden) continue;
        size_t tokens = 0, steps = 0, drafted = 0, accepted = 0;
        for (const smol_test::GoldenPrompt& g : *golden) {
            CAPTURE(name);
            CAPTURE(g.prompt);
            smol::Generator plain_gen(model);
            const smol::GenerateResult plain = plain_gen.generate_tokens(g.ids, greedy(40));
            for (const size_t k : {1, 4, 7}) {
                CAPTURE(k);
                smol::Generator gen(model);
                const smol::GenerateResult r =
                    gen.generate_tokens(g.ids, with_lookup(greedy(40), k));
                CHECK(r.tokens == plain.tokens);
                CHECK(r.text == plain.text);
                CHECK(gen.history() == plain_gen.history());
                CHECK(gen.n_cached() == plain_gen.n_cached());
                CHECK(r.n_accepted_drafts <= r.n_drafted_tokens);
                CHECK(r.n_decode_steps + r.n_accepted_drafts + 1 == r.tokens.size());
                if (k == 4) {
                    tokens += r.tokens.size();
                    steps += r.n_decode_steps;
                    drafted += r.n_drafted_tokens;
                    accepted += r.n_accepted_drafts;
                }
            }
            CHECK(plain.n_decode_steps + 1 == plain.tokens.size());
        }
        MESSAGE((std::string(name) + " (random weights), k = 4: " + std::to_string(accepted) +
                 " of " + std::to_string(drafted) + " drafts accepted, " + std::to_string(tokens) +
                 " tokens in " + std::to_string(steps) + " decode steps"));
    }
}

TEST_CASE("forced drafts: all accepted and all rejected give plain decoding's tokens") {
    const auto model = made_model();
    const size_t vocab = model->config().vocab_size;
    smol::Generator plain_gen(model);
    const smol::GenerateParams p = greedy(30);
    const smol::GenerateResult plain = plain_gen.generate("The blacksmith said", p);
    const size_t prompt_size = plain_gen.history().size() - plain.tokens.size();
    for (const bool right : {true, false}) {
        for (const size_t k : {1, 4, 8}) {
            CAPTURE(right);
            CAPTURE(k);
            smol::GenerateParams q = with_lookup(p, k);
            q.lookup.draft_hook = forced_drafts(prompt_size, plain.tokens, right, vocab);
            smol::Generator gen(model);
            Streamed streamed;
            const smol::GenerateResult r =
                gen.generate("The blacksmith said", q, streamed.callback());
            CHECK(r.tokens == plain.tokens);
            CHECK(r.text == plain.text);
            CHECK(gen.history() == plain_gen.history());
            CHECK(gen.save_session() == plain_gen.save_session());
            std::string joined;
            for (const auto& piece : streamed.pieces) joined += piece;
            CHECK(joined == plain.text);
            CHECK(r.n_drafted_tokens > 0);
            if (right) {
                CHECK(r.n_accepted_drafts == r.n_drafted_tokens);
                // Every step emits all its drafts and one more; the drafts per
                // step double from 1 up to k (the last ones capped by max_tokens).
                size_t steps = 0;
                for (size_t left = plain.tokens.size() - 1, cap = 1; left > 0; ++steps) {
                    left -= std::min(left, cap + 1);
                    cap = std::min(k, 2 * cap);
                }
                CHECK(r.n_decode_steps <= steps);
            } else {
                CHECK(r.n_accepted_drafts == 0);
                CHECK(r.n_decode_steps + 1 == plain.tokens.size());
            }
        }
    }
}

TEST_CASE("lookup decoding: max_tokens, stop strings, callbacks and end tokens as plain decoding") {
    const auto model = made_model();
    const size_t vocab = model->config().vocab_size;
    const std::string prompt = "Once upon a time in a village by the sea,";
    smol::Generator plain_gen(model);
    const smol::GenerateResult full = plain_gen.generate(prompt, greedy(40));
    const size_t prompt_size = plain_gen.history().size() - full.tokens.size();
    for (const bool right : {true, false}) {
        CAPTURE(right);
        auto hook = forced_drafts(prompt_size, full.tokens, right, vocab);
        // max_tokens: never more, and plain decoding's first tokens.
        for (int max = 0; max <= 12; ++max) {
            CAPTURE(max);
            smol::GenerateParams q = with_lookup(greedy(max), 4);
            q.lookup.draft_hook = hook;
            smol::Generator gen(model), plain(model);
            const smol::GenerateResult r = gen.generate(prompt, q);
            const smol::GenerateResult expected = plain.generate(prompt, greedy(max));
            CHECK(r.tokens == expected.tokens);
            CHECK(r.stop_reason == expected.stop_reason);
            CHECK(gen.save_session() == plain.save_session());
        }
        // A stop string from the middle of the text.
        if (full.text.size() > 12) {
            smol::GenerateParams s = greedy(40);
            // Two whole characters from the middle (the text may be any UTF-8).
            auto boundary = [&](size_t i) {
                while (i < full.text.size() && (uint8_t(full.text[i]) & 0xc0) == 0x80) ++i;
                return i;
            };
            const size_t from = boundary(full.text.size() / 2);
            const size_t to = boundary(boundary(from + 1) + 1);
            s.stop = {full.text.substr(from, to - from)};
            smol::Generator plain(model), gen(model);
            Streamed a, b;
            const smol::GenerateResult expected = plain.generate(prompt, s, a.callback());
            smol::GenerateParams q = with_lookup(s, 4);
            q.lookup.draft_hook = hook;
            const smol::GenerateResult r = gen.generate(prompt, q, b.callback());
            CHECK(expected.stop_reason == smol::StopReason::stop_string);
            CHECK(r.stop_reason == expected.stop_reason);
            CHECK(r.text == expected.text);
            CHECK(r.tokens == expected.tokens);
            CHECK(b.pieces == a.pieces);
            CHECK(gen.save_session() == plain.save_session());
        }
        // The callback stops the run after the third piece.
        {
            smol::Generator plain(model), gen(model);
            auto stop_after = [](size_t n) {
                auto count = std::make_shared<size_t>(0);
                return [count, n](std::string_view) { return ++*count < n; };
            };
            const smol::GenerateResult expected = plain.generate(prompt, greedy(40), stop_after(3));
            smol::GenerateParams q = with_lookup(greedy(40), 4);
            q.lookup.draft_hook = hook;
            const smol::GenerateResult r = gen.generate(prompt, q, stop_after(3));
            CHECK(expected.stop_reason == smol::StopReason::cancelled);
            CHECK(r.stop_reason == expected.stop_reason);
            CHECK(r.tokens == expected.tokens);
            CHECK(gen.history() == plain.history());
            CHECK(gen.n_cached() == plain.n_cached());
        }
    }
    // An end token drafted and confirmed ends the run there (forced: the
    // hook drafts it, a logits hook makes greedy pick it at the fifth token:
    // the first step drafts 1 token, the second 2, the end token the last).
    {
        const std::vector<int32_t> eog = model->tokenizer().end_of_generation_ids();
        REQUIRE(!eog.empty());
        REQUIRE(full.tokens.size() >= 4);
        std::vector<int32_t> script(full.tokens.begin(), full.tokens.begin() + 4);
        script.push_back(eog[0]);
        smol::GenerateParams s = greedy(20);
        s.ignore_eos = false;
        s.logits_hook = smol_test::force_tokens(script);
        smol::Generator plain(model), gen(model);
        const smol::GenerateResult expected = plain.generate(prompt, s);
        smol::GenerateParams q = with_lookup(s, 4);
        q.logits_hook = smol_test::force_tokens(script);  // a fresh count
        q.lookup.draft_hook = forced_drafts(prompt_size, script, true, vocab);
        const smol::GenerateResult r = gen.generate(prompt, q);
        CHECK(expected.stop_reason == smol::StopReason::eos);
        CHECK(r.stop_reason == smol::StopReason::eos);
        CHECK(r.tokens == expected.tokens);
        CHECK(r.n_accepted_drafts == 3);
        CHECK(gen.save_session() == plain.save_session());
    }
}

TEST_CASE("lookup decoding: a seeded sampled run is reproducible and plain decoding's") {
    const auto model = made_model();
    smol::GenerateParams p;
    p.lookup.mode = smol::LookupMode::off;
    p.max_tokens = 48;
    p.ignore_eos = true;
    p.temperature = 0.9f;
    p.top_k = 50;
    p.repeat_penalty = 1.05f;
    for (const uint64_t seed : {1u, 2u, 3u}) {
        CAPTURE(seed);
        p.seed = seed;
        smol::Generator plain(model), a(model), b(model);
        const smol::GenerateResult expected = plain.generate("Rain fell on the roofs of", p);
        const smol::GenerateResult r1 = a.generate("Rain fell on the roofs of", with_lookup(p));
        const smol::GenerateResult r2 = b.generate("Rain fell on the roofs of", with_lookup(p));
        CHECK(r1.tokens == r2.tokens);
        CHECK(r1.tokens == expected.tokens);
        CHECK(a.save_session() == plain.save_session());
        MESSAGE("sampled, seed " << seed << ": " << r1.n_accepted_drafts << " of "
                                 << r1.n_drafted_tokens << " drafts accepted");
        CHECK(r1.n_drafted_tokens > 0);
    }
}

TEST_CASE("lookup decoding: a JSON-schema constrained run equals plain decoding's") {
    const auto model = fixture_model("tiny-q4km.gguf");
    if (!model) return;
    const std::string schema = R"({"type": "object", "properties": {
          "name": {"type": "string", "maxLength": 12},
          "tags": {"type": "array", "items": {"enum": ["a", "bb", "ccc"]}, "maxItems": 4}},
        "required": ["name", "tags"]})";
    for (const float temperature : {0.0f, 0.8f}) {
        CAPTURE(temperature);
        smol::GenerateParams p;
        p.lookup.mode = smol::LookupMode::off;
        p.max_tokens = 80;
        p.temperature = temperature;
        p.seed = 9;
        p.json_schema = schema;
        smol::Generator plain(model), gen(model);
        const smol::GenerateResult expected = plain.generate("Data:", p);
        const smol::GenerateResult r = gen.generate("Data:", with_lookup(p));
        CHECK(r.tokens == expected.tokens);
        CHECK(r.text == expected.text);
        CHECK(r.stop_reason == expected.stop_reason);
        // Drafts the grammar forbids are never picked, so never emitted.
        CHECK(r.n_drafted_tokens > 0);
        CHECK(r.n_accepted_drafts <= r.n_drafted_tokens);
    }
}

TEST_CASE("lookup decoding: sessions and a second turn after rejected drafts") {
    const auto model = made_model();
    const size_t vocab = model->config().vocab_size;
    smol::Generator plain(model), gen(model);
    const smol::GenerateResult first = plain.generate("Guard: Halt! Who goes", greedy(20));
    const size_t prompt_size = plain.history().size() - first.tokens.size();
    smol::GenerateParams q = with_lookup(greedy(20), 4);
    q.lookup.draft_hook = forced_drafts(prompt_size, first.tokens, false, vocab);
    CHECK(gen.generate("Guard: Halt! Who goes", q).tokens == first.tokens);
    const std::vector<uint8_t> saved = gen.save_session();
    CHECK(saved == plain.save_session());
    // Restored elsewhere, the next turn (plain n-gram drafts) goes on as plain decoding's.
    smol::Generator restored(model);
    restored.restore_session(saved);
    const std::string next = "Guard: Halt! Who goes" + first.text + " Friend.";
    const smol::GenerateResult a = plain.generate(next, greedy(24));
    const smol::GenerateResult b = restored.generate(next, with_lookup(greedy(24)));
    CHECK(b.tokens == a.tokens);
    CHECK(b.n_reused_tokens == a.n_reused_tokens);
    CHECK(restored.save_session() == plain.save_session());
}

TEST_CASE("lookup decoding: a full context stops or shifts as plain decoding does") {
    const auto model = made_model();
    for (const smol::ContextPolicy policy :
         {smol::ContextPolicy::stop, smol::ContextPolicy::shift}) {
        CAPTURE(int(policy));
        smol::GeneratorOptions options;
        options.n_ctx = 40;
        options.context_policy = policy;
        smol::Generator plain(model, options), gen(model, options);
        const smol::GenerateResult expected = plain.generate("A long time ago", greedy(60));
        const smol::GenerateResult r = gen.generate("A long time ago", with_lookup(greedy(60), 7));
        CHECK(r.tokens == expected.tokens);
        CHECK(r.stop_reason == expected.stop_reason);
        CHECK(r.n_discarded_tokens == expected.n_discarded_tokens);
        if (policy == smol::ContextPolicy::stop)
            CHECK(expected.stop_reason == smol::StopReason::context_full);
        else
            CHECK(expected.n_discarded_tokens > 0);
        CHECK(gen.save_session() == plain.save_session());
    }
}

TEST_CASE("lookup decoding: cancel, a shared Batcher, and bad parameters") {
    const auto model = made_model();
    // cancel() from the callback's thread: the run ends, the session is consistent.
    {
        smol::Generator gen(model);
        size_t pieces = 0;
        const smol::GenerateResult r = gen.generate("The old wizard opened the book",
                                                    with_lookup(greedy(40)), [&](std::string_view) {
                                                        if (++pieces == 5) gen.cancel();
                                                        return true;
                                                    });
        CHECK(r.stop_reason == smol::StopReason::cancelled);
        CHECK(gen.n_cached() <= gen.history().size());
        smol::Generator plain(model);
        const smol::GenerateResult whole =
            plain.generate("The old wizard opened the book", greedy(40));
        CHECK(smol_test::common_prefix(r.tokens, whole.tokens) == r.tokens.size());
    }
    // Through a Batcher: the verify chunk is a segment like any other.
    {
        smol::GeneratorOptions options;
        options.batcher = std::make_shared<smol::Batcher>(model);
        smol::Generator gen(model, options), plain(model);
        const smol::GenerateResult expected =
            plain.generate("Traveller, have you heard", greedy(30));
        const smol::GenerateResult r =
            gen.generate("Traveller, have you heard", with_lookup(greedy(30)));
        CHECK(r.tokens == expected.tokens);
    }
    smol::Generator gen(model);
    for (const auto& [k, n] :
         std::vector<std::pair<size_t, size_t>>{{0, 3}, {17, 3}, {4, 0}, {4, 17}}) {
        smol::GenerateParams q = with_lookup(greedy(4), k);
        q.lookup.max_ngram = n;
        CHECK_THROWS_AS(gen.generate("x", q), smol::Error);
    }
}

TEST_CASE("lookup decoding: generators sharing a Batcher, each with its drafts") {
    const auto model = made_model();
    const std::vector<std::string> prompts = {"The blacksmith said", "A long time ago",
                                              "Rain fell on the roofs of"};
    std::vector<smol::GenerateResult> alone;
    for (const std::string& prompt : prompts) {
        smol::Generator gen(model);
        alone.push_back(gen.generate(prompt, greedy(32)));
    }
    smol::GeneratorOptions options;
    options.batcher = std::make_shared<smol::Batcher>(model);
    std::vector<std::unique_ptr<smol::Generator>> gens;
    std::vector<smol::AsyncGeneration> runs;
    auto arrived = std::make_shared<std::atomic<size_t>>(0);
    for (size_t i = 0; i < prompts.size(); ++i) {
        gens.push_back(std::make_unique<smol::Generator>(model, options));
        smol::GenerateParams p = with_lookup(greedy(32), 4);
        smol_test::rendezvous(p, arrived, prompts.size());
        runs.push_back(gens[i]->generate_async(prompts[i], p));
    }
    size_t accepted = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
        const smol::GenerateResult r = runs[i].wait();
        CAPTURE(i);
        // The rows of a shared step get the bits they get alone (the first
        // test above: the tiles' columns do not mix), so the tokens are equal.
        CHECK(r.tokens == alone[i].tokens);
        CHECK(gens[i]->n_cached() + 1 == gens[i]->history().size());
        accepted += r.n_accepted_drafts;
    }
    MESSAGE("batched, random weights: " << accepted << " drafts accepted");
    CHECK(options.batcher->stats().widest >= 2);
}

TEST_CASE("lookup decoding on forks: rewritten draft positions in shared blocks stay private") {
    const auto model = made_model();
    const size_t vocab = model->config().vocab_size;
    const std::string prompt = "The merchant counted the coins and";
    smol::Generator plain(model);
    const smol::GenerateResult expected = plain.generate(prompt, greedy(40));
    const size_t prompt_size = plain.history().size() - expected.tokens.size();
    // The parent holds the prompt; two forks decode with rejected and
    // accepted drafts, writing draft positions they then truncate and rewrite.
    smol::Generator parent(model);
    parent.prefill(prompt);
    const std::vector<uint8_t> parent_before = parent.save_session();
    for (const bool right : {false, true}) {
        CAPTURE(right);
        smol::Generator child = parent.fork();
        smol::GenerateParams q = with_lookup(greedy(40), 4);
        q.lookup.draft_hook = forced_drafts(prompt_size, expected.tokens, right, vocab);
        const smol::GenerateResult r = child.generate(prompt, q);
        CHECK(r.tokens == expected.tokens);
        CHECK(child.save_session() == plain.save_session());
        CHECK(parent.save_session() == parent_before);
    }
    // The parent still decodes as a fresh generator does.
    CHECK(parent.generate(prompt, with_lookup(greedy(40))).tokens == expected.tokens);
}

}  // namespace test_lookup
