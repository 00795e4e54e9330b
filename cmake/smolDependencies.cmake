# Finds smol's library dependencies (used by our CMakeLists.txt and by the
# installed smolConfig.cmake, so consumers see the same thing).
include(CMakeFindDependencyMacro)
find_dependency(Threads)
find_dependency(xsimd)
# Debian's xsimd 8 package exports a link to a target named "xtl" without
# finding it; xsimd only uses xtl for its optional xtl-complex support, which
# smol does not enable. Use the real xtl package when present, else an empty
# stand-in so the link line does not get a bogus -lxtl.
if(NOT TARGET xtl)
  find_package(xtl QUIET)
  if(NOT TARGET xtl)
    add_library(xtl INTERFACE IMPORTED)
  endif()
endif()
