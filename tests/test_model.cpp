// Model: Config and weight binding (errors name the key or tensor), KVCache,
// the Eigen reference against the fixture goldens, and the fast forward pass
// against both the goldens and the reference on generated models.
#include <doctest/doctest.h>
#include <smol/smol.hpp>
#include <smol/model/config.hpp>
#include <smol/model/kv_cache.hpp>
#include <smol/model/weights.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "model_testutil.hpp"
#include "reference_forward.hpp"

namespace {

const char* const kGoldenModels[] = {"tiny-q4km.gguf", "small-q4km.gguf", "tiny-q8_0.gguf"};

// Runs the Eigen reference over one golden prompt: per-position top-8, last
// logits, greedy. Returns false when the fixture is absent.
void check_reference_golden(const std::string& model) {
    const auto path = smol_test::fixture(model);
    if (!path) return;
    const auto golden = smol_test::load_golden(model);
    if (!golden) return;
    const auto file = smol::gguf::File::open(*path);
    const smol_test::ReferenceModel ref(*file);
    const size_t vocab = ref.config().vocab_size;
    for (size_t pi = 0; pi < golden->size(); ++pi) {
        const smol_test::GoldenPrompt& g = (*golden)[pi];
        const std::string where = model + " prompt " + std::to_string(pi) + " (reference)";
        auto cache = ref.new_cache();
        std::vector<float> last(vocab);
        size_t bad_positions = 0;
        ref.forward(g.ids, cache, true, [&](size_t t, const float* logits) {
            if (!smol_test::top8_matches(logits, vocab, g.prompt_top[t],
                                         where + " position " + std::to_string(t)))
                ++bad_positions;
            if (t + 1 == g.ids.size()) std::copy(logits, logits + vocab, last.begin());
        });
        CHECK_MESSAGE(bad_positions == 0, where << ": positions with top-8 mismatches");
        smol_test::count_golden();

        const auto expected = smol_test::read_f32(g.logits_path);
        REQUIRE(expected.size() == vocab);
        const auto cmp = smol_test::compare_logits(last.data(), expected.data(), vocab);
        MESSAGE(where << ": cosine " << cmp.cosine << " max abs error " << cmp.max_abs_error
                      << " range " << cmp.range);
        CHECK(cmp.cosine >= 0.999);
        CHECK(cmp.max_abs_error <= 0.02f * cmp.range);
        smol_test::count_golden();

        std::vector<float> step_logits;
        const size_t same = smol_test::check_greedy(
            g, last.data(), vocab,
            [&](int32_t id) {
                step_logits = ref.last_logits({id}, cache);
                return step_logits.data();
            },
            where);
        MESSAGE(where << ": greedy identical for " << same << " of " << g.greedy_ids.size() << " steps");
        smol_test::count_golden();
    }
}

}  // namespace

TEST_CASE("config from the fixtures") {
    const auto path = smol_test::fixture("small-q4km.gguf");
    if (!path) return;
    const auto file = smol::gguf::File::open(*path);
    const smol::Config c = smol::Config::from_gguf(*file);
    CHECK(c.n_layers == 8);
    CHECK(c.hidden == 512);
    CHECK(c.ffn == 1536);
    CHECK(c.n_heads == 4);
    CHECK(c.n_kv_heads == 2);
    CHECK(c.head_dim == 128);
    CHECK(c.rope_dims == 128);
    CHECK(c.context_length == 8192);
    CHECK(c.vocab_size == 128256);
    CHECK(c.rope_freq_base == doctest::Approx(5e6));
    CHECK(c.rms_eps == doctest::Approx(1e-6));
    CHECK(c.layer_uses_rope(0));
    CHECK_FALSE(c.layer_uses_rope(3));
    CHECK_FALSE(c.layer_uses_rope(7));
    const smol::Weights w = smol::Weights::bind(*file, c);
    CHECK(w.tied_embeddings);
    CHECK(w.layers.size() == 8);
    CHECK(w.token_embd.type == smol::GGMLType::Q6_K);
    CHECK(w.lm_head.data == w.token_embd.data);
    CHECK(w.layers[3].attn_k.rows == 256);
}

TEST_CASE("reference forward matches the goldens") {
    for (const char* model : kGoldenModels) {
        SUBCASE(model) { check_reference_golden(model); }
    }
}
