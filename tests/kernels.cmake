# Extra kernel test targets (included by tests/CMakeLists.txt).
#
# test_kernels itself runs every kernel level this machine supports through
# forced dispatch, so no per-ISA builds are needed any more. What remains is
# the ODR check of the ABI tag (include/smol/detail/abi.hpp): a program whose
# main unit is built without ISA flags and whose optional module is built
# with -mavx2 -mfma -mf16c, linked in both orders (tests/mixed_flags/).
# Native runs here; tools/ci-mixed-flags.sh also runs both binaries under
# qemu-x86_64 -cpu Nehalem (no AVX) and -cpu Haswell.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64" AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  foreach(order baseline_first avx2_first)
    if(order STREQUAL "baseline_first")
      set(sources mixed_flags/main.cpp mixed_flags/module_avx2.cpp)
    else()
      set(sources mixed_flags/module_avx2.cpp mixed_flags/main.cpp)
    endif()
    add_executable(test_mixed_flags_${order} ${sources})
    target_link_libraries(test_mixed_flags_${order} PRIVATE smol::smol nlohmann_json::nlohmann_json)
    target_compile_definitions(test_mixed_flags_${order} PRIVATE SMOL_FIXTURES_DEFAULT="${SMOL_FIXTURES_DIR}")
    target_include_directories(test_mixed_flags_${order} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
    set_source_files_properties(mixed_flags/module_avx2.cpp PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
    if(SMOL_SANITIZE)
      target_compile_options(test_mixed_flags_${order} PRIVATE -fsanitize=${SMOL_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
      target_link_options(test_mixed_flags_${order} PRIVATE -fsanitize=${SMOL_SANITIZE})
    endif()
    add_test(NAME test_mixed_flags_${order} COMMAND test_mixed_flags_${order})
    set_tests_properties(test_mixed_flags_${order} PROPERTIES TIMEOUT 600)
  endforeach()
endif()
