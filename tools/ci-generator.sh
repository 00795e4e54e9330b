# Sourced by the CI stage scripts that build a list of targets: Ninja when it
# is installed, because with CMake's Makefiles `cmake --build --target a b c`
# builds a, b and c one after another (the top-level Makefile is .NOTPARALLEL),
# which on one-unit test programs leaves every core but one idle.
#   smol_generator DIR   sets SMOL_GENERATOR_FLAGS (-G Ninja, or nothing) and
#                        removes DIR when an earlier configure chose the other
#                        generator (CMake refuses to switch in place).
smol_generator() {
  local dir=$1 want="Unix Makefiles"
  SMOL_GENERATOR_FLAGS=()
  if command -v ninja >/dev/null 2>&1; then
    want=Ninja
    SMOL_GENERATOR_FLAGS=(-G Ninja)
  fi
  if [ -f "$dir/CMakeCache.txt" ] && ! grep -qx "CMAKE_GENERATOR:INTERNAL=$want" "$dir/CMakeCache.txt"; then
    rm -rf "$dir"
  fi
}
