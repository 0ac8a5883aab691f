/* AVX2 (+FMA, F16C) dot kernels: each block is decoded to signed bytes in registers,
 * widened to floats and multiplied with x; block scales multiply the block's partial
 * sums. No row is written to memory. Layouts: see the reference in core/quants.c.
 * Also the AVX2 row dequantizers of dequant.c, which share the decoding. */
#include "backend/cpu/dot_simd.h"
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#include "backend/cpu/q5bits.h"

#define AVX2 __attribute__((target("avx2,fma,f16c")))

AVX2 static inline float f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

AVX2 static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

AVX2 static inline __m256 loadx(const float *x) { return _mm256_loadu_ps(x); }

/* Bytes 0-7 of q as 8 floats. */
AVX2 static inline __m256 i8_to_f(__m128i q) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)); }

/* sum q[i]*x[i] over 16 signed bytes, as 8 partial sums. */
AVX2 static inline __m256 dot16(__m128i q, const float *x) {
    __m256 s = _mm256_mul_ps(i8_to_f(q), loadx(x));
    return _mm256_fmadd_ps(i8_to_f(_mm_unpackhi_epi64(q, q)), loadx(x + 8), s);
}

/* sum q[i]*x[i] over 32 signed bytes. */
AVX2 static inline __m256 dot32(__m256i q, const float *x) {
    return _mm256_add_ps(dot16(_mm256_castsi256_si128(q), x), dot16(_mm256_extracti128_si256(q, 1), x + 16));
}

/* sum x[i] over 32 values (for the "+ m" term of the affine formats). */
AVX2 static inline __m256 sum32(const float *x) {
    return _mm256_add_ps(_mm256_add_ps(loadx(x), loadx(x + 8)), _mm256_add_ps(loadx(x + 16), loadx(x + 24)));
}

/* 16 bytes of nibbles -> 32 values: low nibbles are values 0-15 (lane 0), high 16-31. */
AVX2 static inline __m256i nibbles32(const uint8_t *qs) {
    __m128i v = _mm_loadu_si128((const __m128i *)qs), m = _mm_set1_epi8(0xF);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

/* The fifth bits of a Q5 block (the 32-bit word at p) as 0x10 per byte. */
AVX2 static inline __m256i bit4_from_bits(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return ak_q5_bit4_avx2(v);
}

/* ---- float types ---- */

AVX2 float ak_dot_f32_avx2(int64_t K, const float *a, const float *b) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= K; i += 32) {
        s0 = _mm256_fmadd_ps(loadx(a + i), loadx(b + i), s0);
        s1 = _mm256_fmadd_ps(loadx(a + i + 8), loadx(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(loadx(a + i + 16), loadx(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(loadx(a + i + 24), loadx(b + i + 24), s3);
    }
    for (; i + 8 <= K; i += 8) s0 = _mm256_fmadd_ps(loadx(a + i), loadx(b + i), s0);
    float s = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < K; i++) s += a[i] * b[i];
    return s;
}

AVX2 static float dot_f32(int64_t K, const void *w, const float *x, float *scratch) {
    (void)scratch;
    return ak_dot_f32_avx2(K, w, x);
}

AVX2 static inline __m256 f16x8(const uint16_t *h) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)); }

AVX2 static float dot_f16(int64_t K, const void *w, const float *x, float *scratch) {
    (void)scratch;
    const uint16_t *h = w;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= K; i += 32) {
        s0 = _mm256_fmadd_ps(f16x8(h + i), loadx(x + i), s0);
        s1 = _mm256_fmadd_ps(f16x8(h + i + 8), loadx(x + i + 8), s1);
        s2 = _mm256_fmadd_ps(f16x8(h + i + 16), loadx(x + i + 16), s2);
        s3 = _mm256_fmadd_ps(f16x8(h + i + 24), loadx(x + i + 24), s3);
    }
    for (; i + 8 <= K; i += 8) s0 = _mm256_fmadd_ps(f16x8(h + i), loadx(x + i), s0);
    float s = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < K; i++) s += ak_f16_to_f32(h[i]) * x[i];
    return s;
}

/* bf16 is the top half of an f32: widen and shift left by 16. */
AVX2 static inline __m256 bf16x8(const uint16_t *h) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)h));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

AVX2 static float dot_bf16(int64_t K, const void *w, const float *x, float *scratch) {
    (void)scratch;
    const uint16_t *h = w;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= K; i += 32) {
        s0 = _mm256_fmadd_ps(bf16x8(h + i), loadx(x + i), s0);
        s1 = _mm256_fmadd_ps(bf16x8(h + i + 8), loadx(x + i + 8), s1);
        s2 = _mm256_fmadd_ps(bf16x8(h + i + 16), loadx(x + i + 16), s2);
        s3 = _mm256_fmadd_ps(bf16x8(h + i + 24), loadx(x + i + 24), s3);
    }
    for (; i + 8 <= K; i += 8) s0 = _mm256_fmadd_ps(bf16x8(h + i), loadx(x + i), s0);
    float s = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; i < K; i++) s += ak_bf16_to_f32(h[i]) * x[i];
    return s;
}

/* ---- 32-value blocks: each *_blk adds one block's contribution to acc ---- */

AVX2 static inline __m256 q4_0_blk(const uint8_t *p, const float *x, __m256 acc) {
    __m256i q = _mm256_sub_epi8(nibbles32(p + 2), _mm256_set1_epi8(8));
    return _mm256_fmadd_ps(_mm256_set1_ps(f16_at(p)), dot32(q, x), acc);
}

AVX2 static inline __m256 q4_1_blk(const uint8_t *p, const float *x, __m256 acc) {
    acc = _mm256_fmadd_ps(_mm256_set1_ps(f16_at(p)), dot32(nibbles32(p + 4), x), acc);
    return _mm256_fmadd_ps(_mm256_set1_ps(f16_at(p + 2)), sum32(x), acc);
}

AVX2 static inline __m256 q5_0_blk(const uint8_t *p, const float *x, __m256 acc) {
    __m256i q = _mm256_or_si256(nibbles32(p + 6), bit4_from_bits(p + 2));
    q = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
    return _mm256_fmadd_ps(_mm256_set1_ps(f16_at(p)), dot32(q, x), acc);
}

AVX2 static inline __m256 q5_1_blk(const uint8_t *p, const float *x, __m256 acc) {
    __m256i q = _mm256_or_si256(nibbles32(p + 8), bit4_from_bits(p + 4));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(f16_at(p)), dot32(q, x), acc);
    return _mm256_fmadd_ps(_mm256_set1_ps(f16_at(p + 2)), sum32(x), acc);
}

AVX2 static inline __m256 q8_0_blk(const uint8_t *p, const float *x, __m256 acc) {
    __m256i q = _mm256_loadu_si256((const __m256i *)(p + 2));
    return _mm256_fmadd_ps(_mm256_set1_ps(f16_at(p)), dot32(q, x), acc);
}

/* Runs BLK over the K/32 blocks of BYTES bytes with two accumulators, so that the
 * block-to-block dependency does not bound the loop by FMA latency. */
#define BLOCKS32(NAME, BLK, BYTES)                                                        \
    AVX2 static float NAME(int64_t K, const void *w, const float *x, float *scratch) {   \
        (void)scratch;                                                                    \
        const uint8_t *p = w;                                                             \
        __m256 a0 = _mm256_setzero_ps(), a1 = a0;                                         \
        int64_t nb = K / 32, b = 0;                                                       \
        for (; b + 2 <= nb; b += 2, p += 2 * (BYTES), x += 64) {                          \
            a0 = BLK(p, x, a0);                                                           \
            a1 = BLK(p + (BYTES), x + 32, a1);                                            \
        }                                                                                 \
        if (b < nb) a0 = BLK(p, x, a0);                                                   \
        return hsum(_mm256_add_ps(a0, a1));                                               \
    }

BLOCKS32(dot_q4_0, q4_0_blk, 18)
BLOCKS32(dot_q4_1, q4_1_blk, 20)
BLOCKS32(dot_q5_0, q5_0_blk, 22)
BLOCKS32(dot_q5_1, q5_1_blk, 24)
BLOCKS32(dot_q8_0, q8_0_blk, 34)

/* ---- k-quants: 256-value super-blocks ---- */

/* 16 bytes -> 16 floats of d*b (scales of Q6_K: signed; others pass unsigned bytes). */
AVX2 static inline void scale16_i8(__m128i b, float d, float *out) {
    __m256 dv = _mm256_set1_ps(d);
    _mm256_storeu_ps(out, _mm256_mul_ps(dv, i8_to_f(b)));
    _mm256_storeu_ps(out + 8, _mm256_mul_ps(dv, i8_to_f(_mm_unpackhi_epi64(b, b))));
}

/* Q2_K (84 B): scales[16], qs[64], f16 d, f16 dmin. The 32 bytes of each half hold
 * four 32-value chunks in bit pairs; lane 0 of a chunk is one 16-value sub-block and
 * lane 1 the next. Values are dequantized to floats (d*sc*q - dmin*m) and FMA'd. */
AVX2 static float dot_q2_k(int64_t K, const void *w, const float *x, float *scratch) {
    (void)scratch;
    const uint8_t *p = w;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    _Alignas(32) float dl[16], ml[16];
    const __m128i m4 = _mm_set1_epi8(0xF);
    const __m256i m2 = _mm256_set1_epi8(3);
    for (int64_t b = 0; b < K / 256; b++, p += 84, x += 256) {
        __m128i sc = _mm_loadu_si128((const __m128i *)p);
        scale16_i8(_mm_and_si128(sc, m4), f16_at(p + 80), dl);
        scale16_i8(_mm_and_si128(_mm_srli_epi16(sc, 4), m4), f16_at(p + 82), ml);
        for (int h = 0; h < 2; h++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(p + 16 + 32 * h));
            for (int s = 0; s < 4; s++, v = _mm256_srli_epi16(v, 2)) {
                __m256i q = _mm256_and_si256(v, m2);
                __m128i q0 = _mm256_castsi256_si128(q), q1 = _mm256_extracti128_si256(q, 1);
                int j = 8 * h + 2 * s;
                const float *xs = x + 128 * h + 32 * s;
                __m256 d0 = _mm256_broadcast_ss(dl + j), m0 = _mm256_broadcast_ss(ml + j);
                __m256 d1 = _mm256_broadcast_ss(dl + j + 1), m1 = _mm256_broadcast_ss(ml + j + 1);
                a0 = _mm256_fmadd_ps(_mm256_fmsub_ps(d0, i8_to_f(q0), m0), loadx(xs), a0);
                a1 = _mm256_fmadd_ps(_mm256_fmsub_ps(d0, i8_to_f(_mm_unpackhi_epi64(q0, q0)), m0), loadx(xs + 8), a1);
                a2 = _mm256_fmadd_ps(_mm256_fmsub_ps(d1, i8_to_f(q1), m1), loadx(xs + 16), a2);
                a3 = _mm256_fmadd_ps(_mm256_fmsub_ps(d1, i8_to_f(_mm_unpackhi_epi64(q1, q1)), m1), loadx(xs + 24), a3);
            }
        }
    }
    return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

/* Q3_K's 16 signed 6-bit scales from 12 bytes: low nibbles are bytes 0-7 (low, then
 * high nibbles); the top two bits of scale s are bits 2*(s/4) of byte 8 + s%4. */
AVX2 static inline __m128i q3_k_scales(const uint8_t *sc) {
    const __m128i m4 = _mm_set1_epi8(0xF);
    __m128i v = _mm_loadl_epi64((const __m128i *)sc);
    __m128i lo = _mm_unpacklo_epi64(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
    uint32_t t;
    memcpy(&t, sc + 8, 4);
    __m128i hi = _mm_srlv_epi32(_mm_set1_epi32((int)t), _mm_setr_epi32(0, 2, 4, 6));
    hi = _mm_slli_epi16(_mm_and_si128(hi, _mm_set1_epi8(3)), 4);
    return _mm_sub_epi8(_mm_or_si128(lo, hi), _mm_set1_epi8(32));
}

/* Q3_K (110 B): hmask[32], qs[64], scales[12], f16 d. Low bits as Q2_K; bit 4h+s of
 * hmask[l] is the high bit of chunk s of half h (clear: subtract 4). */
AVX2 static float dot_q3_k(int64_t K, const void *w, const float *x, float *scratch) {
    (void)scratch;
    const uint8_t *p = w;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    _Alignas(32) float dl[16];
    const __m256i m2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
    for (int64_t b = 0; b < K / 256; b++, p += 110, x += 256) {
        scale16_i8(q3_k_scales(p + 96), f16_at(p + 108), dl);
        __m256i hm = _mm256_loadu_si256((const __m256i *)p);
        for (int h = 0; h < 2; h++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(p + 32 + 32 * h));
            for (int s = 0; s < 4; s++, v = _mm256_srli_epi16(v, 2), hm = _mm256_srli_epi16(hm, 1)) {
                __m256i hb = _mm256_slli_epi16(_mm256_and_si256(hm, one), 2);
                __m256i q = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(v, m2), hb), four);
                int j = 8 * h + 2 * s;
                const float *xs = x + 128 * h + 32 * s;
                a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(dl + j), dot16(_mm256_castsi256_si128(q), xs), a0);
                a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(dl + j + 1), dot16(_mm256_extracti128_si256(q, 1), xs + 16), a1);
            }
        }
    }
    return hsum(_mm256_add_ps(a0, a1));
}

/* Q4_K/Q5_K: 8 unsigned 6-bit scales and mins in 12 bytes, times d and dmin. */
static inline void k4_scales(const uint8_t *q, float d, float dmin, float *dl, float *ml) {
    for (int j = 0; j < 8; j++) {
        int sc, m;
        if (j < 4) {
            sc = q[j] & 63;
            m = q[j + 4] & 63;
        } else {
            sc = (q[j + 4] & 0xF) | (q[j - 4] >> 6) << 4;
            m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
        }
        dl[j] = d * (float)sc;
        ml[j] = dmin * (float)m;
    }
}

/* Q4_K (144 B): f16 d, f16 dmin, scales[12], qs[128]. 32 bytes of qs hold sub-block
 * 2c (low nibbles) and 2c+1 (high). sum w*x = sum_j dl_j*sum(q*x) - ml_j*sum(x). */
AVX2 static float dot_q4_k(int64_t K, const void *w, const float *x, float *scratch) {
    (void)scratch;
    const uint8_t *p = w;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, am = a0;
    float dl[8], ml[8];
    const __m256i m4 = _mm256_set1_epi8(0xF);
    for (int64_t b = 0; b < K / 256; b++, p += 144, x += 256) {
        k4_scales(p + 4, f16_at(p), f16_at(p + 2), dl, ml);
        for (int c = 0; c < 4; c++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(p + 16 + 32 * c));
            const float *xs = x + 64 * c;
            a0 = _mm256_fmadd_ps(_mm256_set1_ps(dl[2 * c]), dot32(_mm256_and_si256(v, m4), xs), a0);
            a1 = _mm256_fmadd_ps(_mm256_set1_ps(dl[2 * c + 1]), dot32(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), xs + 32), a1);
            am = _mm256_fmadd_ps(_mm256_set1_ps(ml[2 * c]), sum32(xs), am);
            am = _mm256_fmadd_ps(_mm256_set1_ps(ml[2 * c + 1]), sum32(xs + 32), am);
        }
    }
    return hsum(_mm256_sub_ps(_mm256_add_ps(a0, a1), am));
}

/* Q5_K (176 B): f16 d, f16 dmin, scales[12], qh[32], qs[128]. As Q4_K; bit j of qh[l]
 * is bit 4 of value l of sub-block j. */
AVX2 static float dot_q5_k(int64_t K, const void *w, const float *x, float *scratch) {
    (void)scratch;
    const uint8_t *p = w;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, am = a0;
    float dl[8], ml[8];
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    for (int64_t b = 0; b < K / 256; b++, p += 176, x += 256) {
        k4_scales(p + 4, f16_at(p), f16_at(p + 2), dl, ml);
        __m256i qh = _mm256_loadu_si256((const __m256i *)(p + 16));
        for (int c = 0; c < 4; c++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(p + 48 + 32 * c));
            __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(qh, one), 4);
            __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), one), 4);
            qh = _mm256_srli_epi16(qh, 2);
            __m256i q0 = _mm256_or_si256(_mm256_and_si256(v, m4), h0);
            __m256i q1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), h1);
            const float *xs = x + 64 * c;
            a0 = _mm256_fmadd_ps(_mm256_set1_ps(dl[2 * c]), dot32(q0, xs), a0);
            a1 = _mm256_fmadd_ps(_mm256_set1_ps(dl[2 * c + 1]), dot32(q1, xs + 32), a1);
            am = _mm256_fmadd_ps(_mm256_set1_ps(ml[2 * c]), sum32(xs), am);
            am = _mm256_fmadd_ps(_mm256_set1_ps(ml[2 * c + 1]), sum32(xs + 32), am);
        }
    }
    return hsum(_mm256_sub_ps(_mm256_add_ps(a0, a1), am));
}

/* Q6_K (210 B): ql[128], qh[64], int8 scales[16], f16 d. In half h, chunk c (32
 * values) takes nibble c/2 of ql[64h + 32(c%2) + l] and bits 2c of qh[32h + l]. */
AVX2 static float dot_q6_k(int64_t K, const void *w, const float *x, float *scratch) {
    (void)scratch;
    const uint8_t *p = w;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    _Alignas(32) float dl[16];
    const __m256i m4 = _mm256_set1_epi8(0xF), m2 = _mm256_set1_epi8(3), off = _mm256_set1_epi8(32);
    for (int64_t b = 0; b < K / 256; b++, p += 210, x += 256) {
        scale16_i8(_mm_loadu_si128((const __m128i *)(p + 192)), f16_at(p + 208), dl);
        for (int h = 0; h < 2; h++) {
            __m256i la = _mm256_loadu_si256((const __m256i *)(p + 64 * h));
            __m256i lb = _mm256_loadu_si256((const __m256i *)(p + 64 * h + 32));
            __m256i hv = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h));
            for (int c = 0; c < 4; c++, hv = _mm256_srli_epi16(hv, 2)) {
                __m256i lo = c & 1 ? lb : la;
                if (c >= 2) lo = _mm256_srli_epi16(lo, 4);
                __m256i q = _mm256_or_si256(_mm256_and_si256(lo, m4), _mm256_slli_epi16(_mm256_and_si256(hv, m2), 4));
                q = _mm256_sub_epi8(q, off);
                int j = 8 * h + 2 * c;
                const float *xs = x + 128 * h + 32 * c;
                a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(dl + j), dot16(_mm256_castsi256_si128(q), xs), a0);
                a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(dl + j + 1), dot16(_mm256_extracti128_si256(q, 1), xs + 16), a1);
            }
        }
    }
    return hsum(_mm256_add_ps(a0, a1));
}

/* ---- MLX affine blocks (core/mlx.h): f16 scale s, f16 bias c, 32 codes LSB-first.
 * Eight codes span `bits` whole bytes from byte bits*g, so each group of 8 is shifted
 * out of a broadcast 32-bit word (6 bits: two words of 4 codes each) into int32 lanes;
 * words are read where a load stays inside the codes, the shifts make up the offset. ---- */

AVX2 static inline __m256i bcast32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* Codes 8g..8g+7 of the block's code bytes q as 8 x int32. */
AVX2 static inline __m256i mlx_group(int bits, const uint8_t *q, int g) {
    __m256i w, sh;
    switch (bits) {
    case 2: /* groups 2h and 2h+1 share the word at 4h */
        w = bcast32(q + 4 * (g / 2));
        sh = g % 2 ? _mm256_setr_epi32(16, 18, 20, 22, 24, 26, 28, 30) : _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
        break;
    case 3: /* the last group's word starts a byte early */
        w = bcast32(q + (g == 3 ? 8 : 3 * g));
        sh = g == 3 ? _mm256_setr_epi32(8, 11, 14, 17, 20, 23, 26, 29) : _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21);
        break;
    case 4:
        w = bcast32(q + 4 * g);
        sh = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
        break;
    case 6: /* codes 0-3 from the word at 6g, codes 4-7 from bits 8.. of the word at 6g+2 */
        w = _mm256_blend_epi32(bcast32(q + 6 * g), bcast32(q + 6 * g + 2), 0xF0);
        sh = _mm256_setr_epi32(0, 6, 12, 18, 8, 14, 20, 26);
        break;
    default: /* 8 */
        return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(q + 8 * g)));
    }
    return _mm256_and_si256(_mm256_srlv_epi32(w, sh), _mm256_set1_epi32((1 << bits) - 1));
}

/* acc += s * sum(q x) + c * sum(x) over one block. */
AVX2 static inline __m256 mlx_blk(int bits, const uint8_t *p, const float *x, __m256 acc) {
    const uint8_t *q = p + 4;
    __m256 qa = _mm256_mul_ps(_mm256_cvtepi32_ps(mlx_group(bits, q, 0)), loadx(x));
    __m256 qb = _mm256_mul_ps(_mm256_cvtepi32_ps(mlx_group(bits, q, 2)), loadx(x + 16));
    qa = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mlx_group(bits, q, 1)), loadx(x + 8), qa);
    qb = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mlx_group(bits, q, 3)), loadx(x + 24), qb);
    __m256 t = _mm256_mul_ps(_mm256_set1_ps(f16_at(p + 2)), sum32(x));
    t = _mm256_fmadd_ps(_mm256_set1_ps(f16_at(p)), _mm256_add_ps(qa, qb), t);
    return _mm256_add_ps(acc, t);
}

#define MLX_BLK(B) \
    AVX2 static inline __m256 mlx##B##_blk(const uint8_t *p, const float *x, __m256 acc) { return mlx_blk(B, p, x, acc); }
MLX_BLK(2) MLX_BLK(3) MLX_BLK(6) MLX_BLK(8)

BLOCKS32(dot_mlx_q2, mlx2_blk, 12)
BLOCKS32(dot_mlx_q3, mlx3_blk, 16)
BLOCKS32(dot_mlx_q6, mlx6_blk, 28)
BLOCKS32(dot_mlx_q8, mlx8_blk, 36)

const ak_dot_fn ak_dot_avx2[AK_DTYPE_COUNT] = {
    [AK_F32] = dot_f32,   [AK_F16] = dot_f16,   [AK_BF16] = dot_bf16, [AK_Q4_0] = dot_q4_0,
    [AK_Q4_1] = dot_q4_1, [AK_Q5_0] = dot_q5_0, [AK_Q5_1] = dot_q5_1, [AK_Q8_0] = dot_q8_0,
    [AK_Q2_K] = dot_q2_k, [AK_Q3_K] = dot_q3_k, [AK_Q4_K] = dot_q4_k, [AK_Q5_K] = dot_q5_k,
    [AK_Q6_K] = dot_q6_k, [AK_MLX_Q2] = dot_mlx_q2, [AK_MLX_Q3] = dot_mlx_q3,
    [AK_MLX_Q6] = dot_mlx_q6, [AK_MLX_Q8] = dot_mlx_q8,
};

/* ---- row dequantizers (dequant.c): the codes decoded as above, then value = d*q
 * (+ m) as one multiply and one add, in the reference's order (core/quants.c, core/
 * mlx.c), so every float is bit-identical to the reference's. (The products d*q are
 * exact in float, at most 23 significant bits, so even a fused form would agree.) ---- */

/* 16 signed bytes q -> d*q. */
AVX2 static inline void st16_mul(__m128i q, __m256 d, float *dst) {
    _mm256_storeu_ps(dst, _mm256_mul_ps(d, i8_to_f(q)));
    _mm256_storeu_ps(dst + 8, _mm256_mul_ps(d, i8_to_f(_mm_unpackhi_epi64(q, q))));
}

/* 16 bytes q (< 128) -> d*q + m. */
AVX2 static inline void st16_add(__m128i q, __m256 d, __m256 m, float *dst) {
    _mm256_storeu_ps(dst, _mm256_add_ps(_mm256_mul_ps(d, i8_to_f(q)), m));
    _mm256_storeu_ps(dst + 8, _mm256_add_ps(_mm256_mul_ps(d, i8_to_f(_mm_unpackhi_epi64(q, q))), m));
}

/* 16 bytes q (< 128) -> d*q - m. */
AVX2 static inline void st16_sub(__m128i q, __m256 d, __m256 m, float *dst) {
    _mm256_storeu_ps(dst, _mm256_sub_ps(_mm256_mul_ps(d, i8_to_f(q)), m));
    _mm256_storeu_ps(dst + 8, _mm256_sub_ps(_mm256_mul_ps(d, i8_to_f(_mm_unpackhi_epi64(q, q))), m));
}

AVX2 static inline __m128i lo128(__m256i v) { return _mm256_castsi256_si128(v); }
AVX2 static inline __m128i hi128(__m256i v) { return _mm256_extracti128_si256(v, 1); }

AVX2 static void dq_f16(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, f16x8(h + i));
    for (; i < n; i++) { uint16_t v; memcpy(&v, h + i, 2); dst[i] = ak_f16_to_f32(v); }
}

AVX2 static void dq_bf16(const void *src, float *dst, int64_t n) {
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, bf16x8(h + i));
    for (; i < n; i++) { uint16_t v; memcpy(&v, h + i, 2); dst[i] = ak_bf16_to_f32(v); }
}

AVX2 static void dq_q4_0(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 32; b++, p += 18, dst += 32) {
        __m256i q = _mm256_sub_epi8(nibbles32(p + 2), _mm256_set1_epi8(8));
        __m256 d = _mm256_set1_ps(f16_at(p));
        st16_mul(lo128(q), d, dst);
        st16_mul(hi128(q), d, dst + 16);
    }
}

AVX2 static void dq_q4_1(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 32; b++, p += 20, dst += 32) {
        __m256i q = nibbles32(p + 4);
        __m256 d = _mm256_set1_ps(f16_at(p)), m = _mm256_set1_ps(f16_at(p + 2));
        st16_add(lo128(q), d, m, dst);
        st16_add(hi128(q), d, m, dst + 16);
    }
}

AVX2 static void dq_q5_0(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 32; b++, p += 22, dst += 32) {
        __m256i q = _mm256_or_si256(nibbles32(p + 6), bit4_from_bits(p + 2));
        q = _mm256_sub_epi8(q, _mm256_set1_epi8(16));
        __m256 d = _mm256_set1_ps(f16_at(p));
        st16_mul(lo128(q), d, dst);
        st16_mul(hi128(q), d, dst + 16);
    }
}

AVX2 static void dq_q5_1(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 32; b++, p += 24, dst += 32) {
        __m256i q = _mm256_or_si256(nibbles32(p + 8), bit4_from_bits(p + 4));
        __m256 d = _mm256_set1_ps(f16_at(p)), m = _mm256_set1_ps(f16_at(p + 2));
        st16_add(lo128(q), d, m, dst);
        st16_add(hi128(q), d, m, dst + 16);
    }
}

AVX2 static void dq_q8_0(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 32; b++, p += 34, dst += 32) {
        __m256 d = _mm256_set1_ps(f16_at(p));
        st16_mul(_mm_loadu_si128((const __m128i *)(p + 2)), d, dst);
        st16_mul(_mm_loadu_si128((const __m128i *)(p + 18)), d, dst + 16);
    }
}

/* Q2_K: dl = d*sc and ml = dmin*m per 16 values (scale16_i8 multiplies as the
 * reference does), then dl*q - ml; walk as dot_q2_k. */
AVX2 static void dq_q2_k(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    _Alignas(32) float dl[16], ml[16];
    const __m128i m4 = _mm_set1_epi8(0xF);
    const __m256i m2 = _mm256_set1_epi8(3);
    for (int64_t b = 0; b < n / 256; b++, p += 84, dst += 256) {
        __m128i sc = _mm_loadu_si128((const __m128i *)p);
        scale16_i8(_mm_and_si128(sc, m4), f16_at(p + 80), dl);
        scale16_i8(_mm_and_si128(_mm_srli_epi16(sc, 4), m4), f16_at(p + 82), ml);
        for (int h = 0; h < 2; h++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(p + 16 + 32 * h));
            for (int s = 0; s < 4; s++, v = _mm256_srli_epi16(v, 2)) {
                __m256i q = _mm256_and_si256(v, m2);
                int j = 8 * h + 2 * s;
                float *o = dst + 128 * h + 32 * s;
                st16_sub(lo128(q), _mm256_broadcast_ss(dl + j), _mm256_broadcast_ss(ml + j), o);
                st16_sub(hi128(q), _mm256_broadcast_ss(dl + j + 1), _mm256_broadcast_ss(ml + j + 1), o + 16);
            }
        }
    }
}

AVX2 static void dq_q3_k(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    _Alignas(32) float dl[16];
    const __m256i m2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
    for (int64_t b = 0; b < n / 256; b++, p += 110, dst += 256) {
        scale16_i8(q3_k_scales(p + 96), f16_at(p + 108), dl);
        __m256i hm = _mm256_loadu_si256((const __m256i *)p);
        for (int h = 0; h < 2; h++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(p + 32 + 32 * h));
            for (int s = 0; s < 4; s++, v = _mm256_srli_epi16(v, 2), hm = _mm256_srli_epi16(hm, 1)) {
                __m256i hb = _mm256_slli_epi16(_mm256_and_si256(hm, one), 2);
                __m256i q = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(v, m2), hb), four);
                int j = 8 * h + 2 * s;
                float *o = dst + 128 * h + 32 * s;
                st16_mul(lo128(q), _mm256_broadcast_ss(dl + j), o);
                st16_mul(hi128(q), _mm256_broadcast_ss(dl + j + 1), o + 16);
            }
        }
    }
}

/* Q4_K (five 0) and Q5_K (five 1, qh at +16, qs at +48). */
AVX2 static inline void dq_q45_k(const uint8_t *p, float *dst, int64_t n, int five) {
    float dl[8], ml[8];
    const int bytes = five ? 176 : 144, qs_at = five ? 48 : 16;
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    for (int64_t b = 0; b < n / 256; b++, p += bytes, dst += 256) {
        k4_scales(p + 4, f16_at(p), f16_at(p + 2), dl, ml);
        __m256i qh = five ? _mm256_loadu_si256((const __m256i *)(p + 16)) : _mm256_setzero_si256();
        for (int c = 0; c < 4; c++, qh = _mm256_srli_epi16(qh, 2)) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(p + qs_at + 32 * c));
            __m256i q0 = _mm256_and_si256(v, m4), q1 = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            if (five) {
                q0 = _mm256_or_si256(q0, _mm256_slli_epi16(_mm256_and_si256(qh, one), 4));
                q1 = _mm256_or_si256(q1, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), one), 4));
            }
            float *o = dst + 64 * c;
            __m256 d0 = _mm256_set1_ps(dl[2 * c]), m0 = _mm256_set1_ps(ml[2 * c]);
            __m256 d1 = _mm256_set1_ps(dl[2 * c + 1]), m1 = _mm256_set1_ps(ml[2 * c + 1]);
            st16_sub(lo128(q0), d0, m0, o);
            st16_sub(hi128(q0), d0, m0, o + 16);
            st16_sub(lo128(q1), d1, m1, o + 32);
            st16_sub(hi128(q1), d1, m1, o + 48);
        }
    }
}

AVX2 static void dq_q4_k(const void *src, float *dst, int64_t n) { dq_q45_k(src, dst, n, 0); }
AVX2 static void dq_q5_k(const void *src, float *dst, int64_t n) { dq_q45_k(src, dst, n, 1); }

AVX2 static void dq_q6_k(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    _Alignas(32) float dl[16];
    const __m256i m4 = _mm256_set1_epi8(0xF), m2 = _mm256_set1_epi8(3), off = _mm256_set1_epi8(32);
    for (int64_t b = 0; b < n / 256; b++, p += 210, dst += 256) {
        scale16_i8(_mm_loadu_si128((const __m128i *)(p + 192)), f16_at(p + 208), dl);
        for (int h = 0; h < 2; h++) {
            __m256i la = _mm256_loadu_si256((const __m256i *)(p + 64 * h));
            __m256i lb = _mm256_loadu_si256((const __m256i *)(p + 64 * h + 32));
            __m256i hv = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h));
            for (int c = 0; c < 4; c++, hv = _mm256_srli_epi16(hv, 2)) {
                __m256i lo = c & 1 ? lb : la;
                if (c >= 2) lo = _mm256_srli_epi16(lo, 4);
                __m256i q = _mm256_or_si256(_mm256_and_si256(lo, m4), _mm256_slli_epi16(_mm256_and_si256(hv, m2), 4));
                q = _mm256_sub_epi8(q, off);
                int j = 8 * h + 2 * c;
                float *o = dst + 128 * h + 32 * c;
                st16_mul(lo128(q), _mm256_broadcast_ss(dl + j), o);
                st16_mul(hi128(q), _mm256_broadcast_ss(dl + j + 1), o + 16);
            }
        }
    }
}

/* MLX: s*q + c per group of 8. */
AVX2 static inline void dq_mlx(int bits, const uint8_t *p, float *dst, int64_t n) {
    const int bytes = 4 + 4 * bits;
    for (int64_t b = 0; b < n / 32; b++, p += bytes, dst += 32) {
        __m256 s = _mm256_set1_ps(f16_at(p)), c = _mm256_set1_ps(f16_at(p + 2));
        for (int g = 0; g < 4; g++)
            _mm256_storeu_ps(dst + 8 * g, _mm256_add_ps(_mm256_mul_ps(s, _mm256_cvtepi32_ps(mlx_group(bits, p + 4, g))), c));
    }
}

#define DQ_MLX(B) \
    AVX2 static void dq_mlx_q##B(const void *src, float *dst, int64_t n) { dq_mlx(B, src, dst, n); }
DQ_MLX(2) DQ_MLX(3) DQ_MLX(6) DQ_MLX(8)

const ak_dequant_fn ak_dequant_avx2[AK_DTYPE_COUNT] = {
    [AK_F16] = dq_f16,     [AK_BF16] = dq_bf16,   [AK_Q4_0] = dq_q4_0,   [AK_Q4_1] = dq_q4_1,
    [AK_Q5_0] = dq_q5_0,   [AK_Q5_1] = dq_q5_1,   [AK_Q8_0] = dq_q8_0,   [AK_Q2_K] = dq_q2_k,
    [AK_Q3_K] = dq_q3_k,   [AK_Q4_K] = dq_q4_k,   [AK_Q5_K] = dq_q5_k,   [AK_Q6_K] = dq_q6_k,
    [AK_MLX_Q2] = dq_mlx_q2, [AK_MLX_Q3] = dq_mlx_q3, [AK_MLX_Q6] = dq_mlx_q6,
    [AK_MLX_Q8] = dq_mlx_q8,
};
#else
typedef int ak_dot_avx2_unused;
#endif
