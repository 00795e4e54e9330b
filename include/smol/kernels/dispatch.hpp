// Run-time kernel dispatch: the KernelSet of a CPU level, built once.
//
//   const KernelSet& kernel_set(CpuLevel level)
//       the set for `level` (automatic = best_cpu_level()); Error(invalid_argument)
//       when this CPU cannot run it (kernels/cpu.hpp: resolve_cpu_level).
//   const KernelSet& kernel_set(CpuLevel level, const KernelParams& params)
//       the same set with other speed-only settings (kernel_set.hpp, KernelParams):
//       the same bits. Fields `level` has no use for are kept at their defaults
//       (the result's params say what it runs with). Error(invalid_argument) when
//       a field is not one of its candidates. Built once per (level, params).
//   const KernelSet& default_kernels()
//       the set for SMOL_CPU (environment) or, unset, the best level; what
//       Model::load uses unless LoadOptions::cpu says otherwise, and what the
//       free functions in kernels.hpp (smol::rmsnorm, QuantizedInput, ...) use.
//
// Each set is built on first use (thread-safe) by its level's
// make_kernel_set(params) (scalar: kernel_set.hpp; avx2, avxvnni, avx512, amx:
// x86.hpp; neon, dotprod: arm.hpp), the one way a set is made, and kept
// unchanged for the whole program, so a pointer to it stays valid.
#pragma once

#include "../detail/abi.hpp"

#include <deque>
#include <mutex>
#include <string>

#include "../error.hpp"
#include "arm.hpp"
#include "cpu.hpp"
#include "kernel_set.hpp"
#include "x86.hpp"

SMOL_NAMESPACE_BEGIN
namespace kernels {

// The set of `level` (which this CPU can run) with the speed-only settings p:
// the level's own make_kernel_set(p), completed with the scalar spec where it
// has no tiles (complete_with_spec): the one way a set is built.
inline KernelSet build_level_set(CpuLevel level, const KernelParams& p) {
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
#endif
        default:
            return scalar::make_kernel_set(p);
    }
}
inline KernelSet build_kernel_set(CpuLevel level, const KernelParams& p) {
    KernelSet set = build_level_set(level, p);
    complete_with_spec(set);
    return set;
}

inline const KernelSet& kernel_set(CpuLevel level, const KernelParams& params) {
    if (!valid_kernel_params(params))
        smol::detail::fail(ErrorKind::invalid_argument,
                           "kernels: kernel params (" + kernel_params_text(params) +
                               ") name a value that is not a candidate");
    level = resolve_cpu_level(level, "kernels");
    // Built before the lock (a few hundred pointers); its params are those it
    // runs with, so settings the level has no use for map to one set.
    KernelSet wanted = build_kernel_set(level, params);
    // Every set ever built stays (a model and its inputs point at it); there
    // are at most a few dozen combinations per level.
    static std::mutex mutex;
    static std::deque<KernelSet> built;
    std::lock_guard<std::mutex> lock(mutex);
    for (const KernelSet& set : built)
        if (set.level == wanted.level && set.params == wanted.params) return set;
    built.push_back(wanted);
    return built.back();
}

inline const KernelSet& kernel_set(CpuLevel level) {
    return kernel_set(level, KernelParams{});
}

inline const KernelSet& default_kernels() {
    static const KernelSet& set = kernel_set(requested_cpu_level());
    return set;
}

}  // namespace kernels
SMOL_NAMESPACE_END
