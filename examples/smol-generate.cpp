// smol-generate: one-shot text generation (or one chat turn) from a GGUF
// model, streaming the text to stdout. `smol-generate --help` lists the options.
//
// Without -m it runs the demo model the build makes (random weights: its text
// is gibberish; it is there so the first command works).
// --json prints one JSON object on the last line: prompt_ids, generated_ids,
// text, stop_reason, n_prompt, n_generated, prefill_tokens_per_s,
// decode_tokens_per_s. --logits-out writes the logits of the last prompt
// position (vocab_size little-endian f32). --print-prompt prints the rendered
// chat prompt exactly (no newline added) and exits. Every other output ends
// with a newline, and the statistics are one line of their own on stderr.
//
// Structured output: --grammar (GBNF) or --json-schema constrains the whole
// text; --tools declares tools (a chat turn), and --constrain-tools makes each
// <tool_call> follow one of their argument schemas. The parsed calls follow
// the statistics on stderr, one "smol-generate: tool call ..." line each (and
// as "tool_calls" in --json).
#include <smol/smol.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/sampling_options.hpp"
#include "common/smol_options.hpp"

namespace {

std::string read_text_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open '" + path + "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The callback of an option naming a file: a file that cannot be read or used
// is a usage error (exit 2), found before the model loads.
std::function<void(const std::string&)> file_option(
    std::function<void(const std::string& text)> use) {
    return [use = std::move(use)](const std::string& path) {
        const std::string text = read_text_file(path);  // "cannot open '...'"
        try {
            use(text);
        } catch (const std::exception& e) {
            throw smol_cli::BadValue("'" + path + "': " + e.what());
        }
    };
}

template <class T>
const T& value_or_throw(const smol::Expected<T>& result) {
    if (!result) throw std::invalid_argument(result.error().message);
    return result.value();
}

// --tools: a JSON array of {"name", "description", "parameters"}, or of the
// OpenAI / transformers form {"type": "function", "function": {...}}.
std::vector<smol::ToolDefinition> parse_tools(const std::string& text) {
    // ordered_json: the model sees, and a constrained call writes, the
    // properties in the file's order.
    const auto doc = nlohmann::ordered_json::parse(text);
    if (!doc.is_array()) throw std::invalid_argument("expected a JSON array of tools");
    std::vector<smol::ToolDefinition> tools;
    for (const auto& entry : doc) {
        const auto& f = entry.is_object() && entry.contains("function") ? entry["function"] : entry;
        if (!f.is_object() || !f.contains("name"))
            throw std::invalid_argument("each tool needs a \"name\": " + entry.dump());
        smol::ToolDefinition tool;
        tool.name = f["name"].get<std::string>();
        tool.description = f.value("description", "");
        if (f.contains("parameters")) tool.parameters = f["parameters"].dump();
        value_or_throw(smol::try_render_tool(tool));
        tools.push_back(std::move(tool));
    }
    return tools;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model_path, prompt_file, today, logits_out;
    std::optional<std::string> prompt, system_prompt, messages_file;
    bool chat_mode = false, no_think = false, json = false, print_prompt = false,
         show_version = false;
    bool generation_prompt = true;
    int n_threads = 0;
    smol::CpuLevel cpu = smol::CpuLevel::automatic;
    smol::Device device = smol::Device::cpu;
    size_t n_ctx = smol::KVCache::kDefaultSize;  // -c: default min(4096, model max)
    smol::KVType kv_type = smol::KVType::f16;
    smol::GenerateParams params;
    params.max_tokens = 128;

    smol_cli::Parser cli(
        "smol-generate",
        "Generates text (or one chat turn) from a GGUF model, streamed to stdout; the "
        "statistics\nfollow on stderr, on a line of their own.");
    cli.option("-m, --model", model_path, "MODEL",
               "GGUF file (default: the demo model the build makes)");
    cli.option("-p, --prompt", prompt, "PROMPT",
               "the prompt (default: \"Once upon a time\"); with --chat, the user message");
    cli.option("-f, --file", prompt_file, "FILE", "read the prompt from FILE");
    cli.option("-n, --n-predict", params.max_tokens, "N",
               "tokens to generate (default 128; < 0: until the end)");
    cli.option("--temp", params.temperature, "T", "temperature (default 0.8; <= 0: greedy)");
    cli.option("--top-k", params.top_k, "K",
               "keep the K most likely tokens (default 40; <= 0: all)");
    cli.option("--top-p", params.top_p, "P",
               "keep the most likely tokens up to probability P (default 0.95; >= 1: off)");
    cli.option("--min-p", params.min_p, "P",
               "drop tokens below P x the best one's probability (default 0.05)");
    cli.option("--repeat-penalty", params.repeat_penalty, "R",
               "penalty for the last 64 tokens (default 1: none)");
    cli.option("--seed", params.seed, "S", "sampling seed (default 0)");
    smol_examples::add_dry_xtc_options(cli, params);
    cli.option("-t, --threads", n_threads, "N", "threads (default: physical cores)").at_least(0);
    smol_examples::add_cpu_option(cli, cpu);
    smol_examples::add_device_option(cli, device);
    cli.option("-c, --ctx", n_ctx, "CTX",
               "KV cache positions (default: min(4096, the model's context))");
    smol_examples::add_kv_type_option(cli, kv_type);
    cli.option("--stop", params.stop, "S", "stop when the text contains S");
    cli.flag("--chat", chat_mode,
             "chat: the prompt is a user message in the model's chat template");
    cli.option("--system", system_prompt, "S", "system message (implies --chat)");
    cli.option("--messages", messages_file, "FILE.json",
               "the conversation, a JSON array of {role, content} (implies --chat)");
    cli.flag("--no-think", no_think, "chat without the reasoning part (<think>)");
    cli.option("--today", today, "DATE", "the date the chat template shows");
    cli.flag("--print-prompt", print_prompt,
             "print the rendered chat prompt exactly (no newline added) and exit");
    cli.flag("--no-generation-prompt", generation_prompt,
             "render the chat without the assistant's opening", false);
    cli.flag("--json", json,
             "also print one JSON line: prompt_ids, generated_ids, text, stop_reason,\n"
             "n_prompt, n_generated, prefill_tokens_per_s, decode_tokens_per_s, ...");
    cli.option("--grammar", file_option([&](const std::string& text) {
                   value_or_throw(smol::Grammar::try_parse(text));
                   params.grammar = text;
               }),
               "FILE", "constrain the text to a GBNF grammar (chat: implies --no-think)");
    cli.option("--json-schema", file_option([&](const std::string& text) {
                   // The generator's own path: schema -> GBNF -> compiled grammar.
                   value_or_throw(smol::Grammar::try_parse(value_or_throw(
                       smol::try_json_schema_to_grammar(text, params.json_schema_options))));
                   params.json_schema = text;
               }),
               "FILE",
               "constrain the text to JSON valid under a JSON Schema (chat: implies --no-think)");
    cli.option("--tools",
               file_option([&](const std::string& text) { params.chat.tools = parse_tools(text); }),
               "FILE",
               "tools the model may call: a JSON array of {name, description, parameters}\n"
               "or {type: function, function: {...}} (implies --chat); the parsed calls\n"
               "follow the statistics on stderr");
    cli.option(
        "--lookup",
        [&params](const std::string& name) {
            const auto mode = smol::parse_lookup_mode(name);
            if (!mode) throw smol_cli::BadValue("expected auto, on or off, not '" + name + "'");
            params.lookup.mode = *mode;
        },
        "MODE",
        "lookup decoding (drafts from the context, the same tokens): auto (default: on\n"
        "where it never loses), on, off");
    cli.flag("--constrain-tools", params.constrain_tool_calls,
             "make each <tool_call> follow a --tools schema");
    cli.option("--logits-out", logits_out, "FILE",
               "write the last prompt position's logits (vocab_size f32, little-endian)");
    cli.flag("--version", show_version, "print the build information and exit");
    if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
    if (show_version) {
        std::printf("%s\n", smol::build_info_string().c_str());
        return 0;
    }
    const bool have_prompt = prompt.has_value() || !prompt_file.empty();
    if (system_prompt || messages_file || !params.chat.tools.empty()) chat_mode = true;
    const char* conflict = nullptr;
    if (!params.grammar.empty() && !params.json_schema.empty())
        conflict = "--grammar and --json-schema: use one";
    else if (params.constrain_tool_calls && params.chat.tools.empty())
        conflict = "--constrain-tools needs --tools";
    else if (params.constrain_tool_calls &&
             (!params.grammar.empty() || !params.json_schema.empty()))
        conflict =
            "--constrain-tools and --grammar / --json-schema constrain the same text: use one";
    if (conflict) {
        std::fprintf(stderr, "smol-generate: %s\n%s\nRun 'smol-generate --help' for the options.\n",
                     conflict, cli.usage_line().c_str());
        return 2;
    }
    // The constrained text starts at the first token, where a thinking model
    // would open <think>.
    if (chat_mode && (!params.grammar.empty() || !params.json_schema.empty())) no_think = true;

    try {
        if (!prompt_file.empty()) prompt = read_text_file(prompt_file);
        std::vector<smol::ChatMessage> messages;
        if (messages_file) {
            const nlohmann::json doc = nlohmann::json::parse(read_text_file(*messages_file));
            if (!doc.is_array())
                throw std::invalid_argument("--messages: expected a JSON array of {role, content}");
            for (const auto& m : doc)
                messages.push_back(
                    {m.at("role").get<std::string>(), m.at("content").get<std::string>()});
        } else if (chat_mode) {
            if (system_prompt && !system_prompt->empty())
                messages.push_back({"system", *system_prompt});
            if (have_prompt) messages.push_back({"user", *prompt});
        }
        if (!chat_mode && !have_prompt) prompt = "Once upon a time";
        params.chat.add_generation_prompt = generation_prompt;
        if (no_think) params.chat.enable_thinking = false;
        params.chat.today = today;

        if (model_path.empty()) {
            model_path = smol_examples::demo_model_path();
            std::fprintf(stderr,
                         "smol-generate: no -m given, using the demo model %s\n"
                         "smol-generate: the demo model has RANDOM weights: its text is gibberish. "
                         "Pass -m with a real SmolLM3 GGUF for real text.\n",
                         model_path.c_str());
        }
        smol::LoadOptions load_options;
        load_options.n_threads = n_threads;
        load_options.cpu = cpu;
        load_options.device = device;
        smol_examples::log_device_choice(load_options);
        auto model = smol::Model::load(model_path, load_options);

        smol::GeneratorOptions options;
        options.n_ctx = n_ctx;
        options.kv_type = kv_type;
        options.log = [](int level, const std::string& message) {
            if (level >= smol::log_warning) std::fprintf(stderr, "smol: %s\n", message.c_str());
        };
        smol::Generator gen(model, options);
        if (!params.chat.tools.empty() && gen.chat_format() != smol::ChatFormat::smollm3)
            std::fprintf(stderr,
                         "smol-generate: this model's chat template is plain ChatML, which has no "
                         "place for tools: the model will not see them\n");

        if (print_prompt) {
            const std::string rendered = gen.render_chat(messages, params.chat);
            std::fwrite(rendered.data(), 1, rendered.size(), stdout);
            return 0;
        }

        if (!logits_out.empty()) {
            // A prefill-only run leaves the last prompt position's logits untouched.
            smol::GenerateParams prefill_only = params;
            prefill_only.max_tokens = 0;
            if (chat_mode)
                gen.chat(messages, prefill_only);
            else
                gen.generate(*prompt, prefill_only);
            const std::vector<float>& logits = gen.logits();
            std::FILE* f = std::fopen(logits_out.c_str(), "wb");
            if (!f || std::fwrite(logits.data(), sizeof(float), logits.size(), f) != logits.size())
                throw std::runtime_error("cannot write '" + logits_out + "'");
            std::fclose(f);
        }

        auto stream = [](std::string_view piece) {
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
            return true;
        };
        const smol::GenerateResult r =
            chat_mode ? gen.chat(messages, params, stream) : gen.generate(*prompt, params, stream);
        std::printf("\n");
        std::fflush(stdout);  // the text's last line ends before the stats line (stderr) starts
        std::fprintf(stderr,
                     "smol-generate: stop: %s | kernels %s | backend %s | prompt %zu tokens (%zu "
                     "reused), %.1f tok/s | "
                     "generated %zu tokens, %.1f tok/s\n",
                     smol::to_string(r.stop_reason), smol::cpu_level_name(model->cpu_level()),
                     model->backend().name().c_str(), r.n_prompt_tokens, r.n_reused_tokens,
                     r.prefill_tokens_per_s(), r.tokens.size(), r.decode_tokens_per_s());
        if (!params.chat.tools.empty() && r.tool_calls.empty())
            std::fprintf(stderr, "smol-generate: no tool calls\n");
        for (const smol::ToolCall& call : r.tool_calls) {
            // A name with an error: a well-formed call never closed, which is
            // how --stop "</tool_call>" ends one.
            if (!call.name.empty())
                std::fprintf(stderr, "smol-generate: tool call: %s %s%s%s\n", call.name.c_str(),
                             call.arguments.c_str(), call.error.empty() ? "" : " | ",
                             call.error.c_str());
            else
                std::fprintf(stderr, "smol-generate: malformed tool call (%s): %s\n",
                             call.error.c_str(), call.text.c_str());
        }
        if (json) {
            const std::vector<int32_t>& history = gen.history();
            const std::vector<int32_t> prompt_ids(history.begin(),
                                                  history.begin() + long(r.n_prompt_tokens));
            nlohmann::json out;
            out["prompt_ids"] = prompt_ids;
            out["generated_ids"] = r.tokens;
            out["text"] = r.text;
            out["stop_reason"] = smol::to_string(r.stop_reason);
            out["kernels"] = smol::cpu_level_name(model->cpu_level());
            out["device"] = smol::device_name(model->device());
            out["n_prompt"] = r.n_prompt_tokens;
            out["n_generated"] = r.tokens.size();
            out["prefill_tokens_per_s"] = r.prefill_tokens_per_s();
            out["decode_tokens_per_s"] = r.decode_tokens_per_s();
            if (!params.chat.tools.empty()) {
                out["tool_calls"] = nlohmann::json::array();
                for (const smol::ToolCall& call : r.tool_calls) {
                    nlohmann::json c = {{"name", call.name}, {"text", call.text}};
                    // arguments: the object itself, not its text; absent when malformed.
                    if (!call.arguments.empty()) {
                        auto arguments = nlohmann::json::parse(call.arguments, nullptr, false);
                        if (arguments.is_discarded())
                            c["arguments"] = call.arguments;
                        else
                            c["arguments"] = std::move(arguments);
                    }
                    if (!call.error.empty()) c["error"] = call.error;
                    out["tool_calls"].push_back(std::move(c));
                }
            }
            std::printf("%s\n",
                        out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        }
        return 0;
    } catch (const smol::Error& e) {
        std::fprintf(stderr, "smol-generate: error (%s): %s\n", smol::to_string(e.kind()),
                     e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "smol-generate: %s\n", e.what());
        return 1;
    }
}
