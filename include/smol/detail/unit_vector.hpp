// UnitVector<T>: a std::vector whose out-of-line code belongs to this
// translation unit's ABI namespace (abi.hpp).
//
// Why: the ABI tag keeps smol's own functions apart between units built with
// different ISA flags, but a standard template over a plain type
// (std::vector<float>'s sized constructor, std::vector<double>'s growth on
// push_back) has the same name in every unit. Where the compiler does not
// inline it, each unit emits a weak copy compiled with its own flags and the
// linker keeps one: a baseline unit's smol code could call the -mavx2 copy on
// a CPU without AVX (tests/mixed_flags caught std::vector<float>(n) in
// Weights::vector doing that). An allocator declared inside the tagged
// namespace puts the tag into the vector's type, so every function of it is
// this unit's own. Internal buffers of plain types use it; the public API
// keeps std::vector (a caller's own copies of those are the caller's).
// tools/ci-mixed-flags.sh lists any shared weak symbol with AVX code that is
// left.
#pragma once

#include "abi.hpp"

#include <cstddef>
#include <memory>
#include <vector>

SMOL_NAMESPACE_BEGIN
namespace detail {

template <class T>
struct UnitAllocator {
    using value_type = T;

    UnitAllocator() noexcept = default;
    template <class U>
    UnitAllocator(const UnitAllocator<U>&) noexcept {}

    // std::allocator's own calls (its size check, and what it does on
    // overflow with or without exceptions): small and scalar, no vector code.
    T* allocate(size_t n) { return std::allocator<T>().allocate(n); }
    void deallocate(T* p, size_t n) noexcept { std::allocator<T>().deallocate(p, n); }

    friend bool operator==(const UnitAllocator&, const UnitAllocator&) noexcept { return true; }
    friend bool operator!=(const UnitAllocator&, const UnitAllocator&) noexcept { return false; }
};

template <class T>
using UnitVector = std::vector<T, UnitAllocator<T>>;

}  // namespace detail
SMOL_NAMESPACE_END
