/* Activations, gated activation, logit softcap, the token choice and embedding lookup. */
#include "backend/cpu/cpu.h"
#include "core/sample.h"
#include "backend/cpu/vecmath.h"
#include <math.h>
#include <string.h>

float ak_act_apply(int act, float x) {
    switch (act) {
    case AK_ACT_SILU: return x / (1.0f + expf(-x));
    case AK_ACT_GELU_TANH: return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    default: return 0.5f * x * erfcf(-x * 0.7071067811865475f);   /* 1 + erf(z), exact below 0 too */
    }
}

#if defined(__x86_64__)
/* SiLU, tanh-GELU or erf-GELU (x Phi(x), vecmath.h) of g (times u) 16 lanes at a time,
 * the tail under a mask. SiLU and tanh-GELU are
 * x * sigmoid(z): z = x for SiLU, z = 2 * 0.79788456 (x + 0.044715 x^3) for GELU, whose
 * 0.5 x (1 + tanh(z / 2)) is that. sigmoid(z) = 1 / (1 + t) for z >= 0 and t / (1 + t)
 * below, with t = e^-|z| so that the exponent stays <= 0. Within a few ulp of the
 * double-precision values (the scalar tanhf form loses more where 1 + tanh cancels). */
__attribute__((target("avx512f"))) static void act_row512(int act, const float *g, const float *u, float *o, int64_t K) {
    const __m512 one = _mm512_set1_ps(1.f), zero = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k += 16) {
        __mmask16 m = ak_lanes512(K - k);
        __m512 x = _mm512_maskz_loadu_ps(m, g + k), z = x;
        if (act == AK_ACT_GELU_ERF) {
            __m512 y = _mm512_mul_ps(x, ak_phi512(x));
            if (u) y = _mm512_mul_ps(y, _mm512_maskz_loadu_ps(m, u + k));
            _mm512_mask_storeu_ps(o + k, m, y);
            continue;
        }
        if (act == AK_ACT_GELU_TANH)
            z = _mm512_mul_ps(_mm512_set1_ps(1.5957691216057308f),
                              _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(0.044715f), x), _mm512_mul_ps(x, x), x));
        __m512 t = ak_exp512(_mm512_sub_ps(zero, _mm512_abs_ps(z)));
        __m512 r = _mm512_div_ps(one, _mm512_add_ps(one, t));
        __m512 y = _mm512_mul_ps(x, _mm512_mask_mul_ps(r, _mm512_cmp_ps_mask(z, zero, _CMP_LT_OQ), t, r));
        if (u) y = _mm512_mul_ps(y, _mm512_maskz_loadu_ps(m, u + k));
        _mm512_mask_storeu_ps(o + k, m, y);
    }
}

/* The same 8 lanes at a time on AVX2. */
__attribute__((target("avx2,fma"))) static void act_row256(int act, const float *g, const float *u, float *o, int64_t K) {
    const __m256 one = _mm256_set1_ps(1.f), zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.f);
    for (int64_t k = 0; k < K; k += 8) {
        __m256i m = ak_lanes256(K - k);
        __m256 x = _mm256_maskload_ps(g + k, m), z = x;
        if (act == AK_ACT_GELU_ERF) {
            __m256 y = _mm256_mul_ps(x, ak_phi256(x));
            if (u) y = _mm256_mul_ps(y, _mm256_maskload_ps(u + k, m));
            _mm256_maskstore_ps(o + k, m, y);
            continue;
        }
        if (act == AK_ACT_GELU_TANH)
            z = _mm256_mul_ps(_mm256_set1_ps(1.5957691216057308f),
                              _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(0.044715f), x), _mm256_mul_ps(x, x), x));
        __m256 t = ak_exp256(_mm256_or_ps(z, sign));   /* e^-|z| */
        __m256 r = _mm256_div_ps(one, _mm256_add_ps(one, t));
        __m256 y = _mm256_mul_ps(x, _mm256_blendv_ps(r, _mm256_mul_ps(t, r), _mm256_cmp_ps(z, zero, _CMP_LT_OQ)));
        if (u) y = _mm256_mul_ps(y, _mm256_maskload_ps(u + k, m));
        _mm256_maskstore_ps(o + k, m, y);
    }
}
#endif

void ak_cpu_act_row(int act, const float *g, const float *u, float *o, int64_t K) {
#if defined(__x86_64__)
    const bool known = act == AK_ACT_SILU || act == AK_ACT_GELU_TANH || act == AK_ACT_GELU_ERF;
    if (known && ak_cpu_simd >= 2) { act_row512(act, g, u, o, K); return; }
    if (known && ak_cpu_simd >= 1) { act_row256(act, g, u, o, K); return; }
#endif
    if (u) for (int64_t k = 0; k < K; k++) o[k] = ak_act_apply(act, g[k]) * u[k];
    else for (int64_t k = 0; k < K; k++) o[k] = ak_act_apply(act, g[k]);
}

void ak_cpu_act_gate(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls) {
    (void)tls;
    const ak_p_act *p = (const ak_p_act *)c->p;
    int64_t lo, hi;
    ak_split(p->n, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        const float *g = (const float *)c->b[0] + i * p->ld_gu;
        float *o = (float *)c->b[1] + i * p->K;
        ak_cpu_act_row(p->act, g, p->gated ? g + p->K : NULL, o, p->K);
    }
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static void softcap_row512(float *x, int64_t n, float cap) {
    const __m512 c = _mm512_set1_ps(cap);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = ak_lanes512(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(c, ak_tanh512(_mm512_div_ps(v, c))));
    }
}
__attribute__((target("avx2,fma"))) static void softcap_row256(float *x, int64_t n, float cap) {
    const __m256 c = _mm256_set1_ps(cap);
    for (int64_t i = 0; i < n; i += 8) {
        __m256i m = ak_lanes256(n - i);
        __m256 v = _mm256_maskload_ps(x + i, m);
        _mm256_maskstore_ps(x + i, m, _mm256_mul_ps(c, ak_tanh256(_mm256_div_ps(v, c))));
    }
}
#endif

/* x = cap * tanh(x / cap) over a row (Gemma 2's logits: the whole vocabulary per token). */
void ak_cpu_softcap_row(float *x, int64_t n, float cap) {
#if defined(__x86_64__)
    if (ak_cpu_simd >= 2) { softcap_row512(x, n, cap); return; }
    if (ak_cpu_simd >= 1) { softcap_row256(x, n, cap); return; }
#endif
    for (int64_t i = 0; i < n; i++) x[i] = cap * tanhf(x[i] / cap);
}

void ak_cpu_softcap(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls) {
    (void)tls;
    const ak_p_softcap *p = (const ak_p_softcap *)c->p;
    int64_t lo, hi;
    ak_split((int64_t)p->n * p->cols, ith, nth, &lo, &hi);
    if (lo < hi) ak_cpu_softcap_row((float *)c->b[0] + lo, hi - lo, p->cap);
}

/* The token choice (core/sample.h) from row n-1; argmax: the first index of the
 * maximum, as torch.argmax. One thread: the row is short next to the logits GEMV that
 * precedes it, and the reference is what the CUDA command is held to. */
void ak_cpu_sample(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls) {
    (void)nth; (void)tls;
    if (ith) return;
    const ak_p_sample *p = (const ak_p_sample *)c->p;
    uint8_t *sb = c->b[2];
    ak_sample_cfg cfg;
    memcpy(&cfg, sb, sizeof cfg);
    size_t words = ((size_t)p->vocab + 31) / 32;
    ak_sample_cand *cands = (ak_sample_cand *)(sb + AK_SAMPLE_MASK_OFF + 4 * words);
    int32_t *count = (int32_t *)(cands + p->vocab);
    for (int r = p->all ? 0 : p->n - 1; r < p->n; r++) {
        int kv = p->kv_len - p->n + 1 + r;   /* this row's choice is for position kv */
        float *x = (float *)c->b[0] + (size_t)(p->all ? r : p->n - 1) * p->vocab;
        int32_t *out = (int32_t *)c->b[1] - p->n + 1 + r;   /* b[1] is tokens[kv_len]; the window is the ids before out */
        int n_win = cfg.last_n < kv ? cfg.last_n : kv;
        int32_t tok = ak_sample_pick(&cfg, x, p->vocab, out - n_win, n_win,
                                     cfg.masked ? (const uint32_t *)(sb + AK_SAMPLE_MASK_OFF) : NULL, kv, cands, count);
        memcpy(out, &tok, 4);
    }
}

void ak_cpu_embed(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls) {
    const ak_p_embed *p = (const ak_p_embed *)c->p;
    size_t rb = ak_dtype_row_bytes((ak_dtype)p->dtype, p->dim);
    int64_t lo, hi;
    ak_split(p->n, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        int32_t id;
        memcpy(&id, (const uint8_t *)c->b[1] + 4 * i, 4);
        float *o = (float *)c->b[2] + i * p->dim;
        ak_cpu_dequant_row((ak_dtype)p->dtype, (const uint8_t *)c->b[0] + (size_t)id * rb, o, p->dim);
        if (p->scale != 1.f) for (int k = 0; k < p->dim; k++) o[k] *= p->scale;
        if (p->flags & (AK_EMBED_F_POS | AK_EMBED_F_TYPE)) {
            float *tmp = tls->scratch;
            if (p->flags & AK_EMBED_F_POS) {
                size_t prb = ak_dtype_row_bytes((ak_dtype)p->pos_dtype, p->dim);
                int64_t at = p->pos + i - ((p->flags & AK_EMBED_F_SEG) ? ((const int32_t *)c->b[5])[2 * i] : 0);
                ak_cpu_dequant_row((ak_dtype)p->pos_dtype, (const uint8_t *)c->b[3] + (size_t)at * prb, tmp, p->dim);
                for (int k = 0; k < p->dim; k++) o[k] += tmp[k];
            }
            if (p->flags & AK_EMBED_F_TYPE) {
                ak_cpu_dequant_row((ak_dtype)p->type_dtype, c->b[4], tmp, p->dim);   /* token type 0 */
                for (int k = 0; k < p->dim; k++) o[k] += tmp[k];
            }
        }
    }
}
