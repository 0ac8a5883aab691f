#!/bin/sh
# Builds the Hugging Face / MLX directories test_hf_models loads, from the f32 fixtures:
#   gen_hf_models.sh PYTHON FIXTURES OUTDIR
# Each variant exercises a different path of the loader (plain float types, shards and
# index files, both rope config styles, every MLX bit width, group sizes 32/64/128,
# f16/bf16/f32 scales, per-layer overrides). Logs go to OUTDIR/NAME.log.
set -e
py=$1 fx=$2 out=$3
tool=$(dirname "$0")/../../tools/make_mlx.py
mkdir -p "$out"
g() { m=$1 n=$2; shift 2; "$py" "$tool" "$fx/$m/$m-f32.gguf" "$out/$m-$n" "$@" > "$out/$m-$n.log"; }
# quantized: also the dequantized F32 copy (NAME-deq) the engine must agree with
q() { m=$1 n=$2; shift 2; g $m $n --dequant-out "$out/$m-$n-deq" "$@"; }
for m in llama qwen3; do
    g $m f32 --bits none
    g $m f16 --bits none --dtype f16 --rope-style hf4
    g $m bf16 --bits none --dtype bf16 --shards 2
    q $m q8 --bits 8
    q $m q4 --bits 4
    q $m q4g32 --bits 4 --group 32 --dtype bf16
    q $m q6 --bits 6 --group 128 --dtype f32 --shards 3
    q $m q3 --bits 3 --group 32
    q $m q2mix --bits 2 --group 32 --override model.layers.0.mlp.down_proj=8 --override model.layers.1.mlp.down_proj=none
done
g qwen2 f32 --bits none
q qwen2 q8 --bits 8 --group 32
g llama31 f32 --bits none
g llama31 f16 --bits none --dtype f16 --rope-style hf4
