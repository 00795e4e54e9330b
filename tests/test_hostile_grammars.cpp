// Hostile grammars and JSON Schemas: the kind a mod, a plugin or a tool
// definition from elsewhere can hand to GenerateParams::grammar / json_schema.
// Each case of the catalogue (nested counted repetitions at several depths and
// counts, huge alternations, long optional chains, deep rule chains, wide
// classes, long literals, deep groups, nested schemas) is compiled with the
// default limits and, when it compiles, driven through TokenConstraint
// (masks over the real 128k vocabulary, then accept) for a few tokens, as the
// generator drives it. Must hold: a result or a typed error (resource or
// invalid_argument naming the limit), never a crash or a hang; every step's
// work stays within MatcherLimits::max_step_work and the tables within their
// caps. Bounds are checked as work counts, not wall time.
#include <doctest/doctest.h>

#include <smol/constrain/constraint.hpp>
#include <smol/generator.hpp>
#include <smol/smol.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "support/expect_error.hpp"
#include "support/fixtures.hpp"

// In a namespace of its own: tests/CMakeLists.txt compiles it in one unit with
// the other files of its group.
namespace test_hostile_grammars {

namespace {

std::shared_ptr<const smol::Model> tiny_model() {
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return nullptr;
    static std::shared_ptr<const smol::Model> model = smol::Model::load(*path);
    return model;
}

std::shared_ptr<const smol::TokenVocabulary> vocabulary() {
    static std::shared_ptr<const smol::TokenVocabulary> vocab =
        tiny_model() ? std::make_shared<const smol::TokenVocabulary>(tiny_model()->tokenizer())
                     : nullptr;
    return vocab;
}

std::string repeat(const std::string& s, size_t n) {
    std::string out;
    out.reserve(s.size() * n);
    for (size_t i = 0; i < n; ++i) out += s;
    return out;
}

// ((X{lo,hi}){lo,hi}...) nested `depth` times.
std::string nested_counts(const std::string& atom, size_t depth, const std::string& count) {
    std::string g = atom;
    for (size_t d = 0; d < depth; ++d) g = "(" + g + ")" + count;
    return "root ::= " + g;
}

std::string alternation(size_t n, const std::string& prefix, const std::string& suffix) {
    std::string g = "root ::= ";
    for (size_t i = 0; i < n; ++i)
        g += (i ? " | \"" : "\"") + prefix + std::to_string(i) + suffix + "\"";
    return g;
}

struct Case {
    std::string name;
    std::string text;
    bool schema = false;
};

std::vector<Case> grammar_catalogue() {
    std::vector<Case> cases;
    // Nested counted repetitions: depths 1..5, counts small to the maximum.
    for (const char* atom : {"\"a\"", "[a-c]"}) {
        for (size_t depth = 1; depth <= 5; ++depth) {
            for (const char* count :
                 {"{0,2}", "{0,30}", "{0,100}", "{1,1000}", "{0,10000}", "{3}", "*"}) {
                cases.push_back({"nested " + std::string(atom) + " depth " + std::to_string(depth) +
                                     " " + count,
                                 nested_counts(atom, depth, count)});
            }
        }
    }
    cases.push_back({"issue reproducer", "root ::= ((\"a\"{0,100}){0,100}){0,100}"});
    cases.push_back({"counts of counts of literals", "root ::= \"x\"{100}{100}{100}"});
    cases.push_back({"nested two-byte counts", nested_counts("\"ab\"", 4, "{0,1000}")});
    cases.push_back(
        {"exact counts multiplied past max_positions", "root ::= (\"ab\"{10000}){10000}"});
    // Huge alternations: literals (a trie), rule references (no shared prefix).
    cases.push_back({"50,000 literals", alternation(50000, "e", "")});
    cases.push_back({"50,000 quoted literals", alternation(50000, "\\\"v", "\\\"")});
    cases.push_back({"20,000 one-byte literals", alternation(20000, "", "")});
    cases.push_back(
        {"duplicate literals", "root ::= " + repeat("\"same\" | ", 10000) + "\"same\""});
    {
        std::string g = "root ::= ";
        for (size_t i = 0; i < 20000; ++i) g += (i ? " | r" : "r") + std::to_string(i);
        for (size_t i = 0; i < 20000; ++i)
            g += "\nr" + std::to_string(i) + " ::= [a-z] \"" + std::to_string(i) + "\"";
        cases.push_back({"20,000 rule alternatives", g});
    }
    {
        std::string g = "root ::= ";
        for (size_t i = 1; i <= 1400; ++i) g += (i > 1 ? " | \"" : "\"") + repeat("a", i) + "\"";
        cases.push_back({"nested literal prefixes a | aa | aaa ...", g});
    }
    cases.push_back({"100,000 empty alternatives", "root ::= \"a\" (" + repeat("|", 100000) + ")"});
    // Long optional chains: every skip is another parse.
    cases.push_back({"20,000 optional literals", "root ::= " + repeat("\"a\"? ", 20000)});
    cases.push_back({"5,000 optional classes", "root ::= " + repeat("[a-z]? ", 5000) + "\"!\""});
    cases.push_back({"optional chain of stars", "root ::= " + repeat("\"a\"* ", 2000)});
    // Deep rule chains: tail calls, non-tail calls (deep stacks), a long cycle.
    {
        std::string tail = "root ::= r0", inner = "root ::= s0", cycle = "root ::= c0";
        for (size_t i = 0; i < 50000; ++i) {
            const std::string n = std::to_string(i), m = std::to_string(i + 1);
            tail += "\nr" + n + " ::= \"a\" r" + m;
            inner += "\ns" + n + " ::= s" + m + " \"b\"";
            cycle += "\nc" + n + " ::= c" + m;
        }
        tail += "\nr50000 ::= \"z\"";
        inner += "\ns50000 ::= \"z\"";
        cycle += "\nc50000 ::= c0 \"x\" | \"y\"";
        cases.push_back({"50,000 rules, tail calls", tail});
        cases.push_back({"50,000 rules, nested calls", inner});
        cases.push_back({"50,000 rules, left recursive cycle", cycle});
    }
    cases.push_back({"recursion through a group",
                     "root ::= (\"(\" root \")\" | \"x\"){0,50} (\"[\" root \"]\")?"});
    // Wide classes.
    cases.push_back({"every code point", "root ::= .{0,10000}"});
    cases.push_back({"negated class, counted", "root ::= [^\"\\\\]{0,10000}"});
    {
        std::string c = "root ::= [";
        for (uint32_t cp = 0x100; cp < 0x100 + 20000; cp += 2) {
            char buf[16];
            std::snprintf(buf, sizeof buf, "\\u%04X", unsigned(cp));
            c += buf;
        }
        cases.push_back({"class of 10,000 separate code points", c + "]{1,50}"});
    }
    cases.push_back({"classes nested in counts", nested_counts(".", 3, "{0,50}")});
    // Long literals.
    cases.push_back({"500,000-byte literal", "root ::= \"" + repeat("xy", 250000) + "\""});
    cases.push_back({"long literal, counted", "root ::= (\"" + repeat("q", 5000) + "\"){0,100}"});
    cases.push_back({"long literals alternated", "root ::= \"" + repeat("a", 100000) + "b\" | \"" +
                                                     repeat("a", 100000) + "c\""});
    // Deep groups: the nesting limit and just under it.
    cases.push_back(
        {"groups nested 128 deep", "root ::= " + repeat("(", 128) + "\"a\"" + repeat(")", 128)});
    cases.push_back({"groups nested 100,000 deep", "root ::= " + repeat("(", 100000)});
    cases.push_back({"groups nested 40 deep, each counted",
                     "root ::= " + repeat("(", 40) + "\"a\"" + repeat("){0,3}", 40)});
    return cases;
}

std::vector<Case> schema_catalogue() {
    std::vector<Case> cases;
    auto enum_of = [](size_t n, bool strings) {
        std::string s = "{\"enum\": [";
        for (size_t i = 0; i < n; ++i)
            s += (i ? ", " : "") + (strings ? "\"e" + std::to_string(i) + "\"" : std::to_string(i));
        return s + "]}";
    };
    cases.push_back({"enum of 50,000 strings", enum_of(50000, true), true});
    cases.push_back({"enum of 50,000 integers", enum_of(50000, false), true});
    {
        std::string s = "{\"anyOf\": [";
        for (size_t i = 0; i < 5000; ++i)
            s += std::string(i ? ", " : "") + "{\"type\": \"object\", \"properties\": {\"k" +
                 std::to_string(i) + "\": {\"type\": \"integer\"}}, \"required\": [\"k" +
                 std::to_string(i) + "\"]}";
        cases.push_back({"anyOf of 5,000 objects", s + "]}", true});
    }
    {
        std::string s = "{\"anyOf\": [";
        for (size_t i = 0; i < 5000; ++i)
            s += std::string(i ? ", " : "") +
                 "{\"type\": \"string\", \"maxLength\": " + std::to_string(i + 1) + "}";
        cases.push_back({"anyOf of 5,000 bounded strings", s + "]}", true});
    }
    for (size_t depth : {2, 4, 8}) {
        std::string s = "{\"type\": \"string\", \"maxLength\": 10000}";
        for (size_t d = 0; d < depth; ++d)
            s = "{\"type\": \"array\", \"maxItems\": 10000, \"items\": " + s + "}";
        cases.push_back({"arrays of 10,000 nested " + std::to_string(depth) + " deep", s, true});
    }
    {
        std::string s = "{\"type\": \"object\", \"properties\": {";
        for (size_t i = 0; i < 3000; ++i)
            s += std::string(i ? ", " : "") + "\"p" + std::to_string(i) +
                 "\": {\"type\": \"integer\"}";
        cases.push_back({"3,000 optional properties", s + "}}", true});
    }
    {
        // Each level refers to the one below twice: small text, a wide grammar.
        std::string s = "{\"$defs\": {\"d0\": true";
        for (size_t d = 1; d <= 60; ++d) {
            const std::string below = "{\"$ref\": \"#/$defs/d" + std::to_string(d - 1) + "\"}";
            s += ", \"d" + std::to_string(d) + "\": {\"anyOf\": [" + below +
                 ", {\"type\": \"array\", \"maxItems\": 100, \"items\": " + below + "}]}";
        }
        cases.push_back(
            {"anyOf of $refs doubling 60 deep", s + "}, \"$ref\": \"#/$defs/d60\"}", true});
    }
    cases.push_back({"free-form values", "{\"type\": \"object\"}", true});
    return cases;
}

enum class Outcome { ran, refused };

// Compiles `c` and drives it for up to `steps` tokens through TokenConstraint
// with random allowed tokens; every error must be typed and name its limit.
Outcome drive(const Case& c, size_t steps, uint64_t seed) {
    INFO("case: " << c.name);
    std::string text = c.text;
    if (c.schema) {
        auto converted = smol::try_json_schema_to_grammar(c.text);
        if (!converted) {
            const smol::ErrorKind kind = converted.error().kind;
            INFO("schema error: " << converted.error().message);
            CHECK((kind == smol::ErrorKind::resource || kind == smol::ErrorKind::invalid_argument ||
                   kind == smol::ErrorKind::unsupported));
            return Outcome::refused;
        }
        text = std::move(converted).value();
    }
    auto grammar = smol::Grammar::try_parse(text);
    if (!grammar) {
        const smol::ErrorKind kind = grammar.error().kind;
        INFO("grammar error: " << grammar.error().message);
        CHECK((kind == smol::ErrorKind::resource || kind == smol::ErrorKind::invalid_argument));
        if (kind == smol::ErrorKind::resource)
            CHECK(grammar.error().message.find("Limits::") != std::string::npos);
        return Outcome::refused;
    }
    const smol::MatcherLimits limits;
    auto masker = std::make_shared<smol::TokenMasker>(
        std::make_shared<const smol::Grammar>(std::move(grammar).value()), vocabulary(), limits);
    const smol::GrammarMatcher& m = masker->matcher();
    auto check_bounds = [&] {
        CHECK(m.work_done() <= limits.max_step_work);
        CHECK(m.n_states() <= limits.hard_states);
        CHECK(m.n_nodes() <= limits.max_nodes);
    };
    if (masker->start() < 0) {
        INFO("start: " << m.overflow_message());
        CHECK(masker->start() == smol::GrammarMatcher::kOverflow);
        CHECK(m.overflow_message().find("MatcherLimits::") != std::string::npos);
        check_bounds();
        return Outcome::refused;
    }
    smol::TokenConstraint constraint(masker);
    const size_t n_vocab = vocabulary()->n_vocab();
    std::vector<float> logits(n_vocab);
    std::mt19937_64 rng(seed);
    for (size_t step = 0; step < steps; ++step) {
        std::fill(logits.begin(), logits.end(), 0.0f);
        const smol::Status applied = constraint.apply(logits.data(), n_vocab);
        check_bounds();
        if (!applied) {
            INFO("apply: " << applied.error().message);
            CHECK(applied.error().kind == smol::ErrorKind::resource);
            CHECK(applied.error().message.find("MatcherLimits::") != std::string::npos);
            // Usable again after the error: a new generation starts afresh.
            constraint.reset();
            CHECK_FALSE(m.overflowed());
            return Outcome::refused;
        }
        std::vector<int32_t> allowed;
        for (size_t id = 0; id < n_vocab; ++id)
            if (!std::isinf(logits[id])) allowed.push_back(int32_t(id));
        REQUIRE_FALSE(allowed.empty());
        const int32_t token = allowed[rng() % allowed.size()];
        const smol::Status accepted = constraint.accept(token);
        check_bounds();
        if (!accepted) {
            INFO("accept: " << accepted.error().message);
            CHECK(accepted.error().kind == smol::ErrorKind::resource);
            constraint.reset();
            return Outcome::refused;
        }
        if (constraint.finished()) break;
        bool eog = false;
        for (int32_t id : vocabulary()->end_of_generation()) eog = eog || id == token;
        if (eog) break;
    }
    return Outcome::ran;
}

}  // namespace

TEST_CASE("hostile grammars: each ends with a result or a typed error within the limits") {
    if (!vocabulary()) return;
    size_t ran = 0, refused = 0;
    uint64_t seed = 1;
    for (const Case& c : grammar_catalogue()) {
        const auto start = std::chrono::steady_clock::now();
        const Outcome outcome = drive(c, 6, seed++);
        (outcome == Outcome::ran ? ran : refused) += 1;
        if (std::getenv("SMOL_HOSTILE_VERBOSE"))  // which case costs what, when tuning
            std::fprintf(
                stderr, "%8.3f s  %-7s %s\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                outcome == Outcome::ran ? "ran" : "refused", c.name.c_str());
    }
    MESSAGE("grammar catalogue: " << ran << " ran, " << refused << " refused");
    CHECK(ran > 40);
    CHECK(refused > 10);
}

TEST_CASE("hostile JSON Schemas: each ends with a result or a typed error within the limits") {
    if (!vocabulary()) return;
    size_t ran = 0;
    uint64_t seed = 100;
    for (const Case& c : schema_catalogue()) {
        const auto start = std::chrono::steady_clock::now();
        const Outcome outcome = drive(c, 6, seed++);
        ran += outcome == Outcome::ran;
        if (std::getenv("SMOL_HOSTILE_VERBOSE"))
            std::fprintf(
                stderr, "%8.3f s  %-7s %s\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                outcome == Outcome::ran ? "ran" : "refused", c.name.c_str());
    }
    CHECK(ran >= 5);
}

TEST_CASE("hostile grammars: large alternations of literals work (left-factored)") {
    if (!vocabulary()) return;
    // 50,000 literals: the compiled trie keeps a handful of parses per state.
    const Case enum_case{"", alternation(50000, "e", "")};
    const smol::Grammar g = smol::Grammar::parse(enum_case.text);
    smol::GrammarMatcher m(std::make_shared<const smol::Grammar>(g));
    int32_t s = m.step(m.start(), "e4999");
    REQUIRE(s >= 0);
    CHECK(m.can_end(s));
    CHECK(m.can_continue(s));  // e49990 .. e49999
    CHECK(m.step(s, "9") >= 0);
    CHECK(m.step(m.start(), "e50000") < 0);
    CHECK(m.work_done() < 1000);  // one parse per literal would be 50,000
    CHECK(drive(enum_case, 8, 3) == Outcome::ran);
}

TEST_CASE("hostile grammars: the issue's reproducers through the generator, which stays usable") {
    auto model = tiny_model();
    if (!model) return;
    smol::Generator gen(model);
    smol::GenerateParams p;
    p.max_tokens = 64;
    p.temperature = 1.0f;
    p.seed = 3;
    p.grammar = "root ::= ((\"a\"{0,100}){0,100}){0,100}";
    auto run = [&] { gen.generate("x", p); };
    smol_test::expect_error(run, smol::ErrorKind::resource, {"MatcherLimits::max_tops"});
    smol_test::expect_error(run, smol::ErrorKind::resource, {"MatcherLimits::max_tops"});

    // Counts of 30: the start state fits, a later step passes a limit.
    p.grammar = "root ::= ((\"a\"{0,30}){0,30}){0,30}";
    bool resource = false;
    try {
        const smol::GenerateResult r = gen.generate("x", p);
        CHECK(r.text.find_first_not_of('a') == std::string::npos);
    } catch (const smol::Error& e) {
        CHECK(e.kind() == smol::ErrorKind::resource);
        resource = true;
    }
    MESSAGE("counts of 30: " << std::string(resource ? "resource error" : "text"));

    p.grammar.clear();
    std::string schema = "{\"enum\": [";
    for (int i = 0; i < 50000; ++i) schema += (i ? ", \"e" : "\"e") + std::to_string(i) + "\"";
    p.json_schema = schema + "]}";
    const smol::GenerateResult r = gen.generate("x", p);
    CHECK(r.stop_reason == smol::StopReason::eos);
    REQUIRE(r.text.size() >= 4);
    CHECK(r.text.front() == '"');
    CHECK(r.text.back() == '"');
    const int value = std::stoi(r.text.substr(2, r.text.size() - 3));
    CHECK(r.text == "\"e" + std::to_string(value) + "\"");
    CHECK(value < 50000);

    // The generator still works, with and without a grammar.
    smol::GenerateParams ok;
    ok.grammar = "root ::= \"yes\" | \"no\"";
    ok.temperature = 0;
    const smol::GenerateResult yes_no = gen.generate("x", ok);
    CHECK(yes_no.stop_reason == smol::StopReason::eos);
    CHECK((yes_no.text == "yes" || yes_no.text == "no"));
    smol::GenerateParams free;
    free.max_tokens = 4;
    CHECK(gen.generate("x", free).tokens.size() == 4);
}

}  // namespace test_hostile_grammars
