// The one aligned allocator of smol. Every buffer a kernel streams through
// (activations, the KV cache, the bandwidth probe) starts on a cache line, so
// no SIMD load straddles two lines at the start of a row and no two threads'
// buffers share a line.
//
//   aligned_allocate(bytes)   uninitialized, kAlignment-aligned; throws bad_alloc
//   aligned_allocate_or_null(bytes)   the same, nullptr when it fails
//   aligned_free(p)           releases it (nullptr is fine)
//   AlignedArray<T>           unique_ptr<T[]> that frees with aligned_free
//   AlignedBuffer             owning, zero-filled bytes; copyable; resize() discards
//   advise_huge_pages(p, n)   asks for transparent huge pages over a large buffer
//
// C++17's aligned operator new does the platform work (the standard library
// picks the call for POSIX or Windows, mingw included), so no branch is needed
// here; what matters is that allocation and release name the same alignment,
// which these functions fix in one place.
#pragma once

#include "abi.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

SMOL_NAMESPACE_BEGIN
namespace detail {

// A cache line; also the widest SIMD load (AVX-512).
inline constexpr size_t kAlignment = 64;

// Uninitialized on purpose: a large buffer's pages are touched only when
// written (the KV cache fills position by position).
inline void* aligned_allocate(size_t bytes) {
    return ::operator new(bytes == 0 ? 1 : bytes, std::align_val_t(kAlignment));
}

// As aligned_allocate, but nullptr instead of bad_alloc (for a buffer the
// caller can do without; also under -fno-exceptions).
inline void* aligned_allocate_or_null(size_t bytes) noexcept {
    return ::operator new(bytes == 0 ? 1 : bytes, std::align_val_t(kAlignment), std::nothrow);
}

inline void aligned_free(void* p) noexcept {
    if (p) ::operator delete(p, std::align_val_t(kAlignment));
}

struct AlignedDelete {
    void operator()(void* p) const noexcept { aligned_free(p); }
};

// Asks for transparent huge pages over the whole 2 MiB pages within
// [begin, begin + bytes) of memory the process allocated (a large buffer
// streamed once per token: fewer TLB misses and page faults). Best effort;
// Linux only.
inline void advise_huge_pages(void* begin, size_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = uintptr_t(2) << 20;
    const uintptr_t start = (uintptr_t(begin) + huge - 1) / huge * huge;
    const uintptr_t end = (uintptr_t(begin) + bytes) / huge * huge;
    if (end > start) madvise(reinterpret_cast<void*>(start), end - start, MADV_HUGEPAGE);
#else
    (void)begin;
    (void)bytes;
#endif
}

template <class T>
using AlignedArray = std::unique_ptr<T[], AlignedDelete>;

// Owning, zero-filled bytes. The allocation is rounded up to whole lines, so a
// kernel may read (not use) up to the end of the last line of a row.
class AlignedBuffer {
public:
    AlignedBuffer() = default;
    explicit AlignedBuffer(size_t bytes) { resize(bytes); }
    AlignedBuffer(const AlignedBuffer& other) : AlignedBuffer(other.size_) {
        if (size_) std::memcpy(data_.get(), other.data_.get(), size_);
    }
    AlignedBuffer& operator=(const AlignedBuffer& other) {
        if (this != &other) {
            AlignedBuffer copy(other);
            swap(copy);
        }
        return *this;
    }
    AlignedBuffer(AlignedBuffer&& other) noexcept { swap(other); }
    AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
        swap(other);
        return *this;
    }

    // Discards the contents; the new memory is zeroed.
    void resize(size_t bytes) {
        data_.reset();
        size_ = 0;
        if (bytes == 0) return;
        const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
        data_.reset(static_cast<uint8_t*>(aligned_allocate(rounded)));
        std::memset(data_.get(), 0, rounded);
        size_ = bytes;
    }

    uint8_t* data() noexcept { return data_.get(); }
    const uint8_t* data() const noexcept { return data_.get(); }
    size_t size() const noexcept { return size_; }
    template <class T>
    T* as() noexcept {
        return reinterpret_cast<T*>(data_.get());
    }
    template <class T>
    const T* as() const noexcept {
        return reinterpret_cast<const T*>(data_.get());
    }

    void swap(AlignedBuffer& other) noexcept {
        data_.swap(other.data_);
        std::swap(size_, other.size_);
    }

private:
    AlignedArray<uint8_t> data_;
    size_t size_ = 0;
};

}  // namespace detail
SMOL_NAMESPACE_END
