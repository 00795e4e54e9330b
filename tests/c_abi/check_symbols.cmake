# cmake -DNM=nm -DLIBRARY=libsmol.so -P check_symbols.cmake: fails unless every
# dynamic symbol the library defines is a smol_* entry point, and the option
# structs' init functions are the sized ones; prints the list.
execute_process(COMMAND ${NM} -D --defined-only ${LIBRARY}
  OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIBRARY} failed")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(exported "")
set(stray "")
foreach(line IN LISTS lines)
  if(line MATCHES "^[0-9a-fA-F]* *([A-Za-z]) (.+)$")
    set(name "${CMAKE_MATCH_2}")
    # The version node the version script names is not a function.
    if(CMAKE_MATCH_1 STREQUAL "A")
      continue()
    endif()
    if(name MATCHES "^smol_")
      list(APPEND exported "${name}")
    else()
      list(APPEND stray "${name}")
    endif()
  endif()
endforeach()
list(LENGTH exported n)
string(REPLACE ";" " " listed "${exported}")
message(STATUS "${n} exported symbols: ${listed}")
if(stray)
  message(FATAL_ERROR "symbols other than smol_* exported: ${stray}")
endif()
if(n LESS 40)
  message(FATAL_ERROR "only ${n} smol_* symbols exported")
endif()
# Option structs are filled at the caller's size: each smol_*_init_sized is
# exported, and no smol_*_init is. smol.h defines those inline, passing the
# caller's sizeof; an exported one would be a library-side definition that
# writes the struct at the library's size (past an older caller's struct).
foreach(struct load_options batcher_options generator_options params)
  list(FIND exported "smol_${struct}_init_sized" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "smol_${struct}_init_sized is not exported")
  endif()
  list(FIND exported "smol_${struct}_init" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "smol_${struct}_init is exported: smol.h defines it inline, "
                        "passing the caller's size to smol_${struct}_init_sized")
  endif()
endforeach()
