// The two-versions program (tests/two_versions/): main.cpp is built as the
// library's real version, other_version.cpp as version 0.99. Each unit runs
// the same model through its own copy of smol; nothing of smol's crosses
// between them but bytes, standard types and smol::Error (which detail/abi.hpp
// keeps outside the versioned namespace so that any unit can catch it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace two_versions {

struct Run {
    std::string version;       // SMOL_VERSION_STRING as the unit saw it
    std::string model_type;    // typeid(smol::Model).name(): the inline namespace is in it
    std::vector<int32_t> ids;  // greedy continuation of a fixed prompt
    std::string text;
};

// Loads the GGUF file in `model` with the unit's smol and continues a fixed
// prompt greedily; smol::Error on a bad file.
Run run_current(const std::vector<uint8_t>& model);
Run run_other(const std::vector<uint8_t>& model);

}  // namespace two_versions
