/* MLX affine quantization: reference dequantizer for packed uint32 rows with a scale and
 * a bias per group (the layout of MLX's mx.quantize, mode "affine"). */
/* s*q + bias rounds twice (no fma contraction), like the NumPy model the tests use. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "core/mlx.h"

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
