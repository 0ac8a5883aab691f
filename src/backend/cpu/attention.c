/* Attention over the head-major KV cache ([kv_head][max_seq][head_dim] per layer, or
 * [kv_head][cap] slots, a ring, for a sliding-window layer: ak_kv_row): decode split over
 * the KV length (flash decoding: partials per key chunk and KV head, merged in a fixed
 * order) and prefill as tiled flash attention (online softmax over key blocks), with GQA,
 * causal mask, sliding window and logit softcap. Key chunks and tiles start at multiples
 * of their size, which divides a ring's: each reads contiguous slots. */
#include "backend/cpu/cpu.h"
#include "backend/cpu/vecmath.h"
#include <math.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* Rows [idx, idx + n) of a cache of type t (ak_dtype) as floats: direct for F32, else
 * converted (F16) or dequantized (Q8_0, Q4_0) into tmp, on vectors where the level has
 * them (the same floats either way). */
static const float *cache_rows(const void *cache, int t, size_t idx, int n, int hd, float *tmp) {
    if (t == AK_F32) return (const float *)cache + idx * (size_t)hd;
    ak_cpu_dequant_row((ak_dtype)t, (const uint8_t *)cache + idx * ak_dtype_row_bytes((ak_dtype)t, hd), tmp, (int64_t)n * hd);
    return tmp;
}

static inline float score(float s, const ak_p_attn *p) {
    s *= p->scale;
    if (p->softcap > 0) s = p->softcap * tanhf(s / p->softcap);
    return s;
}

/* Keys visible to the query at position q: [lo, hi). */

size_t ak_cpu_attn_scratch(const ak_p_attn *p, int prefill) {
    size_t hd = (size_t)p->head_dim;
    if (!prefill) return (size_t)(p->n_heads / p->n_kv_heads) * AK_ATTN_DC + 32 * hd;   /* decode_chunk */
    /* + a key block of K and V rows widened from an F16, Q8_0 or Q4_0 cache (attn_prefill_512) */
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

/* The largest of x[0 .. n) (n >= 1), any order being exact. */
#if defined(__x86_64__)
__attribute__((target("avx512f"))) static float row_max512(const float *x, int n) {
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (int j = 0; j < n; j += 16) m = _mm512_max_ps(m, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), ak_lanes512(n - j), x + j));
    return _mm512_reduce_max_ps(m);
}
#endif
static float row_max(const float *x, int n) {
#if defined(__x86_64__)
    if (ak_cpu_simd >= 2) return row_max512(x, n);
#endif
    float m = -INFINITY;
    for (int j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
    return m;
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

A512 static void attn_prefill_512(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls) {
    const ak_p_attn *p = (const ak_p_attn *)c->p;
    int hd = p->head_dim, group = p->n_heads / p->n_kv_heads;
    int nqb = (p->n + QB - 1) / QB;
    float *ST = tls->scratch;                     /* [KB][QB]: scores, then probabilities */
    float *O = ST + QB * KB;                      /* [QB][hd] */
    float *QT = O + QB * hd;                      /* [hd][QB] */
    float *Lv = QT + QB * hd + QB;                /* the row sums, read back per query */
    float *Kw = Lv + QB + 2 * hd, *Vw = Kw + KB * hd;   /* a key block's K and V rows as floats (cache_rows) */
    int64_t lo_w, hi_w;
    ak_split((int64_t)p->n_heads * nqb, ith, nth, &lo_w, &hi_w);
    const __m512 ninf = _mm512_set1_ps(-INFINITY), scale = _mm512_set1_ps(p->scale);
    for (int64_t w = lo_w; w < hi_w; w++) {
        int h = (int)(w / nqb), i0 = (int)(w % nqb) * QB;
        int nqr = p->n - i0 < QB ? p->n - i0 : QB;
        int klo, khi, tlo, thi;
        int32_t lo[QB], hi[QB];
        ak_key_range(p, c->b[4], p->pos + i0, &klo, &thi);
        ak_key_range(p, c->b[4], p->pos + i0 + nqr - 1, &tlo, &khi);
        for (int r = 0; r < QB; r++) {
            const float *qv = (const float *)c->b[0] + (size_t)(i0 + r) * p->ld_q + (size_t)h * hd;
            for (int d = 0; d < hd; d++) QT[d * QB + r] = r < nqr ? qv[d] : 0.f;
            lo[r] = hi[r] = 0;   /* rows past the tile: every key masked */
            if (r < nqr) { int a, b; ak_key_range(p, c->b[4], p->pos + i0 + r, &a, &b); lo[r] = a; hi[r] = b; }
        }
        __m512i lov = _mm512_loadu_si512(lo), hiv = _mm512_loadu_si512(hi);
        __m512 M = ninf, L = _mm512_setzero_ps();
        memset(O, 0, (size_t)nqr * hd * sizeof(float));
        /* key tiles at multiples of KB, not from the block's first key: a row then
         * meets the same tiles whatever rows share its block (a window's start moves
         * with the block's first row) */
        for (int kb = klo / KB * KB; kb < khi; kb += KB) {
            int nk = khi - kb < KB ? khi - kb : KB;
            size_t row = ak_kv_row(h / group, kb, p->cap, p->max_seq);
            const float *K = cache_rows(c->b[1], p->kt, row, nk, hd, Kw);
            const float *V = cache_rows(c->b[2], p->vt, row, nk, hd, Vw);
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
            ak_cpu_wht(out, hd, ak_kv_rot(p->vt, hd, 1));   /* a rotated value cache: rotated back */
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
        int klo, khi, tlo, thi, lo[AK_ATTN_QB], hi[AK_ATTN_QB];
        ak_key_range(p, c->b[4], p->pos + i0, &klo, &thi);
        ak_key_range(p, c->b[4], p->pos + i0 + nqr - 1, &tlo, &khi);
        for (int r = 0; r < AK_ATTN_QB; r++) {
            const float *qv = (const float *)c->b[0] + (size_t)(i0 + r) * p->ld_q + (size_t)h * hd;
            for (int d = 0; d < hd; d++) QT[d * AK_ATTN_QB + r] = r < nqr ? qv[d] : 0.f;
            if (r < nqr) ak_key_range(p, c->b[4], p->pos + i0 + r, &lo[r], &hi[r]);
        }
        for (int r = 0; r < nqr; r++) { M[r] = -INFINITY; L[r] = 0; }
        memset(O, 0, (size_t)nqr * hd * sizeof(float));
        for (int kb = klo / AK_ATTN_KB * AK_ATTN_KB; kb < khi; kb += AK_ATTN_KB) {   /* as attn_prefill_512 */
            int nk = khi - kb < AK_ATTN_KB ? khi - kb : AK_ATTN_KB;
            size_t base = ak_kv_row(h / group, kb, p->cap, p->max_seq);
            /* S = Q K^T for the tile, masked per query */
            for (int j = 0; j < nk; j++) {
                float sc[AK_ATTN_QB];
                scores(QT, cache_rows(c->b[1], p->kt, base + j, 1, hd, tmp), hd, sc);
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
                const float *vr = cache_rows(c->b[2], p->vt, base + j, 1, hd, tmp);
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
            ak_cpu_wht(out, hd, ak_kv_rot(p->vt, hd, 1));
        }
    }
}

/* ---- Decode: flash decoding over the KV length ----
 * A row's visible keys [lo, hi) are cut at multiples of AK_ATTN_DC. A work unit is one
 * such chunk of one KV head for the G query heads that share it (K and V are read once
 * for the group); it leaves a partial in the table's shared buffer: o (unnormalised,
 * G x hd), and per query head the maximum score m and l = sum e^(s - m). Threads take
 * units by key count; whichever completes the last unit of a (row, KV head) merges its
 * partials, in chunk order. The chunks, the arithmetic of each and the merge depend on
 * the shapes and [lo, hi) alone, never on the thread count or on who runs what, so a
 * verification row rounds exactly as the decode step at its position. */
#define DC AK_ATTN_DC

/* Row r's visible keys [lo, hi) and its chunks c0 .. c0 + nc. */
typedef struct { int lo, hi, c0, nc; } dspan;
static dspan row_span(const ak_p_attn *p, int r) {
    dspan s;
    ak_key_range(p, NULL, p->pos + r, &s.lo, &s.hi);
    s.c0 = s.lo / DC;
    s.nc = s.hi > s.lo ? (s.hi - 1) / DC + 1 - s.c0 : 0;
    return s;
}

/* Shared: a count of the units done per (row, KV head), and its partials, max_chunks slots
 * per (row, KV head), neither placed by the rows of the call (n is patched). */
static size_t max_chunks(const ak_p_attn *p) { return ((size_t)p->max_seq + DC - 1) / DC; }

/* Floats of one partial: o[G][hd], m[G], l[G], rounded up to a cache line. */
static size_t part_floats(const ak_p_attn *p) {
    size_t g = (size_t)(p->n_heads / p->n_kv_heads);
    return (g * ((size_t)p->head_dim + 2) + 15) & ~(size_t)15;
}

void ak_cpu_attn_shared(const ak_p_attn *p, size_t *counts, size_t *bytes) {
    *counts = (size_t)p->n * p->n_kv_heads;
    *bytes = *counts * max_chunks(p) * part_floats(p) * sizeof(float);
}

/* The two inner loops of a chunk. qk16: s[i] = scale * dot(q, K row i) for the 16 rows of
 * K (F32 or F16, stride hd). pv16: o[g] += sum_j P[g][j] v_j for g < G (P rows at stride
 * DC) over nk <= 16 rows of V (F32 or F16, stride hd), j in order. The vector versions
 * sum the dot products in other orders; each order is fixed. */
typedef struct {
    void (*qk16)(const float *q, const void *K, int f16, int hd, float scale, float *s);
    void (*pv16)(const float *P, int G, const void *V, int f16, int hd, int nk, float *o);
} dec_ops;

static void qk16_ref(const float *q, const void *K, int f16, int hd, float scale, float *s) {
    for (int i = 0; i < 16; i++) {
        float a = 0;
        for (int d = 0; d < hd; d++) {
            size_t x = (size_t)i * hd + d;
            a += q[d] * (f16 ? ak_f16_to_f32(((const uint16_t *)K)[x]) : ((const float *)K)[x]);
        }
        s[i] = a * scale;
    }
}
static void pv16_ref(const float *P, int G, const void *V, int f16, int hd, int nk, float *o) {
    for (int j = 0; j < nk; j++)
        for (int g = 0; g < G; g++) {
            float e = P[g * DC + j];
            for (int d = 0; d < hd; d++) {
                size_t i = (size_t)j * hd + d;
                o[(size_t)g * hd + d] += e * (f16 ? ak_f16_to_f32(((const uint16_t *)V)[i]) : ((const float *)V)[i]);
            }
        }
}

#if defined(__x86_64__)
/* AVX-512, hd a multiple of 16: 16 keys' dot products as 16 vector sums, folded into one
 * vector of 16 scores (halves of pairs added, 4 levels, then lane 4q + i holds key 4i + q).
 * Instantiated for the common head dims, so that the strip loops unroll with q in
 * registers and the rows' offsets constant. */
A512 static AINL __m512 ld16(const int f16, const void *p, size_t i) {
    return f16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i))) : _mm512_loadu_ps((const float *)p + i);
}
A512 static AINL void qk16_512_t(const int hd, const int f16, const float *q, const void *K, float scale, float *s) {
    __m512 a[16], b[8], c[4];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) a[i] = _mm512_setzero_ps();
    /* strips of 128 dims: q's strip in registers, K read in address order within it
     * (~10-25% faster from memory than a pass over the 16 rows a vector at a time) */
    for (int d0 = 0; d0 < hd; d0 += 128) {
        const int w = hd - d0 < 128 ? hd - d0 : 128;
        __m512 qv[8] = {0};
#pragma GCC unroll 8
        for (int d = 0; d < w; d += 16) qv[d / 16] = _mm512_loadu_ps(q + d0 + d);
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
#pragma GCC unroll 8
            for (int d = 0; d < w; d += 16) a[i] = _mm512_fmadd_ps(qv[d / 16], ld16(f16, K, (size_t)i * hd + d0 + d), a[i]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    __m512 d0 = _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(c[0], c[1], _MM_SHUFFLE(3, 2, 3, 2)));
    __m512 d1 = _mm512_add_ps(_mm512_shuffle_ps(c[2], c[3], _MM_SHUFFLE(1, 0, 1, 0)), _mm512_shuffle_ps(c[2], c[3], _MM_SHUFFLE(3, 2, 3, 2)));
    __m512 e = _mm512_add_ps(_mm512_shuffle_ps(d0, d1, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(d0, d1, _MM_SHUFFLE(3, 1, 3, 1)));
    e = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), e);
    _mm512_storeu_ps(s, _mm512_mul_ps(e, _mm512_set1_ps(scale)));
}
#define QK512_H(h) case h: if (f16) qk16_512_t(h, 1, q, K, scale, s); else qk16_512_t(h, 0, q, K, scale, s); break;
A512 static void qk16_512(const float *q, const void *K, int f16, int hd, float scale, float *s) {
    switch (hd) {
    QK512_H(64) QK512_H(128) QK512_H(256)
    default: if (f16) qk16_512_t(hd, 1, q, K, scale, s); else qk16_512_t(hd, 0, q, K, scale, s); break;
    }
}

/* o[g][0 .. 16 dt) += sum_j P[g][j] v_j[0 .. 16 dt) for g < gg (gg dt <= 16), in registers. */
A512 static AINL void dpv512_t(const int gg, const int dt, const int f16, const float *P, const void *V, int hd, int nk, float *o) {
    __m512 a[4][16];
#pragma GCC unroll 4
    for (int g = 0; g < gg; g++)
#pragma GCC unroll 16
        for (int ci = 0; ci < dt; ci++) a[g][ci] = _mm512_loadu_ps(o + (size_t)g * hd + ci * 16);
    for (int j = 0; j < nk; j++) {
        __m512 v[16];
#pragma GCC unroll 16
        for (int ci = 0; ci < dt; ci++)
            v[ci] = f16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)V + (size_t)j * hd + ci * 16)))
                        : _mm512_loadu_ps((const float *)V + (size_t)j * hd + ci * 16);
#pragma GCC unroll 4
        for (int g = 0; g < gg; g++) {
            __m512 e = _mm512_set1_ps(P[g * DC + j]);
#pragma GCC unroll 16
            for (int ci = 0; ci < dt; ci++) a[g][ci] = _mm512_fmadd_ps(e, v[ci], a[g][ci]);
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < gg; g++)
#pragma GCC unroll 16
        for (int ci = 0; ci < dt; ci++) _mm512_storeu_ps(o + (size_t)g * hd + ci * 16, a[g][ci]);
}
#define PV512_D(gg, dt) case dt: if (f16) dpv512_t(gg, dt, 1, P, V, hd, nk, o); else dpv512_t(gg, dt, 0, P, V, hd, nk, o); break;
#define PV512_G(gg) case gg: switch (dt) { PV512_D(gg, 1) PV512_D(gg, 2) PV512_D(gg, 3) PV512_D(gg, 4) default: break; } break;
A512 static void pv_tile512(int gg, int dt, int f16, const float *P, const void *V, int hd, int nk, float *o) {
    switch (gg) { PV512_G(1) PV512_G(2) PV512_G(3) PV512_G(4) default: break; }
}
/* Passes over whole V rows where the head dim allows (4 heads x 64 dims, 2 x 128, 1 x 256:
 * 16 accumulators), the block's rows staying in L1 across the passes; tiles that read part
 * of each row were up to 25% slower from memory. F16 at 256 dims: 2 heads x 128, halving
 * the conversions of a 1 x 256 pass (each head's pass converts V again). Other dims:
 * tiles of 4 heads x 64 dims. */
#define PV512_W(gg, dt) do { if (f16) dpv512_t(gg, dt, 1, Pg, Vd, hd, nk, og); else dpv512_t(gg, dt, 0, Pg, Vd, hd, nk, og); } while (0)
A512 static void pv16_512(const float *P, int G, const void *V, int f16, int hd, int nk, float *o) {
    if (hd == 128 || hd == 256) {
        const int gs = hd == 256 && !f16 ? 1 : 2, ds = gs == 1 ? 256 : 128;
        for (int g = 0; g < G; g += gs)
            for (int d = 0; d < hd; d += ds) {
                const float *Pg = P + (size_t)g * DC;
                const void *Vd = (const uint8_t *)V + (size_t)d * (f16 ? 2 : 4);
                float *og = o + (size_t)g * hd + d;
                if (gs == 1) PV512_W(1, 16);
                else if (G - g >= 2) PV512_W(2, 8);
                else PV512_W(1, 8);
            }
        return;
    }
    size_t es = f16 ? 2 : 4;
    for (int g0 = 0; g0 < G; g0 += 4)
        for (int d0 = 0; d0 < hd; d0 += 64)
            pv_tile512(G - g0 < 4 ? G - g0 : 4, (hd - d0) / 16 < 4 ? (hd - d0) / 16 : 4, f16, P + (size_t)g0 * DC,
                       (const uint8_t *)V + (size_t)d0 * es, hd, nk, o + (size_t)g0 * hd + d0);
}

/* AVX2, hd a multiple of 8: the same with 8 keys a pass (hadd folds 8 sums into one). */
#define A256 __attribute__((target("avx2,fma,f16c")))
A256 static void qk16_256(const float *q, const void *Kv, int f16, int hd, float scale, float *s) {
    for (int h = 0; h < 2; h++) {
        __m256 a[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) a[i] = _mm256_setzero_ps();
        for (int d = 0; d < hd; d += 8) {
            __m256 qv = _mm256_loadu_ps(q + d);
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) {
                size_t x = (size_t)(8 * h + i) * hd + d;
                __m256 k = f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)Kv + x))) : _mm256_loadu_ps((const float *)Kv + x);
                a[i] = _mm256_fmadd_ps(qv, k, a[i]);
            }
        }
        __m256 x = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
        __m256 y = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
        __m256 t = _mm256_add_ps(_mm256_permute2f128_ps(x, y, 0x20), _mm256_permute2f128_ps(x, y, 0x31));
        _mm256_storeu_ps(s + 8 * h, _mm256_mul_ps(t, _mm256_set1_ps(scale)));
    }
}
A256 static AINL void dpv256_t(const int gg, const int dt, const int f16, const float *P, const void *V, int hd, int nk, float *o) {
    __m256 a[4][2];
#pragma GCC unroll 4
    for (int g = 0; g < gg; g++)
#pragma GCC unroll 2
        for (int ci = 0; ci < dt; ci++) a[g][ci] = _mm256_loadu_ps(o + (size_t)g * hd + ci * 8);
    for (int j = 0; j < nk; j++) {
        __m256 v[2];
#pragma GCC unroll 2
        for (int ci = 0; ci < dt; ci++)
            v[ci] = f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)V + (size_t)j * hd + ci * 8)))
                        : _mm256_loadu_ps((const float *)V + (size_t)j * hd + ci * 8);
#pragma GCC unroll 4
        for (int g = 0; g < gg; g++) {
            __m256 e = _mm256_set1_ps(P[g * DC + j]);
#pragma GCC unroll 2
            for (int ci = 0; ci < dt; ci++) a[g][ci] = _mm256_fmadd_ps(e, v[ci], a[g][ci]);
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < gg; g++)
#pragma GCC unroll 2
        for (int ci = 0; ci < dt; ci++) _mm256_storeu_ps(o + (size_t)g * hd + ci * 8, a[g][ci]);
}
#define PV256_D(gg, dt) case dt: if (f16) dpv256_t(gg, dt, 1, P, V, hd, nk, o); else dpv256_t(gg, dt, 0, P, V, hd, nk, o); break;
#define PV256_G(gg) case gg: switch (dt) { PV256_D(gg, 1) PV256_D(gg, 2) default: break; } break;
A256 static void pv_tile256(int gg, int dt, int f16, const float *P, const void *V, int hd, int nk, float *o) {
    switch (gg) { PV256_G(1) PV256_G(2) PV256_G(3) PV256_G(4) default: break; }
}
A256 static void pv16_256(const float *P, int G, const void *V, int f16, int hd, int nk, float *o) {
    size_t es = f16 ? 2 : 4;
    for (int g0 = 0; g0 < G; g0 += 4)
        for (int d0 = 0; d0 < hd; d0 += 16)
            pv_tile256(G - g0 < 4 ? G - g0 : 4, (hd - d0) / 8 < 2 ? (hd - d0) / 8 : 2, f16, P + (size_t)g0 * DC,
                       (const uint8_t *)V + (size_t)d0 * es, hd, nk, o + (size_t)g0 * hd + d0);
}
#endif

static dec_ops decode_ops(int hd) {
#if defined(__x86_64__)
    if (ak_cpu_simd >= 2 && hd % 16 == 0) return (dec_ops){qk16_512, pv16_512};
    if (ak_cpu_simd >= 1 && hd % 8 == 0) return (dec_ops){qk16_256, pv16_256};
#endif
    return (dec_ops){qk16_ref, pv16_ref};
}

/* One unit: keys [a, b) of KV head kvh for row r's G query heads, into part. */
static void decode_chunk(const ak_cpu_cmd *c, const ak_p_attn *p, const dec_ops *ops, int r, int kvh, int a, int b,
                         float *part, float *scratch) {
    const int hd = p->head_dim, G = p->n_heads / p->n_kv_heads, nk = b - a;
    const ak_dtype kt = (ak_dtype)p->kt, vt = (ak_dtype)p->vt;
    const size_t rk = ak_dtype_row_bytes(kt, hd), rv = ak_dtype_row_bytes(vt, hd), row0 = ak_kv_row(kvh, a, p->cap, p->max_seq);
    const float *q = (const float *)c->b[0] + (size_t)r * p->ld_q + (size_t)kvh * G * hd;
    const uint8_t *K = (const uint8_t *)c->b[1] + row0 * rk, *V = (const uint8_t *)c->b[2] + row0 * rv;
    float *S = scratch, *Kt = S + (size_t)G * DC, *Vt = Kt + 16 * (size_t)hd;   /* scores [G][DC], key and value tiles [16][hd] */
    float *o = part, *m = part + (size_t)G * hd, *l = m + G;
    for (int j = 0; j < nk; j += 16) {
        int w = nk - j < 16 ? nk - j : 16, kf16 = kt == AK_F16;
        const void *kb = K + (size_t)j * rk;
        /* the last keys (zero-padded), keys read by many heads, or Q8_0 / Q4_0 keys, widened once */
        if (w < 16 || (kf16 && G > 4) || (kt != AK_F32 && !kf16)) {
            if (kt == AK_F32) memcpy(Kt, kb, (size_t)w * hd * sizeof(float));
            else ak_cpu_dequant_row(kt, kb, Kt, (int64_t)w * hd);
            if (w < 16) memset(Kt + (size_t)w * hd, 0, (size_t)(16 - w) * hd * sizeof(float));
            kb = Kt;
            kf16 = 0;
        }
        for (int g = 0; g < G; g++) ops->qk16(q + (size_t)g * hd, kb, kf16, hd, p->scale, S + (size_t)g * DC + j);
    }
    for (int g = 0; g < G; g++) {
        float *s = S + (size_t)g * DC, mx;
        if (p->softcap > 0) ak_cpu_softcap_row(s, nk, p->softcap);   /* Gemma 2 */
        m[g] = mx = row_max(s, nk);
        l[g] = exp_sub_row(s, nk, mx);
    }
    memset(o, 0, (size_t)G * hd * sizeof(float));
    for (int j = 0; j < nk; j += 16) {
        int w = nk - j < 16 ? nk - j : 16, vf16 = vt == AK_F16;
        const void *vb = V + (size_t)j * rv;
        if (vt != AK_F32 && !vf16) {   /* Q8_0 / Q4_0 values, dequantized a tile at a time */
            ak_cpu_dequant_row(vt, vb, Vt, (int64_t)w * hd);
            vb = Vt;
        }
        ops->pv16(S + j, G, vb, vf16, hd, w, o);
    }
}

/* out = sum_k e^(m_k - M) o_k / sum_k e^(m_k - M) l_k for the G heads of KV head kvh in
 * row r, chunks in order (pr: the group's first partial). */
static void decode_merge(const ak_cpu_cmd *c, const ak_p_attn *p, int r, int kvh, int nc, const float *pr) {
    const int hd = p->head_dim, G = p->n_heads / p->n_kv_heads;
    const size_t pf = part_floats(p);
    for (int g = 0; g < G; g++) {
        const float *m = pr + (size_t)G * hd + g, *l = m + G;
        float *out = (float *)c->b[3] + ((size_t)r * p->n_heads + (size_t)kvh * G + g) * hd;
        float M = -INFINITY, L = 0;
        for (int k = 0; k < nc; k++) M = m[k * pf] > M ? m[k * pf] : M;
        memset(out, 0, (size_t)hd * sizeof(float));
        for (int k = 0; k < nc; k++) {
            float w = expf(m[k * pf] - M);
            L += w * l[k * pf];
            axpy(out, w, pr + k * pf + (size_t)g * hd, hd);
        }
        for (int d = 0; d < hd; d++) out[d] = L > 0 ? out[d] / L : 0.f;
        ak_cpu_wht(out, hd, ak_kv_rot(p->vt, hd, 1));
    }
}

void ak_cpu_attn_decode(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls) {
    const ak_p_attn *p = (const ak_p_attn *)c->p;
    const int nkv = p->n_kv_heads;
    const size_t pf = part_floats(p), mc = max_chunks(p);
    float *parts = c->sh.data;
    const dec_ops ops = decode_ops(p->head_dim);
    /* every row, each as its own one-query decode (speculative verification checks n
     * rows with the arithmetic of n decode steps). A unit goes to the thread whose share
     * of all the keys holds its middle key: the first and last chunks of a window may be
     * short. */
    int64_t W = 0, P = 0;
    for (int r = 0; r < p->n; r++) { dspan s = row_span(p, r); W += (int64_t)nkv * (s.hi - s.lo); }
    for (int r = 0; r < p->n; r++) {
        dspan s = row_span(p, r);
        if (s.nc == 0) {   /* no visible key (not reached by a causal decode) */
            if (ith == 0) memset((float *)c->b[3] + (size_t)r * p->n_heads * p->head_dim, 0, (size_t)p->n_heads * p->head_dim * sizeof(float));
            continue;
        }
        for (int kvh = 0; kvh < nkv; kvh++) {
            float *pr = parts + ((size_t)r * nkv + kvh) * mc * pf;
            int mine = 0;
            for (int k = 0; k < s.nc; k++) {
                int a = (s.c0 + k) * DC > s.lo ? (s.c0 + k) * DC : s.lo, b = (s.c0 + k + 1) * DC < s.hi ? (s.c0 + k + 1) * DC : s.hi;
                if ((2 * P + (b - a)) * nth / (2 * W) == ith) {
                    decode_chunk(c, p, &ops, r, kvh, a, b, pr + (size_t)k * pf, tls->scratch);
                    mine++;
                }
                P += b - a;
            }
            /* the unit that completes the group merges it, having acquired the other
             * threads' partials; the barrier after the command orders the reset before
             * the next use */
            _Atomic int *cnt = c->sh.count + (size_t)r * nkv + kvh;
            if (mine && atomic_fetch_add_explicit(cnt, mine, memory_order_acq_rel) + mine == s.nc) {
                atomic_store_explicit(cnt, 0, memory_order_relaxed);
                decode_merge(c, p, r, kvh, s.nc, pr);
            }
        }
    }
}
#undef DC
