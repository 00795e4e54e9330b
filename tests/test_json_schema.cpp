// JSON and JSON Schema: the strict JSON reader/writer (detail/json.hpp,
// python_repr pinned against Python 3's output), the schema -> grammar
// converter (constrain/json_schema.hpp) keyword by keyword through the real
// grammar engine, its errors, and random documents drawn from the grammars
// checked against an independent validator (json_schema_check.hpp).
#include <doctest/doctest.h>

#include <smol/constrain/grammar.hpp>
#include <smol/constrain/json_schema.hpp>
#include <smol/constrain/matcher.hpp>
#include <smol/detail/json.hpp>

#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "support/json_schema_check.hpp"

// In a namespace of its own: tests/CMakeLists.txt compiles it in one unit with
// the other files of its group.
namespace test_json_schema {

namespace json = smol::detail::json;
using smol::ErrorKind;
using smol::JsonSchemaOptions;

namespace {

json::Value parse_ok(std::string_view text) {
    auto v = json::try_parse(text);
    REQUIRE_MESSAGE(v.ok(), "parse failed: " << text << ": " << v.error().message);
    return std::move(v).value();
}

std::string parse_error(std::string_view text, json::ParseLimits limits = {}) {
    auto v = json::try_parse(text, limits);
    REQUIRE_MESSAGE(!v.ok(), "expected an error for: " << text);
    CHECK(v.error().kind == ErrorKind::invalid_argument);
    return v.error().message;
}

std::string repr(std::string_view text) {
    return json::python_repr(parse_ok(text));
}

// A schema's grammar, compiled by the engine.
struct SchemaGrammar {
    std::string text;
    std::shared_ptr<const smol::Grammar> grammar;
    nlohmann::json schema;

    explicit SchemaGrammar(const std::string& schema_text, const JsonSchemaOptions& options = {})
        : schema(nlohmann::json::parse(schema_text)) {
        auto g = smol::try_json_schema_to_grammar(schema_text, options);
        REQUIRE_MESSAGE(g.ok(), schema_text << ": " << g.error().message);
        text = g.value();
        auto compiled = smol::Grammar::try_parse(text);
        REQUIRE_MESSAGE(compiled.ok(), compiled.error().message << "\n" << text);
        grammar = std::make_shared<const smol::Grammar>(std::move(compiled).value());
    }

    bool accepts(std::string_view doc) const {
        smol::GrammarMatcher m(grammar);
        const int32_t s = m.step(m.start(), doc);
        return s >= 0 && m.can_end(s);
    }
};

bool valid(const nlohmann::json& schema, std::string_view doc, std::string* why = nullptr) {
    return smol_test::validate(nlohmann::json::parse(doc), schema, why);
}

// Every doc of `accepted` is matched by the grammar (and valid: the test data
// itself is checked), every doc of `rejected` is not matched.
void check_schema(const std::string& schema, const std::vector<std::string>& accepted,
                  const std::vector<std::string>& rejected, const JsonSchemaOptions& options = {}) {
    INFO("schema: " << schema);
    const SchemaGrammar g(schema, options);
    INFO("grammar:\n" << g.text);
    for (const std::string& doc : accepted) {
        std::string why;
        CHECK_MESSAGE(g.accepts(doc), "not accepted: " << doc);
        CHECK_MESSAGE(valid(g.schema, doc, &why), "test doc invalid: " << doc << ": " << why);
    }
    for (const std::string& doc : rejected) CHECK_MESSAGE(!g.accepts(doc), "accepted: " << doc);
}

ErrorKind schema_error(const std::string& schema, std::string* message) {
    auto g = smol::try_json_schema_to_grammar(schema);
    REQUIRE_MESSAGE(!g.ok(), "expected an error for: " << schema << "\n" << g.value());
    *message = g.error().message;
    return g.error().kind;
}

void check_schema_error(const std::string& schema, ErrorKind kind,
                        const std::vector<std::string>& needles) {
    std::string message;
    const ErrorKind got = schema_error(schema, &message);
    INFO("schema: " << schema << "\nmessage: " << message);
    CHECK(got == kind);
    for (const std::string& needle : needles)
        CHECK_MESSAGE(message.find(needle) != std::string::npos, "message lacks " << needle);
}

// A random complete text of the grammar: random allowed bytes, leaning to
// closing quotes and brackets so that texts end; empty when it ran too long.
std::string sample(const SchemaGrammar& g, std::mt19937& rng, size_t max_bytes = 3000) {
    smol::GrammarMatcher m(g.grammar);
    int32_t state = m.start();
    std::string out;
    std::vector<uint8_t> allowed;
    while (out.size() < max_bytes) {
        if (m.can_end(state) && (!m.can_continue(state) || rng() % 3 == 0)) return out;
        allowed.clear();
        for (int b = 0; b < 256; ++b)
            if (m.step(state, uint8_t(b)) >= 0) allowed.push_back(uint8_t(b));
        REQUIRE_MESSAGE(!allowed.empty(), "dead end after: " << out);
        uint8_t pick = allowed[rng() % allowed.size()];
        for (uint8_t closer : {'"', ']', '}'})
            if (rng() % 4 == 0 &&
                std::find(allowed.begin(), allowed.end(), closer) != allowed.end())
                pick = closer;
        out += char(pick);
        state = m.step(state, pick);
    }
    return {};
}

// Random documents of the schema's grammar are valid JSON, valid under the schema.
void check_samples(const std::string& schema, int n, const JsonSchemaOptions& options = {}) {
    INFO("schema: " << schema);
    const SchemaGrammar g(schema, options);
    std::mt19937 rng(12345);
    int produced = 0;
    for (int i = 0; i < n; ++i) {
        const std::string doc = sample(g, rng);
        if (doc.empty()) continue;
        ++produced;
        INFO("doc: " << doc);
        nlohmann::json parsed;
        REQUIRE_NOTHROW(parsed = nlohmann::json::parse(doc));
        std::string why;
        CHECK_MESSAGE(smol_test::validate(parsed, g.schema, &why), why);
        CHECK(json::try_parse(doc).ok());
    }
    CHECK(produced > n / 2);
}

}  // namespace

// ---------------------------------------------------------------- json.hpp

TEST_CASE("json: parses every type, keeps number text and member order") {
    const json::Value v = parse_ok(
        R"( {"n": null, "t": true, "f": false, "i": -12, "x": 1.50e+3, "s": "a\"\\\/\b\f\n\r\tb",
             "arr": [1, [2, {}], []], "o": {"k": "v", "k": "w"}} )");
    REQUIRE(v.is_object());
    REQUIRE(v.members.size() == 8);
    CHECK(v.members[0].first == "n");
    CHECK(v.members[7].first == "o");
    CHECK(v.find("n")->is_null());
    CHECK(v.find("t")->is_bool());
    CHECK(v.find("t")->boolean);
    CHECK_FALSE(v.find("f")->boolean);
    CHECK(v.find("i")->text == "-12");
    CHECK(v.find("x")->is_number());
    CHECK(v.find("x")->text == "1.50e+3");
    CHECK(v.find("s")->text == "a\"\\/\b\f\n\r\tb");
    CHECK(v.find("arr")->items.size() == 3);
    CHECK(v.find("arr")->items[1].items[1].is_object());
    CHECK(v.find("o")->members.size() == 2);     // duplicates kept
    CHECK(v.find("o")->find("k")->text == "w");  // the last one wins
    CHECK(v.find("missing") == nullptr);
    CHECK(parse_ok("[]").find("x") == nullptr);
    CHECK(parse_ok(" \t\r\n 7 \n").text == "7");
}

TEST_CASE("json: \\u escapes, surrogate pairs and UTF-8") {
    CHECK(parse_ok(R"("\u0041\u00e9\u4E2D")").text == "A\xC3\xA9\xE4\xB8\xAD");
    CHECK(parse_ok(R"("\ud83d\ude00")").text == "\xF0\x9F\x98\x80");
    CHECK(parse_ok("\"\xF0\x9F\x98\x80 \xC3\xA9\"").text == "\xF0\x9F\x98\x80 \xC3\xA9");
    CHECK(parse_ok(R"("\u0000")").text == std::string(1, '\0'));
}

TEST_CASE("json: errors name what and where") {
    CHECK(parse_error("") == "json: unexpected end of text at byte 0");
    CHECK(parse_error("[1,]") == "json: unexpected character at byte 3");
    CHECK(parse_error("{\"a\":1,}") == "json: expected a member name at byte 7");
    CHECK(parse_error("[01]") == "json: expected ',' or ']' at byte 2");
    CHECK(parse_error("1 2") == "json: unexpected text after the value at byte 2");
    CHECK(parse_error("-") == "json: expected a digit at byte 1");
    CHECK(parse_error("1.") == "json: expected a digit after '.' at byte 2");
    CHECK(parse_error("1e+") == "json: expected a digit in the exponent at byte 3");
    CHECK(parse_error(R"("a\x")") == "json: bad escape at byte 3");
    CHECK(parse_error("\"ab") == "json: unterminated string at byte 3");
    CHECK(parse_error("\"a\tb\"") == "json: control character in string at byte 2");
    CHECK(parse_error("\"\xFF\"") == "json: invalid UTF-8 in string at byte 1");
    CHECK(parse_error("\"\xC3\"") == "json: invalid UTF-8 in string at byte 1");
    CHECK(parse_error("\"\xED\xA0\x80\"") == "json: invalid UTF-8 in string at byte 1");
    CHECK(parse_error(R"("x\ud800")") == "json: lone surrogate at byte 2");
    CHECK(parse_error(R"("\udc00")") == "json: lone surrogate at byte 1");
    CHECK(parse_error(R"("\ud800\u0041")") == "json: lone surrogate at byte 1");
    CHECK(parse_error(R"("\u12G4")") == "json: bad hex digit in \\u escape at byte 5");
    CHECK(parse_error("nul") == "json: unexpected character at byte 0");
    CHECK(parse_error("NaN") == "json: unexpected character at byte 0");
    CHECK(parse_error("{\"a\" 1}") == "json: expected ':' at byte 5");
    CHECK(parse_error("[1 2]") == "json: expected ',' or ']' at byte 3");
    CHECK(parse_error("{\"a\":1 \"b\":2}") == "json: expected ',' or '}' at byte 7");
    CHECK(parse_error("// c\n1").find("json: unexpected character") == 0);
}

TEST_CASE("json: nesting is bounded") {
    const auto nested = [](size_t depth) {
        return std::string(depth, '[') + "1" + std::string(depth, ']');
    };
    CHECK(json::try_parse(nested(64)).ok());
    CHECK(parse_error(nested(65)) == "json: nesting deeper than 64 at byte 64");
    CHECK(parse_error(nested(100000)).find("nesting deeper than 64") != std::string::npos);
    CHECK(parse_error("{\"a\":{\"b\":1}}", json::ParseLimits{1}).find("nesting deeper than 1") !=
          std::string::npos);
    CHECK(json::try_parse(nested(3), json::ParseLimits{3}).ok());
}

TEST_CASE("json: quote and dump") {
    CHECK(json::quote("plain") == "\"plain\"");
    CHECK(json::quote("a\"b\\c") == R"("a\"b\\c")");
    CHECK(json::quote("\n\t\r\b\f") == R"("\n\t\r\b\f")");
    CHECK(json::quote(std::string("\x01\x1f", 2)) == R"("\u0001\u001f")");
    CHECK(json::quote(std::string(1, '\0')) == R"("\u0000")");
    CHECK(json::quote("\xC3\xA9/\x7F") == "\"\xC3\xA9/\x7F\"");
    CHECK(json::dump(parse_ok(R"( { "a" : 1 , "b" : [ true , null , 1.50e3 ] , "c" : {} } )")) ==
          R"({"a":1,"b":[true,null,1.50e3],"c":{}})");
    CHECK(json::dump(parse_ok(R"("\u0001\"")")) == R"("\u0001\"")");
    CHECK(json::dump(json::Value{}) == "null");
    const std::string text = R"({"k":[1,"\n",{"x":false}],"k":-0.0})";
    CHECK(json::dump(parse_ok(text)) == text);
}

// Expected strings: python3 -c 'import json; print(str(json.loads(TEXT)))'.
TEST_CASE("json: python_repr matches Python 3's str(json.loads(...))") {
    CHECK(repr(R"({"a": 1, "b": [true, null]})") == "{'a': 1, 'b': [True, None]}");
    CHECK(repr("[1.0, 100000.0, 1e-05, 1e16, 0.1, 1e22, 123.456, -0, -0.0, 2.5e-5, 1E400, "
               "0.30000000000000004, 5e-324, 1.7976931348623157e308, 12345678901234567890]") ==
          "[1.0, 100000.0, 1e-05, 1e+16, 0.1, 1e+22, 123.456, 0, -0.0, 2.5e-05, inf, "
          "0.30000000000000004, 5e-324, 1.7976931348623157e+308, 12345678901234567890]");
    CHECK(repr("[-1e400, 0.0001, 0.00001, 1e15, 123456789012345678.0, 1.5e300, -2.50, 0e10]") ==
          "[-inf, 0.0001, 1e-05, 1000000000000000.0, 1.2345678901234568e+17, 1.5e+300, -2.5, "
          "0.0]");
    CHECK(repr(R"(["it's", "say \"hi\"", "both ' and \"", "tab\tnl\ncr\rbs\\"])") ==
          R"(["it's", 'say "hi"', 'both \' and "', 'tab\tnl\ncr\rbs\\'])");
    CHECK(repr(R"(["\u0001\u007f\u0080\u00a0\u00e9\u00ad", "\u2028\ud83d\ude00\u4e2d"])") ==
          "['\\x01\\x7f\\x80\\xa0\xC3\xA9\\xad', '\\u2028\xF0\x9F\x98\x80\xE4\xB8\xAD']");
    CHECK(repr(R"({"k": {"a": 1, "a": 2, "b": 3}})") == "{'k': {'a': 2, 'b': 3}}");
    CHECK(repr(R"("top level")") == "top level");  // str() of a str is the text itself
    CHECK(repr("123456789012345678901234567890") == "123456789012345678901234567890");
    CHECK(repr("1.5") == "1.5");
    CHECK(repr("{}") == "{}");
    CHECK(repr("[[], {}, \"\"]") == "[[], {}, '']");
}

TEST_CASE("json: python float repr of many values matches the shortest round trip") {
    // Pinned against Python for a spread of magnitudes (repr switches to
    // scientific below 1e-4 and from 1e16).
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"3.14159", "3.14159"},
        {"1e-4", "0.0001"},
        {"9.999e-5", "9.999e-05"},
        {"1e16", "1e+16"},
        {"9999999999999998.0", "9999999999999998.0"},
        {"0.1e1", "1.0"},
        {"1.25e-10", "1.25e-10"},
        {"7e100", "7e+100"},
        {"2.2250738585072014e-308", "2.2250738585072014e-308"},
        {"4.9406564584124654e-324", "5e-324"},
        {"1e-400", "0.0"},
        {"-1e-400", "-0.0"},
        {"7.120236347223045e-307", "7.120236347223045e-307"},
        {"0.000123", "0.000123"},
        {"100.0", "100.0"}};
    for (const auto& c : cases) CHECK_MESSAGE(repr(c.first) == c.second, c.first);
}

// ------------------------------------------------------- schema -> grammar

TEST_CASE("json schema: grammar shapes") {
    const std::string g = smol::json_schema_to_grammar(R"({"type": "string"})");
    CHECK(g.find("root ::= string\n") == 0);
    CHECK(g.find("string ::= \"\\\"\" char* \"\\\"\"") != std::string::npos);
    const std::string obj = smol::json_schema_to_grammar(
        R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})");
    CHECK(obj.find("ws ::= ( \" \" | \"\\n\" [ \\t]{0,16} )?") != std::string::npos);
    CHECK(obj.find("integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,14} )") != std::string::npos);
    JsonSchemaOptions o;
    o.max_indent = 0;
    o.max_exponent_digits = 0;
    o.max_fraction_digits = 2;
    o.max_integer_digits = 1;
    const std::string small =
        smol::json_schema_to_grammar(R"({"type": "array", "items": {"type": "number"}})", o);
    CHECK(small.find("ws ::= ( \" \" | \"\\n\" )?") != std::string::npos);
    CHECK(small.find("number ::= \"-\"? ( \"0\" | [1-9] ) ( \".\" [0-9]{1,2} )?\n") !=
          std::string::npos);
}

TEST_CASE("json schema: primitive types") {
    check_schema(R"({"type": "string"})", {R"("")", R"("abc")", R"("\u00e9\n\"")", "\"\xC3\xA9\""},
                 {"1", "\"a", R"("\ud800")", "\"\t\"", "null", R"( "a")", R"("a" )"});
    check_schema(R"({"type": "integer"})", {"0", "-0", "7", "-123", "123456789012345"},
                 {"1.0", "01", "1e3", "1234567890123456", "+1", "\"1\""});
    check_schema(R"({"type": "number"})", {"0", "-1.5", "3.25e-10", "1E+292", "0.000000000000001"},
                 {".5", "1.", "1e", "0.1234567890123456", "1e1234", "1e293", "NaN"});
    check_schema(R"({"type": "boolean"})", {"true", "false"}, {"1", "True", "null"});
    check_schema(R"({"type": "null"})", {"null"}, {"0", "\"null\"", "{}"});
    check_schema(R"({"type": ["string", "null"]})", {"null", R"("x")"}, {"1", "true"});
    check_schema(R"({"type": ["integer", "number"]})", {"1", "1.5"}, {"\"1\""});
}

TEST_CASE("json schema: any value, bounded nesting") {
    check_schema("{}", {"1", "null", R"({"a": [1, {"b": "c"}]})", "[[[1]]]", R"("s")"},
                 {"[[[[1]]]]", "", "[1,]"});
    check_schema("true", {"[]", "{}"}, {"[[[[]]]]"});
    JsonSchemaOptions o;
    o.max_any_depth = 0;
    check_schema("{}", {"1", R"("x")"}, {"[]", "{}"}, o);
    check_schema(R"({"description": "anything", "title": "T", "examples": [1], "default": 2,
                     "$schema": "x", "$id": "y", "$comment": "z", "deprecated": false,
                     "readOnly": true, "writeOnly": false, "x-vendor": 1})",
                 {"[1]"}, {});
}

TEST_CASE("json schema: whitespace between tokens only, bounded") {
    check_schema(R"({"type": "array", "items": {"type": "integer"}})",
                 {"[]", "[ ]", "[1,2]", "[ 1 , 2 ]", "[\n  1,\n  2\n]", "[\n\t1]"},
                 {" []", "[] ", "[  1]", "[\n" + std::string(17, ' ') + "1]", "[1\n\n]"});
    JsonSchemaOptions o;
    o.max_indent = 2;
    check_schema(R"({"type": "array"})", {"[\n  1]"}, {"[\n   1]"}, o);
}

TEST_CASE("json schema: objects") {
    const std::string person = R"({"type": "object", "properties": {
        "name": {"type": "string"}, "age": {"type": "integer"}, "email": {"type": "string"}},
        "required": ["name", "email"]})";
    check_schema(person,
                 {R"({"name": "a", "email": "e"})", R"({"name": "a", "age": 3, "email": "e"})",
                  R"({ "name" : "a" , "age" : 3 , "email" : "e" })"},
                 {R"({"name": "a"})", R"({"email": "e", "name": "a"})", R"({})",
                  R"({"name": "a", "email": "e", "x": 1})", R"({"name": "a",, "email": "e"})"});
    // No required property: any in-order selection, commas only between.
    check_schema(R"({"type": "object", "properties": {"a": {"type": "integer"},
                     "b": {"type": "integer"}, "c": {"type": "integer"}}})",
                 {"{}", R"({"a": 1})", R"({"b": 1})", R"({"c": 1})", R"({"a": 1, "c": 3})",
                  R"({"b": 2, "c": 3})", R"({"a": 1, "b": 2, "c": 3})"},
                 {R"({"b": 1, "a": 2})", R"({,"a": 1})", R"({"a": 1,})", R"({"a": 1 "b": 2})"});
    // Optional properties before the first required one.
    check_schema(R"({"properties": {"a": {"const": 1}, "b": {"const": 2}, "c": {"const": 3}},
                     "required": ["c"]})",
                 {R"({"c": 3})", R"({"a": 1, "c": 3})", R"({"a": 1, "b": 2, "c": 3})",
                  R"({"b": 2, "c": 3})"},
                 {R"({"a": 1})", R"({"a": 1, "b": 2})", "{}"});
    // Keys are JSON string literals of the names, escapes included.
    check_schema(R"({"properties": {"q\"uo\\te\n": {"type": "null"}, "\u00e9": {"type": "null"}},
                     "required": ["q\"uo\\te\n", "\u00e9"]})",
                 {"{\"q\\\"uo\\\\te\\n\": null, \"\xC3\xA9\": null}"}, {});
    // additionalProperties false; extras are never generated anyway.
    check_schema(R"({"properties": {"a": {"type": "integer"}}, "additionalProperties": false})",
                 {"{}", R"({"a": 1})"}, {R"({"b": 1})"});
    check_schema(R"({"properties": {"a": {"type": "integer"}}, "additionalProperties": true})",
                 {R"({"a": 1})"}, {R"({"a": 1, "b": 1})"});
}

TEST_CASE("json schema: maps and required names without properties") {
    check_schema(R"({"type": "object"})",
                 {"{}", R"({"x": [1, {"y": null}]})", R"({"a": 1, "b": 2})"},
                 {"[]", R"({"a": [[[[1]]]]})"});
    check_schema(R"({"type": "object", "additionalProperties": {"type": "integer"}})",
                 {"{}", R"({"a": 1, "b": -2})", R"({"": 0})"}, {R"({"a": "x"})", R"({"a": 1,})"});
    check_schema(R"({"type": "object", "additionalProperties": false})", {"{}", "{ }"},
                 {R"({"a": 1})"});
    check_schema(R"({"required": ["id"], "additionalProperties": {"type": "integer"}})",
                 {R"({"id": 5})"}, {"{}", R"({"id": "x"})", R"({"id": 5, "x": 1})"});
    check_schema(R"({"properties": {"a": {"type": "null"}}, "required": ["a", "b"]})",
                 {R"({"a": null, "b": [1]})"}, {R"({"a": null})"});
}

TEST_CASE("json schema: arrays") {
    check_schema(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})",
                 {"[1, 2]", "[1,2,3]"}, {"[]", "[1]", "[1,2,3,4]", "[1, \"a\"]"});
    check_schema(R"({"type": "array", "items": {"type": "string"}, "minItems": 1})",
                 {R"(["a"])", R"(["a", "b", "c", "d"])"}, {"[]", "[1]"});
    check_schema(R"({"type": "array", "maxItems": 0})", {"[]", "[ ]"}, {"[1]"});
    check_schema(R"({"type": "array", "minItems": 2.0})", {"[1, 2, 3]"}, {"[1]"});
    CHECK(smol::try_json_schema_to_grammar(R"({"maxItems": 1e400, "maxLength": 12e20})").ok());
    check_schema(R"({"type": "array", "maxItems": 1})", {"[]", "[[1]]"}, {"[1, 2]"});
    check_schema(R"({"type": "array", "items": false})", {"[]"}, {"[1]"});
    check_schema(R"({"type": "array", "items": {"type": "array", "items": {"type": "boolean"}}})",
                 {"[[true], [], [false, true]]"}, {"[[1]]", "[true]"});
    check_schema(R"({"items": {"type": "null"}})", {"[null]"}, {"1", "[1]"});
}

TEST_CASE("json schema: string lengths count code points") {
    check_schema(R"({"type": "string", "minLength": 2, "maxLength": 3})",
                 {R"("ab")", R"("abc")", "\"\xC3\xA9\xE4\xB8\xAD\"", R"("\n\u00e9")",
                  "\"\xF0\x9F\x98\x80\xF0\x9F\x98\x80\""},
                 {R"("a")", R"("abcd")", "\"\xC3\xA9\"", R"("\u00e9")",
                  R"("\ud83d\ude00")"});  // a surrogate pair escape is never generated
    check_schema(R"({"type": "string", "maxLength": 0})", {R"("")"}, {R"("a")"});
    check_schema(R"({"minLength": 1})", {R"("a")"}, {R"("")", "1"});
}

TEST_CASE("json schema: formats") {
    check_schema(R"({"type": "string", "format": "date"})",
                 {R"("2024-01-31")", R"("2023-02-28")", R"("0001-12-01")", R"("2024-04-30")"},
                 {R"("2024-13-01")", R"("2024-00-10")", R"("2024-04-31")", R"("2023-02-29")",
                  R"("2024-1-01")", R"("0000-01-01")", R"("2024-01-32")"});
    check_schema(
        R"({"type": "string", "format": "time"})",
        {R"("23:59:59Z")", R"("00:00:00.123+05:30")", R"("12:30:00-08:00")"},
        {R"("24:00:00Z")", R"("12:60:00Z")", R"("12:00:00")", R"("12:00Z")", R"("12:00:00.Z")"});
    check_schema(R"({"format": "date-time"})", {R"("2024-02-28T13:45:00.5Z")"},
                 {R"("2024-02-28 13:45:00Z")", R"("2024-02-28")"});
    check_schema(
        R"({"type": "string", "format": "uuid"})",
        {R"("123e4567-e89b-12d3-a456-426614174000")", R"("ABCDEF01-2345-6789-abcd-ef0123456789")"},
        {R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400g")"});
    check_schema(R"({"type": "string", "format": "date", "minLength": 10, "maxLength": 10})",
                 {R"("2024-01-01")"}, {});
    // format applies to strings only: an integer's format is no constraint on it.
    check_schema(R"({"type": "integer", "format": "int32"})", {"5"}, {});
}

TEST_CASE("json schema: integer ranges are exact") {
    const std::vector<std::pair<long long, long long>> ranges = {
        {0, 255}, {-5, 5}, {-1234, -17}, {7, 7}, {1, 1000}, {-99, 0}, {10, 19}, {95, 1005}};
    for (const auto& r : ranges) {
        const std::string schema = R"({"type": "integer", "minimum": )" + std::to_string(r.first) +
                                   R"(, "maximum": )" + std::to_string(r.second) + "}";
        INFO(schema);
        const SchemaGrammar g(schema);
        for (long long v = r.first - 30; v <= r.second + 30; ++v)
            CHECK_MESSAGE(g.accepts(std::to_string(v)) == (v >= r.first && v <= r.second), v);
        CHECK_FALSE(g.accepts("01"));
        CHECK_FALSE(g.accepts("-0"));
    }
    check_schema(R"({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 4})", {"1", "3"},
                 {"0", "4"});
    check_schema(R"({"type": "integer", "minimum": 0.5, "maximum": 2.5})", {"1", "2"}, {"0", "3"});
    check_schema(R"({"type": "integer", "exclusiveMinimum": -2.5, "exclusiveMaximum": 1.5})",
                 {"-2", "1"}, {"-3", "2"});
    check_schema(R"({"type": "integer", "minimum": 5, "exclusiveMinimum": true})", {"6"}, {"5"});
    check_schema(R"({"type": "integer", "minimum": 100000000000000})", {"100000000000000"},
                 {"99999999999999", "1000000000000000"});
    // Past the 18 digits a bounded integer may have: nothing left to generate.
    check_schema_error(R"({"type": "integer", "maximum": -1e30})", ErrorKind::invalid_argument,
                       {"no value satisfies"});
    JsonSchemaOptions o;
    o.max_integer_digits = 2;
    check_schema(R"({"type": "integer", "minimum": -1000})", {"-99", "99"}, {"100", "-100"}, o);
}

TEST_CASE("json schema: number bounds are sound") {
    check_schema(R"({"type": "number", "minimum": 0, "maximum": 10})",
                 {"0", "0.5", "9.999", "10", "3"}, {"-0.5", "10.5", "11", "1e1"});
    check_schema(R"({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})",
                 {"0.5", "0.001", "0.99999999999999"}, {"0", "1", "0.0", "0.000", "-0.5"});
    check_schema(R"({"type": "number", "minimum": 0.5, "maximum": 1.5})", {"1"},
                 {"0.7", "1.25", "1.6", "2"});  // 0.7, 1.25 valid, but need fractions compared
    check_schema(R"({"type": "number", "exclusiveMaximum": 0})", {"-0.5", "-3", "-0.01"},
                 {"0", "-0", "-0.0", "0.5"});
    check_schema(R"({"type": "number", "minimum": -2.5, "maximum": 2.5})",
                 {"-1.75", "-2", "1.999", "2", "0"}, {"-3", "3", "2.5"});
    check_schema(R"({"type": "number", "exclusiveMaximum": -1})", {"-2", "-1.5", "-100.25"},
                 {"-1", "0", "-0.5"});
    check_schema(R"({"type": "number", "minimum": 100000000000})",
                 {"100000000000", "100000000000.125"},
                 {"100000000000.1234567"});  // at most 15 significant digits
}

TEST_CASE("json schema: enum and const") {
    check_schema(R"({"enum": ["red", 1, null, true, [1, "a"], {"k": 1.50}]})",
                 {R"("red")", "1", "null", "true", R"([1,"a"])", R"({"k":1.50})"},
                 {R"("blue")", "2", R"([1, "a"])", "false"});
    check_schema(R"({"const": "x\"y"})", {R"("x\"y")"}, {R"("x")"});
    check_schema(R"({"type": "string", "enum": ["a", 1, "b"]})", {R"("a")", R"("b")"}, {"1"});
    check_schema(R"({"type": "integer", "enum": [1, 1.0, 1.5]})", {"1", "1.0"}, {"1.5"});
    check_schema(R"({"enum": ["a", "b"], "const": "b"})", {R"("b")"}, {R"("a")"});
    check_schema(R"({"type": "boolean", "const": false})", {"false"}, {"true"});
}

TEST_CASE("json schema: anyOf, oneOf, allOf of one") {
    check_schema(R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]})",
                 {"1", R"("a")"}, {R"("ab")", "null"});
    check_schema(R"({"oneOf": [{"type": "null"}, {"type": "boolean"}]})", {"null", "true"}, {"1"});
    check_schema(R"({"anyOf": [false, {"type": "null"}]})", {"null"}, {"1"});
    check_schema(R"({"allOf": [{"type": "null"}], "description": "d"})", {"null"}, {"1"});
    // pydantic's Optional[int]
    check_schema(R"({"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null,
                     "title": "Count"})",
                 {"3", "null"}, {"\"3\""});
}

TEST_CASE("json schema: $ref and recursion") {
    check_schema(R"({"$defs": {"pos": {"type": "integer", "minimum": 1}},
                     "type": "array", "items": {"$ref": "#/$defs/pos"}})",
                 {"[1, 2]"}, {"[0]"});
    check_schema(R"({"definitions": {"a~b/c": {"type": "null"}},
                     "properties": {"x": {"$ref": "#/definitions/a~0b~1c"}}, "required": ["x"]})",
                 {R"({"x": null})"}, {R"({"x": 1})"});
    check_schema(R"({"$defs": {"v": {"type": "boolean"}}, "items": {"$ref": "#/%24defs/v"}})",
                 {"[true]"}, {"[1]"});
    // A tree: recursion through "#".
    const std::string tree = R"({"type": "object", "properties": {
        "value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#"}}},
        "required": ["value"], "additionalProperties": false})";
    check_schema(tree,
                 {R"({"value": 1})",
                  R"({"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]})"},
                 {R"({"value": 1, "children": [{}]})"});
    // Mutual recursion through $defs, and a chain of refs.
    check_schema(R"({"$ref": "#/$defs/a", "$defs": {
        "a": {"type": "array", "items": {"$ref": "#/$defs/b"}},
        "b": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/a"}]}}})",
                 {"[]", "[null, [null, []]]"}, {"[1]"});
    std::string chain = R"({"$ref": "#/$defs/d0", "$defs": {)";
    for (int i = 0; i < 2000; ++i)
        chain += "\"d" + std::to_string(i) + "\": {\"$ref\": \"#/$defs/d" + std::to_string(i + 1) +
                 "\"}, ";
    chain += R"("d2000": {"type": "null"}}})";
    CHECK(smol::try_json_schema_to_grammar(chain).ok());
}

TEST_CASE("json schema: unsupported keywords are errors naming keyword and pointer") {
    for (const char* keyword : {"pattern",
                                "not",
                                "if",
                                "then",
                                "else",
                                "patternProperties",
                                "propertyNames",
                                "dependentRequired",
                                "dependentSchemas",
                                "dependencies",
                                "uniqueItems",
                                "prefixItems",
                                "additionalItems",
                                "contains",
                                "minContains",
                                "maxContains",
                                "multipleOf",
                                "minProperties",
                                "maxProperties",
                                "unevaluatedProperties",
                                "unevaluatedItems",
                                "$dynamicRef",
                                "$recursiveRef"}) {
        const std::string schema =
            std::string(R"({"properties": {"x": {"type": "string", ")") + keyword + "\": 1}}}";
        check_schema_error(
            schema, ErrorKind::unsupported,
            {std::string("unsupported keyword \"") + keyword + "\"", "at /properties/x"});
    }
    check_schema_error(R"({"allOf": [{"type": "string"}, {"maxLength": 3}]})",
                       ErrorKind::unsupported, {"\"allOf\"", "at /"});
    check_schema_error(R"({"items": [{"type": "string"}]})", ErrorKind::unsupported,
                       {"\"items\"", "array form"});
    check_schema_error(R"({"type": "string", "format": "email"})", ErrorKind::unsupported,
                       {"format \"email\""});
    check_schema_error(R"({"$ref": "https://example.com/s.json"})", ErrorKind::unsupported,
                       {"$ref \"https://example.com/s.json\""});
    check_schema_error(R"({"$ref": "#/$defs/a", "type": "string", "$defs": {"a": {}}})",
                       ErrorKind::unsupported, {"\"type\" beside \"$ref\""});
    check_schema_error(R"({"anyOf": [{}], "minLength": 1})", ErrorKind::unsupported,
                       {"\"minLength\" beside \"anyOf\""});
    check_schema_error(R"({"enum": ["a"], "maxLength": 1})", ErrorKind::unsupported,
                       {"\"maxLength\" beside \"enum\""});
    check_schema_error(R"({"type": "string", "format": "date", "maxLength": 5})",
                       ErrorKind::unsupported, {"\"maxLength\" beside format \"date\""});
    check_schema_error(R"({"type": "string", "minLength": 10001})", ErrorKind::unsupported,
                       {"\"minLength\" above 10000"});
    check_schema_error(R"({"items": {"$defs": {}, "not": {}}})", ErrorKind::unsupported,
                       {"\"not\"", "at /items"});
    check_schema_error(R"({"$defs": {"a": {"pattern": "x"}}, "$ref": "#/$defs/a"})",
                       ErrorKind::unsupported, {"\"pattern\"", "at /$defs/a"});
}

TEST_CASE("json schema: malformed schemas are invalid_argument with the pointer") {
    check_schema_error("{", ErrorKind::invalid_argument, {"json schema: json:", "at byte 1"});
    check_schema_error(R"({"properties": {"a": {"maxLength": "x"}}})", ErrorKind::invalid_argument,
                       {"\"maxLength\" must be a non-negative integer", "at /properties/a"});
    check_schema_error(R"({"minLength": -1})", ErrorKind::invalid_argument, {"\"minLength\""});
    check_schema_error(R"({"minLength": 1.5})", ErrorKind::invalid_argument, {"\"minLength\""});
    check_schema_error(R"({"minLength": 3, "maxLength": 2})", ErrorKind::invalid_argument,
                       {"\"minLength\" > \"maxLength\""});
    check_schema_error(R"({"minItems": 3, "maxItems": 2})", ErrorKind::invalid_argument,
                       {"\"minItems\" > \"maxItems\""});
    check_schema_error(R"({"type": "text"})", ErrorKind::invalid_argument,
                       {"unknown type \"text\""});
    check_schema_error(R"({"type": 1})", ErrorKind::invalid_argument, {"\"type\""});
    check_schema_error(R"({"type": [1]})", ErrorKind::invalid_argument, {"\"type\""});
    check_schema_error(R"({"properties": []})", ErrorKind::invalid_argument, {"\"properties\""});
    check_schema_error(R"({"properties": {"a": 1}})", ErrorKind::invalid_argument,
                       {"a schema must be an object or a boolean", "at /properties/a"});
    check_schema_error(R"({"required": [1], "type": "object"})", ErrorKind::invalid_argument,
                       {"\"required\""});
    check_schema_error(R"({"additionalProperties": 1, "type": "object"})",
                       ErrorKind::invalid_argument, {"\"additionalProperties\""});
    check_schema_error(R"({"minimum": "0"})", ErrorKind::invalid_argument, {"\"minimum\""});
    check_schema_error(R"({"enum": 1})", ErrorKind::invalid_argument, {"\"enum\""});
    check_schema_error(R"({"anyOf": []})", ErrorKind::invalid_argument, {"\"anyOf\""});
    check_schema_error(R"({"format": 1})", ErrorKind::invalid_argument, {"\"format\""});
    check_schema_error(R"({"$ref": "#/$defs/missing"})", ErrorKind::invalid_argument,
                       {"does not resolve"});
    check_schema_error(R"({"$ref": 1})", ErrorKind::invalid_argument, {"\"$ref\""});
    check_schema_error("false", ErrorKind::invalid_argument, {"no value satisfies"});
    check_schema_error(R"({"type": "integer", "minimum": 5, "maximum": 4})",
                       ErrorKind::invalid_argument, {"no value satisfies"});
    check_schema_error(R"({"type": "string", "enum": [1, 2]})", ErrorKind::invalid_argument,
                       {"no value satisfies"});
    check_schema_error(R"({"properties": {"a": false}, "required": ["a"]})",
                       ErrorKind::invalid_argument, {"no value satisfies"});
    check_schema_error(R"({"$defs": {"n": false}, "items": {"$ref": "#/$defs/n"}})",
                       ErrorKind::invalid_argument, {"no value satisfies", "at /$defs/n"});
    std::string deep;
    for (int i = 0; i < 70; ++i) deep += R"({"items": )";
    deep += "{}" + std::string(70, '}');
    check_schema_error(deep, ErrorKind::invalid_argument, {"nesting deeper than 64"});
}

TEST_CASE("json schema: options are checked, output size is bounded") {
    JsonSchemaOptions o;
    o.max_integer_digits = 0;
    auto r = smol::try_json_schema_to_grammar("{}", o);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().kind == ErrorKind::invalid_argument);
    CHECK(r.error().message.find("max_integer_digits") != std::string::npos);
    std::string big = R"({"enum": [)";
    for (int i = 0; i < 5000; ++i)
        big += (i ? ",\"" : "\"") + std::string(1000, 'a') + std::to_string(i) + "\"";
    big += "]}";
    check_schema_error(big, ErrorKind::resource, {"grammar larger than"});
#if SMOL_HAS_EXCEPTIONS
    CHECK_THROWS_AS(smol::json_schema_to_grammar("{\"pattern\": \"x\"}"), smol::Error);
#endif
}

TEST_CASE("json schema: hostile schemas take linear time and bounded output") {
    const auto list = [](int n, const std::string& before, const std::string& after) {
        std::string out;
        for (int i = 0; i < n; ++i) out += (i ? "," : "") + before + std::to_string(i) + after;
        return out;
    };
    // Many properties, defs, alternatives, enum values: each is looked up once.
    CHECK(smol::try_json_schema_to_grammar(R"({"properties": {)" + list(20000, "\"p", "\": {}") +
                                           R"(}, "required": [)" + list(20000, "\"p", "\"") + "]}")
              .ok());
    CHECK(
        smol::try_json_schema_to_grammar(
            R"({"$ref": "#/$defs/d0", "$defs": {)" +
            list(20000, "\"d", "\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/d0\"}}") +
            "}}")
            .ok());
    CHECK(smol::try_json_schema_to_grammar(R"({"anyOf": [)" + list(20000, R"({"const": )", "}") +
                                           "]}")
              .ok());
    CHECK(smol::try_json_schema_to_grammar(R"({"enum": [)" + list(50000, "", "") + "]}").ok());
    // Repeated names keep one entry (the last, as Value::find).
    std::string repeated = R"({"properties": {"a": {"type": "null"})";
    for (int i = 0; i < 50000; ++i) repeated += R"(, "a": {"type": "boolean"})";
    const std::string g = smol::json_schema_to_grammar(repeated + "}}");
    CHECK(g.size() < 2000);
    CHECK(g.find("null ::=") == std::string::npos);
    // Past 4 MiB of grammar: a resource error, not a huge string.
    std::string message;
    CHECK(schema_error(R"({"properties": {)" + list(100000, "\"property-", "\": {}") + "}}",
                       &message) == ErrorKind::resource);
}

TEST_CASE("json schema: SchemaConverter puts several schemas in one grammar") {
    smol::detail::SchemaConverter converter;
    auto a = converter.add(parse_ok(R"({"$defs": {"item": {"type": "integer"}},
                                        "type": "array", "items": {"$ref": "#/$defs/item"}})"),
                           "tool a");
    auto b = converter.add(parse_ok(R"({"$defs": {"item": {"type": "string"}},
                                        "type": "array", "items": {"$ref": "#/$defs/item"}})"),
                           "tool-a");
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK(a.value() == "tool-a");
    CHECK(b.value() == "tool-a-2");
    const std::string& ws = converter.ws_rule();
    CHECK(ws == "ws");
    const std::string rules = converter.grammar();
    CHECK(rules.find("root ::=") == std::string::npos);
    const std::string text =
        "root ::= " + a.value() + " " + ws + " \"|\" " + ws + " " + b.value() + "\n" + rules;
    auto g = std::make_shared<const smol::Grammar>(smol::Grammar::parse(text));
    smol::GrammarMatcher m(g);
    const auto accepts = [&](std::string_view doc) {
        const int32_t s = m.step(m.start(), doc);
        return s >= 0 && m.can_end(s);
    };
    CHECK(accepts(R"([1, 2] | ["x"])"));
    CHECK_FALSE(accepts(R"(["x"] | [1])"));
}

TEST_CASE("json schema: random documents of the grammar are valid under the schema") {
    const std::vector<std::string> schemas = {
        R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "score": {"type": "number", "minimum": -1, "exclusiveMaximum": 1},
            "tags": {"type": "array", "items": {"enum": ["a", "b", 3]}, "maxItems": 3},
            "when": {"type": "string", "format": "date-time"}},
            "required": ["name", "when"]})",
        R"({"anyOf": [{"type": "string", "format": "date"}, {"type": "string", "format": "uuid"},
            {"type": "string", "format": "time"}, {"type": "null"}]})",
        R"({"type": "object", "properties": {"v": {"type": "integer", "exclusiveMinimum": -50,
            "maximum": 12345}, "c": {"type": "array", "items": {"$ref": "#"}, "maxItems": 2}},
            "required": ["v"]})",
        R"({"type": "object", "additionalProperties": {"type": "number", "maximum": 0.5}})",
        R"({"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 4},
            "minItems": 1, "maxItems": 3})",
        R"({"properties": {"a": {}, "b": {"type": ["boolean", "null"]}, "c": {"const": {"k": [1]}}}})",
        R"({"oneOf": [{"type": "integer", "maximum": -1}, {"type": "integer", "minimum": 1}]})",
        R"({"type": "number", "exclusiveMinimum": 0.25, "maximum": 99.5})",
        R"({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})",
        R"({"type": "number", "minimum": -1e20, "exclusiveMaximum": -123456.5})",
        R"({"type": "integer", "minimum": -999999999999999999, "maximum": 999999999999999999})",
        R"({"type": ["number", "string", "array"], "maxLength": 1, "items": {"type": "null"}})",
        "{\"enum\": [1e20, 0.5, \"\\u0000\", {\"a\": []}], \"type\": [\"integer\", \"string\", "
        "\"object\"]}",
        "{}",
    };
    int n = 60;
    if (const char* env = std::getenv("SMOL_JSON_SCHEMA_SAMPLES")) n = std::atoi(env);
    for (const std::string& schema : schemas) check_samples(schema, n);
}

namespace {

// Random schemas of the supported subset (some unsatisfiable, which the
// converter reports); $ref "#" only below a container, where it consumes.
class SchemaFuzzer {
public:
    explicit SchemaFuzzer(uint32_t seed) : rng_(seed) {}

    nlohmann::json schema(int depth, bool may_ref = false) {
        const int kind = pick(depth > 0 ? 12 : 8);
        switch (kind) {
            case 0:
                return string_schema();
            case 1:
                return number_schema();
            case 2:
                return nlohmann::json{{"type", pick(2) ? "boolean" : "null"}};
            case 3:
                return enum_schema();
            case 4:
                return pick(2) ? nlohmann::json::object() : nlohmann::json(true);
            case 5:
                return nlohmann::json{{"type", nlohmann::json::array({"string", "null"})},
                                      {"maxLength", pick(4)}};
            case 6:
                return number_schema(true);
            case 7:
                return may_ref ? nlohmann::json{{"$ref", "#"}} : string_schema();
            case 8:
            case 9:
                return object_schema(depth - 1);
            case 10:
                return array_schema(depth - 1);
            default: {
                nlohmann::json any = nlohmann::json::array();
                for (int i = 0, n = 1 + pick(3); i < n; ++i) any.push_back(schema(depth - 1));
                return nlohmann::json{{"anyOf", any}};  // oneOf is sound only when disjoint
            }
        }
    }

private:
    std::mt19937 rng_;

    int pick(int n) { return int(rng_() % uint32_t(n)); }

    nlohmann::json string_schema() {
        static const char* formats[] = {"date", "time", "date-time", "uuid"};
        nlohmann::json s{{"type", "string"}};
        if (pick(4) == 0) {
            s["format"] = formats[pick(4)];
            return s;
        }
        const int lo = pick(4);
        if (pick(2)) s["minLength"] = lo;
        if (pick(2)) s["maxLength"] = lo + pick(5);
        return s;
    }

    nlohmann::json bound() {
        switch (pick(4)) {
            case 0:
                return pick(2000) - 1000;
            case 1:
                return double(pick(20000) - 10000) / 100.0;
            case 2:
                return pick(2) ? 0 : 1;
            default:
                return double(pick(100)) / 8.0 - 6.0;
        }
    }

    nlohmann::json number_schema(bool integer = false) {
        nlohmann::json s{{"type", integer || pick(2) ? "integer" : "number"}};
        static const char* keys[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
        for (const char* key : keys)
            if (pick(3) == 0) s[key] = bound();
        return s;
    }

    nlohmann::json enum_schema() {
        nlohmann::json values = nlohmann::json::array();
        for (int i = 0, n = 1 + pick(4); i < n; ++i) {
            switch (pick(5)) {
                case 0:
                    values.push_back(pick(100));
                    break;
                case 1:
                    values.push_back(std::string("v") + char('a' + pick(26)) + "\"\n\u00e9");
                    break;
                case 2:
                    values.push_back(nullptr);
                    break;
                case 3:
                    values.push_back(nlohmann::json{{"k", nlohmann::json::array({1, "x"})}});
                    break;
                default:
                    values.push_back(2.5);
            }
        }
        if (pick(4) == 0) return nlohmann::json{{"const", values[0]}};
        nlohmann::json s{{"enum", values}};
        if (pick(3) == 0) s["type"] = pick(2) ? "string" : "integer";
        return s;
    }

    nlohmann::json object_schema(int depth) {
        static const char* names[] = {"a", "b c", "q\"k", "\u00e9", "x/y~z", ""};
        nlohmann::json s{{"type", "object"}};
        nlohmann::json properties = nlohmann::json::object(), required = nlohmann::json::array();
        for (int i = 0, n = pick(4); i < n; ++i) {
            const std::string name = names[pick(6)];
            properties[name] = schema(depth, true);
            if (pick(2)) required.push_back(name);
        }
        if (!properties.empty() || pick(2)) s["properties"] = properties;
        if (!required.empty()) s["required"] = required;
        switch (pick(4)) {
            case 0:
                s["additionalProperties"] = false;
                break;
            case 1:
                s["additionalProperties"] = schema(depth, true);
                break;
            default:
                break;
        }
        return s;
    }

    nlohmann::json array_schema(int depth) {
        nlohmann::json s{{"type", "array"}};
        if (pick(4)) s["items"] = schema(depth, true);
        const int lo = pick(3);
        if (pick(2)) s["minItems"] = lo;
        if (pick(2)) s["maxItems"] = lo + pick(3);
        return s;
    }
};

}  // namespace

TEST_CASE("json schema: random schemas give grammars whose documents validate") {
    SchemaFuzzer fuzzer(2024);
    std::mt19937 rng(99);
    int converted = 0, n = 400;
    if (const char* env = std::getenv("SMOL_JSON_SCHEMA_FUZZ")) n = std::atoi(env);
    for (int i = 0; i < n; ++i) {
        const std::string schema = fuzzer.schema(3).dump();
        INFO("schema: " << schema);
        auto g = smol::try_json_schema_to_grammar(schema);
        if (!g.ok()) {
            // Only an unsatisfiable schema may fail here.
            CHECK(g.error().kind == ErrorKind::invalid_argument);
            CHECK(g.error().message.find("no value satisfies") != std::string::npos);
            continue;
        }
        // A required property that refers back to its object admits no
        // finite document: the engine rejects that grammar.
        auto compiled = smol::Grammar::try_parse(g.value());
        if (!compiled.ok()) {
            CHECK(schema.find("$ref") != std::string::npos);
            CHECK(compiled.error().message.find("can match no complete text") != std::string::npos);
            continue;
        }
        ++converted;
        const SchemaGrammar grammar(schema);
        for (int k = 0; k < 4; ++k) {
            const std::string doc = sample(grammar, rng);
            if (doc.empty()) continue;
            INFO("doc: " << doc);
            std::string why;
            CHECK_MESSAGE(valid(grammar.schema, doc, &why), why);
        }
    }
    CHECK(converted > n * 3 / 4);
}

TEST_CASE("json schema check: the test validator itself") {
    using smol_test::SchemaChecker;
    CHECK(SchemaChecker::is_date("2024-02-29"));
    CHECK_FALSE(SchemaChecker::is_date("2023-02-29"));
    CHECK_FALSE(SchemaChecker::is_date("1900-02-29"));
    CHECK(SchemaChecker::is_date("2000-02-29"));
    CHECK_FALSE(SchemaChecker::is_date("2024-06-31"));
    CHECK(SchemaChecker::is_time("10:00:00.5-01:30"));
    CHECK_FALSE(SchemaChecker::is_time("10:00:00+1:30"));
    CHECK(SchemaChecker::is_date_time("2024-01-01T00:00:00Z"));
    CHECK(SchemaChecker::is_uuid("00000000-0000-0000-0000-000000000000"));
    CHECK_FALSE(SchemaChecker::is_uuid("00000000-0000-0000-0000-00000000000"));
    CHECK(SchemaChecker::code_points("\xC3\xA9\xF0\x9F\x98\x80") == 2);
    const nlohmann::json schema = nlohmann::json::parse(R"({
        "$defs": {"small": {"type": "integer", "maximum": 9}},
        "type": "object",
        "properties": {"n": {"$ref": "#/$defs/small"}, "s": {"type": "string", "minLength": 2},
                       "one": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
                       "e": {"enum": [1, "x"]}, "x": {"exclusiveMinimum": 1}},
        "required": ["n"], "additionalProperties": false})");
    std::string why;
    CHECK(valid(schema, R"({"n": 9, "s": "ab", "one": 1.5, "e": 1.0, "x": 1.01})", &why));
    CHECK_FALSE(valid(schema, R"({"n": 10})", &why));
    CHECK(why == "maximum at /n");
    CHECK_FALSE(valid(schema, R"({})", &why));
    CHECK(why.find("missing required") == 0);
    CHECK_FALSE(valid(schema, R"({"n": 1, "z": 1})", &why));
    CHECK_FALSE(valid(schema, R"({"n": 1, "s": "\u00e9"})", &why));
    CHECK(why == "minLength at /s");
    CHECK_FALSE(valid(schema, R"({"n": 1, "one": 2})", &why));  // matches both
    CHECK(why.find("oneOf") == 0);
    CHECK_FALSE(valid(schema, R"({"n": 1, "e": "y"})", &why));
    CHECK_FALSE(valid(schema, R"({"n": 1, "x": 1})", &why));
    CHECK_FALSE(valid(schema, R"({"n": 1.5})", &why));
    CHECK_FALSE(valid(nlohmann::json::parse(R"({"pattern": "x"})"), R"("x")", &why));
    CHECK(why.find("validator: keyword pattern") == 0);
    const nlohmann::json big = nlohmann::json::parse(R"({"maximum": 18446744073709551615,
                                                        "minimum": -9223372036854775808})");
    CHECK(valid(big, "18446744073709551615"));
    CHECK(valid(big, "-9223372036854775808"));
    CHECK_FALSE(valid(nlohmann::json::parse(R"({"maximum": -1})"), "18446744073709551615"));
}

}  // namespace test_json_schema
