/* CUDA kernels through the backend interface, one-command tables: GEMV, GEMM and
 * activation+down against double-precision references built from the reference
 * dequantizers (the CPU backend quantizes activations, so it is not exact there); the
 * other kernels against the CPU backend on the same inputs. GEMV and GEMM for every
 * dtype (fast and generic GEMV paths, batched GEMV, cuBLAS GEMM and its rows independent of
 * the call's row count, multi-segment, mixed dtypes, bias, last row only), activation+down, two layers of fused decode GEMVs over 9
 * steps, embedding per dtype (repacked and file layouts), decode attention at long
 * context (split-K), decode attention with its split merge folded into the output
 * projection, and tiled prefill attention (GQA, causal, sliding window, softcap, F16
 * cache), quantized and mixed K/V caches in both, RoPE + KV write (quantized rows too) alone
 * and folded into the decode attention, norms, the sample command.
 * Exits 77 (skipped) where no GPU is present. */
#include "backend/backend.h"
#include "core/dtype.h"
#include "model/arch.h"
#include "core/sample.h"
#include "engine/build.h"
#include "test_util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 7;
static ak_backend *cpu, *gpu;

typedef struct {
    size_t size[AK_BUF_COUNT];
    uint8_t *data[AK_BUF_COUNT];
} world;

static void w_set(world *w, int id, size_t size) {
    w->size[id] = size;
    w->data[id] = calloc(1, size ? size : 1);
}

static void w_rand(world *w, int id, size_t size, float scale) {
    w_set(w, id, size);
    float *f = (float *)w->data[id];
    for (size_t i = 0; i < size / 4; i++) f[i] = ak_rand_f(&rng) * scale;
}

static void w_free(world *w) {
    for (int i = 0; i < AK_BUF_COUNT; i++) free(w->data[i]);
    memset(w, 0, sizeof *w);
}

/* A copy of t0 with the decode fusions be claims, as the builder emits them for a
 * one-row table; false (and a failed check) when out of memory. */
static bool fused_copy(const ak_table *t0, ak_backend *be, ak_table *out) {
    *out = *t0;
    out->cmds = malloc((size_t)(t0->n + 1) * sizeof *out->cmds);
    out->labels = malloc((size_t)(t0->n + 1) * sizeof *out->labels);
    if (!out->cmds || !out->labels) { CHECK(0, "out of memory"); ak_table_free(out); return false; }
    memcpy(out->cmds, t0->cmds, (size_t)t0->n * sizeof *out->cmds);
    memcpy(out->labels, t0->labels, (size_t)t0->n * sizeof *out->labels);
    out->cap = t0->n + 1;
    ak_table_fuse(out, be);
    return true;
}

/* Runs table t0 (fused_copy) on backend be over copies of w's buffers; returns n floats of
 * buffer out at off. */
static float *run_on(ak_backend *be, const ak_table *t0, const world *w, ak_run r, int out, size_t off, size_t n) {
    void *bufs[AK_BUF_COUNT] = {0};
    ak_err err = {{0}};
    float *res = NULL;
    void *enc = NULL;
    ak_table fused, *t = &fused;
    if (!fused_copy(t0, be, &fused)) return NULL;
    ak_status st = be->buf_import(be, w->data[AK_BUF_WEIGHTS] ? w->data[AK_BUF_WEIGHTS] : (void *)&rng, w->size[AK_BUF_WEIGHTS], &bufs[0], &err);
    for (int i = 1; i < AK_BUF_COUNT && !st; i++) {
        st = be->buf_alloc(be, w->size[i] ? w->size[i] : 4, &bufs[i], &err);
        if (!st && w->size[i]) st = be->buf_write(be, bufs[i], 0, w->data[i], w->size[i], &err);
    }
    if (!st) st = be->encode(be, t, bufs, &enc, &err);
    if (!st) st = be->run(be, enc, &r, &err);
    if (!st) {
        res = malloc(n * sizeof(float) + 4);
        st = be->buf_read(be, bufs[out], off, res, n * sizeof(float), &err);
    }
    CHECK(st == AK_OK, "%s: %s", be->name, err.msg);
    if (enc) be->encoded_free(be, enc);
    if (bufs[0] && be == gpu) be->buf_free(be, bufs[0]);
    for (int i = 1; i < AK_BUF_COUNT; i++) if (bufs[i]) be->buf_free(be, bufs[i]);
    ak_table_free(&fused);
    if (st) { free(res); return NULL; }
    return res;
}

/* Relative L2 difference of the CUDA result from a double-precision reference. */
static double vs_ref(const float *b, const double *ref, size_t n) {
    if (!b) return 1;
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(b[i])) return 1;
        num += (b[i] - ref[i]) * (b[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* Row j of a matrix of dtype t, dequantized by the reference dequantizer. */
static void deq_row(ak_dtype t, const uint8_t *w, int K, int j, float *out) {
    ak_dtype_info[t].dequant(w + ak_dtype_row_bytes(t, K) * (size_t)j, out, K);
}

/* y = W x (+ bias) in double, W (K x N of dtype t) dequantized a row at a time into row. */
static void mv_ref(ak_dtype t, const uint8_t *w, int K, int N, const double *x, const float *bias, double *y, float *row) {
    for (int j = 0; j < N; j++) {
        deq_row(t, w, K, j, row);
        double a = bias ? bias[j] : 0;
        for (int k = 0; k < K; k++) a += (double)row[k] * x[k];
        y[j] = a;
    }
}

/* Both backends; returns the relative L2 difference (1 on failure). */
static double compare(const ak_table *t, const world *w, ak_run r, int out, size_t off, size_t n) {
    float *a = run_on(cpu, t, w, r, out, off, n), *b = run_on(gpu, t, w, r, out, off, n);
    double d = 1;
    if (a && b) {
        d = ak_rel_l2(b, a, n);
        for (size_t i = 0; i < n; i++) if (!isfinite(b[i]) && isfinite(a[i])) d = 1;
    }
    free(a);
    free(b);
    return d;
}

/* compare() for a table of n rows from position 0 (n patched into its last command); frees
 * the table and the world. */
static double compare_n(ak_table *tb, world *w, int n, int out, size_t cnt) {
    tb->cmds[tb->n - 1].patch |= AK_PATCH_N;
    tb->max_rows = n;
    ak_run r = {.pos = 0, .n = n, .steps = 1};
    double d = compare(tb, w, r, out, 0, cnt);
    ak_table_free(tb);
    w_free(w);
    return d;
}

/* Random blocks of a dtype with finite, modest scales in the f16 fields. */
static void fill_quant(uint8_t *p, ak_dtype t, int64_t n_values) {
    const ak_dtype_traits *tr = &ak_dtype_info[t];
    size_t nb = (size_t)(n_values / tr->block), bb = (size_t)tr->block_bytes;
    if (t == AK_F32) { for (int64_t i = 0; i < n_values; i++) ((float *)p)[i] = ak_rand_f(&rng); return; }
    if (t == AK_F16 || t == AK_BF16) {
        for (int64_t i = 0; i < n_values; i++) {
            uint16_t h = t == AK_F16 ? ak_f32_to_f16(ak_rand_f(&rng)) : ak_f32_to_bf16(ak_rand_f(&rng));
            memcpy(p + 2 * i, &h, 2);
        }
        return;
    }
    for (size_t i = 0; i < nb * bb; i++) p[i] = (uint8_t)ak_rand_u32(&rng);
    int f16_at[2] = {-1, -1};
    switch (t) {
    case AK_Q4_0: case AK_Q5_0: case AK_Q8_0: f16_at[0] = 0; break;
    case AK_Q4_1: case AK_Q5_1: case AK_Q4_K: case AK_Q5_K: f16_at[0] = 0; f16_at[1] = 2; break;
    case AK_Q2_K: f16_at[0] = 80; f16_at[1] = 82; break;
    case AK_Q3_K: f16_at[0] = 108; break;
    case AK_Q6_K: f16_at[0] = 208; break;
    case AK_MLX_Q2: case AK_MLX_Q3: case AK_MLX_Q6: case AK_MLX_Q8: f16_at[0] = 0; f16_at[1] = 2; break;
    default: break;
    }
    for (size_t b = 0; b < nb; b++)
        for (int k = 0; k < 2; k++)
            if (f16_at[k] >= 0) {
                uint16_t h = ak_f32_to_f16(ak_rand_f(&rng) * 0.05f);
                memcpy(p + b * bb + f16_at[k], &h, 2);
            }
}

static const ak_dtype all_types[] = {AK_F32, AK_F16, AK_BF16, AK_Q4_0, AK_Q4_1, AK_Q5_0, AK_Q5_1, AK_Q8_0,
                                     AK_Q2_K, AK_Q3_K, AK_Q4_K, AK_Q5_K, AK_Q6_K,
                                     AK_MLX_Q2, AK_MLX_Q3, AK_MLX_Q6, AK_MLX_Q8};
#define NTYPES (int)(sizeof all_types / sizeof *all_types)

static bool is_float(ak_dtype t) { return t == AK_F32 || t == AK_F16 || t == AK_BF16; }

/* x as the int8 kernels multiply it, in place: per 32 values d = max|x| / 127 and the codes
 * round(x * (127 / max|x|)), in float as the kernels make them (dividing by d in double
 * put the odd code one off where x / d lies at a half: rel 2e-4 on some random inputs).
 * Against a reference of these values their results differ only by float rounding where
 * x is the kernels' input: a wrong scale, offset or group of any block format shows at
 * once, which a reference of x itself (1e-2 apart) would hide for small ones. */
static void x_codes(double *x, int K) {
    for (int b = 0; b < K; b += 32) {
        float amax = 0.f;
        for (int i = b; i < b + 32; i++) amax = fmaxf(amax, fabsf((float)x[i]));
        const float id = amax > 0.f ? 127.f / amax : 0.f, d = amax / 127.f;
        for (int i = b; i < b + 32; i++) x[i] = (double)d * (double)rintf((float)x[i] * id);
    }
}

/* How far W x may move (rel L2 against ref, N rows of W of dtype t, K values) when the
 * codes x_codes would round at a half, |x / d - half| < 1e-3, go the other way: the GEMV
 * that made x computed it with fast exp and divides, so such a code is either. */
static double code_slack(const double *x, int K, ak_dtype t, const uint8_t *w, int N, const double *ref, float *row) {
    double num = 0, den = 0;
    for (int j = 0; j < N; j++) {
        deq_row(t, w, K, j, row);
        double s = 0;
        for (int b = 0; b < K; b += 32) {
            double amax = 0;
            for (int i = b; i < b + 32; i++) amax = fmax(amax, fabs(x[i]));
            double d = (float)(amax / 127.0);
            for (int i = b; i < b + 32 && d > 0; i++) {
                double f = fabs(x[i] / d);
                if (fabs(f - floor(f) - 0.5) < 1e-3) s += fabs((double)row[i]) * d;
            }
        }
        num += s * s;
        den += ref[j] * ref[j];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

static double mm_tol(ak_dtype t, bool gemv_path, bool int8) {
    if (int8) return 1e-4;   /* against x_codes (1.3e-7 at most on H200) */
    if (gemv_path || t == AK_F32) return 2e-5;        /* float GEMV paths; SGEMM */
    return t == AK_BF16 ? 1e-2 : 2e-3;                /* activations rounded to f16 / bf16 */
}

/* y[:, seg] = W_seg x for segments of dtypes dt[0..nseg), n rows; how: 0 a GEMM of all rows
 * (the decode GEMV where n is 1), 1 the last row only (logits), 2 rowwise (each row as a
 * GEMV rounds it: speculative verification). */
static void one_mm(const ak_dtype *dt, int nseg, int K, const int *N, int n, int how, int bias, size_t misalign) {
    const int last = how == 1, rowwise = how == 2;
    world w;
    memset(&w, 0, sizeof w);
    size_t off[4], tot = 256;
    int cols = 0;
    for (int s = 0; s < nseg; s++) {
        off[s] = tot + misalign;
        tot = (off[s] + ak_dtype_row_bytes(dt[s], K) * (size_t)N[s] + 255) & ~(size_t)255;
        cols += N[s];
    }
    off[3] = tot;
    tot += (size_t)N[0] * 4;
    w_set(&w, AK_BUF_WEIGHTS, tot);
    for (int s = 0; s < nseg; s++) fill_quant(w.data[0] + off[s], dt[s], (int64_t)K * N[s]);
    for (int j = 0; j < N[0]; j++) ((float *)(w.data[0] + off[3]))[j] = ak_rand_f(&rng);
    int ld_x = K + (n > 1 ? 4 : 0), ld_y = cols + 3;
    w_rand(&w, AK_BUF_XN, (size_t)n * ld_x * 4, 1.f);
    int rows_out = last ? 1 : n;
    w_set(&w, AK_BUF_QKV, (size_t)rows_out * ld_y * 4);
    ak_table t = {0};
    ak_p_mm p = {.n = n, .K = K, .nseg = nseg, .ld_x = ld_x, .ld_y = ld_y, .last_only = last, .has_bias = bias,
                .rowwise = rowwise};
    for (int s = 0; s < nseg; s++) { p.N[s] = N[s]; p.dtype[s] = dt[s]; }
    bool gemv = n == 1 && how == 0, gemv_path = gemv || last || rowwise;
    ak_cmd *c = ak_table_push(&t, gemv ? AK_K_GEMV : AK_K_GEMM, &p, sizeof p, "mm");
    for (int s = 0; s < 3; s++) ak_cmd_bind(c, s, AK_BUF_WEIGHTS, off[s < nseg ? s : 0]);
    ak_cmd_bind(c, 3, AK_BUF_XN, 0);
    ak_cmd_bind(c, 4, AK_BUF_QKV, 0);
    ak_cmd_bind(c, 5, AK_BUF_WEIGHTS, off[3]);
    if (!gemv) { c->patch = AK_PATCH_N; c->off_n = 0; }
    t.max_rows = n;
    ak_run r = {.pos = 0, .n = n, .steps = 1};
    size_t ny = (size_t)rows_out * ld_y;
    double *ref = calloc(ny, sizeof(double)), *xi = malloc((size_t)K * sizeof(double));
    float *row = malloc((size_t)K * sizeof(float));
    /* the GEMV paths for a quant type on aligned rows: the streaming or the int8 kernel */
    bool int8[3] = {false, false, false};
    for (int s = 0; s < nseg; s++) int8[s] = !is_float(dt[s]) && gemv_path && misalign == 0;
    for (int i = 0; i < rows_out; i++) {
        const float *xf = (const float *)w.data[AK_BUF_XN] + (size_t)(last ? n - 1 : i) * ld_x;
        for (int s = 0, col = 0; s < nseg; col += N[s], s++) {
            for (int k = 0; k < K; k++) xi[k] = xf[k];
            if (int8[s]) x_codes(xi, K);
            for (int j = 0; j < N[s]; j++) {
                deq_row(dt[s], w.data[0] + off[s], K, j, row);
                double a = (bias && s == 0) ? ((float *)(w.data[0] + off[3]))[j] : 0;
                for (int k = 0; k < K; k++) a += (double)row[k] * xi[k];
                ref[(size_t)i * ld_y + col + j] = a;
            }
        }
    }
    float *got = run_on(gpu, &t, &w, r, AK_BUF_QKV, 0, ny);
    double d = vs_ref(got, ref, ny);
    free(got);
    free(ref);
    free(row);
    free(xi);
    double tol = 0;
    for (int s = 0; s < nseg; s++) if (mm_tol(dt[s], gemv_path, int8[s]) > tol) tol = mm_tol(dt[s], gemv_path, int8[s]);
    CHECK(d <= tol, "%s %s: K %d N %d/%d/%d n %d how %d bias %d misalign %zu: rel %.3g > %.0e", gemv ? "gemv" : "gemm",
          ak_dtype_info[dt[0]].name, K, N[0], N[1], N[2], n, how, bias, misalign, d, tol);
    printf("%-5s %-5s nseg %d K %5d n %2d how %d: rel %.2e\n", gemv ? "gemv" : "gemm", ak_dtype_info[dt[0]].name, nseg, K, n, how, d);
    ak_table_free(&t);
    w_free(&w);
}

static void test_matmul(void) {
    for (int ti = 0; ti < NTYPES; ti++) {
        ak_dtype t = all_types[ti];
        int blk = ak_dtype_info[t].block < 32 ? 32 : ak_dtype_info[t].block;
        int N1[3] = {37, 0, 0}, N3[3] = {19, 8, 8};
        int Ks[] = {blk, 4 * 256, 3 * 256 + (blk == 32 ? 32 : 0)};
        for (int k = 0; k < 3; k++) {
            ak_dtype d3[3] = {t, t, t};
            one_mm(d3, 1, Ks[k], N1, 1, 0, k == 0, 0);
            one_mm(d3, 3, Ks[k], N3, 1, 0, 1, 0);
            one_mm(d3, 1, Ks[k], N1, 5, 0, 1, 0);
            one_mm(d3, 1, Ks[k], N1, 5, 2, 1, 0);
            one_mm(d3, 3, Ks[k], N3, 19, 2, k == 2, 0);   /* rowwise: batched GEMVs of 8, 8 and 3 rows */
            one_mm(d3, 3, Ks[k], N3, 24, 0, k == 1, 0);
            one_mm(d3, 1, Ks[k], N1, 24, 1, 1, 0);
        }
        if (t != AK_Q4_0 && t != AK_Q8_0 && !is_float(t)) {
            /* long rows in the file's layout: several rounds of 32 units a warp, the last
             * one short (8 units of 21 super-blocks, or 1 of 161 blocks) */
            ak_dtype d1[3] = {t, t, t};
            int Nl[3] = {300, 0, 0};
            const uint64_t keep = rng;   /* the other cases' inputs as before these were added */
            one_mm(d1, 1, blk == 256 ? 5376 : 5152, Nl, 1, 0, 1, 0);
            rng = keep;
        }
        if (t == AK_Q4_0 || t == AK_Q8_0) {   /* rows that are not 16-byte aligned: the generic kernel */
            ak_dtype d1[3] = {t, t, t};
            one_mm(d1, 1, 1024, N1, 1, 0, 0, 2);
            one_mm(d1, 1, 1024, N1, 24, 0, 0, 2);
            /* long rows: the streaming kernel cuts them into slices that meet in shared
             * memory (K = 11008 and 5120 leave a short last slice and a partial item) */
            int Nl[3] = {300, 0, 0};
            one_mm(d1, 1, 11008, Nl, 1, 0, 1, 0);
            one_mm(d1, 1, 14336, Nl, 1, 0, 0, 0);
            one_mm(d1, 3, 5120, N3, 1, 0, 1, 0);
            /* rowwise, several x rows a launch (slices of one item, as many as 16): 8, 4 and
             * 2 rows, a partial last item (11008), three segments, and the rest of a check
             * one row at a time where a launch takes 4 rows; the other cases' inputs as
             * before these were added */
            const uint64_t keep = rng;
            one_mm(d1, 1, 4096, Nl, 5, 2, 1, 0);
            one_mm(d1, 1, 11008, Nl, 8, 2, 0, 0);
            one_mm(d1, 1, 16384, Nl, 2, 2, 1, 0);
            one_mm(d1, 3, 5120, N3, 3, 2, 1, 0);
            if (t == AK_Q4_0) {
                int Nw[3] = {24000, 0, 0};   /* 8 rows past the shared memory: 4 + 1 */
                one_mm(d1, 1, 16384, Nw, 5, 2, 0, 0);
            }
            rng = keep;
        }
    }
    ak_dtype mixed[3] = {AK_Q4_0, AK_Q6_K, AK_Q8_0};
    int N3[3] = {64, 32, 32};
    one_mm(mixed, 3, 512, N3, 1, 0, 1, 0);
    one_mm(mixed, 3, 512, N3, 24, 0, 1, 0);
    one_mm(mixed, 3, 512, N3, 3, 0, 1, 0);
    one_mm(mixed, 3, 512, N3, 3, 2, 1, 0);   /* rowwise: a launch a row and segment */
    int Nbig[3] = {4096 + 64, 0, 0};   /* many blocks, the fast path's full grid */
    ak_dtype q4[3] = {AK_Q4_0, AK_Q4_0, AK_Q4_0}, q8[3] = {AK_Q8_0, AK_Q8_0, AK_Q8_0};
    one_mm(q4, 1, 4096, Nbig, 1, 0, 0, 0);
    one_mm(q8, 1, 4096, Nbig, 1, 0, 0, 0);
    one_mm(q4, 1, 4096, Nbig, 64, 0, 0, 0);
    ak_dtype q4k[3] = {AK_Q4_K, AK_Q4_K, AK_Q6_K};   /* a full grid; a QKV of two launches (Q and K, then V) */
    const uint64_t keep = rng;
    one_mm(q4k, 1, 4096, Nbig, 1, 0, 0, 0);
    int Nqkv[3] = {4096, 1024, 1024};
    one_mm(q4k, 3, 4096, Nqkv, 1, 0, 1, 0);
    rng = keep;
}

/* A prefill GEMM's row comes out the same, bit for bit, whatever rows the call has (a
 * prompt cut anywhere, a cached prefix): the first r rows of a 40-row call against calls
 * of r rows, F32 (SGEMM), F16/BF16 in place and dequantized types. */
static void test_gemm_rows(void) {
    const ak_dtype types[] = {AK_F32, AK_F16, AK_BF16, AK_Q4_0, AK_Q8_0, AK_Q4_K, AK_Q6_K};
    const int K = 768, N = 300, R = 40, ld_x = K + 4, ld_y = N + 3, rs[] = {1, 2, 7, 9, 17, 33};
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        ak_dtype t = types[ti];
        world w;
        memset(&w, 0, sizeof w);
        w_set(&w, AK_BUF_WEIGHTS, ak_dtype_row_bytes(t, K) * (size_t)N);
        fill_quant(w.data[0], t, (int64_t)K * N);
        w_rand(&w, AK_BUF_XN, (size_t)R * ld_x * 4, 1.f);
        w_set(&w, AK_BUF_QKV, (size_t)R * ld_y * 4);
        ak_table tab = {0};
        ak_p_mm p = {.n = R, .K = K, .nseg = 1, .N = {N}, .dtype = {t}, .ld_x = ld_x, .ld_y = ld_y};
        ak_cmd *c = ak_table_push(&tab, AK_K_GEMM, &p, sizeof p, "mm");
        for (int s = 0; s < 3; s++) ak_cmd_bind(c, s, AK_BUF_WEIGHTS, 0);
        ak_cmd_bind(c, 3, AK_BUF_XN, 0);
        ak_cmd_bind(c, 4, AK_BUF_QKV, 0);
        ak_cmd_bind(c, 5, AK_BUF_WEIGHTS, 0);
        c->patch = AK_PATCH_N;
        c->off_n = 0;
        tab.max_rows = R;
        float *all = run_on(gpu, &tab, &w, (ak_run){.pos = 0, .n = R, .steps = 1}, AK_BUF_QKV, 0, (size_t)R * ld_y);
        for (size_t k = 0; all && k < sizeof rs / sizeof *rs; k++) {
            int r = rs[k], bad = -1;
            float *some = run_on(gpu, &tab, &w, (ak_run){.pos = 0, .n = r, .steps = 1}, AK_BUF_QKV, 0, (size_t)r * ld_y);
            for (int i = 0; some && i < r && bad < 0; i++)
                if (memcmp(some + (size_t)i * ld_y, all + (size_t)i * ld_y, (size_t)N * 4)) bad = i;
            CHECK(some && bad < 0, "gemm %s: row %d of a %d-row call differs from the same row of a %d-row call",
                  ak_dtype_info[t].name, bad, r, R);
            free(some);
        }
        CHECK(all != NULL, "gemm %s: %d rows", ak_dtype_info[t].name, R);
        free(all);
        ak_table_free(&tab);
        w_free(&w);
    }
}

/* act 3: the erf-GELU with every gate in [-8, -5), where 1 + erf(x / sqrt 2) cancels in
 * float (5 % off at -5) unless it is computed as erfc; float weights, so that the
 * tolerance is tight enough to see it. */
static void test_act_down(void) {
    for (int ti = 0; ti < NTYPES; ti++)
        for (int act = 0; act < 4; act++) {
            ak_dtype t = all_types[ti];
            if (act == 3 && t != AK_F32 && t != AK_F16) continue;
            int blk = ak_dtype_info[t].block < 32 ? 32 : ak_dtype_info[t].block;
            int K = t == AK_Q4_0 || t == AK_Q8_0 ? (act == 1 ? 11008 : 1024) : 2 * blk, N = 45;
            world w;
    memset(&w, 0, sizeof w);
            w_set(&w, AK_BUF_WEIGHTS, ak_dtype_row_bytes(t, K) * N + 256);
            fill_quant(w.data[0], t, (int64_t)K * N);
            w_rand(&w, AK_BUF_GU, (size_t)2 * K * 4, 2.f);
            float *gu = (float *)w.data[AK_BUF_GU];
            if (act == 3)
                for (int k = 0; k < K; k++) gu[k] = -6.5f + 0.75f * gu[k];
            w_set(&w, AK_BUF_T, (size_t)N * 4);
            ak_table tb = {0};
            ak_p_act_down p = {.n = 1, .K = K, .N = N, .dtype = t, .act = act == 3 ? AK_ACT_GELU_ERF : act, .ld_gu = 2 * K};
            ak_cmd *c = ak_table_push(&tb, AK_K_GEMV_ACT_DOWN, &p, sizeof p, "act_down");
            ak_cmd_bind(c, 0, AK_BUF_WEIGHTS, 0);
            ak_cmd_bind(c, 1, AK_BUF_GU, 0);
            ak_cmd_bind(c, 2, AK_BUF_T, 0);
            tb.max_rows = 1;
            ak_run r = {.pos = 0, .n = 1, .steps = 1};
            double ref[64];
            float *row = malloc((size_t)K * sizeof(float));
            double *h = malloc((size_t)K * sizeof(double));
            for (int k = 0; k < K; k++) h[k] = ak_act_ref(p.act, gu[k]) * gu[K + k];
            double slack = 0;
            if (!is_float(t)) { /* the kernel's act(g) * u is a float: a code at a half may go either way */
                mv_ref(t, w.data[0], K, N, h, NULL, ref, row);
                slack = code_slack(h, K, t, w.data[0], N, ref, row);
                x_codes(h, K);
            }
            mv_ref(t, w.data[0], K, N, h, NULL, ref, row);
            float *got = run_on(gpu, &tb, &w, r, AK_BUF_T, 0, (size_t)N);
            double d = vs_ref(got, ref, (size_t)N);
            free(got);
            free(row);
            free(h);
            CHECK(d <= (is_float(t) ? 2e-5 : 1e-4 + slack), "act_down %s act %d: rel %.3g (codes at a half allow %.2g)",
                  ak_dtype_info[t].name, act, d, slack);
            ak_table_free(&tb);
            w_free(&w);
        }
}

/* Whether the last 64 floats of GU's first half (N products) are still zero after a run
 * of t: the gated GEMV wrote its products as the down projection's codes (1.25 bytes
 * each), not as floats (some act(g) are 0, so one float would not tell). */
static bool gu_untouched(const ak_table *t, const world *w, ak_run r, int N) {
    float *tail = run_on(gpu, t, w, r, AK_BUF_GU, (size_t)(N - 64) * 4, 64);
    bool z = tail != NULL;
    for (int j = 0; tail && j < 64; j++) z = z && tail[j] == 0.f;
    free(tail);
    return z;
}

/* RMSNorm with weights w in doubles (in place where out is x). */
static void rms_norm_ref(const double *x, const float *w, int n, double *out) {
    double ss = 0;
    for (int k = 0; k < n; k++) ss += x[k] * x[k];
    double r = 1.0 / sqrt(ss / n + 1e-5);
    for (int k = 0; k < n; k++) out[k] = x[k] * r * w[k];
}

/* An RMSNorm (unit weights), the gate/up GEMV and the act_down after it, twice (two
 * layers on the same buffers): decode folds the norm into the GEMV's prologue and
 * act(g) * u into its epilogue (gated), which then never writes the up half of its
 * output; against a double reference. K 4096 in Q8_0 takes the path of slices meeting in
 * shared memory. With N 5632 (176 chunks of 32 products, at least one per multiprocessor)
 * the GEMV makes most of the down projection's x codes itself (ak_cuda_gemv_gate_codes),
 * and GU's first half then ends untouched. */
static void test_gated(void) {
    const int Ks[] = {1024, 4096}, Ns[] = {768, 5632}, N2 = 96;
    /* variants 8 on: the int8 kernels in the file's layout (K-quants, Q5_0), gated alike;
     * 14 and 15 with rows that are not whole 16 bytes (Q6_K rows of 840 bytes, Q5_0 of
     * 616), which the register kernel takes; the other cases' inputs as before these were
     * added */
    const ak_dtype dts[] = {AK_Q4_0, AK_Q8_0}, kts[] = {AK_Q4_K, AK_Q6_K, AK_Q5_0, AK_Q2_K, AK_Q5_K, AK_Q3_K, AK_Q6_K, AK_Q5_0};
    uint64_t keep = 0;
    for (int v = 0; v < 16; v++) {
        if (v == 14) keep = rng;
        ak_dtype t = v < 8 ? dts[v & 1] : kts[v - 8];
        int K = v < 8 ? Ks[(v >> 1) & 1] : v == 15 ? 896 : v % 2 ? 2048 : 1024, N = v < 8 ? Ns[v >> 2] : 768 + 256 * (v % 3), act = v % 3;
        world w;
        memset(&w, 0, sizeof w);
        size_t rb = ak_dtype_row_bytes(t, K), off_u = (rb * N + 255) & ~(size_t)255, off_d = off_u + ((rb * N + 255) & ~(size_t)255);
        const size_t off_nw = off_d + ak_dtype_row_bytes(t, N) * N2;
        w_set(&w, AK_BUF_WEIGHTS, off_nw + (size_t)K * 4);
        fill_quant(w.data[0], t, (int64_t)K * N);
        fill_quant(w.data[0] + off_u, t, (int64_t)K * N);
        fill_quant(w.data[0] + off_d, t, (int64_t)N * N2);
        for (int k = 0; k < K; k++) ((float *)(w.data[0] + off_nw))[k] = 1.f;
        w_rand(&w, AK_BUF_X, (size_t)K * 4, 1.f);
        w_set(&w, AK_BUF_XN, (size_t)K * 4);
        w_set(&w, AK_BUF_GU, (size_t)2 * N * 4);
        w_set(&w, AK_BUF_T, (size_t)N2 * 4);
        ak_table tb = {0};
        for (int l = 0; l < 2; l++) {
            ak_p_norm pn = {.n = 1, .dim = K, .eps = 1e-5f};
            ak_cmd *c = ak_table_push(&tb, AK_K_NORM, &pn, sizeof pn, "norm");
            ak_cmd_bind(c, 0, AK_BUF_X, 0);
            ak_cmd_bind(c, 1, AK_BUF_WEIGHTS, off_nw);
            ak_cmd_bind(c, 2, AK_BUF_XN, 0);
            ak_p_mm pm = {.n = 1, .K = K, .nseg = 2, .N = {N, N}, .dtype = {t, t}, .ld_x = K, .ld_y = 2 * N};
            c = ak_table_push(&tb, AK_K_GEMV, &pm, sizeof pm, "gate_up");
            ak_cmd_bind(c, 0, AK_BUF_WEIGHTS, 0);
            ak_cmd_bind(c, 1, AK_BUF_WEIGHTS, off_u);
            ak_cmd_bind(c, 2, AK_BUF_WEIGHTS, 0);
            ak_cmd_bind(c, 3, AK_BUF_XN, 0);
            ak_cmd_bind(c, 4, AK_BUF_GU, 0);
            ak_cmd_bind(c, 5, AK_BUF_WEIGHTS, 0);
            ak_p_act_down pd = {.n = 1, .K = N, .N = N2, .dtype = t, .act = act, .ld_gu = 2 * N};
            c = ak_table_push(&tb, AK_K_GEMV_ACT_DOWN, &pd, sizeof pd, "act_down");
            ak_cmd_bind(c, 0, AK_BUF_WEIGHTS, off_d);
            ak_cmd_bind(c, 1, AK_BUF_GU, 0);
            ak_cmd_bind(c, 2, AK_BUF_T, 0);
        }
        tb.max_rows = 1;
        ak_run r = {.pos = 0, .n = 1, .steps = 1};
        float *row = malloc((size_t)(K > N ? K : N) * sizeof(float));
        double *h = malloc((size_t)N * sizeof(double)), *x = malloc((size_t)K * sizeof(double)), ref[96];
        for (int k = 0; k < K; k++) x[k] = ((const float *)w.data[AK_BUF_X])[k];
        rms_norm_ref(x, (const float *)(w.data[0] + off_nw), K, x);
        x_codes(x, K);
        for (int j = 0; j < N; j++) {
            double g = 0, u = 0;
            deq_row(t, w.data[0], K, j, row);
            for (int k = 0; k < K; k++) g += (double)row[k] * x[k];
            deq_row(t, w.data[0] + off_u, K, j, row);
            for (int k = 0; k < K; k++) u += (double)row[k] * x[k];
            h[j] = ak_act_ref(act, g) * u;
        }
        mv_ref(t, w.data[0] + off_d, N, N2, h, NULL, ref, row);
        const double slack = code_slack(h, N, t, w.data[0] + off_d, N2, ref, row);
        x_codes(h, N);
        mv_ref(t, w.data[0] + off_d, N, N2, h, NULL, ref, row);
        float *got = run_on(gpu, &tb, &w, r, AK_BUF_T, 0, N2), *up = run_on(gpu, &tb, &w, r, AK_BUF_GU, (size_t)N * 4, N);
        double d = vs_ref(got, ref, N2);
        int zero = 1;
        for (int j = 0; up && j < N; j++) zero = zero && up[j] == 0.f;
        CHECK(d <= 1e-4 + slack, "gated %s K %d N %d act %d: rel %.3g (codes at a half allow %.2g)", ak_dtype_info[t].name, K,
              N, act, d, slack);
        CHECK(up && zero, "gated %s K %d N %d: the up half was written (not folded)", ak_dtype_info[t].name, K, N);
        const bool codes = N == 5632 && v < 8;
        CHECK(gu_untouched(&tb, &w, r, N) == codes, "gated %s K %d N %d: act(g) * u went out as %s", ak_dtype_info[t].name, K, N,
              codes ? "floats, not codes" : "codes, not floats");
        printf("gated %-5s K %4d N %4d act %d: rel %.2e (slack %.2g)%s\n", ak_dtype_info[t].name, K, N, act, d, slack,
               codes ? " (codes)" : "");
        free(x);
        free(got);
        free(up);
        free(row);
        free(h);
        ak_table_free(&tb);
        w_free(&w);
    }
    rng = keep;
}

/* A GEMV of XN into QKV over up to three segments at weight offsets off, after the
 * commands in tb (a one-row table). */
static void push_segs(ak_table *tb, const ak_p_mm *pm, const size_t *off) {
    ak_cmd *c = ak_table_push(tb, AK_K_GEMV, pm, sizeof *pm, "qkv");
    for (int s = 0; s < 3; s++) ak_cmd_bind(c, s, AK_BUF_WEIGHTS, off[s < pm->nseg ? s : 0]);
    ak_cmd_bind(c, 3, AK_BUF_XN, 0);
    ak_cmd_bind(c, 4, AK_BUF_QKV, 0);
    ak_cmd_bind(c, 5, AK_BUF_WEIGHTS, 0);
    tb->max_rows = 1;
}

/* What the builder would emit for the GPU: tb as one command with the fusions want. */
static void fuses_to_one(const ak_table *tb, uint32_t want, const char *what) {
    ak_table f;
    if (!fused_copy(tb, gpu, &f)) return;
    CHECK(f.n == 1 && f.cmds[0].fuse == want, "%s: %d commands, fusions 0x%x (want one, 0x%x)", what, f.n,
          f.n ? f.cmds[0].fuse : 0u, want);
    ak_table_free(&f);
}

/* A QKV of two dtypes (a Q4_K_M file's Q and K in Q4_K, V in Q6_K) takes the RMSNorm
 * before it: one launch per dtype, each normalising x itself; the norm's command is gone
 * (XN stays unwritten) and the product is the one of the norm's output. */
static void test_mixed_norm(void) {
    enum { K = 2048, LD = 1536 };
    const int N[3] = {1024, 256, 256};
    const ak_dtype dt[3] = {AK_Q4_K, AK_Q4_K, AK_Q6_K};
    world w;
    memset(&w, 0, sizeof w);
    size_t off[3], tot = 0;
    for (int s = 0; s < 3; s++) {
        off[s] = tot;
        tot = (tot + ak_dtype_row_bytes(dt[s], K) * (size_t)N[s] + 255) & ~(size_t)255;
    }
    w_set(&w, AK_BUF_WEIGHTS, tot + K * 4);
    for (int s = 0; s < 3; s++) fill_quant(w.data[0] + off[s], dt[s], (int64_t)K * N[s]);
    float *nw = (float *)(w.data[0] + tot);
    for (int k = 0; k < K; k++) nw[k] = 1.f + 0.5f * ak_rand_f(&rng);
    w_rand(&w, AK_BUF_X, K * 4, 1.f);
    w_set(&w, AK_BUF_XN, K * 4);
    w_set(&w, AK_BUF_QKV, LD * 4);
    ak_table tb = {0};
    ak_p_norm pn = {.n = 1, .dim = K, .eps = 1e-5f};
    ak_cmd *c = ak_table_push(&tb, AK_K_NORM, &pn, sizeof pn, "norm");
    ak_cmd_bind(c, 0, AK_BUF_X, 0);
    ak_cmd_bind(c, 1, AK_BUF_WEIGHTS, tot);
    ak_cmd_bind(c, 2, AK_BUF_XN, 0);
    ak_p_mm pm = {.n = 1, .K = K, .nseg = 3, .N = {N[0], N[1], N[2]}, .dtype = {dt[0], dt[1], dt[2]}, .ld_x = K, .ld_y = LD};
    push_segs(&tb, &pm, off);
    fuses_to_one(&tb, AK_FUSE_NORM_IN, "mixed QKV");
    ak_run r = {.pos = 0, .n = 1, .steps = 1};
    float *got = run_on(gpu, &tb, &w, r, AK_BUF_QKV, 0, LD), *xn = run_on(gpu, &tb, &w, r, AK_BUF_XN, 0, K);
    double x[K], ref[1024];
    float row[K];
    for (int k = 0; k < K; k++) x[k] = ((const float *)w.data[AK_BUF_X])[k];
    rms_norm_ref(x, nw, K, x);
    double xc[K];
    memcpy(xc, x, sizeof xc);
    x_codes(xc, K);
    int zero = 1;
    for (int k = 0; xn && k < K; k++) zero = zero && xn[k] == 0.f;
    CHECK(xn && zero, "mixed QKV: XN was written (the norm ran apart)");
    for (int s = 0, col = 0; s < 3; col += N[s], s++) {
        mv_ref(dt[s], w.data[0] + off[s], K, N[s], xc, NULL, ref, row);
        const double slack = code_slack(x, K, dt[s], w.data[0] + off[s], N[s], ref, row);
        const double d = got ? vs_ref(got + col, ref, (size_t)N[s]) : 1.0;
        CHECK(d <= 1e-4 + slack, "mixed QKV segment %d (%s): rel %.3g", s, ak_dtype_info[dt[s]].name, d);
        printf("mixed QKV, norm folded: segment %d %-5s rel %.2e\n", s, ak_dtype_info[dt[s]].name, d);
    }
    free(got);
    free(xn);
    ak_table_free(&tb);
    w_free(&w);
}

/* A post-norm's add and the RMSNorm after it (Gemma 2/3: "x += norm(a) pw; xn = norm(x) w"),
 * then a GEMV of xn: the decode fusions fold both into the GEMV (AK_FUSE_POST_IN), which
 * writes x + norm(a) pw to X2 and leaves X as it was. Each kernel family's prologue:
 * Q4_0 (K 1024: 4 threads per 32 values; K 8192: one), Q8_0 on the producer-warp kernel
 * (K 4096), Q4_K and F16 through the ring, Q6_K with K 3072 in registers, and a Q4_K/Q6_K
 * QKV of two launches, each writing X2. Against a double reference. */
static void test_post_norm(void) {
    struct { int K, nseg, N[3]; ak_dtype dt[3]; } v[] = {
        {1024, 1, {512}, {AK_Q4_0}},   {8192, 1, {256}, {AK_Q4_0}},  {4096, 1, {4096}, {AK_Q8_0}},
        {2048, 1, {768}, {AK_Q4_K}},   {1536, 1, {640}, {AK_F16}},   {3072, 1, {512}, {AK_Q6_K}},
        {2048, 3, {1024, 256, 256}, {AK_Q4_K, AK_Q4_K, AK_Q6_K}},
    };
    for (int vi = 0; vi < (int)(sizeof v / sizeof *v); vi++) {
        const int K = v[vi].K, nseg = v[vi].nseg;
        int ld = 0;
        world w;
        memset(&w, 0, sizeof w);
        size_t off[3], tot = 0;
        for (int s = 0; s < nseg; s++) {
            off[s] = tot;
            ld += v[vi].N[s];
            tot = (tot + ak_dtype_row_bytes(v[vi].dt[s], K) * (size_t)v[vi].N[s] + 255) & ~(size_t)255;
        }
        w_set(&w, AK_BUF_WEIGHTS, tot + (size_t)K * 8);
        for (int s = 0; s < nseg; s++) fill_quant(w.data[0] + off[s], v[vi].dt[s], (int64_t)K * v[vi].N[s]);
        float *pw = (float *)(w.data[0] + tot), *nw = pw + K;
        for (int k = 0; k < K; k++) { pw[k] = 1.f + 0.5f * ak_rand_f(&rng); nw[k] = 1.f + 0.5f * ak_rand_f(&rng); }
        w_rand(&w, AK_BUF_X, (size_t)K * 4, 1.f);
        w_rand(&w, AK_BUF_T, (size_t)K * 4, 3.f);
        w_set(&w, AK_BUF_XN, (size_t)K * 4);
        w_set(&w, AK_BUF_X2, (size_t)K * 4);
        w_set(&w, AK_BUF_QKV, (size_t)ld * 4);
        ak_table tb = {0};
        ak_p_norm pn = {.n = 1, .dim = K, .eps = 1e-5f, .flags = AK_NORM_F_POST};
        ak_cmd *c = ak_table_push(&tb, AK_K_ADD_NORM, &pn, sizeof pn, "add_norm");
        ak_cmd_bind(c, 0, AK_BUF_X, 0);
        ak_cmd_bind(c, 1, AK_BUF_T, 0);
        ak_cmd_bind(c, 2, AK_BUF_WEIGHTS, tot);
        ak_cmd_bind(c, 3, AK_BUF_WEIGHTS, tot + (size_t)K * 4);
        ak_cmd_bind(c, 4, AK_BUF_XN, 0);
        ak_cmd_bind(c, 5, AK_BUF_WEIGHTS, 0);
        ak_p_mm pm = {.n = 1, .K = K, .nseg = nseg, .ld_x = K, .ld_y = ld};
        for (int s = 0; s < nseg; s++) { pm.N[s] = v[vi].N[s]; pm.dtype[s] = v[vi].dt[s]; }
        push_segs(&tb, &pm, off);
        fuses_to_one(&tb, AK_FUSE_NORM_IN | AK_FUSE_POST_IN, "post-norm");
        ak_run r = {.pos = 0, .n = 1, .steps = 1};
        float *got = run_on(gpu, &tb, &w, r, AK_BUF_QKV, 0, (size_t)ld), *x2 = run_on(gpu, &tb, &w, r, AK_BUF_X2, 0, (size_t)K);
        float *x1 = run_on(gpu, &tb, &w, r, AK_BUF_X, 0, (size_t)K), *row = malloc((size_t)K * sizeof *row);
        double *x = malloc((size_t)K * sizeof *x), *xc = malloc((size_t)K * sizeof *xc), *ref = malloc((size_t)ld * sizeof *ref);
        const float *a = (const float *)w.data[AK_BUF_T], *x0 = (const float *)w.data[AK_BUF_X];
        double ss = 0;
        for (int k = 0; k < K; k++) ss += (double)a[k] * a[k];
        const double ra = 1.0 / sqrt(ss / K + 1e-5);
        for (int k = 0; k < K; k++) x[k] = x0[k] + a[k] * ra * pw[k];
        const double dx2 = vs_ref(x2, x, (size_t)K);
        CHECK(dx2 <= 1e-6, "post-norm K %d: the new residual (X2) rel %.3g", K, dx2);
        CHECK(x1 && !memcmp(x1, x0, (size_t)K * 4), "post-norm K %d: X was written", K);
        rms_norm_ref(x, nw, K, x);
        memcpy(xc, x, (size_t)K * sizeof *xc);
        for (int s = 0, col = 0; s < nseg; col += v[vi].N[s], s++) {
            const ak_dtype t = v[vi].dt[s];
            const bool fl = is_float(t);
            if (!fl) x_codes(xc, K);
            mv_ref(t, w.data[0] + off[s], K, v[vi].N[s], fl ? x : xc, NULL, ref, row);
            const double slack = fl ? 0 : code_slack(x, K, t, w.data[0] + off[s], v[vi].N[s], ref, row);
            const double d = got ? vs_ref(got + col, ref, (size_t)v[vi].N[s]) : 1.0, tol = mm_tol(t, true, !fl) + slack;
            CHECK(d <= tol, "post-norm K %d segment %d (%s): rel %.3g > %.2g", K, s, ak_dtype_info[t].name, d, tol);
            printf("post-norm add and norm folded: K %5d segment %d %-5s rel %.2e, X2 rel %.2e\n", K, s, ak_dtype_info[t].name, d, dx2);
            memcpy(xc, x, (size_t)K * sizeof *xc);
        }
        free(got); free(x2); free(x1); free(row); free(x); free(xc); free(ref);
        ak_table_free(&tb);
        w_free(&w);
    }
}

/* Two layers' worth of decode GEMVs: "x += W2 W1 norm(x); x += W2' (W1' norm(x) + b);
 * out = W3 norm(x)", which the decode fusions turn into five streaming GEMVs (the norms
 * folded into the GEMV after them, the residual adds into W2 and W2'), in one quant type
 * or mixed (variant 2); variant 3 makes the first layer a gated MLP as a decoder's:
 * "x += W2 (silu(G n) * (U n))", n = norm(x), a two-segment GEMV and an act_down, which
 * the decode fusions make the gated GEMV (writing silu(g) * u itself) and a plain one;
 * its hidden size is Llama-3-8B's, so that the gated GEMV makes most of the down
 * projection's x codes itself (ak_cuda_gemv_gate_codes: with at least one chunk of 32
 * products per multiprocessor), which the test checks. Run for 9 steps (the 8-step
 * graph, then the 1-step one) against a double reference of 9 steps; every GEMV reads
 * all of what the one before it wrote. */
static void test_decode_layers(void) {
    /* D = 4096: the GEMVs that normalise their input then run on the producer-warp kernel
     * (see gq_prod in gemv.cu), the others on the plain one */
    enum { D = 4096, V = 5000, STEPS = 9 };
    for (int v = 0; v < 8; v++) {
        const ak_dtype q = v == 1 ? AK_Q8_0 : v == 4 || v == 5 ? AK_Q4_K : v == 7 ? AK_F16 : AK_Q4_0;
        const bool gated = v == 3 || v == 5 || v == 6 || v == 7;
        const int H = gated ? 14336 : 2816;
        /* W1 (G) W2 W1' W2' W3, U; 4 and 5 mix the K-quants as Q4_K_M files do (the int8
         * kernel in the file's layout); 6 is variant 3 with a Q6_K down projection, which
         * cannot read the codes its streaming gate/up could make: the pair passes floats;
         * 7 is variant 3 in F16 (float x, the ring kernel in the file's layout) */
        const ak_dtype dt[6] = {q, v >= 4 && v < 7 ? AK_Q6_K : q, q, v == 2 ? AK_Q8_0 : v == 5 ? AK_Q5_K : v == 4 ? AK_Q6_K : q,
                                v == 4 || v == 5 ? AK_Q6_K : q, q};
        const int Ks[6] = {D, H, D, H, D, D}, Ns[6] = {H, D, H, D, V, H};
        world w;
        memset(&w, 0, sizeof w);
        size_t off[6], tot = 0;
        for (int m = 0; m < 6; m++) {
            off[m] = tot;
            tot = (tot + ak_dtype_row_bytes(dt[m], Ks[m]) * (size_t)Ns[m] + 255) & ~(size_t)255;
        }
        const size_t off_nw = tot, off_b = tot + 3 * D * 4;
        w_set(&w, AK_BUF_WEIGHTS, off_b + H * 4);
        for (int m = 0; m < 6; m++) fill_quant(w.data[0] + off[m], dt[m], (int64_t)Ks[m] * Ns[m]);
        float *nw = (float *)(w.data[0] + off_nw), *bias = (float *)(w.data[0] + off_b);
        for (int i = 0; i < 3 * D; i++) nw[i] = 1.f + 0.5f * ak_rand_f(&rng);
        for (int i = 0; i < H; i++) bias[i] = ak_rand_f(&rng);
        w_rand(&w, AK_BUF_X, D * 4, 1.f);
        w_set(&w, AK_BUF_XN, D * 4);
        w_set(&w, AK_BUF_GU, 2 * H * 4);
        w_set(&w, AK_BUF_ACT, H * 4);   /* the second layer's hidden: GU is the gated pair's alone */
        w_set(&w, AK_BUF_T, D * 4);
        w_set(&w, AK_BUF_LOGITS, V * 4);
        ak_table tb = {0};
        ak_cmd *c;
        for (int m = 0; m < 5; m++) {
            if (m == 0) {
                ak_p_norm pn = {.n = 1, .dim = D, .eps = 1e-5f};
                c = ak_table_push(&tb, AK_K_NORM, &pn, sizeof pn, "norm");
                ak_cmd_bind(c, 0, AK_BUF_X, 0);
                ak_cmd_bind(c, 1, AK_BUF_WEIGHTS, off_nw);
                ak_cmd_bind(c, 2, AK_BUF_XN, 0);
            } else if (m == 2 || m == 4) {
                ak_p_norm pn = {.n = 1, .dim = D, .eps = 1e-5f};
                c = ak_table_push(&tb, AK_K_ADD_NORM, &pn, sizeof pn, "add_norm");
                ak_cmd_bind(c, 0, AK_BUF_X, 0);
                ak_cmd_bind(c, 1, AK_BUF_T, 0);
                ak_cmd_bind(c, 2, AK_BUF_WEIGHTS, off_nw);
                ak_cmd_bind(c, 3, AK_BUF_WEIGHTS, off_nw + (size_t)(m / 2) * D * 4);
                ak_cmd_bind(c, 4, AK_BUF_XN, 0);
            }
            if (gated && m == 0) {
                ak_p_mm p = {.n = 1, .K = D, .nseg = 2, .N = {H, H}, .dtype = {dt[0], dt[5]}, .ld_x = D, .ld_y = 2 * H};
                c = ak_table_push(&tb, AK_K_GEMV, &p, sizeof p, "gate_up");
                ak_cmd_bind(c, 0, AK_BUF_WEIGHTS, off[0]);
                ak_cmd_bind(c, 1, AK_BUF_WEIGHTS, off[5]);
                ak_cmd_bind(c, 2, AK_BUF_WEIGHTS, off[0]);
                ak_cmd_bind(c, 3, AK_BUF_XN, 0);
                ak_cmd_bind(c, 4, AK_BUF_GU, 0);
                ak_cmd_bind(c, 5, AK_BUF_WEIGHTS, off_b);
                continue;
            }
            if (gated && m == 1) {
                ak_p_act_down p = {.n = 1, .K = H, .N = D, .dtype = dt[1], .act = AK_ACT_SILU, .ld_gu = 2 * H};
                c = ak_table_push(&tb, AK_K_GEMV_ACT_DOWN, &p, sizeof p, "act_down");
                ak_cmd_bind(c, 0, AK_BUF_WEIGHTS, off[1]);
                ak_cmd_bind(c, 1, AK_BUF_GU, 0);
                ak_cmd_bind(c, 2, AK_BUF_T, 0);
                continue;
            }
            const bool in_xn = m % 2 == 0;
            const ak_buf_id hid = m < 2 ? AK_BUF_GU : AK_BUF_ACT;
            const ak_buf_id y = m == 4 ? AK_BUF_LOGITS : in_xn ? hid : AK_BUF_T;
            ak_p_mm p = {.n = 1, .K = Ks[m], .nseg = 1, .N = {Ns[m]}, .dtype = {dt[m]}, .ld_x = Ks[m], .ld_y = Ns[m], .has_bias = m == 2};
            c = ak_table_push(&tb, AK_K_GEMV, &p, sizeof p, "mm");
            for (int s = 0; s < 3; s++) ak_cmd_bind(c, s, AK_BUF_WEIGHTS, off[m]);
            ak_cmd_bind(c, 3, in_xn ? AK_BUF_XN : hid, 0);
            ak_cmd_bind(c, 4, y, 0);
            ak_cmd_bind(c, 5, AK_BUF_WEIGHTS, off_b);
        }
        tb.max_rows = 1;
        ak_run r = {.pos = 0, .n = 1, .steps = STEPS};
        double x[D], xn[D], t[D], *out = malloc(V * sizeof(double)), *h = malloc(H * sizeof(double)), *u = malloc(H * sizeof(double));
        float *row = malloc((D > H ? D : H) * sizeof(float));   /* a dequantized row of any of the matrices */
        for (int k = 0; k < D; k++) x[k] = ((const float *)w.data[AK_BUF_X])[k];
        for (int s = 0; s < STEPS; s++)
            for (int l = 0; l < 2; l++) {
                rms_norm_ref(x, nw + l * D, D, xn);
                mv_ref(dt[2 * l], w.data[0] + off[2 * l], D, H, xn, l ? bias : NULL, h, row);
                if (gated && l == 0) {
                    mv_ref(dt[5], w.data[0] + off[5], D, H, xn, NULL, u, row);
                    for (int k = 0; k < H; k++) h[k] = h[k] / (1.0 + exp(-h[k])) * u[k];
                }
                mv_ref(dt[2 * l + 1], w.data[0] + off[2 * l + 1], H, D, h, NULL, t, row);
                for (int k = 0; k < D; k++) x[k] += t[k];
            }
        rms_norm_ref(x, nw + 2 * D, D, xn);
        mv_ref(dt[4], w.data[0] + off[4], D, V, xn, NULL, out, row);
        float *gx = run_on(gpu, &tb, &w, r, AK_BUF_X, 0, D), *go = run_on(gpu, &tb, &w, r, AK_BUF_LOGITS, 0, V);
        double dx = vs_ref(gx, x, D), d_o = vs_ref(go, out, V);
        /* int8 codes of every GEMV's input against exact doubles: about 1e-2; the gated
         * layer rounds twice more (the product silu(g) * u from rounded g and u, then
         * its own codes): 2.6e-2. A wrong row or pair is off by order 1. */
        const double tol = gated ? 5e-2 : 3e-2;
        CHECK(dx <= tol && d_o <= tol, "decode layers variant %d: x rel %.3g, out rel %.3g", v, dx, d_o);
        /* and against the CPU backend, which rounds the inputs to the same codes, but sums
         * in another order: a value on a rounding boundary takes the next code on one of
         * them and the difference grows through the layers (1e-7 to 6e-3 alone, up to
         * 1.1e-2 through the gated layer's extra roundings, over random draws) */
        float *cx = run_on(cpu, &tb, &w, r, AK_BUF_X, 0, D);
        for (int k = 0; k < D; k++) t[k] = cx ? cx[k] : 0.0;
        const double dc = cx ? vs_ref(gx, t, D) : 1.0;
        CHECK(dc <= (gated ? 2e-2 : 1e-2), "decode layers variant %d: x rel %.3g against the CPU backend", v, dc);
        CHECK(!gated || gu_untouched(&tb, &w, r, H) == (v == 3), "decode layers variant %d: act(g) * u went out as %s", v,
              v == 3 ? "floats, not as the down projection's codes" : "codes (only the streaming kernel makes them)");
        printf("decode layers variant %d (%s%s): x rel %.2e, out rel %.2e; against the CPU x rel %.2e\n", v, ak_dtype_info[q].name,
               gated ? ", gated MLP" : "", dx, d_o, dc);
        free(cx);
        free(gx);
        free(go);
        free(out);
        free(row);
        free(h);
        free(u);
        ak_table_free(&tb);
        w_free(&w);
    }
}

/* Appends y = W x, one row, W (K x N of dtype t) at the start of the weights. */
static void push_gemv(ak_table *tb, int K, int N, ak_dtype t, ak_buf_id x, ak_buf_id y, const char *label) {
    ak_p_mm p = {.n = 1, .K = K, .nseg = 1, .N = {N}, .dtype = {t}, .ld_x = K, .ld_y = N};
    ak_cmd *c = ak_table_push(tb, AK_K_GEMV, &p, sizeof p, label);
    if (!c) return;
    for (int s = 0; s < 3; s++) ak_cmd_bind(c, s, AK_BUF_WEIGHTS, 0);
    ak_cmd_bind(c, 3, x, 0);
    ak_cmd_bind(c, 4, y, 0);
    ak_cmd_bind(c, 5, AK_BUF_WEIGHTS, 0);
}

/* Embedding rows, alone (file layout) and tied to a GEMV that repacks the table. */
static void test_embed(void) {
    for (int ti = 0; ti < NTYPES; ti++)
        for (int tied = 0; tied < 2; tied++) {
            ak_dtype t = all_types[ti];
            int blk = ak_dtype_info[t].block < 32 ? 32 : ak_dtype_info[t].block;
            int dim = 2 * blk, V = 50, n = 6;
            world w;
    memset(&w, 0, sizeof w);
            w_set(&w, AK_BUF_WEIGHTS, ak_dtype_row_bytes(t, dim) * V + 256);
            fill_quant(w.data[0], t, (int64_t)dim * V);
            w_set(&w, AK_BUF_TOKENS, 64 * 4);
            for (int i = 0; i < 64; i++) ((int32_t *)w.data[AK_BUF_TOKENS])[i] = (int32_t)(ak_rand_u32(&rng) % V);
            w_set(&w, AK_BUF_X, (size_t)n * dim * 4);
            w_rand(&w, AK_BUF_XN, (size_t)dim * 4, 1.f);
            w_set(&w, AK_BUF_LOGITS, (size_t)V * 4);
            ak_table tb = {0};
            ak_p_embed p = {.n = n, .dim = dim, .dtype = t, .scale = tied ? 1.f : 1.5f};
            ak_cmd *c = ak_table_push(&tb, AK_K_EMBED, &p, sizeof p, "embed");
            ak_cmd_bind(c, 0, AK_BUF_WEIGHTS, 0);
            ak_cmd_bind(c, 1, AK_BUF_TOKENS, 0);
            ak_cmd_bind(c, 2, AK_BUF_X, 0);
            c->patch = AK_PATCH_TOK_IN | AK_PATCH_N;
            c->bind_tok = 1;
            if (tied) {
                push_gemv(&tb, dim, V, t, AK_BUF_XN, AK_BUF_LOGITS, "logits");
            }
            tb.max_rows = n;
            ak_run r = {.pos = 3, .n = n, .steps = 1};
            double d = compare(&tb, &w, r, AK_BUF_X, 0, (size_t)n * dim);
            CHECK(d == 0, "embed %s tied %d: rel %.3g (the dequantized values must be exact)", ak_dtype_info[t].name, tied, d);
            ak_table_free(&tb);
            w_free(&w);
        }
}

/* What encoders add: embeddings plus learned positions (from pos) and token type 0, in
 * F32 and F16 tables (exact); LayerNorm with a bias; an ungated erf-GELU. */
static void test_encoder_ops(void) {
    for (int f16 = 0; f16 < 2; f16++) {
        const ak_dtype t = f16 ? AK_F16 : AK_F32;
        const int dim = 96, V = 40, P = 64, n = 7;
        const size_t rb = ak_dtype_row_bytes(t, dim);
        world w;
        memset(&w, 0, sizeof w);
        w_set(&w, AK_BUF_WEIGHTS, rb * (V + P + 1) + 256);
        fill_quant(w.data[0], t, (int64_t)dim * (V + P + 1));
        w_set(&w, AK_BUF_TOKENS, 64 * 4);
        for (int i = 0; i < 64; i++) ((int32_t *)w.data[AK_BUF_TOKENS])[i] = (int32_t)(ak_rand_u32(&rng) % V);
        w_set(&w, AK_BUF_X, (size_t)n * dim * 4);
        ak_table tb = {0};
        ak_p_embed p = {.n = n, .dim = dim, .dtype = t, .pos_dtype = t, .type_dtype = t, .scale = 1.f,
                        .flags = AK_EMBED_F_POS | AK_EMBED_F_TYPE};
        ak_cmd *c = ak_table_push(&tb, AK_K_EMBED, &p, sizeof p, "embed");
        ak_cmd_bind(c, 0, AK_BUF_WEIGHTS, 0);
        ak_cmd_bind(c, 1, AK_BUF_TOKENS, 0);
        ak_cmd_bind(c, 2, AK_BUF_X, 0);
        ak_cmd_bind(c, 3, AK_BUF_WEIGHTS, rb * V);
        ak_cmd_bind(c, 4, AK_BUF_WEIGHTS, rb * (V + P));
        c->patch = AK_PATCH_TOK_IN | AK_PATCH_N | AK_PATCH_POS;
        c->off_pos = offsetof(ak_p_embed, pos);
        c->bind_tok = 1;
        tb.max_rows = n;
        ak_run r = {.pos = 5, .n = n, .steps = 1};
        double d = compare(&tb, &w, r, AK_BUF_X, 0, (size_t)n * dim);
        CHECK(d == 0, "embed with positions and token type (%s): rel %.3g (must be exact)", ak_dtype_info[t].name, d);
        ak_table_free(&tb);
        w_free(&w);
    }
    {   /* LayerNorm alone, written over its input (after the add: test_rope_norm) */
        const int n = 5, dim = 384;
        world w;
        memset(&w, 0, sizeof w);
        w_rand(&w, AK_BUF_X, (size_t)n * dim * 4, 1.f);
        for (size_t i = 0; i < (size_t)n * dim; i++) ((float *)w.data[AK_BUF_X])[i] += 3.f;   /* a mean to remove */
        w_rand(&w, AK_BUF_WEIGHTS, (size_t)2 * dim * 4, 1.f);
        ak_p_norm p = {.n = n, .dim = dim, .eps = 1e-12f, .flags = AK_NORM_F_LAYER};
        ak_table tb = {0};
        ak_cmd *c = ak_table_push(&tb, AK_K_NORM, &p, sizeof p, "layer_norm");
        ak_cmd_bind(c, 0, AK_BUF_X, 0);
        ak_cmd_bind(c, 1, AK_BUF_WEIGHTS, 0);
        ak_cmd_bind(c, 2, AK_BUF_X, 0);
        ak_cmd_bind(c, 3, AK_BUF_WEIGHTS, (size_t)dim * 4);
        double d = compare_n(&tb, &w, n, AK_BUF_X, (size_t)n * dim);
        /* each backend's float mean of 384 values near 3 is good to a few ulps of 3 (2.4e-7
         * each), and an error e in it moves every output by e / std (std 0.58): 1.2-1.4e-6
         * measured over draws, where a wrong mean, scale or bias is off by order 1 */
        CHECK(d <= 4e-6, "LayerNorm: rel %.3g", d);
    }
    {
        const int n = 3, K = 1000;
        world w;
        memset(&w, 0, sizeof w);
        w_rand(&w, AK_BUF_GU, (size_t)n * K * 4, 4.f);
        w_set(&w, AK_BUF_ACT, (size_t)n * K * 4);
        ak_p_act p = {.n = n, .K = K, .act = AK_ACT_GELU_ERF, .ld_gu = K, .gated = 0};
        ak_table tb = {0};
        ak_cmd *c = ak_table_push(&tb, AK_K_ACT_GATE, &p, sizeof p, "act");
        ak_cmd_bind(c, 0, AK_BUF_GU, 0);
        ak_cmd_bind(c, 1, AK_BUF_ACT, 0);
        double d = compare_n(&tb, &w, n, AK_BUF_ACT, (size_t)n * K);
        CHECK(d <= 1e-6, "ungated erf-GELU: rel %.3g", d);
    }
}

/* KV cache types by code: K and V alike as F32, F16, Q8_0, Q4_0; then F16 keys with Q8_0
 * values, and Q8_0 keys with Q4_0 values. */
static const ak_dtype kv_kt[] = {AK_F32, AK_F16, AK_Q8_0, AK_Q4_0, AK_F16, AK_Q8_0};
static const ak_dtype kv_vt[] = {AK_F32, AK_F16, AK_Q8_0, AK_Q4_0, AK_Q8_0, AK_Q4_0};

/* The K cache then the V cache of `rows` rows of head hd in buffer KV: random values up to
 * 2 (quantized: blocks of modest scales); returns the K cache's bytes. */
static size_t fill_kv(world *w, ak_dtype kt, ak_dtype vt, size_t rows, int hd) {
    const size_t kbytes = rows * ak_dtype_row_bytes(kt, hd);
    w_set(w, AK_BUF_KV, kbytes + rows * ak_dtype_row_bytes(vt, hd));
    for (int c = 0; c < 2; c++) {
        const ak_dtype t = c ? vt : kt;
        uint8_t *at = w->data[AK_BUF_KV] + (c ? kbytes : 0);
        if (t == AK_F32 || t == AK_F16)
            for (size_t i = 0; i < rows * hd; i++) {
                float v = ak_rand_f(&rng) * 2.f;
                if (t == AK_F16) { uint16_t h = ak_f32_to_f16(v); memcpy(at + 2 * i, &h, 2); }
                else memcpy(at + 4 * i, &v, 4);
            }
        else fill_quant(at, t, (int64_t)(rows * hd));
    }
    return kbytes;
}

/* An attention command over QKV and the caches in KV (V at kbytes), writing ATT. */
static void push_attn(ak_table *tb, int prefill, const ak_p_attn *p, size_t kbytes) {
    ak_cmd *c = ak_table_push(tb, prefill ? AK_K_ATTN_PREFILL : AK_K_ATTN_DECODE, p, sizeof *p, "attn");
    ak_cmd_bind(c, 0, AK_BUF_QKV, 0);
    ak_cmd_bind(c, 1, AK_BUF_KV, 0);
    ak_cmd_bind(c, 2, AK_BUF_KV, kbytes);
    ak_cmd_bind(c, 3, AK_BUF_ATT, 0);
    c->patch = AK_PATCH_POS | AK_PATCH_KVLEN | AK_PATCH_N;
    c->off_pos = 4;
    c->off_kv = 8;
    c->off_n = 0;
}

/* Attention with the K/V cache (types by kv's code) filled at random; decode at long
 * context and prefill. proj (a dtype, decode only): an output projection after the
 * attention, whose x prologue merges the attention's splits (PRO_MERGE), compared on its
 * output; the attention and projection run twice, as two layers would. */
static int ring_cap;   /* one_attn's cache: rows a KV head keeps, a ring (ak_kv_row); 0: max_seq */
static void one_attn(int prefill, int n, int pos, int nh, int nkv, int hd, int max_seq, int kv, int window, float softcap, int causal,
                     int proj) {
    world w;
    memset(&w, 0, sizeof w);
    int ld_q = (nh + 2 * nkv) * hd;
    w_rand(&w, AK_BUF_QKV, (size_t)n * ld_q * 4, 1.f);
    const ak_dtype kt = kv_kt[kv], vt = kv_vt[kv];
    const size_t rows = (size_t)nkv * (ring_cap ? ring_cap : max_seq), kbytes = fill_kv(&w, kt, vt, rows, hd);
    w_set(&w, AK_BUF_ATT, (size_t)n * nh * hd * 4);
    ak_table tb = {0};
    ak_p_attn p = {.n = n, .n_heads = nh, .n_kv_heads = nkv, .head_dim = hd, .ld_q = ld_q, .max_seq = max_seq,
                   .kt = kt, .vt = vt, .window = window, .causal = causal, .scale = 1.f / sqrtf((float)hd), .softcap = softcap,
                   .cap = ring_cap};
    push_attn(&tb, prefill, &p, kbytes);
    const int K = nh * hd, N = 96;
    if (proj) {
        w_set(&w, AK_BUF_WEIGHTS, ak_dtype_row_bytes(proj, K) * N);
        fill_quant(w.data[AK_BUF_WEIGHTS], proj, (int64_t)K * N);
        w_set(&w, AK_BUF_T, (size_t)N * 4);
        push_gemv(&tb, K, N, proj, AK_BUF_ATT, AK_BUF_T, "attn_output");
        /* the pair again, as the next layer's on the same buffers: every pair folds */
        for (int i = 0; i < 2; i++) {
            ak_cmd *d = ak_table_push(&tb, (ak_kernel)tb.cmds[i].kernel, tb.cmds[i].params, sizeof tb.cmds[i].params, tb.labels[i]);
            if (d) *d = tb.cmds[i];
        }
    }
    tb.max_rows = n;
    ak_run r = {.pos = pos, .n = n, .steps = 1};
    size_t off = prefill ? 0 : (size_t)(n - 1) * nh * hd * 4, cnt = prefill ? (size_t)n * nh * hd : (size_t)nh * hd;
    double d, tol;
    if (proj) {
        /* against the CPU's attention output times the dequantized weights, in double
         * (the CPU's GEMV quantizes its input); where the projection merges, the
         * attention leaves its output unwritten */
        float *ca = run_on(cpu, &tb, &w, r, AK_BUF_ATT, off, cnt), *ga = run_on(gpu, &tb, &w, r, AK_BUF_ATT, off, cnt);
        float *got = run_on(gpu, &tb, &w, r, AK_BUF_T, 0, N), *row = malloc((size_t)K * sizeof(float));
        double *ref = calloc(N, sizeof(double));
        for (int j = 0; ca && j < N; j++) {
            deq_row(proj, w.data[AK_BUF_WEIGHTS], K, j, row);
            for (int k = 0; k < K; k++) ref[j] += (double)row[k] * ca[k];
        }
        d = vs_ref(got, ref, N);
        tol = is_float(proj) ? 2e-5 : 1e-2;   /* the reference's x is not the codes */
        /* a split per 32 keys up to the grid's, which is at least 4 where the cache has
         * more keys: the projection merges exactly when the keys need at most 4 */
        int keys = window > 0 && pos + 1 > window ? window : pos + 1, splits = (keys + 31) / 32, zero = 1;
        for (size_t i = 0; ga && i < cnt; i++) zero = zero && ga[i] == 0.f;
        CHECK(ga && zero == (splits <= 4), "attn + proj pos %d: %d splits, output %s", pos, splits, zero ? "unwritten" : "written");
        free(ca);
        free(ga);
        free(got);
        free(row);
        free(ref);
    } else {
        d = compare(&tb, &w, r, AK_BUF_ATT, off, cnt);
        /* the tensor-core prefill (an F16 or quantized cache, heads of 64, 128 or 256) rounds
         * q and p to f16; both tensor-core kernels (the decode's: heads of 64 or 128, and 256
         * with F16 beside a quantized cache, kv 4) round a quantized cache's values d * q
         * to f16 (the CPU keeps them exact) */
        const bool ptc = hd != 32, dtc = hd == 64 || hd == 128 || (hd == 256 && kv == 4);
        tol = prefill && kv != 0 && ptc ? 3e-3 : !prefill && kv >= 2 && dtc ? 2e-3 : 1e-5;
    }
    CHECK(d <= tol, "attn %s n %d pos %d heads %d/%d hd %d kv %s/%s window %d softcap %g causal %d proj %d: rel %.3g",
          prefill ? "prefill" : "decode", n, pos, nh, nkv, hd, ak_dtype_info[kt].name, ak_dtype_info[vt].name, window,
          (double)softcap, causal, proj, d);
    printf("attn %-7s n %3d pos %4d hd %3d kv %s/%s window %3d%s: rel %.2e\n", prefill ? "prefill" : "decode", n, pos, hd,
           ak_dtype_info[kt].name, ak_dtype_info[vt].name, window, proj ? " + proj" : "", d);
    ak_table_free(&tb);
    w_free(&w);
}

static void test_attention(void) {
    one_attn(0, 1, 0, 8, 2, 64, 1000, 0, 0, 0, 1, 0);
    one_attn(0, 1, 700, 8, 2, 64, 1000, 0, 0, 0, 1, 0);
    one_attn(0, 1, 999, 4, 4, 128, 1000, 1, 0, 0, 1, 0);
    one_attn(0, 1, 900, 8, 1, 256, 1000, 0, 300, 30.f, 1, 0);
    one_attn(0, 1, 4000, 32, 8, 128, 4096, 1, 0, 0, 1, 0);
    /* decode, every head-group width the kernel is built for: groups of 2, 6 (8 wide,
     * two heads idle), 16 (two passes of 8), 8 at head size 32, 2 with a softcap */
    one_attn(0, 1, 300, 16, 8, 128, 512, 1, 0, 0, 1, 0);
    one_attn(0, 1, 77, 12, 2, 32, 128, 0, 0, 0, 1, 0);
    one_attn(0, 1, 500, 32, 2, 64, 1000, 1, 0, 0, 1, 0);
    one_attn(0, 1, 45, 8, 1, 32, 64, 1, 0, 0, 1, 0);
    one_attn(0, 1, 130, 4, 2, 256, 256, 1, 0, 50.f, 1, 0);
    one_attn(1, 100, 300, 8, 2, 64, 1000, 0, 0, 0, 1, 0);
    one_attn(1, 37, 0, 4, 4, 128, 512, 1, 0, 0, 1, 0);
    one_attn(1, 70, 100, 8, 1, 256, 512, 0, 50, 50.f, 1, 0);
    one_attn(1, 33, 0, 4, 2, 32, 64, 0, 0, 0, 0, 0);
    /* tensor cores: partial tiles, GQA, window + softcap, not causal, one row */
    one_attn(1, 100, 300, 8, 2, 64, 1000, 1, 0, 0, 1, 0);
    one_attn(1, 130, 50, 8, 2, 128, 512, 1, 40, 30.f, 1, 0);
    one_attn(1, 70, 0, 4, 4, 64, 128, 1, 0, 0, 0, 0);
    one_attn(1, 1, 10, 4, 2, 128, 64, 1, 0, 0, 1, 0);
    one_attn(1, 512, 0, 16, 8, 128, 1024, 1, 0, 0, 1, 0);
    /* heads of 256 (a block a half of the values): window + softcap, not causal, one row;
     * a long cache's key splits (rows over several splits merged, rows of a window in one
     * written by their block) over F16, Q8_0 and Q4_0 values (rotated back per half) */
    one_attn(1, 130, 50, 8, 2, 256, 512, 1, 40, 30.f, 1, 0);
    one_attn(1, 70, 0, 4, 4, 256, 128, 1, 0, 0, 0, 0);
    one_attn(1, 1, 10, 4, 2, 256, 64, 1, 0, 0, 1, 0);
    for (int kv = 1; kv < 4; kv++) {
        one_attn(1, 512, 3000, 8, 1, 256, 4096, kv, 0, 0, 1, 0);
        one_attn(1, 200, 2200, 8, 2, 256, 4096, kv, 300, 0, 1, 0);
    }
    /* decode + projection: 1 to 4 splits merged by the projection, more by the attention,
     * a sliding window of 2 splits at a long position, GQA 4 and 1, F32 and F16 caches;
     * projections on the streaming kernel (Q4_0, Q8_0) and the int8 one (Q4_K, Q6_K) */
    const int pp[] = {0, 31, 40, 100, 127, 128, 300, 999};
    const ak_dtype pt[] = {AK_Q8_0, AK_Q8_0, AK_Q4_0, AK_Q4_0, AK_Q4_K, AK_Q6_K, AK_Q4_0, AK_Q4_0};
    for (int i = 0; i < 8; i++) one_attn(0, 1, pp[i], 8, 2, 64, 1000, i & 1, 0, 0, 1, pt[i]);
    one_attn(0, 1, 700, 4, 4, 128, 1000, 1, 50, 30.f, 1, AK_Q8_0);
    one_attn(0, 1, 90, 32, 8, 128, 4096, 1, 0, 0, 1, AK_Q4_0);
    /* depth: the grid's splits (up to 64 a head, as many as fill the SMs twice) in use
     * from 1 to all, each of the head sizes and groups (1, 2, 4, 6, 8) models have, F32
     * and F16 caches; then 32768 keys, a window deep in the cache, and a deep
     * attention merging its own splits ahead of a projection */
    const int depth[] = {1, 63, 64, 65, 4097};
    const int shape[][3] = {{8, 8, 64}, {16, 8, 128}, {32, 8, 128}, {8, 1, 256}, {12, 2, 32}, {32, 4, 64}};
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 6; j++)
            one_attn(0, 1, depth[i] - 1, shape[j][0], shape[j][1], shape[j][2], depth[i] + 3, (i + j) & 1, 0, 0, 1, 0);
    one_attn(0, 1, 32767, 16, 8, 128, 32768, 1, 0, 0, 1, 0);
    one_attn(0, 1, 32767, 8, 1, 256, 32770, 0, 0, 30.f, 1, 0);
    one_attn(0, 1, 32767, 32, 8, 128, 32768, 1, 4096, 0, 1, 0);
    one_attn(0, 1, 4096, 16, 8, 128, 4100, 1, 0, 0, 1, AK_Q4_0);
    /* quantized caches (codes 2-5), heads of 64 and 128: decode from one key to deep
     * (partial tiles, the key of this position in every lane of a tile, many splits, a
     * window, GQA 1 to 8), merged by a projection, and prefill (tensor cores) */
    const int qpos[] = {0, 17, 300, 4097};
    for (int kv = 2; kv < 6; kv++) {
        for (int i = 0; i < 4; i++) {
            one_attn(0, 1, qpos[i], 16, 8, 128, 4200, kv, 0, 0, 1, 0);
            one_attn(0, 1, qpos[i], 16, 2, 64, 4200, kv, i == 3 ? 1000 : 0, 0, 1, 0);
        }
        one_attn(0, 1, 77, 8, 8, 64, 128, kv, 0, 30.f, 1, AK_Q8_0);
        one_attn(1, 100, 300, 8, 2, 64, 1000, kv, 0, 0, 1, 0);
        one_attn(1, 37, 0, 4, 4, 128, 512, kv, 40, 0, 1, 0);
    }
    /* quantized pairs at heads of 32 and 256: the scalar decode (registers), and at 256 F16
     * keys beside Q8_0 values (kv 4) on tensor cores, Q's fragments in shared memory */
    for (int kv = 2; kv < 6; kv++) {
        one_attn(0, 1, 4097, 8, 1, 256, 4100, kv, 0, 30.f, 1, 0);
        one_attn(0, 1, 700, 8, 2, 256, 1000, kv, 300, 0, 1, 0);
        one_attn(1, 70, 100, 8, 1, 256, 512, kv, 50, 50.f, 1, 0);
        if (kv == 4) continue;   /* heads of 32 take no F16 beside a quantized cache */
        one_attn(0, 1, 0, 12, 2, 32, 128, kv, 0, 0, 1, 0);
        one_attn(0, 1, 999, 8, 8, 32, 1000, kv, 0, 0, 1, AK_Q4_0);
        one_attn(1, 33, 0, 4, 2, 32, 64, kv, 0, 0, 0, 0);
    }
    /* a sliding window over a ring of 768 rows (a key at slot j % 768) against the CPU's:
     * decode whose window and splits wrap past the ring's end (position 5000: keys
     * 4489..5000, slots 649..767 then 0..392), and prefill tiles on both sides of a wrap,
     * every kernel (tensor cores and scalar, F32/F16/quantized, heads 32 to 256) */
    ring_cap = 768;
    for (int kv = 0; kv < 6; kv++) {
        one_attn(0, 1, 5000, 16, 2, 64, 8192, kv, 512, 0, 1, 0);
        one_attn(0, 1, 4607, 8, 8, 128, 8192, kv, 512, 0, 1, kv < 2 ? AK_Q4_0 : 0);
        one_attn(0, 1, 2000, 8, 1, 256, 8192, kv, 300, 30.f, 1, 0);
        one_attn(0, 1, 1600, 12, 2, 32, 8192, kv < 4 ? kv : 2, 100, 0, 1, 0);
        one_attn(1, 100, 4560, 8, 2, 64, 8192, kv, 256, 0, 1, 0);
        one_attn(1, 64, 2280, 4, 4, 128, 8192, kv, 500, 0, 1, 0);
        one_attn(1, 40, 1500, 8, 1, 256, 8192, kv, 200, 50.f, 1, 0);
    }
    ring_cap = 0;
}

/* A rope_kv command over QKV (the q/k norm weights at WEIGHTS 0 and head_dim floats on,
 * the angles at AUX and the bias after them) writing keys at KV 0 and values at kbytes. */
static ak_cmd *push_rope(ak_table *tb, const ak_p_rope_kv *p, size_t kbytes) {
    ak_cmd *c = ak_table_push(tb, AK_K_ROPE_KV, p, sizeof *p, "rope");
    if (!c) return NULL;
    ak_cmd_bind(c, 0, AK_BUF_QKV, 0);
    ak_cmd_bind(c, 1, AK_BUF_WEIGHTS, 0);
    ak_cmd_bind(c, 2, AK_BUF_WEIGHTS, (size_t)p->head_dim * 4);
    ak_cmd_bind(c, 3, AK_BUF_AUX, 0);
    ak_cmd_bind(c, 4, AK_BUF_KV, 0);
    ak_cmd_bind(c, 5, AK_BUF_KV, kbytes);
    ak_cmd_bind(c, 6, AK_BUF_AUX, (size_t)p->head_dim / 2 * 4);
    c->patch = AK_PATCH_POS | AK_PATCH_N;
    c->off_pos = 4;
    return c;
}

/* The key and value rows a table writes at positions pos .. pos + n - 1 of every KV head
 * (values at kbytes), dequantized, GPU against CPU: rel L2 (a value at a rounding tie may
 * take the next code). */
static double kv_rows_rel(const ak_table *tb, const world *w, ak_run r, ak_dtype kt, ak_dtype vt, size_t kbytes, int nkv,
                          int max_seq, int pos, int n, int hd) {
    const size_t nb = (w->size[AK_BUF_KV] + 3) / 4, nv = (size_t)2 * n * nkv * hd;
    float *a = run_on(cpu, tb, w, r, AK_BUF_KV, 0, nb), *b = run_on(gpu, tb, w, r, AK_BUF_KV, 0, nb);
    float *da = malloc(nv * sizeof(float)), *db = malloc(nv * sizeof(float));
    const bool ok = a && b && da && db;
    size_t m = 0;
    for (int c = 0; ok && c < 2; c++)
        for (int kh = 0; kh < nkv; kh++)
            for (int i = 0; i < n; i++, m += hd) {
                const ak_dtype t = c ? vt : kt;
                const size_t at = (c ? kbytes : 0) + ((size_t)kh * max_seq + pos + i) * ak_dtype_row_bytes(t, hd);
                ak_dtype_info[t].dequant((const uint8_t *)a + at, da + m, hd);
                ak_dtype_info[t].dequant((const uint8_t *)b + at, db + m, hd);
            }
    const double d = ok ? ak_rel_l2(db, da, m) : 1;
    free(a);
    free(b);
    free(da);
    free(db);
    return d;
}

static void test_rope_norm(void) {
    /* variants 4-6: quantized caches (codes of one_attn's table), rows rotated */
    for (int v = 0; v < 7; v++) {
        int n = v == 3 || v == 5 ? 9 : 1, nh = 8, nkv = 2, hd = v == 2 ? 256 : v == 5 ? 128 : 64, pos = 37, max_seq = 64;
        int ld = (nh + 2 * nkv) * hd, kv = v < 4 ? v & 1 : v - 2;
        ak_dtype kt = kv_kt[kv], vt = kv_vt[kv];
        world w;
    memset(&w, 0, sizeof w);
        w_rand(&w, AK_BUF_QKV, (size_t)n * ld * 4, 1.f);
        w_set(&w, AK_BUF_WEIGHTS, 2 * (size_t)hd * 4);
        for (int i = 0; i < 2 * hd; i++) ((float *)w.data[0])[i] = 1.f + 0.5f * ak_rand_f(&rng);
        w_set(&w, AK_BUF_AUX, (size_t)(hd / 2 + ld) * 4);
        for (int i = 0; i < hd / 2; i++) ((float *)w.data[AK_BUF_AUX])[i] = powf(10000.f, -2.f * i / hd);
        for (int i = 0; i < ld; i++) ((float *)w.data[AK_BUF_AUX])[hd / 2 + i] = ak_rand_f(&rng);
        size_t rows = (size_t)nkv * max_seq, cache = rows * ak_dtype_row_bytes(kt, hd), vcache = rows * ak_dtype_row_bytes(vt, hd);
        w_set(&w, AK_BUF_KV, cache + vcache);
        ak_p_rope_kv p = {.n = n, .pos = pos, .n_heads = nh, .n_kv_heads = nkv, .head_dim = hd, .n_rot = v == 1 ? hd / 2 : hd,
                          .style = v & 1 ? AK_ROPE_NEOX : AK_ROPE_INTERLEAVED, .ld = ld, .max_seq = max_seq, .kt = kt, .vt = vt,
                          .flags = (v >= 2 ? AK_ROPE_F_QKNORM : 0) | (v == 3 || v == 5 ? AK_ROPE_F_BIAS : 0), .eps = 1e-6f};
        ak_table tb = {0};
        if (!push_rope(&tb, &p, cache)) { CHECK(0, "out of memory"); return; }
        tb.max_rows = n;
        ak_run r = {.pos = pos, .n = n, .steps = 1};
        double d = compare(&tb, &w, r, AK_BUF_QKV, 0, (size_t)n * ld);
        CHECK(d <= 1e-5, "rope variant %d: qkv rel %.3g", v, d);
        if (kv == 0) {   /* (an F16 cache is checked end to end by the fixtures) */
            d = compare(&tb, &w, r, AK_BUF_KV, 0, 2 * cache / 4);
            CHECK(d <= 1e-5, "rope variant %d: cache rel %.3g", v, d);
        } else if (kv >= 2) {   /* the rows written */
            d = kv_rows_rel(&tb, &w, r, kt, vt, cache, nkv, max_seq, pos, n, hd);
            CHECK(d <= 2e-3, "rope variant %d (%s/%s): cache rel %.3g", v, ak_dtype_info[kt].name, ak_dtype_info[vt].name, d);
        }
        ak_table_free(&tb);
        w_free(&w);
    }
    /* add_norm: RMSNorm, with Gemma's post-norm of the added branch, and LayerNorm with a
     * bias written over the residual itself (BERT's post-norm) */
    for (int v = 0; v < 3; v++) {
        int n = 5, dim = v == 2 ? 384 : 3000;
        const ak_buf_id out = v == 2 ? AK_BUF_X : AK_BUF_XN;
        world w;
    memset(&w, 0, sizeof w);
        w_rand(&w, AK_BUF_X, (size_t)n * dim * 4, 1.f);
        w_rand(&w, AK_BUF_T, (size_t)n * dim * 4, 1.f);
        w_rand(&w, AK_BUF_WEIGHTS, (size_t)3 * dim * 4, 1.f);
        w_set(&w, AK_BUF_XN, (size_t)n * dim * 4);
        ak_p_norm p = {.n = n, .dim = dim, .eps = 1e-5f, .flags = v == 1 ? AK_NORM_F_POST : v == 2 ? AK_NORM_F_LAYER : 0};
        ak_table tb = {0};
        ak_cmd *c = ak_table_push(&tb, AK_K_ADD_NORM, &p, sizeof p, "add_norm");
        ak_cmd_bind(c, 0, AK_BUF_X, 0);
        ak_cmd_bind(c, 1, AK_BUF_T, 0);
        ak_cmd_bind(c, 2, AK_BUF_WEIGHTS, 0);
        ak_cmd_bind(c, 3, AK_BUF_WEIGHTS, (size_t)dim * 4);
        ak_cmd_bind(c, 4, out, 0);
        ak_cmd_bind(c, 5, AK_BUF_WEIGHTS, (size_t)2 * dim * 4);
        double d = compare_n(&tb, &w, n, out, (size_t)n * dim);
        CHECK(d <= 1e-5, "add_norm variant %d: rel %.3g", v, d);
    }
}

/* RoPE + KV write and the decode attention after it, which the GPU folds into the
 * attention (rope_fold: the block ropes its queries and writes this position's key and
 * value), against the CPU's two commands: heads of 64, 128 and 256 on every cache pair but
 * F32, GQA 2 to 8, q/k norms with a bias, NEOX and interleaved, a partial rotation, a
 * window; the attention's output compared. */
static void test_rope_attn(void) {
    for (int v = 0; v < 15; v++) {
        const int hd = 64 << (v % 3), kv = 1 + v % 5, nkv = v % 2 ? 2 : 1, nh = nkv * (2 << (v % 3)), pos = 300 + 457 * v;
        const int ld = (nh + 2 * nkv) * hd, max_seq = 8192, window = v % 4 == 3 ? 1000 : 0;
        const ak_dtype kt = kv_kt[kv], vt = kv_vt[kv];
        world w;
        memset(&w, 0, sizeof w);
        w_rand(&w, AK_BUF_QKV, (size_t)ld * 4, 1.f);
        w_set(&w, AK_BUF_WEIGHTS, 2 * (size_t)hd * 4);
        for (int i = 0; i < 2 * hd; i++) ((float *)w.data[AK_BUF_WEIGHTS])[i] = 1.f + 0.5f * ak_rand_f(&rng);
        w_set(&w, AK_BUF_AUX, (size_t)(hd / 2 + ld) * 4);
        for (int i = 0; i < hd / 2; i++) ((float *)w.data[AK_BUF_AUX])[i] = powf(10000.f, -2.f * i / hd);
        for (int i = 0; i < ld; i++) ((float *)w.data[AK_BUF_AUX])[hd / 2 + i] = 0.1f * ak_rand_f(&rng);
        const size_t kbytes = fill_kv(&w, kt, vt, (size_t)nkv * max_seq, hd);
        w_set(&w, AK_BUF_ATT, (size_t)nh * hd * 4);
        ak_p_rope_kv rp = {.n = 1, .pos = pos, .n_heads = nh, .n_kv_heads = nkv, .head_dim = hd, .n_rot = v % 4 == 1 ? hd / 2 : hd,
                           .style = v & 1 ? AK_ROPE_NEOX : AK_ROPE_INTERLEAVED, .ld = ld, .max_seq = max_seq, .kt = kt, .vt = vt,
                           .flags = v % 3 == 2 ? AK_ROPE_F_QKNORM | AK_ROPE_F_BIAS : v % 3 ? AK_ROPE_F_QKNORM : 0, .eps = 1e-6f};
        ak_table tb = {0};
        if (!push_rope(&tb, &rp, kbytes)) { CHECK(0, "out of memory"); return; }
        ak_p_attn p = {.n = 1, .n_heads = nh, .n_kv_heads = nkv, .head_dim = hd, .ld_q = ld, .max_seq = max_seq, .kt = kt,
                       .vt = vt, .window = window, .causal = 1, .scale = 1.f / sqrtf((float)hd)};
        push_attn(&tb, 0, &p, kbytes);
        tb.max_rows = 1;
        ak_table f;
        if (fused_copy(&tb, gpu, &f)) {
            CHECK(f.n == 1 && (f.cmds[0].fuse & AK_FUSE_ROPE), "rope + attention hd %d: not folded on the GPU", hd);
            ak_table_free(&f);
        }
        ak_run r = {.pos = pos, .n = 1, .steps = 1};
        /* the key and value rows this position wrote, as the rope_kv test holds them */
        const double dc = kv_rows_rel(&tb, &w, r, kt, vt, kbytes, nkv, max_seq, pos, 1, hd);
        CHECK(dc <= 2e-3, "rope + attention hd %d kv %s/%s: rows written rel %.3g", hd, ak_dtype_info[kt].name, ak_dtype_info[vt].name, dc);
        /* tensor cores over a quantized cache (f16 products of K and V): over 30 seeds
         * rel 1e-3 at the median and up to 3.9e-3 where random Q8_0 keys (RMS 2, twice a
         * normalised key's) make the softmax peaked (Q8_0 K, Q4_0 V, heads of 128) */
        const double d = compare(&tb, &w, r, AK_BUF_ATT, 0, (size_t)nh * hd), tol = kv == 1 ? 1e-4 : 1e-2;
        CHECK(d <= tol, "rope + attention hd %d heads %d/%d kv %s/%s pos %d: rel %.3g", hd, nh, nkv, ak_dtype_info[kt].name,
              ak_dtype_info[vt].name, pos, d);
        printf("rope + attention hd %3d heads %2d/%d kv %s/%s pos %4d: rel %.2e\n", hd, nh, nkv, ak_dtype_info[kt].name,
               ak_dtype_info[vt].name, pos, d);
        ak_table_free(&tb);
        w_free(&w);
    }
}

/* A one-command table: the sample command over row n-1 of the logits. */
static void sample_table(ak_table *tb, int n, int vocab) {
    memset(tb, 0, sizeof *tb);
    ak_p_sample pa = {.n = n, .vocab = vocab};
    ak_cmd *c = ak_table_push(tb, AK_K_SAMPLE, &pa, sizeof pa, "sample");
    ak_cmd_bind(c, 0, AK_BUF_LOGITS, 0);
    ak_cmd_bind(c, 1, AK_BUF_TOKENS, 0);
    ak_cmd_bind(c, 2, AK_BUF_SAMPLE, 0);
    c->patch = AK_PATCH_TOK_OUT | AK_PATCH_POS | AK_PATCH_KVLEN;
    c->off_pos = offsetof(ak_p_sample, pos);
    c->off_kv = offsetof(ak_p_sample, kv_len);
    c->bind_tok = 1;
    tb->max_rows = n;
}

static void w_sample(world *w, int vocab, const ak_sample_cfg *cfg) {
    w_set(w, AK_BUF_SAMPLE, (size_t)ak_sample_buf_bytes(vocab));
    memcpy(w->data[AK_BUF_SAMPLE], cfg, sizeof *cfg);
    uint32_t *mask = (uint32_t *)((uint8_t *)w->data[AK_BUF_SAMPLE] + AK_SAMPLE_MASK_OFF);
    for (int i = 0; i < (vocab + 31) / 32; i++) mask[i] = ak_rand_u32(&rng) | ak_rand_u32(&rng);   /* 3/4 allowed */
}

/* The sample command on the GPU against the CPU's (the reference pick, core/sample.c):
 * argmax with ties; every mode, filter and penalty on vocabularies of 1000, 151936 and
 * 262144 ids, chains of draws keyed by position giving the same ids; and the
 * distribution of 100000 draws against the exact probabilities (chi-square). */
static void test_sample(void) {
    int V = 151936;
    ak_sample_cfg zero;
    memset(&zero, 0, sizeof zero);
    world w;
    memset(&w, 0, sizeof w);
    w_rand(&w, AK_BUF_LOGITS, (size_t)2 * V * 4, 1.f);
    float *lg = (float *)w.data[AK_BUF_LOGITS] + V;
    lg[100000] = 5.f;
    lg[120000] = 5.f;
    w_set(&w, AK_BUF_TOKENS, 64);
    w_sample(&w, V, &zero);
    ak_table tb;
    sample_table(&tb, 2, V);
    ak_run r = {.pos = 3, .n = 2, .steps = 1};
    float *g = run_on(gpu, &tb, &w, r, AK_BUF_TOKENS, 0, 16);
    CHECK(g && ((int32_t *)g)[5] == 100000, "argmax: %d", g ? ((int32_t *)g)[5] : -1);
    free(g);
    ak_table_free(&tb);
    w_free(&w);

    const int vocabs[] = {1000, 151936, 262144};
    for (int vi = 0; vi < 3; vi++)
        for (int t = 0; t < 8; t++) {
            int vocab = vocabs[vi], pos = 200, steps = t < 5 ? 64 : 1;
            ak_sample_cfg cfg = {.mode = t == 7 ? AK_SAMPLE_GREEDY : AK_SAMPLE_DRAW, .top_k = (int[]){40, 1, 128, 7, 64, 40, 100, 1}[t],
                                 .masked = t == 3 || t == 6, .temperature = (float[]){0.8f, 1, 1.5f, 0.3f, 2.5f, 0.8f, 1, 1}[t],
                                 .top_p = t == 0 || t == 5 ? 0.95f : t == 2 ? 0.5f : 1.0f, .min_p = t == 0 || t == 5 ? 0.05f : t == 4 ? 0.2f : 0,
                                 .repeat = 1.0f, .seed = 1234u + (uint64_t)t};
            if (t >= 5) { cfg.last_n = 64; cfg.repeat = 1.3f; cfg.presence = 0.5f; cfg.frequency = 0.2f; }
            memset(&w, 0, sizeof w);
            w_rand(&w, AK_BUF_LOGITS, (size_t)vocab * 4, t == 2 ? 0.05f : 3.f);   /* t 2: nearly flat */
            w_set(&w, AK_BUF_TOKENS, (size_t)(pos + steps + 1) * 4);
            float *l = (float *)w.data[AK_BUF_LOGITS];
            for (int i = 0; i < pos; i++) {   /* the window: a few ids, repeated, given high logits */
                int32_t id = (int32_t)(ak_rand_u32(&rng) % 16) * (vocab / 16);
                ((int32_t *)w.data[AK_BUF_TOKENS])[i] = id;
                l[id] = 4.f;
            }
            w_sample(&w, vocab, &cfg);
            sample_table(&tb, 1, vocab);
            ak_run rr = {.pos = pos - 1, .n = 1, .steps = steps};
            float *a = run_on(cpu, &tb, &w, rr, AK_BUF_TOKENS, (size_t)pos * 4, steps);
            float *b = run_on(gpu, &tb, &w, rr, AK_BUF_TOKENS, (size_t)pos * 4, steps);
            int same = 0, distinct = 0;
            for (int i = 0; a && b && i < steps; i++) {
                same += ((int32_t *)a)[i] == ((int32_t *)b)[i];
                distinct += i > 0 && ((int32_t *)a)[i] != ((int32_t *)a)[i - 1];
            }
            /* the same choice but where a rounding difference flips a near tie */
            CHECK(same >= steps - steps / 32, "sample vocab %d case %d: GPU = CPU in %d of %d", vocab, t, same, steps);
            if (steps > 1 && cfg.top_k > 1) CHECK(distinct > 0, "sample vocab %d case %d: every draw the same", vocab, t);
            free(a);
            free(b);
            ak_table_free(&tb);
            w_free(&w);
        }

    /* the distribution: 100000 positions over fixed logits, top-k 40, top-p 0.9, min-p 0.02, T 0.9 */
    enum { N = 100000, VV = 5000 };
    ak_sample_cfg cfg = {.mode = AK_SAMPLE_DRAW, .top_k = 40, .temperature = 0.9f, .top_p = 0.9f, .min_p = 0.02f, .repeat = 1, .seed = 77};
    memset(&w, 0, sizeof w);
    w_rand(&w, AK_BUF_LOGITS, (size_t)VV * 4, 4.f);
    w_set(&w, AK_BUF_TOKENS, (size_t)(N + 2) * 4);
    w_sample(&w, VV, &cfg);
    sample_table(&tb, 1, VV);
    ak_run rr = {.pos = 0, .n = 1, .steps = N};
    float *b = run_on(gpu, &tb, &w, rr, AK_BUF_TOKENS, 4, N);
    /* the exact probabilities: sort, top-k, top-p and min-p at temperature 1, softmax at T */
    const float *l = (const float *)w.data[AK_BUF_LOGITS];
    int ord[40], k = 0;
    for (int i = 0; i < VV; i++) {   /* insertion into the 40 best */
        int j;
        if (k < 40) j = k++;
        else if (l[i] <= l[ord[39]]) continue;
        else j = 39;
        while (j > 0 && l[ord[j - 1]] < l[i]) { ord[j] = ord[j - 1]; j--; }
        ord[j] = i;
    }
    double mx = l[ord[0]], sum = 0, acc = 0, z = 0;
    for (int i = 0; i < 40; i++) sum += exp(l[ord[i]] - mx);
    int m = 40;
    for (int i = 0; i < 40; i++) { acc += exp(l[ord[i]] - mx); if (acc >= 0.9 * sum) { m = i + 1; break; } }
    while (m > 1 && l[ord[m - 1]] < mx + log(0.02)) m--;
    for (int i = 0; i < m; i++) z += exp((l[ord[i]] - mx) / 0.9);
    int *hist = calloc(VV, sizeof *hist);
    for (int i = 0; b && i < N; i++) {
        int32_t id = ((int32_t *)b)[i];
        if (id >= 0 && id < VV) hist[id]++;
    }
    double chi = 0;
    int outside = N;
    for (int i = 0; i < m; i++) {
        double e = N * exp((l[ord[i]] - mx) / 0.9) / z;
        chi += (hist[ord[i]] - e) * (hist[ord[i]] - e) / e;
        outside -= hist[ord[i]];
    }
    /* m - 1 degrees of freedom (at most 39): 80 is beyond the 0.9999 quantile (about 73 for 39) */
    CHECK(b && outside == 0 && chi < 80, "sample distribution: %d draws outside the %d kept, chi-square %.1f", outside, m, chi);
    printf("sample distribution: %d kept ids, chi-square %.1f over %d draws\n", m, chi, N);
    free(hist);
    free(b);
    ak_table_free(&tb);
    w_free(&w);
}

int main(void) {
    ak_err err = {{0}};
    if (!ak_backend_cuda_present()) { printf("no CUDA GPU: skipped\n"); return 77; }
    if (ak_backend_cpu_create(4, &cpu, &err) || ak_backend_cuda_create(&gpu, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    test_matmul();
    test_gemm_rows();
    test_act_down();
    test_gated();
    test_mixed_norm();
    test_post_norm();
    test_decode_layers();
    test_embed();
    test_encoder_ops();
    test_attention();
    test_rope_norm();
    test_rope_attn();
    test_sample();
    cpu->destroy(cpu);
    gpu->destroy(gpu);
    return ak_test_done();
}
