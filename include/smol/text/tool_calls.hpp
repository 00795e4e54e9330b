// Tool calling in the SmolLM3 format, both directions of the text:
//
// Owns:
//   - ToolDefinition and try_render_tool: a tool as the chat template shows it
//     to the model. transformers hands each tool to the template as the dict
//     {"type": "function", "function": {"name", "description", "parameters"}}
//     and the template prints it with `tool | string`, i.e. Python's str() of
//     that dict; try_render_tool reproduces that text byte for byte
//     (chat_template.hpp inserts it through ChatTemplateOptions::tools).
//   - ToolCall and parse_tool_calls: the calls a model wrote in its reply, in
//     the form the template asks for:
//         <tool_call>
//         {"name": <function-name>, "arguments": <args-json-object>}
//         </tool_call>
#pragma once

#include "../detail/abi.hpp"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../detail/json.hpp"
#include "../detail/utf8.hpp"
#include "../error.hpp"

SMOL_NAMESPACE_BEGIN

struct ToolDefinition {
    std::string name;  // what the model writes as "name" in its call; not empty
    std::string description;
    // JSON Schema of the arguments, as JSON text; must be an object. Printed
    // the way Python prints json.loads of it (key order kept).
    std::string parameters = R"({"type": "object", "properties": {}})";
};

struct ToolCall {
    std::string name;
    std::string arguments;  // the arguments object as compact JSON text
    std::string text;       // the raw text between <tool_call> and </tool_call>
    // Non-empty when the block is not a complete, well-formed call: its text
    // is not {"name": string, "arguments": object}, or the block was never
    // closed (the message then starts with "unterminated"). An unclosed block
    // whose text is a well-formed call still gets name and arguments: a
    // generation stopped at the stop string "</tool_call>" (which never
    // reaches the text) ends exactly that way, and the caller may accept it.
    std::string error;
};

namespace detail {

constexpr std::string_view kToolCallOpen = "<tool_call>";
constexpr std::string_view kToolCallClose = "</tool_call>";

inline json::Value json_string(std::string text) {
    json::Value v;
    v.type = json::Type::string;
    v.text = std::move(text);
    return v;
}

// Fills call.name / call.arguments from call.text, or returns why it is not
// a call. The JSON reader accepts whitespace around the value, so the
// newlines the format puts around the object need no trimming.
inline std::string read_tool_call(ToolCall& call) {
    auto parsed = json::try_parse(call.text);
    if (!parsed) return "invalid JSON (" + parsed.error().message + ")";
    const json::Value& object = parsed.value();
    if (!object.is_object()) return "not a JSON object";
    const json::Value* name = object.find("name");
    if (!name) return "no \"name\" member";
    if (!name->is_string()) return "\"name\" is not a string";
    const json::Value* arguments = object.find("arguments");
    if (!arguments) return "no \"arguments\" member";
    if (!arguments->is_object()) return "\"arguments\" is not a JSON object";
    call.name = name->text;
    call.arguments = json::dump(*arguments);
    return {};
}

}  // namespace detail

// The text the SmolLM3 template prints for `tool` inside <tools></tools>:
// Python's str() of {"type": "function", "function": {"name": ...,
// "description": ..., "parameters": json.loads(parameters)}}.
// Errors (invalid_argument, naming the tool): an empty name, a name or
// description that is not valid UTF-8, parameters that are not a JSON object.
inline Expected<std::string> try_render_tool(const ToolDefinition& tool) {
    if (tool.name.empty())
        return Expected<std::string>(ErrorKind::invalid_argument, "tool definition: empty name");
    if (auto error = detail::utf8_error(tool.name, "tool name")) return *error;
    const std::string what = "tool '" + tool.name + "'";
    if (auto error = detail::utf8_error(tool.description, what + " description")) return *error;
    auto parameters = detail::json::try_parse(tool.parameters);
    if (!parameters)
        return Expected<std::string>(
            ErrorKind::invalid_argument,
            what + ": parameters are not valid JSON: " + parameters.error().message);
    if (!parameters->is_object())
        return Expected<std::string>(ErrorKind::invalid_argument,
                                     what + ": parameters must be a JSON object (a JSON Schema)");

    detail::json::Value function;
    function.type = detail::json::Type::object;
    function.members.emplace_back("name", detail::json_string(tool.name));
    function.members.emplace_back("description", detail::json_string(tool.description));
    function.members.emplace_back("parameters", std::move(parameters).value());
    detail::json::Value wrapper;
    wrapper.type = detail::json::Type::object;
    wrapper.members.emplace_back("type", detail::json_string("function"));
    wrapper.members.emplace_back("function", std::move(function));
    return detail::json::python_repr(wrapper);
}

// Every <tool_call>...</tool_call> block of generated text, in order. Text
// outside the blocks (reasoning, prose) is ignored, and so is a stray
// </tool_call>. A block that is not a valid call still appears, with `error`
// saying why, so the caller can tell the model its call was malformed. Each
// <tool_call> opens one block, which ends at the first </tool_call> after it;
// when another <tool_call> (or the end of the text) comes first, the block
// ends there instead and is "unterminated" (a tag the model mentioned in
// prose thus costs one error entry but never swallows the real call after it).
inline std::vector<ToolCall> parse_tool_calls(std::string_view text) {
    using detail::kToolCallClose;
    using detail::kToolCallOpen;
    std::vector<ToolCall> calls;
    size_t open = text.find(kToolCallOpen);
    while (open != std::string_view::npos) {
        const size_t body = open + kToolCallOpen.size();
        const size_t close = text.find(kToolCallClose, body);
        const size_t next_open = text.find(kToolCallOpen, body);
        ToolCall call;
        if (close != std::string_view::npos && close < next_open) {
            call.text = std::string(text.substr(body, close - body));
            call.error = detail::read_tool_call(call);
            open = text.find(kToolCallOpen, close + kToolCallClose.size());
        } else {
            const size_t end = next_open == std::string_view::npos ? text.size() : next_open;
            call.text = std::string(text.substr(body, end - body));
            const std::string problem = detail::read_tool_call(call);
            call.error =
                next_open == std::string_view::npos
                    ? "unterminated <tool_call>: no </tool_call> before the end of the text"
                    : "unterminated <tool_call>: another <tool_call> comes before its "
                      "</tool_call>";
            if (!problem.empty()) call.error += "; " + problem;
            open = next_open;
        }
        calls.push_back(std::move(call));
    }
    return calls;
}

SMOL_NAMESPACE_END
