#!/usr/bin/env bash
# Makes tests/data/types/ (tests/data/types/README.md): the weight-type
# fixtures and their goldens, with the reference engine (ik_llama.cpp).
#
#   IK=~/.cache/smol-reference/ik tools/reference-logits/make-type-fixtures.sh [RECIPE...]
#
# Run from the repository root. Needs the reference's llama, llama-quantize and
# llama-imatrix targets built in $IK/build (CPU, Release; README.md beside this
# script), g++, and python3 with numpy (for the gguf package's dequantization
# in $IK/gguf-py and for reading the shared goldens' prompt ids). With no
# RECIPE, makes every recipe of the table below. The importance matrix,
# tests/data/types/tiny-q8_0.imatrix.dat (llama-imatrix's .dat format), is kept
# when it exists (the committed one), made when it does not or when
# REMAKE_IMATRIX=1.
#
# Environment: IK (required), FIXTURES (default ../shared/fixtures), WORK
# (scratch, default /tmp/smol-type-fixtures: the quantized and spliced models),
# PYTHON (default python3), THREADS (the dumper's, default 2).
set -euo pipefail

IK=$(realpath "${IK:?set IK to the reference checkout (ik_llama.cpp)}")
FIXTURES=$(realpath "${FIXTURES:-../shared/fixtures}")
WORK=${WORK:-/tmp/smol-type-fixtures}
mkdir -p "$WORK"
WORK=$(realpath "$WORK")
PYTHON=${PYTHON:-python3}
THREADS=${THREADS:-2}
OUT=tests/data/types
SRC=$FIXTURES/tiny-q8_0.gguf      # what every recipe quantizes (requantizes) from
BASE=$FIXTURES/tiny-q4km.gguf     # what each layers file is spliced onto
IMATRIX=$OUT/tiny-q8_0.imatrix.dat
IMATRIX_TEXT=$IK/docs/speculative.md

[ -f include/smol/gguf/gguf.hpp ] || { echo "run from the repository root" >&2; exit 1; }
for f in "$SRC" "$BASE" "$FIXTURES/golden/tiny-q4km.gguf.json"; do
    [ -f "$f" ] || { echo "missing $f" >&2; exit 1; }
done
mkdir -p "$OUT/dequant"

# Recipes: name, llama-quantize type, "imatrix" or "-", then the overrides that
# make ik_llama.cpp's choice mainline llama.cpp's (llama_tensor_get_type in
# src/llama-quant.cpp; README.md of tests/data/types says why each is needed).
# The tied embedding's type does not matter (only blk.* tensors are kept) but
# is pinned to mainline's Q6_K so that the whole quantized file is mainline's.
RECIPES="
Q4_0            Q4_0    -        --output-tensor-type q6_K
Q4_1            Q4_1    -        --output-tensor-type q6_K
Q5_0            Q5_0    -        --output-tensor-type q6_K
Q5_1            Q5_1    -        --output-tensor-type q6_K
IQ4_NL          IQ4_NL  -        --output-tensor-type q6_K --attn-v-type q5_K
IQ4_XS          IQ4_XS  -        --output-tensor-type q6_K --attn-v-type q5_K
Q3_K_S          Q3_K_S  -        --output-tensor-type q6_K --attn-v-type q3_K
Q3_K_M          Q3_K_M  -        --output-tensor-type q6_K
#Q3_K_L         Q3_K_L  -        --output-tensor-type q6_K   (dropped: size)
Q2_K            Q2_K    -        --output-tensor-type q6_K
IQ4_XS-imatrix  IQ4_XS  imatrix  --output-tensor-type q6_K --attn-v-type q5_K
Q2_K-imatrix    Q2_K    imatrix  --output-tensor-type q6_K
#Q4_0-imatrix   Q4_0    imatrix  --output-tensor-type q6_K   (dropped: size)
IQ2_XXS-imatrix IQ2_XXS imatrix  --output-tensor-type q5_K --custom-q attn_v=q4_K
IQ2_XS-imatrix  IQ2_XS  imatrix  --output-tensor-type q5_K --custom-q attn_v=q4_K
IQ2_M-imatrix   IQ2_M   imatrix  --output-tensor-type q5_K --custom-q attn_v=q4_K
IQ3_XXS-imatrix IQ3_XXS imatrix  --output-tensor-type q5_K
IQ3_XS-imatrix  IQ3_XS  imatrix  --output-tensor-type q6_K --custom-q attn_v=q4_K
IQ3_M           IQ3_M   -        --output-tensor-type q6_K --custom-q attn_v=q4_K,attn_output=q4_K
IQ1_S-imatrix   IQ1_S   imatrix  --output-tensor-type q5_K --custom-q attn_v=q4_K,attn_output=iq2_xxs
IQ1_M-imatrix   IQ1_M   imatrix  --output-tensor-type q5_K --custom-q attn_v=q4_K,attn_output=iq2_xxs
"
# Dequantized rows 0-3 (dequant/): recipe, tensor (one tensor per new type).
DEQUANT="
Q4_0    blk.0.ffn_down.weight
Q4_1    blk.0.ffn_down.weight
Q5_0    blk.0.ffn_down.weight
Q5_1    blk.0.ffn_down.weight
IQ4_NL  blk.0.ffn_down.weight
IQ4_XS  blk.0.ffn_down.weight
Q3_K_S  blk.0.ffn_down.weight
Q2_K    blk.0.ffn_gate.weight
IQ2_XXS-imatrix  blk.0.ffn_down.weight
IQ2_XS-imatrix   blk.0.ffn_down.weight
IQ2_M-imatrix    blk.0.ffn_down.weight
IQ3_XXS-imatrix  blk.0.ffn_down.weight
IQ3_M            blk.0.ffn_down.weight
IQ1_S-imatrix    blk.0.ffn_down.weight
IQ1_M-imatrix    blk.0.ffn_down.weight
"
ALLOWED=" F32 Q2_K Q3_K Q4_K Q5_K Q6_K Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 IQ4_NL IQ4_XS IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M "

# --- tools ---
g++ -std=c++17 -O2 -Iinclude -Itests tools/reference-logits/type-fixture.cpp \
    -o "$WORK/type-fixture"
g++ -std=c++17 -O2 tools/reference-logits/dump.cpp -I"$IK/include" -I"$IK/ggml/include" \
    -L"$IK/build/src" -L"$IK/build/ggml/src" -lllama -lggml \
    -Wl,-rpath,"$IK/build/src:$IK/build/ggml/src" -o "$WORK/reference-dump"
QUANTIZE=$IK/build/bin/llama-quantize
IMATRIX_TOOL=$IK/build/bin/llama-imatrix

# The goldens' prompts, by id: the shared tiny-q4km goldens' 15-token prompt
# (golden 0 here) and 251-token prompt (golden 1 here).
ids_of_length() {
    "$PYTHON" -c 'import json,sys
g = json.load(open(sys.argv[1]))
p = [x["prompt_ids"] for x in g if len(x["prompt_ids"]) == int(sys.argv[2])]
assert len(p) == 1, "expected one prompt of that length"
print(" ".join(map(str, p[0])))' "$FIXTURES/golden/tiny-q4km.gguf.json" "$1"
}
IDS_SHORT=$(ids_of_length 15)
IDS_LONG=$(ids_of_length 251)

# --- importance matrix ---
# The first 2,048 tokens of IMATRIX_TEXT: the engine raises -c 128 to a
# context of 256, so 8 chunks of 256, each decoded in 2 batches of 128. Run in
# WORK: the tool leaves a llama.log in its working directory.
if [ ! -f "$IMATRIX" ] || [ "${REMAKE_IMATRIX:-0}" = 1 ]; then
    (cd "$WORK" && "$IMATRIX_TOOL" -m "$SRC" -f "$IMATRIX_TEXT" -o imatrix.dat -c 128 \
        -t "$THREADS") > "$WORK/imatrix.log" 2>&1 ||
        { tail -20 "$WORK/imatrix.log" >&2; exit 1; }
    cp "$WORK/imatrix.dat" "$IMATRIX"
fi

# --- recipes ---
wanted=" $* "
echo "$RECIPES" | while read -r name ftype imx overrides; do
    if [ -z "$name" ] || [[ "$name" == \#* ]]; then continue; fi
    if [ $# -gt 0 ] && [[ "$wanted" != *" $name "* ]]; then continue; fi
    echo "== $name"
    model=$WORK/tiny-$name.gguf
    args=(--allow-requantize)
    [ "$imx" = imatrix ] && args+=(--imatrix "$IMATRIX")
    # shellcheck disable=SC2206
    args+=($overrides)
    "$QUANTIZE" "${args[@]}" "$SRC" "$model" "$ftype" "$THREADS" > "$WORK/quantize-$name.log" 2>&1 ||
        { tail -20 "$WORK/quantize-$name.log" >&2; exit 1; }

    # Every blk.* tensor must be of a type mainline llama.cpp writes for this
    # recipe; smol's reader also rejects ik_llama.cpp's private type ids.
    "$WORK/type-fixture" list "$model" > "$WORK/types-$name.txt"
    bad=$(awk -v allowed="$ALLOWED" '$1 ~ /^blk\./ && index(allowed, " " $2 " ") == 0' \
        "$WORK/types-$name.txt")
    [ -z "$bad" ] || { echo "$name: unexpected types:"; echo "$bad"; exit 1; } >&2
    grep -E '^blk\.' "$WORK/types-$name.txt" | awk '{print $2}' | sort | uniq -c |
        awk '{printf " %s %s", $2, $1} END {print ""}' | sed "s/^/$name blk types:/"

    "$WORK/type-fixture" extract "$model" "$OUT/$name.layers.gguf" "$name"
    "$WORK/type-fixture" splice "$BASE" "$OUT/$name.layers.gguf" "$WORK/spliced-$name.gguf"
    "$WORK/reference-dump" -m "$WORK/spliced-$name.gguf" -o "$OUT/$name.json" \
        -t "$THREADS" -k 8 -g 24 --ids "$IDS_SHORT" --ids "$IDS_LONG" \
        > "$WORK/dump-$name.log" 2>&1 || { tail -20 "$WORK/dump-$name.log" >&2; exit 1; }
    rm -f "$OUT/$name.json.0.logits.f32"   # size: only the long prompt's full logits are kept
done

# --- independent dequantization (the gguf Python package of $IK/gguf-py) ---
echo "$DEQUANT" | PYTHONPATH="$IK/gguf-py" "$PYTHON" -c '
import json, sys
import numpy as np
import gguf
from gguf import quants
out = sys.argv[1]
index = []
for line in sys.stdin:
    if not line.split():
        continue
    recipe, tensor = line.split()
    model = recipe + ".layers.gguf"
    reader = gguf.GGUFReader(out + "/" + model)
    t = next(t for t in reader.tensors if t.name == tensor)
    rows = [0, 1, 2, 3]
    data = quants.dequantize(t.data[rows], t.tensor_type).astype("<f4")
    name = recipe + "." + tensor + ".f32"
    data.tofile(out + "/dequant/" + name)
    index.append({"model": model, "tensor": tensor, "type": t.tensor_type.name,
                  "rows": rows, "row_length": int(data.shape[1]), "file": name})
with open(out + "/dequant/index.json", "w") as f:
    json.dump(index, f, indent=1)
' "$OUT"

ls -l "$OUT" "$OUT/dequant"
du -sh "$OUT"
