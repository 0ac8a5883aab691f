/* akunu chat: an interactive conversation. Each turn renders the whole conversation
 * with the model's chat template, keeps the KV cache of the longest common prefix and
 * prefills only what is new, then streams the reply. */
#include "cli/cli.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *usage =
    "usage: akunu chat -m FILE [-p SYSTEM_PROMPT] [-n MAX_REPLY] [sampling options as for run] [-c CTX]\n"
    "  type a message and press enter; an empty line or end of input quits; /reset clears the conversation\n";

typedef struct { ak_chat_msg *v; int n, cap; } conv;

static int conv_add(conv *c, const char *role, const char *text) {
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        ak_chat_msg *v = realloc(c->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
        c->v = v;
        c->cap = cap;
    }
    char *r = strdup(role), *t = strdup(text);
    if (!r || !t) { free(r); free(t); return -1; }
    c->v[c->n].role = r;
    c->v[c->n].content = t;
    c->n++;
    return 0;
}

static void conv_clear(conv *c, int keep) {
    for (int i = keep; i < c->n; i++) { free((char *)c->v[i].role); free((char *)c->v[i].content); }
    c->n = keep;
}

int ak_cmd_chat(int argc, char **argv) {
    ak_cli_opts o;
    int rc = ak_cli_parse(argc, argv, &o, usage);
    if (rc) { free(o.ids); return rc; }
    ak_model *m;
    ak_session *s;
    if ((rc = ak_cli_open(&o, false, &m, &s))) return rc;
    ak_tokenizer *t = ak_cli_tokenizer(m);
    ak_cli_chat ct;
    ak_err err = {{0}};
    if (!t) { rc = 1; goto out; }
    int found = ak_cli_chat_open(m, t, &ct, &err);
    if (found == 0) fprintf(stderr, "akunu: the file has no chat template; using ChatML\n");
    if (found < 0) fprintf(stderr, "akunu: %s; using ChatML\n", err.msg);
    conv c = {0};
    int keep = 0;
    if (o.n_prompts) { conv_add(&c, "system", o.prompts[0]); keep = 1; }
    int vocab = ak_model_vocab(m), n_cached = 0;
    int32_t *cached = malloc((size_t)ak_session_n_ctx(s) * sizeof *cached);   /* the ids in the KV cache */
    float *logits = o.greedy ? NULL : malloc((size_t)vocab * sizeof(float));
    ak_sampler *smp = NULL;
    if (!cached || (!o.greedy && (!logits || ak_sampler_create(&o.sp, vocab, &smp, &err)))) {
        fprintf(stderr, "akunu: %s\n", err.msg[0] ? err.msg : "out of memory");
        rc = 1;
        goto done;
    }
    char line[65536];
    for (;;) {
        fprintf(stderr, "\n> ");
        if (!fgets(line, sizeof line, stdin)) break;
        size_t len = strlen(line);
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (!len) break;
        if (!strcmp(line, "/reset")) { conv_clear(&c, keep); ak_session_reset(s); n_cached = 0; continue; }
        if (conv_add(&c, "user", line)) { rc = 1; break; }
        char *text = ak_cli_chat_render(&ct, c.v, c.n);
        int n = 0;
        int32_t *ids = text ? ak_cli_tokenize(t, text, false, true, &n) : NULL;
        free(text);
        if (!ids) { conv_clear(&c, c.n - 1); continue; }
        if (n + 1 >= ak_session_n_ctx(s)) {
            fprintf(stderr, "akunu: the conversation (%d tokens) no longer fits the context of %d; /reset or raise -c\n", n, ak_session_n_ctx(s));
            free(ids);
            conv_clear(&c, c.n - 1);
            continue;
        }
        /* only the part after the longest common prefix with the cache is prefilled */
        int common = 0;
        while (common < n_cached && common < n - 1 && cached[common] == ids[common]) common++;
        if (ak_session_rewind(s, common, &err)) { fprintf(stderr, "akunu: %s\n", err.msg); free(ids); rc = 1; break; }
        int32_t next;
        double t0 = ak_cli_now();
        if (ak_prefill(s, ids + common, n - common, &next, logits, &err)) { fprintf(stderr, "akunu: %s\n", err.msg); free(ids); rc = 1; break; }
        double tp = ak_cli_now() - t0;
        memcpy(cached, ids, (size_t)n * sizeof *ids);
        n_cached = n;
        if (smp) { ak_sampler_reset(smp); for (int i = 0; i < n; i++) ak_sampler_accept(smp, ids[i]); }
        free(ids);
        ak_cli_reply r;
        if (ak_cli_generate(s, t, &o, smp, next, logits, &r)) { free(r.text); free(r.ids); rc = 1; break; }
        printf("\n");
        fflush(stdout);
        fprintf(stderr, "[%d new prompt tokens (%d reused), %.1f tok/s | %d generated, %.1f tok/s]\n", n - common, common,
                (n - common) / tp, r.n_gen, r.seconds > 0 ? r.n_gen / r.seconds : 0.0);
        /* the cache now also holds the reply's tokens but the last; re-rendering the
         * conversation next turn finds them again as the common prefix */
        for (int i = 0; i + 1 < r.n_gen && n_cached < ak_session_pos(s); i++) cached[n_cached++] = r.ids[i];
        conv_add(&c, "assistant", r.text);
        free(r.text);
        free(r.ids);
    }
done:
    conv_clear(&c, 0);
    free(c.v);
    free(cached);
    free(logits);
    ak_sampler_free(smp);
    ak_cli_chat_close(&ct);
out:
    ak_tokenizer_free(t);
    ak_session_free(s);
    ak_model_free(m);
    return rc;
}
