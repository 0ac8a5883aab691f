/* Chat templates: every template in tests/data/chat_templates is detected as the family
 * manifest.txt names, and renders every conversation of conversations.txt exactly as
 * Jinja did (tests/data/chat_refs, written by tools/gen_chat_refs.py), or fails where
 * the template raised. Data folder: argv[1], AKUNU_CHAT_DATA, or beside this file. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "model/chat.h"
#include "test_util.h"

#define MAX_CONV 32
#define MAX_MSG 16

typedef struct {
    char name[64];
    int n;
    ak_chat_message msg[MAX_MSG];
    const char *tools;     /* JSON, or NULL */
} conv;

static char data_dir[4096];

static char *read_text(const char *dir, const char *name, size_t *size) {
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", data_dir, dir[0] ? dir : ".");
    snprintf(path + strlen(path), sizeof path - strlen(path), "/%s", name);
    size_t n = 0;
    char *p = ak_read_file(path, &n);
    if (!p) return NULL;
    char *s = realloc(p, n + 1);
    if (!s) { free(p); return NULL; }
    s[n] = 0;
    if (size) *size = n;
    return s;
}

/* Undo tools/gen_chat_refs.py's escape() in place. */
static char *unescape(char *s) {
    char *o = s;
    for (char *p = s; *p; p++) {
        if (*p == '\\' && p[1]) {
            p++;
            *o++ = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p == 'r' ? '\r' : *p;
        } else {
            *o++ = *p;
        }
    }
    *o = 0;
    return s;
}

/* conversations.txt: "conv NAME" then one "ROLE CONTENT" line per message. */
static int parse_convs(char *text, conv *cv) {
    int nc = -1;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *sp = strchr(line, ' ');
        if (!sp) continue;
        *sp = 0;
        if (!strcmp(line, "conv")) {
            if (++nc >= MAX_CONV) return -1;
            snprintf(cv[nc].name, sizeof cv[nc].name, "%s", sp + 1);
            cv[nc].n = 0;
            cv[nc].tools = NULL;
        } else if (nc >= 0 && !strcmp(line, "tools")) {
            cv[nc].tools = unescape(sp + 1);
        } else if (nc >= 0 && !strcmp(line, "calls") && cv[nc].n > 0) {
            cv[nc].msg[cv[nc].n - 1].tool_calls = unescape(sp + 1);
        } else if (nc >= 0 && cv[nc].n < MAX_MSG) {
            cv[nc].msg[cv[nc].n++] = (ak_chat_message){line, unescape(sp + 1), NULL};
        }
    }
    return nc + 1;
}

static char *render(const ak_chat_template *t, const conv *c, const ak_chat_opts *o, ak_status *st, ak_err *err) {
    size_t need = 0;
    *st = ak_chat_template_render(t, c->msg, c->n, o, NULL, 0, &need, err);
    if (*st != AK_OK) return NULL;
    char *buf = malloc(need + 1);
    size_t got = 0;
    *st = ak_chat_template_render(t, c->msg, c->n, o, buf, need + 1, &got, err);
    CHECK(*st != AK_OK || (got == need && strlen(buf) == need), "%s: size query %zu, render %zu", c->name, need, got);
    return buf;
}

/* snprintf into name, false when it does not fit */
static bool fmt_name(char *name, size_t cap, const char *a, const char *b, const char *c, const char *ext) {
    int k = snprintf(name, cap, "%s.%s.%s.%s", a, b, c, ext);
    return k > 0 && (size_t)k < cap;
}

static void test_template(const char *stem, const char *family, const char *bos, const char *eos, const conv *cv,
                          int nc, int *checked) {
    char name[512];
    int k = snprintf(name, sizeof name, "%s.jinja", stem);
    CHECK(k > 0 && (size_t)k < sizeof name, "template name too long");
    size_t len = 0;
    char *tmpl = read_text("chat_templates", name, &len);
    CHECK(tmpl != NULL, "cannot read template %s", name);
    if (!tmpl) return;
    ak_chat_template t;
    ak_err err = {{0}};
    ak_status st = ak_chat_detect(tmpl, len, &t, &err);
    CHECK(st == AK_OK && !strcmp(ak_chat_family_name(t.family), family), "%s: detected %s (%s), want %s", stem,
          st == AK_OK ? ak_chat_family_name(t.family) : "error", err.msg, family);
    free(tmpl);
    if (st != AK_OK) return;
    for (int c = 0; c < nc; c++) {
        for (int gen = 1; gen >= 0; gen--) {
            const char *g = gen ? "gen" : "nogen";
            ak_chat_opts o = {.bos = bos, .eos = eos, .add_generation_prompt = gen, .tools = cv[c].tools};
            char *want = fmt_name(name, sizeof name, stem, cv[c].name, g, "txt") ? read_text("chat_refs", name, NULL) : NULL;
            char *raised = NULL, *skip = NULL;
            /* no reference: tools for a ChatML template without them (test_tools checks ours) */
            if (!want && fmt_name(name, sizeof name, stem, cv[c].name, g, "skip") && (skip = read_text("chat_refs", name, NULL))) {
                free(skip);
                (*checked)++;
                continue;
            }
            if (!want) {
                if (fmt_name(name, sizeof name, stem, cv[c].name, g, "err")) raised = read_text("chat_refs", name, NULL);
                CHECK(raised != NULL, "%s.%s.%s: no reference (run tools/gen_chat_refs.py)", stem, cv[c].name, g);
                if (!raised) continue;
                /* Gemma 1/2 reject a system message; we render it the Gemma 3 way. */
                if (t.family == AK_CHAT_GEMMA && strstr(raised, "System role not supported")) {
                    if (fmt_name(name, sizeof name, "gemma-3-it", cv[c].name, g, "txt"))
                        want = read_text("chat_refs", name, NULL);
                    if (want) { free(raised); raised = NULL; }
                }
            }
            char *got = render(&t, &cv[c], &o, &st, &err);
            if (raised) {
                CHECK(st != AK_OK, "%s.%s.%s: rendered, but the template raises: %s", stem, cv[c].name, g, raised);
            } else if (want) {
                CHECK(st == AK_OK && !strcmp(got, want), "%s.%s.%s: %s\n--- got:\n%s\n--- want:\n%s", stem,
                      cv[c].name, g, st == AK_OK ? "differs" : err.msg, got ? got : "", want);
            }
            (*checked)++;
            free(got);
            free(want);
            free(raised);
        }
    }
}

static void test_detect_details(void) {
    char *s;
    size_t n;
    ak_chat_template t;
    ak_err err;
    if ((s = read_text("chat_templates", "smollm2-135m-instruct.jinja", &n))) {
        CHECK(ak_chat_detect(s, n, &t, &err) == AK_OK &&
                  !strcmp(t.default_system, "You are a helpful AI assistant named SmolLM, trained by Hugging Face"),
              "smollm2 default system: '%s'", t.default_system);
        free(s);
    }
    if ((s = read_text("chat_templates", "qwen2.5-0.5b.jinja", &n))) {
        CHECK(ak_chat_detect(s, n, &t, &err) == AK_OK && !strcmp(t.default_system, "You are a helpful assistant."),
              "qwen2.5 default system: '%s'", t.default_system);
        free(s);
    }
    if ((s = read_text("chat_templates", "llama-3.2-3b-instruct.jinja", &n))) {
        CHECK(ak_chat_detect(s, n, &t, &err) == AK_OK && t.llama3_date, "llama 3.2 has the date header");
        free(s);
    }
    /* ChatML without a default system message (OpenHermes-style). */
    const char *hermes = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                         "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
                         "{% endif %}";
    CHECK(ak_chat_detect(hermes, strlen(hermes), &t, &err) == AK_OK && t.family == AK_CHAT_CHATML &&
              !t.default_system[0], "hermes: chatml without default system");
}

static void test_unknown(void) {
    static const char *const unknown[] = {
        "", /* no template */
        /* Phi-3 */
        "{{ bos_token }}{% for message in messages %}{{'<|' + message['role'] + '|>' + '\\n' + message['content'] + "
        "'<|end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}",
        /* Vicuna */
        "{%- for message in messages %}{%- if message['role'] == 'user' -%}{{-'USER: ' + message['content'] + '\\n'-}}"
        "{%- else -%}{{-'ASSISTANT: ' + message['content'] + '</s>\\n' -}}{%- endif -%}{%- endfor -%}",
        /* Mistral v7 with [SYSTEM_PROMPT]: not rendered by our Mistral formatter */
        "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}{{ '[SYSTEM_PROMPT]' + m['content'] + "
        "'[/SYSTEM_PROMPT]' }}{% elif m['role'] == 'user' %}{{ '[INST]' + m['content'] + '[/INST]' }}{% endif %}{% endfor %}",
        /* Mistral v0.3 style ("[INST] " + ... + "[/INST]"): spacing we do not render */
        "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}{{ \"[INST] \" + m['content'] + \"[/INST]\" }}"
        "{% endif %}{% endfor %}",
    };
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        ak_chat_template t;
        ak_err err = {{0}};
        ak_status st = ak_chat_detect(unknown[i], strlen(unknown[i]), &t, &err);
        CHECK(st == AK_ERR_UNSUPPORTED && err.msg[0], "unknown template %zu: status %d", i, (int)st);
    }
}

static void test_api(void) {
    ak_chat_template t = ak_chat_template_chatml();
    ak_chat_message m[2] = {{.role = "user", .content = "Hi"}, {.role = "assistant", .content = "Yo"}};
    ak_chat_opts o = {.add_generation_prompt = true};
    const char *want = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nYo<|im_end|>\n<|im_start|>assistant\n";
    char buf[256], small[8];
    size_t n = 0;
    ak_err err;
    CHECK(ak_chat_template_render(&t, m, 2, &o, buf, sizeof buf, &n, &err) == AK_OK && !strcmp(buf, want) && n == strlen(want),
          "chatml fallback: %s", buf);
    n = 0;
    CHECK(ak_chat_template_render(&t, m, 2, &o, small, sizeof small, &n, &err) == AK_ERR_ARG && n == strlen(want),
          "small buffer: n = %zu", n);
    CHECK(ak_chat_template_render(&t, m, 2, &o, buf, strlen(want), &n, &err) == AK_ERR_ARG, "no room for the NUL");
    CHECK(ak_chat_template_render(&t, m, 0, &o, buf, sizeof buf, &n, &err) == AK_ERR_ARG, "no messages");
    /* Llama 3.1+: the caller's date; Qwen3 with thinking disabled. */
    ak_chat_template l = {.family = AK_CHAT_LLAMA3, .llama3_date = true};
    ak_chat_opts lo = {.bos = "<|begin_of_text|>", .date = "01 Jan 2025"};
    CHECK(ak_chat_template_render(&l, m, 1, &lo, buf, sizeof buf, &n, &err) == AK_OK && strstr(buf, "Today Date: 01 Jan 2025\n\n<|eot_id|>"),
          "llama3 date: %s", buf);
    ak_chat_template q = {.family = AK_CHAT_QWEN3};
    ak_chat_opts qo = {.add_generation_prompt = true, .disable_thinking = true};
    CHECK(ak_chat_template_render(&q, m, 1, &qo, buf, sizeof buf, &n, &err) == AK_OK &&
              !strcmp(buf, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"),
          "qwen3 no think: %s", buf);
    /* Python whitespace for trim: U+3000 and U+00A0 go, U+200B (not whitespace) stays. */
    ak_chat_template g = {.family = AK_CHAT_GEMMA};
    ak_chat_message u[1] = {{.role = "user", .content = "\xe3\x80\x80\xc2\xa0x\xe2\x80\x8b \xe3\x80\x80"}};
    ak_chat_opts go = {0};
    CHECK(ak_chat_template_render(&g, u, 1, &go, buf, sizeof buf, &n, &err) == AK_OK &&
              !strcmp(buf, "<start_of_turn>user\nx\xe2\x80\x8b<end_of_turn>\n"), "gemma trim: %s", buf);
}

static char *render_msgs(const ak_chat_template *t, const ak_chat_message *m, int n, const char *tools, ak_status *st,
                         ak_err *err) {
    conv c = {"unit", n, {{0}}, tools};
    for (int i = 0; i < n; i++) c.msg[i] = m[i];
    ak_chat_opts o = {.add_generation_prompt = true, .tools = tools};
    return render(t, &c, &o, st, err);
}

/* What no Jinja reference covers: a ChatML template without tools gets the Hermes / Qwen
 * 2.5 form with its own default system text; bare calls and arguments as a string of
 * JSON render like OpenAI's wrapped object form; bad tool JSON is refused; and replies
 * parse back into calls. */
static void test_tools(void) {
    ak_err err = {{0}};
    ak_status st;
    ak_chat_template t = ak_chat_template_chatml();
    strcpy(t.default_system, "You are SmolLM.");
    ak_chat_message m[3] = {{.role = "user", .content = "Hi"}, {.role = "assistant", .content = NULL, .tool_calls = "[{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}]"},
                            {.role = "tool", .content = "ok"}};
    char *got = render_msgs(&t, m, 3, "[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]", &st, &err);
    const char *want =
        "<|im_start|>system\nYou are SmolLM.\n\n# Tools\n\nYou may call one or more functions to assist with the user "
        "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"type\": "
        "\"function\", \"function\": {\"name\": \"f\"}}\n</tools>\n\nFor each function call, return a json object with "
        "function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
        "\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant"
        "\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call><|im_end|>\n<|im_start|>tool\nok<|im_end|>\n"
        "<|im_start|>assistant\n";
    CHECK(st == AK_OK && got && !strcmp(got, want), "hermes tools: %s\n--- got:\n%s", err.msg, got ? got : "");
    free(got);
    got = render_msgs(&t, m, 1, "{\"not\": \"an array\"}", &st, &err);
    CHECK(st == AK_ERR_ARG && !got, "tools must be an array: %s", err.msg);
    got = render_msgs(&t, m, 1, "[1, 2", &st, &err);
    CHECK(st == AK_ERR_ARG && !got && strstr(err.msg, "JSON"), "tools must be JSON: %s", err.msg);
    ak_chat_message bad[2] = {{.role = "user", .content = "Hi"}, {.role = "assistant", .content = NULL, .tool_calls = "[{\"name\": \"f\", \"arguments\": \"{oops\"}]"}};
    got = render_msgs(&t, bad, 2, NULL, &st, &err);
    CHECK(st == AK_ERR_ARG && !got, "arguments that are not JSON: %s", err.msg);
    ak_chat_template g = {.family = AK_CHAT_GEMMA};
    got = render_msgs(&g, m, 1, "[{\"type\": \"function\"}]", &st, &err);
    CHECK(st == AK_ERR_UNSUPPORTED && !got, "gemma refuses tools: %s", err.msg);
    ak_chat_template l = {.family = AK_CHAT_LLAMA3, .llama3_date = true};
    ak_chat_message two[2] = {{.role = "user", .content = "Hi"}, {.role = "assistant", .content = "", .tool_calls = "[{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {}}]"}};
    got = render_msgs(&l, two, 2, NULL, &st, &err);
    CHECK(st == AK_ERR_ARG && !got && strstr(err.msg, "single"), "llama3: one call a turn: %s", err.msg);

    /* replies back into calls */
    struct { ak_chat_template t; const char *reply, *content; int n; const char *name, *args; } cases[] = {
        {t, "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "Sure.", 1,
         "get_weather", "{\"city\": \"Paris\"}"},
        {t, "<tool_call>{\"name\": \"a\", \"arguments\": \"{\\\"x\\\": [1, 2]}\"}</tool_call><tool_call>{\"name\": \"b\", "
            "\"arguments\": {}}</tool_call>", "", 2, "a", "{\"x\": [1, 2]}"},
        {t, "<tool_call>{\"name\": 3}</tool_call> and text", "<tool_call>{\"name\": 3}</tool_call> and text", 0, NULL, NULL},
        {t, "<tool_call>{\"name\": \"cut\", \"argum", "<tool_call>{\"name\": \"cut\", \"argum", 0, NULL, NULL},
        {t, "Plain text.", "Plain text.", 0, NULL, NULL},
        /* small Qwen models drop the tags: a whole reply that is a call counts, fenced too */
        {t, " {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n", "", 1, "get_weather", "{\"city\": \"Paris\"}"},
        {t, "```json\n{\"name\": \"f\", \"arguments\": {}}\n```", "", 1, "f", "{}"},
        {t, "{\"name\": \"f\"}", "{\"name\": \"f\"}", 0, NULL, NULL},
        {t, "{\"name\": \"f\", \"arguments\": {}} and more", "{\"name\": \"f\", \"arguments\": {}} and more", 0, NULL, NULL},
        {l, " <|python_tag|>{\"name\": \"clock\", \"parameters\": {\"tz\": \"UTC\"}} ", "", 1, "clock", "{\"tz\": \"UTC\"}"},
        {l, "{\"name\": \"clock\"} is not a call", "{\"name\": \"clock\"} is not a call", 0, NULL, NULL},
        {g, "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>", "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>",
         0, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ak_chat_call *calls = NULL;
        int n = -1;
        char *content = NULL;
        st = ak_chat_template_parse_calls(&cases[i].t, cases[i].reply, strlen(cases[i].reply), &calls, &n, &content, &err);
        CHECK(st == AK_OK && n == cases[i].n && content && !strcmp(content, cases[i].content),
              "parse case %zu: %d calls, content '%s'", i, n, content ? content : "");
        if (st == AK_OK && n > 0 && cases[i].name)
            CHECK(!strcmp(calls[0].name, cases[i].name) && !strcmp(calls[0].arguments, cases[i].args),
                  "parse case %zu: %s(%s)", i, calls[0].name, calls[0].arguments);
        ak_chat_calls_free(calls, n > 0 ? n : 0);
        free(content);
    }
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : getenv("AKUNU_CHAT_DATA");
    if (dir) {
        snprintf(data_dir, sizeof data_dir, "%s", dir);
    } else { /* tests/model/test_chat.c -> tests/data */
        snprintf(data_dir, sizeof data_dir, "%s", __FILE__);
        char *slash = strrchr(data_dir, '/');
        if (slash) snprintf(slash, sizeof data_dir - (size_t)(slash - data_dir), "/../data");
        else snprintf(data_dir, sizeof data_dir, "tests/data");
    }
    char *convs_text = read_text("chat_refs", "conversations.txt", NULL);
    char *manifest = read_text("chat_refs", "manifest.txt", NULL);
    CHECK(convs_text && manifest, "cannot read %s/chat_refs/{conversations,manifest}.txt", data_dir);
    if (convs_text && manifest) {
        static conv cv[MAX_CONV];
        int nc = parse_convs(convs_text, cv), checked = 0, templates = 0;
        CHECK(nc >= 6, "conversations: %d", nc);
        char *save = NULL;
        for (char *line = strtok_r(manifest, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            if (line[0] == '#') continue;
            char stem[256], family[64], bos[64] = "", eos[64] = "";
            /* "stem family bos eos"; bos may be empty, leaving two spaces */
            char *f[4] = {0};
            int k = 0;
            for (char *p = line; k < 4; k++) {
                f[k] = p;
                char *sp = strchr(p, ' ');
                if (!sp) { k++; break; }
                *sp = 0;
                p = sp + 1;
            }
            if (k < 4) { CHECK(0, "manifest line '%s'", line); continue; }
            snprintf(stem, sizeof stem, "%s", f[0]);
            snprintf(family, sizeof family, "%s", f[1]);
            snprintf(bos, sizeof bos, "%s", f[2]);
            snprintf(eos, sizeof eos, "%s", f[3]);
            test_template(stem, family, bos, eos, cv, nc, &checked);
            templates++;
        }
        printf("%d templates, %d rendered cases\n", templates, checked);
        CHECK(templates >= 8 && checked >= templates * nc * 2, "coverage: %d templates, %d cases", templates, checked);
    }
    free(convs_text);
    free(manifest);
    test_detect_details();
    test_unknown();
    test_api();
    test_tools();
    return ak_test_done();
}
