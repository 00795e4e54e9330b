// The mixed-flags program (issue: "Fast by default on every CPU"): this unit
// is built without ISA flags, module_avx2.cpp with -mavx2 -mfma -mf16c, and
// both use smol. Before the ABI tag (include/smol/detail/abi.hpp) both units
// emitted the same weak symbols (smol::Model::forward, ...) with different
// code, and depending on the link order a baseline CPU could run AVX2 code.
// Built in both link orders (tests/kernels.cmake) and run natively and under
// qemu-x86_64 -cpu Nehalem / Haswell (tools/ci-mixed-flags.sh): this unit must
// work everywhere and reach the dispatched kernels; the module is called only
// where the CPU has AVX2, and must then match the goldens as well.
#include "check.hpp"

#include <nlohmann/json.hpp>

int run_avx2_module(const char* model_path, const int32_t* ids, size_t n_ids, const float* logits,
                    size_t vocab, float* scratch);

namespace {

std::string fixtures_dir() {
    if (const char* env = std::getenv("SMOL_FIXTURES")) return env;
    return SMOL_FIXTURES_DEFAULT;
}

// The storage behind a Golden (only this unit holds std containers of plain types).
struct GoldenData {
    std::string model_path;
    std::vector<int32_t> ids;
    std::vector<float> logits;   // [vocab]
    std::vector<float> scratch;  // [vocab]
};

// false when the fixtures are missing.
bool load_golden(GoldenData& golden) {
    const std::string dir = fixtures_dir();
    std::ifstream golden_file(dir + "/golden/tiny-q4km.gguf.json");
    std::ifstream logits_file(dir + "/golden/tiny-q4km.gguf.json.0.logits.f32", std::ios::binary);
    if (!golden_file || !logits_file) {
        std::printf("[main] fixtures not found in %s\n", dir.c_str());
        return false;
    }
    golden.model_path = dir + "/tiny-q4km.gguf";
    golden.ids =
        nlohmann::json::parse(golden_file).at(0).at("prompt_ids").get<std::vector<int32_t>>();
    golden.logits.resize(128256);
    golden.scratch.resize(golden.logits.size());
    logits_file.read(reinterpret_cast<char*>(golden.logits.data()),
                     std::streamsize(golden.logits.size() * sizeof(float)));
    return bool(logits_file);
}

}  // namespace

int main() {
    GoldenData data;
    if (!load_golden(data)) {
        const char* required = std::getenv("SMOL_REQUIRE_FIXTURES");
        return required && std::string(required) == "1" ? 1 : 0;
    }
    const Golden golden{data.model_path.c_str(), data.ids.data(),    data.ids.size(),
                        data.logits.data(),      data.logits.size(), data.scratch.data()};
    int status = check_against_golden("baseline unit", golden);
    bool has_avx2 = false;
#if defined(__GNUC__) || defined(__clang__)
    __builtin_cpu_init();
    has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("f16c");
#endif
    if (has_avx2)
        status = std::max(status, run_avx2_module(golden.model_path, golden.ids, golden.n_ids,
                                                  golden.logits, golden.vocab, golden.scratch));
    else
        std::printf("[main] no AVX2 on this CPU: the avx2 unit is not called\n");
    return status;
}
