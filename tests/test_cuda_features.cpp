// The CUDA backend's features beyond one forward pass, on a device, each
// against the CPU path on the tiny Q4_K_M fixture: erase (the moved keys
// re-rotated on the device), context shift, YaRN, lookup decoding's verify
// chunks and forks. The GPU and the CPU round differently, so logits are held
// to the goldens' float tolerance and greedy paths to the goldens' rule: equal
// until a step where the CPU's top-1/top-2 gap is ambiguous (< 0.25).
#include <doctest/doctest.h>
#include <smol/cuda/backend.hpp>
#include <smol/smol.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "support/cuda_testutil.hpp"
#include "support/fixtures.hpp"
#include "support/model_testutil.hpp"
#include "support/yarn_fixture.hpp"

using smol_test::check_logits_close;
using smol_test::have_gpu;
using smol_test::one_segment;

namespace {

constexpr float kAmbiguousGap = 0.25f;  // the fixtures README's greedy rule

struct Models {
    std::shared_ptr<const smol::Model> cpu, gpu;
};

smol::LoadOptions on_gpu() {
    smol::LoadOptions options;
    options.device = smol::Device::cuda;
    options.device_backend = smol::cuda_backend();
    return options;
}

// The tiny fixture on both devices (nullopt-like empty when the fixture is absent).
Models tiny_models() {
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return {};
    Models m;
    m.cpu = smol::Model::load(*path);
    m.gpu = smol::Model::load(*path, on_gpu());
    REQUIRE(m.gpu->device() == smol::Device::cuda);
    return m;
}

// A prompt of at least n tokens: a text repeated, cut to n.
std::vector<int32_t> prompt_ids(const smol::Model& model, size_t n) {
    const std::string text =
        "The old forge stood at the edge of the village, its chimney breathing grey smoke into "
        "the winter sky. ";
    std::string all;
    std::vector<int32_t> ids;
    while (ids.size() < n) {
        all += text;
        ids = model.tokenizer().encode(all, false);
    }
    ids.resize(n);
    return ids;
}

float top_gap(const float* logits, size_t vocab) {
    float first = -INFINITY, second = -INFINITY;
    for (size_t i = 0; i < vocab; ++i) {
        if (logits[i] > first) {
            second = first;
            first = logits[i];
        } else if (logits[i] > second) {
            second = logits[i];
        }
    }
    return first - second;
}

// The GPU's greedy tokens against the CPU's, by the goldens' rule; cpu_logits[s]
// are the CPU's logits at step s. Returns the identical steps.
size_t check_greedy_rule(const std::vector<int32_t>& gpu, const std::vector<int32_t>& cpu,
                         const std::vector<std::vector<float>>& cpu_logits,
                         const std::string& where) {
    const size_t n = std::min(gpu.size(), cpu.size());
    for (size_t s = 0; s < n; ++s) {
        if (gpu[s] == cpu[s]) continue;
        REQUIRE(s < cpu_logits.size());
        const float gap = top_gap(cpu_logits[s].data(), cpu_logits[s].size());
        MESSAGE(where << ": step " << s << " GPU " << gpu[s] << ", CPU " << cpu[s] << " (CPU gap "
                      << gap << ")");
        CHECK_MESSAGE(gap < kAmbiguousGap, where << ": diverged at an unambiguous step " << s);
        return s;
    }
    MESSAGE(where << ": greedy identical for " << n << " steps");
    return n;
}

// A greedy generation that records the logits of each step.
struct Recorded {
    smol::GenerateResult result;
    std::vector<std::vector<float>> logits;
};
smol::GenerateParams greedy_params(size_t max_tokens) {
    smol::GenerateParams greedy;
    greedy.temperature = 0.0f;
    greedy.max_tokens = max_tokens;
    greedy.ignore_eos = true;
    return greedy;
}
Recorded generate_recorded(smol::Generator& gen, const std::string& prompt,
                           smol::GenerateParams params) {
    Recorded r;
    params.logits_hook = [&](float* logits, size_t n) {
        r.logits.emplace_back(logits, logits + n);
    };
    r.result = gen.generate(prompt, params);
    return r;
}

}  // namespace

TEST_CASE("cuda features: erase re-rotates the moved keys on the device as the CPU does") {
    if (!have_gpu()) return;
    const Models m = tiny_models();
    if (!m.cpu) return;
    const smol::Backend& cpu = m.cpu->backend();
    const smol::Backend& gpu = m.gpu->backend();
    const size_t vocab = cpu.vocab_size();
    const smol::Config& c = m.cpu->config();
    const auto ids = prompt_ids(*m.cpu, 48);
    const std::vector<int32_t> more(ids.begin(), ids.begin() + 8);
    // Prompt (a tiles chunk), erase positions 8 .. 23, then 8 more tokens with
    // every row's logits: they attend over keys moved down by 16.
    auto run = [&](const smol::Backend& backend, std::unique_ptr<smol::BackendCache>& cache) {
        cache = backend.make_cache(128);
        std::vector<float> last(vocab), rows(more.size() * vocab);
        backend.forward(one_segment(ids, 0, *cache, last));
        backend.erase(*cache, 8, 16);
        CHECK(cache->size() == ids.size() - 16);
        smol::Segment seg = one_segment(more, cache->size(), *cache, rows);
        seg.all_logits = true;
        backend.forward(seg);
        return rows;
    };
    std::unique_ptr<smol::BackendCache> cpu_cache, gpu_cache;
    const auto want = run(cpu, cpu_cache), got = run(gpu, gpu_cache);
    for (size_t t = 0; t < more.size(); ++t)
        check_logits_close(&got[t * vocab], &want[t * vocab], vocab,
                           "after erase, row " + std::to_string(t));
    // The moved rows as the CPU holds them (RoPE and NoPE layers, keys and values).
    const auto& cpu_kv = dynamic_cast<const smol::KVCache&>(*cpu_cache);
    const auto& gpu_kv = dynamic_cast<const smol::CudaKVCache&>(*gpu_cache);
    std::vector<float> row_cpu(c.head_dim), row_gpu(c.head_dim);
    for (size_t layer = 0; layer < c.n_layers; ++layer)
        for (const smol::KVPart kind : {smol::KVPart::keys, smol::KVPart::values})
            for (size_t pos : {size_t(8), size_t(20), ids.size() - 17}) {
                cpu_kv.load_row(layer, kind, 0, pos, row_cpu.data());
                gpu_kv.load_row(layer, kind, 0, pos, row_gpu.data());
                smol_test::check_kv_row_close(row_gpu.data(), row_cpu.data(), c.head_dim,
                                              "layer " + std::to_string(layer) + " kind " +
                                                  std::to_string(int(kind)) + " pos " +
                                                  std::to_string(pos));
            }
}

TEST_CASE("cuda features: context shift on the device follows the CPU's path") {
    if (!have_gpu()) return;
    const Models m = tiny_models();
    if (!m.cpu) return;
    smol::GeneratorOptions options;
    options.n_ctx = 64;
    options.context_policy = smol::ContextPolicy::shift;
    options.n_keep = 4;
    const std::string prompt = "Once upon a time, in a village by the sea,";
    smol::Generator cpu(m.cpu, options), gpu(m.gpu, options);
    const Recorded want = generate_recorded(cpu, prompt, greedy_params(120));
    // The GPU run is held to the CPU's tokens (its logits recorded first, then
    // the CPU's choice made the top one), so both shift at the same steps and
    // every step's logits compare, before and after the shifts.
    std::vector<std::vector<float>> got;
    smol::GenerateParams forced = greedy_params(120);
    forced.logits_hook = [&](float* logits, size_t n) {
        got.emplace_back(logits, logits + n);
        const size_t step = got.size() - 1;
        if (step < want.result.tokens.size())
            logits[want.result.tokens[step]] = *std::max_element(logits, logits + n) + 100.0f;
    };
    const smol::GenerateResult result = gpu.generate(prompt, forced);
    CHECK(result.tokens == want.result.tokens);
    // 120 tokens in 64 positions: the context shifted, by the same rule on both.
    CHECK(want.result.n_discarded_tokens > 0);
    CHECK(result.n_discarded_tokens == want.result.n_discarded_tokens);
    REQUIRE(got.size() == want.logits.size());
    for (size_t s = 0; s < got.size(); ++s)
        check_logits_close(got[s].data(), want.logits[s].data(), want.logits[s].size(),
                           "context shift step " + std::to_string(s));
}

TEST_CASE("cuda features: YaRN past the original context on the device") {
    if (!have_gpu()) return;
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return;
    const auto fixture = smol::gguf::File::open(*path);
    const std::vector<uint8_t> bytes =
        smol_test::with_rope_scaling(*fixture, smol_test::golden_yarn_keys());
    const auto cpu = smol::Model::load_from_memory(bytes.data(), bytes.size());
    const auto gpu = smol::Model::load_from_memory(bytes.data(), bytes.size(), on_gpu());
    const smol::Config& c = cpu->config();
    REQUIRE(c.rope_yarn);
    REQUIRE(gpu->device() == smol::Device::cuda);
    const size_t vocab = c.vocab_size;
    // Most positions past the original context, in chunks of 128 (tiles).
    const auto ids = prompt_ids(*cpu, 3 * c.rope_original_context + 40);
    REQUIRE(ids.size() + 8 <= c.context_length);
    auto cpu_cache = cpu->backend().make_cache(c.context_length);
    auto gpu_cache = gpu->backend().make_cache(c.context_length);
    std::vector<float> want(ids.size() * vocab), got(ids.size() * vocab);
    smol::ForwardOptions chunks;
    chunks.chunk_size = 128;
    auto prefill = [&](const smol::Model& model, smol::BackendCache& cache,
                       std::vector<float>& out) {
        smol::Segment seg = one_segment(ids, 0, cache, out);
        seg.all_logits = true;
        model.backend().forward(seg, chunks);
    };
    prefill(*cpu, *cpu_cache, want);
    prefill(*gpu, *gpu_cache, got);
    for (size_t t = 0; t < ids.size(); t += 37)
        check_logits_close(&got[t * vocab], &want[t * vocab], vocab,
                           "YaRN position " + std::to_string(t));
    check_logits_close(&got[(ids.size() - 1) * vocab], &want[(ids.size() - 1) * vocab], vocab,
                       "YaRN last position");
    // Decode steps (one token each) on the CPU's greedy tokens.
    std::vector<float> cpu_step(want.end() - vocab, want.end()), gpu_step(vocab);
    for (size_t s = 0; s < 8; ++s) {
        const int32_t id =
            int32_t(std::max_element(cpu_step.begin(), cpu_step.end()) - cpu_step.begin());
        const std::vector<int32_t> one = {id};
        const size_t pos = ids.size() + s;
        cpu->backend().forward(one_segment(one, pos, *cpu_cache, cpu_step));
        gpu->backend().forward(one_segment(one, pos, *gpu_cache, gpu_step));
        check_logits_close(gpu_step.data(), cpu_step.data(), vocab,
                           "YaRN decode step " + std::to_string(s));
    }
}

TEST_CASE("cuda features: lookup decoding's verify chunks on the device") {
    if (!have_gpu()) return;
    const Models m = tiny_models();
    if (!m.cpu) return;
    smol::GeneratorOptions options;
    options.n_ctx = 256;
    const std::string prompt = "The quick brown fox jumps over the lazy dog. The quick brown";
    const smol::GenerateParams plain = greedy_params(40);
    smol::Generator gpu_plain(m.gpu, options), cpu_plain(m.cpu, options);
    const Recorded want_cpu = generate_recorded(cpu_plain, prompt, plain);
    const smol::GenerateResult plain_gpu = gpu_plain.generate(prompt, plain);
    const std::vector<int32_t>& want = plain_gpu.tokens;
    const size_t prompt_tokens = plain_gpu.n_prompt_tokens;
    check_greedy_rule(want, want_cpu.result.tokens, want_cpu.logits, "plain GPU against CPU");
    // Drafts that are all right (the plain run's next tokens), all wrong, and
    // half right, up to the most a step takes: verify chunks of up to 17 rows.
    // On the device, as on the CPU, the tokens are the plain run's exactly.
    for (size_t k : {size_t(4), smol::LookupParams::kMaxDrafts}) {
        for (int kind = 0; kind < 3; ++kind) {
            CAPTURE(k);
            CAPTURE(kind);
            smol::GenerateParams lookup = plain;
            lookup.lookup.mode = smol::LookupMode::on;
            lookup.lookup.k = k;
            lookup.lookup.draft_hook = [&](const std::vector<int32_t>& history, size_t most,
                                           std::vector<int32_t>& drafts) {
                // history holds the prompt and the generated tokens so far.
                const size_t done =
                    history.size() >= prompt_tokens ? history.size() - prompt_tokens : 0;
                for (size_t i = 0; i < most && done + i < want.size(); ++i) {
                    int32_t id = want[done + i];
                    if (kind == 1 || (kind == 2 && i % 2 == 1)) id = (id + 1) % 1000;
                    drafts.push_back(id);
                }
            };
            smol::Generator gen(m.gpu, options);
            const smol::GenerateResult got = gen.generate(prompt, lookup);
            CHECK(got.tokens == want);
            CHECK(got.n_drafted_tokens > 0);
            if (kind == 0) CHECK(got.n_accepted_drafts > 0);
        }
    }
}

TEST_CASE("cuda features: a fork on the device continues as the CPU's fork") {
    if (!have_gpu()) return;
    const Models m = tiny_models();
    if (!m.cpu) return;
    smol::GeneratorOptions options;
    options.n_ctx = 256;
    smol::Generator cpu(m.cpu, options), gpu(m.gpu, options);
    const std::string prompt = "In a village far away, an old smith";
    const Recorded cpu_first = generate_recorded(cpu, prompt, greedy_params(12));
    const Recorded gpu_first = generate_recorded(gpu, prompt, greedy_params(12));
    const size_t same = check_greedy_rule(gpu_first.result.tokens, cpu_first.result.tokens,
                                          cpu_first.logits, "before the fork");
    if (same < cpu_first.result.tokens.size()) return;  // paths parted at an ambiguous step
    // Forks share the cached prefix; each continues with its own text.
    smol::Generator cpu_fork = cpu.fork(), gpu_fork = gpu.fork();
    const std::string next = prompt + " hammered the glowing iron while the apprentice";
    const Recorded cpu_next = generate_recorded(cpu_fork, next, greedy_params(16));
    const Recorded gpu_next = generate_recorded(gpu_fork, next, greedy_params(16));
    CHECK(gpu_next.result.n_reused_tokens == cpu_next.result.n_reused_tokens);
    check_greedy_rule(gpu_next.result.tokens, cpu_next.result.tokens, cpu_next.logits, "the fork");
    // The original on the device is untouched by its fork.
    const Recorded gpu_again = generate_recorded(gpu, next, greedy_params(16));
    CHECK(gpu_again.result.tokens == gpu_next.result.tokens);
}
