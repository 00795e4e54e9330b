// smol-chat: an interactive, streaming, multi-turn chat on the terminal. Each
// line on stdin is a user message; the reply streams to stdout. Each turn
// re-sends the whole conversation and the generator reuses the cached prefix,
// so only the new message is prefilled.
//
//   smol-chat [-m MODEL] [--system S] [--no-think] [-n N] [--temp T] [--seed S]
//             [-t THREADS] [-c CTX] [--today DATE]
//   commands: /exit (or end of input), /reset (forget the conversation)
#include <smol/smol.hpp>
#include <smol/generator.hpp>

#include "demo_model.hpp"

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    std::string model_path, system_prompt;
    int n_threads = 0;
    smol::Device device = smol::Device::cpu;
    size_t n_ctx = smol::KVCache::kDefaultSize;  // -c: default min(4096, model max)
    smol::GenerateParams params;
    params.max_tokens = 512;
    params.temperature = 0.7f;
    try {
        for (int i = 1; i < argc; ++i) {
            const std::string arg = argv[i];
            auto value = [&]() -> std::string {
                if (i + 1 >= argc) throw std::invalid_argument("missing value for " + arg);
                return argv[++i];
            };
            if (arg == "-m" || arg == "--model") model_path = value();
            else if (arg == "--system") system_prompt = value();
            else if (arg == "--no-think") params.chat.enable_thinking = false;
            else if (arg == "-n") params.max_tokens = std::stoi(value());
            else if (arg == "--temp") params.temperature = std::stof(value());
            else if (arg == "--seed") params.seed = std::stoull(value());
            else if (arg == "-t" || arg == "--threads") n_threads = std::stoi(value());
            else if (arg == "-c" || arg == "--ctx") n_ctx = size_t(std::stoul(value()));
            else if (arg == "--today") params.chat.today = value();
            else if (arg == "--device") {
                const std::string name = value();
                const auto parsed = smol::parse_device(name);
                if (!parsed) throw std::invalid_argument("--device: expected cpu, cuda or auto, not '" + name + "'");
                device = *parsed;
            } else {
                std::fprintf(stderr,
                             "usage: smol-chat [-m MODEL] [--system S] [--no-think] [-n N] [--temp T]\n"
                             "                 [--seed S] [-t THREADS] [-c CTX] [--today DATE]\n"
                             "                 [--device cpu|cuda|auto]\n");
                return arg == "-h" || arg == "--help" ? 0 : 2;
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "smol-chat: %s\n", e.what());
        return 2;
    }

    try {
        if (model_path.empty()) {
            model_path = smol_examples::demo_model_path();
            std::fprintf(stderr,
                         "smol-chat: no -m given, using the demo model %s (RANDOM weights: its replies "
                         "are gibberish)\n",
                         model_path.c_str());
        }
        smol::LoadOptions load_options;
        load_options.n_threads = n_threads;
        load_options.device = device;
        if (device != smol::Device::cpu)
            load_options.log = [](int, const std::string& message) {  // which device, and why
                if (message.rfind("smol: device", 0) == 0) std::fprintf(stderr, "%s\n", message.c_str());
            };
        auto model = smol::Model::load(model_path, load_options);
        smol::GeneratorOptions options;
        options.n_ctx = n_ctx;
        options.log = [](int level, const std::string& message) {
            if (level >= smol::log_warning) std::fprintf(stderr, "smol: %s\n", message.c_str());
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
                if (e.kind() == smol::ErrorKind::out_of_range) {
                    std::fprintf(stderr, "smol-chat: the conversation no longer fits: /reset\n");
                }
                continue;
            }
            std::printf("\n");
            std::fprintf(stderr, "[%s | %zu prompt tokens, %zu reused | %zu tokens, %.1f tok/s]\n",
                         smol::to_string(r.stop_reason), r.n_prompt_tokens, r.n_reused_tokens,
                         r.tokens.size(), r.decode_tokens_per_s());
            conversation.push_back({"assistant", r.text});
        }
        return 0;
    } catch (const smol::Error& e) {
        std::fprintf(stderr, "smol-chat: error (%s): %s\n", smol::to_string(e.kind()), e.what());
        return 1;
    }
}
