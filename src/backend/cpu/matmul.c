/* GEMV (decode) and GEMM (prefill) over weight rows of any dtype, with up to three
 * matrices writing side by side (fused QKV, gate+up), and the fused activation+down GEMV. */
#include "backend/cpu/cpu.h"
#include <stdbool.h>

#define AK_GEMM_DIRECT_ROWS 8

typedef struct {
    const uint8_t *w[3];
    ak_dot_fn dot[3];
    size_t row_bytes[3];
    int32_t start[4];      /* first output column of each segment; start[nseg] = total */
} segs;

static void seg_init(segs *s, const ak_cpu_cmd *c, const ak_p_mm *p) {
    s->start[0] = 0;
    for (int i = 0; i < p->nseg; i++) {
        s->w[i] = c->b[i];
        s->dot[i] = ak_cpu_dot((ak_dtype)p->dtype[i]);
        s->row_bytes[i] = ak_dtype_row_bytes((ak_dtype)p->dtype[i], p->K);
        s->start[i + 1] = s->start[i] + p->N[i];
    }
}

void ak_cpu_gemv(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls) {
    const ak_p_mm *p = (const ak_p_mm *)c->p;
    segs s;
    seg_init(&s, c, p);
    const float *x = c->b[3], *bias = c->b[5];
    float *y = c->b[4];
    int64_t lo, hi;
    ak_split(s.start[p->nseg], ith, nth, &lo, &hi);
    int g = 0;
    for (int64_t j = lo; j < hi; j++) {
        while (j >= s.start[g + 1]) g++;
        int64_t r = j - s.start[g];
        float v = s.dot[g](p->K, s.w[g] + (size_t)r * s.row_bytes[g], x, tls->scratch);
        if (p->has_bias && g == 0) v += bias[r];
        y[j] = v;
    }
}

/* Each thread takes a slice of weight rows, dequantizes a row once and multiplies it
 * with every activation row, so weights stream through once per chunk. */
void ak_cpu_gemm(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls) {
    const ak_p_mm *p = (const ak_p_mm *)c->p;
    segs s;
    seg_init(&s, c, p);
    const float *x = c->b[3], *bias = c->b[5];
    float *y = c->b[4];
    int n = p->n;
    if (p->last_only) { x += (size_t)(n - 1) * p->ld_x; n = 1; }
    int64_t lo, hi;
    ak_split(s.start[p->nseg], ith, nth, &lo, &hi);
    int g = 0;
    float *row = tls->scratch;
    /* Few rows: the fused dequantize-and-dot kernels beat the reference dequantizer. */
    bool direct = n <= AK_GEMM_DIRECT_ROWS;
    for (int64_t j = lo; j < hi; j++) {
        while (j >= s.start[g + 1]) g++;
        int64_t r = j - s.start[g];
        const uint8_t *wr = s.w[g] + (size_t)r * s.row_bytes[g];
        float b = p->has_bias && g == 0 ? bias[r] : 0.f;
        if (direct) {
            for (int i = 0; i < n; i++) y[(size_t)i * p->ld_y + j] = s.dot[g](p->K, wr, x + (size_t)i * p->ld_x, row) + b;
            continue;
        }
        ak_dtype_info[p->dtype[g]].dequant(wr, row, p->K);
        for (int i = 0; i < n; i++) y[(size_t)i * p->ld_y + j] = ak_dot_f32(p->K, row, x + (size_t)i * p->ld_x) + b;
    }
}

/* Every thread builds act(g) * u for the whole row in its scratch (K floats: cheap next
 * to the K x N weights it then reads), then computes its slice of output rows. */
void ak_cpu_gemv_act_down(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls) {
    const ak_p_act_down *p = (const ak_p_act_down *)c->p;
    const float *gu = c->b[1];
    float *y = c->b[2], *h = tls->scratch, *tmp = tls->scratch + p->K;
    for (int k = 0; k < p->K; k++) h[k] = ak_act_apply(p->act, gu[k]) * gu[p->K + k];
    ak_dot_fn dot = ak_cpu_dot((ak_dtype)p->dtype);
    size_t rb = ak_dtype_row_bytes((ak_dtype)p->dtype, p->K);
    const uint8_t *w = c->b[0];
    int64_t lo, hi;
    ak_split(p->N, ith, nth, &lo, &hi);
    for (int64_t j = lo; j < hi; j++) y[j] = dot(p->K, w + (size_t)j * rb, h, tmp);
}
