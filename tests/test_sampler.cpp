// Tests for the sampler: exact filter survivors and penalty arithmetic
// computed by hand, the final distribution against a brute-force reference,
// empirical frequencies against the exact distribution (chi-square), and
// determinism of the seeded stream (pinned against an independent
// implementation of splitmix64 / xoshiro256**).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <smol/sampling/sampler.hpp>
#include <vector>

#include "support/fixtures.hpp"

// In a namespace of its own: tests/CMakeLists.txt compiles it in one unit with
// the other files of its group.
namespace test_sampler {

using smol::Sampler;
using smol::SamplingParams;

namespace {

// Everything off: plain softmax at temperature 1.
SamplingParams plain() {
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    return p;
}

std::vector<int32_t> survivors(Sampler& sampler, std::vector<float> logits,
                               const std::vector<int32_t>& history = {}) {
    std::vector<int32_t> ids;
    for (const auto& t : sampler.distribution(logits.data(), logits.size(), history))
        ids.push_back(t.id);
    std::sort(ids.begin(), ids.end());
    return ids;
}

// logits = log(p) so that softmax gives back p exactly (up to rounding).
std::vector<float> logits_of(const std::vector<double>& probabilities) {
    std::vector<float> out;
    for (double p : probabilities) out.push_back(static_cast<float>(std::log(p)));
    return out;
}

struct Lcg {  // tiny deterministic generator for test data
    uint64_t state;
    double next() {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return double(state >> 11) / 9007199254740992.0;
    }
};

}  // namespace

TEST_CASE("rng: splitmix64 + xoshiro256** stream matches an independent implementation") {
    smol::Rng rng(0);
    CHECK(rng.next_u64() == 0x99ec5f36cb75f2b4ull);
    CHECK(rng.next_u64() == 0xbf6e1f784956452aull);
    CHECK(rng.next_u64() == 0x1a5f849d4933e6e0ull);
    rng.reseed(42);
    CHECK(rng.next_u64() == 0x15780b2e0c2ec716ull);
    CHECK(rng.next_u64() == 0x6104d9866d113a7eull);
    CHECK(rng.next_u64() == 0xae17533239e499a1ull);
    for (int i = 0; i < 10000; ++i) {
        const double u = rng.next_unit();
        REQUIRE(u >= 0.0);
        REQUIRE(u < 1.0);
    }
}

TEST_CASE("sampler: greedy") {
    SamplingParams p = plain();
    p.temperature = 0.0f;
    Sampler s(p);
    std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
    CHECK(s.sample(logits.data(), logits.size(), {}) == 1);  // tie 1 vs 3 -> lowest id
    logits = {NAN, -INFINITY, 0.25f, NAN};
    CHECK(s.sample(logits.data(), logits.size(), {}) == 2);  // NaN never wins
    p.temperature = -1.0f;
    Sampler negative(p);
    logits = {0.0f, 0.0f, 0.0f};
    CHECK(negative.sample(logits.data(), logits.size(), {}) == 0);
    const auto d = negative.distribution(logits.data(), logits.size(), {});
    REQUIRE(d.size() == 1);
    CHECK(d[0].id == 0);
    CHECK(d[0].probability == 1.0);
    logits = {-INFINITY, NAN};
    CHECK_THROWS_AS(negative.sample(logits.data(), logits.size(), {}), smol::Error);
}

TEST_CASE("sampler: penalties, exact arithmetic") {
    SamplingParams p = plain();
    p.temperature = 0.0f;
    p.repeat_penalty = 2.0f;
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    p.penalty_last_n = 64;
    Sampler s(p);
    // id 0 seen twice (positive logit: divided), id 1 once (negative:
    // multiplied), id 3 once, id 2 never, id 99 out of range (ignored).
    std::vector<float> logits = {2.0f, -2.0f, 1.0f, 0.5f};
    s.sample(logits.data(), logits.size(), {0, 1, 0, 3, 99});
    CHECK(logits[0] == doctest::Approx(2.0 / 2 - (2 * 0.5 + 0.25)));  // -0.25
    CHECK(logits[1] == doctest::Approx(-2.0 * 2 - (0.5 + 0.25)));     // -4.75
    CHECK(logits[2] == 1.0f);
    CHECK(logits[3] == doctest::Approx(0.5 / 2 - (0.5 + 0.25)));  // -0.5
    // And that changes the greedy pick: id 2 now wins.
    logits = {2.0f, -2.0f, 1.0f, 0.5f};
    CHECK(s.sample(logits.data(), logits.size(), {0, 1, 0, 3}) == 2);

    SUBCASE("only the last penalty_last_n tokens count, prompt included") {
        p.penalty_last_n = 2;
        Sampler windowed(p);
        logits = {2.0f, -2.0f, 1.0f, 0.5f};
        windowed.sample(logits.data(), logits.size(), {0, 1, 0, 3});  // window {0, 3}
        CHECK(logits[0] == doctest::Approx(2.0 / 2 - 0.75));
        CHECK(logits[1] == -2.0f);
        CHECK(logits[3] == doctest::Approx(0.5 / 2 - 0.75));
    }
    SUBCASE("penalty_last_n = 0 disables, < 0 takes the whole history") {
        p.penalty_last_n = 0;
        Sampler off(p);
        logits = {2.0f, -2.0f, 1.0f, 0.5f};
        off.sample(logits.data(), logits.size(), {0, 1});
        CHECK(logits == std::vector<float>{2.0f, -2.0f, 1.0f, 0.5f});
        p.penalty_last_n = -1;
        std::vector<int32_t> long_history(500, 2);
        long_history.push_back(0);
        Sampler all(p);
        logits = {2.0f, -2.0f, 1.0f, 0.5f};
        all.sample(logits.data(), logits.size(), long_history);
        CHECK(logits[2] == doctest::Approx(1.0 / 2 - (500 * 0.5 + 0.25)));
    }
}

TEST_CASE("sampler: logit bias and hook run before the filters") {
    SamplingParams p = plain();
    p.top_k = 1;
    p.logit_bias = {{5, 10.0f}};
    Sampler biased(p);
    for (int i = 0; i < 20; ++i) {
        std::vector<float> logits(8, 0.0f);
        logits[1] = 3.0f;  // would win without the bias
        CHECK(biased.sample(logits.data(), logits.size(), {}) == 5);
    }

    bool hook_saw_bias = false;
    p.logits_hook = [&](float* logits, size_t n) {
        REQUIRE(n == 8);
        hook_saw_bias = logits[5] == 10.0f;
        logits[2] = 100.0f;  // e.g. a grammar forcing token 2
    };
    Sampler hooked(p);
    std::vector<float> logits(8, 0.0f);
    CHECK(hooked.sample(logits.data(), logits.size(), {}) == 2);
    CHECK(hook_saw_bias);

    // A -inf bias bans a token outright.
    SamplingParams ban = plain();
    ban.logit_bias = {{0, -INFINITY}};
    Sampler banned(ban);
    for (int i = 0; i < 200; ++i) {
        std::vector<float> l = {5.0f, 0.0f, 0.0f};
        CHECK(banned.sample(l.data(), l.size(), {}) != 0);
    }
    SamplingParams out_of_range = plain();
    out_of_range.logit_bias = {{3, 1.0f}};
    Sampler bad(out_of_range);
    std::vector<float> l3 = {0.0f, 0.0f, 0.0f};
    CHECK_THROWS_AS(bad.sample(l3.data(), l3.size(), {}), smol::Error);
}

TEST_CASE("sampler: exact survivors of top-k, top-p, min-p") {
    SUBCASE("top-k keeps the k best, ties to lower ids") {
        SamplingParams p = plain();
        p.top_k = 2;
        Sampler s(p);
        CHECK(survivors(s, {1.0f, 3.0f, 3.0f, 2.0f, 3.0f}) == std::vector<int32_t>{1, 2});
        p.top_k = 4;
        Sampler s4(p);
        CHECK(survivors(s4, {1.0f, 3.0f, 3.0f, 2.0f, 3.0f}) == std::vector<int32_t>{1, 2, 3, 4});
        p.top_k = 100;  // more than the vocabulary: everything
        Sampler big(p);
        CHECK(survivors(big, {1.0f, 3.0f, 3.0f}) == std::vector<int32_t>{0, 1, 2});
    }
    const std::vector<double> probs = {0.05, 0.5, 0.15, 0.3};  // ranks: 1, 3, 2, 0
    SUBCASE("top-p keeps the shortest prefix reaching the mass") {
        SamplingParams p = plain();
        p.top_p = 0.4f;
        Sampler a(p);
        CHECK(survivors(a, logits_of(probs)) == std::vector<int32_t>{1});
        p.top_p = 0.75f;
        Sampler b(p);
        CHECK(survivors(b, logits_of(probs)) == std::vector<int32_t>{1, 3});
        p.top_p = 0.85f;
        Sampler c(p);
        CHECK(survivors(c, logits_of(probs)) == std::vector<int32_t>{1, 2, 3});
        p.top_p = 0.0f;  // at least one token
        Sampler d(p);
        CHECK(survivors(d, logits_of(probs)) == std::vector<int32_t>{1});
    }
    SUBCASE("top-p renormalizes after top-k") {
        SamplingParams p = plain();
        p.top_p = 0.6f;
        Sampler no_k(p);  // 0.5 < 0.6 -> needs the second token
        CHECK(survivors(no_k, logits_of(probs)) == std::vector<int32_t>{1, 3});
        p.top_k = 2;  // renormalized: 0.625, 0.375 -> the first alone reaches 0.6
        Sampler with_k(p);
        CHECK(survivors(with_k, logits_of(probs)) == std::vector<int32_t>{1});
    }
    SUBCASE("min-p keeps p >= min_p * p_max") {
        SamplingParams p = plain();
        p.min_p = 0.2f;  // threshold 0.1
        Sampler a(p);
        CHECK(survivors(a, logits_of(probs)) == std::vector<int32_t>{1, 2, 3});
        p.min_p = 0.35f;  // threshold 0.175
        Sampler b(p);
        CHECK(survivors(b, logits_of(probs)) == std::vector<int32_t>{1, 3});
        p.min_p = 1.5f;  // above 1: only the top token
        Sampler c(p);
        CHECK(survivors(c, logits_of(probs)) == std::vector<int32_t>{1});
    }
    SUBCASE("filters ignore temperature; temperature reshapes the survivors") {
        SamplingParams p = plain();
        p.min_p = 0.2f;
        p.temperature = 0.5f;
        Sampler s(p);
        std::vector<float> logits = logits_of(probs);
        const auto d = s.distribution(logits.data(), logits.size(), {});
        REQUIRE(d.size() == 3);
        // p^(1/T) = p^2 over {0.5, 0.3, 0.15}
        const double z = 0.25 + 0.09 + 0.0225;
        CHECK(d[0].id == 1);
        CHECK(d[0].probability == doctest::Approx(0.25 / z).epsilon(1e-6));
        CHECK(d[1].id == 3);
        CHECK(d[1].probability == doctest::Approx(0.09 / z).epsilon(1e-6));
        CHECK(d[2].id == 2);
        CHECK(d[2].probability == doctest::Approx(0.0225 / z).epsilon(1e-6));
    }
}

TEST_CASE("sampler: full pipeline on a larger vocabulary matches a brute-force reference") {
    const size_t n = 5000;
    for (const double spread : {8.0, 30.0}) {
        CAPTURE(spread);
        Lcg lcg{7};
        std::vector<float> base(n);
        for (auto& x : base) x = static_cast<float>(lcg.next() * spread - spread / 2);
        base[17] = base[18] = float(spread / 2 + 0.5);  // a tie at the top
        base[40] = base[41] = base[42] = 0.0f;          // ties in the middle

        struct Config {
            int top_k;
            float top_p;
            float min_p;
            float temperature;
        };
        const Config configs[] = {
            {0, 0.9f, 0.0f, 1.0f},    {0, 0.5f, 0.05f, 0.8f},    {40, 0.95f, 0.05f, 0.7f},
            {0, 1.0f, 0.2f, 1.3f},    {300, 0.3f, 0.0f, 1.0f},   {0, 1.0f, 0.0f, 2.0f},
            {10, 1.0f, 0.0f, 0.5f},   {0, 0.999f, 0.001f, 1.0f}, {0, 0.99f, 0.01f, 1.0f},
            {0, 0.9999f, 0.0f, 1.0f}, {0, 0.7f, 0.5f, 1.0f},     {100, 0.99f, 0.0f, 1.0f},
            {0, 0.999f, 0.3f, 1.0f},  {2000, 0.98f, 0.0f, 0.9f}};
        for (const Config& cfg : configs) {
            CAPTURE(cfg.top_k);
            CAPTURE(cfg.top_p);
            CAPTURE(cfg.min_p);
            // Reference: sort everything, then each filter literally in the documented order.
            std::vector<int32_t> order(n);
            std::iota(order.begin(), order.end(), 0);
            std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
                return base[a] != base[b] ? base[a] > base[b] : a < b;
            });
            if (cfg.top_k > 0) order.resize(std::min<size_t>(order.size(), cfg.top_k));
            const double max_logit = base[order[0]];
            if (cfg.top_p < 1.0f) {
                double z = 0;
                for (int32_t id : order) z += std::exp(base[id] - max_logit);
                double cumulative = 0;
                for (size_t i = 0; i < order.size(); ++i) {
                    cumulative += std::exp(base[order[i]] - max_logit) / z;
                    if (cumulative >= cfg.top_p) {
                        order.resize(i + 1);
                        break;
                    }
                }
            }
            if (cfg.min_p > 0.0f) {
                std::vector<int32_t> kept;
                for (int32_t id : order) {
                    if (std::exp(base[id] - max_logit) >= cfg.min_p) kept.push_back(id);
                }
                order = kept;
            }
            double z = 0;
            for (int32_t id : order) z += std::exp((base[id] - max_logit) / cfg.temperature);

            SamplingParams p = plain();
            p.top_k = cfg.top_k;
            p.top_p = cfg.top_p;
            p.min_p = cfg.min_p;
            p.temperature = cfg.temperature;
            Sampler s(p);
            std::vector<float> logits = base;
            const auto d = s.distribution(logits.data(), logits.size(), {});
            REQUIRE(d.size() == order.size());
            double total = 0;
            for (size_t i = 0; i < d.size(); ++i) {
                CHECK(d[i].id == order[i]);  // same ranking (probability desc, id asc)
                const double expected =
                    std::exp((base[order[i]] - max_logit) / cfg.temperature) / z;
                CHECK(d[i].probability == doctest::Approx(expected).epsilon(1e-9));
                total += d[i].probability;
            }
            CHECK(total == doctest::Approx(1.0).epsilon(1e-9));
        }
    }
}

TEST_CASE("sampler: empirical frequencies follow the exact distribution") {
    // p = {0.05, 0.5, 0.15, 0.3, 0.0001, 0.0499} with top_k 5 (drops id 4),
    // min_p 0.05 (threshold 0.025: keeps id 5) and temperature 0.8.
    const std::vector<double> probs = {0.05, 0.5, 0.15, 0.3, 0.0001, 0.0499};
    SamplingParams p = plain();
    p.top_k = 5;
    p.min_p = 0.05f;
    p.temperature = 0.8f;
    p.seed = 1234;
    std::vector<double> expected(probs.size(), 0.0);
    double z = 0;
    for (size_t i = 0; i < probs.size(); ++i) {
        if (i == 4) continue;
        expected[i] = std::pow(probs[i], 1.0 / 0.8);
        z += expected[i];
    }
    for (auto& e : expected) e /= z;

    for (uint64_t seed : {1234ull, 99ull}) {
        CAPTURE(seed);
        p.seed = seed;
        Sampler s(p);
        const int draws = 40000;
        std::vector<int> counts(probs.size(), 0);
        for (int i = 0; i < draws; ++i) {
            std::vector<float> logits = logits_of(probs);
            const int32_t id = s.sample(logits.data(), logits.size(), {});
            REQUIRE(id >= 0);
            REQUIRE(id < 6);
            ++counts[id];
        }
        CHECK(counts[4] == 0);  // filtered out: never drawn
        double chi_square = 0;
        for (size_t i = 0; i < probs.size(); ++i) {
            if (expected[i] == 0) continue;
            const double e = expected[i] * draws;
            chi_square += (counts[i] - e) * (counts[i] - e) / e;
        }
        // 4 degrees of freedom: P(chi2 > 23.5) ~ 1e-4.
        CHECK(chi_square < 23.5);
    }

    SUBCASE("uniform logits: every id equally likely") {
        SamplingParams u = plain();
        u.seed = 5;
        Sampler s(u);
        const int draws = 32000;
        std::vector<int> counts(16, 0);
        for (int i = 0; i < draws; ++i) {
            std::vector<float> logits(16, 1.0f);
            ++counts[s.sample(logits.data(), logits.size(), {})];
        }
        double chi_square = 0;
        for (int c : counts) chi_square += (c - 2000.0) * (c - 2000.0) / 2000.0;
        CHECK(chi_square < 44.3);  // 15 dof, P ~ 1e-4
    }
}

TEST_CASE("sampler: deterministic for a seed") {
    Lcg lcg{3};
    std::vector<float> base(1000);
    for (auto& x : base) x = static_cast<float>(lcg.next() * 6.0);
    SamplingParams p;  // the defaults: T 0.8, top-k 40, top-p 0.95, min-p 0.05
    p.seed = 77;
    auto run = [&](Sampler& s) {
        std::vector<int32_t> out;
        for (int i = 0; i < 64; ++i) {
            std::vector<float> logits = base;
            out.push_back(s.sample(logits.data(), logits.size(), out));
        }
        return out;
    };
    Sampler a(p), b(p);
    const auto first = run(a);
    CHECK(run(b) == first);
    a.reseed(77);
    CHECK(run(a) == first);
    p.seed = 78;
    Sampler c(p);
    CHECK(run(c) != first);
    CHECK(std::set<int32_t>(first.begin(), first.end()).size() > 1);
}

TEST_CASE("sampler: 128k vocabulary with the default settings") {
    const size_t n = 128256;
    Lcg lcg{11};
    std::vector<float> base(n);
    for (auto& x : base) x = static_cast<float>(lcg.next() * 10.0 - 5.0);
    base[12345] = 9.0f;  // a clear favourite
    SamplingParams p;
    p.seed = 1;
    p.repeat_penalty = 1.1f;
    Sampler s(p);
    std::vector<int32_t> history;
    int favourite = 0;
    for (int i = 0; i < 50; ++i) {
        std::vector<float> logits = base;
        const int32_t id = s.sample(logits.data(), n, history);
        REQUIRE(id >= 0);
        REQUIRE(static_cast<size_t>(id) < n);
        favourite += id == 12345;
    }
    CHECK(favourite > 25);

    // No top-k: min-p and top-p alone (exercises the growing partial sort).
    SamplingParams open = p;
    open.top_k = 0;
    open.min_p = 0.0f;
    // Flat logits: half the mass plus a quarter token needs n/2 + 1 tokens
    // (the margin keeps float rounding out of the answer).
    open.top_p = 0.5f + 0.25f / float(n);
    Sampler wide(open);
    std::vector<float> logits(n, 0.0f);
    const auto d = wide.distribution(logits.data(), n, {});
    CHECK(d.size() == n / 2 + 1);
    CHECK(d.front().id == 0);
    CHECK(d.back().id == static_cast<int32_t>(n / 2));
}

TEST_CASE("sampler: invalid parameters") {
    SamplingParams p = plain();
    p.repeat_penalty = 0.0f;
    CHECK_THROWS_AS(Sampler{p}, smol::Error);
    p = plain();
    p.top_p = NAN;
    CHECK_THROWS_AS(Sampler{p}, smol::Error);
    Sampler s(plain());
    CHECK_THROWS_AS(s.sample(nullptr, 0, {}), smol::Error);
}

// ---- DRY and XTC ----

namespace {

// A hand-made vocabulary for DRY's breakers: each id's text, and an encoder
// that takes the longest matching piece at each step.
struct HandVocabulary {
    std::vector<std::string> pieces;

    smol::DryBreakers breakers(const std::vector<std::string>& strings) const {
        auto piece = [&](int32_t id, std::string& out) { out = pieces[size_t(id)]; };
        auto encode = [&](std::string_view text, std::vector<int32_t>& out) -> smol::Status {
            for (size_t pos = 0; pos < text.size();) {
                int32_t best = -1;
                size_t best_length = 0;
                for (size_t id = 0; id < pieces.size(); ++id) {
                    const std::string& p = pieces[id];
                    if (p.size() > best_length && text.compare(pos, p.size(), p) == 0) {
                        best = int32_t(id);
                        best_length = p.size();
                    }
                }
                if (best < 0) return smol::Status(smol::ErrorKind::format, "no piece");
                out.push_back(best);
                pos += best_length;
            }
            return {};
        };
        return smol::DryBreakers::build(int32_t(pieces.size()), piece, encode, strings).value();
    }
};

SamplingParams dry(float multiplier, float base, int allowed_length, int last_n = -1) {
    SamplingParams p = plain();
    p.dry_multiplier = multiplier;
    p.dry_base = base;
    p.dry_allowed_length = allowed_length;
    p.dry_penalty_last_n = last_n;
    return p;
}

std::vector<float> dry_logits(const SamplingParams& p, size_t n_vocab,
                              const std::vector<int32_t>& history,
                              const smol::DryBreakers* breakers = nullptr) {
    std::vector<float> logits(n_vocab, 0.0f);
    smol::apply_dry(logits.data(), n_vocab, history, p, breakers);
    return logits;
}

}  // namespace

TEST_CASE("dry: repeats, the allowed length, the base and the multiplier by hand") {
    // a b c c b c y a b c (a=0 b=1 c=2 y=3). The end "a b c" also ends at
    // position 2 (length 3: c would extend it), "b c" at position 5 (length
    // 2: y would), "c" at position 3 (length 1: b would).
    const std::vector<int32_t> h = {0, 1, 2, 2, 1, 2, 3, 0, 1, 2};
    CHECK(dry_logits(dry(1.0f, 2.0f, 2), 5, h) == std::vector<float>{0, 0, -2, -1, 0});
    CHECK(dry_logits(dry(1.0f, 2.0f, 1), 5, h) == std::vector<float>{0, -1, -4, -2, 0});
    CHECK(dry_logits(dry(1.0f, 2.0f, 3), 5, h) == std::vector<float>{0, 0, -1, 0, 0});
    CHECK(dry_logits(dry(1.0f, 2.0f, 4), 5, h) == std::vector<float>(5, 0.0f));
    // The defaults' base: 0.5 * 1.75^1 and 0.5 * 1.75^0.
    CHECK(dry_logits(dry(0.5f, 1.75f, 2), 5, h) == std::vector<float>{0, 0, -0.875f, -0.5f, 0});
    // A logit loses the penalty whatever its sign.
    std::vector<float> logits = {1.0f, 1.0f, 3.0f, -1.0f, 1.0f};
    smol::apply_dry(logits.data(), 5, h, dry(1.0f, 2.0f, 2));
    CHECK(logits == std::vector<float>{1, 1, 1, -2, 1});
    // Off: multiplier 0, base below 1, last_n 0; and a history no longer
    // than the allowed length.
    CHECK(dry_logits(dry(0.0f, 2.0f, 2), 5, h) == std::vector<float>(5, 0.0f));
    CHECK(dry_logits(dry(1.0f, 0.5f, 2), 5, h) == std::vector<float>(5, 0.0f));
    CHECK(dry_logits(dry(1.0f, 2.0f, 2, 0), 5, h) == std::vector<float>(5, 0.0f));
    CHECK(dry_logits(dry(1.0f, 2.0f, 2), 5, {0, 0}) == std::vector<float>(5, 0.0f));
    // Ids outside the vocabulary take part in matching, are never penalized.
    CHECK(dry_logits(dry(1.0f, 2.0f, 1), 5, {7, 9, 7, 9, 7}) == std::vector<float>(5, 0.0f));
    CHECK(dry_logits(dry(1.0f, 2.0f, 1), 5, {7, 1, 7, 1, 7}) == std::vector<float>{0, -4, 0, 0, 0});
}

TEST_CASE("dry: penalty_last_n limits the window, the exponent is capped") {
    const std::vector<int32_t> h = {0, 1, 2, 2, 1, 2, 3, 0, 1, 2};
    // The last 7: c b c y a b c. "b c" ends at position 2 of the window
    // (y would extend it); the "a b c" before the window is not seen.
    CHECK(dry_logits(dry(1.0f, 2.0f, 2, 7), 5, h) == std::vector<float>{0, 0, 0, -1, 0});
    CHECK(dry_logits(dry(1.0f, 2.0f, 2, 3), 5, h) == std::vector<float>(5, 0.0f));
    CHECK(dry_logits(dry(1.0f, 2.0f, 2, 100), 5, h) == dry_logits(dry(1.0f, 2.0f, 2, -1), 5, h));
    // 30 times the same token: the longest repeat is 29, the exponent 27,
    // capped at int(88.7228391 / ln 1000) = 12 so the penalty stays finite.
    const std::vector<int32_t> same(30, 4);
    const std::vector<float> capped = dry_logits(dry(1.0f, 1000.0f, 2), 5, same);
    CHECK(capped[4] == -static_cast<float>(std::pow(1000.0, 12)));
    CHECK(std::isfinite(capped[4]));
    CHECK(capped[0] == 0.0f);
    // Base 1: every repeat loses the multiplier alone, no cap needed.
    CHECK(dry_logits(dry(0.25f, 1.0f, 2), 5, same)[4] == -0.25f);
}

TEST_CASE("dry: breaker table from token texts") {
    // 0 a, 1 b, 2 c, 3 "<", 4 "|", 5 ">", 6 "<|", 7 "x:y", 8 ":", 9 "|>"
    const HandVocabulary vocab{{"a", "b", "c", "<", "|", ">", "<|", "x:y", ":", "|>"}};
    const smol::DryBreakers colon = vocab.breakers({":"});
    CHECK(colon.size() == 2);  // the tokens that contain it
    CHECK(colon.is_single_token(7));
    CHECK(colon.is_single_token(8));
    CHECK_FALSE(colon.is_single_token(0));
    // "<|>": no token holds it whole. "<" ends with its prefix "<" (then
    // "|>" must follow, encoded as the one token 9), "<|" with "<|" (then ">").
    const smol::DryBreakers arrow = vocab.breakers({"<|>"});
    CHECK(arrow.size() == 2);
    CHECK(arrow.tails(3) == std::vector<std::vector<int32_t>>{{9}});
    CHECK(arrow.tails(6) == std::vector<std::vector<int32_t>>{{5}});
    CHECK(arrow.tails(4).empty());
    CHECK_FALSE(arrow.is_single_token(3));
    // Empty breakers are skipped; one longer than 40 bytes is cut to 40 (here
    // "a" x 40, which token "a" heads with the encoding of 39 more "a", cut
    // to 20 tokens).
    CHECK(vocab.breakers({""}).size() == 0);
    const smol::DryBreakers long_one = vocab.breakers({std::string(1000, 'a')});
    CHECK(long_one.tails(0) == std::vector<std::vector<int32_t>>{std::vector<int32_t>(20, 0)});
    // More than 64 breakers is an error, as a value.
    const auto too_many = smol::DryBreakers::build(
        1, [](int32_t, std::string& out) { out = "a"; },
        [](std::string_view, std::vector<int32_t>&) { return smol::Status(); },
        std::vector<std::string>(65, "x"));
    REQUIRE_FALSE(too_many.ok());
    CHECK(too_many.error().kind == smol::ErrorKind::invalid_argument);
    CHECK(too_many.error().message.find("dry_sequence_breakers") != std::string::npos);
}

TEST_CASE("dry: sequence breakers cut repeats and are never penalized") {
    // 0 a, 1 b, 2 c, 3 "\n"
    const HandVocabulary vocab{{"a", "b", "c", "\n"}};
    const smol::DryBreakers newline = vocab.breakers({"\n"});
    const SamplingParams p = dry(1.0f, 2.0f, 2);
    // c \n a b c \n a b: the end "c \n a b" also ends at position 3 (length
    // 4, c would extend it: -2^2). The newest "\n" limits repeats to the 2
    // tokens after it: -2^0.
    const std::vector<int32_t> h = {2, 3, 0, 1, 2, 3, 0, 1};
    CHECK(dry_logits(p, 4, h) == std::vector<float>{0, 0, -4, 0});
    CHECK(dry_logits(p, 4, h, &newline) == std::vector<float>{0, 0, -1, 0});
    // a b \n a b: "\n" would extend "a b" but is a breaker: no penalty.
    CHECK(dry_logits(p, 4, {0, 1, 3, 0, 1}) == std::vector<float>{0, 0, 0, -1});
    CHECK(dry_logits(p, 4, {0, 1, 3, 0, 1}, &newline) == std::vector<float>(4, 0.0f));
    // A breaker closer to the end than the allowed length: nothing at all.
    CHECK(dry_logits(p, 4, {0, 1, 3, 0, 1, 3, 0}, &newline) == std::vector<float>(4, 0.0f));
}

TEST_CASE("dry: a breaker spread over several tokens") {
    // 0 a, 1 b, 2 c, 3 "<", 4 "|", 5 ">", 6 "<|"; the breaker "<|>" is
    // "<" followed by "|" ">" (the encoding of "|>"), or "<|" then ">".
    const HandVocabulary vocab{{"a", "b", "c", "<", "|", ">", "<|"}};
    const smol::DryBreakers arrow = vocab.breakers({"<|>"});
    CHECK(arrow.tails(3) == std::vector<std::vector<int32_t>>{{4, 5}});
    CHECK(arrow.tails(6) == std::vector<std::vector<int32_t>>{{5}});
    const SamplingParams p = dry(1.0f, 2.0f, 2);
    // < | > a b < | > a b: "< | > a b" repeats (length 5: "<" loses 2^3);
    // the newest complete breaker leaves 2 tokens: 2^0. "<" heads a
    // breaker but is not one by itself, so it is penalized.
    const std::vector<int32_t> h = {3, 4, 5, 0, 1, 3, 4, 5, 0, 1};
    CHECK(dry_logits(p, 7, h) == std::vector<float>{0, 0, 0, -8, 0, 0, 0});
    CHECK(dry_logits(p, 7, h, &arrow) == std::vector<float>{0, 0, 0, -1, 0, 0, 0});
    // The same with the two-token spelling "<|" ">".
    const std::vector<int32_t> h2 = {6, 5, 0, 1, 6, 5, 0, 1};
    CHECK(dry_logits(p, 7, h2) == std::vector<float>{0, 0, 0, 0, 0, 0, -4});
    CHECK(dry_logits(p, 7, h2, &arrow) == std::vector<float>{0, 0, 0, 0, 0, 0, -1});
    // "<" followed by "|" "a" is no breaker: the repeat counts in full.
    const std::vector<int32_t> h3 = {3, 4, 0, 1, 3, 4, 0, 1};
    CHECK(dry_logits(p, 7, h3, &arrow) == dry_logits(p, 7, h3));
    CHECK(dry_logits(p, 7, h3)[3] == -4.0f);
}

TEST_CASE("dry: the sampler applies it before the filters, with its breaker table") {
    const HandVocabulary vocab{{"a", "b", "c", "\n"}};
    SamplingParams p = dry(1.0f, 2.0f, 2);
    p.temperature = 0.0f;  // greedy still sees DRY, like the other penalties
    const std::vector<int32_t> h = {2, 3, 0, 1, 2, 3, 0, 1};
    Sampler s(p);
    std::vector<float> logits = {0.0f, 0.0f, 3.5f, 0.0f};
    CHECK(s.sample(logits.data(), 4, h) == 0);  // c: 3.5 - 4 < 0
    CHECK(logits[2] == -0.5f);
    s.set_dry_breakers(std::make_shared<const smol::DryBreakers>(vocab.breakers({"\n"})));
    logits = {0.0f, 0.0f, 3.5f, 0.0f};
    CHECK(s.sample(logits.data(), 4, h) == 2);  // c: 3.5 - 1
    CHECK(logits[2] == 2.5f);
    CHECK(Sampler::dry_active(p));
    CHECK_FALSE(Sampler::dry_active(SamplingParams()));
}

TEST_CASE("xtc: the threshold, the kept least probable top token, min-p before it") {
    SamplingParams p = plain();
    p.xtc_probability = 1.0f;  // always, no draw
    p.xtc_threshold = 0.1f;
    // 0.5, 0.3 and 0.15 reach 0.1: all go but 0.15, the least probable of them.
    Sampler s(p);
    CHECK(survivors(s, logits_of({0.5, 0.3, 0.15, 0.05})) == std::vector<int32_t>{2, 3});
    auto logits = logits_of({0.5, 0.3, 0.15, 0.05});
    const auto d = s.distribution(logits.data(), logits.size(), {});
    REQUIRE(d.size() == 2);
    CHECK(d[0].probability == doctest::Approx(0.75));
    // Only one token reaches the threshold: nothing is removed.
    CHECK(survivors(s, logits_of({0.55, 0.09, 0.09, 0.09, 0.09, 0.09})).size() == 6);
    // Ties at the bottom of the top tokens: the last in (probability, then
    // lower id) order is kept, the higher id.
    CHECK(survivors(s, logits_of({0.4, 0.2, 0.2, 0.2})) == std::vector<int32_t>{3});
    CHECK(survivors(s, logits_of({0.2, 0.2, 0.4, 0.2})) == std::vector<int32_t>{3});
    // Probabilities are renormalized over what top-k left: 0.625 and 0.375.
    p.top_k = 2;
    s.set_params(p);
    CHECK(survivors(s, logits_of({0.5, 0.3, 0.15, 0.05})) == std::vector<int32_t>{1});
    // Off: a threshold above 0.5, a probability of 0; and greedy skips it.
    p.top_k = 0;
    p.xtc_threshold = 0.51f;
    s.set_params(p);
    CHECK(survivors(s, logits_of({0.5, 0.3, 0.15, 0.05})).size() == 4);
    p.xtc_threshold = 0.1f;
    p.xtc_probability = 0.0f;
    s.set_params(p);
    CHECK(survivors(s, logits_of({0.5, 0.3, 0.15, 0.05})).size() == 4);
    p.xtc_probability = 1.0f;
    p.temperature = 0.0f;
    s.set_params(p);
    auto greedy_logits = logits_of({0.5, 0.3, 0.15, 0.05});
    CHECK(s.sample(greedy_logits.data(), 4, {}) == 0);
}

TEST_CASE("xtc: applied with its probability, reproducibly for a seed") {
    SamplingParams p = plain();
    p.xtc_probability = 0.5f;
    p.xtc_threshold = 0.1f;
    p.seed = 7;
    // 0.6 / 0.4: with XTC token 1 for sure, without it token 0 at 0.6, so
    // P(0) = 0.5 * 0.6 = 0.3.
    const auto base_logits = logits_of({0.6, 0.4});
    Sampler a(p), b(p);
    const int n = 20000;
    int zeros = 0;
    std::vector<int32_t> first, second;
    for (int i = 0; i < n; ++i) {
        auto la = base_logits, lb = base_logits;
        first.push_back(a.sample(la.data(), 2, {}));
        second.push_back(b.sample(lb.data(), 2, {}));
        zeros += first.back() == 0;
    }
    CHECK(first == second);
    CHECK(double(zeros) / n == doctest::Approx(0.3).epsilon(0.05));
    // Another seed: another sequence.
    p.seed = 8;
    Sampler c(p);
    std::vector<int32_t> third;
    for (int i = 0; i < n; ++i) {
        auto l = base_logits;
        third.push_back(c.sample(l.data(), 2, {}));
    }
    CHECK(third != first);
}

TEST_CASE("dry / xtc: defaults are off, bad values name the field") {
    const SamplingParams d;
    CHECK(d.dry_multiplier == 0.0f);
    CHECK(d.dry_base == 1.75f);
    CHECK(d.dry_allowed_length == 2);
    CHECK(d.dry_penalty_last_n == -1);
    CHECK(d.dry_sequence_breakers == std::vector<std::string>{"\n", ":", "\"", "*"});
    CHECK(d.xtc_probability == 0.0f);
    CHECK(d.xtc_threshold == 0.1f);
    auto expect_bad = [](SamplingParams p, const char* field) {
        const smol::Status status = Sampler::validate(p);
        REQUIRE_FALSE(status.ok());
        CHECK(status.error().kind == smol::ErrorKind::invalid_argument);
        CHECK(status.error().message.find(field) != std::string::npos);
    };
    SamplingParams p = plain();
    p.dry_multiplier = -1.0f;
    expect_bad(p, "dry_multiplier");
    p.dry_multiplier = NAN;
    expect_bad(p, "dry_multiplier");
    p = plain();
    p.dry_base = INFINITY;
    expect_bad(p, "dry_base");
    p = plain();
    p.dry_allowed_length = 0;
    expect_bad(p, "dry_allowed_length");
    p = plain();
    p.dry_penalty_last_n = -2;
    expect_bad(p, "dry_penalty_last_n");
    p = plain();
    p.dry_sequence_breakers.assign(65, "x");
    expect_bad(p, "dry_sequence_breakers");
    p.dry_sequence_breakers.assign(64, std::string(1 << 20, 'x'));  // long ones are cut, fine
    CHECK(Sampler::validate(p).ok());
    p = plain();
    p.xtc_probability = 1.5f;
    expect_bad(p, "xtc_probability");
    p.xtc_probability = NAN;
    expect_bad(p, "xtc_probability");
    p = plain();
    p.xtc_threshold = -0.1f;
    expect_bad(p, "xtc_threshold");
    p.xtc_threshold = NAN;
    expect_bad(p, "xtc_threshold");
}

}  // namespace test_sampler
