// Tensor<T>: a non-owning, typed, strided view (up to 4 dims, innermost first,
// like GGUF), and AlignedBuffer: the owning allocation that views point into
// when data does not live in a mapped file.
#pragma once

#include "../detail/abi.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "../error.hpp"

SMOL_NAMESPACE_BEGIN

constexpr size_t kMaxDims = 4;

// Element type plus shape [ne0 (innermost), ne1, ...] with strides in elements.
template <class T>
class Tensor {
public:
    Tensor() = default;
    // A contiguous view of the given shape (innermost first).
    Tensor(T* data, std::initializer_list<size_t> shape) : data_(data) {
        if (shape.size() > kMaxDims) detail::fail(ErrorKind::shape, "Tensor: more than 4 dims");
        size_t i = 0;
        for (size_t n : shape) shape_[i++] = n;
        n_dims_ = shape.size();
        for (; i < kMaxDims; ++i) shape_[i] = 1;
        size_t stride = 1;
        for (size_t d = 0; d < kMaxDims; ++d) {
            strides_[d] = stride;
            stride *= shape_[d];
        }
    }

    T* data() const noexcept { return data_; }
    size_t dims() const noexcept { return n_dims_; }
    size_t size(size_t dim) const noexcept { return shape_[dim]; }
    size_t stride(size_t dim) const noexcept { return strides_[dim]; }
    size_t numel() const noexcept {
        size_t n = 1;
        for (size_t d = 0; d < kMaxDims; ++d) n *= shape_[d];
        return n;
    }

    T& operator()(size_t i0, size_t i1 = 0, size_t i2 = 0, size_t i3 = 0) const noexcept {
        return data_[i0 * strides_[0] + i1 * strides_[1] + i2 * strides_[2] + i3 * strides_[3]];
    }
    // Row r of a 2-D tensor: ne0 contiguous elements.
    T* row(size_t r) const noexcept { return data_ + r * strides_[1]; }

private:
    T* data_ = nullptr;
    size_t n_dims_ = 0;
    std::array<size_t, kMaxDims> shape_{1, 1, 1, 1};
    std::array<size_t, kMaxDims> strides_{1, 1, 1, 1};
};

// Owning, 64-byte aligned (a cache line; enough for AVX-512 loads), zero-filled buffer.
class AlignedBuffer {
public:
    static constexpr size_t kAlignment = 64;

    AlignedBuffer() = default;
    explicit AlignedBuffer(size_t bytes) { resize(bytes); }
    ~AlignedBuffer() { release(); }
    AlignedBuffer(const AlignedBuffer& other) : AlignedBuffer(other.size_) {
        if (size_) std::memcpy(data_, other.data_, size_);
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
        release();
        if (bytes == 0) return;
        const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
        void* p = ::operator new(rounded, std::align_val_t(kAlignment));
        std::memset(p, 0, rounded);
        data_ = static_cast<uint8_t*>(p);
        size_ = bytes;
    }

    uint8_t* data() noexcept { return data_; }
    const uint8_t* data() const noexcept { return data_; }
    size_t size() const noexcept { return size_; }
    template <class T>
    T* as() noexcept { return reinterpret_cast<T*>(data_); }
    template <class T>
    const T* as() const noexcept { return reinterpret_cast<const T*>(data_); }

    void swap(AlignedBuffer& other) noexcept {
        std::swap(data_, other.data_);
        std::swap(size_, other.size_);
    }

private:
    void release() noexcept {
        if (data_) ::operator delete(data_, std::align_val_t(kAlignment));
        data_ = nullptr;
        size_ = 0;
    }
    uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

SMOL_NAMESPACE_END
