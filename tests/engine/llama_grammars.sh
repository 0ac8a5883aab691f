#!/usr/bin/env bash
# llama.cpp's grammars/ folder for test_grammar: the llama-cpp-python sdist from PyPI
# (bench/llama-cpu.sh's ak_llama_fetch: downloaded and unpacked into third_party/ once),
# linked as DIR (the files stay out of the tree).
#     tests/engine/llama_grammars.sh DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
. "$root/bench/llama-cpu.sh"
ak_llama_fetch
[ -d "$ak_llama_src/grammars" ] || { echo "no grammars/ in $ak_llama_src" >&2; exit 1; }
rm -rf "$1"
ln -s "$ak_llama_src/grammars" "$1"
echo "llama.cpp grammars: $1 -> $ak_llama_src/grammars"
