/* Chat templates: family detection from the template text and one hand-written
 * formatter per family, matching the Jinja templates byte for byte on plain
 * system/user/assistant/tool conversations (tests/data/chat_refs, tools/gen_chat_refs.py). */
#include "model/chat.h"
#include "model/pyjson.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "core/err.h"

const char *ak_chat_family_name(ak_chat_family f) {
    static const char *const names[AK_CHAT_N_FAMILIES] = {
        "chatml", "qwen3", "llama3", "gemma", "llama2", "mistral", "mistral-nemo",
    };
    return (unsigned)f < AK_CHAT_N_FAMILIES ? names[f] : "?";
}

ak_chat_template ak_chat_template_chatml(void) {
    ak_chat_template t;
    memset(&t, 0, sizeof t);
    t.family = AK_CHAT_CHATML;
    return t;
}

/* ---- detection ---------------------------------------------------------------- */

static const char *find(const char *s, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; k <= n && i <= n - k; i++)
        if (s[i] == needle[0] && !memcmp(s + i, needle, k)) return s + i;
    return NULL;
}

static bool has(const char *s, size_t n, const char *needle) { return find(s, n, needle) != NULL; }

/* A ChatML template that inserts a default system message holds it as one string
 * literal: '<|im_start|>system\nYOU ARE ...<|im_end|>\n' (the newline either raw or
 * as the escape \n). A span holding a quote or a brace is an expression, not text. */
static bool chatml_default_system(const char *s, size_t n, char *out, size_t cap) {
    static const char head[] = "<|im_start|>system", tail[] = "<|im_end|>";
    const char *end = s + n, *p = s;
    while ((p = find(p, (size_t)(end - p), head)) != NULL) {
        p += sizeof head - 1;
        const char *q = p;
        if (q < end && *q == '\n') q++;
        else if (end - q >= 2 && q[0] == '\\' && q[1] == 'n') q += 2;
        else continue;
        const char *stop = find(q, (size_t)(end - q), tail);
        if (!stop || stop == q) continue;
        bool literal = true;
        for (const char *c = q; c < stop && literal; c++)
            literal = *c != '\'' && *c != '"' && *c != '{' && *c != '}';
        if (!literal) continue;
        size_t k = 0;
        for (const char *c = q; c < stop; c++) { /* Jinja string escapes */
            char ch = *c;
            if (ch == '\\' && c + 1 < stop) {
                c++;
                ch = *c == 'n' ? '\n' : *c == 't' ? '\t' : *c == 'r' ? '\r' : *c;
            }
            if (k + 1 >= cap) return false;
            out[k++] = ch;
        }
        out[k] = 0;
        return true;
    }
    return false;
}

ak_status ak_chat_detect(const char *s, size_t n, ak_chat_template *out, ak_err *err) {
    if (!s || !out) return ak_fail(err, AK_ERR_ARG, "chat template: NULL argument");
    *out = ak_chat_template_chatml();
    if (has(s, n, "<|im_start|>")) {
        /* Qwen3 finds the last real user query to decide where <think> blocks stay. */
        out->tool_response = has(s, n, "<tool_response>");
        if (has(s, n, "last_query_index") && has(s, n, "</think>")) {
            out->family = AK_CHAT_QWEN3;
            return AK_OK;
        }
        if (!chatml_default_system(s, n, out->default_system, sizeof out->default_system))
            out->default_system[0] = 0;
        return AK_OK;
    }
    if (has(s, n, "<|start_header_id|>") && has(s, n, "<|eot_id|>")) {
        out->family = AK_CHAT_LLAMA3;
        out->llama3_date = has(s, n, "Cutting Knowledge Date");
        return AK_OK;
    }
    if (has(s, n, "<start_of_turn>") && has(s, n, "<end_of_turn>")) {
        out->family = AK_CHAT_GEMMA;
        return AK_OK;
    }
    if (has(s, n, "[INST]") && !has(s, n, "[SYSTEM_PROMPT]")) {
        if (has(s, n, "<<SYS>>")) {
            out->family = AK_CHAT_LLAMA2;
            return AK_OK;
        }
        /* Tekken-era templates glue the markers to the text ("[INST]" + content). */
        if (has(s, n, "\"[INST]\" +") || has(s, n, "'[INST]' +")) {
            out->family = AK_CHAT_MISTRAL_NEMO;
            return AK_OK;
        }
        if ((has(s, n, "'[INST] ' +") && has(s, n, "' [/INST]'")) ||
            (has(s, n, "\"[INST] \" +") && has(s, n, "\" [/INST]\""))) {
            out->family = AK_CHAT_MISTRAL;
            return AK_OK;
        }
    }
    return ak_fail(err, AK_ERR_UNSUPPORTED,
                   "chat template not recognised (known: ChatML, Qwen3, Llama 2/3, Gemma, Mistral)");
}

/* ---- rendering ---------------------------------------------------------------- */

typedef ak_sbuf writer;
#define put ak_sbuf_put
#define puts_ ak_sbuf_puts

typedef struct { const char *p; size_t n; } span;

static span whole(const char *s) { return (span){s, strlen(s)}; }

/* Decode one UTF-8 code point at s[0..n); 0 bytes on malformed input. */
static size_t utf8_dec(const unsigned char *s, size_t n, uint32_t *cp) {
    if (n >= 1 && s[0] < 0x80) { *cp = s[0]; return 1; }
    size_t k = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 0;
    if (!k || k > n) return 0;
    uint32_t c = s[0] & (0x7F >> k);
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = c << 6 | (s[i] & 0x3F);
    }
    *cp = c;
    return k;
}

/* Python's str.isspace(), which Jinja's trim filter and str.strip() use. */
static bool py_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

static span ltrim(span s) {
    const unsigned char *p = (const unsigned char *)s.p;
    size_t a = 0;
    uint32_t cp;
    while (a < s.n) {
        size_t k = utf8_dec(p + a, s.n - a, &cp);
        if (!k || !py_space(cp)) break;
        a += k;
    }
    return (span){s.p + a, s.n - a};
}

static span rtrim(span s) {
    const unsigned char *p = (const unsigned char *)s.p;
    size_t b = s.n;
    uint32_t cp;
    while (b > 0) {
        size_t st = b - 1;
        while (st > 0 && (p[st] & 0xC0) == 0x80 && b - st < 4) st--;
        size_t k = utf8_dec(p + st, b - st, &cp);
        if (k != b - st || !py_space(cp)) break;
        b = st;
    }
    return (span){s.p, b};
}

static span trim(span s) { return rtrim(ltrim(s)); }

static span lstrip_nl(span s) {
    while (s.n && s.p[0] == '\n') s.p++, s.n--;
    return s;
}

static span rstrip_nl(span s) {
    while (s.n && s.p[s.n - 1] == '\n') s.n--;
    return s;
}

static void put_span(writer *w, span s) { put(w, s.p, s.n); }

static bool is(const char *role, const char *name) { return strcmp(role, name) == 0; }

/* The alternation test the Gemma, Llama 2 and Mistral templates run on message i of
 * the loop: (role == 'user') != (i % 2 == 0) raises. */
static bool alternates(const ak_chat_message *m, int n) {
    for (int i = 0; i < n; i++)
        if (is(m[i].role, "user") != (i % 2 == 0)) return false;
    return true;
}

static void chatml_turn(writer *w, const char *role, span content) {
    puts_(w, "<|im_start|>");
    puts_(w, role);
    puts_(w, "\n");
    put_span(w, content);
    puts_(w, "<|im_end|>\n");
}

/* Qwen 2.5 / 3: consecutive tool results share one user turn, one <tool_response> each. */
static void tool_response(writer *w, const ak_chat_message *m, int n, int i) {
    if (i == 0 || !is(m[i - 1].role, "tool")) puts_(w, "<|im_start|>user");
    puts_(w, "\n<tool_response>\n");
    puts_(w, m[i].content);
    puts_(w, "\n</tool_response>");
    if (i == n - 1 || !is(m[i + 1].role, "tool")) puts_(w, "<|im_end|>\n");
}

/* ---- tools: the definitions, and the calls of assistant turns, parsed once a render */

typedef struct {
    const ak_json *tools;        /* a non-empty array, or NULL */
    const ak_json **calls;       /* per message: a non-empty tool_calls array, or NULL */
} tooling;

/* A call's name and arguments, inside OpenAI's {"type", "function": {...}} or bare. */
static bool call_parts(const ak_json *c, const ak_json **name, const ak_json **args) {
    const ak_json *f = ak_json_get(c, "function");
    if (f) c = f;
    *name = ak_json_get(c, "name");
    *args = ak_json_get(c, "arguments");
    return *name && (*name)->type == AK_JSON_STR && *args &&
           ((*args)->type == AK_JSON_OBJ || (*args)->type == AK_JSON_STR);
}

/* Arguments as the templates' tojson writes an object: OpenAI sends them as a string of
 * JSON, which is read first (as llama.cpp's server does), so both forms render alike. */
static ak_status put_args(writer *w, const ak_json *args, ak_err *err) {
    if (args->type == AK_JSON_OBJ) {
        ak_pyjson_dump(w, args, 0);
        return AK_OK;
    }
    ak_json_doc *d;
    ak_err why = {{0}};   /* not err: ak_fail must not format err->msg into itself */
    if (ak_json_parse(args->s, args->len, &d, &why)) return ak_fail(err, AK_ERR_ARG, "chat: tool call arguments are not JSON: %s", why.msg);
    ak_pyjson_dump(w, ak_json_root(d), 0);
    ak_json_free(d);
    return AK_OK;
}

/* OPEN{"name": "NAME", "KEY": ARGS}CLOSE: one call as a family writes it (the name as it
 * is, as the templates put it). */
static ak_status put_call(writer *w, const ak_json *c, const char *open, const char *key, const char *close, ak_err *err) {
    const ak_json *name, *args;
    if (!call_parts(c, &name, &args)) return ak_fail(err, AK_ERR_ARG, "chat: a tool call needs a name and arguments");
    puts_(w, open);
    puts_(w, "{\"name\": \"");
    put(w, name->s, name->len);
    puts_(w, "\", \"");
    puts_(w, key);
    puts_(w, "\": ");
    ak_status st = put_args(w, args, err);
    puts_(w, "}");
    puts_(w, close);
    return st;
}

/* <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call> (Qwen 2.5 / 3, Hermes) */
static ak_status put_tool_call(writer *w, const ak_json *c, ak_err *err) {
    return put_call(w, c, "<tool_call>\n", "arguments", "\n</tool_call>", err);
}

/* The tool definitions one a line, as Qwen's system turn lists them. */
static void qwen_tools(writer *w, const ak_json *tools) {
    puts_(w, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
             "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
    for (const ak_json *t = tools->child; t; t = t->next) {
        puts_(w, "\n");
        ak_pyjson_dump(w, t, 0);
    }
    puts_(w, "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
             "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
             "<args-json-object>}\n</tool_call><|im_end|>\n");
}

/* ChatML: Qwen 2.5's handling of tools, which Hermes-style ChatML models share; a
 * template without tools of its own (SmolLM2's) gets the same. */
static ak_status render_chatml(writer *w, const ak_chat_template *t, const ak_chat_message *m, int n,
                               const ak_chat_opts *o, const tooling *tk, ak_err *err) {
    bool sys = is(m[0].role, "system");
    if (tk->tools) {
        puts_(w, "<|im_start|>system\n");
        puts_(w, sys ? m[0].content : t->default_system[0] ? t->default_system : "You are a helpful assistant.");
        puts_(w, "\n\n");
        qwen_tools(w, tk->tools);
    } else if (t->default_system[0] && !sys) {
        chatml_turn(w, "system", whole(t->default_system));
    }
    for (int i = tk->tools && sys ? 1 : 0; i < n; i++) {
        if (t->tool_response && is(m[i].role, "tool")) {
            tool_response(w, m, n, i);
        } else if (tk->calls[i] && is(m[i].role, "assistant")) {
            puts_(w, "<|im_start|>assistant");
            if (m[i].content[0]) puts_(w, "\n"), puts_(w, m[i].content);
            for (const ak_json *c = tk->calls[i]->child; c; c = c->next) {
                puts_(w, "\n");
                ak_status st = put_tool_call(w, c, err);
                if (st) return st;
            }
            puts_(w, "<|im_end|>\n");
        } else {
            chatml_turn(w, m[i].role, whole(m[i].content));
        }
    }
    if (o->add_generation_prompt) puts_(w, "<|im_start|>assistant\n");
    return AK_OK;
}

/* Qwen3: assistant turns keep their <think> block only after the last user query; the
 * final assistant turn there always gets one (empty if it had none). */
static ak_status render_qwen3(writer *w, const ak_chat_template *t, const ak_chat_message *m, int n,
                              const ak_chat_opts *o, const tooling *tk, ak_err *err) {
    bool sys = is(m[0].role, "system");
    if (tk->tools) {
        puts_(w, "<|im_start|>system\n");
        if (sys) puts_(w, m[0].content), puts_(w, "\n\n");
        qwen_tools(w, tk->tools);
    } else if (sys) {
        chatml_turn(w, "system", whole(m[0].content));
    }
    int last_query = n - 1;
    for (int i = n - 1; i >= 0; i--) {
        span c = whole(m[i].content);
        static const char ts[] = "<tool_response>", te[] = "</tool_response>";
        bool tool = c.n >= sizeof ts - 1 && !memcmp(c.p, ts, sizeof ts - 1) && c.n >= sizeof te - 1 &&
                    !memcmp(c.p + c.n - (sizeof te - 1), te, sizeof te - 1);
        if (is(m[i].role, "user") && !tool) { last_query = i; break; }
    }
    for (int i = sys ? 1 : 0; i < n; i++) {
        if (t->tool_response && is(m[i].role, "tool")) {
            tool_response(w, m, n, i);
            continue;
        }
        if (!is(m[i].role, "assistant")) {
            chatml_turn(w, m[i].role, whole(m[i].content));
            continue;
        }
        span content = whole(m[i].content), reasoning = {"", 0};
        const char *close = find(content.p, content.n, "</think>");
        if (close) {
            /* content.split('</think>')[-1].lstrip('\n') */
            const char *last = close, *q;
            while ((q = find(last + 8, (size_t)(content.p + content.n - (last + 8)), "</think>")) != NULL) last = q;
            span after = {last + 8, (size_t)(content.p + content.n - (last + 8))};
            /* content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
            span before = rstrip_nl((span){content.p, (size_t)(close - content.p)});
            const char *open = NULL;
            for (const char *s = before.p; (q = find(s, (size_t)(before.p + before.n - s), "<think>")) != NULL;
                 s = q + 1)
                open = q;
            if (open) before = (span){open + 7, (size_t)(before.p + before.n - (open + 7))};
            reasoning = lstrip_nl(before);
            content = lstrip_nl(after);
        }
        puts_(w, "<|im_start|>assistant\n");
        if (i > last_query && (i == n - 1 || reasoning.n)) {
            puts_(w, "<think>\n");
            put_span(w, lstrip_nl(rstrip_nl(reasoning)));
            puts_(w, "\n</think>\n\n");
            put_span(w, lstrip_nl(content));
        } else {
            put_span(w, content);
        }
        /* a newline before each call but a first that follows no content */
        for (const ak_json *c = tk->calls[i] ? tk->calls[i]->child : NULL; c; c = c->next) {
            if (c != tk->calls[i]->child || content.n) puts_(w, "\n");
            ak_status st = put_tool_call(w, c, err);
            if (st) return st;
        }
        puts_(w, "<|im_end|>\n");
    }
    if (o->add_generation_prompt) {
        puts_(w, "<|im_start|>assistant\n");
        if (o->disable_thinking) puts_(w, "<think>\n\n</think>\n\n");
    }
    return AK_OK;
}

static void llama3_turn(writer *w, const char *role, span content) {
    puts_(w, "<|start_header_id|>");
    puts_(w, role);
    puts_(w, "<|end_header_id|>\n\n");
    put_span(w, trim(content));
    puts_(w, "<|eot_id|>");
}

/* Llama 3.1+ with tools: the definitions (indented JSON) and a fixed instruction open
 * the first message after the system one, which the template takes as the user's. */
static ak_status llama3_tools(writer *w, const ak_chat_message *m, int n, const ak_json *tools, ak_err *err) {
    if (n == 0) return ak_fail(err, AK_ERR_ARG, "chat: Llama 3 puts the tools in the first user message, and there is none");
    puts_(w, "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON "
             "for a function call with its proper arguments that best answers the given prompt.\n\nRespond in the "
             "format {\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use "
             "variables.\n\n");
    for (const ak_json *t = tools->child; t; t = t->next) {
        ak_pyjson_dump(w, t, 4);
        puts_(w, "\n\n");
    }
    put_span(w, trim(whole(m[0].content)));
    puts_(w, "<|eot_id|>");
    return AK_OK;
}

/* Llama 3.1+: one call a turn, {"name": NAME, "parameters": ARGS}. */
static ak_status llama3_call(writer *w, const ak_json *calls, ak_err *err) {
    if (calls->len != 1) return ak_fail(err, AK_ERR_ARG, "chat: this model only supports single tool-calls at once");
    return put_call(w, calls->child, "<|start_header_id|>assistant<|end_header_id|>\n\n", "parameters", "<|eot_id|>", err);
}

/* Llama 3.0 puts BOS before the first turn; 3.1+ always opens with a system turn that
 * carries the knowledge cutoff and today's date before the (trimmed) system text, and
 * knows tools (3.0 has none: refused before we get here). */
static ak_status render_llama3(writer *w, const ak_chat_template *t, const ak_chat_message *m, int n,
                               const ak_chat_opts *o, const tooling *tk, ak_err *err) {
    const ak_json *const *calls = tk->calls;
    puts_(w, o->bos);
    if (t->llama3_date) {
        span sys = {"", 0};
        if (is(m[0].role, "system")) sys = trim(whole(m[0].content)), m++, n--, calls++;
        puts_(w, "<|start_header_id|>system<|end_header_id|>\n\n");
        if (tk->tools) puts_(w, "Environment: ipython\n");
        puts_(w, "Cutting Knowledge Date: December 2023\nToday Date: ");
        puts_(w, o->date ? o->date : "26 Jul 2024");
        puts_(w, "\n\n");
        put_span(w, sys);
        puts_(w, "<|eot_id|>");
        if (tk->tools) {
            ak_status st = llama3_tools(w, m, n, tk->tools, err);
            if (st) return st;
            m++, n--, calls++;
        }
    }
    for (int i = 0; i < n; i++) {
        ak_status st = AK_OK;
        if (t->llama3_date && (is(m[i].role, "tool") || is(m[i].role, "ipython"))) {
            /* a string is "iterable" to the template, so it goes through tojson */
            puts_(w, "<|start_header_id|>ipython<|end_header_id|>\n\n");
            ak_pyjson_string(w, m[i].content, strlen(m[i].content));
            puts_(w, "<|eot_id|>");
        } else if (t->llama3_date && calls[i]) {
            st = llama3_call(w, calls[i], err);
        } else {
            llama3_turn(w, m[i].role, whole(m[i].content));
        }
        if (st) return st;
    }
    if (o->add_generation_prompt) puts_(w, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return AK_OK;
}

/* Gemma 3 prefixes a system message (+ "\n\n") to the first turn. Gemma 1/2 templates
 * reject a system message; we render it the Gemma 3 way instead. */
static ak_status render_gemma(writer *w, const ak_chat_message *m, int n, const ak_chat_opts *o, ak_err *err) {
    const char *prefix = NULL;
    if (is(m[0].role, "system")) prefix = m[0].content, m++, n--;
    if (!alternates(m, n)) return ak_fail(err, AK_ERR_ARG, "chat: Gemma needs user/assistant turns to alternate");
    puts_(w, o->bos);
    for (int i = 0; i < n; i++) {
        puts_(w, "<start_of_turn>");
        puts_(w, is(m[i].role, "assistant") ? "model" : m[i].role);
        puts_(w, "\n");
        if (i == 0 && prefix) puts_(w, prefix), puts_(w, "\n\n");
        put_span(w, trim(whole(m[i].content)));
        puts_(w, "<end_of_turn>\n");
    }
    if (o->add_generation_prompt) puts_(w, "<start_of_turn>model\n");
    return AK_OK;
}

/* Llama 2 chat: the system text joins the first user turn inside <<SYS>>; every user
 * turn opens with BOS; the generation prompt is implicit (text ends with [/INST]). */
static ak_status render_llama2(writer *w, const ak_chat_message *m, int n, const ak_chat_opts *o, ak_err *err) {
    const char *sys = NULL;
    if (is(m[0].role, "system")) sys = m[0].content, m++, n--;
    if (!alternates(m, n)) return ak_fail(err, AK_ERR_ARG, "chat: Llama 2 needs user/assistant turns to alternate");
    for (int i = 0; i < n; i++) {
        if (is(m[i].role, "user")) {
            puts_(w, o->bos);
            puts_(w, "[INST] ");
            if (i == 0 && sys) {
                /* ('<<SYS>>\n' + sys + '\n<</SYS>>\n\n' + content).strip(): only the
                 * tail can lose whitespace, the "\n\n" too when content is blank */
                puts_(w, "<<SYS>>\n");
                puts_(w, sys);
                puts_(w, "\n<</SYS>>");
                span c = rtrim(whole(m[i].content));
                if (c.n) puts_(w, "\n\n"), put_span(w, c);
            } else {
                put_span(w, trim(whole(m[i].content)));
            }
            puts_(w, " [/INST]");
        } else if (is(m[i].role, "system")) {
            puts_(w, "<<SYS>>\n");
            put_span(w, trim(whole(m[i].content)));
            puts_(w, "\n<</SYS>>\n\n");
        } else if (is(m[i].role, "assistant")) {
            puts_(w, " ");
            put_span(w, trim(whole(m[i].content)));
            puts_(w, " ");
            puts_(w, o->eos);
        }
    }
    return AK_OK;
}

static ak_status render_mistral(writer *w, const ak_chat_message *m, int n, const ak_chat_opts *o, ak_err *err) {
    if (!alternates(m, n))
        return ak_fail(err, AK_ERR_ARG, "chat: Mistral needs user/assistant turns to alternate (no system role)");
    puts_(w, o->bos);
    for (int i = 0; i < n; i++) {
        if (is(m[i].role, "user")) {
            puts_(w, "[INST] ");
            puts_(w, m[i].content);
            puts_(w, " [/INST]");
        } else if (is(m[i].role, "assistant")) {
            puts_(w, m[i].content);
            puts_(w, o->eos);
        } else {
            return ak_fail(err, AK_ERR_ARG, "chat: Mistral supports only user and assistant roles");
        }
    }
    return AK_OK;
}

/* Mistral Nemo: the system text goes into the last turn, and only when that turn is the
 * user's (a conversation ending with the assistant loses it, as in the template). */
static ak_status render_nemo(writer *w, const ak_chat_message *m, int n, const ak_chat_opts *o, ak_err *err) {
    const char *sys = NULL;
    if (is(m[0].role, "system")) sys = m[0].content, m++, n--;
    if (!alternates(m, n))
        return ak_fail(err, AK_ERR_ARG, "chat: after the optional system message, roles must alternate user/assistant");
    puts_(w, o->bos);
    for (int i = 0; i < n; i++) {
        if (is(m[i].role, "user")) {
            puts_(w, "[INST]");
            if (i == n - 1 && sys) puts_(w, sys), puts_(w, "\n\n");
            puts_(w, m[i].content);
            puts_(w, "[/INST]");
        } else if (is(m[i].role, "assistant")) {
            puts_(w, m[i].content);
            puts_(w, o->eos);
        } else {
            return ak_fail(err, AK_ERR_ARG, "chat: Mistral supports only user and assistant roles");
        }
    }
    return AK_OK;
}

/* Parses o->tools and every message's tool_calls (JSON texts) into tk; NULL where
 * absent or empty, as the templates' `if tools` reads an empty list. */
static ak_status parse_tooling(const ak_chat_message *msgs, int n, const ak_chat_opts *o, ak_json_doc **docs,
                               tooling *tk, ak_err *err) {
    for (int i = -1; i < n; i++) {
        const char *text = i < 0 ? o->tools : msgs[i].tool_calls;
        if (!text) continue;
        ak_json_doc **d = &docs[i + 1];
        ak_err why = {{0}};
        if (ak_json_parse(text, strlen(text), d, &why))
            return ak_fail(err, AK_ERR_ARG, "chat: %s are not JSON: %s", i < 0 ? "the tools" : "tool calls", why.msg);
        const ak_json *v = ak_json_root(*d);
        if (v->type != AK_JSON_ARR)
            return ak_fail(err, AK_ERR_ARG, "chat: %s must be a JSON array", i < 0 ? "the tools" : "tool calls");
        if (!v->len) continue;
        if (i < 0) tk->tools = v;
        else tk->calls[i] = v;
    }
    return AK_OK;
}

static ak_status render(writer *w, const ak_chat_template *t, const ak_chat_message *msgs, int n, const ak_chat_opts *o,
                        const tooling *tk, ak_err *err) {
    bool tools_ok = t->family == AK_CHAT_CHATML || t->family == AK_CHAT_QWEN3 || (t->family == AK_CHAT_LLAMA3 && t->llama3_date);
    if (tk->tools && !tools_ok)
        return ak_fail(err, AK_ERR_UNSUPPORTED, "chat: the %s chat template has no tools", ak_chat_family_name(t->family));
    switch (t->family) {
    case AK_CHAT_CHATML: return render_chatml(w, t, msgs, n, o, tk, err);
    case AK_CHAT_QWEN3: return render_qwen3(w, t, msgs, n, o, tk, err);
    case AK_CHAT_LLAMA3: return render_llama3(w, t, msgs, n, o, tk, err);
    case AK_CHAT_GEMMA: return render_gemma(w, msgs, n, o, err);
    case AK_CHAT_LLAMA2: return render_llama2(w, msgs, n, o, err);
    case AK_CHAT_MISTRAL: return render_mistral(w, msgs, n, o, err);
    case AK_CHAT_MISTRAL_NEMO: return render_nemo(w, msgs, n, o, err);
    default: return ak_fail(err, AK_ERR_ARG, "chat render: bad family %d", (int)t->family);
    }
}

ak_status ak_chat_template_render(const ak_chat_template *t, const ak_chat_message *msgs, int n, const ak_chat_opts *opts,
                         char *buf, size_t cap, size_t *n_out, ak_err *err) {
    if (!t || !n_out || (!buf && cap)) return ak_fail(err, AK_ERR_ARG, "chat render: NULL argument");
    if (!msgs || n <= 0) return ak_fail(err, AK_ERR_ARG, "chat render: no messages");
    for (int i = 0; i < n; i++)
        if (!msgs[i].role || (!msgs[i].content && !msgs[i].tool_calls))
            return ak_fail(err, AK_ERR_ARG, "chat render: message %d has no %s", i, msgs[i].role ? "content" : "role");
    ak_chat_opts o = {0};
    if (opts) o = *opts;
    if (!o.bos) o.bos = "";
    if (!o.eos) o.eos = "";
    /* a message of tool calls alone has content "" to the formatters */
    ak_chat_message *m = malloc((size_t)n * sizeof *m);
    ak_json_doc **docs = calloc((size_t)n + 1, sizeof *docs);
    tooling tk = {NULL, calloc((size_t)n, sizeof *tk.calls)};
    ak_status st = m && docs && tk.calls ? AK_OK : ak_fail(err, AK_ERR_NOMEM, "chat render: out of memory");
    for (int i = 0; !st && i < n; i++) {
        m[i] = msgs[i];
        if (!m[i].content) m[i].content = "";
    }
    if (!st) st = parse_tooling(msgs, n, &o, docs, &tk, err);
    writer w = {buf, cap, 0};
    if (!st) st = render(&w, t, m, n, &o, &tk, err);
    for (int i = 0; docs && i <= n; i++) ak_json_free(docs[i]);
    free(docs);
    free((void *)tk.calls);
    free(m);
    if (st != AK_OK) return st;
    *n_out = w.len;
    if (!buf) return AK_OK;
    if (w.len >= cap) return ak_fail(err, AK_ERR_ARG, "chat render: needs %zu bytes, buffer has %zu", w.len + 1, cap);
    buf[w.len] = 0;
    return AK_OK;
}

/* ---- tool calls in a reply ---------------------------------------------------------- */

static void free_calls(ak_chat_call *calls, int n) {
    for (int i = 0; i < n; i++) free(calls[i].name), free(calls[i].arguments);
    free(calls);
}

static char *dup_span(const char *p, size_t n) {
    char *s = malloc(n + 1);
    if (s) memcpy(s, p, n), s[n] = 0;
    return s;
}

/* One call from a JSON object with a string name and its arguments under key (an object,
 * or a string holding one). False when the text is not such an object. */
static bool parse_call(const char *p, size_t n, const char *key, ak_chat_call *out) {
    ak_json_doc *d;
    if (ak_json_parse(p, n, &d, NULL)) return false;
    const ak_json *v = ak_json_root(d), *name = ak_json_get(v, "name"), *args = ak_json_get(v, key);
    bool ok = v->type == AK_JSON_OBJ && name && name->type == AK_JSON_STR && args &&
              (args->type == AK_JSON_OBJ || args->type == AK_JSON_STR);
    ak_json_doc *ad = NULL;
    if (ok && args->type == AK_JSON_STR) {   /* a string of JSON: it must hold an object */
        ok = !ak_json_parse(args->s, args->len, &ad, NULL) && ak_json_root(ad)->type == AK_JSON_OBJ;
        if (ok) args = ak_json_root(ad);
    }
    if (ok) {
        ak_sbuf w = {NULL, 0, 0};
        ak_pyjson_dump(&w, args, 0);
        out->name = dup_span(name->s, name->len);
        out->arguments = malloc(w.len + 1);
        if (out->arguments) {
            w = (ak_sbuf){out->arguments, w.len + 1, 0};
            ak_pyjson_dump(&w, args, 0);
            out->arguments[w.len] = 0;
        }
        ok = out->name && out->arguments;
        if (!ok) free(out->name), free(out->arguments);
    }
    ak_json_free(ad);
    ak_json_free(d);
    return ok;
}

/* A reply that is one call and nothing else: Llama 3.1+'s form ({"name", "parameters"},
 * perhaps after its python tag), and what small Qwen models often write instead of a
 * <tool_call> block (the bare {"name", "arguments"} object, perhaps in a ```json fence). */
static bool whole_call(const ak_chat_template *t, span all, ak_chat_call *out) {
    bool llama = t->family == AK_CHAT_LLAMA3 && t->llama3_date;
    if (!llama && t->family != AK_CHAT_CHATML && t->family != AK_CHAT_QWEN3) return false;
    static const char tag[] = "<|python_tag|>", fence[] = "```";
    if (llama && all.n >= sizeof tag - 1 && !memcmp(all.p, tag, sizeof tag - 1))
        all = trim((span){all.p + sizeof tag - 1, all.n - (sizeof tag - 1)});
    if (all.n >= 6 && !memcmp(all.p, fence, 3) && !memcmp(all.p + all.n - 3, fence, 3)) {
        const char *nl = memchr(all.p, '\n', all.n);   /* past the language name */
        if (nl && nl < all.p + all.n - 3) all = trim((span){nl + 1, (size_t)(all.p + all.n - 3 - (nl + 1))});
    }
    if (!all.n || all.p[0] != '{') return false;
    return parse_call(all.p, all.n, "arguments", out) || (llama && parse_call(all.p, all.n, "parameters", out));
}

ak_status ak_chat_template_parse_calls(const ak_chat_template *t, const char *text, size_t len, ak_chat_call **calls,
                                       int *n_calls, char **content, ak_err *err) {
    *calls = NULL;
    *n_calls = 0;
    *content = NULL;
    char *rest = malloc(len + 1);   /* the content without the calls: never longer than the text */
    size_t r = 0;
    int n = 0, cap = 0;
    ak_chat_call *c = NULL;
    if (!rest) return ak_fail(err, AK_ERR_NOMEM, "chat: out of memory");
    span all = trim((span){text, len});
    ak_chat_call one;
    if (whole_call(t, all, &one)) {
        if (!(c = malloc(sizeof *c))) { free(one.name), free(one.arguments), free(rest); return ak_fail(err, AK_ERR_NOMEM, "chat: out of memory"); }
        c[n++] = one;
    } else if (t->family == AK_CHAT_LLAMA3 && t->llama3_date) {
        memcpy(rest, all.p, all.n);
        r = all.n;
    } else if (t->family == AK_CHAT_CHATML || t->family == AK_CHAT_QWEN3) {
        static const char open[] = "<tool_call>", close[] = "</tool_call>";
        const char *p = text, *end = text + len;
        while (p < end) {
            const char *a = find(p, (size_t)(end - p), open);
            const char *b = a ? find(a, (size_t)(end - a), close) : NULL;
            ak_chat_call one;
            span body = a && b ? trim((span){a + sizeof open - 1, (size_t)(b - a - (sizeof open - 1))}) : (span){NULL, 0};
            if (!b || !parse_call(body.p, body.n, "arguments", &one)) {   /* no (more) calls: text */
                const char *stop = b ? b + sizeof close - 1 : end;
                memcpy(rest + r, p, (size_t)(stop - p));
                r += (size_t)(stop - p);
                p = stop;
                continue;
            }
            if (n == cap) {
                ak_chat_call *g = realloc(c, (size_t)(cap = cap ? 2 * cap : 4) * sizeof *c);
                if (!g) { free(one.name), free(one.arguments), free_calls(c, n), free(rest); return ak_fail(err, AK_ERR_NOMEM, "chat: out of memory"); }
                c = g;
            }
            c[n++] = one;
            memcpy(rest + r, p, (size_t)(a - p));
            r += (size_t)(a - p);
            p = b + sizeof close - 1;
        }
        if (n) { /* the text around calls: what the model said beside them */
            span t2 = trim((span){rest, r});
            memmove(rest, t2.p, t2.n);
            r = t2.n;
        }
    } else {
        memcpy(rest, text, len);
        r = len;
    }
    rest[r] = 0;
    *calls = c;
    *n_calls = n;
    *content = rest;
    return AK_OK;
}

void ak_chat_calls_free(ak_chat_call *calls, int n) { free_calls(calls, n); }
