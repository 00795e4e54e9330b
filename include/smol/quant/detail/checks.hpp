// The argument check every row converter of quant/ shares: a row is a whole
// number of blocks, or the caller gets an Error naming the function and type.
#pragma once

#include "../../detail/abi.hpp"

#include <cstddef>
#include <string>

#include "../../error.hpp"
#include "../types.hpp"

SMOL_NAMESPACE_BEGIN
namespace detail {

inline void require_block_multiple(GGMLType type, size_t n, const char* what) {
    const TypeTraits traits = type_traits(type);
    if (traits.block_size == 0 || n % traits.block_size != 0)
        fail(ErrorKind::invalid_argument,
             std::string(what) + ": " + std::to_string(n) + " elements is not a multiple of the " +
                 type_name(type) + " block size " + std::to_string(traits.block_size));
}

}  // namespace detail
SMOL_NAMESPACE_END
