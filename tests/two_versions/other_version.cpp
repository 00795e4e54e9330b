// This unit is smol "0.99": the version macros are changed before the library's
// headers read them (version.hpp is #pragma once, so abi.hpp sees these values),
// which moves every smol definition in this unit to smol::v0_99_...
#include <smol/version.hpp>

#undef SMOL_VERSION_MINOR
#define SMOL_VERSION_MINOR 99
#undef SMOL_VERSION_STRING
#define SMOL_VERSION_STRING "0.99.0"

#include "run_body.hpp"

two_versions::Run two_versions::run_other(const std::vector<uint8_t>& model) {
    return run_model(model);
}
