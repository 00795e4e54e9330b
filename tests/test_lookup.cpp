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
            MESSAGE((std::string(name) + ": " + smol::cpu_level_name(levels[i]) + " kernels compared"));
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
