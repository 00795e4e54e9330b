// Block layouts of the quantized formats smol computes with. These are the
// byte layouts GGUF files store (the ggml "k-quants" and Q8_0), so a tensor's
// bytes can be reinterpreted as an array of blocks with no copy.
//
// Super-block formats (QK_K = 256 weights per block):
//   Q4_K: w = d * sc[j] * q - dmin * m[j], 8 sub-blocks of 32, 6-bit sc/m packed in 12 bytes,
//         4-bit q; 4.5 bits per weight.
//   Q5_K: as Q4_K with a 5th bit per weight in qh; 5.5 bits per weight.
//   Q6_K: w = d * sc[j] * (q - 32), 16 sub-blocks of 16, int8 scales, 6-bit q split into
//         4 low bits (ql) and 2 high bits (qh); 6.5625 bits per weight.
//   Q8_K: ggml's activation format (float d per 256, int8 q, per-16 sums of q). smol's
//         K-quant kernels use a finer one, BlockQ8K32 (kernels/activations.hpp: a scale
//         per 32 values), which the golden tolerances need; Q8_K stays for files and tests.
//   Q2_K: w = d * (sc[g] & 15) * q - dmin * (sc[g] >> 4), 16 groups of 16, 2-bit q; 2.625 bits.
//   Q3_K: w = d * (sc[g] - 32) * (q - 4 * !hbit), 16 groups of 16, 6-bit scales packed in 12
//         bytes, 2 low bits in qs and a high bit in hmask; 3.4375 bits per weight.
//   IQ4_XS: w = d * (ls[s] - 32) * kIQ4Values[q], 8 sub-blocks of 32, 6-bit ls split in
//         scales_l (4 bits) and scales_h (2 bits), 4-bit q indexing a 16-value table; 4.25 bits.
//   IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M: rows of a fixed grid per 4 or 8
//         weights, with signs, and odd scales; 1.56-3.44 bits (quant/codebook.hpp).
// Block formats (32 weights per block; byte j of qs holds weight j in its low
// nibble and weight j + 16 in its high one):
//   Q8_0: w = d * q, fp16 d, int8 q.
//   Q4_0: w = d * (q - 8), 4-bit q.            Q4_1: w = d * q + m.
//   Q5_0: w = d * (q - 16), 5-bit q (bit j of qh is weight j's 5th bit).   Q5_1: w = d * q + m.
//   IQ4_NL: w = d * kIQ4Values[q], 4-bit q.
#pragma once

#include "../detail/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "types.hpp"

SMOL_NAMESPACE_BEGIN

constexpr int QK_K = 256;  // weights per k-quant super-block
constexpr int QK8_0 = 32;  // weights per Q8_0 block
constexpr int K_SCALE_SIZE = 12;

struct BlockQ4K {
    uint16_t d;                    // fp16 super-block scale for the sub-block scales
    uint16_t dmin;                 // fp16 super-block scale for the sub-block mins
    uint8_t scales[K_SCALE_SIZE];  // 8 x (6-bit scale, 6-bit min), packed
    uint8_t qs[QK_K / 2];  // 4-bit quants: byte i holds weights i (low) and i+32 (high) per 64
};

struct BlockQ5K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];  // 5th bit of every weight
    uint8_t qs[QK_K / 2];  // low 4 bits, laid out as in Q4_K
};

struct BlockQ6K {
    uint8_t ql[QK_K / 2];      // low 4 bits
    uint8_t qh[QK_K / 4];      // high 2 bits
    int8_t scales[QK_K / 16];  // 16 sub-block scales
    uint16_t d;                // fp16 super-block scale
};

struct BlockQ8K {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];  // sum of qs over each group of 16
};

struct BlockQ8_0 {
    uint16_t d;  // fp16 scale
    int8_t qs[QK8_0];
};

// The 32-weight 4- and 5-bit formats: fp16 d (and m), the low 4 bits of weight
// j in the low nibble of qs[j % 16] (j < 16) or its high nibble (j >= 16).
struct BlockQ4_0 {
    uint16_t d;
    uint8_t qs[QK8_0 / 2];
};

struct BlockQ4_1 {
    uint16_t d;
    uint16_t m;  // fp16 offset added to every weight
    uint8_t qs[QK8_0 / 2];
};

struct BlockQ5_0 {
    uint16_t d;
    uint8_t qh[4];  // bit j (little-endian 32-bit word): the 5th bit of weight j
    uint8_t qs[QK8_0 / 2];
};

struct BlockQ5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[QK8_0 / 2];
};

struct BlockIQ4NL {
    uint16_t d;
    uint8_t qs[QK8_0 / 2];  // indices into kIQ4Values
};

struct BlockQ2K {
    uint8_t scales[QK_K / 16];  // per group of 16: scale (low nibble), min (high nibble)
    uint8_t qs[QK_K / 4];  // 2-bit q: byte 32h + l holds weight 128h + 32k + l in bits 2k, 2k+1
    uint16_t d;            // fp16 scale of the scales
    uint16_t dmin;         // fp16 scale of the mins
};

struct BlockQ3K {
    uint8_t hmask[QK_K / 8];  // bit 4h + k of byte l: high bit of weight 128h + 32k + l
    uint8_t qs[QK_K / 4];     // low 2 bits, laid out as in Q2_K
    uint8_t scales[12];       // 16 6-bit scales (detail::q3k_scale)
    uint16_t d;
};

struct BlockIQ4XS {
    uint16_t d;
    uint16_t scales_h;            // bits 2s, 2s+1: high 2 bits of sub-block s's scale
    uint8_t scales_l[QK_K / 64];  // nibble s % 2 of byte s / 2: low 4 bits of sub-block s's scale
    uint8_t qs[QK_K / 2];         // 8 sub-blocks of 16 bytes, each laid out as an IQ4_NL block's
};

// The codebook formats (quant/codebook.hpp says what the fields mean).
struct BlockIQ2XXS {
    uint16_t d;
    uint8_t qs[QK_K / 4];  // per 32 weights: 4 grid rows (bytes), then 4 x 7-bit signs + scale
};
struct BlockIQ2XS {
    uint16_t d;
    uint8_t qs[QK_K / 4];       // per 8 weights a uint16: 9-bit grid row, 7-bit sign index
    uint8_t scales[QK_K / 32];  // 4-bit scale per 16 weights
};
struct BlockIQ2S {
    uint16_t d;
    uint8_t qs[QK_K / 8];       // per 8 weights: low 8 bits of the grid row
    uint8_t signs[QK_K / 8];    // per 8 weights: one sign bit each
    uint8_t qh[QK_K / 32];      // per 32 weights: the rows' high 2 bits
    uint8_t scales[QK_K / 32];  // 4-bit scale per 16 weights
};
struct BlockIQ3XXS {
    uint16_t d;
    uint8_t qs[QK_K / 4];                 // per 4 weights a grid row
    uint8_t signs_scales[QK_K / 32 * 4];  // per 32 weights: 4 x 7-bit signs + 4-bit scale
};
struct BlockIQ3S {
    uint16_t d;
    uint8_t qs[QK_K / 4];       // per 4 weights: low 8 bits of the grid row
    uint8_t qh[QK_K / 32];      // per 32 weights: the rows' 9th bits
    uint8_t signs[QK_K / 8];    // one sign bit per weight
    uint8_t scales[QK_K / 64];  // 4-bit scale per 32 weights
};
struct BlockIQ1S {
    uint16_t d;
    uint8_t qs[QK_K / 8];       // per 8 weights: low 8 bits of the grid row
    uint8_t qh[QK_K / 32 * 2];  // per 32 weights a uint16: 4 x 3 high bits, scale, shift sign
};
struct BlockIQ1M {
    uint8_t qs[QK_K / 8];       // per 8 weights: low 8 bits of the grid row
    uint8_t qh[QK_K / 16];      // per 8 weights a nibble: 3 high bits, shift sign
    uint8_t scales[QK_K / 32];  // 4 uint16: 3-bit scale per 16 weights; d in the top nibbles
};

// The 16 values the IQ4 formats' 4-bit indices stand for (ggml's
// kvalues_iq4nl: a non-uniform grid, denser near zero). Hostile blocks cannot
// index past it: every index is a nibble of a block byte (b & 15 or b >> 4,
// and the SIMD kernels mask to the low 4 bits before their byte shuffle), so
// any byte a file holds names one of the 16 entries. The other block fields
// of these formats index nothing: they are scales and bits multiplied in.
constexpr int8_t kIQ4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};

// The one place the structs meet the GGUF geometry table (quant/types.hpp):
// each struct is exactly its type's block, with no padding, so a tensor's
// bytes are an array of them.
namespace detail {
template <class Block>
constexpr bool block_matches(GGMLType type, size_t values) {
    return type_traits(type).type_size == sizeof(Block) && type_traits(type).block_size == values;
}
}  // namespace detail
static_assert(detail::block_matches<BlockQ4K>(GGMLType::Q4_K, QK_K) &&
                  sizeof(BlockQ4K) == 2 * sizeof(uint16_t) + K_SCALE_SIZE + QK_K / 2,
              "BlockQ4K must be the 144-byte Q4_K block");
static_assert(detail::block_matches<BlockQ5K>(GGMLType::Q5_K, QK_K) &&
                  sizeof(BlockQ5K) == 2 * sizeof(uint16_t) + K_SCALE_SIZE + QK_K / 8 + QK_K / 2,
              "BlockQ5K must be the 176-byte Q5_K block");
static_assert(detail::block_matches<BlockQ6K>(GGMLType::Q6_K, QK_K) &&
                  sizeof(BlockQ6K) == QK_K / 2 + QK_K / 4 + QK_K / 16 + sizeof(uint16_t),
              "BlockQ6K must be the 210-byte Q6_K block");
static_assert(detail::block_matches<BlockQ8K>(GGMLType::Q8_K, QK_K),
              "BlockQ8K must be the 292-byte Q8_K block");
static_assert(detail::block_matches<BlockQ8_0>(GGMLType::Q8_0, QK8_0) &&
                  sizeof(BlockQ8_0) == sizeof(uint16_t) + QK8_0,
              "BlockQ8_0 must be the 34-byte Q8_0 block");
static_assert(detail::block_matches<BlockQ4_0>(GGMLType::Q4_0, QK8_0) &&
                  detail::block_matches<BlockQ4_1>(GGMLType::Q4_1, QK8_0) &&
                  detail::block_matches<BlockQ5_0>(GGMLType::Q5_0, QK8_0) &&
                  detail::block_matches<BlockQ5_1>(GGMLType::Q5_1, QK8_0) &&
                  detail::block_matches<BlockIQ4NL>(GGMLType::IQ4_NL, QK8_0),
              "the 32-weight blocks must be ggml's Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL blocks");
static_assert(detail::block_matches<BlockQ2K>(GGMLType::Q2_K, QK_K) &&
                  detail::block_matches<BlockQ3K>(GGMLType::Q3_K, QK_K) &&
                  detail::block_matches<BlockIQ4XS>(GGMLType::IQ4_XS, QK_K),
              "the Q2_K, Q3_K and IQ4_XS structs must be their 84-, 110- and 136-byte blocks");
static_assert(
    detail::block_matches<BlockIQ2XXS>(GGMLType::IQ2_XXS, QK_K) &&
        detail::block_matches<BlockIQ2XS>(GGMLType::IQ2_XS, QK_K) &&
        detail::block_matches<BlockIQ2S>(GGMLType::IQ2_S, QK_K) &&
        detail::block_matches<BlockIQ3XXS>(GGMLType::IQ3_XXS, QK_K) &&
        detail::block_matches<BlockIQ3S>(GGMLType::IQ3_S, QK_K) &&
        detail::block_matches<BlockIQ1S>(GGMLType::IQ1_S, QK_K) &&
        detail::block_matches<BlockIQ1M>(GGMLType::IQ1_M, QK_K),
    "the codebook structs must be ggml's 66-, 74-, 82-, 98-, 110-, 50- and 56-byte blocks");
static_assert(detail::block_matches<uint16_t>(GGMLType::F16, 1) &&
                  detail::block_matches<uint16_t>(GGMLType::BF16, 1) &&
                  detail::block_matches<float>(GGMLType::F32, 1),
              "the float types' elements disagree with the GGUF type table");

// Blocks can sit at any byte address: general.alignment = 1 is legal GGUF, and
// then a tensor (and each of its blocks) may start at an odd offset, where
// reading a BlockQ4K's uint16_t fields through a struct pointer is undefined
// behaviour. Kernels therefore address blocks as bytes: a field's bytes are at
// block + offsetof(BlockX, field), and its 16-bit scalars are read with load_u16 (load_u32
// for 4 packed bytes).
inline uint16_t load_u16(const uint8_t* p) noexcept {
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline uint32_t load_u32(const uint8_t* p) noexcept {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

namespace detail {

// Q4_K / Q5_K pack eight 6-bit scales and eight 6-bit mins into 12 bytes:
//   bytes 0-3:  scale[0..3] in bits 0-5; bits 6-7 hold bits 4-5 of scale[4..7]
//   bytes 4-7:  min[0..3]   in bits 0-5; bits 6-7 hold bits 4-5 of min[4..7]
//   bytes 8-11: low 4 bits of scale[4..7] (low nibble) and of min[4..7] (high nibble)
inline void unpack_scale_min_k4(const uint8_t* packed, int sub_block, uint8_t& scale,
                                uint8_t& min) noexcept {
    const int j = sub_block;
    if (j < 4) {
        scale = packed[j] & 63;
        min = packed[j + 4] & 63;
    } else {
        scale = uint8_t((packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4));
        min = uint8_t((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4));
    }
}

inline void pack_scales_mins_k4(const uint8_t scales[8], const uint8_t mins[8],
                                uint8_t packed[K_SCALE_SIZE]) noexcept {
    for (int j = 0; j < 4; ++j) {
        packed[j] = uint8_t((scales[j] & 63) | ((scales[j + 4] >> 4) << 6));
        packed[j + 4] = uint8_t((mins[j] & 63) | ((mins[j + 4] >> 4) << 6));
        packed[j + 8] = uint8_t((scales[j + 4] & 0x0F) | ((mins[j + 4] & 0x0F) << 4));
    }
}

// Q3_K packs sixteen 6-bit scales into 12 bytes: scale g's low 4 bits are the
// low (g < 8) or high (g >= 8) nibble of byte g % 8, its high 2 bits are bits
// 2 (g / 4), 2 (g / 4) + 1 of byte 8 + g % 4; the value is that minus 32.
inline int q3k_scale(const uint8_t* packed, int g) noexcept {
    const int low = g < 8 ? (packed[g] & 0x0F) : (packed[g - 8] >> 4);
    const int high = (packed[8 + g % 4] >> (2 * (g / 4))) & 3;
    return (low | (high << 4)) - 32;
}

// IQ4_XS's scale of sub-block s (0..7), in [-32, 31].
inline int iq4xs_scale(const uint8_t* scales_l, uint16_t scales_h, int s) noexcept {
    const int low = (scales_l[s / 2] >> (4 * (s % 2))) & 0x0F;
    const int high = (scales_h >> (2 * s)) & 3;
    return (low | (high << 4)) - 32;
}

// The 4-bit index of weight j (0..31) of a 32-weight block's 16 qs bytes.
inline int nibble_of(const uint8_t* qs, int j) noexcept {
    return j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
}

// The 5th bit of weight j of a Q5_0 / Q5_1 block.
inline int q5_high_bit(const uint8_t* qh, int j) noexcept {
    return (qh[j / 8] >> (j % 8)) & 1;
}

// The 2-bit field of weight i (0..255) of a Q2_K / Q3_K block's qs.
inline int k2_bits(const uint8_t* qs, int i) noexcept {
    return (qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
}

// Q3_K's high bit of weight i.
inline int q3k_high_bit(const uint8_t* hmask, int i) noexcept {
    return (hmask[i % 32] >> (4 * (i / 128) + (i % 128) / 32)) & 1;
}

}  // namespace detail

SMOL_NAMESPACE_END
