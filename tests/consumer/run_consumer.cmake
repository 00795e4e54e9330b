# Configures, builds and runs tests/consumer in MODE. Invoked by ctest with
# cmake -P.
#   find_package: installs smol's headers component from a tree that is only
#     configured (never built) to a private prefix, then builds the C++
#     consumer against it.
#   find_package_shared: installs SMOL_BUILD_DIR (a built tree: the one ctest
#     runs in) with a plain `cmake --install`, then builds and runs a C program
#     that links the installed libsmol.
#   add_subdirectory, fetchcontent: this source tree, no install.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run)
  execute_process(COMMAND ${ARGV} WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer (${MODE}) step failed: ${ARGV}")
  endif()
endfunction()

set(prefix ${WORK_DIR}/prefix)
set(extra "")
if(MODE STREQUAL "find_package")
  # The defaults of a top-level configure (smol::shared included), so the
  # header install must work although libsmol was never built.
  run(${CMAKE_COMMAND} -S ${SMOL_SOURCE_DIR} -B ${WORK_DIR}/smol-build
      -DCMAKE_CXX_COMPILER=${CXX}
      -DSMOL_BUILD_TESTS=OFF -DSMOL_BUILD_EXAMPLES=OFF -DSMOL_BUILD_BENCHMARKS=OFF -DSMOL_BUILD_TOOLS=OFF
      -DCMAKE_INSTALL_PREFIX=${prefix})
  run(${CMAKE_COMMAND} --install ${WORK_DIR}/smol-build --component smol_headers)
  # A header install holds no compiled part, so nothing in it names one.
  file(GLOB_RECURSE compiled ${prefix}/*smol*.so* ${prefix}/*smolShared* ${prefix}/*smolCuda*)
  if(compiled OR NOT EXISTS ${prefix}/include/smol/smol.hpp)
    message(FATAL_ERROR "consumer (${MODE}): the smol_headers install is wrong: '${compiled}'")
  endif()
  # So asking for the shared component must fail at configure time.
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${SMOL_SOURCE_DIR}/tests/consumer
                          -B ${WORK_DIR}/shared-build -DCMAKE_CXX_COMPILER=${CXX}
                          -DCONSUMER_MODE=find_package_shared -DCMAKE_PREFIX_PATH=${prefix}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc EQUAL 0 OR NOT out MATCHES "component 'shared' is not installed")
    message(FATAL_ERROR "consumer (${MODE}): find_package(smol COMPONENTS shared) did not fail "
                        "on a header install:\n${out}")
  endif()
  set(extra -DCMAKE_PREFIX_PATH=${prefix})
elseif(MODE STREQUAL "find_package_shared")
  run(${CMAKE_COMMAND} --install ${SMOL_BUILD_DIR} --prefix ${prefix})
  run(${CMAKE_COMMAND} -S ${SMOL_SOURCE_DIR}/tests/consumer -B ${WORK_DIR}/build
      -DCMAKE_CXX_COMPILER=${CXX}
      -DCONSUMER_MODE=${MODE} -DCMAKE_PREFIX_PATH=${prefix})
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
  # CMake's build RPATH points at ${prefix}'s library folder: the installed
  # libsmol is the one that runs.
  run(${WORK_DIR}/build/consumer_shared)
  return()
endif()
run(${CMAKE_COMMAND} -S ${SMOL_SOURCE_DIR}/tests/consumer -B ${WORK_DIR}/build
    -DCMAKE_CXX_COMPILER=${CXX} -DCONSUMER_MODE=${MODE} -DSMOL_SOURCE_DIR=${SMOL_SOURCE_DIR}
    -DFIXTURES_DIR=${FIXTURES_DIR} ${extra})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/consumer)
