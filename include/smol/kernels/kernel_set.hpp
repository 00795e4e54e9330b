// KernelSet: one complete set of kernels for one CPU level (kernels/cpu.hpp),
// as plain function pointers. The model holds a pointer to one set, chosen
// once at load; nothing above the kernels layer knows which ISA runs.
//
// Every translation unit compiles every level of its architecture (the SIMD
// code sits in target-attribute regions, kernels/x86.hpp and kernels/arm.hpp),
// so a consumer built without any -m flag still gets the fastest set the CPU
// runs. The scalar set (kernels/scalar.hpp) is the spec each level is tested
// against (tests/test_kernels.cpp, every level the machine supports).
//
// Each level's whole set is built by one function, its make_kernel_set:
// scalar::make_kernel_set (below), avx2 / avxvnni / avx512::make_kernel_set
// (kernels/x86.hpp), neon / dotprod / i8mm::make_kernel_set (kernels/arm.hpp). What
// each level has per weight type is summed up in kernels/weight_types.hpp.
#pragma once

#include "../detail/abi.hpp"

#include <cstddef>
#include <cstdint>
#include <array>
#include <cstring>
#include <string>
#include <type_traits>
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
// c < the tile's column count (its position in a TileRow).
//   w: n_rows rows, w_row_bytes apart, at any byte address;
//   x: activation rows, x_row_bytes apart, in the set's activation layout;
//   cols: values per row.
using TileKernel = void (*)(const uint8_t* w, size_t w_row_bytes, size_t n_rows, const uint8_t* x,
                            size_t x_row_bytes, size_t cols, float* y, size_t y_stride);

// Most tokens one tile serves: each weight block is unpacked (and, with AVX2,
// transposed) once per this many tokens. 8 beat 4 and 6 columns with the AVX2
// Q4_K tile; wider tiles were tried at avx512 and not kept.
constexpr int kMaxTileCols = 8;

// One kernel per column count: [n - 1] is the tile of n columns.
using TileRow = std::array<TileKernel, kMaxTileCols>;

// The TileRow of make(std::integral_constant<int, n>{}) for n = 1 .. kMaxTileCols,
// where make returns the n-column kernel; e.g.
//   tile_row([](auto n) { return &tile_q4k<decltype(n)::value>; })
template <class Make, int... n>
constexpr TileRow tile_row_of(Make make, std::integer_sequence<int, n...>) noexcept {
    return TileRow{{make(std::integral_constant<int, n + 1>{})...}};
}
template <class Make>
constexpr TileRow tile_row(Make make) noexcept {
    return tile_row_of(make, std::make_integer_sequence<int, kMaxTileCols>{});
}

// Most tokens one wide tile serves: the amx level's converted tiles give each
// token one row of a TMUL tile, which has 16 (a TDPBSSD costs the same with 8
// rows as with 16, and so does each tile store of the dots).
constexpr int kMaxWideTileCols = 16;

// The tiles of kMaxTileCols + 1 .. kMaxWideTileCols columns: [n - kMaxTileCols - 1]
// is the tile of n columns.
using WideTileRow = std::array<TileKernel, kMaxWideTileCols - kMaxTileCols>;
template <class Make, int... n>
constexpr WideTileRow wide_tile_row_of(Make make, std::integer_sequence<int, n...>) noexcept {
    return WideTileRow{{make(std::integral_constant<int, kMaxTileCols + n + 1>{})...}};
}
template <class Make>
constexpr WideTileRow wide_tile_row(Make make) noexcept {
    return wide_tile_row_of(make,
                            std::make_integer_sequence<int, kMaxWideTileCols - kMaxTileCols>{});
}

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
// (TypeKernels::converted): K-quant rows turned into 8-bit values with a scale
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
    // The same bytes from n_rows rows (whole groups of kInterleaveRows) held
    // interleaved (quant/weight_matrix.hpp; w_row_bytes the stored row size),
    // without putting them back as stored first; null where the level has no
    // such path (the executor then puts the rows back and calls pack).
    void (*pack_interleaved)(const uint8_t* w, size_t w_row_bytes, size_t n_rows, size_t cols,
                             uint8_t* out) = nullptr;
    // The TileKernel contract, with w the packed rows (w_row_bytes = row_bytes(cols)).
    TileRow tiles = {};
    // The same for kMaxTileCols + 1 .. kMaxWideTileCols columns, where the
    // level has such tiles (all set or all null; null: groups of at most
    // kMaxTileCols tokens).
    WideTileRow wide = {};
    // Used for batches of at least this many tokens.
    size_t min_tokens = size_t(kMaxTileCols) + 1;
    size_t row_group = 1;
    // The tiles read activations as the quantizer wrote them (QuantizedInput::row)
    // rather than in the set's Q8_K32 permutation (QuantizedInput::kernel_row).
    bool reads_quantizer_order = false;

    // Most tokens one tile call serves.
    size_t max_cols() const noexcept {
        return size_t(wide[0] != nullptr ? kMaxWideTileCols : kMaxTileCols);
    }
    // The tile of n columns, 1 <= n <= max_cols().
    TileKernel tile(size_t n) const noexcept {
        return n <= size_t(kMaxTileCols) ? tiles[n - 1] : wide[n - size_t(kMaxTileCols) - 1];
    }
};

// Where a level's stored-row tiles of a type come from.
enum class TileSource : uint8_t {
    scalar_spec,  // the scalar reference (kernels/scalar.hpp): correct, slow
    level,        // the level's own
};

// Everything one level has for one weight type.
struct TypeKernels {
    // ---- over rows as stored: every level, every type ----
    TileRow tiles = {};
    // Every set is completed with the scalar spec's tiles for any type its
    // level has none for (complete_with_spec), so a level that has no tiles for
    // a type runs it correctly and slowly, and says so (kernel_table_text),
    // never through a null pointer.
    TileSource tiles_from = TileSource::scalar_spec;
    // The stored-row tiles read activations as the quantizer wrote them
    // (QuantizedInput::row) rather than in the set's Q8_K32 permutation
    // (kernel_row): the scalar spec's always do.
    bool tiles_read_quantizer_order = false;
    // ---- the same over packed rows, where the level has them (pack != nullptr) ----
    PackedTiles packed;
    // ---- long batches over converted rows, where the level has them (pack != nullptr) ----
    // min_tokens is the weight table's convert_min_tokens (converted_tiles sets it).
    PackedTiles converted;
    // ---- over interleaved rows (quant/weight_matrix.hpp), where the level has them ----
    // The TileKernel contract with w the first of n_rows / kInterleaveRows
    // groups (n_rows a multiple of it), w_row_bytes the stored row size, and
    // the activations as the quantizer wrote them (QuantizedInput::row). Same
    // bits as the stored rows' tiles. A Model interleaves the matrices of the
    // types whose interleaved[0] is set.
    TileRow interleaved = {};
};

// The settings that change a kernel's speed but never its results: every
// candidate of every field gives the same bits (tests/test_kernels.cpp, "kernel
// params"), so a set may switch between them at any time. The defaults are
// what the kernels were tuned to on the machines of benchmarks/RESULTS.md; the
// tuner (kernels/tune.hpp) measures the candidates where it runs. A field a
// level has no use for is kept at its default there (the scalar and arm
// levels use only decode_chunks, avx2 / avxvnni also stored_prefetch).
struct KernelParams {
    // Dependent adds each block of the one-token interleaved tile waits for
    // (avx512 / amx: tile_k4_interleaved_zmm's pacing); one of kPaceCandidates.
    int pace_steps = 60;
    // How far ahead (bytes) the one-token interleaved tile prefetches; one of
    // kInterleavedPrefetchCandidates.
    int interleaved_prefetch = 8192;
    // How far ahead (bytes) the one-token K-quant tiles over stored rows
    // prefetch (avx2 / avxvnni: Q4_K, Q5_K, Q6_K; avx512 / amx: Q6_K, the type
    // a Q4_K_M file keeps stored); one of kStoredPrefetchCandidates.
    int stored_prefetch = 4096;
    // Chunks per thread of a one-token mat-vec (kernels/matmul_plan.hpp, rule 3);
    // one of kDecodeChunkCandidates.
    int decode_chunks = 8;
    // 1: the avx512 / amx levels' one-token codebook tiles (IQ1_*, IQ2_*, IQ3_*)
    // read their grid rows by vpgather; 0: by permutes of the packed grids, and
    // IQ2_S, IQ1_S, IQ1_M by scalar loads (detail/x86_avx512_codebook_tiles.inc).
    // Gathers are twice as fast on a Sapphire Rapids, slower on a Zen 5, and
    // several times slower where microcode guards them (Cascade Lake, Ice Lake, Tiger Lake: Gather
    // Data Sampling), so the default is 0 and the tuner decides;
    // one of kCodebookGatherCandidates.
    int codebook_gathers = 0;

    friend bool operator==(const KernelParams& a, const KernelParams& b) noexcept {
        return a.pace_steps == b.pace_steps && a.interleaved_prefetch == b.interleaved_prefetch &&
               a.stored_prefetch == b.stored_prefetch && a.decode_chunks == b.decode_chunks &&
               a.codebook_gathers == b.codebook_gathers;
    }
    friend bool operator!=(const KernelParams& a, const KernelParams& b) noexcept {
        return !(a == b);
    }
};

// The values each KernelParams field may take: each one a compiled candidate
// (the prefetch distances and pacing are template arguments of the tiles).
constexpr int kPaceCandidates[] = {0, 30, 60};
constexpr int kInterleavedPrefetchCandidates[] = {4096, 8192, 12288};
constexpr int kStoredPrefetchCandidates[] = {2048, 4096, 8192};
constexpr int kDecodeChunkCandidates[] = {4, 8, 16};
constexpr int kCodebookGatherCandidates[] = {0, 1};

// Index of value in candidates, or -1.
template <size_t n>
constexpr int candidate_index(const int (&candidates)[n], int value) noexcept {
    for (size_t i = 0; i < n; ++i)
        if (candidates[i] == value) return int(i);
    return -1;
}

// Whether every field of p is one of its candidates.
constexpr bool valid_kernel_params(const KernelParams& p) noexcept {
    return candidate_index(kPaceCandidates, p.pace_steps) >= 0 &&
           candidate_index(kInterleavedPrefetchCandidates, p.interleaved_prefetch) >= 0 &&
           candidate_index(kStoredPrefetchCandidates, p.stored_prefetch) >= 0 &&
           candidate_index(kDecodeChunkCandidates, p.decode_chunks) >= 0 &&
           candidate_index(kCodebookGatherCandidates, p.codebook_gathers) >= 0;
}

// "pace 60, interleaved prefetch 8192, stored prefetch 4096, decode chunks 8, codebook gathers 0"
inline std::string kernel_params_text(const KernelParams& p) {
    return "pace " + std::to_string(p.pace_steps) + ", interleaved prefetch " +
           std::to_string(p.interleaved_prefetch) + ", stored prefetch " +
           std::to_string(p.stored_prefetch) + ", decode chunks " +
           std::to_string(p.decode_chunks) + ", codebook gathers " +
           std::to_string(p.codebook_gathers);
}

// The settings a level without tuned tiles runs with: only decode_chunks (the
// mat-vec's split, which every level has); the rest at their defaults.
inline KernelParams decode_chunks_only(const KernelParams& p) noexcept {
    KernelParams used;
    used.decode_chunks = p.decode_chunks;
    return used;
}

struct KernelSet {
    CpuLevel level = CpuLevel::scalar;
    // What the speed-only settings of this set are: each level's
    // make_kernel_set(params) builds its set with them, keeping the fields it
    // has no use for at their defaults (kernels/dispatch.hpp: kernel_set).
    KernelParams params;

    // ---- activation quantization (bit-identical across levels) ----
    void (*quantize_q8_k32)(const float* x, BlockQ8K32* y, size_t n) = nullptr;  // n % 256 == 0
    void (*quantize_q8_0)(const float* x, BlockQ8_0* y, size_t n) = nullptr;     // n % 32 == 0
    void (*quantize_q8_k)(const float* x, BlockQ8K* y, size_t n) = nullptr;      // n % 256 == 0
    // Q8_K32 blocks from the quantizer's order into the order this set's K-quant
    // tiles read (they may permute values, see x86.hpp); nullptr: no permutation.
    void (*layout_q8_k32)(const BlockQ8K32* quantized, BlockQ8K32* out, size_t n_blocks) = nullptr;

    // ---- matrix x activations: [weight_type_index(type)] ----
    TypeKernels types[kWeightTypeCount] = {};

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

    // The kernels of `type`, which must be a weight type (is_supported_weight_type).
    TypeKernels& of(GGMLType type) noexcept { return types[size_t(weight_type_index(type))]; }
    const TypeKernels& of(GGMLType type) const noexcept {
        return types[size_t(weight_type_index(type))];
    }
    // The packing of `type`, or null when this level reads it as stored.
    const PackedTiles* packing(GGMLType type) const noexcept {
        const int index = weight_type_index(type);
        return index >= 0 && types[index].packed.pack != nullptr ? &types[index].packed : nullptr;
    }
    // Whether a mat-mat of n_tokens tokens multiplies converted rows.
    bool converts(GGMLType type, size_t n_tokens) const noexcept {
        const int index = weight_type_index(type);
        return index >= 0 && types[index].converted.pack != nullptr &&
               n_tokens >= types[index].converted.min_tokens;
    }
    // Whether this level has tiles over interleaved rows of `type`.
    bool interleaves(GGMLType type) const noexcept {
        const int index = weight_type_index(type);
        return index >= 0 && types[index].interleaved[0] != nullptr;
    }
    const char* name() const noexcept { return cpu_level_name(level); }
};

// The converted rows of `type` (TypeKernels::converted), used from the weight
// table's convert_min_tokens tokens on.
template <GGMLType type, class MakeTile>
PackedTiles converted_tiles(size_t (*row_bytes)(size_t),
                            void (*pack)(const uint8_t*, size_t, size_t, size_t, uint8_t*),
                            MakeTile make_tile, size_t row_group,
                            bool reads_quantizer_order) noexcept {
    static_assert(WeightTraits<type>::convert_min_tokens > 0, "the type has no conversion rule");
    PackedTiles converted;
    converted.row_bytes = row_bytes;
    converted.pack = pack;
    converted.tiles = tile_row(make_tile);
    converted.min_tokens = WeightTraits<type>::convert_min_tokens;
    converted.row_group = row_group;
    converted.reads_quantizer_order = reads_quantizer_order;
    return converted;
}

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

// The scalar spec's stored-row tiles of `type` (a WeightTypes type).
inline TileRow spec_tiles(GGMLType type) noexcept {
    TileRow row = {};
    visit_weight_type<WeightTraits>(type, [&](auto traits) {
        using Traits = decltype(traits);
        row = tile_row([](auto n) { return &tile<Traits::dot_reference, decltype(n)::value>; });
    });
    return row;
}

// The scalar spec's long-batch rows of `type` (the rows as stored, converted by
// each dot), or none when the type does not convert.
inline PackedTiles spec_converted(GGMLType type) noexcept {
    PackedTiles converted;
    visit_weight_type<WeightTraits>(type, [&](auto traits) {
        using Traits = decltype(traits);
        if constexpr (Traits::convert_min_tokens > 0) {
            converted = converted_tiles<Traits::type>(
                &stored_row_bytes<Traits::type>, &copy_rows<Traits::type>,
                [](auto n) { return &tile<Traits::converted_dot_reference, decltype(n)::value>; },
                1, true);
        }
    });
    return converted;
}

// The scalar level: every type's tiles and converted rows are the weight
// table's reference dots.
inline KernelSet make_kernel_set(const KernelParams& params = {}) noexcept {
    KernelSet set;
    set.level = CpuLevel::scalar;
    set.params = decode_chunks_only(params);
    set.quantize_q8_k32 = &quantize_row_q8_k32;
    set.quantize_q8_k = &quantize_row_q8_k_activations;
    set.quantize_q8_0 = &quantize_row_q8_0;
    for_each_weight_type<WeightTraits>([&](auto traits) {
        using Traits = decltype(traits);
        TypeKernels& kernels = set.of(Traits::type);
        kernels.tiles = spec_tiles(Traits::type);
        kernels.converted = spec_converted(Traits::type);
    });
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

// Gives every type whose stored-row tiles a level left unset the scalar spec's,
// and records where each type's tiles come from: the last step of building
// any set (dispatch.hpp, build_kernel_set).
inline void complete_with_spec(KernelSet& set) noexcept {
    for_each_weight_type<TypeTag>([&](auto tag) {
        TypeKernels& kernels = set.of(decltype(tag)::type);
        const TileRow spec = scalar::spec_tiles(decltype(tag)::type);
        bool complete = true;
        for (TileKernel tile : kernels.tiles) complete = complete && tile != nullptr;
        if (!complete) kernels.tiles = spec;
        kernels.tiles_from =
            kernels.tiles[0] == spec[0] ? TileSource::scalar_spec : TileSource::level;
        if (kernels.tiles_from == TileSource::scalar_spec) {
            kernels.tiles_read_quantizer_order = true;
            // A type the level has nothing of its own for follows the whole
            // spec, its long-batch rule included (a level with stored-row
            // tiles of its own but no converted rows keeps multiplying them as
            // stored: that is its speed choice, made where its tiles are set).
            if (!kernels.converted.pack)
                kernels.converted = scalar::spec_converted(decltype(tag)::type);
        }
    });
}

// What the set has per weight type, generated from it: "avx2: F32 own, ...,
// Q4_K own+packed+converted>=32, Q6_K spec" (own: the level's stored-row
// tiles; spec: the scalar reference's; then its packed, converted and
// interleaved rows).
inline std::string kernel_table_text(const KernelSet& set) {
    std::string text = std::string(set.name()) + ":";
    const char* separator = " ";
    for_each_weight_type<TypeTag>([&](auto tag) {
        const GGMLType type = decltype(tag)::type;
        const TypeKernels& kernels = set.of(type);
        text += separator + type_name(type) + " " +
                (kernels.tiles_from == TileSource::level ? "own" : "spec");
        if (kernels.packed.pack) text += "+packed";
        if (kernels.converted.pack)
            text += "+converted>=" + std::to_string(kernels.converted.min_tokens);
        if (kernels.interleaved[0]) text += "+interleaved";
        separator = ", ";
    });
    return text;
}

}  // namespace kernels
SMOL_NAMESPACE_END
