/* Fused [bias +] [per-head RMSNorm +] RoPE + KV-cache write, for one or many tokens.
 * Angles are pos * inv_freq in float32 and cos/sin of that, as the float32 reference
 * computes them; interleaved pairs (2i, 2i+1) or NeoX pairs (i, i + n_rot/2). A cache
 * row is written in its type: as is, rounded to F16, or quantized to Q8_0 / Q4_0 blocks
 * (ggml's quantizers, core/quants.h). */
#include "backend/cpu/cpu.h"
#include "core/quants.h"
#include <math.h>
#include <string.h>

void ak_rope_apply(float *x, int n_rot, int style, int pos, const float *inv_freq) {
    int half = n_rot / 2;
    for (int i = 0; i < half; i++) {
        float th = (float)pos * inv_freq[i];
        float cs = cosf(th), sn = sinf(th);
        int a = style == AK_ROPE_NEOX ? i : 2 * i, b = style == AK_ROPE_NEOX ? i + half : 2 * i + 1;
        float x0 = x[a], x1 = x[b];
        x[a] = x0 * cs - x1 * sn;
        x[b] = x0 * sn + x1 * cs;
    }
}

static void head_norm(float *x, const float *w, int hd, float eps) {
    float ss = 0;
    for (int i = 0; i < hd; i++) ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss / (float)hd + eps);
    for (int i = 0; i < hd; i++) x[i] = x[i] * r * w[i];
}

static void store_row(void *cache, int t, size_t idx, const float *x, int hd) {
    uint8_t *d = (uint8_t *)cache + idx * ak_dtype_row_bytes((ak_dtype)t, hd);
    switch (t) {
    case AK_F16:
        for (int i = 0; i < hd; i++) ((uint16_t *)d)[i] = ak_f32_to_f16(x[i]);
        break;
    case AK_Q8_0: ak_quantize_q8_0(x, d, hd); break;
    case AK_Q4_0: ak_quantize_q4_0(x, d, hd); break;
    default: memcpy(d, x, (size_t)hd * sizeof(float)); break;
    }
}

/* In place, fast (r log2 r additions a block), then scaled by 1/sqrt(r). */
void ak_cpu_wht(float *x, int n, int r) {
    if (r <= 1) return;
    const float s = 1.0f / sqrtf((float)r);
    for (int b = 0; b < n; b += r) {
        float *y = x + b;
        for (int h = 1; h < r; h *= 2)
            for (int i = 0; i < r; i += 2 * h)
                for (int j = i; j < i + h; j++) {
                    float a = y[j], c = y[j + h];
                    y[j] = a + c;
                    y[j + h] = a - c;
                }
        for (int i = 0; i < r; i++) y[i] *= s;
    }
}

void ak_cpu_rope_kv(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls) {
    (void)tls;
    const ak_p_rope_kv *p = (const ak_p_rope_kv *)c->p;
    int hd = p->head_dim, nh = p->n_heads, nkv = p->n_kv_heads, per = nh + nkv;
    int nq = nh * hd, nk = nkv * hd, rk = ak_kv_rot(p->kt, hd, 0), rv = ak_kv_rot(p->vt, hd, 1);
    const float *bias = c->b[6];
    int64_t lo, hi;
    ak_split((int64_t)p->n * per, ith, nth, &lo, &hi);
    for (int64_t w = lo; w < hi; w++) {
        int i = (int)(w / per), h = (int)(w % per), pos = p->pos + i;
        float *row = (float *)c->b[0] + (size_t)i * p->ld;
        bool is_q = h < nh;
        int off = is_q ? h * hd : nq + (h - nh) * hd;
        float *x = row + off;
        if (p->flags & AK_ROPE_F_BIAS) for (int k = 0; k < hd; k++) x[k] += bias[off + k];
        if (p->flags & AK_ROPE_F_QKNORM) head_norm(x, is_q ? c->b[1] : c->b[2], hd, p->eps);
        if (p->n_rot) ak_rope_apply(x, p->n_rot, p->style, pos, c->b[3]);
        ak_cpu_wht(x, hd, rk);   /* a rotated key cache: Q and K alike (the K row is dead after the write) */
        if (is_q) continue;
        int kh = h - nh;
        size_t idx = ak_kv_row(kh, pos, p->cap, p->max_seq);
        store_row(c->b[4], p->kt, idx, x, hd);
        float *v = row + nq + nk + kh * hd;
        if (p->flags & AK_ROPE_F_BIAS) for (int k = 0; k < hd; k++) v[k] += bias[nq + nk + kh * hd + k];
        ak_cpu_wht(v, hd, rv);
        store_row(c->b[5], p->vt, idx, v, hd);
    }
}
