/* The int8-activation path: the SIMD quantizer against the scalar one (bit for bit) and
 * its error bound (|x - d q| <= d/2); every int8 dot kernel (each block dtype at each
 * level and VNNI flavour this CPU has) against a double-precision dot of the dequantized
 * weights with d * q of x (tolerance 1e-5 * sum|w x| + 1e-6), and that dot against the
 * float x within the documented bound sum_i |w_i| d_blk(i) / 2; the GEMM tile over
 * unpacked rows for every mr x nr; GEMV and GEMM commands (segments of mixed dtypes,
 * bias, n = 1..16 and 37, several thread counts) against the same reference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cpu/cpu.h"
#include "test_util.h"

static uint64_t rng = 777;

#include "backend/cpu/cpu_test.h"

static void test_quantize(void) {
    for (int64_t K = 32; K <= 4096; K *= 2) {
        float *x = malloc((size_t)K * 4);
        for (int64_t i = 0; i < K; i++) x[i] = ak_rand_f(&rng) * (i % 97 == 0 ? 30.f : 1.f);
        if (K >= 64) for (int i = 32; i < 64; i++) x[i] = 0; /* an all-zero block */
        uint8_t *b0 = malloc(ak_xq_bytes(K)), *b1 = malloc(ak_xq_bytes(K));
        float *xh = malloc((size_t)K * 4);
        ak_xq r, q;
        ak_xq_quantize_ref(x, K, b0, &r);
        for (int lv = 0; lv < nlev; lv++) {
            set_level(lv);
            ak_xq_quantize(x, K, b1, &q);
            CHECK(!memcmp(b0, b1, ak_xq_bytes(K)), "quantize level %d K=%lld differs from the reference", lv, (long long)K);
            ak_xq_dequant(x, K, xh);
            int bad = 0;
            for (int64_t i = 0; i < K; i++) bad += xh[i] != r.d[i / 32] * (float)r.q[i];
            CHECK(!bad, "dequant level %d K=%lld: %d values differ from d*q", lv, (long long)K, bad);
        }
        int bad = 0;
        for (int64_t i = 0; i < K; i++) bad += fabsf(x[i] - r.d[i / 32] * r.q[i]) > r.d[i / 32] * 0.5f * (1 + 1e-6f);
        CHECK(!bad, "K=%lld: %d values beyond d/2", (long long)K, bad);
        free(x); free(b0); free(b1); free(xh);
    }
}

/* sum w_i * xhat_i in double, and the bound sum |w_i| d_i / 2 and sum |w_i xhat_i|. */
static double ref_dot(ak_dtype t, int64_t K, const uint8_t *w, const ak_xq *q, const float *x, double *bound, double *mag, double *exact) {
    float *deq = malloc((size_t)K * 4);
    ak_dtype_info[t].dequant(w, deq, K);
    double s = 0, bnd = 0, m = 0, e = 0;
    for (int64_t i = 0; i < K; i++) {
        double xh = (double)q->d[i / 32] * q->q[i];
        s += deq[i] * xh;
        m += fabs(deq[i] * xh);
        bnd += fabs(deq[i]) * q->d[i / 32] * 0.5;
        e += (double)deq[i] * x[i];
    }
    free(deq);
    *bound = bnd; *mag = m; *exact = e;
    return s;
}

static void test_dots(void) {
    static const int64_t lens[] = {32, 64, 96, 256, 512, 768, 1280, 4352, 4096 + 256 + 32 * 3};
    for (size_t ti = 0; ti < NQT; ti++) {
        ak_dtype t = qtypes[ti];
        double worst = 0, worst_bound = 0;
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
            int64_t K = lens[li];
            if (K % ak_dtype_info[t].block) continue;
            uint8_t *w = malloc(ak_dtype_row_bytes(t, K)), *qb = malloc(ak_xq_bytes(K));
            float *x = malloc((size_t)K * 4);
            for (int trial = 0; trial < 3; trial++) {
                rand_rows(t, K, 1, w);
                for (int64_t i = 0; i < K; i++) x[i] = ak_rand_f(&rng) + (trial == 1 ? 0.7f : 0.f);
                ak_xq q;
                ak_xq_quantize_ref(x, K, qb, &q);
                double bound, mag, exact, ref = ref_dot(t, K, w, &q, x, &bound, &mag, &exact);
                CHECK(fabs(ref - exact) <= bound * (1 + 1e-9) + 1e-9, "%s K=%lld: int8 error %.3g beyond bound %.3g",
                      ak_dtype_info[t].name, (long long)K, fabs(ref - exact), bound);
                if (bound > 0 && fabs(ref - exact) / bound > worst_bound) worst_bound = fabs(ref - exact) / bound;
                for (int lv = 0; lv < nlev; lv++) {
                    set_level(lv);
                    ak_dotq_fn f = ak_cpu_dotq(t);
                    if (!f) continue;
                    float got = f(K, w, &q);
                    double err = fabs(got - ref);
                    CHECK(err <= 1e-5 * mag + 1e-6, "%s level %d/%d K=%lld: got %.9g ref %.9g", ak_dtype_info[t].name,
                          levels[lv][0], levels[lv][1], (long long)K, got, ref);
                    if (mag > 0 && err / mag > worst) worst = err / mag;
                }
            }
            free(w); free(qb); free(x);
        }
        printf("%-5s dotq worst |fast-ref|/sum|wx| %.2g; int8 error / bound %.2f\n", ak_dtype_info[t].name, worst, worst_bound);
    }
}

static void test_tile(void) {
    static const int64_t lens[] = {256, 768, 32 * 37};
    for (size_t ti = 0; ti < NQT; ti++) {
        ak_dtype t = qtypes[ti];
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
            int64_t K = lens[li];
            if (K % ak_dtype_info[t].block) continue;
            size_t rb = ak_dtype_row_bytes(t, K);
            uint8_t *w = malloc(rb * 4), *pb = malloc(ak_prow_bytes(K) * 4), *qb = malloc(ak_xq_bytes(K) * 4);
            float *x = malloc((size_t)K * 4 * 4);
            rand_rows(t, K, 4, w);
            for (int64_t i = 0; i < 4 * K; i++) x[i] = ak_rand_f(&rng) + 0.3f;
            ak_prow pr[4];
            ak_xq xq[4];
            double ref[4][4], mag[4][4];
            for (int c = 0; c < 4; c++) ak_xq_quantize_ref(x + c * K, K, qb + c * ak_xq_bytes(K), &xq[c]);
            for (int r = 0; r < 4; r++)
                for (int c = 0; c < 4; c++) {
                    double bnd, ex;
                    ref[r][c] = ref_dot(t, K, w + r * rb, &xq[c], x + c * K, &bnd, &mag[r][c], &ex);
                }
            for (int lv = 0; lv < nlev; lv++) {
                set_level(lv);
                for (int r = 0; r < 4; r++) ak_unpack_row(t, w + r * rb, K, pb + r * ak_prow_bytes(K), &pr[r]);
                for (int mr = 1; mr <= 4; mr++)
                    for (int nr = 1; nr <= 4; nr++) {
                        float out[16];
                        ak_gemm_q8_tile(K, pr, mr, xq, nr, out, 4);
                        for (int r = 0; r < mr; r++)
                            for (int c = 0; c < nr; c++)
                                CHECK(fabs(out[r * 4 + c] - ref[r][c]) <= 1e-5 * mag[r][c] + 1e-6, "tile %s level %d/%d K=%lld %dx%d (%d,%d): %.9g vs %.9g",
                                      ak_dtype_info[t].name, levels[lv][0], levels[lv][1], (long long)K, mr, nr, r, c, out[r * 4 + c], ref[r][c]);
                    }
            }
            free(w); free(pb); free(qb); free(x);
        }
    }
}

/* GEMV / GEMM commands: segments (Q4_0, Q8_0, Q4_K or mixed with F16), bias, n rows. */
static void test_commands(void) {
    static const ak_dtype seg_types[][3] = {{AK_Q4_0, AK_Q4_0, AK_Q4_0}, {AK_Q8_0, AK_Q4_1, AK_Q5_0},
                                            {AK_Q4_K, AK_Q6_K, AK_Q5_1}, {AK_Q8_0, AK_F16, AK_Q4_K}};
    static const int ns[] = {1, 2, 3, 5, 8, 9, 16, 37};
    const int64_t K = 512;
    const int N[3] = {13, 6, 7}, tot = 26, ld_x = K + 5, ld_y = tot + 3;
    for (size_t si = 0; si < sizeof seg_types / sizeof *seg_types; si++)
        for (int nseg = 1; nseg <= 3; nseg += 2) {
            void *w[3];
            float *wf[3];
            for (int s = 0; s < nseg; s++) {
                ak_dtype t = seg_types[si][s];
                rand_weights(t, K, N[s], &w[s], &wf[s]);
            }
            int cols = 0;
            for (int s = 0; s < nseg; s++) cols += N[s];
            float *bias = malloc(N[0] * 4);
            for (int j = 0; j < N[0]; j++) bias[j] = ak_rand_f(&rng);
            for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
                int n = ns[ni];
                float *x = malloc((size_t)n * ld_x * 4), *y = malloc((size_t)n * ld_y * 4);
                for (size_t i = 0; i < (size_t)n * ld_x; i++) x[i] = ak_rand_f(&rng);
                double *ref = malloc((size_t)n * ld_y * 8), *mag = malloc((size_t)n * ld_y * 8);
                uint8_t *qb = malloc(ak_xq_bytes(K));
                float *xh = malloc(K * 4);
                for (int i = 0; i < n; i++) {
                    ak_xq q;
                    ak_xq_quantize_ref(x + (size_t)i * ld_x, K, qb, &q);
                    for (int64_t k = 0; k < K; k++) xh[k] = q.d[k / 32] * q.q[k];
                    for (int s = 0, col = 0; s < nseg; col += N[s], s++) {
                        const float *xs = ak_act_q8(seg_types[si][s]) ? xh : x + (size_t)i * ld_x;
                        for (int j = 0; j < N[s]; j++) {
                            double a = s == 0 ? bias[j] : 0, m = fabs(a);
                            for (int64_t k = 0; k < K; k++) { a += (double)wf[s][j * K + k] * xs[k]; m += fabs((double)wf[s][j * K + k] * xs[k]); }
                            ref[(size_t)i * ld_y + col + j] = a;
                            mag[(size_t)i * ld_y + col + j] = m;
                        }
                    }
                }
                ak_p_mm p = {.n = n, .K = (int32_t)K, .nseg = nseg, .ld_x = ld_x, .ld_y = ld_y, .has_bias = 1};
                for (int s = 0; s < nseg; s++) { p.N[s] = N[s]; p.dtype[s] = seg_types[si][s]; }
                size_t scr = ak_cpu_mm_scratch(&p, 1);
                float *scratch = malloc(scr * 4);
                for (int lv = 0; lv < nlev; lv++)
                    for (int nth = 1; nth <= 3; nth += 2) {
                        set_level(lv);
                        ak_cpu_cmd c = {0};
                        memcpy(c.p, &p, sizeof p);
                        for (int s = 0; s < 3; s++) c.b[s] = w[s < nseg ? s : 0];
                        c.b[3] = x; c.b[4] = y; c.b[5] = bias;
                        memset(y, 0, (size_t)n * ld_y * 4);
                        ak_cpu_tls tls = {scratch, scr};
                        for (int th = 0; th < nth; th++) (n == 1 ? ak_cpu_gemv : ak_cpu_gemm)(&c, th, nth, &tls);
                        int bad = 0;
                        for (int i = 0; i < n; i++)
                            for (int j = 0; j < cols; j++) {
                                size_t at = (size_t)i * ld_y + j;
                                if (fabs(y[at] - ref[at]) > 1e-5 * mag[at] + 1e-6) {
                                    if (!bad) fprintf(stderr, "  row %d col %d: %.9g vs %.9g\n", i, j, y[at], ref[at]);
                                    bad++;
                                }
                            }
                        CHECK(!bad, "matmul types %zu nseg %d n %d level %d/%d nth %d: %d wrong", si, nseg, n, levels[lv][0], levels[lv][1], nth, bad);
                    }
                free(scratch); free(x); free(y); free(ref); free(mag); free(qb); free(xh);
            }
            for (int s = 0; s < nseg; s++) { free(w[s]); free(wf[s]); }
            free(bias);
        }
}

int main(void) {
    find_levels();
    int simd = ak_cpu_simd, vnni = ak_cpu_vnni;
    test_quantize();
    test_dots();
    test_tile();
    test_commands();
    ak_cpu_simd = simd;
    ak_cpu_vnni = vnni;
    return ak_test_done();
}
