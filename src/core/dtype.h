/* Storage types: one traits table gives block size, bytes per block, name and the
 * reference dequantizer, the ground truth every fast kernel is tested against. */
#ifndef AK_DTYPE_H
#define AK_DTYPE_H
#include <stdint.h>
#include <stddef.h>
#include <string.h>

typedef enum {
    AK_F32 = 0, AK_F16, AK_BF16,
    AK_Q4_0, AK_Q4_1, AK_Q5_0, AK_Q5_1, AK_Q8_0,
    AK_Q2_K, AK_Q3_K, AK_Q4_K, AK_Q5_K, AK_Q6_K,
    /* MLX affine quantization, repacked at load (core/mlx.h) into 32-value blocks: an
     * f16 scale, an f16 bias and 32 `bits`-bit codes as an LSB-first bit stream (4-bit
     * rows become Q4_1, which is the same affine block). */
    AK_MLX_Q2, AK_MLX_Q3, AK_MLX_Q6, AK_MLX_Q8,
    AK_DTYPE_COUNT
} ak_dtype;

/* Reference dequantizer for block formats: n values (a multiple of block). */
typedef void (*ak_dequant_fn)(const void *src, float *dst, int64_t n);

typedef struct {
    const char *name;
    int ggml_type;        /* id in GGUF files, -1 if none */
    int block;            /* values per block */
    int block_bytes;      /* bytes per block */
    ak_dequant_fn dequant;/* NULL: not yet supported for compute */
    int mlx_bits;         /* MLX affine types only */
} ak_dtype_traits;

extern const ak_dtype_traits ak_dtype_info[AK_DTYPE_COUNT];

/* Maps a GGUF/ggml type id to ak_dtype; returns -1 for ids we do not know. */
int ak_dtype_from_ggml(uint32_t ggml_type);
/* Bytes of a row of n values (n a multiple of the block); 0 if not. */
size_t ak_dtype_row_bytes(ak_dtype t, int64_t n);

static inline float ak_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) bits = sign;
        else { /* subnormal: renormalize */
            int e = -1;
            do { man <<= 1; e++; } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
    else bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    float f; memcpy(&f, &bits, 4); return f;
}

/* Round to nearest even, as hardware conversions do. */
static inline uint16_t ak_f32_to_f16(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t man = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        man |= 0x800000;
        int shift = 14 - exp;
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* may carry into exponent: correct */
    return (uint16_t)h;
}

static inline float ak_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16; float f; memcpy(&f, &bits, 4); return f;
}

static inline uint16_t ak_f32_to_bf16(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

#endif
