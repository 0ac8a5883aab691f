/* Float-type panels (panel_f.c): for F32, F16 and BF16 at every SIMD level this CPU has
 * (scalar, AVX2, AVX-512), random weights packed in two panel ranges, odd shapes
 * (N = 1, 15, 17, 40, 100; K = 1, 7, 31, 64, 1000, 4097; n = 1, 3, 8, 37, 70, plus a few
 * with n > 240 and n > 516 to cross activation blocks), with and without bias, tight and
 * padded ldx / ldy, the panels computed in two calls split at a random panel (as threads
 * do).
 * Every output is compared with a double-precision sum over the exactly widened weights:
 * |y - ref| <= (K + 4) * 2^-24 * (sum_k |w x| + |bias|), the worst-case bound of an f32
 * summation of K + 1 terms (the kernels only reorder that sum), so the test is not
 * flaky; the worst observed error / magnitude is printed. Every y value outside the
 * n x N result (rows >= N inside ldy, padding) must keep its sentinel, and tight buffers
 * let ASan catch reads or writes past x, y, the packed weights or the scratch.
 *
 * AKUNU_PANEL_BENCH=1 build-pf/tests/test_panel_f: instead of testing, a micro-benchmark
 * (not run by ctest): GFLOP/s of the Llama-3.2-1B shapes (N x K = 2048x2048, 512x2048,
 * 8192x2048, 2048x8192) at n = 512, and GB/s of weights at n = 1, on 1 and 2 threads of
 * the engine's pool (threadpool.h), panels split between threads as the engine does.
 * Best of the repetitions; on 1 thread measured in thread CPU time, so other work on the
 * machine distorts it less. AKUNU_PANEL_BENCH_TYPES=F16,BF16,F32 (default F16),
 * AKUNU_PANEL_BENCH_THREADS=1|2, AKUNU_PANEL_BENCH_N=512|1, AKUNU_PANEL_BENCH_LEVEL=0|1|2,
 * AKUNU_PANEL_BENCH_SECS (seconds per n = 512 shape, default 1.5). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "backend/cpu/cpu.h"
#include "backend/cpu/panel.h"
#include "backend/cpu/threadpool.h"
#include "test_util.h"

static uint64_t rng = 4242;

static int levels[3], nlev;
static void find_levels(void) {
    ak_cpu_detect();
    int simd = ak_cpu_simd;
    nlev = 0;
    levels[nlev++] = 0;
    if (simd >= 1) levels[nlev++] = 1;
    if (simd >= 2) levels[nlev++] = 2;
}

static const ak_dtype ftypes[] = {AK_F32, AK_F16, AK_BF16};

/* Random N x K rows of type t in src; the exact float values in wf. */
static void rand_w(ak_dtype t, int64_t N, int64_t K, void *src, float *wf) {
    for (int64_t i = 0; i < N * K; i++) {
        float v = ak_rand_f(&rng);
        if (t == AK_F32) { ((float *)src)[i] = v; wf[i] = v; }
        else if (t == AK_F16) { uint16_t h = ak_f32_to_f16(v); ((uint16_t *)src)[i] = h; wf[i] = ak_f16_to_f32(h); }
        else { uint16_t h = ak_f32_to_bf16(v); ((uint16_t *)src)[i] = h; wf[i] = ak_bf16_to_f32(h); }
    }
}

static void *xalloc(size_t n) {
    void *p = NULL;
    if (n == 0) return NULL;
    if (posix_memalign(&p, 64, n)) abort();
    return p;
}

#define SENT 1234.5f
static double worst[3];

static void run_case(ak_dtype t, int64_t N, int64_t K, int n, int pad, int ci) {
    size_t es = t == AK_F32 ? 4 : 2;
    int64_t ldx = pad ? K + 3 : K, ldy = pad ? N + 5 : N, np = (N + AK_PANEL_R - 1) / AK_PANEL_R;
    void *src = malloc((size_t)(N * K) * es);
    float *wf = malloc((size_t)(N * K) * 4), *x = malloc((size_t)((n - 1) * ldx + K) * 4);
    float *bias = malloc((size_t)N * 4), *y = malloc((size_t)((n - 1) * ldy + N) * 4);
    size_t yn = (size_t)((n - 1) * ldy + N);
    double *ref = malloc((size_t)n * (size_t)N * 8), *mag = malloc((size_t)n * (size_t)N * 8);
    rand_w(t, N, K, src, wf);
    for (int64_t i = 0; i < (n - 1) * ldx + K; i++) x[i] = ak_rand_f(&rng) * (i % 7 == 0 ? 3.f : 1.f);
    for (int64_t r = 0; r < N; r++) bias[r] = ak_rand_f(&rng);
    for (int i = 0; i < n; i++)
        for (int64_t r = 0; r < N; r++) {
            double s = 0, m = 0;
            for (int64_t k = 0; k < K; k++) {
                double p = (double)wf[r * K + k] * x[i * ldx + k];
                s += p;
                m += fabs(p);
            }
            ref[i * N + r] = s;
            mag[i * N + r] = m;
        }
    size_t pb = ak_panel_f_bytes(t, N, K);
    CHECK(pb == (size_t)(np * AK_PANEL_R * K) * es, "bytes %zu", pb);
    uint8_t *packed = xalloc(pb);
    memset(packed, 0xA5, pb);
    int64_t cut = np > 1 ? 1 + (int64_t)(ak_rand_u32(&rng) % (uint32_t)(np - 1)) : 1;
    ak_panel_f_pack(t, src, N, K, packed, cut, np);
    ak_panel_f_pack(t, src, N, K, packed, 0, cut);
    int padrows_zero = 1;
    for (int64_t r = N; r < np * AK_PANEL_R; r++)
        for (int64_t k = 0; k < K; k++) {
            size_t e = (size_t)(((r / AK_PANEL_R) * K + k) * AK_PANEL_R + r % AK_PANEL_R) * es;
            for (size_t b = 0; b < es; b++) padrows_zero &= packed[e + b] == 0;
        }
    CHECK(padrows_zero, "%s N=%lld K=%lld: rows past N not zero in the panels", ak_dtype_info[t].name, (long long)N,
          (long long)K);
    for (int lv = 0; lv < nlev; lv++) {
        ak_cpu_simd = levels[lv];
        CHECK(ak_panel_f_supported(t, K), "supported");
        for (int wb = 0; wb < 4; wb++) {   /* bias or none; rows as GEMVs or a GEMM's */
            const float *b = wb & 1 ? bias : NULL;
            const bool gemv = wb >> 1;
            for (size_t i = 0; i < yn; i++) y[i] = SENT;
            size_t sb = ak_panel_f_scratch(t, K, n, gemv);
            void *scr = xalloc(sb);
            int64_t split = np > 1 ? (int64_t)(ak_rand_u32(&rng) % (uint32_t)(np + 1)) : (ci & 1);
            ak_panel_f_mm(t, packed, N, K, 0, split, x, ldx, n, y, ldy, b, scr, gemv);
            ak_panel_f_mm(t, packed, N, K, split, np, x, ldx, n, y, ldy, b, scr, gemv);
            free(scr);
            int bad = 0, untouched = 1;
            for (int i = 0; i < n; i++) {
                for (int64_t r = 0; r < N; r++) {
                    double want = ref[i * N + r] + (b ? b[r] : 0), m = mag[i * N + r] + (b ? fabs(b[r]) : 0);
                    double err = fabs(y[i * ldy + r] - want), tol = (double)(K + 4) * ldexp(1, -24) * m + 1e-30;
                    if (!(err <= tol)) {
                        if (bad++ < 3)
                            fprintf(stderr, "  %s lv %d N=%lld K=%lld n=%d bias+2gemv=%d: y[%d][%lld]=%.9g want %.9g\n",
                                    ak_dtype_info[t].name, levels[lv], (long long)N, (long long)K, n, wb, i,
                                    (long long)r, y[i * ldy + r], want);
                    }
                    if (m > 0 && err / m > worst[lv]) worst[lv] = err / m;
                }
                if (i + 1 < n)
                    for (int64_t r = N; r < ldy; r++) untouched &= y[i * ldy + r] == SENT;
            }
            CHECK(!bad, "%s level %d N=%lld K=%lld n=%d bias=%d pad=%d: %d wrong", ak_dtype_info[t].name, levels[lv],
                  (long long)N, (long long)K, n, wb, pad, bad);
            CHECK(untouched, "%s level %d N=%lld K=%lld n=%d: wrote past row N", ak_dtype_info[t].name, levels[lv],
                  (long long)N, (long long)K, n);
        }
    }
    free(src); free(wf); free(x); free(bias); free(y); free(ref); free(mag); free(packed);
}

static void test_shapes(void) {
    static const int64_t Ns[] = {1, 15, 17, 40, 100}, Ks[] = {1, 7, 31, 64, 1000, 4097};
    static const int ns[] = {1, 3, 8, 37, 70};
    int ci = 0;
    for (size_t ti = 0; ti < 3; ti++)
        for (size_t a = 0; a < 5; a++)
            for (size_t b = 0; b < 6; b++)
                for (size_t c = 0; c < 5; c++, ci++) run_case(ftypes[ti], Ns[a], Ks[b], ns[c], ci & 1, ci);
    /* more than one activation block (240 rows; 516 for F16 / BF16 at AVX-512), K slabs
     * with a short tail */
    for (size_t ti = 0; ti < 3; ti++) {
        run_case(ftypes[ti], 33, 300, 241, 1, 1);
        run_case(ftypes[ti], 48, 513, 500, 0, 2);
        run_case(ftypes[ti], 17, 1100, 529, 1, 3);
    }
    for (int lv = 0; lv < nlev; lv++) printf("level %d: worst |y - ref| / sum|w x| = %.3g\n", levels[lv], worst[lv]);
}

/* ---- micro-benchmark (AKUNU_PANEL_BENCH=1) ---- */

typedef struct {
    ak_dtype t;
    const void *w;
    int64_t N, K;
    const float *x;
    int n;
    float *y;
    void **scr;
} bjob;

static void bjob_run(void *ctx, int ith, int nth) {
    bjob *j = ctx;
    int64_t np = (j->N + AK_PANEL_R - 1) / AK_PANEL_R, lo, hi;
    ak_split(np, ith, nth, &lo, &hi);
    ak_panel_f_mm(j->t, j->w, j->N, j->K, lo, hi, j->x, j->K, j->n, j->y, j->N, NULL, j->scr[ith], j->n == 1);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void bench(void) {
    static const int64_t shapes[][2] = {{2048, 2048}, {512, 2048}, {8192, 2048}, {2048, 8192}};
    const char *ty = getenv("AKUNU_PANEL_BENCH_TYPES"), *lv = getenv("AKUNU_PANEL_BENCH_LEVEL");
    ak_cpu_detect();
    if (lv && atoi(lv) < ak_cpu_simd) ak_cpu_simd = atoi(lv);
    double secs = getenv("AKUNU_PANEL_BENCH_SECS") ? atof(getenv("AKUNU_PANEL_BENCH_SECS")) / 1.5 : 1;
    printf("SIMD level %d\n", ak_cpu_simd);
    for (size_t ti = 0; ti < 3; ti++) {
        ak_dtype t = ftypes[ti];
        if (ty ? !strstr(ty, ak_dtype_info[t].name) : t != AK_F16) continue;
        const char *ths = getenv("AKUNU_PANEL_BENCH_THREADS");
        for (int th = 1; th <= 2; th++) {
            if (ths && atoi(ths) != th) continue;
            ak_pool *pool = ak_pool_create(th);
            for (size_t s = 0; s < 4; s++) {
                int64_t N = shapes[s][0], K = shapes[s][1];
                size_t es = t == AK_F32 ? 4 : 2;
                void *src = malloc((size_t)(N * K) * es);
                float *wf = malloc((size_t)(N * K) * 4);
                rand_w(t, N, K, src, wf);
                free(wf);
                void *pk = xalloc(ak_panel_f_bytes(t, N, K));
                ak_panel_f_pack(t, src, N, K, pk, 0, (N + 15) / 16);
                free(src);
                const char *ns = getenv("AKUNU_PANEL_BENCH_N");
                for (int n = 512; n >= 1; n = n == 512 ? 1 : 0) {
                    if (ns && atoi(ns) != n) continue;
                    float *x = malloc((size_t)(n * K) * 4), *y = malloc((size_t)(n * N) * 4);
                    for (int64_t i = 0; i < n * K; i++) x[i] = ak_rand_f(&rng);
                    void *scr[2] = {xalloc(ak_panel_f_scratch(t, K, n, n == 1) + 64), xalloc(ak_panel_f_scratch(t, K, n, n == 1) + 64)};
                    bjob j = {t, pk, N, K, x, n, y, scr};
                    ak_pool_run(pool, bjob_run, &j);
                    /* best of the repetitions: other work on the machine only slows runs down */
                    double t0 = now(), el, per = 1e30;
                    do {
                        double t1 = now(), c1 = cpu_now();
                        ak_pool_run(pool, bjob_run, &j);
                        /* one thread: its CPU time, which time slices lost to other work do not count */
                        double d = th == 1 ? cpu_now() - c1 : now() - t1;
                        if (d < per) per = d;
                        el = now() - t0;
                    } while (el < (n == 1 ? 0.5 : 1.5) * secs);
                    if (n > 1)
                        printf("%-4s %d thr N=%5lld K=%5lld n=%d: %7.1f GFLOP/s (%.2f ms)\n", ak_dtype_info[t].name, th,
                               (long long)N, (long long)K, n, 2.0 * N * K * n / per * 1e-9, per * 1e3);
                    else
                        printf("%-4s %d thr N=%5lld K=%5lld n=1:   %7.1f GB/s of weights (%.3f ms)\n",
                               ak_dtype_info[t].name, th, (long long)N, (long long)K,
                               (double)ak_panel_f_bytes(t, N, K) / per * 1e-9, per * 1e3);
                    fflush(stdout);
                    free(x); free(y); free(scr[0]); free(scr[1]);
                }
                free(pk);
            }
            ak_pool_free(pool);
        }
    }
}

int main(void) {
    if (getenv("AKUNU_PANEL_BENCH")) { bench(); return 0; }
    find_levels();
    test_shapes();
    return ak_test_done();
}
