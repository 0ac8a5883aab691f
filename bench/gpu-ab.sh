#!/usr/bin/env bash
# Decode A/B on a CUDA machine: the working tree against a baseline source tree, built
# side by side and benchmarked alternately in one run (tokens/s differ by a few % from
# one H100 loan to the next, so only same-run ratios mean anything). Then, on the
# working tree, tg with one command label left out at a time (AKUNU_CUDA_SKIP): that
# command's marginal cost inside the graph, which per-kernel profilers cannot show.
#   git archive -o .gpufix/base.tgz HEAD     # here, before the device call
#   bench/gpu-ab.sh [MODEL ...]              # there; SKIPS="rope_kv attention" REPS=3
#                                            # KV= (empty): the default F32 KV cache
set -uo pipefail
cd "$(dirname "$0")/.."
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(qwen3-0.6b-q4_0 llama-3-8b-q4_0 llama-3-8b-q8_0)
BASE=${BASE:-.gpufix/base.tgz}
REPS=${REPS:-3}
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null; export PYTHONPATH=/tmp/site
fi
build() {   # src dir, build dir
    cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > "$2.log" 2>&1 &&
        cmake --build "$2" -j"$(nproc)" --target akunu_cli >> "$2.log" 2>&1 || { tail -20 "$2.log"; exit 1; }
}
rm -rf /tmp/ab-base && mkdir -p /tmp/ab-base && tar -xzf "$BASE" -C /tmp/ab-base || exit 1
build /tmp/ab-base /tmp/ab-base/build-gpu &
build . build-gpu
wait
mkdir -p models
python3 tools/make_bench_models.py models --only "${models[@]}" > /dev/null || exit 1
tg() { "$1" bench -m "$2" --backend cuda ${KV---kv-f16} -p 0 -n 128 -r 3 | awk -F'|' '/tg128/ {gsub(/ /, "", $9); print $9}'; }
printf "%-18s %10s %10s %7s\n" model base new ratio
for m in "${models[@]}"; do
    f=models/bench-$m.gguf
    b=(); n=()
    for r in $(seq "$REPS"); do b+=("$(tg /tmp/ab-base/build-gpu/akunu "$f")"); n+=("$(tg build-gpu/akunu "$f")"); done
    med() { printf "%s\n" "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
    mb=$(med "${b[@]}"); mn=$(med "${n[@]}")
    printf "%-18s %10s %10s %7.3f\n" "$m" "$mb" "$mn" "$(awk -v a="$mn" -v b="$mb" 'BEGIN {print a / b}')"
    for s in ${SKIPS:-}; do
        printf "  without %-12s %10s\n" "$s" "$(AKUNU_CUDA_SKIP=$s tg build-gpu/akunu "$f")"
    done
done
