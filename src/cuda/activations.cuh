// The activation blocks the CUDA backend's matrices read, and how a block is
// quantized: ActBlock, the rounding rule of each weight type's activations
// (ActRule, the CPU path's and the reference engine's), and the host's
// quantizer, which the host emulation (test_hooks.cpp) and the device's
// quantization kernel (kernels.cu, one lane per element) share code with.
// __host__ __device__ like the block code (blocks.cuh), so the rounding is
// testable without a device.
#pragma once

#include <smol/detail/abi.hpp>

#include <cstdint>

#include <cuda_fp16.h>

#include <smol/core/fp16.hpp>

SMOL_NAMESPACE_BEGIN
namespace cuda_detail {

// The per-thread code of this backend: inlined, on the host and the device.
#define SMOL_HD __host__ __device__ __forceinline__

constexpr int kActBlock = 32;  // activation quantization block

struct ActBlock {
    float d;  // scale: x ~= d * q
    float s;  // d * sum(q)
    int8_t q[kActBlock];
};
static_assert(sizeof(ActBlock) == 40, "ActBlock layout");

// How an activation block's scale is rounded: the rule of the CPU path and of
// the reference engine for the matrices that read it (kernels/activations.hpp),
// so that the GPU computes the same int8 codes as they do.
//   kquant (Q4_K / Q5_K / Q6_K weights, Q8_K32 on the CPU): d = bf16(max|x| / 127),
//     q = clamp(round_half_even(x * (1 / d)), -127, 127);
//   q8_0 (Q8_0 weights): q from d = max|x| / 127 unrounded, d stored as fp16.
enum class ActRule : int { kquant = 0, q8_0 = 1 };

// The host emulation is the CPU's own rounding (core/fp16.hpp); the device
// does the same round-to-nearest-even on the bits (finite inputs only).
SMOL_HD float bf16_round(float f) {
#if defined(__CUDA_ARCH__)
    const uint32_t bits = __float_as_uint(f);
    return __uint_as_float((bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u);
#else
    return bf16_to_fp32(fp32_to_bf16(f));
#endif
}

SMOL_HD float fp16_round(float f) {
#if defined(__CUDA_ARCH__)
    return __half2float(__float2half_rn(f));
#else
    return fp16_to_fp32(fp32_to_fp16(f));
#endif
}

// The scale that computes the codes (first) and the one stored (second) for a
// block whose largest magnitude is amax.
struct ActScale {
    float compute, stored;
};
SMOL_HD ActScale act_scale(float amax, ActRule rule) {
    const float d = amax / 127.0f;
    if (rule == ActRule::kquant) {
        const float rounded = bf16_round(d);
        return ActScale{rounded, rounded};
    }
    return ActScale{d, fp16_round(d)};
}

SMOL_HD int act_code(float x, float inverse) {
    float v = x * inverse;
#if defined(__CUDA_ARCH__)
    int q = __float2int_rn(v);
#else
    // Round half to even without <cmath>'s rounding mode: the 1.5 * 2^23 trick
    // (|v| stays far below 2^22 here).
    v = (v + 12582912.0f) - 12582912.0f;
    int q = int(v);
#endif
    return q > 127 ? 127 : (q < -127 ? -127 : q);
}

// Quantization of one activation block on the host (the device does the same
// with one lane per element).
inline void quantize_act_block_host(const float* x, ActBlock& out, ActRule rule) {
    float amax = 0;
    for (int i = 0; i < kActBlock; ++i)
        amax = x[i] < 0 ? (amax > -x[i] ? amax : -x[i]) : (amax > x[i] ? amax : x[i]);
    const ActScale scale = act_scale(amax, rule);
    const float inverse = scale.compute != 0.0f ? 1.0f / scale.compute : 0.0f;
    int sum = 0;
    for (int i = 0; i < kActBlock; ++i) {
        out.q[i] = int8_t(act_code(x[i], inverse));
        sum += out.q[i];
    }
    out.d = scale.stored;
    out.s = scale.stored * float(sum);
}

}  // namespace cuda_detail
SMOL_NAMESPACE_END
