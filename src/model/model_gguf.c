/* The GGUF loader: metadata → ak_config, tensors → per-layer weights, every shape
 * checked so a hostile file fails here and never in a kernel. */
#include "model/model_int.h"
#include "core/err.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { ak_model *m; ak_err *err; ak_status st; } loader;

static bool get_int(const ak_gguf *g, const char *arch, const char *key, int64_t *out) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return ak_gguf_get_i64(g, k, out);
}

static bool get_f(const ak_gguf *g, const char *arch, const char *key, double *out) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return ak_gguf_get_f64(g, k, out);
}

static ak_status cfg_int(const ak_gguf *g, const char *arch, const char *key, int64_t lo, int64_t hi, int *out, bool required, ak_err *err) {
    int64_t v;
    if (!get_int(g, arch, key, &v)) {
        char k[128];
        snprintf(k, sizeof k, "%s.%s", arch, key);
        if (ak_gguf_find(g, k)) return ak_fail(err, AK_ERR_FORMAT, "model: metadata %s has the wrong type", k);
        if (required) return ak_fail(err, AK_ERR_FORMAT, "model: metadata %s is missing", k);
        return AK_OK;
    }
    if (v < lo || v > hi) return ak_fail(err, AK_ERR_FORMAT, "model: %s.%s = %lld is out of range [%lld, %lld]", arch, key, (long long)v, (long long)lo, (long long)hi);
    *out = (int)v;
    return AK_OK;
}

/* A weight matrix or vector; NULL if absent. Checks shape when present. */
static const ak_tensor *tensor(loader *L, bool required, int64_t ne0, int64_t ne1, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static const ak_tensor *tensor(loader *L, bool required, int64_t ne0, int64_t ne1, const char *fmt, ...) {
    if (L->st) return NULL;
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const ak_gguf *g = L->m->gguf;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        if (!ak_str_eq(g->tensors[i].name, name)) continue;
        const ak_tensor *t = &L->m->tensors[i];
        const ak_gguf_tensor *gt = &g->tensors[i];
        if (gt->ne[2] != 1 || gt->ne[3] != 1) {
            L->st = ak_fail(L->err, AK_ERR_FORMAT, "model: tensor %s has more than two dimensions", name);
            return NULL;
        }
        L->st = ak_model_check_tensor(t, name, ne0, ne1, L->err);
        return L->st ? NULL : t;
    }
    if (required) L->st = ak_fail(L->err, AK_ERR_FORMAT, "model: required tensor %s is missing", name);
    return NULL;
}

/* YaRN's parameters as llama.cpp's converter writes them from a Hugging Face config
 * (conversion/base.py): factor, original_context_length (default: context_length),
 * yarn_beta_fast / yarn_beta_slow (absent or 0: 32 and 1, transformers' defaults) and
 * yarn_attn_factor (transformers' attention_factor; absent: 0.1 ln(factor) + 1). The
 * correction dims are truncated, as transformers does by default and llama.cpp always
 * does. Keys whose meaning differs between converters (yarn_log_multiplier) or that
 * transformers has no counterpart for (yarn_ext_factor other than 1) are refused. */
static ak_status read_yarn(const ak_gguf *g, const char *a, ak_config *c, ak_err *err) {
    double d;
    ak_status st;
    c->yarn.on = true;
    c->yarn.truncate = true;
    if (!get_f(g, a, "rope.scaling.factor", &d)) return ak_fail(err, AK_ERR_FORMAT, "model: YaRN scaling without rope.scaling.factor");
    c->yarn.factor = (float)d;
    int orig = c->n_ctx_train;
    if ((st = cfg_int(g, a, "rope.scaling.original_context_length", 1, 1 << 24, &orig, false, err))) return st;
    c->yarn.orig_ctx = (float)orig;
    c->yarn.beta_fast = get_f(g, a, "rope.scaling.yarn_beta_fast", &d) && d != 0 ? (float)d : 32.f;
    c->yarn.beta_slow = get_f(g, a, "rope.scaling.yarn_beta_slow", &d) && d != 0 ? (float)d : 1.f;
    double f = c->yarn.factor;
    c->yarn.attn_factor = f > 1 ? (float)(0.1 * log(f) + 1) : 1.f;
    if (get_f(g, a, "rope.scaling.yarn_attn_factor", &d)) c->yarn.attn_factor = (float)d;
    if (get_f(g, a, "rope.scaling.yarn_ext_factor", &d) && d != 1)
        return ak_fail(err, AK_ERR_UNSUPPORTED, "model: rope.scaling.yarn_ext_factor %g is not supported (1 is)", d);
    if (get_f(g, a, "rope.scaling.yarn_log_multiplier", &d) && d != 0)
        return ak_fail(err, AK_ERR_UNSUPPORTED, "model: rope.scaling.yarn_log_multiplier is not supported");
    return AK_OK;
}

static ak_status read_config(ak_model *m, ak_err *err) {
    const ak_gguf *g = m->gguf;
    const char *a = m->arch_name;
    ak_config *c = &m->cfg;
    ak_status st;
    const int BIG = 1 << 20;
    if ((st = cfg_int(g, a, "embedding_length", 1, BIG, &c->dim, true, err))) return st;
    if ((st = cfg_int(g, a, "block_count", 1, 4096, &c->n_layers, true, err))) return st;
    if ((st = cfg_int(g, a, "attention.head_count", 1, 4096, &c->n_heads, true, err))) return st;
    c->n_kv_heads = c->n_heads;
    if ((st = cfg_int(g, a, "attention.head_count_kv", 1, 4096, &c->n_kv_heads, false, err))) return st;
    if ((st = cfg_int(g, a, "feed_forward_length", 1, BIG, &c->ffn_dim, true, err))) return st;
    c->n_ctx_train = 2048;
    if ((st = cfg_int(g, a, "context_length", 1, 1 << 24, &c->n_ctx_train, false, err))) return st;
    if (c->dim % c->n_heads) return ak_fail(err, AK_ERR_FORMAT, "model: embedding_length %d is not a multiple of head_count %d", c->dim, c->n_heads);
    c->head_dim = c->dim / c->n_heads;
    if ((st = cfg_int(g, a, "attention.key_length", 1, 4096, &c->head_dim, false, err))) return st;
    c->head_dim_v = c->head_dim;
    if ((st = cfg_int(g, a, "attention.value_length", 1, 4096, &c->head_dim_v, false, err))) return st;
    if (c->head_dim_v != c->head_dim) return ak_fail(err, AK_ERR_UNSUPPORTED, "model: key and value head sizes differ (%d, %d)", c->head_dim, c->head_dim_v);
    if (c->head_dim % 2 || c->head_dim > 512) return ak_fail(err, AK_ERR_UNSUPPORTED, "model: head size %d not supported (even, at most 512)", c->head_dim);
    if (c->n_heads % c->n_kv_heads) return ak_fail(err, AK_ERR_FORMAT, "model: head_count %d is not a multiple of head_count_kv %d", c->n_heads, c->n_kv_heads);
    c->n_rot = c->head_dim;
    if ((st = cfg_int(g, a, "rope.dimension_count", 0, c->head_dim, &c->n_rot, false, err))) return st;
    if (c->n_rot % 2) return ak_fail(err, AK_ERR_FORMAT, "model: rope.dimension_count %d is odd", c->n_rot);
    c->sliding_window = 0;
    if (m->arch->swa_pattern && (st = cfg_int(g, a, "attention.sliding_window", 0, 1 << 24, &c->sliding_window, false, err))) return st;

    double d;
    c->norm_eps = 1e-5f;
    if (get_f(g, a, m->arch->norm == AK_NORM_RMS ? "attention.layer_norm_rms_epsilon" : "attention.layer_norm_epsilon", &d)) c->norm_eps = (float)d;
    if (!(c->norm_eps > 0 && c->norm_eps < 1)) return ak_fail(err, AK_ERR_FORMAT, "model: norm epsilon %g out of range", (double)c->norm_eps);
    c->rope_base = m->arch->rope_base_default;
    if (get_f(g, a, "rope.freq_base", &d)) c->rope_base = (float)d;
    c->rope_base_swa = m->arch->swa_rope_base ? 10000.f : c->rope_base;
    if (get_f(g, a, "rope.freq_base_swa", &d)) c->rope_base_swa = (float)d;
    if (m->rope != AK_ROPE_NONE && !(c->rope_base > 1 && c->rope_base_swa > 1))
        return ak_fail(err, AK_ERR_FORMAT, "model: rope base out of range");
    c->rope_freq_scale = 1.f;
    ak_str stype;
    char k[128];
    snprintf(k, sizeof k, "%s.rope.scaling.type", a);
    if (ak_gguf_get_str(g, k, &stype)) {
        if (ak_str_eq(stype, "linear") && get_f(g, a, "rope.scaling.factor", &d)) {
            if (!(d >= 1 && d < 1e6)) return ak_fail(err, AK_ERR_FORMAT, "model: rope.scaling.factor %g out of range", d);
            c->rope_freq_scale = (float)(1.0 / d);
        } else if (ak_str_eq(stype, "yarn")) {
            if ((st = read_yarn(g, a, c, err))) return st;
        } else if (!ak_str_eq(stype, "none") && !ak_str_eq(stype, "linear")) {
            /* another scaling (longrope, ...) computed as none would be a silent wrong answer */
            return ak_fail(err, AK_ERR_UNSUPPORTED, "model: rope.scaling.type '%.*s' is not supported (none, linear, yarn are)",
                           (int)(stype.len > 40 ? 40 : stype.len), stype.ptr);
        }
    }
    c->attn_softcap = c->final_softcap = 0;
    if (get_f(g, a, "attn_logit_softcapping", &d)) c->attn_softcap = (float)d;
    if (get_f(g, a, "final_logit_softcapping", &d)) c->final_softcap = (float)d;
    if (c->attn_softcap < 0 || c->final_softcap < 0) return ak_fail(err, AK_ERR_FORMAT, "model: negative softcap");
    int64_t pool = AK_POOL_MEAN;
    if (m->arch->encoder && get_int(g, a, "pooling_type", &pool) && (pool < AK_POOL_NONE || pool > AK_POOL_LAST))
        return ak_fail(err, AK_ERR_UNSUPPORTED, "model: pooling type %lld not supported (none, mean, cls, last are)", (long long)pool);
    c->pooling = (ak_pooling)pool;
    int qdim = (m->arch->wide_qscale_layers == c->n_layers) ? c->dim / c->n_heads : c->head_dim;
    c->attn_scale = 1.f / sqrtf((float)qdim);
    return AK_OK;
}

static const ak_tensor *find_named(const ak_model *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (ak_str_eq(m->gguf->tensors[i].name, name)) return &m->tensors[i];
    return NULL;
}

/* GGUF names of the auxiliary inputs: rope_freqs.weight, blk.N.attn_{q,k,v}.bias. */
static ak_status gguf_aux(ak_model *m, ak_err *err) {
    int nl = m->cfg.n_layers;
    const ak_tensor **b = calloc((size_t)nl * 3, sizeof *b);
    if (!b) return ak_fail(err, AK_ERR_NOMEM, "model: out of memory");
    const char *names[3] = {"attn_q", "attn_k", "attn_v"};
    for (int l = 0; l < nl; l++) {
        if (!m->layers[l].has_qkv_bias) continue;
        for (int j = 0; j < 3; j++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s.bias", l, names[j]);
            b[3 * l + j] = find_named(m, name);
        }
    }
    ak_status st = ak_model_build_aux(m, find_named(m, "rope_freqs.weight"), b, err);
    free(b);
    return st;
}

static ak_status load_encoder(ak_model *m, loader *L);

static ak_status load_weights(ak_model *m, ak_err *err) {
    const ak_config *c = &m->cfg;
    const ak_arch *A = m->arch;
    loader L = {m, err, AK_OK};
    int dim = c->dim, nq = c->n_heads * c->head_dim, nkv = c->n_kv_heads * c->head_dim, ff = c->ffn_dim;
    const ak_gguf_tensor *te = ak_gguf_tensor_find(m->gguf, "token_embd.weight");
    if (!te) return ak_fail(err, AK_ERR_FORMAT, "model: required tensor token_embd.weight is missing");
    if (te->ne[1] < 1 || te->ne[1] > (1 << 22)) return ak_fail(err, AK_ERR_FORMAT, "model: vocabulary size %lld out of range", (long long)te->ne[1]);
    m->cfg.vocab = (int)te->ne[1];
    int V = m->cfg.vocab;
    m->tok_embd = tensor(&L, true, dim, V, "token_embd.weight");
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->layers) return ak_fail(err, AK_ERR_NOMEM, "model: out of memory");
    if (A->encoder) return load_encoder(m, &L);
    m->output_norm = tensor(&L, true, dim, 0, "output_norm.weight");
    m->output = tensor(&L, !A->tied_output_ok, dim, V, "output.weight");
    if (!m->output) m->output = m->tok_embd;
    for (int l = 0; l < c->n_layers && !L.st; l++) {
        ak_layer *y = &m->layers[l];
        y->attn_norm = tensor(&L, true, dim, 0, "blk.%d.attn_norm.weight", l);
        y->wq = tensor(&L, true, dim, nq, "blk.%d.attn_q.weight", l);
        y->wk = tensor(&L, true, dim, nkv, "blk.%d.attn_k.weight", l);
        y->wv = tensor(&L, true, dim, nkv, "blk.%d.attn_v.weight", l);
        y->wo = tensor(&L, true, nq, dim, "blk.%d.attn_output.weight", l);
        y->bo = tensor(&L, false, dim, 0, "blk.%d.attn_output.bias", l);
        y->has_qkv_bias = tensor(&L, false, nq, 0, "blk.%d.attn_q.bias", l) != NULL;
        if (A->qk_norm) {
            y->q_norm = tensor(&L, true, c->head_dim, 0, "blk.%d.attn_q_norm.weight", l);
            y->k_norm = tensor(&L, true, c->head_dim, 0, "blk.%d.attn_k_norm.weight", l);
        }
        if (A->post_norms) {
            y->post_attn_norm = tensor(&L, true, dim, 0, "blk.%d.post_attention_norm.weight", l);
            y->post_ffn_norm = tensor(&L, true, dim, 0, "blk.%d.post_ffw_norm.weight", l);
        }
        y->ffn_norm = tensor(&L, true, dim, 0, "blk.%d.ffn_norm.weight", l);
        y->w_gate = tensor(&L, A->gated_ffn, dim, ff, "blk.%d.ffn_gate.weight", l);
        y->w_up = tensor(&L, true, dim, ff, "blk.%d.ffn_up.weight", l);
        y->w_down = tensor(&L, true, ff, dim, "blk.%d.ffn_down.weight", l);
        y->sliding = A->swa_pattern && c->sliding_window > 0 && (l + 1) % A->swa_pattern != 0;
    }
    if (L.st) return L.st;
    ak_status st = ak_model_check_vectors(m, err);
    return st ? st : gguf_aux(m, err);
}

/* Encoders: embeddings (+ learned positions + token type 0) → LayerNorm, then per layer
 * attention → residual → LayerNorm → FFN → residual → LayerNorm. */
static ak_status load_encoder(ak_model *m, loader *L) {
    const ak_config *c = &m->cfg;
    const ak_arch *A = m->arch;
    int dim = c->dim, nq = c->n_heads * c->head_dim, nkv = c->n_kv_heads * c->head_dim, ff = c->ffn_dim;
    if (A->learned_pos) m->pos_embd = tensor(L, true, dim, c->n_ctx_train, "position_embd.weight");
    const ak_gguf_tensor *tt = ak_gguf_tensor_find(m->gguf, "token_types.weight");
    if (tt) m->type_embd = tensor(L, true, dim, tt->ne[1], "token_types.weight");
    m->embd_norm = tensor(L, true, dim, 0, "token_embd_norm.weight");
    m->embd_norm_b = tensor(L, true, dim, 0, "token_embd_norm.bias");
    for (int l = 0; l < c->n_layers && !L->st; l++) {
        ak_layer *y = &m->layers[l];
        if (A->fused_qkv) {
            y->wqkv = tensor(L, true, dim, nq + 2 * nkv, "blk.%d.attn_qkv.weight", l);
        } else {
            y->wq = tensor(L, true, dim, nq, "blk.%d.attn_q.weight", l);
            y->wk = tensor(L, true, dim, nkv, "blk.%d.attn_k.weight", l);
            y->wv = tensor(L, true, dim, nkv, "blk.%d.attn_v.weight", l);
            y->has_qkv_bias = tensor(L, false, nq, 0, "blk.%d.attn_q.bias", l) != NULL;
        }
        y->wo = tensor(L, true, nq, dim, "blk.%d.attn_output.weight", l);
        y->bo = tensor(L, false, dim, 0, "blk.%d.attn_output.bias", l);
        y->attn_out_norm = tensor(L, true, dim, 0, "blk.%d.attn_output_norm.weight", l);
        y->attn_out_norm_b = tensor(L, true, dim, 0, "blk.%d.attn_output_norm.bias", l);
        y->w_gate = tensor(L, A->gated_ffn, dim, ff, "blk.%d.ffn_gate.weight", l);
        y->w_up = tensor(L, true, dim, ff, "blk.%d.ffn_up.weight", l);
        y->b_up = tensor(L, false, ff, 0, "blk.%d.ffn_up.bias", l);
        y->w_down = tensor(L, true, ff, dim, "blk.%d.ffn_down.weight", l);
        y->b_down = tensor(L, false, dim, 0, "blk.%d.ffn_down.bias", l);
        y->out_norm = tensor(L, true, dim, 0, "blk.%d.layer_output_norm.weight", l);
        y->out_norm_b = tensor(L, true, dim, 0, "blk.%d.layer_output_norm.bias", l);
    }
    if (L->st) return L->st;
    ak_status st = ak_model_check_vectors(m, L->err);
    return st ? st : gguf_aux(m, L->err);
}

ak_status ak_model_from_gguf(ak_gguf *g, ak_model **out, ak_err *err) {
    *out = NULL;
    ak_model *m = calloc(1, sizeof *m);
    if (!m) { ak_gguf_close(g); return ak_fail(err, AK_ERR_NOMEM, "out of memory"); }
    m->gguf = g;
    ak_status st;
    ak_str arch;
    if (!ak_gguf_get_str(g, "general.architecture", &arch)) { st = ak_fail(err, AK_ERR_FORMAT, "model: general.architecture is missing"); goto fail; }
    if (arch.len >= sizeof m->arch_name || memchr(arch.ptr, 0, arch.len)) { st = ak_fail(err, AK_ERR_UNSUPPORTED, "model: unknown architecture"); goto fail; }
    memcpy(m->arch_name, arch.ptr, arch.len);
    m->arch = ak_arch_find(m->arch_name);
    if (!m->arch) { st = ak_fail(err, AK_ERR_UNSUPPORTED, "model: unknown architecture '%s'", m->arch_name); goto fail; }
    m->rope = m->arch->rope;
    if ((st = read_config(m, err))) goto fail;

    m->weights = g->base + g->data_offset;
    m->weights_size = g->size - g->data_offset;
    m->n_tensors = (int)g->n_tensors;
    m->tensors = calloc(g->n_tensors + 1, sizeof *m->tensors);
    if (!m->tensors) { st = ak_fail(err, AK_ERR_NOMEM, "out of memory"); goto fail; }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const ak_gguf_tensor *gt = &g->tensors[i];
        ak_tensor *t = &m->tensors[i];
        t->dtype = gt->dtype;
        t->ne0 = gt->ne[0];
        t->ne1 = gt->ne[1] * gt->ne[2] * gt->ne[3];
        t->data = gt->data;
        t->nbytes = gt->nbytes;
        t->off = (size_t)((const uint8_t *)gt->data - (const uint8_t *)m->weights);
    }
    if ((st = load_weights(m, err))) goto fail;
    int64_t v;
    m->bos = ak_gguf_get_i64(g, "tokenizer.ggml.bos_token_id", &v) && v >= 0 && v < m->cfg.vocab ? (int)v : -1;
    m->eos = ak_gguf_get_i64(g, "tokenizer.ggml.eos_token_id", &v) && v >= 0 && v < m->cfg.vocab ? (int)v : -1;
    if ((st = ak_model_load_text(m, err))) goto fail;
    *out = m;
    return AK_OK;
fail:
    ak_model_free(m);
    return st;
}

