/* Reference dequantizers for Q4_0, Q4_1, Q5_0, Q5_1 and the k-quants Q2_K..Q6_K, and a
 * reference Q8_0 quantizer. Layouts follow the public GGUF/ggml block specification.
 *
 * Float arithmetic rounds after every operation, as ggml's C reference and gguf-py do:
 * d*q + m is written as two statements and fma contraction is switched off for this
 * file, so the output is bit-identical to theirs. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#include "core/quants.h"
#include <math.h>
#include "core/dtype.h"

static inline float f16_at(const uint8_t *p) {
    return ak_f16_to_f32((uint16_t)(p[0] | (p[1] << 8)));
}

static inline uint32_t u32_at(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* x = d*q + m with two roundings, never a fused multiply-add. */
static inline float affine(float d, float q, float m) {
    float t = d * q;
    return t + m;
}

/* x = d*q - m with two roundings. */
static inline float affine_sub(float d, float q, float m) {
    float t = d * q;
    return t - m;
}

/* ---- 32-value blocks. Value i < 16 is the low nibble of qs[i], value i >= 16 the
 * high nibble of qs[i-16]; Q5 adds bit i of the 32-bit word qh as bit 4. ---- */

/* Q4_0 (18 B): f16 d, qs[16]. */
void ak_dequant_q4_0(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 32; b++, p += 18, dst += 32) {
        float d = f16_at(p);
        const uint8_t *qs = p + 2;
        for (int i = 0; i < 16; i++) {
            dst[i] = d * (float)((qs[i] & 0xF) - 8);
            dst[i + 16] = d * (float)((qs[i] >> 4) - 8);
        }
    }
}

/* Q4_1 (20 B): f16 d, f16 m, qs[16]. */
void ak_dequant_q4_1(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 32; b++, p += 20, dst += 32) {
        float d = f16_at(p), m = f16_at(p + 2);
        const uint8_t *qs = p + 4;
        for (int i = 0; i < 16; i++) {
            dst[i] = affine(d, (float)(qs[i] & 0xF), m);
            dst[i + 16] = affine(d, (float)(qs[i] >> 4), m);
        }
    }
}

/* Q5_0 (22 B): f16 d, u32 qh, qs[16]. */
void ak_dequant_q5_0(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 32; b++, p += 22, dst += 32) {
        float d = f16_at(p);
        uint32_t qh = u32_at(p + 2);
        const uint8_t *qs = p + 6;
        for (int i = 0; i < 16; i++) {
            int lo = (qs[i] & 0xF) | (int)((qh >> i) & 1) << 4;
            int hi = (qs[i] >> 4) | (int)((qh >> (i + 16)) & 1) << 4;
            dst[i] = d * (float)(lo - 16);
            dst[i + 16] = d * (float)(hi - 16);
        }
    }
}

/* Q5_1 (24 B): f16 d, f16 m, u32 qh, qs[16]. */
void ak_dequant_q5_1(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 32; b++, p += 24, dst += 32) {
        float d = f16_at(p), m = f16_at(p + 2);
        uint32_t qh = u32_at(p + 4);
        const uint8_t *qs = p + 8;
        for (int i = 0; i < 16; i++) {
            int lo = (qs[i] & 0xF) | (int)((qh >> i) & 1) << 4;
            int hi = (qs[i] >> 4) | (int)((qh >> (i + 16)) & 1) << 4;
            dst[i] = affine(d, (float)lo, m);
            dst[i + 16] = affine(d, (float)hi, m);
        }
    }
}

/* ---- k-quants: 256 values per super-block. The 2- and 3-bit formats walk the super-
 * block in two halves of 128; each half reads 32 bytes of qs four times, taking bits
 * 0-1, 2-3, 4-5, 6-7 for 32 consecutive values. ---- */

/* Q2_K (84 B): scales[16] (low nibble scale, high nibble min, per 16 values), qs[64],
 * f16 d, f16 dmin. x = d*sc*q - dmin*m. */
void ak_dequant_q2_k(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 256; b++, p += 84, dst += 256) {
        const uint8_t *scales = p, *qs = p + 16;
        float d = f16_at(p + 80), dmin = f16_at(p + 82);
        for (int i = 0; i < 256; i++) {
            int half = i / 128, shift = 2 * ((i % 128) / 32), l = i % 32;
            uint8_t sc = scales[i / 16];
            float dl = d * (float)(sc & 0xF), ml = dmin * (float)(sc >> 4);
            int q = (qs[half * 32 + l] >> shift) & 3;
            dst[i] = affine_sub(dl, (float)q, ml);
        }
    }
}

/* Q3_K's 16 signed 6-bit scales in 12 bytes: the low 4 bits of scale s are a nibble of
 * bytes 0-7 (s < 8: low nibble of byte s, else high nibble of byte s-8); the high 2
 * bits are bits 2*(s/4) of byte 8 + s%4. Stored with an offset of 32. */
static int q3_k_scale(const uint8_t *sc, int s) {
    int lo = s < 8 ? sc[s] & 0xF : sc[s - 8] >> 4;
    int hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* Q3_K (110 B): hmask[32], qs[64], scales[12], f16 d. Value i has low bits as in Q2_K
 * and a high bit, bit i/32 of hmask[i%32]; a clear high bit subtracts 4. */
void ak_dequant_q3_k(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 256; b++, p += 110, dst += 256) {
        const uint8_t *hmask = p, *qs = p + 32, *scales = p + 96;
        float d = f16_at(p + 108);
        for (int i = 0; i < 256; i++) {
            int half = i / 128, shift = 2 * ((i % 128) / 32), l = i % 32;
            float dl = d * (float)q3_k_scale(scales, i / 16);
            int q = (qs[half * 32 + l] >> shift) & 3;
            if (!((hmask[l] >> (i / 32)) & 1)) q -= 4;
            dst[i] = dl * (float)q;
        }
    }
}

/* Q4_K/Q5_K's 8 unsigned 6-bit scales and mins in 12 bytes: for j < 4, scale = byte j
 * & 63 and min = byte j+4 & 63; for j >= 4 the low 4 bits come from byte j+4 (scale:
 * low nibble, min: high nibble) and the top 2 bits from the top of bytes j-4 / j. */
static void k4_scale_min(const uint8_t *q, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | (q[j - 4] >> 6) << 4;
        *m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
    }
}

/* Q4_K (144 B): f16 d, f16 dmin, scales[12], qs[128]. Eight sub-blocks of 32; sub-block
 * j uses the low (j even) or high (j odd) nibbles of qs[32*(j/2) ..]. */
void ak_dequant_q4_k(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 256; b++, p += 144, dst += 256) {
        float d = f16_at(p), dmin = f16_at(p + 2);
        const uint8_t *scales = p + 4, *qs = p + 16;
        for (int j = 0; j < 8; j++) {
            int sc, m;
            k4_scale_min(scales, j, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            for (int l = 0; l < 32; l++) {
                int q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
                dst[32 * j + l] = affine_sub(dl, (float)q, ml);
            }
        }
    }
}

/* Q5_K (176 B): f16 d, f16 dmin, scales[12], qh[32], qs[128]. As Q4_K, plus bit j of
 * qh[l] as bit 4 of value l of sub-block j. */
void ak_dequant_q5_k(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 256; b++, p += 176, dst += 256) {
        float d = f16_at(p), dmin = f16_at(p + 2);
        const uint8_t *scales = p + 4, *qh = p + 16, *qs = p + 48;
        for (int j = 0; j < 8; j++) {
            int sc, m;
            k4_scale_min(scales, j, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            for (int l = 0; l < 32; l++) {
                int q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
                q |= ((qh[l] >> j) & 1) << 4;
                dst[32 * j + l] = affine_sub(dl, (float)q, ml);
            }
        }
    }
}

/* Q6_K (210 B): ql[128], qh[64], int8 scales[16], f16 d. In each half of 128 values,
 * value r takes 4 low bits from ql[64*half + r%64] (low nibble if r < 64, else high)
 * and 2 high bits from qh[32*half + r%32] at bit 2*(r/32); stored with offset 32. */
void ak_dequant_q6_k(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 256; b++, p += 210, dst += 256) {
        const uint8_t *ql = p, *qh = p + 128, *scales = p + 192;
        float d = f16_at(p + 208);
        for (int i = 0; i < 256; i++) {
            int half = i / 128, r = i % 128;
            int lo = (ql[64 * half + r % 64] >> (4 * (r / 64))) & 0xF;
            int hi = (qh[32 * half + r % 32] >> (2 * (r / 32))) & 3;
            float dl = d * (float)(int8_t)scales[i / 16];
            dst[i] = dl * (float)((lo | hi << 4) - 32);
        }
    }
}

/* ---- quantizers ---- */

void ak_quantize_q8_0(const float *src, void *dst, int64_t n) {
    uint8_t *p = dst;
    for (int64_t b = 0; b < n / 32; b++, p += 34, src += 32) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(src[i]));
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t h = ak_f32_to_f16(d);
        p[0] = (uint8_t)(h & 0xFF);
        p[1] = (uint8_t)(h >> 8);
        for (int i = 0; i < 32; i++) p[2 + i] = (uint8_t)(int8_t)roundf(src[i] * id);
    }
}

void ak_quantize_q4_0(const float *src, void *dst, int64_t n) {
    uint8_t *p = dst;
    for (int64_t b = 0; b < n / 32; b++, p += 18, src += 32) {
        float amax = 0.0f, m = 0.0f;
        for (int i = 0; i < 32; i++)
            if (fabsf(src[i]) > amax) { amax = fabsf(src[i]); m = src[i]; }
        float d = m / -8.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t h = ak_f32_to_f16(d);
        p[0] = (uint8_t)(h & 0xFF);
        p[1] = (uint8_t)(h >> 8);
        for (int i = 0; i < 16; i++) {
            int lo = (int)(src[i] * id + 8.5f), hi = (int)(src[i + 16] * id + 8.5f);
            p[2 + i] = (uint8_t)((lo < 15 ? lo : 15) | (hi < 15 ? hi : 15) << 4);
        }
    }
}
