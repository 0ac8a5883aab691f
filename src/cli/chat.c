/* akunu chat: an interactive conversation. Each turn renders the whole conversation
 * with the model's chat template and hands it to ak_generate, which keeps the KV cache
 * of the longest common prefix and prefills only what is new, then streams the reply. */
#include "cli.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *usage =
    "usage: akunu chat -m FILE [-p SYSTEM_PROMPT] [-n MAX_REPLY] [sampling options as for run] [-c CTX]\n"
    "  type a message and press enter; an empty line or end of input quits; /reset clears the conversation\n";

typedef struct { ak_chat_message *v; int n, cap; } conv;

static int conv_add(conv *c, const char *role, const char *text) {
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        ak_chat_message *v = realloc(c->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
        c->v = v;
        c->cap = cap;
    }
    char *r = strdup(role), *t = strdup(text);
    if (!r || !t) { free(r); free(t); return -1; }
    c->v[c->n++] = (ak_chat_message){.role = r, .content = t};
    return 0;
}

static void conv_clear(conv *c, int keep) {
    for (int i = keep; i < c->n; i++) { free((char *)c->v[i].role); free((char *)c->v[i].content); }
    c->n = keep;
}

/* The reply as it streams: printed, and kept for the conversation. */
typedef struct { char *text; size_t len, cap; bool oom; } reply;

static int on_piece(const char *text, size_t len, void *user) {
    reply *r = user;
    ak_cli_print_piece(text, len, NULL);
    if (r->len + len + 1 > r->cap) {
        size_t cap = (r->len + len + 1) * 2;
        char *t = realloc(r->text, cap);
        if (!t) { r->oom = true; return 1; }
        r->text = t;
        r->cap = cap;
    }
    memcpy(r->text + r->len, text, len);
    r->len += len;
    r->text[r->len] = 0;
    return 0;
}

/* One turn: the conversation (ending with the user's message) to a streamed reply. */
static int turn(ak_model *m, ak_session *s, const ak_cli_opts *o, conv *c) {
    char *text = NULL;
    ak_err err = {{0}};
    if (ak_chat_render(m, c->v, c->n, true, &text, &err)) { fprintf(stderr, "akunu: %s\n", err.msg); return -1; }
    int n = 0;
    int32_t *ids = ak_cli_tokens(m, text, false, true, &n);
    free(text);
    if (!ids) return -1;
    if (n + 1 >= ak_session_n_ctx(s)) {
        fprintf(stderr, "akunu: the conversation (%d tokens) no longer fits the context of %d; /reset or raise -c\n", n,
                ak_session_n_ctx(s));
        free(ids);
        return -1;
    }
    reply r = {0};
    ak_generate_params gp = ak_cli_gen_params(o);
    ak_generate_result res;
    ak_status st = ak_generate(s, ids, n, &gp, on_piece, &r, &res, &err);
    free(ids);
    printf("\n");
    fflush(stdout);
    if (st || r.oom) { fprintf(stderr, "akunu: %s\n", st ? err.msg : "out of memory"); free(r.text); return 1; }
    fprintf(stderr, "[%d new prompt tokens (%d reused), %.1f tok/s | %d generated, %.1f tok/s]\n", n - res.n_cached,
            res.n_cached, res.prefill_seconds > 0 ? (n - res.n_cached) / res.prefill_seconds : 0.0, res.n_generated,
            res.decode_seconds > 0 ? res.n_generated / res.decode_seconds : 0.0);
    int rc = conv_add(c, "assistant", r.text ? r.text : "") ? 1 : 0;
    free(r.text);
    return rc;
}

int ak_cli_chat(int argc, char **argv) {
    ak_cli_opts o;
    int rc = ak_cli_parse(argc, argv, &o, usage);
    if (rc) { free(o.ids); return rc; }
    ak_model *m;
    ak_session *s;
    if ((rc = ak_cli_open(&o, false, &m, &s))) return rc;
    if (!ak_model_chat_family(m)) {
        ak_err err = {{0}};
        char *probe = NULL;
        ak_chat_message hi = {.role = "user", .content = "hi"};
        ak_chat_render(m, &hi, 1, true, &probe, &err);   /* for the reason it fails */
        free(probe);
        if (ak_model_chat_template(m)) fprintf(stderr, "akunu: %s; using ChatML\n", err.msg);
        else fprintf(stderr, "akunu: the file has no chat template; using ChatML\n");
        ak_model_set_chat_template(m, "chatml", &err);
    }
    conv c = {0};
    int keep = 0;
    if (o.n_prompts) { conv_add(&c, "system", o.prompts[0]); keep = 1; }
    char line[65536];
    for (;;) {
        fprintf(stderr, "\n> ");
        if (!fgets(line, sizeof line, stdin)) break;
        size_t len = strlen(line);
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (!len) break;
        if (!strcmp(line, "/reset")) { conv_clear(&c, keep); ak_session_reset(s); continue; }
        if (conv_add(&c, "user", line)) { rc = 1; break; }
        int t = turn(m, s, &o, &c);
        if (t < 0) conv_clear(&c, c.n - 1);   /* the turn did not happen: drop the message */
        if (t > 0) { rc = 1; break; }
    }
    conv_clear(&c, 0);
    free(c.v);
    ak_session_free(s);
    ak_model_free(m);
    return rc;
}
