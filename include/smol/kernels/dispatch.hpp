// Run-time kernel dispatch: the KernelSet of a CPU level, built once.
//
//   const KernelSet& kernel_set(CpuLevel level)
//       the set for `level` (automatic = best_cpu_level()); Error(invalid_argument)
//       when this CPU cannot run it (kernels/cpu.hpp: resolve_cpu_level).
//   const KernelSet& default_kernels()
//       the set for SMOL_CPU (environment) or, unset, the best level; what
//       Model::load uses unless LoadOptions::cpu says otherwise, and what the
//       free functions in kernels.hpp (smol::rmsnorm, QuantizedInput, ...) use.
//
// Each set is a function-local static, built on first use (thread-safe) by its
// level's make_kernel_set (scalar: kernel_set.hpp; avx2, avxvnni, avx512, amx:
// x86.hpp; neon, dotprod: arm.hpp) and never changed, so a pointer to it stays
// valid for the whole program.
#pragma once

#include "../detail/abi.hpp"

#include <string>

#include "../error.hpp"
#include "arm.hpp"
#include "cpu.hpp"
#include "kernel_set.hpp"
#include "x86.hpp"

SMOL_NAMESPACE_BEGIN
namespace kernels {

inline const KernelSet& kernel_set(CpuLevel level) {
    level = resolve_cpu_level(level, "kernels");
    switch (level) {
#if defined(SMOL_HAS_X86_KERNELS)
        case CpuLevel::avx2: {
            static const KernelSet set = avx2::make_kernel_set();
            return set;
        }
        case CpuLevel::avxvnni: {
            static const KernelSet set = avxvnni::make_kernel_set();
            return set;
        }
        case CpuLevel::avx512: {
            static const KernelSet set = avx512::make_kernel_set();
            return set;
        }
#if defined(SMOL_HAS_AMX_KERNELS)
        case CpuLevel::amx: {
            static const KernelSet set = amx::make_kernel_set();
            return set;
        }
#endif
#endif
#if defined(SMOL_HAS_ARM_KERNELS)
        case CpuLevel::neon: {
            static const KernelSet set = neon::make_kernel_set();
            return set;
        }
        case CpuLevel::dotprod: {
            static const KernelSet set = dotprod::make_kernel_set();
            return set;
        }
#endif
        default: {
            static const KernelSet set = scalar::make_kernel_set();
            return set;
        }
    }
}

inline const KernelSet& default_kernels() {
    static const KernelSet& set = kernel_set(requested_cpu_level());
    return set;
}

}  // namespace kernels
SMOL_NAMESPACE_END
