#!/usr/bin/env bash
# The text subcommands on real models (scripts/get-model): run -p streams a reply and a
# stats line, stop strings cut it, -n bounds it; chat through a pipe reuses the cached
# conversation; tokenize, embed and perplexity; bad input exits non-zero with a message.
#   test_cli_real.sh AKUNU_BIN MODELS_DIR SOURCE_DIR
set -u
bin=$1 models=$2 src=$3
sm=$models/SmolLM2-135M-Instruct.Q4_1.gguf em=$models/all-MiniLM-L6-v2-f32.gguf
. "$(dirname "$0")/checks.sh"
for f in "$sm" "$em"; do [ -f "$f" ] || { echo "FAIL: $f missing: run scripts/get-model all"; exit 1; }; done
stats='^\[prompt [0-9]+ tokens, prefill [0-9.]+ tok/s \| generated [0-9]+ tokens, decode [0-9.]+ tok/s\]$'

"$bin" run -m "$sm" -p "What is the capital of France?" --greedy -n 64 > "$tmp/a" 2> "$tmp/ae"; rc=$?
check "run -p exits 0 (rc=$rc)" '[ $rc -eq 0 ]'
check "run -p streams a reply: '$(head -c 80 "$tmp/a")'" '[ $(wc -c < "$tmp/a") -gt 4 ]'
check "run -p ends with the stats line" 'grep -Eq "$stats" "$tmp/ae"'
gen=$(sed -nE 's/.*generated ([0-9]+) tokens.*/\1/p' "$tmp/ae")
check "at most -n tokens ($gen)" '[ -n "$gen" ] && [ "$gen" -le 64 ]'

# a stop string from the middle of that reply: the output ends right before it
word=$(head -c 200 "$tmp/a" | tr -s ' \n' '\n\n' | sed -n '3p')
"$bin" run -m "$sm" -p "What is the capital of France?" --greedy -n 64 --stop "$word" > "$tmp/s" 2>/dev/null
want=$(head -c 200 "$tmp/a" | awk -v w="$word" '{ i = index($0, w); if (i) { printf "%s", substr($0, 1, i - 1); exit } print }')
check "--stop '$word' cuts the reply before it: '$(cat "$tmp/s")'" '[ "$(cat "$tmp/s")" = "$want" ]'

"$bin" run -m "$sm" -p "Tell me a long story about a dragon." -n 5 --seed 3 > /dev/null 2> "$tmp/ne"
check "-n 5 generates 5 tokens" 'grep -q "generated 5 tokens" "$tmp/ne"'
"$bin" run -m "$sm" -p "Tell me a story." -n 24 --seed 11 --temp 0.9 > "$tmp/r1" 2>/dev/null
"$bin" run -m "$sm" -p "Tell me a story." -n 24 --seed 11 --temp 0.9 > "$tmp/r2" 2>/dev/null
check "a seed reproduces a sampled reply" 'cmp -s "$tmp/r1" "$tmp/r2" && [ -s "$tmp/r1" ]'

# chat through a pipe: two turns, the second reuses the first turn's cache
printf 'Hi there\nWhat did I just say?\n' | "$bin" chat -m "$sm" --greedy -n 40 > "$tmp/c" 2> "$tmp/ce"; rc=$?
check "chat exits 0 at end of input (rc=$rc)" '[ $rc -eq 0 ]'
check "chat answers twice" '[ $(grep -c "generated" "$tmp/ce") -eq 2 ]'
reused=$(sed -nE 's/.*\(([0-9]+) reused\).*/\1/p' "$tmp/ce" | tail -1)
check "the second turn reuses the cached conversation ($reused tokens)" '[ -n "$reused" ] && [ "$reused" -gt 20 ]'

# tokenize: ids and pieces agree; special-token text is one token, --raw makes it text
ids=$("$bin" tokenize -m "$sm" -p "Hello <|im_start|> world")
check "tokenize prints ids ($ids)" 'echo "$ids" | grep -Eq "^[0-9]+(,[0-9]+)+$"'
n_pieces=$("$bin" tokenize -m "$sm" -p "Hello <|im_start|> world" --pieces | wc -l)
check "--pieces prints one line per id" '[ "$n_pieces" -eq $(echo "$ids" | tr , "\n" | wc -l) ]'
check "<|im_start|> is one special token (id 1)" 'echo ",$ids," | grep -q ",1,"'
raw=$("$bin" tokenize -m "$sm" -p "Hello <|im_start|> world" --raw)
check "--raw tokenizes it as text" '! echo ",$raw," | grep -q ",1," && [ $(echo "$raw" | tr , "\n" | wc -l) -gt 4 ]'

# embed: unit vectors of the model's width, as text and JSON
"$bin" embed -m "$em" -p "a sentence" -p "another one" --json > "$tmp/e.json"; rc=$?
check "embed --json (rc=$rc)" 'python3 -c "
import json, math, sys
d = json.load(open(sys.argv[1]))
assert d[\"dim\"] == 384 and len(d[\"embeddings\"]) == 2
for v in d[\"embeddings\"]:
    assert len(v) == 384 and abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-4
" "$tmp/e.json"'
check "embed text: two lines of 384 numbers" '[ "$("$bin" embed -m "$em" -p a -p b | awk "{ print NF }" | sort -u)" = 384 ]'

# perplexity of the test passage at context 256 (SmolLM2 measures about 30 at 512)
ppl=$("$bin" perplexity -m "$sm" -f "$src/tests/data/ppl/botchan.txt" -c 256 2>/dev/null | sed -nE 's/^PPL = ([0-9.]+).*/\1/p')
check "perplexity prints PPL ($ppl)" '[ -n "$ppl" ] && awk -v p="$ppl" "BEGIN { exit !(p > 15 && p < 60) }"'

bad "run -p on an encoder" "$bin" run -m "$em" -p "hello" -n 4
bad "embed with a decoder" "$bin" embed -m "$sm" -p "hello"
bad "perplexity of a missing file" "$bin" perplexity -m "$sm" -f "$tmp/none.txt"

done_checks
