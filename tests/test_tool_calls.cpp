// Tests for tool calling (text/tool_calls.hpp and ChatTemplateOptions::tools):
// every conversation in tests/data/tool_chat/cases.json (rendered by a real
// Jinja2 engine with the official SmolLM3 template, the way transformers passes
// tools; made by tests/data/make_tool_chat.py) must match byte for byte, each
// tool's own text too; the calls in its assistant turns must parse back; the
// hand-written cases below cover bad definitions and malformed calls.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <smol/text/chat_template.hpp>
#include <smol/text/tool_calls.hpp>
#include <string>
#include <vector>

#include "support/expect_error.hpp"
#include "support/fixtures.hpp"

// In a namespace of its own: tests/CMakeLists.txt compiles it in one unit with
// the other files of its group.
namespace test_tool_calls {

using smol::ChatMessage;
using smol::ChatTemplateOptions;
using smol::ToolCall;
using smol::ToolDefinition;

namespace {

// The data lives in the source tree next to this file (it is small, and made
// from the template, not from a model).
std::string data_path(const std::string& relative) {
    std::string here = __FILE__;
    const size_t slash = here.find_last_of("/\\");
    here = slash == std::string::npos ? std::string(".") : here.substr(0, slash);
    return here + "/data/" + relative;
}

nlohmann::json load_cases() {
    const std::string path = data_path("tool_chat/cases.json");
    std::ifstream in(path);
    REQUIRE_MESSAGE(in.good(), "cannot open " << path);
    return nlohmann::json::parse(in);
}

ToolDefinition tool_from(const nlohmann::json& t) {
    ToolDefinition tool;
    tool.name = t.at("name").get<std::string>();
    tool.description = t.at("description").get<std::string>();
    tool.parameters = t.at("parameters").get<std::string>();
    return tool;
}

ChatTemplateOptions options_from(const nlohmann::json& c) {
    ChatTemplateOptions options;
    const auto& o = c.at("options");
    options.add_generation_prompt = o.value("add_generation_prompt", false);
    if (o.contains("enable_thinking"))
        options.enable_thinking = o.at("enable_thinking").get<bool>();
    options.today = c.at("today").get<std::string>();
    for (const auto& t : c.at("tools")) options.tools.push_back(tool_from(t));
    return options;
}

std::vector<ChatMessage> messages_from(const nlohmann::json& c) {
    std::vector<ChatMessage> messages;
    for (const auto& m : c.at("messages"))
        messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
    return messages;
}

std::string render_tool(const ToolDefinition& tool) {
    auto text = smol::try_render_tool(tool);
    REQUIRE_MESSAGE(text.ok(), text.error().message);
    return text.value();
}

// The one call in `text`, which must be well formed.
ToolCall only_call(const std::string& text) {
    const auto calls = smol::parse_tool_calls(text);
    REQUIRE(calls.size() == 1);
    return calls[0];
}

// The one call in `text`, which must be malformed with an error holding `needle`.
ToolCall only_error(const std::string& text, const std::string& needle) {
    ToolCall call = only_call(text);
    INFO("error: " << call.error);
    CHECK(call.error.find(needle) != std::string::npos);
    return call;
}

}  // namespace

TEST_CASE("tool calls: golden conversations with tools from a Jinja2 engine") {
    const nlohmann::json cases = load_cases();
    REQUIRE(cases.size() >= 6);
    for (const auto& c : cases) {
        const std::string name = c.at("name").get<std::string>();
        CAPTURE(name);
        const ChatTemplateOptions options = options_from(c);
        const std::vector<ChatMessage> messages = messages_from(c);
        const std::string expected = c.at("expected").get<std::string>();

        auto rendered = smol::try_render_smollm3_chat(messages, options);
        REQUIRE_MESSAGE(rendered.ok(), rendered.error().message);
        CHECK(rendered.value() == expected);
        CHECK(smol::render_smollm3_chat(messages, options) == expected);
        CHECK(smol::render_chat(smol::ChatFormat::smollm3, messages, options) == expected);

        const auto& texts = c.at("tool_texts");
        REQUIRE(texts.size() == options.tools.size());
        for (size_t i = 0; i < texts.size(); ++i) {
            CAPTURE(i);
            CHECK(render_tool(options.tools[i]) == texts[i].get<std::string>());
        }
        smol_test::count_golden();
    }
}

TEST_CASE("tool calls: the calls in the golden assistant turns parse back") {
    const nlohmann::json cases = load_cases();
    size_t total = 0;
    for (const auto& c : cases) {
        const std::string name = c.at("name").get<std::string>();
        CAPTURE(name);
        std::vector<ToolCall> parsed;
        for (const ChatMessage& m : messages_from(c)) {
            if (m.role != "assistant") continue;
            for (ToolCall& call : smol::parse_tool_calls(m.content)) parsed.push_back(call);
        }
        const auto& calls = c.at("calls");
        REQUIRE(parsed.size() == calls.size());
        for (size_t i = 0; i < parsed.size(); ++i) {
            CAPTURE(i);
            CHECK(parsed[i].error == "");
            CHECK(parsed[i].name == calls[i].at("name").get<std::string>());
            // Python's compact json.dumps of the same object, byte for byte.
            CHECK(parsed[i].arguments == calls[i].at("arguments").get<std::string>());
            CHECK(parsed[i].text.front() == '\n');
            CHECK(parsed[i].text.back() == '\n');
        }
        total += parsed.size();
    }
    CHECK(total >= 5);
}

TEST_CASE("tool calls: tools replace xml_tools; no tools renders as before") {
    const std::vector<ChatMessage> messages = {{"user", "Hi"}};
    ChatTemplateOptions options;
    options.today = "21 November 2026";
    const std::string plain = smol::render_smollm3_chat(messages, options);
    CHECK(plain.find("### Tools") == std::string::npos);

    ToolDefinition ping{"ping", "Checks the server.", R"({"type": "object", "properties": {}})"};
    options.tools = {ping};
    const std::string with_tools = smol::render_smollm3_chat(messages, options);
    // Like the template's `{% if tools %}{% set xml_tools = tools %}`.
    options.xml_tools = {"IGNORED"};
    CHECK(smol::render_smollm3_chat(messages, options) == with_tools);
    options.tools.clear();
    options.xml_tools = {render_tool(ping)};
    CHECK(smol::render_smollm3_chat(messages, options) == with_tools);

    // ChatML has nowhere to put tools: rather than drop them unseen (a model
    // that never sees them cannot call them), it refuses them, in any form.
    options.xml_tools.clear();
    CHECK(smol::render_chat(smol::ChatFormat::chatml, messages, options) ==
          "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    for (int form = 0; form < 3; ++form) {
        smol::ChatTemplateOptions with = options;
        if (form == 0) with.tools = {ping};
        if (form == 1) with.xml_tools = {render_tool(ping)};
        if (form == 2) with.python_tools = {"def ping(): ..."};
        smol_test::expect_error(
            [&] { (void)smol::render_chat(smol::ChatFormat::chatml, messages, with); },
            smol::ErrorKind::unsupported, {"no place for tools"});
    }
}

TEST_CASE("tool calls: try_render_tool prints Python's str() of the transformers dict") {
    ToolDefinition tool;
    tool.name = "ping";
    CHECK(render_tool(tool) ==
          "{'type': 'function', 'function': {'name': 'ping', 'description': '', "
          "'parameters': {'type': 'object', 'properties': {}}}}");
    tool.description = "It's \"here\"";
    tool.parameters = R"( {"type":"object","properties":{"n":{"type":"integer","default":null,
                          "enum":[1,2.0,true]}}} )";
    CHECK(render_tool(tool) ==
          "{'type': 'function', 'function': {'name': 'ping', 'description': 'It\\'s \"here\"', "
          "'parameters': {'type': 'object', 'properties': {'n': {'type': 'integer', "
          "'default': None, 'enum': [1, 2.0, True]}}}}}");
}

TEST_CASE("tool calls: bad tool definitions are errors naming the tool") {
    auto check = [](const ToolDefinition& tool, const std::string& needle) {
        auto text = smol::try_render_tool(tool);
        REQUIRE_FALSE(text.ok());
        INFO("message: " << text.error().message);
        CHECK(text.error().kind == smol::ErrorKind::invalid_argument);
        CHECK(text.error().message.find(needle) != std::string::npos);
    };
    check({"lookup", "", "{"}, "tool 'lookup': parameters are not valid JSON");
    check({"lookup", "", ""}, "tool 'lookup': parameters are not valid JSON");
    check({"lookup", "", R"({"type": "object",})"}, "tool 'lookup'");
    check({"lookup", "", "[]"}, "tool 'lookup': parameters must be a JSON object");
    check({"lookup", "", R"("object")"}, "tool 'lookup': parameters must be a JSON object");
    check({"lookup", "", "null"}, "tool 'lookup': parameters must be a JSON object");
    check({"", "", "{}"}, "empty name");
    check({"bad\xff", "", "{}"}, "tool name is not valid UTF-8");
    check({"lookup", "caf\xc3", "{}"}, "tool 'lookup' description is not valid UTF-8");

    // Through the renderer: an error value from the try_ forms, smol::Error from
    // the throwing ones, even where the template would not print the tools.
    ChatTemplateOptions options;
    options.today = "21 November 2026";
    options.tools = {{"ok", "", "{}"}, {"broken", "", "[1]"}};
    for (const std::vector<ChatMessage>& messages :
         {std::vector<ChatMessage>{{"user", "Hi"}},
          std::vector<ChatMessage>{{"system", "/system_override Be terse."}, {"user", "Hi"}}}) {
        auto rendered = smol::try_render_chat(smol::ChatFormat::smollm3, messages, options);
        REQUIRE_FALSE(rendered.ok());
        CHECK(rendered.error().message.find("tool 'broken'") != std::string::npos);
        smol_test::expect_error([&] { (void)smol::render_smollm3_chat(messages, options); },
                                smol::ErrorKind::invalid_argument, {"tool 'broken'"});
        smol_test::expect_error(
            [&] { (void)smol::render_chat(smol::ChatFormat::smollm3, messages, options); },
            smol::ErrorKind::invalid_argument, {"tool 'broken'"});
    }
}

TEST_CASE("tool calls: several calls in one reply, with prose and reasoning around them") {
    const std::string text =
        "<think>\nI need the weather and the time.\n</think>\nLet me check.\n"
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
        "</tool_call>\nand\n"
        "<tool_call>{\"name\":\"get_time\",\"arguments\":{\"tz\":\"Europe/Paris\",\"h24\":true}}"
        "</tool_call>"
        "<tool_call>\r\n \t{ \"arguments\" : { \"x\" : [ 1 , 2.50 , -3e2 ] } ,\n"
        "  \"name\" : \"plot\" }\t \r\n\n</tool_call>Done.";
    const auto calls = smol::parse_tool_calls(text);
    REQUIRE(calls.size() == 3);
    for (const ToolCall& call : calls) CHECK(call.error == "");
    CHECK(calls[0].name == "get_weather");
    CHECK(calls[0].arguments == R"({"city":"Paris"})");
    CHECK(calls[0].text == "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n");
    CHECK(calls[1].name == "get_time");
    CHECK(calls[1].arguments == R"({"tz":"Europe/Paris","h24":true})");
    // Key order of the model's object does not matter; number text is kept.
    CHECK(calls[2].name == "plot");
    CHECK(calls[2].arguments == R"({"x":[1,2.50,-3e2]})");
    CHECK(calls[2].text.substr(0, 4) == "\r\n \t");
}

TEST_CASE("tool calls: argument strings are decoded and re-encoded compactly") {
    const ToolCall call = only_call(
        "<tool_call>\n{\"name\": \"note\", \"arguments\": {\"t\": \"caf\\u00e9 \\\"x\\\" "
        "a\\/b\\n\", \"nested\": {\"deep\": [{}, [], null, false]}}}\n</tool_call>");
    CHECK(call.error == "");
    CHECK(call.arguments ==
          "{\"t\":\"caf\xc3\xa9 \\\"x\\\" a/b\\n\",\"nested\":{\"deep\":[{},[],null,false]}}");
    // Round trip through nlohmann: the same object.
    CHECK(nlohmann::json::parse(call.arguments) ==
          nlohmann::json::parse(
              R"({"t": "café \"x\" a/b\n", "nested": {"deep": [{}, [], null, false]}})"));
}

TEST_CASE("tool calls: malformed calls are reported, not dropped") {
    // Not JSON at all, truncated JSON, trailing garbage, empty block.
    CHECK(only_error("<tool_call>get_weather(city='Paris')</tool_call>", "invalid JSON").text ==
          "get_weather(city='Paris')");
    only_error("<tool_call>\n{\"name\": \"a\", \"arguments\": {}\n</tool_call>", "invalid JSON");
    only_error("<tool_call>{\"name\": \"a\", \"arguments\": {}}}</tool_call>", "invalid JSON");
    only_error("<tool_call>{'name': 'a', 'arguments': {}}</tool_call>", "invalid JSON");
    only_error("<tool_call></tool_call>", "invalid JSON");
    only_error("<tool_call>\n\n</tool_call>", "invalid JSON");
    // Wrong shapes.
    only_error("<tool_call>[\"a\", {}]</tool_call>", "not a JSON object");
    only_error("<tool_call>\"a\"</tool_call>", "not a JSON object");
    only_error("<tool_call>{\"arguments\": {}}</tool_call>", "no \"name\" member");
    only_error("<tool_call>{\"function\": \"a\", \"arguments\": {}}</tool_call>",
               "no \"name\" member");
    only_error("<tool_call>{\"name\": 7, \"arguments\": {}}</tool_call>",
               "\"name\" is not a string");
    only_error("<tool_call>{\"name\": null, \"arguments\": {}}</tool_call>",
               "\"name\" is not a string");
    only_error("<tool_call>{\"name\": \"a\"}</tool_call>", "no \"arguments\" member");
    // OpenAI's wire form (arguments as a string of JSON) is not what SmolLM3 writes.
    const ToolCall stringly =
        only_error("<tool_call>{\"name\": \"a\", \"arguments\": \"{\\\"x\\\": 1}\"}</tool_call>",
                   "\"arguments\" is not a JSON object");
    CHECK(stringly.name == "");
    CHECK(stringly.arguments == "");
    only_error("<tool_call>{\"name\": \"a\", \"arguments\": [1]}</tool_call>",
               "\"arguments\" is not a JSON object");
    only_error("<tool_call>{\"name\": \"a\", \"arguments\": null}</tool_call>",
               "\"arguments\" is not a JSON object");

    // A malformed call between good ones keeps its place.
    const auto calls = smol::parse_tool_calls(
        "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n"
        "<tool_call>{\"name\": \"b\", \"arguments\": {}</tool_call>\n"
        "<tool_call>{\"name\": \"c\", \"arguments\": {\"k\": 1}}</tool_call>");
    REQUIRE(calls.size() == 3);
    CHECK(calls[0].error == "");
    CHECK(calls[0].name == "a");
    CHECK(calls[1].error != "");
    CHECK(calls[1].name == "");
    CHECK(calls[2].error == "");
    CHECK(calls[2].arguments == R"({"k":1})");
}

TEST_CASE("tool calls: unterminated blocks") {
    // Generation stopped at the stop string "</tool_call>" (which never reaches
    // the text): flagged, but the complete call inside is still read.
    const ToolCall stopped = only_error(
        "Sure.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n", "unterminated");
    CHECK(stopped.error.rfind("unterminated", 0) == 0);
    CHECK(stopped.name == "a");
    CHECK(stopped.arguments == R"({"x":1})");
    CHECK(stopped.text == "\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n");

    // Cut off mid-call (max_tokens): nothing to read.
    const ToolCall cut = only_error("<tool_call>\n{\"name\": \"a\", \"argu", "unterminated");
    CHECK(cut.error.find("invalid JSON") != std::string::npos);
    CHECK(cut.name == "");
    CHECK(cut.text == "\n{\"name\": \"a\", \"argu");

    const ToolCall bare = only_error("<tool_call>", "unterminated");
    CHECK(bare.text == "");
}

TEST_CASE("tool calls: text without calls, and tags in prose") {
    CHECK(smol::parse_tool_calls("").empty());
    CHECK(smol::parse_tool_calls("The weather in Paris is 18 degrees.").empty());
    CHECK(smol::parse_tool_calls("tool_call <tool_calls> <tool-call> </tool_call>").empty());
    CHECK(smol::parse_tool_calls("<TOOL_CALL>{\"name\": \"a\", \"arguments\": {}}</TOOL_CALL>")
              .empty());

    // The model mentions the tag before making a real call: the mention is one
    // error entry (it never closes before the next <tool_call>), and the real
    // call after it is read whole.
    const auto calls = smol::parse_tool_calls(
        "I will wrap my call in a <tool_call> tag, as asked.\n"
        "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
        "That was the </tool_call> closing tag.");
    REQUIRE(calls.size() == 2);
    CHECK(calls[0].error.rfind("unterminated", 0) == 0);
    CHECK(calls[0].error.find("another <tool_call>") != std::string::npos);
    CHECK(calls[0].text == " tag, as asked.\n");
    CHECK(calls[1].error == "");
    CHECK(calls[1].name == "a");

    // The template's own instructions quoted back: an empty block, then the
    // format line, which is not JSON.
    const auto quoted = smol::parse_tool_calls(
        "Use <tool_call></tool_call> tags:\n<tool_call>\n{\"name\": <function-name>, "
        "\"arguments\": <args-json-object>}\n</tool_call>");
    REQUIRE(quoted.size() == 2);
    CHECK(quoted[0].text == "");
    CHECK(quoted[0].error.find("invalid JSON") != std::string::npos);
    CHECK(quoted[1].error.find("invalid JSON") != std::string::npos);
}

}  // namespace test_tool_calls
