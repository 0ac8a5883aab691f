/* Dot products of a weight row (any dtype) with float activations: CPU feature
 * detection, the scalar reference, and the choice between it and the AVX2 / AVX-512
 * kernels (dot_avx2.c, dot_avx512.c). Scalar: dequantize the row, then a float dot. */
#include "backend/cpu/cpu.h"
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include "backend/cpu/dot_simd.h"

int ak_cpu_simd = -1;
int ak_cpu_vnni = 0;
int ak_cpu_act_f32 = 0;

static bool lim_scalar, lim_no_vnni, lim_act_f32;

void ak_cpu_set_limits(bool scalar, bool no_vnni, bool act_f32) {
    lim_scalar = scalar;
    lim_no_vnni = no_vnni;
    lim_act_f32 = act_f32;
    ak_cpu_detect();
}

#if defined(__x86_64__)
/* CPUID and XGETBV directly: clang 14's __builtin_cpu_supports knows neither "f16c" nor
 * "avxvnni". A feature counts only when the OS saves the registers it uses (XCR0). */
static void cpuid(unsigned leaf, unsigned sub, unsigned r[4]) { __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]); }

static uint64_t xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

static void detect_x86(int *level, int *vnni) {
    unsigned r1[4], r7[4] = {0}, r71[4] = {0}, max[4];
    cpuid(0, 0, max);
    cpuid(1, 0, r1);
    if (!(r1[2] >> 27 & 1)) return;                      /* no OSXSAVE: no XGETBV, no AVX state */
    uint64_t x = xcr0();
    bool ymm = (x & 6) == 6, zmm = ymm && (x & 0xE0) == 0xE0;
    if (max[0] >= 7) { cpuid(7, 0, r7); cpuid(7, 1, r71); }
    bool fma = r1[2] >> 12 & 1, avx = r1[2] >> 28 & 1, f16c = r1[2] >> 29 & 1, avx2 = r7[1] >> 5 & 1;
    bool f = r7[1] >> 16 & 1, bw = r7[1] >> 30 & 1, vl = r7[1] >> 31 & 1;
    if (ymm && avx && avx2 && fma && f16c) *level = 1;
    if (*level && zmm && f && bw && vl) *level = 2;
    if (*level == 2 && (r7[2] >> 11 & 1)) *vnni = 1;      /* AVX512_VNNI */
    else if (*level && (r71[0] >> 4 & 1)) *vnni = 2;      /* AVX-VNNI */
}
#endif

void ak_cpu_detect(void) {
    int level = 0, vnni = 0;
#if defined(__x86_64__)
    detect_x86(&level, &vnni);
#endif
    if (lim_scalar) level = 0;
    if (!level || lim_no_vnni) vnni = 0;
    ak_cpu_simd = level;
    ak_cpu_vnni = vnni;
    ak_cpu_act_f32 = lim_act_f32;
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
GENERIC(AK_MLX_Q2) GENERIC(AK_MLX_Q3) GENERIC(AK_MLX_Q6) GENERIC(AK_MLX_Q8)

static const ak_dot_fn generic[AK_DTYPE_COUNT] = {
    [AK_F32] = dot_f32_w_ref, [AK_F16] = dot_gen_AK_F16, [AK_BF16] = dot_gen_AK_BF16, [AK_Q4_0] = dot_gen_AK_Q4_0,
    [AK_Q4_1] = dot_gen_AK_Q4_1, [AK_Q5_0] = dot_gen_AK_Q5_0, [AK_Q5_1] = dot_gen_AK_Q5_1, [AK_Q8_0] = dot_gen_AK_Q8_0,
    [AK_Q2_K] = dot_gen_AK_Q2_K, [AK_Q3_K] = dot_gen_AK_Q3_K, [AK_Q4_K] = dot_gen_AK_Q4_K, [AK_Q5_K] = dot_gen_AK_Q5_K,
    [AK_Q6_K] = dot_gen_AK_Q6_K, [AK_MLX_Q2] = dot_gen_AK_MLX_Q2, [AK_MLX_Q3] = dot_gen_AK_MLX_Q3,
    [AK_MLX_Q6] = dot_gen_AK_MLX_Q6, [AK_MLX_Q8] = dot_gen_AK_MLX_Q8,
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
