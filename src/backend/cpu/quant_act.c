/* Int8 activations and unpacked weight rows for the int8 GEMV/GEMM: the buffer layouts,
 * the scalar quantizer and per-dtype unpackers (plain code following core/quants.c),
 * and the choice of the SIMD kernels of dotq_x86.c. */
#include "backend/cpu/cpu.h"
#include <math.h>
#include <string.h>
#include "backend/cpu/dotq_simd.h"
#include "backend/cpu/quant32.h"

/* Layouts are packed (K is a multiple of 32, so every array stays 4-byte aligned
 * after a 4-aligned start); the kernels use unaligned loads. */
size_t ak_xq_bytes(int64_t K) { return 2 * (size_t)K + (size_t)K / 32 * 4 + (size_t)K / 16 * 4; }

static void xq_layout(int64_t K, void *buf, ak_xq *o) {
    uint8_t *p = buf;
    o->m8 = (int32_t *)p;
    o->q = (int8_t *)(p + K);
    o->d = (float *)(p + 2 * K);
    o->s = (float *)(p + 2 * K + K / 32 * 4);
}

void ak_xq_quantize_ref(const float *x, int64_t K, void *buf, ak_xq *o) {
    xq_layout(K, buf, o);
    for (int64_t b = 0; b < K / 32; b++, x += 32) {
        int s[2];
        float d = ak_q32_ref(x, o->q + 32 * b, s);
        o->d[b] = d;
        o->s[2 * b] = d * (float)s[0];
        o->s[2 * b + 1] = d * (float)s[1];
        for (int g = 0; g < 8; g++) {
            const int8_t *q = o->q + 32 * b + 4 * g;
            o->m8[8 * b + g] = -8 * (q[0] + q[1] + q[2] + q[3]);
        }
    }
}

void ak_xq_quantize(const float *x, int64_t K, void *buf, ak_xq *o) {
#if defined(__x86_64__)
    if (ak_cpu_simd >= 1) {
        xq_layout(K, buf, o);
        ak_xq_quantize_avx2(x, K, o);
        return;
    }
#endif
    ak_xq_quantize_ref(x, K, buf, o);
}

/* x dequantized from its int8 codes: xh[i] = d * q[i] (the values every int8 kernel
 * multiplies), for dtypes that run float kernels against quantized activations. */
void ak_xq_dequant(const float *x, int64_t K, float *xh) {
#if defined(__x86_64__)
    if (ak_cpu_simd >= 1) { ak_xq_dequant_avx2(x, K, xh); return; }
#endif
    for (int64_t b = 0; b < K / 32; b++, x += 32, xh += 32) {
        float amax = 0;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[i]));
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int i = 0; i < 32; i++) xh[i] = d * nearbyintf(x[i] * id);
    }
}

/* Reference: dequantize the weights block by block, dot with d * q of x. */
static float dotq_ref(ak_dtype t, int64_t K, const void *w, const ak_xq *x) {
    const ak_dtype_traits *tr = &ak_dtype_info[t];
    const uint8_t *p = w;
    float tmp[256], s = 0;
    for (int64_t k = 0; k < K; k += tr->block, p += tr->block_bytes) {
        tr->dequant(p, tmp, tr->block);
        for (int i = 0; i < tr->block; i++) s += tmp[i] * (x->d[(k + i) / 32] * (float)x->q[k + i]);
    }
    return s;
}

#define REF(T) static float dotq_ref_##T(int64_t K, const void *w, const ak_xq *x) { return dotq_ref(T, K, w, x); }
REF(AK_Q4_0) REF(AK_Q4_1) REF(AK_Q5_0) REF(AK_Q5_1) REF(AK_Q8_0) REF(AK_Q2_K) REF(AK_Q3_K) REF(AK_Q4_K) REF(AK_Q5_K) REF(AK_Q6_K)
static const ak_dotq_fn dotq_refs[AK_DTYPE_COUNT] = {
    [AK_Q4_0] = dotq_ref_AK_Q4_0, [AK_Q4_1] = dotq_ref_AK_Q4_1, [AK_Q5_0] = dotq_ref_AK_Q5_0,
    [AK_Q5_1] = dotq_ref_AK_Q5_1, [AK_Q8_0] = dotq_ref_AK_Q8_0, [AK_Q2_K] = dotq_ref_AK_Q2_K,
    [AK_Q3_K] = dotq_ref_AK_Q3_K, [AK_Q4_K] = dotq_ref_AK_Q4_K, [AK_Q5_K] = dotq_ref_AK_Q5_K,
    [AK_Q6_K] = dotq_ref_AK_Q6_K,
};

ak_dotq_fn ak_dotq_reference(ak_dtype t) { return dotq_refs[t]; }

ak_dotq_fn ak_cpu_dotq(ak_dtype t) {
    if (ak_cpu_simd < 0) ak_cpu_detect();
#if defined(__x86_64__)
    if (ak_cpu_simd >= 1) {
        if (ak_cpu_vnni == 1) return ak_dotq_vnni512[t];
        if (ak_cpu_vnni == 2) return ak_dotq_avxvnni[t];
        return ak_dotq_avx2[t];
    }
#endif
    return dotq_refs[t];
}

/* ---- unpacked rows ---- */

size_t ak_prow_bytes(int64_t K) { return 3 * (size_t)K + (size_t)K / 16 * 4; }

bool ak_act_q8(ak_dtype t) {
    if (ak_cpu_act_f32) return false;
    switch (t) {
    case AK_Q4_0: case AK_Q4_1: case AK_Q5_0: case AK_Q5_1: case AK_Q8_0:
    case AK_Q2_K: case AK_Q3_K: case AK_Q4_K: case AK_Q5_K: case AK_Q6_K: return true;
    default: return false;
    }
}

static inline float f16_at(const uint8_t *p) { return ak_f16_to_f32((uint16_t)(p[0] | (p[1] << 8))); }
static inline uint32_t u32_at(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Codes of 32-value blocks: q (signed, offset removed), a and b per 16 values. */
static void unpack32(ak_dtype t, const uint8_t *p, int8_t *q, float *a, float *b) {
    float d = f16_at(p), m = 0;
    switch (t) {
    case AK_Q4_0:
        for (int i = 0; i < 16; i++) { q[i] = (int8_t)((p[2 + i] & 0xF) - 8); q[i + 16] = (int8_t)((p[2 + i] >> 4) - 8); }
        break;
    case AK_Q4_1:
        m = f16_at(p + 2);
        for (int i = 0; i < 16; i++) { q[i] = (int8_t)(p[4 + i] & 0xF); q[i + 16] = (int8_t)(p[4 + i] >> 4); }
        break;
    case AK_Q5_0: case AK_Q5_1: {
        int one = t == AK_Q5_1;
        uint32_t qh = u32_at(p + 2 + 2 * one);
        const uint8_t *qs = p + 6 + 2 * one;
        if (one) m = f16_at(p + 2);
        for (int i = 0; i < 16; i++) {
            q[i] = (int8_t)(((qs[i] & 0xF) | ((qh >> i) & 1) << 4) - (one ? 0 : 16));
            q[i + 16] = (int8_t)(((qs[i] >> 4) | ((qh >> (i + 16)) & 1) << 4) - (one ? 0 : 16));
        }
        break;
    }
    default: /* Q8_0 */
        memcpy(q, p + 2, 32);
        break;
    }
    a[0] = a[1] = d;
    b[0] = b[1] = m;
}

static void k4_scale_min(const uint8_t *q, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | (q[j - 4] >> 6) << 4;
        *m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
    }
}

static int q3_k_scale(const uint8_t *sc, int s) {
    int lo = s < 8 ? sc[s] & 0xF : sc[s - 8] >> 4;
    int hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* 256-value super-blocks: q[256], a and b per 16 values. */
static void unpack256(ak_dtype t, const uint8_t *p, int8_t *q, float *a, float *b) {
    switch (t) {
    case AK_Q2_K: {
        float d = f16_at(p + 80), dmin = f16_at(p + 82);
        for (int i = 0; i < 256; i++) q[i] = (int8_t)((p[16 + 32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3);
        for (int s = 0; s < 16; s++) { a[s] = d * (float)(p[s] & 0xF); b[s] = -dmin * (float)(p[s] >> 4); }
        break;
    }
    case AK_Q3_K: {
        float d = f16_at(p + 108);
        for (int i = 0; i < 256; i++) {
            int l = i % 32, v = (p[32 + 32 * (i / 128) + l] >> (2 * ((i % 128) / 32))) & 3;
            q[i] = (int8_t)(((p[l] >> (i / 32)) & 1) ? v : v - 4);
        }
        for (int s = 0; s < 16; s++) { a[s] = d * (float)q3_k_scale(p + 96, s); b[s] = 0; }
        break;
    }
    case AK_Q4_K: case AK_Q5_K: {
        int five = t == AK_Q5_K;
        float d = f16_at(p), dmin = f16_at(p + 2);
        const uint8_t *qh = p + 16, *qs = p + (five ? 48 : 16);
        for (int j = 0; j < 8; j++) {
            int sc, m;
            k4_scale_min(p + 4, j, &sc, &m);
            for (int l = 0; l < 32; l++) {
                int v = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
                if (five) v |= ((qh[l] >> j) & 1) << 4;
                q[32 * j + l] = (int8_t)v;
            }
            a[2 * j] = a[2 * j + 1] = d * (float)sc;
            b[2 * j] = b[2 * j + 1] = -dmin * (float)m;
        }
        break;
    }
    default: { /* Q6_K */
        float d = f16_at(p + 208);
        for (int i = 0; i < 256; i++) {
            int half = i / 128, r = i % 128;
            int lo = (p[64 * half + r % 64] >> (4 * (r / 64))) & 0xF;
            int hi = (p[128 + 32 * half + r % 32] >> (2 * (r / 32))) & 3;
            q[i] = (int8_t)((lo | hi << 4) - 32);
        }
        for (int s = 0; s < 16; s++) { a[s] = d * (float)(int8_t)p[192 + s]; b[s] = 0; }
        break;
    }
    }
}

void ak_unpack_row(ak_dtype t, const void *w, int64_t K, void *buf, ak_prow *o) {
    uint8_t *base = buf;
    o->q = (int8_t *)base;
    o->nc = (int32_t *)(base + K);
    o->a = (float *)(base + 2 * K);
    o->b = (float *)(base + 3 * K);
    const ak_dtype_traits *tr = &ak_dtype_info[t];
    const uint8_t *p = w;
    float a16[16];
    for (int64_t k = 0; k < K; k += tr->block, p += tr->block_bytes) {
        if (tr->block == 32) unpack32(t, p, o->q + k, a16, o->b + k / 16);
        else unpack256(t, p, o->q + k, a16, o->b + k / 16);
        for (int s = 0; s < tr->block / 16; s++)
            for (int i = 0; i < 4; i++) o->a[(k / 16 + s) * 4 + i] = a16[s];
    }
    for (int64_t g = 0; g < K / 4; g++) {
        const int8_t *q = o->q + 4 * g;
        o->nc[g] = -128 * (q[0] + q[1] + q[2] + q[3]);
    }
}

/* Scalar tile (the reference for the SIMD tiles). */
static void tile_ref(int64_t K, const ak_prow *w, int mr, const ak_xq *x, int nr, float *out, int ldo) {
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < nr; c++) {
            float acc = 0;
            for (int64_t b = 0; b < K / 32; b++)
                for (int h = 0; h < 2; h++) {
                    int32_t s = 0;
                    for (int i = 0; i < 16; i++) s += w[r].q[32 * b + 16 * h + i] * x[c].q[32 * b + 16 * h + i];
                    acc += (float)s * w[r].a[8 * b + 4 * h] * x[c].d[b] + w[r].b[2 * b + h] * x[c].s[2 * b + h];
                }
            out[r * ldo + c] = acc;
        }
}

void ak_gemm_q8_tile(int64_t K, const ak_prow *w, int mr, const ak_xq *x, int nr, float *out, int ldo) {
#if defined(__x86_64__)
    if (ak_cpu_simd >= 1) {
        if (ak_cpu_vnni == 1) ak_gemm_q8_tile_vnni512(K, w, mr, x, nr, out, ldo);
        else if (ak_cpu_vnni == 2) ak_gemm_q8_tile_avxvnni(K, w, mr, x, nr, out, ldo);
        else ak_gemm_q8_tile_avx2(K, w, mr, x, nr, out, ldo);
        return;
    }
#endif
    tile_ref(K, w, mr, x, nr, out, ldo);
}
