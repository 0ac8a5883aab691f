/* GEMV (decode) and GEMM (prefill) over weight rows of any dtype, with up to three
 * matrices writing side by side (fused QKV, gate+up), and the fused activation+down GEMV.
 * The ggml block types multiply int8-quantized activations (cpu.h): x is quantized
 * once per call into each thread's scratch (K values: cheap next to the thread's share
 * of the weights), then integer dot products run (quant_act.c, dotq_impl.h).
 * Segments that cpu_encode repacked into panels (c->pk, panel.h) run ak_panel_mm
 * instead: the threads split their panels, and rows past a segment's N are never
 * written. */
#include "backend/cpu/cpu.h"
#include "backend/cpu/panel.h"
#include <stdbool.h>
#include <string.h>

#define AK_GEMM_MR 4           /* weight rows unpacked per int8 GEMM panel */
#define AK_GEMM_NR 4           /* activation rows per tile call */

/* Bytes the int8 GEMM needs per thread: n quantized activation rows and the panel. */
static size_t gemm_q8_bytes(int n, int64_t K) {
    return (size_t)n * (sizeof(ak_xq) + ak_xq_bytes(K)) + AK_GEMM_MR * ak_prow_bytes(K) + 16;
}

size_t ak_cpu_mm_scratch(const ak_p_mm *p, int gemm) {
    size_t f = (size_t)p->K;
    if (gemm && p->K % 32 == 0) {
        size_t q = (gemm_q8_bytes(p->n, p->K) + 3) / 4;
        if (q > f) f = q;
    }
    return f;
}

typedef struct {
    const uint8_t *w[3];
    ak_dtype t[3];
    ak_dot_fn dot[3];
    size_t row_bytes[3];
    int32_t start[4];      /* first output column of each segment; start[nseg] = total */
    int nseg;
} segs;

static void seg_init(segs *s, const ak_cpu_cmd *c, const ak_p_mm *p) {
    memset(s, 0, sizeof *s);
    s->nseg = p->nseg;
    for (int i = 0; i < p->nseg; i++) {
        s->w[i] = c->b[i];
        s->t[i] = (ak_dtype)p->dtype[i];
        s->dot[i] = ak_cpu_dot(s->t[i]);
        s->row_bytes[i] = ak_dtype_row_bytes(s->t[i], p->K);
        s->start[i + 1] = s->start[i] + p->N[i];
    }
    for (int i = p->nseg + 1; i < 4; i++) s->start[i] = INT32_MAX;
}

/* The form of x a dtype multiplies: as is, int8 codes, or int8 codes as floats (block
 * types without an int8 kernel at this level). */
enum { X_FLOAT, X_Q8, X_HAT };

static int x_form(ak_dtype t, ak_dotq_fn *dq) {
    *dq = NULL;
    if (!ak_act_q8(t)) return X_FLOAT;
    *dq = ak_cpu_dotq(t);
    return *dq ? X_Q8 : X_HAT;
}

/* y[j] = W_seg(j) x (+ bias for segment 0) for rows [lo, hi) against one activation
 * row. The scratch (at least K floats) holds x in the form each segment needs. */
static void gemv_rows(const segs *s, int64_t K, const float *x, float *y, const float *bias,
                      int64_t lo, int64_t hi, float *scratch) {
    int have = -1, g = 0;
    ak_xq xq;
    for (int64_t j = lo; j < hi;) {
        while (g < 2 && j >= s->start[g + 1]) g++;
        int64_t end = hi < s->start[g + 1] ? hi : s->start[g + 1];
        ak_dotq_fn dq;
        int form = x_form(s->t[g], &dq);
        if (form != have) {
            if (form == X_Q8) ak_xq_quantize(x, K, scratch, &xq);
            else if (form == X_HAT) ak_xq_dequant(x, K, scratch);
            have = form;
        }
        for (; j < end; j++) {
            int64_t r = j - s->start[g];
            const uint8_t *wr = s->w[g] + (size_t)r * s->row_bytes[g];
            float v = form == X_Q8 ? dq(K, wr, &xq)
                    : form == X_HAT ? s->dot[g](K, wr, scratch, NULL)
                    : s->dot[g](K, wr, x, scratch);
            if (bias && g == 0) v += bias[r];
            y[j] = v;
        }
    }
}

/* ---- panel segments ---- */

static void *align64(void *p) { return (void *)(((uintptr_t)p + 63) & ~(uintptr_t)63); }

/* Whether a command's rows round as one-row GEMVs do: decode, rows verified as decode
 * steps (rowwise) and the one row of last_only (alone either way). Every other GEMM row
 * rounds the same whatever rows share its command (panel.h). */
static bool rows_as_gemv(const ak_p_mm *p, bool gemv_kernel) { return gemv_kernel || p->rowwise || p->last_only; }

static int64_t n_panels(int64_t N) { return (N + AK_PANEL_R - 1) / AK_PANEL_R; }

size_t ak_cpu_mm_panel_scratch(const ak_cpu_cmd *c, int kernel) {
    size_t f = 0;
    if (kernel == AK_K_GEMV_ACT_DOWN) {
        const ak_p_act_down *p = (const ak_p_act_down *)c->p;
        f = 2 * (size_t)p->K;
        if (c->pk[0]) f = (size_t)p->K + 16 + (ak_panel_scratch((ak_dtype)p->dtype, p->K, 1, true) + 3) / 4;
        return f;
    }
    const ak_p_mm *p = (const ak_p_mm *)c->p;
    f = ak_cpu_mm_scratch(p, kernel == AK_K_GEMM);
    int n = kernel == AK_K_GEMM && !p->last_only ? p->n : 1;
    for (int i = 0; i < p->nseg; i++)
        if (c->pk[i]) {
            size_t q = 16 + (ak_panel_scratch((ak_dtype)p->dtype[i], p->K, n, rows_as_gemv(p, kernel == AK_K_GEMV)) + 3) / 4;
            if (q > f) f = q;
        }
    return f;
}

/* The panel segments of a GEMV / GEMM: this thread's share of all their panels. The
 * block types share one int8 copy of x, quantized once per thread. */
static void mm_panels(void *const pk[3], const ak_p_mm *p, const segs *s, int n, const float *x,
                      float *y, const float *bias, int ith, int nth, float *scratch, bool gemv) {
    int64_t tot = 0;
    for (int i = 0; i < p->nseg; i++) if (pk[i]) tot += n_panels(p->N[i]);
    int64_t lo, hi, at = 0;
    ak_split(tot, ith, nth, &lo, &hi);
    void *sp = align64(scratch);
    bool xq = false;
    for (int i = 0; i < p->nseg && at < hi; i++) {
        if (!pk[i]) continue;
        int64_t np = n_panels(p->N[i]), a = lo > at ? lo - at : 0, b = hi - at < np ? hi - at : np;
        at += np;
        if (a >= b) continue;
        const float *bs = i == 0 ? bias : NULL;
        if (ak_act_q8(s->t[i])) {
            if (!xq) ak_panel_q_quantize(p->K, x, p->ld_x, n, sp);
            xq = true;
            ak_panel_q_mm_pre(s->t[i], pk[i], p->N[i], p->K, a, b, sp, n, y + s->start[i], p->ld_y, bs, gemv);
        } else {
            ak_panel_mm(s->t[i], pk[i], p->N[i], p->K, a, b, x, p->ld_x, n, y + s->start[i], p->ld_y, bs, sp, gemv);
            xq = false;   /* the float family may use the scratch its own way */
        }
    }
}

/* The row-kernel segments of a command that also has panel segments: each thread
 * takes a slice of each such segment's rows. */
static void mm_rest(void *const pk[3], const ak_p_mm *p, const segs *s,
                    void (*rows)(const ak_p_mm *, const segs *, int64_t, int64_t, void *), void *ctx,
                    int ith, int nth) {
    for (int i = 0; i < p->nseg; i++) {
        if (pk[i]) continue;
        int64_t lo, hi;
        ak_split(p->N[i], ith, nth, &lo, &hi);
        if (lo < hi) rows(p, s, s->start[i] + lo, s->start[i] + hi, ctx);
    }
}

static bool any_panel(void *const pk[3], int nseg) {
    for (int i = 0; i < nseg; i++) if (pk[i]) return true;
    return false;
}

static bool all_panel(void *const pk[3], int nseg) {
    for (int i = 0; i < nseg; i++) if (!pk[i]) return false;
    return true;
}

/* The panel copies a command uses now: none for the block types while float activations
 * are forced (AKUNU_ACT_F32, or a test switching ak_cpu_act_f32 after encoding): the
 * panels multiply int8 activations, so those segments take the row kernels. */
static bool block_type(ak_dtype t) { return t != AK_F32 && t != AK_F16 && t != AK_BF16; }

static void panels_now(const ak_cpu_cmd *c, const ak_dtype *t, int nseg, void *pk[3]) {
    for (int i = 0; i < 3; i++) pk[i] = i < nseg && !(ak_cpu_act_f32 && block_type(t[i])) ? c->pk[i] : NULL;
}

typedef struct { const float *x, *bias; float *y; float *scratch; ak_cpu_tls *tls; int n; } rows_ctx;

static void gemv_rest(const ak_p_mm *p, const segs *s, int64_t lo, int64_t hi, void *ctx) {
    rows_ctx *r = ctx;
    gemv_rows(s, p->K, r->x, r->y, r->bias, lo, hi, r->scratch);
}

void ak_cpu_gemv(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls) {
    const ak_p_mm *p = (const ak_p_mm *)c->p;
    segs s;
    seg_init(&s, c, p);
    const float *x = c->b[3], *bias = p->has_bias ? c->b[5] : NULL;
    float *y = c->b[4];
    void *pk[3];
    panels_now(c, s.t, p->nseg, pk);
    if (any_panel(pk, p->nseg)) {
        mm_panels(pk, p, &s, 1, x, y, bias, ith, nth, tls->scratch, true);
        if (!all_panel(pk, p->nseg)) {
            rows_ctx r = {x, bias, y, tls->scratch, tls, 1};
            mm_rest(pk, p, &s, gemv_rest, &r, ith, nth);
        }
        return;
    }
    int64_t lo, hi;
    ak_split(s.start[p->nseg], ith, nth, &lo, &hi);
    gemv_rows(&s, p->K, x, y, bias, lo, hi, tls->scratch);
}

/* Int8 GEMM: every thread quantizes all n activation rows, then for each group of up
 * to MR of its weight rows (one segment) unpacks them once into a panel and runs
 * MR x NR tiles over the activation rows: weights are read once, activations from cache.
 * A tile sums each output as a 1 x 1 tile does, so a row rounds the same in any tile.
 * Rows as GEMVs (gemv) with fused kernels for every segment: those, without unpacking. */
static void gemm_q8(const ak_p_mm *p, const segs *s, int n, const float *x, float *y, const float *bias,
                    int64_t lo, int64_t hi, ak_cpu_tls *tls, bool gemv) {
    int64_t K = p->K;
    ak_xq *xq = (ak_xq *)tls->scratch;
    uint8_t *sp = (uint8_t *)(xq + n);
    for (int i = 0; i < n; i++, sp += ak_xq_bytes(K)) ak_xq_quantize(x + (size_t)i * p->ld_x, K, sp, &xq[i]);
    ak_dotq_fn dq[3] = {0};
    bool direct = gemv;
    for (int i = 0; i < s->nseg; i++) direct &= (dq[i] = ak_cpu_dotq(s->t[i])) != NULL;
    int g = 0;
    if (direct) {
        for (int64_t j = lo; j < hi; j++) {
            while (g < 2 && j >= s->start[g + 1]) g++;
            int64_t r = j - s->start[g];
            const uint8_t *wr = s->w[g] + (size_t)r * s->row_bytes[g];
            float b = bias && g == 0 ? bias[r] : 0.f;
            for (int i = 0; i < n; i++) y[(size_t)i * p->ld_y + j] = dq[g](K, wr, &xq[i]) + b;
        }
        return;
    }
    ak_prow pr[AK_GEMM_MR];
    float out[AK_GEMM_MR * AK_GEMM_NR];
    for (int64_t j = lo; j < hi;) {
        while (g < 2 && j >= s->start[g + 1]) g++;
        int64_t r0 = j - s->start[g];
        int mr = (int)(hi - j < AK_GEMM_MR ? hi - j : AK_GEMM_MR);
        if (mr > s->start[g + 1] - j) mr = (int)(s->start[g + 1] - j);
        for (int r = 0; r < mr; r++)
            ak_unpack_row(s->t[g], s->w[g] + (size_t)(r0 + r) * s->row_bytes[g], K, sp + (size_t)r * ak_prow_bytes(K), &pr[r]);
        for (int c0 = 0; c0 < n; c0 += AK_GEMM_NR) {
            int nr = n - c0 < AK_GEMM_NR ? n - c0 : AK_GEMM_NR;
            ak_gemm_q8_tile(K, pr, mr, xq + c0, nr, out, AK_GEMM_NR);
            for (int r = 0; r < mr; r++) {
                float b = bias && g == 0 ? bias[r0 + r] : 0.f;
                for (int cc = 0; cc < nr; cc++) y[(size_t)(c0 + cc) * p->ld_y + j + r] = out[r * AK_GEMM_NR + cc] + b;
            }
        }
        j += mr;
    }
}

/* Float weights: each thread takes a slice of weight rows, dequantizes a row once and
 * multiplies it with every activation row, so weights stream through once per chunk;
 * rows as GEMVs (gemv): the GEMV's fused dot products. */
static void gemm_float(const ak_p_mm *p, const segs *s, int n, const float *x, float *y, const float *bias,
                       int64_t lo, int64_t hi, float *row, bool gemv) {
    bool direct = gemv;
    int g = 0;
    for (int64_t j = lo; j < hi; j++) {
        while (g < 2 && j >= s->start[g + 1]) g++;
        int64_t r = j - s->start[g];
        const uint8_t *wr = s->w[g] + (size_t)r * s->row_bytes[g];
        float b = bias && g == 0 ? bias[r] : 0.f;
        if (direct) {
            for (int i = 0; i < n; i++) y[(size_t)i * p->ld_y + j] = s->dot[g](p->K, wr, x + (size_t)i * p->ld_x, row) + b;
            continue;
        }
        ak_cpu_dequant_row(s->t[g], wr, row, p->K);
        for (int i = 0; i < n; i++) y[(size_t)i * p->ld_y + j] = ak_dot_f32(p->K, row, x + (size_t)i * p->ld_x) + b;
    }
}

/* Rows [lo, hi) of a GEMM on the row kernels. */
static void gemm_rows(const ak_p_mm *p, const segs *s, int n, const float *x, float *y, const float *bias,
                      int64_t lo, int64_t hi, ak_cpu_tls *tls) {
    int nq = 0;
    const bool gemv = rows_as_gemv(p, false);
    for (int i = 0; i < p->nseg; i++) nq += ak_act_q8(s->t[i]);
    if (nq == 0) { gemm_float(p, s, n, x, y, bias, lo, hi, tls->scratch, gemv); return; }
    if (nq == p->nseg && tls->scratch_n * sizeof(float) >= gemm_q8_bytes(n, p->K)) {
        gemm_q8(p, s, n, x, y, bias, lo, hi, tls, gemv);
        return;
    }
    /* mixed segments or a small scratch: row by row, as decode would */
    for (int i = 0; i < n; i++)
        gemv_rows(s, p->K, x + (size_t)i * p->ld_x, y + (size_t)i * p->ld_y, bias, lo, hi, tls->scratch);
}

static void gemm_rest(const ak_p_mm *p, const segs *s, int64_t lo, int64_t hi, void *ctx) {
    rows_ctx *r = ctx;
    gemm_rows(p, s, r->n, r->x, r->y, r->bias, lo, hi, r->tls);
}

void ak_cpu_gemm(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls) {
    const ak_p_mm *p = (const ak_p_mm *)c->p;
    segs s;
    seg_init(&s, c, p);
    const float *x = c->b[3], *bias = p->has_bias ? c->b[5] : NULL;
    float *y = c->b[4];
    int n = p->n;
    if (p->last_only) { x += (size_t)(n - 1) * p->ld_x; n = 1; }
    void *pk[3];
    panels_now(c, s.t, p->nseg, pk);
    if (any_panel(pk, p->nseg)) {
        mm_panels(pk, p, &s, n, x, y, bias, ith, nth, tls->scratch, rows_as_gemv(p, false));
        if (!all_panel(pk, p->nseg)) {
            rows_ctx r = {x, bias, y, tls->scratch, tls, n};
            mm_rest(pk, p, &s, gemm_rest, &r, ith, nth);
        }
        return;
    }
    int64_t lo, hi;
    ak_split(s.start[p->nseg], ith, nth, &lo, &hi);
    gemm_rows(p, &s, n, x, y, bias, lo, hi, tls);
}

/* Every thread builds act(g) * u for the whole row in its scratch (K floats: cheap next
 * to the K x N weights it then reads), then computes its slice of output rows. */
void ak_cpu_gemv_act_down(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls) {
    const ak_p_act_down *p = (const ak_p_act_down *)c->p;
    const float *gu = c->b[1];
    float *h = tls->scratch;
    ak_cpu_act_row(p->act, gu, gu + p->K, h, p->K);
    if (c->pk[0] && !(ak_cpu_act_f32 && block_type((ak_dtype)p->dtype))) {
        int64_t lo, hi;
        ak_split(n_panels(p->N), ith, nth, &lo, &hi);
        if (lo < hi)
            ak_panel_mm((ak_dtype)p->dtype, c->pk[0], p->N, p->K, lo, hi, h, p->K, 1, c->b[2], p->N, NULL,
                        align64(h + p->K), true);
        return;
    }
    segs s = {.w = {c->b[0]}, .t = {(ak_dtype)p->dtype}, .start = {0, p->N, INT32_MAX, INT32_MAX}, .nseg = 1};
    s.dot[0] = ak_cpu_dot(s.t[0]);
    s.row_bytes[0] = ak_dtype_row_bytes(s.t[0], p->K);
    int64_t lo, hi;
    ak_split(p->N, ith, nth, &lo, &hi);
    gemv_rows(&s, p->K, h, c->b[2], NULL, lo, hi, tls->scratch + p->K);
}
