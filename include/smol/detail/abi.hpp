// SMOL_ABI: the inline namespace every flag-dependent definition of smol lives
// in, named after the library version and the instruction-set flags of the
// translation unit that compiles it.
//
// Why: smol is header-only, so each translation unit compiles its own copy of
// Model::forward, Generator::generate, ... with that unit's -m flags. The
// compiler may auto-vectorize any of them with whatever the flags allow. Two
// units of one program built with different flags would emit the same weak
// symbol with different code, and the linker keeps one: a unit built for a
// plain x86-64 CPU could end up running AVX2 code it never asked for (an
// illegal instruction on an older CPU), or the reverse. With the flags in the
// namespace name the two copies are different symbols and each unit runs its
// own. Callers never write the tag: `smol::Model` finds it through the inline
// namespace. The kernels are chosen at run time (kernels/cpu.hpp), so no flags
// are needed at all; the tag only keeps units that do use flags apart.
//
// Consequence: objects of smol types cannot be passed between units built with
// different ISA flags (the function signatures differ, so it fails at link
// time, not at run time). smol::Error, ErrorKind and ErrorInfo stay outside
// the tag so an error thrown in one unit can be caught in any other.
#pragma once

#include "../version.hpp"

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
// One digit per x86 feature macro that changes code generation.
#if defined(__SSE3__)
#define SMOL_ABI_D0 1
#else
#define SMOL_ABI_D0 0
#endif
#if defined(__SSSE3__)
#define SMOL_ABI_D1 1
#else
#define SMOL_ABI_D1 0
#endif
#if defined(__SSE4_1__) || defined(__SSE4_2__)
#define SMOL_ABI_D2 1
#else
#define SMOL_ABI_D2 0
#endif
#if defined(__AVX__)
#define SMOL_ABI_D3 1
#else
#define SMOL_ABI_D3 0
#endif
#if defined(__AVX2__)
#define SMOL_ABI_D4 1
#else
#define SMOL_ABI_D4 0
#endif
#if defined(__FMA__)
#define SMOL_ABI_D5 1
#else
#define SMOL_ABI_D5 0
#endif
#if defined(__F16C__)
#define SMOL_ABI_D6 1
#else
#define SMOL_ABI_D6 0
#endif
#if defined(__BMI2__)
#define SMOL_ABI_D7 1
#else
#define SMOL_ABI_D7 0
#endif
#if defined(__AVXVNNI__)
#define SMOL_ABI_D8 1
#else
#define SMOL_ABI_D8 0
#endif
#if defined(__AVX512F__)
#define SMOL_ABI_D9 1
#else
#define SMOL_ABI_D9 0
#endif
#if defined(__AVX512BW__) || defined(__AVX512VL__) || defined(__AVX512DQ__)
#define SMOL_ABI_D10 1
#else
#define SMOL_ABI_D10 0
#endif
#if defined(__AVX512VNNI__) || defined(__AVX512BF16__) || defined(__AVX512VBMI__)
#define SMOL_ABI_D11 1
#else
#define SMOL_ABI_D11 0
#endif
#define SMOL_ABI_ARCH x86
#elif defined(__aarch64__) || defined(_M_ARM64)
#define SMOL_ABI_D0 1
#if defined(__ARM_FEATURE_DOTPROD)
#define SMOL_ABI_D1 1
#else
#define SMOL_ABI_D1 0
#endif
#if defined(__ARM_FEATURE_MATMUL_INT8)
#define SMOL_ABI_D2 1
#else
#define SMOL_ABI_D2 0
#endif
#if defined(__ARM_FEATURE_SVE)
#define SMOL_ABI_D3 1
#else
#define SMOL_ABI_D3 0
#endif
#if defined(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC)
#define SMOL_ABI_D4 1
#else
#define SMOL_ABI_D4 0
#endif
#define SMOL_ABI_D5 0
#define SMOL_ABI_D6 0
#define SMOL_ABI_D7 0
#define SMOL_ABI_D8 0
#define SMOL_ABI_D9 0
#define SMOL_ABI_D10 0
#define SMOL_ABI_D11 0
#define SMOL_ABI_ARCH arm64
#else
#define SMOL_ABI_D0 0
#define SMOL_ABI_D1 0
#define SMOL_ABI_D2 0
#define SMOL_ABI_D3 0
#define SMOL_ABI_D4 0
#define SMOL_ABI_D5 0
#define SMOL_ABI_D6 0
#define SMOL_ABI_D7 0
#define SMOL_ABI_D8 0
#define SMOL_ABI_D9 0
#define SMOL_ABI_D10 0
#define SMOL_ABI_D11 0
#define SMOL_ABI_ARCH generic
#endif

// Whether the unit compiles with exceptions (g++/clang: -fno-exceptions clears
// __cpp_exceptions; MSVC: /EHsc sets _CPPUNWIND). Part of the tag: the error
// path (detail::fail) differs between the two modes.
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS) || defined(_CPPUNWIND)
#define SMOL_HAS_EXCEPTIONS 1
#define SMOL_ABI_EXCEPTIONS e
#else
#define SMOL_HAS_EXCEPTIONS 0
#define SMOL_ABI_EXCEPTIONS n
#endif

#define SMOL_ABI_JOIN_(major, minor, arch, exc, a, b, c, d, e, f, g, h, i, j, k, l) \
    v##major##_##minor##_##arch##_##exc##a##b##c##d##e##f##g##h##i##j##k##l
#define SMOL_ABI_JOIN(major, minor, arch, exc, a, b, c, d, e, f, g, h, i, j, k, l) \
    SMOL_ABI_JOIN_(major, minor, arch, exc, a, b, c, d, e, f, g, h, i, j, k, l)

// e.g. v0_1_x86_e000000000000 for a plain x86-64 build with exceptions,
// v0_1_x86_e111111110000 for -march=haswell. Linking smol::cuda changes no
// definition of the other headers (the model layer takes the CUDA backend
// through a factory), so it is not part of the tag.
#define SMOL_ABI                                                                                \
    SMOL_ABI_JOIN(SMOL_VERSION_MAJOR, SMOL_VERSION_MINOR, SMOL_ABI_ARCH, SMOL_ABI_EXCEPTIONS,   \
                  SMOL_ABI_D0, SMOL_ABI_D1, SMOL_ABI_D2, SMOL_ABI_D3, SMOL_ABI_D4, SMOL_ABI_D5, \
                  SMOL_ABI_D6, SMOL_ABI_D7, SMOL_ABI_D8, SMOL_ABI_D9, SMOL_ABI_D10, SMOL_ABI_D11)

#define SMOL_NAMESPACE_BEGIN \
    namespace smol {         \
    inline namespace SMOL_ABI {
#define SMOL_NAMESPACE_END \
    }                      \
    }
