#!/usr/bin/env python3
"""Browser test of akunu serve's chat page: drives headless Debian `chromium` over the
DevTools protocol (stdlib only: a minimal RFC 6455 websocket client is below).

    browser_test.py BASE_URL QUESTION EXPECTED_SUBSTRING SCREENSHOT.png [options]

Loads BASE_URL/?q=QUESTION (the page sends it), waits (bounded) until body[data-state] is
"done", then checks: EXPECTED_SUBSTRING is in the reply's text; the reply's rendering holds
only the elements the page's Markdown renderer writes (no <script>, <img>, on* attribute or
javascript: link became live) and no alert() ran; no JS exception or console.error; the
timing line (TTFT) is shown. Saves a PNG screenshot either way. Chromium is always killed.
Exit status: 0 pass, 1 fail, 2 bad usage or no chromium.

Options: --expect TEXT (more text the reply must contain, repeatable), --expect-state error
(the reply must fail; EXPECTED_SUBSTRING is looked for in the error shown), --width/--height
(viewport; below 600 emulates a phone), --dark, --timeout SECONDS (default 120).
"""
import argparse
import base64
import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request


class Fail(Exception):
    pass


# ---------------------------------------------------------------------------------------
# A minimal websocket client (RFC 6455): the client side of the handshake, masked text
# frames out, text/binary/continuation/ping/close frames in. Enough for DevTools.
# ---------------------------------------------------------------------------------------
class WebSocket:
    GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    def __init__(self, url, timeout=30):
        u = urllib.parse.urlparse(url)
        if u.scheme != "ws":
            raise Fail("only ws:// URLs are supported: " + url)
        self.sock = socket.create_connection((u.hostname, u.port or 80), timeout=timeout)
        key = base64.b64encode(os.urandom(16))
        # No Origin header: DevTools refuses websocket origins it was not told to allow.
        req = ("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
               % (u.path or "/", u.hostname, u.port or 80, key.decode()))
        self.sock.sendall(req.encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            data = self.sock.recv(4096)
            if not data:
                raise Fail("websocket handshake: connection closed")
            self.buf += data
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        if " 101 " not in lines[0] + " ":
            raise Fail("websocket handshake refused: " + lines[0])
        headers = {k.strip().lower(): v.strip() for k, v in
                   (line.split(":", 1) for line in lines[1:] if ":" in line)}
        accept = base64.b64encode(hashlib.sha1(key + self.GUID).digest()).decode()
        if headers.get("sec-websocket-accept") != accept:
            raise Fail("websocket handshake: bad Sec-WebSocket-Accept")

    def _send_frame(self, opcode, payload):
        head = bytes([0x80 | opcode])                     # FIN + opcode
        n = len(payload)
        if n < 126:
            head += bytes([0x80 | n])                     # MASK bit: clients must mask
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        # XOR with the 4-byte mask repeated, done as one big integer for speed.
        m = (mask * (n // 4 + 1))[:n]
        masked = (int.from_bytes(payload, "big") ^ int.from_bytes(m, "big")).to_bytes(n, "big")
        self.sock.sendall(head + mask + masked)

    def send_text(self, text):
        self._send_frame(0x1, text.encode())

    def _read(self, n):
        while len(self.buf) < n:
            data = self.sock.recv(max(65536, n - len(self.buf)))
            if not data:
                raise Fail("DevTools connection closed")
            self.buf += data
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self, timeout):
        """Returns the next text message; raises socket.timeout when none comes in time."""
        self.sock.settimeout(timeout)
        parts = []
        while True:
            b0, b1 = self._read(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            payload = self._read(n)
            if mask:
                payload = bytes(c ^ mask[i % 4] for i, c in enumerate(payload))
            if opcode == 0x8:
                raise Fail("DevTools closed the websocket")
            if opcode == 0x9:
                self._send_frame(0xA, payload)            # ping -> pong
                continue
            if opcode == 0xA:
                continue
            parts.append(payload)                         # 0x1/0x2 start, 0x0 continues
            if b0 & 0x80:
                return b"".join(parts).decode("utf-8")

    def close(self):
        try:
            self._send_frame(0x8, b"")
        except OSError:
            pass
        self.sock.close()


# ---------------------------------------------------------------------------------------
# DevTools protocol over one page target.
# ---------------------------------------------------------------------------------------
class DevTools:
    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0
        self.exceptions = []      # uncaught JS errors and console.error calls
        self.dialogs = []         # alert()/confirm()/prompt() dialogs that opened

    def _event(self, msg):
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            desc = (d.get("exception") or {}).get("description") or d.get("text", "")
            self.exceptions.append("exception: %s (line %s)" % (desc, d.get("lineNumber")))
        elif method == "Runtime.consoleAPICalled" and p.get("type") == "error":
            args = [a.get("value", a.get("description", "")) for a in p.get("args", [])]
            self.exceptions.append("console.error: " + " ".join(map(str, args)))
        elif method == "Page.javascriptDialogOpening":
            self.dialogs.append(p.get("message", ""))
            self.send("Page.handleJavaScriptDialog", {"accept": False})

    def send(self, method, params=None):
        self.next_id += 1
        self.ws.send_text(json.dumps({"id": self.next_id, "method": method, "params": params or {}}))
        return self.next_id

    def call(self, method, params=None, timeout=30):
        want = self.send(method, params)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Fail("DevTools: no answer to %s in %d s" % (method, timeout))
            try:
                msg = json.loads(self.ws.recv(left))
            except socket.timeout:
                continue
            if msg.get("id") == want:
                if "error" in msg:
                    raise Fail("DevTools: %s failed: %s" % (method, msg["error"].get("message")))
                return msg.get("result", {})
            if "method" in msg:
                self._event(msg)

    def eval(self, expr, timeout=30):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True}, timeout)
        if "exceptionDetails" in r:
            raise Fail("evaluating %r threw: %s" % (expr[:60], r["exceptionDetails"].get("text")))
        return r["result"].get("value")


# ---------------------------------------------------------------------------------------
# Chromium: started in its own process group so that it and all its children go together.
# ---------------------------------------------------------------------------------------
class Chromium:
    def __init__(self, binary, width, height):
        self.profile = tempfile.mkdtemp(prefix="akunu-browser-test-")
        self.log_path = os.path.join(self.profile, "chromium.log")
        args = [binary, "--headless=new", "--remote-debugging-port=0",
                "--user-data-dir=" + self.profile, "--no-first-run", "--no-default-browser-check",
                "--disable-gpu", "--disable-extensions", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-default-apps",
                "--metrics-recording-only", "--mute-audio", "--hide-scrollbars",
                "--password-store=basic", "--use-mock-keychain", "--disable-breakpad",
                "--disable-crash-reporter",
                "--window-size=%d,%d" % (width, height)]
        # Chromium refuses to start as root with its sandbox on (it needs a user namespace
        # or a setuid helper); as another user the sandbox stays.
        if os.geteuid() == 0:
            args.append("--no-sandbox")
        args.append("about:blank")
        # Its config and cache (crash reports too) go under the profile, not into $HOME.
        env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(self.profile, "config"),
                   XDG_CACHE_HOME=os.path.join(self.profile, "cache"))
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.log, env=env,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def devtools_port(self, timeout):
        """Chromium writes the port it bound (we asked for 0) to DevToolsActivePort."""
        path = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Fail("chromium exited (status %d) at start:\n%s" % (self.proc.returncode, self.log_tail()))
            try:
                with open(path) as f:
                    first = f.readline().strip()
                if first.isdigit():
                    return int(first)
            except FileNotFoundError:
                pass
            time.sleep(0.1)
        raise Fail("chromium did not open its DevTools port in %d s:\n%s" % (timeout, self.log_tail()))

    def log_tail(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-2000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self):
        """Kills chromium's process group (browser, zygotes, renderers), then any process
        that names our profile directory (a crash handler runs in a session of its own),
        and removes the profile."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)     # stragglers in the group
        except ProcessLookupError:
            pass
        if self.proc.poll() is None:
            self.proc.wait()
        for pid in self.pids_with_profile():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def pids_with_profile(self):
        marker = self.profile.encode()
        pids = []
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open("/proc/%s/cmdline" % d, "rb") as f:
                        if marker in f.read():
                            pids.append(int(d))
                except OSError:
                    pass
        return pids


def http_json(url, method="GET", timeout=10):
    req = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def page_websocket(port):
    for target in http_json("http://127.0.0.1:%d/json/list" % port):
        if target.get("type") == "page" and target.get("webSocketDebuggerUrl"):
            return target["webSocketDebuggerUrl"]
    return http_json("http://127.0.0.1:%d/json/new?about:blank" % port, "PUT")["webSocketDebuggerUrl"]


# Runs in the page before its own scripts: alert() and friends only record (a dialog would
# block the page), and uncaught errors / rejections are kept for the checks.
PRELUDE = r"""
window.__alerts = [];
for (const f of ['alert', 'confirm', 'prompt']) window[f] = (m) => { window.__alerts.push(f + ': ' + m); };
window.__errors = [];
addEventListener('error', (e) => window.__errors.push('error: ' + e.message));
addEventListener('unhandledrejection', (e) => window.__errors.push('unhandled rejection: ' + e.reason));
"""

# Tags and attributes the page's Markdown renderer writes; anything else in a reply is live
# HTML that came from the model.
INSPECT = r"""
(() => {
  const TAGS = new Set(['DIV', 'SPAN', 'P', 'BR', 'H1', 'H2', 'H3', 'H4', 'H5', 'H6', 'STRONG',
    'EM', 'DEL', 'CODE', 'PRE', 'UL', 'OL', 'LI', 'A', 'BLOCKQUOTE', 'HR', 'TABLE', 'THEAD',
    'TBODY', 'TR', 'TH', 'TD', 'BUTTON']);
  const ATTRS = new Set(['class', 'href', 'target', 'rel', 'start', 'style', 'type']);
  const replies = document.querySelectorAll('.msg.assistant');
  const last = replies[replies.length - 1];
  const bad = [];
  for (const reply of replies) {
    for (const e of reply.querySelectorAll('*')) {
      if (!TAGS.has(e.tagName)) bad.push('<' + e.tagName.toLowerCase() + '>');
      for (const a of e.attributes) {
        if (!ATTRS.has(a.name)) bad.push(e.tagName.toLowerCase() + '[' + a.name + ']');
      }
      if (e.tagName === 'A' && !/^(https?:|mailto:|#|\/|[^:]*$)/i.test(e.getAttribute('href') || '')) {
        bad.push('a[href=' + e.getAttribute('href') + ']');
      }
    }
  }
  const q = (sel) => { const e = last && last.querySelector(sel); return e ? e.textContent : null; };
  return JSON.stringify({
    state: document.body.dataset.state,
    reply: q('.content'), meta: q('.meta'), error: q('.error'),
    model: (document.getElementById('model') || {}).textContent,
    scripts: document.querySelectorAll('script').length,
    bad, alerts: window.__alerts, errors: window.__errors,
  });
})()
"""


# The page's renderMarkdown() over hostile and random inputs, each result parsed by the
# browser and held to the same allowlist; also how long a long reply takes to render, since
# the page re-renders the whole reply on every animation frame while it streams.
RENDER_CHECK = r"""
(() => {
  if (typeof renderMarkdown !== 'function') return JSON.stringify({ missing: true });
  const TAGS = new Set(['DIV', 'SPAN', 'P', 'BR', 'H1', 'H2', 'H3', 'H4', 'H5', 'H6', 'STRONG',
    'EM', 'DEL', 'CODE', 'PRE', 'UL', 'OL', 'LI', 'A', 'BLOCKQUOTE', 'HR', 'TABLE', 'THEAD',
    'TBODY', 'TR', 'TH', 'TD', 'BUTTON']);
  const ATTRS = new Set(['class', 'href', 'target', 'rel', 'start', 'style', 'type']);
  const cases = [
    '<script>alert(1)</script>', '<img src=x onerror=alert(1)>', '<svg/onload=alert(1)>',
    '[x](javascript:alert(1))', '[x](JaVaScRiPt:alert(1))', '[x](  javascript:alert(1) )',
    '[x](java\tscript:alert(1))', '[x](data:text/html,<script>alert(1)</script>)',
    '[x](vbscript:msgbox(1))', '[x](" onmouseover="alert(1))', "[x](' onmouseover='alert(1))",
    '[x](https://a.com/" onmouseover="alert(1) "t")', 'https://a.com/"onmouseover="alert(1)',
    'https://a.com/?a=1&b=2&', '```"><img src=x onerror=alert(1)>\n<b>code</b>\n```',
    '``` js onerror=alert(1)\nx\n```', '`<b>` **<i>x</i>** _<u>y</u>_',
    '| <b>a</b> | b |\n|---|:-:|\n| <svg onload=alert(1)> | [c](javascript:1) |',
    '> <iframe src=javascript:alert(1)>', '- <a href="javascript:alert(1)">x</a>\n  - <style>*{}</style>',
    '# <h1 onclick=alert(1)>', '1. x\n\n   ```\n   <script>\n   ```', '&lt;script&gt; &amp;',
    '\u0000 0\u0000 \u00000\u0000', '**a `**` b**', '[a](https://x.com/?q=1&amp;b=2)',
    '&gt; '.repeat(5000) + '<script>x', '> '.repeat(20000) + 'deep', '- '.repeat(20000) + 'deep',
  ];
  // Random strings from markup-heavy pieces (a fixed LCG: the same strings every run).
  const pieces = ['<', '>', '"', "'", '&', '*', '**', '_', '`', '```', '~~', '[', ']', '(', ')',
    'javascript:', 'https://x.y/', 'onerror=', '<img src=x ', '<script>', '\n', '\n\n', ' ', '  ',
    '#', '- ', '1. ', '|', '---', '> ', 'a', 'b c', '\u0000', '0', '&amp;', '&#'];
  let seed = 12345;
  const rand = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
  for (let k = 0; k < 400; k++) {
    let t = '';
    for (let j = rand(40); j >= 0; j--) t += pieces[rand(pieces.length)];
    cases.push(t);
  }
  const bad = [];
  const show = (c) => JSON.stringify(c.length > 100 ? c.slice(0, 100) + '...' : c);
  for (const c of cases) {
    let html;
    try { html = renderMarkdown(c); } catch (e) { bad.push('threw on ' + show(c) + ': ' + e); continue; }
    const tpl = document.createElement('template');
    tpl.innerHTML = html;
    for (const e of tpl.content.querySelectorAll('*')) {
      const why = !TAGS.has(e.tagName) ? '<' + e.tagName.toLowerCase() + '>' :
        [...e.attributes].some((a) => !ATTRS.has(a.name)) ? 'attribute on <' + e.tagName.toLowerCase() + '>' :
        e.tagName === 'A' && !/^(https?:|mailto:|#|\/|[^:]*$)/i.test(e.getAttribute('href') || '') ?
          'href ' + e.getAttribute('href') : null;
      if (why) { bad.push(why + ' from ' + show(c)); break; }
    }
    if (c.includes('<script>') && !tpl.content.textContent.includes('<script>') && !c.includes('\u0000')) {
      bad.push('text lost: ' + show(c));
    }
  }
  // A long reply: 100 sections of paragraphs, lists and code blocks (about 23 KB).
  let long = '';
  for (let k = 0; k < 100; k++) {
    long += '## Part ' + k + '\n\nSome *text* with `code`, **bold** and https://example.com/x.\n\n' +
            '- item one\n- item two\n  - nested\n\n```c\nint main(void) { return ' + k + '; }\n```\n\n' +
            'A line with <b>tags</b> & ampersands, snake_case and a [link](https://a.b/c).\n\n';
  }
  const t0 = performance.now();
  for (let r = 0; r < 5; r++) renderMarkdown(long);
  return JSON.stringify({ cases: cases.length, bad: bad.slice(0, 10), nbad: bad.length,
                          long_kb: long.length / 1024, long_ms: (performance.now() - t0) / 5 });
})()
"""


def run(args):
    binary = shutil.which(args.chromium)
    if not binary:
        print("browser_test: %s not found; install it: apt-get install -y chromium" % args.chromium,
              file=sys.stderr)
        return 2
    base = args.base_url.rstrip("/")
    url = base + "/?q=" + urllib.parse.quote(args.question) + ("&temperature=%g" % args.temperature if args.temperature is not None else "")
    t0 = time.monotonic()
    browser = Chromium(binary, args.width, args.height)
    ws = None
    try:
        port = browser.devtools_port(60)
        ws = WebSocket(page_websocket(port))
        dt = DevTools(ws)
        dt.call("Page.enable")
        dt.call("Runtime.enable")
        dt.call("Page.addScriptToEvaluateOnNewDocument", {"source": PRELUDE})
        dt.call("Emulation.setDeviceMetricsOverride", {
            "width": args.width, "height": args.height, "deviceScaleFactor": 1,
            "mobile": args.width < 600})
        dt.call("Emulation.setEmulatedMedia", {"features": [
            {"name": "prefers-color-scheme", "value": "dark" if args.dark else "light"}]})
        nav = dt.call("Page.navigate", {"url": url})
        if nav.get("errorText"):
            raise Fail("loading %s failed: %s" % (url, nav["errorText"]))

        # Wait for the reply to finish: poll the page's state, bounded.
        deadline = time.monotonic() + args.timeout
        state = None
        while time.monotonic() < deadline:
            try:
                state = dt.eval("document.body ? document.body.dataset.state : ''")
            except Fail:
                state = None          # evaluated while the navigation swapped documents
            if state in ("done", "error"):
                break
            time.sleep(0.2)
        info = json.loads(dt.eval(INSPECT))

        shot = dt.call("Page.captureScreenshot", {"format": "png"}, timeout=60)
        with open(args.screenshot, "wb") as f:
            f.write(base64.b64decode(shot["data"]))

        problems = []
        if state not in ("done", "error"):
            problems.append("the reply did not finish in %d s (data-state=%r)" % (args.timeout, state))
        elif state != args.expect_state:
            problems.append("data-state is %r, expected %r (error shown: %r)"
                            % (state, args.expect_state, info["error"]))
        shown = info["error"] if args.expect_state == "error" else info["reply"]
        for text in [args.expected] + args.expect:
            if text not in (shown or ""):
                problems.append("%r is not in the %s: %r" % (
                    text, "error shown" if args.expect_state == "error" else "reply",
                    (shown or "")[:500]))
        if info["bad"]:
            problems.append("live HTML in the reply: " + ", ".join(sorted(set(info["bad"]))))
        if info["scripts"] != 1:
            problems.append("the document has %d <script> elements, the page has 1" % info["scripts"])
        if info["alerts"] or dt.dialogs:
            problems.append("script from the reply ran: %s" % (info["alerts"] + dt.dialogs))
        errors = info["errors"] + dt.exceptions
        if errors:
            problems.append("JS errors: " + "; ".join(errors))
        if args.expect_state == "done" and "TTFT" not in (info["meta"] or ""):
            problems.append("no timing line under the reply: %r" % info["meta"])
        if info["model"] in (None, "", "offline", "connecting\u2026"):
            problems.append("no model name in the header: %r" % info["model"])
        render = json.loads(dt.eval(RENDER_CHECK))
        if render.get("missing"):
            problems.append("the page has no renderMarkdown() to check")
        elif render["nbad"]:
            problems.append("renderMarkdown let HTML through in %d of %d inputs:\n    %s"
                            % (render["nbad"], render["cases"], "\n    ".join(render["bad"])))
        if problems:
            raise Fail("\n  ".join(["%s (screenshot: %s)" % (url, args.screenshot)] + problems))
        print("browser_test: ok: %s -> %s [%s] in %.1f s; renderer: %d hostile inputs clean, "
              "a %.0f KB reply renders in %.1f ms; screenshot %s"
              % (args.question, args.expect_state,
                 info["error"] if args.expect_state == "error" else info["meta"],
                 time.monotonic() - t0, render["cases"], render["long_kb"], render["long_ms"],
                 args.screenshot))
        return 0
    finally:
        if ws:
            ws.close()
        browser.stop()


def main():
    ap = argparse.ArgumentParser(description="Browser test of the akunu chat page.")
    ap.add_argument("base_url")
    ap.add_argument("question")
    ap.add_argument("expected", metavar="expected_substring")
    ap.add_argument("screenshot")
    ap.add_argument("--expect", action="append", default=[], metavar="TEXT",
                    help="more text the reply must contain (repeatable)")
    ap.add_argument("--expect-state", choices=("done", "error"), default="done")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--temperature", type=float, default=None, help="set in the page before it sends (0: greedy)")
    ap.add_argument("--width", type=int, default=900)
    ap.add_argument("--height", type=int, default=1000)
    ap.add_argument("--dark", action="store_true")
    ap.add_argument("--chromium", default="chromium")
    args = ap.parse_args()

    # SIGTERM/SIGHUP (e.g. ctest's timeout) unwind through the finally that kills chromium.
    def on_signal(signum, _frame):
        raise SystemExit("browser_test: killed by signal %d" % signum)
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, on_signal)
    try:
        return run(args)
    except (Fail, OSError, ValueError) as e:
        print("browser_test: FAIL: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
