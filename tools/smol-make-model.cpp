// smol-make-model: writes a SmolLM3-format GGUF with random weights (the layout,
// metadata and quantization recipe of real files). See tools/README.md.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "model_maker.hpp"

namespace {

void usage(std::FILE* out) {
    std::fprintf(
        out,
        "usage: smol-make-model --out FILE [--preset 3b|demo|tiny]\n"
        "         [--hidden N --layers N --heads N --kv-heads N --head-dim N --ffn N\n"
        "          --vocab N --ctx N] [--recipe q4_k_m|q5_k_m|q8_0|f32] [--untied]\n"
        "         [--tokenizer-from FILE.gguf | --byte-vocab] [--seed N] [--threads N]\n"
        "         [--effort auto|standard|fast] [--name TEXT] [--quiet | --progress]\n"
        "Presets: 3b = SmolLM3-3B shape (2048 x 36, 16/4 heads, ffn 11008, vocab 128256);\n"
        "demo = 256 x 4, 4/1 heads, ffn 768, ctx 4096; tiny = 256 x 2, 4/2 heads, ffn 512.\n"
        "Without --tokenizer-from a small byte-level vocabulary is written (padded with\n"
        "reserved tokens when --vocab or the preset asks for more).\n");
}

uint32_t parse_u32(const std::string& flag, const char* text) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text, &end, 10);
    if (!end || *end != 0 || v > 0xffffffffull)
        throw std::invalid_argument(flag + " expects a non-negative integer, got '" + text + "'");
    return uint32_t(v);
}

}  // namespace

int main(int argc, char** argv) {
    try {
        smol_tools::MakeOptions options;
        options.shape = smol_tools::preset_shape("demo");
        std::string out_path;
        bool progress = isatty(fileno(stderr)) != 0;  // per-tensor progress only on a terminal
        bool quiet = false;
        // First pass: the preset, so explicit dimensions override it wherever they appear.
        for (int i = 1; i + 1 < argc; ++i)
            if (std::string(argv[i]) == "--preset")
                options.shape = smol_tools::preset_shape(argv[i + 1]);
        for (int i = 1; i < argc; ++i) {
            const std::string flag = argv[i];
            auto value = [&]() -> const char* {
                if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
                return argv[++i];
            };
            if (flag == "--help" || flag == "-h") {
                usage(stdout);
                return 0;
            } else if (flag == "--out")
                out_path = value();
            else if (flag == "--preset")
                value();
            else if (flag == "--hidden")
                options.shape.hidden = parse_u32(flag, value());
            else if (flag == "--layers")
                options.shape.layers = parse_u32(flag, value());
            else if (flag == "--heads")
                options.shape.heads = parse_u32(flag, value());
            else if (flag == "--kv-heads")
                options.shape.kv_heads = parse_u32(flag, value());
            else if (flag == "--head-dim")
                options.shape.head_dim = parse_u32(flag, value());
            else if (flag == "--ffn")
                options.shape.ffn = parse_u32(flag, value());
            else if (flag == "--vocab")
                options.shape.vocab = parse_u32(flag, value());
            else if (flag == "--ctx")
                options.shape.ctx = parse_u32(flag, value());
            else if (flag == "--recipe")
                options.recipe = smol_tools::parse_recipe(value());
            else if (flag == "--untied")
                options.untied = true;
            else if (flag == "--tokenizer-from")
                options.tokenizer_from = value();
            else if (flag == "--byte-vocab")
                options.tokenizer_from.clear();
            else if (flag == "--seed")
                options.seed = parse_u32(flag, value());
            else if (flag == "--threads")
                options.threads = std::max(1u, parse_u32(flag, value()));
            else if (flag == "--name")
                options.name = value();
            else if (flag == "--quiet") {
                quiet = true;
                progress = false;
            } else if (flag == "--progress")
                progress = true;
            else if (flag == "--effort") {
                const std::string e = value();
                if (e == "auto")
                    options.effort = smol_tools::MakeOptions::Effort::automatic;
                else if (e == "standard")
                    options.effort = smol_tools::MakeOptions::Effort::standard;
                else if (e == "fast")
                    options.effort = smol_tools::MakeOptions::Effort::fast;
                else
                    throw std::invalid_argument("--effort expects auto, standard or fast");
            } else {
                throw std::invalid_argument("unknown option '" + flag + "'");
            }
        }
        if (out_path.empty()) throw std::invalid_argument("--out FILE is required");

        const auto start = std::chrono::steady_clock::now();
        smol::gguf::Writer writer;
        smol_tools::make_model(options, writer,
                               [&](size_t index, size_t count, const smol_tools::TensorPlan& t) {
                                   if (!progress) return;
                                   std::fprintf(stderr, "\r[%zu/%zu] %-28s %-5s", index + 1, count,
                                                t.name.c_str(), smol::type_name(t.type).c_str());
                                   std::fflush(stderr);
                               });
        writer.write_file(out_path);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (progress) std::fprintf(stderr, "\n");
        if (!quiet)
            std::fprintf(stderr, "smol-make-model: wrote %s in %.1f s\n", out_path.c_str(),
                         seconds);
        return 0;
    } catch (const std::invalid_argument& e) {
        std::fprintf(stderr, "smol-make-model: %s\n", e.what());
        usage(stderr);
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "smol-make-model: %s\n", e.what());
        return 1;
    }
}
