/* What the CPU kernel tests share: random rows of every ggml and MLX block type (finite
 * f16 scales, no -128 in Q8_0, as ggml writes them) and the SIMD levels this CPU can run.
 * The including test defines `static uint64_t rng` first. */
#ifndef AK_TEST_CPU_TEST_H
#define AK_TEST_CPU_TEST_H
#include <stdio.h>
static const int f16_fields[AK_DTYPE_COUNT][3] = {
    [AK_Q4_0] = {0, -1}, [AK_Q4_1] = {0, 2, -1}, [AK_Q5_0] = {0, -1}, [AK_Q5_1] = {0, 2, -1},
    [AK_Q8_0] = {0, -1}, [AK_Q2_K] = {80, 82, -1}, [AK_Q3_K] = {108, -1}, [AK_Q4_K] = {0, 2, -1},
    [AK_Q5_K] = {0, 2, -1}, [AK_Q6_K] = {208, -1}, [AK_MLX_Q2] = {0, 2, -1}, [AK_MLX_Q3] = {0, 2, -1},
    [AK_MLX_Q6] = {0, 2, -1}, [AK_MLX_Q8] = {0, 2, -1},
};
static const ak_dtype qtypes[] = {AK_Q4_0, AK_Q4_1, AK_Q5_0, AK_Q5_1, AK_Q8_0, AK_Q2_K, AK_Q3_K, AK_Q4_K, AK_Q5_K, AK_Q6_K};
#define NQT (sizeof qtypes / sizeof *qtypes)

static void put16(uint8_t *p, uint16_t h) { p[0] = (uint8_t)h; p[1] = (uint8_t)(h >> 8); }

static void rand_rows(ak_dtype t, int64_t K, int rows, uint8_t *w) {
    const ak_dtype_traits *tr = &ak_dtype_info[t];
    size_t n = ak_dtype_row_bytes(t, K) * (size_t)rows;
    for (size_t i = 0; i < n; i++) w[i] = (uint8_t)ak_rand_u32(&rng);
    for (int64_t b = 0; b < K / tr->block * rows; b++)
        for (int f = 0; f < 3 && f16_fields[t][f] >= 0; f++)
            put16(w + b * tr->block_bytes + f16_fields[t][f], ak_f32_to_f16(0.05f * ak_rand_f(&rng)));
    if (t == AK_Q8_0) /* ggml never writes -128 */
        for (int64_t b = 0; b < K / 32 * rows; b++)
            for (int i = 0; i < 32; i++) if (w[b * 34 + 2 + i] == 0x80) w[b * 34 + 2 + i] = 0x81;
}

/* N random rows of dtype t (a float type or a block type) into a new *w, dequantized into a new *wf. */
static void rand_weights(ak_dtype t, int64_t K, int N, void **w, float **wf) {
    *w = malloc(ak_dtype_row_bytes(t, K) * (size_t)N);
    *wf = malloc((size_t)N * K * 4);
    if (t == AK_F16 || t == AK_BF16) {
        for (int64_t i = 0; i < N * K; i++)
            ((uint16_t *)*w)[i] = t == AK_F16 ? ak_f32_to_f16(ak_rand_f(&rng) * 0.05f) : ak_f32_to_bf16(ak_rand_f(&rng) * 0.05f);
    } else if (t == AK_F32) {
        for (int64_t i = 0; i < N * K; i++) ((float *)*w)[i] = ak_rand_f(&rng) * 0.05f;
    } else rand_rows(t, K, N, *w);
    ak_dtype_info[t].dequant(*w, *wf, N * K);
}

/* Levels to try: {simd, vnni} pairs this CPU supports. */
static int levels[8][2], nlev;
static void find_levels(void) {
    ak_cpu_detect();
    int simd = ak_cpu_simd, vnni = ak_cpu_vnni;
    levels[nlev][0] = 0; levels[nlev++][1] = 0;
    if (simd >= 1) { levels[nlev][0] = 1; levels[nlev++][1] = 0; }
    if (simd >= 2) { levels[nlev][0] = 2; levels[nlev++][1] = 0; }
    if (vnni) { levels[nlev][0] = simd; levels[nlev++][1] = vnni; }
    printf("levels:");
    for (int i = 0; i < nlev; i++) printf(" %d/%d", levels[i][0], levels[i][1]);
    printf("\n");
}
static void set_level(int i) { ak_cpu_simd = levels[i][0]; ak_cpu_vnni = levels[i][1]; }

#endif
