# Extra kernel test targets (included by tests/CMakeLists.txt).
#
# test_kernels_scalar: tests/test_kernels.cpp built WITHOUT -mavx2/-mfma/-mf16c,
# so dispatch.hpp selects the portable scalar kernels and the fallback path
# (QuantizedInput, matmul, float helpers) is exercised on every CI run, not
# just in a SMOL_ISA=scalar configuration. It links its own copy of the test
# main because smol_test_main carries the ISA flags.
add_executable(test_kernels_scalar test_kernels.cpp test_main.cpp)
target_link_libraries(test_kernels_scalar PRIVATE smol::smol doctest::doctest nlohmann_json::nlohmann_json)
target_include_directories(test_kernels_scalar PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_definitions(test_kernels_scalar PRIVATE SMOL_KERNELS_FORCE_SCALAR
  SMOL_FIXTURES_DEFAULT="${SMOL_FIXTURES_DIR}")
target_compile_options(test_kernels_scalar PRIVATE $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra>)
if(SMOL_SANITIZE)
  target_compile_options(test_kernels_scalar PRIVATE -fsanitize=${SMOL_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(test_kernels_scalar PRIVATE -fsanitize=${SMOL_SANITIZE})
endif()
add_test(NAME test_kernels_scalar COMMAND test_kernels_scalar)
set_tests_properties(test_kernels_scalar PROPERTIES TIMEOUT 1200)

# test_kernels_vnni: the AVX2 kernels with their AVX-512 VNNI path (vpdpbusd),
# only when the machine configuring the build can run it (it is what
# SMOL_ISA=native selects on Zen 4 / Ice Lake and later).
set(SMOL_HOST_HAS_AVX512_VNNI OFF)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64" AND EXISTS /proc/cpuinfo)
  file(READ /proc/cpuinfo SMOL_CPUINFO)
  if(SMOL_CPUINFO MATCHES "avx512_vnni" AND SMOL_CPUINFO MATCHES "avx512vl")
    set(SMOL_HOST_HAS_AVX512_VNNI ON)
  endif()
endif()
if(SMOL_HOST_HAS_AVX512_VNNI AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  add_executable(test_kernels_vnni test_kernels.cpp test_main.cpp)
  target_link_libraries(test_kernels_vnni PRIVATE smol::smol doctest::doctest nlohmann_json::nlohmann_json)
  target_include_directories(test_kernels_vnni PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_definitions(test_kernels_vnni PRIVATE SMOL_FIXTURES_DEFAULT="${SMOL_FIXTURES_DIR}")
  target_compile_options(test_kernels_vnni PRIVATE -Wall -Wextra -mavx2 -mfma -mf16c -mavx512f -mavx512vl -mavx512vnni)
  if(SMOL_SANITIZE)
    target_compile_options(test_kernels_vnni PRIVATE -fsanitize=${SMOL_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
    target_link_options(test_kernels_vnni PRIVATE -fsanitize=${SMOL_SANITIZE})
  endif()
  add_test(NAME test_kernels_vnni COMMAND test_kernels_vnni)
  set_tests_properties(test_kernels_vnni PROPERTIES TIMEOUT 1200)
endif()
