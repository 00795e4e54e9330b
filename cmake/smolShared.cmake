# smol::shared: the C ABI (include/smol/smol.h) as a shared library (libsmol.so,
# smol.dll, libsmol.dylib), built from src/smol_c.cpp over the header-only
# library, with the same run-time kernel dispatch. Only the smol_* entry points
# are exported: the C++ inside is hidden (visibility, and a version script on
# ELF targets, since the standard library's templates have default visibility).
add_library(smol_shared SHARED ${PROJECT_SOURCE_DIR}/src/smol_c.cpp)
add_library(smol::shared ALIAS smol_shared)
target_link_libraries(smol_shared PRIVATE smol::smol smol_internal_flags)
# In smol's own build the levels' kernels come from the one unit the tests and
# examples share (cmake/smolKernelSets.cmake): the same code, compiled once.
if(TARGET smol_kernel_sets)
  target_link_libraries(smol_shared PRIVATE smol_kernel_sets)
endif()
target_include_directories(smol_shared PUBLIC
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
# In the build folder's root, where the Python package and the C# sample look.
set_target_properties(smol_shared PROPERTIES
  OUTPUT_NAME smol
  EXPORT_NAME shared
  CXX_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
if(CMAKE_SYSTEM_NAME MATCHES "Linux|Android|FreeBSD" AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_link_options(smol_shared PRIVATE
    -Wl,--version-script=${PROJECT_SOURCE_DIR}/src/smol.map -Wl,--no-undefined)
  set_property(TARGET smol_shared APPEND PROPERTY LINK_DEPENDS ${PROJECT_SOURCE_DIR}/src/smol.map)
elseif(WIN32 AND CMAKE_CXX_COMPILER_ID MATCHES "GNU")
  # One file to ship beside the program: no libstdc++/libgcc DLLs.
  target_link_options(smol_shared PRIVATE -static-libgcc -static-libstdc++)
endif()

if(SMOL_INSTALL)
  # Its own component (the top CMakeLists.txt says why): it needs a build.
  install(TARGETS smol_shared EXPORT smolSharedTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT smol_shared
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT smol_shared
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT smol_shared)
  install(EXPORT smolSharedTargets NAMESPACE smol:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/smol
          COMPONENT smol_shared)
endif()

if(SMOL_BUILD_EXAMPLES OR SMOL_BUILD_TESTS)
  enable_language(C)
endif()
if(SMOL_BUILD_EXAMPLES)
  # A chat in C99 over smol.h (examples/c-chat.c).
  add_executable(c-chat ${PROJECT_SOURCE_DIR}/examples/c-chat.c)
  set_target_properties(c-chat PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF
                                          RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/examples)
  target_link_libraries(c-chat PRIVATE smol::shared smol_internal_flags smol_demo_model_path)
endif()
if(SMOL_BUILD_TESTS)
  add_subdirectory(${PROJECT_SOURCE_DIR}/tests/c_abi ${CMAKE_BINARY_DIR}/tests/c_abi)
endif()
