/* Steady-state bandwidth of the CUDA decode GEMV, per matrix shape: a one-step table of
 * L one-row GEMVs back to back (programmatic launches, as in decode), cycling over
 * enough copies of the matrix that none is still in L2 when it comes round again.
 * Prints per shape the time per GEMV (median of the runs), GB/s and the share of the
 * measured read bandwidth; the shapes are the Llama-3-8B decode matrices, plus one
 * 300 MB matrix where the start and end of a GEMV no longer count. With -r R, each command
 * is a rowwise GEMM of R rows (a speculative check of R - 1 drafts), GB/s still the weights'.
 *   gpu_gemv [-r R] [TYPE ...]  (a dtype's name: q4_0, q4_k, q6_k, f16...; default q4_0 q8_0) */
#include "backend/backend.h"
#include "bench_util.h"
#include "core/dtype.h"
#include "core/kernels.h"
#include "core/table.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define RUNS 9
#define CMDS 24

/* Random quants with small finite f16 scales at the start of every block. */
static void fill(uint8_t *p, ak_dtype t, size_t bytes, uint64_t *s) {
    for (size_t i = 0; i < bytes; i++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (uint8_t)(*s >> 56);
    }
    size_t bb = ak_dtype_info[t].block_bytes;
    for (size_t b = 0; b + bb <= bytes; b += bb) { p[b] = 0x00; p[b + 1] = 0x20; }   /* 2^-7 */
}

static int one(ak_backend *be, ak_dtype t, const char *name, int K, int N, int rows, double probe) {
    ak_err err = {{0}};
    size_t mb = ak_dtype_row_bytes(t, K) * (size_t)N, stride = (mb + 4095) & ~(size_t)4095;
    int copies = (int)((160u << 20) / mb) + 1;
    if (copies < 2) copies = 2;
    uint8_t *w = malloc(stride * copies);
    if (!w) return 1;
    uint64_t s = 1;
    for (int c = 0; c < copies; c++) fill(w + (size_t)c * stride, t, mb, &s);
    void *bufs[AK_BUF_COUNT] = {0};
    ak_status st = be->buf_import(be, w, stride * copies, &bufs[0], &err);
    free(w);
    size_t xb = (size_t)(K > N ? K : N) * 4 * rows;
    for (int i = 1; i < AK_BUF_COUNT && !st; i++) st = be->buf_alloc(be, xb, &bufs[i], &err);
    float *x = calloc((size_t)K * rows, 4);
    for (int k = 0; x && k < K * rows; k++) x[k] = (float)((k * 37) % 101 - 50) / 50.f;
    if (!x) st = AK_ERR_NOMEM;
    if (!st) st = be->buf_write(be, bufs[AK_BUF_XN], 0, x, (size_t)K * rows * 4, &err);
    free(x);
    ak_table tb = {0};
    for (int l = 0; l < CMDS && !st; l++) {
        ak_p_mm p = {.n = rows, .K = K, .nseg = 1, .N = {N}, .dtype = {t}, .ld_x = K, .ld_y = N, .rowwise = rows > 1};
        ak_cmd *c = ak_table_push(&tb, rows > 1 ? AK_K_GEMM : AK_K_GEMV, &p, sizeof p, name);
        if (!c) { st = AK_ERR_NOMEM; break; }
        size_t off = (size_t)(l % copies) * stride;
        for (int g = 0; g < 3; g++) ak_cmd_bind(c, g, AK_BUF_WEIGHTS, off);
        ak_cmd_bind(c, 3, AK_BUF_XN, 0);
        ak_cmd_bind(c, 4, AK_BUF_QKV, 0);
        ak_cmd_bind(c, 5, AK_BUF_WEIGHTS, off);
    }
    tb.max_rows = rows;
    void *enc = NULL;
    if (!st) st = be->encode(be, &tb, bufs, &enc, &err);
    double us[RUNS];
    for (int r = -1; r < RUNS && !st; r++) {
        ak_run run = {.pos = 0, .n = rows, .steps = 1};
        double t0 = now_s();
        st = be->run(be, enc, &run, &err);
        if (r >= 0) us[r] = (now_s() - t0) * 1e6 / CMDS;
    }
    if (!st) {
        qsort(us, RUNS, sizeof us[0], cmp_d);
        double gbps = (double)mb / (us[RUNS / 2] * 1e-6) / 1e9;
        printf("%-5s %-8s K %6d N %6d rows %2d %8.1f MB %9.2f us %8.0f GB/s %5.1f %%\n", ak_dtype_info[t].name, name, K, N,
               rows, (double)mb / 1e6, us[RUNS / 2], gbps, 100 * gbps / probe);
    } else {
        fprintf(stderr, "%s %s: %s\n", ak_dtype_info[t].name, name, err.msg);
    }
    if (enc) be->encoded_free(be, enc);
    for (int i = 0; i < AK_BUF_COUNT; i++) if (bufs[i]) be->buf_free(be, bufs[i]);
    ak_table_free(&tb);
    return st != AK_OK;
}

int main(int argc, char **argv) {
    ak_err err = {{0}};
    ak_backend *be = NULL;
    if (!ak_backend_cuda_present()) { fprintf(stderr, "no CUDA GPU\n"); return 1; }
    if (ak_backend_cuda_create(&be, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    double probe = 0;
    if (be->read_bandwidth(be, &probe, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    printf("read bandwidth %.0f GB/s; %d GEMVs per step, median of %d steps\n", probe, CMDS, RUNS);
    static const struct { const char *name; int K, N; } shapes[] = {
        {"qkv", 4096, 6144}, {"o", 4096, 4096}, {"gate_up", 4096, 28672}, {"down", 14336, 4096}, {"big", 4096, 131072},
    };
    int bad = 0, rows = 1, a0 = 1;
    if (argc > 2 && !strcmp(argv[1], "-r")) {
        rows = atoi(argv[2]);
        a0 = 3;
        if (rows < 1 || rows > 64) { fprintf(stderr, "gpu_gemv: -r takes 1 to 64 rows\n"); return 1; }
    }
    for (int t = 0; t < AK_DTYPE_COUNT; t++) {
        int want = argc <= a0 && (t == AK_Q4_0 || t == AK_Q8_0);
        for (int i = a0; i < argc; i++) want |= ak_dtype_info[t].name && strcasecmp(argv[i], ak_dtype_info[t].name) == 0;
        if (!want) continue;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            bad |= one(be, (ak_dtype)t, shapes[s].name, shapes[s].K, shapes[s].N, rows, probe);
    }
    be->destroy(be);
    return bad;
}
