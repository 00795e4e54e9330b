// Hostile files and careless callers: each failure class that an audit of the
// loaders against hostile input found, rebuilt here at test time from the fixtures. A
// hostile input must end in a typed smol::Error with memory bounded by the
// file, never in a crash, a hang, a raw std::bad_alloc or an allocation out of
// proportion to the bytes it came from. Memory is measured in a forked child
// (its peak resident set, reset at the start), never by wall-clock time.
// Tokenizer flooding and session checksums have their own tests in
// test_tokenizer.cpp and test_session.cpp.
#include <doctest/doctest.h>
#include <smol/smol.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/expect_error.hpp"
#include "support/fixtures.hpp"
#include "support/hostile_files.hpp"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SMOL_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SMOL_TEST_SANITIZED 1
#endif
#endif

// In a namespace of its own: tests/CMakeLists.txt compiles it in one unit with
// the other files of its group.
namespace test_hostile {

namespace {

using smol::ErrorKind;
using smol::GGMLType;
using smol::gguf::File;
using smol::gguf::Value;
using smol::gguf::ValueType;
using smol_test::append_le;
using smol_test::Bytes;
using smol_test::RawGguf;

// The bad-input check with one needle.
void expect_error(const std::function<void()>& action, ErrorKind kind, const std::string& needle) {
    smol_test::expect_error(action, kind, {needle});
}

long status_kb(const char* field) {
    std::ifstream in("/proc/self/status");
    std::string line;
    const size_t n = std::strlen(field);
    while (std::getline(in, line))
        if (line.compare(0, n, field) == 0) return std::atol(line.c_str() + n + 1);
    return -1;
}

// What a child process reported: its exit code and how far its resident set
// grew above what it started with (KiB).
constexpr long kUnmeasured = -1;  // the peak could not be reset (no /proc/self/clear_refs)
struct ChildResult {
    int code = -1;  // -1: killed by a signal
    long growth_kb = 0;
    // The growth bound holds, or could not be measured here (then it says so).
    bool grew_less_than(long bound_kb) const {
        if (growth_kb == kUnmeasured) {
            MESSAGE(
                "peak memory not measured: /proc/self/clear_refs cannot reset it on this system");
            return true;
        }
        return growth_kb < bound_kb;
    }
};

// Runs fn() in a forked child and returns its exit code (fn's return value) and
// its peak memory growth. `address_space_headroom`, when non-zero, limits the
// child's address space (RLIMIT_AS) to what it uses now plus that many bytes.
[[maybe_unused]] ChildResult run_in_child(const std::function<int()>& fn,
                                          uint64_t address_space_headroom = 0) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(fds[0]);
        // Peak RSS from here on: "5" resets VmHWM to the current RSS (Linux >= 4.0).
        bool reset = false;
        if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
            reset = std::fputs("5", f) >= 0;
            reset = std::fclose(f) == 0 && reset;
        }
        const long start = status_kb("VmRSS:");
        if (address_space_headroom) {
            const long vm_kb = status_kb("VmSize:");
            rlimit limit{};
            limit.rlim_cur = limit.rlim_max = rlim_t(vm_kb) * 1024 + address_space_headroom;
            ::setrlimit(RLIMIT_AS, &limit);
        }
        const int code = fn();
        const long growth = reset ? status_kb("VmHWM:") - start : kUnmeasured;
        if (::write(fds[1], &growth, sizeof growth) != sizeof growth) ::_exit(120);
        ::_exit(code);
    }
    ::close(fds[1]);
    ChildResult result;
    long growth = 0;
    if (::read(fds[0], &growth, sizeof growth) == sizeof growth) result.growth_kb = growth;
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFEXITED(status)) result.code = WEXITSTATUS(status);
    return result;
}

// Exit codes of a child that runs an action expected to fail.
constexpr int kGotKind = 0, kOtherError = 1, kBadAlloc = 2, kNoError = 3, kOtherException = 4;
[[maybe_unused]] int classify(const std::function<void()>& action, ErrorKind expected) {
    try {
        action();
    } catch (const smol::Error& e) {
        return e.kind() == expected ? kGotKind : kOtherError;
    } catch (const std::bad_alloc&) {
        return kBadAlloc;
    } catch (...) {
        return kOtherException;
    }
    return kNoError;
}

smol::LoadOptions one_thread() {
    smol::LoadOptions o;
    o.n_threads = 1;
    return o;
}

}  // namespace

// Class 1: a legal model whose KV cache size wraps 64 bits. Every layer's nine
// tensors share one 8 MB range, so the file is small while its geometry
// (2048 layers x 2^20 head dims x 2^31 positions) is not.
TEST_CASE("hostile: a KV cache whose byte size wraps is refused, never allocated") {
    const auto vocab_path = smol_test::fixture("vocab-llama-bpe.gguf");
    if (!vocab_path) return;
    const Bytes file = smol_test::kv_wrap_model(*File::open(*vocab_path));
    const auto model = smol::Model::load_from_memory(file.data(), file.size(), one_thread());
    REQUIRE(model->config().n_layers == 2048);

    // 2^31 positions x 2^20 dims x 2 (K, V) x 2048 layers x 2 bytes = 2^64: wraps to 0.
    expect_error([&] { model->make_cache(size_t(1) << 31); }, ErrorKind::resource, "overflows");
    expect_error([&] { smol::KVCache(model->config(), size_t(1) << 31, smol::KVType::f32); },
                 ErrorKind::resource, "overflows");
    // The default 4096 positions: 32 TiB, past any machine's memory.
    expect_error([&] { model->make_cache(); }, ErrorKind::resource, "memory budget");
    expect_error([&] { smol::Generator gen(model); }, ErrorKind::resource, "memory budget");
}

TEST_CASE("hostile: LoadOptions::memory_budget bounds the KV cache") {
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return;
    const smol::Config config =
        smol::detail::value_or_fail(smol::Config::try_from_gguf(*File::open(*path)));
    const uint64_t per_position =
        uint64_t(config.head_dim) * 2 * config.n_layers * config.n_kv_heads * 2;
    smol::LoadOptions options = one_thread();
    options.memory_budget = 64 * per_position;
    const auto model = smol::Model::load(*path, options);
    CHECK(model->make_cache(64).n_ctx() == 64);
    // 65 positions reserve two whole blocks of 64.
    expect_error([&] { model->make_cache(65); }, ErrorKind::resource,
                 std::to_string(128 * per_position));
    smol::GeneratorOptions g;
    g.n_ctx = 4096;
    expect_error([&] { smol::Generator gen(model, g); }, ErrorKind::resource, "memory budget");
    g.n_ctx = 32;
    smol::Generator gen(model, g);
    CHECK(gen.n_ctx() == 32);
}

// Class 5: element counts that pass the dims check (< 2^62) but whose byte
// size passes 2^64. A wrapped size would pass the end-of-file check.
TEST_CASE("hostile: tensor byte sizes that wrap 64 bits are format errors") {
    auto parse = [](GGMLType type, std::vector<uint64_t> dims) {
        RawGguf raw;
        raw.str("general.architecture", "smollm3").tensor("t", type, std::move(dims));
        const Bytes bytes = raw.build(Bytes(64, 0));
        return [bytes] { File::from_bytes(bytes, "wrap.gguf"); };
    };
    // 2^62 F32 elements: 2^64 bytes, which wrapped to 0.
    expect_error(parse(GGMLType::F32, {uint64_t(1) << 31, uint64_t(1) << 31}), ErrorKind::format,
                 "byte size overflows");
    // 2^61 F64 elements of 8 bytes.
    expect_error(parse(GGMLType::F64, {uint64_t(1) << 31, uint64_t(1) << 30}), ErrorKind::format,
                 "byte size overflows");
    // 2^63 bytes fit in 64 bits: refused as past the end of the file.
    expect_error(parse(GGMLType::F16, {uint64_t(1) << 31, uint64_t(1) << 31}), ErrorKind::format,
                 "past the end");
}

// Class 4: counts from the file are checked against what the file holds
// before anything proportional to them is allocated.
TEST_CASE("hostile: a block count the tensor table cannot hold fails before allocating per layer") {
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return;
    const auto real = File::open(*path);
    const size_t real_layers =
        smol::detail::value_or_fail(smol::Config::try_from_gguf(*real)).n_layers;
    for (const uint32_t layers : {uint32_t(1) << 22, uint32_t(1) << 31}) {
        CAPTURE(layers);
        const Bytes file = smol_test::with_u32(*real, "smollm3.block_count", layers);
        expect_error([&] { smol::Model::load_from_memory(file.data(), file.size(), one_thread()); },
                     ErrorKind::missing,
                     "'blk." + std::to_string(real_layers) + ".attn_norm.weight'");
#if !defined(SMOL_TEST_SANITIZED)
        // 2^22 layer records were 1.5 GB before the check moved ahead of them.
        const ChildResult child = run_in_child([&] {
            return classify(
                [&] { smol::Model::load_from_memory(file.data(), file.size(), one_thread()); },
                ErrorKind::missing);
        });
        CHECK(child.code == kGotKind);
        CHECK_MESSAGE(child.grew_less_than(64 * 1024), "peak growth " << child.growth_kb << " KiB");
#endif
    }
}

TEST_CASE("hostile: metadata and tensor counts past smol's limits are refused before parsing") {
    // A header that claims one entry more than the limit, backed by enough
    // bytes that the claim is not refused as truncated.
    auto header = [](uint64_t tensors, uint64_t keys) {
        Bytes out;
        append_le<uint32_t>(out, smol::gguf::kMagic);
        append_le<uint32_t>(out, 3);
        append_le<uint64_t>(out, tensors);
        append_le<uint64_t>(out, keys);
        out.resize(out.size() + size_t(std::max(tensors * 32, keys * 13)), 0);
        return out;
    };
    const Bytes many_keys = header(0, smol::gguf::kMaxMetadataKeys + 1);
    expect_error([&] { File::from_bytes(many_keys, "keys.gguf"); }, ErrorKind::unsupported,
                 "metadata keys");
    const Bytes many_tensors = header(smol::gguf::kMaxTensors + 1, 0);
    expect_error([&] { File::from_bytes(many_tensors, "tensors.gguf"); }, ErrorKind::unsupported,
                 "tensors");

    // At the limit: every key is parsed, and the tables stay within a small
    // factor of the file (here ~5.5 MB of 21-byte entries).
    RawGguf raw;
    char key[16];
    for (uint64_t i = 0; i < smol::gguf::kMaxMetadataKeys; ++i) {
        std::snprintf(key, sizeof key, "k%07llu", static_cast<unsigned long long>(i));
        raw.u32(key, uint32_t(i));
    }
    const Bytes file = raw.build();
    const auto parsed = File::from_bytes(file, "limit.gguf");
    CHECK(parsed->metadata().size() == smol::gguf::kMaxMetadataKeys);
    CHECK(parsed->get<uint32_t>("k0012345") == 12345);
#if !defined(SMOL_TEST_SANITIZED)
    const ChildResult child = run_in_child([&] {
        return classify([&] { File::from_buffer(file.data(), file.size(), "limit.gguf"); },
                        ErrorKind::internal);
    });
    CHECK(child.code == kNoError);
    CHECK_MESSAGE(child.grew_less_than(16 * long(file.size()) / 1024),
                  "peak growth " << child.growth_kb << " KiB for " << file.size() << " bytes");
#endif
}

// Class 7: blocks at odd addresses (general.alignment = 1 is legal, and a
// caller's buffer may sit anywhere) run through the same kernels with the
// same results; under UBSan this is the misaligned-access check.
TEST_CASE("hostile: a model at an odd address computes the same logits as an aligned one") {
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return;
    const auto bytes = smol_test::read_file(*path);
    std::vector<uint8_t> shifted(bytes.size() + 1);
    std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
    // The weights as stored (interleaving would move them to an aligned buffer).
    smol::LoadOptions options = one_thread();
    options.interleave_weights = false;
    const auto aligned = smol::Model::load(*path, options);
    const auto odd = smol::Model::load_from_memory(shifted.data() + 1, bytes.size(), options);
    REQUIRE((reinterpret_cast<uintptr_t>(odd->weights().layers[0].attn_q.data) & 1) == 1);
    const std::vector<int32_t> tokens =
        aligned->tokenizer().encode("Hostile files, odd addresses.", true);
    const size_t vocab = aligned->config().vocab_size;
    std::vector<float> a(vocab), b(vocab);
    smol::KVCache kv_a = aligned->make_cache(64), kv_b = odd->make_cache(64);
    aligned->forward(tokens.data(), tokens.size(), 0, kv_a, a.data());
    odd->forward(tokens.data(), tokens.size(), 0, kv_b, b.data());
    CHECK(std::memcmp(a.data(), b.data(), vocab * sizeof(float)) == 0);
}

// Class 6: an allocation that passes the budget but still fails (here an
// address-space limit) is Error(resource), not a raw std::bad_alloc. The
// limit is set in a child; sanitizers reserve terabytes of address space
// for their shadow memory, so this runs only in the plain build.
TEST_CASE("hostile: a failed allocation is Error(resource)") {
#if defined(SMOL_TEST_SANITIZED)
    MESSAGE("skipping: RLIMIT_AS cannot be used under a sanitizer");
#else
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return;
    const auto real = File::open(*path);
    // The fixture with a 2^24-position context: a full cache needs gigabytes.
    const Bytes file = smol_test::with_u32(*real, "smollm3.context_length", 1u << 24);
    smol::LoadOptions options = one_thread();
    options.memory_budget = uint64_t(1)
                            << 50;  // the budget allows it: only the allocation can fail
    const auto model = smol::Model::load_from_memory(file.data(), file.size(), options);
    const size_t n_ctx = size_t(1) << 24;
    REQUIRE(smol::KVCache::kDefaultSize != n_ctx);
    const uint64_t headroom = 256ull << 20;
    const ChildResult cache = run_in_child(
        [&] { return classify([&] { model->make_cache(n_ctx); }, ErrorKind::resource); }, headroom);
    CHECK(cache.code == kGotKind);
    smol::GeneratorOptions g;
    g.n_ctx = n_ctx;
    const ChildResult gen = run_in_child(
        [&] { return classify([&] { smol::Generator generator(model, g); }, ErrorKind::resource); },
        headroom);
    CHECK(gen.code == kGotKind);
#endif
}

}  // namespace test_hostile
