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
