/* Attention over the head-major KV cache ([kv_head][max_seq][head_dim] per layer):
 * decode (one query per head, two passes over the keys) and prefill as tiled flash
 * attention (online softmax over key blocks), with GQA, causal mask, sliding window
 * and logit softcap. */
#include "backend/cpu/cpu.h"
#include <math.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

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
    return AK_ATTN_QB * (AK_ATTN_KB + 2 * hd + 2) + 2 * hd;
}

/* Prefill inner loops: the scores of one key for all AK_ATTN_QB queries of a tile from
 * the transposed query tile qt[d][r] (no horizontal sums), and o += e v. The AVX-512
 * and AVX2 versions beside the reference sum in the same order. */
static void scores_ref(const float *qt, const float *kr, int hd, float *s) {
    for (int r = 0; r < AK_ATTN_QB; r++) s[r] = 0.f;
    for (int d = 0; d < hd; d++)
        for (int r = 0; r < AK_ATTN_QB; r++) s[r] += qt[d * AK_ATTN_QB + r] * kr[d];
}
static void axpy_ref(float *o, float e, const float *v, int hd) {
    for (int k = 0; k < hd; k++) o[k] += e * v[k];
}
#if defined(__x86_64__)
__attribute__((target("avx512f"))) static void scores_512(const float *qt, const float *kr, int hd, float *s) {
    __m512 a = _mm512_setzero_ps();
    for (int d = 0; d < hd; d++) a = _mm512_fmadd_ps(_mm512_loadu_ps(qt + d * AK_ATTN_QB), _mm512_set1_ps(kr[d]), a);
    _mm512_storeu_ps(s, a);
}
__attribute__((target("avx2,fma"))) static void scores_256(const float *qt, const float *kr, int hd, float *s) {
    __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
    for (int d = 0; d < hd; d++) {
        __m256 k = _mm256_set1_ps(kr[d]);
        a = _mm256_fmadd_ps(_mm256_loadu_ps(qt + d * AK_ATTN_QB), k, a);
        b = _mm256_fmadd_ps(_mm256_loadu_ps(qt + d * AK_ATTN_QB + 8), k, b);
    }
    _mm256_storeu_ps(s, a);
    _mm256_storeu_ps(s + 8, b);
}
__attribute__((target("avx2,fma"))) static void axpy_256(float *o, float e, const float *v, int hd) {
    __m256 ve = _mm256_set1_ps(e);
    int k = 0;
    for (; k + 8 <= hd; k += 8) _mm256_storeu_ps(o + k, _mm256_fmadd_ps(ve, _mm256_loadu_ps(v + k), _mm256_loadu_ps(o + k)));
    for (; k < hd; k++) o[k] = fmaf(e, v[k], o[k]);
}
#endif
static void scores(const float *qt, const float *kr, int hd, float *s) {
#if defined(__x86_64__)
    if (ak_cpu_simd >= 2) { scores_512(qt, kr, hd, s); return; }
    if (ak_cpu_simd >= 1) { scores_256(qt, kr, hd, s); return; }
#endif
    scores_ref(qt, kr, hd, s);
}
static void axpy(float *o, float e, const float *v, int hd) {
#if defined(__x86_64__)
    if (ak_cpu_simd >= 1) { axpy_256(o, e, v, hd); return; }
#endif
    axpy_ref(o, e, v, hd);
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
    float *QT = O + AK_ATTN_QB * hd;              /* [hd][QB]: the query tile transposed */
    float *M = QT + AK_ATTN_QB * hd, *L = M + AK_ATTN_QB;
    float *tmp = L + AK_ATTN_QB;
    int64_t lo_w, hi_w;
    ak_split((int64_t)p->n_heads * nqb, ith, nth, &lo_w, &hi_w);
    for (int64_t w = lo_w; w < hi_w; w++) {
        int h = (int)(w / nqb), i0 = (int)(w % nqb) * AK_ATTN_QB;
        int nqr = p->n - i0 < AK_ATTN_QB ? p->n - i0 : AK_ATTN_QB;
        size_t base = (size_t)(h / group) * p->max_seq;
        int klo, khi, tlo, thi, lo[AK_ATTN_QB], hi[AK_ATTN_QB];
        key_range(p, p->pos + i0, &klo, &thi);
        key_range(p, p->pos + i0 + nqr - 1, &tlo, &khi);
        for (int r = 0; r < AK_ATTN_QB; r++) {
            const float *qv = (const float *)c->b[0] + (size_t)(i0 + r) * p->ld_q + (size_t)h * hd;
            for (int d = 0; d < hd; d++) QT[d * AK_ATTN_QB + r] = r < nqr ? qv[d] : 0.f;
            if (r < nqr) key_range(p, p->pos + i0 + r, &lo[r], &hi[r]);
        }
        for (int r = 0; r < nqr; r++) { M[r] = -INFINITY; L[r] = 0; }
        memset(O, 0, (size_t)nqr * hd * sizeof(float));
        for (int kb = klo; kb < khi; kb += AK_ATTN_KB) {
            int nk = khi - kb < AK_ATTN_KB ? khi - kb : AK_ATTN_KB;
            /* S = Q K^T for the tile, masked per query */
            for (int j = 0; j < nk; j++) {
                float sc[AK_ATTN_QB];
                scores(QT, cache_row(c->b[1], p->kv_f16, base + kb + j, hd, tmp), hd, sc);
                int key = kb + j;
                for (int r = 0; r < nqr; r++)
                    S[r * AK_ATTN_KB + j] = key >= lo[r] && key < hi[r] ? score(sc[r], p) : -INFINITY;
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
                    axpy(O + r * hd, e, vr, hd);
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
