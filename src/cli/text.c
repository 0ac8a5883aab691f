/* Text in, text out for the front ends: the model's tokenizer, and the generation loop
 * that streams UTF-8 safely, honours stop strings and end-of-generation tokens, and
 * uses chain decode (no host round trip) when decoding greedily. */
#include "cli/cli.h"
#include "model/model.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double ak_cli_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

ak_tokenizer *ak_cli_tokenizer(const ak_model *m) {
    ak_tokenizer *t;
    ak_err err = {{0}};
    if (!m->gguf) { /* a safetensors directory: reading tokenizer.json is not implemented */
        fprintf(stderr, "akunu: this model has no GGUF tokenizer (a Hugging Face directory): pass --prompt-ids\n");
        return NULL;
    }
    if (ak_tokenizer_load(m->gguf, &t, &err)) {
        fprintf(stderr, "akunu: %s\n", err.msg);
        return NULL;
    }
    return t;
}

int32_t *ak_cli_tokenize(const ak_tokenizer *t, const char *text, bool add_special, bool parse_special, int *n) {
    ak_err err = {{0}};
    int need = 0;
    size_t len = strlen(text);
    ak_tokenize(t, text, len, add_special, parse_special, NULL, 0, &need, &err);
    int32_t *ids = malloc(((size_t)need + 1) * sizeof *ids);
    if (!ids) { fprintf(stderr, "akunu: out of memory\n"); return NULL; }
    if (ak_tokenize(t, text, len, add_special, parse_special, ids, need + 1, n, &err)) {
        fprintf(stderr, "akunu: %s\n", err.msg);
        free(ids);
        return NULL;
    }
    return ids;
}

typedef struct {
    char *buf;
    size_t len, cap, shown;    /* shown: bytes already printed */
    const ak_cli_opts *o;
    bool stopped;
} stream;

/* Appends bytes, prints what can no longer be the start of a stop string. */
static int emit(stream *st, const char *p, size_t n) {
    if (st->len + n + 1 > st->cap) {
        size_t cap = (st->len + n + 1) * 2;
        char *b = realloc(st->buf, cap);
        if (!b) return -1;
        st->buf = b;
        st->cap = cap;
    }
    memcpy(st->buf + st->len, p, n);
    st->len += n;
    st->buf[st->len] = 0;
    size_t cut, hold = 0;
    if (ak_stop_scan(st->buf, st->len, st->o->stops, st->o->n_stops, &cut, &hold)) {
        st->len = cut;
        st->buf[cut] = 0;
        st->stopped = true;
        hold = 0;
    }
    size_t upto = st->len - hold;
    if (upto > st->shown) {
        fwrite(st->buf + st->shown, 1, upto - st->shown, stdout);
        fflush(stdout);
        st->shown = upto;
    }
    return 0;
}

/* One generated token: false when generation ends here. */
static bool take(stream *st, const ak_tokenizer *t, ak_detok *d, int32_t id) {
    if (ak_tokenizer_is_eog(t, id)) return false;
    char piece[256];
    int n = ak_detok_push(d, t, id, piece, sizeof piece);
    if (n < 0) return false;  /* a single token never needs more than 256 bytes of text */
    if (emit(st, piece, (size_t)n)) return false;
    return !st->stopped;
}

int ak_cli_generate(ak_session *s, const ak_tokenizer *t, const ak_cli_opts *o, ak_sampler *smp, int32_t first,
                    float *logits, ak_cli_reply *r) {
    memset(r, 0, sizeof *r);
    stream st = {.o = o};
    ak_detok d;
    ak_detok_init(&d, false);
    ak_err err = {{0}};
    int room = ak_session_n_ctx(s) - ak_session_pos(s);
    int limit = o->n_predict < room ? o->n_predict : room;
    int rc = 0;
    double t0 = ak_cli_now();
    int32_t tok = first;
    /* end-of-generation ids for chain decode's on-device stop check */
    int n_vocab = ak_tokenizer_n_vocab(t), n_stop = 0;
    int32_t stop[64];
    for (int32_t i = 0; i < n_vocab && n_stop < 64; i++) if (ak_tokenizer_is_eog(t, i)) stop[n_stop++] = i;
    r->ids = malloc(((size_t)limit + 1) * sizeof *r->ids);
    if (!r->ids) { fprintf(stderr, "akunu: out of memory\n"); return 1; }
    if (smp) { tok = ak_sampler_sample(smp, logits); ak_sampler_accept(smp, tok); }
    r->ids[0] = tok;
    r->n_gen = 1;
    bool go = take(&st, t, &d, tok);
    while (go && r->n_gen < limit) {
        if (!smp) {
            /* greedy: a few tokens per chain call keeps the stream lively without a round trip per token */
            int32_t out[16];
            int want = limit - r->n_gen < 16 ? limit - r->n_gen : 16, got = 0;
            if (ak_chain_decode(s, tok, want, stop, n_stop, out, &got, &err)) { fprintf(stderr, "\nakunu: %s\n", err.msg); rc = 1; break; }
            for (int i = 0; i < got && go; i++) { tok = out[i]; r->ids[r->n_gen++] = tok; go = take(&st, t, &d, tok); }
            if (got < want) go = false;
        } else {
            int32_t next;
            if (ak_decode(s, tok, &next, logits, &err)) { fprintf(stderr, "\nakunu: %s\n", err.msg); rc = 1; break; }
            tok = ak_sampler_sample(smp, logits);
            ak_sampler_accept(smp, tok);
            r->ids[r->n_gen++] = tok;
            go = take(&st, t, &d, tok);
        }
    }
    char tail[8];
    int n = ak_detok_flush(&d, tail, sizeof tail);
    if (n > 0 && !st.stopped) emit(&st, tail, (size_t)n);
    if (st.len > st.shown && !st.stopped) { fwrite(st.buf + st.shown, 1, st.len - st.shown, stdout); st.shown = st.len; }
    fflush(stdout);
    r->seconds = ak_cli_now() - t0;
    r->text = st.buf ? st.buf : calloc(1, 1);
    r->len = st.len;
    return rc;
}

static char *token_text(const ak_tokenizer *t, int32_t id) {
    size_t len = 0;
    const char *p = id >= 0 ? ak_tokenizer_text(t, id, &len) : NULL;
    return p ? strndup(p, len) : NULL;
}

int ak_cli_chat_open(const ak_model *m, const ak_tokenizer *t, ak_cli_chat *c, ak_err *err) {
    c->ct = ak_chat_template_chatml();
    c->bos = token_text(t, ak_tokenizer_bos(t));
    c->eos = token_text(t, ak_tokenizer_eos(t));
    ak_str tmpl;
    if (!m->gguf || !ak_gguf_get_str(m->gguf, "tokenizer.chat_template", &tmpl)) return 0;
    if (ak_chat_detect(tmpl.ptr, tmpl.len, &c->ct, err)) { c->ct = ak_chat_template_chatml(); return -1; }
    return 1;
}

void ak_cli_chat_close(ak_cli_chat *c) {
    free(c->bos);
    free(c->eos);
}

char *ak_cli_chat_render(const ak_cli_chat *c, const ak_chat_msg *msgs, int n) {
    ak_err err = {{0}};
    ak_chat_opts co = {.bos = c->bos, .eos = c->eos, .add_generation_prompt = true};
    size_t len = 0;
    char *out = NULL;
    if (ak_chat_render(&c->ct, msgs, n, &co, NULL, 0, &len, &err) == AK_OK && (out = malloc(len + 1)) &&
        ak_chat_render(&c->ct, msgs, n, &co, out, len + 1, &len, &err) == AK_OK)
        return out;
    free(out);
    fprintf(stderr, "akunu: %s\n", err.msg[0] ? err.msg : "out of memory");
    return NULL;
}
