# A consumer compiled with -fno-exceptions (tests/noexcept_consumer.cpp): the
# headers must build without exceptions and the non-throwing API must work.
# Runs on the demo model when the build makes one, else the tiny fixture.
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  # A header with a try/catch that is not guarded by SMOL_HAS_EXCEPTIONS
  # cannot compile under -fno-exceptions. Rather than break the whole build,
  # such headers make this test fail with their names.
  file(GLOB_RECURSE _smol_headers "${PROJECT_SOURCE_DIR}/include/smol/*.hpp")
  set(_smol_unguarded "")
  foreach(_header ${_smol_headers})
    file(READ "${_header}" _text)
    if(_text MATCHES "catch[ ]*\\(" AND NOT _text MATCHES "SMOL_HAS_EXCEPTIONS")
      file(RELATIVE_PATH _relative "${PROJECT_SOURCE_DIR}" "${_header}")
      list(APPEND _smol_unguarded "${_relative}")
    endif()
  endforeach()

  if(_smol_unguarded)
    message(STATUS "smol: not -fno-exceptions clean (try/catch without SMOL_HAS_EXCEPTIONS): ${_smol_unguarded}")
    add_test(NAME test_noexcept_consumer
             COMMAND ${CMAKE_COMMAND} -E echo "not -fno-exceptions clean (unguarded try/catch): ${_smol_unguarded}")
    set_tests_properties(test_noexcept_consumer PROPERTIES FAIL_REGULAR_EXPRESSION "not -fno-exceptions clean")
  else()
    add_executable(test_noexcept_consumer ${CMAKE_CURRENT_LIST_DIR}/noexcept_consumer.cpp)
    target_link_libraries(test_noexcept_consumer PRIVATE smol::smol smol_internal_flags)
    target_compile_options(test_noexcept_consumer PRIVATE -fno-exceptions)
    if(TARGET smol-demo-model AND DEFINED SMOL_DEMO_MODEL_PATH)
      set(SMOL_NOEXCEPT_MODEL "${SMOL_DEMO_MODEL_PATH}")
      add_dependencies(test_noexcept_consumer smol-demo-model)
    else()
      set(SMOL_NOEXCEPT_MODEL "${SMOL_FIXTURES_DIR}/tiny-q4km.gguf")
    endif()
    add_test(NAME test_noexcept_consumer COMMAND test_noexcept_consumer "${SMOL_NOEXCEPT_MODEL}"
             WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    # The junk-file check fails deep in the parser, and without exceptions that
    # error unwinds by longjmp, which (as error.hpp documents) abandons the
    # half-built File: a few hundred bytes that LeakSanitizer would report.
    set_tests_properties(test_noexcept_consumer PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
                         ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
  endif()
endif()
