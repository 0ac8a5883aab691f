# Sourced by the CPU comparisons (compare.sh, text_compare.sh, tokenize_compare.sh,
# build-llama-server.sh): llama.cpp from PyPI's llama-cpp-python sdist (it vendors
# llama.cpp), downloaded and unpacked into third_party/ once, configured once in
# third_party/llama.cpp-build (CPU only, -march=native, Release, static; the server's
# target without OpenSSL or the web UI, nothing fetched at build time), and
#     ak_llama_build TARGET...
# builds those of the targets that are missing (llama-bench, llama-tokenize,
# llama-perplexity, llama-server, the llama-speculative and llama-lookup examples, ...;
# a few minutes on 2 cores for the first).
# Needs $root (the repository). Sets ak_llama_dir (the build folder) and ak_llama_src.
ak_llama_dir="$root/third_party/llama.cpp-build"

# The vendored llama.cpp source folder, downloaded and unpacked if absent.
ak_llama_fetch() {
    local tp="$root/third_party" sdist
    ak_llama_src="$(ls -d "$tp"/llama_cpp_python-*/vendor/llama.cpp 2>/dev/null | sort -V | tail -1 || true)"
    if [ -z "$ak_llama_src" ]; then
        mkdir -p "$tp/dl"
        sdist="$(ls "$tp"/dl/llama_cpp_python-*.tar.gz 2>/dev/null | sort -V | tail -1 || true)"
        if [ -z "$sdist" ]; then
            echo "== downloading the llama-cpp-python sdist" >&2
            python3 -m pip download --quiet --no-deps --no-binary :all: llama-cpp-python -d "$tp/dl" >&2 || return 1
            sdist="$(ls "$tp"/dl/llama_cpp_python-*.tar.gz | sort -V | tail -1)"
        fi
        tar -xzmf "$sdist" -C "$tp" || return 1   # -m: fresh mtimes, or the build may think it is stale
        ak_llama_src="$tp/$(basename "$sdist" .tar.gz)/vendor/llama.cpp"
    fi
    # The sdist keeps a .git file pointing at a submodule folder it does not ship;
    # llama.cpp's CMake then depends on a missing file and reconfigures forever.
    rm -f "$ak_llama_src/.git"
}

ak_llama_build() {
    local need=() t log="$root/third_party/llama-build.log" gen=()
    for t in "$@"; do [ -x "$ak_llama_dir/bin/$t" ] || need+=("$t"); done
    [ ${#need[@]} -gt 0 ] || return 0
    ak_llama_fetch || return 1
    # (re)configured whenever something is built: a folder an older script configured
    # without the server gets its target; with these flags again it is quick
    [ -f "$ak_llama_dir/build.ninja" ] || [ -f "$ak_llama_dir/Makefile" ] || { command -v ninja >/dev/null && gen=(-G Ninja); }
    cmake -S "$ak_llama_src" -B "$ak_llama_dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
        -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_BLAS=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON \
        -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
        -DBUILD_SHARED_LIBS=OFF >"$log" 2>&1 || { tail -30 "$log" >&2; return 1; }
    echo "== building ${need[*]} (llama.cpp, CPU only, -march=native; log: third_party/llama-build.log)" >&2
    t=$SECONDS
    cmake --build "$ak_llama_dir" --target "${need[@]}" -j2 >>"$log" 2>&1 || { tail -30 "$log" >&2; return 1; }
    echo "== built in $((SECONDS - t)) s" >&2
}
