// The one unit of smol's own programs that compiles the levels' kernels
// (cmake/smolKernelSets.cmake): with SMOL_SEPARATE_KERNELS, which the target
// defines for every unit linking it, the header defines build_level_set here,
// and the other units only declare it (kernels/dispatch.hpp).
#include <smol/kernels/level_sets.hpp>

#if !defined(SMOL_SEPARATE_KERNELS)
#error "src/kernel_sets.cpp is built with SMOL_SEPARATE_KERNELS (cmake/smolKernelSets.cmake)"
#endif
