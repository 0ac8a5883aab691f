#!/usr/bin/env python3
"""Render the chat test conversations with the real chat templates (Jinja) into
tests/data/chat_refs/, the expected output of src/model/chat.c.

    python3 tools/gen_chat_refs.py            # rewrites tests/data/chat_refs/

Needs jinja2 (pip install jinja2); CI does not run this, it reads the committed files.

Jinja is set up the way Hugging Face transformers' apply_chat_template sets it up:
an ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and the loopcontrols
extension; globals raise_exception and strftime_now; a tojson filter that keeps
non-ASCII text; render variables messages, tools (None), add_generation_prompt and
the special token texts bos_token / eos_token. strftime_now returns a fixed date
(26 Jul 2024, the Llama 3.x templates' own default) so the files are reproducible.

Output, per template T (tests/data/chat_templates/T.jinja), conversation C and
generation prompt G (gen / nogen):
  T.C.G.txt   the rendered text, byte for byte
  T.C.G.err   the template raised (its message), the renderer must fail too
  T.C.G.skip  no reference: tools for a ChatML template that has none (akunu writes them
              the Hermes / Qwen 2.5 way; test_chat.c checks that apart)
plus conversations.txt (the conversations) and manifest.txt (template -> family,
bos, eos), which tests/model/test_chat.c reads.
"""

import json
import os
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TEMPLATES = os.path.join(ROOT, "tests", "data", "chat_templates")
OUT = os.path.join(ROOT, "tests", "data", "chat_refs")

# template file stem -> (family name as in ak_chat_family_name, bos text, eos text)
FAMILIES = {
    "smollm2-135m-instruct": ("chatml", "<|im_start|>", "<|im_end|>"),
    "qwen2.5-0.5b": ("chatml", "", "<|endoftext|>"),
    "qwen3-0.6b": ("qwen3", "", "<|im_end|>"),
    "meta-llama-3-8b-instruct": ("llama3", "<|begin_of_text|>", "<|eot_id|>"),
    "llama-3.2-3b-instruct": ("llama3", "<|begin_of_text|>", "<|eot_id|>"),
    "gemma-2-2b-it": ("gemma", "<bos>", "<eos>"),
    "gemma-3-it": ("gemma", "<bos>", "<eos>"),
    "llama-2-chat": ("llama2", "<s>", "</s>"),
    "mistral-7b-instruct-v0.2": ("mistral", "<s>", "</s>"),
    "mistral-nemo-instruct-2407": ("mistral-nemo", "<s>", "</s>"),
}

S, U, A, T = "system", "user", "assistant", "tool"
CONVERSATIONS = [
    ("single", [(U, "Hello!")]),
    ("system", [(S, "You are a terse assistant."), (U, "What is 2+2?")]),
    ("multi", [(U, "Hi there"), (A, "Hello! How can I help?"), (U, "  Tell me more.  \n")]),
    ("multi_system", [(S, " Be brief. "), (U, "Name a colour."), (A, "Blue.\n"), (U, "Another?"),
                      (A, "Green.")]),
    ("unicode", [(S, "Réponds en français 🇫🇷"), (U, "こんにちは、世界！\u3000"), (A, "\u00a0Привет 👋"),
                 (U, "¿Qué tal? ñ\t")]),
    ("not_alternating", [(U, "first"), (U, "second")]),
    ("blank", [(S, "Sys"), (U, " \n "), (A, ""), (U, "x")]),
    ("think_history", [(U, "Hi"), (A, "<think>\nThe user greets me.\n</think>\n\nHello! How can I help?"),
                       (U, "What's 1+1?")]),
    ("think_last", [(U, "What's 1+1?"), (A, "<think>\nadd them\n</think>\n\n2")]),
    ("tool", [(S, "You can call tools."), (U, "Weather in Paris?"), (A, "Let me check."), (T, '{"temp": 21}'),
              (T, '{"rain": false, "note": "tab\there \\ \"q\""}'), (U, "Thanks")]),
    ("tool_last", [(U, "Weather?"), (A, "Checking."), (T, "sunny\n\u0001")]),
    # tool definitions and calls (the call's arguments as an object, as llama.cpp's server
    # hands them to the template after reading OpenAI's string)
    ("tools_call", [(S, "You are a helpful assistant with tools."), (U, "Weather in Paris?"),
                    (A, "", [{"type": "function", "function": {"name": "get_weather",
                                                               "arguments": {"city": "Paris", "unit": "celsius"}}}]),
                    (T, '{"temp": 21.5}'), (U, "Thanks")], "TOOLS"),
    ("tools_first", [(U, "  What is 2+2?  ")], "TOOLS"),
    ("calls_no_tools", [(U, "Time?"), (A, "Let me look.", [{"type": "function", "function": {"name": "clock", "arguments": {
                            "tz": "UTC", "n": [1, 2.5, True, None, 1e-07, 1e+16, -0.0]}}}]),
                        (T, "12:00"), (U, "ok")]),
]

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city. Résumé: °C",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string", "description": "the \"city\""},
                                          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                                          "required": ["city"]}}},
    {"type": "function", "function": {"name": "clock", "description": "The time", "parameters": {
        "type": "object", "properties": {}, "required": []}}},
]


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: "26 Jul 2024"
    return env


def escape(s):
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")


def write(path, text):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def main():
    os.makedirs(OUT, exist_ok=True)
    for name in os.listdir(OUT):
        if name.endswith((".txt", ".err", ".skip")):
            os.remove(os.path.join(OUT, name))
    env = make_env()
    conv_lines = []
    for cname, msgs, *tools in CONVERSATIONS:
        conv_lines.append("conv " + cname)
        if tools:
            conv_lines.append("tools " + escape(json.dumps(TOOLS, ensure_ascii=False)))
        for m in msgs:
            conv_lines.append("%s %s" % (m[0], escape(m[1])))
            if len(m) > 2:
                conv_lines.append("calls " + escape(json.dumps(m[2], ensure_ascii=False)))
    write(os.path.join(OUT, "conversations.txt"), "\n".join(conv_lines) + "\n")

    manifest = ["# template-stem family bos eos (tools/gen_chat_refs.py)"]
    count = 0
    for stem, (family, bos, eos) in FAMILIES.items():
        with open(os.path.join(TEMPLATES, stem + ".jinja"), encoding="utf-8") as f:
            tmpl_text = f.read()
        tmpl = env.from_string(tmpl_text)
        manifest.append("%s %s %s %s" % (stem, family, bos, eos))
        # the families whose tools akunu renders (others: refused, since most of their
        # templates would drop them silently)
        has_tools = "tools" in tmpl_text and family in ("chatml", "qwen3", "llama3")
        for cname, msgs, *tools in CONVERSATIONS:
            messages = [dict({"role": m[0], "content": m[1]}, **({"tool_calls": m[2]} if len(m) > 2 else {})) for m in msgs]
            calls = any(len(m) > 2 for m in msgs)
            for gen in (True, False):
                base = os.path.join(OUT, "%s.%s.%s" % (stem, cname, "gen" if gen else "nogen"))
                count += 1
                # Where the template knows no tools, Jinja drops them silently; akunu writes
                # ChatML's the Hermes / Qwen way (no reference: test_chat checks it apart) and
                # refuses tools in the other families.
                if (tools or calls) and not has_tools and family == "chatml":
                    write(base + ".skip", "the template has no tools; akunu writes them the Hermes / Qwen 2.5 way\n")
                    continue
                if tools and not has_tools:
                    write(base + ".err", "akunu refuses tools that this template would drop\n")
                    continue
                try:
                    text = tmpl.render(messages=messages, tools=TOOLS if tools else None, add_generation_prompt=gen,
                                       bos_token=bos, eos_token=eos)
                    write(base + ".txt", text)
                except jinja2.exceptions.TemplateError as e:
                    write(base + ".err", str(e) + "\n")
    write(os.path.join(OUT, "manifest.txt"), "\n".join(manifest) + "\n")
    print("%d references in %s" % (count, OUT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
