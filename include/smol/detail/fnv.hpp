// FNV-1a, 64-bit: the one implementation. Two users: the model identity
// (model/model.hpp; sessions store that string, so these constants and this
// byte order are a file format) and SeededTextHash (detail/seeded_hash.hpp),
// which starts from a seeded state and finishes with a mixer.
//
// The hash is a running state, so a sequence of parts hashes as their
// concatenation: fnv1a(b, nb, fnv1a(a, na)) == fnv1a(a + b).
#pragma once

#include "abi.hpp"

#include <cstddef>
#include <cstdint>

SMOL_NAMESPACE_BEGIN
namespace detail {

inline constexpr uint64_t kFnv1aOffset = 0xcbf29ce484222325ull;
inline constexpr uint64_t kFnv1aPrime = 0x100000001b3ull;

// Continues `state` over n bytes.
inline uint64_t fnv1a(const void* data, size_t n, uint64_t state = kFnv1aOffset) noexcept {
    const unsigned char* bytes = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) state = (state ^ bytes[i]) * kFnv1aPrime;
    return state;
}

}  // namespace detail
SMOL_NAMESPACE_END
