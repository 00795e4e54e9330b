// GGUF reader and writer: the fixture files parse with the shapes their
// hyperparameters imply; typed metadata lookup; every value type and tensor
// type round-trips through the writer; and hostile input (truncations, forged
// counts and offsets, random byte flips) gives smol::Error, never a crash and
// never an allocation larger than the input.
#include <doctest/doctest.h>
#include <smol/smol.hpp>
#include <smol/gguf/writer.hpp>
#include <smol/detail/bytes.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <new>
#include <random>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "support/fixtures.hpp"

// ---------------------------------------------------------------------------
// Allocation tracking: global operator new records the largest single request
// made while tracking is on. Hostile parses must never ask for more than the
// input holds, whatever its counts claim.
namespace alloc_tracker {
std::atomic<bool> enabled{false};
std::atomic<size_t> largest{0};

inline void note(size_t size) noexcept {
    if (!enabled.load(std::memory_order_relaxed)) return;
    size_t seen = largest.load(std::memory_order_relaxed);
    while (size > seen && !largest.compare_exchange_weak(seen, size)) {
    }
}
inline void* allocate(size_t size) {
    note(size);
    if (void* p = std::malloc(size ? size : 1)) return p;
    throw std::bad_alloc();
}
inline void* allocate_aligned(size_t size, std::align_val_t alignment) {
    note(size);
    size_t align = static_cast<size_t>(alignment);
    if (align < sizeof(void*)) align = sizeof(void*);
    void* p = nullptr;
    if (posix_memalign(&p, align, size ? size : 1) != 0) throw std::bad_alloc();
    return p;
}

// Scope guard: tracking on, largest reset.
struct Scope {
    Scope() {
        largest = 0;
        enabled = true;
    }
    ~Scope() { enabled = false; }
};
}  // namespace alloc_tracker

// Every replaceable form forwards to malloc/posix_memalign and free, so that
// each new pairs with a matching delete whichever form the library picks.
// GCC 12 sees a library allocation through the nothrow aligned form inlined
// next to these deletes and calls free on it "mismatched": here it is not.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(size_t size) {
    return alloc_tracker::allocate(size);
}
void* operator new[](size_t size) {
    return alloc_tracker::allocate(size);
}
void* operator new(size_t size, const std::nothrow_t&) noexcept {
    try {
        return alloc_tracker::allocate(size);
    } catch (...) {
        return nullptr;
    }
}
void* operator new[](size_t size, const std::nothrow_t&) noexcept {
    try {
        return alloc_tracker::allocate(size);
    } catch (...) {
        return nullptr;
    }
}
void* operator new(size_t size, std::align_val_t a) {
    return alloc_tracker::allocate_aligned(size, a);
}
void* operator new[](size_t size, std::align_val_t a) {
    return alloc_tracker::allocate_aligned(size, a);
}
void* operator new(size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
    try {
        return alloc_tracker::allocate_aligned(size, a);
    } catch (...) {
        return nullptr;
    }
}
void* operator new[](size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
    try {
        return alloc_tracker::allocate_aligned(size, a);
    } catch (...) {
        return nullptr;
    }
}
void operator delete(void* p) noexcept {
    std::free(p);
}
void operator delete[](void* p) noexcept {
    std::free(p);
}
void operator delete(void* p, size_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, size_t) noexcept {
    std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete(void* p, size_t, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete[](void* p, size_t, std::align_val_t) noexcept {
    std::free(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    std::free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    std::free(p);
}

namespace {

using smol::ErrorKind;
using smol::GGMLType;
using smol::gguf::File;
using smol::gguf::ValueType;
using smol::gguf::Writer;
using Bytes = std::vector<uint8_t>;

Bytes read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    REQUIRE_MESSAGE(in.good(), "cannot open " << path);
    const auto size = static_cast<size_t>(in.tellg());
    Bytes out(size);
    in.seekg(0);
    in.read(reinterpret_cast<char*>(out.data()), std::streamsize(size));
    REQUIRE(in.good());
    return out;
}

// What a hostile parse did: loaded, or threw smol::Error (anything else
// escapes and fails the test), and the largest single allocation it made.
struct Outcome {
    bool loaded = false;
    ErrorKind kind = ErrorKind::internal;
    std::string message;
    size_t largest_alloc = 0;
};

// Small inputs still allocate a File object and an error message; the cap is
// the input size but never below this floor.
constexpr size_t kAllocFloor = 4096;

Outcome parse_tracked(const uint8_t* data, size_t size) {
    Outcome out;
    std::string source = "hostile.gguf";
    {
        alloc_tracker::Scope scope;
        try {
            auto file = File::from_buffer(data, size, std::move(source));
            out.loaded = true;
        } catch (const smol::Error& e) {
            out.kind = e.kind();
            out.message = e.what();
        }
    }
    out.largest_alloc = alloc_tracker::largest;
    return out;
}
Outcome parse_tracked(const Bytes& b) {
    return parse_tracked(b.data(), b.size());
}

// Asserts that `bytes` fails to parse with `kind` and a message containing `needle`.
void expect_rejected(const Bytes& bytes, ErrorKind kind, const std::string& needle) {
    const Outcome o = parse_tracked(bytes);
    INFO("expected '" << needle << "', got: " << o.message);
    REQUIRE_FALSE(o.loaded);
    CHECK(o.kind == kind);
    CHECK(o.message.find(needle) != std::string::npos);
    CHECK(o.message.find("hostile.gguf") != std::string::npos);
    CHECK(o.largest_alloc <= std::max(bytes.size(), kAllocFloor));
}

// Hand-built GGUF bytes, for what the writer refuses to produce.
struct Forge {
    Bytes b;
    Forge& u8(uint8_t v) { return le(v); }
    Forge& u32(uint32_t v) { return le(v); }
    Forge& u64(uint64_t v) { return le(v); }
    Forge& f32(float v) { return le(v); }
    Forge& str(const std::string& s) {
        u64(s.size());
        return raw(s.data(), s.size());
    }
    Forge& header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
        return u32(smol::gguf::kMagic).u32(version).u64(tensors).u64(kvs);
    }
    Forge& kv_u32(const std::string& key, uint32_t v) {
        return str(key).u32(uint32_t(ValueType::u32)).u32(v);
    }
    Forge& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                  uint64_t offset) {
        str(name).u32(uint32_t(dims.size()));
        for (uint64_t d : dims) u64(d);
        return u32(type).u64(offset);
    }
    Forge& pad_to(size_t alignment) {
        b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
        return *this;
    }
    Forge& zeros(size_t n) {
        b.resize(b.size() + n, 0);
        return *this;
    }
    template <class T>
    Forge& le(T v) {
        smol::detail::append_le(b, v);
        return *this;
    }
    Forge& raw(const void* p, size_t n) {
        const auto* c = static_cast<const uint8_t*>(p);
        b.insert(b.end(), c, c + n);
        return *this;
    }
};

void put_u32(Bytes& b, size_t at, uint32_t v) {
    smol::detail::write_le(b.data(), at, v);
}

// Two parsed files hold the same metadata (keys in order, types, values
// byte for byte) and the same tensors (names, shapes, types, bytes).
void check_same_content(const File& a, const File& b) {
    REQUIRE(a.metadata().size() == b.metadata().size());
    for (size_t i = 0; i < a.metadata().size(); ++i) {
        const auto& x = a.metadata()[i];
        const auto& y = b.metadata()[i];
        INFO("key " << x.key);
        REQUIRE(x.key == y.key);
        REQUIRE(x.value.type() == y.value.type());
        switch (x.value.type()) {
            case ValueType::string:
                CHECK(x.value.as_string() == y.value.as_string());
                break;
            case ValueType::array: {
                const auto& p = x.value.as_array();
                const auto& q = y.value.as_array();
                CHECK(p.element_type() == q.element_type());
                CHECK(p.size() == q.size());
                REQUIRE(p.bytes() == q.bytes());
                CHECK(std::memcmp(p.data(), q.data(), p.bytes()) == 0);
                break;
            }
            case ValueType::f32:
            case ValueType::f64:
                CHECK(x.value.as_f64() == y.value.as_f64());
                break;
            default:
                CHECK(x.value.as_u64() == y.value.as_u64());
                CHECK(x.value.as_i64() == y.value.as_i64());
        }
    }
    REQUIRE(a.tensors().size() == b.tensors().size());
    for (size_t i = 0; i < a.tensors().size(); ++i) {
        const auto& s = a.tensors()[i];
        const auto& t = b.tensors()[i];
        INFO("tensor " << s.name);
        REQUIRE(s.name == t.name);
        CHECK(s.dims == t.dims);
        CHECK(s.type == t.type);
        CHECK(s.n_elements == t.n_elements);
        REQUIRE(s.n_bytes == t.n_bytes);
        CHECK(std::memcmp(s.data, t.data, size_t(s.n_bytes)) == 0);
    }
}

// Copies every metadata value and tensor of `src` into a writer.
Writer copy_into_writer(const File& src) {
    Writer w(src.alignment());
    for (const auto& kv : src.metadata()) w.copy_value(kv.key, kv.value);
    for (const auto& t : src.tensors())
        w.add_tensor(t.name, t.type, t.dims, t.data, size_t(t.n_bytes));
    return w;
}

// ---------------------------------------------------------------------------
// The fixture model table (fixtures README).
struct ModelRow {
    const char* file;
    uint32_t hidden, layers, heads, kv_heads, head_dim, ffn, ctx;
    size_t tensors;
    std::map<GGMLType, size_t> types;
};

const std::vector<ModelRow>& model_rows() {
    static const std::vector<ModelRow> rows = {
        {"tiny-q4km.gguf",
         256,
         4,
         4,
         1,
         64,
         768,
         4096,
         38,
         {{GGMLType::Q4_K, 22}, {GGMLType::Q5_K, 2}, {GGMLType::Q6_K, 5}, {GGMLType::F32, 9}}},
        {"small-q4km.gguf",
         512,
         8,
         4,
         2,
         128,
         1536,
         8192,
         74,
         {{GGMLType::Q4_K, 48}, {GGMLType::Q6_K, 9}, {GGMLType::F32, 17}}},
        {"tiny-q8_0.gguf",
         256,
         4,
         4,
         1,
         64,
         768,
         4096,
         38,
         {{GGMLType::Q8_0, 29}, {GGMLType::F32, 9}}},
        {"tiny-gqa-q5km.gguf",
         256,
         5,
         8,
         2,
         32,
         512,
         2048,
         47,
         {{GGMLType::Q5_K, 28}, {GGMLType::Q6_K, 8}, {GGMLType::F32, 11}}},
    };
    return rows;
}

constexpr size_t kVocab = 128256;
constexpr size_t kMerges = 280147;

void check_tokenizer_metadata(const File& f) {
    const auto tokens = f.get<std::vector<std::string_view>>("tokenizer.ggml.tokens");
    REQUIRE(tokens.size() == kVocab);
    CHECK(tokens[0] == "!");
    CHECK(tokens[128000] == "<|begin_of_text|>");
    CHECK(tokens[128002] == "<think>");
    CHECK(tokens[128003] == "</think>");
    CHECK(tokens[128011] == "<|im_start|>");
    CHECK(tokens[128012] == "<|im_end|>");
    const auto types = f.get<std::vector<int32_t>>("tokenizer.ggml.token_type");
    CHECK(types.size() == kVocab);
    CHECK(f.get<smol::gguf::ArrayView>("tokenizer.ggml.token_type").element_type() ==
          ValueType::i32);
    const auto merges = f.get<smol::gguf::ArrayView>("tokenizer.ggml.merges");
    CHECK(merges.element_type() == ValueType::string);
    CHECK(merges.size() == kMerges);
    CHECK(merges.strings().front() == "\xC4\xA0 \xC4\xA0");  // "Ġ Ġ"
    CHECK(f.get<std::string>("tokenizer.ggml.model") == "gpt2");
    CHECK(f.get<uint32_t>("tokenizer.ggml.bos_token_id") == 128000);
    CHECK(f.get<uint32_t>("tokenizer.ggml.eos_token_id") == 128012);
    CHECK(f.get<uint32_t>("tokenizer.ggml.padding_token_id") == 128012);
    CHECK_FALSE(f.has("tokenizer.ggml.add_bos_token"));
    const auto tmpl = f.get<std::string_view>("tokenizer.chat_template");
    CHECK(tmpl.find("enable_thinking") != std::string_view::npos);
}

}  // namespace

// ---------------------------------------------------------------------------
TEST_CASE("fixture models parse with the shapes their hyperparameters imply") {
    for (const ModelRow& row : model_rows()) {
        const auto path = smol_test::fixture(row.file);
        if (!path) continue;
        INFO("file " << row.file);
        const auto f = File::open(*path);
        CHECK(f->version() == 3);
        CHECK(f->alignment() == 32);
        CHECK(f->get<std::string>("general.architecture") == "smollm3");
        CHECK(f->get<uint32_t>("smollm3.embedding_length") == row.hidden);
        CHECK(f->get<uint32_t>("smollm3.block_count") == row.layers);
        CHECK(f->get<uint32_t>("smollm3.attention.head_count") == row.heads);
        CHECK(f->get<uint32_t>("smollm3.attention.head_count_kv") == row.kv_heads);
        CHECK(f->get<uint32_t>("smollm3.feed_forward_length") == row.ffn);
        CHECK(f->get<uint32_t>("smollm3.context_length") == row.ctx);
        CHECK(f->get<uint32_t>("smollm3.vocab_size") == kVocab);
        CHECK(f->get<uint32_t>("smollm3.rope.dimension_count") == row.head_dim);
        CHECK(f->get<float>("smollm3.rope.freq_base") == 5e6f);
        CHECK(f->get<float>("smollm3.attention.layer_norm_rms_epsilon") == doctest::Approx(1e-6f));
        CHECK(f->get<std::string>("tokenizer.ggml.pre") == "smaug-bpe");
        CHECK(row.hidden / row.heads == row.head_dim);
        check_tokenizer_metadata(*f);

        REQUIRE(f->tensors().size() == row.tensors);
        std::map<GGMLType, size_t> type_counts;
        for (const auto& t : f->tensors()) ++type_counts[t.type];
        CHECK(type_counts == row.types);
        CHECK(f->find_tensor("output.weight") == nullptr);  // tied embeddings

        const uint64_t h = row.hidden, q = uint64_t(row.heads) * row.head_dim,
                       kv = uint64_t(row.kv_heads) * row.head_dim, ffn = row.ffn;
        using Dims = std::vector<uint64_t>;
        CHECK(f->tensor("token_embd.weight").dims == Dims{h, kVocab});
        CHECK(f->tensor("output_norm.weight").dims == Dims{h});
        for (uint32_t l = 0; l < row.layers; ++l) {
            const std::string p = "blk." + std::to_string(l) + ".";
            CHECK(f->tensor(p + "attn_norm.weight").dims == Dims{h});
            CHECK(f->tensor(p + "ffn_norm.weight").dims == Dims{h});
            CHECK(f->tensor(p + "attn_q.weight").dims == Dims{h, q});
            CHECK(f->tensor(p + "attn_k.weight").dims == Dims{h, kv});
            CHECK(f->tensor(p + "attn_v.weight").dims == Dims{h, kv});
            CHECK(f->tensor(p + "attn_output.weight").dims == Dims{q, h});
            CHECK(f->tensor(p + "ffn_gate.weight").dims == Dims{h, ffn});
            CHECK(f->tensor(p + "ffn_up.weight").dims == Dims{h, ffn});
            CHECK(f->tensor(p + "ffn_down.weight").dims == Dims{ffn, h});
            CHECK(f->tensor(p + "attn_norm.weight").type == GGMLType::F32);
        }
        // Every tensor lies inside the file, aligned, with the size its type implies.
        for (const auto& t : f->tensors()) {
            INFO("tensor " << t.name);
            CHECK(t.offset % f->alignment() == 0);
            CHECK(t.data == f->bytes() + f->data_offset() + t.offset);
            CHECK(t.data + t.n_bytes <= f->bytes() + f->size());
            CHECK(t.n_bytes == smol::row_bytes(t.type, size_t(t.dims[0])) * t.rows());
        }
        CHECK(f->data_offset() % f->alignment() == 0);
        smol_test::count_golden();
    }
}

TEST_CASE("vocab-only fixture: llama-bpe pre-tokenizer and no tensors") {
    const auto path = smol_test::fixture("vocab-llama-bpe.gguf");
    if (!path) return;
    const auto f = File::open(*path);
    CHECK(f->get<std::string>("tokenizer.ggml.pre") == "llama-bpe");
    CHECK(f->get<std::string>("general.architecture") == "smollm3");
    CHECK(f->tensors().empty());
    CHECK(f->data_offset() <= f->size());
    check_tokenizer_metadata(*f);
    smol_test::count_golden();
}

TEST_CASE("re-writing a fixture's metadata and tensors gives back the same file") {
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return;
    const auto original = File::open(*path);
    const Bytes rewritten = copy_into_writer(*original).to_bytes();
    const auto again = File::from_bytes(rewritten, "rewritten.gguf");
    CHECK(again->version() == original->version());
    CHECK(again->alignment() == original->alignment());
    CHECK(again->data_offset() == original->data_offset());
    check_same_content(*original, *again);
    // Same tensor order and the same alignment rule leave no freedom in the
    // layout: the bytes match the reference engine's file exactly.
    REQUIRE(rewritten.size() == original->size());
    CHECK(std::memcmp(rewritten.data(), original->bytes(), rewritten.size()) == 0);
    smol_test::count_golden();
}

// ---------------------------------------------------------------------------
TEST_CASE("typed metadata lookup: get<T> and find<T>") {
    Writer w;
    w.set_u8("u8", 200);
    w.set_i8("i8", -128);
    w.set_u16("u16", 65535);
    w.set_i16("i16", -300);
    w.set_u32("u32", 4000000000u);
    w.set_i32("i32", -5);
    w.set_u64("u64.max", std::numeric_limits<uint64_t>::max());
    w.set_u64("u64.big", uint64_t(1) << 40);
    w.set_i64("i64.min", std::numeric_limits<int64_t>::min());
    w.set_f32("f32", 1.5f);
    w.set_f64("f64", -2.25);
    w.set_bool("flag", true);
    w.set_string("name", "smol");
    w.set_strings("words", std::vector<std::string>{"a", "", "ccc"});
    w.set_array<int32_t>("ids", {1, -2, 3});
    w.set_array<float>("floats", {0.5f, 2.0f});
    const auto f = File::from_bytes(w.to_bytes(), "typed.gguf");

    CHECK(f->get<uint8_t>("u8") == 200);
    CHECK(f->get<int>("u8") == 200);
    CHECK(f->get<int8_t>("i8") == -128);
    CHECK(f->get<uint16_t>("u16") == 65535);
    CHECK(f->get<int16_t>("i16") == -300);
    CHECK(f->get<uint32_t>("u32") == 4000000000u);
    CHECK(f->get<int64_t>("u32") == 4000000000ll);
    CHECK(f->get<int32_t>("i32") == -5);
    CHECK(f->get<uint64_t>("u64.max") == std::numeric_limits<uint64_t>::max());
    CHECK(f->get<int64_t>("i64.min") == std::numeric_limits<int64_t>::min());
    CHECK(f->get<float>("f32") == 1.5f);
    CHECK(f->get<double>("f64") == -2.25);
    CHECK(f->get<double>("i32") == -5.0);  // integers widen to floating point
    CHECK(f->get<bool>("flag"));
    CHECK(f->get<std::string>("name") == "smol");
    CHECK(f->get<std::string_view>("name") == "smol");
    CHECK(f->get<std::vector<std::string>>("words") == std::vector<std::string>{"a", "", "ccc"});
    CHECK(f->get<std::vector<int32_t>>("ids") == std::vector<int32_t>{1, -2, 3});
    CHECK(f->get<std::vector<double>>("ids") == std::vector<double>{1, -2, 3});
    CHECK(f->get<std::vector<float>>("floats") == std::vector<float>{0.5f, 2.0f});
    CHECK(f->find<uint32_t>("u32") == 4000000000u);
    CHECK_FALSE(f->find<uint32_t>("absent").has_value());
    CHECK(f->has("name"));
    CHECK_FALSE(f->has("nam"));

    auto expect = [](auto&& call, ErrorKind kind, std::vector<std::string> needles) {
        try {
            call();
            FAIL("no error; expected " << needles.front());
        } catch (const smol::Error& e) {
            CHECK(e.kind() == kind);
            for (const auto& n : needles)
                CHECK_MESSAGE(std::string(e.what()).find(n) != std::string::npos,
                              "'" << e.what() << "' lacks '" << n << "'");
        }
    };
    // Wrong type: the message names the key, the type found and the type wanted.
    expect([&] { f->get<std::string>("u32"); }, ErrorKind::type,
           {"'u32'", "type u32", "string", "typed.gguf"});
    expect([&] { f->get<uint32_t>("name"); }, ErrorKind::type,
           {"'name'", "type string", "integer"});
    expect([&] { f->get<bool>("u8"); }, ErrorKind::type, {"'u8'", "type u8", "bool"});
    expect([&] { f->get<int>("flag"); }, ErrorKind::type, {"'flag'", "type bool"});
    expect([&] { f->get<int>("f32"); }, ErrorKind::type, {"'f32'", "type f32"});
    expect([&] { f->get<float>("name"); }, ErrorKind::type, {"'name'", "string"});
    expect([&] { f->get<std::vector<int32_t>>("name"); }, ErrorKind::type, {"'name'", "array"});
    expect([&] { f->get<std::vector<std::string>>("ids"); }, ErrorKind::type,
           {"'ids'", "array of string"});
    expect([&] { f->get<std::vector<int32_t>>("words"); }, ErrorKind::type, {"'words'"});
    expect([&] { f->get<std::vector<int32_t>>("floats"); }, ErrorKind::type,
           {"'floats'", "integer array"});
    expect([&] { f->find<std::string>("u8"); }, ErrorKind::type, {"'u8'", "type u8"});
    // Integer range checks.
    expect([&] { f->get<uint8_t>("u16"); }, ErrorKind::type, {"'u16'", "out of range"});
    expect([&] { f->get<int32_t>("u32"); }, ErrorKind::type, {"'u32'", "out of range"});
    expect([&] { f->get<uint32_t>("u64.big"); }, ErrorKind::type, {"'u64.big'", "out of range"});
    expect([&] { f->get<int64_t>("u64.max"); }, ErrorKind::type, {"'u64.max'", "out of range"});
    expect([&] { f->get<uint32_t>("i32"); }, ErrorKind::type, {"'i32'", "out of range"});
    expect([&] { f->get<uint64_t>("i64.min"); }, ErrorKind::type, {"'i64.min'", "out of range"});
    expect([&] { f->get<int32_t>("i64.min"); }, ErrorKind::type, {"'i64.min'", "out of range"});
    expect([&] { f->get<int8_t>("i16"); }, ErrorKind::type, {"'i16'", "out of range"});
    expect([&] { f->get<uint8_t>("i8"); }, ErrorKind::type, {"'i8'", "out of range"});
    // Missing key and missing tensor.
    expect([&] { f->get<uint32_t>("no.such.key"); }, ErrorKind::missing,
           {"'no.such.key'", "typed.gguf"});
    expect([&] { f->tensor("no.such.tensor"); }, ErrorKind::missing,
           {"'no.such.tensor'", "typed.gguf"});
    CHECK(f->find_tensor("no.such.tensor") == nullptr);
}

TEST_CASE("all 13 value types round-trip through the writer, nested arrays included") {
    // Nested arrays, bool arrays and every array element type: the writer has no
    // setter for these, so forge them and copy them over with copy_value.
    Forge src;
    src.header(0, 5);
    src.str("nested").u32(uint32_t(ValueType::array)).u32(uint32_t(ValueType::array)).u64(3);
    src.u32(uint32_t(ValueType::i16)).u64(2).raw("\x01\x00\xff\xff", 4);  // [1, -1]
    src.u32(uint32_t(ValueType::string)).u64(2).str("x").str("");         // ["x", ""]
    src.u32(uint32_t(ValueType::array)).u64(1);                           // [[true]]
    src.u32(uint32_t(ValueType::boolean)).u64(1).u8(1);
    src.str("bools")
        .u32(uint32_t(ValueType::array))
        .u32(uint32_t(ValueType::boolean))
        .u64(3)
        .u8(1)
        .u8(0)
        .u8(1);
    src.str("empty.nested").u32(uint32_t(ValueType::array)).u32(uint32_t(ValueType::array)).u64(0);
    src.str("empty.strings")
        .u32(uint32_t(ValueType::array))
        .u32(uint32_t(ValueType::string))
        .u64(0);
    src.str("").u32(uint32_t(ValueType::string)).str("");  // empty key, empty string
    const auto forged = File::from_bytes(src.b, "forged.gguf");
    {
        const auto& nested = forged->get<smol::gguf::ArrayView>("nested");
        CHECK(nested.element_type() == ValueType::array);
        CHECK(nested.size() == 3);
        CHECK(forged->get<std::vector<bool>>("bools") == std::vector<bool>{true, false, true});
        CHECK(forged->get<std::vector<std::string>>("empty.strings").empty());
        CHECK(forged->get<std::string>("").empty());
    }

    Writer w;
    w.set_u8("t.u8", 255);
    w.set_i8("t.i8", -1);
    w.set_u16("t.u16", 0xBEEF);
    w.set_i16("t.i16", -32768);
    w.set_u32("t.u32", 0xDEADBEEF);
    w.set_i32("t.i32", std::numeric_limits<int32_t>::min());
    w.set_f32("t.f32", -0.0f);
    w.set_bool("t.bool.true", true);
    w.set_bool("t.bool.false", false);
    w.set_string("t.string", "h\xC3\xA9llo\n\0x");
    w.set_string("t.string.empty", "");
    w.set_u64("t.u64", 0x0123456789ABCDEFull);
    w.set_i64("t.i64", -1234567890123456789ll);
    w.set_f64("t.f64", 1e300);
    w.set_array<uint8_t>("a.u8", {0, 255});
    w.set_array<int8_t>("a.i8", {-128, 127});
    w.set_array<uint16_t>("a.u16", {1, 65535});
    w.set_array<int16_t>("a.i16", {-2});
    w.set_array<uint32_t>("a.u32", {7});
    w.set_array<int32_t>("a.i32", {});
    w.set_array<float>("a.f32", {1.25f, -3.5f});
    w.set_array<uint64_t>("a.u64", {uint64_t(1) << 63});
    w.set_array<int64_t>("a.i64", {-1});
    w.set_array<double>("a.f64", {0.1});
    w.set_strings("a.string", std::vector<std::string>{"", "two", std::string(300, 'z')});
    for (const auto& kv : forged->metadata()) w.copy_value("copied." + kv.key, kv.value);
    w.set_u8("t.overwritten", 1);
    w.set_string("t.overwritten", "last value wins");
    const Bytes bytes = w.to_bytes();
    const auto f = File::from_bytes(bytes, "roundtrip.gguf");

    CHECK(f->version() == 3);
    CHECK(f->tensors().empty());
    CHECK(f->get<uint8_t>("t.u8") == 255);
    CHECK(f->get<int8_t>("t.i8") == -1);
    CHECK(f->get<uint16_t>("t.u16") == 0xBEEF);
    CHECK(f->get<int16_t>("t.i16") == -32768);
    CHECK(f->get<uint32_t>("t.u32") == 0xDEADBEEF);
    CHECK(f->get<int32_t>("t.i32") == std::numeric_limits<int32_t>::min());
    CHECK(std::signbit(f->get<float>("t.f32")));
    CHECK(f->get<bool>("t.bool.true"));
    CHECK_FALSE(f->get<bool>("t.bool.false"));
    CHECK(f->get<std::string>("t.string") == std::string("h\xC3\xA9llo\n"));
    CHECK(f->get<std::string>("t.string.empty").empty());
    CHECK(f->get<uint64_t>("t.u64") == 0x0123456789ABCDEFull);
    CHECK(f->get<int64_t>("t.i64") == -1234567890123456789ll);
    CHECK(f->get<double>("t.f64") == 1e300);
    CHECK(f->get<std::vector<uint8_t>>("a.u8") == std::vector<uint8_t>{0, 255});
    CHECK(f->get<std::vector<int8_t>>("a.i8") == std::vector<int8_t>{-128, 127});
    CHECK(f->get<std::vector<uint16_t>>("a.u16") == std::vector<uint16_t>{1, 65535});
    CHECK(f->get<std::vector<int16_t>>("a.i16") == std::vector<int16_t>{-2});
    CHECK(f->get<std::vector<uint32_t>>("a.u32") == std::vector<uint32_t>{7});
    CHECK(f->get<std::vector<int32_t>>("a.i32").empty());
    CHECK(f->get<smol::gguf::ArrayView>("a.i32").element_type() == ValueType::i32);
    CHECK(f->get<std::vector<float>>("a.f32") == std::vector<float>{1.25f, -3.5f});
    CHECK(f->get<std::vector<uint64_t>>("a.u64") == std::vector<uint64_t>{uint64_t(1) << 63});
    CHECK(f->get<std::vector<int64_t>>("a.i64") == std::vector<int64_t>{-1});
    CHECK(f->get<std::vector<double>>("a.f64") == std::vector<double>{0.1});
    CHECK(f->get<std::vector<std::string>>("a.string") ==
          std::vector<std::string>{"", "two", std::string(300, 'z')});
    CHECK(f->get<std::string>("t.overwritten") == "last value wins");

    // Every value type appears at least once, as a value or an array element.
    std::map<ValueType, int> seen;
    for (const auto& kv : f->metadata()) {
        ++seen[kv.value.type()];
        if (kv.value.type() == ValueType::array) ++seen[kv.value.as_array().element_type()];
    }
    CHECK(seen.size() == 13);

    // The copied (forged) values keep their exact bytes.
    for (const auto& kv : forged->metadata()) {
        INFO("key '" << kv.key << "'");
        const auto* v = f->find_value("copied." + kv.key);
        REQUIRE(v != nullptr);
        REQUIRE(v->type() == kv.value.type());
        if (v->type() == ValueType::array) {
            REQUIRE(v->as_array().bytes() == kv.value.as_array().bytes());
            CHECK(std::memcmp(v->as_array().data(), kv.value.as_array().data(),
                              v->as_array().bytes()) == 0);
            CHECK(v->as_array().size() == kv.value.as_array().size());
        } else {
            CHECK(v->as_string() == kv.value.as_string());
        }
    }

    // Writing what we read gives identical bytes.
    CHECK(copy_into_writer(*f).to_bytes() == bytes);
}

TEST_CASE("GGUF version 2 is read; versions 1 and 4 are not") {
    Writer w;
    w.set_u32("answer", 42);
    w.add_tensor("t", GGMLType::F32, {4}, std::vector<float>{1, 2, 3, 4}.data(), 16);
    Bytes bytes = w.to_bytes();
    put_u32(bytes, 4, 2);
    const auto v2 = File::from_bytes(bytes, "v2.gguf");
    CHECK(v2->version() == 2);
    CHECK(v2->get<uint32_t>("answer") == 42);
    float x[4];
    std::memcpy(x, v2->tensor("t").data, 16);
    CHECK(x[3] == 4.0f);
    for (uint32_t version : {0u, 1u, 4u, 0x03000000u}) {
        put_u32(bytes, 4, version);
        expect_rejected(bytes, ErrorKind::unsupported,
                        "unsupported version " + std::to_string(version));
    }
}

TEST_CASE("tensors of every known type, at alignments 1, 8, 32 and 64") {
    std::vector<GGMLType> known;
    for (uint32_t id = 0; id < 64; ++id)
        if (smol::is_known_type(GGMLType(id))) known.push_back(GGMLType(id));
    CHECK(known.size() == 29);
    std::mt19937 rng(7);
    for (uint32_t alignment : {1u, 8u, 32u, 64u}) {
        INFO("alignment " << alignment);
        Writer w(alignment);
        w.set_string("general.architecture", "test");
        std::vector<Bytes> payloads;
        for (GGMLType type : known) {
            const auto traits = smol::type_traits(type);
            const std::vector<uint64_t> dims = {2 * uint64_t(traits.block_size), 3};
            Bytes data(smol::row_bytes(type, size_t(dims[0])) * 3);
            for (auto& b : data) b = uint8_t(rng());
            w.add_tensor(std::string("tensor.") + traits.name, type, dims, data.data(),
                         data.size());
            payloads.push_back(std::move(data));
        }
        // Odd-sized 1-D tensors force padding between tensors.
        const Bytes odd = {1, 2, 3};
        w.add_tensor("odd.i8", GGMLType::I8, {3}, odd.data(), odd.size());
        const Bytes bytes = w.to_bytes();
        const auto f = File::from_bytes(bytes, "types.gguf");
        CHECK(f->alignment() == alignment);
        CHECK(f->data_offset() % alignment == 0);
        REQUIRE(f->tensors().size() == known.size() + 1);
        for (size_t i = 0; i < known.size(); ++i) {
            const auto& t = f->tensors()[i];
            INFO("tensor " << t.name);
            CHECK(t.type == known[i]);
            CHECK(t.offset % alignment == 0);
            CHECK(size_t(t.data - f->bytes()) % alignment == 0);
            REQUIRE(t.n_bytes == payloads[i].size());
            CHECK(std::memcmp(t.data, payloads[i].data(), payloads[i].size()) == 0);
            CHECK(t.rows() == 3);
        }
        CHECK(std::memcmp(f->tensor("odd.i8").data, odd.data(), 3) == 0);
        check_same_content(*f, *File::from_bytes(copy_into_writer(*f).to_bytes()));
    }
    // The writer refuses what the reader would reject.
    Writer w;
    const Bytes four(4);
    CHECK_THROWS_AS(w.add_tensor("bad", GGMLType(99), {1}, four.data(), 4), smol::Error);
    CHECK_THROWS_AS(w.add_tensor("bad", GGMLType::F32, {2}, four.data(), 4), smol::Error);
    CHECK_THROWS_AS(w.add_tensor("bad", GGMLType::Q4_K, {1}, four.data(), 4), smol::Error);
    CHECK_THROWS_AS(w.add_tensor("bad", GGMLType::F32, {}, four.data(), 4), smol::Error);
    CHECK_THROWS_AS(Writer(3), smol::Error);
    CHECK_THROWS_AS(Writer(0), smol::Error);
}

// ---------------------------------------------------------------------------
TEST_CASE("forged counts, lengths, dims, offsets and alignments are rejected") {
    const uint64_t huge = uint64_t(1) << 62;
    const uint64_t max64 = std::numeric_limits<uint64_t>::max();
    SUBCASE("bad magic and short files") {
        for (size_t n = 0; n < 24; ++n) {
            Forge f;
            f.header(0, 0);
            f.b.resize(n);
            const Outcome o = parse_tracked(f.b);
            CHECK_FALSE(o.loaded);
            CHECK(o.kind == ErrorKind::format);
        }
        Forge f;
        f.u32(0x46554746).u32(3).u64(0).u64(0);
        expect_rejected(f.b, ErrorKind::format, "bad magic");
        Forge ggml;
        ggml.raw("lmgg", 4).zeros(60);
        expect_rejected(ggml.b, ErrorKind::format, "bad magic");
        expect_rejected(Bytes{}, ErrorKind::format, "too small");
    }
    SUBCASE("an empty but well-formed file loads") {
        Forge f;
        f.header(0, 0);
        CHECK(parse_tracked(f.b).loaded);
    }
    SUBCASE("huge counts") {
        expect_rejected(Forge().header(huge, 0).b, ErrorKind::format, "tensor count");
        expect_rejected(Forge().header(max64, 0).b, ErrorKind::format, "tensor count");
        expect_rejected(Forge().header(0, huge).b, ErrorKind::format, "metadata count");
        expect_rejected(Forge().header(0, max64).b, ErrorKind::format, "metadata count");
        // Counts that pass the size check: the smallest entries (13-byte
        // key/values, 32-byte tensor infos) fill the file exactly, so only
        // the reservation, not the check, stands between a forged count and
        // an allocation ~10x the file.
        expect_rejected(Forge().header(0, 10000).zeros(13 * 10000).b, ErrorKind::format,
                        "duplicate key ''");
        expect_rejected(Forge().header(10000, 0).zeros(32 * 10000).b, ErrorKind::format,
                        "has 0 dims");
        // Counts that pass the size check but overstate the entries present.
        Forge kv = Forge().header(0, 1000);
        kv.kv_u32("a", 1).zeros(2000);
        expect_rejected(kv.b, ErrorKind::format, "");
        Forge ts = Forge().header(300, 0);
        ts.tensor("t", {4}, 0, 0).zeros(300 * 32);
        expect_rejected(ts.b, ErrorKind::format, "");
    }
    SUBCASE("string lengths near 2^64") {
        for (uint64_t len : {max64, max64 - 7, huge, uint64_t(1) << 32, uint64_t(100)}) {
            Forge key = Forge().header(0, 1);
            key.u64(len).raw("abc", 3).zeros(16);
            expect_rejected(key.b, ErrorKind::format, "metadata key");
            Forge value = Forge().header(0, 1);
            value.str("k").u32(uint32_t(ValueType::string)).u64(len).raw("abc", 3);
            expect_rejected(value.b, ErrorKind::format, "string value");
            Forge name = Forge().header(1, 0);
            name.u64(len).zeros(40);
            expect_rejected(name.b, ErrorKind::format, "tensor name");
        }
    }
    SUBCASE("huge array counts") {
        for (uint32_t et : {uint32_t(ValueType::u8), uint32_t(ValueType::f64),
                            uint32_t(ValueType::string), uint32_t(ValueType::array)}) {
            for (uint64_t count : {max64, huge, max64 / 8 + 1, uint64_t(1) << 33, uint64_t(64)}) {
                INFO("element type " << et << " count " << count);
                Forge f = Forge().header(0, 1);
                f.str("k").u32(uint32_t(ValueType::array)).u32(et).u64(count).zeros(48);
                expect_rejected(f.b, ErrorKind::format, "truncated");
            }
        }
    }
    SUBCASE("invalid value types and malformed values") {
        Forge type = Forge().header(0, 1);
        type.str("key.x").u32(13).u32(0);
        expect_rejected(type.b, ErrorKind::format, "'key.x' has invalid type 13");
        Forge element = Forge().header(0, 1);
        element.str("k").u32(uint32_t(ValueType::array)).u32(99).u64(1).u32(0);
        expect_rejected(element.b, ErrorKind::format, "invalid array element type 99");
        Forge boolean = Forge().header(0, 1);
        boolean.str("k").u32(uint32_t(ValueType::boolean)).u8(2);
        expect_rejected(boolean.b, ErrorKind::format, "bool value 2");
        // Arrays nested beyond the reader's depth limit.
        Forge deep = Forge().header(0, 1);
        deep.str("k").u32(uint32_t(ValueType::array));
        for (int i = 0; i < 64; ++i) deep.u32(uint32_t(ValueType::array)).u64(1);
        deep.u32(uint32_t(ValueType::u8)).u64(0);
        expect_rejected(deep.b, ErrorKind::format, "nested too deeply");
        // Four levels of arrays (the limit) are fine.
        Forge ok = Forge().header(0, 1);
        ok.str("k").u32(uint32_t(ValueType::array));
        for (int i = 0; i < 3; ++i) ok.u32(uint32_t(ValueType::array)).u64(1);
        ok.u32(uint32_t(ValueType::u8)).u64(0);
        CHECK(parse_tracked(ok.b).loaded);
    }
    SUBCASE("duplicate keys and tensors") {
        Forge keys = Forge().header(0, 2);
        keys.kv_u32("same", 1).kv_u32("same", 2);
        expect_rejected(keys.b, ErrorKind::format, "duplicate key 'same'");
        Forge tensors = Forge().header(2, 0);
        tensors.tensor("w", {4}, 0, 0).tensor("w", {4}, 0, 32).pad_to(32).zeros(64);
        expect_rejected(tensors.b, ErrorKind::format, "duplicate tensor 'w'");
    }
    SUBCASE("tensor dims") {
        for (uint32_t n_dims : {0u, 5u, 0xFFFFFFFFu}) {
            Forge f = Forge().header(1, 0);
            f.str("w").u32(n_dims).u64(4).u64(4).u64(4).u64(4).u64(4).u32(0).u64(0).zeros(64);
            expect_rejected(f.b, ErrorKind::format, "'w' has " + std::to_string(n_dims) + " dims");
        }
        Forge zero = Forge().header(1, 0);
        zero.tensor("w", {4, 0}, 0, 0).pad_to(32).zeros(64);
        expect_rejected(zero.b, ErrorKind::format, "'w' has a zero dim");
        for (auto dims :
             {std::vector<uint64_t>{uint64_t(1) << 32, uint64_t(1) << 32},
              std::vector<uint64_t>{max64, 2}, std::vector<uint64_t>{65536, 65536, 65536, 65536},
              std::vector<uint64_t>{2, huge}}) {
            Forge f = Forge().header(1, 0);
            f.tensor("w", dims, 0, 0).pad_to(32).zeros(64);
            expect_rejected(f.b, ErrorKind::format, "'w' dims overflow");
        }
        // Fits in 64 bits but not in the file.
        Forge big = Forge().header(1, 0);
        big.tensor("w", {uint64_t(1) << 20, uint64_t(1) << 20}, 0, 0).pad_to(32).zeros(64);
        expect_rejected(big.b, ErrorKind::format, "'w'");
        Forge row = Forge().header(1, 0);
        row.tensor("w", {100, 2}, uint32_t(GGMLType::Q4_K), 0).pad_to(32).zeros(1024);
        expect_rejected(row.b, ErrorKind::format, "not a multiple of the Q4_K block size");
    }
    SUBCASE("tensor types") {
        for (uint32_t type : {4u, 5u, 31u, 39u, 1000u, 0xFFFFFFFFu}) {
            Forge f = Forge().header(1, 0);
            f.tensor("w", {256}, type, 0).pad_to(32).zeros(2048);
            expect_rejected(f.b, ErrorKind::unsupported, "unknown type id " + std::to_string(type));
        }
    }
    SUBCASE("tensor offsets") {
        Forge misaligned = Forge().header(1, 0);
        misaligned.tensor("w", {4}, 0, 4).pad_to(32).zeros(64);
        expect_rejected(misaligned.b, ErrorKind::format, "'w' offset 4 is not aligned");
        for (uint64_t offset : {uint64_t(64), uint64_t(1) << 40, max64 - 31, max64 / 32 * 32}) {
            Forge past = Forge().header(1, 0);
            past.tensor("w", {4}, 0, offset).pad_to(32).zeros(64);
            expect_rejected(past.b, ErrorKind::format, "extends past the end");
        }
        // The last byte of a tensor is the last byte of the file: fine; one short: not.
        Forge exact = Forge().header(1, 0);
        exact.tensor("w", {4}, 0, 32).pad_to(32).zeros(48);
        CHECK(parse_tracked(exact.b).loaded);
        exact.b.pop_back();
        expect_rejected(exact.b, ErrorKind::format, "extends past the end");
        // Header ends where the data section should begin.
        Forge nodata = Forge().header(1, 0);
        nodata.tensor("w", {4}, 0, 0);
        expect_rejected(nodata.b, ErrorKind::format, "data section missing");
    }
    SUBCASE("alignment values") {
        for (uint32_t al : {0u, 3u, 12u, 1u << 31, 0xFFFFFFFFu, 1u << 21}) {
            Forge f = Forge().header(1, 1);
            f.kv_u32("general.alignment", al).tensor("w", {4}, 0, 0).pad_to(64).zeros(64);
            expect_rejected(f.b, ErrorKind::format, "general.alignment " + std::to_string(al));
        }
        Forge wrong = Forge().header(0, 1);
        wrong.str("general.alignment").u32(uint32_t(ValueType::u64)).u64(32);
        expect_rejected(wrong.b, ErrorKind::format, "general.alignment must be u32");
        // Alignment 64: a tensor at offset 32 is misaligned.
        Forge al64 = Forge().header(1, 1);
        al64.kv_u32("general.alignment", 64).tensor("w", {4}, 0, 32).pad_to(64).zeros(128);
        expect_rejected(al64.b, ErrorKind::format, "not aligned to 64");
    }
}

TEST_CASE("every truncation of a real model file throws smol::Error") {
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return;
    const Bytes whole = read_all(*path);
    const auto full = File::from_buffer(whole.data(), whole.size());
    const size_t data_offset = full->data_offset();
    size_t tensors_end = 0;
    for (const auto& t : full->tensors())
        tensors_end = std::max(tensors_end, size_t(data_offset + t.offset + t.n_bytes));
    REQUIRE(tensors_end <= whole.size());

    std::vector<size_t> lengths;
    for (size_t n = 0; n < 4096; ++n) lengths.push_back(n);
    // Every length inside the first 4 KiB and at every tensor's edges, and
    // evenly spaced ones past them (a sample under the sanitizers, where each
    // parse of the 128k-token vocabulary is slow: support/sanitized.hpp).
    const size_t points = smol_test::kSanitized ? 200 : 2000;
    for (size_t k = 0; k <= points; ++k)
        lengths.push_back(4096 + (whole.size() - 4096) * k / points);
    for (size_t n :
         {data_offset - 1, data_offset, data_offset + 1, tensors_end - 1, whole.size() - 1})
        lengths.push_back(n);
    for (const auto& t : full->tensors()) {
        lengths.push_back(size_t(data_offset + t.offset + t.n_bytes) - 1);
        lengths.push_back(size_t(data_offset + t.offset));
    }

    size_t failures = 0, loaded = 0;
    Bytes prefix;
    for (size_t n : lengths) {
        // Inside the header the parser reads every byte: hand it an exact-size
        // copy so that a sanitizer would catch a read past the end. Past the
        // header it reads no tensor bytes, so a view of the original suffices.
        Outcome o;
        if (n <= data_offset) {
            prefix.assign(whole.begin(), whole.begin() + std::ptrdiff_t(n));
            prefix.shrink_to_fit();
            o = parse_tracked(prefix);
        } else {
            o = parse_tracked(whole.data(), n);
        }
        INFO("truncated to " << n << " bytes: " << o.message);
        CHECK(o.largest_alloc <= std::max(n, kAllocFloor));
        if (n >= tensors_end) {
            CHECK(o.loaded);
            ++loaded;
            continue;
        }
        REQUIRE_FALSE(o.loaded);
        CHECK(o.kind == ErrorKind::format);
        CHECK(o.message.find("hostile.gguf") != std::string::npos);
        if (n > data_offset)
            CHECK(o.message.find("extends past the end of the file") != std::string::npos);
        else
            CHECK((o.message.find("trunc") != std::string::npos ||
                   o.message.find("too small") != std::string::npos ||
                   o.message.find("exceeds the file size") != std::string::npos));
        ++failures;
    }
    CHECK(failures + loaded == lengths.size());
    MESSAGE("truncations checked: " << lengths.size() << " (" << failures << " rejected)");
}

namespace {
// A small file shaped like a real model: the fixture's metadata with the big
// tokenizer arrays cut to 64 entries, and tensors with the fixture's names and
// types but two rows each.
Bytes miniature_model(const File& src) {
    Writer w(src.alignment());
    for (const auto& kv : src.metadata()) {
        const auto& v = kv.value;
        if (v.type() == ValueType::array && v.as_array().size() > 64) {
            const auto& a = v.as_array();
            if (a.element_type() == ValueType::string) {
                auto all = a.strings();
                all.resize(64);
                w.set_strings(kv.key, all);
            } else {
                auto ints = a.to_vector<int32_t>();
                ints.resize(64);
                w.set_array<int32_t>(kv.key, ints);
            }
        } else {
            w.copy_value(kv.key, v);
        }
    }
    for (const auto& t : src.tensors()) {
        const std::vector<uint64_t> dims = {t.dims[0], 2};
        w.add_tensor(t.name, t.type, dims, t.data, smol::row_bytes(t.type, size_t(t.dims[0])) * 2);
    }
    return w.to_bytes();
}
}  // namespace

TEST_CASE("random byte flips in the header either load or throw smol::Error") {
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return;
    const auto real = File::open(*path);
    const Bytes base = miniature_model(*real);
    const auto parsed = File::from_bytes(base);
    const size_t header = parsed->data_offset();
    REQUIRE(header > 1000);

    std::mt19937_64 rng(0x5EED);
    size_t loaded = 0, rejected = 0;
    Bytes mutated;
    for (int iter = 0; iter < 4000; ++iter) {
        mutated = base;
        const int flips = 1 + int(rng() % 4);
        for (int k = 0; k < flips; ++k) {
            // Half the flips hit the first 64 bytes (header, first key), where
            // counts and lengths live; the rest anywhere before the data.
            const size_t at = (rng() & 1) ? size_t(rng() % 64) : size_t(rng() % header);
            const uint8_t mask = uint8_t(1u << (rng() % 8)) | uint8_t((rng() % 4 == 0) ? rng() : 0);
            mutated[at] ^= mask;
        }
        const Outcome o = parse_tracked(mutated);
        INFO("iteration " << iter << ": " << o.message);
        CHECK(o.largest_alloc <= std::max(mutated.size(), kAllocFloor));
        if (o.loaded) {
            ++loaded;
        } else {
            ++rejected;
            CHECK(!o.message.empty());
        }
    }
    CHECK(rejected > 0);
    MESSAGE("byte flips: " << loaded << " loaded, " << rejected << " rejected");

    // A few hundred flips in the real file's first 64 KiB (token strings and
    // their lengths), parsed in full.
    const Bytes whole = read_all(*path);
    Bytes copy = whole;
    for (int iter = 0; iter < 200; ++iter) {
        const size_t at = size_t(rng() % 65536);
        const uint8_t mask = uint8_t(1u << (rng() % 8));
        copy[at] ^= mask;
        const Outcome o = parse_tracked(copy);
        CHECK(o.largest_alloc <= copy.size());
        copy[at] ^= mask;
    }
}

TEST_CASE("opening paths: missing file, directory, empty file, FIFO, device, null buffer") {
    auto expect = [](const std::string& path, ErrorKind kind, const std::string& needle) {
        try {
            File::open(path);
            FAIL("opened " << path);
        } catch (const smol::Error& e) {
            CHECK(e.kind() == kind);
            CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
        }
    };
    expect("/nonexistent/dir/model.gguf", ErrorKind::io, "/nonexistent/dir/model.gguf");
    expect("/tmp", ErrorKind::io, "directory");
    const std::string empty = "/tmp/smol_test_gguf_empty_" + std::to_string(::getpid()) + ".gguf";
    { std::ofstream(empty, std::ios::binary); }
    expect(empty, ErrorKind::format, "empty");
    std::remove(empty.c_str());

    // Not a regular file: refused before anything is read. A FIFO without a
    // writer would block a plain open() forever.
    expect("/dev/null", ErrorKind::io, "not a regular file");
    const std::string fifo = "/tmp/smol_test_gguf_fifo_" + std::to_string(::getpid());
    std::remove(fifo.c_str());
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    expect(fifo, ErrorKind::io, "not a regular file");
    std::remove(fifo.c_str());

    // A null buffer is an Error, not a dereference.
    CHECK_THROWS_AS(File::from_buffer(nullptr, 64), smol::Error);
    CHECK_THROWS_AS(smol::Model::load_from_memory(nullptr, 1024), smol::Error);

    // write_file + open agree with to_bytes.
    Writer w;
    w.set_string("general.architecture", "smollm3");
    w.add_tensor("x", GGMLType::F16, {8}, std::vector<uint16_t>(8, 0x3c00).data(), 16);
    const std::string path = "/tmp/smol_test_gguf_" + std::to_string(::getpid()) + ".gguf";
    w.write_file(path);
    {
        const auto f = File::open(path);
        CHECK(f->source() == path);
        CHECK(f->size() == w.to_bytes().size());
        CHECK(f->mapping().size() == f->size());
        check_same_content(*f, *File::from_bytes(w.to_bytes()));
    }
    std::remove(path.c_str());
    CHECK_THROWS_AS(w.write_file("/nonexistent/dir/out.gguf"), smol::Error);
}

// ---------------------------------------------------------------------------
// Regressions found by fuzzing (tests/fuzz/README.md).

// fuzz_gguf, crash-6a9dd3da: an f32 array (1.89e31 among its elements) read
// with ArrayView::to_vector<int64_t> converted an out-of-range float to an
// integer, which is undefined behaviour. Now float arrays refuse integer
// targets and integer elements are range-checked.
TEST_CASE("regression: to_vector<integer> of a float array throws instead of overflowing") {
    const Bytes crash = {
        0x47, 0x47, 0x55, 0x46, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x67, 0x65, 0x7e, 0x6e, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x15, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x74, 0x6f, 0x6b, 0x65, 0x6e,
        0x69, 0x7a, 0x65, 0x72, 0x2e, 0x67, 0x67, 0x6d, 0x6c, 0x2e, 0x6d, 0x65, 0x72, 0x67,
        0x65, 0x73, 0x09, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x6f, 0x73, 0x2f, 0x6e};
    const auto f = File::from_bytes(crash, "crash.gguf");
    const auto merges = f->get<smol::gguf::ArrayView>("tokenizer.ggml.merges");
    REQUIRE(merges.element_type() == ValueType::f32);
    CHECK(merges.size() == 5);
    CHECK(merges.to_vector<double>()[4] > 1e31);
    try {
        (void)merges.to_vector<int64_t>();
        FAIL("converted floats to integers");
    } catch (const smol::Error& e) {
        CHECK(e.kind() == ErrorKind::type);
        CHECK(std::string(e.what()).find("f32") != std::string::npos);
    }

    Writer w;
    w.set_array<uint64_t>("big", {1, uint64_t(1) << 40});
    w.set_array<int32_t>("negative", {3, -1});
    w.set_array<int8_t>("small", {-5, 7});
    w.set_array<uint8_t>("bytes", {0, 1, 2});
    w.set_array<double>("doubles", {0.5, -1e300});
    const auto g = File::from_bytes(w.to_bytes(), "ranges.gguf");
    auto array = [&](const char* key) { return g->get<smol::gguf::ArrayView>(key); };
    CHECK_THROWS_AS(array("big").to_vector<int32_t>(), smol::Error);
    CHECK(array("big").to_vector<int64_t>() == std::vector<int64_t>{1, int64_t(1) << 40});
    CHECK_THROWS_AS(array("negative").to_vector<uint32_t>(), smol::Error);
    CHECK(array("negative").to_vector<int16_t>() == std::vector<int16_t>{3, -1});
    CHECK(array("small").to_vector<int64_t>() == std::vector<int64_t>{-5, 7});
    CHECK_THROWS_AS(array("small").to_vector<uint8_t>(), smol::Error);
    CHECK_THROWS_AS(array("bytes").to_vector<bool>(), smol::Error);
    CHECK_THROWS_AS(array("doubles").to_vector<int>(), smol::Error);
    CHECK(array("doubles").to_vector<double>() == std::vector<double>{0.5, -1e300});
    CHECK_THROWS_AS(g->get<std::vector<uint32_t>>("negative"), smol::Error);
}
