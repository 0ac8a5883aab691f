/* The fifth bits of 32 Q5 codes (bit i of v) spread to bytes: 0x10 in byte i where set,
 * else 0, ready to OR onto the low nibbles. One copy for the AVX2 row kernels, the int8
 * row kernels and the panels (callers with wider targets inline it). */
#ifndef AK_CPU_Q5BITS_H
#define AK_CPU_Q5BITS_H
#if defined(__x86_64__)
#include <immintrin.h>
#include <stdint.h>

__attribute__((target("avx2"))) static inline __m256i ak_q5_bit4_avx2(uint32_t v) {
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i sel = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)v), spread);
    b = _mm256_cmpeq_epi8(_mm256_and_si256(b, sel), sel);
    return _mm256_and_si256(b, _mm256_set1_epi8(0x10));
}
#endif
#endif
