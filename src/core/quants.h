/* Reference dequantizers for the ggml block formats other than Q8_0 (which lives in
 * dtype.c), and reference Q8_0 and Q4_0 quantizers (the KV cache's block types). Plain scalar code following the public GGUF
 * block layouts: these are the ground truth every fast kernel is tested against.
 * Every function takes n values, n a multiple of the block size, and reads the blocks
 * byte by byte (little-endian), so they work on any host and any alignment. */
#ifndef AK_QUANTS_H
#define AK_QUANTS_H
#include <stdint.h>

/* 32-value blocks */
void ak_dequant_q4_0(const void *src, float *dst, int64_t n); /* f16 d, 16 B nibbles: d*(q-8) */
void ak_dequant_q4_1(const void *src, float *dst, int64_t n); /* f16 d, f16 m, 16 B: d*q+m */
void ak_dequant_q5_0(const void *src, float *dst, int64_t n); /* f16 d, u32 high bits, 16 B: d*(q-16) */
void ak_dequant_q5_1(const void *src, float *dst, int64_t n); /* f16 d, f16 m, u32, 16 B: d*q+m */
/* 256-value super-blocks (k-quants) */
void ak_dequant_q2_k(const void *src, float *dst, int64_t n);
void ak_dequant_q3_k(const void *src, float *dst, int64_t n);
void ak_dequant_q4_k(const void *src, float *dst, int64_t n);
void ak_dequant_q5_k(const void *src, float *dst, int64_t n);
void ak_dequant_q6_k(const void *src, float *dst, int64_t n);

/* Q8_0 as ggml quantizes it: d = max|x|/127 stored as f16, q = round-half-away(x/d)
 * computed as x * (1/d). n a multiple of 32; writes n/32 * 34 bytes. */
void ak_quantize_q8_0(const float *src, void *dst, int64_t n);
/* Q4_0 as ggml quantizes it: m the value of largest magnitude, d = m / -8 stored as f16,
 * q = min(15, trunc(x * (1/d) + 8.5)). n a multiple of 32; writes n/32 * 18 bytes. */
void ak_quantize_q4_0(const float *src, void *dst, int64_t n);

/* dtype.c's traits table takes its dequantizers from these macros. */
#define AK_DQ_Q4_0 ak_dequant_q4_0
#define AK_DQ_Q4_1 ak_dequant_q4_1
#define AK_DQ_Q5_0 ak_dequant_q5_0
#define AK_DQ_Q5_1 ak_dequant_q5_1
#define AK_DQ_Q2_K ak_dequant_q2_k
#define AK_DQ_Q3_K ak_dequant_q3_k
#define AK_DQ_Q4_K ak_dequant_q4_k
#define AK_DQ_Q5_K ak_dequant_q5_k
#define AK_DQ_Q6_K ak_dequant_q6_k
#endif
