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
