#!/usr/bin/env bash
# The CLI contract: `run --print-ids` prints the ids on one line; `logits` writes [n][vocab]
# float32; bad input exits non-zero with a message and never crashes.
set -u
bin=$1 fx=$2
. "$(dirname "$0")/checks.sh"

ids=$(python3 -c "import json;print(','.join(map(str,json.load(open('$fx/manifest.json'))['prompt_ids'])))" 2>/dev/null ||
      sed -n '/"prompt_ids"/,/]/p' "$fx/manifest.json" | tr -d ' \n' | sed 's/.*\[//; s/\].*//')
want=$(awk '/"llama": \{/{f=1} f&&/greedy_continuation/{g=1;next} g&&/\]/{exit} g{gsub(/[ ,]/,"");printf "%s%s",(n++?",":""),$0}' "$fx/manifest.json")

out=$("$bin" run -m "$fx/llama/llama-f32.gguf" --prompt-ids "$ids" -n 16 --greedy --print-ids 2>"$tmp/err")
check "run --print-ids prints the greedy continuation ($out vs $want)" '[ "$out" = "$want" ]'
check "run prints one line" '[ $(printf "%s\n" "$out" | wc -l) -eq 1 ]'
"$bin" run -v -m "$fx/qwen3/qwen3-f32.gguf" --prompt-ids 1,2 -n 1 2>"$tmp/v" >/dev/null
check "run -v prints the table size" 'grep -Eq "^dispatch table: [0-9]+ commands per token$" "$tmp/v"'
# the fixture has 2 layers: on the CPU (no fusions) 8 commands each, besides embed, the first norm, logits and sample
check "run -v lists layer 0's commands as they run" 'grep -Eq "^  layer\.0\.qkv +gemv$" "$tmp/v" && grep -Eq "^  layer\.0\.rope_kv +rope_kv$" "$tmp/v"'
check "run -v counts the other layers' commands" 'grep -q "^  layer 1: 8 commands$" "$tmp/v" && grep -q "^dispatch table: 20 commands per token$" "$tmp/v"'
check "run -v on the CPU: an F32 KV cache by default" 'grep -q "backend cpu, KV cache f32$" "$tmp/v"'
"$bin" run -v --kv-f16 -m "$fx/qwen3/qwen3-f32.gguf" --prompt-ids 1,2 -n 1 2>"$tmp/v" >/dev/null
check "run -v --kv-f16: an F16 KV cache" 'grep -q "backend cpu, KV cache f16$" "$tmp/v"'
"$bin" run -v -c 4096 -m "$fx/gemma3/gemma3-f32.gguf" --prompt-ids 1,2 -n 1 2>"$tmp/v" >/dev/null
check "run -v: the KV cache per kind of layer, the sliding ones a ring (window 8 + chunk 512, in rows of 256)" \
      'grep -Eq "^kv cache: 1 global layers x 4096 rows = [0-9.]+ MB, 5 sliding layers x 768 rows = [0-9.]+ MB$" "$tmp/v"'
out=$("$bin" run -v --kv q8_0 --kv-v q4_0 -m "$fx/qwen3/qwen3-f32.gguf" --prompt-ids "$ids" -n 8 --greedy --print-ids 2>"$tmp/v")
check "run -v --kv q8_0 --kv-v q4_0: K and V caches of those types" 'grep -q "backend cpu, KV cache q8_0/q4_0$" "$tmp/v"'
check "run --kv q8_0 --kv-v q4_0 generates 8 ids ($out)" '[[ "$out" =~ ^[0-9]+(,[0-9]+){7}$ ]]'
"$bin" run --kv q5 -m "$fx/qwen3/qwen3-f32.gguf" --prompt-ids 1,2 -n 1 >/dev/null 2>"$tmp/e"; rc=$?
check "run --kv q5: refused (exit 2) with the types it takes" '[ $rc -eq 2 ] && grep -q "q8_0, q4_0" "$tmp/e"'
"$bin" run -v --backend cpu -m "$fx/qwen3/qwen3-f32.gguf" --prompt-ids 1,2 -n 1 2>"$tmp/v" >/dev/null
check "run -v --backend cpu: the CPU backend" 'grep -q "backend cpu, KV cache f32$" "$tmp/v"'
for cmd in run serve; do
  "$bin" $cmd --backend gpu -m "$fx/qwen3/qwen3-f32.gguf" --prompt-ids 1,2 -n 1 >/dev/null 2>"$tmp/e"; rc=$?
  check "$cmd --backend gpu: refused (exit 2) with the backends it takes" '[ $rc -eq 2 ] && grep -q "cpu, cuda or auto" "$tmp/e"'
done

"$bin" logits -m "$fx/gemma2/gemma2-f32.gguf" --prompt-ids "$ids" -o "$tmp/a.f32"
check "logits writes 24x512 floats" '[ $(stat -c %s "$tmp/a.f32") -eq $((24*512*4)) ]'
"$bin" logits -m "$fx/gemma2/gemma2-f32.gguf" --prompt-ids "$ids" -o "$tmp/b.f32" --chunk 5
"$bin" logits -m "$fx/gemma2/gemma2-f32.gguf" --prompt-ids "$ids" -o "$tmp/c.f32" --decode
check "logits --chunk 5 equals one chunk" 'cmp -s "$tmp/a.f32" "$tmp/b.f32"'
check "logits --decode writes the same size" '[ $(stat -c %s "$tmp/c.f32") -eq $((24*512*4)) ]'

"$bin" bench -m "$fx/llama/llama-f32.gguf" -p 8 -n 4 -d 20 -r 1 -t 1 --json > "$tmp/bench.json" 2>"$tmp/e"
check "bench -d names its tests like llama-bench" 'grep -q "\"test\": \"pp8 @ d20\"" "$tmp/bench.json" && grep -q "\"test\": \"tg4 @ d20\"" "$tmp/bench.json"'
check "bench --json names the KV cache type" '[ $(grep -c "\"kv\": \"f32\"" "$tmp/bench.json") -eq 2 ]'

"$bin" bench -m "$fx/llama/llama-f32.gguf" -p 0 -n 4 -r 1 -t 1 --sample --json > "$tmp/bench.json" 2>"$tmp/e"
check "bench --sample adds a sampled tg row" 'grep -q "\"test\": \"tg4\"" "$tmp/bench.json" && grep -q "\"test\": \"tg4 sampled\"" "$tmp/bench.json"'

# grammars: the reply of a random-weight model follows them; bad ones are refused with where
out=$("$bin" run -m "$fx/llama/llama-f32.gguf" -p "Hi" --raw -n 64 --temp 1 --seed 5 --grammar 'root ::= "yes" | "no" | [0-9]{2,3}' 2>"$tmp/e")
check "run --grammar: the reply is a sentence of it ($out)" '[[ "$out" =~ ^(yes|no|[0-9]{2,3})$ ]]'
echo '{"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9}}, "required": ["n"], "additionalProperties": false}' > "$tmp/s.json"
out=$("$bin" run -m "$fx/llama/llama-f32.gguf" -p "Hi" --raw -n 64 --temp 1 --seed 5 --json-schema "$tmp/s.json" 2>"$tmp/e" | tr -d ' \n\t')
check "run --json-schema: the reply validates ($out)" '[[ "$out" =~ ^\{\"n\":[1-9]\}$ ]]'
printf 'root ::= "a" | bad\nbad ::= [z-a]\n' > "$tmp/g.gbnf"
"$bin" run -m "$fx/llama/llama-f32.gguf" -p "Hi" -n 4 --grammar-file "$tmp/g.gbnf" >/dev/null 2>"$tmp/e"; rc=$?
check "run --grammar-file with a reversed range fails with its line (rc=$rc): $(cat "$tmp/e")" '[ $rc -ne 0 ] && grep -q "line 2" "$tmp/e"'
echo '{"type": "object", "not": {}}' > "$tmp/bad.json"
"$bin" run -m "$fx/llama/llama-f32.gguf" -p "Hi" -n 4 --json-schema "$tmp/bad.json" >/dev/null 2>"$tmp/e"; rc=$?
check "run --json-schema with 'not' is refused (rc=$rc)" '[ $rc -ne 0 ] && grep -q "not" "$tmp/e"'
"$bin" run -m "$fx/llama/llama-f32.gguf" -p "Hi" -n 4 --json --grammar 'root ::= "a"' >/dev/null 2>"$tmp/e"; rc=$?
check "run --json with --grammar is refused (rc=$rc)" '[ $rc -eq 2 ]'

"$bin" bench -m "$fx/bert/bert-f16.gguf" -t 1 --bandwidth >"$tmp/o" 2>"$tmp/e"; rc=$?
check "bench --bandwidth on an encoder (rc=$rc)" '[ $rc -eq 0 ] && grep -q "read bandwidth" "$tmp/o"'

# tokenize / detokenize: --no-bos drops BOS, --no-special keeps special-token text as text,
# --raw does both; detokenize gives the text back, control tokens with --special
ll="$fx/llama/llama-f32.gguf"
# speculative decoding: the same reply, with the acceptance reported; --spec draft needs its model
plain=$("$bin" run -m "$ll" -p "Hello" --raw -n 40 --greedy 2>/dev/null)
spec=$("$bin" run -m "$ll" -p "Hello" --raw -n 40 --greedy --spec draft --draft-model "$fx/llama/llama-f16.gguf" 2>"$tmp/e")
check "run --spec draft: the same reply" '[ "$plain" = "$spec" ] && grep -q "speculative: [0-9]* drafted" "$tmp/e"'
spec=$("$bin" run -m "$ll" -p "Hello" --raw -n 40 --greedy --spec ngram --draft-max 16 2>/dev/null)
check "run --spec ngram: the same reply" '[ "$plain" = "$spec" ]'
"$bin" run -m "$ll" -p "Hello" -n 4 --spec draft >/dev/null 2>"$tmp/e"; rc=$?
check "run --spec draft without --draft-model is refused (rc=$rc)" '[ $rc -eq 2 ]'
"$bin" run -m "$ll" -p "Hello" -n 4 --spec ngram --draft-max 17 >/dev/null 2>"$tmp/e"; rc=$?
check "run --draft-max 17 is refused (rc=$rc)" '[ $rc -eq 2 ]'

with=$("$bin" tokenize -m "$ll" -p "Hello world")
without=$("$bin" tokenize -m "$ll" -p "Hello world" --no-bos)
check "tokenize adds BOS, --no-bos does not ($with / $without)" '[ "$with" = "1,$without" ]'
check "--raw has no BOS either" '[ "$("$bin" tokenize -m "$ll" -p "Hello world" --raw)" = "$without" ]'
check "<s> parses as BOS" '[ "$("$bin" tokenize -m "$ll" -p "<s>x" --no-bos | cut -d, -f1)" = 1 ]'
check "--no-special keeps <s> as text" '[ "$("$bin" tokenize -m "$ll" -p "<s>x" --no-bos --no-special | cut -d, -f1)" != 1 ]'
check "detokenize gives the text back" '[ "$("$bin" detokenize -m "$ll" --ids "$with")" = "Hello world" ]'
check "detokenize --special shows BOS (and the space it stands before, as HF does)" '[ "$("$bin" detokenize -m "$ll" --ids "$with" --special)" = "<s> Hello world" ]'
"$bin" run -m "$ll" -p "Hello" -n 2 --greedy -v >/dev/null 2>"$tmp/v"
check "run -v shows the prompt as rendered" 'grep -q "^akunu: the prompt (" "$tmp/v" && grep -qx "Hello" "$tmp/v"'
"$bin" perplexity -m "$ll" -f "$(dirname "$0")/../data/ppl/botchan.txt" -c 16 --chunks 3 >"$tmp/p" 2>"$tmp/pe"
check "perplexity --chunks 3 scores three windows" 'grep -q ", 3 windows of 16" "$tmp/pe" && grep -q "^PPL = " "$tmp/p"'
"$bin" run -m "$ll" --prompt-ids 1 -n 1 -c 10000000 >/dev/null 2>"$tmp/e"; rc=$?
check "a context too large names the bytes it needs (rc=$rc)" '[ $rc -eq 1 ] && grep -q "needs [0-9.]* GB" "$tmp/e"'

# bad input: non-zero exit, a message, no crash (exit codes >= 128 are signals)
bad "missing model" "$bin" run -m "$tmp/none.gguf" --prompt-ids 1 -n 1
bad "not a gguf" "$bin" run -m "$fx/manifest.json" --prompt-ids 1 -n 1
head -c 5000 "$fx/llama/llama-f32.gguf" > "$tmp/trunc.gguf"
bad "truncated file" "$bin" run -m "$tmp/trunc.gguf" --prompt-ids 1 -n 1
bad "id outside vocab" "$bin" run -m "$fx/llama/llama-f32.gguf" --prompt-ids 1,512 -n 1
bad "malformed ids" "$bin" run -m "$fx/llama/llama-f32.gguf" --prompt-ids 1,x -n 1
bad "negative n" "$bin" run -m "$fx/llama/llama-f32.gguf" --prompt-ids 1 -n -3
bad "prompt longer than context" "$bin" run -m "$fx/llama/llama-f32.gguf" --prompt-ids "$ids" -c 8 -n 1
bad "logits without -o" "$bin" logits -m "$fx/llama/llama-f32.gguf" --prompt-ids 1
bad "logits to unwritable path" "$bin" logits -m "$fx/llama/llama-f32.gguf" --prompt-ids 1 -o /nonexistent/dir/x.f32
bad "unknown command" "$bin" frobnicate
bad "detokenize without ids" "$bin" detokenize -m "$fx/llama/llama-f32.gguf"
bad "detokenize an id outside the vocabulary" "$bin" detokenize -m "$fx/llama/llama-f32.gguf" --ids 1,512
bad "unknown option" "$bin" run -m "$fx/llama/llama-f32.gguf" --bogus
bad "bench depth not a count" "$bin" bench -m "$fx/llama/llama-f32.gguf" -d x

done_checks
