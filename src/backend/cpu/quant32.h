/* One block of 32 activations to int8 codes, the quantization every int8 kernel shares
 * (cpu.h: d = max|x|/127, q = x * (1/d) rounded to nearest even): the codes go to q,
 * the sums of codes 0-15 and 16-31 to s, and d is returned. The AVX2 version matches the
 * scalar one bit for bit and also hands back the codes as 32-bit lanes (c[0] holds codes
 * 0-7, ..., c[3] codes 24-31) for quantizers that need other sums. */
#ifndef AK_CPU_QUANT32_H
#define AK_CPU_QUANT32_H
#include <math.h>
#include <stdint.h>

static inline float ak_q32_ref(const float *x, int8_t *q, int s[2]) {
    float amax = 0;
    for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[i]));
    float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    s[0] = s[1] = 0;
    for (int i = 0; i < 32; i++) {
        int v = (int)nearbyintf(x[i] * id);
        q[i] = (int8_t)v;
        s[i / 16] += v;
    }
    return d;
}

#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx2,fma,f16c"))) static inline float ak_q32_avx2(const float *x, int8_t *q, int s[2], __m256i c[4]) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                             _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    float amax = _mm_cvtss_f32(h), d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    __m256 vid = _mm256_set1_ps(id);
    c[0] = _mm256_cvtps_epi32(_mm256_mul_ps(v0, vid));
    c[1] = _mm256_cvtps_epi32(_mm256_mul_ps(v1, vid));
    c[2] = _mm256_cvtps_epi32(_mm256_mul_ps(v2, vid));
    c[3] = _mm256_cvtps_epi32(_mm256_mul_ps(v3, vid));
    __m256i t = _mm256_hadd_epi32(_mm256_add_epi32(c[0], c[1]), _mm256_add_epi32(c[2], c[3]));
    t = _mm256_hadd_epi32(t, t);   /* per 128-bit lane: codes 0-15, codes 16-31 */
    __m128i sm = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(c[0], c[1]), _mm256_packs_epi32(c[2], c[3]));
    _mm256_storeu_si256((__m256i *)q, _mm256_permutevar8x32_epi32(p, perm));
    s[0] = _mm_cvtsi128_si32(sm);
    s[1] = _mm_extract_epi32(sm, 1);
    return d;
}
#endif
#endif
