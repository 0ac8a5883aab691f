/* ak_generate, the one generation loop every front end uses: reuse of the KV cache's
 * common prefix, prefill, then chain decode with the table choosing each token (argmax
 * or the sample command: no host round trip), or decode with the host sampler (when the
 * caller wants each token's probabilities, or settings the table does not take); an
 * incremental detokenizer that never emits half a UTF-8 character; stop strings held
 * back until they can no longer match; cancellation through the callbacks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core/err.h"
#include "engine/generate.h"
#include "engine/grammar.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "model/model.h"

ak_generate_params ak_generate_default_params(void) {
    ak_generate_params p;
    memset(&p, 0, sizeof p);
    p.n_predict = -1;
    return p;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static bool show(ak_textout *g, const char *text, size_t n) {
    if (n && g->fn && g->fn(text, n, g->user)) {
        g->stop = AK_STOP_CANCELLED;
        return false;
    }
    return true;
}

ak_status ak_textout_open(ak_textout *g, const ak_tokenizer *tok, bool special, const char *const *stop, int n_stop,
                          ak_piece_fn fn, void *user, ak_err *err) {
    memset(g, 0, sizeof *g);
    size_t max_stop = 0;
    for (int i = 0; stop && i < n_stop; i++) {
        size_t k = stop[i] ? strlen(stop[i]) : 0;
        if (k > max_stop) max_stop = k;
    }
    g->tok = tok;
    g->stops = stop;
    g->n_stop = stop ? n_stop : 0;
    g->fn = fn;
    g->user = user;
    /* held bytes, then a piece after an unfinished character: every byte may become U+FFFD */
    g->cap = max_stop + 3 * (ak_tokenizer_max_piece(tok) + 4) + 8;
    if (!(g->buf = malloc(g->cap))) return ak_fail(err, AK_ERR_NOMEM, "generate: out of memory");
    ak_detok_init(&g->d, special);
    return AK_OK;
}

void ak_textout_close(ak_textout *g) {
    free(g->buf);
    g->buf = NULL;
}

/* Appends n bytes (already in buf[len..len+n)), shows what can no longer start a stop
 * string; false when a stop string appeared or the caller cancelled. */
static bool settle(ak_textout *g, size_t n) {
    g->len += n;
    size_t cut, hold;
    if (ak_stop_scan(g->buf, g->len, g->stops, g->n_stop, &cut, &hold)) {
        g->len = 0;
        if (!show(g, g->buf, cut)) return false;
        g->stop = AK_STOP_STRING;
        return false;
    }
    size_t upto = g->len - hold;
    if (!show(g, g->buf, upto)) return false;
    memmove(g->buf, g->buf + upto, hold);
    g->len = hold;
    return true;
}

bool ak_textout_push(ak_textout *g, int32_t id) {
    if (ak_tokenizer_is_eog(g->tok, id)) {
        g->stop = AK_STOP_EOG;
        return false;
    }
    size_t n = 0;
    /* an id past the tokenizer's vocabulary (embedding rows padded beyond it) has no
     * text; buf always has room for the longest piece */
    if (ak_detok_push(&g->d, g->tok, id, g->buf + g->len, g->cap - g->len, &n, NULL)) n = 0;
    return settle(g, n);
}

void ak_textout_finish(ak_textout *g) {
    if (g->stop == AK_STOP_STRING || g->stop == AK_STOP_CANCELLED) return;
    size_t n = 0;
    ak_detok_flush(&g->d, g->buf + g->len, g->cap - g->len, &n, NULL);
    if (n > 0 && !settle(g, n)) return;
    show(g, g->buf, g->len);   /* the held text is final: a stop string can no longer complete */
    g->len = 0;
}

/* One generated token into the text and the caller's id buffer: false when generation
 * ends with it. */
typedef struct {
    ak_textout out;
    const ak_generate_params *p;
    int n_gen;
} gen;

/* log p(id) and the n_top most likely of a logits row, for on_token. */
static bool report(gen *g, const float *logits, int vocab, int32_t id) {
    ak_token_prob top[AK_MAX_TOP];
    int k = g->p->n_top, n = 0;
    float mx = logits[0];
    for (int i = 1; i < vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (int i = 0; i < vocab; i++) {
        sum += exp((double)logits[i] - mx);
        if (!k || (n == k && logits[i] <= top[n - 1].logprob)) continue;
        int j = n < k ? n++ : n - 1;   /* insert, keeping the best first (ties: the smaller id) */
        while (j > 0 && top[j - 1].logprob < logits[i]) top[j] = top[j - 1], j--;
        top[j] = (ak_token_prob){i, logits[i]};
    }
    float lse = (float)(mx + log(sum));
    for (int i = 0; i < n; i++) top[i].logprob -= lse;
    ak_token_info t = {id, logits[id] - lse, top, n};
    if (g->p->on_token(&t, g->p->token_user)) {
        g->out.stop = AK_STOP_CANCELLED;
        return false;
    }
    return true;
}

/* One generated token (logits: its row, when on_token wants it). */
static bool take(gen *g, int32_t id, const float *logits, int vocab) {
    if (g->p->ids_out && g->n_gen < g->p->ids_cap) g->p->ids_out[g->n_gen] = id;
    g->n_gen++;
    if (g->p->on_token && !ak_tokenizer_is_eog(g->out.tok, id) && !report(g, logits, vocab, id)) return false;
    return ak_textout_push(&g->out, id);
}

/* The table picks every token (argmax, or the sample command with the request's
 * settings) and chain decode runs chunks with no host round trip. A chunk is kept within 10-20 ms (from one token, so
 * the first piece comes at once): on a GPU it grows to a few dozen tokens, whose host
 * round trip is then noise; on a CPU, where a round trip costs nothing, it stays at a
 * token or two, so text streams a token at a time (chunks of 25-100 ms came out as
 * visible bursts of four). Tokens past a stop are rewound: fewer than AK_CHAIN_MAX, which a
 * session's rings keep beyond their window, so the rewind stays within reach. */
static ak_status decode_chain(ak_session *s, gen *g, int32_t tok, int limit, ak_err *err) {
    const ak_model *m = ak_session_model(s);
    const int32_t *eog;
    int n_eog = ak_model_eog_ids(m, &eog), chunk = 1;
    int32_t out[AK_CHAIN_MAX];
    while (g->n_gen < limit) {
        int want = limit - g->n_gen < chunk ? limit - g->n_gen : chunk, got = 0, base = ak_session_pos(s);
        double t0 = now();
        ak_status st = ak_chain_decode(s, tok, want, eog, n_eog, out, &got, err);
        if (st) return st;
        double dt = now() - t0;
        for (int i = 0; i < got; i++) {
            tok = out[i];
            if (!take(g, tok, NULL, 0)) return ak_session_rewind(s, base + 1 + i, err);
        }
        if (dt < 0.010 && chunk < AK_CHAIN_MAX) chunk *= 2;
        else if (dt > 0.020 && chunk > 1) chunk /= 2;
    }
    return AK_OK;
}

/* A grammar the reply follows (engine/grammar.h): its matcher, the mask of the next
 * token, and for a deferred grammar the text that starts it and the recent text that
 * has not started it yet. */
typedef struct {
    ak_grammar *g;
    ak_gmatch *m;
    uint32_t *mask;
    const char *after;     /* NULL once active */
    char *tail;            /* the last bytes generated before it starts */
    size_t tail_len, tail_cap;
} gram;

static void gram_free(gram *r) {
    ak_gmatch_free(r->m);
    ak_grammar_free(r->g);
    free(r->mask);
    free(r->tail);
}

static ak_status gram_open(gram *r, ak_session *s, const char *text, const char *after, ak_err *err) {
    ak_status st = ak_grammar_parse(text, strlen(text), NULL, &r->g, err);
    if (st) {   /* the caller's grammar is bad */
        char msg[sizeof err->msg];
        memcpy(msg, err->msg, sizeof msg);
        return ak_fail(err, AK_ERR_ARG, "grammar: %s", msg);
    }
    const ak_gvocab *v;
    if ((st = ak_session_gvocab(s, &v, err)) || (st = ak_gmatch_create(r->g, v, &r->m, err))) return st;
    const ak_model *m = ak_session_model(s);
    r->mask = malloc(((size_t)ak_model_vocab(m) + 31) / 32 * 4);
    if (after && *after) {
        r->after = after;
        r->tail_cap = strlen(after) + ak_tokenizer_max_piece(m->tok) + 8;
        r->tail = malloc(r->tail_cap);
    }
    if (!r->mask || (r->after && !r->tail)) return ak_fail(err, AK_ERR_NOMEM, "grammar: out of memory");
    return AK_OK;
}

/* The mask for the next token (NULL while the grammar waits for its start); false at a
 * dead end: the sentence is complete and the model has no end-of-generation id. */
static bool gram_mask(gram *r, const uint32_t **mask) {
    *mask = NULL;
    if (!r->g || r->after) return true;
    *mask = r->mask;
    return ak_gmatch_mask(r->m, r->mask) > 0;
}

/* The matcher follows a generated token; a deferred grammar starts once its text has
 * appeared (the bytes after it, in the same token, are the grammar's first). */
static ak_status gram_take(gram *r, const ak_tokenizer *tok, int32_t id, ak_err *err) {
    if (!r->g) return AK_OK;
    if (!r->after) {
        if (!ak_gmatch_accept_token(r->m, id)) return ak_fail(err, AK_ERR_BACKEND, "grammar: token %d was chosen outside the mask", id);
        return AK_OK;
    }
    size_t n = 0, k = strlen(r->after);
    char piece[512];
    if (ak_tokenizer_piece(tok, id, true, piece, sizeof piece, &n, NULL) || n > sizeof piece) n = 0;
    if (r->tail_len + n > r->tail_cap) {   /* keep what could still hold the start text */
        size_t keep = k - 1 < r->tail_len ? k - 1 : r->tail_len;
        memmove(r->tail, r->tail + r->tail_len - keep, keep);
        r->tail_len = keep;
    }
    if (r->tail_len + n > r->tail_cap) n = r->tail_cap - r->tail_len;
    memcpy(r->tail + r->tail_len, piece, n);
    r->tail_len += n;
    for (size_t i = 0; i + k <= r->tail_len; i++)
        if (!memcmp(r->tail + i, r->after, k)) {
            r->after = NULL;
            const char *rest = r->tail + i + k;
            size_t rn = r->tail_len - i - k;
            if (rn && !ak_gmatch_accept_bytes(r->m, rest, rn))
                ak_gmatch_reset(r->m);   /* bytes the grammar cannot start with: it starts at the next token */
            break;
        }
    return AK_OK;
}

/* A token at a time, when a grammar's mask changes each step, with on_token, or with
 * settings only the host sampler takes (top-k off or above AK_SAMPLE_MAX_K, a long
 * penalty window). smp NULL: the table picks (under the mask it is given); otherwise the
 * decode table's logits come back to the host sampler, and raw keeps the row on_token
 * reports, before the penalties and the mask change it. */
static ak_status decode_steps(ak_session *s, gen *g, gram *gr, ak_sampler *smp, float *logits, float *raw, int32_t tok,
                              int limit, ak_err *err) {
    const ak_model *m = ak_session_model(s);
    int vocab = ak_model_vocab(m);
    while (g->n_gen < limit) {
        const uint32_t *mask;
        if (!gram_mask(gr, &mask)) { g->out.stop = AK_STOP_EOG; break; }
        int32_t next;
        ak_status st = smp || !gr->g ? AK_OK : ak_session_set_mask(s, mask, err);
        if (st || (st = ak_decode(s, tok, &next, smp ? logits : NULL, err))) return st;
        if (smp) {
            if (raw) memcpy(raw, logits, (size_t)vocab * sizeof *raw);
            next = ak_sampler_sample(smp, logits, ak_session_pos(s), mask);
            ak_sampler_accept(smp, next);
        }
        tok = next;
        if ((st = gram_take(gr, m->tok, tok, err))) return st;
        if (!take(g, tok, raw, vocab)) break;
    }
    return AK_OK;
}

/* Prompt lookup: the continuation, after its last earlier occurrence, of the longest
 * suffix (4 tokens down to 2) of h[0..n) that occurred before; up to k ids into d. (A
 * one-token suffix recurs everywhere and drafted mostly wrong continuations.) */
static int ngram_draft(const int32_t *h, int n, int k, int32_t *d) {
    for (int m = 4; m >= 2; m--) {
        if (n < m + 1) continue;
        const int32_t *suf = h + n - m;
        for (int j = n - m - 1; j >= 0; j--) {
            if (h[j] != suf[0] || memcmp(h + j, suf, (size_t)m * sizeof *h)) continue;
            int c = 0;
            while (c < k && j + m + c < n) d[c] = h[j + m + c], c++;
            return c;
        }
    }
    return 0;
}

/* The draft model's k ids after h[0..n) (reusing what its cache holds), chosen as the
 * target chooses: the same settings, the same keys. Rows its cache lacks go in one
 * prefill with h's last, whose choice is the first draft: after a fully accepted round
 * that is two rows, where a prefill of one and a decode step of the last took two passes
 * over the draft's weights. */
static ak_status model_draft(ak_session *ds, const int32_t *h, int n, int k, int32_t *d, int *got, ak_err *err) {
    const int32_t *have = ak_session_tokens(ds);
    int common = 0, pos = ak_session_pos(ds);
    while (common < pos && common < n - 1 && have[common] == h[common]) common++;
    common = ak_session_keep(ds, common);
    ak_status st = ak_session_rewind(ds, common, err);
    if (st) return st;
    if (common == n - 1) return ak_chain_decode(ds, h[n - 1], k, NULL, 0, d, got, err);
    if ((st = ak_prefill(ds, h + common, n - common, d, NULL, err))) return st;
    int more = 0;
    if (k > 1) st = ak_chain_decode(ds, d[0], k - 1, NULL, 0, d + 1, &more, err);
    *got = 1 + more;
    return st;
}

/* Speculative decoding: each step drafts up to k ids (prompt lookup or the draft model),
 * the target checks tok and the drafts in one pass (its choice for every position), and
 * keeps its choices up to the first that differs from a draft, plus that one: the same
 * ids as decode_chain, fewer passes. hist: room for the whole context. A rewind takes
 * back at most AK_SPEC_MAX rows just written, within a ring's reach (AK_CHAIN_MAX). */
static ak_status decode_spec(ak_session *s, gen *g, int32_t tok, int limit, int32_t *hist, ak_generate_result *r,
                             ak_err *err) {
    const ak_generate_params *p = g->p;
    int n_ctx = ak_session_n_ctx(s), rows = ak_session_verify_rows(s), want = p->spec_draft;
    int32_t d[AK_SPEC_MAX], in[AK_SPEC_MAX + 1], y[AK_SPEC_MAX + 1];
    ak_status st = AK_OK;
    while (g->n_gen < limit) {
        int base = ak_session_pos(s), k = want, got = 0;
        if (k > limit - g->n_gen - 1) k = limit - g->n_gen - 1;   /* the check's own choice is one more */
        if (k > n_ctx - base - 1) k = n_ctx - base - 1;
        if (k > rows - 1) k = rows - 1;
        memcpy(hist, ak_session_tokens(s), (size_t)base * sizeof *hist);
        hist[base] = tok;
        if (k > 0 && p->draft) st = model_draft(p->draft, hist, base + 1, k, d, &got, err);
        else if (k > 0) got = ngram_draft(hist, base + 1, k, d);
        if (st) return st;
        if (!got) {   /* nothing to check: one step of the decode table */
            if ((st = ak_chain_decode(s, tok, 1, NULL, 0, y, &got, err))) return st;
            if (!take(g, y[0], NULL, 0)) return ak_session_rewind(s, base + 1, err);
            tok = y[0];
            continue;
        }
        in[0] = tok;
        memcpy(in + 1, d, (size_t)got * sizeof *d);
        if ((st = ak_session_verify(s, in, got + 1, y, NULL, err))) return st;
        int a = 0;
        while (a < got && y[a] == d[a]) a++;
        r->n_drafted += got;
        r->n_accepted += a;
        /* a pass costs more the more rows it checks: draft as far as drafts have held */
        want = a == got ? (2 * want < p->spec_draft ? 2 * want : p->spec_draft) : (a + 1 > 2 ? a + 1 : 2);
        for (int i = 0; i <= a; i++)
            if (!take(g, y[i], NULL, 0)) return ak_session_rewind(s, base + 1 + i, err);
        if ((st = ak_session_rewind(s, base + a + 1, err))) return st;
        tok = y[a];
    }
    return AK_OK;
}

/* Whether the table's sample command takes these settings (else the host sampler does). */
static bool table_samples(const ak_sample_cfg *c, size_t vocab) {
    return (c->mode != AK_SAMPLE_DRAW || (c->top_k >= 1 && c->top_k <= AK_SAMPLE_MAX_K)) && c->last_n <= AK_SAMPLE_MAX_WINDOW &&
           (c->mode == AK_SAMPLE_ARGMAX || vocab <= AK_SAMPLE_MAX_VOCAB);
}

ak_status ak_session_set_sampling(ak_session *s, const ak_sampling_params *p, ak_err *err) {
    if (!s) return ak_fail(err, AK_ERR_ARG, "set_sampling: NULL session");
    if (!p) return ak_session_set_sample(s, NULL, err);
    ak_status st = ak_sampling_check(p, err);
    if (st) return st;
    ak_sample_cfg c = ak_sampler_cfg(p);
    if (!table_samples(&c, (size_t)ak_model_vocab(ak_session_model(s))))
        return ak_fail(err, AK_ERR_UNSUPPORTED, "the table samples with top_k in 1..%d, a penalty window of at most %d "
                       "tokens and a vocabulary of at most %d ids", AK_SAMPLE_MAX_K, AK_SAMPLE_MAX_WINDOW, AK_SAMPLE_MAX_VOCAB);
    return ak_session_set_sample(s, &c, err);
}

ak_status ak_generate(ak_session *s, const int32_t *prompt, int n, const ak_generate_params *pp, ak_piece_fn on_piece,
                      void *user, ak_generate_result *result, ak_err *err) {
    ak_generate_params p = pp ? *pp : ak_generate_default_params();
    ak_generate_result r;
    memset(&r, 0, sizeof r);
    if (result) *result = r;
    if (!s || (!prompt && n)) return ak_fail(err, AK_ERR_ARG, "generate: NULL argument");
    const ak_model *m = ak_session_model(s);
    if (ak_model_is_encoder(m)) return ak_fail(err, AK_ERR_ARG, "%s is an encoder model: it embeds text, it does not generate", ak_model_arch_name(m));
    if (!m->tok) return ak_fail(err, AK_ERR_UNSUPPORTED, "generate: the model has no tokenizer to turn tokens into text");
    if (n <= 0) return ak_fail(err, AK_ERR_ARG, "generate: empty prompt");
    if (n >= ak_session_n_ctx(s))
        return ak_fail(err, AK_ERR_ARG, "the prompt is %d tokens; the context holds %d", n, ak_session_n_ctx(s));
    if (p.n_stop < 0 || (p.n_stop && !p.stop) || p.ids_cap < 0 || (p.ids_cap && !p.ids_out))
        return ak_fail(err, AK_ERR_ARG, "generate: bad stop strings or id buffer");
    if (p.n_top < 0 || p.n_top > AK_MAX_TOP) return ak_fail(err, AK_ERR_ARG, "generate: n_top must be in 0..%d", AK_MAX_TOP);
    if (p.spec_draft < 0 || p.spec_draft > AK_SPEC_MAX)
        return ak_fail(err, AK_ERR_ARG, "generate: spec_draft must be in 0..%d", AK_SPEC_MAX);
    if (p.draft && (p.draft == s || ak_model_vocab(ak_session_model(p.draft)) != ak_model_vocab(m) ||
                    ak_session_n_ctx(p.draft) < ak_session_n_ctx(s)))
        return ak_fail(err, AK_ERR_ARG, "generate: the draft model needs its own session, the target's vocabulary (%d ids) "
                       "and at least its context (%d)", ak_model_vocab(m), ak_session_n_ctx(s));
    ak_sampling_params sp = p.sampling;
    size_t vocab = (size_t)ak_model_vocab(m);
    ak_status st = ak_sampling_check(&sp, err);
    if (st) return st;
    ak_sample_cfg cfg = ak_sampler_cfg(&sp);
    bool table = !p.on_token && table_samples(&cfg, vocab) && (!p.grammar || vocab <= AK_SAMPLE_MAX_VOCAB);
    ak_sampler *smp = NULL;
    if ((st = table ? ak_session_set_sample(s, &cfg, err) : ak_sampler_create(&sp, (int)vocab, &smp, err))) return st;
    gen g = {.p = &p};
    gram gr;
    memset(&gr, 0, sizeof gr);
    const uint32_t *mask = NULL;
    float *logits = table ? NULL : malloc((p.on_token ? 2 : 1) * vocab * sizeof *logits);
    float *raw = p.on_token && logits ? logits + vocab : NULL;
    /* speculation where the table picks every token with no grammar */
    bool spec = table && !p.grammar && p.spec_draft > 0;
    int32_t *hist = spec ? malloc((size_t)ak_session_n_ctx(s) * sizeof *hist) : NULL;
    if ((!table && !logits) || (spec && !hist)) {
        st = ak_fail(err, AK_ERR_NOMEM, "generate: out of memory");
        goto done;
    }
    if (spec && p.draft && (st = ak_session_set_sample(p.draft, &cfg, err))) goto done;
    if (p.grammar && (st = gram_open(&gr, s, p.grammar, p.grammar_after, err))) goto done;
    if (!gram_mask(&gr, &mask)) {
        st = ak_fail(err, AK_ERR_ARG, "grammar: it allows no token at the start");
        goto done;
    }
    if (table && gr.g && (st = ak_session_set_mask(s, mask, err))) goto done;
    if ((st = ak_textout_open(&g.out, m->tok, p.special, p.stop, p.n_stop, on_piece, user, err))) goto done;

    /* keep the longest cached prefix; at least one token is prefilled for its logits */
    const int32_t *cached = ak_session_tokens(s);
    int common = 0, pos = ak_session_pos(s);
    while (common < pos && common < n - 1 && cached[common] == prompt[common]) common++;
    common = ak_session_keep(s, common);   /* a sliding window's ring may no longer reach back so far */
    if ((st = ak_session_rewind(s, common, err))) goto done;
    r.n_prompt = n;
    r.n_cached = common;
    double t0 = now();
    int32_t tok;
    if ((st = ak_prefill(s, prompt + common, n - common, &tok, logits, err))) goto done;
    double t1 = now();
    r.prefill_seconds = t1 - t0;

    int room = ak_session_n_ctx(s) - ak_session_pos(s);
    int limit = p.n_predict >= 0 && p.n_predict < room ? p.n_predict : room;
    if (limit > 0) {
        if (smp) {
            for (int i = 0; i < n; i++) ak_sampler_accept(smp, prompt[i]);
            if (raw) memcpy(raw, logits, vocab * sizeof *raw);
            tok = ak_sampler_sample(smp, logits, ak_session_pos(s), mask);
            ak_sampler_accept(smp, tok);
        }
        if ((st = gram_take(&gr, m->tok, tok, err))) goto done;
        if (take(&g, tok, raw, (int)vocab)) {
            if (smp || gr.g) st = decode_steps(s, &g, &gr, smp, logits, raw, tok, limit, err);
            else if (hist) st = decode_spec(s, &g, tok, limit, hist, &r, err);
            else st = decode_chain(s, &g, tok, limit, err);
        }
        if (!st) ak_textout_finish(&g.out);
    }
    if (g.out.stop == AK_STOP_NONE)
        g.out.stop = limit == room && (p.n_predict < 0 || p.n_predict > room) ? AK_STOP_CONTEXT : AK_STOP_LENGTH;
    r.decode_seconds = now() - t1;
    r.n_generated = g.n_gen;
    r.stop = g.out.stop;
    if (result) *result = r;
done:
    if (table) {   /* ak_decode and ak_chain_decode pick greedily again, from every id */
        ak_err e2;
        ak_status st2 = ak_session_set_mask(s, NULL, &e2);
        if (!st2) st2 = ak_session_set_sample(s, NULL, &e2);
        if (st2 && !st) st = st2, *err = e2;
    }
    if (spec && p.draft) {
        ak_err e2;
        ak_session_set_sample(p.draft, NULL, &e2);
    }
    free(hist);
    gram_free(&gr);
    free(logits);
    ak_textout_close(&g.out);
    ak_sampler_free(smp);
    return st;
}
