/* AVX-512 (F, BW, VL) dot kernels: as dot_avx2.c, but 16 decoded values widen to one
 * 512-bit float vector, tails of the float types use masked loads, and the Q5 high
 * bits are applied with byte masks. Types left NULL in the table use the AVX2 kernel
 * (they measured no faster at 512 bits on Zen 4). */
#include "backend/cpu/dot_simd.h"
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

AVX512 static inline float f16_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

AVX512 static inline __m512 lx(const float *x) { return _mm512_loadu_ps(x); }

/* 16 signed bytes as 16 floats. */
AVX512 static inline __m512 i8_to_f(__m128i q) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)); }

/* sum q*x over 32 values: q0 holds values 0-15, q1 values 16-31. */
AVX512 static inline __m512 dot32(__m128i q0, __m128i q1, const float *x) {
    return _mm512_fmadd_ps(i8_to_f(q1), lx(x + 16), _mm512_mul_ps(i8_to_f(q0), lx(x)));
}

AVX512 static inline __m512 sum32(const float *x) { return _mm512_add_ps(lx(x), lx(x + 16)); }

AVX512 static inline __m128i lo_nib(__m128i v) { return _mm_and_si128(v, _mm_set1_epi8(0xF)); }
AVX512 static inline __m128i hi_nib(__m128i v) { return _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0xF)); }
AVX512 static inline __m128i ld16(const uint8_t *p) { return _mm_loadu_si128((const __m128i *)p); }

/* ---- float types ---- */

AVX512 float ak_dot_f32_avx512(int64_t K, const float *a, const float *b) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 64 <= K; i += 64) {
        s0 = _mm512_fmadd_ps(lx(a + i), lx(b + i), s0);
        s1 = _mm512_fmadd_ps(lx(a + i + 16), lx(b + i + 16), s1);
        s2 = _mm512_fmadd_ps(lx(a + i + 32), lx(b + i + 32), s2);
        s3 = _mm512_fmadd_ps(lx(a + i + 48), lx(b + i + 48), s3);
    }
    for (; i + 16 <= K; i += 16) s0 = _mm512_fmadd_ps(lx(a + i), lx(b + i), s0);
    if (i < K) {
        __mmask16 m = (__mmask16)((1u << (K - i)) - 1);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

AVX512 static float dot_f32(int64_t K, const void *w, const float *x, float *scratch) {
    (void)scratch;
    return ak_dot_f32_avx512(K, w, x);
}

/* F16 and BF16 stay on AVX2: at 512 bits they measured ~20% slower (Zen 4, 4096x4096). */

/* ---- 32-value blocks ---- */

AVX512 static inline __m512 q4_0_blk(const uint8_t *p, const float *x, __m512 acc) {
    __m128i v = ld16(p + 2), off = _mm_set1_epi8(8);
    __m512 s = dot32(_mm_sub_epi8(lo_nib(v), off), _mm_sub_epi8(hi_nib(v), off), x);
    return _mm512_fmadd_ps(_mm512_set1_ps(f16_at(p)), s, acc);
}

AVX512 static inline __m512 q4_1_blk(const uint8_t *p, const float *x, __m512 acc) {
    __m128i v = ld16(p + 4);
    acc = _mm512_fmadd_ps(_mm512_set1_ps(f16_at(p)), dot32(lo_nib(v), hi_nib(v), x), acc);
    return _mm512_fmadd_ps(_mm512_set1_ps(f16_at(p + 2)), sum32(x), acc);
}

/* Nibbles of qs plus 16 where bit i of qh is set: value i's fifth bit. */
AVX512 static inline void q5_vals(const uint8_t *qhp, const uint8_t *qs, __m128i *q0, __m128i *q1) {
    uint32_t qh;
    memcpy(&qh, qhp, 4);
    __m128i v = ld16(qs), b4 = _mm_set1_epi8(16);
    *q0 = _mm_mask_add_epi8(lo_nib(v), (__mmask16)qh, lo_nib(v), b4);
    *q1 = _mm_mask_add_epi8(hi_nib(v), (__mmask16)(qh >> 16), hi_nib(v), b4);
}

AVX512 static inline __m512 q5_0_blk(const uint8_t *p, const float *x, __m512 acc) {
    __m128i q0, q1, off = _mm_set1_epi8(16);
    q5_vals(p + 2, p + 6, &q0, &q1);
    __m512 s = dot32(_mm_sub_epi8(q0, off), _mm_sub_epi8(q1, off), x);
    return _mm512_fmadd_ps(_mm512_set1_ps(f16_at(p)), s, acc);
}

AVX512 static inline __m512 q5_1_blk(const uint8_t *p, const float *x, __m512 acc) {
    __m128i q0, q1;
    q5_vals(p + 4, p + 8, &q0, &q1);
    acc = _mm512_fmadd_ps(_mm512_set1_ps(f16_at(p)), dot32(q0, q1, x), acc);
    return _mm512_fmadd_ps(_mm512_set1_ps(f16_at(p + 2)), sum32(x), acc);
}

AVX512 static inline __m512 q8_0_blk(const uint8_t *p, const float *x, __m512 acc) {
    __m512 s = dot32(ld16(p + 2), ld16(p + 18), x);
    return _mm512_fmadd_ps(_mm512_set1_ps(f16_at(p)), s, acc);
}

/* BLK over the K/32 blocks of BYTES bytes, two accumulators. */
#define BLOCKS32(NAME, BLK, BYTES)                                                         \
    AVX512 static float NAME(int64_t K, const void *w, const float *x, float *scratch) {  \
        (void)scratch;                                                                     \
        const uint8_t *p = w;                                                              \
        __m512 a0 = _mm512_setzero_ps(), a1 = a0;                                          \
        int64_t nb = K / 32, b = 0;                                                        \
        for (; b + 2 <= nb; b += 2, p += 2 * (BYTES), x += 64) {                           \
            a0 = BLK(p, x, a0);                                                            \
            a1 = BLK(p + (BYTES), x + 32, a1);                                             \
        }                                                                                  \
        if (b < nb) a0 = BLK(p, x, a0);                                                    \
        return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));                                \
    }

BLOCKS32(dot_q4_0, q4_0_blk, 18)
BLOCKS32(dot_q4_1, q4_1_blk, 20)
BLOCKS32(dot_q5_0, q5_0_blk, 22)
BLOCKS32(dot_q5_1, q5_1_blk, 24)
BLOCKS32(dot_q8_0, q8_0_blk, 34)

/* MLX blocks stay on AVX2: a 512-bit kernel (codes byte-shuffled into 16 int32 lanes)
 * measured 10-20% slower for 2-, 3-, 4- and 8-bit codes and level for 6 bits (Zen 4,
 * and a Xeon). */

/* ---- k-quants (layouts: dot_avx2.c and core/quants.c). Q2_K, Q3_K and Q6_K measured
 * slower at 512 bits on Zen 4 (16-value sub-block scales), so they stay on AVX2. ---- */

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

/* Q4_K (bits 4) and Q5_K (bits 5, qh at +16, qs at +48). */
AVX512 static inline float dot_q45_k(int64_t K, const uint8_t *p, const float *x, int five) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, am = a0;
    float dl[8], ml[8];
    const int bytes = five ? 176 : 144, qs_at = five ? 48 : 16;
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    for (int64_t b = 0; b < K / 256; b++, p += bytes, x += 256) {
        k4_scales(p + 4, f16_at(p), f16_at(p + 2), dl, ml);
        __m256i qh = five ? _mm256_loadu_si256((const __m256i *)(p + 16)) : _mm256_setzero_si256();
        for (int c = 0; c < 4; c++, qh = _mm256_srli_epi16(qh, 2)) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(p + qs_at + 32 * c));
            __m256i q0 = _mm256_and_si256(v, m4), q1 = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            if (five) {
                q0 = _mm256_or_si256(q0, _mm256_slli_epi16(_mm256_and_si256(qh, one), 4));
                q1 = _mm256_or_si256(q1, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), one), 4));
            }
            const float *xs = x + 64 * c;
            __m512 s0 = dot32(_mm256_castsi256_si128(q0), _mm256_extracti128_si256(q0, 1), xs);
            __m512 s1 = dot32(_mm256_castsi256_si128(q1), _mm256_extracti128_si256(q1, 1), xs + 32);
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(dl[2 * c]), s0, a0);
            a1 = _mm512_fmadd_ps(_mm512_set1_ps(dl[2 * c + 1]), s1, a1);
            am = _mm512_fmadd_ps(_mm512_set1_ps(ml[2 * c]), sum32(xs), am);
            am = _mm512_fmadd_ps(_mm512_set1_ps(ml[2 * c + 1]), sum32(xs + 32), am);
        }
    }
    return _mm512_reduce_add_ps(_mm512_sub_ps(_mm512_add_ps(a0, a1), am));
}

AVX512 static float dot_q4_k(int64_t K, const void *w, const float *x, float *scratch) {
    (void)scratch;
    return dot_q45_k(K, w, x, 0);
}

AVX512 static float dot_q5_k(int64_t K, const void *w, const float *x, float *scratch) {
    (void)scratch;
    return dot_q45_k(K, w, x, 1);
}

const ak_dot_fn ak_dot_avx512[AK_DTYPE_COUNT] = {
    [AK_F32] = dot_f32,   [AK_Q4_0] = dot_q4_0,
    [AK_Q4_1] = dot_q4_1, [AK_Q5_0] = dot_q5_0, [AK_Q5_1] = dot_q5_1, [AK_Q8_0] = dot_q8_0,
    [AK_Q4_K] = dot_q4_k, [AK_Q5_K] = dot_q5_k,
};
#else
typedef int ak_dot_avx512_unused;
#endif
