// The weight types smol computes with, one entry each: geometry (checked
// against the block structs), the activation format the kernels want, and the
// scalar reference dot product. Everything that asks "which types can the
// model use, and how" asks this table; the per-ISA tile kernels for each type
// sit in each level's KernelSet (kernel_set.hpp) at weight_type_index(type).
//
//   type   block values  block bytes  activations  reference dot
//   F32          1            4        F32          dot_f32_unaligned
//   F16          1            2        F32          dot_f16_f32
//   BF16         1            2        F32          dot_bf16_f32
//   Q8_0        32           34        Q8_0         dot_q8_0_q8_0
//   Q4_K       256          144        Q8_K32       dot_q4k_q8k32
//   Q5_K       256          176        Q8_K32       dot_q5k_q8k32
//   Q6_K       256          210        Q8_K32       dot_q6k_q8k32
//
// Batches of at least convert_min_tokens tokens multiply K-quant rows
// converted to 8 bits (kernels/scalar.hpp, "long batches": 32 for Q4_K/Q5_K,
// 64 for Q6_K, as the golden engine does); converted_dot_reference is their spec.
#pragma once

#include "../detail/abi.hpp"

#include <cstddef>
#include <cstdint>

#include "../quant/blocks.hpp"
#include "../quant/types.hpp"
#include "activations.hpp"
#include "scalar.hpp"

SMOL_NAMESPACE_BEGIN

// dot(one weight row of `cols` values at any byte address, one activation row
// in its natural layout).
using ReferenceDot = float (*)(const uint8_t* w, const uint8_t* x, size_t cols);

struct WeightTypeInfo {
    GGMLType type;
    size_t block_values;         // values per block
    size_t block_bytes;          // bytes per block
    ActivationType activation;   // the format activations are quantized to for this type
    ReferenceDot dot_reference;  // the scalar spec (kernels/scalar.hpp)
    // Batches of at least this many tokens use converted rows (0: never) ...
    size_t convert_min_tokens = 0;
    // ... whose dot is this (kernels/scalar.hpp, "long batches").
    ReferenceDot converted_dot_reference = nullptr;
};

namespace detail {

template <class Block>
constexpr bool block_matches(GGMLType type, size_t values) {
    return type_traits(type).type_size == sizeof(Block) && type_traits(type).block_size == values;
}
static_assert(block_matches<BlockQ4K>(GGMLType::Q4_K, QK_K),
              "BlockQ4K disagrees with the GGUF type table");
static_assert(block_matches<BlockQ5K>(GGMLType::Q5_K, QK_K),
              "BlockQ5K disagrees with the GGUF type table");
static_assert(block_matches<BlockQ6K>(GGMLType::Q6_K, QK_K),
              "BlockQ6K disagrees with the GGUF type table");
static_assert(block_matches<BlockQ8_0>(GGMLType::Q8_0, QK8_0),
              "BlockQ8_0 disagrees with the GGUF type table");
static_assert(block_matches<uint16_t>(GGMLType::F16, 1) &&
                  block_matches<uint16_t>(GGMLType::BF16, 1) &&
                  block_matches<float>(GGMLType::F32, 1),
              "float types disagree with the GGUF type table");
static_assert(sizeof(BlockQ4K) == 2 * sizeof(uint16_t) + K_SCALE_SIZE + QK_K / 2,
              "BlockQ4K has padding");
static_assert(sizeof(BlockQ5K) == 2 * sizeof(uint16_t) + K_SCALE_SIZE + QK_K / 8 + QK_K / 2,
              "BlockQ5K has padding");
static_assert(sizeof(BlockQ6K) == QK_K / 2 + QK_K / 4 + QK_K / 16 + sizeof(uint16_t),
              "BlockQ6K has padding");
static_assert(sizeof(BlockQ8_0) == sizeof(uint16_t) + QK8_0, "BlockQ8_0 has padding");

inline float reference_dot_f32(const uint8_t* w, const uint8_t* x, size_t cols) noexcept {
    return kernels::scalar::dot_f32_unaligned(w, reinterpret_cast<const float*>(x), cols);
}
inline float reference_dot_f16(const uint8_t* w, const uint8_t* x, size_t cols) noexcept {
    return kernels::scalar::dot_f16_f32(w, reinterpret_cast<const float*>(x), cols);
}
inline float reference_dot_bf16(const uint8_t* w, const uint8_t* x, size_t cols) noexcept {
    return kernels::scalar::dot_bf16_f32(w, reinterpret_cast<const float*>(x), cols);
}
inline float reference_dot_q8_0(const uint8_t* w, const uint8_t* x, size_t cols) noexcept {
    return kernels::scalar::dot_q8_0_q8_0(w, reinterpret_cast<const BlockQ8_0*>(x), cols / QK8_0);
}
inline float reference_dot_q4k(const uint8_t* w, const uint8_t* x, size_t cols) noexcept {
    return kernels::scalar::dot_q4k_q8k32(w, reinterpret_cast<const BlockQ8K32*>(x), cols / QK_K);
}
inline float reference_dot_q5k(const uint8_t* w, const uint8_t* x, size_t cols) noexcept {
    return kernels::scalar::dot_q5k_q8k32(w, reinterpret_cast<const BlockQ8K32*>(x), cols / QK_K);
}
inline float reference_dot_q6k(const uint8_t* w, const uint8_t* x, size_t cols) noexcept {
    return kernels::scalar::dot_q6k_q8k32(w, reinterpret_cast<const BlockQ8K32*>(x), cols / QK_K);
}
template <void (*convert)(const uint8_t*, kernels::scalar::ConvertedBlock&), size_t block_bytes>
inline float reference_dot_converted(const uint8_t* w, const uint8_t* x, size_t cols) noexcept {
    return kernels::scalar::dot_converted_q8k32<convert, block_bytes>(
        w, reinterpret_cast<const BlockQ8K32*>(x), cols / QK_K);
}

}  // namespace detail

constexpr size_t kWeightTypeCount = 7;

inline constexpr WeightTypeInfo kWeightTypes[kWeightTypeCount] = {
    {GGMLType::F32, 1, 4, ActivationType::F32, &detail::reference_dot_f32},
    {GGMLType::F16, 1, 2, ActivationType::F32, &detail::reference_dot_f16},
    {GGMLType::BF16, 1, 2, ActivationType::F32, &detail::reference_dot_bf16},
    {GGMLType::Q8_0, QK8_0, sizeof(BlockQ8_0), ActivationType::Q8_0, &detail::reference_dot_q8_0},
    {GGMLType::Q4_K, QK_K, sizeof(BlockQ4K), ActivationType::Q8_K32, &detail::reference_dot_q4k, 32,
     &detail::reference_dot_converted<&kernels::scalar::convert_k4_block<false, BlockQ4K>,
                                      sizeof(BlockQ4K)>},
    {GGMLType::Q5_K, QK_K, sizeof(BlockQ5K), ActivationType::Q8_K32, &detail::reference_dot_q5k, 32,
     &detail::reference_dot_converted<&kernels::scalar::convert_k4_block<true, BlockQ5K>,
                                      sizeof(BlockQ5K)>},
    {GGMLType::Q6_K, QK_K, sizeof(BlockQ6K), ActivationType::Q8_K32, &detail::reference_dot_q6k, 64,
     &detail::reference_dot_converted<&kernels::scalar::convert_q6k_block, sizeof(BlockQ6K)>},
};

// Position of `type` in kWeightTypes, or -1 when smol has no kernels for it.
constexpr int weight_type_index(GGMLType type) noexcept {
    for (size_t i = 0; i < kWeightTypeCount; ++i)
        if (kWeightTypes[i].type == type) return int(i);
    return -1;
}

// The entry for `type`, or nullptr when smol cannot compute with it.
inline const WeightTypeInfo* weight_type_info(GGMLType type) noexcept {
    const int index = weight_type_index(type);
    return index < 0 ? nullptr : &kWeightTypes[index];
}

inline bool is_supported_weight_type(GGMLType type) noexcept {
    return weight_type_index(type) >= 0;
}

SMOL_NAMESPACE_END
