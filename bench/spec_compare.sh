#!/usr/bin/env bash
# Speculative decoding, akunu against llama.cpp's examples on the same files, prompt and
# machine, one run: plain greedy decoding (akunu run; llama-completion), prompt lookup (akunu
# --spec ngram; llama-lookup) and the draft pair (Qwen2.5-Coder-0.5B drafting for the 1.5B:
# akunu --spec draft; llama-speculative). The task repeats a C file with one rename
# (bench/tasks/rename.txt) in the model's chat template, as akunu run formats it (printed
# by --print-prompt and given to llama.cpp as the same text). Greedy throughout, 2
# threads, each engine's default draft settings; decode tok/s, medians of REPS runs.
#   bench/spec_compare.sh [AKUNU_BIN] [REPS]    (default build/akunu, 3; scripts/get-model all first)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
source bench/llama-cpu.sh
bin=${1:-build/akunu}
reps=${2:-3}
small=models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
large=models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
n=400
ak_llama_build llama-completion llama-lookup llama-speculative
L=$ak_llama_dir/bin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
task="$(cat bench/tasks/rename.txt)"
"$bin" run -m "$large" -p "$task" -n 1 --greedy --print-prompt 2>&1 >/dev/null |
    awk 'f && /^\[prompt / {exit} f {print} /^akunu: the prompt/ {f = 1}' > "$tmp/prompt.txt"
printf '%s\n' "$(cat "$tmp/prompt.txt")" > "$tmp/p.txt"   # ending in one newline, as akunu's
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

ak() {   # label args...: akunu decode tok/s and acceptance
    local label=$1 rates=() acc=""
    shift
    for _ in $(seq "$reps"); do
        "$bin" run -m "$large" -p "$task" -n $n --greedy -t 2 "$@" >/dev/null 2>"$tmp/err"
        rates+=("$(sed -n 's/.*decode \([0-9.]*\) tok\/s.*/\1/p' "$tmp/err")")
        acc=$(sed -n 's/.*speculative: \([0-9]*\) drafted, \([0-9]*\) accepted.*/\2 of \1/p' "$tmp/err")
    done
    printf "| akunu | %s | %s | %s |\n" "$label" "$(printf "%s\n" "${rates[@]}" | median)" "${acc:--}"
}
ll() {   # label tool args...: llama.cpp decode tok/s and acceptance
    local label=$1 tool=$2 rates=() acc=""
    shift 2
    for _ in $(seq "$reps"); do
        "$L/$tool" -m "$large" -f "$tmp/p.txt" -n $n --temp 0 -t 2 "$@" </dev/null >"$tmp/out" 2>"$tmp/err" || true
        r=$(sed -n 's/.*decoded .* speed: *\([0-9.]*\) t\/s.*/\1/p' "$tmp/err" | head -1)
        [ -n "$r" ] || r=$(sed -n 's/.*[^t] eval time.*, *\([0-9.]*\) tokens per second.*/\1/p' "$tmp/err" | head -1)
        rates+=("$r")
        acc=$(awk '/n_drafted/ {d = $NF} /n_accept/ {a = $NF} END {if (d) print a " of " d}' "$tmp/err")
    done
    printf "| llama.cpp | %s | %s | %s |\n" "$label" "$(printf "%s\n" "${rates[@]}" | median)" "${acc:--}"
}
echo "| engine | mode (Qwen2.5-Coder-1.5B Q4_K_M, $n tokens) | decode tok/s (median of $reps) | drafts accepted |"
echo "| --- | --- | ---: | ---: |"
ak "plain greedy"
ll "plain greedy" llama-completion -no-cnv
ak "prompt lookup (--spec ngram)" --spec ngram
ll "prompt lookup (llama-lookup)" llama-lookup
ak "0.5B draft (--spec draft)" --spec draft --draft-model "$small"
ll "0.5B draft (llama-speculative)" llama-speculative -md "$small"
