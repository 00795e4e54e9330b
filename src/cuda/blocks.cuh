// The per-thread block code of the CUDA backend, written once as
// __host__ __device__ functions: the kernels run it on the GPU, and the host
// emulation (cuda_detail::emulate_dot / emulate_dequantize_row) runs the very
// same code on the CPU so the block decoding is testable without a device.
//
// Activations are quantized to ActBlock (activations.cuh): 32 int8 values
// with a float scale d and s = d * sum(q) (the sum lets Q4_K/Q5_K apply their
// per-sub-block "min" without touching the weights again). Every weight format is cut into
// "slices" (below, at the formats) whose positions line up with activation
// blocks. A slice decodes to int32 words of 4 signed bytes each, so the dot
// product with an activation block is 8 __dp4a per 32 weights.
#pragma once

#include <smol/detail/abi.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <cuda_fp16.h>

#include <smol/core/fp16.hpp>
#include <smol/quant/types.hpp>

#include "activations.cuh"

SMOL_NAMESPACE_BEGIN
namespace cuda_detail {

// ---- portable primitives (device intrinsics, host emulation) ----

SMOL_HD int dot4(int a, int b, int acc) {
#if defined(__CUDA_ARCH__)
    return __dp4a(a, b, acc);
#else
    for (int i = 0; i < 4; ++i)
        acc += int(int8_t(uint32_t(a) >> (8 * i))) * int(int8_t(uint32_t(b) >> (8 * i)));
    return acc;
#endif
}

// Per-byte a - b, modulo 256 (no borrow between bytes).
SMOL_HD int sub_bytes(int a, int b) {
#if defined(__CUDA_ARCH__)
    return int(__vsub4(unsigned(a), unsigned(b)));
#else
    uint32_t out = 0;
    for (int i = 0; i < 4; ++i) {
        const uint32_t x = (uint32_t(a) >> (8 * i)) & 0xff, y = (uint32_t(b) >> (8 * i)) & 0xff;
        out |= ((x - y) & 0xff) << (8 * i);
    }
    return int(out);
#endif
}

SMOL_HD float half_bits_to_float(uint16_t bits) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(bits));
#else
    return fp16_to_fp32(bits);
#endif
}

// Loads of little-endian words from packed blocks. The device reads them
// directly (aligned as noted); the host emulation uses memcpy (no aliasing UB).
SMOL_HD uint16_t load_u16(const uint8_t* p) {  // p 2-byte aligned
#if defined(__CUDA_ARCH__)
    return *reinterpret_cast<const uint16_t*>(p);
#else
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
#endif
}
// 32 bytes from a 2-byte aligned address (Q6_K's and Q8_0's quants: their
// blocks are 210 and 34 bytes) as 8 words: eight aligned word loads and a
// 16-bit one, funnel-shifted when the address is not 4-byte aligned (9 loads
// instead of 16; every byte read lies within p - 2 .. p + 31).
SMOL_HD void load_8_words_a2(const uint8_t* p, int* out) {
#if defined(__CUDA_ARCH__)
    const unsigned misaligned = unsigned(reinterpret_cast<uintptr_t>(p)) & 2u;
    const uint32_t* w = reinterpret_cast<const uint32_t*>(p - misaligned);
    uint32_t words[8];
    for (int i = 0; i < 8; ++i) words[i] = w[i];
    const uint32_t tail = *reinterpret_cast<const uint16_t*>(p + 30);
    for (int i = 0; i < 8; ++i) {
        const uint32_t next = i < 7 ? words[i + 1] : tail;
        out[i] = int(misaligned ? __funnelshift_r(words[i], next, 16) : words[i]);
    }
#else
    std::memcpy(out, p, 32);
#endif
}
// Wide loads, for fewer load instructions per byte: 32 bytes from a 16-byte
// aligned address (Q4_K / Q5_K quants: their blocks are 144 and 176 bytes, and
// rows start 256-byte aligned) and the 32 codes of an activation block (8-byte
// aligned: ActBlock is 40 bytes with its codes at offset 8), as 8 words.
SMOL_HD void load_8_words_a16(const uint8_t* p, int* out) {
#if defined(__CUDA_ARCH__)
    const int4 a = *reinterpret_cast<const int4*>(p);
    const int4 b = *reinterpret_cast<const int4*>(p + 16);
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
#else
    std::memcpy(out, p, 32);
#endif
}
SMOL_HD void load_8_words_a8(const uint8_t* p, int* out) {
#if defined(__CUDA_ARCH__)
    for (int i = 0; i < 4; ++i) {
        const int2 v = reinterpret_cast<const int2*>(p)[i];
        out[2 * i] = v.x;
        out[2 * i + 1] = v.y;
    }
#else
    std::memcpy(out, p, 32);
#endif
}

// The 16-byte head of a Q4_K / Q5_K block (d, dmin, the 12 packed scale bytes;
// 16-byte aligned: their blocks are 144 and 176 bytes, rows start 256-byte
// aligned) in one load, and its bytes.
struct HeadK4 {
    uint32_t word[4];
    SMOL_HD int byte(int k) const {  // of the 12 scale bytes (no dynamic array index)
        const int i = k >> 2;
        const uint32_t w = i == 0 ? word[1] : (i == 1 ? word[2] : word[3]);
        return int((w >> (8 * (k & 3))) & 0xFFu);
    }
};
SMOL_HD HeadK4 load_head_k4(const uint8_t* block) {
    HeadK4 head;
#if defined(__CUDA_ARCH__)
    const uint4 v = *reinterpret_cast<const uint4*>(block);
    head.word[0] = v.x, head.word[1] = v.y, head.word[2] = v.z, head.word[3] = v.w;
#else
    std::memcpy(head.word, block, 16);
#endif
    return head;
}
// Q4_K / Q5_K: 6-bit scale and min of sub-block j from the head's packed bytes.
SMOL_HD void scale_min_k4(const HeadK4& head, int j, int& scale, int& min) {
    if (j < 4) {
        scale = head.byte(j) & 63;
        min = head.byte(j + 4) & 63;
    } else {
        scale = (head.byte(j + 4) & 0x0F) | ((head.byte(j - 4) >> 6) << 4);
        min = (head.byte(j + 4) >> 4) | ((head.byte(j) >> 6) << 4);
    }
}
// Q4_K / Q5_K: 6-bit scale and min of sub-block j from the 12 packed bytes.
SMOL_HD void scale_min_k4(const uint8_t* packed, int j, int& scale, int& min) {
    if (j < 4) {
        scale = packed[j] & 63;
        min = packed[j + 4] & 63;
    } else {
        scale = (packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4);
        min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
    }
}

// ---- weight formats ----
// Each format: kBlockWeights weights per block of kBlockBytes bytes, kSlices
// slices per block; Slice = one slice's decoded quants and factors;
// load(row, slice) reads it, dot(slice, act) applies it to one token's
// activation blocks `act` (the whole row's). A slice is the share of one lane
// in one step of the mat-vec (matmul.cu: lane i takes slices i, i + lanes, ...).
//   Q4_K / Q5_K: 4 slices per 256-weight super-block; slice c covers the 64
//     weights of chunk c (sub-blocks 2c and 2c + 1 = activation blocks 8b + 2c,
//     8b + 2c + 1) and reads the chunk's 32 quant bytes once; each sub-block's
//     32 products are one integer sum.
//   Q6_K: 8 slices per super-block; slice g = 4h + k covers weights
//     128h + 32k + i, i < 32 (activation block 8b + g) with two int8 scales
//     (i < 16, i >= 16).
//   Q8_0: 1 slice per 32-weight block.
// Why 32-weight integer sums and not 16-byte slices of 16 positions (tried
// 2026-11-28, benchmarks/RESULTS.md "GPU"): halving each sub-block's sum moved
// the float rounding enough that the tiny Q4_K_M fixture's greedy path left the
// reference's at a step whose reference gap is 0.38 (the goldens allow 0.25).

struct FormatQ4K {
    static constexpr int kBlockWeights = 256, kBlockBytes = 144, kSlices = 4;
    struct Slice {
        int lo[8], hi[8];  // sub-block 2c (low nibbles) and 2c + 1 (high nibbles)
        float d_scale_lo, d_scale_hi, dmin_min_lo, dmin_min_hi;
        int act;  // index of the first activation block
    };
    SMOL_HD static Slice load(const uint8_t* row, int slice) {
        const int b = slice / kSlices, c = slice % kSlices;
        const uint8_t* block = row + size_t(b) * kBlockBytes;
        const HeadK4 head = load_head_k4(block);
        const float d = half_bits_to_float(uint16_t(head.word[0]));
        const float dmin = half_bits_to_float(uint16_t(head.word[0] >> 16));
        int sc_lo, m_lo, sc_hi, m_hi;
        scale_min_k4(head, 2 * c, sc_lo, m_lo);
        scale_min_k4(head, 2 * c + 1, sc_hi, m_hi);
        Slice u;
        int words[8];
        load_8_words_a16(block + 16 + 32 * c, words);
        for (int k = 0; k < 8; ++k) {
            u.lo[k] = words[k] & 0x0F0F0F0F;
            u.hi[k] = (words[k] >> 4) & 0x0F0F0F0F;
        }
        u.d_scale_lo = d * float(sc_lo);
        u.d_scale_hi = d * float(sc_hi);
        u.dmin_min_lo = dmin * float(m_lo);
        u.dmin_min_hi = dmin * float(m_hi);
        u.act = 8 * b + 2 * c;
        return u;
    }
    SMOL_HD static float dot(const Slice& u, const ActBlock* act) {
        const ActBlock& a0 = act[u.act];
        const ActBlock& a1 = act[u.act + 1];
        int q0[8], q1[8];
        load_8_words_a8(reinterpret_cast<const uint8_t*>(a0.q), q0);
        load_8_words_a8(reinterpret_cast<const uint8_t*>(a1.q), q1);
        int sum_lo = 0, sum_hi = 0;
        for (int k = 0; k < 8; ++k) {
            sum_lo = dot4(u.lo[k], q0[k], sum_lo);
            sum_hi = dot4(u.hi[k], q1[k], sum_hi);
        }
        return u.d_scale_lo * a0.d * float(sum_lo) + u.d_scale_hi * a1.d * float(sum_hi) -
               u.dmin_min_lo * a0.s - u.dmin_min_hi * a1.s;
    }
    SMOL_HD static float element(const uint8_t* row, size_t i) {
        const uint8_t* block = row + (i / 256) * kBlockBytes;
        const int r = int(i % 256), c = r / 64, within = r % 64, sub = 2 * c + within / 32;
        int sc, m;
        scale_min_k4(block + 4, sub, sc, m);
        const uint8_t byte = block[16 + 32 * c + within % 32];
        const int q = within < 32 ? (byte & 0x0F) : (byte >> 4);
        return half_bits_to_float(load_u16(block)) * float(sc) * float(q) -
               half_bits_to_float(load_u16(block + 2)) * float(m);
    }
};

struct FormatQ5K {
    static constexpr int kBlockWeights = 256, kBlockBytes = 176, kSlices = 4;
    using Slice = FormatQ4K::Slice;  // quants 0..31 instead of 0..15, same arithmetic
    SMOL_HD static Slice load(const uint8_t* row, int slice) {
        const int b = slice / kSlices, c = slice % kSlices;
        const uint8_t* block = row + size_t(b) * kBlockBytes;
        const HeadK4 head = load_head_k4(block);
        const float d = half_bits_to_float(uint16_t(head.word[0]));
        const float dmin = half_bits_to_float(uint16_t(head.word[0] >> 16));
        int sc_lo, m_lo, sc_hi, m_hi;
        scale_min_k4(head, 2 * c, sc_lo, m_lo);
        scale_min_k4(head, 2 * c + 1, sc_hi, m_hi);
        Slice u;
        int qs[8], qh[8];
        load_8_words_a16(block + 16, qh);
        load_8_words_a16(block + 48 + 32 * c, qs);
        for (int k = 0; k < 8; ++k) {
            const int v = qs[k];
            const int h = qh[k];
            // Bit 2c (low) / 2c + 1 (high) of each qh byte is the 5th bit.
            u.lo[k] = (v & 0x0F0F0F0F) | (((h >> (2 * c)) & 0x01010101) << 4);
            u.hi[k] = ((v >> 4) & 0x0F0F0F0F) | (((h >> (2 * c + 1)) & 0x01010101) << 4);
        }
        u.d_scale_lo = d * float(sc_lo);
        u.d_scale_hi = d * float(sc_hi);
        u.dmin_min_lo = dmin * float(m_lo);
        u.dmin_min_hi = dmin * float(m_hi);
        u.act = 8 * b + 2 * c;
        return u;
    }
    SMOL_HD static float dot(const Slice& u, const ActBlock* act) { return FormatQ4K::dot(u, act); }
    SMOL_HD static float element(const uint8_t* row, size_t i) {
        const uint8_t* block = row + (i / 256) * kBlockBytes;
        const int r = int(i % 256), c = r / 64, within = r % 64, sub = 2 * c + within / 32;
        int sc, m;
        scale_min_k4(block + 4, sub, sc, m);
        const uint8_t byte = block[48 + 32 * c + within % 32];
        const int low = within < 32 ? (byte & 0x0F) : (byte >> 4);
        const int high = (block[16 + within % 32] >> sub) & 1;
        return half_bits_to_float(load_u16(block)) * float(sc) * float(low | (high << 4)) -
               half_bits_to_float(load_u16(block + 2)) * float(m);
    }
};

struct FormatQ6K {
    static constexpr int kBlockWeights = 256, kBlockBytes = 210, kSlices = 8;
    struct Slice {
        int q[8];                      // (quant - 32) as signed bytes, weights i = 4k..4k+3
        float d_scale_lo, d_scale_hi;  // d * scale for i < 16 and i >= 16
        int act;
    };
    SMOL_HD static Slice load(const uint8_t* row, int slice) {
        const int b = slice / kSlices, g = slice % kSlices, h = g / 4, k = g % 4;
        const uint8_t* block = row + size_t(b) * kBlockBytes;
        const uint8_t* ql = block + 64 * h + 32 * (k & 1);
        const uint8_t* qh = block + 128 + 32 * h;
        const int8_t* scales = reinterpret_cast<const int8_t*>(block + 192);
        const float d = half_bits_to_float(load_u16(block + 208));
        Slice u;
        int lows[8], highs[8];
        load_8_words_a2(ql, lows);
        load_8_words_a2(qh, highs);
        for (int j = 0; j < 8; ++j) {
            const int low = k >= 2 ? (lows[j] >> 4) & 0x0F0F0F0F : lows[j] & 0x0F0F0F0F;
            const int high = (highs[j] >> (2 * k)) & 0x03030303;
            u.q[j] = sub_bytes(low | (high << 4), 0x20202020);
        }
        u.d_scale_lo = d * float(scales[8 * h + 2 * k]);
        u.d_scale_hi = d * float(scales[8 * h + 2 * k + 1]);
        u.act = 8 * b + g;
        return u;
    }
    SMOL_HD static float dot(const Slice& u, const ActBlock* act) {
        const ActBlock& a = act[u.act];
        int aq[8];
        load_8_words_a8(reinterpret_cast<const uint8_t*>(a.q), aq);
        int sum_lo = 0, sum_hi = 0;
        for (int j = 0; j < 4; ++j) sum_lo = dot4(u.q[j], aq[j], sum_lo);
        for (int j = 4; j < 8; ++j) sum_hi = dot4(u.q[j], aq[j], sum_hi);
        return a.d * (u.d_scale_lo * float(sum_lo) + u.d_scale_hi * float(sum_hi));
    }
    SMOL_HD static float element(const uint8_t* row, size_t i) {
        const uint8_t* block = row + (i / 256) * kBlockBytes;
        const int r = int(i % 256), h = r / 128, k = (r % 128) / 32, ii = r % 32;
        const uint8_t l = block[64 * h + 32 * (k & 1) + ii];
        const int low = k >= 2 ? (l >> 4) : (l & 0x0F);
        const int high = (block[128 + 32 * h + ii] >> (2 * k)) & 3;
        const int8_t scale = reinterpret_cast<const int8_t*>(block + 192)[r / 16];
        return half_bits_to_float(load_u16(block + 208)) * float(scale) *
               float((low | (high << 4)) - 32);
    }
};

struct FormatQ8_0 {
    static constexpr int kBlockWeights = 32, kBlockBytes = 34, kSlices = 1;
    struct Slice {
        int q[8];
        float d;
        int act;
    };
    SMOL_HD static Slice load(const uint8_t* row, int slice) {
        const uint8_t* block = row + size_t(slice) * kBlockBytes;
        Slice u;
        u.d = half_bits_to_float(load_u16(block));
        load_8_words_a2(block + 2, u.q);
        u.act = slice;
        return u;
    }
    SMOL_HD static float dot(const Slice& u, const ActBlock* act) {
        const ActBlock& a = act[u.act];
        int aq[8];
        load_8_words_a8(reinterpret_cast<const uint8_t*>(a.q), aq);
        int sum = 0;
        for (int j = 0; j < 8; ++j) sum = dot4(u.q[j], aq[j], sum);
        return u.d * a.d * float(sum);
    }
    SMOL_HD static float element(const uint8_t* row, size_t i) {
        const uint8_t* block = row + (i / 32) * kBlockBytes;
        return half_bits_to_float(load_u16(block)) * float(int8_t(block[2 + i % 32]));
    }
};

// The formats the device reads as embedding tables only (no device matmul yet:
// a model with such matrices stays on the CPU under Device::automatic). Byte
// offsets are the GGUF blocks' (quant/blocks.hpp); weight j of a 32-weight
// block has its low 4 bits in the low (j < 16) or high nibble of qs[j % 16].
SMOL_HD int nibble_at(const uint8_t* qs, int j) {
    return j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
}
SMOL_HD int iq4_value(int q) {
    const int8_t values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                               1,    13,   25,  38,  53,  69,  89,  113};
    return values[q];
}
// Q4_0 (18 bytes: d, qs), Q4_1 (20: d, m, qs), Q5_0 (22: d, qh, qs),
// Q5_1 (24: d, m, qh, qs), IQ4_NL (18: d, qs).
template <int bytes, bool has_min, bool has_high_bit, bool nonlinear>
struct FormatLegacy32 {
    static constexpr int kBlockWeights = 32, kBlockBytes = bytes;
    SMOL_HD static float element(const uint8_t* row, size_t i) {
        const uint8_t* block = row + (i / 32) * kBlockBytes;
        const int j = int(i % 32);
        const int qs_at = 2 + (has_min ? 2 : 0) + (has_high_bit ? 4 : 0);
        int q = nibble_at(block + qs_at, j);
        if (has_high_bit) q |= ((block[2 + (has_min ? 2 : 0) + j / 8] >> (j % 8)) & 1) << 4;
        const float d = half_bits_to_float(load_u16(block));
        if (nonlinear) return d * float(iq4_value(q));
        if (has_min) return d * float(q) + half_bits_to_float(load_u16(block + 2));
        return d * float(q - (has_high_bit ? 16 : 8));
    }
};
using FormatQ4_0 = FormatLegacy32<18, false, false, false>;
using FormatQ4_1 = FormatLegacy32<20, true, false, false>;
using FormatQ5_0 = FormatLegacy32<22, false, true, false>;
using FormatQ5_1 = FormatLegacy32<24, true, true, false>;
using FormatIQ4NL = FormatLegacy32<18, false, false, true>;

// Q2_K / Q3_K: weight r = 128h + 32k + l of a block is bits 2k, 2k + 1 of qs[32h + l].
SMOL_HD int k2_bits_at(const uint8_t* qs, int r) {
    return (qs[32 * (r / 128) + r % 32] >> (2 * ((r % 128) / 32))) & 3;
}
// Q2_K (84 bytes: scales[16], qs[64], d, dmin).
struct FormatQ2K {
    static constexpr int kBlockWeights = 256, kBlockBytes = 84;
    SMOL_HD static float element(const uint8_t* row, size_t i) {
        const uint8_t* block = row + (i / 256) * kBlockBytes;
        const int r = int(i % 256);
        const int sc = block[r / 16];
        return half_bits_to_float(load_u16(block + 80)) * float(sc & 0x0F) *
                   float(k2_bits_at(block + 16, r)) -
               half_bits_to_float(load_u16(block + 82)) * float(sc >> 4);
    }
};
// Q3_K (110 bytes: hmask[32], qs[64], scales[12], d).
struct FormatQ3K {
    static constexpr int kBlockWeights = 256, kBlockBytes = 110;
    SMOL_HD static float element(const uint8_t* row, size_t i) {
        const uint8_t* block = row + (i / 256) * kBlockBytes;
        const int r = int(i % 256), g = r / 16;
        const uint8_t* scales = block + 96;
        const int low = g < 8 ? (scales[g] & 0x0F) : (scales[g - 8] >> 4);
        const int scale = (low | (((scales[8 + g % 4] >> (2 * (g / 4))) & 3) << 4)) - 32;
        const int high = (block[r % 32] >> (4 * (r / 128) + (r % 128) / 32)) & 1;
        const int q = k2_bits_at(block + 32, r) - (high ? 0 : 4);
        return half_bits_to_float(load_u16(block + 108)) * float(scale) * float(q);
    }
};
// IQ4_XS (136 bytes: d, scales_h, scales_l[4], qs[128]).
struct FormatIQ4XS {
    static constexpr int kBlockWeights = 256, kBlockBytes = 136;
    SMOL_HD static float element(const uint8_t* row, size_t i) {
        const uint8_t* block = row + (i / 256) * kBlockBytes;
        const int r = int(i % 256), s = r / 32;
        const int low = (block[4 + s / 2] >> (4 * (s % 2))) & 0x0F;
        const int high = (load_u16(block + 2) >> (2 * s)) & 3;
        const float step = half_bits_to_float(load_u16(block)) * float((low | (high << 4)) - 32);
        return step * float(iq4_value(nibble_at(block + 8 + 16 * s, r % 32)));
    }
};

// Plain float formats, for embedding tables only (matrices must be quantized).
struct FormatF32 {
    SMOL_HD static float element(const uint8_t* row, size_t i) {
#if defined(__CUDA_ARCH__)
        return reinterpret_cast<const float*>(row)[i];
#else
        float f;
        std::memcpy(&f, row + 4 * i, sizeof f);
        return f;
#endif
    }
};
struct FormatF16 {
    SMOL_HD static float element(const uint8_t* row, size_t i) {
        return half_bits_to_float(load_u16(row + 2 * i));
    }
};
struct FormatBF16 {
    SMOL_HD static float element(const uint8_t* row, size_t i) {
        const uint32_t bits = uint32_t(load_u16(row + 2 * i)) << 16;
#if defined(__CUDA_ARCH__)
        return __uint_as_float(bits);
#else
        float f;
        std::memcpy(&f, &bits, sizeof f);
        return f;
#endif
    }
};

// ---- the per-type table ----
// Format<type> for every weight type smol computes with (WeightTypes,
// quant/types.hpp): its block decoding (`type`, one of the structs above),
// whether matrices of it can be multiplied, whether embedding tables of it can
// be read (embeds: all but the codebook types), and the rule of the activations its matrices read.
// Reached through visit_weight_type<Format>(type, f), never a switch of its own; e.g.
//   visit_weight_type<Format>(w.type, [&](auto format) {
//       using F = decltype(format);
//       if constexpr (F::matmul) matmul_for<typename F::type>(...);
//   });
template <GGMLType type>
struct Format;

template <class Decoding, bool has_matmul, ActRule rule, bool has_element = true>
struct FormatEntry {
    using type = Decoding;
    static constexpr bool matmul = has_matmul;
    static constexpr ActRule act_rule = rule;
    static constexpr bool embeds = has_element;  // Decoding::element reads tables of it
};
// A type the device does not decode at all (its codebooks live on the host):
// neither its matrices nor its embedding tables upload, so a model with them
// stays on the CPU under Device::automatic.
struct FormatHostOnly {};
using HostOnly = FormatEntry<FormatHostOnly, false, ActRule::kquant, false>;
template <>
struct Format<GGMLType::F32> : FormatEntry<FormatF32, false, ActRule::kquant> {};
template <>
struct Format<GGMLType::F16> : FormatEntry<FormatF16, false, ActRule::kquant> {};
template <>
struct Format<GGMLType::BF16> : FormatEntry<FormatBF16, false, ActRule::kquant> {};
template <>
struct Format<GGMLType::Q8_0> : FormatEntry<FormatQ8_0, true, ActRule::q8_0> {};
template <>
struct Format<GGMLType::Q4_K> : FormatEntry<FormatQ4K, true, ActRule::kquant> {};
template <>
struct Format<GGMLType::Q5_K> : FormatEntry<FormatQ5K, true, ActRule::kquant> {};
template <>
struct Format<GGMLType::Q6_K> : FormatEntry<FormatQ6K, true, ActRule::kquant> {};
template <>
struct Format<GGMLType::Q4_0> : FormatEntry<FormatQ4_0, false, ActRule::kquant> {};
template <>
struct Format<GGMLType::Q4_1> : FormatEntry<FormatQ4_1, false, ActRule::kquant> {};
template <>
struct Format<GGMLType::Q5_0> : FormatEntry<FormatQ5_0, false, ActRule::kquant> {};
template <>
struct Format<GGMLType::Q5_1> : FormatEntry<FormatQ5_1, false, ActRule::kquant> {};
template <>
struct Format<GGMLType::IQ4_NL> : FormatEntry<FormatIQ4NL, false, ActRule::kquant> {};
template <>
struct Format<GGMLType::Q2_K> : FormatEntry<FormatQ2K, false, ActRule::kquant> {};
template <>
struct Format<GGMLType::Q3_K> : FormatEntry<FormatQ3K, false, ActRule::kquant> {};
template <>
struct Format<GGMLType::IQ4_XS> : FormatEntry<FormatIQ4XS, false, ActRule::kquant> {};
template <>
struct Format<GGMLType::IQ2_XXS> : HostOnly {};
template <>
struct Format<GGMLType::IQ2_XS> : HostOnly {};
template <>
struct Format<GGMLType::IQ2_S> : HostOnly {};
template <>
struct Format<GGMLType::IQ3_XXS> : HostOnly {};
template <>
struct Format<GGMLType::IQ3_S> : HostOnly {};
template <>
struct Format<GGMLType::IQ1_S> : HostOnly {};
template <>
struct Format<GGMLType::IQ1_M> : HostOnly {};

// Every type smol computes with has an entry: a device matmul, or explicitly
// none (CPU only).
static_assert(detail::every_type_has<Format>(WeightTypes{}),
              "a WeightTypes type has no cuda_detail::Format entry (matmul false: CPU only)");

// The quantized formats' blocks are the GGUF blocks.
template <GGMLType id, class Decoding>
constexpr bool format_matches() {
    return Decoding::kBlockWeights == int(type_traits(id).block_size) &&
           Decoding::kBlockBytes == int(type_traits(id).type_size);
}
static_assert(format_matches<GGMLType::Q8_0, FormatQ8_0>() &&
                  format_matches<GGMLType::Q4_K, FormatQ4K>() &&
                  format_matches<GGMLType::Q5_K, FormatQ5K>() &&
                  format_matches<GGMLType::Q6_K, FormatQ6K>() &&
                  format_matches<GGMLType::Q4_0, FormatQ4_0>() &&
                  format_matches<GGMLType::Q4_1, FormatQ4_1>() &&
                  format_matches<GGMLType::Q5_0, FormatQ5_0>() &&
                  format_matches<GGMLType::Q5_1, FormatQ5_1>() &&
                  format_matches<GGMLType::IQ4_NL, FormatIQ4NL>() &&
                  format_matches<GGMLType::Q2_K, FormatQ2K>() &&
                  format_matches<GGMLType::Q3_K, FormatQ3K>() &&
                  format_matches<GGMLType::IQ4_XS, FormatIQ4XS>(),
              "a CUDA format disagrees with the GGUF type table");

// The activation rule of a matrix of `type` (kquant for types without matrices).
inline ActRule act_rule_of(GGMLType type) {
    ActRule rule = ActRule::kquant;
    visit_weight_type<Format>(type, [&](auto format) { rule = decltype(format)::act_rule; });
    return rule;
}

// ---- Backend::erase: re-rotating moved keys ----

// The rotation that moves a stored key by a position change (RopeRule::shift,
// model/rope.hpp): cos/sin per pair, pairs <= kMaxShiftPairs (head dims the
// attention kernels take: at most 256, so 128 pairs).
constexpr int kMaxShiftPairs = 128;
struct KeyShift {
    float cos[kMaxShiftPairs];
    float sin[kMaxShiftPairs];
    int pairs = 0;
};

// Whether block `block` of a cache ([layer][K, V][kv head] order) holds the
// keys of a RoPE layer: only those rotate; NoPE keys and values move as they are.
SMOL_HD bool shift_block_rotates(long long block, int n_kv_heads, int nope_interval) {
    const long long layer = block / (2LL * n_kv_heads);
    const bool keys = (block / n_kv_heads) % 2 == 0;
    return keys && (nope_interval == 0 || (layer + 1) % nope_interval != 0);
}

// Rotates pair `pair` of one F16 key row in place: the CPU KVCache's erase
// arithmetic (one fused multiply-add over one rounded product, rounded to F16).
SMOL_HD void shift_pair(__half* row, int pair, const KeyShift& shift) {
    const float x0 = __half2float(row[2 * pair]), x1 = __half2float(row[2 * pair + 1]);
    const float c = shift.cos[pair], s = shift.sin[pair];
    row[2 * pair] = __float2half_rn(fmaf(x0, c, -(x1 * s)));
    row[2 * pair + 1] = __float2half_rn(fmaf(x1, c, x0 * s));
}

}  // namespace cuda_detail
SMOL_NAMESPACE_END
