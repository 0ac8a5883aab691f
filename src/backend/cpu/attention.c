/* Attention over the head-major KV cache ([kv_head][max_seq][head_dim] per layer):
 * decode (one query per head and row, two passes over the keys) and prefill as tiled flash
 * attention (online softmax over key blocks), with GQA, causal mask, sliding window
 * and logit softcap. */
#include "backend/cpu/cpu.h"
#include "backend/cpu/vecmath.h"
#include <math.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* Row idx of a cache as floats: direct for F32, converted into tmp for F16 (on vectors
 * where the level has them: exact either way). */
static const float *cache_row(const void *cache, int kv_f16, size_t idx, int hd, float *tmp) {
    if (!kv_f16) return (const float *)cache + idx * (size_t)hd;
    ak_cpu_dequant_row(AK_F16, (const uint16_t *)cache + idx * (size_t)hd, tmp, hd);
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
    /* + a key block of K and V rows widened from an F16 cache (attn_prefill_512) */
    return AK_ATTN_QB * (AK_ATTN_KB + 2 * hd + 2) + 2 * hd + 2 * AK_ATTN_KB * hd;
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

/* x[j] = e^(x[j] - m) over a row whose maximum is m; returns their sum. On vectors where
 * the level has them (Cephes' exp, about 1 ulp from libm's; lanes summed apart). */
#if defined(__x86_64__)
__attribute__((target("avx512f"))) static float exp_sub_row512(float *x, int n, float m) {
    const __m512 mv = _mm512_set1_ps(m);
    __m512 s = _mm512_setzero_ps();
    for (int j = 0; j < n; j += 16) {
        __mmask16 k = ak_lanes512(n - j);
        __m512 e = _mm512_maskz_mov_ps(k, ak_exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), mv)));
        _mm512_mask_storeu_ps(x + j, k, e);
        s = _mm512_add_ps(s, e);
    }
    return _mm512_reduce_add_ps(s);
}
__attribute__((target("avx2,fma"))) static float exp_sub_row256(float *x, int n, float m) {
    const __m256 mv = _mm256_set1_ps(m);
    __m256 s = _mm256_setzero_ps();
    for (int j = 0; j < n; j += 8) {
        __m256i k = ak_lanes256(n - j);
        __m256 e = _mm256_and_ps(_mm256_castsi256_ps(k), ak_exp256(_mm256_sub_ps(_mm256_maskload_ps(x + j, k), mv)));
        _mm256_maskstore_ps(x + j, k, e);
        s = _mm256_add_ps(s, e);
    }
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}
#endif
static float exp_sub_row(float *x, int n, float m) {
#if defined(__x86_64__)
    if (ak_cpu_simd >= 2) return exp_sub_row512(x, n, m);
    if (ak_cpu_simd >= 1) return exp_sub_row256(x, n, m);
#endif
    float l = 0;
    for (int j = 0; j < n; j++) l += x[j] = expf(x[j] - m);
    return l;
}

void ak_cpu_attn_decode(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls) {
    const ak_p_attn *p = (const ak_p_attn *)c->p;
    int hd = p->head_dim, group = p->n_heads / p->n_kv_heads;
    int64_t lo_h, hi_h;
    ak_split(p->n_heads, ith, nth, &lo_h, &hi_h);
    float *sc = tls->scratch, *tmp = sc + p->max_seq, *acc = tmp + hd;
    /* every row, each as its own one-query decode (speculative verification checks n
     * rows with the arithmetic of n decode steps) */
    for (int r = 0; r < p->n; r++)
    for (int64_t h = lo_h; h < hi_h; h++) {
        int q = p->pos + r, lo, hi;
        key_range(p, q, &lo, &hi);
        const float *qv = (const float *)c->b[0] + (size_t)r * p->ld_q + (size_t)h * hd;
        size_t base = (size_t)(h / group) * p->max_seq;
        /* score() a row at a time: the softcap (Gemma 2) and the exponentials on vectors */
        for (int j = lo; j < hi; j++) sc[j] = ak_dot_f32(hd, qv, cache_row(c->b[1], p->kv_f16, base + j, hd, tmp)) * p->scale;
        if (p->softcap > 0) ak_cpu_softcap_row(sc + lo, hi - lo, p->softcap);
        float m = -INFINITY;
        for (int j = lo; j < hi; j++) m = sc[j] > m ? sc[j] : m;
        const float l = exp_sub_row(sc + lo, hi - lo, m);
        memset(acc, 0, (size_t)hd * sizeof(float));
        for (int j = lo; j < hi; j++) axpy(acc, sc[j], cache_row(c->b[2], p->kv_f16, base + j, hd, tmp), hd);
        float *out = (float *)c->b[3] + (size_t)r * p->n_heads * hd + (size_t)h * hd;
        for (int k = 0; k < hd; k++) out[k] = acc[k] / l;
    }
}

#if defined(__x86_64__)
/* Prefill at AVX-512, head_dim a multiple of 16: the same tiles as the reference below
 * (16 queries x 64 keys, online softmax), with every step on vectors. A profile of
 * pp512 (1B, head_dim 64) had the reference at ~30 GFLOP/s, ~9 % of the time: its
 * scores are one 64-long FMA chain per key (latency-bound), its softmax and o += e v
 * scalar or per (query, key). Here the score tile is kept transposed (ST[key][query]:
 * one zmm per key holds its 16 queries' scores), so that
 *  - Q K^T runs 8 keys at a time, 8 independent chains (q column x broadcast k[d]);
 *  - mask, max, exp and the row sums are lane-wise over the 16 queries;
 *  - O += P V takes 4 queries x 64 dims in registers per pass over the keys, the
 *    running-max correction applied as O is loaded.
 * F16 caches are widened a key block at a time into scratch. exp is Cephes' expf
 * polynomial (~1 ulp next to libm); the sums run in another order than the reference,
 * both within the test's bound against a double-precision attention. */
#define A512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define AINL inline __attribute__((always_inline))
#define QB AK_ATTN_QB
#define KB AK_ATTN_KB

/* Scores of u consecutive keys (rows of k, stride hd) for the 16 queries of qt[d][16]. */
A512 static AINL void qk512_t(const int u, const float *qt, const float *k, int hd, __m512 *acc) {
#pragma GCC unroll 8
    for (int i = 0; i < u; i++) acc[i] = _mm512_setzero_ps();
    for (int d = 0; d < hd; d++) {
        __m512 q = _mm512_loadu_ps(qt + d * QB);
#pragma GCC unroll 8
        for (int i = 0; i < u; i++) acc[i] = _mm512_fmadd_ps(q, _mm512_set1_ps(k[i * hd + d]), acc[i]);
    }
}

/* o[r][0 .. 16c) = o[r] * corr[r] + sum_j pt[j][r] v[j][0 .. 16c) for rr rows r: o at row
 * stride hd, pt the probabilities ([key][16], offset to the first row), v rows at stride hd. */
A512 static AINL void pv512_t(const int rr, const int c, const float *pt, const float *v, int hd, int nk,
                              float *o, const float *corr) {
    __m512 a[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < rr; r++) {
        __m512 cr = _mm512_set1_ps(corr[r]);
#pragma GCC unroll 4
        for (int ci = 0; ci < c; ci++) a[r][ci] = _mm512_mul_ps(_mm512_loadu_ps(o + r * hd + ci * 16), cr);
    }
    for (int j = 0; j < nk; j++) {
        __m512 vv[4];
#pragma GCC unroll 4
        for (int ci = 0; ci < c; ci++) vv[ci] = _mm512_loadu_ps(v + (int64_t)j * hd + ci * 16);
#pragma GCC unroll 4
        for (int r = 0; r < rr; r++) {
            __m512 e = _mm512_set1_ps(pt[j * QB + r]);
#pragma GCC unroll 4
            for (int ci = 0; ci < c; ci++) a[r][ci] = _mm512_fmadd_ps(e, vv[ci], a[r][ci]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < rr; r++)
#pragma GCC unroll 4
        for (int ci = 0; ci < c; ci++) _mm512_storeu_ps(o + r * hd + ci * 16, a[r][ci]);
}

#define PV_C(rr, c) case c: pv512_t(rr, c, pt, v, hd, nk, o, corr); break;
#define PV_R(rr) case rr: switch (c) { PV_C(rr, 1) PV_C(rr, 2) PV_C(rr, 3) PV_C(rr, 4) default: break; } break;
A512 static void pv512(int rr, int c, const float *pt, const float *v, int hd, int nk, float *o, const float *corr) {
    switch (rr) { PV_R(1) PV_R(2) PV_R(3) PV_R(4) default: break; }
}

/* hd floats of row idx of an F16 cache into dst. */
A512 static void widen_row512(const uint16_t *s, int hd, float *dst) {
    for (int d = 0; d < hd; d += 16)
        _mm512_storeu_ps(dst + d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + d))));
}

A512 static void attn_prefill_512(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls) {
    const ak_p_attn *p = (const ak_p_attn *)c->p;
    int hd = p->head_dim, group = p->n_heads / p->n_kv_heads;
    int nqb = (p->n + QB - 1) / QB;
    float *ST = tls->scratch;                     /* [KB][QB]: scores, then probabilities */
    float *O = ST + QB * KB;                      /* [QB][hd] */
    float *QT = O + QB * hd;                      /* [hd][QB] */
    float *Lv = QT + QB * hd + QB;                /* the row sums, read back per query */
    float *Kw = Lv + QB + 2 * hd, *Vw = Kw + KB * hd;   /* widened F16 key block */
    int64_t lo_w, hi_w;
    ak_split((int64_t)p->n_heads * nqb, ith, nth, &lo_w, &hi_w);
    const __m512 ninf = _mm512_set1_ps(-INFINITY), scale = _mm512_set1_ps(p->scale);
    for (int64_t w = lo_w; w < hi_w; w++) {
        int h = (int)(w / nqb), i0 = (int)(w % nqb) * QB;
        int nqr = p->n - i0 < QB ? p->n - i0 : QB;
        size_t base = (size_t)(h / group) * p->max_seq;
        int klo, khi, tlo, thi;
        int32_t lo[QB], hi[QB];
        key_range(p, p->pos + i0, &klo, &thi);
        key_range(p, p->pos + i0 + nqr - 1, &tlo, &khi);
        for (int r = 0; r < QB; r++) {
            const float *qv = (const float *)c->b[0] + (size_t)(i0 + r) * p->ld_q + (size_t)h * hd;
            for (int d = 0; d < hd; d++) QT[d * QB + r] = r < nqr ? qv[d] : 0.f;
            lo[r] = hi[r] = 0;   /* rows past the tile: every key masked */
            if (r < nqr) { int a, b; key_range(p, p->pos + i0 + r, &a, &b); lo[r] = a; hi[r] = b; }
        }
        __m512i lov = _mm512_loadu_si512(lo), hiv = _mm512_loadu_si512(hi);
        __m512 M = ninf, L = _mm512_setzero_ps();
        memset(O, 0, (size_t)nqr * hd * sizeof(float));
        for (int kb = klo; kb < khi; kb += KB) {
            int nk = khi - kb < KB ? khi - kb : KB;
            const float *K, *V;
            if (p->kv_f16) {
                for (int j = 0; j < nk; j++) {
                    widen_row512((const uint16_t *)c->b[1] + (base + kb + j) * hd, hd, Kw + j * hd);
                    widen_row512((const uint16_t *)c->b[2] + (base + kb + j) * hd, hd, Vw + j * hd);
                }
                K = Kw; V = Vw;
            } else {
                K = (const float *)c->b[1] + (base + kb) * hd;
                V = (const float *)c->b[2] + (base + kb) * hd;
            }
            /* ST = scale * Q K^T (softcapped), masked per query; mx its max per query */
            __m512 mx = ninf;
            for (int j = 0; j < nk;) {
                __m512 acc[8];
                int u = nk - j >= 8 ? 8 : 1;
                if (u == 8) qk512_t(8, QT, K + (int64_t)j * hd, hd, acc);
                else qk512_t(1, QT, K + (int64_t)j * hd, hd, acc);
                for (int i = 0; i < u; i++) {
                    __m512 s = _mm512_mul_ps(acc[i], scale);
                    if (p->softcap > 0) {   /* Gemma 2 */
                        const __m512 cap = _mm512_set1_ps(p->softcap);
                        s = _mm512_mul_ps(cap, ak_tanh512(_mm512_div_ps(s, cap)));
                    }
                    __m512i key = _mm512_set1_epi32(kb + j + i);
                    __mmask16 ok = _mm512_cmp_epi32_mask(key, lov, _MM_CMPINT_NLT) &
                                   _mm512_cmp_epi32_mask(key, hiv, _MM_CMPINT_LT);
                    s = _mm512_mask_mov_ps(ninf, ok, s);
                    _mm512_storeu_ps(ST + (j + i) * QB, s);
                    mx = _mm512_max_ps(mx, s);
                }
                j += u;
            }
            /* online softmax, lane-wise: a query with no visible key yet keeps M = -inf,
             * and its exps run against 0 (so give 0) rather than -inf - -inf */
            __m512 Mn = _mm512_max_ps(M, mx);
            __m512 Ms = _mm512_mask_mov_ps(Mn, _mm512_cmp_ps_mask(Mn, ninf, _CMP_EQ_OQ), _mm512_setzero_ps());
            __m512 corr = ak_exp512(_mm512_sub_ps(M, Ms)), sum = _mm512_setzero_ps();
            for (int j = 0; j < nk; j++) {
                __m512 e = ak_exp512(_mm512_sub_ps(_mm512_loadu_ps(ST + j * QB), Ms));
                _mm512_storeu_ps(ST + j * QB, e);
                sum = _mm512_add_ps(sum, e);
            }
            L = _mm512_fmadd_ps(L, corr, sum);
            M = Mn;
            float cr[QB];
            _mm512_storeu_ps(cr, corr);
            /* O = O * corr + P V */
            for (int r0 = 0; r0 < nqr; r0 += 4)
                for (int d0 = 0; d0 < hd; d0 += 64) {
                    int rr = nqr - r0 < 4 ? nqr - r0 : 4, cc = (hd - d0) / 16 < 4 ? (hd - d0) / 16 : 4;
                    pv512(rr, cc, ST + r0, V + d0, hd, nk, O + r0 * hd + d0, cr + r0);
                }
        }
        _mm512_storeu_ps(Lv, L);
        for (int r = 0; r < nqr; r++) {
            float *out = (float *)c->b[3] + (size_t)(i0 + r) * p->n_heads * hd + (size_t)h * hd;
            __m512 inv = _mm512_set1_ps(Lv[r] > 0 ? 1.0f / Lv[r] : 0.f);
            for (int d = 0; d < hd; d += 16) _mm512_storeu_ps(out + d, _mm512_mul_ps(_mm512_loadu_ps(O + r * hd + d), inv));
        }
    }
}
#undef QB
#undef KB
#endif

void ak_cpu_attn_prefill(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls) {
#if defined(__x86_64__)
    if (ak_cpu_simd >= 2 && ((const ak_p_attn *)c->p)->head_dim % 16 == 0) { attn_prefill_512(c, ith, nth, tls); return; }
#endif
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
