/* The model every loader fills: checks shared by the GGUF and Hugging Face loaders
 * (tensor shapes, F32 vectors), the auxiliary constants the kernels read (RoPE tables,
 * fused biases), and the public queries. */
#include "model/model_int.h"
#include "core/err.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

ak_status ak_model_check_tensor(const ak_tensor *t, const char *name, int64_t ne0, int64_t ne1, ak_err *err) {
    bool is_vec = ne1 == 0;
    if (t->ne0 != ne0 || (is_vec ? t->ne1 != 1 : t->ne1 != ne1))
        return ak_fail(err, AK_ERR_FORMAT, "model: tensor %s has shape [%lld, %lld], expected [%lld, %lld]", name,
                       (long long)t->ne0, (long long)t->ne1, (long long)ne0, (long long)(is_vec ? 1 : ne1));
    if (!ak_dtype_info[t->dtype].dequant)
        return ak_fail(err, AK_ERR_UNSUPPORTED, "model: tensor %s has type %s, which this build cannot compute with",
                       name, ak_dtype_info[t->dtype].name);
    return AK_OK;
}

static void rope_table(float *out, const ak_config *c, float base, const float *factors, float scale) {
    for (int i = 0; i < c->n_rot / 2; i++) {
        float inv = 1.0f / powf(base, (float)(2 * i) / (float)c->n_rot);
        if (factors) inv /= factors[i];
        out[i] = inv * scale;
    }
}

/* YaRN (Peng et al. 2023) as transformers' _compute_yarn_parameters computes it: the
 * original frequencies (extrapolation) for dims that turn more than beta_fast times in
 * the original context, frequencies divided by factor (interpolation) for those that turn
 * fewer than beta_slow times, a linear ramp over the dims between; float32 like torch. */
static void yarn_table(float *out, const ak_config *c) {
    double dim = c->n_rot, lb = 2 * log((double)c->rope_base), two_pi = 2 * M_PI;
    double lo = dim * log(c->yarn.orig_ctx / (c->yarn.beta_fast * two_pi)) / lb;
    double hi = dim * log(c->yarn.orig_ctx / (c->yarn.beta_slow * two_pi)) / lb;
    if (c->yarn.truncate) { lo = floor(lo); hi = ceil(hi); }
    lo = fmax(lo, 0);
    hi = fmin(hi, dim - 1);
    if (lo == hi) hi += 0.001; /* transformers' guard against a zero-width ramp */
    for (int i = 0; i < c->n_rot / 2; i++) {
        float pf = powf(c->rope_base, (float)(2 * i) / (float)c->n_rot);
        float extra = 1.0f / pf, inter = 1.0f / (c->yarn.factor * pf);
        float ramp = ((float)i - (float)lo) / (float)(hi - lo);
        float keep = 1.0f - fminf(fmaxf(ramp, 0.0f), 1.0f); /* share of the original frequency */
        out[i] = inter * (1.0f - keep) + extra * keep;
    }
}

/* The attention factor multiplies both q and k after the rotation, so every score by its
 * square: folded into attn_scale, exact only where the rotation covers the whole head
 * and every layer shares the table (sliding layers keep unscaled frequencies). */
static ak_status yarn_check(ak_model *m, bool has_rope_freqs, ak_err *err) {
    ak_config *c = &m->cfg;
    const float f = c->yarn.factor, bf = c->yarn.beta_fast, bs = c->yarn.beta_slow, af = c->yarn.attn_factor;
    if (!(f >= 1 && f < 1e6)) return ak_fail(err, AK_ERR_FORMAT, "model: YaRN factor %g out of range [1, 1e6)", (double)f);
    if (!(bf > 0 && bf < 1e6 && bs > 0 && bs <= bf))
        return ak_fail(err, AK_ERR_FORMAT, "model: YaRN beta_fast %g and beta_slow %g out of range (0 < beta_slow <= beta_fast < 1e6)",
                       (double)bf, (double)bs);
    if (!(c->yarn.orig_ctx >= 1 && c->yarn.orig_ctx <= (1 << 24)))
        return ak_fail(err, AK_ERR_FORMAT, "model: YaRN original context %g out of range [1, 2^24]", (double)c->yarn.orig_ctx);
    if (!(af > 0 && af < 1e3)) return ak_fail(err, AK_ERR_FORMAT, "model: YaRN attention factor %g out of range (0, 1e3)", (double)af);
    if (has_rope_freqs) return ak_fail(err, AK_ERR_FORMAT, "model: rope_freqs.weight and YaRN scaling together");
    bool sliding = false;
    for (int l = 0; l < c->n_layers; l++) sliding = sliding || m->layers[l].sliding;
    if (af != 1 && (c->n_rot != c->head_dim || sliding))
        return ak_fail(err, AK_ERR_UNSUPPORTED, "model: YaRN's attention factor with %s is not supported",
                       sliding ? "sliding-window layers" : "a partial rotation (rope.dimension_count < head size)");
    c->attn_scale *= af * af;
    return AK_OK;
}

ak_status ak_model_build_aux(ak_model *m, const ak_tensor *rf, const ak_tensor *const *qkv_bias, ak_err *err) {
    const ak_config *c = &m->cfg;
    bool yarn = c->yarn.on && m->rope != AK_ROPE_NONE;
    ak_status st;
    if (yarn && (st = yarn_check(m, rf != NULL, err))) return st;
    int nq = c->n_heads * c->head_dim, nkv = c->n_kv_heads * c->head_dim;
    size_t half = (size_t)c->n_rot / 2;
    size_t n = 2 * half + 1;
    for (int l = 0; l < c->n_layers; l++) if (m->layers[l].has_qkv_bias) n += (size_t)(nq + 2 * nkv);
    m->aux = calloc(n, sizeof(float));
    if (!m->aux) return ak_fail(err, AK_ERR_NOMEM, "model: out of memory");
    m->aux_size = n * sizeof(float);
    float *factors = NULL;
    if (rf) {
        if (rf->dtype != AK_F32 || rf->ne0 != (int64_t)half || rf->ne1 != 1)
            return ak_fail(err, AK_ERR_FORMAT, "model: rope_freqs.weight must be F32 [%zu]", half);
        factors = (float *)rf->data;
        for (size_t i = 0; i < half; i++)
            if (!(factors[i] > 0)) return ak_fail(err, AK_ERR_FORMAT, "model: rope_freqs.weight has a non-positive factor");
        m->cfg.has_rope_freqs = true;
    }
    if (yarn) yarn_table(m->aux, c);
    else rope_table(m->aux, c, c->rope_base, factors, c->rope_freq_scale);
    rope_table(m->aux + half, c, c->rope_base_swa, NULL, 1.f); /* sliding layers: no long-context scaling */
    size_t off = 2 * half;
    for (int l = 0; l < c->n_layers; l++) {
        ak_layer *L = &m->layers[l];
        L->inv_freq_off = (L->sliding ? half : 0) * sizeof(float);
        if (!L->has_qkv_bias) continue;
        L->qkv_bias_off = off * sizeof(float);
        const char *names[3] = {"q", "k", "v"};
        int sizes[3] = {nq, nkv, nkv};
        for (int j = 0; j < 3; j++) {
            const ak_tensor *b = qkv_bias[3 * l + j];
            if (!b || b->ne0 != sizes[j] || b->ne1 != 1 || !ak_dtype_info[b->dtype].dequant)
                return ak_fail(err, AK_ERR_FORMAT, "model: layer %d %s bias missing or of the wrong shape (q, k and v biases come together)",
                               l, names[j]);
            ak_dtype_info[b->dtype].dequant(b->data, m->aux + off, sizes[j]);
            off += (size_t)sizes[j];
        }
    }
    return AK_OK;
}

/* Vectors the kernels read as float32 (norms, biases) must be F32: converters write them so. */
ak_status ak_model_check_vectors(ak_model *m, ak_err *err) {
    const ak_config *c = &m->cfg;
    const ak_tensor *vecs[16];
    for (int l = -1; l < c->n_layers; l++) {
        int n = 0;
        if (l < 0) {
            const ak_tensor *v[] = {m->output_norm, m->embd_norm, m->embd_norm_b};
            for (size_t i = 0; i < sizeof v / sizeof *v; i++) if (v[i]) vecs[n++] = v[i];
        } else {
            ak_layer *y = &m->layers[l];
            const ak_tensor *v[] = {y->attn_norm, y->ffn_norm, y->q_norm, y->k_norm, y->post_attn_norm, y->post_ffn_norm, y->bo,
                                    y->b_up, y->b_down, y->attn_out_norm, y->attn_out_norm_b, y->out_norm, y->out_norm_b};
            for (size_t i = 0; i < sizeof v / sizeof *v; i++) if (v[i]) vecs[n++] = v[i];
        }
        for (int i = 0; i < n; i++)
            if (vecs[i]->dtype != AK_F32) return ak_fail(err, AK_ERR_UNSUPPORTED, "model: norm/bias vectors must be F32, found %s", ak_dtype_info[vecs[i]->dtype].name);
    }
    return AK_OK;
}

void ak_model_free(ak_model *m) {
    if (!m) return;
    ak_model_free_text(m);
    free(m->aux);
    free(m->layers);
    free(m->tensors);
    if (m->gguf) ak_gguf_close(m->gguf);
    else free((void *)m->weights); /* an HF directory: the loader's copy (model_hf.c) */
    free(m);
}

int ak_model_vocab(const ak_model *m) { return m->cfg.vocab; }
int ak_model_dim(const ak_model *m) { return m->cfg.dim; }
bool ak_model_is_encoder(const ak_model *m) { return m->arch->encoder; }
int ak_model_n_ctx_train(const ak_model *m) { return m->cfg.n_ctx_train; }
const char *ak_model_arch_name(const ak_model *m) { return m->arch_name; }

/* Every tensor once, except the embedding tables, of which a token reads one row each;
 * a tied output projection reads the token table whole. Encoders too: they have no
 * output projection, and one token's pass reads their matrices the same way. */
uint64_t ak_model_decode_bytes(const ak_model *m) {
    uint64_t b = 0;
    for (int i = 0; i < m->n_tensors; i++) b += m->tensors[i].nbytes;
    const ak_tensor *tables[] = {m->tok_embd, m->pos_embd, m->type_embd};
    for (size_t i = 0; i < sizeof tables / sizeof *tables; i++) {
        const ak_tensor *t = tables[i];
        if (t && t->ne1 > 0) b -= t->nbytes - t->nbytes / (uint64_t)t->ne1;
    }
    if (m->output && m->output == m->tok_embd) b += m->tok_embd->nbytes;
    return b;
}

uint64_t ak_model_params(const ak_model *m) {
    uint64_t n = 0;
    for (int i = 0; i < m->n_tensors; i++) n += (uint64_t)m->tensors[i].ne0 * (uint64_t)m->tensors[i].ne1;
    return n;
}

uint64_t ak_model_file_bytes(const ak_model *m) { return m->gguf ? m->gguf->size : m->weights_size; }
