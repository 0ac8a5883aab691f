#!/usr/bin/env bash
# Tokenizer speed on pathological text, akunu vs llama.cpp's llama-tokenize, same bytes.
#
#   bench/tokenize_compare.sh [-r RUNS] [--input A,B] [--vocab A,B] [--timeout S]
#
# Inputs are written by build/tokenize_bench --write (tokenize_bench --list names them);
# vocabularies: smollm2, gemma3, minilm (scripts/get-model all) and qwen2: a Qwen2.5 GGUF
# from models/ if there is one, else "qwen2-pre", SmolLM2's vocabulary with the qwen2
# pre-tokenizer (for llama.cpp a copy of the SmolLM2 file with tokenizer.ggml.pre = qwen2,
# third_party/SmolLM2-qwen2-pre.gguf, made with gguf-py's gguf_new_metadata).
# akunu: tokenize_bench times ak_tokenize alone (median of RUNS, default 3).
# llama.cpp: `llama-tokenize -m MODEL -f FILE --ids --log-disable --no-escape` (plus
# --no-parse-special for the plain rows) has no option to time the tokenization alone
# nor to skip printing the ids, so its time is the median wall time of RUNS runs minus
# the median wall time of RUNS runs on a 2-byte file (model load: vocab only, context
# creation, exit). Printing the ids stays in (a few ms per 100k ids). A run slower than
# 10 s is not repeated; one slower than --timeout (default 300 s) is stopped.
# "same ids": whether both printed the same ids (BOS/EOS as each file says).
# AKUNU_BUILD=dir: build tokenize_bench there (default build/).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
tp="$root/third_party"
lbuild="$tp/llama.cpp-build"
ltok="$lbuild/bin/llama-tokenize"
abuild="${AKUNU_BUILD:-$root/build}"

runs=3
inputs=""
vocabs=""
tmo=300
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
    case "$1" in
        -r) runs="$2"; shift 2 ;;
        --input) inputs="$2"; shift 2 ;;
        --vocab) vocabs="$2"; shift 2 ;;
        --timeout) tmo="$2"; shift 2 ;;
        -h|--help) usage 0 ;;
        *) echo "tokenize_compare.sh: unknown argument $1" >&2; usage 2 >&2 ;;
    esac
done
log() { echo "== $*" >&2; }

# ---- llama.cpp: llama-tokenize ----
. "$root/bench/llama-cpu.sh"
ak_llama_build llama-tokenize || exit 1

# ---- akunu ----
log "building tokenize_bench in $abuild"
cfg=(); [ -f "$abuild/CMakeCache.txt" ] || cfg=(-DCMAKE_BUILD_TYPE=Release -DAKUNU_CUDA=OFF)
cmake -S "$root" -B "$abuild" "${cfg[@]}" >/dev/null
cmake --build "$abuild" --target tokenize_bench -j2 >/dev/null
tb="$abuild/tokenize_bench"

# ---- vocabularies: name, akunu's NAME=FILE[:PRE], llama.cpp's file ----
smol="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
for f in "$smol" "$root/models/gemma-3-270m-q4_k_m.gguf" "$root/models/all-MiniLM-L6-v2-f32.gguf"; do
    [ -f "$f" ] || { echo "tokenize_compare.sh: $f missing: run scripts/get-model all" >&2; exit 1; }
done
names=(smollm2 gemma3 minilm)
aspec=("smollm2=$smol" "gemma3=$root/models/gemma-3-270m-q4_k_m.gguf" "minilm=$root/models/all-MiniLM-L6-v2-f32.gguf")
lfile=("$smol" "$root/models/gemma-3-270m-q4_k_m.gguf" "$root/models/all-MiniLM-L6-v2-f32.gguf")
qwen="$(ls "$root"/models/*[Qq]wen2*.gguf 2>/dev/null | head -1 || true)"
if [ -n "$qwen" ]; then
    names+=(qwen2); aspec+=("qwen2=$qwen"); lfile+=("$qwen")
else
    q="$tp/SmolLM2-qwen2-pre.gguf"
    if [ ! -f "$q" ]; then
        log "writing $q (SmolLM2 with tokenizer.ggml.pre = qwen2)"
        mkdir -p "$tp"
        python3 -m gguf.scripts.gguf_new_metadata "$smol" "$q.tmp" --pre-tokenizer qwen2 --force >/dev/null
        mv "$q.tmp" "$q"
    fi
    names+=(qwen2-pre); aspec+=("qwen2-pre=$smol:qwen2"); lfile+=("$q")
fi
in_list() { [ -z "$2" ] || [[ ",$2," == *",$1,"* ]]; }

# ---- runs ----
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/in" "$work/ids" "$work/lids"
wargs=(); [ -n "$inputs" ] && wargs=(--input "$inputs")
"$tb" --write "$work/in" "${wargs[@]}"
sel=()
for i in "${!names[@]}"; do in_list "${names[$i]}" "$vocabs" && sel+=("${aspec[$i]}"); done
[ ${#sel[@]} -gt 0 ] || { echo "tokenize_compare.sh: no vocabulary selected" >&2; exit 2; }
log "akunu: tokenize_bench -r $runs (load average $(cut -d' ' -f1-3 /proc/loadavg))"
"$tb" -r "$runs" --tsv --ids "$work/ids" "${wargs[@]}" "${sel[@]}" >"$work/akunu.tsv"

now() { date +%s%N; }
# wall seconds of one llama-tokenize run (or the timeout) on file $2 with model $1, extra args after
lrun() {
    local m="$1" f="$2" out="$3"; shift 3
    local t0 t1 rc=0
    t0=$(now)
    timeout "$tmo" "$ltok" -m "$m" -f "$f" --ids --log-disable --no-escape "$@" </dev/null >"$out" 2>/dev/null || rc=$?
    t1=$(now)
    if [ "$rc" = 124 ]; then echo "timeout"; else python3 -c "print(($t1 - $t0) / 1e9)"; fi
}
median() { python3 -c 'import sys; v = sorted(float(x) for x in sys.argv[1:]); print(v[len(v) // 2])' "$@"; }
printf 'Hi' >"$work/tiny.txt"
: >"$work/llama.tsv"
for i in "${!names[@]}"; do
    v="${names[$i]}"
    in_list "$v" "$vocabs" || continue
    m="${lfile[$i]}"
    ts=(); for r in $(seq "$runs"); do ts+=("$(lrun "$m" "$work/tiny.txt" /dev/null)"); done
    load="$(median "${ts[@]}")"
    log "llama.cpp $v: load and exit $load s (median of $runs)"
    echo -e "load\t$v\t-\t$load" >>"$work/llama.tsv"
    while IFS=$'\t' read -r input vocab parse bytes tokens secs mbs; do
        [ "$vocab" = "$v" ] || continue
        extra=(); [ "$parse" = no ] && extra=(--no-parse-special)
        ts=()
        for r in $(seq "$runs"); do
            t="$(lrun "$m" "$work/in/$input.txt" "$work/lids/$input.$v.$parse" "${extra[@]}")"
            ts+=("$t")
            [ "$t" = timeout ] && break
            python3 -c "import sys; sys.exit(0 if float('$t') > 10 else 1)" && break
        done
        if [ "${ts[0]}" = timeout ]; then t=timeout; else t="$(median "${ts[@]}")"; fi
        same=no
        a="$work/ids/$input.$v.$([ "$parse" = yes ] && echo special || echo plain).ids"
        [ "$t" != timeout ] && cmp -s "$a" "$work/lids/$input.$v.$parse" && same=yes
        echo -e "$input\t$v\t$parse\t$t\t$same\t${#ts[@]}" >>"$work/llama.tsv"
        log "llama.cpp $input $v parse=$parse: $t s (${#ts[@]} runs), same ids: $same"
    done <"$work/akunu.tsv"
done

# ---- table ----
python3 - "$work/akunu.tsv" "$work/llama.tsv" "$tmo" "$runs" <<'EOF'
import sys
ak = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
ll, load = {}, {}
for l in open(sys.argv[2]):
    f = l.rstrip("\n").split("\t")
    if f[0] == "load":
        load[f[1]] = float(f[3])
    else:
        ll[(f[0], f[1], f[2])] = f[3:]
tmo, runs = float(sys.argv[3]), int(sys.argv[4])
print("\nakunu: ak_tokenize alone, median of the runs; llama.cpp: llama-tokenize wall time minus its wall time")
print("on a 2-byte file (" + ", ".join(f"{v} {1e3 * s:.0f} ms" for v, s in load.items()) + "); MB = 10^6 bytes;")
print("ratio = akunu MB/s / llama.cpp MB/s (above 1: akunu is faster)\n")
print("| input | vocab | parse special | bytes | tokens | akunu MB/s | llama.cpp MB/s | ratio | same ids |")
print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
for input, vocab, parse, nbytes, tokens, secs, mbs in ak:
    r = ll.get((input, vocab, parse))
    a = float(mbs)
    lt, lmbs, ratio, same = "-", None, "-", "-"
    if r:
        same = r[1]
        if r[0] == "timeout":
            lt, ratio = f"< {int(nbytes) / 1e6 / tmo:.3f} (timeout)", f"> {a / (int(nbytes) / 1e6 / tmo):.0f}"
        else:
            d = float(r[0]) - load[vocab]
            if d <= 0.005:  # below what the subtraction can resolve
                lt, ratio = f"> {int(nbytes) / 1e6 / 0.005:.0f} (within load noise)", "-"
            else:
                lmbs = int(nbytes) / 1e6 / d
                lt, ratio = f"{lmbs:.2f}", f"{a / lmbs:.2f}"
            if int(r[2]) < runs and r[0] != "timeout":
                lt += f" ({r[2]} run{'s' if int(r[2]) > 1 else ''})"
    print(f"| {input} | {vocab} | {parse} | {nbytes} | {tokens} | {a:.2f} | {lt} | {ratio} | {same} |")
EOF
