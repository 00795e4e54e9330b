# A consumer compiled with -fno-exceptions (tests/noexcept_consumer.cpp): the
# headers must build without exceptions and the non-throwing API must report
# every bad input as a value. Runs on the demo model when the build makes one,
# else the tiny fixture; the bad-input catalogue needs the fixtures directory.
# (A header with an unguarded try/catch simply fails to compile this target.)
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  add_executable(test_noexcept_consumer ${CMAKE_CURRENT_LIST_DIR}/noexcept_consumer.cpp)
  target_link_libraries(test_noexcept_consumer PRIVATE smol::smol smol_internal_flags)
  target_compile_options(test_noexcept_consumer PRIVATE -fno-exceptions)
  # -O0 (tests/CMakeLists.txt: smol_build_check_optimization): it checks that the
  # library compiles and reports errors without exceptions; -O3 took 130 s here.
  smol_build_check_optimization(test_noexcept_consumer)
  target_compile_definitions(test_noexcept_consumer PRIVATE SMOL_NOEXCEPT_FIXTURES="${SMOL_FIXTURES_DIR}")
  if(TARGET smol-demo-model AND DEFINED SMOL_DEMO_MODEL_PATH)
    set(SMOL_NOEXCEPT_MODEL "${SMOL_DEMO_MODEL_PATH}")
    add_dependencies(test_noexcept_consumer smol-demo-model)
  else()
    set(SMOL_NOEXCEPT_MODEL "${SMOL_FIXTURES_DIR}/tiny-q4km.gguf")
  endif()
  add_test(NAME test_noexcept_consumer COMMAND test_noexcept_consumer "${SMOL_NOEXCEPT_MODEL}"
           WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(test_noexcept_consumer PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()
