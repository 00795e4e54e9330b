// Device helpers shared by the CUDA backend's kernel files (kernels.cu,
// matmul.cu): warp reductions and the launch with programmatic dependent
// launch that every kernel of a step goes through.
#pragma once

#include <smol/detail/abi.hpp>

#include <atomic>
#include <cstdlib>
#include <utility>

#include <cuda_runtime.h>

#include "env.hpp"

SMOL_NAMESPACE_BEGIN
namespace cuda_detail {

inline constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
    return v;
}
__device__ __forceinline__ int warp_sum_int(int v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1)
        v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
    return v;
}

// ---------------------------------------------------------------------------
// Programmatic dependent launch (sm_90 and later). A decode step is a chain of
// a few hundred short kernels, each waiting for the one before; launched with
// programmatic stream serialization, kernel N + 1's blocks are scheduled while
// kernel N still runs and wait in await_previous_kernel() until N has finished
// and its writes are visible, which hides the launch and ramp-up between them.
// Every kernel calls await_previous_kernel() before touching global memory, so
// finishing kernel N still implies that every kernel before it finished too.
// It then lets its own dependents launch (they wait the same way). On by
// default on sm_90 and later (2026-11-28, H200: every test_cuda case passes
// with it, decode +4 %; RESULTS.md "GPU"); SMOL_CUDA_PDL=0 turns it off (and
// tools/gpu-check.sh runs test_cuda both ways). Earlier GPUs always launch in
// plain stream order.
__device__ __forceinline__ void await_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

inline bool pdl_enabled_on_current_device() {
    static const bool allowed = !env_off("SMOL_CUDA_PDL");
    if (!allowed) return false;
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return false;
    // Each device's compute capability, asked once: 0 not yet, 1 below sm_90, 2 sm_90 or later.
    constexpr int kKnownDevices = 64;
    static std::atomic<int> known[kKnownDevices];
    if (device >= 0 && device < kKnownDevices) {
        const int seen = known[device].load(std::memory_order_relaxed);
        if (seen != 0) return seen == 2;
    }
    int major = 0;
    const bool capable =
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
        major >= 9;
    if (device >= 0 && device < kKnownDevices)
        known[device].store(capable ? 2 : 1, std::memory_order_relaxed);
    return capable;
}

// launch_smem(kernel, grid, block, dynamic shared bytes, stream, args...), with
// programmatic stream serialization where it applies (not on the legacy
// default stream, which the test hooks use); launch(...) without dynamic
// shared memory. A kernel taking more than 48 KiB must have been allowed it
// (cudaFuncAttributeMaxDynamicSharedMemorySize) on the current device.
template <class... Params, class... Args>
void launch_smem(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                 Args&&... args) {
    cudaLaunchAttribute attribute[1];
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = attribute;
    config.numAttrs = stream != nullptr && pdl_enabled_on_current_device() ? 1 : 0;
    // A launch error stays pending for the caller's cudaGetLastError check.
    (void)cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, Args&&... args) {
    launch_smem(kernel, grid, block, 0, stream, std::forward<Args>(args)...);
}

}  // namespace cuda_detail
SMOL_NAMESPACE_END
