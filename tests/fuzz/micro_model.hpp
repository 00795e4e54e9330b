// A complete SmolLM3 model small enough for a fuzzer's input (~30-80 KiB):
// the byte-level vocabulary of tools/model_maker.hpp, one or two layers of
// width 32. Seeds for fuzz_loader and the model behind fuzz_session.
#pragma once

#include <cstdint>
#include <vector>

#include "../../tools/model_maker.hpp"

namespace smol_fuzz {

inline std::vector<uint8_t> micro_model(smol_tools::Recipe recipe, uint32_t layers = 1,
                                        uint32_t kv_heads = 1, bool untied = false) {
    smol_tools::MakeOptions options;
    options.shape = {32, layers, 2, kv_heads,
                     16, 64,     0, 64};  // hidden, layers, heads, kv, head dim, ffn, vocab, ctx
    options.recipe = recipe;
    options.untied = untied;
    options.threads = 1;
    return smol_tools::make_model_bytes(options);
}

// A micro model whose matrices are all `type` (its blocks zeros: the model
// maker writes no quantizer-less type; mutations fill them), 256 wide so that
// every weight type fits (the 32-weight formats meet 256-value activation
// blocks): the seeds that carry the read-only types into fuzz_loader.
inline std::vector<uint8_t> micro_model_of(smol::GGMLType type) {
    smol_tools::MakeOptions options;
    options.shape = {256, 1, 2, 1, 128, 256, 0, 64};
    options.recipe = smol_tools::Recipe::f32;
    options.matrix_type = type;
    options.threads = 1;
    return smol_tools::make_model_bytes(options);
}

}  // namespace smol_fuzz
