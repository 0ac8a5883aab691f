#!/usr/bin/env bash
# Builds llama.cpp's llama-server (and llama-bench) for bench/serve_bench.py: CPU only,
# -march=native, Release, static, no web UI, no OpenSSL, nothing fetched at build time.
#
#   bench/build-llama-server.sh          third_party/llama.cpp-build/bin/llama-server
#
# llama.cpp comes from the llama-cpp-python sdist on PyPI (it vendors llama.cpp), in
# third_party/ as bench/compare.sh takes it (downloaded once); the build dir is the one
# compare.sh uses, configured with the server on, so compare.sh finds its llama-bench too.
# About 6 minutes on 2 idle cores (bench/llama-cpu.sh; log: third_party/llama-build.log).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/bench/llama-cpu.sh"
ak_llama_build llama-server llama-bench
echo "$ak_llama_dir/bin/llama-server"
