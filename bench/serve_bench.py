#!/usr/bin/env python3
"""akunu serve against llama.cpp's llama-server: the same streamed chat requests to each.

Starts one server at a time (same model, per-slot context and threads; as many slots as
clients), waits for /health, warms every slot up, then sends the request set from C client
threads at once (closed loop: a client sends its next request when its last one ends) and
times each stream: time to first token (the first chunk with content), the gaps between
content chunks (inter-token latency, ITL), each request's time per output token after the
first (TPOT: its gaps' sum over its tokens - 1), tokens from the final usage. Servers alternate
between repetitions, so drift on the machine hits both; each figure is the median over the
repetitions. Python standard library only. See bench/README.md ("Serving").
"""
import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVERS = ("akunu", "llama")
LABEL = {"akunu": "akunu serve", "llama": "llama-server"}


def log(*a):
    print("==", *a, file=sys.stderr, flush=True)


# ---- the requests -----------------------------------------------------------------------

SYSTEM = "You are a helpful assistant. Answer clearly and in detail."

QUESTIONS = [
    "Explain how a hash table works, including how collisions are handled.",
    "Write a Python function that checks whether a string is a palindrome, with comments and tests.",
    "What are the differences between TCP and UDP? Give examples of when to use each.",
    "Describe, step by step, how a web browser loads a page after the user types a URL.",
    "Write a C function that reverses a singly linked list and explain how it works.",
    "Explain the difference between a process and a thread, with examples.",
    "How does garbage collection work in Java? Describe the main algorithms.",
    "Write a SQL query that finds the second highest salary in an employees table, and explain it.",
    "Explain what Big-O notation means and give the complexity of common sorting algorithms.",
    "Describe how public-key cryptography works and where it is used.",
    "Write a JavaScript function that debounces another function, and explain when to use it.",
    "Explain how a binary search tree is balanced, using AVL trees as the example.",
]

CODE = '''def merge_intervals(intervals):
    intervals.sort(key=lambda x: x[0])
    out = []
    for start, end in intervals:
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


class LRUCache:
    def __init__(self, capacity):
        self.capacity = capacity
        self.items = {}
        self.order = []

    def get(self, key):
        if key not in self.items:
            return -1
        self.order.remove(key)
        self.order.append(key)
        return self.items[key]

    def put(self, key, value):
        if key in self.items:
            self.order.remove(key)
        elif len(self.items) >= self.capacity:
            oldest = self.order.pop(0)
            del self.items[oldest]
        self.items[key] = value
        self.order.append(key)
'''

# prompt kinds, cycled over the requests: (kind, characters of the passage)
MIX = [("q", 0), ("text", 700), ("q", 0), ("code", 0), ("text", 2800), ("q", 0), ("text", 1400), ("text", 5600)]
MAX_TOKENS = [64, 128, 96, 128, 80, 112, 96, 128]


def build_requests(n):
    """n chat requests, the same for both servers and every repetition: short questions,
    passages of a public-domain book (tests/data/ppl/botchan.txt) to summarise, a code
    review; prompts of about 30 to 1400 tokens, max_tokens 64 to 128."""
    with open(os.path.join(ROOT, "tests/data/ppl/botchan.txt"), encoding="utf-8") as f:
        book = f.read()
    reqs = []
    q = t = 0
    for i in range(n):
        kind, chars = MIX[i % len(MIX)]
        if kind == "q":
            user = QUESTIONS[q % len(QUESTIONS)]
            q += 1
        elif kind == "code":
            user = "Review this Python code: explain what each part does, find the bugs and inefficiencies, " \
                   "and suggest improvements.\n\n```python\n" + CODE + "```"
        else:
            start = (t * 7919) % max(1, len(book) - chars)   # a different passage each time
            start = book.find("\n", start) + 1
            t += 1
            user = "Summarise the following passage in detail, then list the characters it mentions.\n\n" + \
                   book[start:start + chars]
        reqs.append({"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
                     "max_tokens": MAX_TOKENS[i % len(MAX_TOKENS)]})
    return reqs


# ---- one streamed request -----------------------------------------------------------------

def stream_chat(port, req, timeout):
    """POST one streamed chat completion; returns its timings and usage."""
    body = dict(req, stream=True, temperature=0, stream_options={"include_usage": True})
    body["cache_prompt"] = True   # llama-server's default, said explicitly (akunu ignores it)
    data = json.dumps(body).encode()
    r = {"ok": False, "ttft": None, "gaps": [], "chunks": 0, "text": "", "completion_tokens": None,
         "prompt_tokens": None, "cached_tokens": None, "timings": None, "error": None}
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", "/v1/chat/completions", data, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            r["error"] = f"HTTP {resp.status}: {resp.read()[:300]!r}"
            return r
        last = None
        text = []
        while True:
            line = resp.readline()
            if not line:
                break
            if not line.startswith(b"data: "):
                continue
            payload = line[6:].strip()
            if payload == b"[DONE]":
                break
            now = time.perf_counter()
            ev = json.loads(payload)
            if "error" in ev:
                r["error"] = str(ev["error"])[:300]
                return r
            for c in ev.get("choices") or []:
                piece = (c.get("delta") or {}).get("content")
                if piece:
                    if last is None:
                        r["ttft"] = now - t0
                    else:
                        r["gaps"].append(now - last)
                    last = now
                    r["chunks"] += 1
                    text.append(piece)
            u = ev.get("usage")
            if u:
                r["completion_tokens"] = u.get("completion_tokens")
                r["prompt_tokens"] = u.get("prompt_tokens")
                r["cached_tokens"] = (u.get("prompt_tokens_details") or {}).get("cached_tokens")
            if ev.get("timings"):
                r["timings"] = ev["timings"]
        r["text"] = "".join(text)
        r["ok"] = r["ttft"] is not None and r["completion_tokens"] is not None
        if not r["ok"]:
            r["error"] = "no content or no usage in the stream"
    except (OSError, http.client.HTTPException, ValueError) as e:
        r["error"] = f"{type(e).__name__}: {e}"
    finally:
        r["t_start"] = t0
        r["t_end"] = time.perf_counter()
        conn.close()
    return r


def run_load(port, reqs, conc, timeout):
    """The request set from conc client threads, each taking the next request when its
    last one ends. Returns the per-request results and the wall time."""
    results = [None] * len(reqs)
    nxt = [0]
    mu = threading.Lock()

    def client():
        while True:
            with mu:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(reqs):
                return
            results[i] = stream_chat(port, reqs[i], timeout)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(conc)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return results, time.perf_counter() - t0


# ---- servers ------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_cmd(a, which, slots, port):
    if which == "akunu":
        t = a.threads if slots == 1 else a.akunu_slot_threads
        return [a.akunu, "serve", "-m", a.model, "--host", "127.0.0.1", "--port", str(port), "-c", str(a.ctx),
                "-t", str(t), "--slots", str(slots), "--max-queue", str(max(64, 4 * slots))]
    # -c is the whole KV cache, split between the -np slots: each gets a.ctx as in akunu;
    # --cache-ram 0: no host-memory prompt cache beyond the slots' own (akunu has none)
    return [a.llama_server, "-m", a.model, "--host", "127.0.0.1", "--port", str(port), "-c", str(a.ctx * slots),
            "-np", str(slots), "-t", str(a.threads), "-tb", str(a.threads), "--cache-ram", "0",
            "--no-webui"]


def get(port, path, timeout=5):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


class Server:
    def __init__(self, a, which, slots, logdir, tag):
        self.port = free_port()
        self.cmd = server_cmd(a, which, slots, self.port)
        self.logpath = os.path.join(logdir, f"{tag}.log")
        self.logf = open(self.logpath, "w")
        self.logf.write(" ".join(self.cmd) + "\n")
        self.logf.flush()
        t0 = time.perf_counter()
        self.p = subprocess.Popen(self.cmd, stdout=self.logf, stderr=subprocess.STDOUT, cwd=ROOT)
        while True:
            if self.p.poll() is not None:
                raise RuntimeError(f"{which} exited ({self.p.returncode}); see {self.logpath}")
            try:
                if get(self.port, "/health", 2)[0] == 200:
                    break
            except OSError:
                pass
            if time.perf_counter() - t0 > a.load_timeout:
                self.stop()
                raise RuntimeError(f"{which} not ready in {a.load_timeout} s; see {self.logpath}")
            time.sleep(0.2)
        self.load_s = time.perf_counter() - t0

    def rss_mb(self):
        try:
            with open(f"/proc/{self.p.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return None

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.logf.close()


# ---- one measured run -----------------------------------------------------------------------

def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summarise(results, wall):
    ok = [r for r in results if r["ok"]]
    ttft = [r["ttft"] for r in ok]
    gaps = [g for r in ok for g in r["gaps"]]
    # time per output token of each request after its first (vLLM's TPOT): unlike the
    # gaps, it does not depend on whether tokens arrive one by one or in bursts
    tpot = [sum(r["gaps"]) / (r["completion_tokens"] - 1) for r in ok if r["completion_tokens"] > 1 and r["gaps"]]
    gen = sum(r["completion_tokens"] for r in ok)
    return {"n": len(results), "n_ok": len(ok), "wall_s": wall, "req_s": len(ok) / wall, "tok_s": gen / wall,
            "ttft_p50": pct(ttft, 0.5), "ttft_p90": pct(ttft, 0.9), "itl_p50": pct(gaps, 0.5), "itl_p90": pct(gaps, 0.9),
            "itl_max": max(gaps) if gaps else float("nan"), "tpot_p50": pct(tpot, 0.5), "tpot_p90": pct(tpot, 0.9),
            "gen_tokens": gen, "prompt_tokens": sum(r["prompt_tokens"] or 0 for r in ok),
            "cached_tokens": sum(r["cached_tokens"] or 0 for r in ok),
            "tokens_per_chunk": gen / max(1, sum(r["chunks"] for r in ok))}


def akunu_metrics(port):
    """akunu's /metrics: the engine's own prefill and decode rates over the run."""
    try:
        st, body = get(port, "/metrics")
    except OSError:
        return None
    out = {}
    for line in body.decode().splitlines():
        if line.startswith("akunu_prefill_tokens_per_second") or line.startswith("akunu_decode_tokens_per_second"):
            k, v = line.split()
            out[k.replace("akunu_", "")] = float(v)
    return out


def one_run(a, which, conc, reqs, logdir, tag):
    slots = conc
    srv = Server(a, which, slots, logdir, tag)
    try:
        # warm-up: every slot once, on a short request sharing the system prompt
        warm = [{"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Say hello."}],
                 "max_tokens": 8}] * slots
        wres, _ = run_load(srv.port, warm, slots, a.request_timeout)
        bad = [r["error"] for r in wres if not r["ok"]]
        if bad:
            raise RuntimeError(f"{which}: warm-up failed: {bad[0]}")
        if which == "akunu":
            m0 = akunu_metrics(srv.port)
        results, wall = run_load(srv.port, reqs, conc, a.request_timeout)
        s = summarise(results, wall)
        s["load_s"] = srv.load_s
        s["rss_mb"] = srv.rss_mb()
        s["cmd"] = " ".join(os.path.relpath(x, ROOT) if os.path.isabs(x) and x.startswith(ROOT) else x for x in srv.cmd)
        if which == "akunu":
            s["engine_metrics"] = akunu_metrics(srv.port)
            s["engine_metrics_warmup"] = m0
        errs = [r["error"] for r in results if not r["ok"]]
        if errs:
            log(f"{which} c={conc}: {len(errs)} failed requests, first: {errs[0]}")
        return s, results
    finally:
        srv.stop()


# ---- the plan and the report ------------------------------------------------------------------

def fmt_ms(x):
    return f"{1000 * x:.0f}" if x >= 0.1 else f"{1000 * x:.1f}"


def report(a, runs, elapsed, machine):
    keys = ("req_s", "ttft_p50", "ttft_p90", "tpot_p50", "itl_p50", "itl_p90", "tok_s")
    med = {}
    for (which, conc), lst in runs.items():
        med[(which, conc)] = {k: statistics.median(s[k] for s in lst) for k in keys}
        med[(which, conc)]["reps"] = len(lst)
        med[(which, conc)]["spread_tok_s"] = (min(s["tok_s"] for s in lst), max(s["tok_s"] for s in lst))
    concs = sorted({c for _, c in runs})
    out = []
    out.append(f"model {os.path.basename(a.model)}; {machine}; per-slot context {a.ctx}; "
               f"{elapsed / 60:.1f} min in all")
    out.append("")
    out.append("| clients (= slots) | server | reps | requests/s | TTFT p50 ms | TTFT p90 ms | TPOT p50 ms | "
               "ITL p50 ms | ITL p90 ms | gen tokens/s |")
    out.append("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for c in concs:
        for w in SERVERS:
            m = med.get((w, c))
            if not m:
                continue
            lo, hi = m["spread_tok_s"]
            out.append(f"| {c} | {LABEL[w]} | {m['reps']} | {m['req_s']:.3f} | {fmt_ms(m['ttft_p50'])} | "
                       f"{fmt_ms(m['ttft_p90'])} | {fmt_ms(m['tpot_p50'])} | {fmt_ms(m['itl_p50'])} | {fmt_ms(m['itl_p90'])} | "
                       f"{m['tok_s']:.1f} ({lo:.1f}-{hi:.1f}) |")
    out.append("")
    out.append("akunu / llama.cpp (requests/s and tokens/s: above 1 is akunu faster; times: below 1 is akunu faster):")
    out.append("")
    out.append("| clients | requests/s | TTFT p50 | TTFT p90 | TPOT p50 | ITL p50 | ITL p90 | gen tokens/s |")
    out.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for c in concs:
        x, y = med.get(("akunu", c)), med.get(("llama", c))
        if x and y:
            out.append(f"| {c} | " + " | ".join(f"{x[k] / y[k]:.2f}" if y[k] else "-" for k in keys) + " |")
    return "\n".join(out), med


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default=os.path.join(ROOT, "models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"))
    ap.add_argument("--akunu", default=os.path.join(ROOT, "build/akunu"))
    ap.add_argument("--llama-server", default=os.path.join(ROOT, "third_party/llama.cpp-build/bin/llama-server"))
    ap.add_argument("-c", "--ctx", type=int, default=4096, help="context per slot (default 4096)")
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count(),
                    help="threads: llama-server always, akunu with one slot (default: the CPU count)")
    ap.add_argument("--akunu-slot-threads", type=int, default=1,
                    help="akunu's threads per slot when there are several (each slot is a session with its own "
                         "pool; default 1, so N slots run N threads)")
    ap.add_argument("--conc", default="1,4,16", help="client counts (= slots), comma-separated (default 1,4,16)")
    ap.add_argument("--reps", default="1:3,4:3,16:2",
                    help="repetitions per client count, C:N,... (default 1:3,4:3,16:2)")
    ap.add_argument("--requests", type=int, default=8,
                    help="requests per run: max(this, 2 x clients) (default 8)")
    ap.add_argument("--only", choices=SERVERS, help="run one server only")
    ap.add_argument("--time-limit", type=float, default=1800,
                    help="seconds; a repetition that would end past it is skipped (default 1800)")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: clients 1 and 4, one repetition, 4 requests (about 3 minutes)")
    ap.add_argument("--json", help="write every run's figures and requests here")
    ap.add_argument("--log-dir", default=os.path.join(ROOT, "build/serve_bench"), help="server logs")
    ap.add_argument("--load-timeout", type=float, default=300)
    ap.add_argument("--request-timeout", type=float, default=600)
    a = ap.parse_args()
    if a.quick:
        a.conc, a.reps, a.requests = "1,4", "1:1,4:1", 4
    concs = [int(x) for x in a.conc.split(",")]
    reps = {int(k): int(v) for k, v in (p.split(":") for p in a.reps.split(","))}
    for path in [a.model] + ([a.akunu] if a.only != "llama" else []) + ([a.llama_server] if a.only != "akunu" else []):
        if not os.path.exists(path):
            sys.exit(f"serve_bench: {path} not found (llama-server: bench/build-llama-server.sh; akunu: cmake in "
                     "build/; the model: scripts/get-model)")
    os.makedirs(a.log_dir, exist_ok=True)
    servers = [a.only] if a.only else list(SERVERS)
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        cpu = "?"
    machine = f"{cpu}, {os.cpu_count()} CPUs"
    log(machine)

    t_begin = time.perf_counter()
    runs, raw, last_cost, skipped = {}, [], {}, []
    for c in concs:
        reqs = build_requests(max(a.requests, 2 * c))
        for rep in range(reps.get(c, 1)):
            order = servers if rep % 2 == 0 else servers[::-1]
            est = sum(last_cost.get((w, c), 0) for w in order)
            if rep > 0 and time.perf_counter() - t_begin + est > a.time_limit:
                skipped.append(f"c={c} rep {rep + 1}")
                log(f"skipping c={c} repetition {rep + 1}: it would pass --time-limit")
                continue
            for w in order:
                t0 = time.perf_counter()
                s, results = one_run(a, w, c, reqs, a.log_dir, f"{w}-c{c}-r{rep}")
                last_cost[(w, c)] = time.perf_counter() - t0
                runs.setdefault((w, c), []).append(s)
                raw.append({"server": w, "conc": c, "rep": rep, "summary": s,
                            "requests": [{k: v for k, v in r.items() if k not in ("t_start", "t_end")} for r in results]})
                log(f"{w:5s} c={c:2d} rep {rep + 1}: {s['req_s']:.3f} req/s, {s['tok_s']:.1f} tok/s, "
                    f"TTFT p50 {fmt_ms(s['ttft_p50'])} ms, TPOT p50 {fmt_ms(s['tpot_p50'])} ms, "
                    f"ITL p50/p90/max {fmt_ms(s['itl_p50'])}/{fmt_ms(s['itl_p90'])}/{fmt_ms(s['itl_max'])} ms "
                    f"({s['n_ok']}/{s['n']} ok, {s['gen_tokens']} tokens, {s['prompt_tokens']} prompt, "
                    f"{s['cached_tokens']} cached; load {s['load_s']:.1f} s, RSS {s['rss_mb'] or 0:.0f} MB)")
    elapsed = time.perf_counter() - t_begin
    text, med = report(a, runs, elapsed, machine)
    print(text)
    # greedy outputs of the two servers, first repetition: how many are the same text
    same = []
    for c in concs:
        x = next((r for r in raw if r["server"] == "akunu" and r["conc"] == c and r["rep"] == 0), None)
        y = next((r for r in raw if r["server"] == "llama" and r["conc"] == c and r["rep"] == 0), None)
        if x and y:
            n = sum(p["text"] == q["text"] for p, q in zip(x["requests"], y["requests"]))
            same.append(f"c={c}: {n}/{len(x['requests'])}")
    if same:
        print("\nidentical greedy replies (akunu vs llama-server, first repetition): " + ", ".join(same))
    if skipped:
        print("skipped (time limit): " + ", ".join(skipped))
    for w in servers:
        cmd = next((r["summary"]["cmd"] for r in raw if r["server"] == w), None)
        if cmd:
            print(f"{LABEL[w]}: {cmd}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": machine, "args": vars(a), "elapsed_s": elapsed, "skipped": skipped,
                       "median": {f"{w}/c{c}": m for (w, c), m in med.items()}, "runs": raw}, f, indent=1)


if __name__ == "__main__":
    main()
