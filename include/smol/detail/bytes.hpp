// Little-endian byte (de)serialization of trivially copyable values, shared by
// the GGUF writer, KVCache::serialize and the generator's session format.
// smol targets little-endian hosts only (x86-64, aarch64), so this is a memcpy.
#pragma once

#include "abi.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

SMOL_NAMESPACE_BEGIN
namespace detail {

// Appends the bytes of `value` to `out`.
template <class T>
inline void append_le(std::vector<uint8_t>& out, T value) {
    static_assert(std::is_trivially_copyable_v<T>, "append_le needs a trivially copyable T");
    uint8_t bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));
    out.insert(out.end(), bytes, bytes + sizeof(T));
}

// Reads a T at base + offset; the caller has checked the bounds.
template <class T>
inline T read_le(const uint8_t* base, size_t offset) noexcept {
    static_assert(std::is_trivially_copyable_v<T>, "read_le needs a trivially copyable T");
    T value;
    std::memcpy(&value, base + offset, sizeof(T));
    return value;
}

}  // namespace detail
SMOL_NAMESPACE_END
