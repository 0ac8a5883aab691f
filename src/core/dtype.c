/* The dtype traits table and the reference dequantizers for the float types and Q8_0.
 * Block layouts follow the public GGUF/ggml specification. */
#include "core/dtype.h"
#include "core/quants.h"
#include "core/mlx.h"

static void dq_f32(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * 4); }

static void dq_f16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, p + 2 * i, 2); dst[i] = ak_f16_to_f32(h); }
}

static void dq_bf16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, p + 2 * i, 2); dst[i] = ak_bf16_to_f32(h); }
}

/* Q8_0: 32 values = f16 scale d + 32 int8; x = d * q. */
static void dq_q8_0(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 32; b++, p += 34) {
        uint16_t h; memcpy(&h, p, 2);
        float d = ak_f16_to_f32(h);
        for (int i = 0; i < 32; i++) dst[b * 32 + i] = d * (float)(int8_t)p[2 + i];
    }
}

const ak_dtype_traits ak_dtype_info[AK_DTYPE_COUNT] = {
    [AK_F32]  = {"F32",  0, 1, 4, dq_f32, 0},
    [AK_F16]  = {"F16",  1, 1, 2, dq_f16, 0},
    [AK_BF16] = {"BF16", 30, 1, 2, dq_bf16, 0},
    [AK_Q4_0] = {"Q4_0", 2, 32, 18, AK_DQ_Q4_0, 0},
    [AK_Q4_1] = {"Q4_1", 3, 32, 20, AK_DQ_Q4_1, 0},
    [AK_Q5_0] = {"Q5_0", 6, 32, 22, AK_DQ_Q5_0, 0},
    [AK_Q5_1] = {"Q5_1", 7, 32, 24, AK_DQ_Q5_1, 0},
    [AK_Q8_0] = {"Q8_0", 8, 32, 34, dq_q8_0, 0},
    [AK_Q2_K] = {"Q2_K", 10, 256, 84, AK_DQ_Q2_K, 0},
    [AK_Q3_K] = {"Q3_K", 11, 256, 110, AK_DQ_Q3_K, 0},
    [AK_Q4_K] = {"Q4_K", 12, 256, 144, AK_DQ_Q4_K, 0},
    [AK_Q5_K] = {"Q5_K", 13, 256, 176, AK_DQ_Q5_K, 0},
    [AK_Q6_K] = {"Q6_K", 14, 256, 210, AK_DQ_Q6_K, 0},
    /* MLX affine weights repacked at load into 32-value blocks (core/mlx.h) */
    [AK_MLX_Q2] = {"MLX_Q2", -1, 32, 12, ak_mlx_dequant_q2, 2},
    [AK_MLX_Q3] = {"MLX_Q3", -1, 32, 16, ak_mlx_dequant_q3, 3},
    [AK_MLX_Q6] = {"MLX_Q6", -1, 32, 28, ak_mlx_dequant_q6, 6},
    [AK_MLX_Q8] = {"MLX_Q8", -1, 32, 36, ak_mlx_dequant_q8, 8},
};

int ak_dtype_from_ggml(uint32_t ggml_type) {
    for (int t = 0; t < AK_DTYPE_COUNT; t++)
        if (ak_dtype_info[t].ggml_type >= 0 && (uint32_t)ak_dtype_info[t].ggml_type == ggml_type) return t;
    return -1;
}

size_t ak_dtype_row_bytes(ak_dtype t, int64_t n) {
    const ak_dtype_traits *tr = &ak_dtype_info[t];
    if (n < 0 || n % tr->block) return 0;
    return (size_t)(n / tr->block) * (size_t)tr->block_bytes;
}
