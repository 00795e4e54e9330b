// The formats matmul reads its activations (the input vectors) in, and the
// block layout of Q8_K32, the one smol defines itself. ISA-independent: the
// quantizers that write these formats live in scalar.hpp / x86.hpp / arm.hpp.
//
//   ActivationType::F32     F32/F16/BF16 weights: plain floats.
//   ActivationType::Q8_0    Q8_0 weights: ggml's Q8_0 (per 32 values an fp16 d, int8 q).
//   ActivationType::Q8_K    Q2_K, Q3_K, IQ4_XS weights: ggml's Q8_K (BlockQ8K, quant/blocks.hpp:
//                           per 256 values one float d = max|x| / 127, q = round_half_even(x *
//                           (127 / max|x|)), and the 16 sums of q over each 16 values), the
//                           golden engine's activations for these types on x86.
//   ActivationType::Q8_K32  Q4_K/Q5_K/Q6_K and the 32-weight formats (Q4_0 to IQ4_NL): per
//                           256 values (one weight
//                           super-block) 8 float scales, one per 32 values, 256 int8
//                           q and the 16 sums of q over each 16 values.
//
// Why Q8_K32 and not ggml's Q8_K (one scale per 256 values): with one scale
// per 256, a single large activation coarsens the rounding of 255 others, and
// the fixture goldens' engine (ik_llama.cpp, whose AVX2 K-quant kernels read
// 32-value activation blocks) is then out of reach: last-position logits at
// cosine 0.9989 and 2.03% of the range on 3 of 12 prompts. 32-value blocks
// meet every golden tolerance. The scale per 32 is rounded to bf16 (its value
// kept as a float), as the reference engine's quantizer does, so our codes
// are the ones it computes.
//
// Q8_K32 rule, per 32 values x[0..31] (a "sub-block", s = 0..7 in the block):
//   d[s] = bf16_round(max|x| / 127)  (round to nearest even; 0 for an all-zero sub-block)
//   q[i] = clamp(round_half_even(x[i] * (1 / d[s])), -127, 127)  (0 when d[s] = 0)
//   bsums[g] = sum of q over values 16g .. 16g + 15
// A value is d[s] * q[i]. The K-quant dot products need the per-32 sums of q
// for Q4_K/Q5_K's mins (bsums[2s] + bsums[2s + 1]) and the per-16 sums for
// Q6_K's -32 offset (one weight scale per 16 values).
#pragma once

#include "../detail/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../core/fp16.hpp"
#include "../quant/blocks.hpp"

SMOL_NAMESPACE_BEGIN

enum class ActivationType : uint8_t { F32, Q8_0, Q8_K32, Q8_K };

struct BlockQ8K32 {
    float d[QK_K / 32];        // scale of each 32 values (bf16-representable)
    int8_t qs[QK_K];           // quantized values
    int16_t bsums[QK_K / 16];  // sum of qs over each 16 values
};
static_assert(sizeof(BlockQ8K32) == 320, "Q8_K32 block must be 320 bytes");

inline const char* activation_type_name(ActivationType type) noexcept {
    switch (type) {
        case ActivationType::F32:
            return "F32";
        case ActivationType::Q8_0:
            return "Q8_0";
        case ActivationType::Q8_K32:
            return "Q8_K32";
        case ActivationType::Q8_K:
            return "Q8_K";
    }
    return "?";
}

// Values per block: 1, 32, 256, 256.
inline size_t activation_block_size(ActivationType type) noexcept {
    switch (type) {
        case ActivationType::Q8_0:
            return QK8_0;
        case ActivationType::Q8_K32:
        case ActivationType::Q8_K:
            return QK_K;
        default:
            return 1;
    }
}

// Bytes of `cols` values (cols a multiple of the block size).
inline size_t activation_row_bytes(ActivationType type, size_t cols) noexcept {
    switch (type) {
        case ActivationType::Q8_0:
            return cols / QK8_0 * sizeof(BlockQ8_0);
        case ActivationType::Q8_K32:
            return cols / QK_K * sizeof(BlockQ8K32);
        case ActivationType::Q8_K:
            return cols / QK_K * sizeof(BlockQ8K);
        default:
            return cols * sizeof(float);
    }
}

// The Q8_K32 scale of a sub-block whose largest magnitude is max_abs.
inline float q8k32_scale(float max_abs) noexcept {
    return bf16_to_fp32(fp32_to_bf16(max_abs / 127.0f));
}

// The values one activation row (as the quantizers write it) stands for.
inline void dequantize_activation_row(ActivationType type, const void* row, float* out,
                                      size_t cols) noexcept {
    switch (type) {
        case ActivationType::F32:
            std::memcpy(out, row, cols * sizeof(float));
            break;
        case ActivationType::Q8_0: {
            const BlockQ8_0* blocks = static_cast<const BlockQ8_0*>(row);
            for (size_t i = 0; i < cols; ++i)
                out[i] = fp16_to_fp32(blocks[i / QK8_0].d) * float(blocks[i / QK8_0].qs[i % QK8_0]);
            break;
        }
        case ActivationType::Q8_K32: {
            const BlockQ8K32* blocks = static_cast<const BlockQ8K32*>(row);
            for (size_t i = 0; i < cols; ++i) {
                const BlockQ8K32& block = blocks[i / QK_K];
                out[i] = block.d[(i % QK_K) / 32] * float(block.qs[i % QK_K]);
            }
            break;
        }
        case ActivationType::Q8_K: {
            const BlockQ8K* blocks = static_cast<const BlockQ8K*>(row);
            for (size_t i = 0; i < cols; ++i)
                out[i] = blocks[i / QK_K].d * float(blocks[i / QK_K].qs[i % QK_K]);
            break;
        }
    }
}

SMOL_NAMESPACE_END
