/* ak_cpu_dequant_row against the reference dequantizer, bit for bit, for every dtype at
 * every SIMD level this CPU has: random blocks whose scale fields are any finite f16
 * (subnormal to 65504, so a fused multiply-add or a wrong operation order shows as a
 * changed bit), odd block counts, unaligned source and destination, and no write past
 * the n values. */
#include <stdlib.h>
#include <string.h>
#include "backend/cpu/cpu.h"
#include "backend/cpu/dot_simd.h"
#include "test_util.h"

/* Byte offsets of the f16 scale fields in one block, -1 terminated. */
static const int f16_fields[AK_DTYPE_COUNT][3] = {
    [AK_Q4_0] = {0, -1}, [AK_Q4_1] = {0, 2, -1}, [AK_Q5_0] = {0, -1}, [AK_Q5_1] = {0, 2, -1},
    [AK_Q8_0] = {0, -1}, [AK_Q2_K] = {80, 82, -1}, [AK_Q3_K] = {108, -1}, [AK_Q4_K] = {0, 2, -1},
    [AK_Q5_K] = {0, 2, -1}, [AK_Q6_K] = {208, -1}, [AK_MLX_Q2] = {0, 2, -1}, [AK_MLX_Q3] = {0, 2, -1},
    [AK_MLX_Q6] = {0, 2, -1}, [AK_MLX_Q8] = {0, 2, -1},
};

/* Random f16 bits that are not NaN (F16 weights: inf too; scales: finite only). */
static uint16_t rand_f16(uint64_t *rng, int finite) {
    uint16_t h = (uint16_t)ak_rand_u32(rng);
    if ((h & 0x7c00) == 0x7c00 && (finite || (h & 0x3ff))) h &= (uint16_t)~0x4000;
    return h;
}

static void rand_row(ak_dtype t, int64_t n, uint8_t *w, uint64_t *rng) {
    size_t bytes = ak_dtype_row_bytes(t, n);
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)ak_rand_u32(rng);
    if (t == AK_F32) {
        for (int64_t i = 0; i < n; i++) { float f = ak_rand_f(rng) * 100.f; memcpy(w + 4 * i, &f, 4); }
    } else if (t == AK_F16) {
        for (int64_t i = 0; i < n; i++) { uint16_t h = rand_f16(rng, 0); memcpy(w + 2 * i, &h, 2); }
    } else if (t != AK_BF16) { /* BF16: every bit pattern converts by a shift */
        const ak_dtype_traits *tr = &ak_dtype_info[t];
        for (int64_t b = 0; b < n / tr->block; b++)
            for (int f = 0; f < 3 && f16_fields[t][f] >= 0; f++) {
                uint16_t h = rand_f16(rng, 1);
                memcpy(w + b * tr->block_bytes + f16_fields[t][f], &h, 2);
            }
    }
}

static const char *level_name[3] = {"scalar", "avx2", "avx512"};

static void test_type(ak_dtype t, int max_level, uint64_t *rng) {
    static const int64_t nblocks[] = {1, 2, 3, 5, 7, 16, 33};
    const ak_dtype_traits *tr = &ak_dtype_info[t];
    int bad = 0;
    for (size_t bi = 0; bi < sizeof nblocks / sizeof nblocks[0]; bi++) {
        /* float types: odd lengths too, for the scalar tails */
        int64_t n = nblocks[bi] * (tr->block == 1 ? 8 : tr->block) + (tr->block == 1 ? (int64_t)bi : 0);
        size_t bytes = ak_dtype_row_bytes(t, n);
        uint8_t *wbuf = malloc(bytes + 8);
        float *ref = malloc((size_t)n * 4), *got = malloc(((size_t)n + 8) * 4);
        for (int trial = 0; trial < 6; trial++) {
            int src_off = trial % 4, dst_off = trial % 3; /* bytes, floats */
            uint8_t *w = wbuf + src_off;
            rand_row(t, n, w, rng);
            tr->dequant(w, ref, n);
            for (int lv = 0; lv <= max_level; lv++) {
                ak_cpu_simd = lv;
                float *dst = got + dst_off;
                memset(got, 0xA5, ((size_t)n + 8) * 4);
                ak_cpu_dequant_row(t, w, dst, n);
                int64_t first = -1;
                for (int64_t i = 0; i < n && first < 0; i++)
                    if (memcmp(dst + i, ref + i, 4)) first = i;
                uint8_t guard[4];
                memset(guard, 0xA5, 4);
                int clobber = 0;
                for (int i = 0; i < dst_off; i++) clobber |= memcmp(got + i, guard, 4) != 0;
                for (int64_t i = dst_off + n; i < n + 8; i++) clobber |= memcmp(got + i, guard, 4) != 0;
                CHECK(first < 0, "%s %s n=%lld trial %d: value %lld is %.9g, reference %.9g", tr->name,
                      level_name[lv], (long long)n, trial, (long long)first, first < 0 ? 0 : dst[first],
                      first < 0 ? 0 : ref[first]);
                CHECK(!clobber, "%s %s n=%lld trial %d: wrote outside the row", tr->name, level_name[lv], (long long)n, trial);
                bad += first >= 0 || clobber;
            }
        }
        free(wbuf); free(ref); free(got);
    }
#if defined(__x86_64__)
    /* every type but F32 (a memcpy either way) has a SIMD path to cover */
    if (max_level >= 1 && t != AK_F32) CHECK(ak_dequant_avx2[t] != NULL, "%s: no AVX2 dequantizer", tr->name);
#endif
    printf("%-7s %s\n", tr->name, bad ? "MISMATCH" : "bit-identical");
}

int main(void) {
    ak_cpu_detect();
    int detected = ak_cpu_simd;
    printf("SIMD level %d (%s)\n", detected, level_name[detected]);
    uint64_t rng = 4242;
    for (int t = 0; t < AK_DTYPE_COUNT; t++)
        if (ak_dtype_info[t].dequant) test_type((ak_dtype)t, detected, &rng);
    ak_cpu_simd = detected;
    return ak_test_done();
}
