// Tests of generator sessions: save / restore to bytes, fork, reset, and the
// "many NPCs from one prefilled system prompt" pattern, on models made in
// memory (byte vocabulary, random weights).
#include <doctest/doctest.h>

#include <smol/generator.hpp>

#include <string>
#include <thread>
#include <vector>

#include "fixtures.hpp"
#include "generator_testutil.hpp"

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
    CHECK(expect_error([&] { target.restore_session(bad_magic); }).kind() == smol::ErrorKind::format);
    std::vector<uint8_t> trailing = bytes;
    trailing.push_back(0);
    CHECK(expect_error([&] { target.restore_session(trailing); }).kind() == smol::ErrorKind::format);
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
    CHECK(expect_error([&] { small.restore_session(bytes); }).kind() == smol::ErrorKind::out_of_range);
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
