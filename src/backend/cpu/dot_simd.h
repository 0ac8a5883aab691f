/* SIMD dot kernels, one table per instruction set (dot_avx2.c, dot_avx512.c), indexed
 * by dtype; a NULL entry means that set has no kernel for the type. dot.c picks. */
#ifndef AK_DOT_SIMD_H
#define AK_DOT_SIMD_H
#include "backend/cpu/cpu.h"

#if defined(__x86_64__)
extern const ak_dot_fn ak_dot_avx2[AK_DTYPE_COUNT];
extern const ak_dot_fn ak_dot_avx512[AK_DTYPE_COUNT];
float ak_dot_f32_avx2(int64_t K, const float *a, const float *b);
float ak_dot_f32_avx512(int64_t K, const float *a, const float *b);
/* Row dequantizers (dequant.c picks), bit-identical to ak_dtype_info[t].dequant. */
extern const ak_dequant_fn ak_dequant_avx2[AK_DTYPE_COUNT];
#endif

#endif
