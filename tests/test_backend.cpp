// The backend seam (model/backend.hpp) on the CPU backend: forward over several
// segments, which the CPU runs as one pass per step, equals separate forwards
// (mixed prompts, cached prefixes, decode steps, all_logits rows, every kernel
// level); the seam's one copy of the argument checks (a failed check changes
// nothing) and of cancellation; caches through the interface (clone,
// serialize/restore across cache instances and element types); the device
// choice (LoadOptions::device) in a build without CUDA; and Generator on the
// seam giving what the plain Model::forward loop gives.
#include <doctest/doctest.h>

#include <smol/smol.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/expect_error.hpp"
#include "support/fixtures.hpp"
#include "support/generator_testutil.hpp"

// In a namespace of its own: tests/CMakeLists.txt compiles it in one unit with
// the other files of its group.
namespace test_backend {

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

using smol_test::error_kind_of;

std::vector<int32_t> tokens(size_t n, size_t vocab, uint32_t seed) {
    std::vector<int32_t> ids(n);
    uint32_t state = seed * 2654435761u + 1;
    for (auto& id : ids) {
        state = state * 1664525u + 1013904223u;
        id = int32_t((state >> 8) % vocab);
    }
    return ids;
}

Segment segment(const std::vector<int32_t>& ids, size_t start, BackendCache& cache,
                std::vector<float>& logits, bool all_logits = false) {
    Segment s;
    s.tokens = ids.data();
    s.n_tokens = ids.size();
    s.start = start;
    s.cache = &cache;
    s.logits = logits.data();
    s.all_logits = all_logits;
    return s;
}

size_t argmax(const std::vector<float>& v) {
    return size_t(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace

// ---------------------------------------------------------------------------
// The CPU step as one pass: every chunk of a step goes through each matrix
// together (the multi-row tiles), each row with its own position and cache.
//
// Tolerance: a pass over several sequences multiplies with the multi-row tiles
// where one sequence alone may use the one-row mat-vec. The activations are
// quantized per row either way and the integer block products are exact, so
// only the float sums of the block results may be ordered differently: float
// rounding (~1e-7 relative), which a later 8-bit rounding of an activation can
// at worst grow into one quantization step (1/127 of its block's largest value)
// in a few values. Logits: max |batched - alone| <= 1e-3 of that row's logit
// range (max - min), 20x tighter than the fixtures' 2% for ours against the
// reference, and far below what a row at a wrong position or cache gives
// (several % of the range). K/V rows: <= 1e-3 of the row's largest |value|, plus
// 1e-3 absolute for rows near zero (a relative 1e-3 also covers one F16 step,
// 2^-11). Measured where this was written: exactly 0 at scalar, avx2 and avx512
// (the tiles' columns come out bit-equal to the mat-vec), so the bound only
// leaves room for kernels that order their sums differently.
namespace {

constexpr double kBatchTolerance = 1e-3;

std::vector<smol::CpuLevel> runnable_levels() {
    std::vector<smol::CpuLevel> out;
    size_t count = 0;
    const smol::CpuLevel* levels = smol::compiled_cpu_levels(count);
    for (size_t i = 0; i < count; ++i)
        if (smol::cpu_supports(levels[i])) out.push_back(levels[i]);
    return out;
}

// The models the batched step is checked on: the demo (Q4_K_M mix, one KV
// head), a Q8_0 file with two KV heads (GQA over several heads, another tile
// family), and the tiny-q4km fixture (the real 128,256 vocabulary: a large LM
// head gathered over several sequences) when the fixtures are present.
struct BatchModel {
    std::string name;
    std::vector<uint8_t> bytes;  // empty: load `path`
    std::string path;
};

const std::vector<BatchModel>& batch_models() {
    static const std::vector<BatchModel> models = [] {
        std::vector<BatchModel> out;
        out.push_back({"demo", demo_bytes(), {}});
        smol_tools::MakeOptions gqa;
        gqa.shape = smol_tools::preset_shape("tiny");
        gqa.shape.layers = 4;  // layer 3 is NoPE
        gqa.shape.kv_heads = 2;
        gqa.recipe = smol_tools::Recipe::q8_0;
        gqa.seed = 11;
        gqa.effort = smol_tools::MakeOptions::Effort::fast;
        out.push_back({"gqa-q8_0", smol_tools::make_model_bytes(gqa), {}});
        if (const auto path = smol_test::fixture("tiny-q4km.gguf"))
            out.push_back({"tiny-q4km", {}, *path});
        return out;
    }();
    return models;
}

// Loaded once per (model, level) for all the cases below (the fixture's
// tokenizer alone takes a while to load).
std::shared_ptr<const smol::Model> load_at(const BatchModel& m, smol::CpuLevel level) {
    static std::map<std::pair<std::string, int>, std::shared_ptr<const smol::Model>> loaded;
    auto& model = loaded[{m.name, int(level)}];
    if (model) return model;
    smol::LoadOptions options;
    options.cpu = level;
    options.n_threads = 2;
    model = m.bytes.empty()
                ? smol::Model::load(m.path, options)
                : smol::Model::load_from_memory(m.bytes.data(), m.bytes.size(), options);
    return model;
}

// max over rows of max_i |got - want| / (max - min of want's row): the
// tolerance's measure (above). `rows` rows of `vocab` logits.
double logits_error(const std::vector<float>& got, const std::vector<float>& want, size_t vocab) {
    REQUIRE(got.size() == want.size());
    double worst = 0;
    for (size_t row = 0; row * vocab < want.size(); ++row) {
        const float* w = &want[row * vocab];
        const float* g = &got[row * vocab];
        const auto mm = std::minmax_element(w, w + vocab);
        const double range = double(*mm.second) - double(*mm.first);
        REQUIRE(range > 0);
        for (size_t i = 0; i < vocab; ++i)
            worst = std::max(worst, std::fabs(double(g[i]) - double(w[i])) / range);
    }
    return worst;
}

// Equal sizes, and every valid K/V row within the tolerance (as float).
void check_same_cache(const BackendCache& got_base, const BackendCache& want_base,
                      const std::string& where) {
    const auto& got = static_cast<const smol::KVCache&>(got_base);
    const auto& want = static_cast<const smol::KVCache&>(want_base);
    REQUIRE_MESSAGE(got.size() == want.size(), where);
    const size_t hd = want.head_dim();
    std::vector<float> g(hd), w(hd);
    double worst = 0;
    for (size_t layer = 0; layer < want.n_layers(); ++layer)
        for (const smol::KVPart kind : {smol::KVPart::keys, smol::KVPart::values})
            for (size_t head = 0; head < want.n_kv_heads(); ++head)
                for (size_t pos = 0; pos < want.size(); ++pos) {
                    got.load_row(layer, kind, head, pos, g.data());
                    want.load_row(layer, kind, head, pos, w.data());
                    float largest = 0;
                    for (const float v : w) largest = std::max(largest, std::fabs(v));
                    for (size_t i = 0; i < hd; ++i)
                        worst = std::max(worst, std::fabs(double(g[i]) - double(w[i])) /
                                                    (kBatchTolerance * largest + kBatchTolerance));
                }
    CHECK_MESSAGE(worst <= 1.0, where << ": K/V differ by " << worst << " x the tolerance");
}

// One sequence of a batch check: its prompt already cached (`cached` tokens of
// `history`, of which positions from `start` on are rerun), then `fresh` new tokens.
struct Sequence {
    std::vector<int32_t> history;  // run alone first, to fill the cache
    size_t start = 0;              // <= history.size(): where this forward begins
    std::vector<int32_t> fresh;
    bool all_logits = false;
    smol::KVType type = smol::KVType::f16;
    size_t n_ctx = 64;
};

// Runs `seqs` once as one multi-segment forward and once each alone (on copies
// of the same prepared caches) and compares logits and caches.
void check_batch_equals_alone(const Backend& backend, const std::vector<Sequence>& seqs,
                              const smol::ForwardOptions& options, const std::string& where) {
    const size_t vocab = backend.vocab_size();
    std::vector<std::unique_ptr<BackendCache>> together, alone;
    std::vector<std::vector<float>> logits_together(seqs.size()), logits_alone(seqs.size());
    std::vector<Segment> segments;
    for (size_t i = 0; i < seqs.size(); ++i) {
        const Sequence& q = seqs[i];
        auto cache = backend.make_cache(q.n_ctx, q.type);
        if (!q.history.empty()) {
            std::vector<float> ignored(vocab);
            backend.forward(segment(q.history, 0, *cache, ignored));
        }
        alone.push_back(cache->clone());
        together.push_back(std::move(cache));
        const size_t rows = q.all_logits ? q.fresh.size() : 1;
        logits_together[i].assign(rows * vocab, 0.0f);
        logits_alone[i].assign(rows * vocab, 0.0f);
        segments.push_back(
            segment(q.fresh, q.start, *together[i], logits_together[i], q.all_logits));
    }
    backend.forward(segments.data(), segments.size(), options);
    for (size_t i = 0; i < seqs.size(); ++i)
        backend.forward(
            segment(seqs[i].fresh, seqs[i].start, *alone[i], logits_alone[i], seqs[i].all_logits),
            options);
    for (size_t i = 0; i < seqs.size(); ++i) {
        const std::string at = where + ", sequence " + std::to_string(i);
        const double error = logits_error(logits_together[i], logits_alone[i], vocab);
        CHECK_MESSAGE(error <= kBatchTolerance,
                      at << ": logits differ by " << error << " of their range");
        CHECK(together[i]->size() == seqs[i].start + seqs[i].fresh.size());
        check_same_cache(*together[i], *alone[i], at);
    }
}

}  // namespace

TEST_CASE(
    "device: cpu by default; auto picks the cpu without CUDA and logs it; cuda is "
    "Error(unsupported)") {
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
        const auto said = std::find_if(lines.begin(), lines.end(), [](const std::string& l) {
            return l.rfind("smol: device cpu", 0) == 0;
        });
        REQUIRE(said != lines.end());
        CHECK(said->find("auto") != std::string::npos);
        CHECK(said->find("no device backend was given") != std::string::npos);
    }
    smol::LoadOptions cuda;
    cuda.device = smol::Device::cuda;
    std::string message;
    CHECK(error_kind_of([&] { smol::Model::load_from_memory(bytes.data(), bytes.size(), cuda); },
                        &message) == ErrorKind::unsupported);
    CHECK(message.find("cuda") != std::string::npos);
    CHECK(message.find("device_backend") != std::string::npos);
}

// The model layer reaches a GPU backend only through LoadOptions::device_backend:
// these factories stand in for one whose device is missing and one that cannot
// run the file, and the choice follows the documented rule for each.
TEST_CASE("device backend factory: a missing device, a file the device cannot run") {
    const auto& bytes = demo_bytes();
    auto load = [&](smol::Device device, const smol::DeviceBackendFactory& factory,
                    std::vector<std::string>* lines) {
        smol::LoadOptions options;
        options.device = device;
        options.device_backend = factory;
        options.log = [lines](int, const std::string& line) {
            if (lines) lines->push_back(line);
        };
        return smol::Model::load_from_memory(bytes.data(), bytes.size(), options);
    };
    smol::DeviceBackendFactory absent;
    absent.device = smol::Device::cuda;
    absent.available = [](std::string* why) {
        if (why) *why = "the test's device is unplugged";
        return false;
    };
    absent.create = [](const smol::SmolLM3&, int) -> smol::Expected<std::unique_ptr<Backend>> {
        return smol::ErrorInfo{ErrorKind::internal, "create called without a device"};
    };
    smol::DeviceBackendFactory refusing = absent;
    refusing.available = [](std::string*) { return true; };
    refusing.create = [](const smol::SmolLM3&, int) -> smol::Expected<std::unique_ptr<Backend>> {
        return smol::ErrorInfo{ErrorKind::unsupported, "the test's device lacks IQ4_XS"};
    };
    smol::DeviceBackendFactory broken = refusing;
    broken.create = [](const smol::SmolLM3&, int) -> smol::Expected<std::unique_ptr<Backend>> {
        return smol::ErrorInfo{ErrorKind::internal, "the test's device failed"};
    };
    auto said = [](const std::vector<std::string>& lines, const std::string& text) {
        return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
            return l.rfind("smol: device cpu", 0) == 0 && l.find(text) != std::string::npos;
        });
    };
    for (const auto* factory : {&absent, &refusing}) {
        std::vector<std::string> lines;
        const auto model = load(smol::Device::automatic, *factory, &lines);
        CHECK(model->device() == smol::Device::cpu);
        CHECK(said(lines, factory == &absent ? "unplugged" : "lacks IQ4_XS"));
        std::string message;
        CHECK(error_kind_of([&] { load(smol::Device::cuda, *factory, nullptr); }, &message) ==
              ErrorKind::unsupported);
        CHECK(message.find(factory == &absent ? "unplugged" : "lacks IQ4_XS") != std::string::npos);
    }
    // Any other failure of the device is an error, even for automatic.
    CHECK(error_kind_of([&] { load(smol::Device::automatic, broken, nullptr); }) ==
          ErrorKind::internal);
    // Device cpu never asks the factory.
    CHECK(load(smol::Device::cpu, broken, nullptr)->device() == smol::Device::cpu);
}

TEST_CASE("forward over two segments equals two separate forwards") {
    const auto& bytes = demo_bytes();
    const auto model = smol::Model::load_from_memory(bytes.data(), bytes.size());
    const Backend& backend = model->backend();
    const size_t vocab = backend.vocab_size();
    const auto prefix = tokens(10, vocab, 1), a = tokens(7, vocab, 2), b = tokens(13, vocab, 3);
    smol::ForwardOptions options;
    options.chunk_size = 4;  // several steps, the segments running out at different ones

    using Caches = std::pair<std::unique_ptr<BackendCache>, std::unique_ptr<BackendCache>>;
    auto run = [&](bool together, std::vector<float>& logits_a, std::vector<float>& logits_b) {
        Caches caches{backend.make_cache(64), backend.make_cache(32)};
        BackendCache &cache_a = *caches.first, &cache_b = *caches.second;
        std::vector<float> scratch(vocab);
        backend.forward(segment(prefix, 0, cache_a, scratch), options);
        logits_a.assign(a.size() * vocab, 0.0f);
        logits_b.assign(vocab, 0.0f);
        const Segment seg_a = segment(a, prefix.size(), cache_a, logits_a, /*all_logits=*/true);
        const Segment seg_b = segment(b, 0, cache_b, logits_b);
        if (together) {
            const Segment both[2] = {seg_a, seg_b};
            backend.forward(both, 2, options);
        } else {
            backend.forward(seg_a, options);
            backend.forward(seg_b, options);
        }
        CHECK(cache_a.size() == prefix.size() + a.size());
        CHECK(cache_b.size() == b.size());
        return caches;
    };
    // Together the chunks share one pass (the multi-row tiles): equal within
    // the batch tolerance (above), not necessarily to the bit.
    std::vector<float> together_a, together_b, alone_a, alone_b;
    const Caches caches_together = run(true, together_a, together_b);
    const Caches caches_alone = run(false, alone_a, alone_b);
    CHECK(logits_error(together_a, alone_a, vocab) <= kBatchTolerance);
    CHECK(logits_error(together_b, alone_b, vocab) <= kBatchTolerance);
    check_same_cache(*caches_together.first, *caches_alone.first, "segment a");
    check_same_cache(*caches_together.second, *caches_alone.second, "segment b");

    // Model::forward (the CPU wrapper tests and tools use) is the same seam,
    // over one segment: the same path as alone, to the bit.
    smol::KVCache kv = model->make_cache(32);
    std::vector<float> via_model(vocab);
    smol::ForwardOptions chunked;
    chunked.chunk_size = 4;
    model->forward(b.data(), b.size(), 0, kv, via_model.data(), chunked);
    CHECK(via_model == alone_b);
    CHECK(kv.serialize() == caches_alone.second->serialize());
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
        CHECK(error_kind_of([&] { backend.forward(twice, 2); }, &message) ==
              ErrorKind::invalid_argument);
        CHECK(message.find("same KV cache") != std::string::npos);
    }
    {  // a bad token in the second segment: the first is not run either
        std::vector<int32_t> bad = ids;
        bad[3] = int32_t(vocab);
        const Segment pair[2] = {segment(ids, 5, *x, lx), segment(bad, 0, *y, ly)};
        CHECK(error_kind_of([&] { backend.forward(pair, 2); }, &message) ==
              ErrorKind::invalid_argument);
        CHECK(message.find("segment 1") != std::string::npos);
        CHECK(message.find("outside the vocabulary") != std::string::npos);
    }
    {  // positions past the context, a start past the cache, no tokens, no logits, no cache
        const auto many = tokens(12, vocab, 5);
        CHECK(error_kind_of([&] { backend.forward(segment(many, 5, *x, lx)); }) ==
              ErrorKind::out_of_range);
        CHECK(error_kind_of([&] { backend.forward(segment(ids, 6, *x, lx)); }) ==
              ErrorKind::out_of_range);
        Segment empty = segment(ids, 5, *x, lx);
        empty.n_tokens = 0;
        CHECK(error_kind_of([&] { backend.forward(empty); }) == ErrorKind::invalid_argument);
        Segment no_logits = segment(ids, 5, *x, lx);
        no_logits.logits = nullptr;
        no_logits.all_logits = true;
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
        CHECK(error_kind_of([&] { backend.forward(segment(ids, 0, foreign, lx)); }) ==
              ErrorKind::invalid_argument);
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
    CHECK(error_kind_of([&] { restored->restore(damaged.data(), damaged.size()); }) ==
          ErrorKind::format);
    auto small = backend.make_cache(4);
    CHECK(error_kind_of([&] { small->restore(saved.data(), saved.size()); }) ==
          ErrorKind::out_of_range);
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
    smol::KVCache kv = model->make_cache(16);
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
    smol::KVCache kv = model->make_cache(64);
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
    CHECK(std::any_of(lines.begin(), lines.end(), [](const std::string& l) {
        return l.find("backend cpu (") != std::string::npos;
    }));
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

TEST_CASE(
    "a step of several sequences (different prompts, lengths, starts) equals each alone, at every "
    "level") {
    for (const BatchModel& m : batch_models()) {
        for (const smol::CpuLevel level : runnable_levels()) {
            const auto model = load_at(m, level);
            const Backend& backend = model->backend();
            const size_t vocab = backend.vocab_size();
            const std::string where = m.name + " at " + smol::cpu_level_name(level);
            std::vector<Sequence> seqs(6);
            seqs[0].fresh = tokens(13, vocab, 21);    // a fresh prompt
            seqs[1].history = tokens(10, vocab, 22);  // a prefix cached, 7 more
            seqs[1].start = 10;
            seqs[1].fresh = tokens(7, vocab, 23);
            seqs[2].history = tokens(20, vocab, 24);  // a prefix cached, the tail rerun from 12
            seqs[2].start = 12;
            seqs[2].fresh = tokens(4, vocab, 25);
            seqs[2].all_logits = true;
            seqs[3].history = tokens(5, vocab, 26);  // one token after a short prefix
            seqs[3].start = 5;
            seqs[3].fresh = tokens(1, vocab, 27);
            seqs[4].fresh = tokens(3, vocab, 28);  // an F32 cache among F16 ones
            seqs[4].type = smol::KVType::f32;
            seqs[5].history = tokens(30, vocab, 29);  // the longest context of the step
            seqs[5].start = 30;
            seqs[5].fresh = tokens(2, vocab, 30);
            seqs[5].n_ctx = 40;
            // One step (every segment one chunk), then chunks of 4: several
            // steps, segments dropping out at different ones, chunks of 4 and
            // shorter tails in one pass.
            check_batch_equals_alone(backend, seqs, {}, where);
            smol::ForwardOptions chunked;
            chunked.chunk_size = 4;
            check_batch_equals_alone(backend, seqs, chunked, where + ", chunks of 4");
        }
    }
}

TEST_CASE("a decode step of 4 sequences at 4 positions equals 4 single steps, at every level") {
    for (const BatchModel& m : batch_models()) {
        for (const smol::CpuLevel level : runnable_levels()) {
            const auto model = load_at(m, level);
            const Backend& backend = model->backend();
            const size_t vocab = backend.vocab_size();
            std::vector<Sequence> seqs(4);
            const size_t lengths[4] = {3, 17, 40, 9};
            for (size_t i = 0; i < 4; ++i) {
                seqs[i].history = tokens(lengths[i], vocab, uint32_t(40 + i));
                seqs[i].start = lengths[i];
                seqs[i].fresh = tokens(1, vocab, uint32_t(50 + i));
            }
            check_batch_equals_alone(backend, seqs, {},
                                     m.name + " at " + smol::cpu_level_name(level));

            // Several decode steps in a row stay in step with the single ones
            // (each batched step starts from the caches the batched steps made).
            std::vector<std::unique_ptr<BackendCache>> batched, single;
            std::vector<std::vector<float>> lb(4, std::vector<float>(vocab)),
                ls(4, std::vector<float>(vocab));
            for (size_t i = 0; i < 4; ++i) {
                batched.push_back(backend.make_cache(64));
                backend.forward(segment(seqs[i].history, 0, *batched[i], lb[i]));
                single.push_back(batched[i]->clone());
                ls[i] = lb[i];
            }
            for (int step = 0; step < 3; ++step) {
                std::vector<std::vector<int32_t>> next(4);
                std::vector<Segment> segs;
                for (size_t i = 0; i < 4; ++i) {
                    next[i] = {int32_t(argmax(ls[i]))};  // the single run's choice drives both
                    segs.push_back(segment(next[i], batched[i]->size(), *batched[i], lb[i]));
                }
                backend.forward(segs.data(), segs.size());
                for (size_t i = 0; i < 4; ++i) {
                    backend.forward(segment(next[i], single[i]->size(), *single[i], ls[i]));
                    CHECK(logits_error(lb[i], ls[i], vocab) <= kBatchTolerance);
                    CHECK(batched[i]->size() == lengths[i] + size_t(step) + 1);
                }
            }
            for (size_t i = 0; i < 4; ++i)
                check_same_cache(*batched[i], *single[i], m.name + " decode");
        }
    }
}

TEST_CASE("all_logits rows of a batched step land in their own segment's rows, nothing outside") {
    for (const BatchModel& m : batch_models()) {
        const auto model = load_at(m, smol::CpuLevel::automatic);
        const Backend& backend = model->backend();
        const size_t vocab = backend.vocab_size();
        const auto x = tokens(5, vocab, 61), y = tokens(3, vocab, 62), z = tokens(2, vocab, 63);
        constexpr float kGuard = -12345.0f;
        // Each buffer with a guard row before and after: the step writes only its own rows.
        auto guarded = [&](size_t rows) { return std::vector<float>((rows + 2) * vocab, kGuard); };
        for (const size_t chunk : {size_t(0), size_t(2)}) {
            smol::ForwardOptions options;
            options.chunk_size = chunk;  // 2: x's rows arrive over three steps, with y's and z's
            auto cx = backend.make_cache(32), cy = backend.make_cache(32),
                 cz = backend.make_cache(32);
            std::vector<float> lx = guarded(5), ly = guarded(1), lz = guarded(2);
            Segment segs[3];
            segs[0] = segment(x, 0, *cx, lx, true);
            segs[1] = segment(y, 0, *cy, ly, false);
            segs[2] = segment(z, 0, *cz, lz, true);
            segs[0].logits += vocab;
            segs[1].logits += vocab;
            segs[2].logits += vocab;
            backend.forward(segs, 3, options);

            for (const auto* buffer : {&lx, &ly, &lz}) {
                const size_t rows = buffer->size() / vocab - 2;
                CHECK(std::all_of(buffer->begin(), buffer->begin() + vocab,
                                  [&](float v) { return v == kGuard; }));
                CHECK(std::all_of(buffer->end() - vocab, buffer->end(),
                                  [&](float v) { return v == kGuard; }));
                CHECK(std::none_of(buffer->begin() + vocab, buffer->begin() + (rows + 1) * vocab,
                                   [&](float v) { return v == kGuard; }));
            }
            // Row t of x's logits is position t's: the logits x's prefix of
            // length t + 1 gives alone.
            for (size_t t = 0; t < x.size(); ++t) {
                auto alone = backend.make_cache(32);
                const std::vector<int32_t> prefix(x.begin(), x.begin() + ptrdiff_t(t) + 1);
                std::vector<float> want(vocab);
                backend.forward(segment(prefix, 0, *alone, want));
                const std::vector<float> got(lx.begin() + ptrdiff_t((t + 1) * vocab),
                                             lx.begin() + ptrdiff_t((t + 2) * vocab));
                CHECK_MESSAGE(logits_error(got, want, vocab) <= kBatchTolerance,
                              m.name << " row " << t);
            }
            auto alone = backend.make_cache(32);
            std::vector<float> want_y(vocab), want_z(2 * vocab);
            backend.forward(segment(y, 0, *alone, want_y));
            CHECK(logits_error(std::vector<float>(ly.begin() + ptrdiff_t(vocab),
                                                  ly.end() - ptrdiff_t(vocab)),
                               want_y, vocab) <= kBatchTolerance);
            backend.forward(segment(z, 0, *alone, want_z, true));
            CHECK(logits_error(std::vector<float>(lz.begin() + ptrdiff_t(vocab),
                                                  lz.end() - ptrdiff_t(vocab)),
                               want_z, vocab) <= kBatchTolerance);
        }
    }
}

TEST_CASE(
    "a step longer than one pass (more rows than CpuBackend::kMaxPassRows) equals each alone") {
    const auto model = load_at(batch_models()[0], smol::CpuLevel::automatic);
    const Backend& backend = model->backend();
    const size_t vocab = backend.vocab_size();
    std::vector<Sequence> seqs(4);
    const size_t lengths[4] = {300, 1, 250, 2};  // passes {300, 1} and {250, 2}
    for (size_t i = 0; i < 4; ++i) {
        seqs[i].fresh = tokens(lengths[i], vocab, uint32_t(70 + i));
        seqs[i].n_ctx = 512;
    }
    smol::ForwardOptions one_chunk;
    one_chunk.chunk_size = 512;  // each segment one chunk: 553 rows in one step
    check_batch_equals_alone(backend, seqs, one_chunk, "over kMaxPassRows");
}

}  // namespace test_backend
