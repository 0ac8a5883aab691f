#!/usr/bin/env bash
# Where decode time goes on a CUDA machine: per-command times (AKUNU_CUDA_PROFILE: an
# event pair around each launch, so launch gaps are excluded) and Nsight Compute's kernel
# durations and DRAM throughput for one decode step, next to the graph's tokens/s.
#   bench/gpu-profile.sh [MODEL ...]   (default: llama-3-8b-q4_0 qwen3-0.6b-q4_0)
# Writes to $OUT (default build-gpu/profile-out). NCU=0 skips Nsight Compute.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/build-gpu/profile-out}
mkdir -p "$OUT"
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(llama-3-8b-q4_0 qwen3-0.6b-q4_0)
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a-real > "$OUT/build.log" 2>&1 &&
    cmake --build build-gpu -j"$(nproc)" --target akunu_cli >> "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
mkdir -p models
python3 tools/make_bench_models.py models --only "${models[@]}" > /dev/null || exit 1
for m in "${models[@]}"; do
    f=models/bench-$m.gguf
    echo "== $m"
    build-gpu/akunu bench -m "$f" --backend cuda -p 512 -n 128 -r 3 2>&1 | tee "$OUT/bench-$m.txt"
    AKUNU_CUDA_PROFILE=1 build-gpu/akunu bench -m "$f" --backend cuda -p 512 -n 32 -r 1 > /dev/null 2> "$OUT/prof-$m.txt"
    sort -k3 -n -r "$OUT/prof-$m.txt" | head -40
    if [ "${NCU:-1}" != 0 ] && command -v ncu > /dev/null; then
        # one decode step after the warm-up: skip the prefill and warm-up launches
        ncu --clock-control none --csv --print-units base --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
            --launch-skip "${NCU_SKIP:-2000}" --launch-count "${NCU_COUNT:-400}" \
            build-gpu/akunu bench -m "$f" --backend cuda -p 0 -n 16 -r 1 > "$OUT/ncu-$m.csv" 2> "$OUT/ncu-$m.err"
        python3 - "$OUT/ncu-$m.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows: print("no ncu rows"); sys.exit()
h = rows[0]; rows = rows[1:]
ki, mi, vi = h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value")
agg = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
for r in rows:
    k = r[ki].split("(")[0][:60]; v = float(r[vi].replace(",", ""))
    a = agg[k]
    if r[mi] == "gpu__time_duration.sum": a[0] += 1; a[1] += v
    elif r[mi] == "dram__bytes_read.sum": a[2] += v
    elif r[mi].startswith("dram__throughput"): a[3] += v
tot = sum(a[1] for a in agg.values())
print(f"{'kernel':60s} {'n':>5s} {'us':>9s} {'share':>6s} {'GB/s':>7s} {'dram%':>6s}")
for k, a in sorted(agg.items(), key=lambda kv: -kv[1][1]):
    us = a[1] / 1e3  # ns -> us (base units)
    print(f"{k:60s} {a[0]:5d} {us:9.1f} {100*a[1]/tot:5.1f}% {a[2]/a[1] if a[1] else 0:7.0f} {a[3]/max(a[0],1):6.1f}")
PY
    fi
done
