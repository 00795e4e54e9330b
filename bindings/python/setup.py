"""Builds the smol wheel: the pure-Python package (smol/) plus libsmol beside it.

Where libsmol comes from, first that applies:
  1. $SMOL_LIBRARY, a path to a built libsmol (e.g. build/libsmol.so): copied,
     nothing is compiled (what smol's own tests do, and the quick way after
     the README's build);
  2. a libsmol already beside the package sources (smol/libsmol.so);
  3. a CMake build of the target smol_shared from the source tree this file
     sits in (bindings/python of smol's repository), in setuptools' build
     folder, so a second pip install reuses it. It needs cmake and a C++17
     compiler; $CMAKE_BUILD_PARALLEL_LEVEL sets its jobs, $SMOL_CMAKE_ARGS
     (split on spaces) adds configure options.
Else the build stops with a message that says how to get one.

The library is loaded with ctypes, never linked against Python, so the wheel
is tagged py3-none-<platform>: any CPython 3 on that platform can use it.
"""

import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

if sys.platform == "win32":
    LIBRARY_NAMES = ["smol.dll", "libsmol.dll"]
elif sys.platform == "darwin":
    LIBRARY_NAMES = ["libsmol.dylib"]
else:
    LIBRARY_NAMES = ["libsmol.so"]

HOW_TO_BUILD = ("build it first (cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && "
                "cmake --build build --target smol_shared) and install with "
                "SMOL_LIBRARY=$PWD/build/libsmol.so pip install --no-build-isolation "
                "./bindings/python")


def in_source_tree() -> bool:
    return os.path.exists(os.path.join(REPO, "CMakeLists.txt")) and os.path.exists(
        os.path.join(REPO, "include", "smol", "smol.h"))


def cmake_build(build_temp: str) -> str:
    """Builds smol_shared with CMake in build_temp; the library's path."""
    cmake = shutil.which("cmake")
    if cmake is None or not in_source_tree():
        why = ("cmake is not installed" if cmake is None
               else f"{HERE} is not bindings/python of smol's source tree")
        raise SystemExit(f"smol: libsmol is needed and cannot be built here ({why}); "
                         + HOW_TO_BUILD)
    folder = os.path.join(os.path.abspath(build_temp), "smol-cmake")
    configure = [cmake, "-S", REPO, "-B", folder, "-DCMAKE_BUILD_TYPE=Release",
                 "-DSMOL_BUILD_TESTS=OFF", "-DSMOL_BUILD_EXAMPLES=OFF",
                 "-DSMOL_BUILD_BENCHMARKS=OFF", "-DSMOL_BUILD_TOOLS=OFF",
                 "-DSMOL_BUILD_SHARED=ON", "-DSMOL_INSTALL=OFF"]
    configure += os.environ.get("SMOL_CMAKE_ARGS", "").split()
    print("smol: building libsmol with CMake (set SMOL_LIBRARY to a built one to skip this)",
          flush=True)
    for command in (configure,
                    [cmake, "--build", folder, "--config", "Release", "--target", "smol_shared"]):
        if subprocess.call(command) != 0:
            raise SystemExit("smol: building libsmol failed: " + " ".join(command) + "; "
                             + HOW_TO_BUILD)
    # Single-config generators put it in the build folder's root (smolShared.cmake),
    # multi-config ones (Visual Studio, Xcode) in a folder per configuration.
    for sub in ("", "Release"):
        for name in LIBRARY_NAMES:
            path = os.path.join(folder, sub, name)
            if os.path.exists(path):
                return path
    raise SystemExit(f"smol: CMake built smol_shared but no {LIBRARY_NAMES[0]} is in {folder}")


def find_library(build_temp: str) -> str:
    explicit = os.environ.get("SMOL_LIBRARY")
    if explicit:
        if not os.path.isfile(explicit):
            raise SystemExit(f"smol: SMOL_LIBRARY is '{explicit}', which is not a file")
        return explicit
    for name in LIBRARY_NAMES:
        beside = os.path.join(HERE, "smol", name)
        if os.path.isfile(beside):
            return beside
    return cmake_build(build_temp)


class BuildWithLibrary(build_py):
    """build_py that also puts libsmol into the built package."""

    def run(self):
        super().run()
        library = find_library(self.get_finalized_command("build").build_temp)
        target = os.path.join(self.build_lib, "smol", os.path.basename(library))
        if not any(target.endswith(name) for name in LIBRARY_NAMES):
            # Whatever SMOL_LIBRARY was called, _native.py looks for these names.
            target = os.path.join(self.build_lib, "smol", LIBRARY_NAMES[0])
        print(f"smol: bundling {library}", flush=True)
        shutil.copyfile(library, target)
        shutil.copymode(library, target)


cmdclass = {"build_py": BuildWithLibrary}
try:  # setuptools >= 70.1 has its own; older ones use the wheel package's
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:  # no wheel support at all: pip then installs without one
        bdist_wheel = None

if bdist_wheel is not None:

    class PlatformWheel(bdist_wheel):
        """A wheel with a native library (not "any"), but no Python ABI tie."""

        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            _, _, platform = super().get_tag()
            return "py3", "none", platform

    cmdclass["bdist_wheel"] = PlatformWheel

setup(
    packages=["smol"],
    package_data={"smol": ["py.typed"]},
    cmdclass=cmdclass,
    zip_safe=False,
)
