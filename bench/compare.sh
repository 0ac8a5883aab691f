#!/usr/bin/env bash
# akunu bench vs llama.cpp's llama-bench on the same files and thread count.
#
#   bench/compare.sh [-t THREADS] [-r REPS] [--pp-reps N] [-p N] [-n N] [-d DEPTH] [--json FILE] [MODEL...]
#
# MODEL is a name known to tools/make_bench_models.py (e.g. llama-3.2-1b-q4_0, written
# to models/bench-NAME.gguf when missing), "default" (the real model scripts/get-model
# fetches) or a path to a .gguf file. With no MODEL: the six synthetic files and the real
# default model. See bench/README.md.
#
# Steps: llama.cpp is taken from the llama-cpp-python sdist on PyPI (it vendors
# llama.cpp) into third_party/ and only its llama-bench is built (CPU, native, Release);
# akunu is built in build/; then for each model the two tools run alternately:
# akunu ppP, llama ppP, akunu tgN, llama tgN.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
tp="$root/third_party"
lbuild="$tp/llama.cpp-build"
lbench="$lbuild/bin/llama-bench"
akunu="${AKUNU:-$root/build/akunu}"   # AKUNU=path: use that binary, build nothing

threads="$(nproc)"
reps=3
pp_reps=1
n_pp=512
n_tg=128
depth=0
json_out=""
models=()
usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
    case "$1" in
        -t) threads="$2"; shift 2 ;;
        -r) reps="$2"; shift 2 ;;
        --pp-reps) pp_reps="$2"; shift 2 ;;
        -p) n_pp="$2"; shift 2 ;;
        -n) n_tg="$2"; shift 2 ;;
        -d) depth="$2"; shift 2 ;;
        --json) json_out="$2"; shift 2 ;;
        -h|--help) usage 0 ;;
        -*) echo "compare.sh: unknown option $1" >&2; usage 2 >&2 ;;
        *) models+=("$1"); shift ;;
    esac
done
[ ${#models[@]} -gt 0 ] || models=(llama-3.2-1b-q4_0 llama-3.2-1b-q8_0 llama-3.2-1b-q4_k llama-3.2-1b-f16
                                    qwen3-0.6b-q8_0 qwen3-0.6b-q4_0 default)
log() { echo "== $*" >&2; }

# ---- llama.cpp (llama-bench) ----
. "$root/bench/llama-cpu.sh"
ak_llama_build llama-bench || exit 1

# ---- akunu ----
if [ -n "${AKUNU:-}" ]; then
    [ -x "$akunu" ] || { echo "compare.sh: AKUNU=$akunu is not executable" >&2; exit 1; }
else
log "building akunu"
if ! { cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
       cmake --build "$root/build" -j2 >"$root/build/compare-build.log" 2>&1; }; then
    [ -x "$akunu" ] || { tail -20 "$root/build/compare-build.log" >&2; exit 1; }
    log "warning: building akunu failed (build/compare-build.log); using the existing build/akunu"
fi
fi

# ---- models ----
files=()
for m in "${models[@]}"; do
    case "$m" in
        *.gguf) [ -f "$m" ] || { echo "compare.sh: no file $m" >&2; exit 1; }; files+=("$m") ;;
        default) files+=("$("$root/scripts/get-model")") ;;
        *) f="$root/models/bench-$m.gguf"
           [ -f "$f" ] || python3 "$root/tools/make_bench_models.py" "$root/models" --only "$m" >&2
           files+=("$f") ;;
    esac
done

# ---- runs ----
res="$(mktemp -d)"
trap 'rm -rf "$res"' EXIT
bandwidth() {
    "$akunu" bench -m "${files[0]}" --bandwidth -t "$threads" --json |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["read_gbps"])'
}
load() { cut -d' ' -f1 /proc/loadavg; }
bw0="$(bandwidth)"
log "measured memory read bandwidth ($threads threads): $bw0 GB/s; load average $(load)"
busy="$(python3 -c '
import time
def t():
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(v), v[3] + v[4]
a = t(); time.sleep(1); b = t()
print(round(100 * (1 - (b[1] - a[1]) / max(1, b[0] - a[0]))))')"
[ "$busy" -lt 10 ] || log "warning: the CPUs are ${busy}% busy with other work; the figures will be noisy"
i=0
for f in "${files[@]}"; do
    i=$((i + 1))
    for t in pp tg; do
        if [ $t = pp ]; then a=(-p "$n_pp" -n 0 -r "$pp_reps"); [ "$n_pp" -gt 0 ] || continue
        else a=(-p 0 -n "$n_tg" -r "$reps"); [ "$n_tg" -gt 0 ] || continue; fi
        [ "$depth" -gt 0 ] && a+=(-d "$depth")
        log "$(basename "$f"): $t (akunu, then llama.cpp)"
        "$akunu" bench -m "$f" -t "$threads" "${a[@]}" --json >"$res/$i.$t.akunu.json" \
            || echo '[]' >"$res/$i.$t.akunu.json"
        "$lbench" -m "$f" -t "$threads" "${a[@]}" -o json >"$res/$i.$t.llama.json" 2>"$res/$i.$t.llama.err" \
            || { tail -5 "$res/$i.$t.llama.err" >&2; echo '[]' >"$res/$i.$t.llama.json"; }
    done
done

bw1="$(bandwidth)"
log "measured memory read bandwidth at the end: $bw1 GB/s; load average $(load)"
bw="$(python3 -c "print(max($bw0, $bw1))")"

# ---- table ----
python3 - "$res" "$bw" "$threads" "$json_out" "${files[@]}" <<'EOF'
import json, os, sys
res, bw, threads, json_out, files = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
def load(p):
    try:
        with open(p) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return []
rows = []
for i, f in enumerate(files, 1):
    for t in ("pp", "tg"):
        ak, ll = load(f"{res}/{i}.{t}.akunu.json"), load(f"{res}/{i}.{t}.llama.json")
        if not ak and not ll:
            continue
        a = ak[0] if ak else {}
        l = ll[0] if ll else {}
        test = a.get("test") or (f"pp{l.get('n_prompt')}" if t == "pp" else f"tg{l.get('n_gen')}")
        at, lt = a.get("tps_mean"), l.get("avg_ts")
        bpt = a.get("bytes_per_token")
        r = dict(model=os.path.basename(f), test=test, threads=int(threads), akunu_tps=at,
                 akunu_sd=a.get("tps_sd"), llama_tps=lt, llama_sd=l.get("stddev_ts"),
                 ratio=at / lt if at and lt else None, read_gbps=bw)
        if t == "tg" and bpt:
            for who, v in (("akunu", at), ("llama", lt)):
                if v:
                    r[who + "_gbps"] = bpt * v / 1e9
                    r[who + "_roofline"] = bpt * v / 1e9 / bw
        rows.append(r)
f2 = lambda v, fmt="%.2f": fmt % v if v is not None else "-"
pc = lambda v: "%.0f%%" % (100 * v) if v is not None else "-"
print(f"\nthreads {threads}; measured read bandwidth {bw:.1f} GB/s (best of start and end); ratio = akunu / llama.cpp (mean t/s);")
print("GB/s = weight bytes read per token x t/s; roofline = GB/s / measured bandwidth\n")
print("| model | test | akunu t/s | llama.cpp t/s | ratio | akunu GB/s | akunu roofline | llama.cpp roofline |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for r in rows:
    sd = lambda v, s: f2(v) + (" ± " + f2(s) if v is not None and s else "")
    print(f"| {r['model']} | {r['test']} | {sd(r['akunu_tps'], r['akunu_sd'])} | {sd(r['llama_tps'], r['llama_sd'])} | "
          f"{f2(r['ratio'])} | {f2(r.get('akunu_gbps'), '%.1f') if 'akunu_gbps' in r else ''} | "
          f"{pc(r.get('akunu_roofline')) if 'akunu_roofline' in r else ''} | "
          f"{pc(r.get('llama_roofline')) if 'llama_roofline' in r else ''} |")
if json_out:
    with open(json_out, "w") as fh:
        json.dump(rows, fh, indent=1)
EOF
