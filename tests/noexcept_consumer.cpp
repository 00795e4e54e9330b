// A consumer built with -fno-exceptions (tests/noexcept.cmake): the whole
// library must compile without exceptions, and its non-throwing entry points
// must report every bad input as a value, never end the process:
//   - the bad-input catalogue of test_reliability.cpp (files missing, empty,
//     not GGUF, truncated; bad tensor tables; metadata that describes no
//     SmolLM3 model; tensors missing, misshapen or of an unsupported type;
//     cancelled loads; impossible contexts) through gguf::File::try_open,
//     Config::try_from_gguf, Weights::try_bind, Model::try_load(_from_memory)
//     and Model::try_make_cache;
//   - the hostile-file classes of test_hostile.cpp reachable from a file or an
//     argument (KV caches whose size wraps, memory budgets, tensor sizes that
//     wrap, block counts the tensor table cannot hold, counts past smol's
//     limits); a failed allocation is the one thing that may end the process;
//   - bad options and arguments: LoadOptions (kernel level, SMOL_CPU, threads,
//     device), Tokenizer::try_from_gguf, Sampler::create / try_sample,
//     Backend::try_forward, BackendCache::try_restore;
//   - the generator: try_load_model, Generator::try_create, StopReason::error
//     from generate(), try_restore_session; and a real model must load and
//     generate.
// Each check compares ErrorInfo::kind (and a piece of the message).
//   test_noexcept_consumer MODEL.gguf
// The catalogue needs the fixtures (SMOL_FIXTURES, else the configured
// directory): tiny-q4km.gguf and vocab-llama-bpe.gguf.
#include <smol/smol.hpp>
#include <smol/gguf/writer.hpp>
#include <smol/generator.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "support/gguf_rebuild.hpp"
#include "support/hostile_files.hpp"

#if SMOL_HAS_EXCEPTIONS
#error "noexcept_consumer.cpp must be compiled with -fno-exceptions"
#endif

namespace {

using smol::ErrorKind;
using smol::GGMLType;
using smol::gguf::File;
using smol::gguf::KeyValue;
using smol::gguf::TensorInfo;
using smol::gguf::Writer;
using Bytes = std::vector<uint8_t>;

int failures = 0;
int checks = 0;

void check(bool ok, const std::string& what) {
    ++checks;
    if (!ok) {
        std::fprintf(stderr, "FAILED: %s\n", what.c_str());
        ++failures;
    }
}

// A failed Status or Expected of `kind` whose message contains `needle`.
template <class Result>
void expect_error(const Result& result, ErrorKind kind, const std::string& what,
                  const std::string& needle = "") {
    ++checks;
    if (result.ok()) {
        std::fprintf(stderr, "FAILED: %s: no error (expected %s)\n", what.c_str(),
                     smol::to_string(kind));
        ++failures;
        return;
    }
    const smol::ErrorInfo& e = result.error();
    if (e.kind != kind || e.message.find(needle) == std::string::npos) {
        std::fprintf(stderr, "FAILED: %s: got %s '%s', expected %s containing '%s'\n", what.c_str(),
                     smol::to_string(e.kind), e.message.c_str(), smol::to_string(kind),
                     needle.c_str());
        ++failures;
    }
}

std::string temp_path(const std::string& name) {
    return "/tmp/smol_noexcept_" + std::to_string(::getpid()) + "_" + name;
}

// A temporary file that removes itself.
struct TempFile {
    std::string path;
    TempFile(const std::string& name, const uint8_t* data, size_t size) : path(temp_path(name)) {
        if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
            if (size) std::fwrite(data, 1, size, f);
            std::fclose(f);
        }
    }
    TempFile(const std::string& name, const Bytes& bytes)
        : TempFile(name, bytes.data(), bytes.size()) {}
    ~TempFile() { std::remove(path.c_str()); }
};

std::string fixtures_dir() {
    if (const char* env = std::getenv("SMOL_FIXTURES")) return env;
#ifdef SMOL_NOEXCEPT_FIXTURES
    return SMOL_NOEXCEPT_FIXTURES;
#else
    return "../shared/fixtures";
#endif
}

bool exists(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f) std::fclose(f);
    return f != nullptr;
}

smol::LoadOptions one_thread() {
    smol::LoadOptions o;
    o.n_threads = 1;
    return o;
}

using smol_test::gguf_edit::add_zero_tensor;
using smol_test::gguf_edit::rebuild;

// ---- files ------------------------------------------------------------------

void files(const File* real) {
    expect_error(File::try_open("/nonexistent/smol/model.gguf"), ErrorKind::io, "missing file",
                 "cannot open");
    expect_error(File::try_open("/tmp"), ErrorKind::io, "a directory", "directory");
    expect_error(File::try_from_buffer(nullptr, 5), ErrorKind::invalid_argument, "a null buffer",
                 "null pointer");
    {
        TempFile empty("empty.gguf", Bytes{});
        expect_error(File::try_open(empty.path), ErrorKind::format, "empty file", "empty");
        expect_error(smol::Model::try_load(empty.path), ErrorKind::format, "empty file (model)",
                     "empty");
    }
    {
        const std::string hello = "hello, this is not a model\n";
        TempFile text("text.gguf", reinterpret_cast<const uint8_t*>(hello.data()), hello.size());
        expect_error(File::try_open(text.path), ErrorKind::format, "text file", "not a GGUF file");
    }
    Writer w;
    w.set_string("general.architecture", "smollm3");
    const Bytes good = w.to_bytes();
    Bytes bad_magic = good;
    bad_magic[0] = 'X';
    expect_error(File::try_from_bytes(bad_magic, "magic.gguf"), ErrorKind::format, "bad magic",
                 "bad magic");
    for (uint32_t version : {1u, 4u}) {
        Bytes v = good;
        std::memcpy(v.data() + 4, &version, 4);
        expect_error(File::try_from_bytes(v, "version.gguf"), ErrorKind::unsupported,
                     "unsupported version", "unsupported version " + std::to_string(version));
    }
    if (!real) return;
    const size_t header_end = real->data_offset();
    for (size_t cut : {size_t(20), size_t(100), size_t(4000), size_t(1) << 20, header_end - 100,
                       header_end + 1, real->size() / 2, real->size() - 1}) {
        TempFile file("cut.gguf", real->bytes(), cut);
        expect_error(File::try_open(file.path), ErrorKind::format, "cut at " + std::to_string(cut),
                     "trunc");
        expect_error(smol::Model::try_load(file.path, one_thread()), ErrorKind::format,
                     "model cut at " + std::to_string(cut), "trunc");
    }
}

// ---- the tensor table ---------------------------------------------------------

void tensor_table(const File& real) {
    Bytes bytes(real.bytes(), real.bytes() + real.size());
    const std::string name = "blk.0.attn_q.weight";
    const uint8_t* at =
        std::search(bytes.data(), bytes.data() + real.data_offset(), name.begin(), name.end());
    check(at != bytes.data() + real.data_offset(), "the fixture has blk.0.attn_q.weight");
    if (at == bytes.data() + real.data_offset()) return;
    const size_t type_pos = size_t(at - bytes.data()) + name.size() + 4 + 2 * 8;
    uint32_t type = 0;
    std::memcpy(&type, bytes.data() + type_pos, 4);
    const uint32_t unknown = 99;
    std::memcpy(bytes.data() + type_pos, &unknown, 4);
    expect_error(File::try_from_bytes(bytes, "patched.gguf"), ErrorKind::unsupported,
                 "unknown type id", "unknown type id 99");
    expect_error(smol::Model::try_load_from_memory(bytes.data(), bytes.size(), one_thread()),
                 ErrorKind::unsupported, "unknown type id (model)", "unknown type id 99");
    std::memcpy(bytes.data() + type_pos, &type, 4);
    uint64_t offset = 0;
    std::memcpy(&offset, bytes.data() + type_pos + 4, 8);
    const uint64_t misaligned = offset + 4;
    std::memcpy(bytes.data() + type_pos + 4, &misaligned, 8);
    expect_error(File::try_from_bytes(bytes, "patched.gguf"), ErrorKind::format,
                 "misaligned tensor", "not aligned");
    const uint64_t past = uint64_t(real.size()) / 32 * 32;
    std::memcpy(bytes.data() + type_pos + 4, &past, 8);
    expect_error(File::try_from_bytes(bytes, "patched.gguf"), ErrorKind::format,
                 "tensor past the end", "past the end");
}

// ---- metadata -------------------------------------------------------------------

void metadata(const File& real) {
    check(smol::Config::try_from_gguf(real).ok(), "the fixture's config reads");
    const auto no_tensors = [](Writer&, const TensorInfo&) { return true; };
    auto with_key = [&](const std::string& key, const std::function<void(Writer&)>& set) {
        return rebuild(
            real,
            [&](Writer& w, const KeyValue& kv) {
                if (kv.key != key) return false;
                if (set) set(w);
                return true;
            },
            no_tensors);
    };
    auto config_of = [](const Bytes& bytes) {
        auto file = File::try_from_buffer(bytes.data(), bytes.size(), "edited.gguf");
        if (!file.ok()) return smol::Expected<smol::Config>(file.take_error());
        return smol::Config::try_from_gguf(*file.value());
    };
    check(config_of(rebuild(real, nullptr, no_tensors)).ok(), "the rebuilt config reads");
    expect_error(
        config_of(with_key("general.architecture",
                           [](Writer& w) { w.set_string("general.architecture", "llama"); })),
        ErrorKind::unsupported, "architecture llama", "'llama'");
    expect_error(config_of(with_key("general.architecture", nullptr)), ErrorKind::missing,
                 "no architecture", "'general.architecture'");
    expect_error(config_of(with_key("smollm3.block_count", nullptr)), ErrorKind::missing,
                 "no block_count", "'smollm3.block_count'");
    expect_error(
        config_of(with_key("smollm3.block_count",
                           [](Writer& w) { w.set_string("smollm3.block_count", "four"); })),
        ErrorKind::type, "block_count a string", "string");
    expect_error(config_of(with_key("smollm3.block_count",
                                    [](Writer& w) { w.set_u32("smollm3.block_count", 0); })),
                 ErrorKind::format, "block_count 0", "'smollm3.block_count'");
    expect_error(
        config_of(with_key("smollm3.embedding_length",
                           [](Writer& w) { w.set_i32("smollm3.embedding_length", -256); })),
        ErrorKind::type, "embedding_length -256", "'smollm3.embedding_length'");
    expect_error(
        config_of(with_key("smollm3.attention.head_count_kv",
                           [](Writer& w) { w.set_u32("smollm3.attention.head_count_kv", 3); })),
        ErrorKind::format, "head_count_kv 3", "'smollm3.attention.head_count_kv'");
    expect_error(
        config_of(with_key("smollm3.attention.head_count",
                           [](Writer& w) { w.set_u32("smollm3.attention.head_count", 7); })),
        ErrorKind::format, "head_count 7", "embedding_length");
    expect_error(config_of(with_key("smollm3.rope.freq_base",
                                    [](Writer& w) { w.set_f32("smollm3.rope.freq_base", -1.0f); })),
                 ErrorKind::format, "freq_base -1", "'smollm3.rope.freq_base'");
    expect_error(config_of(with_key("smollm3.attention.layer_norm_rms_epsilon", nullptr)),
                 ErrorKind::missing, "no rms epsilon",
                 "'smollm3.attention.layer_norm_rms_epsilon'");
    expect_error(config_of(with_key("smollm3.vocab_size",
                                    [](Writer& w) { w.set_u32("smollm3.vocab_size", 1000); })),
                 ErrorKind::shape, "vocab_size 1000", "'smollm3.vocab_size'");
    expect_error(
        config_of(rebuild(real, nullptr, no_tensors,
                          [](Writer& w) { w.set_string("smollm3.rope.scaling.type", "linear"); })),
        ErrorKind::unsupported, "rope scaling linear", "linear");

    // The vocabulary, through the tokenizer.
    auto tokenizer_of = [](const Bytes& bytes) {
        auto file = File::try_from_bytes(bytes, "edited.gguf");
        if (!file.ok()) return smol::Expected<smol::Tokenizer>(file.take_error());
        return smol::Tokenizer::try_from_gguf(file.value());
    };
    expect_error(
        tokenizer_of(with_key("tokenizer.ggml.model",
                              [](Writer& w) { w.set_string("tokenizer.ggml.model", "llama"); })),
        ErrorKind::unsupported, "tokenizer model llama", "llama");
    expect_error(tokenizer_of(with_key("tokenizer.ggml.merges", nullptr)), ErrorKind::missing,
                 "no merges", "tokenizer.ggml.merges");
    expect_error(tokenizer_of(with_key(
                     "tokenizer.ggml.eos_token_id",
                     [](Writer& w) { w.set_u32("tokenizer.ggml.eos_token_id", 1u << 30); })),
                 ErrorKind::format, "eos id outside the vocabulary", "eos_token_id");
    expect_error(smol::Tokenizer::try_from_gguf(nullptr), ErrorKind::invalid_argument,
                 "null tokenizer file");
}

// ---- tensors against the config ---------------------------------------------------

void tensors(const File& real) {
    auto replace_tensor = [&](const std::string& name, const std::function<void(Writer&)>& add) {
        return rebuild(real, nullptr, [&](Writer& w, const TensorInfo& t) {
            if (t.name != name) return false;
            if (add) add(w);
            return true;
        });
    };
    auto bind_of = [](const Bytes& bytes) {
        auto file = File::try_from_buffer(bytes.data(), bytes.size(), "edited.gguf");
        if (!file.ok()) return smol::Status(file.take_error());
        auto config = smol::Config::try_from_gguf(*file.value());
        if (!config.ok()) return smol::Status(config.take_error());
        auto weights = smol::Weights::try_bind(*file.value(), config.value());
        return weights.ok() ? smol::Status() : smol::Status(weights.take_error());
    };
    expect_error(bind_of(replace_tensor("blk.2.ffn_up.weight", nullptr)), ErrorKind::missing,
                 "no ffn_up", "'blk.2.ffn_up.weight'");
    expect_error(bind_of(replace_tensor("output_norm.weight", nullptr)), ErrorKind::missing,
                 "no output_norm", "'output_norm.weight'");
    expect_error(bind_of(replace_tensor(
                     "blk.3.attn_k.weight",
                     [](Writer& w) {
                         add_zero_tensor(w, "blk.3.attn_k.weight", GGMLType::Q4_K, {256, 128});
                     })),
                 ErrorKind::shape, "attn_k of two kv heads", "[256, 128]");
    expect_error(bind_of(replace_tensor(
                     "blk.0.ffn_down.weight",
                     [](Writer& w) {
                         add_zero_tensor(w, "blk.0.ffn_down.weight", GGMLType::Q4_K, {256, 768});
                     })),
                 ErrorKind::shape, "transposed ffn_down", "[768, 256]");
    const Bytes short_vocab = replace_tensor("token_embd.weight", [](Writer& w) {
        add_zero_tensor(w, "token_embd.weight", GGMLType::Q6_K, {256, 128000});
    });
    expect_error(bind_of(short_vocab), ErrorKind::shape, "embedding of another vocabulary",
                 "128000");
    expect_error(
        smol::Model::try_load_from_memory(short_vocab.data(), short_vocab.size(), one_thread()),
        ErrorKind::shape, "embedding of another vocabulary (model)", "128000");
    expect_error(bind_of(replace_tensor(
                     "blk.1.attn_norm.weight",
                     [](Writer& w) {
                         add_zero_tensor(w, "blk.1.attn_norm.weight", GGMLType::F32, {256, 1});
                     })),
                 ErrorKind::shape, "2-D norm", "'blk.1.attn_norm.weight'");
    expect_error(bind_of(replace_tensor(
                     "blk.0.attn_q.weight",
                     [](Writer& w) {
                         add_zero_tensor(w, "blk.0.attn_q.weight", GGMLType::Q8_1, {256, 256});
                     })),
                 ErrorKind::unsupported, "Q8_1 matrix", "Q8_1");
    expect_error(
        bind_of(replace_tensor(
            "output_norm.weight",
            [](Writer& w) { add_zero_tensor(w, "output_norm.weight", GGMLType::Q8_0, {256}); })),
        ErrorKind::unsupported, "Q8_0 norm", "Q8_0");
}

// ---- loading: the model, its options, its caches --------------------------------------

void loading(const std::string& tiny, const std::string& vocab, const File& real) {
    expect_error(smol::Model::try_load("/nonexistent/smol/model.gguf"), ErrorKind::io,
                 "missing model", "/nonexistent/smol/model.gguf");
    expect_error(smol::Model::try_load(vocab, one_thread()), ErrorKind::missing,
                 "a vocabulary-only file", "'token_embd.weight'");
    smol::LoadOptions cancel = one_thread();
    cancel.progress = [](float) { return false; };
    expect_error(smol::Model::try_load(tiny, cancel), ErrorKind::cancelled, "a cancelled load");
    smol::LoadOptions late_cancel = one_thread();
    late_cancel.progress = [](float progress) { return progress < 0.7f; };
    expect_error(smol::Model::try_load(tiny, late_cancel), ErrorKind::cancelled,
                 "a load cancelled after binding");
    {
        const Bytes llama = rebuild(
            real,
            [](Writer& w, const KeyValue& kv) {
                if (kv.key != "general.architecture") return false;
                w.set_string(kv.key, "llama");
                return true;
            },
            [](Writer&, const TensorInfo&) { return true; });
        expect_error(smol::Model::try_load_from_memory(llama.data(), llama.size(), one_thread()),
                     ErrorKind::unsupported, "a llama file from memory", "'llama'");
    }
    expect_error(smol::Model::try_load_from_memory(nullptr, 12), ErrorKind::invalid_argument,
                 "a null buffer (model)");

    // Options.
    smol::LoadOptions threads = one_thread();
    threads.n_threads = 5000;
    expect_error(smol::Model::try_load(tiny, threads), ErrorKind::invalid_argument, "5000 threads",
                 "too many");
    smol::LoadOptions device = one_thread();
    device.device = smol::Device(7);
    expect_error(smol::Model::try_load(tiny, device), ErrorKind::invalid_argument,
                 "an unknown device", "device");
    device.device = smol::Device::cuda;  // no device_backend given
    expect_error(smol::Model::try_load(tiny, device), ErrorKind::unsupported,
                 "cuda without a device backend", "device_backend");
    smol::LoadOptions level = one_thread();
#if defined(__x86_64__) || defined(_M_X64)
    level.cpu = smol::CpuLevel::neon;
#else
    level.cpu = smol::CpuLevel::avx2;
#endif
    expect_error(smol::Model::try_load(tiny, level), ErrorKind::invalid_argument,
                 "a kernel level of another CPU", "cannot run");
    {
        const char* saved = std::getenv("SMOL_CPU");
        const std::string old = saved ? saved : "";
        ::setenv("SMOL_CPU", "not-a-level", 1);
        expect_error(smol::Model::try_load(tiny, one_thread()), ErrorKind::invalid_argument,
                     "SMOL_CPU=not-a-level", "SMOL_CPU");
        if (saved)
            ::setenv("SMOL_CPU", old.c_str(), 1);
        else
            ::unsetenv("SMOL_CPU");
    }

    auto model = smol::Model::try_load(tiny, one_thread());
    check(model.ok(), "the fixture loads: " + (model.ok() ? std::string() : model.error().message));
    if (!model.ok()) return;
    const auto& m = *model.value();
    expect_error(m.try_make_cache(4097), ErrorKind::invalid_argument, "n_ctx 4097", "4096");
    expect_error(m.try_make_cache(0), ErrorKind::invalid_argument, "n_ctx 0", "positive");
    expect_error(m.backend().try_make_cache(4097), ErrorKind::invalid_argument,
                 "backend n_ctx 4097", "4096");
    expect_error(m.backend().try_make_cache(16, smol::KVType(9)), ErrorKind::invalid_argument,
                 "a bad KV type");
    auto cache = m.try_make_cache(16);
    check(cache.ok() && cache.value().n_ctx() == 16, "a 16-position cache");
    if (!cache.ok()) return;

    // Forward arguments and cancellation.
    std::vector<float> logits(m.config().vocab_size);
    const int32_t bad_token = int32_t(m.config().vocab_size);
    expect_error(m.try_forward(&bad_token, 1, 0, cache.value(), logits.data()),
                 ErrorKind::invalid_argument, "a token outside the vocabulary",
                 "outside the vocabulary");
    const std::vector<int32_t> many(17, 1);
    expect_error(m.try_forward(many.data(), many.size(), 0, cache.value(), logits.data()),
                 ErrorKind::out_of_range, "17 tokens in 16 positions", "exceed the context");
    expect_error(m.try_forward(many.data(), 0, 0, cache.value(), logits.data()),
                 ErrorKind::invalid_argument, "no tokens", "no tokens");
    std::atomic<bool> cancelled{true};
    smol::ForwardOptions cancel_options;
    cancel_options.cancel = &cancelled;
    expect_error(m.try_forward(many.data(), 4, 0, cache.value(), logits.data(), cancel_options),
                 ErrorKind::cancelled, "a cancelled forward");
    check(cache.value().size() == 0, "a cancelled forward leaves the cache empty");
    check(m.try_forward(many.data(), 4, 0, cache.value(), logits.data()).ok(), "a forward runs");
    check(cache.value().size() == 4, "the cache holds 4 positions");

    // Serialized caches.
    const std::vector<uint8_t> junk = {'n', 'o', 'p', 'e'};
    expect_error(cache.value().try_restore(junk.data(), junk.size()), ErrorKind::format,
                 "a junk cache");
    expect_error(smol::KVCache::try_deserialize(m.config(), junk.data(), junk.size()),
                 ErrorKind::format, "a junk cache (deserialize)");
    const std::vector<uint8_t> saved = cache.value().serialize();
    auto small = m.try_make_cache(2);
    check(small.ok(), "a 2-position cache");
    if (small.ok())
        expect_error(small.value().try_restore(saved.data(), saved.size()), ErrorKind::out_of_range,
                     "4 positions into 2", "n_ctx");
    check(cache.value().try_restore(saved.data(), saved.size()).ok(), "a cache restores");
}

// ---- hostile files ----------------------------------------------------------------

void hostile(const std::string& tiny, const File& real, const File& vocab) {
    // A KV cache whose byte size wraps 64 bits.
    {
        const Bytes file = smol_test::kv_wrap_model(vocab);
        auto model = smol::Model::try_load_from_memory(file.data(), file.size(), one_thread());
        check(model.ok(), "the KV-wrap model loads");
        if (model.ok()) {
            const auto& m = *model.value();
            expect_error(m.try_make_cache(size_t(1) << 31), ErrorKind::resource, "a wrapping cache",
                         "overflows");
            expect_error(smol::KVCache::try_create(m.config(), size_t(1) << 31, smol::KVType::f32),
                         ErrorKind::resource, "a wrapping f32 cache", "overflows");
            expect_error(m.try_make_cache(), ErrorKind::resource, "a 32 TiB cache",
                         "memory budget");
            expect_error(m.backend().try_make_cache(), ErrorKind::resource,
                         "a 32 TiB backend cache", "memory budget");
            smol::ErrorInfo error;
            check(smol::Generator::try_create(model.value(), smol::GeneratorOptions(), &error) ==
                      nullptr,
                  "a generator with a 32 TiB cache is refused");
            check(error.kind == ErrorKind::resource, "... as ErrorKind::resource");
        }
    }
    // LoadOptions::memory_budget.
    {
        auto config = smol::Config::try_from_gguf(real);
        check(config.ok(), "the fixture's config");
        if (config.ok()) {
            const smol::Config& c = config.value();
            const uint64_t per_position = uint64_t(c.head_dim) * 2 * c.n_layers * c.n_kv_heads * 2;
            smol::LoadOptions options = one_thread();
            options.memory_budget = 64 * per_position;
            auto model = smol::Model::try_load(tiny, options);
            check(model.ok(), "the fixture loads with a budget");
            if (model.ok()) {
                check(model.value()->try_make_cache(64).ok(), "64 positions fit the budget");
                // 65 positions reserve two whole blocks of 64.
                expect_error(model.value()->try_make_cache(65), ErrorKind::resource, "65 positions",
                             std::to_string(128 * per_position));
                smol::GeneratorOptions g;
                g.n_ctx = 4096;
                smol::ErrorInfo error;
                check(smol::Generator::try_create(model.value(), g, &error) == nullptr,
                      "a generator past the budget is refused");
                check(error.kind == ErrorKind::resource, "... as ErrorKind::resource");
            }
        }
    }
    // Tensor byte sizes that wrap 64 bits.
    auto wrapped = [](GGMLType type, std::vector<uint64_t> dims) {
        smol_test::RawGguf raw;
        raw.str("general.architecture", "smollm3").tensor("t", type, std::move(dims));
        return File::try_from_bytes(raw.build(Bytes(64, 0)), "wrap.gguf");
    };
    expect_error(wrapped(GGMLType::F32, {uint64_t(1) << 31, uint64_t(1) << 31}), ErrorKind::format,
                 "2^62 F32 elements", "byte size overflows");
    expect_error(wrapped(GGMLType::F64, {uint64_t(1) << 31, uint64_t(1) << 30}), ErrorKind::format,
                 "2^61 F64 elements", "byte size overflows");
    expect_error(wrapped(GGMLType::F16, {uint64_t(1) << 31, uint64_t(1) << 31}), ErrorKind::format,
                 "2^63 bytes", "past the end");
    // A block count the tensor table cannot hold.
    auto config = smol::Config::try_from_gguf(real);
    const size_t real_layers = config.ok() ? config.value().n_layers : 0;
    for (const uint32_t layers : {uint32_t(1) << 22, uint32_t(1) << 31}) {
        const Bytes file = smol_test::with_u32(real, "smollm3.block_count", layers);
        expect_error(smol::Model::try_load_from_memory(file.data(), file.size(), one_thread()),
                     ErrorKind::missing, "block_count " + std::to_string(layers),
                     "'blk." + std::to_string(real_layers) + ".attn_norm.weight'");
    }
    // Counts past smol's limits.
    auto header = [](uint64_t tensors, uint64_t keys) {
        Bytes out;
        smol::detail::append_le<uint32_t>(out, smol::gguf::kMagic);
        smol::detail::append_le<uint32_t>(out, 3);
        smol::detail::append_le<uint64_t>(out, tensors);
        smol::detail::append_le<uint64_t>(out, keys);
        out.resize(out.size() + size_t(std::max(tensors * 32, keys * 13)), 0);
        return out;
    };
    expect_error(File::try_from_bytes(header(0, smol::gguf::kMaxMetadataKeys + 1), "keys.gguf"),
                 ErrorKind::unsupported, "too many keys", "metadata keys");
    expect_error(File::try_from_bytes(header(smol::gguf::kMaxTensors + 1, 0), "tensors.gguf"),
                 ErrorKind::unsupported, "too many tensors", "tensors");
    // A huge count backed by few bytes: truncated, before any allocation.
    Bytes claim;
    smol::detail::append_le<uint32_t>(claim, smol::gguf::kMagic);
    smol::detail::append_le<uint32_t>(claim, 3);
    smol::detail::append_le<uint64_t>(claim, 0);
    smol::detail::append_le<uint64_t>(claim, uint64_t(1) << 60);
    expect_error(File::try_from_bytes(claim, "claim.gguf"), ErrorKind::format,
                 "2^60 keys in 24 bytes", "exceeds the file size");
}

// ---- sampling ---------------------------------------------------------------------

void sampling() {
    smol::SamplingParams nan_temperature;
    nan_temperature.temperature = std::numeric_limits<float>::quiet_NaN();
    expect_error(smol::Sampler::validate(nan_temperature), ErrorKind::invalid_argument,
                 "NaN temperature", "temperature");
    expect_error(smol::Sampler::create(nan_temperature), ErrorKind::invalid_argument,
                 "NaN temperature (create)");
    smol::SamplingParams zero_penalty;
    zero_penalty.repeat_penalty = 0;
    expect_error(smol::Sampler::create(zero_penalty), ErrorKind::invalid_argument,
                 "repeat_penalty 0", "repeat_penalty");

    auto sampler = smol::Sampler::create();
    check(sampler.ok(), "default sampling parameters");
    if (!sampler.ok()) return;
    std::vector<float> logits(8, 0.0f);
    expect_error(sampler.value().try_sample(nullptr, 0, {}), ErrorKind::invalid_argument,
                 "no logits", "empty");
    std::vector<float> nans(8, std::numeric_limits<float>::quiet_NaN());
    expect_error(sampler.value().try_sample(nans.data(), nans.size(), {}),
                 ErrorKind::invalid_argument, "NaN logits", "NaN");
    smol::SamplingParams greedy;
    greedy.temperature = 0;
    auto greedy_sampler = smol::Sampler::create(greedy);
    if (greedy_sampler.ok())
        expect_error(greedy_sampler.value().try_sample(nans.data(), nans.size(), {}),
                     ErrorKind::invalid_argument, "NaN logits (greedy)", "NaN");
    smol::SamplingParams bias;
    bias.logit_bias = {{8, 1.0f}};
    auto bias_sampler = smol::Sampler::create(bias);
    if (bias_sampler.ok())
        expect_error(bias_sampler.value().try_sample(logits.data(), logits.size(), {}),
                     ErrorKind::invalid_argument, "a bias outside the vocabulary", "logit_bias");
    auto token = sampler.value().try_sample(logits.data(), logits.size(), {});
    check(token.ok() && token.value() >= 0 && token.value() < 8, "a token is sampled");
}

// ---- the generator ------------------------------------------------------------------

int generation(const std::string& model_path) {
    // A missing file: an error value, no abort.
    smol::ErrorInfo error;
    auto missing = smol::try_load_model("/nonexistent/dir/model.gguf", &error);
    check(missing == nullptr, "missing file gives null");
    check(error.kind == ErrorKind::io, "missing file is ErrorKind::io");
    check(error.message.find("/nonexistent/dir/model.gguf") != std::string::npos,
          "message names the file");

    // A file that exists but is not GGUF fails deep inside the parser.
    const std::string junk_text =
        "this is not a GGUF file, just some bytes long enough to parse a header from";
    TempFile junk_file("junk.gguf", reinterpret_cast<const uint8_t*>(junk_text.data()),
                       junk_text.size());
    smol::ErrorInfo junk_error;
    auto junk = smol::try_load_model(junk_file.path, &junk_error);
    check(junk == nullptr, "junk file gives null");
    check(junk_error.kind == ErrorKind::format, "junk file is ErrorKind::format");

    // A real model loads and generates.
    smol::ErrorInfo load_error;
    auto model = smol::try_load_model(model_path, &load_error);
    if (!model) {
        std::fprintf(stderr, "FAILED: loading %s: %s\n", model_path.c_str(),
                     load_error.message.c_str());
        return 1;
    }
    smol::GeneratorOptions options;
    options.n_ctx = 64;
    smol::ErrorInfo create_error;
    smol::GeneratorOptions too_long;
    too_long.n_ctx = size_t(1) << 40;
    auto bad_generator = smol::Generator::try_create(model, too_long, &create_error);
    check(bad_generator == nullptr, "n_ctx past the model's limit gives null");
    check(create_error.kind == ErrorKind::invalid_argument, "n_ctx error is invalid_argument");

    auto gen = smol::Generator::try_create(model, options, &create_error);
    if (!gen) {
        std::fprintf(stderr, "FAILED: creating a generator: %s\n", create_error.message.c_str());
        return 1;
    }
    smol::GenerateParams params;
    params.max_tokens = 4;
    params.temperature = 0;
    params.ignore_eos = true;
    std::string streamed;
    smol::GenerateResult r = gen->generate("Hello there", params, [&](std::string_view piece) {
        streamed.append(piece.data(), piece.size());
        return true;
    });
    check(r.stop_reason == smol::StopReason::max_tokens, "generation ends at max_tokens");
    check(r.tokens.size() == 4, "4 tokens generated");
    check(streamed == r.text, "streamed text equals the result text");
    std::printf("generated %zu tokens: stop %s\n", r.tokens.size(), smol::to_string(r.stop_reason));

    smol::GenerateResult bad = gen->generate("bad \xff byte", params);
    check(bad.stop_reason == smol::StopReason::error, "invalid UTF-8 gives StopReason::error");
    check(bad.error_kind == ErrorKind::invalid_argument, "invalid UTF-8 is invalid_argument");
    check(bad.error.find("offset 4") != std::string::npos, "the error names the byte offset");

    std::string long_prompt;
    for (int i = 0; i < 200; ++i) long_prompt += "word ";
    smol::GenerateResult too_long_prompt = gen->generate(long_prompt, params);
    check(too_long_prompt.stop_reason == smol::StopReason::error,
          "a prompt past the context gives StopReason::error");
    check(too_long_prompt.error_kind == ErrorKind::out_of_range,
          "a prompt past the context is out_of_range");

    smol::GenerateParams nan_params = params;
    nan_params.temperature = std::numeric_limits<float>::quiet_NaN();
    smol::GenerateResult nan_result = gen->generate("Hello", nan_params);
    check(nan_result.stop_reason == smol::StopReason::error,
          "a NaN temperature gives StopReason::error");
    check(nan_result.error_kind == ErrorKind::invalid_argument,
          "a NaN temperature is invalid_argument");

    // Still usable after the errors, and deterministic.
    smol::GenerateResult again = gen->generate("Hello there", params);
    check(again.tokens == r.tokens, "same tokens after errors");

    // Sessions: a round trip, and malformed bytes rejected as a value.
    const std::vector<uint8_t> session = gen->save_session();
    auto other = smol::Generator::try_create(model, options, &create_error);
    check(other && other->try_restore_session(session.data(), session.size()), "session restores");
    check(other && other->history() == gen->history(), "restored history matches");
    const std::vector<uint8_t> junk_session = {'n', 'o', 'p', 'e'};
    smol::ErrorInfo session_error;
    check(other &&
              !other->try_restore_session(junk_session.data(), junk_session.size(), &session_error),
          "junk session is rejected");
    check(session_error.kind == ErrorKind::format, "junk session is ErrorKind::format");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: test_noexcept_consumer MODEL.gguf\n");
        return 2;
    }
    const std::string model_path = argv[1];
    const char* required = std::getenv("SMOL_REQUIRE_FIXTURES");
    const bool require = required && std::string(required) == "1";
    if (!exists(model_path)) {
        std::fprintf(stderr, "model '%s' not found\n", model_path.c_str());
        return require ? 1 : 77;  // 77: skipped
    }
    std::printf("%s\n", smol::build_info_string().c_str());
    check(!smol::build_info().exceptions, "build_info reports exceptions off");

    files(nullptr);
    sampling();
    const std::string tiny = fixtures_dir() + "/tiny-q4km.gguf",
                      vocab = fixtures_dir() + "/vocab-llama-bpe.gguf";
    if (exists(tiny) && exists(vocab)) {
        auto real = File::try_open(tiny);
        auto vocab_file = File::try_open(vocab);
        check(real.ok() && vocab_file.ok(), "the fixtures parse");
        if (real.ok() && vocab_file.ok()) {
            files(real.value().get());
            tensor_table(*real.value());
            metadata(*real.value());
            tensors(*real.value());
            loading(tiny, vocab, *real.value());
            hostile(tiny, *real.value(), *vocab_file.value());
        }
    } else if (require) {
        std::fprintf(stderr, "FAILED: fixtures missing in %s and SMOL_REQUIRE_FIXTURES=1\n",
                     fixtures_dir().c_str());
        return 1;
    } else {
        std::printf("skipping the catalogue: fixtures not found in %s\n", fixtures_dir().c_str());
    }
    if (generation(model_path) != 0) return 1;

    if (failures) {
        std::fprintf(stderr, "%d of %d checks failed\n", failures, checks);
        return 1;
    }
    std::printf("noexcept consumer ok (%d checks)\n", checks);
    return 0;
}
