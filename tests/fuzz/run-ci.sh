#!/usr/bin/env bash
# CI fuzzing: builds the libFuzzer targets (clang, ASan + UBSan, in build-fuzz/), replays
# every input in tests/fuzz/regress/<target>/, then fuzzes each target for SECONDS from a
# copy of tests/fuzz/corpus/<target>/ (the tree is not changed). Exits non-zero on any
# crash, leak, timeout or out-of-memory, naming the input that reproduces it.
#     tests/fuzz/run-ci.sh [SECONDS]      (default 30, or $AKUNU_FUZZ_SECONDS)
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/fuzz/common.sh
secs=${1:-${AKUNU_FUZZ_SECONDS:-30}}
start=$SECONDS
ak_fuzz_build
echo "fuzz: built in $((SECONDS - start)) s; $secs s per target"
work=$AK_FUZZ_BUILD/ci
rm -rf "$work"
fail=0
rows=()
for bin in $(ak_fuzz_targets); do
    t=$(basename "$bin")
    mkdir -p "$work/$t/corpus" "$work/$t/artifacts"
    n_reg=0
    result=ok
    for f in tests/fuzz/regress/"$t"/*; do
        [ -f "$f" ] || continue
        n_reg=$((n_reg + 1))
        if ! "$bin" "${AK_FUZZ_FLAGS[@]}" "$f" >"$work/$t/regress.log" 2>&1; then
            echo "FAIL $t: regression input $f"
            echo "  reproduce: $bin $f"
            ak_fuzz_report "$work/$t/regress.log" | sed 's/^/  /'
            result=FAIL
            fail=1
        fi
    done
    cp -r tests/fuzz/corpus/"$t"/. "$work/$t/corpus/"
    if ! "$bin" "${AK_FUZZ_FLAGS[@]}" -max_total_time="$secs" $(ak_fuzz_dict "$t") \
            -artifact_prefix="$work/$t/artifacts/" "$work/$t/corpus" >"$work/$t/fuzz.log" 2>&1; then
        result=FAIL
        repro=$(ak_fuzz_artifact "$work/$t/fuzz.log")
        echo "FAIL $t: fuzzing found a crash, leak, timeout or OOM (log: $work/$t/fuzz.log)"
        echo "  reproducer: ${repro:-none saved}"
        echo "  reproduce: $bin ${repro:-}"
        ak_fuzz_report "$work/$t/fuzz.log" | sed 's/^/  /'
        fail=1
    fi
    rows+=("$t $n_reg $(ak_fuzz_stats "$work/$t/fuzz.log") $result")
done
for d in tests/fuzz/regress/*/; do
    [ -d "$d" ] || continue
    t=$(basename "$d")
    [ -x "$AK_FUZZ_BUILD/tests/fuzz/$t" ] || echo "note: tests/fuzz/regress/$t/ has no target yet (not replayed)"
done
if [ ${#rows[@]} -eq 0 ]; then
    echo "fuzz: no fuzz_* target was built" >&2
    exit 1
fi
printf '%-18s %7s %10s %6s %6s %14s %s\n' target regress execs cov ft corpus result
for r in "${rows[@]}"; do printf '%-18s %7s %10s %6s %6s %14s %s\n' $r; done
echo "fuzz: $((SECONDS - start)) s in all"
exit $fail
