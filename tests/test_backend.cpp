// The backend seam (model/backend.hpp) on the CPU backend: forward over several
// segments equals separate forwards; the seam's one copy of the argument checks
// (a failed check changes nothing) and of cancellation; caches through the
// interface (clone, serialize/restore across cache instances and element
// types); the device choice (LoadOptions::device) in a build without CUDA; and
// Generator on the seam giving what the plain Model::forward loop gives.
#include <doctest/doctest.h>

#include <smol/smol.hpp>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "generator_testutil.hpp"

namespace {

using smol::Backend;
using smol::BackendCache;
using smol::ErrorKind;
using smol::Segment;

const std::vector<uint8_t>& demo_bytes() {
    static const std::vector<uint8_t> bytes = [] {
        smol_tools::MakeOptions options;
        options.shape = smol_tools::preset_shape("demo");
        options.recipe = smol_tools::Recipe::q4_k_m;
        options.seed = 7;
        options.threads = 2;
        return smol_tools::make_model_bytes(options);
    }();
    return bytes;
}

template <class F>
ErrorKind error_kind_of(F&& f, std::string* message = nullptr) {
    try {
        f();
    } catch (const smol::Error& e) {
        if (message) *message = e.what();
        return e.kind();
    }
    FAIL("no smol::Error was thrown");
    return ErrorKind::internal;
}

std::vector<int32_t> tokens(size_t n, size_t vocab, uint32_t seed) {
    std::vector<int32_t> ids(n);
    uint32_t state = seed * 2654435761u + 1;
    for (auto& id : ids) {
        state = state * 1664525u + 1013904223u;
        id = int32_t((state >> 8) % vocab);
    }
    return ids;
}

Segment segment(const std::vector<int32_t>& ids, size_t start, BackendCache& cache, std::vector<float>& logits,
                bool all_logits = false) {
    Segment s;
    s.tokens = ids.data();
    s.n_tokens = ids.size();
    s.start = start;
    s.cache = &cache;
    s.logits = logits.data();
    s.all_logits = all_logits;
    return s;
}

size_t argmax(const std::vector<float>& v) { return size_t(std::max_element(v.begin(), v.end()) - v.begin()); }

}  // namespace

TEST_CASE("device: cpu by default; auto picks the cpu without CUDA and logs it; cuda is Error(unsupported)") {
    const auto& bytes = demo_bytes();
    {
        const auto model = smol::Model::load_from_memory(bytes.data(), bytes.size());
        CHECK(model->device() == smol::Device::cpu);
        CHECK(&model->backend() == static_cast<const Backend*>(&model->cpu_backend()));
        CHECK(model->backend().name().rfind("cpu (", 0) == 0);
    }
    {
        std::vector<std::string> lines;
        smol::LoadOptions options;
        options.device = smol::Device::automatic;
        options.log = [&](int, const std::string& line) { lines.push_back(line); };
        const auto model = smol::Model::load_from_memory(bytes.data(), bytes.size(), options);
        CHECK(model->device() == smol::Device::cpu);
        const auto said = std::find_if(lines.begin(), lines.end(),
                                       [](const std::string& l) { return l.rfind("smol: device cpu", 0) == 0; });
        REQUIRE(said != lines.end());
        CHECK(said->find("auto") != std::string::npos);
        CHECK(said->find("without its CUDA backend") != std::string::npos);
    }
    smol::LoadOptions cuda;
    cuda.device = smol::Device::cuda;
    std::string message;
    CHECK(error_kind_of([&] { smol::Model::load_from_memory(bytes.data(), bytes.size(), cuda); }, &message) ==
          ErrorKind::unsupported);
    CHECK(message.find("cuda") != std::string::npos);
}

TEST_CASE("forward over two segments equals two separate forwards") {
    const auto& bytes = demo_bytes();
    const auto model = smol::Model::load_from_memory(bytes.data(), bytes.size());
    const Backend& backend = model->backend();
    const size_t vocab = backend.vocab_size();
    const auto prefix = tokens(10, vocab, 1), a = tokens(7, vocab, 2), b = tokens(13, vocab, 3);
    smol::ForwardOptions options;
    options.chunk_size = 4;  // several steps, the segments running out at different ones

    auto run = [&](bool together, std::vector<float>& logits_a, std::vector<float>& logits_b) {
        auto cache_a = backend.make_cache(64), cache_b = backend.make_cache(32);
        std::vector<float> scratch(vocab);
        backend.forward(segment(prefix, 0, *cache_a, scratch), options);
        logits_a.assign(a.size() * vocab, 0.0f);
        logits_b.assign(vocab, 0.0f);
        const Segment seg_a = segment(a, prefix.size(), *cache_a, logits_a, /*all_logits=*/true);
        const Segment seg_b = segment(b, 0, *cache_b, logits_b);
        if (together) {
            const Segment both[2] = {seg_a, seg_b};
            backend.forward(both, 2, options);
        } else {
            backend.forward(seg_a, options);
            backend.forward(seg_b, options);
        }
        CHECK(cache_a->size() == prefix.size() + a.size());
        CHECK(cache_b->size() == b.size());
        return std::make_pair(cache_a->serialize(), cache_b->serialize());
    };
    std::vector<float> together_a, together_b, alone_a, alone_b;
    const auto caches_together = run(true, together_a, together_b);
    const auto caches_alone = run(false, alone_a, alone_b);
    CHECK(together_a == alone_a);
    CHECK(together_b == alone_b);
    CHECK(caches_together.first == caches_alone.first);
    CHECK(caches_together.second == caches_alone.second);

    // Model::forward (the CPU wrapper tests and tools use) is the same seam.
    smol::KVCache kv = model->new_cache(32);
    std::vector<float> via_model(vocab);
    smol::ForwardOptions chunked;
    chunked.chunk_size = 4;
    model->forward(b.data(), b.size(), 0, kv, via_model.data(), chunked);
    CHECK(via_model == together_b);
    CHECK(kv.serialize() == caches_together.second);
}

TEST_CASE("the seam's checks: one copy, and a failed check changes nothing") {
    const auto& bytes = demo_bytes();
    const auto model = smol::Model::load_from_memory(bytes.data(), bytes.size());
    const Backend& backend = model->backend();
    const size_t vocab = backend.vocab_size();
    auto x = backend.make_cache(16), y = backend.make_cache(16);
    std::vector<float> lx(vocab), ly(vocab);
    const auto ids = tokens(5, vocab, 4);
    backend.forward(segment(ids, 0, *x, lx));
    REQUIRE(x->size() == 5);

    std::string message;
    {  // the same cache twice
        const Segment twice[2] = {segment(ids, 5, *x, lx), segment(ids, 0, *x, ly)};
        CHECK(error_kind_of([&] { backend.forward(twice, 2); }, &message) == ErrorKind::invalid_argument);
        CHECK(message.find("same KV cache") != std::string::npos);
    }
    {  // a bad token in the second segment: the first is not run either
        std::vector<int32_t> bad = ids;
        bad[3] = int32_t(vocab);
        const Segment pair[2] = {segment(ids, 5, *x, lx), segment(bad, 0, *y, ly)};
        CHECK(error_kind_of([&] { backend.forward(pair, 2); }, &message) == ErrorKind::invalid_argument);
        CHECK(message.find("segment 1") != std::string::npos);
        CHECK(message.find("outside the vocabulary") != std::string::npos);
    }
    {  // positions past the context, a start past the cache, no tokens, no logits, no cache
        const auto many = tokens(12, vocab, 5);
        CHECK(error_kind_of([&] { backend.forward(segment(many, 5, *x, lx)); }) == ErrorKind::out_of_range);
        CHECK(error_kind_of([&] { backend.forward(segment(ids, 6, *x, lx)); }) == ErrorKind::out_of_range);
        Segment empty = segment(ids, 5, *x, lx);
        empty.n_tokens = 0;
        CHECK(error_kind_of([&] { backend.forward(empty); }) == ErrorKind::invalid_argument);
        Segment no_logits = segment(ids, 5, *x, lx);
        no_logits.logits = nullptr;
        CHECK(error_kind_of([&] { backend.forward(no_logits); }) == ErrorKind::invalid_argument);
        Segment no_cache = segment(ids, 5, *x, lx);
        no_cache.cache = nullptr;
        CHECK(error_kind_of([&] { backend.forward(no_cache); }) == ErrorKind::invalid_argument);
        CHECK(error_kind_of([&] { backend.forward(nullptr, 0); }) == ErrorKind::invalid_argument);
    }
    {  // a cache of another geometry
        smol::Config other = model->config();
        other.n_layers += 1;
        smol::KVCache foreign(other, 16);
        CHECK(error_kind_of([&] { backend.forward(segment(ids, 0, foreign, lx)); }) == ErrorKind::invalid_argument);
    }
    CHECK(x->size() == 5);
    CHECK(y->size() == 0);

    // Cancellation: seen before the first step; every cache is at its start.
    std::atomic<bool> cancel{true};
    smol::ForwardOptions options;
    options.cancel = &cancel;
    options.chunk_size = 2;
    const Segment pair[2] = {segment(ids, 2, *x, lx), segment(ids, 0, *y, ly)};
    CHECK(error_kind_of([&] { backend.forward(pair, 2, options); }) == ErrorKind::cancelled);
    CHECK(x->size() == 2);
    CHECK(y->size() == 0);
    cancel = false;
    backend.forward(pair, 2, options);
    CHECK(x->size() == 7);
    CHECK(y->size() == 5);
}

TEST_CASE("caches through the interface: clone, serialize and restore into another instance") {
    const auto& bytes = demo_bytes();
    const auto model = smol::Model::load_from_memory(bytes.data(), bytes.size());
    const Backend& backend = model->backend();
    const size_t vocab = backend.vocab_size();
    const auto prompt = tokens(9, vocab, 6), next = tokens(1, vocab, 7);

    auto source = backend.make_cache(64);
    std::vector<float> logits(vocab);
    backend.forward(segment(prompt, 0, *source, logits));
    const std::vector<uint8_t> saved = source->serialize();
    // The portable format is the CPU KVCache's, byte for byte.
    CHECK(saved == static_cast<const smol::KVCache&>(*source).serialize());

    // Another instance (another n_ctx) restores the bytes and continues identically.
    auto restored = backend.make_cache(16);
    restored->restore(saved.data(), saved.size());
    CHECK(restored->size() == prompt.size());
    CHECK(restored->n_ctx() == 16);
    CHECK(restored->serialize() == saved);
    auto forked = source->clone();
    CHECK(forked->n_ctx() == 64);
    std::vector<float> from_source(vocab), from_restored(vocab), from_fork(vocab);
    backend.forward(segment(next, prompt.size(), *source, from_source));
    backend.forward(segment(next, prompt.size(), *restored, from_restored));
    backend.forward(segment(next, prompt.size(), *forked, from_fork));
    CHECK(from_source == from_restored);
    CHECK(from_source == from_fork);
    CHECK(forked->size() == prompt.size() + 1);

    // A restore that fails leaves the cache as it was.
    std::vector<uint8_t> damaged = saved;
    damaged.pop_back();
    CHECK(error_kind_of([&] { restored->restore(damaged.data(), damaged.size()); }) == ErrorKind::format);
    auto small = backend.make_cache(4);
    CHECK(error_kind_of([&] { small->restore(saved.data(), saved.size()); }) == ErrorKind::out_of_range);
    CHECK(restored->size() == prompt.size() + 1);

    // F32 bytes into an F16-made cache: the CPU cache adopts the saved type.
    auto f32 = backend.make_cache(32, smol::KVType::f32);
    backend.forward(segment(prompt, 0, *f32, logits));
    const auto f32_bytes = f32->serialize();
    auto target = backend.make_cache(32);
    target->restore(f32_bytes.data(), f32_bytes.size());
    CHECK(static_cast<const smol::KVCache&>(*target).type() == smol::KVType::f32);
    CHECK(target->serialize() == f32_bytes);

    // Moved-from caches are empty.
    smol::KVCache kv = model->new_cache(16);
    smol::KVCache moved = std::move(kv);
    CHECK(kv.size() == 0);
    kv.truncate(0);
    CHECK_THROWS_AS(kv.truncate(1), smol::Error);
}

TEST_CASE("Generator on the seam gives what the Model::forward loop gives") {
    const auto& bytes = demo_bytes();
    const auto model = smol::Model::load_from_memory(bytes.data(), bytes.size());
    const size_t vocab = model->config().vocab_size;
    const auto prompt = tokens(11, vocab, 8);
    constexpr int kSteps = 12;

    // The loop a caller wrote before the seam: Model::forward on a KVCache, argmax.
    smol::KVCache kv = model->new_cache(64);
    std::vector<float> logits(vocab);
    model->forward(prompt.data(), prompt.size(), 0, kv, logits.data());
    std::vector<int32_t> expected;
    for (int i = 0; i < kSteps; ++i) {
        const int32_t id = int32_t(argmax(logits));
        expected.push_back(id);
        if (i + 1 < kSteps) model->forward(&id, 1, kv.size(), kv, logits.data());
    }

    smol::GeneratorOptions options;
    options.n_ctx = 64;
    std::vector<std::string> lines;
    options.log = [&](int, const std::string& line) { lines.push_back(line); };
    smol::Generator gen(model, options);
    CHECK(std::any_of(lines.begin(), lines.end(),
                      [](const std::string& l) { return l.find("backend cpu (") != std::string::npos; }));
    const auto r = gen.generate_tokens(prompt, smol_test::greedy(kSteps));
    CHECK(r.tokens == expected);
    CHECK(gen.n_cached() == kv.size());

    // A session saved by this generator restores into one with another n_ctx and
    // continues exactly as the original does.
    const auto session = gen.save_session();
    smol::GeneratorOptions wide;
    wide.n_ctx = 128;
    smol::Generator other(model, wide);
    other.restore_session(session);
    CHECK(other.history() == gen.history());
    std::vector<int32_t> longer = gen.history();
    const auto more = tokens(3, vocab, 9);
    longer.insert(longer.end(), more.begin(), more.end());
    const auto a = gen.generate_tokens(longer, smol_test::greedy(5));
    const auto b = other.generate_tokens(longer, smol_test::greedy(5));
    CHECK(a.tokens == b.tokens);
    CHECK(a.n_reused_tokens == b.n_reused_tokens);
    CHECK(a.n_reused_tokens == prompt.size() + kSteps - 1);
}
