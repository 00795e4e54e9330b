// KernelSet: one complete set of kernels for one CPU level (kernels/cpu.hpp),
// as plain function pointers. The model holds a pointer to one set, chosen
// once at load; nothing above the kernels layer knows which ISA runs.
//
// Every translation unit compiles every level of its architecture (the SIMD
// code sits in target-attribute regions, kernels/x86.hpp and kernels/arm.hpp),
// so a consumer built without any -m flag still gets the fastest set the CPU
// runs. The scalar set (kernels/scalar.hpp) is the spec each level is tested
// against (tests/test_kernels.cpp, every level the machine supports).
#pragma once

#include "../detail/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "../quant/blocks.hpp"
#include "../quant/weight_matrix.hpp"
#include "activations.hpp"
#include "cpu.hpp"
#include "scalar.hpp"
#include "weight_types.hpp"

SMOL_NAMESPACE_BEGIN
namespace kernels {

// y[c * y_stride + r] = dot(weight row r, activation row c) for r < n_rows and
// c < the tile's column count (its position in KernelSet::tiles).
//   w: n_rows rows, w_row_bytes apart, at any byte address;
//   x: activation rows, x_row_bytes apart, in the set's activation layout;
//   cols: values per row.
using TileKernel = void (*)(const uint8_t* w, size_t w_row_bytes, size_t n_rows, const uint8_t* x,
                            size_t x_row_bytes, size_t cols, float* y, size_t y_stride);

// Most tokens one tile serves: each weight block is unpacked (and, with AVX2,
// transposed) once per this many tokens. Measured with the AVX2 Q4_K tile:
// 4 columns 145 GOPS per core, 6: 146-162, 8: 169-172.
constexpr int kMaxTileCols = 8;

// Mat-mat over weights packed once per row chunk (the "pack" step of a
// GEMM): a level may offer, per weight type, a layout its tiles read without
// unpacking anything (K-quants: the nibbles already in the tile's lane order,
// the sub-block scales as floats). A prompt's mat-mat unpacks each weight
// block once per group of kMaxTileCols tokens (64 times for 512 tokens); with
// packing it is unpacked once per chunk of rows, into a small per-thread
// buffer that stays in L2 while every token group streams past it. Decode
// (one token group) reads the rows as stored: packing would cost more than it
// saves, and the stored file stays the only copy of the weights.
//
// The same struct describes a level's converted rows for long batches
// (KernelSet::converted): K-quant rows turned into 8-bit values with a scale
// pair per 32 (kernels/scalar.hpp, "long batches"), which changes the result
// by the conversion's rounding, as the golden engine's long batches do.
struct PackedTiles {
    // Bytes of one packed row of `cols` values (cols % the block size == 0).
    size_t (*row_bytes)(size_t cols) = nullptr;
    // Packs n_rows rows of w (w_row_bytes apart, any address) into out:
    // ceil(n_rows / row_group) groups of row_group * row_bytes(cols) bytes, a
    // short last group padded (what the padding holds is the level's business).
    void (*pack)(const uint8_t* w, size_t w_row_bytes, size_t n_rows, size_t cols,
                 uint8_t* out) = nullptr;
    // The TileKernel contract, with w the packed rows (w_row_bytes = row_bytes(cols)).
    TileKernel tiles[kMaxTileCols] = {};
    // Used for batches of at least this many tokens.
    size_t min_tokens = size_t(kMaxTileCols) + 1;
    size_t row_group = 1;
    // The tiles read activations in their natural layout (QuantizedInput::row)
    // rather than the set's Q8_K32 permutation (QuantizedInput::kernel_row).
    bool natural_activations = false;
};

struct KernelSet {
    CpuLevel level = CpuLevel::scalar;

    // ---- activation quantization (bit-identical across levels) ----
    void (*quantize_q8_k32)(const float* x, BlockQ8K32* y, size_t n) = nullptr;  // n % 256 == 0
    void (*quantize_q8_0)(const float* x, BlockQ8_0* y, size_t n) = nullptr;     // n % 32 == 0
    // Q8_K32 blocks from natural order into the order this set's K-quant tiles
    // read (they may permute values, see x86.hpp); nullptr: natural order.
    void (*layout_q8_k32)(const BlockQ8K32* natural, BlockQ8K32* out, size_t n_blocks) = nullptr;

    // ---- matrix x activations: [weight type index][columns - 1] ----
    TileKernel tiles[kWeightTypeCount][kMaxTileCols] = {};
    // ---- the same over packed weights, where the level has them ----
    PackedTiles packed[kWeightTypeCount] = {};
    // ---- long batches over converted rows, where the level has them ----
    PackedTiles converted[kWeightTypeCount] = {};
    // ---- over interleaved rows (quant/weight_matrix.hpp), where the level has them ----
    // The TileKernel contract with w the first of n_rows / kInterleaveRows
    // groups (n_rows a multiple of it), w_row_bytes the stored row size, and
    // the activations in their natural layout (QuantizedInput::row). Same bits
    // as the stored rows' tiles. A Model interleaves the matrices of these types.
    TileKernel interleaved[kWeightTypeCount][kMaxTileCols] = {};

    // ---- float ops of the forward pass ----
    float (*dot_f32)(const float* a, const float* b, size_t n) = nullptr;
    // out = x / sqrt(mean(x^2) + eps) * weight (out may alias x)
    void (*rmsnorm)(const float* x, const float* weight, float* out, size_t n, float eps) = nullptr;
    void (*swiglu)(const float* gate, const float* up, float* out,
                   size_t n) = nullptr;             // silu(gate) * up
    void (*softmax)(float* x, size_t n) = nullptr;  // in place
    void (*rope)(float* v, const float* cos, const float* sin, size_t pairs) = nullptr;
    void (*attend)(const AttentionHead& head) = nullptr;

    // ---- the memory roofline's probe ----
    // Sums n bytes (n % 128 == 0, begin 32-byte aligned) as 64-bit lanes, with
    // the widest loads of the level, so that a bandwidth test measures what
    // this level's kernels can stream (kernels/bandwidth.hpp).
    uint64_t (*sum_bytes)(const uint8_t* begin, size_t n) = nullptr;

    TileKernel tile(GGMLType type, int n_cols) const noexcept {
        const int index = weight_type_index(type);
        if (index < 0 || n_cols < 1) return nullptr;
        return tiles[index][(n_cols > kMaxTileCols ? kMaxTileCols : n_cols) - 1];
    }
    // The packing of `type`, or null when this level reads it as stored.
    const PackedTiles* packing(GGMLType type) const noexcept {
        const int index = weight_type_index(type);
        return index >= 0 && packed[index].pack != nullptr ? &packed[index] : nullptr;
    }
    // Whether a mat-mat of n_tokens tokens multiplies converted rows.
    bool converts(GGMLType type, size_t n_tokens) const noexcept {
        const int index = weight_type_index(type);
        return index >= 0 && converted[index].pack != nullptr &&
               n_tokens >= converted[index].min_tokens;
    }
    // Whether this level has tiles over interleaved rows of `type`.
    bool interleaves(GGMLType type) const noexcept {
        const int index = weight_type_index(type);
        return index >= 0 && interleaved[index][0] != nullptr;
    }
    const char* name() const noexcept { return cpu_level_name(level); }
};

namespace detail {

// Fills set.tiles[weight_type_index(type)][0 .. kMaxTileCols - 1] with
// Tile<1> .. Tile<kMaxTileCols>, where Tile is a level's tile template
// wrapped as `template <int n> struct { static constexpr TileKernel get(); }`.
template <template <int> class Tile, int... n>
void fill_tiles(TileKernel (&row)[kMaxTileCols], std::integer_sequence<int, n...>) noexcept {
    ((row[n] = Tile<n + 1>::get()), ...);
}

template <template <int> class Tile>
void set_tiles(KernelSet& set, GGMLType type) noexcept {
    fill_tiles<Tile>(set.tiles[weight_type_index(type)],
                     std::make_integer_sequence<int, kMaxTileCols>{});
}

// Gives `type` a packing (PackedTiles): its row size, its pack function and
// Tile<1> .. Tile<kMaxTileCols> over the packed rows.
template <template <int> class Tile>
void set_packing(KernelSet& set, GGMLType type, size_t (*row_bytes)(size_t),
                 void (*pack)(const uint8_t*, size_t, size_t, size_t, uint8_t*)) noexcept {
    PackedTiles& packing = set.packed[weight_type_index(type)];
    packing.row_bytes = row_bytes;
    packing.pack = pack;
    fill_tiles<Tile>(packing.tiles, std::make_integer_sequence<int, kMaxTileCols>{});
}

// Gives `type` converted rows for long batches (KernelSet::converted), from
// the weight table's convert_min_tokens tokens on.
template <template <int> class Tile>
void set_converted(KernelSet& set, GGMLType type, size_t (*row_bytes)(size_t),
                   void (*pack)(const uint8_t*, size_t, size_t, size_t, uint8_t*), size_t row_group,
                   bool natural_activations) noexcept {
    PackedTiles& converted = set.converted[weight_type_index(type)];
    converted.row_bytes = row_bytes;
    converted.pack = pack;
    fill_tiles<Tile>(converted.tiles, std::make_integer_sequence<int, kMaxTileCols>{});
    converted.min_tokens = weight_type_info(type)->convert_min_tokens;
    converted.row_group = row_group;
    converted.natural_activations = natural_activations;
}

// set_tiles for every entry of kWeightTypes, with Tiles<type>::Of as the tile template.
template <template <GGMLType> class Tiles, size_t... i>
void set_all_tiles(KernelSet& set, std::index_sequence<i...>) noexcept {
    (set_tiles<Tiles<kWeightTypes[i].type>::template Of>(set, kWeightTypes[i].type), ...);
}

template <template <GGMLType> class Tiles>
void set_all_tiles(KernelSet& set) noexcept {
    set_all_tiles<Tiles>(set, std::make_index_sequence<kWeightTypeCount>{});
}

}  // namespace detail

namespace scalar {

// The TileKernel contract over one reference dot per (row, column).
template <ReferenceDot dot, int n_cols>
void tile(const uint8_t* w, size_t w_row_bytes, size_t n_rows, const uint8_t* x, size_t x_row_bytes,
          size_t cols, float* y, size_t y_stride) {
    for (size_t r = 0; r < n_rows; ++r)
        for (int c = 0; c < n_cols; ++c)
            y[size_t(c) * y_stride + r] =
                dot(w + r * w_row_bytes, x + size_t(c) * x_row_bytes, cols);
}

template <GGMLType type>
struct Tiles {
    template <int n>
    struct Of {
        static constexpr TileKernel get() {
            return &tile<kWeightTypes[weight_type_index(type)].dot_reference, n>;
        }
    };
};

// Long batches at the scalar level: the rows stay as stored ("packing" is a
// copy) and each dot converts its blocks on the fly (converted_dot_reference).
template <GGMLType type>
size_t stored_row_bytes(size_t cols) noexcept {
    return smol::row_bytes(type, cols);
}

template <GGMLType type>
void copy_rows(const uint8_t* w, size_t w_row_bytes, size_t n_rows, size_t cols, uint8_t* out) {
    const size_t bytes = smol::row_bytes(type, cols);
    for (size_t r = 0; r < n_rows; ++r) std::memcpy(out + r * bytes, w + r * w_row_bytes, bytes);
}

template <GGMLType type>
struct ConvertedTiles {
    template <int n>
    struct Of {
        static constexpr TileKernel get() {
            return &tile<kWeightTypes[weight_type_index(type)].converted_dot_reference, n>;
        }
    };
};

template <GGMLType type>
void set_converted(KernelSet& set) noexcept {
    detail::set_converted<ConvertedTiles<type>::template Of>(set, type, &stored_row_bytes<type>,
                                                             &copy_rows<type>, 1, true);
}

inline KernelSet make_kernel_set() noexcept {
    KernelSet set;
    set.level = CpuLevel::scalar;
    set.quantize_q8_k32 = &quantize_row_q8_k32;
    set.quantize_q8_0 = &quantize_row_q8_0;
    detail::set_all_tiles<Tiles>(set);
    set_converted<GGMLType::Q4_K>(set);
    set_converted<GGMLType::Q5_K>(set);
    set_converted<GGMLType::Q6_K>(set);
    set.dot_f32 = &dot_f32;
    set.rmsnorm = &rmsnorm;
    set.swiglu = &swiglu;
    set.softmax = &softmax;
    set.rope = &rope;
    set.attend = &attend;
    set.sum_bytes = &sum_bytes;
    return set;
}

}  // namespace scalar
}  // namespace kernels
SMOL_NAMESPACE_END
