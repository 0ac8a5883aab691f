/* The OpenAI API on akunu.h: request bodies (cJSON) checked field by field into jobs,
 * and jobs back into OpenAI's objects — chat completions with tool calls and logprobs,
 * completions, embeddings, models — as one JSON body or as Server-Sent Events. */
#include <cjson/cJSON.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "server.h"

/* ---- replies ---- */

static void json_reply(ak_reply *r, int status, cJSON *o) {
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    r->status = s ? status : 500;
    r->content_type = "application/json";
    ak_buf_adds(&r->body, s ? s : "{\"error\": {\"message\": \"out of memory\", \"type\": \"server_error\", \"code\": null}}");
    free(s);
}

void ak_api_error(ak_reply *r, int status, const char *type, const char *code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", type);
    if (code) cJSON_AddStringToObject(e, "code", code);
    else cJSON_AddNullToObject(e, "code");
    ak_buf_free(&r->body);
    json_reply(r, status, o);
}

#define BAD(r, ...) ak_api_error(r, 400, "invalid_request_error", NULL, __VA_ARGS__)

/* ---- reading a request ---- */

/* Valid UTF-8 (no overlongs or surrogates): cJSON passes bytes through unchecked. */
static bool utf8_ok(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!k || i + k > n) return false;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xC0) != 0x80) return false;
        if ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] > 0x9F) || (c == 0xF0 && s[i + 1] < 0x90) ||
            (c == 0xF4 && s[i + 1] > 0x8F))
            return false;
        i += k;
    }
    return true;
}

/* A "\u0000" escape: cJSON would cut the string there, and a model's text cannot hold it. */
static bool has_nul_escape(const char *s, size_t n) {
    for (size_t i = 0; i + 5 < n; i++)
        if (s[i] == '\\') {
            if (!memcmp(s + i + 1, "u0000", 5)) return true;
            i++;   /* the escaped character */
        }
    return false;
}

/* Optional numbers within a range: absent keeps *out; present of another type, or out
 * of range, is an error the caller reports. */
static bool get_num(const cJSON *o, const char *key, double lo, double hi, double *out, ak_reply *r) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi)) {
        BAD(r, "'%s' must be a number in [%g, %g]", key, lo, hi);
        return false;
    }
    *out = v->valuedouble;
    return true;
}

static bool get_int(const cJSON *o, const char *key, double lo, double hi, long long *out, ak_reply *r) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return true;
    /* the range first: casting a double past long long's range is undefined */
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) || v->valuedouble != (double)(long long)v->valuedouble) {
        BAD(r, "'%s' must be an integer in [%.0f, %.0f]", key, lo, hi);
        return false;
    }
    *out = (long long)v->valuedouble;
    return true;
}

static bool get_bool(const cJSON *o, const char *key, bool *out, ak_reply *r) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsBool(v)) {
        BAD(r, "'%s' must be a boolean", key);
        return false;
    }
    *out = cJSON_IsTrue(v);
    return true;
}

/* The sampling and length fields shared by chat and completions. */
static bool read_params(ak_srv *s, const cJSON *o, ak_job *j, ak_reply *r) {
    ak_sampling_params *sp = &j->gp.sampling;
    *sp = ak_sampling_default_params();
    double temp = sp->temperature, top_p = sp->top_p, min_p = sp->min_p, pres = 0, freq = 0, rep = 1;
    long long top_k = sp->top_k, seed = LLONG_MIN, n = 1, max_tokens = -1, top_logprobs = 0;
    if (!get_num(o, "temperature", 0, 2, &temp, r) || !get_num(o, "top_p", 0, 1, &top_p, r) ||
        !get_num(o, "min_p", 0, 1, &min_p, r) || !get_num(o, "presence_penalty", -2, 2, &pres, r) ||
        !get_num(o, "frequency_penalty", -2, 2, &freq, r) || !get_num(o, "repeat_penalty", 0.01, 100, &rep, r) ||
        !get_int(o, "top_k", 0, 1 << 30, &top_k, r) || !get_int(o, "seed", -9.2e18, 9.2e18, &seed, r) ||
        !get_int(o, "n", 1, 128, &n, r) || !get_int(o, "max_tokens", 1, 1 << 30, &max_tokens, r) ||
        !get_int(o, "max_completion_tokens", 1, 1 << 30, &max_tokens, r) || !get_int(o, "top_logprobs", 0, AK_MAX_TOP, &top_logprobs, r) ||
        !get_bool(o, "stream", &j->stream, r))
        return false;
    if (n != 1) {
        BAD(r, "'n' must be 1: akunu generates one choice per request");
        return false;
    }
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(o, "logprobs");
    if (lp && !cJSON_IsNull(lp)) {
        if (j->kind == AK_JOB_COMPLETION ? !cJSON_IsNumber(lp) : !cJSON_IsBool(lp)) {
            BAD(r, "'logprobs' must be %s", j->kind == AK_JOB_COMPLETION ? "an integer" : "a boolean");
            return false;
        }
        j->logprobs = j->kind == AK_JOB_COMPLETION ? lp->valuedouble > 0 : cJSON_IsTrue(lp);
        if (j->kind == AK_JOB_COMPLETION) top_logprobs = lp->valueint < 0 ? 0 : lp->valueint > AK_MAX_TOP ? AK_MAX_TOP : lp->valueint;
    }
    if (top_logprobs && !j->logprobs) {
        BAD(r, "'top_logprobs' needs 'logprobs': true");
        return false;
    }
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(o, "stream_options");
    if (so && !cJSON_IsNull(so)) {
        if (!cJSON_IsObject(so) || !get_bool(so, "include_usage", &j->include_usage, r)) {
            if (!cJSON_IsObject(so)) BAD(r, "'stream_options' must be an object");
            return false;
        }
    }
    /* stop: a string or a list of them */
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "stop");
    if (st && !cJSON_IsNull(st)) {
        int k = cJSON_IsString(st) ? 1 : cJSON_IsArray(st) ? cJSON_GetArraySize(st) : -1;
        if (k < 0 || k > 16) {
            BAD(r, "'stop' must be a string or a list of at most 16 strings");
            return false;
        }
        j->stops = calloc((size_t)k + 1, sizeof *j->stops);
        for (int i = 0; i < k && j->stops; i++) {
            const cJSON *e = cJSON_IsString(st) ? st : cJSON_GetArrayItem(st, i);
            if (!cJSON_IsString(e) || strlen(e->valuestring) > 1024) {
                BAD(r, "every stop sequence must be a string of at most 1024 bytes");
                return false;
            }
            j->stops[i] = strdup(e->valuestring);
            j->gp.n_stop = i + 1;
            if (!j->stops[i]) break;
        }
        j->gp.stop = (const char *const *)j->stops;
    }
    sp->temperature = (float)temp;
    sp->top_p = (float)top_p;
    sp->min_p = (float)min_p;
    sp->top_k = (int)top_k;
    sp->presence_penalty = (float)pres;
    sp->frequency_penalty = (float)freq;
    sp->repeat_penalty = (float)rep;
    /* a given seed, negative ones too, reproduces; without one each request draws its own */
    sp->seed = seed != LLONG_MIN ? (uint64_t)seed : (uint64_t)time(NULL) ^ ((uint64_t)(uintptr_t)j << 16);
    int cap = s->o.max_tokens;
    j->gp.n_predict = max_tokens > 0 && (cap <= 0 || max_tokens < cap) ? (int)max_tokens : cap > 0 ? cap : -1;
    j->gp.n_top = (int)top_logprobs;
    j->gp.spec_draft = s->o.spec_draft;
    return true;
}

/* A message's content: a string, null, or OpenAI's list of text parts (joined). */
static bool content_text(const cJSON *c, ak_buf *out, ak_reply *r, int i) {
    if (!c || cJSON_IsNull(c)) return true;
    if (cJSON_IsString(c)) { ak_buf_adds(out, c->valuestring); return true; }
    if (cJSON_IsArray(c)) {
        const cJSON *part;
        cJSON_ArrayForEach(part, c) {
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type"), *text = cJSON_GetObjectItemCaseSensitive(part, "text");
            if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text)) {
                BAD(r, "messages[%d].content: only text parts are supported", i);
                return false;
            }
            ak_buf_adds(out, text->valuestring);
        }
        return true;
    }
    BAD(r, "messages[%d].content must be a string, a list of text parts or null", i);
    return false;
}

/* add_special: BOS/EOS as the model adds them; special: text spelling a control token
 * becomes it (a rendered template, a raw completion prompt; not text to embed). */
static bool tokenize(ak_srv *s, ak_job *j, const char *text, bool add_special, bool special, ak_reply *r) {
    ak_err err = {{0}};
    int n = 0;
    if (ak_tokenize(s->m, text, strlen(text), add_special, special, NULL, 0, &n, &err) || n < 0) {
        ak_api_error(r, 500, "server_error", NULL, "%s", err.msg);
        return false;
    }
    int ctx = s->n_ctx;
    if (n == 0) {
        BAD(r, "the prompt is empty");
        return false;
    }
    if (n >= ctx) {
        ak_api_error(r, 400, "invalid_request_error", "context_length_exceeded",
                     "the prompt is %d tokens; the context holds %d", n, ctx);
        return false;
    }
    if (!(j->prompt = malloc((size_t)n * sizeof *j->prompt)) ||
        ak_tokenize(s->m, text, strlen(text), add_special, special, j->prompt, n, &j->n_prompt, &err)) {
        ak_api_error(r, 500, "server_error", NULL, "%s", err.msg[0] ? err.msg : "out of memory");
        return false;
    }
    return true;
}

/* A thinking model (Qwen3) reasons before it answers: the grammar starts after that. */
static void thinking(ak_srv *s, ak_job *j) {
    const char *fam = ak_model_chat_family(s->m);
    j->gp.grammar = j->grammar;
    if (j->grammar && fam && !strcmp(fam, "qwen3")) j->gp.grammar_after = "</think>";
}

/* response_format: text, json_object, or json_schema ({"name", "schema", "strict"}) into
 * the job's grammar. */
static bool grammar_of(ak_srv *s, const cJSON *rf, ak_job *j, ak_reply *r) {
    (void)s;
    if (!rf || cJSON_IsNull(rf)) return true;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
    if (!cJSON_IsObject(rf) || !cJSON_IsString(type)) {
        BAD(r, "'response_format' must be an object with a string 'type'");
        return false;
    }
    const char *t = type->valuestring;
    if (!strcmp(t, "text")) return true;
    if (!strcmp(t, "json_object")) {
        if (!(j->grammar = strdup(ak_grammar_json_object()))) ak_api_error(r, 500, "server_error", NULL, "out of memory");
        return j->grammar != NULL;
    }
    if (strcmp(t, "json_schema")) {
        BAD(r, "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", not \"%s\"", t);
        return false;
    }
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(js, "schema");
    if (!cJSON_IsObject(js) || !(cJSON_IsObject(schema) || cJSON_IsBool(schema))) {
        BAD(r, "'response_format.json_schema' must be an object with a 'schema'");
        return false;
    }
    char *text = cJSON_PrintUnformatted(schema);
    if (!text) {
        ak_api_error(r, 500, "server_error", NULL, "out of memory");
        return false;
    }
    ak_err err = {{0}};
    ak_status st = ak_json_schema_to_grammar(text, strlen(text), &j->grammar, &err);
    free(text);
    if (st) {
        BAD(r, "'response_format.json_schema.schema': %s", err.msg);
        return false;
    }
    return true;
}

/* messages (and tools) through the chat template into prompt ids */
static bool chat_prompt(ak_srv *s, const cJSON *o, ak_job *j, ak_reply *r) {
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(o, "messages");
    int n = cJSON_IsArray(msgs) ? cJSON_GetArraySize(msgs) : -1;
    if (n <= 0) {
        BAD(r, "'messages' must be a non-empty list");
        return false;
    }
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(o, "tools"), *choice = cJSON_GetObjectItemCaseSensitive(o, "tool_choice");
    if (tools && !cJSON_IsNull(tools) && !cJSON_IsArray(tools)) {
        BAD(r, "'tools' must be a list");
        return false;
    }
    bool use_tools = tools && cJSON_GetArraySize(tools) > 0, force = false;
    const char *forced = NULL;   /* the one function tool_choice names */
    if (choice && !cJSON_IsNull(choice)) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(choice, "function"), "name");
        if (cJSON_IsString(choice) && !strcmp(choice->valuestring, "none")) use_tools = false;
        else if (cJSON_IsString(choice) && !strcmp(choice->valuestring, "required")) force = true;
        else if (cJSON_IsObject(choice) && cJSON_IsString(fn)) force = true, forced = fn->valuestring;
        else if (!cJSON_IsString(choice) || strcmp(choice->valuestring, "auto")) {
            BAD(r, "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
            return false;
        }
        if (force && !use_tools) {
            BAD(r, "'tool_choice' asks for a tool call, but 'tools' lists none");
            return false;
        }
    }
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(o, "response_format");
    if (!grammar_of(s, rf, j, r)) return false;
    if (force && j->grammar) {
        BAD(r, "'response_format' and a forced tool call cannot both shape the reply");
        return false;
    }
    ak_chat_message *m = calloc((size_t)n, sizeof *m);
    ak_buf *texts = calloc((size_t)n, sizeof *texts);
    char **calls = calloc((size_t)n, sizeof *calls);
    char *tools_text = use_tools ? cJSON_PrintUnformatted(tools) : NULL;
    bool ok = m && texts && calls && (!use_tools || tools_text);
    if (!ok) ak_api_error(r, 500, "server_error", NULL, "out of memory");
    ak_err gerr = {{0}};
    ak_status gst = ok && force ? ak_chat_tool_grammar(s->m, tools_text, forced, &j->grammar, &gerr) : AK_OK;
    if (gst) {
        BAD(r, "'tool_choice': %s", gerr.msg);
        ok = false;
    }
    thinking(s, j);
    int i = 0;
    const cJSON *msg;
    cJSON_ArrayForEach(msg, msgs) {
        if (!ok) break;
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(msg, "role"), *tc = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
        if (!cJSON_IsObject(msg) || !cJSON_IsString(role)) {
            BAD(r, "messages[%d] needs a string 'role'", i);
            ok = false;
            break;
        }
        const char *rl = role->valuestring;
        if (!strcmp(rl, "developer")) rl = "system";   /* OpenAI's newer name for it */
        if (strcmp(rl, "system") && strcmp(rl, "user") && strcmp(rl, "assistant") && strcmp(rl, "tool")) {
            BAD(r, "messages[%d].role must be system, user, assistant or tool", i);
            ok = false;
            break;
        }
        if (!(ok = content_text(cJSON_GetObjectItemCaseSensitive(msg, "content"), &texts[i], r, i))) break;
        if (tc && !cJSON_IsNull(tc)) {
            if (!cJSON_IsArray(tc) || strcmp(rl, "assistant")) {
                BAD(r, "messages[%d].tool_calls must be a list, in an assistant message", i);
                ok = false;
                break;
            }
            calls[i] = cJSON_PrintUnformatted(tc);
        }
        ak_buf_adds(&texts[i], "");   /* never NULL */
        m[i] = (ak_chat_message){.role = rl, .content = texts[i].p, .tool_calls = calls[i]};
        i++;
    }
    char *text = NULL;
    ak_err err = {{0}};
    if (ok) {
        ak_status st = ak_chat_render_tools(s->m, m, n, tools_text, true, &text, &err);
        if (st) {
            if (st == AK_ERR_UNSUPPORTED && !tools_text) ak_api_error(r, 500, "server_error", NULL, "%s", err.msg);
            else BAD(r, "%s", err.msg);
            ok = false;
        }
    }
    if (ok) ok = tokenize(s, j, text, false, true, r);
    j->tools = use_tools;
    free(text);
    free(tools_text);
    for (int k = 0; k < n && texts && calls; k++) ak_buf_free(&texts[k]), cJSON_free(calls[k]);
    free(texts);
    free(calls);
    free(m);
    return ok;
}

static char *rand_id(const char *prefix) {
    static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    char b[64];
    int k = snprintf(b, sizeof b, "%s", prefix);
    static _Atomic unsigned long counter;
    unsigned long x = (unsigned long)time(NULL) * 2654435761u ^ (counter++ * 40503u) ^ (unsigned long)(uintptr_t)b;
    for (int i = 0; i < 24; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b[k++] = al[x % (sizeof al - 1)];
    }
    b[k] = 0;
    return strdup(b);
}

/* ---- OpenAI objects from a job ---- */

static const char *finish_reason(const ak_job *j, int n_calls) {
    if (n_calls) return "tool_calls";
    return j->res.stop == AK_STOP_LENGTH || j->res.stop == AK_STOP_CONTEXT ? "length" : "stop";
}

static int completion_tokens(const ak_job *j) {
    return j->res.n_generated - (j->res.stop == AK_STOP_EOG);   /* the end-of-turn token is not text */
}

static cJSON *usage(const ak_job *j) {
    cJSON *u = cJSON_CreateObject();
    int c = completion_tokens(j);
    cJSON_AddNumberToObject(u, "prompt_tokens", j->res.n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", c);
    cJSON_AddNumberToObject(u, "total_tokens", j->res.n_prompt + c);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "prompt_tokens_details"), "cached_tokens", j->res.n_cached);
    return u;
}

/* A token's text for logprobs: its bytes (as a list, since a token can hold part of a
 * character), and a string with U+FFFD where they are not whole UTF-8. */
static void add_token(cJSON *o, ak_srv *s, int32_t id, float logprob) {
    char piece[256], text[1024];
    size_t n = 0, k = 0;
    if (ak_token_to_piece(s->m, id, false, piece, sizeof piece, &n, NULL)) n = 0;
    for (size_t i = 0; i < n && k + 4 < sizeof text;) {
        size_t len = 1;
        unsigned char c = (unsigned char)piece[i];
        if (c >= 0x80) {
            len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
            if (!len || i + len > n || !utf8_ok((const unsigned char *)piece + i, len)) {
                memcpy(text + k, "\xEF\xBF\xBD", 3), k += 3, i++;
                continue;
            }
        }
        memcpy(text + k, piece + i, len), k += len, i += len;
    }
    text[k] = 0;
    cJSON_AddStringToObject(o, "token", text);
    cJSON_AddNumberToObject(o, "logprob", logprob);
    cJSON *bytes = cJSON_AddArrayToObject(o, "bytes");
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)piece[i]));
}

/* logprobs.content for tokens [from, to) */
static cJSON *logprobs(ak_job *j, int from, int to) {
    cJSON *lp = cJSON_CreateObject(), *content = cJSON_AddArrayToObject(lp, "content");
    for (int i = from; i < to; i++) {
        const ak_job_prob *p = &j->probs[i];
        cJSON *t = cJSON_CreateObject();
        add_token(t, j->srv, p->id, p->logprob);
        cJSON *top = cJSON_AddArrayToObject(t, "top_logprobs");
        for (int k = 0; k < p->n_top; k++) {
            cJSON *e = cJSON_CreateObject();
            add_token(e, j->srv, p->top[k].id, p->top[k].logprob);
            cJSON_AddItemToArray(top, e);
        }
        cJSON_AddItemToArray(content, t);
    }
    return lp;
}

static cJSON *tool_calls(ak_chat_call *calls, int n, bool stream) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        cJSON *c = cJSON_CreateObject(), *f;
        if (stream) cJSON_AddNumberToObject(c, "index", i);
        char *id = rand_id("call_");
        cJSON_AddStringToObject(c, "id", id ? id : "call_0");
        free(id);
        cJSON_AddStringToObject(c, "type", "function");
        f = cJSON_AddObjectToObject(c, "function");
        cJSON_AddStringToObject(f, "name", calls[i].name);
        cJSON_AddStringToObject(f, "arguments", calls[i].arguments);
        cJSON_AddItemToArray(a, c);
    }
    return a;
}

static cJSON *head(ak_job *j, const char *object) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id ? j->id : "");
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)j->created);
    cJSON_AddStringToObject(o, "model", j->model ? j->model : "");
    return o;
}

/* The calls in the reply, when the request gave tools. */
static void parse_calls(ak_job *j, ak_chat_call **calls, int *n, char **content) {
    *calls = NULL;
    *n = 0;
    *content = NULL;
    if (j->tools && ak_chat_parse_calls(j->srv->m, j->text.p ? j->text.p : "", j->text.len, calls, n, content, NULL)) {
        *calls = NULL;
        *n = 0;
        *content = NULL;
    }
}

void ak_api_finish(ak_job *j, ak_reply *r) {
    if (j->status) {
        ak_api_error(r, j->cancelled ? 503 : 500, "server_error", NULL, "%s", j->err[0] ? j->err : "generation failed");
        return;
    }
    if (j->kind == AK_JOB_EMBED) {
        cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data");
        cJSON_AddStringToObject(o, "object", "list");
        int dim = ak_model_dim(j->srv->m), tokens = 0;
        for (int i = 0; i < j->n_seq; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "object", "embedding");
            cJSON_AddNumberToObject(e, "index", i);
            cJSON_AddItemToObject(e, "embedding", cJSON_CreateFloatArray(j->vectors + (size_t)i * dim, dim));
            cJSON_AddItemToArray(data, e);
            tokens += j->lens[i];
        }
        cJSON_AddStringToObject(o, "model", j->model ? j->model : "");
        cJSON *u = cJSON_AddObjectToObject(o, "usage");
        cJSON_AddNumberToObject(u, "prompt_tokens", tokens);
        cJSON_AddNumberToObject(u, "total_tokens", tokens);
        json_reply(r, 200, o);
        return;
    }
    bool chat = j->kind == AK_JOB_CHAT;
    cJSON *o = head(j, chat ? "chat.completion" : "text_completion"), *choices = cJSON_AddArrayToObject(o, "choices");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    ak_chat_call *calls;
    int n_calls;
    char *content;
    parse_calls(j, &calls, &n_calls, &content);
    const char *text = content ? content : j->text.p ? j->text.p : "";
    if (chat) {
        cJSON *msg = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        if (n_calls && !text[0]) cJSON_AddNullToObject(msg, "content");
        else cJSON_AddStringToObject(msg, "content", text);
        if (n_calls) cJSON_AddItemToObject(msg, "tool_calls", tool_calls(calls, n_calls, false));
    } else {
        cJSON_AddStringToObject(c, "text", text);
    }
    if (j->logprobs) cJSON_AddItemToObject(c, "logprobs", logprobs(j, 0, j->n_probs));
    else cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddStringToObject(c, "finish_reason", finish_reason(j, n_calls));
    cJSON_AddItemToArray(choices, c);
    cJSON_AddItemToObject(o, "usage", usage(j));
    ak_chat_calls_free(calls, n_calls);
    free(content);
    json_reply(r, 200, o);
}

/* ---- streaming: chunks appended to j->sse under j->mu ---- */

static void send_event(ak_job *j, cJSON *o) {
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) { j->sse.oom = true; return; }
    ak_buf_adds(&j->sse, "data: ");
    ak_buf_adds(&j->sse, s);
    ak_buf_adds(&j->sse, "\n\n");
    free(s);
}

/* A chunk carrying text (content, or a completion's text), the logprobs of the tokens
 * since the last one, and the finish reason when it is the last. */
static void send_chunk(ak_job *j, const char *text, size_t n, cJSON *calls, const char *finish, bool role) {
    bool chat = j->kind == AK_JOB_CHAT;
    cJSON *o = head(j, chat ? "chat.completion.chunk" : "text_completion"), *choices = cJSON_AddArrayToObject(o, "choices");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    char *t = malloc(n + 1);
    if (t) memcpy(t, text, n), t[n] = 0;
    if (chat) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        if (role) cJSON_AddStringToObject(d, "role", "assistant");
        if (n || role) cJSON_AddStringToObject(d, "content", t ? t : "");
        if (calls) cJSON_AddItemToObject(d, "tool_calls", calls);
    } else {
        cJSON_AddStringToObject(c, "text", t ? t : "");
    }
    free(t);
    if (j->logprobs && j->probs_sent < j->n_probs && !j->held) {
        cJSON_AddItemToObject(c, "logprobs", logprobs(j, j->probs_sent, j->n_probs));
        j->probs_sent = j->n_probs;
    } else {
        cJSON_AddNullToObject(c, "logprobs");
    }
    if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
    else cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(choices, c);
    send_event(j, o);
}

/* How much of the text can go out: with tools, nothing from where a call may begin —
 * a reply that opens with '{' or a ``` fence (a call as the whole reply), or, for
 * ChatML and Qwen, a "<tool_call>" block anywhere. */
static size_t sendable(ak_job *j) {
    const char *t = j->text.p ? j->text.p : "";
    size_t n = j->text.len;
    if (!j->tools) return n;
    if (j->held) return j->text_sent;
    size_t i = 0;
    while (i < n && (t[i] == ' ' || t[i] == '\n' || t[i] == '\t' || t[i] == '\r')) i++;
    if (i == n) return j->text_sent;   /* only space so far: wait */
    if (j->text_sent == 0 && (t[i] == '{' || t[i] == '`')) {
        j->held = true;   /* perhaps a whole-reply call: decided at the end */
        return 0;
    }
    const char *fam = ak_model_chat_family(j->srv->m);
    if (fam && !strcmp(fam, "llama3")) return n;
    static const char mark[] = "<tool_call>";
    const char *at = strstr(t, mark);
    if (at) {
        j->held = true;
        return (size_t)(at - t) > j->text_sent ? (size_t)(at - t) : j->text_sent;
    }
    for (size_t k = sizeof mark - 2; k > 0; k--)   /* the longest tail that could start it */
        if (n >= k && !memcmp(t + n - k, mark, k)) return n - k > j->text_sent ? n - k : j->text_sent;
    return n;
}

void ak_api_stream_piece(ak_job *j) {
    bool first = !j->opened && j->kind == AK_JOB_CHAT;
    size_t upto = sendable(j);
    if (upto > j->text_sent || first) {
        send_chunk(j, j->text.p + j->text_sent, upto - j->text_sent, NULL, NULL, first);
        j->text_sent = upto;
        j->opened = true;
    }
}

void ak_api_stream_end(ak_job *j) {
    if (j->status) {
        cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(e, "message", j->err[0] ? j->err : "generation failed");
        cJSON_AddStringToObject(e, "type", "server_error");
        send_event(j, o);
    } else {
        if (!j->opened && j->kind == AK_JOB_CHAT) send_chunk(j, "", 0, NULL, NULL, true);   /* the role, once */
        j->opened = true;
        ak_chat_call *calls;
        int n_calls;
        char *content;
        parse_calls(j, &calls, &n_calls, &content);
        if (!n_calls && j->text.len > j->text_sent) {   /* what was held back was not a call */
            j->held = false;
            send_chunk(j, j->text.p + j->text_sent, j->text.len - j->text_sent, NULL, NULL, false);
        }
        j->held = false;
        send_chunk(j, "", 0, n_calls ? tool_calls(calls, n_calls, true) : NULL, finish_reason(j, n_calls), false);
        ak_chat_calls_free(calls, n_calls);
        free(content);
        if (j->include_usage) {
            cJSON *o = head(j, j->kind == AK_JOB_CHAT ? "chat.completion.chunk" : "text_completion");
            cJSON_AddArrayToObject(o, "choices");
            cJSON_AddItemToObject(o, "usage", usage(j));
            send_event(j, o);
        }
    }
    ak_buf_adds(&j->sse, "data: [DONE]\n\n");
}

/* ---- endpoints ---- */

static void models(ak_srv *s, ak_reply *r) {
    cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data"), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddStringToObject(m, "id", s->model_name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)time(NULL));
    cJSON_AddStringToObject(m, "owned_by", "akunu");
    cJSON_AddItemToArray(data, m);
    json_reply(r, 200, o);
}

/* Queue the job and answer: a stream right away, a body once it is done. */
static void run(ak_srv *s, ak_job *j, ak_reply *r) {
    j->created = (int64_t)time(NULL);
    j->deadline = s->o.timeout_s > 0 ? ak_srv_now() + s->o.timeout_s : 0;
    if (!ak_srv_submit(s, j)) {
        ak_api_error(r, 503, "server_error", "queue_full", "the server's queue is full (%d requests waiting); try again later",
                     s->o.max_queue);
        return;
    }
    if (j->stream) {
        atomic_fetch_add(&j->refs, 1);   /* the connection's, released by http.c */
        r->status = 200;
        r->stream = j;
        r->content_type = "text/event-stream";
        return;
    }
    ak_job_wait(j);
    ak_api_finish(j, r);
}

static bool embeddings(ak_srv *s, const cJSON *o, ak_job *j, ak_reply *r) {
    if (!ak_model_is_encoder(s->m)) {
        BAD(r, "%s is not an embedding model: /v1/embeddings needs an encoder (BERT family)", s->model_name);
        return false;
    }
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(o, "input");
    int n = cJSON_IsString(in) ? 1 : cJSON_IsArray(in) ? cJSON_GetArraySize(in) : 0;
    if (n <= 0 || n > 2048) {
        BAD(r, "'input' must be a string or a list of 1 to 2048 strings");
        return false;
    }
    j->seqs = calloc((size_t)n, sizeof *j->seqs);
    j->lens = calloc((size_t)n, sizeof *j->lens);
    j->vectors = malloc((size_t)n * (size_t)ak_model_dim(s->m) * sizeof *j->vectors);
    if (!j->seqs || !j->lens || !j->vectors) { ak_api_error(r, 500, "server_error", NULL, "out of memory"); return false; }
    for (int i = 0; i < n; i++) {
        const cJSON *e = cJSON_IsString(in) ? in : cJSON_GetArrayItem(in, i);
        if (!cJSON_IsString(e)) { BAD(r, "input[%d] must be a string", i); return false; }
        if (!tokenize(s, j, e->valuestring, true, false, r)) return false;
        j->seqs[i] = j->prompt;
        j->lens[i] = j->n_prompt;
        j->prompt = NULL;
        j->n_seq = i + 1;
    }
    return true;
}

ak_job *ak_api_parse(ak_srv *s, const char *url, const char *body, size_t len, ak_reply *r) {
    ak_job_kind kind = !strcmp(url, "/v1/chat/completions") ? AK_JOB_CHAT
                       : !strcmp(url, "/v1/completions")    ? AK_JOB_COMPLETION
                       : !strcmp(url, "/v1/embeddings")     ? AK_JOB_EMBED
                                                            : (ak_job_kind)-1;
    if ((int)kind < 0) {
        ak_api_error(r, 404, "not_found_error", NULL, "no such endpoint: %.200s", url);
        return NULL;
    }
    if (!utf8_ok((const unsigned char *)body, len)) { BAD(r, "the request body is not valid UTF-8"); return NULL; }
    if (memchr(body, 0, len) || has_nul_escape(body, len)) {   /* either would cut a prompt short */
        BAD(r, "the request holds a NUL character, which a prompt cannot");
        return NULL;
    }
    const char *end = NULL;   /* one object, then only whitespace: cJSON stops after one value */
    cJSON *o = cJSON_ParseWithLengthOpts(body, len, &end, false);
    while (o && end && end < body + len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')) end++;
    if (!cJSON_IsObject(o) || end != body + len) {
        BAD(r, "the request body must be a JSON object%s", o ? (end != body + len ? " and nothing after it" : "") : " (it does not parse)");
        cJSON_Delete(o);
        return NULL;
    }
    ak_job *j = ak_job_new(s, kind);
    if (!j) { ak_api_error(r, 500, "server_error", NULL, "out of memory"); cJSON_Delete(o); return NULL; }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(o, "model");
    j->model = strdup(cJSON_IsString(model) ? model->valuestring : s->model_name);
    j->id = rand_id(kind == AK_JOB_CHAT ? "chatcmpl-" : kind == AK_JOB_COMPLETION ? "cmpl-" : "emb-");
    bool ok;
    if (kind == AK_JOB_EMBED) {
        ok = embeddings(s, o, j, r);
    } else if (ak_model_is_encoder(s->m)) {
        BAD(r, "%s is an embedding model: use /v1/embeddings", s->model_name);
        ok = false;
    } else if ((ok = read_params(s, o, j, r))) {
        if (kind == AK_JOB_CHAT) {
            ok = chat_prompt(s, o, j, r);
        } else {
            const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "prompt");
            if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1) p = cJSON_GetArrayItem(p, 0);
            ok = cJSON_IsString(p);
            if (!ok) BAD(r, "'prompt' must be a string");
            else ok = tokenize(s, j, p->valuestring, true, true, r);
        }
    }
    cJSON_Delete(o);
    if (!ok) {
        ak_job_release(j);
        return NULL;
    }
    return j;
}

void ak_api_handle(ak_srv *s, const char *method, const char *url, const char *body, size_t len, int fd, ak_reply *r) {
    bool post = !strcmp(method, "POST");
    if (!strcmp(url, "/v1/models")) {
        if (!strcmp(method, "GET") || !strcmp(method, "HEAD")) models(s, r);
        else ak_api_error(r, 405, "invalid_request_error", NULL, "/v1/models takes GET");
        return;
    }
    if (post || (strcmp(url, "/v1/chat/completions") && strcmp(url, "/v1/completions") && strcmp(url, "/v1/embeddings"))) {
        ak_job *j = ak_api_parse(s, url, body, len, r);
        if (!j) return;
        j->fd = fd;
        run(s, j, r);
        ak_job_release(j);
        return;
    }
    ak_api_error(r, 405, "invalid_request_error", NULL, "%.200s takes POST", url);
}
