// A warm decode step or prompt chunk allocates nothing. This program replaces the global
// operator new (every form), so it counts each allocation any thread of it
// makes while a window is open; the cases open one around decode steps that
// follow a few warm-up steps (which may size the work buffers) and check that
// the count stayed at zero, through both ways into the forward pass:
// Model::forward and the backend the Generator steps (Backend::forward).
#include <doctest/doctest.h>

#include <smol/smol.hpp>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "../tools/model_maker.hpp"

namespace {

std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
std::atomic<long long> live_bytes{0};  // allocated and not yet freed, by anyone, at any time

// Each block starts `alignment` (at least 16) bytes before the pointer handed
// out; the two words just below that pointer hold the block's start and size.
void* counted_allocate(std::size_t size, std::size_t alignment) noexcept {
    if (counting.load(std::memory_order_relaxed))
        allocations.fetch_add(1, std::memory_order_relaxed);
    if (alignment < 2 * sizeof(std::size_t)) alignment = 2 * sizeof(std::size_t);
    if (alignment < alignof(std::max_align_t)) alignment = alignof(std::max_align_t);
    void* block = nullptr;
    if (posix_memalign(&block, alignment, size + alignment) != 0) return nullptr;
    std::size_t* words = reinterpret_cast<std::size_t*>(static_cast<char*>(block) + alignment);
    words[-2] = std::size_t(reinterpret_cast<std::uintptr_t>(block));
    words[-1] = size;
    live_bytes.fetch_add((long long)size, std::memory_order_relaxed);
    return words;
}

void counted_free(void* p) noexcept {
    if (p == nullptr) return;
    std::size_t* words = static_cast<std::size_t*>(p);
    live_bytes.fetch_sub((long long)words[-1], std::memory_order_relaxed);
    std::free(reinterpret_cast<void*>(std::uintptr_t(words[-2])));
}

void* allocate_or_throw(std::size_t size, std::size_t alignment) {
    void* p = counted_allocate(size, alignment);
    if (p == nullptr) throw std::bad_alloc();
    return p;
}

// Counts the allocations made between its construction and count().
class AllocationWindow {
public:
    AllocationWindow() {
        allocations.store(0);
        counting.store(true);
    }
    ~AllocationWindow() { counting.store(false); }
    long count() {
        counting.store(false);
        return allocations.load();
    }
};

}  // namespace

void* operator new(std::size_t size) {
    return allocate_or_throw(size, 0);
}
void* operator new[](std::size_t size) {
    return allocate_or_throw(size, 0);
}
void* operator new(std::size_t size, std::align_val_t al) {
    return allocate_or_throw(size, std::size_t(al));
}
void* operator new[](std::size_t size, std::align_val_t al) {
    return allocate_or_throw(size, std::size_t(al));
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
    return counted_allocate(size, 0);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
    return counted_allocate(size, 0);
}
void* operator new(std::size_t size, std::align_val_t al, const std::nothrow_t&) noexcept {
    return counted_allocate(size, std::size_t(al));
}
void* operator new[](std::size_t size, std::align_val_t al, const std::nothrow_t&) noexcept {
    return counted_allocate(size, std::size_t(al));
}
void operator delete(void* p) noexcept {
    counted_free(p);
}
void operator delete[](void* p) noexcept {
    counted_free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    counted_free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
    counted_free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
    counted_free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
    counted_free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
    counted_free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
    counted_free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
    counted_free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
    counted_free(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    counted_free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    counted_free(p);
}

namespace {

// The tiny shape (every row a multiple of 256) with the Q4_K_M recipe and a
// byte vocabulary, made in memory: no fixture needed.
const std::vector<uint8_t>& model_bytes() {
    static const std::vector<uint8_t> bytes = [] {
        smol_tools::MakeOptions options;
        options.shape = smol_tools::preset_shape("tiny");
        options.effort = smol_tools::MakeOptions::Effort::fast;
        return smol_tools::make_model_bytes(options);
    }();
    return bytes;
}

std::shared_ptr<const smol::Model> load(int threads) {
    smol::LoadOptions options;
    options.n_threads = threads;
    const std::vector<uint8_t>& bytes = model_bytes();
    return smol::Model::load_from_memory(bytes.data(), bytes.size(), options);
}

constexpr int kWarmSteps = 3, kCountedSteps = 8;
const std::vector<int32_t> kPrompt = {1, 17, 42, 99, 7, 250, 3, 64};

}  // namespace

TEST_CASE("a warm decode step through Model::forward allocates nothing") {
    for (const int threads : {1, 2}) {
        CAPTURE(threads);
        const auto model = load(threads);
        smol::KVCache kv = model->make_cache(64);
        std::vector<float> logits(model->config().vocab_size);
        model->forward(kPrompt.data(), kPrompt.size(), 0, kv, logits.data());
        int32_t token = 5;
        for (int i = 0; i < kWarmSteps; ++i) {
            model->forward(&token, 1, kv.size(), kv, logits.data());
            token = smol::greedy_token(logits.data(), logits.size());
        }
        AllocationWindow window;
        for (int i = 0; i < kCountedSteps; ++i) {
            model->forward(&token, 1, kv.size(), kv, logits.data());
            token = smol::greedy_token(logits.data(), logits.size());
        }
        CHECK(window.count() == 0);
        CHECK(kv.size() == kPrompt.size() + kWarmSteps + kCountedSteps);
    }
}

TEST_CASE("a warm decode step through the backend allocates nothing, also after a long prefill") {
    for (const int threads : {1, 2}) {
        CAPTURE(threads);
        const auto model = load(threads);
        const smol::Backend& backend = model->backend();
        const auto cache = backend.make_cache(512);
        std::vector<float> logits(model->config().vocab_size);
        auto step = [&](const int32_t* tokens, size_t n) {
            smol::Segment segment;
            segment.tokens = tokens;
            segment.n_tokens = n;
            segment.start = cache->size();
            segment.cache = cache.get();
            segment.logits = logits.data();
            backend.forward(segment);
        };
        // A prefill whose work buffers the pool does not keep, then warm
        // decode steps that must not pay for it.
        std::vector<int32_t> prompt(300);
        for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t(i * 7 % 256);
        step(prompt.data(), prompt.size());
        int32_t token = smol::greedy_token(logits.data(), logits.size());
        for (int i = 0; i < kWarmSteps; ++i) {
            step(&token, 1);
            token = smol::greedy_token(logits.data(), logits.size());
        }
        {
            AllocationWindow window;
            for (int i = 0; i < kCountedSteps; ++i) {
                step(&token, 1);
                token = smol::greedy_token(logits.data(), logits.size());
            }
            CHECK(window.count() == 0);
        }
        // Another long prefill, then straight to decoding: the decode step
        // finds the workspace it used before.
        cache->truncate(0);
        step(prompt.data(), prompt.size());
        AllocationWindow window;
        step(&token, 1);
        CHECK(window.count() == 0);
    }
}

// A prompt chunk runs the mat-mat path: token tiles over stored rows below the
// conversion threshold, converted rows (and their per-thread buffers) at and
// above it. Once its buffers are sized, the same chunk again allocates nothing.
TEST_CASE("a warm prompt chunk allocates nothing, on stored and converted rows") {
    for (const int threads : {1, 2}) {
        for (const size_t n : {size_t(12), size_t(48)}) {
            CAPTURE(threads);
            CAPTURE(n);
            const auto model = load(threads);
            smol::KVCache kv = model->make_cache(128);
            std::vector<float> logits(model->config().vocab_size);
            std::vector<int32_t> prompt(n);
            for (size_t i = 0; i < n; ++i) prompt[i] = int32_t(i * 13 % 256);
            for (int i = 0; i < kWarmSteps; ++i) {
                kv.truncate(0);
                model->forward(prompt.data(), n, 0, kv, logits.data());
            }
            kv.truncate(0);
            AllocationWindow window;
            model->forward(prompt.data(), n, 0, kv, logits.data());
            CHECK(window.count() == 0);
        }
    }
}

// A shape whose passes need big work buffers (ffn 20480: ~170 KB per row, so
// a prefill chunk of 256 rows needs ~43 MB): more than the pool keeps.
TEST_CASE("the work buffers of a long prefill are not kept after it") {
    smol_tools::MakeOptions options;
    options.shape = {256, 1, 4, 1, 64, 20480, 0, 512};
    options.recipe = smol_tools::Recipe::q8_0;
    options.effort = smol_tools::MakeOptions::Effort::fast;
    const std::vector<uint8_t> bytes = smol_tools::make_model_bytes(options);
    smol::LoadOptions load_options;
    load_options.n_threads = 2;
    const auto model = smol::Model::load_from_memory(bytes.data(), bytes.size(), load_options);
    smol::KVCache kv = model->make_cache(512);
    std::vector<float> logits(model->config().vocab_size);
    int32_t token = 9;
    for (int i = 0; i < kWarmSteps; ++i) model->forward(&token, 1, kv.size(), kv, logits.data());
    const long long before = live_bytes.load();
    std::vector<int32_t> prompt(smol::ForwardOptions::kDefaultChunk, 11);  // one pass
    model->forward(prompt.data(), prompt.size(), 0, kv, logits.data());
    const long long after = live_bytes.load();
    CHECK(after - before < (1 << 20));
    AllocationWindow window;
    model->forward(&token, 1, kv.size(), kv, logits.data());
    CHECK(window.count() == 0);
}

TEST_CASE("the counting allocator sees allocations (the checks above can fail)") {
    AllocationWindow window;
    const long long before = live_bytes.load();
    auto p = std::make_unique<std::vector<int>>(100);
    CHECK(live_bytes.load() - before >= (long long)(100 * sizeof(int)));
    CHECK(window.count() >= 2);
}
