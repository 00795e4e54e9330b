// x86-64 kernels: the avx2, avxvnni and avx512 levels (kernels/cpu.hpp),
// compiled in every translation unit whatever its -m flags, each inside a
// target region so its intrinsics are legal there and nowhere else.
//
//   kernels::avx2     AVX2 + FMA + F16C: activation quantization
//                     (detail/x86_avx2_quantize.inc), the Q8_K32
//                     permutation the K-quant tiles read (interleave_q8k32), the
//                     float ops (dot, rmsnorm, swiglu, softmax, RoPE, attention,
//                     F32/F16/BF16 tiles: detail/x86_avx2_float.inc) and the
//                     integer tiles (detail/x86_tiles.inc).
//   kernels::avxvnni  the integer tiles again with AVX-VNNI's vpdpbusd (VEX);
//                     everything else is avx2's.
//   kernels::avx512   the integer tiles with AVX-512 VNNI (EVEX vpdpbusd): the
//                     K-quants at 512 bits with their own activation layout
//                     (detail/x86_avx512_tiles.inc), Q8_0 at 256; attention at
//                     512 bits (detail/x86_avx512_attention.inc); the codebook
//                     types' stored-row tiles a block per zmm pass
//                     (detail/x86_avx512_codebook_tiles.inc: with AVX512-VBMI
//                     in a target region of its own, without it by AVX512-BW);
//                     everything else is avx2's.
//   kernels::amx      avx512 with the long batches' converted rows multiplied by
//                     AMX tiles (detail/x86_amx_tiles.inc); compiled where the
//                     compiler knows AMX (SMOL_HAS_AMX_KERNELS, kernels/cpu.hpp).
//
// A function defined in a target region may only be called where the CPU has
// that target; the dispatcher (kernels/dispatch.hpp) guarantees it by handing
// out a level's KernelSet only after cpu_supports(level). Helpers called from
// a region are defined inside it (or in a lesser one: avx2 helpers inline into
// avx512 code; never the reverse).
//
// Float results differ from the scalar reference only by summation order
// (several accumulators, then a horizontal sum) and, for swiglu and softmax,
// by exp_ps's ~2 ulp. xsimd is not used here: xsimd 8.1 picks its
// architecture from the unit's predefined macros, so in a unit built without
// -mavx2 it offers no AVX2 batch at all.
#pragma once

#include "../detail/abi.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <type_traits>
#include <utility>

#include "../core/fp16.hpp"
#include "../quant/blocks.hpp"
#include "activations.hpp"
#include "kernel_set.hpp"

#if defined(SMOL_ARCH_X86_64) && (defined(__GNUC__) || defined(__clang__) || defined(_MSC_VER))
#define SMOL_HAS_X86_KERNELS 1
#include <immintrin.h>

// Target regions: GCC's push_options/target pragmas, Clang's attribute
// push, nothing for MSVC (which needs no flags for intrinsics).
#define SMOL_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define SMOL_TARGET_BEGIN(targets) \
    SMOL_PRAGMA(clang attribute push(__attribute__((target(targets))), apply_to = function))
#define SMOL_TARGET_END SMOL_PRAGMA(clang attribute pop)
#elif defined(__GNUC__)
#define SMOL_TARGET_BEGIN(targets) SMOL_PRAGMA(GCC push_options) SMOL_PRAGMA(GCC target(targets))
#define SMOL_TARGET_END SMOL_PRAGMA(GCC pop_options)
#else
#define SMOL_TARGET_BEGIN(targets)
#define SMOL_TARGET_END
#endif

// Fully unroll the short compile-time loops over rows/columns/chunks so that
// per-column accumulators live in registers (GCC at -O2 keeps them in memory).
// SMOL_UNROLL_WIDE: the same for the wide tiles' loops over up to 16 tokens.
// SMOL_UNROLL_BLOCK: a 256-value block's 64 steps of 4 values, where a
// partly unrolled loop makes g++ copy the integer accumulators to other
// registers and back every iteration (the zmm Q8_K tile, 2 x 8: 540 -> 730
// GOPS fully unrolled, one Zen 5 core).
#if defined(__clang__)
#define SMOL_UNROLL _Pragma("unroll")
#define SMOL_UNROLL_WIDE _Pragma("unroll")
#define SMOL_UNROLL_BLOCK _Pragma("unroll")
#elif defined(__GNUC__)
#define SMOL_UNROLL _Pragma("GCC unroll 8")
#define SMOL_UNROLL_WIDE _Pragma("GCC unroll 16")
#define SMOL_UNROLL_BLOCK _Pragma("GCC unroll 64")
#else
#define SMOL_UNROLL
#define SMOL_UNROLL_WIDE
#define SMOL_UNROLL_BLOCK
#endif

// A tile's helper that takes its accumulators by reference must be inlined:
// left to the inliner (whose budget moves whenever the unit grows), an
// out-of-line copy makes the caller keep the accumulators in memory for its
// whole inner loop. Measured: the AVX2 converted Q4_K tile lost 20 % when a
// new type's tile shared store_converted_ymm and g++ stopped inlining it.
#if defined(__GNUC__) || defined(__clang__)
#define SMOL_ALWAYS_INLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define SMOL_ALWAYS_INLINE __forceinline
#else
#define SMOL_ALWAYS_INLINE inline
#endif

SMOL_TARGET_BEGIN("avx2,fma,f16c,bmi,bmi2,popcnt")

SMOL_NAMESPACE_BEGIN
namespace kernels {
namespace avx2 {

inline float horizontal_sum(__m256 v) noexcept {
    __m128 sum = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
    sum = _mm_add_ss(sum, _mm_movehdup_ps(sum));
    return _mm_cvtss_f32(sum);
}

inline int horizontal_sum_i32(__m256i v) noexcept {
    __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0x4e));
    sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0xb1));
    return _mm_cvtsi128_si32(sum);
}

inline float half_to_float(uint16_t h) noexcept {
    return _cvtsh_ss(h);
}

inline __m256i load256(const void* p) noexcept {
    return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// 32 int32 (four vectors of 8) -> 32 int8 in order (values already in [-127, 127]).
inline __m256i pack_32(__m256i a, __m256i b, __m256i c, __m256i d) noexcept {
    const __m256i ab = _mm256_packs_epi32(a, b);  // per 128-bit lane: a0-3 b0-3 | a4-7 b4-7
    const __m256i cd = _mm256_packs_epi32(c, d);
    const __m256i bytes =
        _mm256_packs_epi16(ab, cd);  // lanes: a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7
    return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// ---- activation quantization (bit-identical to kernels::scalar) ----------------

#include "detail/x86_avx2_quantize.inc"

// ---- K-quant scale unpacking ---------------------------------------------------

// The 12 packed bytes of a Q4_K/Q5_K block -> 16 bytes: scale[0..7], min[0..7]
// (see smol::detail::unpack_scale_min_k4 in quant/blocks.hpp for the bit layout). Reads 16 bytes:
// the 4 after the scales are the block's own qs/qh and are ignored.
inline __m128i unpack_k4_scales(const uint8_t* packed) noexcept {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));
    // Low bits: scale[0..3] = b[0..3] & 63, scale[4..7] = b[8..11] & 15,
    //           min[0..3] = b[4..7] & 63,   min[4..7] = b[8..11] >> 4.
    const __m128i low_source =
        _mm_shuffle_epi8(bytes, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i low_source_high_nibble = _mm_srli_epi16(low_source, 4);
    const __m128i low = _mm_and_si128(
        _mm_blend_epi16(low_source, low_source_high_nibble, 0xc0),
        _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15));
    // High bits 4-5 of scale[4..7] / min[4..7]: bits 6-7 of b[0..3] / b[4..7].
    const __m128i high_source = _mm_shuffle_epi8(
        bytes, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m128i high = _mm_and_si128(_mm_srli_epi16(high_source, 2), _mm_set1_epi8(0x30));
    return _mm_or_si128(low, high);
}

template <class Block>
inline const Block* block_row(const uint8_t* base, size_t row_bytes, size_t row) noexcept {
    return reinterpret_cast<const Block*>(base + row * row_bytes);
}

// ---- K-quant layout ---------------------------------------------------------------
//
// Multiplying one 32-weight sub-block per vector needs one madd per vector to
// apply that sub-block's scale: per 256 weights and token, 8 maddubs + 8 madd +
// 8 add. The
// kernels below first transpose the weights in
// registers so that every vector holds 4 weights of each of 4 sub-blocks (one per
// 32-bit element): then int16 maddubs results of several vectors can be summed
// before a single madd applies all the scales (per-lane scale vector), giving
// 8 maddubs + 6 add16 + 2 madd + 1 add per block and token. The activations are
// permuted the same way once, when they are quantized (interleave_q8k32), so
// each weight still meets its own activation.
//
// After the transposition, int32 element e of each 128-bit lane of a half's
// sums belongs to sub-block 4h + e (h = 0 for weights 0-127, 1 for 128-255);
// combine_halves adds the two 128-bit lanes and puts the halves side by side,
// giving one int32 per sub-block in natural order. Then each sub-block gets
// its float scales (weight d times the activation's d[s]) in one FMA per 8
// sub-blocks: the float work is per 32 values, not per value.
//
// The transposition of 4 vectors S0..S3 (32 bytes each; Sk[d] = 4-byte group d):
//   T_v, v = 0..3: low 128-bit lane = S0[v] S1[v] S2[v] S3[v],
//                  high lane        = S0[v+4] S1[v+4] S2[v+4] S3[v+4].
inline void transpose_4x8(const __m256i s[4], __m256i t[4]) noexcept {
    const __m256i s01_low = _mm256_unpacklo_epi32(s[0], s[1]);  // S0[0] S1[0] S0[1] S1[1] | [4] [5]
    const __m256i s01_high =
        _mm256_unpackhi_epi32(s[0], s[1]);  // S0[2] S1[2] S0[3] S1[3] | [6] [7]
    const __m256i s23_low = _mm256_unpacklo_epi32(s[2], s[3]);
    const __m256i s23_high = _mm256_unpackhi_epi32(s[2], s[3]);
    t[0] = _mm256_unpacklo_epi64(s01_low, s23_low);
    t[1] = _mm256_unpackhi_epi64(s01_low, s23_low);
    t[2] = _mm256_unpacklo_epi64(s01_high, s23_high);
    t[3] = _mm256_unpackhi_epi64(s01_high, s23_high);
}

// Q8_K32 activations in the order the interleaved kernels read: the 8 32-value
// sub-blocks, transposed four at a time like the weights (d and bsums
// unchanged). n_blocks blocks from `natural` (the quantizer's order) to `interleaved`.
inline void interleave_q8k32(const BlockQ8K32* natural, BlockQ8K32* interleaved,
                             size_t n_blocks) noexcept {
    for (size_t b = 0; b < n_blocks; ++b) {
        std::memcpy(interleaved[b].d, natural[b].d, sizeof natural[b].d);
        std::memcpy(interleaved[b].bsums, natural[b].bsums, sizeof natural[b].bsums);
        for (int half = 0; half < 2; ++half) {
            __m256i s[4], t[4];
            for (int k = 0; k < 4; ++k) s[k] = load256(natural[b].qs + 128 * half + 32 * k);
            transpose_4x8(s, t);
            for (int v = 0; v < 4; ++v) {
                _mm256_storeu_si256(
                    reinterpret_cast<__m256i*>(interleaved[b].qs + 128 * half + 32 * v), t[v]);
            }
        }
    }
}

// first: sums of half 0 ([sub-blocks 0-3 | 0-3] partial sums), second: of half 1
// ([4-7 | 4-7]) -> one int32 per sub-block, [0-3 | 4-7].
inline __m256i combine_halves(__m256i first, __m256i second) noexcept {
    return _mm256_add_epi32(_mm256_permute2x128_si256(first, second, 0x20),
                            _mm256_permute2x128_si256(first, second, 0x31));
}

#include "detail/x86_avx2_float.inc"

inline uint64_t sum_bytes(const uint8_t* begin, size_t n) noexcept {
    __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
    __m256i acc2 = _mm256_setzero_si256(), acc3 = _mm256_setzero_si256();
    for (const uint8_t* p = begin; p + 128 <= begin + n; p += 128) {
        acc0 = _mm256_add_epi64(acc0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
        acc1 = _mm256_add_epi64(acc1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32)));
        acc2 = _mm256_add_epi64(acc2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 64)));
        acc3 = _mm256_add_epi64(acc3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 96)));
    }
    const __m256i acc =
        _mm256_add_epi64(_mm256_add_epi64(acc0, acc1), _mm256_add_epi64(acc2, acc3));
    alignas(32) uint64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

}  // namespace avx2

#define SMOL_X86_TILES_NS avx2
#define SMOL_X86_TILES_VNNI 0
#include "detail/x86_tiles.inc"
#undef SMOL_X86_TILES_NS
#undef SMOL_X86_TILES_VNNI

}  // namespace kernels
SMOL_NAMESPACE_END
SMOL_TARGET_END

SMOL_TARGET_BEGIN("avx2,fma,f16c,bmi,bmi2,popcnt,avxvnni")
SMOL_NAMESPACE_BEGIN
namespace kernels {
#define SMOL_X86_TILES_NS avxvnni
#define SMOL_X86_TILES_VNNI 1
#include "detail/x86_tiles.inc"
#undef SMOL_X86_TILES_NS
#undef SMOL_X86_TILES_VNNI
}  // namespace kernels
SMOL_NAMESPACE_END
SMOL_TARGET_END

SMOL_TARGET_BEGIN("avx2,fma,f16c,bmi,bmi2,popcnt,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")
SMOL_NAMESPACE_BEGIN
namespace kernels {
#define SMOL_X86_TILES_NS avx512
#define SMOL_X86_TILES_VNNI 2
#include "detail/x86_tiles.inc"
#undef SMOL_X86_TILES_NS
#undef SMOL_X86_TILES_VNNI
#include "detail/x86_avx512_tiles.inc"
#include "detail/x86_avx512_attention.inc"
#include "detail/x86_avx512_codebook_tables.inc"
#define SMOL_CODEBOOK_ZMM_NS codebook_zmm_bw
#define SMOL_CODEBOOK_ZMM_VBMI 0
#include "detail/x86_avx512_codebook_tiles.inc"
#undef SMOL_CODEBOOK_ZMM_NS
#undef SMOL_CODEBOOK_ZMM_VBMI
}  // namespace kernels
SMOL_NAMESPACE_END
SMOL_TARGET_END

SMOL_TARGET_BEGIN(
    "avx2,fma,f16c,bmi,bmi2,popcnt,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi")
SMOL_NAMESPACE_BEGIN
namespace kernels {
#define SMOL_CODEBOOK_ZMM_NS codebook_zmm
#define SMOL_CODEBOOK_ZMM_VBMI 1
#include "detail/x86_avx512_codebook_tiles.inc"
#undef SMOL_CODEBOOK_ZMM_NS
#undef SMOL_CODEBOOK_ZMM_VBMI
}  // namespace kernels
SMOL_NAMESPACE_END
SMOL_TARGET_END

#if defined(SMOL_HAS_AMX_KERNELS)
SMOL_TARGET_BEGIN(
    "avx2,fma,f16c,bmi,bmi2,popcnt,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,amx-tile,amx-int8")
SMOL_NAMESPACE_BEGIN
namespace kernels {
#include "detail/x86_amx_tiles.inc"
}  // namespace kernels
SMOL_NAMESPACE_END
SMOL_TARGET_END
#endif

// ---- the x86 kernel sets: one function per level builds all of it ------------------
//
// Every level has, for every weight type, tiles over the rows as stored; the
// rest of its TypeKernels (packed, converted, interleaved) is listed per type
// in its make_kernel_set below and summed up in kernels/weight_types.hpp.

SMOL_NAMESPACE_BEGIN
namespace kernels {
namespace detail {

// What every x86 level shares: avx2's quantizers, float ops, float tiles and
// bandwidth probe, with the Q8_K32 permutation the level's K-quant tiles read.
inline KernelSet x86_common(CpuLevel level, void (*layout_q8_k32)(const BlockQ8K32*, BlockQ8K32*,
                                                                  size_t)) noexcept {
    KernelSet set;
    set.level = level;
    set.quantize_q8_k32 = &avx2::quantize_row_q8_k32;
    set.quantize_q8_k = &avx2::quantize_row_q8_k_activations;
    set.quantize_q8_0 = &avx2::quantize_row_q8_0;
    set.layout_q8_k32 = layout_q8_k32;
    set.of(GGMLType::F32).tiles =
        tile_row([](auto n) { return &avx2::tile_float<GGMLType::F32, decltype(n)::value>; });
    set.of(GGMLType::F16).tiles =
        tile_row([](auto n) { return &avx2::tile_float<GGMLType::F16, decltype(n)::value>; });
    set.of(GGMLType::BF16).tiles =
        tile_row([](auto n) { return &avx2::tile_float<GGMLType::BF16, decltype(n)::value>; });
    set.dot_f32 = &avx2::dot_f32;
    set.rmsnorm = &avx2::rmsnorm;
    set.swiglu = &avx2::swiglu;
    set.softmax = &avx2::softmax;
    set.rope = &avx2::rope;
    set.attend = &avx2::attend;
    set.sum_bytes = &avx2::sum_bytes;
    return set;
}

}  // namespace detail

namespace avx2 {

// p: the stored rows' one-token tiles (stored_prefetch) and decode_chunks.
inline KernelSet make_kernel_set(const KernelParams& p = {}) noexcept {
    KernelSet set = kernels::detail::x86_common(CpuLevel::avx2, &interleave_q8k32);
    set.of(GGMLType::Q8_0).tiles = tile_row([](auto n) { return &tile_q8_0<decltype(n)::value>; });
    use_legacy32_tiles(set);
    use_k32_tiles(set);

    TypeKernels& q4k = set.of(GGMLType::Q4_K);
    q4k.tiles = tile_row([](auto n) { return &tile_q4k<decltype(n)::value>; });
    q4k.packed.row_bytes = &packed_q4k_ymm_row_bytes;
    q4k.packed.pack = &pack_q4k_ymm;
    q4k.packed.tiles = tile_row([](auto n) { return &tile_k4<PackedQ4K256, decltype(n)::value>; });
    q4k.converted = converted_ymm<GGMLType::Q4_K>();

    TypeKernels& q5k = set.of(GGMLType::Q5_K);
    q5k.tiles = tile_row([](auto n) { return &tile_q5k<decltype(n)::value>; });
    q5k.converted = converted_ymm<GGMLType::Q5_K>();

    // Q6_K has no converted rows here, so it is multiplied as stored at every
    // batch size: without vpdpbusd its signed 8-bit values need the sign trick
    // per instruction, which measured slower than the stored rows.
    set.of(GGMLType::Q6_K).tiles = tile_row([](auto n) { return &tile_q6k<decltype(n)::value>; });
    use_stored_prefetch(set, p);
    return set;
}

}  // namespace avx2

namespace avxvnni {

// p: as avx2's.
inline KernelSet make_kernel_set(const KernelParams& p = {}) noexcept {
    KernelSet set = kernels::detail::x86_common(CpuLevel::avxvnni, &avx2::interleave_q8k32);
    set.of(GGMLType::Q8_0).tiles = tile_row([](auto n) { return &tile_q8_0<decltype(n)::value>; });
    use_legacy32_tiles(set);
    use_k32_tiles(set);

    // No packed Q4_K, although this level compiles the same tiles
    // (tile_k4<PackedQ4K256>, same bits): packing was added for the avx2 level
    // and measured only there, with that level forced on a CPU that could not
    // run this one; it stays off here until measured on an AVX-VNNI
    // CPU. Since converted rows serve 32 tokens and more, it could only help
    // runs of 9 to 31 tokens.
    TypeKernels& q4k = set.of(GGMLType::Q4_K);
    q4k.tiles = tile_row([](auto n) { return &tile_q4k<decltype(n)::value>; });
    q4k.converted = converted_ymm<GGMLType::Q4_K>();

    TypeKernels& q5k = set.of(GGMLType::Q5_K);
    q5k.tiles = tile_row([](auto n) { return &tile_q5k<decltype(n)::value>; });
    q5k.converted = converted_ymm<GGMLType::Q5_K>();

    TypeKernels& q6k = set.of(GGMLType::Q6_K);
    q6k.tiles = tile_row([](auto n) { return &tile_q6k<decltype(n)::value>; });
    q6k.converted = converted_ymm<GGMLType::Q6_K>();
    use_stored_prefetch(set, p);
    return set;
}

}  // namespace avxvnni

namespace avx512 {

// The one-token interleaved tile for candidate (pace_index, prefetch_index)
// of kPaceCandidates x kInterleavedPrefetchCandidates.
template <bool has_high_bit, class Block, size_t... i>
TileKernel interleaved_candidate(size_t pace_index, size_t prefetch_index,
                                 std::index_sequence<i...>) noexcept {
    constexpr size_t n = std::size(kInterleavedPrefetchCandidates);
    static constexpr TileKernel table[] = {
        &tile_k4_interleaved_zmm<has_high_bit, Block, 1, kPaceCandidates[i / n],
                                 size_t(kInterleavedPrefetchCandidates[i % n])>...};
    return table[pace_index * n + prefetch_index];
}

// The one-token Q6_K tile for candidate `index` of kStoredPrefetchCandidates.
template <size_t... i>
TileKernel q6k_candidate(size_t index, std::index_sequence<i...>) noexcept {
    static constexpr TileKernel table[] = {
        &tile_q6k_zmm<1, size_t(kStoredPrefetchCandidates[i])>...};
    return table[index];
}

// The K-quants at 512 bits (detail/x86_avx512_tiles.inc), Q8_0 with this
// level's 256-bit EVEX tile (detail/x86_tiles.inc), attention at 512 bits.
// p: the one-token tiles' settings (pace_steps, interleaved_prefetch for Q4_K /
// Q5_K interleaved; stored_prefetch for Q6_K) and decode_chunks: all of them.
inline KernelSet make_kernel_set(const KernelParams& p = {}) noexcept {
    KernelSet set = kernels::detail::x86_common(CpuLevel::avx512, &interleave_q8k32_zmm);
    set.attend = &attend;
    set.of(GGMLType::Q8_0).tiles = tile_row([](auto n) { return &tile_q8_0<decltype(n)::value>; });
    use_legacy32_tiles(set);
    use_k32_tiles(set);

    TypeKernels& q4k = set.of(GGMLType::Q4_K);
    q4k.tiles = tile_row(
        [](auto n) { return &tile_k4_zmm<StoredK4<false, BlockQ4K>, decltype(n)::value>; });
    q4k.packed.row_bytes = &packed_q4k_row_bytes;
    q4k.packed.pack = &pack_q4k;
    q4k.packed.tiles = tile_row([](auto n) { return &tile_k4_zmm<PackedQ4K, decltype(n)::value>; });
    q4k.converted = converted_zmm<GGMLType::Q4_K>();
    q4k.interleaved = tile_row(
        [](auto n) { return &tile_k4_interleaved_zmm<false, BlockQ4K, decltype(n)::value>; });

    TypeKernels& q5k = set.of(GGMLType::Q5_K);
    q5k.tiles =
        tile_row([](auto n) { return &tile_k4_zmm<StoredK4<true, BlockQ5K>, decltype(n)::value>; });
    q5k.converted = converted_zmm<GGMLType::Q5_K>();
    q5k.interleaved = tile_row(
        [](auto n) { return &tile_k4_interleaved_zmm<true, BlockQ5K, decltype(n)::value>; });

    TypeKernels& q6k = set.of(GGMLType::Q6_K);
    q6k.tiles = tile_row([](auto n) { return &tile_q6k_zmm<decltype(n)::value>; });
    q6k.converted = converted_zmm<GGMLType::Q6_K>();

    // The Q8_K family's long batches: rows converted in 16-row zmm groups, 32 rows per pass
    // (the codebook types' conversion replaced below).
    for_each_weight_type<TypeTag, smol::detail::Q8KFamily>([&](auto tag) {
        set.of(decltype(tag)::type).converted = converted_q8k_zmm<decltype(tag)::type>();
    });

    constexpr size_t kInterleavedCount =
        std::size(kPaceCandidates) * std::size(kInterleavedPrefetchCandidates);
    const size_t pace = size_t(candidate_index(kPaceCandidates, p.pace_steps));
    const size_t prefetch =
        size_t(candidate_index(kInterleavedPrefetchCandidates, p.interleaved_prefetch));
    q4k.interleaved[0] = interleaved_candidate<false, BlockQ4K>(
        pace, prefetch, std::make_index_sequence<kInterleavedCount>{});
    q5k.interleaved[0] = interleaved_candidate<true, BlockQ5K>(
        pace, prefetch, std::make_index_sequence<kInterleavedCount>{});
    q6k.tiles[0] =
        q6k_candidate(size_t(candidate_index(kStoredPrefetchCandidates, p.stored_prefetch)),
                      std::make_index_sequence<std::size(kStoredPrefetchCandidates)>{});
    set.params = p;
    // The codebook types a whole block per pass (detail/x86_avx512_codebook_tiles.inc:
    // by VBMI where the CPU has it, else by AVX512-BW; same bits either way), their
    // grid rows gathered or looked up by permutes as p says.
    const bool vbmi = smol::detail::cpu_features().avx512vbmi;
    const auto codebook_tile = [vbmi](auto type, auto gather, auto n) {
        constexpr GGMLType t = decltype(type)::value;
        constexpr bool g = decltype(gather)::value;
        constexpr int cols = decltype(n)::value;
        return vbmi ? &codebook_zmm::tile_codebook_zmm<t, g, cols>
                    : &codebook_zmm_bw::tile_codebook_zmm<t, g, cols>;
    };
    for_each_weight_type<TypeTag, codebook_tables::CodebookTableTypes>([&](auto tag) {
        set.of(decltype(tag)::type).tiles = tile_row([&](auto n) {
            return codebook_tile(std::integral_constant<GGMLType, decltype(tag)::type>{},
                                 std::false_type{}, n);
        });
    });
    // Their long batches' rows converted from the same unpack.
    const auto codebook_converted = [vbmi](auto type, auto gather) {
        constexpr GGMLType t = decltype(type)::value;
        constexpr bool g = decltype(gather)::value;
        return vbmi ? converted_q8k_zmm<t, &codebook_zmm::convert_q8k_block<t, g>>()
                    : converted_q8k_zmm<t, &codebook_zmm_bw::convert_q8k_block<t, g>>();
    };
    for_each_weight_type<TypeTag, codebook_tables::CodebookTableTypes>([&](auto tag) {
        set.of(decltype(tag)::type).converted = codebook_converted(
            std::integral_constant<GGMLType, decltype(tag)::type>{}, std::false_type{});
    });
    if (p.codebook_gathers)
        for_each_weight_type<TypeTag, codebook_tables::CodebookGatherTypes>([&](auto tag) {
            set.of(decltype(tag)::type).tiles = tile_row([&](auto n) {
                return codebook_tile(std::integral_constant<GGMLType, decltype(tag)::type>{},
                                     std::true_type{}, n);
            });
            set.of(decltype(tag)::type).converted = codebook_converted(
                std::integral_constant<GGMLType, decltype(tag)::type>{}, std::true_type{});
        });
    return set;
}

}  // namespace avx512

#if defined(SMOL_HAS_AMX_KERNELS)
namespace amx {

// The avx512 level with the long batches' converted rows on AMX tiles
// (detail/x86_amx_tiles.inc): the same bits, TMUL doing the integer dots.
inline KernelSet make_kernel_set(const KernelParams& p = {}) noexcept {
    KernelSet set = avx512::make_kernel_set(p);
    set.level = CpuLevel::amx;
    set.of(GGMLType::Q4_K).converted = converted<GGMLType::Q4_K>();
    set.of(GGMLType::Q5_K).converted = converted<GGMLType::Q5_K>();
    set.of(GGMLType::Q6_K).converted = converted<GGMLType::Q6_K>();
    set.of(GGMLType::Q4_0).converted = converted<GGMLType::Q4_0>();
    set.of(GGMLType::Q4_1).converted = converted<GGMLType::Q4_1>();
    set.of(GGMLType::Q5_0).converted = converted<GGMLType::Q5_0>();
    set.of(GGMLType::Q5_1).converted = converted<GGMLType::Q5_1>();
    set.of(GGMLType::IQ4_NL).converted = converted<GGMLType::IQ4_NL>();
    return set;
}

}  // namespace amx
#endif
}  // namespace kernels
SMOL_NAMESPACE_END

#endif  // x86-64
