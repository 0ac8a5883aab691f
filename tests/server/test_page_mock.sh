#!/usr/bin/env bash
# The chat page against the mock server in headless chromium: a streamed Markdown reply
# (rendered, HTML in it kept as text, timing shown), errors shown in the chat, the controls.
# Usage: test_page_mock.sh [SCREENSHOT.png]   (default: $TMPDIR/akunu-page.png)
# Needs python3 and Debian's chromium (apt-get install -y chromium).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
shot="${1:-${TMPDIR:-/tmp}/akunu-page.png}"
work="$(mktemp -d)"
server="" child=""
cleanup() {
    # The browser test first: on TERM it kills its chromium before exiting.
    for pid in $child $server; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

python3 "$here/mock_server.py" --port 0 >"$work/port" 2>"$work/server.log" &
server=$!
for _ in $(seq 100); do                     # the server prints its port once it is bound
    [ -s "$work/port" ] && break
    kill -0 "$server" 2>/dev/null || { echo "mock server died:"; cat "$work/server.log"; exit 1; }
    sleep 0.1
done
port="$(head -n1 "$work/port")"
[ -n "$port" ] || { echo "mock server did not report its port"; cat "$work/server.log"; exit 1; }
base="http://127.0.0.1:$port"

passed=0 failed=0
# Runs browser_test.py in the background and waits: a signal then reaches the traps at once
# (bash runs traps only after a foreground child ends).
browser_test() {
    python3 "$here/${script:-browser_test.py}" "$base" "$@" &
    child=$!
    if wait "$child"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
    child=""
}
# A streamed reply: rendered Markdown, the HTML in it shown as text, the timing line.
browser_test "What is the capital of France?" "The capital of France is Paris." "$shot" \
    --expect "You asked: What is the capital of France?" \
    --expect "<script>alert(1)</script>" --expect '<img src=x onerror="alert(2)">' \
    --expect 'return f"Hello, {name}!"'
# The server's error object, shown in the chat; then one that arrives mid-stream.
browser_test "please fail [error]" "mock error: the model refused this request (HTTP 400" \
    "$work/error.png" --expect-state error
browser_test "fail midway [stream-error]" "mock error: generation failed midway" \
    "$work/error2.png" --expect-state error
# The controls: Shift+Enter, Enter, Stop mid-stream, a second turn, copy, New chat.
script=interact_test.py browser_test "$work/interact.png"

if [ "$failed" -ne 0 ]; then echo "--- mock server log"; tail -n 30 "$work/server.log"; fi
echo "test_page_mock: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
