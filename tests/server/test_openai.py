#!/usr/bin/env python3
"""akunu serve against OpenAI's own Python client (the `openai` package from PyPI).

    test_openai.py AKUNU_BIN MODELS_DIR

Qwen2.5-Coder-0.5B-Instruct (the default model, whose template has tools): models; a
greedy chat answer equal to `akunu run --greedy` for the same message; streaming that
adds up to the same text with usage at the end; completions, streamed and not; stop
sequences; seeds that reproduce; n=2 refused; logprobs; a tool call round trip (call,
result, answer), streamed too; the cached prefix reported on a second turn; response_format
(json_object, json_schema) and forced tool calls validated with jsonschema.
all-MiniLM-L6-v2: embeddings equal to `akunu embed`; chat on an encoder refused.
"""
import json
import math
import os
import re
import signal
import subprocess
import sys
import time

import openai

FAILS = []


def check(what, ok):
    print("%s: %s" % ("ok  " if ok else "FAIL", what))
    if not ok:
        FAILS.append(what)


class Server:
    """akunu serve on a port the system picks; stopped with SIGTERM, which must end it."""

    def __init__(self, binary, model, *args):
        self.p = subprocess.Popen([binary, "serve", "-m", model, "--port", "0", "-t", "2", *args],
                                  stderr=subprocess.PIPE, text=True)
        self.port = None
        deadline = time.time() + 120
        for line in self.p.stderr:
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if "ready:" in line or time.time() > deadline:
                break
        if not self.port:
            raise RuntimeError("the server did not start")
        self.client = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % self.port, api_key="unused", timeout=300,
                                    max_retries=0)

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = "hung"
        rest = self.p.stderr.read()
        check("the server stops cleanly on SIGTERM (rc %s)" % rc, rc == 0 and "ERROR:" not in rest and "runtime error" not in rest)


def chat_tests(binary, model):
    s = Server(binary, model)
    c = s.client
    try:
        ids = [m.id for m in c.models.list().data]
        check("models lists the model (%s)" % ids, ids == [os.path.basename(model)])

        q = "What is the capital of France?"
        r = c.chat.completions.create(model="any", messages=[{"role": "user", "content": q}], temperature=0, max_tokens=64)
        text = r.choices[0].message.content
        cli = subprocess.run([binary, "run", "-m", model, "-p", q, "--greedy", "-n", "64", "-t", "2"],
                             capture_output=True, text=True, timeout=300).stdout
        check("greedy chat equals akunu run --greedy: %r vs %r" % (text, cli), cli == text + "\n")
        check("finish_reason stop, usage counts (%s)" % r.usage,
              r.choices[0].finish_reason == "stop" and r.usage.prompt_tokens > 10 and
              r.usage.completion_tokens > 0 and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens)

        parts, usage, finish = [], None, None
        for ch in c.chat.completions.create(model="any", messages=[{"role": "user", "content": q}], temperature=0,
                                            max_tokens=64, stream=True, stream_options={"include_usage": True}):
            if ch.usage:
                usage = ch.usage
            for choice in ch.choices:
                parts.append(choice.delta.content or "")
                finish = choice.finish_reason or finish
        check("streamed deltas add up to the same text", "".join(parts) == text)
        check("the stream ends with finish_reason stop and usage", finish == "stop" and usage and
              usage.completion_tokens == r.usage.completion_tokens)
        check("the second request reuses the cached prompt (%d cached)" % usage.prompt_tokens_details.cached_tokens,
              usage.prompt_tokens_details.cached_tokens >= usage.prompt_tokens - 1)

        word = text.split()[3] if len(text.split()) > 3 else "Paris"
        r = c.chat.completions.create(model="any", messages=[{"role": "user", "content": q}], temperature=0,
                                      max_tokens=64, stop=[word, "zzzz"])
        check("stop %r cuts the text before it: %r" % (word, r.choices[0].message.content),
              r.choices[0].message.content == text[:text.index(word)] and r.choices[0].finish_reason == "stop")

        def sampled(seed):
            return c.chat.completions.create(model="any", messages=[{"role": "user", "content": "Write a short poem."}],
                                             temperature=1.0, max_tokens=24, seed=seed).choices[0].message.content
        a, b = sampled(7), sampled(7)
        others = [sampled(k) for k in (8, 9, 10)]
        check("a seed reproduces a sampled reply", a == b)
        check("other seeds give other replies", any(o != a for o in others))

        try:
            c.chat.completions.create(model="any", messages=[{"role": "user", "content": q}], n=2)
            check("n=2 is refused", False)
        except openai.BadRequestError as e:
            check("n=2 is refused with 400 (%s)" % e.message, e.status_code == 400)

        r = c.chat.completions.create(model="any", messages=[{"role": "user", "content": q}], temperature=0,
                                      max_tokens=8, logprobs=True, top_logprobs=3)
        lp = r.choices[0].logprobs.content
        check("logprobs: one entry a token, each with 3 alternatives, the chosen one the best",
              len(lp) == r.usage.completion_tokens and all(len(t.top_logprobs) == 3 and t.logprob <= 0 and
                                                             abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6 for t in lp))
        check("logprobs: the tokens spell the text", "".join(t.token for t in lp) == r.choices[0].message.content)

        r = c.completions.create(model="any", prompt="The capital of France is", temperature=0, max_tokens=8)
        streamed = "".join(ch.choices[0].text for ch in c.completions.create(
            model="any", prompt="The capital of France is", temperature=0, max_tokens=8, stream=True) if ch.choices)
        check("completions: %r, streamed the same" % r.choices[0].text,
              len(r.choices[0].text) > 0 and streamed == r.choices[0].text and r.choices[0].finish_reason == "length")

        tools = [{"type": "function", "function": {
            "name": "get_weather", "description": "Get the current weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
        msgs = [{"role": "user", "content": "What's the weather like in Paris right now?"}]
        r = c.chat.completions.create(model="any", messages=msgs, tools=tools, temperature=0)
        calls = r.choices[0].message.tool_calls or []
        check("a tool call: %s" % [(t.function.name, t.function.arguments) for t in calls],
              r.choices[0].finish_reason == "tool_calls" and len(calls) == 1 and calls[0].function.name == "get_weather"
              and json.loads(calls[0].function.arguments).get("city") == "Paris")
        if calls:
            msgs += [r.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": calls[0].id, "content": json.dumps({"temperature_c": 21})}]
            r2 = c.chat.completions.create(model="any", messages=msgs, tools=tools, temperature=0, max_tokens=64)
            check("the tool's result goes back and an answer comes: %r" % r2.choices[0].message.content,
                  r2.choices[0].finish_reason in ("stop", "length") and r2.usage.prompt_tokens > r.usage.prompt_tokens)
        deltas, finish = [], None
        for ch in c.chat.completions.create(model="any", messages=msgs[:1], tools=tools, temperature=0, stream=True):
            for choice in ch.choices:
                deltas += choice.delta.tool_calls or []
                finish = choice.finish_reason or finish
        check("a streamed tool call", finish == "tool_calls" and len(deltas) == 1 and deltas[0].function.name == "get_weather")
        structured_tests(c)
    finally:
        s.stop()


def structured_tests(c):
    """response_format (json_object, json_schema) and forced tool calls, validated with jsonschema."""
    import jsonschema
    schema = {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 40},
        "population": {"type": "integer", "minimum": 0},
        "landmarks": {"type": "array", "items": {"type": "string", "maxLength": 40}, "maxItems": 3}},
        "required": ["city", "population", "landmarks"], "additionalProperties": False}
    msgs = [{"role": "user", "content": "Tell me about Paris."}]
    for seed in range(4):
        r = c.chat.completions.create(model="any", messages=msgs, temperature=0.8, seed=seed, max_tokens=200,
                                      response_format={"type": "json_schema", "json_schema": {
                                          "name": "city", "strict": True, "schema": schema}})
        text = r.choices[0].message.content
        try:
            jsonschema.validate(json.loads(text), schema)
            valid = True
        except Exception:  # noqa: BLE001 - any failure is the finding
            valid = False
        check("response_format json_schema (seed %d): %r validates" % (seed, text), valid and r.choices[0].finish_reason == "stop")
    r = c.chat.completions.create(model="any", messages=[{"role": "user", "content": "Describe a cat in JSON."}],
                                  temperature=0.7, seed=1, max_tokens=200, response_format={"type": "json_object"})
    try:
        obj = json.loads(r.choices[0].message.content)
    except ValueError:
        obj = None
    check("response_format json_object: %r is an object" % r.choices[0].message.content, isinstance(obj, dict))
    try:
        c.chat.completions.create(model="any", messages=msgs, response_format={"type": "json_schema", "json_schema": {
            "name": "x", "schema": {"type": "object", "not": {}}}})
        check("an unsupported schema keyword is refused", False)
    except openai.BadRequestError as e:
        check("an unsupported schema keyword is refused with 400 (%s)" % e.message, e.status_code == 400 and "not" in e.message)

    weather = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40},
                                                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
               "required": ["city", "unit"], "additionalProperties": False}
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", "parameters": weather}},
             {"type": "function", "function": {"name": "get_time", "description": "Time in a city",
                                               "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                              "required": ["city"]}}}]
    ask = [{"role": "user", "content": "Tell me a joke."}]   # no reason to call a tool, unless forced
    for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        r = c.chat.completions.create(model="any", messages=ask, tools=tools, tool_choice=choice, temperature=0.7, seed=3,
                                      max_tokens=120)
        calls = r.choices[0].message.tool_calls or []
        ok = r.choices[0].finish_reason == "tool_calls" and len(calls) == 1
        if ok:
            args = json.loads(calls[0].function.arguments)
            want = weather if calls[0].function.name == "get_weather" else tools[1]["function"]["parameters"]
            try:
                jsonschema.validate(args, want)
            except Exception:  # noqa: BLE001
                ok = False
            if isinstance(choice, dict):
                ok = ok and calls[0].function.name == "get_weather"
        check("tool_choice %s forces a call with valid arguments: %s" %
              (json.dumps(choice), [(t.function.name, t.function.arguments) for t in calls]), ok)
    try:
        c.chat.completions.create(model="any", messages=ask, tools=tools,
                                  tool_choice={"type": "function", "function": {"name": "nope"}})
        check("a forced call to an unknown tool is refused", False)
    except openai.BadRequestError as e:
        check("a forced call to an unknown tool is refused with 400 (%s)" % e.message, e.status_code == 400)


def embed_tests(binary, model):
    s = Server(binary, model)
    try:
        texts = ["a sentence about cats", "another one, about the sea"]
        r = s.client.embeddings.create(model="any", input=texts)
        out = subprocess.run([binary, "embed", "-m", model, "-p", texts[0], "-p", texts[1], "--json", "-t", "2"],
                             capture_output=True, text=True, timeout=120).stdout
        want = json.loads(out)["embeddings"]
        got = [d.embedding for d in r.data]
        diff = max(abs(x - y) for g, w in zip(got, want) for x, y in zip(g, w)) if len(got) == 2 else 1
        check("embeddings equal akunu embed (max difference %g)" % diff, len(got) == 2 and diff < 1e-5)
        check("unit vectors of 384", all(len(g) == 384 and abs(math.sqrt(sum(x * x for x in g)) - 1) < 1e-4 for g in got))
        try:
            s.client.chat.completions.create(model="any", messages=[{"role": "user", "content": "hi"}])
            check("chat on an encoder is refused", False)
        except openai.BadRequestError as e:
            check("chat on an encoder is refused with 400 (%s)" % e.message, e.status_code == 400)
    finally:
        s.stop()


def main():
    binary, models = sys.argv[1], sys.argv[2]
    chat_tests(binary, os.path.join(models, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"))
    embed_tests(binary, os.path.join(models, "all-MiniLM-L6-v2-f32.gguf"))
    print("%d failed" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
