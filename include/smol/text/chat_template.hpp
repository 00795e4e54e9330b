// Chat templates: turns a conversation (role + content messages) into the
// exact prompt text a model was trained on.
//
// Owns:
//   - render_smollm3_chat: a direct C++ transcription of the official SmolLM3
//     Jinja template (the one in the GGUF key tokenizer.chat_template). It
//     reproduces, byte for byte, what a Jinja2 engine renders, quirks included:
//       * the system block always opens the prompt, even without a system
//         message: "## Metadata" (knowledge cutoff, today's date, reasoning
//         mode) then "## Custom Instructions" (the system message with its
//         "/think" and "/no_think" flags removed and trailing whitespace
//         stripped, or a default prompt that depends on the reasoning mode);
//       * that block is left WITHOUT <|im_end|> when no tools are given (the
//         template only closes it in its tools branch);
//       * "/system_override" anywhere in the system message replaces the whole
//         block by the message text (flags removed) followed by <|im_end|>;
//       * the reasoning mode is "/think" unless enable_thinking is false; a
//         "/no_think" (checked first) or "/think" in the system message wins;
//       * in "/no_think" mode every assistant turn and the generation prompt
//         carry an empty "<think>\n\n</think>\n" block; assistant contents lose
//         their leading newlines; "tool" messages render as user turns; system
//         messages after the first, and unknown roles, render nothing.
//     Tools (ChatTemplateOptions::tools) print as transformers prints them
//     (text/tool_calls.hpp); a bad tool definition is an error, which the
//     try_render_* forms return as a value.
//   - render_chatml: plain ChatML, the fallback for files with other templates.
//   - the *_prompt forms return PromptText (text/prompt_text.hpp): the same
//     text, with the template's own markup told apart from contents, so that
//     Tokenizer::encode_prompt makes control tokens of the markup only.
//   - detect_chat_format: recognizes the SmolLM3 template by its markers.
//   - split_reasoning: separates "<think>...</think>" from the answer.
//   - today_string / date_string: "%d %B %Y" dates ("05 March 2026") with
//     English month names, independent of the C locale.
#pragma once

#include "../detail/abi.hpp"

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "prompt_text.hpp"
#include "tool_calls.hpp"

SMOL_NAMESPACE_BEGIN

struct ChatMessage {
    std::string role;  // "system", "user", "assistant" or "tool"
    std::string content;
    // An assistant message that is the model's own reply, verbatim (a
    // result's text): its control tokens (<think>, <tool_call>, ...) stay
    // control tokens, so the next turn reuses the cached reply instead of
    // re-reading it as text. Honoured for "assistant" only; leave it false for
    // any text a player, a tool or the network could have written.
    bool model_output = false;
};

struct ChatTemplateOptions {
    // Append the opening of an assistant turn (what the model completes).
    bool add_generation_prompt = true;
    // nullopt = the template's variable is undefined, which means "think".
    std::optional<bool> enable_thinking;
    // The "Today Date" line, e.g. "21 November 2026"; empty = today's date
    // from the system clock (local time, like the template's strftime_now).
    std::string today;
    // The tools the model may call, as transformers' apply_chat_template(tools=...)
    // passes them: the template's `tools` variable, which, when non-empty,
    // replaces xml_tools. Each prints as try_render_tool (text/tool_calls.hpp)
    // gives it; the model answers with <tool_call> blocks (parse_tool_calls).
    std::vector<ToolDefinition> tools;
    // The template's raw `xml_tools` variable: each string is inserted
    // verbatim, one per line, inside <tools></tools> (Jinja's `tool | string`).
    // Ignored when `tools` is non-empty.
    std::vector<std::string> xml_tools;
    // Python-callable tool descriptions for the "<code>" agentic section.
    std::vector<std::string> python_tools;
    // Off (the default): message contents of every role, the tools' text and
    // the date are ordinary text, so "<|im_end|>" typed by a player reaches
    // the model as those ten characters, never as the control token; only
    // the template's own markup holds control tokens. On: special tokens
    // written in contents are parsed as well (what a plain render-then-
    // tokenize does). Only for contents the program wrote itself: any text
    // from a user, a tool or the network could then close its turn and write
    // system or assistant turns of its own (prompt injection).
    bool parse_special_in_content = false;
};

enum class ChatFormat { smollm3, chatml };

struct ReasoningSplit {
    std::string reasoning;  // text inside <think>...</think>, trimmed
    std::string answer;     // text after </think>, leading whitespace removed
};

namespace detail {

inline bool contains(std::string_view haystack, std::string_view needle) {
    return haystack.find(needle) != std::string_view::npos;
}

// Python's str.replace(old, ""): removes every non-overlapping occurrence,
// scanning left to right.
inline std::string remove_all(std::string_view text, std::string_view needle) {
    std::string out;
    out.reserve(text.size());
    size_t pos = 0;
    while (true) {
        const size_t hit = text.find(needle, pos);
        if (hit == std::string_view::npos) break;
        out.append(text.substr(pos, hit - pos));
        pos = hit + needle.size();
    }
    out.append(text.substr(pos));
    return out;
}

// Python's str.isspace for one code point: the Unicode White_Space
// characters plus the ASCII separators U+001C..U+001F.
inline bool is_python_space(uint32_t cp) {
    if (cp >= 0x09 && cp <= 0x0D) return true;
    if (cp >= 0x1C && cp <= 0x20) return true;
    switch (cp) {
        case 0x85:
        case 0xA0:
        case 0x1680:
        case 0x2028:
        case 0x2029:
        case 0x202F:
        case 0x205F:
        case 0x3000:
            return true;
        default:
            return cp >= 0x2000 && cp <= 0x200A;
    }
}

// Python's str.rstrip() with no argument, on UTF-8 text: drops trailing
// whitespace code points (multi-byte ones such as U+00A0 included). Bytes
// that are not valid UTF-8 count as non-space.
inline std::string python_rstrip(std::string_view text) {
    size_t end = text.size();
    while (end > 0) {
        // Find the start of the last code point: step back over up to three
        // continuation bytes (10xxxxxx).
        size_t start = end - 1;
        int continuation = 0;
        while (start > 0 && continuation < 3 &&
               (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
            --start;
            ++continuation;
        }
        const auto lead = static_cast<unsigned char>(text[start]);
        uint32_t cp = 0;
        size_t length = 0;
        if (lead < 0x80) {
            cp = lead;
            length = 1;
        } else if ((lead & 0xE0) == 0xC0) {
            cp = lead & 0x1Fu;
            length = 2;
        } else if ((lead & 0xF0) == 0xE0) {
            cp = lead & 0x0Fu;
            length = 3;
        } else if ((lead & 0xF8) == 0xF0) {
            cp = lead & 0x07u;
            length = 4;
        }
        if (length == 0 || start + length != end) break;  // not one well-formed code point
        for (size_t i = start + 1; i < end; ++i) {
            cp = (cp << 6) | (static_cast<unsigned char>(text[i]) & 0x3Fu);
        }
        if (!is_python_space(cp)) break;
        end = start;
    }
    return std::string(text.substr(0, end));
}

// Python's str.lstrip(chars) for a single ASCII character.
inline std::string_view lstrip_char(std::string_view text, char c) {
    size_t begin = 0;
    while (begin < text.size() && text[begin] == c) ++begin;
    return text.substr(begin);
}

inline bool is_ascii_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

inline std::string_view trim_ascii(std::string_view text) {
    size_t begin = 0, end = text.size();
    while (begin < end && is_ascii_space(text[begin])) ++begin;
    while (end > begin && is_ascii_space(text[end - 1])) --end;
    return text.substr(begin, end - begin);
}

inline std::string_view ltrim_ascii(std::string_view text) {
    size_t begin = 0;
    while (begin < text.size() && is_ascii_space(text[begin])) ++begin;
    return text.substr(begin);
}

constexpr std::string_view kSmolLM3DefaultThinkPrompt =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an "
    "assistant involves thoroughly exploring questions through a systematic thinking process "
    "before providing the final precise and accurate solutions. This requires engaging in a "
    "comprehensive cycle of analysis, summarizing, exploration, reassessment, reflection, "
    "backtracking, and iteration to develop well-considered thinking process. Please structure "
    "your response into two main sections: Thought and Solution using the specified format: "
    "<think> Thought section </think> Solution section. In the Thought section, detail your "
    "reasoning process in steps. Each step should include detailed considerations such as "
    "analysing questions, summarizing relevant findings, brainstorming new ideas, verifying the "
    "accuracy of the current steps, refining any errors, and revisiting previous steps. In the "
    "Solution section, based on various attempts, explorations, and reflections from the "
    "Thought section, systematically present the final solution that you deem correct. The "
    "Solution section should be logical, accurate, and concise and detail necessary steps "
    "needed to reach the conclusion.";

constexpr std::string_view kSmolLM3DefaultNoThinkPrompt =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face.";

constexpr std::string_view kEmptyThinkBlock = "<think>\n\n</think>\n";

}  // namespace detail

// "%d %B %Y" for a calendar date: two-digit day, English month name, year.
// month is 1..12.
inline std::string date_string(int year, int month, int day) {
    static constexpr const char* kMonths[12] = {"January",   "February", "March",    "April",
                                                "May",       "June",     "July",     "August",
                                                "September", "October",  "November", "December"};
    if (month < 1 || month > 12 || day < 1 || day > 31) {
        detail::fail(ErrorKind::invalid_argument,
                     "date_string: invalid date " + std::to_string(year) + "-" +
                         std::to_string(month) + "-" + std::to_string(day));
    }
    std::string out;
    out += static_cast<char>('0' + day / 10);
    out += static_cast<char>('0' + day % 10);
    out += ' ';
    out += kMonths[month - 1];
    out += ' ';
    out += std::to_string(year);
    return out;
}

// Today's local date as the template's strftime_now("%d %B %Y") gives it.
inline std::string today_string() {
    const std::time_t now = std::time(nullptr);
    std::tm local{};
#if defined(_WIN32)
    localtime_s(&local, &now);
#else
    localtime_r(&now, &local);
#endif
    return date_string(local.tm_year + 1900, local.tm_mon + 1, local.tm_mday);
}

// Errors (invalid_argument): a tool of options.tools that try_render_tool
// rejects. They are checked even where the template would not print the tools
// ("/system_override"), so a bad definition never depends on the conversation.
//
// The prompt comes back as PromptText (text/prompt_text.hpp): the template's
// own text is markup, where special tokens count; message contents, the
// tools' text and the date are content, ordinary text for the tokenizer
// (unless options.parse_special_in_content).
inline Expected<PromptText> try_render_smollm3_prompt(const std::vector<ChatMessage>& messages,
                                                      const ChatTemplateOptions& options) {
    using namespace std::string_view_literals;
    // The template's `{% if tools %}{% set xml_tools = tools %}`.
    std::vector<std::string> rendered_tools;
    rendered_tools.reserve(options.tools.size());
    for (const ToolDefinition& tool : options.tools) {
        SMOL_TRY_ASSIGN(std::string text, try_render_tool(tool));
        rendered_tools.push_back(std::move(text));
    }
    const std::vector<std::string>& xml_tools =
        options.tools.empty() ? options.xml_tools : rendered_tools;

    // Undefined enable_thinking means true; a defined one is taken as given.
    std::string_view reasoning_mode =
        options.enable_thinking.value_or(true) ? "/think"sv : "/no_think"sv;

    PromptText out;
    const auto content = [&](std::string_view text) {
        out.append(text, options.parse_special_in_content);
    };
    out.append_markup("<|im_start|>system\n");

    // Only a leading system message feeds the header. Without one, the
    // template's system_message is undefined: "x in undefined" is false and
    // undefined custom_instructions is falsy, i.e. the same as empty here.
    const bool has_system = !messages.empty() && messages.front().role == "system";
    std::string_view system_message;
    std::string custom_instructions;
    if (has_system) {
        system_message = messages.front().content;
        if (detail::contains(system_message, "/no_think")) {
            reasoning_mode = "/no_think";
        } else if (detail::contains(system_message, "/think")) {
            reasoning_mode = "/think";
        }
        custom_instructions = detail::python_rstrip(
            detail::remove_all(detail::remove_all(system_message, "/no_think"), "/think"));
    }

    if (detail::contains(system_message, "/system_override")) {
        content(detail::python_rstrip(detail::remove_all(custom_instructions, "/system_override")));
        out.append_markup("<|im_end|>\n");
    } else {
        out.append_markup("## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: ");
        content(options.today.empty() ? today_string() : options.today);
        out.append_markup("\nReasoning Mode: ");
        out.append_markup(reasoning_mode);
        out.append_markup("\n\n## Custom Instructions\n\n");
        if (!custom_instructions.empty()) {
            content(custom_instructions);
        } else if (reasoning_mode == "/think") {
            out.append_markup(detail::kSmolLM3DefaultThinkPrompt);
        } else {
            out.append_markup(detail::kSmolLM3DefaultNoThinkPrompt);
        }
        out.append_markup("\n\n");

        // The template closes the system block only in this branch: without
        // tools it stays open (the quirk the reference output carries).
        if (!xml_tools.empty() || !options.python_tools.empty()) {
            out.append_markup("### Tools\n\n");
            if (!xml_tools.empty()) {
                out.append_markup(
                    "You may call one or more functions to assist with the user query.\n"
                    "You are provided with function signatures within <tools></tools> XML "
                    "tags:\n\n<tools>\n");
                for (const std::string& tool : xml_tools) {
                    content(tool);
                    out.append_markup("\n");
                }
                out.append_markup(
                    "</tools>\n\nFor each function call, return a json object with function "
                    "name and arguments within <tool_call></tool_call> XML tags:\n"
                    "<tool_call>\n{\"name\": <function-name>, \"arguments\": "
                    "<args-json-object>}\n</tool_call>");
            }
            if (!options.python_tools.empty()) {
                out.append_markup(
                    "When you send a message containing Python code between '<code>' and "
                    "'</code>' tags, it will be executed in a stateful Jupyter notebook "
                    "environment, and you will then be given the output to continued "
                    "reasoning in an agentic loop.\n\nYou can use the following tools in "
                    "your python code like regular functions:\n<tools>\n");
                for (const std::string& tool : options.python_tools) {
                    content(tool);
                    out.append_markup("\n");
                }
                out.append_markup(
                    "</tools>\n\nThe state persists between code executions: so variables "
                    "that you define in one step are still available thereafter.");
            }
            out.append_markup("\n\n<|im_end|>\n");
        }
    }

    const bool thinking = reasoning_mode == "/think";
    for (const ChatMessage& message : messages) {
        if (message.role == "user" || message.role == "tool") {
            // "tool" results come back to the model as user turns.
            out.append_markup("<|im_start|>user\n");
            content(message.content);
            out.append_markup("<|im_end|>\n");
        } else if (message.role == "assistant") {
            out.append_markup("<|im_start|>assistant\n");
            if (!thinking) out.append_markup(detail::kEmptyThinkBlock);
            const std::string_view reply = detail::lstrip_char(message.content, '\n');
            if (message.model_output)
                out.append_markup(reply);
            else
                content(reply);
            out.append_markup("<|im_end|>\n");
        }
        // "system" (the first one went into the header) and other roles: nothing.
    }

    if (options.add_generation_prompt) {
        out.append_markup("<|im_start|>assistant\n");
        if (!thinking) out.append_markup(detail::kEmptyThinkBlock);
    }
    return Expected<PromptText>(std::move(out));
}

inline Expected<std::string> try_render_smollm3_chat(const std::vector<ChatMessage>& messages,
                                                     const ChatTemplateOptions& options) {
    SMOL_TRY_ASSIGN(PromptText prompt, try_render_smollm3_prompt(messages, options));
    return Expected<std::string>(std::move(prompt.text));
}

// try_render_smollm3_chat, throwing smol::Error on a bad tool definition.
inline std::string render_smollm3_chat(const std::vector<ChatMessage>& messages,
                                       const ChatTemplateOptions& options) {
    return detail::value_or_fail(try_render_smollm3_chat(messages, options));
}

// Plain ChatML: every message as <|im_start|>role\ncontent<|im_end|>\n, then
// the assistant opening when asked. enable_thinking and today are unused, and
// so are the tools: ChatML has no place for them (try_render_chat refuses
// them rather than drop them unseen). Roles and contents are content.
inline PromptText render_chatml_prompt(const std::vector<ChatMessage>& messages,
                                       const ChatTemplateOptions& options) {
    PromptText out;
    for (const ChatMessage& message : messages) {
        out.append_markup("<|im_start|>");
        out.append(message.role, options.parse_special_in_content);
        out.append_markup("\n");
        out.append(message.content, options.parse_special_in_content ||
                                        (message.model_output && message.role == "assistant"));
        out.append_markup("<|im_end|>\n");
    }
    if (options.add_generation_prompt) out.append_markup("<|im_start|>assistant\n");
    return out;
}
inline std::string render_chatml(const std::vector<ChatMessage>& messages,
                                 const ChatTemplateOptions& options) {
    return render_chatml_prompt(messages, options).text;
}

// SmolLM3 when the template carries the markers of the SmolLM3 family: the
// ChatML tokens plus its reasoning-mode machinery ("/no_think" flag and the
// "Reasoning Mode" header or the "/system_override" switch). Anything else,
// the empty string included, gets ChatML.
inline ChatFormat detect_chat_format(std::string_view jinja_template) {
    using detail::contains;
    const bool chatml_tokens =
        contains(jinja_template, "<|im_start|>") && contains(jinja_template, "<|im_end|>");
    const bool reasoning_flags =
        contains(jinja_template, "/no_think") && (contains(jinja_template, "Reasoning Mode") ||
                                                  contains(jinja_template, "/system_override"));
    return chatml_tokens && reasoning_flags ? ChatFormat::smollm3 : ChatFormat::chatml;
}

inline Expected<PromptText> try_render_chat_prompt(ChatFormat format,
                                                   const std::vector<ChatMessage>& messages,
                                                   const ChatTemplateOptions& options) {
    if (format == ChatFormat::smollm3) return try_render_smollm3_prompt(messages, options);
    if (!options.tools.empty() || !options.xml_tools.empty() || !options.python_tools.empty()) {
        // A model that never sees the tools cannot call them; say so instead.
        return ErrorInfo{ErrorKind::unsupported,
                         "chat: this model's chat template is not SmolLM3's (rendered as plain "
                         "ChatML), which has no place for tools; describe them in a system "
                         "message instead"};
    }
    return render_chatml_prompt(messages, options);
}

// The text alone. Tokenizing it with special tokens parsed turns marker text
// in contents into control tokens: tokenize try_render_chat_prompt's
// PromptText (Tokenizer::encode_prompt) to keep contents as text.
inline Expected<std::string> try_render_chat(ChatFormat format,
                                             const std::vector<ChatMessage>& messages,
                                             const ChatTemplateOptions& options) {
    SMOL_TRY_ASSIGN(PromptText prompt, try_render_chat_prompt(format, messages, options));
    return Expected<std::string>(std::move(prompt.text));
}

// try_render_chat, throwing smol::Error on a bad tool definition or on tools
// for ChatML.
inline std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages,
                               const ChatTemplateOptions& options) {
    return detail::value_or_fail(try_render_chat(format, messages, options));
}

// Splits a generated reply into reasoning and answer:
//   "<think>R</think>A"  -> {R trimmed, A without leading whitespace}
//   "R</think>A"         -> same (the prompt already opened the think block)
//   "<think>R"           -> {R trimmed, ""} (unterminated: still thinking)
//   "A"                  -> {"", A} unchanged
// Whitespace before a leading <think> is ignored.
inline ReasoningSplit split_reasoning(std::string_view generated) {
    constexpr std::string_view kOpen = "<think>";
    constexpr std::string_view kClose = "</think>";
    ReasoningSplit split;
    std::string_view body = generated;
    const std::string_view leading_trimmed = detail::ltrim_ascii(generated);
    bool opened = false;
    if (leading_trimmed.substr(0, kOpen.size()) == kOpen) {
        body = leading_trimmed.substr(kOpen.size());
        opened = true;
    }
    const size_t close = body.find(kClose);
    if (close == std::string_view::npos) {
        if (opened) {
            split.reasoning = std::string(detail::trim_ascii(body));
        } else {
            split.answer = std::string(generated);
        }
        return split;
    }
    split.reasoning = std::string(detail::trim_ascii(body.substr(0, close)));
    split.answer = std::string(detail::ltrim_ascii(body.substr(close + kClose.size())));
    return split;
}

SMOL_NAMESPACE_END
