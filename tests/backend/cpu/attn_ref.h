/* The naive attention in double, shared by the CPU attention tests: head h of row i
 * (position pos + i) over float caches kc, vc ([KV head][max_seq][head_dim]), with the
 * causal mask, sliding window and softcap of p; out: head_dim values. */
#ifndef AK_TEST_ATTN_REF_H
#define AK_TEST_ATTN_REF_H
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include "core/kernels.h"

static inline void ak_attn_ref(const ak_p_attn *p, const float *q, const float *kc, const float *vc, int i, int h,
                               double *out) {
    int hd = p->head_dim, kvh = h / (p->n_heads / p->n_kv_heads), qp = p->pos + i;
    double *s = malloc((size_t)p->kv_len * sizeof(double)), m = -INFINITY, l = 0;
    for (int j = 0; j < p->kv_len; j++) {
        bool ok = (!p->causal || j <= qp) && (p->window <= 0 || j > qp - p->window);
        if (!ok) { s[j] = -INFINITY; continue; }
        double d = 0;
        for (int k = 0; k < hd; k++) d += (double)q[(size_t)i * p->ld_q + h * hd + k] * kc[((size_t)kvh * p->max_seq + j) * hd + k];
        d *= p->scale;
        if (p->softcap > 0) d = p->softcap * tanh(d / p->softcap);
        s[j] = d;
        if (d > m) m = d;
    }
    for (int k = 0; k < hd; k++) out[k] = 0;
    for (int j = 0; j < p->kv_len; j++) {
        if (s[j] == -INFINITY) continue;
        double e = exp(s[j] - m);
        l += e;
        for (int k = 0; k < hd; k++) out[k] += e * vc[((size_t)kvh * p->max_seq + j) * hd + k];
    }
    for (int k = 0; k < hd; k++) out[k] /= l;
    free(s);
}
#endif
