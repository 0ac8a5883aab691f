/* CPU kernels against naive double-precision references written here, on random
 * inputs and odd shapes: GEMV/GEMM (multi-segment, bias, last row only, N = 1, odd K),
 * fused activation+down, norms, RoPE + KV write (both pairings, QK-norm, bias, F16 cache),
 * decode and tiled prefill attention (GQA ratios, causal, sliding window, softcap,
 * non-causal, offsets), the sample command. Each kernel is split over 1, 2, 3 and 7 workers. */
#include "backend/cpu/cpu.h"
#include "model/arch.h"
#include "core/sample.h"
#include "core/quants.h"
#include "backend/cpu/attn_ref.h"
#include "test_util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 42;
static const int thread_counts[] = {1, 2, 3, 7};

static float *rnd(size_t n, float scale) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = ak_rand_f(&rng) * scale;
    return p;
}

/* Runs a command as nth workers would (kernels have no barrier inside). */
static void run(ak_cpu_fn fn, ak_cpu_cmd *c, int nth, size_t scratch_n) {
    float *scratch = malloc(scratch_n * sizeof(float) + 64);
    ak_cpu_tls tls = {scratch, scratch_n};
    for (int i = 0; i < nth; i++) fn(c, i, nth, &tls);
    free(scratch);
}

static double max_rel(const float *a, const double *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) { num += (a[i] - b[i]) * (a[i] - b[i]); den += b[i] * b[i]; }
    return sqrt(num / (den > 0 ? den : 1));
}

static void test_matmul(void) {
    const int Ks[] = {1, 7, 32, 33, 100, 257};
    for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++)
        for (int nseg = 1; nseg <= 3; nseg++)
            for (int n = 1; n <= 9; n += 4)
                for (int dt = 0; dt < 2; dt++) {
                    int K = Ks[ki], N[3] = {1, 5, 3};
                    if (nseg == 1) N[0] = 13;
                    int tot = 0;
                    for (int s = 0; s < nseg; s++) tot += N[s];
                    int ld_x = K + 3, ld_y = tot + 2;
                    float *x = rnd((size_t)n * ld_x, 1), *bias = rnd((size_t)N[0], 1);
                    void *w[3];
                    float *wf[3];
                    for (int s = 0; s < nseg; s++) {
                        wf[s] = rnd((size_t)N[s] * K, 1);
                        if (dt == 0) w[s] = wf[s];
                        else {   /* F16 weights: the reference reads the same rounded values */
                            uint16_t *h = malloc((size_t)N[s] * K * 2);
                            for (int i = 0; i < N[s] * K; i++) { h[i] = ak_f32_to_f16(wf[s][i]); wf[s][i] = ak_f16_to_f32(h[i]); }
                            w[s] = h;
                        }
                    }
                    for (int last = 0; last < 2; last++)
                        for (int bi = 0; bi < 2; bi++) {
                            ak_p_mm p = {.n = n, .K = K, .nseg = nseg, .ld_x = ld_x, .ld_y = ld_y, .last_only = last, .has_bias = bi};
                            for (int s = 0; s < nseg; s++) { p.N[s] = N[s]; p.dtype[s] = dt ? AK_F16 : AK_F32; }
                            int rows = last ? 1 : n;
                            double *ref = calloc((size_t)rows * ld_y, sizeof(double));
                            for (int i = 0; i < rows; i++) {
                                const float *xi = x + (size_t)(last ? n - 1 : i) * ld_x;
                                for (int s = 0, col = 0; s < nseg; col += N[s], s++)
                                    for (int j = 0; j < N[s]; j++) {
                                        double a = (bi && s == 0) ? bias[j] : 0;
                                        for (int k = 0; k < K; k++) a += (double)wf[s][(size_t)j * K + k] * xi[k];
                                        ref[(size_t)i * ld_y + col + j] = a;
                                    }
                            }
                            for (int kind = 0; kind < 2; kind++) {
                                if (kind == 0 && (n > 1 && !last)) continue; /* GEMV is one row */
                                for (size_t t = 0; t < sizeof thread_counts / sizeof *thread_counts; t++) {
                                    float *y = calloc((size_t)rows * ld_y, sizeof(float));
                                    ak_cpu_cmd c = {0};
                                    ak_p_mm q = p;
                                    const float *xin = x;
                                    if (kind == 0) { q.n = 1; q.last_only = 0; if (last) xin = x + (size_t)(n - 1) * ld_x; }
                                    memcpy(c.p, &q, sizeof q);
                                    for (int s = 0; s < 3; s++) c.b[s] = w[s < nseg ? s : 0];
                                    c.b[3] = (void *)xin; c.b[4] = y; c.b[5] = bias;
                                    run(kind ? ak_cpu_gemm : ak_cpu_gemv, &c, thread_counts[t], (size_t)K);
                                    double worst = 0;
                                    for (int i = 0; i < rows; i++)
                                        for (int j = 0; j < tot; j++) {
                                            double r = ref[(size_t)i * ld_y + j], d = fabs(y[(size_t)i * ld_y + j] - r);
                                            if (d > worst) worst = d;
                                        }
                                    CHECK(worst <= 1e-4 * (1 + sqrt((double)K)), "%s K=%d nseg=%d n=%d dt=%d last=%d bias=%d nth=%d err %g",
                                          kind ? "gemm" : "gemv", K, nseg, n, dt, last, bi, thread_counts[t], worst);
                                    free(y);
                                }
                            }
                            free(ref);
                        }
                    for (int s = 0; s < nseg; s++) { if (dt) free(w[s]); free(wf[s]); }
                    free(x); free(bias);
                }
}

static void test_act_down(void) {
    const int Ks[] = {1, 31, 352};
    for (size_t ki = 0; ki < 3; ki++)
        for (int act = 0; act < 3; act++) {
            int K = Ks[ki], N = 11;
            float *gu = rnd(2 * (size_t)K, 3), *w = rnd((size_t)N * K, 1), y[11], h[1024];
            double ref[11];
            for (int k = 0; k < K; k++) h[k] = (float)(ak_act_ref(act, gu[k]) * gu[K + k]);
            for (int j = 0; j < N; j++) { ref[j] = 0; for (int k = 0; k < K; k++) ref[j] += (double)w[(size_t)j * K + k] * h[k]; }
            for (size_t t = 0; t < 4; t++) {
                ak_cpu_cmd c = {0};
                ak_p_act_down p = {.n = 1, .K = K, .N = N, .dtype = AK_F32, .act = act, .ld_gu = 2 * K};
                memcpy(c.p, &p, sizeof p);
                c.b[0] = w; c.b[1] = gu; c.b[2] = y;
                run(ak_cpu_gemv_act_down, &c, thread_counts[t], 2 * (size_t)K);
                CHECK(max_rel(y, ref, (size_t)N) < 1e-5, "act_down K=%d act=%d nth=%d", K, act, thread_counts[t]);
                /* the unfused pair: act_gate then a plain GEMV */
                float o[1024];
                ak_p_act pa = {.n = 1, .K = K, .act = act, .ld_gu = 2 * K, .gated = 1};
                memcpy(c.p, &pa, sizeof pa);
                c.b[0] = gu; c.b[1] = o;
                run(ak_cpu_act_gate, &c, thread_counts[t], 0);
                double dmax = 0;
                for (int k = 0; k < K; k++) dmax = fmax(dmax, fabs(o[k] - ak_act_ref(act, gu[k]) * gu[K + k]));
                CHECK(dmax < 1e-5 * 30, "act_gate K=%d act=%d: %g", K, act, dmax);
                pa.gated = 0;   /* plain activation (BERT's FFN) */
                memcpy(c.p, &pa, sizeof pa);
                run(ak_cpu_act_gate, &c, thread_counts[t], 0);
                dmax = 0;
                for (int k = 0; k < K; k++) dmax = fmax(dmax, fabs(o[k] - ak_act_ref(act, gu[k])));
                CHECK(dmax < 1e-5 * 10, "act K=%d act=%d: %g", K, act, dmax);
            }
            free(gu); free(w);
        }
}

/* SiLU, tanh-GELU and erf-GELU across the whole float range of their input (the vector
 * paths take e^-|z|, so that the exponent stays <= 0), gated and not, with an odd K for
 * the masked tail: within 5e-7 of the double-precision value (erf-GELU 6e-7); for
 * tanh-GELU plus 3e-7 |z| (z = 2 * 0.798 (x + 0.0447 x^3), rounded in float, is an
 * exponent) and, on the scalar path, 1e-7 |x| (its 1 + tanhf cancels for negative x);
 * erf-GELU's scalar erfcf plus 1.2e-7 x^2 (its rounded argument). */
static void test_act_range(void) {
    enum { K = 203 };
    float g[K], u[K], o[K];
    for (int k = 0; k < K; k++) {
        g[k] = (float)(k - 101) + 0.37f * (float)(k % 5);   /* about -101 .. 102 */
        u[k] = 0.5f + (float)(k % 3);
    }
    g[7] = 0.f;
    g[8] = -1e-4f;
    g[9] = 1e-4f;
    /* and densely over -12 .. 12, where the curves bend (the erf GELU switches branch at
     * |x| = 0.71), in the other half of the buffers */
    enum { D = 1001 };
    static float gd[D], ud[D], od[D];
    for (int k = 0; k < D; k++) {
        gd[k] = -12.f + 24.f * (float)k / (float)(D - 1);
        ud[k] = 1.f;
    }
    for (int act = AK_ACT_SILU; act <= AK_ACT_GELU_ERF; act++)
        for (int gated = 0; gated < 4; gated++) {
            const bool dense = gated >= 2;
            const float *gg = dense ? gd : g, *uu = dense ? ud : u;
            float *oo = dense ? od : o;
            const int n = dense ? D : K;
            ak_cpu_act_row(act, gg, gated & 1 ? uu : NULL, oo, n);
            double worst = 0;
            for (int k = 0; k < n; k++) {
                double x = gg[k], w = gated & 1 ? uu[k] : 1.0, r = ak_act_ref(act, x) * w,
                       rel = act == AK_ACT_GELU_ERF ? 6e-7 : 5e-7, slack = 0;
                if (act == AK_ACT_GELU_ERF && ak_cpu_simd < 1)   /* erfcf of x / sqrt 2 rounded: 2 z^2 ulp */
                    rel += 1.2e-7 * x * x;
                if (act == AK_ACT_GELU_TANH) {
                    rel += 3e-7 * fabs(2 * sqrt(2 / M_PI) * (x + 0.044715 * x * x * x));
                    if (ak_cpu_simd < 1) slack = 1e-7 * fabs(x) * w;   /* the scalar tanhf form */
                }
                double e = fabs(oo[k] - r) - rel * fabs(r) - slack;
                if (e > worst) worst = e;
            }
            CHECK(worst <= 1e-35, "act %d over %s (gated %d): error beyond the bound: %g", act, dense ? "-12..12" : "-101..102",
                  gated & 1, worst);
        }
}

/* cap * tanh(x / cap) over tiny to saturated values, both signs, both sides of the
 * vector tanh's switch at |x / cap| = 0.625, against double precision. */
static void test_softcap_range(void) {
    enum { N = 211 };
    const float caps[] = {30.f, 50.f};
    for (int ci = 0; ci < 2; ci++) {
        const float cap = caps[ci];
        float x[N], y[N];
        for (int i = 0; i < N; i++) x[i] = cap * ((float)(i - 105) / 5.f + 0.013f * (float)(i % 7));   /* about -21..21 */
        const float special[] = {0.f, -0.f, 1e-30f, -1e-20f, 1e-3f, 0.6249f * cap, 0.6251f * cap, -0.625f * cap,
                                 1e4f * cap, -3e3f * cap};
        for (int i = 0; i < (int)(sizeof special / sizeof *special); i++) x[3 + 11 * i] = special[i];
        memcpy(y, x, sizeof x);
        ak_cpu_softcap_row(y, N, cap);
        double worst = 0;
        int at = 0;
        for (int i = 0; i < N; i++) {
            double r = (double)cap * tanh((double)x[i] / cap), e = fabs(y[i] - r) / (fabs(r) > 1e-37 ? fabs(r) : 1e-37);
            if (e > worst) { worst = e; at = i; }
        }
        CHECK(worst <= 5e-7, "softcap %g: relative error %.3g at x = %g (got %.9g)", (double)cap, worst, (double)x[at], (double)y[at]);
    }
}

static void test_norms(void) {
    for (int dim = 1; dim <= 300; dim += 37)
        for (int flags = 0; flags < 4; flags++) {
            int n = 3, post = flags & AK_NORM_F_POST, layer = flags & AK_NORM_F_LAYER;
            float *x = rnd((size_t)n * dim, 2), *a = rnd((size_t)n * dim, 2), *w = rnd((size_t)dim, 1), *pw = rnd((size_t)dim, 1);
            float *bias = rnd((size_t)dim, 1);
            float *x2 = malloc((size_t)n * dim * 4), *out = malloc((size_t)n * dim * 4);
            memcpy(x2, x, (size_t)n * dim * 4);
            double *ref = malloc((size_t)n * dim * sizeof(double)), *xr = malloc((size_t)dim * sizeof(double));
            float eps = 1e-5f;
            for (int i = 0; i < n; i++) {
                double sa = 0;
                for (int k = 0; k < dim; k++) sa += (double)a[i * dim + k] * a[i * dim + k];
                double ra = 1 / sqrt(sa / dim + eps), mean = 0, var = 0;
                for (int k = 0; k < dim; k++) {
                    double av = post ? a[i * dim + k] * ra * pw[k] : a[i * dim + k];   /* post-norm is RMS */
                    xr[k] = x[i * dim + k] + av;
                    mean += xr[k];
                }
                mean = layer ? mean / dim : 0;
                for (int k = 0; k < dim; k++) var += (xr[k] - mean) * (xr[k] - mean);
                double r = 1 / sqrt(var / dim + eps);
                for (int k = 0; k < dim; k++) ref[i * dim + k] = (xr[k] - mean) * r * w[k] + (layer ? bias[k] : 0);
            }
            ak_cpu_cmd c = {0};
            ak_p_norm p = {.n = n, .dim = dim, .eps = eps, .flags = flags};
            memcpy(c.p, &p, sizeof p);
            c.b[0] = x2; c.b[1] = a; c.b[2] = pw; c.b[3] = w; c.b[4] = out; c.b[5] = bias;
            run(ak_cpu_add_norm, &c, 2, (size_t)dim);
            CHECK(max_rel(out, ref, (size_t)n * dim) < 1e-5, "add_norm dim=%d flags=%d", dim, flags);
            /* in place (out = x), as encoders run it, and the plain norm of the summed x */
            memcpy(x2, x, (size_t)n * dim * 4);
            c.b[4] = x2;
            run(ak_cpu_add_norm, &c, 3, (size_t)dim);
            CHECK(max_rel(x2, ref, (size_t)n * dim) < 1e-5, "add_norm in place dim=%d flags=%d", dim, flags);
            free(x); free(a); free(w); free(pw); free(bias); free(x2); free(out); free(ref); free(xr);
        }
}

/* Naive attention for query row i (position pos+i), head h, reading float K/V copies. */
/* x (n values) times the orthonormal Walsh-Hadamard matrix of order r block by block, as
 * a plain matrix product in double: entry (i, j) is (-1)^popcount(i & j) / sqrt(r). */
static void wht_ref(double *x, int n, int r) {
    double y[1024];
    for (int b = 0; r && b < n; b += r) {
        for (int i = 0; i < r; i++) {
            y[i] = 0;
            for (int j = 0; j < r; j++) y[i] += (__builtin_popcount((unsigned)(i & j)) & 1 ? -1 : 1) * x[b + j];
        }
        for (int i = 0; i < r; i++) x[b + i] = y[i] / sqrt((double)r);
    }
}

/* A cache row of type t (F32, F16, Q8_0, Q4_0) from hd floats, by the reference quantizers. */
static void cache_row_ref(ak_dtype t, const float *x, int hd, uint8_t *d) {
    if (t == AK_F32) memcpy(d, x, (size_t)hd * 4);
    else if (t == AK_F16) for (int k = 0; k < hd; k++) ((uint16_t *)d)[k] = ak_f32_to_f16(x[k]);
    else (t == AK_Q8_0 ? ak_quantize_q8_0 : ak_quantize_q4_0)(x, d, hd);
}

/* A cache of type t (rows of hd) from the floats f: its bytes, and the floats it holds
 * (the reference reads those) written over f. */
static void *make_cache(ak_dtype t, float *f, size_t n, int hd) {
    size_t rb = ak_dtype_row_bytes(t, hd), rows = n / (size_t)hd;
    uint8_t *c = malloc(rows * rb);
    for (size_t r = 0; r < rows; r++) {
        cache_row_ref(t, f + r * hd, hd, c + r * rb);
        ak_dtype_info[t].dequant(c + r * rb, f + r * hd, hd);
    }
    return c;
}

static void test_attention(void) {
    struct { int nh, nkv, hd, n, pos, window, causal; float softcap; int f16; } cs[] = {
        {4, 4, 32, 1, 0, 0, 1, 0, 0},   {4, 2, 32, 24, 0, 0, 1, 0, 0},  {8, 1, 64, 37, 5, 0, 1, 0, 0},
        {6, 2, 16, 17, 70, 8, 1, 50, 0}, {4, 2, 32, 3, 100, 8, 1, 0, 1}, {4, 4, 8, 33, 0, 0, 0, 0, 0},
        {2, 1, 128, 70, 3, 16, 1, 30, 1}, {3, 3, 6, 1, 200, 0, 1, 0, 0}, {12, 4, 32, 1, 150, 0, 1, 0, 1},
        {4, 2, 32, 40, 200, 100, 1, 0, 0}, {2, 1, 64, 30, 150, 90, 1, 0, 1},   /* windows wider than a key tile */
    };
    /* K and V cache types: the case's float type, then (head dims of whole blocks) Q8_0
     * for both, and Q4_0 keys with F16 values */
    static const ak_dtype kvt[3][2] = {{AK_F32, AK_F32}, {AK_Q8_0, AK_Q8_0}, {AK_Q4_0, AK_F16}};
    for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++)
        for (int ty = 0; ty < 3; ty++) {
            if (ty && cs[ci].hd % 32) continue;
            ak_dtype kt = ty ? kvt[ty][0] : cs[ci].f16 ? AK_F16 : AK_F32, vt = ty ? kvt[ty][1] : kt;
            int max_seq = 300, hd = cs[ci].hd, nh = cs[ci].nh, nkv = cs[ci].nkv, n = cs[ci].n;
            int ld_q = nh * hd + 2 * nkv * hd;
            ak_p_attn p = {.n = n, .pos = cs[ci].pos, .kv_len = cs[ci].pos + n, .n_heads = nh, .n_kv_heads = nkv, .head_dim = hd,
                           .ld_q = ld_q, .max_seq = max_seq, .kt = kt, .vt = vt, .window = cs[ci].window,
                           .causal = cs[ci].causal, .scale = 1 / sqrtf((float)hd), .softcap = cs[ci].softcap};
            size_t cn = (size_t)nkv * max_seq * hd;
            float *q = rnd((size_t)n * ld_q, 2), *kf = rnd(cn, 2), *vf = rnd(cn, 1);
            void *kc = make_cache(kt, kf, cn, hd), *vc = make_cache(vt, vf, cn, hd);
            double *ref = malloc((size_t)n * nh * hd * sizeof(double));
            /* (a Q8_0 / Q4_0 value cache holds rotated values: the output is rotated back) */
            for (int i = 0; i < n; i++)
                for (int h = 0; h < nh; h++) {
                    ak_attn_ref(&p, q, kf, vf, i, h, ref + ((size_t)i * nh + h) * hd);
                    wht_ref(ref + ((size_t)i * nh + h) * hd, hd, ak_kv_rot(vt, hd, 1));
                }
            for (int kind = 0; kind < 2; kind++) {
                if (kind == 0 && n != 1) continue;
                for (size_t t = 0; t < 4; t++) {
                    float *out = calloc((size_t)n * nh * hd, sizeof(float));
                    ak_cpu_cmd c = {0};
                    memcpy(c.p, &p, sizeof p);
                    c.b[0] = q; c.b[1] = kc; c.b[2] = vc; c.b[3] = out;
                    size_t counts, bytes;
                    ak_cpu_shared_need(kind ? AK_K_ATTN_PREFILL : AK_K_ATTN_DECODE, &p, &counts, &bytes);
                    c.sh.count = calloc(counts + 1, sizeof *c.sh.count);
                    c.sh.data = malloc(bytes + 1);
                    run(kind ? ak_cpu_attn_prefill : ak_cpu_attn_decode, &c, thread_counts[t], ak_cpu_scratch_need(kind ? AK_K_ATTN_PREFILL : AK_K_ATTN_DECODE, &p));
                    free(c.sh.count);
                    free(c.sh.data);
                    double e = max_rel(out, ref, (size_t)n * nh * hd);
                    CHECK(e < 2e-6, "%s case %zu K %s V %s nth=%d: rel err %g", kind ? "prefill" : "decode", ci,
                          ak_dtype_info[kt].name, ak_dtype_info[vt].name, thread_counts[t], e);
                    /* a prefill row rounds the same when the rows before it in the call were
                     * prefilled earlier (a cached prefix): rows [a, n) alone, bit for bit */
                    for (int a = 1; kind && a < n; a += 1 + n / 3) {
                        ak_p_attn pa = p;
                        pa.n = n - a;
                        pa.pos = p.pos + a;
                        float *oa = calloc((size_t)(n - a) * nh * hd, sizeof(float));
                        ak_cpu_cmd ca = c;
                        memcpy(ca.p, &pa, sizeof pa);
                        ca.b[0] = q + (size_t)a * ld_q;
                        ca.b[3] = oa;
                        run(ak_cpu_attn_prefill, &ca, thread_counts[t], ak_cpu_scratch_need(AK_K_ATTN_PREFILL, &pa));
                        CHECK(!memcmp(oa, out + (size_t)a * nh * hd, (size_t)(n - a) * nh * hd * sizeof(float)),
                              "prefill case %zu K %s nth=%d: rows from %d alone round otherwise", ci, ak_dtype_info[kt].name,
                              thread_counts[t], a);
                        free(oa);
                    }
                    free(out);
                }
            }
            free(q); free(kf); free(vf); free(kc); free(vc); free(ref);
        }
}

/* Ring caches (a sliding-window layer's: cap rows a KV head, key position j in slot
 * j % cap, each slot holding the latest position written there, as rope_kv leaves it),
 * the window wrapping the ring: decode (one and several chunks, split over 1..7 workers)
 * and prefill give the same bits as over the whole cache, and match the reference. */
static void test_attention_ring(void) {
    struct { int nh, nkv, hd, n, pos, window, cap; float softcap; } cs[] = {
        {4, 2, 32, 1, 700, 100, 256, 0},   {8, 2, 64, 1, 600, 250, 256, 30},   /* decode: two chunks across the wrap */
        {4, 1, 256, 1, 3000, 512, 1024, 0},                                    /* Gemma 3 270M's heads, window and ring */
        {6, 2, 16, 40, 900, 200, 256, 50}, {2, 1, 128, 70, 1000, 300, 512, 0}, /* prefill: key tiles wrap */
        {4, 4, 32, 33, 520, 8, 256, 0},    {3, 3, 6, 1, 300, 40, 256, 0},
    };
    static const ak_dtype types[] = {AK_F32, AK_F16, AK_Q8_0};
    for (size_t ci = 0; ci < sizeof cs / sizeof *cs; ci++)
        for (size_t ty = 0; ty < sizeof types / sizeof *types; ty++) {
            int hd = cs[ci].hd, nh = cs[ci].nh, nkv = cs[ci].nkv, n = cs[ci].n, cap = cs[ci].cap;
            ak_dtype t = types[ty];
            if (t == AK_Q8_0 && hd % 32) continue;
            int max_seq = cs[ci].pos + n, ld_q = nh * hd + 2 * nkv * hd;
            ak_p_attn p = {.n = n, .pos = cs[ci].pos, .kv_len = max_seq, .n_heads = nh, .n_kv_heads = nkv, .head_dim = hd,
                           .ld_q = ld_q, .max_seq = max_seq, .kt = t, .vt = t, .window = cs[ci].window, .causal = 1,
                           .scale = 1 / sqrtf((float)hd), .softcap = cs[ci].softcap};
            ak_p_attn pr = p;
            pr.cap = cap;
            size_t cn = (size_t)nkv * max_seq * hd, rb = ak_dtype_row_bytes(t, hd);
            float *q = rnd((size_t)n * ld_q, 2), *kf = rnd(cn, 2), *vf = rnd(cn, 1);
            uint8_t *kc = make_cache(t, kf, cn, hd), *vc = make_cache(t, vf, cn, hd);
            uint8_t *kr = malloc((size_t)nkv * cap * rb), *vr = malloc((size_t)nkv * cap * rb);
            for (int h = 0; h < nkv; h++)
                for (int j = 0; j < max_seq; j++) {
                    size_t at = ak_kv_row(h, j, cap, max_seq), from = (size_t)h * max_seq + j;
                    CHECK(at == (size_t)h * cap + (size_t)(j % cap), "ak_kv_row: head %d position %d in row %zu", h, j, at);
                    memcpy(kr + at * rb, kc + from * rb, rb);
                    memcpy(vr + at * rb, vc + from * rb, rb);
                }
            double *ref = malloc((size_t)n * nh * hd * sizeof(double));
            for (int i = 0; i < n; i++)
                for (int h = 0; h < nh; h++) {
                    ak_attn_ref(&p, q, kf, vf, i, h, ref + ((size_t)i * nh + h) * hd);
                    wht_ref(ref + ((size_t)i * nh + h) * hd, hd, ak_kv_rot(t, hd, 1));
                }
            size_t no = (size_t)n * nh * hd;
            float *whole = malloc(no * sizeof(float)), *out = malloc(no * sizeof(float));
            for (int kind = n == 1 ? 0 : 1; kind < 2; kind++)
                for (size_t th = 0; th < 4; th++) {
                    int k = kind ? AK_K_ATTN_PREFILL : AK_K_ATTN_DECODE;
                    for (int r = 0; r < 2; r++) {
                        const ak_p_attn *pp = r ? &pr : &p;
                        ak_cpu_cmd c = {0};
                        memcpy(c.p, pp, sizeof *pp);
                        c.b[0] = q; c.b[1] = r ? kr : kc; c.b[2] = r ? vr : vc; c.b[3] = r ? out : whole;
                        size_t counts, bytes;
                        ak_cpu_shared_need(k, pp, &counts, &bytes);
                        c.sh.count = calloc(counts + 1, sizeof *c.sh.count);
                        c.sh.data = malloc(bytes + 1);
                        run(kind ? ak_cpu_attn_prefill : ak_cpu_attn_decode, &c, thread_counts[th], ak_cpu_scratch_need(k, pp));
                        free(c.sh.count);
                        free(c.sh.data);
                    }
                    CHECK(!memcmp(out, whole, no * sizeof(float)), "%s ring case %zu %s nth=%d: differs from the whole cache",
                          kind ? "prefill" : "decode", ci, ak_dtype_info[t].name, thread_counts[th]);
                    double e = max_rel(out, ref, no);
                    CHECK(e < 2e-6, "%s ring case %zu %s nth=%d: rel err %g", kind ? "prefill" : "decode", ci,
                          ak_dtype_info[t].name, thread_counts[th], e);
                }
            free(q); free(kf); free(vf); free(kc); free(vc); free(kr); free(vr); free(ref); free(whole); free(out);
        }
}

/* rope_kv into caches of every type, K and V of different types, against the same
 * command into F32 caches: a Q8_0 / Q4_0 key cache rotates Q and K (ak_kv_rot), a value
 * cache V, as the reference Walsh-Hadamard product does (1e-5), and each cache row holds
 * the row rope_kv leaves in the qkv buffer, converted or quantized by the reference
 * quantizers, byte for byte. */
static void test_rope_kv_types(void) {
    static const ak_dtype kvt[][2] = {{AK_Q8_0, AK_Q4_0}, {AK_Q4_0, AK_F16}, {AK_F16, AK_Q8_0}, {AK_F32, AK_Q4_0}};
    const int nh = 4, nkv = 2, hd = 128, n = 7, pos = 11, max_seq = 40, nq = nh * hd, nk = nkv * hd, ld = nq + 2 * nk;
    for (size_t ti = 0; ti < sizeof kvt / sizeof *kvt; ti++) {
        ak_dtype kt = kvt[ti][0], vt = kvt[ti][1];
        float *qkv = rnd((size_t)n * ld, 2), *plain = malloc((size_t)n * ld * 4), *inv = malloc(64 * 4);
        memcpy(plain, qkv, (size_t)n * ld * 4);
        for (int i = 0; i < 64; i++) inv[i] = powf(10000.f, -2.f * i / hd);
        size_t rk = ak_dtype_row_bytes(kt, hd), rv = ak_dtype_row_bytes(vt, hd);
        uint8_t *kc = calloc((size_t)nkv * max_seq, rk), *vc = calloc((size_t)nkv * max_seq, rv), *want = malloc(rk + rv);
        float *kf = calloc((size_t)nkv * max_seq * hd, 4), *vf = calloc((size_t)nkv * max_seq * hd, 4);
        for (int pass = 0; pass < 2; pass++) {   /* F32 caches over plain, then kt / vt over qkv */
            ak_p_rope_kv p = {.n = n, .pos = pos, .n_heads = nh, .n_kv_heads = nkv, .head_dim = hd, .n_rot = hd,
                              .style = AK_ROPE_NEOX, .ld = ld, .max_seq = max_seq, .kt = pass ? kt : AK_F32, .vt = pass ? vt : AK_F32};
            ak_cpu_cmd c = {0};
            memcpy(c.p, &p, sizeof p);
            c.b[0] = pass ? qkv : plain; c.b[3] = inv; c.b[4] = pass ? (void *)kc : kf; c.b[5] = pass ? (void *)vc : vf;
            run(ak_cpu_rope_kv, &c, 3, 0);
        }
        int bad = 0;
        double worst = 0, x[128];
        for (int i = 0; i < n; i++)
            for (int h = 0; h < nh + 2 * nkv; h++) {   /* Q heads, K heads, V heads */
                int r = h < nh ? ak_kv_rot(kt, hd, 0) : h < nh + nkv ? ak_kv_rot(kt, hd, 0) : ak_kv_rot(vt, hd, 1);
                const float *got = qkv + (size_t)i * ld + (size_t)h * hd, *pl = plain + (size_t)i * ld + (size_t)h * hd;
                for (int k = 0; k < hd; k++) x[k] = pl[k];
                wht_ref(x, hd, r);
                for (int k = 0; k < hd; k++) worst = fmax(worst, fabs(got[k] - x[k]) / (1 + fabs(x[k])));
                if (h < nh) continue;
                bool isv = h >= nh + nkv;
                ak_dtype t = isv ? vt : kt;
                size_t row = (size_t)(h - nh - (isv ? nkv : 0)) * max_seq + pos + i, rb = isv ? rv : rk;
                cache_row_ref(t, got, hd, want);
                bad += memcmp(want, (isv ? vc : kc) + row * rb, rb) != 0;
            }
        CHECK(!bad && worst < 1e-5, "rope_kv K %s V %s: %d cache rows differ from the reference quantizer's, rotation off by %g",
              ak_dtype_info[kt].name, ak_dtype_info[vt].name, bad, worst);
        free(qkv); free(plain); free(inv); free(kc); free(vc); free(want); free(kf); free(vf);
    }
}

/* ring: a sliding-window layer's cache of cap rows a KV head, position j in slot j % cap
 * (the rows written here wrap it) */
static void test_rope_kv(void) {
    for (int style = AK_ROPE_INTERLEAVED; style <= AK_ROPE_NEOX; style++)
        for (int flags = 0; flags < 4; flags++)
            for (int f16 = 0; f16 < 2; f16++)
            for (int ring = 0; ring < 2; ring++) {
                int nh = 4, nkv = 2, hd = 16, n_rot = flags & 1 ? 16 : 12, n = 5, pos = ring ? 30 : 9, max_seq = 40;
                int cap = ring ? 8 : 0, rows = ring ? cap : max_seq;
                int nq = nh * hd, nk = nkv * hd, ld = nq + 2 * nk + 1;
                float *qkv = rnd((size_t)n * ld, 2), *orig = malloc((size_t)n * ld * 4), *inv = malloc(8 * 4);
                float *qn = rnd((size_t)hd, 1), *kn = rnd((size_t)hd, 1), *bias = rnd((size_t)(nq + 2 * nk), 1);
                memcpy(orig, qkv, (size_t)n * ld * 4);
                for (int i = 0; i < n_rot / 2; i++) inv[i] = powf(10000.f, -2.f * i / n_rot);
                size_t cn = (size_t)nkv * rows * hd;
                void *kc = calloc(cn, 4), *vc = calloc(cn, 4);
                ak_p_rope_kv p = {.n = n, .pos = pos, .n_heads = nh, .n_kv_heads = nkv, .head_dim = hd, .n_rot = n_rot,
                                  .style = style, .ld = ld, .max_seq = max_seq, .kt = f16 ? AK_F16 : AK_F32, .vt = f16 ? AK_F16 : AK_F32,
                                  .flags = flags, .eps = 1e-6f, .cap = cap};
                ak_cpu_cmd c = {0};
                memcpy(c.p, &p, sizeof p);
                c.b[0] = qkv; c.b[1] = qn; c.b[2] = kn; c.b[3] = inv; c.b[4] = kc; c.b[5] = vc; c.b[6] = bias;
                run(ak_cpu_rope_kv, &c, 3, 0);
                double worst = 0;
                for (int i = 0; i < n; i++)
                    for (int h = 0; h < nh + nkv; h++) {
                        bool isq = h < nh;
                        int off = isq ? h * hd : nq + (h - nh) * hd;
                        double x[16], r[16];
                        for (int k = 0; k < hd; k++) x[k] = orig[(size_t)i * ld + off + k] + ((flags & 2) ? bias[off + k] : 0);
                        if (flags & 1) {
                            double ss = 0;
                            for (int k = 0; k < hd; k++) ss += x[k] * x[k];
                            double rr = 1 / sqrt(ss / hd + 1e-6);
                            for (int k = 0; k < hd; k++) x[k] = x[k] * rr * (isq ? qn : kn)[k];
                        }
                        memcpy(r, x, sizeof r);
                        for (int k = 0; k < n_rot / 2; k++) {
                            double th = (double)(pos + i) * inv[k];
                            int a = style == AK_ROPE_NEOX ? k : 2 * k, b = style == AK_ROPE_NEOX ? k + n_rot / 2 : 2 * k + 1;
                            r[a] = x[a] * cos(th) - x[b] * sin(th);
                            r[b] = x[a] * sin(th) + x[b] * cos(th);
                        }
                        for (int k = 0; k < hd; k++) {
                            double got = qkv[(size_t)i * ld + off + k];
                            worst = fmax(worst, fabs(got - r[k]));
                            if (!isq) {
                                size_t idx = ((size_t)(h - nh) * rows + (pos + i) % rows) * hd + k;
                                double kv = f16 ? ak_f16_to_f32(((uint16_t *)kc)[idx]) : ((float *)kc)[idx];
                                worst = fmax(worst, fabs(kv - r[k]) - (f16 ? fabs(r[k]) * 1e-3 : 0));
                                double vref = orig[(size_t)i * ld + nq + nk + (h - nh) * hd + k] + ((flags & 2) ? bias[nq + nk + (h - nh) * hd + k] : 0);
                                double vv = f16 ? ak_f16_to_f32(((uint16_t *)vc)[idx]) : ((float *)vc)[idx];
                                worst = fmax(worst, fabs(vv - vref) - (f16 ? fabs(vref) * 1e-3 : 0));
                            }
                        }
                    }
                CHECK(worst < 2e-5, "rope_kv style=%d flags=%d f16=%d ring=%d: err %g", style, flags, f16, ring, worst);
                free(qkv); free(orig); free(inv); free(qn); free(kn); free(bias); free(kc); free(vc);
            }
}

/* The sample command: argmax (first of ties, last row), and for the other modes the
 * reference pick with the window read before tokens[kv_len], the mask from the buffer and
 * kv_len as the draw's position. */
static void test_sample(void) {
    enum { V = 1000, CTX = 300 };
    uint8_t *sb = calloc(1, ak_sample_buf_bytes(V));
    float x[2][7] = {{0, 5, 1, 5, -1, 2, 3}, {9, 1, 9, 0, 0, 0, 9}};
    int32_t toks[CTX];
    ak_cpu_cmd c = {0};
    ak_p_sample p = {.n = 1, .vocab = 7};
    memcpy(c.p, &p, sizeof p);
    c.b[0] = x; c.b[1] = &toks[0]; c.b[2] = sb;
    run(ak_cpu_sample, &c, 2, 0);
    CHECK(toks[0] == 1, "argmax first of ties: %d", toks[0]);
    p.n = 2;
    memcpy(c.p, &p, sizeof p);
    run(ak_cpu_sample, &c, 3, 0);
    CHECK(toks[0] == 0, "argmax of last row: %d", toks[0]);

    uint64_t rs = 99;
    float *l = malloc(V * sizeof *l), *ref = malloc(V * sizeof *ref);
    ak_sample_cand *cands = malloc(V * sizeof *cands);
    int32_t *count = calloc(V, sizeof *count);
    uint32_t mask[(V + 31) / 32];
    for (int i = 0; i < CTX; i++) toks[i] = (int32_t)(ak_rand_u32(&rs) % 40);   /* the window repeats ids */
    int agree = 0, trials = 0;
    for (int t = 0; t < 60; t++) {
        ak_sample_cfg cfg = {.mode = 1 + t % 2, .top_k = 1 + t % 50, .last_n = t % 3 ? 64 : 0, .masked = t % 4 == 0,
                             .temperature = 0.5f + 0.1f * (float)(t % 7), .top_p = t % 5 ? 0.9f : 1.0f,
                             .min_p = t % 3 == 1 ? 0.05f : 0, .repeat = 1.3f, .presence = 0.2f, .frequency = 0.1f, .seed = 7u + (uint64_t)t};
        for (int i = 0; i < V; i++) l[i] = 3 * ak_rand_f(&rs);
        for (int i = 0; i < (V + 31) / 32; i++) mask[i] = ak_rand_u32(&rs);
        memcpy(sb, &cfg, sizeof cfg);
        memcpy(sb + AK_SAMPLE_MASK_OFF, mask, sizeof mask);
        int kv = 100 + t;
        ak_p_sample q = {.n = 1, .pos = kv - 1, .kv_len = kv, .vocab = V};
        memcpy(c.p, &q, sizeof q);
        c.b[0] = l; c.b[1] = &toks[kv];
        int32_t keep = toks[kv];
        memcpy(ref, l, V * sizeof *ref);
        int nw = cfg.last_n < kv ? cfg.last_n : kv;
        int32_t want = ak_sample_pick(&cfg, ref, V, toks + kv - nw, nw, cfg.masked ? mask : NULL, kv, cands, count);
        run(ak_cpu_sample, &c, 2, 0);
        trials++;
        agree += toks[kv] == want;
        CHECK(!cfg.masked || (mask[toks[kv] >> 5] >> (toks[kv] & 31) & 1), "sample: id %d is masked out", toks[kv]);
        toks[kv] = keep;
    }
    CHECK(agree == trials, "sample command = reference pick in %d of %d", agree, trials);
    free(l); free(ref); free(cands); free(count); free(sb);
}

int main(void) {
    ak_cpu_detect();
    const int detected = ak_cpu_simd;
    for (int simd = 0; simd <= detected; simd++) {   /* every level this CPU runs */
        ak_cpu_detect();
        ak_cpu_simd = simd;
        printf("simd level %d\n", ak_cpu_simd);
        test_matmul();
        test_act_down();
        test_act_range();
        test_softcap_range();
        test_norms();
        test_attention();
        test_attention_ring();
        test_rope_kv();
        test_rope_kv_types();
        test_sample();
    }
    return ak_test_done();
}
