#!/usr/bin/env bash
# The installed library alone: `cmake --install` into a temporary prefix, then
# examples/simple.c built against it twice, with pkg-config (the shared library) and
# with find_package(akunu) (the static one), and each answers a question with the same
# greedy text as `akunu run --greedy`.
#   test_install.sh BUILD_DIR SOURCE_DIR AKUNU_BIN MODEL [EXTRA_CFLAGS]
set -u
build=$1 src=$2 bin=$3 model=$4 cflags=${5:-}
. "$(dirname "$0")/../cli/checks.sh"
q="What is the capital of France?"

[ -f "$model" ] || { echo "FAIL: $model missing: run scripts/get-model"; exit 1; }
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
check "akunu.h installed" '[ -f "$tmp/prefix/include/akunu.h" ]'
lib=$(ls -d "$tmp"/prefix/lib*/pkgconfig | head -1)
export PKG_CONFIG_PATH=$lib

# pkg-config, shared library
# shellcheck disable=SC2046,SC2086
cc -std=c11 -Wall -Wextra -Werror $cflags "$src/examples/simple.c" $(pkg-config --cflags --libs akunu) -o "$tmp/simple-pc"
check "simple.c builds with pkg-config --cflags --libs akunu" '[ -x "$tmp/simple-pc" ]'
check "it links the shared library" 'ldd "$tmp/simple-pc" | grep -q "libakunu.so"'
libdir=$(pkg-config --variable=libdir akunu)
LD_LIBRARY_PATH=$libdir "$tmp/simple-pc" "$model" "$q" > "$tmp/a.txt" 2> "$tmp/a.err"
"$bin" run -m "$model" -p "$q" --greedy -n 512 > "$tmp/b.txt" 2> "$tmp/b.err"
check "simple (pkg-config) answers like akunu run --greedy: '$(head -c 200 "$tmp/a.txt")' vs '$(head -c 200 "$tmp/b.txt")'" \
      'cmp -s "$tmp/a.txt" "$tmp/b.txt" && [ -s "$tmp/a.txt" ]'

# find_package, static library
mkdir -p "$tmp/proj"
cat > "$tmp/proj/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.20)
project(uses_akunu C)
find_package(akunu REQUIRED)
add_executable(simple $src/examples/simple.c)
target_link_libraries(simple PRIVATE akunu::akunu_static)
CM
cmake -S "$tmp/proj" -B "$tmp/proj/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_C_FLAGS="$cflags" >/dev/null 2>"$tmp/cm.err" &&
    cmake --build "$tmp/proj/build" >/dev/null 2>>"$tmp/cm.err"
check "simple.c builds with find_package(akunu): $(tail -3 "$tmp/cm.err")" '[ -x "$tmp/proj/build/simple" ]'
check "it links no shared akunu" '! ldd "$tmp/proj/build/simple" | grep -q "libakunu.so"'
"$tmp/proj/build/simple" "$model" "$q" > "$tmp/c.txt" 2> "$tmp/c.err"
check "simple (find_package) answers the same" 'cmp -s "$tmp/c.txt" "$tmp/b.txt"'

done_checks
