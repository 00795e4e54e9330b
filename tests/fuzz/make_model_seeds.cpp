// Writes the seed corpus for fuzz_loader (complete micro models: Q8_0, F32,
// two layers with grouped-query attention, an untied LM head, and 256-wide
// ones in the types smol reads but does not write) or fuzz_session
// (sessions saved by a generator on the micro model fuzz_session restores into:
// empty, after a prefill, after a generation).
//   make_model_seeds fuzz_loader|fuzz_session OUT_DIR
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "micro_model.hpp"

namespace {

void save(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: make_model_seeds fuzz_loader|fuzz_session OUT_DIR\n");
        return 2;
    }
    const std::string target = argv[1], out = argv[2];
    using smol_tools::Recipe;
    if (target == "fuzz_loader") {
        save(out + "/micro-q8_0.gguf", smol_fuzz::micro_model(Recipe::q8_0));
        save(out + "/micro-f32.gguf", smol_fuzz::micro_model(Recipe::f32));
        save(out + "/micro-gqa-2layers.gguf", smol_fuzz::micro_model(Recipe::q8_0, 2, 2));
        save(out + "/micro-untied.gguf", smol_fuzz::micro_model(Recipe::q8_0, 1, 1, true));
        for (smol::GGMLType type :
             {smol::GGMLType::Q4_0, smol::GGMLType::Q5_1, smol::GGMLType::IQ4_NL,
              smol::GGMLType::Q2_K, smol::GGMLType::Q3_K, smol::GGMLType::IQ4_XS,
              smol::GGMLType::IQ2_XXS, smol::GGMLType::IQ2_XS, smol::GGMLType::IQ2_S,
              smol::GGMLType::IQ3_XXS, smol::GGMLType::IQ3_S, smol::GGMLType::IQ1_S,
              smol::GGMLType::IQ1_M})
            save(out + "/micro-" + smol::type_name(type) + ".gguf",
                 smol_fuzz::micro_model_of(type));
        return 0;
    }
    if (target == "fuzz_session") {
        const std::vector<uint8_t> model_bytes =
            smol_fuzz::micro_model(Recipe::q8_0);  // what fuzz_session loads
        smol::LoadOptions load;
        load.n_threads = 1;
        smol::GeneratorOptions options;
        options.n_ctx = 64;
        smol::Generator gen(
            smol::Model::load_from_memory(model_bytes.data(), model_bytes.size(), load), options);
        save(out + "/empty.session", gen.save_session());
        smol::GenerateParams params;
        params.max_tokens = 0;
        gen.generate("Hello there", params, nullptr);
        save(out + "/prefilled.session", gen.save_session());
        params.max_tokens = 6;
        params.temperature = 0;
        gen.generate("Hello there, friend", params, nullptr);
        save(out + "/generated.session", gen.save_session());
        return 0;
    }
    std::fprintf(stderr, "make_model_seeds: unknown target %s\n", target.c_str());
    return 2;
}
