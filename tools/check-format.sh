#!/usr/bin/env bash
# The formatting check of CI (.ci/run): every C++ and CUDA source git knows of
# (*.hpp *.cpp *.cu *.cuh *.inc, tracked or new and not ignored) must be as
# clang-format leaves it with the repository's .clang-format. Prints the files
# that are not and exits 1 when there are any; `clang-format-14 -i FILE...`
# fixes them.
#
#   tools/check-format.sh            CLANG_FORMAT=clang-format-14 by default
#   VERBOSE=1 tools/check-format.sh  also prints clang-format's first complaints per file
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-clang-format-14}
if ! command -v "$CLANG_FORMAT" >/dev/null; then
  echo "check-format: $CLANG_FORMAT not found (apt-get install clang-format-14)" >&2
  exit 2
fi

# One version of clang-format for everyone: another version formats some
# constructs differently, and the check would flip between machines.
"$CLANG_FORMAT" --version | head -n 1

checked=0
bad=()
while IFS= read -r -d '' file; do
  [ -f "$file" ] || continue  # deleted in the work tree, not yet in the index
  checked=$((checked + 1))
  if ! complaints=$("$CLANG_FORMAT" --dry-run --Werror "$file" 2>&1); then
    bad+=("$file")
    if [ "${VERBOSE:-0}" = 1 ]; then printf '%s\n' "$complaints" | head -n 12; fi
  fi
done < <(git ls-files -z --cached --others --exclude-standard -- '*.hpp' '*.cpp' '*.cu' '*.cuh' '*.inc')

if [ ${#bad[@]} -gt 0 ]; then
  echo "check-format: ${#bad[@]} of $checked files are not clang-format clean:"
  printf '  %s\n' "${bad[@]}"
  echo "fix: $CLANG_FORMAT -i FILE... (the files above)"
  exit 1
fi
echo "check-format: all $checked files are clean"
