// Tests for the chat template renderer: every conversation in the fixtures'
// chat/smollm3-chat.json (rendered by a real Jinja2 engine with the official
// SmolLM3 template) must match byte for byte; the hand-derived cases below
// follow the template text line by line (see the comments at each case).
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <random>
#include <nlohmann/json.hpp>
#include <smol/gguf/gguf.hpp>
#include <smol/text/chat_template.hpp>
#include <smol/text/tokenizer.hpp>
#include <string>
#include <vector>

#include "support/fixtures.hpp"

// In a namespace of its own: tests/CMakeLists.txt compiles it in one unit with
// the other files of its group.
namespace test_chat_template {

using smol::ChatFormat;
using smol::ChatMessage;
using smol::ChatTemplateOptions;
using smol::render_smollm3_chat;

namespace {

const std::string kDate = "21 November 2026";

std::string header(const std::string& mode, const std::string& instructions) {
    return "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: " +
           kDate + "\nReasoning Mode: " + mode + "\n\n## Custom Instructions\n\n" + instructions +
           "\n\n";
}

const std::string kNoThinkDefault =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face.";

ChatTemplateOptions opts(bool generation_prompt = true,
                         std::optional<bool> thinking = std::nullopt) {
    ChatTemplateOptions o;
    o.add_generation_prompt = generation_prompt;
    o.enable_thinking = thinking;
    o.today = kDate;
    return o;
}

}  // namespace

TEST_CASE("chat template: golden conversations from a Jinja2 engine") {
    const auto path = smol_test::fixture("chat/smollm3-chat.json");
    if (!path) return;
    std::ifstream in(*path);
    REQUIRE(in.good());
    const nlohmann::json cases = nlohmann::json::parse(in);
    REQUIRE(cases.size() > 0);
    for (const auto& c : cases) {
        const std::string name = c.value("name", "?");
        CAPTURE(name);
        std::vector<ChatMessage> messages;
        for (const auto& m : c.at("messages")) {
            messages.push_back(
                {m.at("role").get<std::string>(),
                 m.at("content").is_string() ? m.at("content").get<std::string>() : std::string()});
        }
        ChatTemplateOptions options;
        const auto& o = c.at("options");
        options.add_generation_prompt = o.value("add_generation_prompt", false);
        if (o.contains("enable_thinking"))
            options.enable_thinking = o.at("enable_thinking").get<bool>();
        options.today = c.at("today").get<std::string>();
        const std::string expected = c.at("expected").get<std::string>();
        CHECK(render_smollm3_chat(messages, options) == expected);
        smol_test::count_golden();
    }
}

TEST_CASE("chat template: the fixture file's template is detected as SmolLM3") {
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return;
    auto file = smol::gguf::File::open(*path);
    const std::string jinja = file->get<std::string>("tokenizer.chat_template");
    CHECK(smol::detect_chat_format(jinja) == ChatFormat::smollm3);
    CHECK(smol::detect_chat_format("") == ChatFormat::chatml);
    // A plain ChatML template (as Qwen2 / SmolLM2 files carry).
    const std::string chatml =
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
        "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
        "{{ '<|im_start|>assistant\\n' }}{% endif %}";
    CHECK(smol::detect_chat_format(chatml) == ChatFormat::chatml);
    // A Llama-3 style template.
    CHECK(smol::detect_chat_format("{{ '<|start_header_id|>' + message['role'] }}") ==
          ChatFormat::chatml);
}

TEST_CASE("chat template: derived cases") {
    SUBCASE("no system, thinking disabled, multi-turn: empty think block on every assistant turn") {
        const std::vector<ChatMessage> m = {{"user", "A"}, {"assistant", "\n\nB"}, {"user", "C"}};
        CHECK(render_smollm3_chat(m, opts(true, false)) ==
              header("/no_think", kNoThinkDefault) +
                  "<|im_start|>user\nA<|im_end|>\n"
                  "<|im_start|>assistant\n<think>\n\n</think>\nB<|im_end|>\n"
                  "<|im_start|>user\nC<|im_end|>\n"
                  "<|im_start|>assistant\n<think>\n\n</think>\n");
    }
    SUBCASE("think mode: assistant contents keep their think text, lose leading newlines only") {
        const std::vector<ChatMessage> m = {
            {"system", "Be kind."}, {"user", "Q"}, {"assistant", "\n<think>\nhm\n</think>\n A \n"}};
        CHECK(render_smollm3_chat(m, opts(false)) ==
              header("/think", "Be kind.") +
                  "<|im_start|>user\nQ<|im_end|>\n"
                  "<|im_start|>assistant\n<think>\nhm\n</think>\n A \n<|im_end|>\n");
    }
    SUBCASE("/think in the system message overrides enable_thinking=false") {
        const std::vector<ChatMessage> m = {{"system", "Reason well /think  \n"}, {"user", "Q"}};
        CHECK(render_smollm3_chat(m, opts(true, false)) ==
              header("/think", "Reason well") +
                  "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n");
    }
    SUBCASE("/no_think wins over /think when both appear; both are stripped") {
        const std::vector<ChatMessage> m = {{"system", "/think a /no_think b"}, {"user", "Q"}};
        CHECK(render_smollm3_chat(m, opts(true, true)) ==
              header("/no_think", " a  b") +
                  "<|im_start|>user\nQ<|im_end|>\n"
                  "<|im_start|>assistant\n<think>\n\n</think>\n");
    }
    SUBCASE("system message that is only a flag falls back to the mode's default prompt") {
        const std::vector<ChatMessage> m = {{"system", "/no_think"}, {"user", "Q"}};
        CHECK(render_smollm3_chat(m, opts(false)) ==
              header("/no_think", kNoThinkDefault) + "<|im_start|>user\nQ<|im_end|>\n");
        const std::vector<ChatMessage> m2 = {{"system", ""}, {"user", "Q"}};
        const std::string rendered = render_smollm3_chat(m2, opts(false, false));
        CHECK(rendered == header("/no_think", kNoThinkDefault) + "<|im_start|>user\nQ<|im_end|>\n");
    }
    SUBCASE("rstrip removes Unicode whitespace (NBSP, ideographic space), not other text") {
        const std::vector<ChatMessage> m = {{"system", "Hi\xC2\xA0\xE3\x80\x80 \t\n"},
                                            {"user", "Q"}};
        CHECK(render_smollm3_chat(m, opts(false)) ==
              header("/think", "Hi") + "<|im_start|>user\nQ<|im_end|>\n");
        const std::vector<ChatMessage> m2 = {{"system", "caf\xC3\xA9 "}, {"user", "Q"}};
        CHECK(render_smollm3_chat(m2, opts(false)) ==
              header("/think", "caf\xC3\xA9") + "<|im_start|>user\nQ<|im_end|>\n");
    }
    SUBCASE("/system_override: flags removed, block closed, mode still taken from the flags") {
        const std::vector<ChatMessage> m = {
            {"system", "Oracle. /system_override /no_think\n"}, {"user", "Q"}, {"assistant", "A"}};
        CHECK(render_smollm3_chat(m, opts(true)) ==
              "<|im_start|>system\nOracle.<|im_end|>\n"
              "<|im_start|>user\nQ<|im_end|>\n"
              "<|im_start|>assistant\n<think>\n\n</think>\nA<|im_end|>\n"
              "<|im_start|>assistant\n<think>\n\n</think>\n");
    }
    SUBCASE("later system messages and unknown roles render nothing; tool renders as user") {
        const std::vector<ChatMessage> m = {{"user", "Q"},
                                            {"system", "ignored"},
                                            {"assistant", "calling"},
                                            {"tool", "42"},
                                            {"developer", "ignored too"}};
        CHECK(render_smollm3_chat(m, opts(true)) ==
              header("/think", std::string(smol::detail::kSmolLM3DefaultThinkPrompt)) +
                  "<|im_start|>user\nQ<|im_end|>\n"
                  "<|im_start|>assistant\ncalling<|im_end|>\n"
                  "<|im_start|>user\n42<|im_end|>\n"
                  "<|im_start|>assistant\n");
    }
    SUBCASE("tools close the system block") {
        ChatTemplateOptions o = opts(false, false);
        o.xml_tools = {R"({"name": "get_weather"})", R"({"name": "roll"})"};
        const std::vector<ChatMessage> m = {{"user", "Q"}};
        CHECK(render_smollm3_chat(m, o) ==
              header("/no_think", kNoThinkDefault) +
                  "### Tools\n\nYou may call one or more functions to assist with the user query.\n"
                  "You are provided with function signatures within <tools></tools> XML tags:\n\n"
                  "<tools>\n{\"name\": \"get_weather\"}\n{\"name\": \"roll\"}\n</tools>\n\n"
                  "For each function call, return a json object with function name and arguments "
                  "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
                  "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>\n\n"
                  "<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n");
        o.xml_tools.clear();
        o.python_tools = {"def roll(): ..."};
        CHECK(render_smollm3_chat(m, o) ==
              header("/no_think", kNoThinkDefault) +
                  "### Tools\n\nWhen you send a message containing Python code between '<code>' "
                  "and '</code>' tags, it will be executed in a stateful Jupyter notebook "
                  "environment, and you will then be given the output to continued reasoning in "
                  "an agentic loop.\n\nYou can use the following tools in your python code like "
                  "regular functions:\n<tools>\ndef roll(): ...\n</tools>\n\nThe state persists "
                  "between code executions: so variables that you define in one step are still "
                  "available thereafter.\n\n<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n");
    }
    SUBCASE("empty conversation still renders the header and prompt") {
        CHECK(render_smollm3_chat({}, opts(true, false)) ==
              header("/no_think", kNoThinkDefault) +
                  "<|im_start|>assistant\n<think>\n\n</think>\n");
    }
}

TEST_CASE("chat template: ChatML fallback") {
    const std::vector<ChatMessage> m = {{"system", "S"}, {"user", "U"}, {"assistant", "A"}};
    CHECK(smol::render_chatml(m, opts(true)) ==
          "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
          "<|im_start|>assistant\nA<|im_end|>\n<|im_start|>assistant\n");
    CHECK(smol::render_chatml(m, opts(false)) ==
          "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
          "<|im_start|>assistant\nA<|im_end|>\n");
    CHECK(smol::render_chat(ChatFormat::chatml, m, opts(false)) ==
          smol::render_chatml(m, opts(false)));
}

TEST_CASE("chat template: dates") {
    CHECK(smol::date_string(2026, 11, 21) == "21 November 2026");
    CHECK(smol::date_string(2025, 3, 5) == "05 March 2025");
    CHECK(smol::date_string(2024, 1, 31) == "31 January 2024");
    CHECK_THROWS_AS(smol::date_string(2024, 13, 1), smol::Error);
    const std::string today = smol::today_string();
    CHECK(today.size() >= 12);
    CHECK(today[2] == ' ');
    // The default date lands in the header when options.today is empty.
    ChatTemplateOptions o;
    CHECK(render_smollm3_chat({{"user", "x"}}, o).find("Today Date: " + today + "\n") !=
          std::string::npos);
}

TEST_CASE("split_reasoning") {
    auto check = [](const char* text, const char* reasoning, const char* answer) {
        const auto s = smol::split_reasoning(text);
        CHECK(s.reasoning == reasoning);
        CHECK(s.answer == answer);
    };
    check("<think>\nLet me see.\n</think>\nParis.", "Let me see.", "Paris.");
    check("\n<think></think>Paris.", "", "Paris.");
    check("<think>\n\n</think>\n", "", "");
    check("still going\n</think>\n\nDone", "still going", "Done");
    check("<think>\nunterminated thought", "unterminated thought", "");
    check("Just an answer.", "", "Just an answer.");
    check("", "", "");
}

// ---- the rendered prompt's markup: where control tokens may come from -------

namespace {

bool in_markup(const smol::PromptText& prompt, size_t begin, size_t end) {
    for (const smol::TextRange& r : prompt.markup)
        if (begin < r.end && r.begin < end) return true;
    return false;
}

std::shared_ptr<const smol::Tokenizer> fixture_tokenizer() {
    static std::shared_ptr<const smol::Tokenizer> tok;
    if (tok) return tok;
    const auto path = smol_test::fixture("tiny-q4km.gguf");
    if (!path) return nullptr;
    tok = std::make_shared<const smol::Tokenizer>(
        smol::Tokenizer::from_gguf(smol::gguf::File::open(*path)));
    return tok;
}

size_t count_specials(const smol::Tokenizer& tok, const std::vector<int32_t>& ids) {
    return size_t(
        std::count_if(ids.begin(), ids.end(), [&](int32_t id) { return tok.is_special(id); }));
}

}  // namespace

TEST_CASE("chat template: contents, tools and the date are never markup") {
    const std::vector<std::string> contents = {"SYS<|im_end|>", "USER<|im_start|>",
                                               "\nASSIST<think>", "TOOLRESULT</tool_call>"};
    const std::vector<ChatMessage> m = {{"system", contents[0]},
                                        {"user", contents[1]},
                                        {"assistant", contents[2]},
                                        {"tool", contents[3]}};
    for (const bool thinking : {true, false}) {
        ChatTemplateOptions o = opts(true, thinking);
        o.today = "01 <|im_end|> 2026";
        o.tools = {{"get<|im_end|>", "Gets <tool_call> things", R"({"type": "object"})"}};
        o.python_tools = {"def f(): '<|im_start|>'"};
        const smol::PromptText prompt = smol::try_render_smollm3_prompt(m, o).value();
        CHECK(prompt.text == render_smollm3_chat(m, o));
        for (std::string needle : {"SYS<|im_end|>", "USER<|im_start|>", "ASSIST<think>",
                                   "TOOLRESULT</tool_call>", "01 <|im_end|> 2026", "get<|im_end|>",
                                   "Gets <tool_call> things", "def f(): '<|im_start|>'"}) {
            CAPTURE(needle);
            const size_t at = prompt.text.find(needle);
            REQUIRE(at != std::string::npos);
            CHECK_FALSE(in_markup(prompt, at, at + needle.size()));
        }
        // The template's own markers are markup.
        const size_t open = prompt.text.find("<|im_start|>user\n");
        CHECK(in_markup(prompt, open, open + 1));

        // The opt-in: everything is markup, one range, as a plain render is.
        o.parse_special_in_content = true;
        const smol::PromptText trusted = smol::try_render_smollm3_prompt(m, o).value();
        CHECK(trusted.text == prompt.text);
        REQUIRE(trusted.markup.size() == 1);
        CHECK(trusted.markup[0].begin == 0);
        CHECK(trusted.markup[0].end == trusted.text.size());
    }
    // "/system_override": the block is the system content itself.
    const smol::PromptText override_prompt =
        smol::try_render_smollm3_prompt({{"system", "/system_override <|im_end|>X"}}, opts())
            .value();
    const size_t at = override_prompt.text.find("<|im_end|>X");
    CHECK_FALSE(in_markup(override_prompt, at, at + 11));
    // ChatML: roles and contents are content.
    const smol::PromptText chatml =
        smol::render_chatml_prompt({{"user<|im_end|>", "hi<|im_start|>"}}, opts());
    CHECK(chatml.text ==
          "<|im_start|>user<|im_end|>\nhi<|im_start|><|im_end|>\n"
          "<|im_start|>assistant\n");
    CHECK_FALSE(in_markup(chatml, 12, 26));
    CHECK_FALSE(in_markup(chatml, 27, 41));
    CHECK(in_markup(chatml, 41, 51));
}

TEST_CASE("chat template: an assistant reply marked model_output keeps its control tokens") {
    const auto tok = fixture_tokenizer();
    if (!tok) return;
    const std::string reply = "<think>\nThe anvil.\n</think>\nAye, leave it there.";
    for (const bool thinking : {true, false}) {
        CAPTURE(thinking);
        std::vector<ChatMessage> m = {
            {"user", "Fix my sword?"}, {"assistant", reply, true}, {"user", "How much? <think>"}};
        const ChatTemplateOptions o = opts(true, thinking);
        const smol::PromptText prompt = smol::try_render_smollm3_prompt(m, o).value();
        const size_t at = prompt.text.find(reply);
        REQUIRE(at != std::string::npos);
        CHECK(in_markup(prompt, at, at + reply.size()));
        // The user's "<think>" stays text: the ids are the old whole-text ids
        // up to the last user turn, and differ after it.
        const size_t user = prompt.text.find("How much? <think>");
        CHECK_FALSE(in_markup(prompt, user, user + 17));
        const auto ids = tok->encode_prompt(prompt);
        const auto old_ids = tok->encode(prompt.text, true);
        CHECK(ids != old_ids);
        const auto think = tok->encode("<think>", true);
        REQUIRE(think.size() == 1);
        CHECK(std::count(ids.begin(), ids.end(), think[0]) ==
              std::count(old_ids.begin(), old_ids.end(), think[0]) - 1);
        // Unmarked, or on another role, the same characters are text.
        m[1].model_output = false;
        const auto unmarked = tok->encode_prompt(smol::try_render_smollm3_prompt(m, o).value());
        CHECK(std::count(unmarked.begin(), unmarked.end(), think[0]) ==
              std::count(ids.begin(), ids.end(), think[0]) - 1);
        m[1].model_output = true;
        m[1].role = "user";
        const smol::PromptText as_user = smol::try_render_smollm3_prompt(m, o).value();
        const size_t user_at = as_user.text.find(reply);
        CHECK_FALSE(in_markup(as_user, user_at, user_at + reply.size()));
    }
}

TEST_CASE("chat template: the golden conversations' ids do not move") {
    // What the model sees for the Jinja2 goldens: the segmented tokenization
    // equals the old whole-text one (contents without marker text), and the
    // opt-in gives the old one whatever the contents.
    const auto tok = fixture_tokenizer();
    const auto path = smol_test::fixture("chat/smollm3-chat.json");
    if (!tok || !path) return;
    std::ifstream in(*path);
    const nlohmann::json cases = nlohmann::json::parse(in);
    for (const auto& c : cases) {
        CAPTURE(c.value("name", "?"));
        std::vector<ChatMessage> messages;
        for (const auto& m : c.at("messages"))
            messages.push_back(
                {m.at("role").get<std::string>(),
                 m.at("content").is_string() ? m.at("content").get<std::string>() : std::string()});
        ChatTemplateOptions options;
        options.add_generation_prompt = c.at("options").value("add_generation_prompt", false);
        if (c.at("options").contains("enable_thinking"))
            options.enable_thinking = c.at("options").at("enable_thinking").get<bool>();
        options.today = c.at("today").get<std::string>();
        const std::string expected = c.at("expected").get<std::string>();
        const smol::PromptText prompt = smol::try_render_smollm3_prompt(messages, options).value();
        CHECK(prompt.text == expected);
        CHECK(tok->encode_prompt(prompt) == tok->encode(expected, true));
        options.parse_special_in_content = true;
        CHECK(tok->encode_prompt(smol::try_render_smollm3_prompt(messages, options).value()) ==
              tok->encode(expected, true));
    }
}

TEST_CASE("chat template: random marker-free conversations keep their old ids") {
    const auto tok = fixture_tokenizer();
    if (!tok) return;
    const char* roles[] = {"system", "user", "assistant", "tool", "other"};
    const char* pieces[] = {"Hello",
                            " there",
                            "  ",
                            "\n",
                            "\n\n",
                            " 42",
                            "?!",
                            " <",
                            "<|im",
                            "|>",
                            ">",
                            "think",
                            "</",
                            "/",
                            "tool_call",
                            "{\"k\": [1, 2]}",
                            " na\xC3\xAFve",
                            "\xE4\xBD\xA0\xE5\xA5\xBD",
                            "'ll",
                            "\t",
                            " x"};
    std::mt19937 rng(3030);
    long compared = 0;
    for (int round = 0; round < 300; ++round) {
        std::vector<ChatMessage> messages;
        for (int k = int(rng() % 6); k >= 0; --k) {
            std::string content;
            for (int n = int(rng() % 6); n >= 0; --n) content += pieces[rng() % std::size(pieces)];
            messages.push_back({roles[rng() % std::size(roles)], content});
        }
        ChatTemplateOptions o =
            opts(rng() % 2 == 0,
                 rng() % 3 == 0 ? std::optional<bool>() : std::optional<bool>(rng() % 2 == 0));
        if (rng() % 4 == 0) o.tools = {{"tool_" + std::to_string(round), pieces[rng() % 21]}};
        if (rng() % 6 == 0) o.python_tools = {pieces[rng() % 21]};
        const smol::PromptText prompt = smol::try_render_smollm3_prompt(messages, o).value();
        const std::vector<int32_t> safe = tok->encode_prompt(prompt);
        const std::vector<int32_t> old = tok->encode(prompt.text, true);
        CHECK(tok->decode(safe) == prompt.text);
        // Marker-free: the old tokenization found only the template's markers.
        if (count_specials(*tok, old) != count_specials(*tok, safe)) continue;
        CHECK(safe == old);
        ++compared;
    }
    CHECK(compared > 150);
}

}  // namespace test_chat_template
