/* Row dequantization for embedding lookup and the float GEMM: the AVX2 kernels of
 * dot_avx2.c where the level has one, else the reference dequantizer. The kernels
 * round exactly as the reference (one multiply, then one add), so the choice never
 * changes a result (tests/backend/cpu/test_dequant_fast.c checks every bit). */
#include "backend/cpu/cpu.h"
#include "backend/cpu/dot_simd.h"

void ak_cpu_dequant_row(ak_dtype t, const void *src, float *dst, int64_t n) {
    if (ak_cpu_simd < 0) ak_cpu_detect();
#if defined(__x86_64__)
    if (ak_cpu_simd >= 1 && ak_dequant_avx2[t]) {
        ak_dequant_avx2[t](src, dst, n);
        return;
    }
#endif
    ak_dtype_info[t].dequant(src, dst, n);
}
