// AArch64 kernels: the neon and dotprod levels (kernels/cpu.hpp), compiled
// in every aarch64 translation unit whatever its -march flags.
//
//   kernels::neon_common  activation quantization and the float ops (NEON is
//                         the AArch64 baseline, so these serve both levels;
//                         the float tiles and helpers: detail/float_simd.hpp)
//   kernels::neon         integer tiles with vmull_s8 + vpadalq_s16
//   kernels::dotprod      integer tiles with SDOT (vdotq_s32), compiled in a
//                         "+dotprod" target region
//   kernels::i8mm         dotprod's tiles, and the long batches' converted rows
//                         by SMMLA (vmmlaq_s32: 2 rows x 8 values by 8 values
//                         x 2 tokens per instruction), in a "+dotprod+i8mm"
//                         target region
// (all three from detail/arm_tiles.inc).
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../core/fp16.hpp"
#include "../quant/blocks.hpp"
#include "activations.hpp"
#include "detail/float_simd.hpp"
#include "kernel_set.hpp"

#if defined(SMOL_ARCH_AARCH64) && (defined(__GNUC__) || defined(__clang__))
#define SMOL_HAS_ARM_KERNELS 1
#include <arm_neon.h>

SMOL_NAMESPACE_BEGIN
namespace kernels {
namespace neon_common {

template <class Block>
inline const Block* block_row(const uint8_t* base, size_t row_bytes, size_t row) noexcept {
    return reinterpret_cast<const Block*>(base + row * row_bytes);
}

// ---- activation quantization (bit-identical to kernels::scalar) ----------------

// 16 int32 in [-127, 127] (four vectors) -> 16 int8.
inline int8x16_t narrow_16(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) noexcept {
    const int16x8_t ab = vcombine_s16(vmovn_s32(a), vmovn_s32(b));
    const int16x8_t cd = vcombine_s16(vmovn_s32(c), vmovn_s32(d));
    return vcombine_s8(vmovn_s16(ab), vmovn_s16(cd));
}

inline int32x4_t quantize_4(const float* x, float scale) noexcept {
    const int32x4_t q = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x), scale));  // round half to even
    return vmaxq_s32(vminq_s32(q, vdupq_n_s32(127)), vdupq_n_s32(-127));
}

inline void quantize_row_q8_k32(const float* x, BlockQ8K32* y, size_t n) noexcept {
    for (size_t b = 0; b < n / QK_K; ++b) {
        BlockQ8K32& block = y[b];
        for (int s = 0; s < QK_K / 32; ++s, x += 32) {
            float32x4_t max_lanes = vdupq_n_f32(0.0f);
            for (int i = 0; i < 32; i += 4)
                max_lanes = vmaxq_f32(max_lanes, vabsq_f32(vld1q_f32(x + i)));
            const float d = q8k32_scale(vmaxvq_f32(max_lanes));
            const float inverse_d = d != 0.0f ? 1.0f / d : 0.0f;
            block.d[s] = d;
            for (int i = 0; i < 32; i += 16) {
                const int32x4_t q0 = quantize_4(x + i, inverse_d),
                                q1 = quantize_4(x + i + 4, inverse_d);
                const int32x4_t q2 = quantize_4(x + i + 8, inverse_d),
                                q3 = quantize_4(x + i + 12, inverse_d);
                block.bsums[2 * s + i / 16] =
                    int16_t(vaddvq_s32(vaddq_s32(vaddq_s32(q0, q1), vaddq_s32(q2, q3))));
                vst1q_s8(block.qs + 32 * s + i, narrow_16(q0, q1, q2, q3));
            }
        }
    }
}

inline void quantize_row_q8_0(const float* x, BlockQ8_0* y, size_t n) noexcept {
    for (size_t b = 0; b < n / QK8_0; ++b, x += QK8_0) {
        float32x4_t max_lanes = vdupq_n_f32(0.0f);
        for (int i = 0; i < QK8_0; i += 4)
            max_lanes = vmaxq_f32(max_lanes, vabsq_f32(vld1q_f32(x + i)));
        const float d = vmaxvq_f32(max_lanes) / 127.0f;
        const float inverse_d = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = fp32_to_fp16(d);
        for (int i = 0; i < QK8_0; i += 16) {
            vst1q_s8(
                y[b].qs + i,
                narrow_16(quantize_4(x + i, inverse_d), quantize_4(x + i + 4, inverse_d),
                          quantize_4(x + i + 8, inverse_d), quantize_4(x + i + 12, inverse_d)));
        }
    }
}

// RoPE on adjacent pairs, 4 pairs per step (vld2q splits even and odd lanes).
inline void rope(float* v, const float* cos, const float* sin, size_t pairs) noexcept {
    size_t i = 0;
    for (; i + 4 <= pairs; i += 4) {
        float32x4x2_t x = vld2q_f32(v + 2 * i);
        const float32x4_t c = vld1q_f32(cos + i), s = vld1q_f32(sin + i);
        float32x4x2_t out;
        out.val[0] = vfmsq_f32(vmulq_f32(x.val[0], c), x.val[1], s);
        out.val[1] = vfmaq_f32(vmulq_f32(x.val[0], s), x.val[1], c);
        vst2q_f32(v + 2 * i, out);
    }
    for (; i < pairs; ++i) {
        const float x0 = v[2 * i], x1 = v[2 * i + 1];
        v[2 * i] = x0 * cos[i] - x1 * sin[i];
        v[2 * i + 1] = x0 * sin[i] + x1 * cos[i];
    }
}

// Elements i .. i + 3 of a cached row (i a multiple of 4, so 4 Q8_0 values
// never straddle two blocks), as floats: scalar::cache_value's values.
inline float32x4_t load_cache4(const uint8_t* row, size_t i, CacheFormat format) noexcept {
    if (format == CacheFormat::f16) return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(row + 2 * i)));
    if (format == CacheFormat::q8_0) {
        const uint8_t* block = row + i / 32 * 34;
        int32_t four;  // exactly 4 bytes: the last 4 of a row end its buffer
        std::memcpy(&four, block + 2 + i % 32, sizeof four);
        const int16x8_t q16 = vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(four)));
        const float32x4_t q = vcvtq_f32_s32(vmovl_s16(vget_low_s16(q16)));
        return vmulq_n_f32(q, fp16_to_fp32(load_u16(block)));
    }
    return vreinterpretq_f32_u8(vld1q_u8(row + 4 * i));
}

// See kernels::scalar::attend.
inline void attend(const AttentionHead& a) noexcept {
    const size_t hd = a.head_dim, vector_end = hd / 4 * 4;
    for (size_t p = 0; p < a.n_positions; ++p) {
        const uint8_t* key = a.key(p);
        for (size_t g = 0; g < a.group; ++g) {
            const float* q = a.q + g * hd;
            float32x4_t acc = vdupq_n_f32(0.0f);
            for (size_t i = 0; i < vector_end; i += 4)
                acc = vfmaq_f32(acc, vld1q_f32(q + i), load_cache4(key, i, a.format));
            float dot = vaddvq_f32(acc);
            for (size_t i = vector_end; i < hd; ++i)
                dot = std::fma(q[i], scalar::cache_value(key, i, a.format), dot);
            a.scores[g * a.n_positions + p] = dot * a.scale;
        }
    }
    for (size_t g = 0; g < a.group; ++g) softmax(a.scores + g * a.n_positions, a.n_positions);
    std::memset(a.out, 0, a.group * hd * sizeof(float));
    for (size_t p = 0; p < a.n_positions; ++p) {
        const uint8_t* value = a.value(p);
        for (size_t i = 0; i < vector_end; i += 4) {
            const float32x4_t v = load_cache4(value, i, a.format);
            for (size_t g = 0; g < a.group; ++g) {
                float* out = a.out + g * hd + i;
                vst1q_f32(out, vfmaq_n_f32(vld1q_f32(out), v, a.scores[g * a.n_positions + p]));
            }
        }
        for (size_t i = vector_end; i < hd; ++i) {
            const float v = scalar::cache_value(value, i, a.format);
            for (size_t g = 0; g < a.group; ++g)
                a.out[g * hd + i] += a.scores[g * a.n_positions + p] * v;
        }
    }
}

inline uint64_t sum_bytes(const uint8_t* begin, size_t n) noexcept {
    uint64x2_t acc0 = vdupq_n_u64(0), acc1 = vdupq_n_u64(0), acc2 = vdupq_n_u64(0),
               acc3 = vdupq_n_u64(0);
    for (const uint8_t* p = begin; p + 64 <= begin + n; p += 64) {
        acc0 = vaddq_u64(acc0, vreinterpretq_u64_u8(vld1q_u8(p)));
        acc1 = vaddq_u64(acc1, vreinterpretq_u64_u8(vld1q_u8(p + 16)));
        acc2 = vaddq_u64(acc2, vreinterpretq_u64_u8(vld1q_u8(p + 32)));
        acc3 = vaddq_u64(acc3, vreinterpretq_u64_u8(vld1q_u8(p + 48)));
    }
    return vaddvq_u64(vaddq_u64(vaddq_u64(acc0, acc1), vaddq_u64(acc2, acc3)));
}

}  // namespace neon_common

#define SMOL_ARM_TILES_NS neon
#define SMOL_ARM_TILES_DOTPROD 0
#define SMOL_ARM_TILES_I8MM 0
#include "detail/arm_tiles.inc"

}  // namespace kernels
SMOL_NAMESPACE_END

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("dotprod"))), apply_to = function)
#else
#pragma GCC push_options
// Every CPU with SDOT implements ARMv8.2-A, and GCC's arm_neon.h declares
// vdotq_s32 for "arch=armv8.2-a+dotprod": a caller may inline it only with a
// superset of that target.
#pragma GCC target("arch=armv8.2-a+dotprod")
#endif
SMOL_NAMESPACE_BEGIN
namespace kernels {
#define SMOL_ARM_TILES_NS dotprod
#define SMOL_ARM_TILES_DOTPROD 1
#define SMOL_ARM_TILES_I8MM 0
#include "detail/arm_tiles.inc"
}  // namespace kernels
SMOL_NAMESPACE_END
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("dotprod,i8mm"))), apply_to = function)
#else
#pragma GCC push_options
// As dotprod's region: GCC's arm_neon.h declares vmmlaq_s32 for
// "arch=armv8.2-a+i8mm"; every CPU with SMMLA has SDOT too.
#pragma GCC target("arch=armv8.2-a+dotprod+i8mm")
#endif
SMOL_NAMESPACE_BEGIN
namespace kernels {
#define SMOL_ARM_TILES_NS i8mm
#define SMOL_ARM_TILES_DOTPROD 1
#define SMOL_ARM_TILES_I8MM 1
#include "detail/arm_tiles.inc"
}  // namespace kernels
SMOL_NAMESPACE_END
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

// ---- the aarch64 kernel sets: one function per level builds all of it --------------
// (stored-row tiles, and converted rows for every type's long batches that
// converts: detail/arm_converted_tiles.inc, arm_k32_tiles.inc; no packed or
// interleaved rows yet)

SMOL_NAMESPACE_BEGIN
namespace kernels {
namespace detail {

// What the levels share: the quantizers, float ops and float tiles of neon_common.
inline KernelSet arm_common(CpuLevel level) noexcept {
    KernelSet set;
    set.level = level;
    set.quantize_q8_k32 = &neon_common::quantize_row_q8_k32;
    // One scale per 256 values: the scalar quantizer serves every level.
    set.quantize_q8_k = &scalar::quantize_row_q8_k_activations;
    set.quantize_q8_0 = &neon_common::quantize_row_q8_0;
    set.of(GGMLType::F32).tiles = tile_row(
        [](auto n) { return &neon_common::tile_float<GGMLType::F32, decltype(n)::value>; });
    set.of(GGMLType::F16).tiles = tile_row(
        [](auto n) { return &neon_common::tile_float<GGMLType::F16, decltype(n)::value>; });
    set.of(GGMLType::BF16).tiles = tile_row(
        [](auto n) { return &neon_common::tile_float<GGMLType::BF16, decltype(n)::value>; });
    set.dot_f32 = &neon_common::dot_f32;
    set.rmsnorm = &neon_common::rmsnorm;
    set.swiglu = &neon_common::swiglu;
    set.softmax = &neon_common::softmax;
    set.rope = &neon_common::rope;
    set.attend = &neon_common::attend;
    set.sum_bytes = &neon_common::sum_bytes;
    return set;
}

// A level's set: the shared float ops, its integer tiles (use_tiles of the
// level's namespace, detail/arm_tiles.inc) and the speed settings it uses.
inline KernelSet arm_level_set(CpuLevel level, void (*use_tiles)(KernelSet&),
                               const KernelParams& params) noexcept {
    KernelSet set = arm_common(level);
    set.params = decode_chunks_only(params);
    use_tiles(set);
    return set;
}

}  // namespace detail

namespace neon {
inline KernelSet make_kernel_set(const KernelParams& params = {}) noexcept {
    return kernels::detail::arm_level_set(CpuLevel::neon, &use_tiles, params);
}
}  // namespace neon

namespace dotprod {
inline KernelSet make_kernel_set(const KernelParams& params = {}) noexcept {
    return kernels::detail::arm_level_set(CpuLevel::dotprod, &use_tiles, params);
}
}  // namespace dotprod

namespace i8mm {
inline KernelSet make_kernel_set(const KernelParams& params = {}) noexcept {
    return kernels::detail::arm_level_set(CpuLevel::i8mm, &use_tiles, params);
}
}  // namespace i8mm

}  // namespace kernels
SMOL_NAMESPACE_END

#endif  // aarch64
