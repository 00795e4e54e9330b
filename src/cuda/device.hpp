// Device plumbing shared by the CUDA backend's host files (backend.cpp, the
// forward pass and sessions; test_hooks.cpp, the tests' single-kernel runs):
// error checks, the current-device guard, owning device buffers, device
// discovery. Plain C++ (cmake/smolCuda.cmake: host code is not compiled by
// nvcc).
#pragma once

#include <smol/detail/abi.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include <smol/error.hpp>

#include "blocks.cuh"

SMOL_NAMESPACE_BEGIN
namespace cuda_detail {

// cudaGetLastError() resets the thread's last-error state, which clears a
// non-sticky error (a bad launch configuration, an allocation failure) so the
// next call starts clean. It cannot clear a sticky one (an illegal address, a
// device-side trap): those leave the CUDA context unusable, every later call
// fails the same way, and only a new process can use the device again.
inline void check(cudaError_t status, const char* call, const char* file, int line) {
    if (status == cudaSuccess) return;
    cudaGetLastError();
    detail::fail(ErrorKind::internal, std::string("cuda: ") + call +
                                          " failed: " + cudaGetErrorString(status) + " (" + file +
                                          ":" + std::to_string(line) + ")");
}
#define SMOL_CUDA_CHECK(call) check((call), #call, __FILE__, __LINE__)

// Makes `device` current for the calling thread and gives the thread its
// previous device back on exit, so a program (or another library) that works
// on another device is never left on ours. The nothrow form is for
// destructors: failures there are ignored.
class DeviceGuard {
public:
    explicit DeviceGuard(int device) {
        if (cudaGetDevice(&previous_) != cudaSuccess) {
            cudaGetLastError();
            previous_ = -1;
        }
        if (previous_ != device) {
            SMOL_CUDA_CHECK(cudaSetDevice(device));
            restore_ = previous_ >= 0;
        }
    }
    DeviceGuard(int device, std::nothrow_t) noexcept {
        if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
        if (previous_ != device && cudaSetDevice(device) == cudaSuccess) restore_ = previous_ >= 0;
        cudaGetLastError();
    }
    ~DeviceGuard() {
        if (restore_) cudaSetDevice(previous_);
    }
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;

private:
    int previous_ = -1;
    bool restore_ = false;
};

// One device allocation, freed on destruction.
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
        if (bytes) SMOL_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
    }
    ~DeviceBuffer() {
        if (ptr_) cudaFree(ptr_);
    }
    DeviceBuffer(DeviceBuffer&& other) noexcept : ptr_(other.ptr_), bytes_(other.bytes_) {
        other.ptr_ = nullptr;
        other.bytes_ = 0;
    }
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
        std::swap(ptr_, other.ptr_);
        std::swap(bytes_, other.bytes_);
        return *this;
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    template <class T = void>
    T* get() const noexcept {
        return static_cast<T*>(ptr_);
    }
    size_t bytes() const noexcept { return bytes_; }

    void upload(const void* src, size_t bytes) {
        SMOL_CUDA_CHECK(cudaMemcpy(ptr_, src, bytes, cudaMemcpyHostToDevice));
    }
    void download(void* dst, size_t bytes) const {
        SMOL_CUDA_CHECK(cudaMemcpy(dst, ptr_, bytes, cudaMemcpyDeviceToHost));
    }

private:
    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

template <class T>
DeviceBuffer upload_vector(const T* data, size_t count) {
    DeviceBuffer buffer(count * sizeof(T));
    buffer.upload(data, count * sizeof(T));
    return buffer;
}

inline int device_count(std::string* why) {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        cudaGetLastError();
        if (why)
            *why = std::string("no usable CUDA driver or device (cudaGetDeviceCount: ") +
                   cudaGetErrorString(status) + ")";
        return 0;
    }
    if (count == 0 && why) *why = "no CUDA device found";
    return count;
}

// The kernels use __dp4a and are built for compute capability 8.0 and 9.0 (with PTX).
constexpr int kMinComputeMajor = 8;

inline void require_device(int device) {
    std::string why;
    const int count = device_count(&why);
    if (count == 0) detail::fail(ErrorKind::unsupported, "cuda: " + why);
    if (device < 0 || device >= count)
        detail::fail(ErrorKind::invalid_argument, "cuda: device " + std::to_string(device) +
                                                      " does not exist (" + std::to_string(count) +
                                                      " found)");
    cudaDeviceProp prop{};
    SMOL_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    if (prop.major < kMinComputeMajor)
        detail::fail(ErrorKind::unsupported,
                     "cuda: device " + std::to_string(device) + " (" + prop.name +
                         ") has compute capability " + std::to_string(prop.major) + "." +
                         std::to_string(prop.minor) + "; smol::cuda needs 8.0 or newer");
}

// The device's number of activation blocks for n_tokens rows of cols values.
inline size_t act_blocks(size_t n_tokens, size_t cols) {
    return n_tokens * (cols / kActBlock);
}

}  // namespace cuda_detail
SMOL_NAMESPACE_END
