/* The int8-activation kernels of dotq_x86.c, one set per instruction set. */
#ifndef AK_DOTQ_SIMD_H
#define AK_DOTQ_SIMD_H
#include "backend/cpu/cpu.h"

#if defined(__x86_64__)
#define AK_DOTQ_DECL(SFX)                                                                    \
    extern const ak_dotq_fn ak_dotq_##SFX[AK_DTYPE_COUNT];                                   \
    void ak_gemm_q8_tile_##SFX(int64_t K, const ak_prow *w, int mr, const ak_xq *x, int nr, \
                               float *out, int ldo);
AK_DOTQ_DECL(avx2)
AK_DOTQ_DECL(vnni512)
AK_DOTQ_DECL(avxvnni)
void ak_xq_quantize_avx2(const float *x, int64_t K, ak_xq *o);
void ak_xq_dequant_avx2(const float *x, int64_t K, float *xh);
#endif

#endif
