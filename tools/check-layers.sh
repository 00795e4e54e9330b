#!/usr/bin/env bash
# Fails when a file of the C++ library includes a file of a higher layer
# (tools/layers.txt: the map, the rule, the layers' names). Also fails when a
# header or src/cuda/ file is in no layer, so a new folder must be placed.
# Usage: bash tools/check-layers.sh   (from anywhere; prints each violation)
set -euo pipefail
cd "$(dirname "$0")/.."
MAP=tools/layers.txt

# layer_of PATH: the layer of the longest map entry that is PATH or a folder above it.
declare -A entry_layer=()
never_from=() never_to=()
while read -r layer path rest; do
  [[ -z "${layer}" || "${layer}" == \#* ]] && continue
  if [[ "$layer" == never ]]; then never_from+=("$path"); never_to+=("$rest"); continue; fi
  entry_layer["$path"]=$layer
done < "$MAP"
layer_of() {
  local path=$1 best="" best_len=0 entry
  for entry in "${!entry_layer[@]}"; do
    if [[ "$path" == "$entry" || ( "$entry" == */ && "$path" == "$entry"* ) ]]; then
      if (( ${#entry} > best_len )); then best=${entry_layer[$entry]}; best_len=${#entry}; fi
    fi
  done
  echo "$best"
}

# normalize PATH: resolves ./ and ../ without touching the file system.
normalize() {
  local IFS=/ part out=()
  for part in $1; do
    case "$part" in
      ''|.) ;;
      ..) [[ ${#out[@]} -gt 0 ]] && unset 'out[${#out[@]}-1]' ;;
      *) out+=("$part") ;;
    esac
  done
  (IFS=/; echo "${out[*]}")
}

violations=0
checked=0
while IFS= read -r file; do
  from=$(layer_of "$file")
  if [[ -z "$from" ]]; then
    echo "layers: $file is in no layer of $MAP" >&2
    violations=$((violations + 1))
    continue
  fi
  dir=$(dirname "$file")
  # Quoted includes resolve next to the file; <smol/...> ones under include/.
  while IFS= read -r line; do
    target=""
    if [[ "$line" =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\"([^\"]+)\" ]]; then
      target=$(normalize "$dir/${BASH_REMATCH[1]}")
      [[ -f "$target" ]] || continue  # a file of the same folder the map covers, or a system one
    elif [[ "$line" =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\<(smol/[^\>]+)\> ]]; then
      target="include/${BASH_REMATCH[1]}"
    else
      continue
    fi
    to=$(layer_of "$target")
    checked=$((checked + 1))
    if [[ -z "$to" ]]; then
      echo "layers: $file includes $target, which is in no layer of $MAP" >&2
      violations=$((violations + 1))
    elif (( to < from )); then
      echo "layers: $file (layer $from) includes $target (layer $to, above it)" >&2
      violations=$((violations + 1))
    fi
    for i in "${!never_from[@]}"; do
      if [[ "$file" == "${never_from[$i]}"* && "$target" == "${never_to[$i]}"* ]]; then
        echo "layers: $file includes $target: ${never_from[$i]} never includes ${never_to[$i]}" >&2
        violations=$((violations + 1))
      fi
    done
  done < <(grep -E '^[[:space:]]*#[[:space:]]*include' "$file" || true)
done < <(find include/smol src/cuda -type f \( -name '*.hpp' -o -name '*.inc' -o -name '*.h' \
           -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) | sort)

if (( violations > 0 )); then
  echo "layers: $violations violation(s) of $MAP" >&2
  exit 1
fi
echo "layers: $checked includes checked, every one at its layer or below"
