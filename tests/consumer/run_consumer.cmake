# Configures, builds and runs tests/consumer in MODE (find_package installs smol
# to a private prefix first). Invoked by ctest with cmake -P.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run)
  execute_process(COMMAND ${ARGV} WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer (${MODE}) step failed: ${ARGV}")
  endif()
endfunction()

set(extra "")
if(MODE STREQUAL "find_package")
  run(${CMAKE_COMMAND} -S ${SMOL_SOURCE_DIR} -B ${WORK_DIR}/smol-build
      -DCMAKE_CXX_COMPILER=${CXX}
      -DSMOL_BUILD_TESTS=OFF -DSMOL_BUILD_EXAMPLES=OFF -DSMOL_BUILD_BENCHMARKS=OFF -DSMOL_BUILD_TOOLS=OFF
      # The header-only package is what this consumer tests; the shared
      # library (smol::shared) would need a build before the install.
      -DSMOL_BUILD_SHARED=OFF
      -DCMAKE_INSTALL_PREFIX=${WORK_DIR}/prefix)
  run(${CMAKE_COMMAND} --install ${WORK_DIR}/smol-build)
  set(extra -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
endif()
run(${CMAKE_COMMAND} -S ${SMOL_SOURCE_DIR}/tests/consumer -B ${WORK_DIR}/build
    -DCMAKE_CXX_COMPILER=${CXX} -DCONSUMER_MODE=${MODE} -DSMOL_SOURCE_DIR=${SMOL_SOURCE_DIR}
    -DFIXTURES_DIR=${FIXTURES_DIR} ${extra})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/consumer)
