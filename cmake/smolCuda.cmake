# The optional CUDA backend (SMOL_CUDA=ON): the static library smol::cuda built
# from src/cuda/ (the .cu files by nvcc, backend.cpp by the C++ compiler), its install/export (export set smolCudaTargets), and its
# test (tests/test_cuda.cpp and tests/test_cuda_features.cpp, which skip their GPU cases when no
# device exists).
# The header-only CPU library never needs any of this.
#
# Architectures: CMAKE_CUDA_ARCHITECTURES if given, else 80 and 90 (each as
# SASS + PTX, so newer GPUs JIT the PTX). For quick iteration pass
# -DCMAKE_CUDA_ARCHITECTURES=90.
include(CheckLanguage)
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 80 90)
endif()
if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  message(FATAL_ERROR "SMOL_CUDA=ON but no CUDA compiler was found: install the CUDA toolkit, "
                      "put nvcc on PATH or set CMAKE_CUDA_COMPILER")
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)

# Only the kernels and their launchers go through nvcc. The host glue
# (backend.cpp) includes smol's headers and instantiates the same inline code as
# every other unit of the program (Backend::forward, its lambdas, Expected...);
# nvcc's front end re-emits such code for the host compiler with its own
# closure layouts, and when the linker keeps nvcc's copy of an inline function
# whose lambda object a g++ unit built, the call crashes. So that code is
# compiled by the same C++ compiler as the rest, and the .cu files include nothing
# of smol but plain types (kernels.cuh, blocks.cuh, launch.cuh, quant/types.hpp, core/fp16.hpp).
file(GLOB SMOL_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/*.cu
     ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda/*.cpp)
add_library(smol_cuda STATIC ${SMOL_CUDA_SOURCES})
add_library(smol::cuda ALIAS smol_cuda)
set_target_properties(smol_cuda PROPERTIES
  EXPORT_NAME cuda
  OUTPUT_NAME smol_cuda
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON
  CUDA_EXTENSIONS OFF
  POSITION_INDEPENDENT_CODE ON)
# smol::smol brings the public headers (include/smol/cuda/backend.hpp among them).
target_link_libraries(smol_cuda PUBLIC smol CUDA::cudart)
# Whoever links smol::cuda may include smol/cuda/backend.hpp (it refuses to
# compile without this definition) and hand smol::cuda_backend() to
# LoadOptions::device_backend.
target_compile_definitions(smol_cuda PUBLIC SMOL_CUDA_ENABLED=1)
target_compile_options(smol_cuda PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --expt-relaxed-constexpr>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU,Clang>>:-Wall -Wextra>)
if(SMOL_WERROR)
  target_compile_options(smol_cuda PRIVATE
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU,Clang>>:-Werror>)
endif()

if(SMOL_INSTALL)
  # Its own component, like libsmol: it needs a build (top CMakeLists.txt).
  install(TARGETS smol_cuda EXPORT smolCudaTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT smol_cuda)
  install(EXPORT smolCudaTargets NAMESPACE smol:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/smol
          COMPONENT smol_cuda)
endif()

# The test: its own executable (tests/CMakeLists.txt is processed later and only
# knows the CPU components). Without a GPU it runs the host emulation checks and
# skips the rest with a message.
if(SMOL_BUILD_TESTS)
  foreach(_file test_cuda.cpp test_cuda_features.cpp)
    if(NOT EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/tests/${_file})
      message(FATAL_ERROR "cmake/smolCuda.cmake registers tests/${_file}, which does not exist")
    endif()
  endforeach()
  find_package(doctest REQUIRED)
  find_package(nlohmann_json REQUIRED)
  set(SMOL_FIXTURES_DIR "${PROJECT_SOURCE_DIR}/../shared/fixtures" CACHE PATH "Fixture directory")
  add_executable(test_cuda ${CMAKE_CURRENT_SOURCE_DIR}/tests/test_cuda.cpp
                           ${CMAKE_CURRENT_SOURCE_DIR}/tests/test_cuda_features.cpp
                           ${CMAKE_CURRENT_SOURCE_DIR}/tests/test_main.cpp)
  # smol_internal_flags is defined later in the top CMakeLists; names resolve at generate time.
  # smol_kernel_sets: the CPU levels' kernels compiled once (cmake/smolKernelSets.cmake).
  target_link_libraries(test_cuda PRIVATE smol::cuda smol_internal_flags doctest::doctest
                                          nlohmann_json::nlohmann_json smol_kernel_sets)
  target_include_directories(test_cuda PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/tests
    ${CMAKE_CURRENT_SOURCE_DIR}/src/cuda)  # test_hooks.hpp
  target_compile_definitions(test_cuda PRIVATE SMOL_FIXTURES_DEFAULT="${SMOL_FIXTURES_DIR}")
  enable_testing()
  add_test(NAME test_cuda COMMAND test_cuda)
  set_tests_properties(test_cuda PROPERTIES TIMEOUT 1200)
endif()
