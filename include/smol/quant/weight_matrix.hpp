// smol::WeightMatrix: the one host description of a weight matrix, from the
// file's bytes to the kernels. Weights::bind (model/weights.hpp) makes one per
// tensor, pointing into the mapped GGUF file; matmul (kernels/kernels.hpp)
// reads it; the CUDA backend (cuda/backend.hpp) uploads from it and builds its
// device form, DeviceMatrix, out of it. gguf::TensorInfo stays the file's own
// record (dims, offset, byte count); this is what computing needs of it.
//
// Layout: `rows` rows (output features) of `cols` values (input features, GGUF
// dims[0]) of `type`; row r is `row_bytes` bytes at data + r * row_bytes, at
// any byte alignment (GGUF allows general.alignment = 1).
//
// Plain data with no dependencies beyond the type ids, so the CUDA side's
// plain-data header can hold it. It owns nothing: the bytes and the name must
// outlive it (both live in the gguf::File for a bound model).
#pragma once

#include "../detail/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "types.hpp"

SMOL_NAMESPACE_BEGIN

struct WeightMatrix {
    GGMLType type = GGMLType::F32;
    const uint8_t* data = nullptr;
    size_t rows = 0;        // output features (GGUF dims[1])
    size_t cols = 0;        // input features (GGUF dims[0])
    size_t row_bytes = 0;   // bytes from one row to the next
    std::string_view name;  // the tensor's name, only for messages; empty when it has none

    const uint8_t* row(size_t r) const noexcept { return data + r * row_bytes; }
};

SMOL_NAMESPACE_END
