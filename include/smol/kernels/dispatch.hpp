// Compile-time kernel selection: which instruction set the kernels in this
// translation unit use, decided once from the consumer's compiler flags.
//
//   SMOL_KERNELS_AVX2  AVX2 + FMA + F16C (x86-64 built with -mavx2 -mfma -mf16c or better);
//                      with SMOL_KERNELS_VNNI too when AVX-512 VNNI+VL or AVX-VNNI is
//                      enabled (the K-quant kernels then use vpdpbusd)
//   SMOL_KERNELS_NEON  AArch64 Advanced SIMD (dot-product instructions used when
//                      __ARM_FEATURE_DOTPROD, e.g. -march=armv8.2-a+dotprod)
//   neither            the portable scalar reference kernels
//
// ODR: the same inline function compiled with different -m flags in two
// translation units of one program would be an ODR violation, and the linker
// could hand an AVX2 body to code meant for a plain CPU. So every kernel and
// every kernel-level entry point (matmul, QuantizedInput, rmsnorm, ...) lives
// in an inline namespace named after the instruction set (SMOL_KERNEL_NS):
// callers still write smol::matmul, but each ISA's copy has its own symbols.
// A runtime dispatcher can therefore include these headers in several files
// built with different flags and call each copy through its namespace
// (e.g. smol::kernels_avx2::matmul and smol::kernels_scalar::matmul).
//
// SMOL_KERNELS_FORCE_SCALAR (define before including) selects the scalar
// kernels whatever the flags; the tests use it to check the fallback.
#pragma once

#if !defined(SMOL_KERNELS_FORCE_SCALAR) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define SMOL_KERNELS_AVX2 1
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
#define SMOL_KERNELS_VNNI 1
#define SMOL_KERNEL_NS kernels_avx2_vnni
#else
#define SMOL_KERNEL_NS kernels_avx2
#endif
#elif !defined(SMOL_KERNELS_FORCE_SCALAR) && defined(__aarch64__) && defined(__ARM_NEON)
#define SMOL_KERNELS_NEON 1
#if defined(__ARM_FEATURE_DOTPROD)
#define SMOL_KERNEL_NS kernels_neon_dotprod
#else
#define SMOL_KERNEL_NS kernels_neon
#endif
#else
#define SMOL_KERNELS_SCALAR 1
#define SMOL_KERNEL_NS kernels_scalar
#endif

#if defined(SMOL_KERNELS_AVX2)
#include <immintrin.h>
#include <xsimd/xsimd.hpp>
#elif defined(SMOL_KERNELS_NEON)
#include <arm_neon.h>
#include <xsimd/xsimd.hpp>
#endif

namespace smol {
inline namespace SMOL_KERNEL_NS {
namespace kernels {

#if defined(SMOL_KERNELS_AVX2)
// The xsimd architecture the float kernels are written for. Not
// xsimd::default_arch: with AVX-512 flags that would be 512-bit batches, and
// the integer kernels here are AVX2 (256-bit) code.
using FloatArch = xsimd::fma3<xsimd::avx2>;
#elif defined(SMOL_KERNELS_NEON)
using FloatArch = xsimd::neon64;
#endif

// Name of the selected kernel set ("avx2", "neon-dotprod", "neon", "scalar").
inline const char* isa_name() noexcept {
#if defined(SMOL_KERNELS_VNNI)
    return "avx2-vnni";
#elif defined(SMOL_KERNELS_AVX2)
    return "avx2";
#elif defined(SMOL_KERNELS_NEON) && defined(__ARM_FEATURE_DOTPROD)
    return "neon-dotprod";
#elif defined(SMOL_KERNELS_NEON)
    return "neon";
#else
    return "scalar";
#endif
}

}  // namespace kernels
}  // namespace SMOL_KERNEL_NS
}  // namespace smol
