/* The CPU backend: buffers are host memory (weights wrap the mapped file, no copy),
 * encoding resolves kernel ids and buffer bindings to function and data pointers once,
 * and replay runs the whole table for every step inside one thread-pool job: each
 * worker takes its slice of a command, then all meet at a barrier. */
#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "backend/cpu/threadpool.h"
#include "backend/cpu/panel.h"
#include "core/err.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A weight matrix repacked into panels (panel.h), shared by every table encoded on
 * this backend (prefill and decode read one copy); freed with the backend. Importing
 * a buffer over its address retires it (new weights may sit at a recycled address),
 * but keeps its memory: tables encoded before may still read it. */
typedef struct {
    const void *w;
    ak_dtype t;
    int64_t K, N;
    void *pk;
    int fresh;             /* packed by the current encode */
    int retired;           /* its address was imported again: never found again */
} cpu_packed;

typedef struct {
    ak_backend base;
    ak_pool *pool;
    cpu_packed *pk;
    int npk, cap;
} cpu_backend;

typedef struct {
    ak_cpu_cmd *cmds;
    int n;
    ak_cpu_tls *tls;       /* one per thread */
    float *scratch;
    ak_cpu_shared sh;      /* every command's */
    /* per-run state shared by the workers */
    ak_run *run;
    int32_t *tokens;
    int stop;
} cpu_table;

static const ak_cpu_fn kernel_fns[AK_K_COUNT] = {
    [AK_K_EMBED] = ak_cpu_embed, [AK_K_NORM] = ak_cpu_norm, [AK_K_ADD_NORM] = ak_cpu_add_norm,
    [AK_K_GEMV] = ak_cpu_gemv, [AK_K_GEMM] = ak_cpu_gemm, [AK_K_GEMV_ACT_DOWN] = ak_cpu_gemv_act_down,
    [AK_K_ACT_GATE] = ak_cpu_act_gate, [AK_K_ROPE_KV] = ak_cpu_rope_kv, [AK_K_ATTN_DECODE] = ak_cpu_attn_decode,
    [AK_K_ATTN_PREFILL] = ak_cpu_attn_prefill, [AK_K_SOFTCAP] = ak_cpu_softcap, [AK_K_SAMPLE] = ak_cpu_sample,
};

size_t ak_cpu_attn_scratch(const ak_p_attn *p, int prefill);

size_t ak_cpu_scratch_need(int kernel, const void *params) {
    switch (kernel) {
    case AK_K_GEMV: case AK_K_GEMM: return ak_cpu_mm_scratch(params, kernel == AK_K_GEMM);
    case AK_K_GEMV_ACT_DOWN: return 2 * (size_t)((const ak_p_act_down *)params)->K;
    case AK_K_ADD_NORM: return (size_t)((const ak_p_norm *)params)->dim;
    case AK_K_EMBED: return (size_t)((const ak_p_embed *)params)->dim;
    case AK_K_ATTN_DECODE: return ak_cpu_attn_scratch(params, 0);
    case AK_K_ATTN_PREFILL: return ak_cpu_attn_scratch(params, 1);
    default: return 0;
    }
}

void ak_cpu_shared_need(int kernel, const void *params, size_t *counts, size_t *bytes) {
    *counts = *bytes = 0;
    if (kernel == AK_K_ATTN_DECODE) ak_cpu_attn_shared(params, counts, bytes);
}

static ak_status cpu_import(ak_backend *b, const void *host, size_t size, void **out, ak_err *err) {
    (void)err;
    cpu_backend *cb = (cpu_backend *)b;
    const uint8_t *lo = host, *hi = lo + size;
    for (int i = 0; i < cb->npk; i++) {
        const uint8_t *w = cb->pk[i].w;
        if (w >= lo && w < hi) cb->pk[i].retired = 1;
    }
    *out = (void *)host;
    return AK_OK;
}

static ak_status cpu_alloc(ak_backend *b, size_t size, void **out, ak_err *err) {
    (void)b;
    *out = calloc(1, size ? size : 1);
    return *out ? AK_OK : ak_fail(err, AK_ERR_NOMEM, "cpu: cannot allocate %zu bytes", size);
}

static void cpu_buf_free(ak_backend *b, void *buf) { (void)b; free(buf); }

static ak_status cpu_write(ak_backend *b, void *buf, size_t off, const void *src, size_t n, ak_err *err) {
    (void)b; (void)err;
    memcpy((uint8_t *)buf + off, src, n);
    return AK_OK;
}

static ak_status cpu_read(ak_backend *b, void *buf, size_t off, void *dst, size_t n, ak_err *err) {
    (void)b; (void)err;
    memcpy(dst, (const uint8_t *)buf + off, n);
    return AK_OK;
}

static void cpu_encoded_free(ak_backend *b, void *enc) {
    (void)b;
    cpu_table *t = enc;
    if (!t) return;
    free(t->cmds);
    free(t->tls);
    free(t->scratch);
    free(t->sh.count);
    free(t->sh.data);
    free(t);
}

/* The panel copy of (w, t, K, N): from the cache, or a new zeroed entry that the
 * encode packs before it returns. NULL if unsupported or out of memory (the command
 * then keeps the row kernels). */
static void *packed_weight(cpu_backend *cb, const void *w, ak_dtype t, int64_t K, int64_t N) {
    if (N <= 0 || !ak_panel_supported(t, K)) return NULL;
    for (int i = 0; i < cb->npk; i++) {
        cpu_packed *e = &cb->pk[i];
        if (!e->retired && e->w == w && e->t == t && e->K == K && e->N == N) return e->pk;
    }
    if (cb->npk == cb->cap) {
        int cap = cb->cap ? 2 * cb->cap : 64;
        cpu_packed *n = realloc(cb->pk, (size_t)cap * sizeof *n);
        if (!n) return NULL;
        cb->pk = n;
        cb->cap = cap;
    }
    size_t bytes = (ak_panel_bytes(t, N, K) + 63) & ~(size_t)63;
    void *pk = aligned_alloc(64, bytes ? bytes : 64);
    if (!pk) return NULL;
    cb->pk[cb->npk++] = (cpu_packed){w, t, K, N, pk, 1, 0};
    return pk;
}

typedef struct { cpu_backend *cb; } pack_job;

/* Every thread packs its slice of the panels of each fresh entry. */
static void pack_fresh(void *ctx, int ith, int nth) {
    cpu_backend *cb = ((pack_job *)ctx)->cb;
    for (int i = 0; i < cb->npk; i++) {
        cpu_packed *e = &cb->pk[i];
        if (!e->fresh) continue;
        int64_t np = (e->N + AK_PANEL_R - 1) / AK_PANEL_R, lo, hi;
        ak_split(np, ith, nth, &lo, &hi);
        if (lo < hi) ak_panel_pack(e->t, e->w, e->N, e->K, e->pk, lo, hi);
    }
}

/* Sets c->pk for the weight segments that have a panel layout. */
static void encode_panels(cpu_backend *cb, const ak_cmd *c, ak_cpu_cmd *e) {
    if (c->kernel == AK_K_GEMV || c->kernel == AK_K_GEMM) {
        const ak_p_mm *p = (const ak_p_mm *)c->params;
        for (int i = 0; i < p->nseg && i < 3; i++)
            e->pk[i] = packed_weight(cb, e->b[i], (ak_dtype)p->dtype[i], p->K, p->N[i]);
    } else if (c->kernel == AK_K_GEMV_ACT_DOWN) {
        const ak_p_act_down *p = (const ak_p_act_down *)c->params;
        e->pk[0] = packed_weight(cb, e->b[0], (ak_dtype)p->dtype, p->K, p->N);
    }
}

static ak_status cpu_encode(ak_backend *b, const ak_table *tab, void *const bufs[AK_BUF_COUNT], void **out, ak_err *err) {
    cpu_backend *cb = (cpu_backend *)b;
    int nth = ak_pool_size(cb->pool);
    cpu_table *t = calloc(1, sizeof *t);
    if (!t) return ak_fail(err, AK_ERR_NOMEM, "cpu: out of memory");
    t->n = tab->n;
    t->cmds = calloc((size_t)tab->n + 1, sizeof *t->cmds);
    t->tls = calloc((size_t)nth, sizeof *t->tls);
    if (!t->cmds || !t->tls) { cpu_encoded_free(b, t); return ak_fail(err, AK_ERR_NOMEM, "cpu: out of memory"); }
    size_t need = 16, counts = 1, bytes = 64;
    for (int i = 0; i < tab->n; i++) {
        const ak_cmd *c = &tab->cmds[i];
        ak_cpu_cmd *e = &t->cmds[i];
        if (c->kernel >= AK_K_COUNT || !kernel_fns[c->kernel]) {
            cpu_encoded_free(b, t);
            return ak_fail(err, AK_ERR_BACKEND, "cpu: no kernel for id %d", c->kernel);
        }
        if (c->fuse) {   /* it claims no fusions (ak_backend.fuses) */
            cpu_encoded_free(b, t);
            return ak_fail(err, AK_ERR_UNSUPPORTED, "cpu: %s asks for fusions 0x%x, which this backend does not run", tab->labels[i], (unsigned)c->fuse);
        }
        e->fn = kernel_fns[c->kernel];
        for (int j = 0; j < c->nbind; j++) e->b[j] = (uint8_t *)bufs[c->bind[j].buf] + c->bind[j].off;
        memcpy(e->p, c->params, sizeof e->p);
        e->patch = c->patch;
        e->off_pos = c->off_pos;
        e->off_kv = c->off_kv;
        e->off_n = c->off_n;
        e->bind_tok = c->bind_tok;
        if (c->patch & (AK_PATCH_TOK_IN | AK_PATCH_TOK_OUT)) e->tok_base = e->b[c->bind_tok];
        size_t s = ak_cpu_scratch_need(c->kernel, c->params), sc, sb;
        ak_cpu_shared_need(c->kernel, c->params, &sc, &sb);
        if (sc > counts) counts = sc;
        if (sb > bytes) bytes = sb;
        if (c->kernel == AK_K_GEMV || c->kernel == AK_K_GEMM || c->kernel == AK_K_GEMV_ACT_DOWN) {
            encode_panels(cb, c, e);
            size_t ps = ak_cpu_mm_panel_scratch(e, c->kernel);
            if (ps > s) s = ps;
        }
        if (s > need) need = s;
    }
    int fresh = 0;
    for (int i = 0; i < cb->npk; i++) fresh |= cb->pk[i].fresh;
    if (fresh) {
        pack_job pj = {cb};
        ak_pool_run(cb->pool, pack_fresh, &pj);
        for (int i = 0; i < cb->npk; i++) cb->pk[i].fresh = 0;
    }
    need = (need + 15) & ~(size_t)15;
    t->scratch = aligned_alloc(64, (size_t)nth * need * sizeof(float));
    if (!t->scratch) { cpu_encoded_free(b, t); return ak_fail(err, AK_ERR_NOMEM, "cpu: out of memory for scratch"); }
    for (int i = 0; i < nth; i++) { t->tls[i].scratch = t->scratch + (size_t)i * need; t->tls[i].scratch_n = need; }
    t->sh.count = calloc(counts, sizeof *t->sh.count);
    t->sh.data = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!t->sh.count || !t->sh.data) { cpu_encoded_free(b, t); return ak_fail(err, AK_ERR_NOMEM, "cpu: out of memory for the shared buffer"); }
    for (int i = 0; i < t->n; i++) t->cmds[i].sh = t->sh;
    t->tokens = bufs[AK_BUF_TOKENS];
    *out = t;
    return AK_OK;
}

static void put_i32(uint8_t *p, int off, int32_t v) { memcpy(p + off, &v, 4); }

/* Thread 0 patches the position-dependent fields between steps. */
static void patch_all(cpu_table *t, int pos, int n) {
    for (int i = 0; i < t->n; i++) {
        ak_cpu_cmd *c = &t->cmds[i];
        if (!c->patch) continue;
        if (c->patch & AK_PATCH_POS) put_i32(c->p, c->off_pos, pos);
        if (c->patch & AK_PATCH_KVLEN) put_i32(c->p, c->off_kv, pos + n);
        if (c->patch & AK_PATCH_N) put_i32(c->p, c->off_n, n);
        if (c->patch & AK_PATCH_TOK_IN) c->b[c->bind_tok] = c->tok_base + 4 * (size_t)pos;
        if (c->patch & AK_PATCH_TOK_OUT) c->b[c->bind_tok] = c->tok_base + 4 * (size_t)(pos + n);
    }
}

typedef struct { cpu_table *t; ak_pool *pool; } job;

static void replay(void *ctx, int ith, int nth) {
    job *j = ctx;
    cpu_table *t = j->t;
    ak_run *r = t->run;
    for (int s = 0; s < r->steps; s++) {
        if (ith == 0) patch_all(t, r->pos + s, r->n);
        ak_pool_barrier(j->pool);
        for (int i = 0; i < t->n; i++) {
            ak_cpu_cmd *c = &t->cmds[i];
            c->fn(c, ith, nth, &t->tls[ith]);
            ak_pool_barrier(j->pool);
        }
        if (ith == 0) {
            r->steps_done = s + 1;
            int32_t tok = t->tokens[r->pos + s + r->n];
            for (int k = 0; k < r->n_stop; k++) if (tok == r->stop[k]) t->stop = 1;
        }
        ak_pool_barrier(j->pool);
        if (t->stop) break;
    }
}

static ak_status cpu_run(ak_backend *b, void *enc, ak_run *r, ak_err *err) {
    (void)err;
    cpu_backend *cb = (cpu_backend *)b;
    cpu_table *t = enc;
    t->run = r;
    t->stop = 0;
    r->steps_done = 0;
    job j = {t, cb->pool};
    ak_pool_run(cb->pool, replay, &j);
    return AK_OK;
}

double ak_cpu_read_bandwidth(ak_pool *pool);

static ak_status cpu_bandwidth(ak_backend *b, double *gbps, ak_err *err) {
    *gbps = ak_cpu_read_bandwidth(((cpu_backend *)b)->pool);
    return *gbps > 0 ? AK_OK : ak_fail(err, AK_ERR_NOMEM, "cpu: cannot allocate the bandwidth test buffer");
}

/* MemAvailable from /proc/meminfo (what can be allocated without swapping), else the free pages. */
static uint64_t cpu_mem_available(ak_backend *b) {
    (void)b;
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    if (kb) return (uint64_t)kb * 1024;
    long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : UINT64_MAX;
}

static void cpu_destroy(ak_backend *b) {
    cpu_backend *cb = (cpu_backend *)b;
    ak_pool_free(cb->pool);
    for (int i = 0; i < cb->npk; i++) free(cb->pk[i].pk);
    free(cb->pk);
    free(cb);
}

ak_status ak_backend_cpu_create(int n_threads, ak_backend **out, ak_err *err) {
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    if (n_threads > 256) return ak_fail(err, AK_ERR_ARG, "cpu: %d threads is too many", n_threads);
    ak_cpu_detect();
    cpu_backend *cb = calloc(1, sizeof *cb);
    if (!cb) return ak_fail(err, AK_ERR_NOMEM, "cpu: out of memory");
    cb->pool = ak_pool_create(n_threads);
    if (!cb->pool) { free(cb); return ak_fail(err, AK_ERR_BACKEND, "cpu: cannot start %d threads", n_threads); }
    ak_backend *b = &cb->base;
    b->name = "cpu";
    b->rows_as_decode = true;
    b->kv_blocks = true;
    b->kv_ring = true;
    b->n_threads = n_threads;
    b->buf_import = cpu_import;
    b->buf_alloc = cpu_alloc;
    b->buf_free = cpu_buf_free;
    b->buf_write = cpu_write;
    b->buf_read = cpu_read;
    b->encode = cpu_encode;
    b->encoded_free = cpu_encoded_free;
    b->run = cpu_run;
    b->read_bandwidth = cpu_bandwidth;
    b->mem_available = cpu_mem_available;
    b->destroy = cpu_destroy;
    *out = b;
    return AK_OK;
}
