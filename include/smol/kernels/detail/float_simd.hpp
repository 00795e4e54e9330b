// The AArch64 float kernels, written with xsimd's neon64 batches: dot products
// of F32/F16/BF16 weight rows with F32 activations (as tiles, like the
// quantized kernels), dot_f32, rmsnorm, swiglu and softmax. NEON is part of
// the AArch64 baseline, so xsimd (which picks its architecture from the
// unit's predefined macros) serves every aarch64 unit and every aarch64
// level; on x86-64 it could not (see kernels/x86.hpp), so it is used only
// here. The fp16/bf16 -> f32 widening uses NEON intrinsics (xsimd 8.1 has
// no half-precision batch).
//
// Results differ from the scalar reference only by float summation order
// (several accumulators, then a horizontal sum).
#pragma once

#include "../../detail/abi.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../../core/fp16.hpp"
#include "../../quant/types.hpp"
#include "../cpu.hpp"
#include "../scalar.hpp"
#include "../../detail/fma.hpp"

#if defined(SMOL_ARCH_AARCH64)
#include <arm_neon.h>
#include <xsimd/xsimd.hpp>

SMOL_NAMESPACE_BEGIN
namespace kernels {
namespace neon_common {

using FloatArch = xsimd::neon64;

using FloatBatch = xsimd::batch<float, FloatArch>;
constexpr size_t kFloatLanes = FloatBatch::size;

// kFloatLanes weights of the given type, widened to float.
template <GGMLType type>
inline FloatBatch load_widened(const uint8_t* p) noexcept {
    if constexpr (type == GGMLType::F32) {
        return FloatBatch::load_unaligned(reinterpret_cast<const float*>(p));
    } else if constexpr (type == GGMLType::F16) {
        uint16_t halves[4];
        std::memcpy(halves, p, sizeof halves);
        return FloatBatch(vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(halves))));
    } else {  // BF16: the top half of a float
        uint16_t halves[4];
        std::memcpy(halves, p, sizeof halves);
        return FloatBatch(vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(halves), 16)));
    }
}

// F32/F16/BF16 weight rows x F32 activation rows (see kernels::TileKernel).
template <GGMLType type, int n_cols>
void tile_float(const uint8_t* w, size_t w_row_bytes, size_t n_rows, const uint8_t* x,
                size_t x_row_bytes, size_t cols, float* y, size_t y_stride) {
    constexpr size_t element_bytes = type == GGMLType::F32 ? 4 : 2;
    const size_t vector_end = cols / kFloatLanes * kFloatLanes;
    for (size_t r = 0; r < n_rows; ++r) {
        const uint8_t* row = w + r * w_row_bytes;
        FloatBatch acc[n_cols];
        for (int c = 0; c < n_cols; ++c) acc[c] = FloatBatch(0.0f);
        for (size_t i = 0; i < vector_end; i += kFloatLanes) {
            const FloatBatch weights = load_widened<type>(row + i * element_bytes);
            for (int c = 0; c < n_cols; ++c) {
                const float* xc = reinterpret_cast<const float*>(x + size_t(c) * x_row_bytes);
                acc[c] = xsimd::fma(weights, FloatBatch::load_unaligned(xc + i), acc[c]);
            }
        }
        for (int c = 0; c < n_cols; ++c) {
            const float* xc = reinterpret_cast<const float*>(x + size_t(c) * x_row_bytes);
            float sum = xsimd::hadd(acc[c]);
            for (size_t i = vector_end; i < cols; ++i)
                sum =
                    smol::detail::fma(scalar::widen_one<type>(row + i * element_bytes), xc[i], sum);
            y[size_t(c) * y_stride + r] = sum;
        }
    }
}

inline float dot_f32(const float* a, const float* b, size_t n) noexcept {
    FloatBatch acc0(0.0f), acc1(0.0f), acc2(0.0f), acc3(0.0f);
    size_t i = 0;
    for (; i + 4 * kFloatLanes <= n; i += 4 * kFloatLanes) {
        acc0 =
            xsimd::fma(FloatBatch::load_unaligned(a + i), FloatBatch::load_unaligned(b + i), acc0);
        acc1 = xsimd::fma(FloatBatch::load_unaligned(a + i + kFloatLanes),
                          FloatBatch::load_unaligned(b + i + kFloatLanes), acc1);
        acc2 = xsimd::fma(FloatBatch::load_unaligned(a + i + 2 * kFloatLanes),
                          FloatBatch::load_unaligned(b + i + 2 * kFloatLanes), acc2);
        acc3 = xsimd::fma(FloatBatch::load_unaligned(a + i + 3 * kFloatLanes),
                          FloatBatch::load_unaligned(b + i + 3 * kFloatLanes), acc3);
    }
    for (; i + kFloatLanes <= n; i += kFloatLanes) {
        acc0 =
            xsimd::fma(FloatBatch::load_unaligned(a + i), FloatBatch::load_unaligned(b + i), acc0);
    }
    float sum = xsimd::hadd((acc0 + acc1) + (acc2 + acc3));
    for (; i < n; ++i) sum += a[i] * b[i];
    return sum;
}

// Sum of squares in float lanes (the scalar reference sums in double; for the
// n of a hidden state the difference is ~1e-7 relative).
inline void rmsnorm(const float* x, const float* weight, float* out, size_t n, float eps) noexcept {
    FloatBatch acc0(0.0f), acc1(0.0f);
    size_t i = 0;
    for (; i + 2 * kFloatLanes <= n; i += 2 * kFloatLanes) {
        const FloatBatch v0 = FloatBatch::load_unaligned(x + i);
        const FloatBatch v1 = FloatBatch::load_unaligned(x + i + kFloatLanes);
        acc0 = xsimd::fma(v0, v0, acc0);
        acc1 = xsimd::fma(v1, v1, acc1);
    }
    double sum_squares = double(xsimd::hadd(acc0 + acc1));
    for (; i < n; ++i) sum_squares += double(x[i]) * double(x[i]);
    const float mean = float(sum_squares / double(n ? n : 1));
    const FloatBatch scale(1.0f / std::sqrt(mean + eps));
    i = 0;
    for (; i + kFloatLanes <= n; i += kFloatLanes) {
        const FloatBatch v = FloatBatch::load_unaligned(x + i) * scale;
        (v * FloatBatch::load_unaligned(weight + i)).store_unaligned(out + i);
    }
    const float scale_scalar = 1.0f / std::sqrt(mean + eps);
    for (; i < n; ++i) out[i] = (x[i] * scale_scalar) * weight[i];
}

inline void swiglu(const float* gate, const float* up, float* out, size_t n) noexcept {
    const FloatBatch one(1.0f);
    size_t i = 0;
    for (; i + kFloatLanes <= n; i += kFloatLanes) {
        const FloatBatch g = FloatBatch::load_unaligned(gate + i);
        const FloatBatch silu = g / (one + xsimd::exp(-g));
        (silu * FloatBatch::load_unaligned(up + i)).store_unaligned(out + i);
    }
    for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

inline void softmax(float* x, size_t n) noexcept {
    if (n == 0) return;
    float max_value = x[0];
    size_t i = 0;
    if (n >= kFloatLanes) {
        FloatBatch max_lanes = FloatBatch::load_unaligned(x);
        for (i = kFloatLanes; i + kFloatLanes <= n; i += kFloatLanes) {
            max_lanes = xsimd::max(max_lanes, FloatBatch::load_unaligned(x + i));
        }
        alignas(64) float lanes[kFloatLanes];
        max_lanes.store_aligned(lanes);
        for (float v : lanes) max_value = std::fmax(max_value, v);
    }
    for (; i < n; ++i) max_value = std::fmax(max_value, x[i]);

    const FloatBatch max_batch(max_value);
    FloatBatch sum_lanes(0.0f);
    i = 0;
    for (; i + kFloatLanes <= n; i += kFloatLanes) {
        const FloatBatch e = xsimd::exp(FloatBatch::load_unaligned(x + i) - max_batch);
        e.store_unaligned(x + i);
        sum_lanes += e;
    }
    double sum = double(xsimd::hadd(sum_lanes));
    for (; i < n; ++i) {
        x[i] = std::exp(x[i] - max_value);
        sum += x[i];
    }
    const FloatBatch inverse(float(1.0 / sum));
    i = 0;
    for (; i + kFloatLanes <= n; i += kFloatLanes) {
        (FloatBatch::load_unaligned(x + i) * inverse).store_unaligned(x + i);
    }
    const float inverse_scalar = float(1.0 / sum);
    for (; i < n; ++i) x[i] *= inverse_scalar;
}

}  // namespace neon_common
}  // namespace kernels
SMOL_NAMESPACE_END

#endif  // SMOL_ARCH_AARCH64
