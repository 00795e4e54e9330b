// The body both units compile, each with its own SMOL_VERSION_MINOR. It has
// internal linkage: each unit keeps its own copy, as a program that mixes two
// libraries built against different smol versions would.
#pragma once

#include <smol/smol.hpp>
#include <typeinfo>

#include "run.hpp"

namespace {

two_versions::Run run_model(const std::vector<uint8_t>& model_bytes) {
    smol::LoadOptions load;
    load.n_threads = 1;
    const auto model = smol::Model::load_from_memory(model_bytes.data(), model_bytes.size(), load);
    smol::Generator generator(model);
    smol::GenerateParams params;
    params.max_tokens = 8;
    params.temperature = 0;  // greedy: both versions must pick the same ids
    const smol::GenerateResult result = generator.generate("Once upon a time", params);
    return {SMOL_VERSION_STRING, typeid(smol::Model).name(), result.tokens, result.text};
}

}  // namespace
