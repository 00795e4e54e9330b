// The ggml tensor type ids as GGUF files store them, with their block geometry,
// and the list of the types smol computes with.
//
// Knowing a type's geometry (elements per block, bytes per block) is enough to
// bounds-check and view a tensor; whether smol can *compute* with it is the
// list WeightTypes. Every per-type table is one entry per type of that list,
// with named fields, reached through visit_weight_type (never a switch of its
// own), and each checks at compile time that every listed type has its entry
// (detail::every_type_has).
//
// Adding a weight type (the whole checklist):
//   1. quant/types.hpp          its id in WeightTypes (GGMLType and type_traits
//                               already hold every ggml type's geometry)
//   2. quant/blocks.hpp         the block struct as GGUF stores it, size asserted
//   3. quant/dequantize.hpp     its dequantize_row_* (the spec of its bytes), and
//      quant/reference.hpp      its RowCodec<type> entry (RowCodecReadOnly when smol
//                               does not write the type; a quantizer in quant/quantize.hpp
//                               when it does)
//   4. kernels/scalar.hpp       the scalar dot with its activation format (and a
//                               conversion for long batches, if it has one): the spec
//                               (kernels/scalar_k32.hpp for the Q8_K family: Q2_K, Q3_K,
//                               IQ4_XS)
//   5. kernels/weight_types.hpp its WeightTraits<type> entry (activation,
//                               dot_reference, convert_min_tokens, converted_dot_reference)
//   6. per CPU level, optional: tiles in kernels/detail/*_tiles.inc set by the
//      level's make_kernel_set (kernels/x86.hpp, kernels/arm.hpp); a level
//      without them runs the scalar spec (kernels::complete_with_spec), which
//      the load log's "kernels" line shows as "spec"
//   7. src/cuda/blocks.cuh      a cuda_detail::Format<type> entry: the device's
//      block decoding with matmul = true, or matmul = false (CPU only: a model
//      with such matrices stays on the CPU under Device::automatic)
//   8. kernels/activations.hpp  only for a new activation format (with its
//      quantizer in each KernelSet and QuantizedInput::quantize, kernels/kernels.hpp)
//   9. smol.hpp                 the new public names in its listing (test_surface)
// (Q4_0, the first type added on this list, touched 1-6 and 9: seven files of
// include/, plus src/cuda/blocks.cuh.)
// Tests: test_quant (the type table; round trips for the types smol writes;
// dequantization against the fixtures' independent dequant/ rows), test_kernels
// (kAllTypes and the per-level table: every level against the scalar spec),
// test_types (a type's reference-made fixture: tests/data/types/README.md and
// tools/reference-logits/make-type-fixtures.sh make it), test_cuda (kMatrixTypes,
// for a device matmul), fixture goldens from the reference engine; then the
// README's list of types and tools/smol-make-model's recipes.
// This header stays plain C++ (nvcc compiles it for the CUDA kernels).
#pragma once

#include "../detail/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

SMOL_NAMESPACE_BEGIN

enum class GGMLType : uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
};

struct TypeTraits {
    const char* name;     // nullptr for an id smol does not know
    uint32_t block_size;  // elements per block
    uint32_t type_size;   // bytes per block
};

constexpr TypeTraits type_traits(GGMLType type) noexcept {
    switch (type) {
        case GGMLType::F32:
            return {"F32", 1, 4};
        case GGMLType::F16:
            return {"F16", 1, 2};
        case GGMLType::Q4_0:
            return {"Q4_0", 32, 18};
        case GGMLType::Q4_1:
            return {"Q4_1", 32, 20};
        case GGMLType::Q5_0:
            return {"Q5_0", 32, 22};
        case GGMLType::Q5_1:
            return {"Q5_1", 32, 24};
        case GGMLType::Q8_0:
            return {"Q8_0", 32, 34};
        case GGMLType::Q8_1:
            return {"Q8_1", 32, 36};
        case GGMLType::Q2_K:
            return {"Q2_K", 256, 84};
        case GGMLType::Q3_K:
            return {"Q3_K", 256, 110};
        case GGMLType::Q4_K:
            return {"Q4_K", 256, 144};
        case GGMLType::Q5_K:
            return {"Q5_K", 256, 176};
        case GGMLType::Q6_K:
            return {"Q6_K", 256, 210};
        case GGMLType::Q8_K:
            return {"Q8_K", 256, 292};
        case GGMLType::IQ2_XXS:
            return {"IQ2_XXS", 256, 66};
        case GGMLType::IQ2_XS:
            return {"IQ2_XS", 256, 74};
        case GGMLType::IQ3_XXS:
            return {"IQ3_XXS", 256, 98};
        case GGMLType::IQ1_S:
            return {"IQ1_S", 256, 50};
        case GGMLType::IQ4_NL:
            return {"IQ4_NL", 32, 18};
        case GGMLType::IQ3_S:
            return {"IQ3_S", 256, 110};
        case GGMLType::IQ2_S:
            return {"IQ2_S", 256, 82};
        case GGMLType::IQ4_XS:
            return {"IQ4_XS", 256, 136};
        case GGMLType::I8:
            return {"I8", 1, 1};
        case GGMLType::I16:
            return {"I16", 1, 2};
        case GGMLType::I32:
            return {"I32", 1, 4};
        case GGMLType::I64:
            return {"I64", 1, 8};
        case GGMLType::F64:
            return {"F64", 1, 8};
        case GGMLType::IQ1_M:
            return {"IQ1_M", 256, 56};
        case GGMLType::BF16:
            return {"BF16", 1, 2};
    }
    return {nullptr, 0, 0};
}

inline bool is_known_type(GGMLType type) noexcept {
    return type_traits(type).name != nullptr;
}

inline std::string type_name(GGMLType type) {
    const TypeTraits traits = type_traits(type);
    if (traits.name) return traits.name;
    return "type#" + std::to_string(static_cast<uint32_t>(type));
}

// Bytes of one row of n elements; n must be a multiple of the block size.
inline size_t row_bytes(GGMLType type, size_t n) noexcept {
    const TypeTraits traits = type_traits(type);
    return n / traits.block_size * traits.type_size;
}

// A list of type ids, for the per-type tables to visit.
template <GGMLType... types>
struct TypeList {
    static constexpr size_t size = sizeof...(types);
};

// The types smol computes with (matrices and embedding tables), in the order of
// every per-type array (weight_type_index).
using WeightTypes =
    TypeList<GGMLType::F32, GGMLType::F16, GGMLType::BF16, GGMLType::Q8_0, GGMLType::Q4_K,
             GGMLType::Q5_K, GGMLType::Q6_K, GGMLType::Q4_0, GGMLType::Q4_1, GGMLType::Q5_0,
             GGMLType::Q5_1, GGMLType::IQ4_NL, GGMLType::Q2_K, GGMLType::Q3_K, GGMLType::IQ4_XS>;

namespace detail {

template <template <GGMLType> class Traits, class F, GGMLType... types>
constexpr bool visit_type_in(GGMLType type, F& f, TypeList<types...>) {
    return ((type == types ? (f(Traits<types>{}), true) : false) || ...);
}

template <template <GGMLType> class Traits, class F, GGMLType... types>
constexpr void for_each_type_in(F& f, TypeList<types...>) {
    (f(Traits<types>{}), ...);
}

// Whether Traits<t> is defined (specialized) for every t of the list: the
// per-type tables' compile-time completeness check.
template <class T, class = void>
struct is_complete : std::false_type {};
template <class T>
struct is_complete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};
template <template <GGMLType> class Traits, GGMLType... types>
constexpr bool every_type_has(TypeList<types...>) {
    return (is_complete<Traits<types>>::value && ...);
}

template <GGMLType... types>
constexpr int index_in(GGMLType type, TypeList<types...>) {
    int index = -1, i = 0;
    ((type == types ? (index = i, ++i) : ++i), ...);
    return index;
}

}  // namespace detail

// Calls f(Traits<type>{}) and returns true when `type` is one of List's types;
// returns false without calling f otherwise. Traits<t> must be default
// constructible for every t of List; f usually reads it through decltype.
template <template <GGMLType> class Traits, class List = WeightTypes, class F>
constexpr bool visit_weight_type(GGMLType type, F&& f) {
    return detail::visit_type_in<Traits>(type, f, List{});
}

// Calls f(Traits<t>{}) for every t of List, in order.
template <template <GGMLType> class Traits, class List = WeightTypes, class F>
constexpr void for_each_weight_type(F&& f) {
    detail::for_each_type_in<Traits>(f, List{});
}

// Position of `type` in WeightTypes, or -1 when smol does not compute with it.
constexpr int weight_type_index(GGMLType type) noexcept {
    return detail::index_in(type, WeightTypes{});
}
constexpr size_t kWeightTypeCount = WeightTypes::size;

inline bool is_supported_weight_type(GGMLType type) noexcept {
    return weight_type_index(type) >= 0;
}

// A bare type id as a Traits for visit_weight_type / for_each_weight_type.
template <GGMLType id>
struct TypeTag {
    static constexpr GGMLType type = id;
};

// The names of WeightTypes in order, comma separated: "F32, F16, ..." (messages).
inline std::string weight_type_names() {
    std::string names;
    for_each_weight_type<TypeTag>([&](auto tag) {
        if (!names.empty()) names += ", ";
        names += type_name(decltype(tag)::type);
    });
    return names;
}

SMOL_NAMESPACE_END
