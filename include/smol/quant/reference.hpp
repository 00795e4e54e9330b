// Reference (scalar) dequantization and quantization of the weight formats smol
// reads and writes: F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K (and Q8_K, the
// activation format) both ways; Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K,
// IQ4_XS and the codebook types (IQ2_*, IQ3_*, IQ1_*) are read only (their files come from other
// quantizers: smol computes with them but does not write them). The readable spec the SIMD kernels
// are tested against:
//   quant/dequantize.hpp   the per-type dequantize_row_*: what each block's bytes mean;
//                          RowCodec<type>, the table that names them per type (the
//                          read-only types' entries)
//   quant/quantize.hpp     the per-type quantize_row_* and QuantizeEffort
//   here                   the written types' RowCodec entries, and the entries that
//                          read the table: quantize_row(type, src, dst, n, effort),
//                          dequantize_row(type, src, dst, n), can_quantize,
//                          can_dequantize
// Their internals (the k-quant scale search, rounding) live in quant/detail/.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "../error.hpp"
#include "blocks.hpp"
#include "dequantize.hpp"
#include "detail/checks.hpp"
#include "quantize.hpp"
#include "types.hpp"

SMOL_NAMESPACE_BEGIN

namespace detail {
// The RowCodec entries of the types smol writes (quant/dequantize.hpp says what
// the table is and holds the read-only types' entries).
// A RowCodec entry from the two per-type functions (quantize takes no effort).
template <GGMLType id, class BlockT, void (*quantize_fn)(const float*, BlockT*, size_t),
          void (*dequantize_fn)(const BlockT*, float*, size_t)>
struct RowCodecOf {
    static constexpr GGMLType type = id;
    static constexpr bool quantizes = true;
    using Block = BlockT;
    static void quantize(const float* src, void* dst, size_t n, QuantizeEffort) {
        quantize_fn(src, static_cast<BlockT*>(dst), n);
    }
    static void dequantize(const void* src, float* dst, size_t n) {
        dequantize_fn(static_cast<const BlockT*>(src), dst, n);
    }
};
// The same for Q4_K / Q5_K, whose quantizers take a QuantizeEffort.
template <GGMLType id, class BlockT,
          void (*quantize_fn)(const float*, BlockT*, size_t, QuantizeEffort),
          void (*dequantize_fn)(const BlockT*, float*, size_t)>
struct RowCodecWithEffort {
    static constexpr GGMLType type = id;
    static constexpr bool quantizes = true;
    using Block = BlockT;
    static void quantize(const float* src, void* dst, size_t n, QuantizeEffort effort) {
        quantize_fn(src, static_cast<BlockT*>(dst), n, effort);
    }
    static void dequantize(const void* src, float* dst, size_t n) {
        dequantize_fn(static_cast<const BlockT*>(src), dst, n);
    }
};
}  // namespace detail

template <>
struct RowCodec<GGMLType::F32>
    : detail::RowCodecOf<GGMLType::F32, float, &quantize_row_f32, &dequantize_row_f32> {};
template <>
struct RowCodec<GGMLType::F16>
    : detail::RowCodecOf<GGMLType::F16, uint16_t, &quantize_row_f16, &dequantize_row_f16> {};
template <>
struct RowCodec<GGMLType::BF16>
    : detail::RowCodecOf<GGMLType::BF16, uint16_t, &quantize_row_bf16, &dequantize_row_bf16> {};
template <>
struct RowCodec<GGMLType::Q8_0>
    : detail::RowCodecOf<GGMLType::Q8_0, BlockQ8_0, &quantize_row_q8_0, &dequantize_row_q8_0> {};
template <>
struct RowCodec<GGMLType::Q4_K>
    : detail::RowCodecWithEffort<GGMLType::Q4_K, BlockQ4K, &quantize_row_q4_k,
                                 &dequantize_row_q4_k> {};
template <>
struct RowCodec<GGMLType::Q5_K>
    : detail::RowCodecWithEffort<GGMLType::Q5_K, BlockQ5K, &quantize_row_q5_k,
                                 &dequantize_row_q5_k> {};
template <>
struct RowCodec<GGMLType::Q6_K>
    : detail::RowCodecOf<GGMLType::Q6_K, BlockQ6K, &quantize_row_q6_k, &dequantize_row_q6_k> {};
template <>
struct RowCodec<GGMLType::Q8_K>
    : detail::RowCodecOf<GGMLType::Q8_K, BlockQ8K, &quantize_row_q8_k, &dequantize_row_q8_k> {};

static_assert(detail::every_type_has<RowCodec>(WeightTypes{}),
              "a WeightTypes type has no RowCodec entry (the checklist: quant/types.hpp)");

namespace detail {
// A TypeList with one more type at its end (declared only: read through decltype).
template <GGMLType extra, GGMLType... types>
TypeList<types..., extra> with_type(TypeList<types...>);
}  // namespace detail

// The types the reference converts: the weight types, in their order, and Q8_K
// (the activation format, for tests), so a new weight type is listed once.
using ReferenceTypes = decltype(detail::with_type<GGMLType::Q8_K>(WeightTypes{}));

// True for the types quantize_row writes: Q4_K, Q5_K, Q6_K, Q8_0, F16, BF16, F32
// (and Q8_K, the activation format).
inline bool can_quantize(GGMLType type) noexcept {
    bool quantizes = false;
    visit_weight_type<RowCodec, ReferenceTypes>(
        type, [&](auto codec) { quantizes = decltype(codec)::quantizes; });
    return quantizes;
}

// True for the types dequantize_row handles: every weight type, and Q8_K.
inline bool can_dequantize(GGMLType type) noexcept {
    return visit_weight_type<RowCodec, ReferenceTypes>(type, [](auto) {});
}

// Quantizes n floats (n a multiple of the type's block size) into row_bytes(type, n)
// bytes at dst. Throws smol::Error(unsupported) naming the type for other types.
inline void quantize_row(GGMLType type, const float* src, void* dst, size_t n,
                         QuantizeEffort effort = QuantizeEffort::standard) {
    if (!can_quantize(type))
        detail::fail(ErrorKind::unsupported,
                     "quantize_row: type " + type_name(type) + " is not supported");
    detail::require_block_multiple(type, n, "quantize_row");
    visit_weight_type<RowCodec, ReferenceTypes>(
        type, [&](auto codec) { decltype(codec)::quantize(src, dst, n, effort); });
}

// Dequantizes n elements (n a multiple of the type's block size) from src to dst.
// Throws smol::Error(unsupported) naming the type otherwise (invalid_argument
// for a bad n).
inline void dequantize_row(GGMLType type, const void* src, float* dst, size_t n) {
    if (!can_dequantize(type))
        detail::fail(ErrorKind::unsupported,
                     "dequantize_row: type " + type_name(type) + " is not supported");
    detail::require_block_multiple(type, n, "dequantize_row");
    visit_weight_type<RowCodec, ReferenceTypes>(type, [&](auto codec) {
        using Codec = decltype(codec);
        // general.alignment = 1 is legal GGUF, so src may sit where the block
        // struct (or float) cannot be read in place: copy whole blocks to aligned
        // storage, a few KiB at a time, and dequantize from there.
        if (reinterpret_cast<uintptr_t>(src) % alignof(typename Codec::Block) == 0) {
            Codec::dequantize(src, dst, n);
            return;
        }
        const TypeTraits traits = type_traits(type);
        alignas(16) uint8_t aligned[4096];
        const size_t blocks_per_copy = sizeof aligned / traits.type_size;
        const uint8_t* bytes = static_cast<const uint8_t*>(src);
        for (size_t block = 0, n_blocks = n / traits.block_size; block < n_blocks;
             block += blocks_per_copy) {
            const size_t count = std::min(blocks_per_copy, n_blocks - block);
            std::memcpy(aligned, bytes + block * traits.type_size, count * traits.type_size);
            Codec::dequantize(aligned, dst + block * traits.block_size, count * traits.block_size);
        }
    });
}

SMOL_NAMESPACE_END
