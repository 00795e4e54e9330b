// Two versions of smol side by side in one program: this unit is the real
// version, other_version.cpp claims 0.99. Were the versioned inline namespace
// (include/smol/detail/abi.hpp) not real, the two units' copies of Model,
// Generator, ... would be one set of weak symbols and the linker would keep
// either; with it they are two, and each unit runs its own. Checked here: the
// two units' smol::Model are different types (their mangled names differ in
// the version part), both generate the same greedy text from one model, and a
// smol::Error thrown by the 0.99 unit is caught here as this unit's smol::Error.
#include <cstdio>
#include <string>

#include "../../tools/model_maker.hpp"
#include "run_body.hpp"

two_versions::Run two_versions::run_current(const std::vector<uint8_t>& model) {
    return run_model(model);
}

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
    std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
    if (!ok) ++failures;
}

}  // namespace

int main() {
    smol_tools::MakeOptions options;
    options.shape = smol_tools::preset_shape("tiny");
    options.effort = smol_tools::MakeOptions::Effort::fast;
    const std::vector<uint8_t> model = smol_tools::make_model_bytes(options);

    const two_versions::Run current = two_versions::run_current(model);
    const two_versions::Run other = two_versions::run_other(model);
    std::printf("this unit:  smol %s, smol::Model is %s\n", current.version.c_str(),
                current.model_type.c_str());
    std::printf("other unit: smol %s, smol::Model is %s\n", other.version.c_str(),
                other.model_type.c_str());

    const std::string tag =
        "v" + std::to_string(SMOL_VERSION_MAJOR) + "_" + std::to_string(SMOL_VERSION_MINOR) + "_";
    check(current.model_type.find(tag) != std::string::npos,
          "this unit's smol::Model lives in " + tag + "...");
    check(
        other.model_type.find("v" + std::to_string(SMOL_VERSION_MAJOR) + "_99_") !=
            std::string::npos,
        "the other unit's smol::Model lives in v" + std::to_string(SMOL_VERSION_MAJOR) + "_99_...");
    check(current.model_type != other.model_type, "the two units' smol::Model are different types");
    check(other.version == "0.99.0" && current.version == SMOL_VERSION_STRING,
          "each unit reports its own version");
    check(!current.ids.empty() && current.ids == other.ids,
          "both versions generate the same greedy ids");
    check(current.text == other.text, "and the same text");

    bool caught = false;
    try {
        two_versions::run_other(std::vector<uint8_t>(64, 0x5a));
    } catch (const smol::Error& e) {
        caught = true;
        std::printf("the 0.99 unit's error: %s\n", e.what());
    }
    check(caught, "a smol::Error thrown by the 0.99 unit is caught as smol::Error here");
    return failures == 0 ? 0 : 1;
}
