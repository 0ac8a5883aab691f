/* Dot products of a weight row (any dtype) with float activations: CPU feature
 * detection, the scalar reference, and the choice between it and the AVX2 / AVX-512
 * kernels (dot_avx2.c, dot_avx512.c). Scalar: dequantize the row, then a float dot. */
#include "backend/cpu/cpu.h"
#include <stdlib.h>
#include <string.h>
#include "backend/cpu/dot_simd.h"

int ak_cpu_simd = -1;
int ak_cpu_vnni = 0;
int ak_cpu_act_f32 = 0;

static bool env_on(const char *name) {
    const char *e = getenv(name);
    return e && *e && strcmp(e, "0") != 0;
}

void ak_cpu_detect(void) {
    int level = 0, vnni = 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) level = 1;
    if (level && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) level = 2;
    if (level == 2 && __builtin_cpu_supports("avx512vnni")) vnni = 1;
    else if (level && __builtin_cpu_supports("avxvnni")) vnni = 2;
#endif
    if (env_on("AKUNU_SCALAR")) level = 0;
    if (!level || env_on("AKUNU_NO_VNNI")) vnni = 0;
    ak_cpu_simd = level;
    ak_cpu_vnni = vnni;
    ak_cpu_act_f32 = env_on("AKUNU_ACT_F32");
}

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

float ak_dot_f32(int64_t K, const float *a, const float *b) {
#if defined(__x86_64__)
    if (ak_cpu_simd >= 2) return ak_dot_f32_avx512(K, a, b);
    if (ak_cpu_simd >= 1) return ak_dot_f32_avx2(K, a, b);
#endif
    return dot_f32_ref(K, a, b);
}

static float dot_generic(ak_dtype t, int64_t K, const void *w, const float *x, float *scratch) {
    ak_dtype_info[t].dequant(w, scratch, K);
    return ak_dot_f32(K, scratch, x);
}

static float dot_f32_w_ref(int64_t K, const void *w, const float *x, float *scratch) { (void)scratch; return dot_f32_ref(K, w, x); }

#define GENERIC(T) static float dot_gen_##T(int64_t K, const void *w, const float *x, float *s) { return dot_generic(T, K, w, x, s); }
GENERIC(AK_F16) GENERIC(AK_BF16) GENERIC(AK_Q4_0) GENERIC(AK_Q4_1) GENERIC(AK_Q5_0) GENERIC(AK_Q5_1) GENERIC(AK_Q8_0)
GENERIC(AK_Q2_K) GENERIC(AK_Q3_K) GENERIC(AK_Q4_K) GENERIC(AK_Q5_K) GENERIC(AK_Q6_K)
GENERIC(AK_MLX_Q2) GENERIC(AK_MLX_Q3) GENERIC(AK_MLX_Q4) GENERIC(AK_MLX_Q6) GENERIC(AK_MLX_Q8)

static const ak_dot_fn generic[AK_DTYPE_COUNT] = {
    [AK_F32] = dot_f32_w_ref, [AK_F16] = dot_gen_AK_F16, [AK_BF16] = dot_gen_AK_BF16, [AK_Q4_0] = dot_gen_AK_Q4_0,
    [AK_Q4_1] = dot_gen_AK_Q4_1, [AK_Q5_0] = dot_gen_AK_Q5_0, [AK_Q5_1] = dot_gen_AK_Q5_1, [AK_Q8_0] = dot_gen_AK_Q8_0,
    [AK_Q2_K] = dot_gen_AK_Q2_K, [AK_Q3_K] = dot_gen_AK_Q3_K, [AK_Q4_K] = dot_gen_AK_Q4_K, [AK_Q5_K] = dot_gen_AK_Q5_K,
    [AK_Q6_K] = dot_gen_AK_Q6_K, [AK_MLX_Q2] = dot_gen_AK_MLX_Q2, [AK_MLX_Q3] = dot_gen_AK_MLX_Q3,
    [AK_MLX_Q4] = dot_gen_AK_MLX_Q4, [AK_MLX_Q6] = dot_gen_AK_MLX_Q6, [AK_MLX_Q8] = dot_gen_AK_MLX_Q8,
};

/* The widest kernel the level allows: AVX-512 where it has one, else AVX2, else the
 * dequantize-then-dot fallback. */
ak_dot_fn ak_cpu_dot(ak_dtype t) {
    if (ak_cpu_simd < 0) ak_cpu_detect();
#if defined(__x86_64__)
    if (ak_cpu_simd >= 2 && ak_dot_avx512[t]) return ak_dot_avx512[t];
    if (ak_cpu_simd >= 1 && ak_dot_avx2[t]) return ak_dot_avx2[t];
#endif
    return generic[t];
}
