// Conversations that outlive the context: Backend::erase (the re-rotation of
// moved keys), the shift rule of generation/context_shift.hpp, and
// ContextPolicy::shift end to end (long chats, long generations, sessions and
// forks after a shift), on a model made in memory and on the fixtures.
#include <doctest/doctest.h>

#include <smol/smol.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "support/expect_error.hpp"
#include "support/fixtures.hpp"
#include "support/generator_testutil.hpp"
#include "support/model_testutil.hpp"
#include "support/yarn_fixture.hpp"

// In a namespace of its own: tests/CMakeLists.txt compiles it in one unit with
// the other files of its group.
namespace test_context {

namespace {

using smol::KVPart;

std::vector<int32_t> ramp_tokens(size_t n, size_t vocab, size_t seed) {
    std::vector<int32_t> ids(n);
    for (size_t i = 0; i < n; ++i) ids[i] = int32_t((i * 131 + seed * 17 + 7) % vocab);
    return ids;
}

// Largest |a - b| over one row, relative to the row's largest |b| (F16
// rounding of a value v is at most |v| * 2^-11).
double row_error(const std::vector<float>& a, const std::vector<float>& b) {
    float scale = 0;
    for (const float v : b) scale = std::max(scale, std::fabs(v));
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i)
        worst = std::max(worst, double(std::fabs(a[i] - b[i])) / double(scale + 1e-30f));
    return worst;
}

// Erases [first, first + count) of a cache of `type` holding n ramp tokens and
// compares it with the cache it came from and with a fresh prefill of the
// remaining tokens: NoPE keys and every value moved bit for bit, the head
// untouched (CHECKs here); returns layer 0's worst key error against the fresh
// prefill (layer 0's keys depend on the token and its position only).
double erase_against_fresh(const smol::Model& model, smol::KVType type, size_t n, size_t first,
                           size_t count) {
    const smol::Config& c = model.config();
    REQUIRE(c.n_layers >= 4);  // layer 3 is a NoPE layer
    const std::vector<int32_t> tokens = ramp_tokens(n, c.vocab_size, 1);
    std::vector<float> logits(c.vocab_size);
    smol::KVCache original = model.make_cache(128, type);
    model.forward(tokens.data(), n, 0, original, logits.data());
    smol::KVCache erased = original.fork();
    model.backend().erase(erased, first, count);
    REQUIRE(erased.size() == n - count);
    CHECK(erased.type() == type);

    std::vector<int32_t> kept(tokens.begin(), tokens.begin() + long(first));
    kept.insert(kept.end(), tokens.begin() + long(first + count), tokens.end());
    smol::KVCache fresh = model.make_cache(128, type);
    model.forward(kept.data(), kept.size(), 0, fresh, logits.data());

    std::vector<float> got(c.head_dim), want(c.head_dim), moved_from(c.head_dim);
    double layer0_error = 0;
    for (size_t h = 0; h < c.n_kv_heads; ++h)
        for (size_t p = 0; p < erased.size(); ++p) {
            const size_t source = p < first ? p : p + count;
            erased.load_row(0, KVPart::keys, h, p, got.data());
            fresh.load_row(0, KVPart::keys, h, p, want.data());
            layer0_error = std::max(layer0_error, row_error(got, want));
            for (const auto& [layer, part] : {std::pair<size_t, KVPart>{3, KVPart::keys},
                                              {0, KVPart::values},
                                              {3, KVPart::values}}) {
                erased.load_row(layer, part, h, p, got.data());
                original.load_row(layer, part, h, source, moved_from.data());
                CHECK_MESSAGE(got == moved_from, "layer " << layer << " pos " << p);
            }
            if (p < first) {  // the head is untouched
                erased.load_row(1, KVPart::keys, h, p, got.data());
                original.load_row(1, KVPart::keys, h, p, moved_from.data());
                CHECK(got == moved_from);
            }
        }
    return layer0_error;
}

}  // namespace

TEST_CASE("erase: the tail is truncate, a middle erase re-rotates RoPE keys only") {
    const auto model = smol_test::made_model();
    const size_t n = 48;
    const std::vector<int32_t> tokens = ramp_tokens(n, model->config().vocab_size, 1);
    std::vector<float> logits(model->config().vocab_size);
    smol::KVCache original = model->make_cache(128);
    model->forward(tokens.data(), n, 0, original, logits.data());

    // The tail: same as truncate.
    smol::KVCache tail = original.fork();
    model->backend().erase(tail, n - 5, 5);
    CHECK(tail.size() == n - 5);
    smol::KVCache truncated = original.fork();
    truncated.truncate(n - 5);
    CHECK(tail.serialize() == truncated.serialize());

    // Two F16 roundings (the original store and the re-rotated one), one
    // rotation, and the multi-row tiles' float rounding: well under 2^-8.
    const double layer0_error = erase_against_fresh(*model, smol::KVType::f16, n, 10, 13);
    MESSAGE("layer 0 keys after erase vs a fresh prefill: worst relative error " << layer0_error);
    CHECK(layer0_error < 1.0 / 256);
    CHECK(layer0_error > 0);  // the rows did move through a rotation

    // Bad ranges and foreign caches.
    smol::KVCache other = model->make_cache(128);
    CHECK(smol_test::error_kind_of([&] { model->backend().erase(other, 0, 1); }) ==
          smol::ErrorKind::out_of_range);
    CHECK(smol_test::error_kind_of([&] { model->backend().erase(original, 30, 100); }) ==
          smol::ErrorKind::out_of_range);
    model->backend().erase(original, 5, 0);  // nothing
    CHECK(original.size() == n);
}

TEST_CASE("erase on a q8_0 cache: RoPE keys dequantized, rotated, quantized again") {
    const auto model = smol_test::made_model();
    const double layer0_error = erase_against_fresh(*model, smol::KVType::q8_0, 48, 10, 13);
    // A Q8_0 rounding is at most half a step of its block's max / 127: the
    // original store, the re-quantized rotation and the fresh prefill's own
    // store (the rotation can grow a block's max by sqrt 2) stay under 4 / 254
    // of the row's max, against 2^-8 for F16.
    MESSAGE("q8_0 layer 0 keys after erase vs a fresh prefill: worst relative error "
            << layer0_error);
    CHECK(layer0_error < 4.0 / 254);
    CHECK(layer0_error > 0);
}

TEST_CASE("erase: keys moved by many small shifts drift by about one F16 rounding per shift") {
    const auto model = smol_test::made_model();
    const smol::Config& c = model->config();
    const size_t vocab = c.vocab_size, n = 100, keep = 4, shifts = 30;
    const std::vector<int32_t> tokens = ramp_tokens(n, vocab, 2);
    std::vector<float> logits(vocab);
    smol::KVCache kv = model->make_cache(128);
    model->forward(tokens.data(), n, 0, kv, logits.data());
    const smol::KVCache before = kv.fork();
    for (size_t i = 0; i < shifts; ++i) model->backend().erase(kv, keep, 1);
    REQUIRE(kv.size() == n - shifts);

    std::vector<int32_t> kept(tokens.begin(), tokens.begin() + keep);
    kept.insert(kept.end(), tokens.begin() + keep + shifts, tokens.end());
    smol::KVCache fresh = model->make_cache(128);
    model->forward(kept.data(), kept.size(), 0, fresh, logits.data());
    std::vector<float> got(c.head_dim), want(c.head_dim);
    double drift = 0;
    for (size_t h = 0; h < c.n_kv_heads; ++h) {
        for (size_t p = 0; p < keep; ++p) {  // the n_keep tokens never move: bit for bit
            kv.load_row(0, KVPart::keys, h, p, got.data());
            before.load_row(0, KVPart::keys, h, p, want.data());
            CHECK(got == want);
        }
        for (size_t p = keep; p < kv.size(); ++p) {
            kv.load_row(0, KVPart::keys, h, p, got.data());
            fresh.load_row(0, KVPart::keys, h, p, want.data());
            drift = std::max(drift, row_error(got, want));
        }
    }
    // Each shift rounds to F16 once (<= 2^-11 of the row's scale): the bound
    // is 30 of those plus the fresh prefill's own rounding.
    MESSAGE("layer 0 keys after " << shifts << " one-position shifts: worst relative drift "
                                  << drift << " (bound " << (shifts + 2) / 2048.0 << ")");
    CHECK(drift <= (shifts + 2) / 2048.0);
}

TEST_CASE("shift rule: cuts, the one-gap match and the mid-run plan") {
    using smol::detail::ShiftShape;
    ShiftShape text;
    text.keep = 2;
    text.protect = 19;
    CHECK(text.cut_for(2, 20, 10) == 12);  // 20 - (12 - 2) = 10
    CHECK(text.cut_for(2, 40, 10) == 19);  // the largest cut: not enough to reach 10

    ShiftShape turns;
    turns.keep = 3;
    turns.protect = 30;
    turns.any_cut = false;
    turns.cuts = {8, 15, 22, 30};
    CHECK(turns.cut_for(3, 40, 25) == 22);  // 40 - 19 = 21 <= 25; 15 leaves 28
    CHECK(turns.cut_for(16, 40, 10) == 30);
    ShiftShape dropped = turns;
    dropped.drop(12);  // [3, 15) went: cut 15 is now 3 (the head's end, not a cut)
    CHECK(dropped.cuts == std::vector<size_t>{10, 18});
    CHECK(dropped.protect == 18);

    // The cache holds the head [0, 3) and, after it, prompt[15, 25): the gap
    // lines up at cut 15, and the prompt is fitted from there on.
    std::vector<int32_t> prompt(40);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t(100 + i);
    std::vector<int32_t> history(prompt.begin(), prompt.begin() + 3);
    history.insert(history.end(), prompt.begin() + 15, prompt.begin() + 25);
    history.push_back(7);  // a generated token the prompt does not hold
    smol::detail::PromptShift plan = smol::detail::plan_prompt_shift(
        prompt, history, history.size(), turns, /*n_ctx=*/31, /*room=*/4, /*target=*/16);
    CHECK(plan.cached_span == 10);
    CHECK(plan.gap_end == 30);  // from 15, seen 28 + 4 > 31: down to <= 16 needs cut 30 (13)
    CHECK(plan.erase == 10);
    CHECK(plan.fits);
    plan = smol::detail::plan_prompt_shift(prompt, history, history.size(), turns, 64, 4, 32);
    CHECK(plan.gap_end == 15);  // 3 + 25 = 28 tokens + 4 fit 64: the gap stays as it was
    CHECK(plan.erase == 0);
    CHECK(plan.cached_span == 10);
    // Another head: nothing after it is reusable.
    history[0] = 1;
    plan = smol::detail::plan_prompt_shift(prompt, history, history.size(), turns, 32, 4, 16);
    CHECK(plan.cached_span == 0);
    CHECK(plan.gap_end == 30);
    // The current turn alone does not fit.
    plan = smol::detail::plan_prompt_shift(prompt, history, 0, turns, 8, 0, 4);
    CHECK_FALSE(plan.fits);

    // Mid-run: text drops half of what follows the head; chat whole turns.
    CHECK(smol::detail::plan_running_shift(text, 20, 20) == 9);
    ShiftShape running = turns;
    running.protect = 30;
    CHECK(smol::detail::plan_running_shift(running, 32, 32) == 19);  // cut 22: 32 - 19 = 13
    running.cuts = {30};
    running.protect = 30;
    CHECK(smol::detail::plan_running_shift(running, 32, 32) == 27);
    running.cuts.clear();
    CHECK(smol::detail::plan_running_shift(running, 32, 32) == 0);  // nothing may go
}

TEST_CASE("Generator::erase: history and cache move together; errors") {
    const auto model = smol_test::made_model();
    smol::GeneratorOptions options;
    options.n_ctx = 256;
    smol::Generator gen(model, options);
    const smol::GenerateParams params = smol_test::greedy(8);
    const std::string prompt = "The blacksmith said hello to the traveller.";
    gen.generate(prompt, params);
    const std::vector<int32_t> before = gen.history();
    const size_t cached = gen.n_cached();
    gen.erase(3, 5);
    CHECK(gen.n_cached() == cached - 5);
    std::vector<int32_t> expected = before;
    expected.erase(expected.begin() + 3, expected.begin() + 8);
    CHECK(gen.history() == expected);
    // Past the cache: only the history shrinks.
    gen.erase(gen.history().size() - 1, 1);
    CHECK(gen.history().size() == expected.size() - 1);
    CHECK(gen.n_cached() == gen.history().size());
    CHECK(smol_test::error_kind_of([&] { gen.erase(2, gen.history().size()); }) ==
          smol::ErrorKind::out_of_range);
    CHECK_FALSE(gen.try_erase(gen.history().size() + 1, 0).ok());

    // The same steps through the backend by hand give the same bits: the
    // prompt as one chunk, each generated token alone, the erase, then the
    // last token again (what a run over the same history reuses and runs).
    // (Layers past the first carry what the erased tokens contributed, so a
    // fresh prefill of the shorter history is not the comparison: only layer
    // 0's keys are, in the erase test above.)
    const std::vector<int32_t> prompt_ids = gen.tokenize(prompt);
    smol::KVCache kv = model->make_cache(256);
    std::vector<float> logits(model->config().vocab_size);
    model->forward(prompt_ids.data(), prompt_ids.size(), 0, kv, logits.data());
    for (size_t i = prompt_ids.size(); i < cached; ++i)
        model->forward(&before[i], 1, i, kv, logits.data());
    model->backend().erase(kv, 3, 5);
    const std::vector<int32_t> now = gen.history();
    kv.truncate(now.size() - 1);
    model->forward(&now.back(), 1, now.size() - 1, kv, logits.data());
    const auto r = gen.generate_tokens(now, smol_test::greedy(0));
    CHECK(r.n_reused_tokens == now.size() - 1);
    CHECK(gen.logits() == logits);
}

TEST_CASE("shift: generate() of 2,000 tokens through n_ctx 128, then the gap is reused") {
    const auto model = smol_test::made_model();
    smol::GeneratorOptions options;
    options.n_ctx = 128;
    options.context_policy = smol::ContextPolicy::shift;
    options.n_keep = 8;
    std::vector<std::string> log;
    options.log = [&](int, const std::string& line) { log.push_back(line); };
    smol::Generator gen(model, options);
    smol::GenerateParams params = smol_test::greedy(2000);
    params.ignore_eos = true;
    const std::string prompt = "Once upon a time, in a village by the sea, there lived";
    const smol::GenerateResult r = gen.generate(prompt, params);
    CHECK(r.stop_reason == smol::StopReason::max_tokens);
    CHECK(r.tokens.size() == 2000);
    CHECK(r.n_discarded_tokens > 1800);
    CHECK(std::any_of(log.begin(), log.end(), [](const std::string& l) {
        return l.find("context shift") != std::string::npos;
    }));
    const std::vector<int32_t> head = gen.tokenize(prompt);
    REQUIRE(gen.history().size() <= 128);
    CHECK(std::equal(head.begin(), head.begin() + 8, gen.history().begin()));

    // The whole text again: the head and the cached span after the gap are
    // reused, only the few tokens after them run.
    params.max_tokens = 4;
    const smol::GenerateResult again = gen.generate_tokens(
        [&] {
            std::vector<int32_t> all = head;
            all.insert(all.end(), r.tokens.begin(), r.tokens.end());
            return all;
        }(),
        params);
    CHECK(again.n_prompt_tokens == head.size() + 2000);
    CHECK(again.n_reused_tokens > 40);
    CHECK(again.n_prefilled_tokens() <= 2);
    CHECK(again.n_prompt_discarded_tokens + again.n_reused_tokens + again.n_prefilled_tokens() ==
          again.n_prompt_tokens);
    CHECK(again.stop_reason == smol::StopReason::max_tokens);

    // With stop the same run ends at the context.
    smol::GeneratorOptions stop = options;
    stop.context_policy = smol::ContextPolicy::stop;
    smol::Generator stopping(model, stop);
    params.max_tokens = 2000;
    CHECK(stopping.generate(prompt, params).stop_reason == smol::StopReason::context_full);
}

// [slow]: 12 s in Release, nearly three minutes under ASan; the sanitizer stage
// covers the shift path with the 2,000-token generate() case.
TEST_CASE(
    "[slow] shift: a 100-turn chat through n_ctx 512 keeps the system message and reuses the "
    "cache") {
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return;
    const auto model = smol::Model::load(*path);
    smol::GeneratorOptions options;
    options.n_ctx = 512;
    options.context_policy = smol::ContextPolicy::shift;
    smol::Generator gen(model, options);
    smol::GenerateParams params = smol_test::greedy(24);
    params.chat.enable_thinking = false;
    // A fixed "Today Date": the system turn's bytes, and so the random model's
    // answers and the turns' lengths, would otherwise change from day to day
    // (on 2026-11-30 the median turn fell to 30 tokens and the bound below failed).
    const std::string today = "29 November 2026";
    params.chat.today = today;
    std::vector<smol::ChatMessage> messages = {
        {"system", "You are Brannoc, the village blacksmith. Answer in one sentence."}};
    const std::vector<int32_t> system_ids = gen.tokenize_chat(messages, [&today] {
        smol::ChatOptions o;
        o.add_generation_prompt = false;
        o.today = today;
        o.enable_thinking = false;
        return o;
    }());
    std::vector<size_t> prefill_before, prefill_after;
    bool shifted = false;
    for (int turn = 0; turn < 100; ++turn) {
        messages.push_back({"user", "Turn " + std::to_string(turn) +
                                        ": what do you think of the weather and the mine?"});
        const smol::GenerateResult r = gen.chat(messages, params);
        REQUIRE(r.stop_reason != smol::StopReason::error);
        CHECK(r.stop_reason != smol::StopReason::context_full);
        CHECK(r.n_prompt_discarded_tokens + r.n_reused_tokens + r.n_prefilled_tokens() ==
              r.n_prompt_tokens);
        // The system turn opens what the model sees, every turn.
        REQUIRE(gen.history().size() >= system_ids.size());
        CHECK(std::equal(system_ids.begin(), system_ids.end(), gen.history().begin()));
        if (r.n_discarded_tokens > 0) shifted = true;
        (shifted ? prefill_after : prefill_before).push_back(r.n_prefilled_tokens());
        messages.push_back({"assistant", r.text, /*model_output=*/true});
    }
    REQUIRE(shifted);
    REQUIRE(prefill_before.size() > 2);
    std::vector<size_t> sorted = prefill_before;
    std::sort(sorted.begin(), sorted.end());
    const size_t median = sorted[sorted.size() / 2];
    // Turns after the first shift (the shifting turns included) prefill no
    // more than twice the median turn before it.
    const size_t worst = *std::max_element(prefill_after.begin() + 1, prefill_after.end());
    MESSAGE("100-turn chat: median prefill before the first shift "
            << median << " tokens, worst after " << worst);
    CHECK(worst <= 2 * median);
}

TEST_CASE("shift: sessions saved after a shift restore and continue; forks diverge") {
    const auto model = smol_test::made_model();
    smol::GeneratorOptions options;
    options.n_ctx = 96;
    options.context_policy = smol::ContextPolicy::shift;
    options.n_keep = 4;
    smol::Generator gen(model, options);
    smol::GenerateParams params = smol_test::greedy(200);
    params.ignore_eos = true;
    const smol::GenerateResult first = gen.generate("The road to the mine", params);
    REQUIRE(first.n_discarded_tokens > 0);
    const std::vector<uint8_t> session = gen.save_session();
    smol::Generator restored(model, options);
    restored.restore_session(session);
    CHECK(restored.history() == gen.history());

    params.max_tokens = 40;
    smol::Generator forked = gen.fork();
    const auto a = gen.generate_tokens(gen.history(), params);
    const auto b = restored.generate_tokens(restored.history(), params);
    CHECK(a.tokens == b.tokens);
    // A fork continues like its parent under greedy, and with another
    // sampler seed goes its own way without touching the parent.
    const auto c = forked.generate_tokens(forked.history(), params);
    CHECK(c.tokens == a.tokens);
    smol::GenerateParams sampled = params;
    sampled.temperature = 1.0f;
    sampled.seed = 99;
    const std::vector<int32_t> parent = gen.history();
    smol::Generator other = gen.fork();
    other.generate_tokens(other.history(), sampled);
    CHECK(gen.history() == parent);
}

TEST_CASE("shift: a current turn longer than the context is out_of_range; bad policy") {
    const auto model = smol_test::made_model();
    smol::GeneratorOptions options;
    options.n_ctx = 64;
    options.context_policy = smol::ContextPolicy::shift;
    options.n_keep = 64;  // the head and the last token are more than the context
    smol::Generator gen(model, options);
    const std::string long_text(400, 'a');
    CHECK(smol_test::error_kind_of([&] { gen.generate(long_text, smol_test::greedy(4)); }) ==
          smol::ErrorKind::out_of_range);
    options.n_keep = 0;
    smol::Generator shifting(model, options);
    const smol::GenerateResult r = shifting.generate(long_text, smol_test::greedy(4));
    CHECK(r.n_prompt_discarded_tokens > 0);
    CHECK(r.tokens.size() == 4);
    options.context_policy = smol::ContextPolicy(9);
    CHECK(smol_test::error_kind_of([&] { smol::Generator bad(model, options); }) ==
          smol::ErrorKind::invalid_argument);
}

// ---------------------------------------------------------------------------
// YaRN (model/rope.hpp): the reference engine's outputs on the YaRN fixture,
// the loader's errors, the longer context and erase's rotation without mscale.

namespace {

// tests/data/ next to this file. __FILE__ may be relative to the build
// folder of the tests (where the executable lies), not to the working directory.
std::string data_path(const std::string& relative) {
    std::string here = __FILE__;
    const size_t slash = here.find_last_of("/\\");
    here = slash == std::string::npos ? std::string(".") : here.substr(0, slash);
    const std::string path = here + "/data/" + relative;
    if (path.front() == '/' || smol_test::path_exists(path)) return path;
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return path;
    std::string dir(exe, size_t(n));
    return dir.substr(0, dir.find_last_of('/')) + "/" + path;
}

// A model loaded from memory with the bytes it needs kept alive.
struct MemoryModel {
    std::vector<uint8_t> bytes;
    std::shared_ptr<const smol::Model> model;
};

// The made model's file (demo shape, byte vocabulary), made once.
const std::vector<uint8_t>& made_bytes() {
    static const std::vector<uint8_t> bytes = [] {
        smol_tools::MakeOptions options;
        options.shape = smol_tools::preset_shape("demo");
        options.effort = smol_tools::MakeOptions::Effort::fast;
        return smol_tools::make_model_bytes(options);
    }();
    return bytes;
}

smol::Expected<std::shared_ptr<const smol::Model>> try_load_with(
    const std::vector<uint8_t>& source, const smol_test::RopeScalingKeys& keys,
    std::vector<uint8_t>& bytes) {
    const auto file = smol::gguf::File::from_bytes(source, "made-model");
    bytes = smol_test::with_rope_scaling(*file, keys);
    smol::LoadOptions load;
    load.n_threads = 2;
    return smol::Model::try_load_from_memory(bytes.data(), bytes.size(), load);
}

MemoryModel load_with(const std::vector<uint8_t>& source, const smol_test::RopeScalingKeys& keys) {
    MemoryModel m;
    auto loaded = try_load_with(source, keys, m.bytes);
    REQUIRE_MESSAGE(loaded.ok(), (loaded.ok() ? "" : loaded.error().message));
    m.model = loaded.value();
    return m;
}

}  // namespace

TEST_CASE("YaRN: the reference's logits and greedy path past the original context") {
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return;
    const auto golden = smol_test::load_golden_file(data_path("yarn/tiny-q4km-yarn.json"));
    const smol_test::RopeScalingKeys keys = smol_test::golden_yarn_keys();
    const auto fixture = smol::gguf::File::open(*path);
    std::vector<uint8_t> bytes = smol_test::with_rope_scaling(*fixture, keys);
    smol::LoadOptions load;
    load.n_threads = 2;
    const auto model = smol::Model::load_from_memory(bytes.data(), bytes.size(), load);
    const smol::Config& c = model->config();
    REQUIRE(c.rope_yarn);
    CHECK(c.rope_original_context == *keys.original_context_length);
    CHECK(c.context_length == size_t(*keys.original_context_length * *keys.factor));
    const size_t vocab = c.vocab_size;

    REQUIRE(!golden.empty());
    for (size_t pi = 0; pi < golden.size(); ++pi) {
        const smol_test::GoldenPrompt& g = golden[pi];
        const std::string where = "YaRN prompt " + std::to_string(pi);
        // The point of the fixture: most of the prompt lies past the original context.
        REQUIRE(g.ids.size() >= 3 * c.rope_original_context);
        REQUIRE(g.ids.size() + g.greedy_ids.size() <= c.context_length);
        smol::KVCache kv = model->make_cache(c.context_length);

        // Every position's top-8, in passes of 512 as the goldens were taken.
        constexpr size_t kSegment = 512;
        smol::ForwardOptions all;
        all.all_logits = true;
        all.chunk_size = kSegment;
        std::vector<float> logits(std::min(kSegment, g.ids.size()) * vocab), last(vocab);
        size_t bad_positions = 0;
        for (size_t done = 0; done < g.ids.size(); done += kSegment) {
            const size_t m = std::min(kSegment, g.ids.size() - done);
            model->forward(g.ids.data() + done, m, done, kv, logits.data(), all);
            for (size_t t = 0; t < m; ++t)
                if (!smol_test::top8_matches(&logits[t * vocab], vocab, g.prompt_top[done + t],
                                             where + " position " + std::to_string(done + t)))
                    ++bad_positions;
            if (done + m == g.ids.size())
                std::copy(&logits[(m - 1) * vocab], &logits[m * vocab], last.begin());
        }
        CHECK_MESSAGE(bad_positions == 0, where << ": positions with top-8 mismatches");
        smol_test::count_golden();

        const auto expected = smol_test::read_f32(g.logits_path);
        REQUIRE(expected.size() == vocab);
        const auto cmp = smol_test::compare_logits(last.data(), expected.data(), vocab);
        MESSAGE(where << " (" << g.ids.size() << " tokens, original context "
                      << c.rope_original_context << "): cosine " << cmp.cosine << " max abs error "
                      << cmp.max_abs_error << " range " << cmp.range);
        CHECK(cmp.cosine >= 0.999);
        CHECK(cmp.max_abs_error <= 0.02f * cmp.range);
        smol_test::count_golden();

        smol_test::check_greedy_steps(g, last.data(), vocab, model, kv, g.ids.size(), where);
        smol_test::count_golden();
    }
}

TEST_CASE("YaRN: bad keys are typed errors naming the key or the type") {
    const auto& source = made_bytes();
    std::vector<uint8_t> bytes;
    auto error_of = [&](const smol_test::RopeScalingKeys& keys) {
        auto loaded = try_load_with(source, keys, bytes);
        REQUIRE_FALSE(loaded.ok());
        return loaded.error();
    };
    for (const float factor : {0.0f, -2.0f, std::nanf(""), INFINITY, 0.5f, 1025.0f}) {
        smol_test::RopeScalingKeys keys;
        keys.factor = factor;
        const smol::ErrorInfo e = error_of(keys);
        INFO("factor " << factor << ": " << e.message);
        CHECK(e.kind == smol::ErrorKind::format);
        CHECK(e.message.find("smollm3.rope.scaling.factor") != std::string::npos);
    }
    {
        smol_test::RopeScalingKeys keys;
        keys.original_context_length = 0;
        const smol::ErrorInfo e = error_of(keys);
        INFO(e.message);
        CHECK(e.kind == smol::ErrorKind::format);
        CHECK(e.message.find("smollm3.rope.scaling.original_context_length") != std::string::npos);
    }
    for (const char* type : {"linear", "longrope", "Yarn"}) {
        smol_test::RopeScalingKeys keys;
        keys.type = type;
        const smol::ErrorInfo e = error_of(keys);
        INFO(e.message);
        CHECK(e.kind == smol::ErrorKind::unsupported);
        CHECK(e.message.find(std::string("'") + type + "'") != std::string::npos);
    }
    // "none", or no type at all, is plain RoPE whatever the other keys say.
    smol_test::RopeScalingKeys none;
    none.type = "none";
    CHECK_FALSE(load_with(source, none).model->config().rope_yarn);
    none.type.reset();
    CHECK_FALSE(load_with(source, none).model->config().rope_yarn);
}

TEST_CASE("YaRN: n_ctx goes up to original x factor; erase rotates without mscale") {
    smol_test::RopeScalingKeys keys;
    keys.context_length = 64;
    keys.original_context_length = 64;
    keys.factor = 4.0f;
    const MemoryModel m = load_with(made_bytes(), keys);
    const auto& model = m.model;
    const smol::Config& c = model->config();
    REQUIRE(c.rope_yarn);
    CHECK(c.trained_context_length == 64);
    CHECK(c.context_length == 256);
    const smol::RopeRule rule(c);
    CHECK(rule.mscale() == doctest::Approx(1.0 + 0.1 * std::log(4.0)));

    smol::GeneratorOptions options;
    options.n_ctx = 256;
    smol::Generator gen(model, options);
    CHECK(gen.n_ctx() == 256);
    options.n_ctx = 257;
    CHECK(smol_test::error_kind_of([&] { smol::Generator too_long(model, options); }) ==
          smol::ErrorKind::invalid_argument);

    // Past the original context: layer 0's keys after an erase equal a fresh
    // prefill's, so the move rotated them by the YaRN frequencies and did not
    // scale them again (mscale would be a 14% error).
    const size_t vocab = c.vocab_size, n = 200, first = 20, count = 90;
    const std::vector<int32_t> tokens = ramp_tokens(n, vocab, 3);
    std::vector<float> logits(vocab);
    smol::KVCache erased = model->make_cache(256);
    model->forward(tokens.data(), n, 0, erased, logits.data());
    model->backend().erase(erased, first, count);
    std::vector<int32_t> kept(tokens.begin(), tokens.begin() + first);
    kept.insert(kept.end(), tokens.begin() + first + count, tokens.end());
    smol::KVCache fresh = model->make_cache(256);
    model->forward(kept.data(), kept.size(), 0, fresh, logits.data());
    std::vector<float> got(c.head_dim), want(c.head_dim);
    double worst = 0;
    for (size_t h = 0; h < c.n_kv_heads; ++h)
        for (size_t p = first; p < erased.size(); ++p) {
            erased.load_row(0, KVPart::keys, h, p, got.data());
            fresh.load_row(0, KVPart::keys, h, p, want.data());
            worst = std::max(worst, row_error(got, want));
        }
    MESSAGE("YaRN layer 0 keys after erase vs a fresh prefill: worst relative error " << worst);
    CHECK(worst < 1.0 / 256);
}

}  // namespace test_context
