/* Panels of the float types (F32, F16, BF16).
 *
 * Layout: panel p holds rows 16p .. 16p+15 of the N x K matrix; for each k the 16 rows'
 * values are stored contiguously in the file's element type (panel p starts at element
 * p * 16 * K, value (k, j) at element k * 16 + j; rows past N are zero). One 32-byte load
 * of F16/BF16 (64 bytes of F32) widens to the 16 rows' weights for one k.
 *
 * Activations stay float; F16 and BF16 widen to f32 exactly, so every path computes the
 * same products and only the f32 summation order differs: |error| <= (K + 4) u sum|w x|.
 *
 * Decode (gemv, a row at a time): the weights stream once, each vector times a broadcast x[k], four
 * independent accumulators (per 8 rows) per panel; no horizontal sums, no scratch. F16 and
 * BF16 use the 256-bit kernel at level 2 as well (faster from cache, equal from DRAM:
 * ~32 GB/s on one core, ~37 on two for an 8192 x 2048 F16 matrix, the same as the row
 * kernels); software prefetch made it slower.
 *
 * Prefill (any n): blocked as BLIS does, every row summed by the same chain wherever it
 * falls in a block. Activation rows go in blocks of at most NCMAX,
 * K in slabs of KC; per (row block, slab) the activations are packed into scratch as
 * micro-panels of MR rows ([k][MR] floats, so broadcasts come from one stream), then for
 * each pair of panels the slab of weights is widened once to f32 in scratch (at AVX-512
 * by the first micro-kernel as it goes; F32 panels are used in place) and reused by every
 * micro-panel: the AVX-512 micro-kernel holds
 * 2 panels x 12 rows = 24 zmm accumulators (32 output rows x 12 activation rows), per k
 * two weight loads, 12 broadcasts and 24 FMAs. Partial sums go through y between slabs;
 * the bias is the initial value of the first slab. While a pair is multiplied, the next
 * pair's slab is prefetched into L2, a share before each micro-kernel. AVX2: one panel
 * (2 ymm) x 6 rows, the same blocking.
 *
 * Sizes (Zen 4: 32 KiB L1d, 1 MiB L2 per core): KC = 1024 and NCMAX = 240 keep a packed
 * activation block (<= 960 KiB) in L2 beside the widened pair (128 KiB); measured on one
 * core, 1B shapes, F16: KC 256 -> 1024 took ~95 to ~105 GFLOP/s (fewer micro-kernel
 * starts and y round trips); widening in the micro-kernel instead (vcvtph2ps per k) was
 * 3-5 % slower, embedded broadcasts, k unrolling, 14 rows or software prefetch of x made
 * no difference. F16 / BF16 at AVX-512 take blocks of up to NCBIG = 516 rows instead
 * (see mm512): fewer widenings outweigh x streaming from L3. */
#include "backend/cpu/panel.h"
#include "backend/cpu/cpu.h"
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define R AK_PANEL_R
#ifndef KC
#define KC 1024     /* K slab */
#endif
#ifndef NCMAX
#define NCMAX 240   /* activation rows per block (a multiple of both MRs) */
#endif
#ifndef NCBIG
#define NCBIG 516   /* the same, F16 / BF16 at AVX-512 (a multiple of MR512) */
#endif
#define MR512 12
#define MR256 6

static inline bool is_f(ak_dtype t) { return t == AK_F32 || t == AK_F16 || t == AK_BF16; }
static inline size_t esz(ak_dtype t) { return t == AK_F32 ? 4 : 2; }

bool ak_panel_f_supported(ak_dtype t, int64_t K) { return is_f(t) && K > 0; }

size_t ak_panel_f_bytes(ak_dtype t, int64_t N, int64_t K) {
    if (!is_f(t)) return 0;
    return (size_t)((N + R - 1) / R) * R * (size_t)K * esz(t);
}

void ak_panel_f_pack(ak_dtype t, const void *src, int64_t N, int64_t K, void *dst, int64_t p0, int64_t p1) {
    if (!is_f(t)) return;
    for (int64_t p = p0; p < p1; p++) {
        int64_t nv = N - p * R;
        if (nv > R) nv = R;
        if (nv < 0) nv = 0;
        if (t == AK_F32) {
            uint32_t *d = (uint32_t *)dst + p * R * K;
            const uint32_t *s = (const uint32_t *)src + p * R * K;
            if (nv < R) memset(d, 0, (size_t)(R * K) * 4);
            for (int64_t k0 = 0; k0 < K; k0 += 64) {
                int64_t k1 = k0 + 64 < K ? k0 + 64 : K;
                for (int64_t j = 0; j < nv; j++)
                    for (int64_t k = k0; k < k1; k++) d[k * R + j] = s[j * K + k];
            }
        } else {
            uint16_t *d = (uint16_t *)dst + p * R * K;
            const uint16_t *s = (const uint16_t *)src + p * R * K;
            if (nv < R) memset(d, 0, (size_t)(R * K) * 2);
            for (int64_t k0 = 0; k0 < K; k0 += 64) {
                int64_t k1 = k0 + 64 < K ? k0 + 64 : K;
                for (int64_t j = 0; j < nv; j++)
                    for (int64_t k = k0; k < k1; k++) d[k * R + j] = s[j * K + k];
            }
        }
    }
}

size_t ak_panel_f_scratch(ak_dtype t, int64_t K, int n, bool gemv) {
    if (!is_f(t) || n <= 0 || gemv) return 0;
    int64_t kc = K < KC ? K : KC, nc = n < NCBIG ? n : NCBIG;
    /* packed activations (nc x kc) and two widened panels (2 x 16 x kc), 64-aligned */
    return ((size_t)(nc * kc) * 4 + 63) / 64 * 64 + (size_t)(2 * R * kc) * 4;
}

/* ---- scalar reference ---- */

static inline float wval(ak_dtype t, const void *w, int64_t i) {
    if (t == AK_F32) return ((const float *)w)[i];
    uint16_t h = ((const uint16_t *)w)[i];
    return t == AK_F16 ? ak_f16_to_f32(h) : ak_bf16_to_f32(h);
}

static void mm_ref(ak_dtype t, const void *w, int64_t N, int64_t K, int64_t p0, int64_t p1,
                   const float *x, int64_t ldx, int n, float *y, int64_t ldy, const float *bias) {
    for (int64_t p = p0; p < p1; p++) {
        int64_t nv = N - p * R < R ? N - p * R : R;
        for (int i = 0; i < n; i++) {
            float acc[R];
            for (int j = 0; j < R; j++) acc[j] = bias && j < nv ? bias[p * R + j] : 0.f;
            const float *xi = x + (int64_t)i * ldx;
            for (int64_t k = 0; k < K; k++) {
                float xk = xi[k];
                for (int j = 0; j < R; j++) acc[j] += wval(t, w, (p * K + k) * R + j) * xk;
            }
            for (int64_t j = 0; j < nv; j++) y[(int64_t)i * ldy + p * R + j] = acc[j];
        }
    }
}

/* Packs activation rows [i0, i1), columns [k0, k0 + kc) into micro-panels of mr rows
 * (the last one narrower): micro-panel b starts at xp + b * mr * kc, value (k, i) at k * w + i
 * with w its width. */
static void pack_x(const float *x, int64_t ldx, int i0, int i1, int64_t k0, int kc, int mr, float *xp) {
    for (int ib = i0; ib < i1; ib += mr) {
        int w = i1 - ib < mr ? i1 - ib : mr, i = 0;
        float *d = xp + (int64_t)(ib - i0) * kc;
#if defined(__x86_64__)
        /* four rows at a time: 4 x 4 transposes */
        for (; i + 4 <= w; i += 4) {
            const float *s0 = x + (int64_t)(ib + i) * ldx + k0, *s1 = s0 + ldx, *s2 = s1 + ldx, *s3 = s2 + ldx;
            int k = 0;
            for (; k + 4 <= kc; k += 4) {
                __m128 r0 = _mm_loadu_ps(s0 + k), r1 = _mm_loadu_ps(s1 + k), r2 = _mm_loadu_ps(s2 + k), r3 = _mm_loadu_ps(s3 + k);
                _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
                _mm_storeu_ps(d + k * w + i, r0);
                _mm_storeu_ps(d + (k + 1) * w + i, r1);
                _mm_storeu_ps(d + (k + 2) * w + i, r2);
                _mm_storeu_ps(d + (k + 3) * w + i, r3);
            }
            for (; k < kc; k++) {
                d[k * w + i] = s0[k];
                d[k * w + i + 1] = s1[k];
                d[k * w + i + 2] = s2[k];
                d[k * w + i + 3] = s3[k];
            }
        }
#endif
        for (; i < w; i++) {
            const float *s = x + (int64_t)(ib + i) * ldx + k0;
            for (int k = 0; k < kc; k++) d[k * w + i] = s[k];
        }
    }
}

#if defined(__x86_64__)
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define AVX2 __attribute__((target("avx2,fma,f16c")))
#define INL inline __attribute__((always_inline))

/* ---------------- AVX-512 ---------------- */

/* 16 weights (one k of a panel) at element index e of a panel array of type t. */
AVX512 static INL __m512 ldw512(ak_dtype t, const void *w, int64_t e) {
    if (t == AK_F32) return _mm512_loadu_ps((const float *)w + e);
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + e));
    if (t == AK_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static inline __mmask16 rows_mask(int64_t N, int64_t p) {
    int64_t nv = N - p * R;
    if (nv >= R) return 0xFFFF;
    if (nv <= 0) return 0;
    return (__mmask16)((1u << nv) - 1);
}

AVX512 static INL void gemv512_t(ak_dtype t, const void *w, int64_t N, int64_t K, int64_t p0, int64_t p1,
                                 const float *x, float *y, const float *bias) {
    for (int64_t p = p0; p < p1; p++) {
        __mmask16 m = rows_mask(N, p);
        int64_t base = p * R * K;
        __m512 a0 = bias ? _mm512_maskz_loadu_ps(m, bias + p * R) : _mm512_setzero_ps();
        __m512 a1 = _mm512_setzero_ps(), a2 = a1, a3 = a1;
        int64_t k = 0;
        for (; k + 4 <= K; k += 4) {
            a0 = _mm512_fmadd_ps(ldw512(t, w, base + k * R), _mm512_set1_ps(x[k]), a0);
            a1 = _mm512_fmadd_ps(ldw512(t, w, base + k * R + R), _mm512_set1_ps(x[k + 1]), a1);
            a2 = _mm512_fmadd_ps(ldw512(t, w, base + k * R + 2 * R), _mm512_set1_ps(x[k + 2]), a2);
            a3 = _mm512_fmadd_ps(ldw512(t, w, base + k * R + 3 * R), _mm512_set1_ps(x[k + 3]), a3);
        }
        for (; k < K; k++) a0 = _mm512_fmadd_ps(ldw512(t, w, base + k * R), _mm512_set1_ps(x[k]), a0);
        _mm512_mask_storeu_ps(y + p * R, m, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    }
}

/* The micro-kernel: np (1, 2) panels x mr activation rows over kc values of k. w0, w1:
 * the panels' f32 weights at the slab ([k][16]); xp: the micro-panel ([k][mr]); y: the
 * output tile (row i at y + i * ldy, panel 1 at +16). first: start from the bias (or 0),
 * else from y. wt (1 F16, 2 BF16): instead widen the panels' slab from s0, s1 as it goes,
 * storing it at d0, d1 for the calls that follow (see mm512); 0: read w0, w1. */
AVX512 static INL void mk512_t(const int np, const int mr, const int wt, int kc, const float *w0, const float *w1,
                               const uint16_t *s0, const uint16_t *s1, float *d0, float *d1,
                               const float *xp, float *y, int64_t ldy, __mmask16 m0, __mmask16 m1,
                               const float *bias, int first) {
    __m512 a0[MR512], a1[MR512];
    if (first) {
        __m512 b0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
        __m512 b1 = bias && np == 2 ? _mm512_maskz_loadu_ps(m1, bias + R) : _mm512_setzero_ps();
#pragma GCC unroll 12
        for (int i = 0; i < mr; i++) { a0[i] = b0; a1[i] = b1; }
    } else {
#pragma GCC unroll 12
        for (int i = 0; i < mr; i++) {
            a0[i] = _mm512_maskz_loadu_ps(m0, y + i * ldy);
            a1[i] = np == 2 ? _mm512_maskz_loadu_ps(m1, y + i * ldy + R) : _mm512_setzero_ps();
        }
    }
    for (int k = 0; k < kc; k++) {
        __m512 v0, v1;
        if (wt) {
            v0 = ldw512(wt == 1 ? AK_F16 : AK_BF16, s0, k * R);
            _mm512_store_ps(d0 + k * R, v0);
            v1 = v0;
            if (np == 2) { v1 = ldw512(wt == 1 ? AK_F16 : AK_BF16, s1, k * R); _mm512_store_ps(d1 + k * R, v1); }
        } else {
            v0 = _mm512_loadu_ps(w0 + k * R);
            v1 = np == 2 ? _mm512_loadu_ps(w1 + k * R) : v0;
        }
        const float *xk = xp + k * mr;
#pragma GCC unroll 12
        for (int i = 0; i < mr; i++) {
            __m512 xb = _mm512_set1_ps(xk[i]);
            a0[i] = _mm512_fmadd_ps(v0, xb, a0[i]);
            if (np == 2) a1[i] = _mm512_fmadd_ps(v1, xb, a1[i]);
        }
    }
#pragma GCC unroll 12
    for (int i = 0; i < mr; i++) {
        _mm512_mask_storeu_ps(y + i * ldy, m0, a0[i]);
        if (np == 2) _mm512_mask_storeu_ps(y + i * ldy + R, m1, a1[i]);
    }
}

#define MK512_CASE(np, mr) case mr: mk512_t(np, mr, 0, kc, w0, w1, NULL, NULL, NULL, NULL, xp, y, ldy, m0, m1, bias, first); break;
#define MK512_SW(np) switch (mr) { MK512_CASE(np, 1) MK512_CASE(np, 2) MK512_CASE(np, 3) MK512_CASE(np, 4) \
    MK512_CASE(np, 5) MK512_CASE(np, 6) MK512_CASE(np, 7) MK512_CASE(np, 8) MK512_CASE(np, 9) MK512_CASE(np, 10) \
    MK512_CASE(np, 11) MK512_CASE(np, 12) default: break; }

AVX512 static void mk512(int np, int mr, int kc, const float *w0, const float *w1, const float *xp, float *y,
                         int64_t ldy, __mmask16 m0, __mmask16 m1, const float *bias, int first) {
    if (np == 2) { MK512_SW(2) } else { MK512_SW(1) }
}

/* A full-height (MR512) micro-kernel that widens F16 / BF16 panels as it multiplies. */
#define MK512W(np, wt) mk512_t(np, MR512, wt, kc, NULL, NULL, s0, s1, d0, d1, xp, y, ldy, m0, m1, bias, first)
AVX512 static void mk512w(int np, ak_dtype t, int kc, const uint16_t *s0, const uint16_t *s1, float *d0, float *d1,
                          const float *xp, float *y, int64_t ldy, __mmask16 m0, __mmask16 m1, const float *bias,
                          int first) {
    if (t == AK_F16) { if (np == 2) MK512W(2, 1); else MK512W(1, 1); }
    else { if (np == 2) MK512W(2, 2); else MK512W(1, 2); }
}

/* Widens panels [p, p + np) of slab [k0, k0 + kc) to f32: panel q at dst + q * kc * 16. */
AVX512 static void widen512(ak_dtype t, const void *w, int64_t K, int64_t p, int np, int64_t k0, int kc, float *dst) {
    for (int q = 0; q < np; q++) {
        int64_t base = ((p + q) * K + k0) * R;
        float *d = dst + (int64_t)q * kc * R;
        if (t == AK_F16)
            for (int k = 0; k < kc; k++) _mm512_store_ps(d + k * R, ldw512(AK_F16, w, base + k * R));
        else
            for (int k = 0; k < kc; k++) _mm512_store_ps(d + k * R, ldw512(AK_BF16, w, base + k * R));
    }
}

#define MRX MR512
AVX512 static void mm512(ak_dtype t, const void *w, int64_t N, int64_t K, int64_t p0, int64_t p1,
                         const float *x, int64_t ldx, int n, float *y, int64_t ldy, const float *bias, void *scratch) {
    int64_t kcmax = K < KC ? K : KC;
    /* F16 / BF16 widen each pair's slab once per activation block: blocks of up to NCBIG
     * rows (the packed block, 2 MiB, then lives in L3, its micro-panels streaming in)
     * widen a third as often at n = 512 as blocks of 240 and measured 2-3 % faster on
     * one core (1B shapes), about 1 % on pp512; F32 widens nothing and keeps its blocks
     * in L2. */
    int nmax = t == AK_F32 ? NCMAX : NCBIG, ncmax = n < nmax ? n : nmax;
    float *xp = scratch, *wb = (float *)((uint8_t *)scratch + ((size_t)(ncmax * kcmax) * 4 + 63) / 64 * 64);
    int nb = (n + nmax - 1) / nmax, bs = ((n + nb - 1) / nb + MRX - 1) / MRX * MRX;
    size_t es = esz(t);
    for (int i0 = 0; i0 < n; i0 += bs) {
        int i1 = i0 + bs < n ? i0 + bs : n;
        for (int64_t k0 = 0; k0 < K; k0 += KC) {
            int kc = (int)(K - k0 < KC ? K - k0 : KC), first = k0 == 0;
            pack_x(x, ldx, i0, i1, k0, kc, MR512, xp);
            for (int64_t p = p0; p < p1; p += 2) {
                int np = p1 - p >= 2 ? 2 : 1;
                const float *w0, *w1;
                /* F16 / BF16: a full first micro-panel widens the slab while it multiplies
                 * (the widening's stores then hide under its FMAs: 1-2 % faster on one
                 * core, 1B shapes, than a separate pass); otherwise a pass first */
                int fuse = t != AK_F32 && i1 - i0 >= MR512;
                const uint16_t *s0 = (const uint16_t *)w + (p * K + k0) * R, *s1 = np == 2 ? s0 + K * R : s0;
                if (t == AK_F32) {
                    w0 = (const float *)w + (p * K + k0) * R;
                    w1 = np == 2 ? w0 + K * R : w0;
                } else {
                    if (!fuse) widen512(t, w, K, p, np, k0, kc, wb);
                    w0 = wb;
                    w1 = wb + (int64_t)kc * R;
                }
                __mmask16 m0 = rows_mask(N, p), m1 = np == 2 ? rows_mask(N, p + 1) : 0;
                const float *bp = bias ? bias + p * R : NULL;
                /* the next pair's slab, prefetched into L2 a share per micro-kernel, so that
                 * its widening (or first use) does not wait on memory */
                int64_t pn = p + 2, nn = p1 - pn < 2 ? p1 - pn : 2;
                const char *nx = nn > 0 ? (const char *)w + (pn * K + k0) * R * (int64_t)es : (const char *)w;
                int64_t nbytes = nn > 0 ? (int64_t)kc * R * (int64_t)es : 0, nstride = K * R * (int64_t)es;
                int calls = (i1 - i0 + MR512 - 1) / MR512, call = 0;
                int64_t share = (nn * nbytes / 64 + calls - 1) / calls;
                for (int ib = i0; ib < i1; ib += MR512, call++) {
                    int mr = i1 - ib < MR512 ? i1 - ib : MR512;
                    for (int64_t l = call * share; l < (call + 1) * share && l < nn * nbytes / 64; l++) {
                        int64_t off = l * 64;
                        _mm_prefetch(nx + (off >= nbytes ? nstride + off - nbytes : off), _MM_HINT_T1);
                    }
                    if (fuse && ib == i0)
                        mk512w(np, t, kc, s0, s1, wb, wb + (int64_t)kc * R, xp, y + (int64_t)ib * ldy + p * R, ldy,
                               m0, m1, bp, first);
                    else
                        mk512(np, mr, kc, w0, w1, xp + (int64_t)(ib - i0) * kc, y + (int64_t)ib * ldy + p * R, ldy,
                              m0, m1, bp, first);
                }
            }
        }
    }
}

#undef MRX
/* ---------------- AVX2 ---------------- */

/* 8 weights at element e of a panel array of type t. */
AVX2 static INL __m256 ldw256(ak_dtype t, const void *w, int64_t e) {
    if (t == AK_F32) return _mm256_loadu_ps((const float *)w + e);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + e));
    if (t == AK_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Lane masks for the valid rows of panel p: lo rows 0-7, hi rows 8-15. */
AVX2 static void masks256(int64_t N, int64_t p, __m256i *lo, __m256i *hi, int *full) {
    int64_t nv = N - p * R;
    *full = nv >= R;
    __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i c = _mm256_set1_epi32((int)(nv < 0 ? 0 : nv > R ? R : nv));
    *lo = _mm256_cmpgt_epi32(c, idx);
    *hi = _mm256_cmpgt_epi32(c, _mm256_add_epi32(idx, _mm256_set1_epi32(8)));
}

AVX2 static INL void gemv256_t(ak_dtype t, const void *w, int64_t N, int64_t K, int64_t p0, int64_t p1,
                               const float *x, float *y, const float *bias) {
    for (int64_t p = p0; p < p1; p++) {
        __m256i ml, mh;
        int full;
        masks256(N, p, &ml, &mh, &full);
        int64_t base = p * R * K;
        __m256 l0 = _mm256_setzero_ps(), h0 = l0, l1 = l0, h1 = l0, l2 = l0, h2 = l0, l3 = l0, h3 = l0;
        if (bias) { l0 = _mm256_maskload_ps(bias + p * R, ml); h0 = _mm256_maskload_ps(bias + p * R + 8, mh); }
        int64_t k = 0;
        for (; k + 4 <= K; k += 4) {
            int64_t e = base + k * R;
            __m256 x0 = _mm256_set1_ps(x[k]), x1 = _mm256_set1_ps(x[k + 1]);
            __m256 x2 = _mm256_set1_ps(x[k + 2]), x3 = _mm256_set1_ps(x[k + 3]);
            l0 = _mm256_fmadd_ps(ldw256(t, w, e), x0, l0);
            h0 = _mm256_fmadd_ps(ldw256(t, w, e + 8), x0, h0);
            l1 = _mm256_fmadd_ps(ldw256(t, w, e + 16), x1, l1);
            h1 = _mm256_fmadd_ps(ldw256(t, w, e + 24), x1, h1);
            l2 = _mm256_fmadd_ps(ldw256(t, w, e + 32), x2, l2);
            h2 = _mm256_fmadd_ps(ldw256(t, w, e + 40), x2, h2);
            l3 = _mm256_fmadd_ps(ldw256(t, w, e + 48), x3, l3);
            h3 = _mm256_fmadd_ps(ldw256(t, w, e + 56), x3, h3);
        }
        for (; k < K; k++) {
            __m256 x0 = _mm256_set1_ps(x[k]);
            l0 = _mm256_fmadd_ps(ldw256(t, w, base + k * R), x0, l0);
            h0 = _mm256_fmadd_ps(ldw256(t, w, base + k * R + 8), x0, h0);
        }
        __m256 lo = _mm256_add_ps(_mm256_add_ps(l0, l1), _mm256_add_ps(l2, l3));
        __m256 hi = _mm256_add_ps(_mm256_add_ps(h0, h1), _mm256_add_ps(h2, h3));
        if (full) { _mm256_storeu_ps(y + p * R, lo); _mm256_storeu_ps(y + p * R + 8, hi); }
        else { _mm256_maskstore_ps(y + p * R, ml, lo); _mm256_maskstore_ps(y + p * R + 8, mh, hi); }
    }
}

/* One panel (lo, hi: 2 ymm) x mr activation rows; as mk512_t. */
AVX2 static INL void mk256_t(const int mr, int kc, const float *w0, const float *xp, float *y, int64_t ldy,
                             __m256i ml, __m256i mh, int full, const float *bias, int first) {
    __m256 lo[MR256], hi[MR256];
    if (first) {
        __m256 bl = _mm256_setzero_ps(), bh = bl;
        if (bias) { bl = _mm256_maskload_ps(bias, ml); bh = _mm256_maskload_ps(bias + 8, mh); }
#pragma GCC unroll 6
        for (int i = 0; i < mr; i++) { lo[i] = bl; hi[i] = bh; }
    } else {
#pragma GCC unroll 6
        for (int i = 0; i < mr; i++) {
            lo[i] = _mm256_maskload_ps(y + i * ldy, ml);
            hi[i] = _mm256_maskload_ps(y + i * ldy + 8, mh);
        }
    }
    for (int k = 0; k < kc; k++) {
        __m256 vl = _mm256_loadu_ps(w0 + k * R), vh = _mm256_loadu_ps(w0 + k * R + 8);
        const float *xk = xp + k * mr;
#pragma GCC unroll 6
        for (int i = 0; i < mr; i++) {
            __m256 xb = _mm256_broadcast_ss(xk + i);
            lo[i] = _mm256_fmadd_ps(vl, xb, lo[i]);
            hi[i] = _mm256_fmadd_ps(vh, xb, hi[i]);
        }
    }
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) {
        if (full) { _mm256_storeu_ps(y + i * ldy, lo[i]); _mm256_storeu_ps(y + i * ldy + 8, hi[i]); }
        else { _mm256_maskstore_ps(y + i * ldy, ml, lo[i]); _mm256_maskstore_ps(y + i * ldy + 8, mh, hi[i]); }
    }
}

#define MK256_CASE(mr) case mr: mk256_t(mr, kc, w0, xp, y, ldy, ml, mh, full, bias, first); break;

AVX2 static void mk256(int mr, int kc, const float *w0, const float *xp, float *y, int64_t ldy,
                       __m256i ml, __m256i mh, int full, const float *bias, int first) {
    switch (mr) { MK256_CASE(1) MK256_CASE(2) MK256_CASE(3) MK256_CASE(4) MK256_CASE(5) MK256_CASE(6) default: break; }
}

AVX2 static void widen256(ak_dtype t, const void *w, int64_t K, int64_t p, int64_t k0, int kc, float *dst) {
    int64_t base = (p * K + k0) * R;
    if (t == AK_F16)
        for (int k = 0; k < 2 * kc; k++) _mm256_store_ps(dst + k * 8, ldw256(AK_F16, w, base + k * 8));
    else
        for (int k = 0; k < 2 * kc; k++) _mm256_store_ps(dst + k * 8, ldw256(AK_BF16, w, base + k * 8));
}

#define MRX MR256
AVX2 static void mm256(ak_dtype t, const void *w, int64_t N, int64_t K, int64_t p0, int64_t p1,
                       const float *x, int64_t ldx, int n, float *y, int64_t ldy, const float *bias, void *scratch) {
    int64_t kcmax = K < KC ? K : KC;
    int ncmax = n < NCMAX ? n : NCMAX;
    float *xp = scratch, *wb = (float *)((uint8_t *)scratch + ((size_t)(ncmax * kcmax) * 4 + 63) / 64 * 64);
    int nb = (n + NCMAX - 1) / NCMAX, bs = ((n + nb - 1) / nb + MRX - 1) / MRX * MRX;
    size_t es = esz(t);
    for (int i0 = 0; i0 < n; i0 += bs) {
        int i1 = i0 + bs < n ? i0 + bs : n;
        for (int64_t k0 = 0; k0 < K; k0 += KC) {
            int kc = (int)(K - k0 < KC ? K - k0 : KC), first = k0 == 0;
            pack_x(x, ldx, i0, i1, k0, kc, MR256, xp);
            for (int64_t p = p0; p < p1; p++) {
                const float *w0;
                if (t == AK_F32) w0 = (const float *)w + (p * K + k0) * R;
                else { widen256(t, w, K, p, k0, kc, wb); w0 = wb; }
                __m256i ml, mh;
                int full;
                masks256(N, p, &ml, &mh, &full);
                const float *bp = bias ? bias + p * R : NULL;
                /* the next panel's slab into L2, a share per micro-kernel (as mm512) */
                const char *nx = p + 1 < p1 ? (const char *)w + ((p + 1) * K + k0) * R * (int64_t)es : NULL;
                int64_t lines = nx ? (int64_t)kc * R * (int64_t)es / 64 : 0;
                int calls = (i1 - i0 + MR256 - 1) / MR256, call = 0;
                int64_t share = (lines + calls - 1) / calls;
                for (int ib = i0; ib < i1; ib += MR256, call++) {
                    int mr = i1 - ib < MR256 ? i1 - ib : MR256;
                    for (int64_t l = call * share; l < (call + 1) * share && l < lines; l++)
                        _mm_prefetch(nx + l * 64, _MM_HINT_T1);
                    mk256(mr, kc, w0, xp + (int64_t)(ib - i0) * kc, y + (int64_t)ib * ldy + p * R, ldy, ml, mh, full,
                          bp, first);
                }
            }
        }
    }
}
#undef MRX

AVX512 static void gemv512(const void *w, int64_t N, int64_t K, int64_t p0, int64_t p1, const float *x, float *y,
                           const float *bias) {
    gemv512_t(AK_F32, w, N, K, p0, p1, x, y, bias);
}
AVX2 static void gemv256(ak_dtype t, const void *w, int64_t N, int64_t K, int64_t p0, int64_t p1, const float *x,
                         float *y, const float *bias) {
    if (t == AK_F16) gemv256_t(AK_F16, w, N, K, p0, p1, x, y, bias);
    else if (t == AK_BF16) gemv256_t(AK_BF16, w, N, K, p0, p1, x, y, bias);
    else gemv256_t(AK_F32, w, N, K, p0, p1, x, y, bias);
}
#endif

void ak_panel_f_mm(ak_dtype t, const void *w, int64_t N, int64_t K, int64_t p0, int64_t p1,
                   const float *x, int64_t ldx, int n, float *y, int64_t ldy, const float *bias,
                   void *scratch, bool gemv) {
    if (!is_f(t) || n <= 0 || p0 >= p1) return;
    if (ak_cpu_simd < 0) ak_cpu_detect();
#if defined(__x86_64__)
    /* Decode of F16 / BF16 runs the AVX2 kernel at level 2 too: on Zen 4 the 512-bit
     * widening streamed slower (~60 vs ~73 GB/s from L3, one core), as dot_avx512.c found
     * for the row kernels. */
    if (gemv && ak_cpu_simd >= 1) {
        for (int i = 0; i < n; i++) {
            const float *xi = x + (int64_t)i * ldx;
            float *yi = y + (int64_t)i * ldy;
            if (ak_cpu_simd >= 2 && t == AK_F32) gemv512(w, N, K, p0, p1, xi, yi, bias);
            else gemv256(t, w, N, K, p0, p1, xi, yi, bias);
        }
        return;
    }
    if (ak_cpu_simd >= 2) { mm512(t, w, N, K, p0, p1, x, ldx, n, y, ldy, bias, scratch); return; }
    if (ak_cpu_simd >= 1) { mm256(t, w, N, K, p0, p1, x, ldx, n, y, ldy, bias, scratch); return; }
#endif
    (void)gemv;
    (void)scratch;
    mm_ref(t, w, N, K, p0, p1, x, ldx, n, y, ldy, bias);
}
