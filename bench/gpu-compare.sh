#!/usr/bin/env bash
# akunu vs llama.cpp on a CUDA machine, same files, one run: builds llama.cpp's llama-bench
# with CUDA from a source tarball (SRC, default .llama/src.tgz: the vendor/llama.cpp tree of
# PyPI's llama-cpp-python sdist, trimmed to what the build needs, carried to the device in
# an ignored folder), builds akunu, writes the synthetic models and prints both engines'
# pp512 / tg128 and their ratios (the same KV cache type in both: F16 by default),
# and akunu's host time per chain-decoded token. Each model runs at the cache depths in
# DEPTHS (default 0, 4096 and 16384: pp512 and tg128 after that many prompt tokens, -d in
# both engines), with the KV cache type KV (default f16; q8_0 or q4_0: K and V alike,
# akunu --kv, llama.cpp -ctk/-ctv with flash attention). A build that outlives the call
# resumes on the next one while the machine is warm (the build folder is /root/llama-build).
#   bench/gpu-compare.sh [MODEL ...]     (default: the 8B shape in Q4_0, Q8_0, Q4_K_M, Q6_K
#                                         and F16, and Qwen3-0.6B in Q4_K_M)
#   DEPTHS="0 4096" bench/gpu-compare.sh qwen3-0.6b-q4_0
# An MLX model (NAME-mlxB, a checkpoint directory llama.cpp cannot read) is compared with
# llama.cpp running the GGUF of the same shape whose type is nearest: mlx2 q2_k, mlx3
# q3_k_s, mlx4 q4_1 (the same affine form, groups of 32), mlx6 q6_k, mlx8 q8_0.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/build-gpu/compare-out}
mkdir -p "$OUT"
src=${SRC:-.llama/src.tgz}
lb=/root/llama-build
models=("$@")
depths=(${DEPTHS:-0 4096 16384})
kv=${KV:-f16}
lkv=(); [ "$kv" = f16 ] || lkv=(-ctk "$kv" -ctv "$kv" -fa 1)
[ ${#models[@]} -gt 0 ] || models=(llama-3-8b-q4_0 llama-3-8b-q8_0 llama-3-8b-q4_k_m llama-3-8b-q6_k llama-3-8b-f16 qwen3-0.6b-q4_k_m)
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
if [ ! -x "$lb/b/bin/llama-bench" ]; then
    mkdir -p "$lb" && [ -f "$lb/CMakeLists.txt" ] || tar xzf "$src" -C "$lb"
    [ -f "$lb/b/build.ninja" ] || cmake -S "$lb" -B "$lb/b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES=90a-real -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF > "$OUT/llama-cfg.log" 2>&1
    t0=$(date +%s)
    timeout "${BUILD_S:-420}" cmake --build "$lb/b" --target llama-bench -j"$(nproc)" > "$OUT/llama-build.log" 2>&1
    echo "llama.cpp build rc=$? after $(( $(date +%s) - t0 )) s"
    [ -x "$lb/b/bin/llama-bench" ] || { tail -5 "$OUT/llama-build.log"; echo "llama-bench not built yet: call again"; exit 3; }
fi
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real >/dev/null 2>&1 &&
    cmake --build build-gpu -j"$(nproc)" --target akunu_cli >/dev/null 2>&1 || { echo "akunu build failed"; exit 1; }
mkdir -p models
# the GGUF llama.cpp runs for model $1
peer() {
    case "$1" in
    *-mlx2) echo "${1%-mlx2}-q2_k" ;; *-mlx3) echo "${1%-mlx3}-q3_k_s" ;; *-mlx4) echo "${1%-mlx4}-q4_1" ;;
    *-mlx6) echo "${1%-mlx6}-q6_k" ;; *-mlx8) echo "${1%-mlx8}-q8_0" ;; *) echo "$1" ;;
    esac
}
peers=(); for m in "${models[@]}"; do peers+=("$(peer "$m")"); done
python3 tools/make_bench_models.py models --only "${models[@]}" "${peers[@]}" >/dev/null || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "KV cache: $kv"
printf "| model | test | akunu t/s | llama.cpp t/s | ratio |\n| --- | --- | ---: | ---: | ---: |\n"
hosts=""
for m in "${models[@]}"; do
    f=models/bench-$m.gguf; [ -d "models/bench-$m" ] && f=models/bench-$m
    p=$(peer "$m"); label=$m; [ "$p" = "$m" ] || label="$m (llama.cpp: $p)"
    for d in "${depths[@]}"; do
        # the same KV-cache type in both (f16: llama.cpp's default)
        AKUNU_CUDA_STATS=1 build-gpu/akunu bench -m "$f" --backend cuda --kv "$kv" -p 512 -n 128 -d "$d" -r 5 --json > "$OUT/akunu-$m-$kv-d$d.json" 2> "$OUT/akunu-$m-$kv-d$d.stats"
        "$lb/b/bin/llama-bench" -m "models/bench-$p.gguf" -ngl 99 ${lkv[@]+"${lkv[@]}"} -p 512 -n 128 -d "$d" -r 5 -o json > "$OUT/llama-$m-$kv-d$d.json" 2>/dev/null
        python3 - "$label" "$OUT/akunu-$m-$kv-d$d.json" "$OUT/llama-$m-$kv-d$d.json" <<'PY'
import json, sys
m, a, l = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
def name(r):
    t = ("pp%d" % r["n_prompt"]) if r["n_gen"] == 0 else ("tg%d" % r["n_gen"])
    return t + (" @ d%d" % r["n_depth"] if r.get("n_depth") else "")
ll = {name(r): r["avg_ts"] for r in l}
for r in a:
    t, v = r["test"], r["tps_median"]
    o = ll.get(t)
    print(f"| {m} | {t} | {v:.1f} | {o:.1f} | {v / o:.2f} |" if o else f"| {m} | {t} | {v:.1f} | - | - |")
PY
    done
    hosts="$hosts $m: $(grep "128 step(s)" "$OUT/akunu-$m-$kv-d${depths[0]}.stats" | sed 's/.*host \([0-9.]*\) us.*/\1/' | sort -n | awk '{a[NR]=$1} END {print NR ? a[int((NR+1)/2)] : "?"}') us;"
done
echo "akunu host time per chain-decoded token (median of the tg128 runs):$hosts"
