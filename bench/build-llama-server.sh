#!/usr/bin/env bash
# Builds llama.cpp's llama-server (and llama-bench) for bench/serve_bench.py: CPU only,
# -march=native, Release, static, no web UI, no OpenSSL, nothing fetched at build time.
#
#   bench/build-llama-server.sh          third_party/llama.cpp-build/bin/llama-server
#
# llama.cpp comes from the llama-cpp-python sdist on PyPI (it vendors llama.cpp), in
# third_party/ as bench/compare.sh takes it (downloaded once); the build dir is the one
# compare.sh uses, configured with the server on, so compare.sh finds its llama-bench too.
# About 6 minutes on 2 idle cores; log in third_party/llama-server-build.log.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tp="$root/third_party"
lbuild="$tp/llama.cpp-build"
mkdir -p "$tp/dl"
src="$(ls -d "$tp"/llama_cpp_python-*/ 2>/dev/null | sort -V | tail -1 || true)"
if [ -z "$src" ] || [ ! -f "$src/vendor/llama.cpp/CMakeLists.txt" ]; then
    sdist="$(ls "$tp"/dl/llama_cpp_python-*.tar.gz 2>/dev/null | sort -V | tail -1 || true)"
    if [ -z "$sdist" ]; then
        echo "== downloading the llama-cpp-python sdist" >&2
        python3 -m pip download --quiet --no-deps --no-binary :all: llama-cpp-python -d "$tp/dl" >&2
        sdist="$(ls "$tp"/dl/llama_cpp_python-*.tar.gz | sort -V | tail -1)"
    fi
    tar -xzmf "$sdist" -C "$tp"   # -m: fresh mtimes, or the build may think it is stale
    src="$tp/$(basename "$sdist" .tar.gz)"
fi
rm -f "$src/vendor/llama.cpp/.git"   # points at a submodule dir the sdist lacks (see compare.sh)
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
echo "== building llama-server from $(basename "$src") in third_party/llama.cpp-build" >&2
cmake -S "$src/vendor/llama.cpp" -B "$lbuild" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_BLAS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DBUILD_SHARED_LIBS=OFF >"$tp/llama-server-build.log" 2>&1 \
    || { tail -30 "$tp/llama-server-build.log" >&2; exit 1; }
cmake --build "$lbuild" --target llama-server llama-bench -j2 >>"$tp/llama-server-build.log" 2>&1 \
    || { tail -30 "$tp/llama-server-build.log" >&2; exit 1; }
echo "$lbuild/bin/llama-server"
