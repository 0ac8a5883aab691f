#!/usr/bin/env python3
"""A stand-in for `akunu serve` (Python stdlib only): serves src/server/page.html at /,
GET /health, GET /v1/models and POST /v1/chat/completions, streaming a fixed Markdown reply
token by token as Server-Sent Events, so the page and its browser test run without a model.

The stream is deliberately awkward for the client: some events are cut in two (mid UTF-8
sequence too) and written apart, some are packed several to a write. The request is checked
the way the page must send it (messages, stream, stream_options.include_usage).

A last user message containing [error] gets an HTTP 400 with an OpenAI error object;
[stream-error] gets a few tokens and then an error event; [slow] streams at 60 ms a token.

Usage: mock_server.py [--port N] [--delay SECONDS] [--page PATH]
The chosen port (bind to 0 by default: a free one) is printed alone on the first line.
"""
import argparse
import json
import os
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "mock-model-q4"
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PAGE = os.path.join(HERE, "..", "..", "src", "server", "page.html")

REPLY = """You asked: **{question}**

Here is a short answer with *emphasis*, ~~struck~~, `inline code`, a [link](https://example.com/docs?a=1&b=2) and unicode: café, naïve, Ελληνικά, ✓.

## Example

```python
def greet(name):
    # <b>not bold</b> & not a tag
    return f"Hello, {{name}}!"
```

- First point
- Second point with **bold** and snake_case_name
  - a nested item
1. one
2. two

> A quoted line.

| col | value |
| --- | ---: |
| a | 1 |

This line must stay text: <script>alert(1)</script>
And so must this: <img src=x onerror="alert(2)"> [bad](javascript:alert(3))

The capital of France is Paris."""


def tokens(text):
    """Splits text into small pieces roughly the size of model tokens."""
    return re.findall(r"\s*\S{1,4}|\s+", text)


class Handler(BaseHTTPRequestHandler):
    server_version = "akunu-mock/1"
    disable_nagle_algorithm = True  # so a split event really leaves in two pieces

    def log_message(self, fmt, *args):
        sys.stderr.write("mock: " + (fmt % args) + "\n")

    def send_json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_error_json(self, status, message, kind="invalid_request_error"):
        self.send_json(status, {"error": {"message": message, "type": kind, "code": None}})

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path in ("/", "/index.html"):
            with open(self.server.page, "rb") as f:
                body = f.read()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)
        elif path == "/health":
            self.send_json(200, {"status": "ok"})
        elif path == "/v1/models":
            self.send_json(200, {"object": "list", "data": [
                {"id": MODEL, "object": "model", "created": 1700000000, "owned_by": "akunu"}]})
        else:
            self.send_error_json(404, "no route for GET " + path, "not_found")

    def do_POST(self):
        if self.path.split("?", 1)[0] != "/v1/chat/completions":
            self.send_error_json(404, "no route for POST " + self.path, "not_found")
            return
        try:
            n = int(self.headers.get("Content-Length", "0"))
            req = json.loads(self.rfile.read(n) or b"null")
        except (ValueError, json.JSONDecodeError) as e:
            self.send_error_json(400, "request body is not JSON: %s" % e)
            return
        problem = check_request(req)
        if problem:
            self.send_error_json(400, problem)
            return
        question = req["messages"][-1]["content"]
        if "[error]" in question:
            self.send_error_json(400, "mock error: the model refused this request")
            return
        pieces = tokens(REPLY.format(question=question))
        finish = "stop"
        limit = req.get("max_tokens")
        if isinstance(limit, int) and 0 < limit < len(pieces):
            pieces, finish = pieces[:limit], "length"
        if req.get("stream"):
            delay = 0.06 if "[slow]" in question else self.server.delay
            self.stream(pieces, finish, "[stream-error]" in question, delay)
        else:
            self.send_json(200, {
                "id": "chatcmpl-mock", "object": "chat.completion", "created": int(time.time()),
                "model": MODEL, "choices": [{"index": 0, "finish_reason": finish,
                    "message": {"role": "assistant", "content": "".join(pieces)}}],
                "usage": usage(len(pieces))})

    def stream(self, pieces, finish, fail_midway, delay):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        created = int(time.time())

        def event(delta, finish_reason=None, **extra):
            chunk = {"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": created,
                     "model": MODEL, "choices": [{"index": 0, "delta": delta,
                                                  "finish_reason": finish_reason}]}
            chunk.update(extra)
            return ("data: " + json.dumps(chunk, ensure_ascii=False) + "\n\n").encode()

        try:
            self.wfile.write(event({"role": "assistant", "content": ""}))
            pending = b""
            for i, piece in enumerate(pieces):
                if fail_midway and i == 5:
                    self.wfile.write(b'data: {"error":{"message":"mock error: generation failed '
                                     b'midway","type":"server_error"}}\n\n')
                    return
                ev = event({"content": piece})
                if i % 7 == 3:
                    # Cut the event in two (anywhere, so sometimes inside a UTF-8 sequence).
                    cut = len(ev) // 2
                    self.wfile.write(pending + ev[:cut])
                    pending = b""
                    time.sleep(delay)
                    self.wfile.write(ev[cut:])
                elif i % 5 == 1:
                    pending += ev  # goes out together with the next event
                    continue
                else:
                    self.wfile.write(pending + ev)
                    pending = b""
                time.sleep(delay)
            self.wfile.write(pending + event({}, finish))
            # With stream_options.include_usage, OpenAI sends usage in a last chunk with no choices.
            self.wfile.write(("data: " + json.dumps({
                "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": created,
                "model": MODEL, "choices": [], "usage": usage(len(pieces))}) + "\n\n").encode())
            self.wfile.write(b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client pressed Stop


def usage(n):
    return {"prompt_tokens": 12, "completion_tokens": n, "total_tokens": 12 + n}


def check_request(req):
    """Returns what is wrong with a chat request, or None."""
    if not isinstance(req, dict):
        return "the body must be a JSON object"
    msgs = req.get("messages")
    if not isinstance(msgs, list) or not msgs:
        return "messages must be a non-empty array"
    for m in msgs:
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant") \
                or not isinstance(m.get("content"), str):
            return "each message needs a role (system, user, assistant) and string content"
    turns = [m["role"] for m in msgs if m["role"] != "system"]
    if any(r != ("user", "assistant")[k % 2] for k, r in enumerate(turns)) or turns[-1] != "user":
        return "the turns must alternate user, assistant, ..., user (got %s)" % ", ".join(turns)
    if req.get("stream") is True and (req.get("stream_options") or {}).get("include_usage") is not True:
        return "the page must ask for stream_options.include_usage"
    for key, lo, hi in (("temperature", 0, 2), ("max_tokens", 1, 1 << 20)):
        if key in req and not (isinstance(req[key], (int, float)) and lo <= req[key] <= hi):
            return "%s out of range" % key
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--delay", type=float, default=0.008, help="seconds between tokens")
    ap.add_argument("--page", default=DEFAULT_PAGE)
    args = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    srv.daemon_threads = True
    srv.page = args.page
    srv.delay = args.delay
    print(srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
