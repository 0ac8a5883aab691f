/* Instances of dotq_impl.h: AVX2 (maddubs), AVX512-VNNI and AVX-VNNI (vpdpbusd on
 * 256-bit vectors). quant_act.c picks one at run time from ak_cpu_vnni. */
#include "backend/cpu/dotq_simd.h"
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#include "backend/cpu/quant32.h"
#include "backend/cpu/q5bits.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define SFX avx2
#define VNNI 0
#include "backend/cpu/dotq_impl.h"
#undef TGT
#undef SFX
#undef VNNI

#define TGT __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define SFX vnni512
#define VNNI 1
#include "backend/cpu/dotq_impl.h"
#undef TGT
#undef SFX
#undef VNNI

#define TGT __attribute__((target("avx2,fma,f16c,avxvnni")))
#define SFX avxvnni
#define VNNI 2
#include "backend/cpu/dotq_impl.h"
#undef TGT
#undef SFX
#undef VNNI
#else
typedef int ak_dotq_x86_unused;
#endif
