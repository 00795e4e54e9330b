// Structured output end to end, on the fixture models (real 128k vocabulary,
// random weights: unconstrained text is gibberish, so the constraint does all
// the work):
//   - [slow] property: 10 JSON Schemas x 200 seeds (temperatures and filters
//     varied) and 3 grammars x 200 seeds; >= 90 % of runs end at
//     end-of-generation, every such output validates (tests/support/json_schema_check.hpp,
//     our own checker of the supported subset, over nlohmann-json) and every
//     other output is a valid prefix;
//   - tool calls: with constrain_tool_calls, every <tool_call> block the model
//     opens holds a call to a declared tool whose arguments validate.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <smol/generator.hpp>
#include <smol/smol.hpp>

#include <memory>
#include <string>
#include <vector>

#include "support/fixtures.hpp"
#include "support/generator_testutil.hpp"
#include "support/json_schema_check.hpp"

// In a namespace of its own: tests/CMakeLists.txt compiles it in one unit with
// the other files of its group.
namespace test_structured {

namespace {

std::shared_ptr<const smol::Model> fixture_model(const char* name) {
    const auto path = smol_test::fixture(name);
    if (!path) return nullptr;
    return smol::Model::load(*path);
}

// Ten shapes tool code asks for; strings bounded (maxLength <= 16 or enums).
const std::vector<std::string>& schemas() {
    static const std::vector<std::string> list = {
        R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "active": {"type": "boolean"}}, "required": ["name", "age", "active"]})",
        R"({"enum": ["red", "green", "blue", 42, null, true]})",
        R"({"type": "array", "items": {"type": "integer", "minimum": -50, "maximum": 50},
            "minItems": 1, "maxItems": 4})",
        R"({"type": "object", "properties": {
              "title": {"type": "string", "minLength": 2, "maxLength": 10},
              "meta": {"type": "object", "properties": {
                  "lang": {"enum": ["en", "fr", "de"]},
                  "pages": {"type": "integer", "minimum": 1, "maximum": 999}},
                "required": ["lang"], "additionalProperties": false}},
            "required": ["title", "meta"], "additionalProperties": false})",
        R"({"anyOf": [{"type": "string", "maxLength": 6}, {"type": "integer"}, {"type": "null"}]})",
        R"({"type": "object", "properties": {
              "when": {"type": "string", "format": "date"},
              "price": {"type": "number", "minimum": 0, "maximum": 1000},
              "ratio": {"type": "number", "exclusiveMinimum": -1, "exclusiveMaximum": 1}},
            "required": ["when", "price", "ratio"]})",
        R"({"$defs": {"node": {"type": "object", "properties": {
                "value": {"type": "integer", "minimum": 0, "maximum": 9},
                "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
              "required": ["value", "next"]}},
            "$ref": "#/$defs/node"})",
        R"({"type": "array", "maxItems": 3, "items": {"type": "object", "properties": {
              "id": {"type": "integer", "minimum": 1, "maximum": 100},
              "tag": {"enum": ["a", "b", "c"]}}, "required": ["id", "tag"]}})",
        R"({"type": "object", "properties": {
              "nickname": {"type": ["string", "null"], "maxLength": 8},
              "ok": {"type": "boolean"},
              "code": {"const": "X-1"}},
            "required": ["nickname", "ok", "code"]})",
        R"({"type": "object", "properties": {
              "id": {"type": "string", "format": "uuid"},
              "at": {"type": "string", "format": "time"},
              "level": {"type": "integer", "minimum": 1, "maximum": 5},
              "notes": {"type": "array", "items": {"type": "string", "maxLength": 16},
                        "maxItems": 2}},
            "required": ["id", "at", "level"]})",
    };
    return list;
}

// Seed -> sampling: temperatures 0 .. 1.5 and the filters on or off.
smol::GenerateParams sampling_for(uint64_t seed) {
    smol::GenerateParams p;
    p.seed = seed;
    p.temperature = float(seed % 7) * 0.25f;  // 0 (greedy) .. 1.5
    if (seed % 2) {
        p.top_k = 0;
        p.top_p = 1.0f;
        p.min_p = 0.0f;
    }
    p.max_tokens = 160;
    return p;
}

}  // namespace

TEST_CASE("[slow] structured output: 10 JSON Schemas x 200 seeds end and validate") {
    auto model = fixture_model("tiny-q4km.gguf");
    if (!model) return;
    smol::Generator gen(model);
    size_t runs = 0, ended = 0;
    for (size_t s = 0; s < schemas().size(); ++s) {
        const nlohmann::json schema = nlohmann::json::parse(schemas()[s]);
        size_t schema_ended = 0;
        for (uint64_t seed = 0; seed < 200; ++seed) {
            smol::GenerateParams p = sampling_for(seed);
            p.json_schema = schemas()[s];
            const smol::GenerateResult r = gen.generate("Data:", p);
            ++runs;
            if (r.stop_reason != smol::StopReason::eos) {
                CHECK(r.stop_reason == smol::StopReason::max_tokens);
                continue;
            }
            ++ended;
            ++schema_ended;
            INFO("schema " << s << " seed " << seed << " output: " << r.text);
            const nlohmann::json doc = nlohmann::json::parse(r.text, nullptr, false);
            REQUIRE_FALSE(doc.is_discarded());
            std::string why;
            CHECK_MESSAGE(smol_test::validate(doc, schema, &why), why);
        }
        MESSAGE("schema " << s << ": " << schema_ended << "/200 ended at eos");
    }
    CHECK(double(ended) >= 0.9 * double(runs));
}

TEST_CASE("[slow] structured output: 3 grammars x 200 seeds end and match") {
    auto model = fixture_model("tiny-q4km.gguf");
    if (!model) return;
    const std::vector<std::string> grammars = {
        // Balanced brackets, at most 3 deep.
        "root ::= (\"(\" b2 \")\" | \"[\" b2 \"]\"){1,3}\n"
        "b2 ::= (\"(\" b1 \")\" | \"[\" b1 \"]\"){0,3}\nb1 ::= (\"()\" | \"[]\"){0,3}",
        // A small expression language, parentheses at most 2 deep.
        "root ::= e2\ne2 ::= t2 ([-+] t2){0,3}\nt2 ::= f2 ([*/] f2){0,2}\n"
        "f2 ::= [0-9]{1,3} | \"x\" | \"(\" e1 \")\"\ne1 ::= t1 ([-+] t1){0,2}\n"
        "t1 ::= f1 ([*/] f1){0,2}\nf1 ::= [0-9]{1,3} | \"x\" | \"(\" t0 \")\"\n"
        "t0 ::= [0-9]{1,3} ([-+*/] [0-9]{1,3}){0,2}",
        // An enum of labels.
        "root ::= \"positive\" | \"negative\" | \"neutral\" | \"mixed\"",
    };
    smol::Generator gen(model);
    size_t runs = 0, ended = 0;
    for (const std::string& text : grammars) {
        const auto grammar = std::make_shared<const smol::Grammar>(smol::Grammar::parse(text));
        smol::GrammarMatcher matcher(grammar);
        size_t grammar_ended = 0;
        for (uint64_t seed = 0; seed < 200; ++seed) {
            smol::GenerateParams p = sampling_for(seed);
            p.grammar = text;
            const smol::GenerateResult r = gen.generate("Input:", p);
            ++runs;
            INFO("grammar " << text.substr(0, 20) << " seed " << seed << " output: " << r.text);
            const int32_t state = matcher.step(matcher.start(), r.text);
            REQUIRE(state >= 0);  // always a valid prefix
            if (r.stop_reason == smol::StopReason::eos) {
                ++ended;
                ++grammar_ended;
                CHECK(matcher.can_end(state));
            }
        }
        MESSAGE("grammar " << text.substr(0, 24) << ": " << grammar_ended << "/200 ended at eos");
    }
    CHECK(double(ended) >= 0.9 * double(runs));
}

TEST_CASE("tool calls: constrained calls name a declared tool with valid arguments") {
    auto model = fixture_model("tiny-q4km.gguf");
    if (!model) return;
    const std::string weather_schema =
        R"({"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
            "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city"]})";
    const std::string add_schema =
        R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"], "additionalProperties": false})";
    smol::GenerateParams p;
    p.chat.tools = {{"get_weather", "Current weather in a city", weather_schema},
                    {"add", "Adds two integers", add_schema}};
    p.chat.enable_thinking = false;
    p.chat.today = "24 November 2026";
    p.constrain_tool_calls = true;
    p.max_tokens = 80;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    // Random weights (logits spread over +-40) never open a call on their own:
    // raise <tool_call> so every run does, as a real model asked to use a tool would.
    const int32_t open = *model->tokenizer().token_id("<tool_call>");
    p.logit_bias = {{open, 60.0f}};
    smol::Generator gen(model);
    size_t calls = 0;
    for (uint64_t seed = 0; seed < 8; ++seed) {
        p.seed = seed;
        const smol::GenerateResult r =
            gen.chat({{"user", "What is the weather in Bern, and what is 2 + 3?"}}, p);
        INFO("seed " << seed << " text: " << r.text);
        for (const smol::ToolCall& call : r.tool_calls) {
            // A call cut by max_tokens is a valid prefix, not a call yet.
            if (call.error.rfind("unterminated", 0) == 0) continue;
            ++calls;
            REQUIRE_MESSAGE(call.error.empty(), call.error);
            const nlohmann::json args = nlohmann::json::parse(call.arguments);
            std::string why;
            if (call.name == "get_weather") {
                CHECK_MESSAGE(
                    smol_test::validate(args, nlohmann::json::parse(weather_schema), &why), why);
            } else {
                CHECK(call.name == "add");
                CHECK_MESSAGE(smol_test::validate(args, nlohmann::json::parse(add_schema), &why),
                              why);
            }
        }
    }
    CHECK(calls >= 6);
}

// Jump-forward decoding (generation/jump_forward.hpp) is on in every
// constrained run without lookup decoding. The reference here is plain
// decoding: lookup decoding whose drafts are always empty runs one token per
// forward through the same step.
TEST_CASE(
    "jump-forward: the tokens a constraint forces run as one chunk, the output is plain "
    "decoding's") {
    auto model = fixture_model("tiny-q4km.gguf");
    if (!model) return;
    std::vector<std::pair<std::string, std::string>> cases;  // (grammar, json_schema)
    // Under the sanitizers (10x slower) two schemas, the grammar and two seeds.
    for (size_t s : {0, 3, 5, 7, 9})
        if (!smol_test::kSanitized || s == 0 || s == 9) cases.emplace_back("", schemas()[s]);
    // Literal runs the vocabulary can only spell one way: each byte of "(|)" is
    // a single-byte token, and "qz" / "xq" have no longer token to share.
    cases.emplace_back("root ::= \"(\" [0-9]{1,3} \"|)\" \"qzxq\"{1,2} [a-z]{0,4}", "");
    size_t forced = 0, tokens = 0;
    for (const auto& [grammar, schema] : cases) {
        for (uint64_t seed : {0, 3, 6}) {  // greedy, then sampled at 0.75 and 1.5
            if (smol_test::kSanitized && seed == 3) continue;
            smol::GenerateParams p = sampling_for(seed);
            p.grammar = grammar;
            p.json_schema = schema;
            p.max_tokens = 96;
            size_t hook_rows = 0;
            p.logits_hook = [&hook_rows](float*, size_t) { ++hook_rows; };
            smol::Generator gen(model);
            const smol::GenerateResult r = gen.generate("Data:", p);
            const size_t jump_rows = hook_rows;

            smol::GenerateParams plain_params = p;
            hook_rows = 0;
            plain_params.lookup.mode = smol::LookupMode::on;
            plain_params.lookup.draft_hook = [](const std::vector<int32_t>&, size_t,
                                                std::vector<int32_t>&) {};
            smol::Generator plain_gen(model);
            const smol::GenerateResult plain = plain_gen.generate("Data:", plain_params);

            INFO("grammar " << grammar << " schema " << schema << " seed " << seed);
            INFO("text " << r.text);
            CHECK(r.tokens == plain.tokens);
            CHECK(r.text == plain.text);
            CHECK(r.stop_reason == plain.stop_reason);
            CHECK(gen.history() == plain_gen.history());
            CHECK(gen.n_cached() == plain_gen.n_cached());
            // The hook saw every row, as in plain decoding.
            CHECK(jump_rows == hook_rows);
            CHECK(plain.n_decode_steps + 1 == plain.tokens.size());
            // A forced token is the only one its row allows: always accepted.
            CHECK(r.n_accepted_drafts == r.n_drafted_tokens);
            CHECK(r.n_decode_steps + r.n_accepted_drafts + 1 == r.tokens.size());
            forced += r.n_accepted_drafts;
            tokens += r.tokens.size();
        }
    }
    MESSAGE("jump-forward: " << forced << " of " << tokens << " tokens were forced");
    CHECK(forced > 0);
}

TEST_CASE("batched generators each apply their own constraint") {
    auto model = fixture_model("tiny-q4km.gguf");
    if (!model) return;
    const std::vector<std::string> grammars = {
        "root ::= \"yes\" | \"no\"",
        "root ::= [0-9]{2,4} (\",\" [0-9]{2,4}){0,5}",
        "root ::= \"(\" [a-z ]{1,12} \")\"",
    };
    const std::string schema =
        R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0,
            "maximum": 99}, "s": {"type": "string", "maxLength": 6}}, "required": ["n", "s"]})";
    smol::GeneratorOptions options;
    options.batcher = std::make_shared<smol::Batcher>(model);
    std::vector<std::unique_ptr<smol::Generator>> gens;
    std::vector<smol::AsyncGeneration> runs;
    // Without the rendezvous the two-token "yes"/"no" run can end before the
    // last generator starts, and then no step is shared.
    auto arrived = std::make_shared<std::atomic<size_t>>(0);
    for (size_t i = 0; i < grammars.size() + 1; ++i) {
        gens.push_back(std::make_unique<smol::Generator>(model, options));
        smol::GenerateParams p;
        p.seed = i;
        p.temperature = 1.0f;
        p.max_tokens = 48;
        if (i < grammars.size())
            p.grammar = grammars[i];
        else
            p.json_schema = schema;
        smol_test::rendezvous(p, arrived, grammars.size() + 1);
        runs.push_back(gens[i]->generate_async("Answer:", p));
    }
    for (size_t i = 0; i < runs.size(); ++i) {
        const smol::GenerateResult r = runs[i].wait();
        INFO("generator " << i << " text " << r.text);
        if (i < grammars.size()) {
            smol::GrammarMatcher m(
                std::make_shared<const smol::Grammar>(smol::Grammar::parse(grammars[i])));
            const int32_t s = m.step(m.start(), r.text);
            REQUIRE(s >= 0);
            if (r.stop_reason == smol::StopReason::eos) CHECK(m.can_end(s));
        } else if (r.stop_reason == smol::StopReason::eos) {
            std::string why;
            CHECK_MESSAGE(smol_test::validate(nlohmann::json::parse(r.text),
                                              nlohmann::json::parse(schema), &why),
                          why);
        }
    }
    CHECK(options.batcher->stats().widest > 1);
}

}  // namespace test_structured
