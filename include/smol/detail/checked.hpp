// Sizes that come from a file or a caller: overflow-checked products and sums,
// the memory budget they are checked against (both as error values), and the
// conversion of an allocation failure into smol::Error. A size computed from hostile numbers
// must fail before anything is allocated (Linux overcommit may kill the
// process instead of failing a too-large allocation, so a refusal has to come
// from a check, not from operator new).
#pragma once

#include "abi.hpp"

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <new>
#include <string>
#include <string_view>
#include <utility>

#include "../error.hpp"

#if defined(_WIN32)
#include "windows.hpp"
#elif defined(__APPLE__)
#include <sys/sysctl.h>
#include <sys/types.h>
#else
#include <unistd.h>
#endif

SMOL_NAMESPACE_BEGIN
namespace detail {

// a * b into *out; false (and *out unchanged) when the product does not fit.
inline bool mul_fits(uint64_t a, uint64_t b, uint64_t* out) noexcept {
    if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return false;
    *out = a * b;
    return true;
}
inline bool add_fits(uint64_t a, uint64_t b, uint64_t* out) noexcept {
    if (b > std::numeric_limits<uint64_t>::max() - a) return false;
    *out = a + b;
    return true;
}

// The product of `factors`, or Error(resource) naming `what` when it does not
// fit in 64 bits or in size_t (a 32-bit host cannot address it either).
inline Expected<size_t> checked_product(const std::string& what,
                                        std::initializer_list<uint64_t> factors) {
    uint64_t total = 1;
    for (uint64_t f : factors)
        if (!mul_fits(total, f, &total))
            return ErrorInfo{ErrorKind::resource, what + ": size overflows 64 bits"};
    if (total > uint64_t(std::numeric_limits<size_t>::max()))
        return ErrorInfo{ErrorKind::resource, what + ": " + std::to_string(total) +
                                                  " bytes do not fit this host's address space"};
    return size_t(total);
}

// Installed RAM in bytes; 0 when the system will not say (then no budget applies).
inline uint64_t physical_memory_bytes() noexcept {
#if defined(_WIN32)
    MEMORYSTATUSEX status;
    status.dwLength = sizeof status;
    return GlobalMemoryStatusEx(&status) ? uint64_t(status.ullTotalPhys) : 0;
#elif defined(__APPLE__)
    uint64_t bytes = 0;
    size_t len = sizeof bytes;
    return sysctlbyname("hw.memsize", &bytes, &len, nullptr, 0) == 0 ? bytes : 0;
#else
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
#endif
}

// Error(resource) when `bytes` exceed the budget (0: physical memory; a system
// that reports none imposes none).
inline Status check_budget(const std::string& what, uint64_t bytes, uint64_t budget) {
    const uint64_t limit = budget != 0 ? budget : physical_memory_bytes();
    if (limit != 0 && bytes > limit)
        return Status(ErrorKind::resource, what + " needs " + std::to_string(bytes) +
                                               " bytes, more than the memory budget of " +
                                               std::to_string(limit) + " bytes");
    return {};
}

// Runs f() and turns a std::bad_alloc escaping it into Error(resource) naming
// `what`: an allocation that passed the budget can still fail (address-space
// limits, other processes), and the caller must see a typed error, not a raw
// exception. This form throws that error; catch_bad_alloc below returns it.
// Without exceptions a failed allocation ends the process (the standard
// containers give no other way out), so there is nothing to catch: the guard
// is what lets these headers compile under -fno-exceptions.
template <class F>
decltype(auto) translate_bad_alloc(std::string_view what, F&& f) {
#if SMOL_HAS_EXCEPTIONS
    try {
        return std::forward<F>(f)();
    } catch (const std::bad_alloc&) {
        fail(ErrorKind::resource, std::string(what) + ": out of memory");
    }
#else
    (void)what;
    return std::forward<F>(f)();
#endif
}

// As translate_bad_alloc, for an f() that returns a Status or an Expected: the
// allocation failure comes back as that value (the try_* entry points).
template <class F>
auto catch_bad_alloc(std::string_view what, F&& f) -> decltype(std::forward<F>(f)()) {
#if SMOL_HAS_EXCEPTIONS
    try {
        return std::forward<F>(f)();
    } catch (const std::bad_alloc&) {
        return ErrorInfo{ErrorKind::resource, std::string(what) + ": out of memory"};
    }
#else
    (void)what;
    return std::forward<F>(f)();
#endif
}

}  // namespace detail
SMOL_NAMESPACE_END
