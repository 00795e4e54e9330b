# cmake -DKIND=python|python_installed|csharp -DSOURCE_DIR= -DWORK_DIR= -DLIBRARY=
#       -DFIXTURES_DIR= -DGREEDY= -P run_bindings.cmake
# Runs the Python tests (pytest) on bindings/python as it is (python) or on the
# package pip-installed into a fresh venv (python_installed), or compiles and
# runs the C# sample (mcs, mono), against the shared library. A missing tool is
# a skip ("skipping: ..."), or a failure when SMOL_REQUIRE_BINDINGS=1.
function(need_tool var)
  find_program(${var} NAMES ${ARGN})
  if(NOT ${var})
    if("$ENV{SMOL_REQUIRE_BINDINGS}" STREQUAL "1")
      message(FATAL_ERROR "${ARGV1} not found and SMOL_REQUIRE_BINDINGS=1 "
                          "(apt-get install python3-pytest mono-mcs mono-runtime)")
    endif()
    message("skipping: ${ARGV1} not found (apt-get install python3-pytest mono-mcs mono-runtime)")
    set(skip TRUE PARENT_SCOPE)
  endif()
  set(${var} ${${var}} PARENT_SCOPE)
endfunction()

if(DEFINED ENV{SMOL_FIXTURES} AND NOT "$ENV{SMOL_FIXTURES}" STREQUAL "")
  set(FIXTURES_DIR "$ENV{SMOL_FIXTURES}")
endif()
set(model "${FIXTURES_DIR}/tiny-q4km.gguf")
set(skip FALSE)
get_filename_component(library_dir "${LIBRARY}" DIRECTORY)

function(skip_or_fail what)
  if("$ENV{SMOL_REQUIRE_BINDINGS}" STREQUAL "1")
    message(FATAL_ERROR "${what} and SMOL_REQUIRE_BINDINGS=1")
  endif()
  message("skipping: ${what}")
endfunction()

if(KIND STREQUAL "python" OR KIND STREQUAL "python_installed")
  # The first python3 that has pytest: the one on PATH, then the system's
  # (python3-pytest installs it there, while PATH may hold another python3).
  find_program(path_python python3)
  set(PYTHON "")
  foreach(candidate ${path_python} /usr/bin/python3)
    if(NOT PYTHON AND EXISTS "${candidate}")
      execute_process(COMMAND ${candidate} -c "import pytest" RESULT_VARIABLE rc
                      OUTPUT_QUIET ERROR_QUIET)
      if(rc EQUAL 0)
        set(PYTHON ${candidate})
      endif()
    endif()
  endforeach()
  if(NOT PYTHON)
    if("$ENV{SMOL_REQUIRE_BINDINGS}" STREQUAL "1")
      message(FATAL_ERROR "pytest not found and SMOL_REQUIRE_BINDINGS=1 (apt-get install python3-pytest)")
    endif()
    message("skipping: pytest not found (apt-get install python3-pytest)")
    return()
  endif()
  set(ENV{SMOL_FIXTURES} "${FIXTURES_DIR}")
  set(ENV{SMOL_EXPECTED_GREEDY} "${GREEDY}")
endif()

if(KIND STREQUAL "python_installed")
  # The README's flow, offline: a venv that sees the system's packages
  # (setuptools, pytest), pip install --no-build-isolation. pip builds in the
  # folder it is given, so it gets a copy of the package, not the source tree:
  # the tree stays clean and two build folders can run this at once. The copy
  # is outside smol's source tree, so setup.py cannot build libsmol there:
  # without SMOL_LIBRARY it must stop with its message, and with it bundle
  # the library this build made (no second compile).
  file(REMOVE_RECURSE "${WORK_DIR}")
  set(package "${WORK_DIR}/package")
  file(MAKE_DIRECTORY "${package}")
  file(COPY "${SOURCE_DIR}/bindings/python/smol" DESTINATION "${package}"
       PATTERN "__pycache__" EXCLUDE PATTERN "*.so" EXCLUDE PATTERN "*.dll" EXCLUDE
       PATTERN "*.dylib" EXCLUDE)
  file(COPY "${SOURCE_DIR}/bindings/python/setup.py" "${SOURCE_DIR}/bindings/python/pyproject.toml"
       DESTINATION "${package}")
  set(venv "${WORK_DIR}/venv")
  execute_process(COMMAND ${PYTHON} -m venv --system-site-packages "${venv}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    skip_or_fail("${PYTHON} -m venv failed (apt-get install python3-venv python3-pip): ${out}")
    return()
  endif()
  set(vpython "${venv}/bin/python")
  if(WIN32)
    set(vpython "${venv}/Scripts/python.exe")
  endif()
  # --no-index: a build that wanted to download anything fails here at once.
  set(pip_install ${vpython} -m pip install --no-build-isolation --no-index --no-deps
                  --disable-pip-version-check "${package}")
  unset(ENV{PYTHONPATH})
  unset(ENV{SMOL_LIBRARY})
  execute_process(COMMAND ${pip_install} WORKING_DIRECTORY "${WORK_DIR}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc EQUAL 0 OR NOT out MATCHES "SMOL_LIBRARY=")
    message(FATAL_ERROR "pip install without a libsmol did not stop with setup.py's "
                        "message (${rc}):\n${out}")
  endif()
  set(ENV{SMOL_LIBRARY} "${LIBRARY}")
  execute_process(COMMAND ${pip_install} WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pip install --no-build-isolation failed (${rc})")
  endif()
  # From here on the installed package must stand alone: its own libsmol.
  unset(ENV{SMOL_LIBRARY})
  set(ENV{SMOL_EXPECT_INSTALLED_IN} "${venv}")
  execute_process(COMMAND ${vpython} -m pytest -q -p no:cacheprovider
                          "${SOURCE_DIR}/bindings/python/tests"
                  WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pytest on the installed package failed (${rc})")
  endif()
elseif(KIND STREQUAL "python")
  set(ENV{PYTHONPATH} "${SOURCE_DIR}/bindings/python")
  set(ENV{SMOL_LIBRARY} "${LIBRARY}")
  file(MAKE_DIRECTORY "${WORK_DIR}")
  execute_process(COMMAND ${PYTHON} -m pytest -q -p no:cacheprovider
                          "${SOURCE_DIR}/bindings/python/tests"
                  WORKING_DIRECTORY "${WORK_DIR}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pytest failed (${rc})")
  endif()
elseif(KIND STREQUAL "csharp")
  need_tool(MCS mcs)
  need_tool(MONO mono)
  if(skip)
    return()
  endif()
  if(NOT EXISTS "${model}")
    if("$ENV{SMOL_REQUIRE_FIXTURES}" STREQUAL "1")
      message(FATAL_ERROR "fixture '${model}' is missing and SMOL_REQUIRE_FIXTURES=1")
    endif()
    message("skipping: fixture '${model}' not found (set SMOL_FIXTURES)")
    return()
  endif()
  file(MAKE_DIRECTORY "${WORK_DIR}")
  execute_process(COMMAND ${MCS} -warnaserror+ -unsafe- -out:${WORK_DIR}/Sample.exe
                          ${SOURCE_DIR}/bindings/csharp/Smol.cs ${SOURCE_DIR}/bindings/csharp/Sample.cs
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "mcs failed (${rc})")
  endif()
  # DllImport("smol") finds libsmol.so through the library path.
  set(ENV{LD_LIBRARY_PATH} "${library_dir}:$ENV{LD_LIBRARY_PATH}")
  execute_process(COMMAND ${MONO} ${WORK_DIR}/Sample.exe "${model}" --check "${GREEDY}"
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the C# sample failed (${rc})")
  endif()
else()
  message(FATAL_ERROR "KIND must be python, python_installed or csharp")
endif()
