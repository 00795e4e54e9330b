// The kernels' weight-type table: per type smol computes with (the list
// WeightTypes, quant/types.hpp) one WeightTraits entry, built on the reference
// codec of quant/reference.hpp (RowCodec: block struct, quantize / dequantize
// rows), adding the activation format the kernels want, the scalar reference
// dot product, and the long-batch conversion rule. Everything that asks "which
// types can the model use, and how" asks this table, through
// visit_weight_type<WeightTraits> at compile time or kWeightTypes at run time.
//
//   type   block (values, bytes)   activations  reference dot    long batches (tokens)
//   F32    float      (1, 4)       F32          dot_f32_unaligned  -
//   F16    uint16_t   (1, 2)       F32          dot_f16_f32        -
//   BF16   uint16_t   (1, 2)       F32          dot_bf16_f32       -
//   Q8_0   BlockQ8_0  (32, 34)     Q8_0         dot_q8_0_q8_0      -
//   Q4_K   BlockQ4K   (256, 144)   Q8_K32       dot_q4k_q8k32      converted from 32
//   Q5_K   BlockQ5K   (256, 176)   Q8_K32       dot_q5k_q8k32      converted from 32
//   Q6_K   BlockQ6K   (256, 210)   Q8_K32       dot_q6k_q8k32      converted from 64
//
// Batches of at least convert_min_tokens tokens multiply K-quant rows
// converted to 8 bits (kernels/scalar.hpp, "long batches"; the thresholds are
// the golden engine's); converted_dot_reference is their spec.
//
// The kernels each CPU level has per type (kernel_set.hpp: TypeKernels; each
// level's make_kernel_set builds its column; tests/test_kernels.cpp checks
// this table against the built sets). Every level has stored-row tiles for
// every type; beyond those:
//   level     packed (mat-mat)   converted (long batches)   interleaved (decode)
//   scalar    -                  Q4_K Q5_K Q6_K             -
//   avx2      Q4_K               Q4_K Q5_K                  -
//   avxvnni   -                  Q4_K Q5_K Q6_K             -
//   avx512    Q4_K               Q4_K Q5_K Q6_K             Q4_K Q5_K
//   amx       Q4_K               Q4_K Q5_K Q6_K (AMX)       Q4_K Q5_K
//   neon      -                  -                          -
//   dotprod   -                  -                          -
// A level without converted rows for a type multiplies it as stored at every
// batch size (its results then differ from the levels that convert by the
// conversion's rounding, for long batches only).
#pragma once

#include "../detail/abi.hpp"

#include <array>
#include <cstddef>
#include <cstdint>

#include "../quant/blocks.hpp"
#include "../quant/reference.hpp"
#include "../quant/types.hpp"
#include "activations.hpp"
#include "scalar.hpp"

SMOL_NAMESPACE_BEGIN

// dot(one weight row of `cols` values at any byte address, one activation row
// as the quantizer wrote it).
using ReferenceDot = float (*)(const uint8_t* w, const uint8_t* x, size_t cols);

namespace detail {

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

// A WeightTraits entry: the codec, then what the kernels add.
template <GGMLType type, ActivationType activation_format, ReferenceDot dot,
          size_t min_tokens_to_convert = 0, ReferenceDot converted_dot = nullptr>
struct WeightTraitsOf : RowCodec<type> {
    static constexpr ActivationType activation = activation_format;
    static constexpr ReferenceDot dot_reference = dot;
    // Batches of at least this many tokens multiply converted rows (0: never) ...
    static constexpr size_t convert_min_tokens = min_tokens_to_convert;
    // ... whose dot is this (kernels/scalar.hpp, "long batches").
    static constexpr ReferenceDot converted_dot_reference = converted_dot;
    // A conversion rule needs its reference dot, and only it has one: checked by
    // test_kernels ("every type's converted rule has its reference dot"), not by a
    // static_assert, since comparing a function's address with nullptr is not a
    // constant expression under -fsanitize=undefined (the sanitizer CI stage).
};

}  // namespace detail

template <GGMLType type>
struct WeightTraits;

template <>
struct WeightTraits<GGMLType::F32>
    : detail::WeightTraitsOf<GGMLType::F32, ActivationType::F32, &detail::reference_dot_f32> {};
template <>
struct WeightTraits<GGMLType::F16>
    : detail::WeightTraitsOf<GGMLType::F16, ActivationType::F32, &detail::reference_dot_f16> {};
template <>
struct WeightTraits<GGMLType::BF16>
    : detail::WeightTraitsOf<GGMLType::BF16, ActivationType::F32, &detail::reference_dot_bf16> {};
template <>
struct WeightTraits<GGMLType::Q8_0>
    : detail::WeightTraitsOf<GGMLType::Q8_0, ActivationType::Q8_0, &detail::reference_dot_q8_0> {};
template <>
struct WeightTraits<GGMLType::Q4_K>
    : detail::WeightTraitsOf<
          GGMLType::Q4_K, ActivationType::Q8_K32, &detail::reference_dot_q4k, 32,
          &detail::reference_dot_converted<&kernels::scalar::convert_k4_block<false, BlockQ4K>,
                                           sizeof(BlockQ4K)>> {};
template <>
struct WeightTraits<GGMLType::Q5_K>
    : detail::WeightTraitsOf<
          GGMLType::Q5_K, ActivationType::Q8_K32, &detail::reference_dot_q5k, 32,
          &detail::reference_dot_converted<&kernels::scalar::convert_k4_block<true, BlockQ5K>,
                                           sizeof(BlockQ5K)>> {};
template <>
struct WeightTraits<GGMLType::Q6_K>
    : detail::WeightTraitsOf<
          GGMLType::Q6_K, ActivationType::Q8_K32, &detail::reference_dot_q6k, 64,
          &detail::reference_dot_converted<&kernels::scalar::convert_q6k_block, sizeof(BlockQ6K)>> {
};

// One WeightTraits entry as run-time values (for lookups by a type known only
// at run time).
struct WeightTypeInfo {
    GGMLType type;
    ActivationType activation;
    ReferenceDot dot_reference;
    size_t convert_min_tokens;
    ReferenceDot converted_dot_reference;
};

namespace detail {
template <GGMLType... types>
constexpr std::array<WeightTypeInfo, sizeof...(types)> weight_type_infos(TypeList<types...>) {
    return {{{types, WeightTraits<types>::activation, WeightTraits<types>::dot_reference,
              WeightTraits<types>::convert_min_tokens,
              WeightTraits<types>::converted_dot_reference}...}};
}
}  // namespace detail

// WeightTraits of every WeightTypes entry, in that order (weight_type_index).
inline constexpr std::array<WeightTypeInfo, kWeightTypeCount> kWeightTypes =
    detail::weight_type_infos(WeightTypes{});

// The entry for `type`, or nullptr when smol cannot compute with it.
inline const WeightTypeInfo* weight_type_info(GGMLType type) noexcept {
    const int index = weight_type_index(type);
    return index < 0 ? nullptr : &kWeightTypes[size_t(index)];
}

SMOL_NAMESPACE_END
