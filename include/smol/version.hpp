// smol version macros. The library version also names the inline ABI namespace
// (detail/abi.hpp: smol::v0_1_...) so two copies of different versions, or of
// different ISA flags, can coexist in one binary.
#pragma once

#define SMOL_VERSION_MAJOR 0
#define SMOL_VERSION_MINOR 1
#define SMOL_VERSION_PATCH 0
#define SMOL_VERSION_STRING "0.1.0"
