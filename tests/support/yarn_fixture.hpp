// The YaRN fixture: a copy of a SmolLM3 GGUF file with rope.scaling.* keys set
// (weights and every other key untouched). test_context builds it from
// tiny-q4km.gguf at test time (the fixture is too large to commit twice);
// tools/reference-logits/make-yarn-fixture.cpp writes the same bytes to a
// file for the reference engine, whose outputs are tests/data/yarn/.
#pragma once

#include <smol/gguf/gguf.hpp>
#include <smol/gguf/writer.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gguf_rebuild.hpp"

namespace smol_test {

// The keys written under "<arch>.": each unset one is left out of the file.
struct RopeScalingKeys {
    std::optional<std::string> type = "yarn";
    std::optional<float> factor = 4.0f;
    std::optional<uint32_t> original_context_length = 128;
    std::optional<float> attn_factor;
    // context_length is replaced when set: the goldens' file says 128, so the
    // YaRN context (original x factor) is what lets a prompt run past it.
    std::optional<uint32_t> context_length = 128;
};

// The goldens' file (tests/data/yarn/README.md): tiny-q4km.gguf with these keys.
inline RopeScalingKeys golden_yarn_keys() {
    return RopeScalingKeys{};
}

// `src` with its rope.scaling.* keys (and context_length, when keys sets it)
// replaced by `keys`.
inline std::vector<uint8_t> with_rope_scaling(const smol::gguf::File& src,
                                              const RopeScalingKeys& keys) {
    const auto arch = src.try_find<std::string>("general.architecture");
    const std::string p =
        (arch.ok() && arch.value() ? *arch.value() : std::string("smollm3")) + ".";
    const std::string scaling = p + "rope.scaling.";
    return gguf_edit::rebuild(
        src,
        [&](smol::gguf::Writer&, const smol::gguf::KeyValue& kv) {
            if (kv.key.compare(0, scaling.size(), scaling) == 0) return true;
            return keys.context_length && kv.key == p + "context_length";
        },
        nullptr,
        [&](smol::gguf::Writer& w) {
            if (keys.context_length) w.set_u32(p + "context_length", *keys.context_length);
            if (keys.type) w.set_string(scaling + "type", *keys.type);
            if (keys.factor) w.set_f32(scaling + "factor", *keys.factor);
            if (keys.original_context_length)
                w.set_u32(scaling + "original_context_length", *keys.original_context_length);
            if (keys.attn_factor) w.set_f32(scaling + "attn_factor", *keys.attn_factor);
        });
}

}  // namespace smol_test
