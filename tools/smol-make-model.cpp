// smol-make-model: writes a SmolLM3-format GGUF with random weights (the layout,
// metadata and quantization recipe of real files). See tools/README.md.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include "../examples/common/cli.hpp"
#include "model_maker.hpp"

int main(int argc, char** argv) {
    smol_tools::MakeOptions options;
    std::string out_path, preset = "demo";
    std::optional<uint32_t> hidden, layers, heads, kv_heads, head_dim, ffn, vocab, ctx;
    bool progress = isatty(fileno(stderr)) != 0;  // per-tensor progress only on a terminal
    bool quiet = false;

    smol_cli::Parser cli(
        "smol-make-model",
        "Writes a SmolLM3-format GGUF with random weights (the layout, metadata and\n"
        "quantization recipe of real files). See tools/README.md.");
    cli.option("--out", out_path, "FILE", "where to write the file").required();
    cli.option(
        "--preset",
        [&](const std::string& name) {
            smol_tools::preset_shape(name);  // throws for an unknown name, naming the known ones
            preset = name;
        },
        "3b|demo|tiny",
        "start from a shape (default demo): 3b = SmolLM3-3B (2048 x 36, 16/4 heads,\n"
        "ffn 11008, vocab 128256); demo = 256 x 4, 4/1 heads, ffn 768, ctx 4096;\n"
        "tiny = 256 x 2, 4/2 heads, ffn 512. Dimensions given below override it.");
    cli.option("--hidden", hidden, "N", "embedding width");
    cli.option("--layers", layers, "N", "blocks");
    cli.option("--heads", heads, "N", "query heads");
    cli.option("--kv-heads", kv_heads, "N", "key/value heads");
    cli.option("--head-dim", head_dim, "N", "width of a head");
    cli.option("--ffn", ffn, "N", "MLP width");
    cli.option("--vocab", vocab, "N",
               "tokens (the byte vocabulary is padded with reserved tokens to reach it)");
    cli.option("--ctx", ctx, "N", "context length");
    cli.option(
        "--recipe",
        [&](const std::string& name) { options.recipe = smol_tools::parse_recipe(name); },
        "q4_k_m|q5_k_m|q8_0|f16|f32", "quantization recipe (default q4_k_m)");
    cli.flag("--untied", options.untied,
             "add output.weight (by default the LM head is token_embd)");
    cli.option("--tokenizer-from", options.tokenizer_from, "FILE.gguf",
               "copy every tokenizer.* key from FILE.gguf");
    cli.flag(
        "--byte-vocab", [&] { options.tokenizer_from.clear(); },
        "a small byte-level vocabulary (the default)");
    cli.option("--seed", options.seed, "N", "PRNG seed (default 1)");
    cli.option("--threads", options.threads, "N",
               "worker threads (default 2); the file is the same for any")
        .at_least(1);
    cli.option(
        "--effort",
        [&](const std::string& e) {
            using Effort = smol_tools::MakeOptions::Effort;
            if (e == "auto")
                options.effort = Effort::automatic;
            else if (e == "standard")
                options.effort = Effort::standard;
            else if (e == "fast")
                options.effort = Effort::fast;
            else
                throw smol_cli::BadValue("expects auto, standard or fast, not '" + e + "'");
        },
        "auto|standard|fast", "k-quant scale search (auto: fast above 1e9 parameters)");
    cli.option("--name", options.name, "TEXT",
               "general.name (default: \"SmolLM3 random <hidden>x<layers> seed <seed>\")");
    cli.flag(
        "--quiet", [&] { quiet = true, progress = false; }, "print nothing");
    cli.flag("--progress", progress, "print each tensor as it is made (the default on a terminal)");
    cli.epilog(
        "Without --tokenizer-from a small byte-level vocabulary is written (padded with\n"
        "reserved tokens when --vocab or the preset asks for more).");
    if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;

    try {
        options.shape = smol_tools::preset_shape(preset);
        const std::pair<std::optional<uint32_t>, uint32_t*> overrides[] = {
            {hidden, &options.shape.hidden},     {layers, &options.shape.layers},
            {heads, &options.shape.heads},       {kv_heads, &options.shape.kv_heads},
            {head_dim, &options.shape.head_dim}, {ffn, &options.shape.ffn},
            {vocab, &options.shape.vocab},       {ctx, &options.shape.ctx}};
        for (const auto& [value, field] : overrides)
            if (value) *field = *value;

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
    } catch (const std::invalid_argument& e) {  // a shape the recipe cannot hold
        std::fprintf(stderr, "smol-make-model: %s\n%s\n", e.what(), cli.usage_line().c_str());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "smol-make-model: %s\n", e.what());
        return 1;
    }
}
