// The kernels' weight-type table: per type smol computes with (the list
// WeightTypes, quant/types.hpp) one WeightTraits entry, built on the reference
// codec of quant/reference.hpp (RowCodec: block struct, quantize / dequantize
// rows), adding, as named fields, the activation format the kernels want, the
// scalar reference dot product, and the long-batch conversion rule. Everything
// that asks "which types can the model use, and how" asks this table, through
// visit_weight_type<WeightTraits> at compile time or kWeightTypes at run time.
//
// Batches of at least convert_min_tokens tokens multiply K-quant rows
// converted to 8 bits (kernels/scalar.hpp, "long batches"; the thresholds are
// the golden engine's); converted_dot_reference is their spec.
//
// What each CPU level has per type (stored-row tiles of its own or the scalar
// spec, packed, converted and interleaved rows) is its make_kernel_set's
// business; kernels::kernel_table_text(set) prints it from the built set (the
// load log shows the line of the level a model runs, and tests/test_kernels.cpp
// pins every level's row). A level without converted rows for a type
// multiplies it as stored at every batch size (its results then differ from
// the levels that convert by the conversion's rounding, for long batches only).
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
#include "scalar_k32.hpp"

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
template <class Block>
inline float reference_dot_legacy32(const uint8_t* w, const uint8_t* x, size_t cols) noexcept {
    return kernels::scalar::dot_legacy32_q8k32<Block>(w, reinterpret_cast<const BlockQ8K32*>(x),
                                                      cols / QK8_0);
}
template <float (*dot)(const uint8_t*, const BlockQ8K*, size_t)>
inline float reference_dot_q8k(const uint8_t* w, const uint8_t* x, size_t cols) noexcept {
    return dot(w, reinterpret_cast<const BlockQ8K*>(x), cols / QK_K);
}
template <void (*convert)(const uint8_t*, kernels::scalar::ConvertedBlock&), size_t block_bytes>
inline float reference_dot_converted(const uint8_t* w, const uint8_t* x, size_t cols) noexcept {
    return kernels::scalar::dot_converted_q8k32<convert, block_bytes>(
        w, reinterpret_cast<const BlockQ8K32*>(x), cols / QK_K);
}

// The conversion fields of a type without long-batch conversion.
struct NoConversion {
    static constexpr size_t convert_min_tokens = 0;
    static constexpr ReferenceDot converted_dot_reference = nullptr;
};

}  // namespace detail

// One entry per WeightTypes type: its codec (RowCodec: type, Block, quantize,
// dequantize), then what the kernels add, each a named field:
//   activation               the format its matrices' inputs are quantized to
//   dot_reference            the scalar dot with that format: the spec every
//                            level's tiles are tested against
//   convert_min_tokens       batches of at least this many tokens multiply rows
//                            converted to 8 bits (0: never) ...
//   converted_dot_reference  ... whose dot is this (kernels/scalar.hpp, "long batches")
// A conversion rule needs its reference dot, and only it has one: checked by
// test_kernels ("every type's converted rule has its reference dot"), not by a
// static_assert, since comparing a function's address with nullptr is not a
// constant expression under -fsanitize=undefined (the sanitizer CI stage).
template <GGMLType type>
struct WeightTraits;

template <>
struct WeightTraits<GGMLType::F32> : RowCodec<GGMLType::F32>, detail::NoConversion {
    static constexpr ActivationType activation = ActivationType::F32;
    static constexpr ReferenceDot dot_reference = &detail::reference_dot_f32;
};
template <>
struct WeightTraits<GGMLType::F16> : RowCodec<GGMLType::F16>, detail::NoConversion {
    static constexpr ActivationType activation = ActivationType::F32;
    static constexpr ReferenceDot dot_reference = &detail::reference_dot_f16;
};
template <>
struct WeightTraits<GGMLType::BF16> : RowCodec<GGMLType::BF16>, detail::NoConversion {
    static constexpr ActivationType activation = ActivationType::F32;
    static constexpr ReferenceDot dot_reference = &detail::reference_dot_bf16;
};
template <>
struct WeightTraits<GGMLType::Q8_0> : RowCodec<GGMLType::Q8_0>, detail::NoConversion {
    static constexpr ActivationType activation = ActivationType::Q8_0;
    static constexpr ReferenceDot dot_reference = &detail::reference_dot_q8_0;
};
// The K-quants convert from the golden engine's thresholds: 32 tokens for
// Q4_K / Q5_K, 64 for Q6_K.
template <>
struct WeightTraits<GGMLType::Q4_K> : RowCodec<GGMLType::Q4_K> {
    static constexpr ActivationType activation = ActivationType::Q8_K32;
    static constexpr ReferenceDot dot_reference = &detail::reference_dot_q4k;
    static constexpr size_t convert_min_tokens = 32;
    static constexpr ReferenceDot converted_dot_reference =
        &detail::reference_dot_converted<&kernels::scalar::convert_k4_block<false, BlockQ4K>,
                                         sizeof(BlockQ4K)>;
};
template <>
struct WeightTraits<GGMLType::Q5_K> : RowCodec<GGMLType::Q5_K> {
    static constexpr ActivationType activation = ActivationType::Q8_K32;
    static constexpr ReferenceDot dot_reference = &detail::reference_dot_q5k;
    static constexpr size_t convert_min_tokens = 32;
    static constexpr ReferenceDot converted_dot_reference =
        &detail::reference_dot_converted<&kernels::scalar::convert_k4_block<true, BlockQ5K>,
                                         sizeof(BlockQ5K)>;
};
template <>
struct WeightTraits<GGMLType::Q6_K> : RowCodec<GGMLType::Q6_K> {
    static constexpr ActivationType activation = ActivationType::Q8_K32;
    static constexpr ReferenceDot dot_reference = &detail::reference_dot_q6k;
    static constexpr size_t convert_min_tokens = 64;
    static constexpr ReferenceDot converted_dot_reference =
        &detail::reference_dot_converted<&kernels::scalar::convert_q6k_block, sizeof(BlockQ6K)>;
};

// The 32-weight formats meet the K-quants' Q8_K32 activations (a bf16-rounded
// scale per 32 values: the golden engine's x86 Q8_2; they thus need rows of a
// multiple of 256, as SmolLM3's are); Q2_K, Q3_K and IQ4_XS meet Q8_K (one
// scale per 256), as the golden engine's x86 kernels do. Q2_K, Q3_K and IQ4_XS
// convert rows from 32 tokens on as that engine does (kernels/scalar.hpp, "long
// batches of Q2_K, Q3_K, IQ4_XS"); so do Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL
// (the engine's Q8_0_R8 / Q8_1_R8 rows), whose conversion keeps the values:
// the float order is the stored rows' already (kernels/scalar.hpp,
// convert_legacy32_blocks), the converted form is a level's speed choice.
namespace detail {
// The long-batch rule of a 32-weight format.
template <class Block>
struct Legacy32Conversion {
    static constexpr size_t convert_min_tokens = 32;
    static constexpr ReferenceDot converted_dot_reference =
        &reference_dot_converted<&kernels::scalar::convert_legacy32_blocks<Block>,
                                 8 * sizeof(Block)>;
};
// The entry of a 32-weight format (Q8_K32 activations).
template <GGMLType id, class Block>
struct Legacy32Traits : RowCodec<id>, Legacy32Conversion<Block> {
    static constexpr ActivationType activation = ActivationType::Q8_K32;
    static constexpr ReferenceDot dot_reference = &reference_dot_legacy32<Block>;
};
// The entry of Q2_K, Q3_K or IQ4_XS (Q8_K activations, rows converted from 32 tokens).
template <GGMLType id, float (*dot)(const uint8_t*, const BlockQ8K*, size_t),
          size_t min_tokens = 32>
struct Q8KTraits : RowCodec<id> {
    static constexpr ActivationType activation = ActivationType::Q8_K;
    static constexpr ReferenceDot dot_reference = &reference_dot_q8k<dot>;
    static constexpr size_t convert_min_tokens = min_tokens;
    static constexpr ReferenceDot converted_dot_reference =
        &reference_dot_q8k<&kernels::scalar::dot_converted_q8k_stored<id>>;
};
}  // namespace detail
template <>
struct WeightTraits<GGMLType::Q4_0> : detail::Legacy32Traits<GGMLType::Q4_0, BlockQ4_0> {};
template <>
struct WeightTraits<GGMLType::Q4_1> : detail::Legacy32Traits<GGMLType::Q4_1, BlockQ4_1> {};
template <>
struct WeightTraits<GGMLType::Q5_0> : detail::Legacy32Traits<GGMLType::Q5_0, BlockQ5_0> {};
template <>
struct WeightTraits<GGMLType::Q5_1> : detail::Legacy32Traits<GGMLType::Q5_1, BlockQ5_1> {};
template <>
struct WeightTraits<GGMLType::IQ4_NL> : detail::Legacy32Traits<GGMLType::IQ4_NL, BlockIQ4NL> {};
template <>
struct WeightTraits<GGMLType::Q2_K>
    : detail::Q8KTraits<GGMLType::Q2_K, &kernels::scalar::dot_q2k_q8k> {};
template <>
struct WeightTraits<GGMLType::Q3_K>
    : detail::Q8KTraits<GGMLType::Q3_K, &kernels::scalar::dot_q3k_q8k> {};
template <>
struct WeightTraits<GGMLType::IQ4_XS>
    : detail::Q8KTraits<GGMLType::IQ4_XS, &kernels::scalar::dot_iq4xs_q8k> {};

// The codebook types as the K-quants above (Q8_K activations, converted rows),
// from the golden engine's thresholds: 32 tokens, IQ2_S 16.
namespace detail {
template <GGMLType id, size_t min_tokens = 32>
struct CodebookTraits : Q8KTraits<id, &kernels::scalar::dot_codebook_q8k<id>, min_tokens> {};
}  // namespace detail
template <>
struct WeightTraits<GGMLType::IQ2_XXS> : detail::CodebookTraits<GGMLType::IQ2_XXS> {};
template <>
struct WeightTraits<GGMLType::IQ2_XS> : detail::CodebookTraits<GGMLType::IQ2_XS> {};
template <>
struct WeightTraits<GGMLType::IQ2_S> : detail::CodebookTraits<GGMLType::IQ2_S, 16> {};
template <>
struct WeightTraits<GGMLType::IQ3_XXS> : detail::CodebookTraits<GGMLType::IQ3_XXS> {};
template <>
struct WeightTraits<GGMLType::IQ3_S> : detail::CodebookTraits<GGMLType::IQ3_S> {};
template <>
struct WeightTraits<GGMLType::IQ1_S> : detail::CodebookTraits<GGMLType::IQ1_S> {};
template <>
struct WeightTraits<GGMLType::IQ1_M> : detail::CodebookTraits<GGMLType::IQ1_M> {};

namespace detail {
// The types that meet Q8_K activations and convert long batches to the same
// rows (kernels/scalar_k32.hpp: convert_q8k_block), which every level's
// converted Q8_K tiles serve.
using Q8KFamily =
    TypeList<GGMLType::Q2_K, GGMLType::Q3_K, GGMLType::IQ4_XS, GGMLType::IQ2_XXS, GGMLType::IQ2_XS,
             GGMLType::IQ2_S, GGMLType::IQ3_XXS, GGMLType::IQ3_S, GGMLType::IQ1_S, GGMLType::IQ1_M>;
}  // namespace detail

static_assert(detail::every_type_has<WeightTraits>(WeightTypes{}),
              "a WeightTypes type has no WeightTraits entry (the checklist: quant/types.hpp)");

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
