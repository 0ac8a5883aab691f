/* Vector e^x and tanh for the activations, softcaps and attention.
 * e^x on AVX-512 for x <= 0: Cephes' expf polynomial (~1 ulp next to libm); lanes below
 * -87.3 (so -inf too) give 0, without denormals. For files that test ak_cpu_simd >= 2
 * before calling it from a function compiled for AVX-512 F (or more). The 256-bit
 * versions below are the same on AVX2 + FMA (ak_cpu_simd >= 1). */
#ifndef AK_CPU_VECMATH_H
#define AK_CPU_VECMATH_H
#if defined(__x86_64__)
#include <immintrin.h>

/* Cephes' expf on [-ln2/2, ln2/2] (highest power first; then 1/2 x^2 + x + 1) after a
 * Cody-Waite reduction with ln 2 = C1 + C2, and its tanhf below 0.625 (x + x^3 P(x^2)). */
#define AK_EXP_LO (-87.33654f)
#define AK_LOG2E 1.44269504088896341f
#define AK_LN2_C1 0.693359375f
#define AK_LN2_C2 (-2.12194440e-4f)
static const float ak_exp_poly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                     4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
static const float ak_tanh_poly[5] = {-5.70498872745e-3f, 2.06390887954e-2f, -5.37397155531e-2f,
                                      1.33314422036e-1f, -3.33332819422e-1f};
/* The normal CDF Phi(x) = erfc(-x / sqrt 2) / 2 (x Phi(x) is the erf GELU), with z = x / sqrt 2:
 * below |z| = 0.5, 1/2 + erf(z) / 2 with erf(z) = z P(z^2); above, erfc(|z|) = e^-z^2 Q(s),
 * s = 1 / (1 + 0.6 |z|), and Phi = erfc / 2 or 1 - erfc / 2, so that neither side cancels.
 * e^-z^2 = e^-(xh^2 / 2) e^-(xl (x + xh) / 2) with xh = x cut to 12 bits (xh^2 exact): one
 * exp of the rounded x^2 would be off by up to |z^2| ulp. P and Q are least-squares fits
 * (relative error 4e-8 in double); a float GELU is within 4e-7 of double precision. */
#define AK_ERFC_P 0.6f
static const float ak_erf_poly[6] = {-7.727349875e-04f, 5.202302244e-03f, -2.686351910e-02f,
                                     1.128377691e-01f, -3.761263788e-01f, 1.128379226e+00f};
static const float ak_erfc_poly[10] = {-3.956760839e-02f, 3.850163147e-02f, 2.425468117e-01f, -5.408393741e-01f,
                                       2.612147033e-01f, 6.622896343e-02f, 2.971848547e-01f, 3.358804286e-01f,
                                       3.387119472e-01f, -6.391318948e-06f};

__attribute__((target("avx512f"), always_inline)) static inline __m512 ak_exp512(__m512 x) {
    const __m512 lo = _mm512_set1_ps(AK_EXP_LO);
    __mmask16 live = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
    x = _mm512_max_ps(x, lo);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(AK_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm512_fnmadd_ps(n, _mm512_set1_ps(AK_LN2_C1), x);
    x = _mm512_fnmadd_ps(n, _mm512_set1_ps(AK_LN2_C2), x);
    __m512 y = _mm512_set1_ps(ak_exp_poly[0]);
    for (int i = 1; i < 6; i++) y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(ak_exp_poly[i]));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(x, x), _mm512_add_ps(x, _mm512_set1_ps(1.f)));
    return _mm512_maskz_mov_ps(live, _mm512_scalef_ps(y, n));
}

/* Lanes of n below: all of the first n of 16 (masked loads and stores). */
__attribute__((target("avx512f"), always_inline)) static inline __mmask16 ak_lanes512(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1);
}

/* tanh on AVX-512 within a few ulp everywhere: Cephes' odd polynomial below |x| = 0.625,
 * (1 - t) / (1 + t) with t = e^-2|x| above it (no cancellation there); NaN stays NaN. */
__attribute__((target("avx512f"), always_inline)) static inline __m512 ak_tanh512(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.f);
    __m512 a = _mm512_abs_ps(x), z = _mm512_mul_ps(x, x);
    __m512 p = _mm512_set1_ps(ak_tanh_poly[0]);
    for (int i = 1; i < 5; i++) p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(ak_tanh_poly[i]));
    __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, z), x, x);
    __m512 t = ak_exp512(_mm512_mul_ps(a, _mm512_set1_ps(-2.f)));
    __m512 big = _mm512_div_ps(_mm512_sub_ps(one, t), _mm512_add_ps(one, t));
    big = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(big),
                                              _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u))));
    __m512 r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, _mm512_set1_ps(0.625f), _CMP_LT_OQ), big, small);
    return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

__attribute__((target("avx512f"), always_inline)) static inline __m512 ak_phi512(__m512 x) {
    const __m512 half = _mm512_set1_ps(0.5f);
    __m512 z = _mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f)), a = _mm512_abs_ps(z), z2 = _mm512_mul_ps(z, z);
    __m512 p = _mm512_set1_ps(ak_erf_poly[0]);
    for (int i = 1; i < 6; i++) p = _mm512_fmadd_ps(p, z2, _mm512_set1_ps(ak_erf_poly[i]));
    __m512 small = _mm512_fmadd_ps(half, _mm512_mul_ps(z, p), half);
    __m512 xh = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0xFFFFF000u)));
    __m512 xl = _mm512_sub_ps(x, xh), nh = _mm512_set1_ps(-0.5f);
    __m512 e = _mm512_mul_ps(ak_exp512(_mm512_mul_ps(_mm512_mul_ps(xh, xh), nh)),
                             ak_exp512(_mm512_mul_ps(_mm512_mul_ps(xl, _mm512_add_ps(x, xh)), nh)));
    __m512 sv = _mm512_div_ps(_mm512_set1_ps(1.f), _mm512_fmadd_ps(_mm512_set1_ps(AK_ERFC_P), a, _mm512_set1_ps(1.f)));
    __m512 q = _mm512_set1_ps(ak_erfc_poly[0]);
    for (int i = 1; i < 10; i++) q = _mm512_fmadd_ps(q, sv, _mm512_set1_ps(ak_erfc_poly[i]));
    __m512 hc = _mm512_mul_ps(half, _mm512_mul_ps(e, q));   /* erfc(|z|) / 2 */
    __m512 big = _mm512_mask_sub_ps(hc, _mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_GE_OQ), _mm512_set1_ps(1.f), hc);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, half, _CMP_LT_OQ), big, small);
}

/* Lanes of n below: all of the first n of 8 (maskload / maskstore). */
__attribute__((target("avx2"), always_inline)) static inline __m256i ak_lanes256(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n > 8 ? 8 : (int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

__attribute__((target("avx2,fma"), always_inline)) static inline __m256 ak_exp256(__m256 x) {
    const __m256 lo = _mm256_set1_ps(AK_EXP_LO);
    __m256 live = _mm256_cmp_ps(x, lo, _CMP_GE_OQ);
    x = _mm256_max_ps(x, lo);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(AK_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm256_fnmadd_ps(n, _mm256_set1_ps(AK_LN2_C1), x);
    x = _mm256_fnmadd_ps(n, _mm256_set1_ps(AK_LN2_C2), x);
    __m256 y = _mm256_set1_ps(ak_exp_poly[0]);
    for (int i = 1; i < 6; i++) y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(ak_exp_poly[i]));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.f)));
    /* 2^n in the exponent bits: n >= -126 after the clamp, a normal number */
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(y, _mm256_castsi256_ps(e)), live);
}

__attribute__((target("avx2,fma"), always_inline)) static inline __m256 ak_tanh256(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.f), sign = _mm256_set1_ps(-0.f);
    __m256 a = _mm256_andnot_ps(sign, x), z = _mm256_mul_ps(x, x);
    __m256 p = _mm256_set1_ps(ak_tanh_poly[0]);
    for (int i = 1; i < 5; i++) p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(ak_tanh_poly[i]));
    __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
    __m256 t = ak_exp256(_mm256_mul_ps(a, _mm256_set1_ps(-2.f)));
    __m256 big = _mm256_or_ps(_mm256_div_ps(_mm256_sub_ps(one, t), _mm256_add_ps(one, t)), _mm256_and_ps(x, sign));
    __m256 r = _mm256_blendv_ps(big, small, _mm256_cmp_ps(a, _mm256_set1_ps(0.625f), _CMP_LT_OQ));
    return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

__attribute__((target("avx2,fma"), always_inline)) static inline __m256 ak_phi256(__m256 x) {
    const __m256 half = _mm256_set1_ps(0.5f);
    __m256 z = _mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f)), a = _mm256_andnot_ps(_mm256_set1_ps(-0.f), z);
    __m256 z2 = _mm256_mul_ps(z, z), p = _mm256_set1_ps(ak_erf_poly[0]);
    for (int i = 1; i < 6; i++) p = _mm256_fmadd_ps(p, z2, _mm256_set1_ps(ak_erf_poly[i]));
    __m256 small = _mm256_fmadd_ps(half, _mm256_mul_ps(z, p), half);
    __m256 xh = _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32((int)0xFFFFF000u)));
    __m256 xl = _mm256_sub_ps(x, xh), nh = _mm256_set1_ps(-0.5f);
    __m256 e = _mm256_mul_ps(ak_exp256(_mm256_mul_ps(_mm256_mul_ps(xh, xh), nh)),
                             ak_exp256(_mm256_mul_ps(_mm256_mul_ps(xl, _mm256_add_ps(x, xh)), nh)));
    __m256 sv = _mm256_div_ps(_mm256_set1_ps(1.f), _mm256_fmadd_ps(_mm256_set1_ps(AK_ERFC_P), a, _mm256_set1_ps(1.f)));
    __m256 q = _mm256_set1_ps(ak_erfc_poly[0]);
    for (int i = 1; i < 10; i++) q = _mm256_fmadd_ps(q, sv, _mm256_set1_ps(ak_erfc_poly[i]));
    __m256 hc = _mm256_mul_ps(half, _mm256_mul_ps(e, q));
    __m256 big = _mm256_blendv_ps(hc, _mm256_sub_ps(_mm256_set1_ps(1.f), hc), _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_GE_OQ));
    return _mm256_blendv_ps(big, small, _mm256_cmp_ps(a, half, _CMP_LT_OQ));
}
#endif
#endif
