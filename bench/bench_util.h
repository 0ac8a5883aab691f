/* What the benchmark programs under bench/ share: a monotonic clock in seconds, and the
 * median (or another quantile) of a run's samples. */
#ifndef AK_BENCH_UTIL_H
#define AK_BENCH_UTIL_H
#include <stdlib.h>
#include <time.h>

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* v sorted in place */
static inline double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
#endif
