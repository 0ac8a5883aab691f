/* Attention over the head-major KV cache ([kv_head][max_seq][head_dim] per layer):
 * decode (one query per head, two passes over the keys) and prefill as tiled flash
 * attention (online softmax over key blocks), with GQA, causal mask, sliding window
 * and logit softcap. */
#include "backend/cpu/cpu.h"
#include <math.h>
#include <string.h>

/* Row idx of a cache as floats: direct for F32, converted into tmp for F16. */
static const float *cache_row(const void *cache, int kv_f16, size_t idx, int hd, float *tmp) {
    if (!kv_f16) return (const float *)cache + idx * (size_t)hd;
    const uint16_t *s = (const uint16_t *)cache + idx * (size_t)hd;
    for (int i = 0; i < hd; i++) tmp[i] = ak_f16_to_f32(s[i]);
    return tmp;
}

static inline float score(float s, const ak_p_attn *p) {
    s *= p->scale;
    if (p->softcap > 0) s = p->softcap * tanhf(s / p->softcap);
    return s;
}

/* Keys visible to the query at position q: [lo, hi). */
static void key_range(const ak_p_attn *p, int q, int *lo, int *hi) {
    *hi = p->causal ? q + 1 : p->kv_len;
    if (*hi > p->kv_len) *hi = p->kv_len;
    *lo = (p->window > 0 && q - p->window + 1 > 0) ? q - p->window + 1 : 0;
}

size_t ak_cpu_attn_scratch(const ak_p_attn *p, int prefill) {
    size_t hd = (size_t)p->head_dim;
    if (!prefill) return (size_t)p->max_seq + 2 * hd;
    return AK_ATTN_QB * (AK_ATTN_KB + hd + 2) + 2 * hd;
}

void ak_cpu_attn_decode(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls) {
    const ak_p_attn *p = (const ak_p_attn *)c->p;
    int hd = p->head_dim, group = p->n_heads / p->n_kv_heads;
    int64_t lo_h, hi_h;
    ak_split(p->n_heads, ith, nth, &lo_h, &hi_h);
    float *sc = tls->scratch, *tmp = sc + p->max_seq, *acc = tmp + hd;
    int q = p->pos + p->n - 1, lo, hi;
    key_range(p, q, &lo, &hi);
    for (int64_t h = lo_h; h < hi_h; h++) {
        const float *qv = (const float *)c->b[0] + (size_t)(p->n - 1) * p->ld_q + (size_t)h * hd;
        size_t base = (size_t)(h / group) * p->max_seq;
        float m = -INFINITY;
        for (int j = lo; j < hi; j++) {
            sc[j] = score(ak_dot_f32(hd, qv, cache_row(c->b[1], p->kv_f16, base + j, hd, tmp)), p);
            if (sc[j] > m) m = sc[j];
        }
        float l = 0;
        memset(acc, 0, (size_t)hd * sizeof(float));
        for (int j = lo; j < hi; j++) {
            float e = expf(sc[j] - m);
            l += e;
            const float *v = cache_row(c->b[2], p->kv_f16, base + j, hd, tmp);
            for (int k = 0; k < hd; k++) acc[k] += e * v[k];
        }
        float *out = (float *)c->b[3] + (size_t)(p->n - 1) * p->n_heads * hd + (size_t)h * hd;
        for (int k = 0; k < hd; k++) out[k] = acc[k] / l;
    }
}

void ak_cpu_attn_prefill(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls) {
    const ak_p_attn *p = (const ak_p_attn *)c->p;
    int hd = p->head_dim, group = p->n_heads / p->n_kv_heads;
    int nqb = (p->n + AK_ATTN_QB - 1) / AK_ATTN_QB;
    float *S = tls->scratch;                      /* [QB][KB] */
    float *O = S + AK_ATTN_QB * AK_ATTN_KB;       /* [QB][hd] */
    float *M = O + AK_ATTN_QB * hd, *L = M + AK_ATTN_QB;
    float *tmp = L + AK_ATTN_QB;
    int64_t lo_w, hi_w;
    ak_split((int64_t)p->n_heads * nqb, ith, nth, &lo_w, &hi_w);
    for (int64_t w = lo_w; w < hi_w; w++) {
        int h = (int)(w / nqb), i0 = (int)(w % nqb) * AK_ATTN_QB;
        int nqr = p->n - i0 < AK_ATTN_QB ? p->n - i0 : AK_ATTN_QB;
        size_t base = (size_t)(h / group) * p->max_seq;
        int klo, khi, tlo, thi;
        key_range(p, p->pos + i0, &klo, &thi);
        key_range(p, p->pos + i0 + nqr - 1, &tlo, &khi);
        for (int r = 0; r < nqr; r++) { M[r] = -INFINITY; L[r] = 0; }
        memset(O, 0, (size_t)nqr * hd * sizeof(float));
        for (int kb = klo; kb < khi; kb += AK_ATTN_KB) {
            int nk = khi - kb < AK_ATTN_KB ? khi - kb : AK_ATTN_KB;
            /* S = Q K^T for the tile, masked per query */
            for (int j = 0; j < nk; j++) {
                const float *kr = cache_row(c->b[1], p->kv_f16, base + kb + j, hd, tmp);
                for (int r = 0; r < nqr; r++) {
                    int lo, hi;
                    key_range(p, p->pos + i0 + r, &lo, &hi);
                    int key = kb + j;
                    const float *qv = (const float *)c->b[0] + (size_t)(i0 + r) * p->ld_q + (size_t)h * hd;
                    S[r * AK_ATTN_KB + j] = (key >= lo && key < hi) ? score(ak_dot_f32(hd, qv, kr), p) : -INFINITY;
                }
            }
            /* online softmax: rescale what was accumulated when the running max grows */
            for (int r = 0; r < nqr; r++) {
                float *s = S + r * AK_ATTN_KB, mx = M[r];
                for (int j = 0; j < nk; j++) if (s[j] > mx) mx = s[j];
                if (mx == -INFINITY) continue;
                float corr = expf(M[r] - mx);
                L[r] *= corr;
                for (int k = 0; k < hd; k++) O[r * hd + k] *= corr;
                for (int j = 0; j < nk; j++) { s[j] = expf(s[j] - mx); L[r] += s[j]; }
                M[r] = mx;
            }
            for (int j = 0; j < nk; j++) {
                const float *vr = cache_row(c->b[2], p->kv_f16, base + kb + j, hd, tmp);
                for (int r = 0; r < nqr; r++) {
                    float e = S[r * AK_ATTN_KB + j];
                    if (M[r] == -INFINITY || e == 0) continue;
                    float *o = O + r * hd;
                    for (int k = 0; k < hd; k++) o[k] += e * vr[k];
                }
            }
        }
        for (int r = 0; r < nqr; r++) {
            float *out = (float *)c->b[3] + (size_t)(i0 + r) * p->n_heads * hd + (size_t)h * hd;
            float inv = L[r] > 0 ? 1.0f / L[r] : 0.f;
            for (int k = 0; k < hd; k++) out[k] = O[r * hd + k] * inv;
        }
    }
}
