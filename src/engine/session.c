/* A session: the backend, its buffers (weights imported once, KV cache, activations
 * sized for the largest prefill chunk, the token buffer), and two tables built and
 * encoded once: one-token decode and chunked prefill. */
#include "backend/backend.h"
#include "engine/build.h"
#include "core/err.h"
#include "core/sample.h"
#include "engine/grammar.h"
#include "engine/session.h"
#include "model/model.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct ak_session {
    ak_model *m;
    ak_session_params p;
    ak_backend *be;
    void *bufs[AK_BUF_COUNT];
    ak_table decode, prefill;
    void *enc_decode, *enc_prefill;
    int pos;
    int ring;              /* rows a sliding-window layer's cache keeps, a ring (ak_build_ring); 0: none */
    int hi;                /* the furthest position the cache has written since it was empty: a ring has lost
                              every position below hi - ring */
    int32_t *ids;          /* [n_ctx] the ids in the KV cache, [0, pos) */
    ak_sample_cfg sample;  /* what the sample buffer holds */
    ak_gvocab *gvocab;     /* the vocabulary's trie for grammars, built at the first one */
    ak_table verify;       /* speculative verification (built at its first use): a few rows, */
    void *enc_verify;      /* logits for each into their own buffer, a token chosen from each */
    void *verify_logits;
    int verify_rows;
    float *pool;           /* ak_embed's rows to pool, read back in one copy (pool_cap floats) */
    size_t pool_cap;
    int32_t *seg;          /* [2 n_ctx] ak_embed's segment table (ak_build_segments), made at its first call */
};

ak_session_params ak_session_default_params(void) {
    ak_session_params p = {0};
    p.kv_type_v = AK_KV_AUTO;
    return p;
}

static bool kv_known(ak_kv_type t) {
    return t == AK_KV_F32 || t == AK_KV_F16 || t == AK_KV_AUTO || t == AK_KV_Q8_0 || t == AK_KV_Q4_0;
}

static ak_dtype kv_dtype(ak_kv_type t) {
    return t == AK_KV_F16 ? AK_F16 : t == AK_KV_Q8_0 ? AK_Q8_0 : t == AK_KV_Q4_0 ? AK_Q4_0 : AK_F32;
}

/* The KV cache's layout, which every table of the session shares. */
static ak_build_opts kv_opts(const ak_session *s) {
    return (ak_build_opts){.max_seq = s->p.n_ctx, .kt = kv_dtype(s->p.kv_type), .vt = kv_dtype(s->p.kv_type_v), .ring = s->ring};
}

static ak_status alloc_bufs(ak_session *s, const size_t *sz, ak_err *err) {
    ak_status st = s->be->buf_import(s->be, s->m->weights, s->m->weights_size, &s->bufs[AK_BUF_WEIGHTS], err);
    if (st) return st;
    for (int i = 1; i < AK_BUF_COUNT; i++)
        if ((st = s->be->buf_alloc(s->be, sz[i], &s->bufs[i], err))) return st;
    memset(&s->sample, 0, sizeof s->sample);   /* argmax */
    if ((st = s->be->buf_write(s->be, s->bufs[AK_BUF_SAMPLE], 0, &s->sample, sizeof s->sample, err))) return st;
    return s->be->buf_write(s->be, s->bufs[AK_BUF_AUX], 0, s->m->aux, s->m->aux_size, err);
}

ak_status ak_session_create(ak_model *m, const ak_session_params *p, ak_session **out, ak_err *err) {
    return ak_session_create_ex(m, p, false, out, err);
}

ak_status ak_session_create_ex(ak_model *m, const ak_session_params *pp, bool unfused, ak_session **out, ak_err *err) {
    *out = NULL;
    ak_session_params p = pp ? *pp : ak_session_default_params();
    if (p.n_ctx < 0 || p.chunk < 0 || p.n_threads < 0) return ak_fail(err, AK_ERR_ARG, "session: negative parameter");
    if (!kv_known(p.kv_type) || !kv_known(p.kv_type_v))
        return ak_fail(err, AK_ERR_ARG, "session: unknown KV cache type %d", (int)(kv_known(p.kv_type) ? p.kv_type_v : p.kv_type));
    if (p.n_ctx == 0) p.n_ctx = m->cfg.n_ctx_train < 4096 ? m->cfg.n_ctx_train : 4096;
    if (m->pos_embd && p.n_ctx > m->cfg.n_ctx_train)   /* position p + i would read past its table */
        return ak_fail(err, AK_ERR_ARG, "session: %s has learned positions for %d tokens; a context of %d is longer",
                       m->arch_name, m->cfg.n_ctx_train, p.n_ctx);
    if (p.chunk == 0) p.chunk = 512;
    if (p.chunk > p.n_ctx || m->arch->encoder) p.chunk = p.n_ctx; /* non-causal: the whole input in one chunk */
    bool cuda = p.backend == AK_BACKEND_CUDA || (p.backend == AK_BACKEND_AUTO && ak_backend_cuda_present());
    /* an encoder's cache holds one input for one call: F32 keeps its embeddings exact */
    if (p.kv_type == AK_KV_AUTO) p.kv_type = cuda && !m->arch->encoder ? AK_KV_F16 : AK_KV_F32;
    if (p.kv_type_v == AK_KV_AUTO) p.kv_type_v = p.kv_type;
    bool kv_blocks = p.kv_type == AK_KV_Q8_0 || p.kv_type == AK_KV_Q4_0 || p.kv_type_v == AK_KV_Q8_0 || p.kv_type_v == AK_KV_Q4_0;
    if (kv_blocks && !m->arch->encoder && m->cfg.head_dim % 32)
        return ak_fail(err, AK_ERR_UNSUPPORTED, "session: a Q8_0 or Q4_0 KV cache needs a head dimension that is a "
                       "multiple of 32; this model's is %d", m->cfg.head_dim);
    if (p.n_ctx > (1 << 20)) {
        ak_build_opts o = {.max_seq = p.n_ctx, .kt = kv_dtype(p.kv_type), .vt = kv_dtype(p.kv_type_v)};
        size_t sz[AK_BUF_COUNT];
        ak_build_buf_sizes(m, &o, sz);
        return ak_fail(err, AK_ERR_ARG, "session: a context of %d positions needs %.1f GB of KV cache; at most %d positions are supported",
                       p.n_ctx, (double)sz[AK_BUF_KV] / 1e9, 1 << 20);
    }
    ak_session *s = calloc(1, sizeof *s);
    if (!s) return ak_fail(err, AK_ERR_NOMEM, "out of memory");
    if (!(s->ids = malloc((size_t)p.n_ctx * sizeof *s->ids))) { free(s); return ak_fail(err, AK_ERR_NOMEM, "out of memory"); }
    s->m = m;
    s->p = p;
    ak_status st = cuda ? ak_backend_cuda_create(&s->be, err) : ak_backend_cpu_create(p.n_threads, &s->be, err);
    if (st) { free(s->ids); free(s); return st; }
    if (!s->be->kv_blocks && !m->arch->encoder && (kv_blocks || p.kv_type != p.kv_type_v)) {
        st = ak_fail(err, AK_ERR_UNSUPPORTED, "session: the %s backend keeps K and V as F16 or F32, both alike (asked: %s and %s)",
                     s->be->name, ak_kv_type_name(p.kv_type), ak_kv_type_name(p.kv_type_v));
        goto fail;
    }
    /* a ring keeps the window and what one call writes before its first row reads it: a
     * prefill chunk, or a chain of ak_generate's, which it may take back after a stop */
    if (s->be->kv_ring) s->ring = ak_build_ring(m, p.n_ctx, p.chunk > AK_CHAIN_MAX ? p.chunk : AK_CHAIN_MAX);
    ak_build_opts od = kv_opts(s);
    od.rows = 1;
    od.unfused = unfused;
    od.be = s->be;
    ak_build_opts op = od;
    op.prefill = true;
    op.rows = p.chunk;
    op.logits_all = p.logits_all;
    size_t sz[AK_BUF_COUNT];
    ak_build_buf_sizes(m, &op, sz);
    if (!p.logits_all) sz[AK_BUF_LOGITS] = (size_t)m->cfg.vocab * sizeof(float);
    double kv_gb = (double)sz[AK_BUF_KV] / 1e9, act_gb = -kv_gb;
    for (int i = 1; i < AK_BUF_COUNT; i++) act_gb += (double)sz[i] / 1e9;
    /* ask before allocating: a context too large for memory fails here with its size,
     * never later in the OOM killer once the cache fills */
    double need_gb = kv_gb + act_gb + (s->be->weights_copied ? (double)m->weights_size / 1e9 : 0);
    double avail_gb = (double)s->be->mem_available(s->be) / 1e9;
    if (need_gb > avail_gb) {
        st = ak_fail(err, AK_ERR_NOMEM, "session: a context of %d positions needs %.2f GB (KV cache %.2f GB, buffers %.2f GB%s), "
                     "more than the %.2f GB of %s memory available: use a smaller context", p.n_ctx, need_gb, kv_gb, act_gb,
                     s->be->weights_copied ? ", weights" : "", avail_gb, s->be->name);
        goto fail;
    }
    if ((st = alloc_bufs(s, sz, err))) goto fail;
    if ((st = ak_table_build(m, &op, &s->prefill, err))) goto fail;
    if ((st = s->be->encode(s->be, &s->prefill, s->bufs, &s->enc_prefill, err))) goto fail;
    if (!m->arch->encoder) {
        if ((st = ak_table_build(m, &od, &s->decode, err))) goto fail;
        if ((st = s->be->encode(s->be, &s->decode, s->bufs, &s->enc_decode, err))) goto fail;
    }
    *out = s;
    return AK_OK;
fail:
    ak_session_free(s);
    return st;
}

void ak_session_free(ak_session *s) {
    if (!s) return;
    if (s->be) {
        if (s->enc_decode) s->be->encoded_free(s->be, s->enc_decode);
        if (s->enc_prefill) s->be->encoded_free(s->be, s->enc_prefill);
        if (s->enc_verify) s->be->encoded_free(s->be, s->enc_verify);
        if (s->verify_logits) s->be->buf_free(s->be, s->verify_logits);
        for (int i = 1; i < AK_BUF_COUNT; i++) if (s->bufs[i]) s->be->buf_free(s->be, s->bufs[i]);
        s->be->destroy(s->be);
    }
    ak_table_free(&s->decode);
    ak_table_free(&s->prefill);
    ak_table_free(&s->verify);
    ak_gvocab_free(s->gvocab);
    free(s->ids);
    free(s->pool);
    free(s->seg);
    free(s);
}

int ak_session_table_size(const ak_session *s) { return s->m->arch->encoder ? s->prefill.n : s->decode.n; }

bool ak_session_table_command(const ak_session *s, int i, char *buf, size_t size) {
    const ak_table *t = s->m->arch->encoder ? &s->prefill : &s->decode;
    if (i < 0 || i >= t->n || !buf || !size) return false;
    ak_cmd_describe(t, i, buf, size);
    return true;
}
const char *ak_session_backend(const ak_session *s) { return s->be->name; }
int ak_session_threads(const ak_session *s) { return s->be->n_threads; }
ak_kv_type ak_session_kv_type(const ak_session *s) { return s->p.kv_type; }
ak_kv_type ak_session_kv_type_v(const ak_session *s) { return s->p.kv_type_v; }

const char *ak_kv_type_name(ak_kv_type t) {
    switch (t) {
    case AK_KV_F32: return "f32";
    case AK_KV_F16: return "f16";
    case AK_KV_Q8_0: return "q8_0";
    case AK_KV_Q4_0: return "q4_0";
    case AK_KV_AUTO: return "auto";
    }
    return "unknown";
}

bool ak_kv_type_from_name(const char *name, ak_kv_type *out) {
    static const ak_kv_type all[] = {AK_KV_F32, AK_KV_F16, AK_KV_Q8_0, AK_KV_Q4_0, AK_KV_AUTO};
    for (size_t i = 0; name && i < sizeof all / sizeof *all; i++)
        if (!strcmp(name, ak_kv_type_name(all[i]))) { *out = all[i]; return true; }
    return false;
}
bool ak_backend_from_name(const char *name, ak_backend_kind *out) {
    static const char *const names[] = {"cpu", "cuda", "auto"};
    static const ak_backend_kind kinds[] = {AK_BACKEND_CPU, AK_BACKEND_CUDA, AK_BACKEND_AUTO};
    for (size_t i = 0; name && i < sizeof names / sizeof *names; i++)
        if (!strcmp(name, names[i])) { *out = kinds[i]; return true; }
    return false;
}
bool ak_cuda_available(void) { return ak_backend_cuda_present(); }
int ak_session_pos(const ak_session *s) { return s->pos; }
int ak_session_n_ctx(const ak_session *s) { return s->p.n_ctx; }
const int32_t *ak_session_tokens(const ak_session *s) { return s->ids; }
const ak_model *ak_session_model(const ak_session *s) { return s->m; }
void ak_session_reset(ak_session *s) { s->pos = s->hi = 0; }

void ak_session_kv_layers(const ak_session *s, ak_kv_layers *global, ak_kv_layers *sliding) {
    ak_build_opts o = kv_opts(s);
    memset(global, 0, sizeof *global);
    memset(sliding, 0, sizeof *sliding);
    for (int l = 0; l < s->m->cfg.n_layers; l++) {
        ak_kv_layers *k = s->m->layers[l].sliding ? sliding : global;
        k->layers++;
        k->rows = ak_build_kv_rows(s->m, &o, l);
        k->bytes += ak_build_kv_bytes(s->m, &o, l);
    }
}

int ak_session_keep(const ak_session *s, int pos) {
    if (pos <= 0) return 0;
    if (pos > s->pos) pos = s->pos;
    /* the next query, at pos, reads keys [pos - W + 1, pos) */
    int need = pos - s->m->cfg.sliding_window + 1;
    return !s->ring || (need > 0 ? need : 0) >= s->hi - s->ring ? pos : 0;
}

ak_status ak_session_rewind(ak_session *s, int pos, ak_err *err) {
    if (pos < 0 || pos > s->pos) return ak_fail(err, AK_ERR_ARG, "rewind to %d: the cache holds %d tokens", pos, s->pos);
    if (ak_session_keep(s, pos) != pos)
        return ak_fail(err, AK_ERR_ARG, "rewind to %d: the sliding-window layers keep %d positions and have been written up to %d, "
                       "so they no longer hold the window before %d (ak_session_keep)", pos, s->ring, s->hi, pos);
    s->pos = pos;   /* attention reads only [0, pos): later entries are simply overwritten */
    if (!pos) s->hi = 0;
    return AK_OK;
}

/* Replays enc for r; hi then covers the positions whose keys it wrote (all it was asked
 * for, if it failed). */
static ak_status run(ak_session *s, void *enc, ak_run *r, ak_err *err) {
    ak_status st = s->be->run(s->be, enc, r, err);
    int end = r->pos + r->n * (st ? r->steps : r->steps_done);
    if (end > s->hi) s->hi = end;
    return st;
}

static ak_status check_ids(const ak_session *s, const int32_t *ids, int n, ak_err *err) {
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= s->m->cfg.vocab)
            return ak_fail(err, AK_ERR_ARG, "token id %d at position %d is outside the vocabulary (0..%d)", ids[i], i, s->m->cfg.vocab - 1);
    return AK_OK;
}

static ak_status decoder_only(const ak_session *s, ak_err *err) {
    if (s->m->arch->encoder) return ak_fail(err, AK_ERR_ARG, "%s is an encoder model: it embeds text, it does not generate", s->m->arch_name);
    return AK_OK;
}

static ak_status room(const ak_session *s, int n, ak_err *err) {
    if (n > s->p.n_ctx - s->pos)
        return ak_fail(err, AK_ERR_ARG, "context full: %d tokens at position %d exceed the context of %d", n, s->pos, s->p.n_ctx);
    return AK_OK;
}

ak_status ak_prefill(ak_session *s, const int32_t *ids, int n, int32_t *next, float *logits, ak_err *err) {
    ak_status st;
    if ((st = decoder_only(s, err))) return st;
    if (n <= 0) return ak_fail(err, AK_ERR_ARG, "prefill: empty prompt");
    if ((st = check_ids(s, ids, n, err)) || (st = room(s, n, err))) return st;
    ak_backend *be = s->be;
    size_t V = (size_t)s->m->cfg.vocab;
    for (int done = 0; done < n;) {
        int c = n - done < s->p.chunk ? n - done : s->p.chunk;
        /* per chunk: the previous chunk's argmax wrote its guess where this chunk starts */
        if ((st = be->buf_write(be, s->bufs[AK_BUF_TOKENS], 4 * (size_t)s->pos, ids + done, 4 * (size_t)c, err))) return st;
        ak_run r = {.pos = s->pos, .n = c, .steps = 1};
        if ((st = run(s, s->enc_prefill, &r, err))) return st;
        if (logits && s->p.logits_all)
            st = be->buf_read(be, s->bufs[AK_BUF_LOGITS], 0, logits + (size_t)done * V, (size_t)c * V * 4, err);
        else if (logits && done + c == n)
            st = be->buf_read(be, s->bufs[AK_BUF_LOGITS], 0, logits, V * 4, err);
        if (st) return st;
        memcpy(s->ids + s->pos, ids + done, (size_t)c * sizeof *ids);
        s->pos += c;
        done += c;
    }
    return be->buf_read(be, s->bufs[AK_BUF_TOKENS], 4 * (size_t)s->pos, next, 4, err);
}

ak_status ak_decode(ak_session *s, int32_t token, int32_t *next, float *logits, ak_err *err) {
    ak_status st;
    if ((st = decoder_only(s, err))) return st;
    if ((st = check_ids(s, &token, 1, err)) || (st = room(s, 1, err))) return st;
    ak_backend *be = s->be;
    if ((st = be->buf_write(be, s->bufs[AK_BUF_TOKENS], 4 * (size_t)s->pos, &token, 4, err))) return st;
    ak_run r = {.pos = s->pos, .n = 1, .steps = 1};
    if ((st = run(s, s->enc_decode, &r, err))) return st;
    if (logits && (st = be->buf_read(be, s->bufs[AK_BUF_LOGITS], 0, logits, (size_t)s->m->cfg.vocab * 4, err))) return st;
    s->ids[s->pos++] = token;
    return be->buf_read(be, s->bufs[AK_BUF_TOKENS], 4 * (size_t)s->pos, next, 4, err);
}

ak_status ak_chain_decode(ak_session *s, int32_t token, int n, const int32_t *stop, int n_stop,
                          int32_t *out, int *n_out, ak_err *err) {
    ak_status st;
    *n_out = 0;
    if ((st = decoder_only(s, err))) return st;
    if (n <= 0) return AK_OK;
    if ((st = check_ids(s, &token, 1, err)) || (st = room(s, n, err))) return st;
    ak_backend *be = s->be;
    if ((st = be->buf_write(be, s->bufs[AK_BUF_TOKENS], 4 * (size_t)s->pos, &token, 4, err))) return st;
    ak_run r = {.pos = s->pos, .n = 1, .steps = n, .stop = stop, .n_stop = stop ? n_stop : 0};
    if ((st = run(s, s->enc_decode, &r, err))) return st;
    if ((st = be->buf_read(be, s->bufs[AK_BUF_TOKENS], 4 * (size_t)(s->pos + 1), out, 4 * (size_t)r.steps_done, err))) return st;
    /* the chain fed token, then every id it made but the last */
    if (r.steps_done > 0) {
        s->ids[s->pos] = token;
        memcpy(s->ids + s->pos + 1, out, (size_t)(r.steps_done - 1) * sizeof *out);
    }
    s->pos += r.steps_done;
    *n_out = r.steps_done;
    return AK_OK;
}

ak_status ak_session_set_sample(ak_session *s, const ak_sample_cfg *c, ak_err *err) {
    ak_sample_cfg v;
    if (c) v = *c;
    else memset(&v, 0, sizeof v);
    v.masked = s->sample.masked;
    if (v.mode == AK_SAMPLE_DRAW && (v.top_k < 1 || v.top_k > AK_SAMPLE_MAX_K || !(v.temperature > 0)))
        return ak_fail(err, AK_ERR_ARG, "sample: the table draws with top_k in 1..%d and a positive temperature", AK_SAMPLE_MAX_K);
    if (v.masked && v.mode == AK_SAMPLE_ARGMAX) v.mode = AK_SAMPLE_GREEDY;
    if (v.mode != AK_SAMPLE_ARGMAX && (v.last_n < 0 || v.last_n > AK_SAMPLE_MAX_WINDOW || s->m->cfg.vocab > AK_SAMPLE_MAX_VOCAB))
        return ak_fail(err, AK_ERR_ARG, "sample: the table's penalty window is at most %d ids and its vocabulary %d",
                       AK_SAMPLE_MAX_WINDOW, AK_SAMPLE_MAX_VOCAB);
    if (!memcmp(&v, &s->sample, sizeof v)) return AK_OK;
    ak_status st = s->be->buf_write(s->be, s->bufs[AK_BUF_SAMPLE], 0, &v, sizeof v, err);
    if (!st) s->sample = v;
    return st;
}

ak_status ak_session_set_mask(ak_session *s, const uint32_t *mask, ak_err *err) {
    ak_status st;
    size_t words = ((size_t)s->m->cfg.vocab + 31) / 32;
    if (mask && s->m->cfg.vocab > AK_SAMPLE_MAX_VOCAB)
        return ak_fail(err, AK_ERR_ARG, "sample: the table masks vocabularies of at most %d ids", AK_SAMPLE_MAX_VOCAB);
    if (mask && (st = s->be->buf_write(s->be, s->bufs[AK_BUF_SAMPLE], AK_SAMPLE_MASK_OFF, mask, 4 * words, err))) return st;
    if (!mask == !s->sample.masked) return AK_OK;
    ak_sample_cfg v = s->sample;
    v.masked = mask != NULL;
    if (v.masked && v.mode == AK_SAMPLE_ARGMAX) v.mode = AK_SAMPLE_GREEDY;
    if ((st = s->be->buf_write(s->be, s->bufs[AK_BUF_SAMPLE], 0, &v, sizeof v, err))) return st;
    s->sample = v;
    return AK_OK;
}

/* a rejected draft is taken back within a ring's reach */
_Static_assert(AK_SPEC_MAX + 1 <= AK_CHAIN_MAX, "a verification writes no more rows than a ring keeps beyond its window");

int ak_session_verify_rows(const ak_session *s) {
    int r = AK_SPEC_MAX + 1;
    return s->p.chunk < r ? s->p.chunk : r;   /* the activations hold a prefill chunk */
}

/* The verification table, at its first use: the prefill walk over a few rows with every
 * row's logits (in a buffer of its own: the others hold one row) and choice. */
static ak_status verify_table(ak_session *s, ak_err *err) {
    if (s->enc_verify) return AK_OK;
    ak_build_opts o = kv_opts(s);
    o.prefill = o.logits_all = o.pick_all = true;
    o.rows = ak_session_verify_rows(s);
    o.as_decode = s->be->rows_as_decode;
    void *bufs[AK_BUF_COUNT];
    memcpy(bufs, s->bufs, sizeof bufs);
    ak_status st = s->be->buf_alloc(s->be, (size_t)o.rows * s->m->cfg.vocab * sizeof(float), &s->verify_logits, err);
    if (st) return st;
    bufs[AK_BUF_LOGITS] = s->verify_logits;
    if ((st = ak_table_build(s->m, &o, &s->verify, err))) return st;
    return s->be->encode(s->be, &s->verify, bufs, &s->enc_verify, err);
}

ak_status ak_session_verify(ak_session *s, const int32_t *ids, int n, int32_t *picks, float *logits, ak_err *err) {
    ak_status st;
    if ((st = decoder_only(s, err))) return st;
    if (n <= 0 || n > ak_session_verify_rows(s))
        return ak_fail(err, AK_ERR_ARG, "verify: %d rows (1..%d)", n, ak_session_verify_rows(s));
    if ((st = check_ids(s, ids, n, err)) || (st = room(s, n, err)) || (st = verify_table(s, err))) return st;
    ak_backend *be = s->be;
    if ((st = be->buf_write(be, s->bufs[AK_BUF_TOKENS], 4 * (size_t)s->pos, ids, 4 * (size_t)n, err))) return st;
    ak_run r = {.pos = s->pos, .n = n, .steps = 1};
    if ((st = run(s, s->enc_verify, &r, err))) return st;
    if ((st = be->buf_read(be, s->bufs[AK_BUF_TOKENS], 4 * (size_t)(s->pos + 1), picks, 4 * (size_t)n, err))) return st;
    if (logits && (st = be->buf_read(be, s->verify_logits, 0, logits, (size_t)n * s->m->cfg.vocab * 4, err))) return st;
    memcpy(s->ids + s->pos, ids, (size_t)n * sizeof *ids);
    s->pos += n;
    return AK_OK;
}

ak_status ak_session_gvocab(ak_session *s, const ak_gvocab **out, ak_err *err) {
    if (!s->gvocab) {
        if (!s->m->tok) return ak_fail(err, AK_ERR_UNSUPPORTED, "grammar: the model has no tokenizer");
        ak_status st = ak_gvocab_create(s->m->tok, s->m->cfg.vocab, &s->gvocab, err);
        if (st) return st;
    }
    *out = s->gvocab;
    return AK_OK;
}

ak_status ak_session_bandwidth(ak_session *s, double *gbps, ak_err *err) {
    return s->be->read_bandwidth(s->be, gbps, err);
}

/* Host scratch of n floats at s->pool (grown, never shrunk). */
static ak_status pool_room(ak_session *s, size_t n, ak_err *err) {
    if (n <= s->pool_cap) return AK_OK;
    float *p = realloc(s->pool, n * sizeof *p);
    if (!p) return ak_fail(err, AK_ERR_NOMEM, "out of memory");
    s->pool = p;
    s->pool_cap = n;
    return AK_OK;
}

/* The model's pooling of an input's n hidden rows (the rows it needs, from rows) into
 * pooled, L2-normalised if asked. */
static void pool(const ak_config *c, const float *rows, int n, float *pooled, bool normalize) {
    size_t dim = (size_t)c->dim;
    int lo = c->pooling == AK_POOL_LAST ? n - 1 : 0, hi = c->pooling == AK_POOL_MEAN || c->pooling == AK_POOL_NONE ? n : lo + 1;
    memset(pooled, 0, dim * sizeof(float));
    for (int i = lo; i < hi; i++)
        for (size_t j = 0; j < dim; j++) pooled[j] += rows[(size_t)i * dim + j];
    double norm = 0;
    for (size_t j = 0; j < dim; j++) { pooled[j] /= (float)(hi - lo); norm += (double)pooled[j] * pooled[j]; }
    if (normalize && norm > 0)
        for (size_t j = 0; j < dim; j++) pooled[j] = (float)(pooled[j] / sqrt(norm));
}

/* Inputs packed into one call where the tables take segments (ak_build_segments) and the
 * backend gains by it (pack_inputs: on a CPU the padding costs more than a call): each
 * starts at a multiple of the attention's key tile, so that it meets the tiles (and
 * rounds to the bits) it has alone; the rows between two inputs repeat the first one's
 * last id and segment, and nothing reads them. */
#define AK_SEG_ALIGN 64

static int seg_start(int end) { return (end + AK_SEG_ALIGN - 1) / AK_SEG_ALIGN * AK_SEG_ALIGN; }

/* Inputs [0, k) in one call (their rows fit the context); hidden: all rows (one input),
 * pooled: k vectors. */
static ak_status embed_call(ak_session *s, const int32_t *const *ids, const int *lens, int k, float *hidden, float *pooled,
                            bool normalize, ak_err *err) {
    const ak_config *c = &s->m->cfg;
    ak_backend *be = s->be;
    size_t dim = (size_t)c->dim;
    bool seg = ak_build_segments(s->m);
    int rows = 0;
    for (int i = 0; i < k; i++) rows = (i ? seg_start(rows) : 0) + lens[i];
    /* the ids in the session's id array, the segment table in its own */
    if (seg && !s->seg && !(s->seg = malloc((size_t)s->p.n_ctx * 2 * sizeof *s->seg)))
        return ak_fail(err, AK_ERR_NOMEM, "out of memory");
    ak_status st;
    int32_t *tab = s->seg;
    for (int i = 0, r = 0; i < k; i++) {
        int at = i ? seg_start(r) : 0;
        for (; r < at; r++) {   /* between inputs: input i - 1's last id and segment */
            s->ids[r] = s->ids[r - 1];
            if (seg) { tab[2 * r] = tab[2 * r - 2]; tab[2 * r + 1] = tab[2 * r - 1]; }
        }
        memcpy(s->ids + at, ids[i], (size_t)lens[i] * sizeof *s->ids);
        for (; r < at + lens[i]; r++)
            if (seg) { tab[2 * r] = at; tab[2 * r + 1] = at + lens[i]; }
    }
    s->pos = 0;
    if ((st = be->buf_write(be, s->bufs[AK_BUF_TOKENS], 0, s->ids, 4 * (size_t)rows, err))) return st;
    ak_build_opts o = kv_opts(s);
    if (seg && (st = be->buf_write(be, s->bufs[AK_BUF_TOKENS], ak_build_seg_off(&o), tab, 8 * (size_t)rows, err))) return st;
    ak_run r = {.pos = 0, .n = rows, .steps = 1};
    if ((st = be->run(be, s->enc_prefill, &r, err))) return st;
    if (hidden && (st = be->buf_read(be, s->bufs[AK_BUF_X], 0, hidden, (size_t)rows * dim * 4, err))) return st;
    if (!pooled) return AK_OK;
    /* the hidden rows back in one copy (a GPU pays for each) */
    const float *h = hidden;
    if (!h) {
        if ((st = pool_room(s, (size_t)rows * dim, err)) ||
            (st = be->buf_read(be, s->bufs[AK_BUF_X], 0, s->pool, (size_t)rows * dim * 4, err)))
            return st;
        h = s->pool;
    }
    for (int i = 0, at = 0; i < k; at = seg_start(at + lens[i]), i++)
        pool(c, h + (size_t)at * dim, lens[i], pooled + (size_t)i * dim, normalize);
    return AK_OK;
}

static ak_status embed_check(const ak_session *s, const int32_t *ids, int n, ak_err *err) {
    if (!s->m->arch->encoder) return ak_fail(err, AK_ERR_ARG, "%s is not an encoder model: use it to generate", s->m->arch_name);
    if (n <= 0) return ak_fail(err, AK_ERR_ARG, "embed: empty input");
    ak_status st = check_ids(s, ids, n, err);
    return st ? st : n > s->p.n_ctx ? ak_fail(err, AK_ERR_ARG, "embed: %d tokens exceed the context of %d", n, s->p.n_ctx) : AK_OK;
}

ak_status ak_embed(ak_session *s, const int32_t *ids, int n, float *hidden, float *pooled, bool normalize, ak_err *err) {
    ak_status st = embed_check(s, ids, n, err);
    return st ? st : embed_call(s, &ids, &n, 1, hidden, pooled, normalize, err);
}

ak_status ak_embed_batch(ak_session *s, const int32_t *const *ids, const int *lens, int n_seq, float *pooled,
                         bool normalize, ak_err *err) {
    for (int i = 0; i < n_seq; i++) {
        ak_status st = embed_check(s, ids[i], lens[i], err);
        if (st) return st;
    }
    /* as many inputs a call as fit (one where the tables take no segments) */
    bool pack = ak_build_segments(s->m) && s->be->pack_inputs;
    for (int i = 0; i < n_seq;) {
        int k = 1, end = lens[i];
        while (pack && i + k < n_seq && seg_start(end) + lens[i + k] <= s->p.n_ctx) {
            end = seg_start(end) + lens[i + k];
            k++;
        }
        ak_status st = embed_call(s, ids + i, lens + i, k, NULL, pooled + (size_t)i * s->m->cfg.dim, normalize, err);
        if (st) return st;
        i += k;
    }
    return AK_OK;
}

void ak_set_debug(const ak_debug *d) {
    ak_log_set(d ? d->log : NULL, d ? d->log_user : NULL);
    ak_backend_set_debug(d);
}
