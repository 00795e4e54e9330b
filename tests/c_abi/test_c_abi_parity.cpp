// The C ABI against the C++ API it wraps, on the tiny fixture:
//   - greedy tokens and text of smol_generate / smol_chat equal Generator's;
//   - eight threads, a generator each, through the C ABI (run under TSan by
//     tools/ci-sanitize.sh, where only the checks with threads run), each
//     getting the single-thread tokens, and the last error staying per thread;
//   - smol_cancel from another thread stops a run;
//   - context shift and erase: the same tokens, counts and history;
//   - the knobs past the basics (DRY, XTC, lookup decoding, xml / python
//     tools, token ids in, ids to text, the chat's ids and text): the same
//     tokens, counts and text as the C++ API given the same values;
//   - writes the reference greedy text for the Python and C# tests.
// Usage: test_c_abi_parity FIXTURES_DIR [GREEDY_OUT] ($SMOL_FIXTURES wins)
//        test_c_abi_parity FIXTURES_DIR --bench [RUNS]: microseconds per token
//        through the C ABI against the C++ API (not a ctest case: a timing).
#include <smol/smol.h>
#include <smol/smol.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../support/sanitized.hpp"

namespace {

int failures = 0;

#define EXPECT(cond)                                                                           \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            std::fprintf(stderr, "%s:%d: EXPECT(%s) failed (%s)\n", __FILE__, __LINE__, #cond, \
                         smol_last_error_message());                                           \
            ++failures;                                                                        \
        }                                                                                      \
    } while (0)

// The reference run the bindings compare with: keep in step with
// bindings/python/tests and bindings/csharp/Sample.cs.
constexpr const char* kPrompt = "Once upon a time";
constexpr int kTokens = 24;

struct ResultDeleter {
    void operator()(smol_result* r) const { smol_result_free(r); }
};
using CResult = std::unique_ptr<smol_result, ResultDeleter>;

smol_params greedy_c(int max_tokens) {
    smol_params p;
    smol_params_init(&p);
    p.temperature = 0;
    p.max_tokens = max_tokens;
    return p;
}
smol::GenerateParams greedy_cpp(int max_tokens) {
    smol::GenerateParams p;
    p.temperature = 0;
    p.max_tokens = max_tokens;
    return p;
}

std::vector<int32_t> tokens_of(const smol_result& r) {
    return std::vector<int32_t>(r.tokens, r.tokens + r.n_tokens);
}

void check_parity(const std::shared_ptr<const smol::Model>& cpp_model, smol_model* c_model) {
    smol::Generator cpp(cpp_model);
    smol_generator* c = smol_generator_new(c_model, nullptr);
    EXPECT(c != nullptr);
    for (const char* prompt : {kPrompt, "The capital of France is", "<|im_start|>user\nHi"}) {
        const smol::GenerateResult want = cpp.generate(prompt, greedy_cpp(kTokens));
        const smol_params p = greedy_c(kTokens);
        CResult got(smol_generate(c, prompt, &p, nullptr, nullptr));
        EXPECT(got != nullptr);
        if (!got) continue;
        EXPECT(tokens_of(*got) == want.tokens);
        EXPECT(std::string(got->text, got->text_length) == want.text);
        EXPECT(got->stop_reason == int64_t(want.stop_reason));
        EXPECT(got->n_prompt_tokens == want.n_prompt_tokens);
        EXPECT(got->n_reused_tokens == want.n_reused_tokens);
    }
    // Chat, with a sampled (seeded) run: the parameters reach the sampler alike.
    const std::vector<smol::ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hello"}};
    smol::GenerateParams cpp_params = greedy_cpp(kTokens);
    cpp_params.temperature = 0.7f;
    cpp_params.seed = 1234;
    cpp_params.top_k = 20;
    cpp_params.chat.enable_thinking = false;
    cpp_params.chat.today = "01 January 2026";
    const smol::GenerateResult want = cpp.chat(messages, cpp_params);
    smol_params p = greedy_c(kTokens);
    p.temperature = 0.7;
    p.seed = 1234;
    p.top_k = 20;
    p.enable_thinking = 0;
    p.today = "01 January 2026";
    const smol_message c_messages[2] = {{"system", "Be brief.", 0}, {"user", "Hello", 0}};
    CResult got(smol_chat(c, c_messages, 2, &p, nullptr, nullptr));
    EXPECT(got && tokens_of(*got) == want.tokens);
    EXPECT(got && std::string(got->answer, got->answer_length) == want.answer);
    smol_generator_free(c);
}

std::vector<int32_t> history_of(smol_generator* gen) {
    size_t n = 0;
    int32_t* ids = smol_generator_history(gen, &n);
    std::vector<int32_t> out(ids, ids + (ids ? n : 0));
    smol_tokens_free(ids);
    return out;
}

void check_context_parity(const std::shared_ptr<const smol::Model>& cpp_model,
                          smol_model* c_model) {
    smol::GeneratorOptions cpp_options;
    cpp_options.n_ctx = 64;
    cpp_options.context_policy = smol::ContextPolicy::shift;
    cpp_options.n_keep = 4;
    smol::Generator cpp(cpp_model, cpp_options);
    smol_generator_options c_options;
    smol_generator_options_init(&c_options);
    c_options.n_ctx = 64;
    c_options.context_policy = SMOL_CONTEXT_SHIFT;
    c_options.n_keep = 4;
    smol_generator* c = smol_generator_new(c_model, &c_options);
    EXPECT(c != nullptr);
    if (!c) return;
    auto same = [&](const smol::GenerateResult& want, const smol_result* got) {
        EXPECT(got != nullptr);
        if (!got) return;
        EXPECT(tokens_of(*got) == want.tokens);
        EXPECT(got->n_prompt_tokens == want.n_prompt_tokens);
        EXPECT(got->n_reused_tokens == want.n_reused_tokens);
        EXPECT(got->n_discarded_tokens == want.n_discarded_tokens);
        EXPECT(got->n_prompt_discarded_tokens == want.n_prompt_discarded_tokens);
        EXPECT(history_of(c) == cpp.history());
        EXPECT(smol_generator_n_cached(c) == cpp.n_cached());
    };
    // A run through the context, then a prompt longer than it.
    smol::GenerateParams cpp_params = greedy_cpp(150);
    cpp_params.ignore_eos = true;
    smol_params p = greedy_c(150);
    p.ignore_eos = 1;
    const smol::GenerateResult shifted = cpp.generate(kPrompt, cpp_params);
    EXPECT(shifted.n_discarded_tokens > 0);
    same(shifted, CResult(smol_generate(c, kPrompt, &p, nullptr, nullptr)).get());
    std::string long_prompt;
    for (int i = 0; i < 12; ++i) long_prompt += "The smith hammered the red iron until it rang. ";
    const smol::GenerateResult cut = cpp.generate(long_prompt, greedy_cpp(4));
    EXPECT(cut.n_prompt_discarded_tokens > 0);
    p = greedy_c(4);
    same(cut, CResult(smol_generate(c, long_prompt.c_str(), &p, nullptr, nullptr)).get());
    // An erase in the middle, then the same prompt again.
    cpp.erase(6, 10);
    EXPECT(smol_erase(c, 6, 10) == SMOL_OK);
    EXPECT(history_of(c) == cpp.history());
    EXPECT(smol_generator_n_cached(c) == cpp.n_cached());
    p = greedy_c(8);
    same(cpp.generate(long_prompt, greedy_cpp(8)),
         CResult(smol_generate(c, long_prompt.c_str(), &p, nullptr, nullptr)).get());
    smol_generator_free(c);
}

// Each knob set both ways, on its own generator pair: the C ABI must hand the
// C++ API the very values (a field read at the wrong offset, or dropped,
// changes the tokens of at least one of these runs).
void check_knob_parity(const std::shared_ptr<const smol::Model>& cpp_model, smol_model* c_model) {
    const char* prompt = "one two three four, one two three four, one two three four, one two";
    smol::Generator cpp(cpp_model);
    smol_generator* c = smol_generator_new(c_model, nullptr);
    EXPECT(c != nullptr);
    if (!c) return;
    auto both = [&](const smol::GenerateParams& want_params, const smol_params& got_params) {
        cpp.reset();
        smol_reset(c);
        const smol::GenerateResult want = cpp.generate(prompt, want_params);
        CResult got(smol_generate(c, prompt, &got_params, nullptr, nullptr));
        EXPECT(got != nullptr);
        if (!got) return;
        EXPECT(tokens_of(*got) == want.tokens);
        EXPECT(got->n_decode_steps == want.n_decode_steps);
        EXPECT(got->n_drafted_tokens == want.n_drafted_tokens);
        EXPECT(got->n_accepted_drafts == want.n_accepted_drafts);
    };
    smol::GenerateParams cpp_params = greedy_cpp(40);
    cpp_params.ignore_eos = true;
    smol_params p = greedy_c(40);
    p.ignore_eos = 1;
    {  // DRY, with breakers of our own and a window
        smol::GenerateParams a = cpp_params;
        a.dry_multiplier = 2.5f;
        a.dry_base = 1.5f;
        a.dry_allowed_length = 3;
        a.dry_penalty_last_n = 32;
        a.dry_sequence_breakers = {","};
        smol_params b = p;
        const char* breakers[] = {","};
        b.dry_multiplier = 2.5;
        b.dry_base = 1.5;
        b.dry_allowed_length = 3;
        b.dry_penalty_last_n = 32;
        b.dry_sequence_breakers = breakers;
        b.n_dry_sequence_breakers = 1;
        both(a, b);
    }
    {  // XTC, sampled and seeded
        smol::GenerateParams a = cpp_params;
        a.temperature = 0.9f;
        a.seed = 99;
        a.xtc_probability = 0.7f;
        a.xtc_threshold = 0.05f;
        smol_params b = p;
        b.temperature = 0.9;
        b.seed = 99;
        b.xtc_probability = 0.7;
        b.xtc_threshold = 0.05;
        both(a, b);
    }
    {  // lookup decoding: the same drafts and acceptances
        smol::GenerateParams a = cpp_params;
        a.lookup.mode = smol::LookupMode::on;
        a.lookup.k = 3;
        a.lookup.max_ngram = 2;
        smol_params b = p;
        b.lookup = 1;
        b.lookup_k = 3;
        b.lookup_max_ngram = 2;
        both(a, b);
    }
    {  // token ids in, and ids to text
        const std::vector<int32_t> ids = cpp.tokenize(prompt);
        cpp.reset();
        smol_reset(c);
        const smol::GenerateResult want = cpp.generate_tokens(ids, cpp_params);
        CResult got(smol_generate_tokens(c, ids.data(), ids.size(), &p, nullptr, nullptr));
        EXPECT(got && tokens_of(*got) == want.tokens);
        size_t length = 0;
        char* text = smol_detokenize(c_model, want.tokens.data(), want.tokens.size(), 1, &length);
        EXPECT(text && std::string(text, length) == cpp_model->tokenizer().decode(want.tokens));
        smol_string_free(text);
    }
    {  // the chat's ids and text, with every chat option set
        const std::vector<smol::ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hi"}};
        const smol_message c_messages[2] = {{"system", "Be brief.", 0}, {"user", "Hi", 0}};
        smol::ChatOptions options;
        options.enable_thinking = false;
        options.today = "02 February 2026";
        options.xml_tools = {"{\"name\": \"a\"}"};
        options.python_tools = {"def b(): ..."};
        smol_params b = p;
        const char* xml[] = {"{\"name\": \"a\"}"};
        const char* python[] = {"def b(): ..."};
        b.enable_thinking = 0;
        b.today = "02 February 2026";
        b.xml_tools = xml;
        b.n_xml_tools = 1;
        b.python_tools = python;
        b.n_python_tools = 1;
        size_t n = 0, length = 0;
        int32_t* ids = smol_tokenize_chat(c, c_messages, 2, &b, &n);
        EXPECT(ids && std::vector<int32_t>(ids, ids + n) == cpp.tokenize_chat(messages, options));
        smol_tokens_free(ids);
        char* text = smol_render_chat(c, c_messages, 2, &b, &length);
        EXPECT(text && std::string(text, length) == cpp.render_chat(messages, options));
        smol_string_free(text);
    }
    smol_generator_free(c);
}

void check_threads(smol_model* model, const std::vector<int32_t>& want) {
    constexpr int kThreads = 8;
    std::atomic<int> mismatches{0}, leaked_errors{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            smol_generator_options o;
            smol_generator_options_init(&o);
            o.n_ctx = 128;
            smol_generator* gen = smol_generator_new(model, &o);
            if (!gen) {
                ++mismatches;
                return;
            }
            // Odd threads make an error first: it stays theirs.
            if (t % 2) {
                const smol_params p = greedy_c(4);
                if (smol_generate(gen, "bad \xff", &p, nullptr, nullptr) ||
                    smol_last_error() != SMOL_ERR_INVALID_ARGUMENT)
                    ++leaked_errors;
            } else if (smol_last_error() != SMOL_OK) {
                ++leaked_errors;
            }
            for (int round = 0; round < 2; ++round) {
                const smol_params p = greedy_c(kTokens);
                CResult r(smol_generate(gen, kPrompt, &p, nullptr, nullptr));
                if (!r || tokens_of(*r) != want) ++mismatches;
                if (smol_reset(gen) != SMOL_OK) ++mismatches;
            }
            smol_generator_free(gen);
        });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT(mismatches == 0);
    EXPECT(leaked_errors == 0);
}

int on_piece_signal(const char*, size_t, void* user_data) {
    static_cast<std::atomic<int>*>(user_data)->fetch_add(1);
    return 1;
}

void check_cancel_from_another_thread(smol_model* model) {
    smol_generator* gen = smol_generator_new(model, nullptr);
    std::atomic<int> pieces{0};
    smol_params p = greedy_c(-1);
    p.ignore_eos = 1;  // would run until the context (4096) is full
    std::thread canceller([&] {
        while (pieces.load() < 3) std::this_thread::yield();
        smol_cancel(gen);
    });
    CResult r(smol_generate(gen, kPrompt, &p, on_piece_signal, &pieces));
    canceller.join();
    EXPECT(r && r->stop_reason == SMOL_STOP_CANCELLED);
    EXPECT(r && r->n_tokens < 4000);
    smol_generator_free(gen);
}

// Microseconds per generated token, C ABI minus C++ API: both stream every
// piece to a callback, on generators of one model, alternating, best of `runs`.
int bench(const std::shared_ptr<const smol::Model>& cpp_model, smol_model* c_model, int runs) {
    constexpr int kBenchTokens = 256;
    smol::Generator cpp(cpp_model);
    smol_generator* c = smol_generator_new(c_model, nullptr);
    smol::GenerateParams cpp_params = greedy_cpp(kBenchTokens);
    cpp_params.ignore_eos = true;
    smol_params c_params = greedy_c(kBenchTokens);
    c_params.ignore_eos = 1;
    size_t sink = 0;
    auto on_cpp = [&](std::string_view piece) {
        sink += piece.size();
        return true;
    };
    auto on_c = [](const char*, size_t length, void* user_data) {
        *static_cast<size_t*>(user_data) += length;
        return 1;
    };
    using Clock = std::chrono::steady_clock;
    double best_cpp = 1e300, best_c = 1e300;
    for (int i = 0; i < runs; ++i) {
        cpp.reset();
        smol_reset(c);
        auto t0 = Clock::now();
        const size_t n_cpp = cpp.generate(kPrompt, cpp_params, on_cpp).tokens.size();
        auto t1 = Clock::now();
        CResult r(smol_generate(c, kPrompt, &c_params, on_c, &sink));
        auto t2 = Clock::now();
        if (!r || n_cpp != kBenchTokens || r->n_tokens != kBenchTokens) return 1;
        best_cpp = std::min(best_cpp, std::chrono::duration<double, std::micro>(t1 - t0).count());
        best_c = std::min(best_c, std::chrono::duration<double, std::micro>(t2 - t1).count());
    }
    std::printf(
        "C++ API %.2f us/token, C ABI %.2f us/token, overhead %.2f us/token (%d runs of %d "
        "tokens, best of each)\n",
        best_cpp / kBenchTokens, best_c / kBenchTokens, (best_c - best_cpp) / kBenchTokens, runs,
        kBenchTokens);
    smol_generator_free(c);
    return sink == 0;
}

}  // namespace

int main(int argc, char** argv) {
    const char* env = std::getenv("SMOL_FIXTURES");
    const std::string dir = env && *env ? env : argc > 1 ? argv[1] : "../shared/fixtures";
    const std::string path = dir + "/tiny-q4km.gguf";
    if (!std::ifstream(path)) {
        const char* required = std::getenv("SMOL_REQUIRE_FIXTURES");
        if (required && std::string(required) == "1") {
            std::fprintf(stderr, "fixture '%s' is missing and SMOL_REQUIRE_FIXTURES=1\n",
                         path.c_str());
            return 1;
        }
        std::printf("skipping: fixture '%s' not found (set SMOL_FIXTURES)\n", path.c_str());
        return 77;
    }
    smol::LoadOptions options;
    options.n_threads = 2;
    const auto cpp_model = smol::Model::load(path, options);
    smol_load_options c_options;
    smol_load_options_init(&c_options);
    c_options.n_threads = 2;
    smol_model* c_model = smol_model_load(path.c_str(), &c_options);
    if (!c_model) {
        std::fprintf(stderr, "load failed: %s\n", smol_last_error_message());
        return 1;
    }
    if (argc > 2 && std::string(argv[2]) == "--bench") {
        const int status = bench(cpp_model, c_model, argc > 3 ? std::atoi(argv[3]) : 20);
        smol_model_free(c_model);
        return status;
    }

    // Under ThreadSanitizer (tools/ci-sanitize.sh) the single-thread parity
    // checks, 10x slower there and run by every other build, give way to the
    // ones with threads.
    if (!smol_test::kThreadSanitizer) {
        check_parity(cpp_model, c_model);
        check_context_parity(cpp_model, c_model);
        check_knob_parity(cpp_model, c_model);
    }
    smol::Generator reference(cpp_model);
    const smol::GenerateResult want = reference.generate(kPrompt, greedy_cpp(kTokens));
    check_threads(c_model, want.tokens);
    check_cancel_from_another_thread(c_model);
    if (argc > 2) {
        std::ofstream out(argv[2], std::ios::binary);
        out << want.text;
        EXPECT(out.good());
    }
    smol_model_free(c_model);
    if (failures) {
        std::fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    std::printf("the C ABI matches the C++ API\n");
    return 0;
}
