// Tests of generator sessions: save / restore to bytes, fork, reset, and the
// "many NPCs from one prefilled system prompt" pattern, on models made in
// memory (byte vocabulary, random weights); the session checksum (CRC-32C)
// and what it must catch (every single-byte corruption, truncation, the old
// unchecked version 1).
#include <doctest/doctest.h>

#include <smol/detail/bytes.hpp>
#include <smol/detail/crc32c.hpp>
#include <smol/generator.hpp>

#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/fixtures.hpp"
#include "support/generator_testutil.hpp"

// In a namespace of its own: tests/CMakeLists.txt compiles it in one unit with
// the other files of its group.
namespace test_session {

using smol_test::made_model;

namespace {

smol::GenerateParams sampled(int max_tokens, uint64_t seed) {
    smol::GenerateParams p;
    p.max_tokens = max_tokens;
    p.temperature = 0.8f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    p.ignore_eos = true;
    return p;
}

const std::vector<smol::ChatMessage> kSystem = {
    {"system", "You are a villager in a small medieval town. Answer briefly."}};

smol::ChatOptions no_generation_prompt() {
    smol::ChatOptions options;
    options.add_generation_prompt = false;
    options.enable_thinking = false;
    options.today = "21 November 2026";
    return options;
}

template <class F>
smol::Error expect_error(F&& f) {
    try {
        f();
    } catch (const smol::Error& e) {
        return e;
    }
    FAIL("expected a smol::Error");
    return smol::Error(smol::ErrorKind::internal, "unreachable");
}

// Bit at a time, straight from the definition: what the table-driven version must match.
uint32_t crc32c_bitwise(const uint8_t* data, size_t size) {
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < size; ++i) {
        crc ^= data[i];
        for (int bit = 0; bit < 8; ++bit) crc = (crc & 1u) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    }
    return ~crc;
}

uint32_t crc32c_of(const std::string& text) {
    return smol::detail::crc32c(text.data(), text.size());
}

}  // namespace

TEST_CASE("save and restore give an identical continuation") {
    auto model = made_model();
    smol::Generator original(model);
    original.generate("The blacksmith looked up and said", sampled(16, 7));
    const std::vector<uint8_t> bytes = original.save_session();
    const std::vector<int32_t> saved_history = original.history();
    const size_t saved_cached = original.n_cached();

    smol::Generator restored(model);
    restored.restore_session(bytes);
    CHECK(restored.history() == saved_history);
    CHECK(restored.n_cached() == saved_cached);

    // Continue both with the whole context plus a new line: both reuse the
    // whole cache and sample the same tokens.
    // (As ids: the random model's text need not be valid UTF-8.)
    std::vector<int32_t> next = saved_history;
    const auto more = model->tokenizer().encode("\nThe baker replied", false);
    next.insert(next.end(), more.begin(), more.end());
    const auto a = original.generate_tokens(next, sampled(24, 99));
    const auto b = restored.generate_tokens(next, sampled(24, 99));
    CHECK(a.n_reused_tokens == b.n_reused_tokens);
    CHECK(a.n_reused_tokens == saved_cached);
    CHECK(a.tokens == b.tokens);
    CHECK(a.text == b.text);

    // Restoring also replaces whatever a generator held before.
    smol::Generator busy(model);
    busy.generate("Something else entirely", sampled(8, 1));
    busy.restore_session(bytes);
    CHECK(busy.history() == saved_history);
    CHECK(busy.generate_tokens(next, sampled(24, 99)).tokens == a.tokens);
}

TEST_CASE("fork gives an identical, independent continuation") {
    auto model = made_model();
    smol::Generator base(model);
    const size_t prefilled = base.prefill_chat(kSystem, no_generation_prompt());
    CHECK(prefilled > 20);
    CHECK(base.n_cached() == prefilled);

    smol::Generator branch = base.fork();
    CHECK(branch.history() == base.history());
    CHECK(branch.n_cached() == base.n_cached());

    smol::GenerateParams p = sampled(20, 5);
    p.chat = no_generation_prompt();
    p.chat.add_generation_prompt = true;
    std::vector<smol::ChatMessage> conversation = kSystem;
    conversation.push_back({"user", "Good morning!"});
    const auto from_branch = branch.chat(conversation, p);
    const auto from_base = base.chat(conversation, p);
    CHECK(from_branch.tokens == from_base.tokens);
    CHECK(from_branch.n_reused_tokens == prefilled);
    CHECK(from_base.n_reused_tokens == prefilled);

    // Advancing one does not touch the other: the fork shares nothing mutable.
    smol::Generator second = base.fork();
    const std::vector<int32_t> before = second.history();
    base.generate("A completely different story", sampled(8, 3));
    base.reset();
    CHECK(second.history() == before);
    CHECK(second.chat(conversation, p).tokens == from_base.tokens);
}

TEST_CASE("many NPCs forked from one prefilled system prompt, on threads") {
    auto model = made_model();
    smol::Generator base(model);
    const size_t prefilled = base.prefill_chat(kSystem, no_generation_prompt());
    const std::vector<std::string> lines = {"Any news?", "What do you sell?", "Where is the inn?"};
    smol::GenerateParams p = sampled(12, 11);
    p.chat = no_generation_prompt();
    p.chat.add_generation_prompt = true;

    std::vector<smol::Generator> npcs;
    for (size_t i = 0; i < lines.size(); ++i) npcs.push_back(base.fork());
    std::vector<smol::GenerateResult> results(lines.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < lines.size(); ++i)
        threads.emplace_back([&, i] {
            std::vector<smol::ChatMessage> conversation = kSystem;
            conversation.push_back({"user", lines[i]});
            results[i] = npcs[i].chat(conversation, p);
        });
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < lines.size(); ++i) {
        CHECK(results[i].n_reused_tokens == prefilled);
        CHECK(results[i].tokens.size() == 12);
        // The same as a fresh generator running the whole conversation.
        smol::Generator fresh(model);
        std::vector<smol::ChatMessage> conversation = kSystem;
        conversation.push_back({"user", lines[i]});
        CHECK(fresh.chat(conversation, p).tokens == results[i].tokens);
    }
}

TEST_CASE("a session from another model is rejected, the generator keeps its state") {
    auto model = made_model(1);
    auto other = made_model(2);
    REQUIRE(model->identity() != other->identity());
    smol::Generator gen(model);
    gen.generate("Hello", sampled(4, 1));
    const auto bytes = gen.save_session();

    smol::Generator foreign(other);
    foreign.generate("Keep me", sampled(4, 1));
    const auto kept = foreign.history();
    const smol::Error e = expect_error([&] { foreign.restore_session(bytes); });
    CHECK(e.kind() == smol::ErrorKind::invalid_argument);
    CHECK(std::string(e.what()).find(model->identity()) != std::string::npos);
    CHECK(std::string(e.what()).find(other->identity()) != std::string::npos);
    CHECK(foreign.history() == kept);
    CHECK(foreign.generate("Keep me", sampled(4, 1)).n_reused_tokens > 0);
}

TEST_CASE("malformed session bytes are format errors, never crashes") {
    auto model = made_model();
    smol::Generator gen(model);
    gen.generate("Hello there", sampled(4, 1));
    const auto bytes = gen.save_session();

    smol::Generator target(model);
    // Every truncation of the header and history, and some of the cache.
    for (size_t n = 0; n < bytes.size(); n += (n < 256 ? 1 : 97)) {
        const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + long(n));
        const smol::Error e = expect_error([&] { target.restore_session(cut); });
        CHECK(e.kind() != smol::ErrorKind::internal);
    }
    std::vector<uint8_t> bad_magic = bytes;
    bad_magic[0] = 'X';
    CHECK(expect_error([&] { target.restore_session(bad_magic); }).kind() ==
          smol::ErrorKind::format);
    std::vector<uint8_t> trailing = bytes;
    trailing.push_back(0);
    CHECK(expect_error([&] { target.restore_session(trailing); }).kind() ==
          smol::ErrorKind::format);
    // A history count far past the data.
    std::vector<uint8_t> huge = bytes;
    const size_t identity_size = model->identity().size();
    const size_t count_at = 16 + 8 + identity_size;
    for (size_t i = 0; i < 8; ++i) huge[count_at + i] = 0xFF;
    CHECK(expect_error([&] { target.restore_session(huge); }).kind() == smol::ErrorKind::format);
    CHECK(target.history().empty());
    target.restore_session(bytes);
    CHECK(target.history() == gen.history());
}

TEST_CASE("a session longer than the generator's context is out_of_range") {
    auto model = made_model();
    smol::Generator big(model);
    big.generate("one two three four five six seven eight nine ten eleven twelve", sampled(30, 1));
    const auto bytes = big.save_session();
    smol::GeneratorOptions small_options;
    small_options.n_ctx = 16;
    smol::Generator small(model, small_options);
    CHECK(expect_error([&] { small.restore_session(bytes); }).kind() ==
          smol::ErrorKind::out_of_range);
}

TEST_CASE("reset forgets the history and the cache") {
    auto model = made_model();
    smol::Generator gen(model);
    const auto first = gen.generate("Once upon a time", sampled(8, 4));
    gen.reset();
    CHECK(gen.history().empty());
    CHECK(gen.n_cached() == 0);
    const auto again = gen.generate("Once upon a time", sampled(8, 4));
    CHECK(again.n_reused_tokens == 0);
    CHECK(again.tokens == first.tokens);
}

TEST_CASE("crc32c: the standard check value and known vectors") {
    CHECK(crc32c_of("123456789") == 0xE3069283u);
    CHECK(crc32c_of("") == 0u);
    CHECK(crc32c_of("a") == 0xC1D04330u);
    CHECK(crc32c_of("The quick brown fox jumps over the lazy dog") == 0x22620404u);
    // RFC 3720 (iSCSI) appendix B.4: 32-byte patterns.
    uint8_t block[32];
    std::memset(block, 0x00, sizeof block);
    CHECK(smol::detail::crc32c(block, sizeof block) == 0x8A9136AAu);
    std::memset(block, 0xFF, sizeof block);
    CHECK(smol::detail::crc32c(block, sizeof block) == 0x62A8AB43u);
    for (int i = 0; i < 32; ++i) block[i] = uint8_t(i);
    CHECK(smol::detail::crc32c(block, sizeof block) == 0x46DD794Eu);
    for (int i = 0; i < 32; ++i) block[i] = uint8_t(31 - i);
    CHECK(smol::detail::crc32c(block, sizeof block) == 0x113FDB5Cu);
}

TEST_CASE("crc32c: slicing-by-8 matches the bitwise definition at every length, offset and split") {
    std::mt19937_64 rng(42);
    std::vector<uint8_t> bytes(4096 + 16);
    for (auto& b : bytes) b = uint8_t(rng());
    for (size_t offset = 0; offset < 8; ++offset)
        for (size_t n = 0; n < 300; ++n)
            REQUIRE(smol::detail::crc32c(bytes.data() + offset, n) ==
                    crc32c_bitwise(bytes.data() + offset, n));
    const size_t n = 4096 + 5;
    const uint32_t whole = crc32c_bitwise(bytes.data() + 3, n);
    CHECK(smol::detail::crc32c(bytes.data() + 3, n) == whole);
    for (size_t split = 0; split <= n; split += (split < 40 ? 1 : 257)) {
        const uint32_t head = smol::detail::crc32c(bytes.data() + 3, split);
        REQUIRE(smol::detail::crc32c_update(head, bytes.data() + 3 + split, n - split) == whole);
    }
}

namespace {

// A generator with some state of its own, to check a failed restore leaves it alone.
struct Bystander {
    smol::Generator gen;
    std::vector<int32_t> history;
    size_t cached;
    explicit Bystander(std::shared_ptr<const smol::Model> model) : gen(std::move(model)) {
        gen.generate("Keep this state", sampled(3, 2));
        history = gen.history();
        cached = gen.n_cached();
    }
    bool unchanged() const { return gen.history() == history && gen.n_cached() == cached; }
};

bool rejected_kind(smol::ErrorKind kind) {
    return kind == smol::ErrorKind::format || kind == smol::ErrorKind::unsupported ||
           kind == smol::ErrorKind::invalid_argument;
}

}  // namespace

TEST_CASE("every single-byte corruption of a session is detected, the generator keeps its state") {
    auto model = made_model();
    smol::Generator gen(model);
    gen.generate("The miller counted his sacks", sampled(6, 3));
    const auto bytes = gen.save_session();
    REQUIRE(bytes.size() > 4096);
    Bystander target(model);

    // Every byte of the header, identity, history and the cache's own header,
    // with several corruptions each; then a sample of the cache's payload.
    std::mt19937_64 rng(7);
    std::vector<size_t> positions;
    for (size_t i = 0; i < 512; ++i) positions.push_back(i);
    for (size_t i = 0; i < 2000; ++i)
        positions.push_back(512 + size_t(rng() % (bytes.size() - 512)));
    positions.push_back(bytes.size() - 1);
    size_t detected = 0, trials = 0;
    std::vector<uint8_t> damaged = bytes;
    for (size_t at : positions) {
        const uint8_t deltas[] = {0x01, 0x80, 0xFF, uint8_t(1 + rng() % 255)};
        for (uint8_t delta : deltas) {
            damaged[at] = uint8_t(bytes[at] ^ delta);
            smol::ErrorInfo error;
            const bool restored =
                target.gen.try_restore_session(damaged.data(), damaged.size(), &error);
            ++trials;
            if (!restored && rejected_kind(error.kind)) {
                ++detected;
            } else {
                FAIL_CHECK("byte " << at << " ^ " << int(delta) << " went undetected (restored "
                                   << restored << ", kind "
                                   << std::string(smol::to_string(error.kind)) << ")");
            }
            REQUIRE(target.unchanged());
        }
        damaged[at] = bytes[at];
    }
    CHECK(detected == trials);

    // A flipped checksum, a flipped payload byte: named as corruption.
    damaged[12] ^= 0x10;
    const smol::Error on_crc = expect_error([&] { target.gen.restore_session(damaged); });
    CHECK(on_crc.kind() == smol::ErrorKind::format);
    CHECK(std::string(on_crc.what()).find("checksum mismatch") != std::string::npos);
    damaged = bytes;
    damaged[bytes.size() / 2] ^= 0x04;
    CHECK(expect_error([&] { target.gen.restore_session(damaged); }).kind() ==
          smol::ErrorKind::format);
    CHECK(target.unchanged());

    // The untouched bytes still restore.
    target.gen.restore_session(bytes);
    CHECK(target.gen.history() == gen.history());
    CHECK(target.gen.n_cached() == gen.n_cached());
}

TEST_CASE("a truncated or extended session is rejected at every length") {
    auto model = made_model();
    smol::Generator gen(model);
    gen.generate("A short tale", sampled(5, 8));
    const auto bytes = gen.save_session();
    Bystander target(model);
    for (size_t n = 0; n < bytes.size(); n += (n < 1024 ? 1 : 61)) {
        smol::ErrorInfo error;
        REQUIRE_FALSE(target.gen.try_restore_session(bytes.data(), n, &error));
        CHECK(rejected_kind(error.kind));
        REQUIRE(target.unchanged());
    }
    smol::ErrorInfo error;
    CHECK_FALSE(target.gen.try_restore_session(bytes.data(), bytes.size() - 1, &error));
    std::vector<uint8_t> longer = bytes;
    longer.push_back(0);
    CHECK_FALSE(target.gen.try_restore_session(longer.data(), longer.size(), &error));
    CHECK(error.kind == smol::ErrorKind::format);
    CHECK_FALSE(target.gen.try_restore_session(nullptr, 100, &error));
    CHECK(target.unchanged());
}

TEST_CASE("a version-1 session (reserved word, no checksum) is unsupported") {
    auto model = made_model();
    smol::Generator gen(model);
    gen.generate("An old save", sampled(4, 6));
    const auto v2 = gen.save_session();
    // Version 1 had the same body after a 16-byte header whose last word was a reserved 0.
    std::vector<uint8_t> v1(v2.begin(), v2.begin() + 8);
    smol::detail::append_le<uint32_t>(v1, 1);
    smol::detail::append_le<uint32_t>(v1, 0);
    v1.insert(v1.end(), v2.begin() + 16, v2.end());

    Bystander target(model);
    const smol::Error e = expect_error([&] { target.gen.restore_session(v1); });
    CHECK(e.kind() == smol::ErrorKind::unsupported);
    CHECK(std::string(e.what()).find("version 1 is no longer supported") != std::string::npos);
    CHECK(target.unchanged());

    // A future version, checksum and all, is unsupported too (not a checksum error).
    std::vector<uint8_t> v3 = v2;
    v3[8] = 3;
    const uint32_t crc = smol::detail::session_checksum(v3.data(), v3.size());
    smol::detail::write_le<uint32_t>(v3.data(), 12, crc);
    CHECK(expect_error([&] { target.gen.restore_session(v3); }).kind() ==
          smol::ErrorKind::unsupported);
    CHECK(target.unchanged());
}

TEST_CASE("the checksum covers the magic, the version and the body, not itself") {
    auto model = made_model();
    smol::Generator gen(model);
    gen.generate("Count me", sampled(3, 9));
    const auto bytes = gen.save_session();
    const uint32_t stored = smol::detail::read_le<uint32_t>(bytes.data(), 12);
    const uint32_t expected = smol::detail::crc32c_update(smol::detail::crc32c(bytes.data(), 12),
                                                          bytes.data() + 16, bytes.size() - 16);
    CHECK(stored == expected);
    CHECK(bytes[8] == 2);  // the version
}

TEST_CASE("sessions are portable across generators and instances of the same model") {
    auto model = made_model(1, 2);
    auto same_file = made_model(1, 1);  // a second Model loaded from the same bytes
    REQUIRE(model.get() != same_file.get());
    REQUIRE(model->identity() == same_file->identity());
    smol::Generator original(model);
    original.generate("The shepherd counted", sampled(10, 21));
    const auto bytes = original.save_session();
    const std::vector<int32_t> saved_history = original.history();
    const size_t saved_cached = original.n_cached();

    std::vector<int32_t> next = saved_history;
    const auto more = model->tokenizer().encode(" and then", false);
    next.insert(next.end(), more.begin(), more.end());
    const auto expected = original.generate_tokens(next, sampled(12, 5));

    smol::GeneratorOptions wider;
    wider.n_ctx = 2048;
    smol::Generator other_ctx(model, wider);
    smol::Generator other_instance(same_file);
    for (smol::Generator* gen : {&other_ctx, &other_instance}) {
        gen->restore_session(bytes);
        CHECK(gen->history() == saved_history);
        CHECK(gen->n_cached() == saved_cached);
        const auto continued = gen->generate_tokens(next, sampled(12, 5));
        CHECK(continued.n_reused_tokens == expected.n_reused_tokens);
        CHECK(continued.tokens == expected.tokens);
        // A session saved by the restored generator restores in turn.
        smol::Generator again(model);
        again.restore_session(gen->save_session());
        CHECK(again.history() == gen->history());
        CHECK(again.n_cached() == gen->n_cached());
    }
}

namespace {

smol::GeneratorOptions q8_0_options() {
    smol::GeneratorOptions options;
    options.kv_type = smol::KVType::q8_0;
    return options;
}

// Offset of the serialized cache (its "SMKV" header) in a session's bytes.
size_t kv_offset(const std::vector<uint8_t>& session) {
    size_t pos = 16;
    pos += 8 + size_t(smol::detail::read_le<uint64_t>(session.data(), pos));
    pos += 8 + 4 * size_t(smol::detail::read_le<uint64_t>(session.data(), pos));
    return pos + 8;
}

void reseal(std::vector<uint8_t>& session) {
    smol::detail::write_le<uint32_t>(
        session.data(), 12, smol::detail::session_checksum(session.data(), session.size()));
}

}  // namespace

TEST_CASE("a q8_0 cache holds 34/64 of F16's bytes; other head dims are unsupported") {
    auto model = made_model();
    const smol::KVCache f16 = model->make_cache(256);
    const smol::KVCache q8 = model->make_cache(256, smol::KVType::q8_0);
    CHECK(q8.type() == smol::KVType::q8_0);
    CHECK(q8.row_bytes() == model->config().head_dim / 32 * 34);
    CHECK(q8.bytes() * 64 == f16.bytes() * 34);
    smol::Config odd = model->config();
    odd.head_dim = 48;
    const auto refused = smol::KVCache::try_create(odd, 256, smol::KVType::q8_0);
    REQUIRE(!refused);
    CHECK(refused.error().kind == smol::ErrorKind::unsupported);
    CHECK(smol::KVCache::try_create(odd, 256, smol::KVType::f16));
    CHECK(smol::parse_kv_type("q8_0") == smol::KVType::q8_0);
    CHECK(!smol::parse_kv_type("q4_0"));
}

TEST_CASE("q8_0 sessions: save and restore round trip, the restoring cache takes the type") {
    auto model = made_model();
    smol::Generator original(model, q8_0_options());
    original.generate("The blacksmith looked up and said", sampled(16, 7));
    const std::vector<uint8_t> bytes = original.save_session();
    const size_t kv = kv_offset(bytes);
    REQUIRE(kv + 32 <= bytes.size());
    CHECK(smol::detail::read_le<uint32_t>(bytes.data(), kv + 8) == 2);  // the type code
    const size_t rows = 2 * model->config().n_layers * model->config().n_kv_heads;
    CHECK(bytes.size() - kv - 32 ==
          rows * original.n_cached() * (model->config().head_dim / 32 * 34));

    // An F16 generator restores it as q8_0 (the saved type), bit for bit.
    smol::Generator restored(model);
    restored.restore_session(bytes);
    CHECK(restored.history() == original.history());
    CHECK(restored.save_session() == bytes);
    std::vector<int32_t> next = original.history();
    const auto more = model->tokenizer().encode("\nThe baker replied", false);
    next.insert(next.end(), more.begin(), more.end());
    const auto a = original.generate_tokens(next, sampled(24, 99));
    const auto b = restored.generate_tokens(next, sampled(24, 99));
    CHECK(a.n_reused_tokens == b.n_reused_tokens);
    CHECK(a.tokens == b.tokens);

    // And a q8_0 generator restores an F16 session as F16.
    smol::Generator f16(model);
    f16.generate("Hello there", sampled(4, 1));
    const auto f16_bytes = f16.save_session();
    smol::Generator q8(model, q8_0_options());
    q8.restore_session(f16_bytes);
    CHECK(q8.save_session() == f16_bytes);
}

TEST_CASE("a fork of a q8_0 generator continues identically") {
    auto model = made_model();
    smol::Generator base(model, q8_0_options());
    const size_t prefilled = base.prefill_chat(kSystem, no_generation_prompt());
    smol::Generator branch = base.fork();
    CHECK(branch.save_session() == base.save_session());
    smol::GenerateParams p = sampled(20, 5);
    p.chat = no_generation_prompt();
    p.chat.add_generation_prompt = true;
    std::vector<smol::ChatMessage> conversation = kSystem;
    conversation.push_back({"user", "Good morning!"});
    const auto from_branch = branch.chat(conversation, p);
    const auto from_base = base.chat(conversation, p);
    CHECK(from_branch.tokens == from_base.tokens);
    CHECK(from_branch.n_reused_tokens == prefilled);
    CHECK(branch.save_session() == base.save_session());
}

TEST_CASE("hostile q8_0 sessions: type codes and row sizes that disagree are rejected") {
    auto model = made_model();
    smol::Generator q8(model, q8_0_options());
    q8.generate("The miller counted his sacks", sampled(6, 3));
    const auto q8_bytes = q8.save_session();
    smol::Generator f16(model);
    f16.generate("The miller counted his sacks", sampled(6, 3));
    const auto f16_bytes = f16.save_session();
    Bystander target(model);
    auto rejected = [&](std::vector<uint8_t> session) {
        reseal(session);
        smol::ErrorInfo error;
        const bool restored =
            target.gen.try_restore_session(session.data(), session.size(), &error);
        CHECK_FALSE(restored);
        CHECK(error.kind == smol::ErrorKind::format);
        CHECK(target.unchanged());
    };
    const size_t q8_kv = kv_offset(q8_bytes), f16_kv = kv_offset(f16_bytes);
    // Q8_0 rows read as F16 or F32, and F16 rows read as Q8_0: the payload's
    // size is checked against the type's row size before anything is copied.
    for (const uint32_t type : {0u, 1u, 3u, 0xFFFFFFFFu}) {
        auto relabeled = q8_bytes;
        smol::detail::write_le<uint32_t>(relabeled.data(), q8_kv + 8, type);
        rejected(relabeled);
    }
    auto as_q8 = f16_bytes;
    smol::detail::write_le<uint32_t>(as_q8.data(), f16_kv + 8, 2);
    rejected(as_q8);
    // A q8_0 payload one block short, one byte short, one byte long (the kv
    // length field kept consistent with the bytes).
    for (const long delta : {-34L, -1L, 1L}) {
        auto resized = q8_bytes;
        resized.resize(size_t(long(resized.size()) + delta));
        smol::detail::write_le<uint64_t>(resized.data(), q8_kv - 8, resized.size() - q8_kv);
        rejected(resized);
    }
    // A size field claiming more positions than the payload holds.
    auto longer = q8_bytes;
    smol::detail::write_le<uint64_t>(longer.data(), q8_kv + 24, q8.n_cached() + 1);
    rejected(longer);
    // The untouched bytes still restore.
    target.gen.restore_session(q8_bytes);
    CHECK(target.gen.save_session() == q8_bytes);
}

// --- shared prefixes: forks share the cache's blocks until they write them ---

namespace {

smol::GenerateParams greedy(int max_tokens) {
    smol::GenerateParams p;
    p.max_tokens = max_tokens;
    p.temperature = 0.0f;
    p.ignore_eos = true;
    return p;
}

// Bytes of one block of 64 positions of `model`'s cache (model/kv_blocks.hpp).
uint64_t block_bytes(const smol::Model& model, smol::KVType type) {
    const smol::Config& c = model.config();
    return uint64_t(2 * c.n_layers * c.n_kv_heads) * smol::KVCache::kBlockPositions *
           smol::kv_row_bytes(type, c.head_dim);
}

uint64_t blocks(size_t positions) {
    return (positions + smol::KVCache::kBlockPositions - 1) / smol::KVCache::kBlockPositions;
}

// A prefix of 200 tokens (three full blocks and a partial one) and eight continuations.
std::vector<int32_t> world_prefix(const smol::Model& model) {
    std::string world;
    for (int i = 0; i < 10; ++i)
        world +=
            "The village of Elder Ford sits where two rivers meet; its mill turns day and "
            "night. ";
    std::vector<int32_t> ids = model.tokenizer().encode(world, false);
    REQUIRE(ids.size() >= 200);
    ids.resize(200);
    return ids;
}
const std::vector<std::string> kLines = {" The smith", " A child",    " The miller's wife",
                                         " Rain",      " Two guards", " The old priest",
                                         " At dusk",   " Nobody"};

}  // namespace

TEST_CASE("eight forks of one prefix: the tokens of eight fresh generators, the prefix held once") {
    auto model = made_model();
    for (const smol::KVType type : {smol::KVType::f16, smol::KVType::q8_0}) {
        CAPTURE(int(type));
        smol::GeneratorOptions options;
        options.kv_type = type;
        const uint64_t block = block_bytes(*model, type);
        const std::vector<int32_t> prefix = world_prefix(*model);
        REQUIRE(prefix.size() == 200);
        const size_t whole_blocks = prefix.size() / smol::KVCache::kBlockPositions;  // 3

        std::vector<smol::Generator> npcs;
        {
            auto parent = std::make_unique<smol::Generator>(model, options);
            parent->generate_tokens(prefix, greedy(0));
            REQUIRE(parent->n_cached() == prefix.size());
            CHECK(parent->cache_memory().owned == blocks(prefix.size()) * block);
            CHECK(parent->cache_memory().shared == 0);
            for (size_t i = 0; i < kLines.size(); ++i) npcs.push_back(parent->fork());
            CHECK(parent->cache_memory().owned == 0);
            CHECK(parent->cache_memory().shared == blocks(prefix.size()) * block);
            for (const smol::Generator& npc : npcs) {
                CHECK(npc.cache_memory().owned == 0);
                CHECK(npc.cache_memory().shared == blocks(prefix.size()) * block);
            }
        }  // the parent goes first: its blocks live on in the forks

        for (size_t i = 0; i < kLines.size(); ++i) {
            CAPTURE(i);
            std::vector<int32_t> ids = prefix;
            const auto line = model->tokenizer().encode(kLines[i], false);
            ids.insert(ids.end(), line.begin(), line.end());
            const auto forked = npcs[i].generate_tokens(ids, greedy(12));
            CHECK(forked.n_reused_tokens == prefix.size());
            // An independent generator that prefilled the prefix itself (the same
            // chunks: a prompt of another length may round differently).
            smol::Generator fresh(model, options);
            fresh.generate_tokens(prefix, greedy(0));
            const auto expected = fresh.generate_tokens(ids, greedy(12));
            CHECK(forked.tokens == expected.tokens);
            // The whole blocks of the prefix stay shared by the forks that have not
            // let them go; the partial block and what follows are this fork's own.
            const smol::CacheMemory m = npcs[i].cache_memory();
            CHECK(m.owned == (blocks(npcs[i].n_cached()) - whole_blocks) * block);
            CHECK(m.shared == whole_blocks * block);
        }
        // A fork that goes back before the prefix's end lets its shared blocks go.
        npcs[0].reset();
        CHECK(npcs[0].cache_memory().owned == 0);
        CHECK(npcs[0].cache_memory().shared == 0);
    }
}

namespace {

// Generator i continues `prefix` with kLines[i] for max_tokens greedy tokens,
// all at once on their own threads; each must give the tokens of a fresh
// generator that prefilled the prefix itself (the same chunks).
void continue_on_threads(const std::shared_ptr<const smol::Model>& model,
                         std::vector<smol::Generator>& gens, const std::vector<int32_t>& prefix,
                         int max_tokens) {
    std::vector<std::vector<int32_t>> inputs(gens.size());
    std::vector<smol::GenerateResult> results(gens.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < gens.size(); ++i) {
        inputs[i] = prefix;
        const auto line = model->tokenizer().encode(kLines[i], false);
        inputs[i].insert(inputs[i].end(), line.begin(), line.end());
        threads.emplace_back(
            [&, i] { results[i] = gens[i].generate_tokens(inputs[i], greedy(max_tokens)); });
    }
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < gens.size(); ++i) {
        smol::Generator fresh(model);
        fresh.generate_tokens(prefix, greedy(0));
        CHECK(fresh.generate_tokens(inputs[i], greedy(max_tokens)).tokens == results[i].tokens);
    }
}

}  // namespace

TEST_CASE("a fork and its parent write the shared block at once, on threads") {
    auto model = made_model();
    smol::Generator base(model);
    const std::vector<int32_t> prefix = world_prefix(*model);
    base.generate_tokens(prefix, greedy(0));
    std::vector<smol::Generator> gens;
    for (int i = 0; i < 3; ++i) gens.push_back(base.fork());
    gens.push_back(std::move(base));  // the parent, whose own slots the forks point at
    continue_on_threads(model, gens, prefix, 70);
}

TEST_CASE("forks in one Batcher share blocks and step together") {
    auto model = made_model();
    smol::GeneratorOptions options;
    options.batcher = std::make_shared<smol::Batcher>(model);
    smol::Generator base(model, options);
    const std::vector<int32_t> prefix = world_prefix(*model);
    base.generate_tokens(prefix, greedy(0));
    std::vector<smol::Generator> gens;
    for (int i = 0; i < 4; ++i) gens.push_back(base.fork());
    continue_on_threads(model, gens, prefix, 10);
}

TEST_CASE(
    "a cache copy shares blocks: writing, truncating or erasing one leaves the other intact") {
    auto model = made_model();
    for (const smol::KVType type : {smol::KVType::f16, smol::KVType::q8_0}) {
        CAPTURE(int(type));
        smol::KVCache original = model->make_cache(512, type);
        const std::vector<int32_t> prefix = world_prefix(*model);
        std::vector<float> logits(model->config().vocab_size);
        model->forward(prefix.data(), prefix.size(), 0, original, logits.data());
        const std::vector<uint8_t> saved = original.serialize();

        smol::KVCache copy = original.fork();
        CHECK(copy.serialize() == saved);
        // Writing the copy: over the partial block, then past it.
        const auto more = model->tokenizer().encode(" and the bridge fell", false);
        model->forward(more.data(), more.size(), 150, copy, logits.data());
        CHECK(original.serialize() == saved);
        // Erasing in the copy (keys re-rotated in place) and truncating it.
        model->cpu_backend().erase(copy, 10, 50);
        copy.truncate(20);
        CHECK(original.serialize() == saved);
        // And the other way round: the original erases; a second copy keeps the old bytes.
        smol::KVCache second = original.fork();
        model->cpu_backend().erase(original, 0, 100);
        CHECK(second.serialize() == saved);
        CHECK(original.size() == prefix.size() - 100);
    }
}

}  // namespace test_session
