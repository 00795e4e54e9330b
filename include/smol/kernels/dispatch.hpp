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
// x86.hpp; neon, dotprod, i8mm: arm.hpp), the one way a set is made, and kept
// unchanged for the whole program, so a pointer to it stays valid.
//
// Build time: the levels' kernels are most of what a unit that loads a model
// compiles (on g++ 12 -O3, about 40 of a Generator program's 90 s). A program
// with several such units can compile them once: define SMOL_SEPARATE_KERNELS
// in every unit (the same flags in all) and include <smol/kernels/level_sets.hpp>
// in exactly one of them, which then defines build_level_set for the others
// (smol's own tests, examples and benchmarks build so: cmake/smolKernelSets.cmake).
// The code and the results are the same either way.
#pragma once

#include "../detail/abi.hpp"

#include <deque>
#include <mutex>
#include <string>

#include "../error.hpp"
#include "cpu.hpp"
#include "kernel_set.hpp"
#if !defined(SMOL_SEPARATE_KERNELS)
#include "level_sets.hpp"
#endif

SMOL_NAMESPACE_BEGIN
namespace kernels {

#if defined(SMOL_SEPARATE_KERNELS)
namespace separate {
// Defined by the program's one unit that includes kernels/level_sets.hpp.
KernelSet build_level_set(CpuLevel level, const KernelParams& p);
}  // namespace separate
inline KernelSet build_level_set(CpuLevel level, const KernelParams& p) {
    return separate::build_level_set(level, p);
}
#endif

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
