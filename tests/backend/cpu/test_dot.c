/* Every dot kernel (each dtype at each SIMD level this CPU supports) against the
 * scalar reference ak_dot_ref, on random blocks and activations and odd lengths.
 * Tolerance: |fast - ref| <= 1e-5 * sum|w_i x_i| + 1e-6, i.e. a few float roundings
 * per term; a wrong bit in any decoded value moves the sum by far more. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cpu/cpu.h"
#include "test_util.h"

#define REL_TOL 1e-5
#define ABS_TOL 1e-6

/* Byte offsets of the f16 scale fields in one block, -1 terminated. */
static const int f16_fields[AK_DTYPE_COUNT][3] = {
    [AK_Q4_0] = {0, -1}, [AK_Q4_1] = {0, 2, -1}, [AK_Q5_0] = {0, -1}, [AK_Q5_1] = {0, 2, -1},
    [AK_Q8_0] = {0, -1}, [AK_Q2_K] = {80, 82, -1}, [AK_Q3_K] = {108, -1}, [AK_Q4_K] = {0, 2, -1},
    [AK_Q5_K] = {0, 2, -1}, [AK_Q6_K] = {208, -1}, [AK_MLX_Q2] = {0, 2, -1}, [AK_MLX_Q3] = {0, 2, -1},
    [AK_MLX_Q6] = {0, 2, -1}, [AK_MLX_Q8] = {0, 2, -1},
};

static void put16(uint8_t *p, uint16_t h) { p[0] = (uint8_t)h; p[1] = (uint8_t)(h >> 8); }

/* Random valid row: random bytes, every scale field a finite f16; float types random. */
static void rand_row(ak_dtype t, int64_t K, uint8_t *w, uint64_t *rng) {
    if (t == AK_F32) { for (int64_t i = 0; i < K; i++) ((float *)w)[i] = ak_rand_f(rng); return; }
    if (t == AK_F16) { for (int64_t i = 0; i < K; i++) put16(w + 2 * i, ak_f32_to_f16(ak_rand_f(rng))); return; }
    if (t == AK_BF16) { for (int64_t i = 0; i < K; i++) put16(w + 2 * i, ak_f32_to_bf16(ak_rand_f(rng))); return; }
    const ak_dtype_traits *tr = &ak_dtype_info[t];
    size_t n = ak_dtype_row_bytes(t, K);
    for (size_t i = 0; i < n; i++) w[i] = (uint8_t)ak_rand_u32(rng);
    for (int64_t b = 0; b < K / tr->block; b++)
        for (int f = 0; f < 3 && f16_fields[t][f] >= 0; f++)
            put16(w + b * tr->block_bytes + f16_fields[t][f], ak_f32_to_f16(0.05f * ak_rand_f(rng)));
}

static const char *level_name[3] = {"scalar", "avx2", "avx512"};

static void test_type(ak_dtype t, int max_level, uint64_t *rng) {
    static const int64_t lens[] = {1, 7, 13, 32, 64, 96, 160, 224, 256, 512, 768, 1280, 1792, 4096 + 256, 4096 + 256 + 32 * 3, 4096 + 256 + 1};
    int blk = ak_dtype_info[t].block;
    double worst[3] = {0, 0, 0}; /* largest |fast - ref| / sum|w x| per level */
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        int64_t K = lens[li];
        if (K % blk) continue;
        uint8_t *w = malloc(ak_dtype_row_bytes(t, K));
        float *x = malloc((size_t)K * 4), *deq = malloc((size_t)K * 4), *scr = malloc((size_t)K * 4);
        for (int trial = 0; trial < 4; trial++) {
            rand_row(t, K, w, rng);
            float bias = trial & 1 ? 0.5f : 0.f; /* a non-zero mean exercises the sum(x) terms */
            for (int64_t i = 0; i < K; i++) x[i] = ak_rand_f(rng) + bias;
            float ref = ak_dot_ref(t, K, w, x, scr);
            ak_dtype_info[t].dequant(w, deq, K);
            double mag = 0;
            for (int64_t i = 0; i < K; i++) mag += fabs((double)deq[i] * x[i]);
            double tol = REL_TOL * mag + ABS_TOL;
            for (int lv = 0; lv <= max_level; lv++) {
                ak_cpu_simd = lv;
                float got = ak_cpu_dot(t)(K, w, x, scr);
                CHECK(fabs((double)got - ref) <= tol, "%s %s K=%lld trial %d: got %.9g ref %.9g (tol %.3g)",
                      ak_dtype_info[t].name, level_name[lv], (long long)K, trial, got, ref, tol);
                if (mag > 0 && fabs((double)got - ref) / mag > worst[lv]) worst[lv] = fabs((double)got - ref) / mag;
            }
        }
        free(w); free(x); free(deq); free(scr);
    }
    printf("%-6s worst |fast-ref|/sum|wx|:", ak_dtype_info[t].name);
    for (int lv = 0; lv <= max_level; lv++) printf("  %s %.2g", level_name[lv], worst[lv]);
    printf("\n");
}

/* ak_dot_f32 (used by the GEMM path) at every level and odd lengths. */
static void test_f32(int max_level, uint64_t *rng) {
    for (int64_t K = 1; K < 300; K += 13) {
        float *a = malloc((size_t)K * 4), *b = malloc((size_t)K * 4);
        double mag = 0, exact = 0;
        for (int64_t i = 0; i < K; i++) {
            a[i] = ak_rand_f(rng); b[i] = ak_rand_f(rng);
            mag += fabs((double)a[i] * b[i]); exact += (double)a[i] * b[i];
        }
        for (int lv = 0; lv <= max_level; lv++) {
            ak_cpu_simd = lv;
            float got = ak_dot_f32(K, a, b);
            CHECK(fabs(got - exact) <= REL_TOL * mag + ABS_TOL, "ak_dot_f32 %s K=%lld: %.9g vs %.9g", level_name[lv], (long long)K, got, exact);
        }
        free(a); free(b);
    }
}

int main(void) {
    ak_cpu_detect();
    int detected = ak_cpu_simd, max_level = detected;
    printf("SIMD level %d (%s)\n", detected, level_name[detected]);
    uint64_t rng = 12345;
    static const ak_dtype types[] = {AK_F32, AK_F16, AK_BF16, AK_Q4_0, AK_Q4_1, AK_Q5_0, AK_Q5_1, AK_Q8_0,
                                     AK_Q2_K, AK_Q3_K, AK_Q4_K, AK_Q5_K, AK_Q6_K,
                                     AK_MLX_Q2, AK_MLX_Q3, AK_MLX_Q6, AK_MLX_Q8};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) test_type(types[i], max_level, &rng);
    test_f32(max_level, &rng);
    ak_cpu_simd = detected;
    return ak_test_done();
}
