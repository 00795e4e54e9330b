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
// Each set is a function-local static, built on first use (thread-safe) by its
// level's make_kernel_set (scalar: kernel_set.hpp; avx2, avxvnni, avx512, amx:
// x86.hpp; neon, dotprod: arm.hpp) and never changed, so a pointer to it stays
// valid for the whole program.
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

// `set` with the speed-only settings p (valid_kernel_params), as far as its level uses them.
inline void apply_kernel_params(KernelSet& set, const KernelParams& p) noexcept {
    KernelParams used;  // the defaults, for the fields the level has no use for
    used.decode_chunks = p.decode_chunks;
#if defined(SMOL_HAS_X86_KERNELS)
    if (set.level == CpuLevel::avx512 || set.level == CpuLevel::amx) {
        avx512::apply_params(set, p);
        return;
    }
    if (set.level == CpuLevel::avx2) {
        avx2::apply_params(set, p);
        return;
    }
    if (set.level == CpuLevel::avxvnni) {
        avxvnni::apply_params(set, p);
        return;
    }
#endif
    set.params = used;
}

inline const KernelSet& kernel_set(CpuLevel level, const KernelParams& params) {
    if (!valid_kernel_params(params))
        smol::detail::fail(ErrorKind::invalid_argument,
                           "kernels: kernel params (" + kernel_params_text(params) +
                               ") name a value that is not a candidate");
    const KernelSet& base = kernel_set(level);
    KernelSet wanted = base;
    apply_kernel_params(wanted, params);
    if (wanted.params == base.params) return base;
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

inline const KernelSet& default_kernels() {
    static const KernelSet& set = kernel_set(requested_cpu_level());
    return set;
}

}  // namespace kernels
SMOL_NAMESPACE_END
