/* The CPU backend through its interface: a GEMV table encoded over imported weights,
 * then new weights imported at the same address (as a freed and reallocated buffer
 * would be) and a new table encoded: it must multiply by the new weights, not by
 * panels packed from the old ones. */
#include "backend/backend.h"
#include "core/dtype.h"
#include "core/kernels.h"
#include "core/table.h"
#include "test_util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 99;

/* y = W x through the backend, W (N x K F32) at the start of the imported host buffer. */
static double run_gemv(ak_backend *be, float *w, int K, int N, const float *x, float *y) {
    ak_err err = {{0}};
    void *bufs[AK_BUF_COUNT] = {0};
    ak_status st = be->buf_import(be, w, (size_t)K * N * 4, &bufs[AK_BUF_WEIGHTS], &err);
    for (int i = 1; i < AK_BUF_COUNT && !st; i++) st = be->buf_alloc(be, (size_t)(K > N ? K : N) * 4, &bufs[i], &err);
    if (!st) st = be->buf_write(be, bufs[AK_BUF_XN], 0, x, (size_t)K * 4, &err);
    ak_table tb = {0};
    ak_p_mm p = {.n = 1, .K = K, .nseg = 1, .N = {N}, .dtype = {AK_F32}, .ld_x = K, .ld_y = N};
    ak_cmd *c = ak_table_push(&tb, AK_K_GEMV, &p, sizeof p, "mm");
    CHECK(c != NULL, "table push");
    for (int s = 0; c && s < 3; s++) ak_cmd_bind(c, s, AK_BUF_WEIGHTS, 0);
    if (c) {
        ak_cmd_bind(c, 3, AK_BUF_XN, 0);
        ak_cmd_bind(c, 4, AK_BUF_QKV, 0);
        ak_cmd_bind(c, 5, AK_BUF_WEIGHTS, 0);
    }
    tb.max_rows = 1;
    void *enc = NULL;
    ak_run r = {.pos = 0, .n = 1, .steps = 1};
    if (!st) st = be->encode(be, &tb, bufs, &enc, &err);
    if (!st) st = be->run(be, enc, &r, &err);
    if (!st) st = be->buf_read(be, bufs[AK_BUF_QKV], 0, y, (size_t)N * 4, &err);
    CHECK(st == AK_OK, "gemv: %s", err.msg);
    if (enc) be->encoded_free(be, enc);
    for (int i = 1; i < AK_BUF_COUNT; i++) if (bufs[i]) be->buf_free(be, bufs[i]);
    ak_table_free(&tb);
    double worst = 0;
    for (int j = 0; j < N; j++) {
        double ref = 0;
        for (int k = 0; k < K; k++) ref += (double)w[(size_t)j * K + k] * x[k];
        double d = fabs(y[j] - ref) / (1 + fabs(ref));
        if (d > worst) worst = d;
    }
    return worst;
}

int main(void) {
    ak_err err = {{0}};
    ak_backend *be = NULL;
    if (ak_backend_cpu_create(2, &be, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    const int K = 96, N = 37;   /* N not a multiple of the panel height */
    float *w = malloc((size_t)K * N * 4), *x = malloc((size_t)K * 4), *y = malloc((size_t)N * 4);
    for (int k = 0; k < K; k++) x[k] = ak_rand_f(&rng);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < K * N; i++) w[i] = ak_rand_f(&rng);
        double d = run_gemv(be, w, K, N, x, y);
        CHECK(d < 1e-5, "round %d: the GEMV over weights imported at a reused address is off by %.3g", round, d);
        printf("round %d: max rel %.2e\n", round, d);
    }
    free(w);
    free(x);
    free(y);
    be->destroy(be);
    return ak_test_done();
}
