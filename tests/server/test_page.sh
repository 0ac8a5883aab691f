#!/usr/bin/env bash
# The chat page against the real server in headless chromium: akunu serve with the default
# model (Qwen2.5-Coder-0.5B), the page asks "What is the capital of France?" greedily, the
# answer streams in and names Paris; a screenshot is kept. Then the page's own tests
# against the mock server (controls, errors, hostile Markdown).
#   test_page.sh AKUNU_BIN MODEL [SCREENSHOT]
set -u
bin=$1 model=$2 shot=${3:-$(mktemp -u /tmp/akunu-page-XXXX.png)}
here=$(cd "$(dirname "$0")" && pwd)
log=$(mktemp)
"$bin" serve -m "$model" --port 0 -t 2 2>"$log" &
srv=$!
trap 'kill -TERM $srv 2>/dev/null; wait $srv 2>/dev/null; rm -f "$log"' EXIT
port=
for _ in $(seq 600); do
    port=$(sed -nE 's/.*listening on http:\/\/[^:]+:([0-9]+).*/\1/p' "$log")
    grep -q "ready:" "$log" && break
    kill -0 $srv 2>/dev/null || break
    sleep 0.1
done
grep -q "ready:" "$log" || { echo "FAIL: the server did not start"; cat "$log"; exit 1; }
python3 "$here/browser_test.py" "http://127.0.0.1:$port" "What is the capital of France?" Paris "$shot" --temperature 0 --timeout 300
rc=$?
echo "screenshot: $shot"
[ $rc -eq 0 ] || exit $rc
bash "$here/test_page_mock.sh"
