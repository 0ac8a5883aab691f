/* Dot products of a weight row (any dtype) with float activations: CPU feature
 * detection, the scalar reference, and the choice between it and the AVX2 / AVX-512
 * kernels (dot_avx2.c, dot_avx512.c). Scalar: dequantize the row, then a float dot. */
#include "backend/cpu/cpu.h"
#include <stdlib.h>
#include <string.h>
#include "backend/cpu/dot_simd.h"

int ak_cpu_simd = -1;

void ak_cpu_detect(void) {
    int level = 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) level = 1;
    if (level && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) level = 2;
#endif
    const char *e = getenv("AKUNU_SCALAR");
    if (e && *e && strcmp(e, "0") != 0) level = 0;
    ak_cpu_simd = level;
}

float ak_dot_f32(int64_t K, const float *a, const float *b);

static float dot_f32_ref(int64_t K, const float *a, const float *b) {
    float s = 0;
    for (int64_t i = 0; i < K; i++) s += a[i] * b[i];
    return s;
}

/* Reference: dequantize then multiply, in the order a reader of the math expects. */
float ak_dot_ref(ak_dtype t, int64_t K, const void *w, const float *x, float *scratch) {
    ak_dtype_info[t].dequant(w, scratch, K);
    return dot_f32_ref(K, scratch, x);
}

static float dot_generic(ak_dtype t, int64_t K, const void *w, const float *x, float *scratch) {
    ak_dtype_info[t].dequant(w, scratch, K);
    return ak_dot_f32(K, scratch, x);
}

float ak_dot_f32(int64_t K, const float *a, const float *b);

static float dot_f32_ref(int64_t K, const float *a, const float *b) {
    float s = 0;
    for (int64_t i = 0; i < K; i++) s += a[i] * b[i];
    return s;
}

/* Reference: dequantize then multiply, in the order a reader of the math expects. */
float ak_dot_ref(ak_dtype t, int64_t K, const void *w, const float *x, float *scratch) {
    ak_dtype_info[t].dequant(w, scratch, K);
    return dot_f32_ref(K, scratch, x);
}

static float dot_generic(ak_dtype t, int64_t K, const void *w, const float *x, float *scratch) {
    ak_dtype_info[t].dequant(w, scratch, K);
    return ak_dot_f32(K, scratch, x);
}

#if defined(__x86_64__)
#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

AVX2 static float dot_f32_avx2(int64_t K, const float *a, const float *b) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= K; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= K; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; i < K; i++) s += a[i] * b[i];
    return s;
}

AVX2 static float dot_f16_avx2(int64_t K, const void *w, const float *x, float *scratch) {
    (void)scratch;
    const uint16_t *h = w;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= K; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))), _mm256_loadu_ps(x + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i + 8))), _mm256_loadu_ps(x + i + 8), s1);
    }
    float s = hsum256(_mm256_add_ps(s0, s1));
    for (; i < K; i++) s += ak_f16_to_f32(h[i]) * x[i];
    return s;
}

AVX2 static float dot_bf16_avx2(int64_t K, const void *w, const float *x, float *scratch) {
    (void)scratch;
    const uint16_t *h = w;
    __m256 s0 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= K; i += 8) {
        __m256i v = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(h + i))), 16);
        s0 = _mm256_fmadd_ps(_mm256_castsi256_ps(v), _mm256_loadu_ps(x + i), s0);
    }
    float s = hsum256(s0);
    for (; i < K; i++) s += ak_bf16_to_f32(h[i]) * x[i];
    return s;
}

AVX2 static float dot_q8_0_avx2(int64_t K, const void *w, const float *x, float *scratch) {
    (void)scratch;
    const uint8_t *p = w;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < K / 32; b++, p += 34, x += 32) {
        uint16_t hd;
        memcpy(&hd, p, 2);
        __m256 d = _mm256_set1_ps(ak_f16_to_f32(hd));
        __m256 s = _mm256_setzero_ps();
        for (int j = 0; j < 32; j += 8) {
            __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p + 2 + j))));
            s = _mm256_fmadd_ps(q, _mm256_loadu_ps(x + j), s);
        }
        acc = _mm256_fmadd_ps(d, s, acc);
    }
    return hsum256(acc);
}
#endif

float ak_dot_f32(int64_t K, const float *a, const float *b) {
#if defined(__x86_64__)
    if (ak_cpu_simd >= 2) return ak_dot_f32_avx512(K, a, b);
    if (ak_cpu_simd >= 1) return ak_dot_f32_avx2(K, a, b);
#endif
    return dot_f32_ref(K, a, b);
}

static float dot_f32_w_ref(int64_t K, const void *w, const float *x, float *scratch) { (void)scratch; return dot_f32_ref(K, w, x); }

#define GENERIC(T) static float dot_gen_##T(int64_t K, const void *w, const float *x, float *s) { return dot_generic(T, K, w, x, s); }
GENERIC(AK_F16) GENERIC(AK_BF16) GENERIC(AK_Q4_0) GENERIC(AK_Q4_1) GENERIC(AK_Q5_0) GENERIC(AK_Q5_1) GENERIC(AK_Q8_0)
GENERIC(AK_Q2_K) GENERIC(AK_Q3_K) GENERIC(AK_Q4_K) GENERIC(AK_Q5_K) GENERIC(AK_Q6_K)

static const ak_dot_fn generic[AK_DTYPE_COUNT] = {
    [AK_F32] = dot_f32_w_ref, [AK_F16] = dot_gen_AK_F16, [AK_BF16] = dot_gen_AK_BF16, [AK_Q4_0] = dot_gen_AK_Q4_0,
    [AK_Q4_1] = dot_gen_AK_Q4_1, [AK_Q5_0] = dot_gen_AK_Q5_0, [AK_Q5_1] = dot_gen_AK_Q5_1, [AK_Q8_0] = dot_gen_AK_Q8_0,
    [AK_Q2_K] = dot_gen_AK_Q2_K, [AK_Q3_K] = dot_gen_AK_Q3_K, [AK_Q4_K] = dot_gen_AK_Q4_K, [AK_Q5_K] = dot_gen_AK_Q5_K,
    [AK_Q6_K] = dot_gen_AK_Q6_K,
};

/* The widest kernel the level allows: AVX-512 where it has one, else AVX2, else the
 * dequantize-then-dot fallback (also the only path for types without a dequantizer). */
ak_dot_fn ak_cpu_dot(ak_dtype t) {
    if (ak_cpu_simd < 0) ak_cpu_detect();
    if ((unsigned)t >= AK_DTYPE_COUNT) return NULL;
#if defined(__x86_64__)
    if (ak_cpu_simd >= 2 && ak_dot_avx512[t]) return ak_dot_avx512[t];
    if (ak_cpu_simd >= 1 && ak_dot_avx2[t]) return ak_dot_avx2[t];
#endif
    return generic[t];
}
