/* Panels of the ggml block types (layouts: panel_q.h): packing, the activation
 * quantizer, the scalar reference kernel over the panel layout, and the driver that
 * picks the SIMD kernels of panel_q_x86.c at run time. */
#include "backend/cpu/panel_q.h"
#include "backend/cpu/cpu.h"
#include "backend/cpu/quant32.h"
#include <math.h>
#include <string.h>

static bool is_k(ak_dtype t) { return t == AK_Q4_K || t == AK_Q5_K || t == AK_Q6_K; }
static bool is_q5(ak_dtype t) { return t == AK_Q5_0 || t == AK_Q5_1 || t == AK_Q5_K; }
/* Codes as whole bytes (Q8_0's vectors), and codes with bits 4-5 beside the 4-bit part */
static bool is_b8(ak_dtype t) { return t == AK_Q8_0 || t == AK_MLX_Q8; }
static bool is_b6(ak_dtype t) { return t == AK_Q6_K || t == AK_MLX_Q6; }

bool ak_panel_q_supported(ak_dtype t, int64_t K) {
    if ((int)t < 0 || t >= AK_DTYPE_COUNT || ak_pq_layouts[t].blk == 0 || ak_cpu_act_f32) return false;
    return K > 0 && K % ak_pq_layouts[t].blk == 0;
}

static size_t panel_bytes(ak_dtype t, int64_t K) {
    const ak_pq_layout *L = &ak_pq_layouts[t];
    return (size_t)((K / L->blk + L->G - 1) / L->G) * (size_t)L->gb;
}

size_t ak_panel_q_bytes(ak_dtype t, int64_t N, int64_t K) {
    return (size_t)((N + AK_PANEL_R - 1) / AK_PANEL_R) * panel_bytes(t, K);
}

size_t ak_panel_q_scratch(ak_dtype t, int64_t K, int n) {
    (void)t;
    return (size_t)(n > 0 ? n : 1) * ak_pq_xrow(K) + 64;
}

/* ---- packing ---- */

static inline uint16_t u16_at(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t u32_at(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

static void k4_scale_min(const uint8_t *q, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | (q[j - 4] >> 6) << 4;
        *m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
    }
}

/* Codes (unsigned, as the panel stores them) and scales of one block of row r: block bi
 * of the group at P. */
static void pack_block(ak_dtype t, const uint8_t *S, uint8_t *P, int bi, int r) {
    const ak_pq_layout *L = &ak_pq_layouts[t];
    uint8_t c[256];
    uint8_t *cp = P + L->codes + bi * L->cs;
    uint8_t *scp = P + (L->sc >= 0 ? L->sc + bi * L->ss : 0), *mnp = P + (L->mn >= 0 ? L->mn + bi * L->ss : 0);
    memcpy(P + L->d + 32 * bi + 2 * r, S + (t == AK_Q6_K ? 208 : 0), 2);
    if (L->m >= 0) memcpy(P + L->m + 32 * bi + 2 * r, S + 2, 2);
    switch (t) {
    case AK_Q4_0: /* load i byte 4r+t = qs[4i+t]: low nibble value 4i+t, high 16+4i+t */
        for (int i = 0; i < 4; i++) memcpy(cp + 64 * i + 4 * r, S + 2 + 4 * i, 4);
        return;
    case AK_Q4_1:
        for (int i = 0; i < 4; i++) memcpy(cp + 64 * i + 4 * r, S + 4 + 4 * i, 4);
        return;
    case AK_Q8_0:
        for (int v = 0; v < 8; v++) put_u32(cp + 64 * v + 4 * r, u32_at(S + 2 + 4 * v) ^ 0x80808080u);
        return;
    case AK_MLX_Q8:
        for (int v = 0; v < 8; v++) put_u32(cp + 64 * v + 4 * r, u32_at(S + 4 + 4 * v));
        return;
    case AK_MLX_Q2: case AK_MLX_Q3: case AK_MLX_Q6: { /* an LSB-first stream of B-bit codes */
        int B = ak_dtype_info[t].mlx_bits;
        for (int k = 0; k < 32; k++) {
            int bit = k * B, sh = bit % 8;
            unsigned v = S[4 + bit / 8] >> sh;
            if (sh + B > 8) v |= (unsigned)S[5 + bit / 8] << (8 - sh);
            c[k] = (uint8_t)(v & ((1u << B) - 1));
        }
        break;
    }
    case AK_Q4_K:
        for (int j = 0; j < 8; j++) {
            int sc, m;
            k4_scale_min(S + 4, j, &sc, &m);
            scp[16 * j + r] = (uint8_t)sc;
            mnp[16 * j + r] = (uint8_t)m;
            const uint8_t *qs = S + 16 + 32 * (j / 2);
            for (int i = 0; i < 4; i++) {
                uint32_t a = u32_at(qs + 4 * i), b = u32_at(qs + 16 + 4 * i);
                uint32_t v = j % 2 ? ((a >> 4) & 0x0F0F0F0Fu) | (b & 0xF0F0F0F0u)
                                   : (a & 0x0F0F0F0Fu) | (b & 0x0F0F0F0Fu) << 4;
                put_u32(cp + L->js * j + 64 * i + 4 * r, v);
            }
        }
        return;
    case AK_Q5_0: case AK_Q5_1: {
        int one = t == AK_Q5_1;
        uint32_t qh = u32_at(S + 2 + 2 * one);
        const uint8_t *qs = S + 6 + 2 * one;
        for (int i = 0; i < 16; i++) {
            c[i] = (uint8_t)((qs[i] & 0xF) | ((qh >> i) & 1) << 4);
            c[i + 16] = (uint8_t)((qs[i] >> 4) | ((qh >> (i + 16)) & 1) << 4);
        }
        break;
    }
    case AK_Q5_K:
        for (int j = 0; j < 8; j++) {
            int sc, m;
            k4_scale_min(S + 4, j, &sc, &m);
            scp[16 * j + r] = (uint8_t)sc;
            mnp[16 * j + r] = (uint8_t)m;
            for (int l = 0; l < 32; l++)
                c[32 * j + l] = (uint8_t)(((S[48 + 32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF) | ((S[16 + l] >> j) & 1) << 4);
        }
        break;
    default: /* Q6_K: value 32 j + l takes bits 4 ((j % 4) / 2) of ql[64 (j / 4) + 32 (j % 2) + l]
              * and bits 2 (j % 4) of qh[32 (j / 4) + l] */
        for (int s = 0; s < 16; s++) scp[16 * s + r] = S[192 + s];
        for (int j = 0; j < 8; j++) {
            const uint8_t *ql = S + 64 * (j / 4) + 32 * (j % 2), *qh = S + 128 + 32 * (j / 4);
            int ls = 4 * ((j % 4) / 2), hs = 2 * (j % 4);
            for (int i = 0; i < 4; i++) {
                uint32_t a = (u32_at(ql + 4 * i) >> ls) & 0x0F0F0F0Fu, b = (u32_at(ql + 16 + 4 * i) >> ls) & 0x0F0F0F0Fu;
                put_u32(cp + L->js * j + 64 * i + 4 * r, a | b << 4);
            }
            for (int h = 0; h < 2; h++) {
                uint32_t v = 0;
                for (int s = 0; s < 4; s++) v |= ((u32_at(qh + 16 * h + 4 * s) >> hs) & 0x03030303u) << (2 * s);
                put_u32(cp + L->js * j + L->hb + 64 * h + 4 * r, v);
            }
        }
        return;
    }
    /* generic placement of c: 4-bit part, then the high bits */
    for (int j = 0; j < L->blk / 32; j++) {
        uint8_t *cj = cp + L->js * j;
        for (int k = 0; k < 32; k++) {
            int v = k / 4, tt = k % 4, code = c[32 * j + k];
            cj[64 * (v % 4) + 4 * r + tt] |= (uint8_t)((code & 0xF) << (v < 4 ? 0 : 4));
            if (is_q5(t)) {
                if (code & 16) {
                    int bit = 4 * r + tt;
                    cj[L->hb + 8 * v + bit / 8] |= (uint8_t)(1u << (bit % 8));
                }
            } else if (is_b6(t))
                cj[L->hb + 64 * (v / 4) + 4 * r + tt] |= (uint8_t)((code >> 4) << (2 * (v % 4)));
        }
    }
}

void ak_panel_q_pack(ak_dtype t, const void *src, int64_t N, int64_t K, void *dst, int64_t p0, int64_t p1) {
    const ak_pq_layout *L = &ak_pq_layouts[t];
    const ak_dtype_traits *tr = &ak_dtype_info[t];
    size_t rb = ak_dtype_row_bytes(t, K), pbytes = panel_bytes(t, K);
    int64_t nblk = K / L->blk;
    for (int64_t p = p0; p < p1; p++) {
        uint8_t *D = (uint8_t *)dst + (size_t)p * pbytes;
        memset(D, 0, pbytes);
        for (int r = 0; r < AK_PANEL_R && p * AK_PANEL_R + r < N; r++) {
            const uint8_t *S = (const uint8_t *)src + (size_t)(p * AK_PANEL_R + r) * rb;
            for (int64_t b = 0; b < nblk; b++)
                pack_block(t, S + (size_t)b * tr->block_bytes, D + (size_t)(b / L->G) * L->gb, (int)(b % L->G), r);
        }
    }
}

/* ---- activations ---- */

static void quant_ref(const float *x, int64_t K, uint8_t *row) {
    for (int64_t b = 0; b < K / 32; b++, x += 32) {
        int s[2];
        float d = ak_q32_ref(x, (int8_t *)row + 32 * b, s);
        ak_pq_meta(row, K, b, d, s);
    }
}

/* ---- scalar reference over the panel layout ---- */

static inline float f16_at(const uint8_t *p) { return ak_f16_to_f32(u16_at(p)); }

/* Code of value 32 j + k of row r in block bi of the group at P. */
static int code_at(ak_dtype t, const uint8_t *P, int bi, int j, int r, int k) {
    const ak_pq_layout *L = &ak_pq_layouts[t];
    const uint8_t *cp = P + L->codes + bi * L->cs, *cj = cp + L->js * j;
    int v = k / 4, tt = k % 4, c;
    if (is_b8(t)) return cp[64 * v + 4 * r + tt];
    int byte = cj[64 * (v % 4) + 4 * r + tt];
    c = v < 4 ? byte & 0xF : byte >> 4;
    if (is_q5(t)) {
        int bit = 4 * r + tt;
        c |= ((cj[L->hb + 8 * v + bit / 8] >> (bit % 8)) & 1) << 4;
    } else if (is_b6(t))
        c |= ((cj[L->hb + 64 * (v / 4) + 4 * r + tt] >> (2 * (v % 4))) & 3) << 4;
    return c;
}

static void kern_ref(ak_dtype t, const uint8_t *pw, int64_t K, const uint8_t *xa, size_t xs, int nr, int rows, float *out) {
    const ak_pq_layout *L = &ak_pq_layouts[t];
    int nsub = L->blk / 32;
    for (int i = 0; i < nr; i++) {
        const uint8_t *xr = xa + (size_t)i * xs;
        const int8_t *xq = (const int8_t *)xr;
        const float *xd = AK_PQ_XD(xr, K), *xsum = AK_PQ_XS(xr, K);
        const int32_t *x16 = AK_PQ_X16(xr, K);
        for (int r = 0; r < rows; r++) {
            float acc = 0;
            for (int64_t sb = 0; sb < K / L->blk; sb++) {
                const uint8_t *P = pw + (size_t)(sb / L->G) * L->gb;
                int bi = (int)(sb % L->G);
                const uint8_t *sc = P + (L->sc >= 0 ? L->sc + bi * L->ss : 0), *mn = P + (L->mn >= 0 ? L->mn + bi * L->ss : 0);
                float d = f16_at(P + L->d + 32 * bi + 2 * r), m = L->m >= 0 ? f16_at(P + L->m + 32 * bi + 2 * r) : 0.f;
                for (int j = 0; j < nsub; j++) {
                    int64_t b = sb * nsub + j;
                    int32_t is[2] = {0, 0};
                    for (int k = 0; k < 32; k++) is[t == AK_Q6_K && k >= 16] += code_at(t, P, bi, j, r, k) * xq[32 * b + k];
                    float dx = xd[b];
                    if (t == AK_Q6_K) {
                        is[0] += 32 * x16[2 * b];
                        is[1] += 32 * x16[2 * b + 1];
                        acc += (float)is[0] * (d * (float)(int8_t)sc[16 * (2 * j) + r] * dx);
                        acc += (float)is[1] * (d * (float)(int8_t)sc[16 * (2 * j + 1) + r] * dx);
                    } else if (is_k(t)) {
                        acc += (float)is[0] * (d * (float)sc[16 * j + r] * dx);
                        acc -= m * (float)mn[16 * j + r] * xsum[b];
                    } else {
                        is[0] += L->off * AK_PQ_X32(xr, K)[b];
                        acc += (float)is[0] * (d * dx);
                        if (L->m >= 0) acc += m * xsum[b];
                    }
                }
            }
            out[16 * i + r] = acc;
        }
    }
}

/* ---- driver ---- */

static void quantize(const float *x, int64_t K, uint8_t *row) {
#if defined(__x86_64__)
    if (ak_cpu_simd >= 1) { ak_pq_quant_avx2(x, K, row); return; }
#endif
    quant_ref(x, K, row);
}

static ak_pq_kern pick(ak_dtype t) {
#if defined(__x86_64__)
    if (ak_cpu_simd >= 1) {
        if (ak_cpu_vnni == 1) return ak_pq_vnni512[t];
        if (ak_cpu_vnni == 2) return ak_pq_avxvnni[t];
        return ak_pq_avx2[t];
    }
#endif
    (void)t;
    return NULL;
}

void ak_panel_q_quantize(int64_t K, const float *x, int64_t ldx, int n, void *xa) {
    if (ak_cpu_simd < 0) ak_cpu_detect();
    size_t xs = ak_pq_xrow(K);
    for (int i = 0; i < n; i++) quantize(x + (size_t)i * ldx, K, (uint8_t *)xa + (size_t)i * xs);
}

/* Cache blocking: groups of panels (about AK_PQ_WBLOCK bytes) times chunks of activation
 * rows (about AK_PQ_XBLOCK bytes) that both stay in L2; inside, panel outer and rows
 * inner, so each panel meets every AK_PQ_NR rows of the chunk. Weights stream from
 * memory once; x is read once per group of panels. */
#define AK_PQ_WBLOCK (256 << 10)
#define AK_PQ_XBLOCK (512 << 10)

/* gemv: each row summed as the one-row GEMV sums it (two accumulators; the kernels group
 * such rows by what their registers hold); otherwise one accumulator a row, in blocks of
 * any size. */
void ak_panel_q_mm_pre(ak_dtype t, const void *w, int64_t N, int64_t K, int64_t p0, int64_t p1,
                       const void *xa, int n, float *y, int64_t ldy, const float *bias, bool gemv) {
    if (ak_cpu_simd < 0) ak_cpu_detect();
    size_t xs = ak_pq_xrow(K), pbytes = panel_bytes(t, K);
    ak_pq_kern kern = pick(t);
    int mc = (int)(AK_PQ_XBLOCK / xs) / AK_PQ_NR * AK_PQ_NR;
    if (mc < AK_PQ_NR) mc = AK_PQ_NR;
    int64_t pg = (int64_t)(AK_PQ_WBLOCK / pbytes);
    if (pg < 1) pg = 1;
    _Alignas(64) float out[AK_PQ_NR * AK_PANEL_R];
    for (int64_t g0 = p0; g0 < p1; g0 += pg) {
        int64_t g1 = p1 - g0 < pg ? p1 : g0 + pg;
        for (int c0 = 0; c0 < n; c0 += mc) {
            int c1 = n - c0 < mc ? n : c0 + mc;
            for (int64_t p = g0; p < g1; p++) {
                const uint8_t *pw = (const uint8_t *)w + (size_t)p * pbytes;
                int rows = N - p * AK_PANEL_R < AK_PANEL_R ? (int)(N - p * AK_PANEL_R) : AK_PANEL_R;
                const float *bp = bias ? bias + p * AK_PANEL_R : NULL;
                for (int i0 = c0; i0 < c1; i0 += AK_PQ_NR) {
                    int nr = c1 - i0 < AK_PQ_NR ? c1 - i0 : AK_PQ_NR;
                    const uint8_t *xr = (const uint8_t *)xa + (size_t)i0 * xs;
                    if (kern) kern(pw, K, xr, xs, nr, rows, out, gemv);
                    else kern_ref(t, pw, K, xr, xs, nr, rows, out);
                    for (int i = 0; i < nr; i++) {
                        float *yr = y + (size_t)(i0 + i) * ldy + p * AK_PANEL_R;
                        for (int r = 0; r < rows; r++) yr[r] = out[16 * i + r] + (bp ? bp[r] : 0.f);
                    }
                }
            }
        }
    }
}

void ak_panel_q_mm(ak_dtype t, const void *w, int64_t N, int64_t K, int64_t p0, int64_t p1,
                   const float *x, int64_t ldx, int n, float *y, int64_t ldy, const float *bias,
                   void *scratch, bool gemv) {
    ak_panel_q_quantize(K, x, ldx, n, scratch);
    ak_panel_q_mm_pre(t, w, N, K, p0, p1, scratch, n, y, ldy, bias, gemv);
}
