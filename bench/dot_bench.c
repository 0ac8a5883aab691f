/* Single-thread GEMV throughput of every dot kernel: a 4096x4096 matrix of each dtype
 * (random valid blocks) times a random x, at each SIMD level this CPU has. Prints GB/s
 * of weight bytes streamed. Not a test. Build by hand:
 *   gcc -O2 -Isrc -Iinclude bench/dot_bench.c build/libakunu.a -lm -lpthread -o dot_bench */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "backend/cpu/cpu.h"
#include "bench_util.h"

#define N 4096
#define K 4096

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (uint32_t)rng; }
static float rndf(void) { return (float)rnd() / 4294967296.0f - 0.5f; }

/* Offsets of the f16 scales in a block (-1 ends), so random bytes make finite values. */
static const int scales[AK_DTYPE_COUNT][3] = {
    [AK_Q4_0] = {0, -1}, [AK_Q4_1] = {0, 2, -1}, [AK_Q5_0] = {0, -1}, [AK_Q5_1] = {0, 2, -1},
    [AK_Q8_0] = {0, -1}, [AK_Q2_K] = {80, 82, -1}, [AK_Q3_K] = {108, -1}, [AK_Q4_K] = {0, 2, -1},
    [AK_Q5_K] = {0, 2, -1}, [AK_Q6_K] = {208, -1},
};

static void fill(ak_dtype t, uint8_t *w, size_t bytes) {
    const ak_dtype_traits *tr = &ak_dtype_info[t];
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)rnd();
    if (t == AK_F32) for (size_t i = 0; i < bytes / 4; i++) ((float *)w)[i] = rndf();
    else if (t == AK_F16 || t == AK_BF16)
        for (size_t i = 0; i < bytes / 2; i++) ((uint16_t *)w)[i] = t == AK_F16 ? ak_f32_to_f16(rndf()) : ak_f32_to_bf16(rndf());
    else
        for (size_t b = 0; b < bytes / (size_t)tr->block_bytes; b++)
            for (int f = 0; f < 3 && scales[t][f] >= 0; f++) {
                uint16_t h = ak_f32_to_f16(0.01f * rndf());
                w[b * tr->block_bytes + scales[t][f]] = (uint8_t)h;
                w[b * tr->block_bytes + scales[t][f] + 1] = (uint8_t)(h >> 8);
            }
}

int main(void) {
    static const ak_dtype types[] = {AK_F32, AK_F16, AK_BF16, AK_Q8_0, AK_Q4_0, AK_Q4_1, AK_Q5_0, AK_Q5_1,
                                     AK_Q2_K, AK_Q3_K, AK_Q4_K, AK_Q5_K, AK_Q6_K};
    static const char *lv_name[3] = {"scalar", "avx2", "avx512"};
    ak_cpu_detect();
    int max = ak_cpu_simd;
    float *x = malloc(sizeof(float) * K), *y = malloc(sizeof(float) * N), *scr = malloc(sizeof(float) * K);
    for (int i = 0; i < K; i++) x[i] = rndf();
    printf("%-6s", "type");
    for (int lv = 0; lv <= max; lv++) printf("  %10s", lv_name[lv]);
    printf("   (GB/s of weights, %dx%d, 1 thread)\n", N, K);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        ak_dtype t = types[ti];
        size_t rb = ak_dtype_row_bytes(t, K), bytes = rb * N;
        uint8_t *w = malloc(bytes);
        fill(t, w, bytes);
        printf("%-6s", ak_dtype_info[t].name);
        for (int lv = 0; lv <= max; lv++) {
            ak_cpu_simd = lv;
            ak_dot_fn dot = ak_cpu_dot(t);
            double best = 1e30;
            for (int rep = 0; rep < (lv ? 7 : 2); rep++) {
                double t0 = now_s();
                for (int r = 0; r < N; r++) y[r] = dot(K, w + (size_t)r * rb, x, scr);
                double dt = now_s() - t0;
                if (dt < best) best = dt;
            }
            printf("  %10.2f", (double)bytes / best / 1e9);
        }
        printf("\n");
        free(w);
    }
    ak_cpu_simd = max;
    free(x); free(y); free(scr);
    return 0;
}
