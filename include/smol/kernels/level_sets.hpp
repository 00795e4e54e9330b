// The levels' make_kernel_set behind one switch: build_level_set(level, p), the
// set of `level` (which this CPU can run) with the speed-only settings p, before
// complete_with_spec (dispatch.hpp: build_kernel_set).
//
// Included by dispatch.hpp, where build_level_set is inline; with
// SMOL_SEPARATE_KERNELS defined (dispatch.hpp: build time), dispatch.hpp only
// declares it and the program's one unit that includes this header defines it,
// so the x86 / ARM kernel code is compiled once per program, not once per unit.
#pragma once

#include "../detail/abi.hpp"

#include "arm.hpp"
#include "cpu.hpp"
#include "kernel_set.hpp"
#include "x86.hpp"

#if defined(SMOL_SEPARATE_KERNELS)
#define SMOL_LEVEL_SETS_INLINE
#else
#define SMOL_LEVEL_SETS_INLINE inline
#endif

SMOL_NAMESPACE_BEGIN
namespace kernels {
#if defined(SMOL_SEPARATE_KERNELS)
namespace separate {
#endif

// The set of `level` (which this CPU can run) with the speed-only settings p:
// the level's own make_kernel_set(p), completed with the scalar spec where it
// has no tiles (complete_with_spec): the one way a set is built.
SMOL_LEVEL_SETS_INLINE KernelSet build_level_set(CpuLevel level, const KernelParams& p) {
    switch (level) {
#if defined(SMOL_HAS_X86_KERNELS)
        case CpuLevel::avx2:
            return avx2::make_kernel_set(p);
        case CpuLevel::avxvnni:
            return avxvnni::make_kernel_set(p);
        case CpuLevel::avx512:
            return avx512::make_kernel_set(p);
#if defined(SMOL_HAS_AMX_KERNELS)
        case CpuLevel::amx:
            return amx::make_kernel_set(p);
#endif
#endif
#if defined(SMOL_HAS_ARM_KERNELS)
        case CpuLevel::neon:
            return neon::make_kernel_set(p);
        case CpuLevel::dotprod:
            return dotprod::make_kernel_set(p);
        case CpuLevel::i8mm:
            return i8mm::make_kernel_set(p);
#endif
        default:
            return scalar::make_kernel_set(p);
    }
}
#if defined(SMOL_SEPARATE_KERNELS)
}  // namespace separate
#endif
}  // namespace kernels
SMOL_NAMESPACE_END

#undef SMOL_LEVEL_SETS_INLINE
