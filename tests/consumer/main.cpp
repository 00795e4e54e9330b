// A consumer of smol, built WITHOUT any ISA flag (find_package, add_subdirectory
// and FetchContent; tests/CMakeLists.txt runs all three): includes the umbrella
// header, uses the GGUF writer and reader (a broken include path, export or
// dependency fails the build), checks that run-time dispatch picked the best
// kernel level this CPU has, judged independently of smol's own detection
// (tests/support/cpu_expectation.hpp), and that a fixture model matches the reference
// engine's logits at that level.
#include <smol/smol.hpp>
#include <smol/gguf/writer.hpp>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "../support/cpu_expectation.hpp"
#include "../mixed_flags/check.hpp"

int main() {
    smol::gguf::Writer writer;
    writer.set_string("general.architecture", "smollm3");
    const auto bytes = writer.to_bytes();
    auto file = smol::gguf::File::from_buffer(bytes.data(), bytes.size());
    if (file->get<std::string>("general.architecture") != "smollm3") return 1;
    std::printf("consumer ok: %s\n", smol::build_info_string().c_str());

    const std::string expected = smol_test::expected_cpu_level();
    if (std::string(smol::cpu_level_name(smol::best_cpu_level())) != expected) {
        std::printf("consumer: smol picked %s, the CPU supports %s\n",
                    smol::cpu_level_name(smol::best_cpu_level()), expected.c_str());
        return 1;
    }

    const char* env = std::getenv("SMOL_FIXTURES");
    const std::string dir = env ? env : SMOL_FIXTURES_DEFAULT;
    std::ifstream golden_file(dir + "/golden/tiny-q4km.gguf.json");
    std::ifstream logits_file(dir + "/golden/tiny-q4km.gguf.json.0.logits.f32", std::ios::binary);
    if (!golden_file || !logits_file) {
        std::printf("consumer: fixtures not found in %s: golden check skipped\n", dir.c_str());
        const char* required = std::getenv("SMOL_REQUIRE_FIXTURES");
        return required && std::string(required) == "1" ? 1 : 0;
    }
    const std::string model_path = dir + "/tiny-q4km.gguf";
    const std::vector<int32_t> ids =
        nlohmann::json::parse(golden_file).at(0).at("prompt_ids").get<std::vector<int32_t>>();
    std::vector<float> logits(128256), scratch(logits.size());
    logits_file.read(reinterpret_cast<char*>(logits.data()), std::streamsize(logits.size() * 4));
    const Golden golden{model_path.c_str(), ids.data(),    ids.size(),
                        logits.data(),      logits.size(), scratch.data()};
    return check_against_golden("consumer", golden);
}
