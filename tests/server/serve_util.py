"""The server tests' harness (Python 3 standard library only): start `akunu serve` on a
port the system picks, wait for /health, stop it with SIGTERM and check that it exits 0
in time with no sanitizer report; HTTP requests with timeouts, SSE reading, raw sockets,
and a tally of checks (a failed check is recorded and the run goes on)."""
import atexit
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

# What a sanitizer prints when it finds something (the ASan + UBSan build).
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "LeakSanitizer", "runtime error",
                   "SUMMARY: UndefinedBehaviorSanitizer", "ThreadSanitizer")


class Checks:
    """check(name, cond, detail) records; done() prints the tally and the exit code."""

    def __init__(self, title):
        self.title = title
        self.n = 0
        self.failed = []
        self.t0 = time.monotonic()
        self.verbose = os.environ.get("AKUNU_TEST_VERBOSE") == "1"   # print the passing checks too

    def check(self, name, cond, detail=""):
        self.n += 1
        if cond and self.verbose:
            print(f"ok: {name}", flush=True)
        if not cond:
            self.failed.append(name)
            print(f"FAIL: {name}" + (f" ({detail})" if detail else ""), flush=True)
        return bool(cond)

    def note(self, msg):
        print(f"  [{time.monotonic() - self.t0:6.1f}s] {msg}", flush=True)

    def done(self):
        dt = time.monotonic() - self.t0
        print(f"{self.title}: {self.n - len(self.failed)} passed, {len(self.failed)} failed, {dt:.1f} s", flush=True)
        for f in self.failed:
            print(f"  failed: {f}")
        return 0 if not self.failed else 1


def watchdog(seconds, what):
    """Kill the whole test (and the servers it started) if it runs past `seconds`."""

    def fire():
        print(f"FAIL: {what} ran past its {seconds} s bound", flush=True)
        Server.kill_all()
        os._exit(3)

    t = threading.Timer(seconds, fire)
    t.daemon = True
    t.start()
    return t


class Server:
    """One `akunu serve` process: Server(bin, model, [args]).start() ... .stop()."""

    live = []

    def __init__(self, binary, model, args=(), name="server"):
        self.binary, self.model, self.args, self.name = binary, model, list(args), name
        self.proc = None
        self.port = None
        self.lines = []          # stderr, as it comes
        self.stop_seconds = None
        self._reader = None

    def start(self, ready_timeout=120):
        env = dict(os.environ)
        # leaks are checked at exit (ASan build); harmless for a plain build
        asan = env.get("ASAN_OPTIONS", "")
        if "detect_leaks" not in asan:
            env["ASAN_OPTIONS"] = (asan + ":" if asan else "") + "detect_leaks=1"
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
        cmd = [self.binary, "serve", "-m", self.model, "--port", "0"] + self.args
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     env=env)
        Server.live.append(self)
        got_port = threading.Event()

        def read():
            for raw in self.proc.stderr:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self.lines.append(line)
                m = re.search(r"listening on http://[^ ]*:(\d+)", line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    got_port.set()
            got_port.set()

        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + ready_timeout
        got_port.wait(max(0.0, deadline - time.monotonic()))
        if self.port is None:
            self.kill()
            raise RuntimeError(f"{self.name}: no 'listening on' line; stderr:\n" + self.stderr())
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name}: exited {self.proc.returncode} while loading; stderr:\n" + self.stderr())
            try:
                st, _, _ = request(self.port, "GET", "/health", timeout=5)
                if st == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"{self.name}: /health not 200 within {ready_timeout} s; stderr:\n" + self.stderr())

    def stderr(self):
        return "\n".join(self.lines)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def sanitizer_report(self):
        return [l for l in self.lines if any(m in l for m in SANITIZER_MARKS)]

    def stop(self, checks, within=10.0, bug=""):
        """SIGTERM; the server must exit 0 within `within` seconds (else SIGKILL and a
        failed check) and print no sanitizer report. `bug` tags the exit checks."""
        if self.proc is None:
            return
        was_alive = self.alive()
        checks.check(f"{self.name}: still running before SIGTERM", was_alive, f"rc={self.proc.returncode}")
        t0 = time.monotonic()
        if was_alive:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=within)
            self.stop_seconds = time.monotonic() - t0
            checks.check(f"{self.name}: exits 0 on SIGTERM {bug}".rstrip(), rc == 0, f"rc={rc}")
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            checks.check(f"{self.name}: exits within {within} s of SIGTERM {bug}".rstrip(), False, "hung; killed with SIGKILL")
        self._reader.join(timeout=10)
        rep = self.sanitizer_report()
        checks.check(f"{self.name}: no sanitizer report {bug}".rstrip(), not rep, rep[0] if rep else "")
        if rep or (self.proc.returncode != 0):
            first = next((i for i, l in enumerate(self.lines) if any(m in l for m in SANITIZER_MARKS)), len(self.lines) - 60)
            shown = self.lines[max(0, first - 3):][:200]
            print(f"---- {self.name} stderr ----\n" + "\n".join(shown) + "\n----", flush=True)
        if self in Server.live:
            Server.live.remove(self)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self in Server.live:
            Server.live.remove(self)

    @staticmethod
    def kill_all():
        for s in list(Server.live):
            s.kill()


atexit.register(Server.kill_all)


# ---- HTTP ----------------------------------------------------------------------------------

def request(port, method, path, body=None, headers=None, timeout=60, source=None):
    """One request on a fresh connection (from the address `source`, e.g. 127.0.0.2):
    (status, headers as a lower-case dict, body bytes)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=(source, 0) if source else None)
    try:
        h = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        elif isinstance(body, str):
            body = body.encode("utf-8", "surrogateescape")
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        c.close()


def post(port, path, body, headers=None, timeout=60, source=None):
    """POST; (status, parsed JSON or None, headers)."""
    st, h, data = request(port, "POST", path, body, headers, timeout, source)
    try:
        j = json.loads(data)
    except ValueError:
        j = None
    return st, j, h


def is_error_body(j):
    """OpenAI's error object: {"error": {"message": str, "type": str, "code": str|null}}."""
    if not isinstance(j, dict) or not isinstance(j.get("error"), dict):
        return False
    e = j["error"]
    return (isinstance(e.get("message"), str) and e["message"] != "" and isinstance(e.get("type"), str)
            and "code" in e and (e["code"] is None or isinstance(e["code"], str)))


def chat_body(content, max_tokens=8, **kw):
    b = {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, "temperature": 0}
    b.update(kw)
    return b


def chat_ok(port, timeout=60, headers=None):
    """A normal short chat request: (ok, detail)."""
    try:
        st, j, _ = post(port, "/v1/chat/completions", chat_body("Say hello.", 4), headers, timeout)
    except OSError as e:
        return False, f"{type(e).__name__}: {e}"
    ok = (st == 200 and isinstance(j, dict) and j.get("object") == "chat.completion"
          and isinstance(j["choices"][0]["message"].get("content"), str))
    return ok, f"status {st}, body {str(j)[:200]}"


def health_ok(port, timeout=10):
    try:
        st, _, _ = request(port, "GET", "/health", timeout=timeout)
        return st == 200
    except OSError:
        return False


def metric(port, name):
    """A metric's value from /metrics (the first line that names it without labels)."""
    _, _, data = request(port, "GET", "/metrics", timeout=10)
    for line in data.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


class Stream:
    """An SSE request: events() yields each `data:` payload (parsed JSON, or the string
    "[DONE]") as it arrives; close() hangs up."""

    def __init__(self, port, path, body, headers=None, timeout=60):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        self.t0 = time.monotonic()
        self.conn.request("POST", path, body=json.dumps(body).encode(), headers=h)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = {k.lower(): v for k, v in self.resp.getheaders()}

    def events(self):
        while True:
            line = self.resp.readline()
            if not line:
                return
            line = line.rstrip(b"\r\n")
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                yield "[DONE]"
                return
            yield json.loads(payload)

    def close(self):
        # a hard hang-up: the socket is closed, not the response drained
        try:
            sock = self.conn.sock
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        except OSError:
            pass
        self.conn.close()


def raw_connect(port, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return s


def raw_exchange(port, data, timeout=30):
    """Send raw bytes, half-close, read until the server closes: the status (or None)."""
    s = raw_connect(port, timeout)
    try:
        s.sendall(data)
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        got = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
        m = re.match(rb"HTTP/1\.[01] (\d{3})", got)
        return int(m.group(1)) if m else None, got
    finally:
        s.close()


def post_while_reading(port, path, body, timeout=60):
    """POST a large body on a raw socket while reading the answer: a server may answer
    (413) before the body is all sent. (status or None, the bytes read)."""
    s = raw_connect(port, timeout)
    head = b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (
        path.encode(), len(body))

    def send():
        try:
            s.sendall(head + body)
        except OSError:
            pass

    t = threading.Thread(target=send, daemon=True)
    t.start()
    got = b""
    try:
        while b"\r\n\r\n" not in got:
            d = s.recv(65536)
            if not d:
                break
            got += d
        m = re.match(rb"HTTP/1\.[01] (\d{3})", got)
        if m:
            hl = re.search(rb"content-length: *(\d+)", got, re.I)
            want = got.index(b"\r\n\r\n") + 4 + (int(hl.group(1)) if hl else 0)
            while len(got) < want:
                d = s.recv(65536)
                if not d:
                    break
                got += d
    except OSError:
        pass
    s.close()
    t.join(timeout)
    m = re.match(rb"HTTP/1\.[01] (\d{3})", got)
    return (int(m.group(1)) if m else None), got


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


def args_or_usage(argv, usage):
    if len(argv) < 3:
        print(usage, file=sys.stderr)
        sys.exit(2)
    binary, model = argv[1], argv[2]
    if not os.path.exists(model):
        print(f"FAIL: {model} missing: run scripts/get-model all", flush=True)
        sys.exit(1)
    return binary, model
