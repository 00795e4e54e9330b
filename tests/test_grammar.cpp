// The constraint engine (include/smol/constrain/): the GBNF parser, the
// byte-level matcher, token masks against a brute-force check on the real
// 128k vocabulary, and constrained generation through the Generator.
#include <doctest/doctest.h>

#include <smol/constrain/constraint.hpp>
#include <smol/generator.hpp>
#include <smol/smol.hpp>

#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "support/expect_error.hpp"
#include "support/fixtures.hpp"

// In a namespace of its own: tests/CMakeLists.txt compiles it in one unit with
// the other files of its group.
namespace test_grammar {

namespace {

std::shared_ptr<const smol::Grammar> compile(const std::string& text) {
    return std::make_shared<const smol::Grammar>(smol::Grammar::parse(text));
}

// Whole-text match: a complete match of the grammar.
bool matches(const smol::Grammar& g, std::string_view text) {
    smol::GrammarMatcher m(std::make_shared<const smol::Grammar>(g));
    const int32_t s = m.step(m.start(), text);
    return s >= 0 && m.can_end(s);
}
// A prefix of some match.
bool viable(const smol::Grammar& g, std::string_view text) {
    smol::GrammarMatcher m(std::make_shared<const smol::Grammar>(g));
    return m.step(m.start(), text) >= 0;
}

smol::ErrorKind parse_error(const std::string& text, std::string* message = nullptr) {
    auto r = smol::Grammar::try_parse(text);
    REQUIRE_MESSAGE(!r.ok(), "expected a parse error for: " << text);
    if (message) *message = r.error().message;
    return r.error().kind;
}

const char* kJsonish = R"gbnf(
# A small JSON subset: objects of lower-case keys to numbers, strings, lists.
root   ::= object
object ::= "{" ws ( pair ( "," ws pair )* )? "}" ws
pair   ::= string ws ":" ws value ws
value  ::= object | string | number | "[" ws ( value ( "," ws value )* )? "]" ws | "true" | "null"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/nt] )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]{0,5} ) ( "." [0-9]{1,3} )?
ws     ::= [ \t\n]{0,3}
)gbnf";

const char* kExpression = R"gbnf(
root ::= expr
expr ::= term ( [-+] term )*
term ::= factor ( [*/] factor )*
factor ::= [0-9]{1,4} | "(" expr ")" | "sin(" expr ")"
)gbnf";

const char* kBrackets = R"gbnf(root ::= pair+
pair ::= "(" pair* ")" | "[" pair* "]" | "{" pair* "}")gbnf";

// Long bounded repetitions (past the 16-byte short-token horizon), nested,
// over bytes and over multi-byte characters: masks share walks across counts.
const char* kBounded = R"gbnf(
root ::= "[" item ("," item){0,30} "]"
item ::= "\"" ( [^"\\] | "\\" ["n] ){0,40} "\"" | [0-9]{1,20} | "<" [a-z ]{3,25} ">"
)gbnf";

const char* kEnum = R"gbnf(root ::= "red" | "green" | "blue" | "grün" | "青")gbnf";

}  // namespace

TEST_CASE("grammar: literals, classes, repetition and groups match as documented") {
    const smol::Grammar g = smol::Grammar::parse(kJsonish);
    CHECK(matches(g, "{}"));
    CHECK(matches(g, R"({"a": 1, "b": [1, 2.5, "x", {"c": null}], "d": true})"));
    CHECK(matches(g, "{\"é\\n\": \"日本\"}"));
    CHECK_FALSE(matches(g, R"({"a": 01})"));
    CHECK_FALSE(matches(g, R"({"a": 1234567})"));  // [0-9]{0,5}
    CHECK_FALSE(matches(g, R"({"a": 1.2345})"));   // [0-9]{1,3}
    CHECK_FALSE(matches(g, "{\"a\x01\": 1}"));     // control character
    CHECK_FALSE(matches(g, R"({"a": 1)"));
    CHECK(viable(g, R"({"a": 1)"));
    CHECK(viable(g, "{\"\xe6\x97"));            // inside a 3-byte character
    CHECK_FALSE(viable(g, "{\"\xe6\x41"));      // a broken UTF-8 sequence
    CHECK_FALSE(viable(g, "{\"\xed\xa0\x80"));  // a surrogate's encoding is never valid

    const smol::Grammar e = smol::Grammar::parse(kExpression);
    CHECK(matches(e, "1+2*(3-sin(4/5))"));
    CHECK_FALSE(matches(e, "1+"));
    CHECK_FALSE(matches(e, "12345"));

    const smol::Grammar b = smol::Grammar::parse(kBrackets);
    CHECK(matches(b, "([]{()})[]"));
    CHECK_FALSE(matches(b, "([)]"));
    CHECK_FALSE(matches(b, ""));

    const smol::Grammar n = smol::Grammar::parse(kEnum);
    for (const char* word : {"red", "green", "blue", "grün", "青"}) CHECK(matches(n, word));
    CHECK_FALSE(matches(n, "gree"));
    CHECK_FALSE(matches(n, "redd"));

    const smol::Grammar counts = smol::Grammar::parse(R"(root ::= "a"{2} "b"{1,} "c"{,2} "d"?)");
    CHECK(matches(counts, "aab"));
    CHECK(matches(counts, "aabbbccd"));
    CHECK_FALSE(matches(counts, "ab"));
    CHECK_FALSE(matches(counts, "aabccc"));

    const smol::Grammar any = smol::Grammar::parse(R"(root ::= "<" .{1,2} ">")");
    CHECK(matches(any, "<\xf0\x9f\x98\x80>"));  // one 4-byte code point
    CHECK(matches(any, "<ab>"));
    CHECK_FALSE(matches(any, "<abc>"));

    const smol::Grammar escapes =
        smol::Grammar::parse(R"(root ::= "\x41\u00e9\U0001F600\t" [\]\-\^] [^\n])");
    CHECK(matches(escapes, "A\xc3\xa9\xf0\x9f\x98\x80\t-x"));
    CHECK_FALSE(matches(escapes, "A\xc3\xa9\xf0\x9f\x98\x80\t-\n"));
}

TEST_CASE("grammar: long repetitions run at constant stack depth") {
    // x* is right recursion run as a tail call: the state after each x is the
    // same interned state, so a 10000-byte match makes no new states.
    auto g = compile(R"(root ::= "[" [a-z]* "]")");
    smol::GrammarMatcher m(g);
    int32_t s = m.step(m.start(), std::string_view("[ab"));
    const size_t states = m.n_states();
    s = m.step(s, std::string(10000, 'q'));
    REQUIRE(s >= 0);
    CHECK(m.n_states() == states);
    CHECK(m.can_end(m.step(s, ']')));
}

TEST_CASE("grammar: clear errors for bad grammars") {
    std::string message;
    CHECK(parse_error("root ::= \"abc", &message) == smol::ErrorKind::invalid_argument);
    CHECK(message.find("unterminated") != std::string::npos);
    CHECK(message.find("line 1") != std::string::npos);
    CHECK(parse_error("a ::= \"x\"", &message) == smol::ErrorKind::invalid_argument);
    CHECK(message.find("root") != std::string::npos);
    CHECK(parse_error("root ::= missing", &message) == smol::ErrorKind::invalid_argument);
    CHECK(message.find("`missing`") != std::string::npos);
    CHECK(parse_error("root ::= root \"x\" | \"y\"", &message) ==
          smol::ErrorKind::invalid_argument);
    CHECK(message.find("left recursion") != std::string::npos);
    CHECK(parse_error("root ::= a\na ::= b? a \"x\" | \"y\"\nb ::= \"z\"", &message) ==
          smol::ErrorKind::invalid_argument);
    CHECK(message.find("left recursion") != std::string::npos);
    CHECK(parse_error("root ::= \"x\" root", &message) == smol::ErrorKind::invalid_argument);
    CHECK(message.find("no complete text") != std::string::npos);
    CHECK(parse_error("root ::= [z-a]") == smol::ErrorKind::invalid_argument);
    CHECK(parse_error("root ::= \"\\q\"") == smol::ErrorKind::invalid_argument);
    CHECK(parse_error("root ::= \"\\uD800\"") == smol::ErrorKind::invalid_argument);
    CHECK(parse_error("root ::= (\"a\"") == smol::ErrorKind::invalid_argument);
    CHECK(parse_error("root ::= \"a\"{3,2}") == smol::ErrorKind::invalid_argument);
    CHECK(parse_error("root ::= \"a\"{99999999}") == smol::ErrorKind::invalid_argument);
    CHECK(parse_error("root ::= \"a\"\nroot ::= \"b\"") == smol::ErrorKind::invalid_argument);
    CHECK(parse_error("root ::= \"\xff\"") == smol::ErrorKind::invalid_argument);
    CHECK(parse_error(std::string(1000, '(') + "\"a\"" + std::string(1000, ')')) ==
          smol::ErrorKind::invalid_argument);
    // Size: 2 * 10000 * 10000 positions would be far past the bound.
    smol::GrammarLimits small;
    small.max_positions = 1000;
    auto big = smol::Grammar::try_parse("root ::= (\"ab\"{0,600}){0,600}", small);
    REQUIRE_FALSE(big.ok());
    CHECK(big.error().kind == smol::ErrorKind::resource);
    // Unproductive alternatives are dropped, the rest still works.
    const smol::Grammar pruned =
        smol::Grammar::parse("root ::= \"a\" dead | \"b\"\ndead ::= \"x\" dead");
    CHECK(matches(pruned, "b"));
    CHECK_FALSE(viable(pruned, "a"));
}

TEST_CASE("token masks equal a brute-force check of every token on random states") {
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return;
    auto model = smol::Model::load(*path);
    auto vocab = std::make_shared<const smol::TokenVocabulary>(model->tokenizer());
    REQUIRE(vocab->n_vocab() == 128256);
    std::mt19937_64 rng(7);
    size_t checked_states = 0;
    for (const char* text : {kJsonish, kExpression, kBrackets, kEnum, kBounded}) {
        smol::TokenMasker masker(compile(text), vocab);
        smol::GrammarMatcher& m = masker.matcher();
        const bool bounded = text == kBounded;
        for (int walk = 0; walk < (bounded ? 4 : 6); ++walk) {
            int32_t s = m.start();
            for (int step = 0; step < (bounded ? 60 : 24) && s >= 0; ++step) {
                // Check this state's mask against feeding each token's bytes.
                const smol::TokenMask mask = masker.mask(s);
                size_t allowed = 0;
                for (int32_t id = 0; id < int32_t(vocab->n_vocab()); ++id) {
                    const bool expect = vocab->is_text(id) && m.step(s, vocab->piece(id)) >= 0;
                    allowed += expect;
                    if (mask.allows(id) != expect) {
                        FAIL_CHECK("token " << id << " '" << std::string(vocab->piece(id))
                                            << "' mask " << mask.allows(id) << " brute force "
                                            << expect);
                        break;
                    }
                }
                CHECK(mask.count == allowed);
                ++checked_states;
                // A random viable byte (mid-character states included).
                std::vector<uint8_t> next;
                for (int b = 0; b < 256; ++b)
                    if (m.step(s, uint8_t(b)) >= 0) next.push_back(uint8_t(b));
                if (next.empty()) break;
                s = m.step(s, next[rng() % next.size()]);
            }
        }
    }
    CHECK(checked_states > 300);
}

TEST_CASE("matcher: compaction keeps the live state and bounds the tables") {
    smol::MatcherLimits limits;
    limits.soft_states = 8;
    auto g = compile(kJsonish);
    smol::GrammarMatcher m(g, limits);
    const std::string doc = R"({"alpha": [1, 2.5, "xy"], "beta": {"gamma": null, "d": "e"}})";
    int32_t s = m.start();
    for (char c : doc) {
        s = m.step(s, uint8_t(c));
        REQUIRE(s >= 0);
        if (m.needs_compaction()) m.compact({&s});
        CHECK(m.n_states() <= 8 + 4);
    }
    CHECK(m.can_end(s));
}

namespace {

std::shared_ptr<const smol::Model> tiny_model() {
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return nullptr;
    static std::shared_ptr<const smol::Model> model = smol::Model::load(*path);
    return model;
}

}  // namespace

TEST_CASE("generate with a grammar: complete matches at eos, valid prefixes otherwise") {
    auto model = tiny_model();
    if (!model) return;
    smol::Generator gen(model);
    const smol::Grammar g = smol::Grammar::parse(kExpression);
    int eos = 0;
    for (uint64_t seed = 0; seed < 12; ++seed) {
        smol::GenerateParams p;
        p.grammar = kExpression;
        p.seed = seed;
        p.temperature = seed % 3 == 0 ? 0.0f : 1.0f + 0.2f * float(seed % 4);
        p.top_k = 0;
        p.min_p = 0;
        p.top_p = 1;
        p.max_tokens = 48;
        const smol::GenerateResult r = gen.generate("Compute:", p);
        INFO("seed " << seed << " text '" << r.text << "' stop " << smol::to_string(r.stop_reason));
        if (r.stop_reason == smol::StopReason::eos) {
            ++eos;
            CHECK(matches(g, r.text));
        } else {
            CHECK(r.stop_reason == smol::StopReason::max_tokens);
            CHECK(viable(g, r.text));
        }
    }
    CHECK(eos > 0);

    // An enum with greedy sampling ends at once with a member.
    smol::GenerateParams p;
    p.grammar = kEnum;
    p.temperature = 0;
    const smol::GenerateResult r = gen.generate("Colour:", p);
    CHECK(r.stop_reason == smol::StopReason::eos);
    CHECK(matches(smol::Grammar::parse(kEnum), r.text));

    // A complete match wins over ignore_eos.
    p.ignore_eos = true;
    p.max_tokens = 64;
    const smol::GenerateResult r2 = gen.generate("Colour:", p);
    CHECK(r2.stop_reason == smol::StopReason::eos);
    CHECK(r2.text == r.text);
}

TEST_CASE("generate with a grammar: bad inputs are clear errors") {
    auto model = tiny_model();
    if (!model) return;
    smol::Generator gen(model);
    smol::GenerateParams p;
    p.grammar = "root ::= (";
    auto run = [&] { gen.generate("x", p); };
    smol_test::expect_error(run, smol::ErrorKind::invalid_argument, {"grammar"});
    p.grammar = "root ::= \"a\"";
    p.json_schema = "{}";
    smol_test::expect_error(run, smol::ErrorKind::invalid_argument, {"both"});
    p.json_schema.clear();
    p.grammar.clear();
    p.constrain_tool_calls = true;
    smol_test::expect_error(run, smol::ErrorKind::invalid_argument, {"chat.tools"});
    // The generator still works after the errors.
    smol::GenerateParams ok;
    ok.grammar = kEnum;
    ok.temperature = 0;
    CHECK(gen.generate("x", ok).stop_reason == smol::StopReason::eos);
}

TEST_CASE("grammar: left-factored alternations match exactly the same texts") {
    // Random sets of short strings over {a, b}, some alternatives sharing a
    // rule reference before them: every text up to 7 bytes matches (and is a
    // viable prefix) exactly when a brute-force check over the set says so.
    std::mt19937_64 rng(29);
    for (int round = 0; round < 40; ++round) {
        std::set<std::string> words;
        const size_t n = 1 + rng() % 24;
        while (words.size() < n) {
            std::string w;
            for (size_t len = rng() % 6; len > 0; --len) w += "ab"[rng() % 2];
            words.insert(w);
        }
        const bool prefixed = round % 2 == 1;  // root ::= p "..." | p "..." with p ::= "x"?
        std::string text = "root ::= ";
        bool first = true;
        for (const std::string& w : words) {
            text += (first ? "" : " | ") + std::string(prefixed ? "p " : "") + "\"" + w + "\"";
            first = false;
        }
        text += " | " + std::string(prefixed ? "p " : "") + "\"" + *words.begin() + "\"";  // twice
        if (prefixed) text += "\np ::= \"x\"?";
        INFO("grammar: " << text);
        const smol::Grammar g = smol::Grammar::parse(text);
        for (size_t len = 0; len <= 7; ++len) {
            for (uint32_t bits = 0; bits < (1u << len); ++bits) {
                std::string s;
                for (size_t i = 0; i < len; ++i) s += "ab"[(bits >> i) & 1];
                for (const std::string& lead :
                     prefixed ? std::vector<std::string>{"", "x"} : std::vector<std::string>{""}) {
                    const std::string t = lead + s;
                    bool prefix = false;
                    for (const std::string& w : words)
                        prefix = prefix || w.compare(0, s.size(), s) == 0;
                    CHECK(matches(g, t) == (words.count(s) > 0));
                    CHECK(viable(g, t) == prefix);
                }
            }
        }
    }
}

TEST_CASE("grammar: an alternation of 50,000 literals keeps a few parses per state") {
    std::string text = "root ::= ";
    for (int i = 0; i < 50000; ++i) text += (i ? " | \"k" : "\"k") + std::to_string(i) + "\"";
    auto g = compile(text);
    smol::GrammarMatcher m(g);
    REQUIRE(m.start() >= 0);
    int32_t s = m.start();
    for (char c : std::string("k1234")) {
        s = m.step(s, uint8_t(c));
        REQUIRE(s >= 0);
        CHECK(m.work_done() < 64);  // without the trie: one parse per literal, 50,000
    }
    CHECK(m.can_end(s));
    CHECK(matches(*g, "k49999"));
    CHECK_FALSE(matches(*g, "k50000"));
    CHECK_FALSE(matches(*g, "k"));
}

TEST_CASE("matcher: byte classes split the bytes by every byte set") {
    // [a-c] and [b-d]: {a}, {b, c}, {d} and every other byte.
    smol::GrammarMatcher m(compile("root ::= [a-c] [b-d]"));
    CHECK(m.n_byte_classes() == 4);
    CHECK(m.class_of('b') == m.class_of('c'));
    CHECK(m.class_of('a') != m.class_of('b'));
    CHECK(m.class_of('d') != m.class_of('b'));
    CHECK(m.class_of('x') == m.class_of('\0'));
    CHECK(matches(*compile("root ::= [a-c] [b-d]"), "cd"));
    CHECK_FALSE(matches(*compile("root ::= [a-c] [b-d]"), "da"));
}

TEST_CASE("matcher: limits end in kOverflow with the limit named, never a bad index") {
    // 10,000 parses at the start: the start state itself overflows.
    smol::GrammarMatcher nested(compile("root ::= ((\"a\"{0,100}){0,100}){0,100}"));
    CHECK(nested.start() == smol::GrammarMatcher::kOverflow);
    CHECK(nested.overflowed());
    CHECK(nested.overflow_message().find("MatcherLimits::max_tops") != std::string::npos);
    CHECK(nested.step(nested.start(), uint8_t('a')) == smol::GrammarMatcher::kOverflow);
    CHECK_FALSE(nested.can_end(nested.start()));
    CHECK_FALSE(nested.can_continue(smol::GrammarMatcher::kDead));
    CHECK(nested.work_done() <= smol::MatcherLimits{}.max_step_work);

    // A step past the work budget; compaction forgets the overflow.
    auto g = compile("root ::= ((\"a\"{0,30}){0,30})");
    smol::MatcherLimits limits;
    limits.max_step_work = 2 * smol::GrammarMatcher(g).work_done();  // the start's, twice
    smol::GrammarMatcher m(g, limits);
    int32_t s = m.start();
    REQUIRE(s >= 0);
    for (int i = 0; i < 50 && s >= 0; ++i) s = m.step(s, uint8_t('a'));
    CHECK(s == smol::GrammarMatcher::kOverflow);
    CHECK(m.overflow_message().find("MatcherLimits::max_step_work") != std::string::npos);
    // Sticky: a transition not cached yet fails at once (a cached one stays true).
    CHECK(m.step(m.start(), uint8_t('b')) == smol::GrammarMatcher::kOverflow);
    m.compact({});
    CHECK_FALSE(m.overflowed());
    CHECK(m.step(m.start(), uint8_t('a')) >= 0);

    // One rule of more alternatives than the whole budget: refused before
    // they are pushed, and the work count never passes the budget.
    std::string wide = "root ::= r0";
    for (int i = 1; i < 300; ++i) wide += " | r" + std::to_string(i);
    for (int i = 0; i < 300; ++i)
        wide += "\nr" + std::to_string(i) + " ::= \"a\"{" + std::to_string(i) + "} \"b\" | \"c\"";
    limits = {};
    limits.max_step_work = 100;
    smol::GrammarMatcher w(compile(wide), limits);
    CHECK(w.start() == smol::GrammarMatcher::kOverflow);
    CHECK(w.work_done() <= 100);

    // Node and state caps.
    limits = {};
    limits.max_nodes = 64;
    smol::GrammarMatcher deep(compile("root ::= \"(\" root \")\" | \"x\""), limits);
    s = deep.start();
    for (int i = 0; i < 200 && s >= 0; ++i) s = deep.step(s, uint8_t('('));
    CHECK(s == smol::GrammarMatcher::kOverflow);
    CHECK(deep.overflow_message().find("MatcherLimits::max_nodes") != std::string::npos);
    CHECK(deep.n_nodes() <= 64);
}

TEST_CASE("token masks: an overflow mid-walk is reported, uncached, and recovered from") {
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return;
    auto model = smol::Model::load(*path);
    auto vocab = std::make_shared<const smol::TokenVocabulary>(model->tokenizer());
    smol::MatcherLimits limits;
    // Room for 3 states: the first mask's walk needs more.
    limits.max_transitions = 3 * smol::GrammarMatcher(compile(kJsonish)).n_byte_classes();
    auto masker = std::make_shared<smol::TokenMasker>(compile(kJsonish), vocab, limits);
    smol::TokenConstraint constraint(masker);
    std::vector<float> logits(vocab->n_vocab(), 0.0f);
    const smol::Status first = constraint.apply(logits.data(), logits.size());
    REQUIRE_FALSE(first.ok());
    CHECK(first.error().kind == smol::ErrorKind::resource);
    CHECK(first.error().message.find("MatcherLimits::max_transitions") != std::string::npos);
    CHECK(masker->n_cached_masks() == 0);
    // A new generation starts afresh, and fails the same way (not with a stale mask).
    constraint.reset();
    CHECK_FALSE(masker->matcher().overflowed());
    const smol::Status again = constraint.apply(logits.data(), logits.size());
    CHECK_FALSE(again.ok());
    CHECK(masker->n_cached_masks() == 0);
}

}  // namespace test_grammar
