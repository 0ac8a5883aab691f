/* MLX affine quantization: reference dequantizer for packed uint32 rows with a scale and
 * a bias per group (the layout of MLX's mx.quantize, mode "affine"), and the 32-value
 * block types such rows are repacked into at load. */
/* s*q + bias rounds twice (no fma contraction), like the NumPy model the tests use. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "core/mlx.h"
#include <math.h>

bool ak_mlx_params_ok(int bits, int group_size) {
    bool bits_ok = bits == 2 || bits == 3 || bits == 4 || bits == 5 || bits == 6 || bits == 8;
    bool group_ok = group_size == 32 || group_size == 64 || group_size == 128;
    return bits_ok && group_ok;
}

size_t ak_mlx_row_words(int bits, int64_t n) {
    if (!ak_mlx_params_ok(bits, 32) || n < 0 || (n * bits) % 32) return 0;
    return (size_t)(n * bits / 32);
}

/* Codes of 3, 5 and 6 bits may cross a word boundary: read 64 bits around them. Words
 * are uint32 in host order; MLX files are little-endian, as is every host we build for. */
uint32_t ak_mlx_code(int bits, const uint32_t *w, int64_t k) {
    int64_t bit = k * bits;
    int64_t word = bit / 32;
    int shift = (int)(bit % 32);
    uint64_t v = w[word] >> shift;
    if (shift + bits > 32) v |= (uint64_t)w[word + 1] << (32 - shift);
    return (uint32_t)(v & ((1u << bits) - 1));
}

float ak_mlx_sb_at(const void *p, ak_dtype sb_type, int64_t i) {
    const uint8_t *b = p;
    if (sb_type == AK_F32) {
        uint32_t u = (uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 |
                     (uint32_t)b[4 * i + 2] << 16 | (uint32_t)b[4 * i + 3] << 24;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    uint16_t h = (uint16_t)(b[2 * i] | b[2 * i + 1] << 8);
    return sb_type == AK_F16 ? ak_f16_to_f32(h) : ak_bf16_to_f32(h);
}

bool ak_mlx_dequant_row(int bits, int group_size, const uint32_t *w, const void *scales,
                        const void *biases, ak_dtype sb_type, float *dst, int64_t n) {
    if (!ak_mlx_params_ok(bits, group_size) || n < 0 || n % group_size) return false;
    if (sb_type != AK_F32 && sb_type != AK_F16 && sb_type != AK_BF16) return false;
    for (int64_t g = 0; g < n / group_size; g++) {
        float s = ak_mlx_sb_at(scales, sb_type, g), bias = ak_mlx_sb_at(biases, sb_type, g);
        for (int64_t k = g * group_size; k < (g + 1) * group_size; k++) {
            float t = s * (float)ak_mlx_code(bits, w, k); /* no fma: two roundings */
            dst[k] = t + bias;
        }
    }
    return true;
}

/* ---- 32-value block types ---- */

int ak_mlx_block_bytes(int bits) { return ak_mlx_dtype(bits) < 0 ? 0 : 4 + 4 * bits; }

int ak_mlx_dtype(int bits) {
    switch (bits) {
    case 2: return AK_MLX_Q2;
    case 3: return AK_MLX_Q3;
    case 4: return AK_Q4_1;
    case 6: return AK_MLX_Q6;
    case 8: return AK_MLX_Q8;
    default: return -1;
    }
}

/* Scale or bias g as f16 bits: copied when already f16, else converted (round to
 * nearest even). False if the value is not finite or does not fit. */
static bool sb_f16(const void *p, ak_dtype sb_type, int64_t g, uint16_t *out) {
    const uint8_t *b = p;
    if (sb_type == AK_F16) {
        *out = (uint16_t)(b[2 * g] | b[2 * g + 1] << 8);
        return (*out & 0x7c00) != 0x7c00;
    }
    float f = ak_mlx_sb_at(p, sb_type, g);
    *out = ak_f32_to_f16(f);
    return isfinite(f) && (*out & 0x7c00) != 0x7c00;
}

bool ak_mlx_repack_row(int bits, int group_size, const void *w, const void *scales, const void *biases,
                       ak_dtype sb_type, void *dst, int64_t n) {
    if (ak_mlx_dtype(bits) < 0 || !ak_mlx_params_ok(bits, group_size) || n < 0 || n % group_size) return false;
    if (sb_type != AK_F32 && sb_type != AK_F16 && sb_type != AK_BF16) return false;
    const uint8_t *src = w;
    uint8_t *o = dst;
    size_t code_bytes = (size_t)(4 * bits);
    for (int64_t g = 0; g < n / group_size; g++) {
        uint16_t s, c;
        if (!sb_f16(scales, sb_type, g, &s) || !sb_f16(biases, sb_type, g, &c)) return false;
        for (int k = 0; k < group_size / AK_MLX_BLOCK; k++) {
            o[0] = (uint8_t)s; o[1] = (uint8_t)(s >> 8);
            o[2] = (uint8_t)c; o[3] = (uint8_t)(c >> 8);
            if (bits == 4) /* Q4_1: byte i holds codes i (low) and i + 16; the stream, 2i and 2i + 1 */
                for (int i = 0; i < 16; i++) {
                    int lo = (src[i / 2] >> (4 * (i % 2))) & 0xF, hi = (src[8 + i / 2] >> (4 * (i % 2))) & 0xF;
                    o[4 + i] = (uint8_t)(lo | hi << 4);
                }
            else
                memcpy(o + 4, src, code_bytes);
            o += 4 + code_bytes;
            src += code_bytes;
        }
    }
    return true;
}

static inline float f16_at(const uint8_t *p) { return ak_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* One block: codes from the bit stream; 2, 4 and 8 bits never straddle a byte, 3 and 6
 * may (then the next byte, still inside the block, holds the rest). */
static void dq_block(int bits, const uint8_t *p, float *dst) {
    float s = f16_at(p), bias = f16_at(p + 2);
    const uint8_t *q = p + 4;
    unsigned mask = (1u << bits) - 1;
    for (int i = 0; i < AK_MLX_BLOCK; i++) {
        int bit = i * bits, byte = bit / 8, shift = bit % 8;
        unsigned v = q[byte] >> shift;
        if (shift + bits > 8) v |= (unsigned)q[byte + 1] << (8 - shift);
        float t = s * (float)(v & mask); /* no fma: two roundings */
        dst[i] = t + bias;
    }
}

static void dq_blocks(int bits, const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    int bb = 4 + 4 * bits;
    for (int64_t b = 0; b < n / AK_MLX_BLOCK; b++) dq_block(bits, p + b * bb, dst + b * AK_MLX_BLOCK);
}

void ak_mlx_dequant_q2(const void *src, float *dst, int64_t n) { dq_blocks(2, src, dst, n); }
void ak_mlx_dequant_q3(const void *src, float *dst, int64_t n) { dq_blocks(3, src, dst, n); }
void ak_mlx_dequant_q6(const void *src, float *dst, int64_t n) { dq_blocks(6, src, dst, n); }
void ak_mlx_dequant_q8(const void *src, float *dst, int64_t n) { dq_blocks(8, src, dst, n); }
