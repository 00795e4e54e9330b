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
