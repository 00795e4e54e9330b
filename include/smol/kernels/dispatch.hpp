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
// Each set is a function-local static, built on first use (thread-safe) and
// never changed, so a pointer to it stays valid for the whole program.
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
            static const KernelSet set = [] {
                KernelSet s = detail::make_x86_kernel_set<avx2::Tiles>(CpuLevel::avx2,
                                                                       &avx2::interleave_q8k32);
                detail::set_packing<avx2::PackedQ4KYmmOf>(
                    s, GGMLType::Q4_K, &avx2::packed_q4k_ymm_row_bytes, &avx2::pack_q4k_ymm);
                avx2::set_converted_ymm(s);
                return s;
            }();
            return set;
        }
        case CpuLevel::avxvnni: {
            static const KernelSet set = [] {
                KernelSet s = detail::make_x86_kernel_set<avxvnni::Tiles>(CpuLevel::avxvnni,
                                                                          &avx2::interleave_q8k32);
                avxvnni::set_converted_ymm(s);
                return s;
            }();
            return set;
        }
        case CpuLevel::avx512: {
            static const KernelSet set = [] {
                KernelSet s = detail::make_x86_kernel_set<avx512::TilesZmm>(
                    CpuLevel::avx512, &avx512::interleave_q8k32_zmm);
                s.attend = &avx512::attend;
                detail::set_packing<avx512::PackedQ4KOf>(
                    s, GGMLType::Q4_K, &avx512::packed_q4k_row_bytes, &avx512::pack_q4k);
                avx512::set_converted_zmm(s);
                avx512::set_interleaved_zmm(s);
                return s;
            }();
            return set;
        }
#endif
#if defined(SMOL_HAS_ARM_KERNELS)
        case CpuLevel::neon: {
            static const KernelSet set = detail::make_arm_kernel_set<neon::Tiles>(CpuLevel::neon);
            return set;
        }
        case CpuLevel::dotprod: {
            static const KernelSet set =
                detail::make_arm_kernel_set<dotprod::Tiles>(CpuLevel::dotprod);
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
