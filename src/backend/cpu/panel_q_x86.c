/* Instances of panel_q_impl.h: AVX-512 VNNI on zmm (16 rows per vector), AVX2 and
 * AVX-VNNI on ymm (8 rows per vector). panel_q.c picks one at run time from ak_cpu_vnni. */
#include "backend/cpu/panel_q.h"
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#include "backend/cpu/quant32.h"
#include "backend/cpu/q5bits.h"

#define TGT __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define SFX vnni512
#define W 16
#define VNNI 1
#include "backend/cpu/panel_q_impl.h"
#undef TGT
#undef SFX
#undef W
#undef VNNI

#define TGT __attribute__((target("avx2,fma,f16c")))
#define SFX avx2
#define W 8
#define VNNI 0
#include "backend/cpu/panel_q_impl.h"
#undef TGT
#undef SFX
#undef W
#undef VNNI

#define TGT __attribute__((target("avx2,fma,f16c,avxvnni")))
#define SFX avxvnni
#define W 8
#define VNNI 2
#include "backend/cpu/panel_q_impl.h"
#undef TGT
#undef SFX
#undef W
#undef VNNI
#else
typedef int ak_panel_q_x86_unused;
#endif
