// The codebook formats IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M:
// what their blocks' bytes mean, as one integer form shared by the
// dequantization, the scalar dot products, the long-batch conversion and the
// kernels. Part of the quant layer (quant/blocks.hpp has the structs).
//
// These formats store, per group of 8 (IQ2, IQ1) or 4 (IQ3) weights, an index
// into a fixed grid of value rows (quant/iq_grids.hpp), with sign bits (IQ2,
// IQ3) or a shift of +-1/8 (IQ1), and a small odd scale per 16 or 32 weights.
// Every weight of a block is then
//   weight i = D * scale[i / 16] * value[i]
// with value[i] a signed integer (|value| <= 62, IQ3_XXS), scale[g] = 2 s + 1 for
// the block's 3- or 4-bit field s, and D a float from the block's fp16 d:
//   type     bytes  grid rows x values  value                       scale per  D
//   IQ2_XXS   66     256 x 8 {8,25,43}   +-grid (7-bit sign index)   32         d / 8
//   IQ2_XS    74     512 x 8 {8,25,43}   +-grid (7-bit sign index)   16         d / 8
//   IQ2_S     82    1024 x 8 {8,25,43}   +-grid (a sign bit each)    16         d / 8
//   IQ3_XXS   98     256 x 4 {4..62}     +-grid (7-bit sign index)   32         d / 4
//   IQ3_S    110     512 x 4 {1..15}     +-grid (a sign bit each)    32         d
//   IQ1_S     50    2048 x 8 {-1,0,1}    8 grid +- 1 (a bit per 32)  32         d / 8
//   IQ1_M     56    2048 x 8 {-1,0,1}    8 grid +- 1 (a bit per 8)   16         d / 8
// (IQ1's d is split over the top nibbles of its four scale words.) A 7-bit sign
// index k stands for the sign byte k | parity(k) << 7 (an even number of minus
// signs per 8 weights: the formats' rule, so the tables need not be stored).
// The integer form is exact: D * scale * value is the gguf package's float
// dequantization bit for bit (each factor has few enough significant bits).
//
// Hostile blocks: every grid index is assembled from fields whose widths add
// up to exactly the grid's size (8 bits for 256 rows, 9 for 512, 10 for 1,024,
// 11 for 2,048), so any bytes a file holds name a row of the grid; the sign
// index is 7 bits into its 128 patterns (or a whole byte of bits); scales are
// 3- or 4-bit fields. Nothing else in these blocks indexes anything.
#pragma once

#include "../detail/abi.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../core/fp16.hpp"
#include "blocks.hpp"
#include "iq_grids.hpp"
#include "types.hpp"

SMOL_NAMESPACE_BEGIN

// A codebook block in its integer form (above): weight i = d * scale[i / 16] * value[i].
struct CodebookForm {
    float d;
    int16_t scale[QK_K / 16];
    int8_t value[QK_K];
};

namespace detail {

// A grid's rows as bytes: byte j of row r is value j of row r (int8).
template <size_t rows, size_t values>
using GridRows = std::array<std::array<int8_t, values>, rows>;

template <size_t values, size_t rows>
constexpr GridRows<rows, values> expand_grid(const uint16_t (&packed)[rows],
                                             const std::array<int8_t, 8>& map) {
    GridRows<rows, values> grid{};
    constexpr int bits = values == 8 ? 2 : 4;
    constexpr int mask = values == 8 ? 3 : 7;
    for (size_t r = 0; r < rows; ++r)
        for (size_t j = 0; j < values; ++j)
            grid[r][j] = map[size_t((packed[r] >> (bits * int(j))) & mask)];
    return grid;
}

// IQ1's grid holds 8 * {-1, 0, 1}, so that a weight's value is a grid byte + 1 or - 1.
inline constexpr GridRows<256, 8> kIQ2XXSGrid =
    expand_grid<8>(kIQ2XXSGridPacked, {8, 25, 43, 0, 0, 0, 0, 0});
inline constexpr GridRows<512, 8> kIQ2XSGrid =
    expand_grid<8>(kIQ2XSGridPacked, {8, 25, 43, 0, 0, 0, 0, 0});
inline constexpr GridRows<1024, 8> kIQ2SGrid =
    expand_grid<8>(kIQ2SGridPacked, {8, 25, 43, 0, 0, 0, 0, 0});
inline constexpr GridRows<256, 4> kIQ3XXSGrid =
    expand_grid<4>(kIQ3XXSGridPacked, {4, 12, 20, 28, 36, 44, 52, 62});
inline constexpr GridRows<512, 4> kIQ3SGrid =
    expand_grid<4>(kIQ3SGridPacked, {1, 3, 5, 7, 9, 11, 13, 15});
inline constexpr GridRows<2048, 8> kIQ1Grid =
    expand_grid<8>(kIQ1SGridPacked, {-8, 0, 8, 0, 0, 0, 0, 0});

// The sign byte of a 7-bit sign index: bit 7 makes the count of set bits even.
constexpr uint8_t even_signs(uint32_t index7) noexcept {
    uint32_t parity = 0;
    for (int b = 0; b < 7; ++b) parity ^= (index7 >> b) & 1;
    return uint8_t((index7 & 127) | (parity << 7));
}

inline int16_t odd_scale(uint32_t field) noexcept {
    return int16_t(2 * field + 1);
}

// How decode_codebook writes a block's values: grid rows with sign bits, and
// IQ1's rows shifted by +-1. This one is the spec; a kernel level may pass its
// own with the same results (kernels/detail/arm_codebook_tiles.inc: NEON), so
// the bit layout above is read in one place only.
struct ScalarCodebookRows {
    // n grid values with sign bits (bit j of signs negates value j) into out.
    template <size_t n>
    static void signed_values(const std::array<int8_t, n>& row, uint32_t signs,
                              int8_t* out) noexcept {
        for (size_t j = 0; j < n; ++j) out[j] = int8_t((signs >> j) & 1 ? -row[j] : row[j]);
    }
    // IQ1's 8 grid values shifted by delta (+-1) into out.
    static void shifted_values(const std::array<int8_t, 8>& row, int delta, int8_t* out) noexcept {
        for (int j = 0; j < 8; ++j) out[j] = int8_t(row[size_t(j)] + delta);
    }
};

}  // namespace detail

// The integer form of one block of `type` (a codebook type) at any byte address.
// Rows: detail::ScalarCodebookRows or a kernel's equivalent.
template <GGMLType type, class Rows = detail::ScalarCodebookRows>
inline void decode_codebook(const uint8_t* block, CodebookForm& out) noexcept {
    using namespace detail;
    if constexpr (type == GGMLType::IQ2_XXS) {
        out.d = 0.125f * fp16_to_fp32(load_u16(block));
        for (int s = 0; s < 8; ++s) {
            const uint8_t* group = block + 2 + 8 * s;
            const uint32_t signs_scale = load_u32(group + 4);
            out.scale[2 * s] = out.scale[2 * s + 1] = odd_scale(signs_scale >> 28);
            for (int l = 0; l < 4; ++l)
                Rows::signed_values(kIQ2XXSGrid[group[l]], even_signs(signs_scale >> (7 * l)),
                                    out.value + 32 * s + 8 * l);
        }
    } else if constexpr (type == GGMLType::IQ2_XS || type == GGMLType::IQ2_S) {
        constexpr bool xs = type == GGMLType::IQ2_XS;
        const uint8_t* scales = block + (xs ? 66 : 74);
        out.d = 0.125f * fp16_to_fp32(load_u16(block));
        for (int s = 0; s < 8; ++s) {
            out.scale[2 * s] = odd_scale(scales[s] & 15u);
            out.scale[2 * s + 1] = odd_scale(scales[s] >> 4);
            for (int l = 0; l < 4; ++l) {
                int8_t* row = out.value + 32 * s + 8 * l;
                if constexpr (xs) {  // 9-bit row, 7-bit sign index
                    const uint16_t q = load_u16(block + 2 + 2 * (4 * s + l));
                    Rows::signed_values(kIQ2XSGrid[q & 511u], even_signs(q >> 9u), row);
                } else {  // 8 low bits in qs, 2 high in qh; a sign byte
                    const uint32_t index = block[2 + 4 * s + l] | ((block[66 + s] >> (2 * l)) & 3u)
                                                                      << 8;
                    Rows::signed_values(kIQ2SGrid[index], block[34 + 4 * s + l], row);
                }
            }
        }
    } else if constexpr (type == GGMLType::IQ3_XXS) {
        out.d = 0.25f * fp16_to_fp32(load_u16(block));
        const uint8_t* rows = block + 2;
        for (int s = 0; s < 8; ++s) {
            const uint32_t signs_scale = load_u32(block + 66 + 4 * s);
            out.scale[2 * s] = out.scale[2 * s + 1] = odd_scale(signs_scale >> 28);
            for (int l = 0; l < 4; ++l) {  // 8 weights: two grid rows, one sign byte
                const uint32_t signs = even_signs(signs_scale >> (7 * l));
                int8_t* row = out.value + 32 * s + 8 * l;
                Rows::signed_values(kIQ3XXSGrid[rows[8 * s + 2 * l]], signs, row);
                Rows::signed_values(kIQ3XXSGrid[rows[8 * s + 2 * l + 1]], signs >> 4, row + 4);
            }
        }
    } else if constexpr (type == GGMLType::IQ3_S) {
        out.d = fp16_to_fp32(load_u16(block));
        for (int s = 0; s < 8; ++s) {
            out.scale[2 * s] = out.scale[2 * s + 1] =
                odd_scale((block[106 + s / 2] >> (4 * (s % 2))) & 15u);
            for (int k = 0; k < 8; ++k) {  // 4 weights: one grid row (8 + 1 bits)
                const uint32_t index = block[2 + 8 * s + k] | ((block[66 + s] >> k) & 1u) << 8;
                const uint32_t signs = block[74 + 4 * s + k / 2] >> (4 * (k % 2));
                Rows::signed_values(kIQ3SGrid[index], signs, out.value + 32 * s + 4 * k);
            }
        }
    } else if constexpr (type == GGMLType::IQ1_S) {
        out.d = 0.125f * fp16_to_fp32(load_u16(block));
        for (int s = 0; s < 8; ++s) {
            const uint16_t high = load_u16(block + 34 + 2 * s);
            out.scale[2 * s] = out.scale[2 * s + 1] = odd_scale((high >> 12) & 7u);
            const int delta = high & 0x8000 ? -1 : 1;
            for (int l = 0; l < 4; ++l) {  // 8 weights: 8 + 3 bits of row
                Rows::shifted_values(kIQ1Grid[block[2 + 4 * s + l] | ((high >> (3 * l)) & 7u) << 8],
                                     delta, out.value + 32 * s + 8 * l);
            }
        }
    } else {
        static_assert(type == GGMLType::IQ1_M, "decode_codebook: a codebook type");
        uint16_t words[4];
        for (int w = 0; w < 4; ++w) words[w] = load_u16(block + 48 + 2 * w);
        const uint16_t d = uint16_t((words[0] >> 12) | ((words[1] >> 8) & 0x00F0) |
                                    ((words[2] >> 4) & 0x0F00) | (words[3] & 0xF000));
        out.d = 0.125f * fp16_to_fp32(d);
        for (int g = 0; g < 16; ++g) out.scale[g] = odd_scale((words[g / 4] >> (3 * (g % 4))) & 7u);
        for (int r = 0; r < 32; ++r) {  // 8 weights: 8 + 3 bits of row, a shift bit
            const uint32_t nibble = (block[32 + r / 2] >> (4 * (r % 2))) & 15u;
            Rows::shifted_values(kIQ1Grid[block[r] | (nibble & 7u) << 8], nibble & 8 ? -1 : 1,
                                 out.value + 8 * r);
        }
    }
}

namespace detail {
// The codebook types, in WeightTypes order (the per-level tables visit this list).
using CodebookTypes =
    TypeList<GGMLType::IQ2_XXS, GGMLType::IQ2_XS, GGMLType::IQ2_S, GGMLType::IQ3_XXS,
             GGMLType::IQ3_S, GGMLType::IQ1_S, GGMLType::IQ1_M>;
}  // namespace detail

constexpr bool is_codebook_type(GGMLType type) noexcept {
    return detail::index_in(type, detail::CodebookTypes{}) >= 0;
}

SMOL_NAMESPACE_END
