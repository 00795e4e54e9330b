// The ggml tensor type ids as GGUF files store them, with their block geometry.
// Knowing a type's geometry (elements per block, bytes per block) is enough to
// bounds-check and view a tensor; whether smol can *compute* with it is a
// separate question answered by the kernels (see is_supported_weight_type).
#pragma once

#include "../detail/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

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

SMOL_NAMESPACE_END
