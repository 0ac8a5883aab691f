# Shared by tests/fuzz/run-ci.sh and scripts/fuzz (sourced from the repository root): the
# fuzz build and the reading of libFuzzer's logs.
# The fuzz configuration: clang, AKUNU_FUZZ (ASan + UBSan + coverage), CPU backend only.
AK_FUZZ_BUILD=${AK_FUZZ_BUILD:-build-fuzz}
AK_FUZZ_FLAGS=(-timeout=10 -rss_limit_mb=4096)
# UBSan prints no stack unless asked; options set by the caller come later and win.
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

ak_fuzz_build() {
    if ! command -v clang >/dev/null; then
        echo "fuzz: clang is not installed (libFuzzer comes with clang)" >&2
        return 1
    fi
    CC=clang cmake -S . -B "$AK_FUZZ_BUILD" -DCMAKE_BUILD_TYPE=Debug -DAKUNU_FUZZ=ON -DAKUNU_CUDA=OFF >/dev/null
    cmake --build "$AK_FUZZ_BUILD" --target fuzz -j"$(nproc)" >/dev/null
}

# Every fuzz target the build made, one path a line.
ak_fuzz_targets() {
    find "$AK_FUZZ_BUILD/tests/fuzz" -maxdepth 1 -type f -name 'fuzz_*' -perm -u+x | sort
}

# -dict=... when the target has a dictionary (tests/fuzz/<target>.dict), else nothing.
ak_fuzz_dict() {
    if [ -f "tests/fuzz/$1.dict" ]; then echo "-dict=tests/fuzz/$1.dict"; fi
}

# "execs cov ft corpus" from the last status line of a libFuzzer log
# ("#123 DONE cov: 680 ft: 1497 corp: 337/2594Kb ..."); "-" for what it lacks.
ak_fuzz_stats() {
    awk '/^#[0-9]+/ { last = $0 }
         END {
             n = split(last, w, " "); e = n ? substr(w[1], 2) : "-"; c = "-"; f = "-"; k = "-"
             for (i = 2; i < n; i++) { if (w[i] == "cov:") c = w[i + 1]; if (w[i] == "ft:") f = w[i + 1]; if (w[i] == "corp:") k = w[i + 1] }
             print e, c, f, k
         }' "$1"
}

# The input libFuzzer saved for a crash, leak, timeout or OOM ("Test unit written to PATH").
ak_fuzz_artifact() {
    awk '/Test unit written to / { p = $NF } END { print p }' "$1"
}

# The sanitizer's or libFuzzer's verdict, the first stack (without libFuzzer's own frames)
# and the summary line, for a report.
ak_fuzz_report() {
    awk '/ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|^SUMMARY:/ { print; next }
         /^ *#[0-9]+ / { if (done) next; seen = 1; if ($0 !~ /fuzzer::|libc_start|in _start|in main /) print; next }
         seen { done = 1 }' "$1" | head -n 16
}
