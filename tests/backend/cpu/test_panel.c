/* Panels of the block types (panel.h, panel_q.c): for every ggml and MLX block type,
 * at every SIMD level and VNNI flavour this CPU has, random weights of odd shapes
 * (N = 1, 15, 17, 40, 100; K the type's minimum, an odd number of blocks, 4096 + a block),
 * packed in two panel ranges, multiplied with n = 1, 3, 8, 37 (and 70, past one cache
 * block of activation rows) activation rows, with and
 * without bias, in two panel ranges (as two threads would): against a double-precision
 * dot of the dequantized weights with d * q of the int8-quantized x (test_dotq's
 * tolerance 1e-5 * sum|w x| + 1e-6), the scalar panel kernel against the SIMD ones, and
 * output columns past N untouched. Then GEMV / GEMM / GEMV_ACT_DOWN commands with panel
 * segments (mixed with row-kernel segments, fused, bias, last_only, 1 and 3 threads)
 * against the same reference, and with float activations forced after packing
 * (ak_cpu_act_f32) against the float reference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cpu/cpu.h"
#include "backend/cpu/panel.h"
#include "test_util.h"

static uint64_t rng = 4242;

#include "backend/cpu/cpu_test.h"

static void *amalloc(size_t n) { return aligned_alloc(64, (n + 63) & ~(size_t)63); }

/* ref[i * ldr + r] = bias[r] + sum_k w[r][k] * d q(x_i)[k] in double, mag the same over |terms|. */
static void reference(int64_t N, int64_t K, const float *wf, const float *x, int64_t ldx, int n, const float *bias,
                      double *ref, double *mag, int64_t ldr) {
    uint8_t *qb = malloc(ak_xq_bytes(K));
    double *xh = malloc((size_t)K * 8);
    for (int i = 0; i < n; i++) {
        ak_xq q;
        ak_xq_quantize_ref(x + (size_t)i * ldx, K, qb, &q);
        for (int64_t k = 0; k < K; k++) xh[k] = (double)q.d[k / 32] * q.q[k];
        for (int64_t r = 0; r < N; r++) {
            double a = bias ? bias[r] : 0, m = fabs(a);
            const float *wr = wf + (size_t)r * K;
            for (int64_t k = 0; k < K; k++) { a += wr[k] * xh[k]; m += fabs(wr[k] * xh[k]); }
            ref[(size_t)i * ldr + r] = a;
            mag[(size_t)i * ldr + r] = m;
        }
    }
    free(qb); free(xh);
}

/* The same with x as is (float activations). */
static void reference_f(int64_t N, int64_t K, const float *wf, const float *x, int64_t ldx, int n, const float *bias,
                        double *ref, double *mag, int64_t ldr) {
    for (int i = 0; i < n; i++)
        for (int64_t r = 0; r < N; r++) {
            double a = bias ? bias[r] : 0, m = fabs(a);
            for (int64_t k = 0; k < K; k++) {
                double v = (double)wf[(size_t)r * K + k] * x[(size_t)i * ldx + k];
                a += v; m += fabs(v);
            }
            ref[(size_t)i * ldr + r] = a;
            mag[(size_t)i * ldr + r] = m;
        }
}

#define SENTINEL 12345.0f

static void test_mm(void) {
    static const int64_t Ns[] = {1, 15, 17, 40, 100};
    static const int ns[] = {1, 3, 8, 37, 70};
    for (size_t ti = 0; ti < NQT + 4; ti++) {
        ak_dtype t = ti < NQT ? qtypes[ti] : (ak_dtype)(AK_MLX_Q2 + (int)(ti - NQT));
        int blk = ak_dtype_info[t].block;
        if (!ak_panel_supported(t, blk)) {
            printf("%-5s no panel layout\n", ak_dtype_info[t].name);
            CHECK(t == AK_Q2_K || t == AK_Q3_K, "%s has no panel layout", ak_dtype_info[t].name);
            continue;
        }
        CHECK(!ak_panel_supported(t, blk + 16), "%s: K = %d accepted", ak_dtype_info[t].name, blk + 16);
        const int64_t Ks[] = {blk, blk * 3, 4096 + blk};
        double worst = 0;
        for (size_t ki = 0; ki < 3; ki++)
            for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++) {
                int64_t K = Ks[ki], N = Ns[ni];
                if (K > 4096 && N > 40) continue;   /* keeps the run short */
                size_t rb = ak_dtype_row_bytes(t, K), pbytes = ak_panel_bytes(t, N, K);
                int64_t np = (N + AK_PANEL_R - 1) / AK_PANEL_R;
                if (ki == 2 && (N % AK_PANEL_R == 0 || N == 100)) { /* odd block counts may pad one block per panel */
                    double ratio = (double)ak_panel_bytes(t, np * AK_PANEL_R, K) / (double)(rb * (size_t)(np * AK_PANEL_R));
                    int mb = ak_dtype_info[t].mlx_bits; /* MLX 2- and 3-bit codes take 4 bits, as Q4_1's */
                    double most = (mb == 2 || mb == 3 ? 20.0 / (4 + 4 * mb) : 1.0) * 1.05;
                    CHECK(ratio <= most, "%s: panel bytes %.3f x the file's", ak_dtype_info[t].name, ratio);
                }
                uint8_t *w = malloc(rb * (size_t)N), *pk = amalloc(pbytes);
                float *wf = malloc((size_t)N * K * 4);
                rand_rows(t, K, (int)N, w);
                ak_dtype_info[t].dequant(w, wf, N * K);
                memset(pk, 0xA5, pbytes);
                ak_panel_pack(t, w, N, K, pk, 0, np / 2);
                ak_panel_pack(t, w, N, K, pk, np / 2, np);
                float *bias = malloc((size_t)N * 4);
                for (int64_t r = 0; r < N; r++) bias[r] = ak_rand_f(&rng);
                for (size_t ii = 0; ii < sizeof ns / sizeof *ns; ii++) {
                    int n = ns[ii];
                    /* n = 70 at K > 4096: more rows than one cache block of activations */
                    if (n > 37 ? K < 4096 || N != 17 : K > 4096 && n > 8 && N != 17) continue;
                    int64_t ldx = K + 3, ldy = N + 5;
                    float *x = malloc((size_t)n * ldx * 4), *y = malloc((size_t)n * ldy * 4), *y0 = malloc((size_t)n * ldy * 4);
                    for (size_t i = 0; i < (size_t)n * ldx; i++) x[i] = ak_rand_f(&rng) + (ii == 1 ? 0.6f : 0.f);
                    double *ref = malloc((size_t)n * N * 8), *mag = malloc((size_t)n * N * 8);
                    const float *bs = ii % 2 ? bias : NULL;
                    reference(N, K, wf, x, ldx, n, bs, ref, mag, N);
                    void *scratch = amalloc(ak_panel_scratch(t, K, n, n == 1));
                    for (int lv = 0; lv < nlev; lv++) {
                        set_level(lv);
                        for (size_t i = 0; i < (size_t)n * ldy; i++) y[i] = SENTINEL;
                        ak_panel_mm(t, pk, N, K, 0, np / 2, x, ldx, n, y, ldy, bs, scratch, n == 1);
                        ak_panel_mm(t, pk, N, K, np / 2, np, x, ldx, n, y, ldy, bs, scratch, n == 1);
                        int bad = 0, vs0 = 0, past = 0;
                        for (int i = 0; i < n; i++) {
                            for (int64_t r = 0; r < N; r++) {
                                size_t at = (size_t)i * N + r;
                                float got = y[(size_t)i * ldy + r];
                                double err = fabs(got - ref[at]), tol = 1e-5 * mag[at] + 1e-6;
                                if (!(err <= tol)) {
                                    if (!bad) fprintf(stderr, "  %s level %d/%d N=%lld K=%lld n=%d row %d col %lld: %.9g vs %.9g\n",
                                                      ak_dtype_info[t].name, levels[lv][0], levels[lv][1], (long long)N,
                                                      (long long)K, n, i, (long long)r, got, ref[at]);
                                    bad++;
                                }
                                if (mag[at] > 0 && err / mag[at] > worst) worst = err / mag[at];
                                if (lv > 0 && !(fabs(got - y0[(size_t)i * ldy + r]) <= tol)) vs0++;
                            }
                            for (int64_t r = N; r < ldy; r++) past += y[(size_t)i * ldy + r] != SENTINEL;
                        }
                        CHECK(!bad, "%s level %d/%d N=%lld K=%lld n=%d bias %d: %d wrong", ak_dtype_info[t].name,
                              levels[lv][0], levels[lv][1], (long long)N, (long long)K, n, bs != NULL, bad);
                        CHECK(!vs0, "%s level %d/%d N=%lld K=%lld n=%d: %d differ from the scalar panel kernel",
                              ak_dtype_info[t].name, levels[lv][0], levels[lv][1], (long long)N, (long long)K, n, vs0);
                        CHECK(!past, "%s level %d/%d N=%lld: %d values written past N", ak_dtype_info[t].name,
                              levels[lv][0], levels[lv][1], (long long)N, past);
                        if (lv == 0) memcpy(y0, y, (size_t)n * ldy * 4);
                    }
                    free(x); free(y); free(y0); free(ref); free(mag); free(scratch);
                }
                free(w); free(pk); free(wf); free(bias);
            }
        printf("%-5s panel worst |got-ref|/sum|wx| %.2g\n", ak_dtype_info[t].name, worst);
    }
}

static void *pack_all(ak_dtype t, const void *w, int64_t N, int64_t K) {
    if (!ak_panel_supported(t, K)) return NULL;
    void *pk = amalloc(ak_panel_bytes(t, N, K));
    ak_panel_pack(t, w, N, K, pk, 0, (N + AK_PANEL_R - 1) / AK_PANEL_R);
    return pk;
}

/* One GEMV/GEMM command (gemm: a GEMM even of one row, as a prefill of one token) over
 * segments w (panel copies pk, NULL: row kernels) run by nth workers one after another,
 * as the pool would split it. */
static void run_mm(const ak_p_mm *p, void *const w[3], void *const pk[3], int nseg, float *x, float *y, float *bias,
                   int nth, int gemm) {
    ak_cpu_cmd c = {0};
    memcpy(c.p, p, sizeof *p);
    for (int s = 0; s < 3; s++) { c.b[s] = w[s < nseg ? s : 0]; c.pk[s] = s < nseg ? pk[s] : NULL; }
    c.b[3] = x; c.b[4] = y; c.b[5] = bias;
    size_t scr = ak_cpu_mm_panel_scratch(&c, gemm ? AK_K_GEMM : AK_K_GEMV);
    float *scratch = malloc(scr * 4);
    ak_cpu_tls tls = {scratch, scr};
    for (int th = 0; th < nth; th++) (gemm ? ak_cpu_gemm : ak_cpu_gemv)(&c, th, nth, &tls);
    free(scratch);
}

/* GEMV / GEMM commands as cpu_encode builds them: panel segments, fused, mixed with
 * row-kernel segments (F16 without a panel layout, or a segment left unpacked). */
static void test_commands(void) {
    static const ak_dtype seg_types[][3] = {{AK_Q4_0, AK_Q4_0, AK_Q4_0}, {AK_Q8_0, AK_Q4_1, AK_Q5_0},
                                            {AK_Q4_K, AK_Q6_K, AK_Q5_1}, {AK_Q8_0, AK_F16, AK_Q5_K},
                                            {AK_Q6_K, AK_Q2_K, AK_Q4_0}};
    static const int ns[] = {1, 2, 5, 9, 37};
    const int64_t K = 512;
    const int N[3] = {21, 16, 7}, ld_x = K + 5, ld_y = 21 + 16 + 7 + 3;
    for (size_t si = 0; si < sizeof seg_types / sizeof *seg_types; si++)
        for (int nseg = 1; nseg <= 3; nseg += 2)
            for (int skip = -1; skip < 1; skip++) { /* skip 0: segment 0 left on the row kernels */
                void *w[3], *pk[3] = {0};
                float *wf[3];
                for (int s = 0; s < nseg; s++) {
                    ak_dtype t = seg_types[si][s];
                    rand_weights(t, K, N[s], &w[s], &wf[s]);
                    if (s != skip) pk[s] = pack_all(t, w[s], N[s], K);
                }
                int cols = 0;
                for (int s = 0; s < nseg; s++) cols += N[s];
                float *bias = malloc(N[0] * 4);
                for (int j = 0; j < N[0]; j++) bias[j] = ak_rand_f(&rng);
                for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
                    for (int last = 0; last < 2; last++) {
                        int n = ns[ni], nout = last ? 1 : n;
                        if (last && n == 1) continue;
                        float *x = malloc((size_t)n * ld_x * 4), *y = malloc((size_t)n * ld_y * 4);
                        for (size_t i = 0; i < (size_t)n * ld_x; i++) x[i] = ak_rand_f(&rng);
                        double *ref = calloc((size_t)n * ld_y, 8), *mag = calloc((size_t)n * ld_y, 8);
                        const float *xs = last ? x + (size_t)(n - 1) * ld_x : x;
                        for (int s = 0, col = 0; s < nseg; col += N[s], s++) {
                            if (ak_act_q8(seg_types[si][s]))
                                reference(N[s], K, wf[s], xs, ld_x, nout, s == 0 ? bias : NULL, ref + col, mag + col, ld_y);
                            else
                                for (int i = 0; i < nout; i++)
                                    for (int j = 0; j < N[s]; j++) {
                                        double a = s == 0 ? bias[j] : 0, m = fabs(a);
                                        for (int64_t k = 0; k < K; k++) {
                                            double v = (double)wf[s][j * K + k] * xs[(size_t)i * ld_x + k];
                                            a += v; m += fabs(v);
                                        }
                                        ref[(size_t)i * ld_y + col + j] = a;
                                        mag[(size_t)i * ld_y + col + j] = m;
                                    }
                        }
                        ak_p_mm p = {.n = n, .K = (int32_t)K, .nseg = nseg, .ld_x = ld_x, .ld_y = ld_y, .has_bias = 1, .last_only = last};
                        for (int s = 0; s < nseg; s++) { p.N[s] = N[s]; p.dtype[s] = seg_types[si][s]; }
                        for (int lv = 0; lv < nlev; lv++)
                            for (int nth = 1; nth <= 3; nth += 2) {
                                set_level(lv);
                                for (size_t i = 0; i < (size_t)n * ld_y; i++) y[i] = SENTINEL;
                                run_mm(&p, w, pk, nseg, x, y, bias, nth, n > 1);
                                int bad = 0;
                                for (int i = 0; i < nout; i++)
                                    for (int j = 0; j < ld_y; j++) {
                                        size_t at = (size_t)i * ld_y + j;
                                        bool ok = j < cols ? fabs(y[at] - ref[at]) <= 1e-5 * mag[at] + 1e-6 : y[at] == SENTINEL;
                                        if (!ok) {
                                            if (!bad) fprintf(stderr, "  row %d col %d: %.9g vs %.9g\n", i, j, y[at], ref[at]);
                                            bad++;
                                        }
                                    }
                                CHECK(!bad, "matmul types %zu nseg %d skip %d n %d last %d level %d/%d nth %d: %d wrong", si, nseg,
                                      skip, n, last, levels[lv][0], levels[lv][1], nth, bad);
                            }
                        /* float activations forced after encoding (ak_cpu_act_f32): the block
                         * segments leave their panels for the row kernels */
                        for (int s = 0, col = 0; s < nseg; col += N[s], s++)
                            reference_f(N[s], K, wf[s], xs, ld_x, nout, s == 0 ? bias : NULL, ref + col, mag + col, ld_y);
                        {
                            set_level(nlev - 1);
                            ak_cpu_act_f32 = 1;
                            run_mm(&p, w, pk, nseg, x, y, bias, 1, n > 1);
                            int bad = 0;
                            for (int i = 0; i < nout; i++)
                                for (int j = 0; j < cols; j++) {
                                    size_t at = (size_t)i * ld_y + j;
                                    bad += !(fabs(y[at] - ref[at]) <= 1e-5 * mag[at] + 1e-6);
                                }
                            CHECK(!bad, "act_f32 matmul types %zu nseg %d skip %d n %d last %d: %d wrong", si, nseg, skip, n, last, bad);
                            ak_cpu_act_f32 = 0;
                        }
                        free(x); free(y); free(ref); free(mag);
                    }
                for (int s = 0; s < nseg; s++) { free(w[s]); free(wf[s]); free(pk[s]); }
                free(bias);
            }
}

/* A GEMM row rounds the same whichever rows share its command: a prompt prefilled in
 * any split (a cached prefix, another chunk size) then gives the same logits to the bit.
 * Every dtype, on its panels and on the row kernels, every level, 1 and 3 threads:
 * rows [a, a + m) of one command against the same rows run alone, compared bitwise
 * (int8 activations make a 1-ulp difference grow: a code that rounds the other way). */
static void test_row_invariance(void) {
    static const ak_dtype types[] = {AK_Q4_0, AK_Q4_1, AK_Q5_0, AK_Q5_1, AK_Q8_0, AK_Q2_K, AK_Q3_K,
                                     AK_Q4_K, AK_Q5_K, AK_Q6_K, AK_F16, AK_BF16, AK_F32};
    const int64_t K = 512;
    const int N = 37, n_all = 29, ld_x = (int)K + 3, ld_y = N + 1;
    float *x = malloc((size_t)n_all * ld_x * 4), *y = malloc((size_t)n_all * ld_y * 4), *ys = malloc((size_t)n_all * ld_y * 4);
    for (size_t i = 0; i < (size_t)n_all * ld_x; i++) x[i] = ak_rand_f(&rng) * (1 + (i % 7 == 0) * 20.f);
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        ak_dtype t = types[ti];
        void *w[3];
        float *wf;
        rand_weights(t, K, N, &w[0], &wf);
        w[1] = w[2] = w[0];
        void *packed = pack_all(t, w[0], N, K);
        for (int panels = 0; panels < 2; panels++) {
            if (panels && !packed) continue;
            void *pk[3] = {panels ? packed : NULL, NULL, NULL};
            int bad = 0, runs = 0;
            for (int lv = 0; lv < nlev; lv++)
                for (int nth = 1; nth <= 3; nth += 2) {
                    set_level(lv);
                    ak_p_mm p = {.n = n_all, .K = (int32_t)K, .nseg = 1, .ld_x = ld_x, .ld_y = ld_y, .N = {N}, .dtype = {t}};
                    run_mm(&p, w, pk, 1, x, y, NULL, nth, 1);
                    for (int m = 1; m <= 12; m++)
                        for (int a = 0; a < 8 && a + m <= n_all; a += 1 + 2 * (m > 3)) {
                            p.n = m;
                            run_mm(&p, w, pk, 1, x + (size_t)a * ld_x, ys, NULL, nth, 1);
                            runs++;
                            for (int i = 0; i < m; i++)
                                if (memcmp(ys + (size_t)i * ld_y, y + (size_t)(a + i) * ld_y, (size_t)N * 4)) {
                                    if (!bad++)
                                        fprintf(stderr, "  %s panels %d level %d/%d nth %d: row %d of %d at %d differs\n",
                                                ak_dtype_info[t].name, panels, levels[lv][0], levels[lv][1], nth, i, m, a);
                                }
                        }
                }
            CHECK(!bad, "%s %s: %d of %d GEMMs of a few rows round a row otherwise than a GEMM of %d rows",
                  ak_dtype_info[t].name, panels ? "panels" : "row kernels", bad, runs, n_all);
        }
        free(w[0]); free(wf); free(packed);
    }
    free(x); free(y); free(ys);
}

/* GEMV_ACT_DOWN with a panel copy: act(g) * u, then the down GEMV. */
static void test_act_down(void) {
    static const ak_dtype types[] = {AK_Q4_0, AK_Q8_0, AK_Q4_K, AK_Q6_K, AK_Q5_K};
    const int64_t K = 768;
    const int N = 37;
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        ak_dtype t = types[ti];
        uint8_t *w = malloc(ak_dtype_row_bytes(t, K) * N);
        float *wf = malloc((size_t)N * K * 4), *gu = malloc((size_t)K * 2 * 4), *h = malloc((size_t)K * 4), *y = malloc((N + 4) * 4);
        rand_rows(t, K, N, w);
        ak_dtype_info[t].dequant(w, wf, (int64_t)N * K);
        for (int64_t k = 0; k < 2 * K; k++) gu[k] = ak_rand_f(&rng) * 2;
        for (int act = 0; act < 2; act++) {
            for (int64_t k = 0; k < K; k++) h[k] = ak_act_apply(act, gu[k]) * gu[K + k];
            double *ref = malloc(N * 8), *mag = malloc(N * 8);
            reference(N, K, wf, h, K, 1, NULL, ref, mag, N);
            void *pk = pack_all(t, w, N, K);
            ak_p_act_down p = {.n = 1, .K = (int32_t)K, .N = N, .dtype = t, .act = act, .ld_gu = (int32_t)(2 * K)};
            for (int lv = 0; lv < nlev; lv++)
                for (int nth = 1; nth <= 3; nth += 2) {
                    set_level(lv);
                    ak_cpu_cmd c = {0};
                    memcpy(c.p, &p, sizeof p);
                    c.b[0] = w; c.b[1] = gu; c.b[2] = y; c.pk[0] = pk;
                    size_t scr = ak_cpu_mm_panel_scratch(&c, AK_K_GEMV_ACT_DOWN);
                    float *scratch = malloc(scr * 4);
                    ak_cpu_tls tls = {scratch, scr};
                    for (int i = 0; i < N + 4; i++) y[i] = SENTINEL;
                    for (int th = 0; th < nth; th++) ak_cpu_gemv_act_down(&c, th, nth, &tls);
                    int bad = 0;
                    for (int j = 0; j < N; j++) bad += !(fabs(y[j] - ref[j]) <= 1e-5 * mag[j] + 1e-6);
                    for (int j = N; j < N + 4; j++) bad += y[j] != SENTINEL;
                    CHECK(!bad, "act_down %s act %d level %d/%d nth %d: %d wrong", ak_dtype_info[t].name, act,
                          levels[lv][0], levels[lv][1], nth, bad);
                    free(scratch);
                }
            free(pk); free(ref); free(mag);
        }
        free(w); free(wf); free(gu); free(h); free(y);
    }
}

int main(void) {
    find_levels();
    int simd = ak_cpu_simd, vnni = ak_cpu_vnni;
    test_mm();
    test_commands();
    test_row_invariance();
    test_act_down();
    ak_cpu_simd = simd;
    ak_cpu_vnni = vnni;
    return ak_test_done();
}
