// smol-chat: an interactive, streaming, multi-turn chat on the terminal. Each
// line on stdin is a user message; the reply streams to stdout. Each turn
// re-sends the whole conversation and the generator reuses the cached prefix,
// so only the new message is prefilled.
//
// Options: smol-chat --help. Commands: /exit (or end of input), /reset (forget
// the conversation).
#include <smol/smol.hpp>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "common/cli.hpp"
#include "common/sampling_options.hpp"
#include "common/smol_options.hpp"

int main(int argc, char** argv) {
    std::string model_path, system_prompt;
    int n_threads = 0;
    smol::Device device = smol::Device::cpu;
    size_t n_ctx = smol::KVCache::kDefaultSize;  // -c: default min(4096, model max)
    smol::KVType kv_type = smol::KVType::f16;
    bool shift = true;
    smol::GenerateParams params;
    params.max_tokens = 512;
    params.temperature = 0.7f;

    smol_cli::Parser cli(
        "smol-chat",
        "A streaming multi-turn chat on the terminal: each line on stdin is a user message.");
    cli.option("-m, --model", model_path, "MODEL",
               "GGUF file (default: the demo model the build makes)");
    cli.option("--system", system_prompt, "S", "system message");
    cli.flag(
        "--no-think", [&] { params.chat.enable_thinking = false; },
        "answer without the reasoning part (<think>)");
    cli.option("-n", params.max_tokens, "N", "most tokens per reply (default 512)");
    cli.option("--temp", params.temperature, "T", "temperature (default 0.7; <= 0: greedy)");
    cli.option("--seed", params.seed, "S", "sampling seed (default 0)");
    smol_examples::add_dry_xtc_options(cli, params);
    cli.option("-t, --threads", n_threads, "N", "threads (default: physical cores)").at_least(0);
    cli.option("-c, --ctx", n_ctx, "CTX",
               "KV cache positions (default: min(4096, the model's context))");
    smol_examples::add_kv_type_option(cli, kv_type);
    cli.flag(
        "--no-shift", [&] { shift = false; },
        "stop at a full context instead of leaving out the oldest turns\n"
        "(ContextPolicy::stop; the system message is always kept with shift)");
    cli.option("--today", params.chat.today, "DATE", "the date the chat template shows");
    smol_examples::add_device_option(cli, device);
    cli.epilog("Commands: /reset forgets the conversation; /exit (or the end of input) quits.");
    if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;

    try {
        if (model_path.empty()) {
            model_path = smol_examples::demo_model_path();
            std::fprintf(
                stderr,
                "smol-chat: no -m given, using the demo model %s (RANDOM weights: its replies "
                "are gibberish)\n",
                model_path.c_str());
        }
        smol::LoadOptions load_options;
        load_options.n_threads = n_threads;
        load_options.device = device;
        smol_examples::log_device_choice(load_options);
        auto model = smol::Model::load(model_path, load_options);
        smol::GeneratorOptions options;
        options.n_ctx = n_ctx;
        options.kv_type = kv_type;
        options.context_policy = shift ? smol::ContextPolicy::shift : smol::ContextPolicy::stop;
        // Warnings, and the one line a shift writes; errors are printed once,
        // where they are caught below.
        options.log = [](int level, const std::string& message) {
            if (level == smol::log_warning ||
                (level == smol::log_info && message.rfind("context shift", 0) == 0))
                std::fprintf(stderr, "\nsmol: %s\n", message.c_str());
        };
        smol::Generator gen(model, options);

        std::vector<smol::ChatMessage> conversation;
        if (!system_prompt.empty()) conversation.push_back({"system", system_prompt});
        const size_t base = conversation.size();
        std::fprintf(stderr, "smol-chat: %s; type a message, /reset or /exit\n",
                     smol::build_info_string().c_str());
        std::string line;
        while (true) {
            std::fprintf(stdout, "> ");
            std::fflush(stdout);
            if (!std::getline(std::cin, line) || line == "/exit") break;
            if (line == "/reset") {
                conversation.resize(base);
                gen.reset();
                continue;
            }
            if (line.empty()) continue;
            // A typed line is a content: chat() reads it as text, so typed
            // markers never become control tokens (ChatOptions::
            // parse_special_in_content stays off).
            conversation.push_back({"user", line});
            smol::GenerateResult r;
            try {
                r = gen.chat(conversation, params, [](std::string_view piece) {
                    std::fwrite(piece.data(), 1, piece.size(), stdout);
                    std::fflush(stdout);
                    return true;
                });
            } catch (const smol::Error& e) {
                std::fprintf(stderr, "\nsmol-chat: %s\n", e.what());
                conversation.pop_back();
                if (e.kind() == smol::ErrorKind::out_of_range)
                    std::fprintf(stderr, "smol-chat: /reset to start over%s\n",
                                 shift ? "" : ", or run without --no-shift");
                continue;
            }
            std::printf("\n");
            std::fprintf(stderr, "[%s | %zu prompt tokens, %zu reused | %zu tokens, %.1f tok/s]\n",
                         smol::to_string(r.stop_reason), r.n_prompt_tokens, r.n_reused_tokens,
                         r.tokens.size(), r.decode_tokens_per_s());
            // The model's own reply: its <think> / <tool_call> tokens stay tokens
            // next turn, so the cached reply is reused (ChatMessage::model_output).
            conversation.push_back({"assistant", r.text, true});
        }
        return 0;
    } catch (const smol::Error& e) {
        std::fprintf(stderr, "smol-chat: error (%s): %s\n", smol::to_string(e.kind()), e.what());
        return 1;
    }
}
