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
  # Both programs link the same two objects (compiled once), in the two orders.
  add_library(smol_mixed_flags_main OBJECT mixed_flags/main.cpp)
  add_library(smol_mixed_flags_avx2 OBJECT mixed_flags/module_avx2.cpp)
  target_compile_options(smol_mixed_flags_avx2 PRIVATE -mavx2 -mfma -mf16c)
  foreach(object smol_mixed_flags_main smol_mixed_flags_avx2)
    target_link_libraries(${object} PRIVATE smol::smol nlohmann_json::nlohmann_json)
    target_compile_definitions(${object} PRIVATE SMOL_FIXTURES_DEFAULT="${SMOL_FIXTURES_DIR}")
    target_include_directories(${object} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
    if(SMOL_SANITIZE)
      target_compile_options(${object} PRIVATE -fsanitize=${SMOL_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
    endif()
  endforeach()
  foreach(order baseline_first avx2_first)
    if(order STREQUAL "baseline_first")
      set(objects $<TARGET_OBJECTS:smol_mixed_flags_main> $<TARGET_OBJECTS:smol_mixed_flags_avx2>)
    else()
      set(objects $<TARGET_OBJECTS:smol_mixed_flags_avx2> $<TARGET_OBJECTS:smol_mixed_flags_main>)
    endif()
    add_executable(test_mixed_flags_${order} ${objects})
    target_link_libraries(test_mixed_flags_${order} PRIVATE smol::smol)
    if(SMOL_SANITIZE)
      target_link_options(test_mixed_flags_${order} PRIVATE -fsanitize=${SMOL_SANITIZE})
    endif()
    add_test(NAME test_mixed_flags_${order} COMMAND test_mixed_flags_${order})
    set_tests_properties(test_mixed_flags_${order} PROPERTIES TIMEOUT 600)
  endforeach()
endif()
