/* Dequantization on the device: 32 values (one sub-block) of a weight row, for every
 * dtype with a reference dequantizer in core/quants.c. The arithmetic follows the
 * reference (two roundings where it has two, never a contracted multiply-add), so a
 * dequantized value equals the CPU's bit for bit.
 *
 * Q4_0 and Q8_0 rows are repacked at encode time (ak_cuda_repack): all 16 (or 32) quant
 * bytes of every block first, then all f16 scales, so the GEMV reads 16-byte vectors.
 * The other formats keep the file's block layout (MLX weights the engine's 32-value blocks,
 * core/mlx.h). */
#ifndef AK_CUDA_QUANT_CUH
#define AK_CUDA_QUANT_CUH
#include "backend/cuda/common.cuh"
extern "C" {
#include "core/dtype.h"
}

/* Q3_K's 6-bit signed scales (see core/quants.c). */
__device__ __forceinline__ int ak_q3k_scale(const uint8_t *sc, int s) {
    int lo = s < 8 ? sc[s] & 0xF : sc[s - 8] >> 4;
    int hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* Q4_K / Q5_K: sub-block j's 6-bit scale and min, byte(i) giving scales[i] (see core/quants.c). */
template <class B> __device__ __forceinline__ void ak_k4_scale_min(B byte, int j, int &sc, int &m) {
    sc = j < 4 ? byte(j) & 63 : (byte(j + 4) & 0xF) | (byte(j - 4) >> 6) << 4;
    m = j < 4 ? byte(j + 4) & 63 : (byte(j + 4) >> 4) | (byte(j) >> 6) << 4;
}

/* Code bits of an MLX block type (core/mlx.h); 0 for other types. */
__host__ __device__ constexpr int ak_cuda_mlx_bits(int dtype) {
    return dtype == AK_MLX_Q2 ? 2 : dtype == AK_MLX_Q3 ? 3 : dtype == AK_MLX_Q6 ? 6
         : dtype == AK_MLX_Q8 ? 8 : 0;
}

/* Code l of an MLX block's LSB-first stream (bits per code B) at c. */
__device__ __forceinline__ int ak_mlx_code_at(const uint8_t *c, int B, int l) {
    const int bit = l * B, o = bit % 8;
    unsigned v = c[bit / 8] >> o;
    if (o + B > 8) v |= (unsigned)c[bit / 8 + 1] << (8 - o);
    return (int)(v & ((1u << B) - 1));
}

/* Values 32s .. 32s+31 of a row of nb32 sub-blocks (K = 32 * nb32) into out. */
__device__ __forceinline__ void ak_dq32(int dtype, const uint8_t *row, int nb32, int s, float out[32]) {
    switch (dtype) {
    case AK_F32:
        for (int l = 0; l < 32; l++) out[l] = ((const float *)row)[32 * s + l];
        break;
    case AK_F16:
        for (int l = 0; l < 32; l++) out[l] = __half2float(((const __half *)row)[32 * s + l]);
        break;
    case AK_BF16:
        for (int l = 0; l < 32; l++) out[l] = __bfloat162float(((const __nv_bfloat16 *)row)[32 * s + l]);
        break;
    case AK_Q4_0: {
        const uint8_t *qs = row + 16 * (size_t)s;
        float d = ak_f16_at(row + 16 * (size_t)nb32 + 2 * s);
        for (int i = 0; i < 16; i++) {
            out[i] = __fmul_rn(d, (float)((qs[i] & 0xF) - 8));
            out[i + 16] = __fmul_rn(d, (float)((qs[i] >> 4) - 8));
        }
        break;
    }
    case AK_Q8_0: {
        const int8_t *qs = (const int8_t *)(row + 32 * (size_t)s);
        float d = ak_f16_at(row + 32 * (size_t)nb32 + 2 * s);
        for (int i = 0; i < 32; i++) out[i] = __fmul_rn(d, (float)qs[i]);
        break;
    }
    case AK_CUDA_Q4_0_FILE: {
        const uint8_t *p = row + 18 * (size_t)s;
        float d = ak_f16_at(p);
        for (int i = 0; i < 16; i++) {
            out[i] = __fmul_rn(d, (float)((p[2 + i] & 0xF) - 8));
            out[i + 16] = __fmul_rn(d, (float)((p[2 + i] >> 4) - 8));
        }
        break;
    }
    case AK_CUDA_Q8_0_FILE: {
        const uint8_t *p = row + 34 * (size_t)s;
        float d = ak_f16_at(p);
        for (int i = 0; i < 32; i++) out[i] = __fmul_rn(d, (float)(int8_t)p[2 + i]);
        break;
    }
    case AK_Q4_1: {
        const uint8_t *p = row + 20 * (size_t)s;
        float d = ak_f16_at(p), m = ak_f16_at(p + 2);
        for (int i = 0; i < 16; i++) {
            out[i] = __fadd_rn(__fmul_rn(d, (float)(p[4 + i] & 0xF)), m);
            out[i + 16] = __fadd_rn(__fmul_rn(d, (float)(p[4 + i] >> 4)), m);
        }
        break;
    }
    case AK_Q5_0: case AK_Q5_1: {
        bool one = dtype == AK_Q5_1;
        const uint8_t *p = row + (one ? 24 : 22) * (size_t)s;
        float d = ak_f16_at(p), m = one ? ak_f16_at(p + 2) : 0.f;
        uint32_t qh = ak_u32_at(p + (one ? 4 : 2));
        const uint8_t *qs = p + (one ? 8 : 6);
        for (int i = 0; i < 16; i++) {
            int lo = (qs[i] & 0xF) | (int)((qh >> i) & 1) << 4;
            int hi = (qs[i] >> 4) | (int)((qh >> (i + 16)) & 1) << 4;
            if (one) {
                out[i] = __fadd_rn(__fmul_rn(d, (float)lo), m);
                out[i + 16] = __fadd_rn(__fmul_rn(d, (float)hi), m);
            } else {
                out[i] = __fmul_rn(d, (float)(lo - 16));
                out[i + 16] = __fmul_rn(d, (float)(hi - 16));
            }
        }
        break;
    }
    case AK_Q2_K: {
        const uint8_t *p = row + 84 * (size_t)(s / 8);
        int j = s % 8, half = j / 4, shift = 2 * (j % 4);
        float d = ak_f16_at(p + 80), dmin = ak_f16_at(p + 82);
        for (int l = 0; l < 32; l++) {
            uint8_t sc = p[2 * j + l / 16];
            float dl = __fmul_rn(d, (float)(sc & 0xF)), ml = __fmul_rn(dmin, (float)(sc >> 4));
            int q = (p[16 + half * 32 + l] >> shift) & 3;
            out[l] = __fsub_rn(__fmul_rn(dl, (float)q), ml);
        }
        break;
    }
    case AK_Q3_K: {
        const uint8_t *p = row + 110 * (size_t)(s / 8);
        int j = s % 8, half = j / 4, shift = 2 * (j % 4);
        float d = ak_f16_at(p + 108);
        for (int l = 0; l < 32; l++) {
            float dl = __fmul_rn(d, (float)ak_q3k_scale(p + 96, 2 * j + l / 16));
            int q = (p[32 + half * 32 + l] >> shift) & 3;
            if (!((p[l] >> j) & 1)) q -= 4;
            out[l] = __fmul_rn(dl, (float)q);
        }
        break;
    }
    case AK_Q4_K: case AK_Q5_K: {
        bool five = dtype == AK_Q5_K;
        const uint8_t *p = row + (five ? 176 : 144) * (size_t)(s / 8);
        int j = s % 8, sc, m;
        float d = ak_f16_at(p), dmin = ak_f16_at(p + 2);
        ak_k4_scale_min([p](int i) { return (int)p[4 + i]; }, j, sc, m);
        float dl = __fmul_rn(d, (float)sc), ml = __fmul_rn(dmin, (float)m);
        const uint8_t *qs = p + (five ? 48 : 16) + 32 * (j / 2);
        for (int l = 0; l < 32; l++) {
            int q = (qs[l] >> (4 * (j % 2))) & 0xF;
            if (five) q |= ((p[16 + l] >> j) & 1) << 4;
            out[l] = __fsub_rn(__fmul_rn(dl, (float)q), ml);
        }
        break;
    }
    case AK_Q6_K: {
        const uint8_t *p = row + 210 * (size_t)(s / 8);
        int j = s % 8, half = j / 4, r0 = 32 * (j % 4);
        float d = ak_f16_at(p + 208);
        for (int l = 0; l < 32; l++) {
            int r = r0 + l;
            int lo = (p[64 * half + r % 64] >> (4 * (r / 64))) & 0xF;
            int hi = (p[128 + 32 * half + l] >> (2 * (r / 32))) & 3;
            float dl = __fmul_rn(d, (float)(int8_t)p[192 + 2 * j + l / 16]);
            out[l] = __fmul_rn(dl, (float)((lo | hi << 4) - 32));
        }
        break;
    }
    case AK_MLX_Q2: case AK_MLX_Q3: case AK_MLX_Q6: case AK_MLX_Q8: {
        const int B = ak_cuda_mlx_bits(dtype);
        const uint8_t *p = row + (size_t)(4 + 4 * B) * s;
        float sc = ak_f16_at(p), bias = ak_f16_at(p + 2);
        for (int l = 0; l < 32; l++) out[l] = __fadd_rn(__fmul_rn(sc, (float)ak_mlx_code_at(p + 4, B, l)), bias);
        break;
    }
    default:
        for (int l = 0; l < 32; l++) out[l] = 0.f;
    }
}

/* Bytes of a row of K values. */
__host__ __device__ constexpr size_t ak_cuda_row_bytes(int dtype, int64_t K) {
    switch (dtype) {
    case AK_F32: return (size_t)K * 4;
    case AK_F16: case AK_BF16: return (size_t)K * 2;
    case AK_Q4_0: case AK_CUDA_Q4_0_FILE: return (size_t)(K / 32) * 18;
    case AK_Q4_1: return (size_t)(K / 32) * 20;
    case AK_Q5_0: return (size_t)(K / 32) * 22;
    case AK_Q5_1: return (size_t)(K / 32) * 24;
    case AK_Q8_0: case AK_CUDA_Q8_0_FILE: return (size_t)(K / 32) * 34;
    case AK_Q2_K: return (size_t)(K / 256) * 84;
    case AK_Q3_K: return (size_t)(K / 256) * 110;
    case AK_Q4_K: return (size_t)(K / 256) * 144;
    case AK_Q5_K: return (size_t)(K / 256) * 176;
    case AK_Q6_K: return (size_t)(K / 256) * 210;
    case AK_MLX_Q2: case AK_MLX_Q3: case AK_MLX_Q6: case AK_MLX_Q8:
        return (size_t)(K / 32) * (4 + 4 * ak_cuda_mlx_bits(dtype));
    default: return 0;
    }
}

__host__ __device__ __forceinline__ bool ak_cuda_is_float(int dtype) {
    return dtype == AK_F32 || dtype == AK_F16 || dtype == AK_BF16;
}

#endif
