#!/usr/bin/env bash
# CPU decode at depth: akunu tgN on an empty cache and after DEPTH prompt tokens, with its
# default F32 KV cache and with F16, optionally against an earlier akunu binary, and
# llama.cpp's llama-bench (its default F16 KV cache) at the same depth and thread count.
#
#   bench/cpu_depth.sh [-t THREADS] [-r REPS] [-n N] [-d DEPTH] [--rounds K] [--log FILE] [MODEL...]
#
# MODEL: a .gguf path (default: the three real models of scripts/get-model: SmolLM2-135M
# Q4_1, Qwen2.5-Coder-0.5B Q4_K_M, Gemma 3 270M Q4_K_M). AKUNU=path (default build/akunu),
# AKUNU_BEFORE=path (the binary to compare against; none by default), LLAMA_BENCH=path
# (default: built by bench/llama-cpu.sh into third_party/llama.cpp-build). Each tool's run
# is the median of REPS; the whole sequence runs K times, alternating the tools, and the
# table gives the median of the K medians. --log FILE keeps the measurements (appended: the
# table then covers every round in FILE, this run's and earlier ones). Ratios are taken
# within one run.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
threads=2 reps=3 n_tg=128 depth=4096 rounds=1 log=
models=()
usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
    case "$1" in
        -t) threads="$2"; shift 2 ;;
        -r) reps="$2"; shift 2 ;;
        -n) n_tg="$2"; shift 2 ;;
        -d) depth="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --log) log="$2"; shift 2 ;;
        -h|--help) usage 0 ;;
        -*) echo "cpu_depth.sh: unknown option $1" >&2; usage 2 >&2 ;;
        *) models+=("$1"); shift ;;
    esac
done
[ ${#models[@]} -gt 0 ] || mapfile -t models < <(for m in smollm2 qwen-coder gemma3; do scripts/get-model "$m"; done)

akunu="${AKUNU:-$root/build/akunu}"
before="${AKUNU_BEFORE:-}"
[ -x "$akunu" ] || { echo "cpu_depth.sh: $akunu is not built" >&2; exit 1; }
[ -z "$before" ] || [ -x "$before" ] || { echo "cpu_depth.sh: AKUNU_BEFORE=$before is not executable" >&2; exit 1; }
lbench="${LLAMA_BENCH:-}"
if [ -z "$lbench" ]; then
    . "$root/bench/llama-cpu.sh"
    ak_llama_build llama-bench || exit 1
    lbench="$ak_llama_dir/bin/llama-bench"
fi

if [ -n "$log" ]; then out="$log"; else out="$(mktemp)"; trap 'rm -f "$out"' EXIT; fi
# one line per measurement: model kv tool depth t/s
ak_run() { # tool-name binary model kv depth
    local t
    t="$("$2" bench -m "$3" -p 0 -n "$n_tg" -d "$5" -r "$reps" -t "$threads" "--kv-$4" --json 2>/dev/null |
         python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["tps_median"])')"
    echo "$(basename "$3") $4 $1 $5 $t" | tee -a "$out" >&2
}
ll_run() { # model depth
    local t
    t="$("$lbench" -m "$1" -p 0 -n "$n_tg" -d "$2" -r "$reps" -t "$threads" -o json 2>/dev/null |
         python3 -c 'import json,sys,statistics; print(statistics.median(json.load(sys.stdin)[0]["samples_ts"]))')"
    echo "$(basename "$1") f16 llama.cpp $2 $t" | tee -a "$out" >&2
}

echo "== load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for ((k = 0; k < rounds; k++)); do
    for m in "${models[@]}"; do
        for d in 0 "$depth"; do
            for kv in f32 f16; do
                [ -z "$before" ] || ak_run before "$before" "$m" "$kv" "$d"
                ak_run after "$akunu" "$m" "$kv" "$d"
            done
            ll_run "$m" "$d"
        done
    done
done
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 - "$out" "$n_tg" <<'EOF'
import sys, statistics, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m, kv, tool, d, t = line.split()
    rows[(m, kv, tool, int(d))].append(float(t))
med = {k: statistics.median(v) for k, v in rows.items()}
n = sys.argv[2]
have_before = any(k[2] == "before" for k in med)
print("| model | KV (akunu) | test | " + ("akunu before | " if have_before else "") + "akunu | " +
      ("after / before | " if have_before else "") + "llama.cpp (F16 KV) | akunu / llama.cpp |")
print("| --- | --- | ---: | " + ("---: | " if have_before else "") + "---: | " + ("---: | " if have_before else "") + "---: | ---: |")
for m in dict.fromkeys(k[0] for k in med):
    for d in sorted({k[3] for k in med if k[0] == m}):
        for kv in ("f32", "f16"):
            a, b, l = med.get((m, kv, "after", d)), med.get((m, kv, "before", d)), med.get((m, "f16", "llama.cpp", d))
            if a is None: continue
            test = f"tg{n}" + (f" @ d{d}" if d else "")
            cells = [m, kv.upper(), test]
            if have_before: cells += [f"{b:.2f}" if b else "", f"{a:.2f}", f"{a / b:.2f}" if b else ""]
            else: cells += [f"{a:.2f}"]
            cells += [f"{l:.2f}" if l else "", f"{a / l:.2f}" if l else ""]
            print("| " + " | ".join(cells) + " |")
EOF
