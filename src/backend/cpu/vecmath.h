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
#endif
#endif
