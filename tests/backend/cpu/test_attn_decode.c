/* Decode attention split over the KV length (flash decoding) against a double-precision
 * reference at every SIMD level: depths around the chunk size and long ones, head dims
 * 64/128/256 and odd ones, GQA ratios 1..8, sliding window, softcap, F32 and F16 caches.
 * The result must not depend on the thread count (1, 2, 3, 7 workers in turn and 4 real
 * threads give the same bits), and each row of a several-row call (speculative
 * verification) must equal, bit for bit, the one-row decode at its position. A ring
 * cache (a sliding-window layer's: cap rows a KV head, position j in slot j % cap) gives
 * the bits of the whole cache. */
#include "backend/cpu/cpu.h"
#include "backend/cpu/attn_ref.h"
#include "test_util.h"
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 7;

typedef struct {
    int nh, nkv, hd, kv_len, window;
    float softcap;
    int f16;
} tcase;

typedef struct {
    int nkv, hd, max_seq;
    float *q, *kf, *vf;       /* kf / vf: what the kernel reads, as floats */
    uint16_t *kh, *vh;
    int cap;                  /* the same caches as rings of cap rows (0: none) */
    float *rkf, *rvf;
    uint16_t *rkh, *rvh;
} inputs;

static void make_inputs(inputs *in, int nh, int nkv, int hd, int max_seq, int rows, int f16) {
    size_t cn = (size_t)nkv * max_seq * hd, qn = (size_t)rows * nh * hd;
    memset(in, 0, sizeof *in);
    in->nkv = nkv; in->hd = hd; in->max_seq = max_seq;
    in->q = malloc(qn * 4); in->kf = malloc(cn * 4); in->vf = malloc(cn * 4);
    in->kh = malloc(cn * 2); in->vh = malloc(cn * 2);
    for (size_t i = 0; i < qn; i++) in->q[i] = 2 * ak_rand_f(&rng);
    for (size_t i = 0; i < cn; i++) {
        in->kf[i] = 2 * ak_rand_f(&rng);
        in->vf[i] = ak_rand_f(&rng);
        in->kh[i] = ak_f32_to_f16(in->kf[i]);
        in->vh[i] = ak_f32_to_f16(in->vf[i]);
        if (f16) { in->kf[i] = ak_f16_to_f32(in->kh[i]); in->vf[i] = ak_f16_to_f32(in->vh[i]); }
    }
}

/* The caches as rings of cap rows a KV head, positions [0, kv_len) written in order as
 * rope_kv writes them: each slot holds the latest position that maps to it. */
static void make_ring(inputs *in, int cap, int kv_len) {
    size_t rn = (size_t)in->nkv * cap * in->hd, hd = (size_t)in->hd;
    in->cap = cap;
    in->rkf = malloc(rn * 4); in->rvf = malloc(rn * 4); in->rkh = malloc(rn * 2); in->rvh = malloc(rn * 2);
    for (int h = 0; h < in->nkv; h++)
        for (int j = 0; j < kv_len; j++) {
            size_t to = ak_kv_row(h, j, cap, in->max_seq) * hd, from = ((size_t)h * in->max_seq + j) * hd;
            memcpy(in->rkf + to, in->kf + from, hd * 4); memcpy(in->rvf + to, in->vf + from, hd * 4);
            memcpy(in->rkh + to, in->kh + from, hd * 2); memcpy(in->rvh + to, in->vh + from, hd * 2);
        }
}

static void free_inputs(inputs *in) {
    free(in->q); free(in->kf); free(in->vf); free(in->kh); free(in->vh);
    free(in->rkf); free(in->rvf); free(in->rkh); free(in->rvh);
}

/* Row i (position pos + i) of the naive attention, in double, every head. */
static void attn_ref(const ak_p_attn *p, const inputs *in, int i, double *out) {
    for (int h = 0; h < p->n_heads; h++) ak_attn_ref(p, in->q, in->kf, in->vf, i, h, out + (size_t)h * p->head_dim);
}

static ak_cpu_cmd make_cmd(const ak_p_attn *p, const inputs *in, float *out) {
    ak_cpu_cmd c = {0};
    memcpy(c.p, p, sizeof *p);
    bool ring = p->cap > 0;   /* then in->cap */
    c.b[0] = in->q;
    c.b[1] = p->kt == AK_F16 ? (void *)(ring ? in->rkh : in->kh) : (void *)(ring ? in->rkf : in->kf);
    c.b[2] = p->kt == AK_F16 ? (void *)(ring ? in->rvh : in->vh) : (void *)(ring ? in->rvf : in->vf);
    c.b[3] = out;
    size_t counts, bytes;
    ak_cpu_shared_need(AK_K_ATTN_DECODE, p, &counts, &bytes);
    c.sh.count = calloc(counts, sizeof *c.sh.count);
    c.sh.data = malloc(bytes);
    memset(c.sh.data, 0xff, bytes);   /* NaN: a partial read before it is written shows */
    return c;
}

static void free_cmd(ak_cpu_cmd *c) { free(c->sh.count); free(c->sh.data); }

/* nth workers one after another, as the pool's threads could be scheduled. */
static void run_seq(ak_cpu_cmd *c, int nth) {
    size_t n = ak_cpu_scratch_need(AK_K_ATTN_DECODE, c->p);
    float *scratch = malloc(n * sizeof(float));
    ak_cpu_tls tls = {scratch, n};
    for (int i = nth - 1; i >= 0; i--) ak_cpu_attn_decode(c, i, nth, &tls);   /* the last to arrive is thread 0 */
    free(scratch);
}

typedef struct { ak_cpu_cmd *c; int ith, nth; } worker;
static void *work(void *arg) {
    worker *w = arg;
    size_t n = ak_cpu_scratch_need(AK_K_ATTN_DECODE, w->c->p);
    float *scratch = malloc(n * sizeof(float));
    ak_cpu_tls tls = {scratch, n};
    ak_cpu_attn_decode(w->c, w->ith, w->nth, &tls);
    free(scratch);
    return NULL;
}
/* nth real threads at once. */
static void run_par(ak_cpu_cmd *c, int nth) {
    pthread_t t[8];
    worker w[8];
    for (int i = 0; i < nth; i++) { w[i] = (worker){c, i, nth}; pthread_create(&t[i], NULL, work, &w[i]); }
    for (int i = 0; i < nth; i++) pthread_join(t[i], NULL);
}

static double rel_err(const float *a, const double *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) { num += (a[i] - b[i]) * (a[i] - b[i]); den += b[i] * b[i]; }
    return sqrt(num / (den > 0 ? den : 1));
}

/* One query row at the end of kv_len keys: against the reference; every split the same
 * bits, and (cap > 0) through a ring of cap rows too. */
static void test_case(const tcase *t, int cap, int level) {
    int ld_q = t->nh * t->hd, max_seq = t->kv_len + 3;
    inputs in;
    make_inputs(&in, t->nh, t->nkv, t->hd, max_seq, 1, t->f16);
    if (cap) make_ring(&in, cap, t->kv_len);
    ak_p_attn p = {.n = 1, .pos = t->kv_len - 1, .kv_len = t->kv_len, .n_heads = t->nh, .n_kv_heads = t->nkv,
                   .head_dim = t->hd, .ld_q = ld_q, .max_seq = max_seq, .kt = t->f16 ? AK_F16 : AK_F32, .vt = t->f16 ? AK_F16 : AK_F32, .window = t->window,
                   .causal = 1, .scale = 1 / sqrtf((float)t->hd), .softcap = t->softcap};
    size_t no = (size_t)t->nh * t->hd;
    double *ref = malloc(no * sizeof(double));
    attn_ref(&p, &in, 0, ref);
    float *first = calloc(no, sizeof(float)), *out = calloc(no, sizeof(float));
    const int nths[] = {1, 2, 3, 7};
    for (int k = 0; k < (cap ? 10 : 5); k++) {
        float *o = k ? out : first;
        memset(o, 0xff, no * sizeof(float));
        p.cap = k < 5 ? 0 : cap;
        ak_cpu_cmd c = make_cmd(&p, &in, o);
        if (k % 5 < 4) run_seq(&c, nths[k % 5]);
        else run_par(&c, 4);
        for (int i = 0; i < t->nkv; i++) CHECK(c.sh.count[i] == 0, "the counts are reset");
        free_cmd(&c);
        if (k) CHECK(!memcmp(first, out, no * sizeof(float)), "level %d nh=%d nkv=%d hd=%d kv=%d win=%d softcap=%g f16=%d ring=%d: %s differs from 1 thread",
                         level, t->nh, t->nkv, t->hd, t->kv_len, t->window, t->softcap, t->f16, p.cap,
                         k % 5 < 4 ? "a sequential split" : "4 threads");
    }
    double e = rel_err(first, ref, no);
    CHECK(e < 2e-6, "level %d nh=%d nkv=%d hd=%d kv=%d win=%d cap=%g f16=%d: rel err %g", level, t->nh, t->nkv, t->hd,
          t->kv_len, t->window, t->softcap, t->f16, e);
    free(ref); free(first); free(out);
    free_inputs(&in);
}

/* n rows at pos .. pos + n - 1 in one call equal n one-row calls bit for bit (cap > 0:
 * both through a ring of cap rows). */
static void test_rows(int nh, int nkv, int hd, int pos, int n, int window, int f16, int cap, int level) {
    int ld_q = nh * hd + 5, max_seq = pos + n + 1;
    inputs in;
    make_inputs(&in, nh, nkv, hd, max_seq, n, f16);
    if (cap) make_ring(&in, cap, pos + n);
    /* q rows at stride ld_q: the generator filled n * nh * hd floats; use a wider copy */
    float *q = malloc((size_t)n * ld_q * 4);
    for (size_t i = 0; i < (size_t)n * ld_q; i++) q[i] = 2 * ak_rand_f(&rng);
    free(in.q);
    in.q = q;
    ak_p_attn p = {.n = n, .pos = pos, .kv_len = pos + n, .n_heads = nh, .n_kv_heads = nkv, .head_dim = hd, .ld_q = ld_q,
                   .max_seq = max_seq, .kt = f16 ? AK_F16 : AK_F32, .vt = f16 ? AK_F16 : AK_F32, .window = window, .causal = 1,
                   .scale = 1 / sqrtf((float)hd), .softcap = 0, .cap = cap};
    size_t no = (size_t)nh * hd;
    float *all = calloc((size_t)n * no, sizeof(float)), *one = calloc(no, sizeof(float));
    ak_cpu_cmd c = make_cmd(&p, &in, all);
    run_par(&c, 3);
    for (int i = 0; i < n * nkv; i++) CHECK(c.sh.count[i] == 0, "the counts are reset");
    /* again with fewer rows (n is patched): the counts and partials of a call must not
     * depend on its row count */
    p.n = n / 2 + 1;
    p.kv_len = pos + p.n;
    memcpy(c.p, &p, sizeof p);
    float *half = calloc((size_t)n * no, sizeof(float));
    c.b[3] = half;
    run_par(&c, 2);
    CHECK(!memcmp(half, all, (size_t)p.n * no * sizeof(float)), "level %d: %d rows of %d differ from the full call", level, p.n, n);
    p.n = n;   /* and all rows once more after the shorter call */
    p.kv_len = pos + n;
    memcpy(c.p, &p, sizeof p);
    c.b[3] = half;
    run_par(&c, 3);
    CHECK(!memcmp(half, all, (size_t)n * no * sizeof(float)), "level %d: the full call after a shorter one differs", level);
    free(half);
    free_cmd(&c);
    for (int r = 0; r < n; r++) {
        ak_p_attn pr = p;
        pr.n = 1; pr.pos = pos + r; pr.kv_len = pos + r + 1;
        float *saved = in.q;
        in.q = q + (size_t)r * ld_q;
        ak_cpu_cmd c1 = make_cmd(&pr, &in, one);
        in.q = saved;
        run_seq(&c1, 2);
        free_cmd(&c1);
        CHECK(!memcmp(one, all + (size_t)r * no, no * sizeof(float)), "level %d hd=%d pos=%d row %d of %d (window %d, f16 %d, ring %d) differs from its decode step",
              level, hd, pos, r, n, window, f16, cap);
        double *ref = malloc(no * sizeof(double));
        attn_ref(&p, &in, r, ref);
        double e = rel_err(all + (size_t)r * no, ref, no);
        CHECK(e < 2e-6, "level %d rows: rel err %g", level, e);
        free(ref);
    }
    free(all); free(one);
    free_inputs(&in);
}

int main(void) {
    ak_cpu_detect();
    const int detected = ak_cpu_simd, D = AK_ATTN_DC;
    const int depths[] = {1, 63, 64, 65, D - 1, D, D + 1, 4097};
    const int hds[] = {64, 128, 256};
    const int groups[] = {1, 2, 4, 8};
    for (int level = 0; level <= detected; level++) {
        ak_cpu_detect();
        ak_cpu_simd = level;
        printf("simd level %d\n", level);
        for (size_t di = 0; di < sizeof depths / sizeof *depths; di++)
            for (size_t hi = 0; hi < sizeof hds / sizeof *hds; hi++)
                for (size_t gi = 0; gi < sizeof groups / sizeof *groups; gi++) {
                    int kv = depths[di], g = groups[gi];
                    int nkv = (di + gi) % 3 == 0 ? 2 : 1;   /* one KV head (Gemma 3 270M) or two */
                    int variant = (int)(di + hi + gi) % 4;  /* plain, window, softcap, both; the cache alternates */
                    tcase t = {g * nkv, nkv, hds[hi], kv, variant & 1 ? 100 : 0, variant & 2 ? 30.f : 0, (int)(di + gi) & 1};
                    test_case(&t, 0, level);
                    t.f16 = !t.f16;
                    if (kv == 4097 || kv == D + 1) test_case(&t, 0, level);
                }
        /* odd head dims (the AVX2 and scalar loops), a window smaller than a chunk, MQA */
        const tcase odd[] = {
            {4, 2, 8, 300, 0, 0, 0}, {3, 3, 6, 77, 0, 0, 1}, {6, 2, 40, 530, 0, 50, 0}, {2, 1, 80, 1000, 0, 0, 1},
            {8, 1, 64, 700, 17, 0, 0}, {16, 1, 64, 600, 0, 0, 1}, {12, 4, 96, 2 * D, 300, 20, 0},
        };
        for (size_t i = 0; i < sizeof odd / sizeof *odd; i++) test_case(&odd[i], 0, level);
        /* long: one KV head, 4 query heads (Gemma 3 270M's shape with hd 128) */
        tcase lng = {4, 1, 128, 32768, 0, 0, level & 1};
        test_case(&lng, 0, level);
        test_rows(4, 1, 64, 1000, 17, 0, 0, 0, level);
        test_rows(8, 2, 128, D - 9, 17, 0, 1, 0, level);
        test_rows(6, 3, 64, 3 * D - 3, 5, 300, 0, 0, level);
        test_rows(4, 4, 256, 0, 9, 0, 1, 0, level);
        /* rings: a window wrapping them, over one chunk and over several */
        const tcase ring[] = {
            {4, 1, 256, 5000, 512, 0, 1}, {8, 2, 64, 3 * D + 17, 300, 20, 0}, {6, 2, 128, 1000, 100, 0, 1}, {4, 2, 8, 777, 250, 0, 0},
        };
        const int caps[] = {4 * D, 2 * D, D, D};
        for (size_t i = 0; i < sizeof ring / sizeof *ring; i++) test_case(&ring[i], caps[i], level);
        test_rows(4, 1, 256, 2000, 17, 512, 1, 3 * D, level);
        test_rows(6, 3, 64, 3 * D - 3, 5, 300, 0, 2 * D, level);
    }
    return ak_test_done();
}
