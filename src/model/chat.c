/* Chat templates: family detection from the template text and one hand-written
 * formatter per family, matching the Jinja templates byte for byte on plain
 * system/user/assistant/tool conversations (tests/data/chat_refs, tools/gen_chat_refs.py). */
#include "model/chat.h"
#include <stdint.h>
#include <stdio.h>
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

typedef struct {
    char *buf;
    size_t cap, len;
} writer;

static void put(writer *w, const char *s, size_t n) {
    if (w->buf && w->len + n < w->cap) memcpy(w->buf + w->len, s, n);
    w->len += n;
}

static void puts_(writer *w, const char *s) { put(w, s, strlen(s)); }

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

static ak_status render_chatml(writer *w, const ak_chat_template *t, const ak_chat_message *m, int n,
                               const ak_chat_opts *o) {
    if (t->default_system[0] && !is(m[0].role, "system")) chatml_turn(w, "system", whole(t->default_system));
    for (int i = 0; i < n; i++) {
        if (t->tool_response && is(m[i].role, "tool")) tool_response(w, m, n, i);
        else chatml_turn(w, m[i].role, whole(m[i].content));
    }
    if (o->add_generation_prompt) puts_(w, "<|im_start|>assistant\n");
    return AK_OK;
}

/* Qwen3: assistant turns keep their <think> block only after the last user query; the
 * final assistant turn there always gets one (empty if it had none). */
static ak_status render_qwen3(writer *w, const ak_chat_template *t, const ak_chat_message *m, int n,
                              const ak_chat_opts *o) {
    int last_query = n - 1;
    for (int i = n - 1; i >= 0; i--) {
        span c = whole(m[i].content);
        static const char ts[] = "<tool_response>", te[] = "</tool_response>";
        bool tool = c.n >= sizeof ts - 1 && !memcmp(c.p, ts, sizeof ts - 1) && c.n >= sizeof te - 1 &&
                    !memcmp(c.p + c.n - (sizeof te - 1), te, sizeof te - 1);
        if (is(m[i].role, "user") && !tool) { last_query = i; break; }
    }
    for (int i = 0; i < n; i++) {
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
        puts_(w, "<|im_end|>\n");
    }
    if (o->add_generation_prompt) {
        puts_(w, "<|im_start|>assistant\n");
        if (o->disable_thinking) puts_(w, "<think>\n\n</think>\n\n");
    }
    return AK_OK;
}

/* Python's json.dumps(s, ensure_ascii=False): quotes, backslashes and control
 * characters escaped, everything else as it is. */
static void put_json_string(writer *w, const char *s) {
    puts_(w, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r" :
                        c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        char u[8];
        if (!e && c < 0x20) snprintf(u, sizeof u, "\\u%04x", c), e = u;
        if (e) puts_(w, e);
        else put(w, s, 1);
    }
    puts_(w, "\"");
}

static void llama3_turn(writer *w, const char *role, span content) {
    puts_(w, "<|start_header_id|>");
    puts_(w, role);
    puts_(w, "<|end_header_id|>\n\n");
    put_span(w, trim(content));
    puts_(w, "<|eot_id|>");
}

/* Llama 3.0 puts BOS before the first turn; 3.1+ always opens with a system turn that
 * carries the knowledge cutoff and today's date before the (trimmed) system text. */
static ak_status render_llama3(writer *w, const ak_chat_template *t, const ak_chat_message *m, int n,
                               const ak_chat_opts *o) {
    puts_(w, o->bos);
    if (t->llama3_date) {
        span sys = {"", 0};
        if (is(m[0].role, "system")) sys = trim(whole(m[0].content)), m++, n--;
        puts_(w, "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: ");
        puts_(w, o->date ? o->date : "26 Jul 2024");
        puts_(w, "\n\n");
        put_span(w, sys);
        puts_(w, "<|eot_id|>");
    }
    for (int i = 0; i < n; i++) {
        if (t->llama3_date && (is(m[i].role, "tool") || is(m[i].role, "ipython"))) {
            /* a string is "iterable" to the template, so it goes through tojson */
            puts_(w, "<|start_header_id|>ipython<|end_header_id|>\n\n");
            put_json_string(w, m[i].content);
            puts_(w, "<|eot_id|>");
        } else {
            llama3_turn(w, m[i].role, whole(m[i].content));
        }
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

ak_status ak_chat_template_render(const ak_chat_template *t, const ak_chat_message *msgs, int n, const ak_chat_opts *opts,
                         char *buf, size_t cap, size_t *n_out, ak_err *err) {
    if (!t || !n_out || (!buf && cap)) return ak_fail(err, AK_ERR_ARG, "chat render: NULL argument");
    if (!msgs || n <= 0) return ak_fail(err, AK_ERR_ARG, "chat render: no messages");
    for (int i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content) return ak_fail(err, AK_ERR_ARG, "chat render: message %d is NULL", i);
    ak_chat_opts o = {0};
    if (opts) o = *opts;
    if (!o.bos) o.bos = "";
    if (!o.eos) o.eos = "";
    writer w = {buf, cap, 0};
    ak_status st;
    switch (t->family) {
    case AK_CHAT_CHATML: st = render_chatml(&w, t, msgs, n, &o); break;
    case AK_CHAT_QWEN3: st = render_qwen3(&w, t, msgs, n, &o); break;
    case AK_CHAT_LLAMA3: st = render_llama3(&w, t, msgs, n, &o); break;
    case AK_CHAT_GEMMA: st = render_gemma(&w, msgs, n, &o, err); break;
    case AK_CHAT_LLAMA2: st = render_llama2(&w, msgs, n, &o, err); break;
    case AK_CHAT_MISTRAL: st = render_mistral(&w, msgs, n, &o, err); break;
    case AK_CHAT_MISTRAL_NEMO: st = render_nemo(&w, msgs, n, &o, err); break;
    default: return ak_fail(err, AK_ERR_ARG, "chat render: bad family %d", (int)t->family);
    }
    if (st != AK_OK) return st;
    *n_out = w.len;
    if (!buf) return AK_OK;
    if (w.len >= cap) return ak_fail(err, AK_ERR_ARG, "chat render: needs %zu bytes, buffer has %zu", w.len + 1, cap);
    buf[w.len] = 0;
    return AK_OK;
}
