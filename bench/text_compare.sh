#!/usr/bin/env bash
# akunu vs llama.cpp on text: perplexity and greedy generation, same files and settings.
#
#   bench/text_compare.sh [-t THREADS] [-c CTX] [-n N] [--no-ppl] [--no-greedy] [MODEL.gguf...]
#
# With no MODEL: models/SmolLM2-135M-Instruct.Q4_1.gguf and models/gemma-3-270m-q4_k_m.gguf
# (scripts/get-model all fetches them). Defaults: -t 2, -c 512, -n 32; CPU only.
# Perplexity: `akunu perplexity` and llama.cpp's llama-perplexity on tests/data/ppl/botchan.txt
# (both: non-overlapping windows of CTX tokens, second half of each scored); prints both
# figures and their relative difference. Greedy: for each prompt below, checks that both
# tokenize it to the same ids, generates N tokens greedily with both from those ids and
# compares the ids; at the first difference it prints both engines' top-2 logit margins.
# AKUNU=path uses that binary (builds nothing); AKUNU_BUILD=dir builds akunu there (build/).
# llama.cpp comes from the llama-cpp-python sdist on PyPI (vendored llama.cpp), built in
# third_party/llama.cpp-build (the same dir bench/compare.sh uses), plus a 40-line C
# helper against llama.cpp's C API that prints greedy ids (third_party/text_compare/).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
tp="$root/third_party"
lbuild="$tp/llama.cpp-build"
abuild="${AKUNU_BUILD:-$root/build}"
akunu="${AKUNU:-$abuild/akunu}"
text="$root/tests/data/ppl/botchan.txt"

threads=2
ctx=512
n_gen=32
do_ppl=1
do_greedy=1
models=()
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
    case "$1" in
        -t) threads="$2"; shift 2 ;;
        -c) ctx="$2"; shift 2 ;;
        -n) n_gen="$2"; shift 2 ;;
        --no-ppl) do_ppl=0; shift ;;
        --no-greedy) do_greedy=0; shift ;;
        -h|--help) usage 0 ;;
        -*) echo "text_compare.sh: unknown option $1" >&2; usage 2 >&2 ;;
        *) models+=("$1"); shift ;;
    esac
done
if [ ${#models[@]} -eq 0 ]; then
    for f in models/SmolLM2-135M-Instruct.Q4_1.gguf models/gemma-3-270m-q4_k_m.gguf; do
        [ -f "$f" ] || "$root/scripts/get-model" all >&2
        models+=("$f")
    done
fi
log() { echo "== $*" >&2; }

prompts=(
    "The capital of France is"
    "Once upon a time, in a small village by the sea,"
    "The three primary colors are"
    "Water boils at a temperature of"
    "def fibonacci(n):"
)

# ---- llama.cpp: llama-perplexity, llama-tokenize and the greedy helper ----
. "$root/bench/llama-cpu.sh"
ak_llama_build llama-perplexity llama-tokenize || exit 1
ak_llama_fetch || exit 1
src="$ak_llama_src"
helper="$tp/text_compare/greedy"
mkdir -p "$tp/text_compare"
cat >"$tp/text_compare/greedy.c.new" <<'EOF'
/* greedy MODEL THREADS N ID,ID,...: N greedy ids through llama.cpp's C API (CPU), comma-
 * separated on stdout; each step's top-2 logits and their margin on stderr. Stops at EOG. */
#include "llama.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void quiet(enum ggml_log_level l, const char *t, void *u) { (void)l; (void)t; (void)u; }
int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: %s MODEL THREADS N ID,ID,...\n", argv[0]); return 2; }
    int nthr = atoi(argv[2]), n = atoi(argv[3]), np = 0;
    llama_token *ids = malloc(sizeof(llama_token) * (strlen(argv[4]) + 1));
    for (char *p = argv[4]; *p;) { ids[np++] = (llama_token)strtol(p, &p, 10); if (*p == ',') p++; }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = np + n + 8; cp.n_batch = np > 512 ? np : 512;
    cp.n_threads = nthr; cp.n_threads_batch = nthr;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int nv = llama_vocab_n_tokens(vocab);
    struct llama_batch b = llama_batch_get_one(ids, np);
    llama_token tok;
    for (int i = 0; i < n; i++) {
        if (llama_decode(ctx, b)) { fprintf(stderr, "decode failed\n"); return 1; }
        const float *lg = llama_get_logits_ith(ctx, -1);
        int a = 0, s = 1;
        for (int v = 1; v < nv; v++) if (lg[v] > lg[a]) a = v;
        if (a == 1) s = 0;
        for (int v = 0; v < nv; v++) if (v != a && lg[v] > lg[s]) s = v;
        tok = a;
        printf("%s%d", i ? "," : "", tok);
        fprintf(stderr, "step %d: top1 %d %.4f top2 %d %.4f margin %.4f\n", i, a, lg[a], s, lg[s], lg[a] - lg[s]);
        if (llama_vocab_is_eog(vocab, tok)) break;
        b = llama_batch_get_one(&tok, 1);
    }
    printf("\n");
    llama_free(ctx); llama_model_free(model); llama_backend_free();
    return 0;
}
EOF
if ! cmp -s "$tp/text_compare/greedy.c.new" "$tp/text_compare/greedy.c" || [ ! -x "$helper" ] ||
   [ "$lbuild/src/libllama.a" -nt "$helper" ]; then
    mv "$tp/text_compare/greedy.c.new" "$tp/text_compare/greedy.c"
    cmake --build "$lbuild" --target llama ggml -j2 >>"$tp/llama-text-build.log" 2>&1
    libs=("$lbuild/src/libllama.a" "$lbuild/ggml/src/libggml.a" "$lbuild/ggml/src/libggml-cpu.a"
          "$lbuild/ggml/src/libggml-base.a")
    gcc -O2 "$tp/text_compare/greedy.c" -I"$src/include" -I"$src/ggml/include" -o "$helper" \
        "${libs[@]}" -lstdc++ -fopenmp -lm -lpthread
fi
rm -f "$tp/text_compare/greedy.c.new"

# ---- akunu ----
if [ -z "${AKUNU:-}" ]; then
    log "building akunu in $abuild"
    mkdir -p "$abuild"
    if ! { cmake -S "$root" -B "$abuild" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
           cmake --build "$abuild" -j2 >"$abuild/text-compare-build.log" 2>&1; }; then
        [ -x "$akunu" ] || { tail -20 "$abuild/text-compare-build.log" >&2; exit 1; }
        log "warning: building akunu failed ($abuild/text-compare-build.log); using the existing $akunu"
    fi
fi
[ -x "$akunu" ] || { echo "text_compare.sh: no akunu binary at $akunu" >&2; exit 1; }

res="$(mktemp -d)"
trap 'rm -rf "$res"' EXIT
echo "threads $threads, context $ctx, CPU only; text $(basename "$text") ($(wc -c <"$text") bytes)"

# top-2 of the last row of an akunu logits file: "top1 id val top2 id val margin m"
top2_last() {
    python3 - "$1" "$2" <<'EOF'
import array, sys
a = array.array('f'); a.frombytes(open(sys.argv[1], 'rb').read())
V = int(sys.argv[2]); r = a[len(a) - V:]
o = sorted(range(V), key=lambda i: -r[i])[:2]
print("top1 %d %.4f top2 %d %.4f margin %.4f" % (o[0], r[o[0]], o[1], r[o[1]], r[o[0]] - r[o[1]]))
EOF
}

summary=()
for m in "${models[@]}"; do
    name="$(basename "$m" .gguf)"
    echo
    echo "### $name"
    if [ "$do_ppl" = 1 ]; then
        log "$name: akunu perplexity"
        "$akunu" perplexity -m "$m" -f "$text" -c "$ctx" -t "$threads" --backend cpu >"$res/ak.ppl" 2>&1 \
            || { tail -5 "$res/ak.ppl"; exit 1; }
        log "$name: llama-perplexity"
        "$lbuild/bin/llama-perplexity" -m "$m" -f "$text" -c "$ctx" -t "$threads" -tb "$threads" -ngl 0 \
            >"$res/ll.ppl" 2>&1 || { tail -5 "$res/ll.ppl"; exit 1; }
        ak="$(tr '\r' '\n' <"$res/ak.ppl" | sed -n 's/^PPL = \([0-9.]*\) +\/- \([0-9.]*\).*/\1 \2/p' | tail -1)"
        ll="$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\).*/\1 \2/p' "$res/ll.ppl" | tail -1)"
        nch="$(sed -n 's/.*calculating perplexity over \([0-9]*\) chunks.*/\1/p' "$res/ll.ppl")"
        line="$(python3 -c 'import sys; a,ae,l,le=map(float,sys.argv[1:5]); print("PPL akunu %.4f +/- %.4f | llama.cpp %.4f +/- %.4f | diff %+.2f %%" % (a,ae,l,le,100*(a-l)/l))' $ak $ll)"
        echo "perplexity ($nch windows of $ctx): $line"
        summary+=("$name: $line")
    fi
    if [ "$do_greedy" = 1 ]; then
        i=0
        for p in "${prompts[@]}"; do
            i=$((i + 1))
            ids="$("$akunu" tokenize -m "$m" -p "$p")"
            lids="$("$lbuild/bin/llama-tokenize" -m "$m" -p "$p" --ids --log-disable 2>/dev/null | tr -d '[] \n')"
            tokmatch="same ids"; [ "$ids" = "$lids" ] || tokmatch="TOKENS DIFFER (llama.cpp: $lids)"
            a="$("$akunu" run -m "$m" --prompt-ids "$ids" -n "$n_gen" --greedy --print-ids -t "$threads" --backend cpu 2>/dev/null | tail -1)"
            l="$("$helper" "$m" "$threads" "$n_gen" "$ids" 2>"$res/ll.steps" | tail -1)"
            IFS=, read -ra A <<<"$a"
            IFS=, read -ra L <<<"$l"
            k=0
            while [ $k -lt ${#A[@]} ] && [ $k -lt ${#L[@]} ] && [ "${A[$k]}" = "${L[$k]}" ]; do k=$((k + 1)); done
            printf 'prompt %d %q: %d ids (%s)\n' "$i" "$p" "$(tr ',' '\n' <<<"$ids" | wc -l)" "$tokmatch"
            if [ $k -eq ${#A[@]} ] && [ $k -eq ${#L[@]} ]; then
                echo "  greedy: MATCH, all ${#A[@]} ids identical"
                summary+=("$name prompt $i: match ${#A[@]}/${#A[@]}")
            else
                echo "  greedy: first $k ids identical; differ at step $k: akunu ${A[$k]:-<end>}, llama.cpp ${L[$k]:-<end>}"
                echo "  akunu:     $a"
                echo "  llama.cpp: $l"
                echo "  llama.cpp at step $k: $(sed -n "$((k + 1))p" "$res/ll.steps" | cut -d: -f2-)"
                pre="$ids"; for ((j = 0; j < k; j++)); do pre="$pre,${A[$j]}"; done
                for mode in prefill decode; do
                    fl=(); [ $mode = decode ] && fl=(--decode)
                    "$akunu" logits -m "$m" --prompt-ids "$pre" -o "$res/lg.f32" -t "$threads" --backend cpu "${fl[@]}" >/dev/null 2>&1
                    nv=$(( $(stat -c %s "$res/lg.f32") / 4 / $(tr ',' '\n' <<<"$pre" | wc -l) ))
                    echo "  akunu logits ($mode) at step $k: $(top2_last "$res/lg.f32" "$nv")"
                done
                summary+=("$name prompt $i: first $k/$n_gen match")
            fi
        done
    fi
done
echo
echo "### summary"
printf '%s\n' "${summary[@]}"
