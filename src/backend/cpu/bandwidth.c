/* Host memory read bandwidth: every pool thread streams its slice of a buffer much
 * larger than the caches; the best of several passes is the machine's roofline. */
#include "backend/cpu/cpu.h"
#include "backend/cpu/threadpool.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

typedef struct { const uint64_t *buf; size_t n; uint64_t sink[64][8]; } bw_job;

#if defined(__x86_64__)
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint64_t *p, size_t n) {
    __m256i a = _mm256_setzero_si256(), b = _mm256_setzero_si256();
    for (size_t i = 0; i + 8 <= n; i += 8) {
        a = _mm256_xor_si256(a, _mm256_load_si256((const __m256i *)(p + i)));
        b = _mm256_xor_si256(b, _mm256_load_si256((const __m256i *)(p + i + 4)));
    }
    a = _mm256_xor_si256(a, b);
    return (uint64_t)_mm256_extract_epi64(a, 0) ^ (uint64_t)_mm256_extract_epi64(a, 3);
}
#endif

static void bw_read(void *ctx, int ith, int nth) {
    bw_job *j = ctx;
    int64_t lo, hi;
    ak_split((int64_t)(j->n / 8), ith, nth, &lo, &hi);
    const uint64_t *p = j->buf + lo * 8;
    size_t n = (size_t)(hi - lo) * 8;
    uint64_t x = 0;
#if defined(__x86_64__)
    if (ak_cpu_simd >= 1) x = read_avx2(p, n);
    else
#endif
        for (size_t i = 0; i < n; i++) x ^= p[i];
    j->sink[ith % 64][0] = x;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

double ak_cpu_read_bandwidth(ak_pool *pool) {
    size_t bytes = (size_t)1 << 30;
    uint64_t *buf = aligned_alloc(64, bytes);
    if (!buf) return 0;
    memset(buf, 1, bytes);   /* fault every page in before timing */
    bw_job *j = calloc(1, sizeof *j);
    if (!j) { free(buf); return 0; }
    j->buf = buf;
    j->n = bytes / 8;
    double best = 0;
    for (int rep = 0; rep < 7; rep++) {
        double t0 = now();
        ak_pool_run(pool, bw_read, j);
        double gbps = (double)bytes / (now() - t0) / 1e9;
        if (gbps > best) best = gbps;
    }
    free(j);
    free(buf);
    return best;
}
