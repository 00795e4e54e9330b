# smol_kernel_sets: the levels' kernels (include/smol/kernels/level_sets.hpp)
# compiled once for smol's own programs. Linking it defines SMOL_SEPARATE_KERNELS
# in the program's units, so they declare build_level_set instead of compiling
# every level's kernels again (kernels/dispatch.hpp: "Build time"); the code they
# run is the same. A unit built with other -m flags than this library (its ABI
# namespace differs, detail/abi.hpp) must not link it: it compiles its own.
# Not installed: a consumer who wants the same does it with one unit of its own.
add_library(smol_kernel_sets STATIC ${PROJECT_SOURCE_DIR}/src/kernel_sets.cpp)
target_link_libraries(smol_kernel_sets PUBLIC smol::smol smol_internal_flags)
target_compile_definitions(smol_kernel_sets PUBLIC SMOL_SEPARATE_KERNELS)
# Position-independent, so the C ABI's shared library links it too (cmake/smolShared.cmake).
set_target_properties(smol_kernel_sets PROPERTIES POSITION_INDEPENDENT_CODE ON)
