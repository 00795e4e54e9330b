// smol-generate: one-shot text generation (or one chat turn) from a GGUF
// model, streaming the text to stdout.
//
//   smol-generate [-m MODEL] [-p PROMPT | -f FILE] [-n N] [--temp T] [--top-k K]
//                 [--top-p P] [--min-p P] [--repeat-penalty R] [--seed S] [-t THREADS]
//                 [-c CTX] [--stop S]... [--chat] [--system S] [--no-think]
//                 [--messages FILE.json] [--today DATE] [--print-prompt]
//                 [--no-generation-prompt] [--json] [--logits-out FILE]
//
// Without -m it runs the demo model the build makes (random weights: its text
// is gibberish; it is there so the first command works).
// --json prints one JSON object on the last line: prompt_ids, generated_ids,
// text, stop_reason, n_prompt, n_generated, prefill_tokens_per_s,
// decode_tokens_per_s. --logits-out writes the logits of the last prompt
// position (vocab_size little-endian f32). --print-prompt prints the rendered
// chat prompt exactly (no newline added) and exits.
#include <smol/smol.hpp>
#include <smol/generator.hpp>

#include "demo_model.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#if defined(__linux__)
#include <unistd.h>
#endif

namespace {

void usage() {
    std::fprintf(stderr,
                 "usage: smol-generate [-m MODEL] [-p PROMPT | -f FILE] [-n N] [--temp T] [--top-k K]\n"
                 "                     [--top-p P] [--min-p P] [--repeat-penalty R] [--seed S]\n"
                 "                     [-t THREADS] [-c CTX] [--stop S]... [--chat] [--system S]\n"
                 "                     [--no-think] [--messages FILE.json] [--today DATE]\n"
                 "                     [--print-prompt] [--no-generation-prompt] [--json]\n"
                 "                     [--logits-out FILE] [--cpu LEVEL] [--device DEV] [--version]\n"
                 "  --cpu LEVEL  kernel level: auto (default: SMOL_CPU, else the best this CPU runs),\n"
                 "               scalar, avx2, avxvnni, avx512, neon, dotprod\n"
                 "  --device DEV where to run: cpu (default), cuda (a build with smol::cuda and a GPU),\n"
                 "               auto (cuda when possible, else cpu)\n");
}

std::string read_text_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open '" + path + "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

int main(int argc, char** argv) {
    std::string model_path, prompt, prompt_file, system_prompt, messages_file, today, logits_out;
    bool have_prompt = false, chat_mode = false, no_think = false, json = false, print_prompt = false;
    bool generation_prompt = true;
    int n_threads = 0;
    smol::CpuLevel cpu = smol::CpuLevel::automatic;
    smol::Device device = smol::Device::cpu;
    size_t n_ctx = smol::KVCache::kDefaultSize;  // -c: default min(4096, model max)
    smol::GenerateParams params;
    params.max_tokens = 128;

    try {
        for (int i = 1; i < argc; ++i) {
            const std::string arg = argv[i];
            auto value = [&]() -> std::string {
                if (i + 1 >= argc) throw std::invalid_argument("missing value for " + arg);
                return argv[++i];
            };
            if (arg == "-m" || arg == "--model") model_path = value();
            else if (arg == "-p" || arg == "--prompt") prompt = value(), have_prompt = true;
            else if (arg == "-f" || arg == "--file") prompt_file = value();
            else if (arg == "-n" || arg == "--n-predict") params.max_tokens = std::stoi(value());
            else if (arg == "--temp") params.temperature = std::stof(value());
            else if (arg == "--top-k") params.top_k = std::stoi(value());
            else if (arg == "--top-p") params.top_p = std::stof(value());
            else if (arg == "--min-p") params.min_p = std::stof(value());
            else if (arg == "--repeat-penalty") params.repeat_penalty = std::stof(value());
            else if (arg == "--seed") params.seed = std::stoull(value());
            else if (arg == "-t" || arg == "--threads") n_threads = std::stoi(value());
            else if (arg == "--cpu") {
                const std::string name = value();
                const auto level = smol::parse_cpu_level(name);
                if (!level) throw std::invalid_argument("--cpu: unknown kernel level '" + name + "'");
                cpu = *level;
            }
            else if (arg == "--device") {
                const std::string name = value();
                const auto parsed = smol::parse_device(name);
                if (!parsed) throw std::invalid_argument("--device: expected cpu, cuda or auto, not '" + name + "'");
                device = *parsed;
            }
            else if (arg == "-c" || arg == "--ctx") n_ctx = size_t(std::stoul(value()));
            else if (arg == "--stop") params.stop.push_back(value());
            else if (arg == "--chat") chat_mode = true;
            else if (arg == "--system") system_prompt = value(), chat_mode = true;
            else if (arg == "--no-think") no_think = true;
            else if (arg == "--json") json = true;
            else if (arg == "--logits-out") logits_out = value();
            else if (arg == "--messages") messages_file = value(), chat_mode = true;
            else if (arg == "--today") today = value();
            else if (arg == "--print-prompt") print_prompt = true;
            else if (arg == "--no-generation-prompt") generation_prompt = false;
            else if (arg == "--version") {
                std::printf("%s\n", smol::build_info_string().c_str());
                return 0;
            } else if (arg == "-h" || arg == "--help") {
                usage();
                return 0;
            } else {
                std::fprintf(stderr, "smol-generate: unknown argument '%s'\n", arg.c_str());
                usage();
                return 2;
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "smol-generate: %s\n", e.what());
        usage();
        return 2;
    }

    try {
        if (!prompt_file.empty()) {
            prompt = read_text_file(prompt_file);
            have_prompt = true;
        }
        std::vector<smol::ChatMessage> messages;
        if (!messages_file.empty()) {
            const nlohmann::json doc = nlohmann::json::parse(read_text_file(messages_file));
            if (!doc.is_array()) throw std::invalid_argument("--messages: expected a JSON array of {role, content}");
            for (const auto& m : doc)
                messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
        } else if (chat_mode) {
            if (!system_prompt.empty()) messages.push_back({"system", system_prompt});
            if (have_prompt) messages.push_back({"user", prompt});
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

        if (print_prompt) {
            const std::string rendered = gen.render_chat(messages, params.chat);
            std::fwrite(rendered.data(), 1, rendered.size(), stdout);
            return 0;
        }

        if (!logits_out.empty()) {
            // A prefill-only run leaves the last prompt position's logits untouched.
            smol::GenerateParams prefill_only = params;
            prefill_only.max_tokens = 0;
            if (chat_mode) gen.chat(messages, prefill_only);
            else gen.generate(prompt, prefill_only);
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
        const smol::GenerateResult r = chat_mode ? gen.chat(messages, params, stream)
                                                 : gen.generate(prompt, params, stream);
        std::printf("\n");
        std::fflush(stdout);  // the text's last line ends before the stats line (stderr) starts
        std::fprintf(stderr,
                     "smol-generate: stop: %s | kernels %s | backend %s | prompt %zu tokens (%zu reused), %.1f tok/s | "
                     "generated %zu tokens, %.1f tok/s\n",
                     smol::to_string(r.stop_reason), smol::cpu_level_name(model->cpu_level()),
                     model->backend().name().c_str(), r.n_prompt_tokens,
                     r.n_reused_tokens,
                     r.prefill_tokens_per_s(), r.tokens.size(), r.decode_tokens_per_s());
        if (json) {
            const std::vector<int32_t>& history = gen.history();
            const std::vector<int32_t> prompt_ids(history.begin(), history.begin() + long(r.n_prompt_tokens));
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
            std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        }
        return 0;
    } catch (const smol::Error& e) {
        std::fprintf(stderr, "smol-generate: error (%s): %s\n", smol::to_string(e.kind()), e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "smol-generate: %s\n", e.what());
        return 1;
    }
}
