#!/usr/bin/env bash
# akunu's GBNF verdicts against llama.cpp's on the same grammars and strings.
#
#   bench/grammar_compare.sh [-n N] [-m M] [-s SEED] [--build-only] [GRAMMAR.gbnf ...]
#
# Grammars: llama.cpp's grammars/ folder (the vendored copy in the llama-cpp-python
# sdist) unless given. Per grammar, build/grammar_check writes N random sentences
# (ak_grammar_sample: accepted by construction) and M mutations of them (code point
# deletions, replacements, insertions, truncations, duplicated spans: valid UTF-8, which
# may or may not be sentences; default N = 50, M = 150), then gives akunu's verdict on
# each (whole string accepted: ak_gmatch_accept_bytes and ak_gmatch_can_end), and
# llama.cpp's test-gbnf-validator (llama_grammar_accept per code point, an empty stack
# at the end) gives its own. Prints agreement per grammar and every disagreement.
# llama.cpp is built in third_party/llama.cpp-gbnf (CPU only, Release, tests and
# examples on, nothing fetched; only the validator's target, niced, 2 jobs), once.
# AKUNU_BUILD=dir: build grammar_check there (default build/).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
lbuild="$root/third_party/llama.cpp-gbnf"
lval="$lbuild/bin/test-gbnf-validator"
abuild="${AKUNU_BUILD:-$root/build}"

n=50
m=150
seed=1
build_only=0
grammars=()
usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
    case "$1" in
        -n) n="$2"; shift 2 ;;
        -m) m="$2"; shift 2 ;;
        -s) seed="$2"; shift 2 ;;
        --build-only) build_only=1; shift ;;
        -h|--help) usage 0 ;;
        -*) echo "grammar_compare.sh: unknown argument $1" >&2; usage 2 >&2 ;;
        *) grammars+=("$1"); shift ;;
    esac
done
log() { echo "== $*" >&2; }

# ---- llama.cpp: tests/test-gbnf-validator (GRAMMAR INPUT: "Input string is valid ...") ----
. "$root/bench/llama-cpu.sh"
ak_llama_fetch || exit 1
if [ ! -x "$lval" ]; then
    blog="$root/third_party/llama-gbnf-build.log"
    gen=(); [ -f "$lbuild/CMakeCache.txt" ] || ! command -v ninja >/dev/null || gen=(-G Ninja)
    cmake -S "$ak_llama_src" -B "$lbuild" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
        -DGGML_NATIVE=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_BLAS=OFF \
        -DGGML_OPENMP=OFF -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=OFF \
        -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_LLGUIDANCE=OFF -DLLAMA_OPENSSL=OFF \
        -DBUILD_SHARED_LIBS=OFF >"$blog" 2>&1 || { tail -30 "$blog" >&2; exit 1; }
    log "building test-gbnf-validator (llama.cpp, CPU only; log: third_party/llama-gbnf-build.log)"
    t=$SECONDS
    nice -n 19 cmake --build "$lbuild" --target test-gbnf-validator -j2 >>"$blog" 2>&1 || { tail -30 "$blog" >&2; exit 1; }
    log "built in $((SECONDS - t)) s"
fi

# ---- akunu: grammar_check ----
cfg=(); [ -f "$abuild/CMakeCache.txt" ] || cfg=(-DCMAKE_BUILD_TYPE=Release -DAKUNU_CUDA=OFF)
cmake -S "$root" -B "$abuild" "${cfg[@]}" >/dev/null
nice -n 19 cmake --build "$abuild" --target grammar_check -j2 >/dev/null
gc="$abuild/grammar_check"
[ "$build_only" = 0 ] || exit 0

# ---- compare ----
[ ${#grammars[@]} -gt 0 ] || grammars=("$ak_llama_src"/grammars/*.gbnf)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tot=0; tot_agree=0; tot_acc=0
printf '%-16s %8s %8s %8s %8s\n' grammar strings agree "akunu ok" "llama ok"
for g in "${grammars[@]}"; do
    name="$(basename "$g" .gbnf)"
    d="$work/$name"; mkdir -p "$d"
    "$gc" gen "$g" "$n" "$m" "$seed" "$d" || { echo "$name: grammar_check gen failed" >&2; continue; }
    mapfile -t files < <(ls "$d"/*.txt)
    # akunu: "accept FILE" / "reject FILE" per file
    declare -A ak=()
    while read -r v f; do ak[$f]=$v; done < <("$gc" check "$g" "${files[@]}")
    agree=0; ak_ok=0; ll_ok=0; bad=()
    for f in "${files[@]}"; do
        if "$lval" "$g" "$f" | grep -q '^Input string is valid'; then lv=accept; else lv=reject; fi
        [ "${ak[$f]}" = accept ] && ak_ok=$((ak_ok + 1))
        [ "$lv" = accept ] && ll_ok=$((ll_ok + 1))
        if [ "${ak[$f]}" = "$lv" ]; then agree=$((agree + 1)); else bad+=("$f akunu=${ak[$f]} llama=$lv"); fi
    done
    unset ak
    printf '%-16s %8d %8d %8d %8d\n' "$name" "${#files[@]}" "$agree" "$ak_ok" "$ll_ok"
    tot=$((tot + ${#files[@]})); tot_agree=$((tot_agree + agree)); tot_acc=$((tot_acc + ak_ok))
    for b in "${bad[@]+"${bad[@]}"}"; do
        f="${b%% *}"
        printf '  DISAGREE %s %s: ' "$name/$(basename "$f")" "${b#* }"
        python3 -c 'import sys; print(repr(open(sys.argv[1], "rb").read().decode("utf-8", "replace")))' "$f"
    done
done
printf '%-16s %8d %8d\n' total "$tot" "$tot_agree"
[ "$tot" = "$tot_agree" ]
