#!/bin/sh
# Writes the llama and qwen3 f32 fixtures in every type with tools/requant.py.
#   gen_quant_models.sh PYTHON REQUANT_PY FIXTURES OUT_DIR TYPE...
set -e
py=$1 requant=$2 fix=$3 out=$4
shift 4
mkdir -p "$out"
for m in llama qwen3; do
    for t in "$@"; do "$py" "$requant" "$fix/$m/$m-f32.gguf" "$out/$m-$t.gguf" "$t" > "$out/$m-$t.log"; done
done
