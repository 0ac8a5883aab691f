#!/usr/bin/env bash
# Decode speed of the generation modes against plain decoding, on real models, medians of
# REPS runs of `akunu run` (its decode tok/s), one run of this script on one machine:
#   grammar   --json against free text, and --json-schema (a JSON reply asked for)
#   ngram     --spec ngram against plain greedy on a grounded task (bench/tasks/rename.txt:
#             repeat a C file with one rename), acceptance rate from akunu's report
#   draft     --spec draft with Qwen2.5-Coder-0.5B drafting for the 1.5B, same task
# Greedy throughout (speculation keeps the reply; the rates compare like for like).
#   bench/gen_modes.sh [AKUNU_BIN] [REPS]      (default build/akunu, 3; scripts/get-model all first)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/akunu}
reps=${2:-3}
small=models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
large=models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
task="$(cat bench/tasks/rename.txt)"
ask="Reply with a JSON object with the name, country, population and three landmarks of Paris."
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# one configuration: decode tok/s median, acceptance of the last run, tokens generated
run() {   # label model prompt args...
    local label=$1 model=$2 prompt=$3 rates=() acc="" n=""
    shift 3
    for _ in $(seq "$reps"); do
        "$bin" run -m "$model" -p "$prompt" -n 400 --greedy "$@" >/dev/null 2>/tmp/gen_modes.err
        rates+=("$(sed -n 's/.*generated \([0-9]*\) tokens, decode \([0-9.]*\) tok\/s.*/\2/p' /tmp/gen_modes.err)")
        n=$(sed -n 's/.*generated \([0-9]*\) tokens.*/\1/p' /tmp/gen_modes.err)
        acc=$(sed -n 's/.*speculative: \([0-9]*\) drafted, \([0-9]*\) accepted.*/\2 of \1/p' /tmp/gen_modes.err)
    done
    med=$(printf "%s\n" "${rates[@]}" | median)
    printf "| %s | %s | %s | %s | %s |\n" "$label" "$(basename "$model" .gguf)" "$n" "$med" "${acc:--}"
    last=$med
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", a / b}'; }

echo "| mode | model | tokens | decode tok/s (median of $reps) | drafts accepted |"
echo "| --- | --- | ---: | ---: | ---: |"
run "free text" "$small" "$ask"; base=$last
run "--json" "$small" "$ask" --json; echo "| grammar: --json / free text | | | $(ratio "$last" "$base") | |"
run "plain" "$small" "$task"; base=$last
run "--spec ngram" "$small" "$task" --spec ngram; echo "| n-gram speedup | | | $(ratio "$last" "$base") | |"
run "plain" "$large" "$task"; base=$last
run "--spec ngram" "$large" "$task" --spec ngram; echo "| n-gram speedup (1.5B) | | | $(ratio "$last" "$base") | |"
run "--spec draft (0.5B)" "$large" "$task" --spec draft --draft-model "$small"; echo "| draft-model speedup | | | $(ratio "$last" "$base") | |"
