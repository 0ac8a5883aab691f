# The shell tests' harness (sourced): a scratch folder, check NAME 'CONDITION' (recorded,
# the run goes on), bad NAME COMMAND... (non-zero exit below 128, a message on stderr),
# and done (the tally; fails when a check did).
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0 checks=0
check() { checks=$((checks+1)); if ! eval "$2"; then echo "FAIL: $1"; fail=$((fail+1)); fi; }
bad() {
  local what=$1; shift
  "$@" >"$tmp/o" 2>"$tmp/e"; local rc=$?
  check "$what: exits non-zero (rc=$rc)" '[ $rc -ne 0 ] && [ $rc -lt 128 ]'
  check "$what: says why" '[ -s "$tmp/e" ]'
}
done_checks() { echo "$((checks-fail)) passed, $fail failed"; [ $fail -eq 0 ]; }
