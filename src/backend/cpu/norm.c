/* RMSNorm and LayerNorm, and the fused residual add + norm (with the optional post-norm
 * of the added branch that Gemma 2/3 use). Sums accumulate in float, as the float32
 * reference does. Output may alias the input (BERT's post-norm residual). */
#include "backend/cpu/cpu.h"
#include <math.h>

static void rmsnorm_row(float *out, const float *x, const float *w, int dim, float eps) {
    float ss = ak_dot_f32(dim, x, x);
    float r = 1.0f / sqrtf(ss / (float)dim + eps);
    for (int i = 0; i < dim; i++) out[i] = x[i] * r * w[i];
}

/* LayerNorm: (x - mean) / sqrt(var + eps) * w + b, biased variance as torch computes it. */
static void layernorm_row(float *out, const float *x, const float *w, const float *b, int dim, float eps) {
    float mean = 0, var = 0;
    for (int i = 0; i < dim; i++) mean += x[i];
    mean /= (float)dim;
    for (int i = 0; i < dim; i++) var += (x[i] - mean) * (x[i] - mean);
    float r = 1.0f / sqrtf(var / (float)dim + eps);
    for (int i = 0; i < dim; i++) out[i] = (x[i] - mean) * r * w[i] + b[i];
}

static void norm_row(int flags, float *out, const float *x, const float *w, const float *b, int dim, float eps) {
    if (flags & AK_NORM_F_LAYER) layernorm_row(out, x, w, b, dim, eps);
    else rmsnorm_row(out, x, w, dim, eps);
}

void ak_cpu_norm(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls) {
    (void)tls;
    const ak_p_norm *p = (const ak_p_norm *)c->p;
    int64_t lo, hi;
    ak_split(p->n, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++)
        norm_row(p->flags, (float *)c->b[2] + i * p->dim, (const float *)c->b[0] + i * p->dim, c->b[1], c->b[3], p->dim, p->eps);
}

void ak_cpu_add_norm(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls) {
    const ak_p_norm *p = (const ak_p_norm *)c->p;
    int64_t lo, hi;
    ak_split(p->n, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        float *x = (float *)c->b[0] + i * p->dim;
        const float *a = (const float *)c->b[1] + i * p->dim;
        if (p->flags & AK_NORM_F_POST) {
            rmsnorm_row(tls->scratch, a, c->b[2], p->dim, p->eps);
            a = tls->scratch;
        }
        for (int k = 0; k < p->dim; k++) x[k] += a[k];
        norm_row(p->flags, (float *)c->b[4] + i * p->dim, x, c->b[3], c->b[5], p->dim, p->eps);
    }
}
