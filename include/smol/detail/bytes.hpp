// Little-endian byte (de)serialization of trivially copyable values, shared by
// the GGUF reader and writer, KVCache::serialize, the generator's session
// format and the tests and tools that forge or patch such bytes.
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

// Overwrites the sizeof(T) bytes at base + offset; the caller has checked the bounds.
template <class T>
inline void write_le(uint8_t* base, size_t offset, T value) noexcept {
    static_assert(std::is_trivially_copyable_v<T>, "write_le needs a trivially copyable T");
    std::memcpy(base + offset, &value, sizeof(T));
}

}  // namespace detail
SMOL_NAMESPACE_END
