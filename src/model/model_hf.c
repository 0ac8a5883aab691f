/* Hugging Face checkpoint directories: config.json → ak_config, HF tensor names →
 * per-layer weights, for llama, qwen2 and qwen3. Tensors are F32/F16/BF16, or MLX affine
 * quantized (uint32 codes + per-group scales and biases, config "quantization") and then
 * repacked into the 32-value AK_MLX_Q* blocks. Everything is copied into one 64-byte
 * aligned buffer (m->weights) that the model owns; norm and bias vectors become F32. */
#include "model/model_int.h"
#include "core/err.h"
#include "core/mlx.h"
#include "format/safetensors.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HF_MAX_CONFIG ((size_t)16 << 20)

/* Where a tensor's bytes come from. */
typedef struct {
    char name[160];                 /* HF name (the .weight for matrices) */
    const ak_st_tensor *w, *scales, *biases;
    int bits, group;                /* MLX quantized: bits > 0 */
} hf_src;

typedef struct {
    ak_model *m;
    ak_st_dir *st;
    const ak_json *cfg, *quant;
    ak_err *err;
    ak_status status;
    hf_src *src;                    /* parallel to m->tensors */
    int cap;
    size_t size;                    /* bytes of the weights buffer so far */
} hf;

static void hf_fail(hf *H, ak_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void hf_fail(hf *H, ak_status st, const char *fmt, ...) {
    if (H->status) return;
    va_list ap;
    va_start(ap, fmt);
    if (H->err) vsnprintf(H->err->msg, sizeof H->err->msg, fmt, ap);
    va_end(ap);
    H->status = st;
}

static ak_dtype plain_dtype(ak_st_dtype t) {
    return t == AK_ST_F32 ? AK_F32 : t == AK_ST_F16 ? AK_F16 : t == AK_ST_BF16 ? AK_BF16 : AK_DTYPE_COUNT;
}

/* Reserves the next tensor slot and its place in the buffer (64-byte aligned). */
static ak_tensor *add(hf *H, const hf_src *s, ak_dtype dt, int64_t ne0, int64_t ne1, size_t nbytes) {
    ak_model *m = H->m;
    if (m->n_tensors == H->cap) { hf_fail(H, AK_ERR_FORMAT, "model: too many tensors"); return NULL; }
    size_t off = (H->size + 63) & ~(size_t)63;
    if (off < H->size || nbytes > SIZE_MAX - off - 64) { hf_fail(H, AK_ERR_FORMAT, "model: weights too large"); return NULL; }
    H->size = off + nbytes;
    H->src[m->n_tensors] = *s;
    ak_tensor *t = &m->tensors[m->n_tensors++];
    *t = (ak_tensor){.dtype = dt, .ne0 = ne0, .ne1 = ne1, .nbytes = nbytes, .off = off};
    return t;
}

/* The per-tensor override of an MLX config ("quantization": {"model.layers.0.mlp.down_proj":
 * {"bits": 8, "group_size": 64}, ...}), else the default bits and group size. */
static bool quant_params(hf *H, const char *prefix, int *bits, int *group) {
    const ak_json *q = H->quant, *o = ak_json_get(q, prefix);
    if (o && o->type == AK_JSON_OBJ) q = o;
    else if (o) return false;   /* false: this layer is not quantized */
    int64_t b, g;
    if (!ak_json_int(ak_json_get(q, "bits"), &b) || !ak_json_int(ak_json_get(q, "group_size"), &g)) return false;
    if (b < 1 || b > 16 || g < 1 || g > 4096) return false;
    *bits = (int)b;
    *group = (int)g;
    return true;
}

static bool shape_is(const ak_st_tensor *t, int n_dims, int64_t d0, int64_t d1) {
    return t->n_dims == n_dims && t->shape[0] == d0 && (n_dims < 2 || t->shape[1] == d1);
}

/* A matrix `prefix`.weight of ne1 rows of ne0 values (HF shape [ne1, ne0]), plain or MLX
 * quantized (prefix.scales / prefix.biases beside it). NULL if absent and not required. */
static const ak_tensor *matrix(hf *H, bool required, int64_t ne0, int64_t ne1, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static const ak_tensor *matrix(hf *H, bool required, int64_t ne0, int64_t ne1, const char *fmt, ...) {
    if (H->status) return NULL;
    char prefix[128], name[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    hf_src s;
    memset(&s, 0, sizeof s);
    snprintf(s.name, sizeof s.name, "%s.weight", prefix);
    s.w = ak_st_dir_find(H->st, s.name);
    if (!s.w) {
        if (required) hf_fail(H, AK_ERR_FORMAT, "model: required tensor %s is missing", s.name);
        return NULL;
    }
    snprintf(name, sizeof name, "%s.scales", prefix);
    s.scales = ak_st_dir_find(H->st, name);
    if (!s.scales) {
        ak_dtype dt = plain_dtype(s.w->dtype);
        if (dt == AK_DTYPE_COUNT) {
            hf_fail(H, AK_ERR_UNSUPPORTED, "model: tensor %s has dtype %s (F32, F16, BF16 or MLX quantized are supported)",
                    s.name, ak_st_dtype_name(s.w->dtype));
            return NULL;
        }
        if (!shape_is(s.w, 2, ne1, ne0)) {
            hf_fail(H, AK_ERR_FORMAT, "model: tensor %s is not of shape [%lld, %lld]", s.name, (long long)ne1, (long long)ne0);
            return NULL;
        }
        return add(H, &s, dt, ne0, ne1, (size_t)s.w->nbytes);
    }
    snprintf(name, sizeof name, "%s.biases", prefix);
    s.biases = ak_st_dir_find(H->st, name);
    if (!H->quant || !quant_params(H, prefix, &s.bits, &s.group)) {
        hf_fail(H, AK_ERR_FORMAT, "model: %s is quantized but config.json gives no quantization bits and group_size for it", s.name);
        return NULL;
    }
    int dt = ak_mlx_dtype(s.bits);
    if (dt < 0 || !ak_mlx_params_ok(s.bits, s.group)) {
        hf_fail(H, AK_ERR_UNSUPPORTED, "model: %s: MLX %d-bit, group %d is not supported (2, 3, 4, 6 or 8 bits; group 32, 64 or 128)",
                s.name, s.bits, s.group);
        return NULL;
    }
    if (!s.biases) { hf_fail(H, AK_ERR_UNSUPPORTED, "model: %s has scales but no biases (only MLX affine mode is supported)", s.name); return NULL; }
    ak_dtype sbt = plain_dtype(s.scales->dtype);
    if (s.w->dtype != AK_ST_U32 || sbt == AK_DTYPE_COUNT || s.biases->dtype != s.scales->dtype) {
        hf_fail(H, AK_ERR_FORMAT, "model: %s: MLX weights must be U32 with F32/F16/BF16 scales and biases of one type", s.name);
        return NULL;
    }
    if (ne0 % s.group || !shape_is(s.w, 2, ne1, ne0 * s.bits / 32) || !shape_is(s.scales, 2, ne1, ne0 / s.group) ||
        !shape_is(s.biases, 2, ne1, ne0 / s.group)) {
        hf_fail(H, AK_ERR_FORMAT, "model: %s (MLX %d-bit, group %d) does not have the shape of a [%lld, %lld] matrix", s.name,
                s.bits, s.group, (long long)ne1, (long long)ne0);
        return NULL;
    }
    size_t rb = ak_dtype_row_bytes((ak_dtype)dt, ne0);
    return add(H, &s, (ak_dtype)dt, ne0, ne1, rb * (size_t)ne1);
}

/* A norm or bias vector of n values; stored as F32 whatever the file's float type. */
static const ak_tensor *vector(hf *H, bool required, int64_t n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static const ak_tensor *vector(hf *H, bool required, int64_t n, const char *fmt, ...) {
    if (H->status) return NULL;
    hf_src s;
    memset(&s, 0, sizeof s);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s.name, sizeof s.name, fmt, ap);
    va_end(ap);
    s.w = ak_st_dir_find(H->st, s.name);
    if (!s.w) {
        if (required) hf_fail(H, AK_ERR_FORMAT, "model: required tensor %s is missing", s.name);
        return NULL;
    }
    if (plain_dtype(s.w->dtype) == AK_DTYPE_COUNT) {
        hf_fail(H, AK_ERR_UNSUPPORTED, "model: tensor %s has dtype %s (F32, F16 or BF16 expected)", s.name, ak_st_dtype_name(s.w->dtype));
        return NULL;
    }
    if (!shape_is(s.w, 1, n, 0)) { hf_fail(H, AK_ERR_FORMAT, "model: tensor %s is not of shape [%lld]", s.name, (long long)n); return NULL; }
    return add(H, &s, AK_F32, n, 1, (size_t)n * 4);
}

/* ---- config.json ---- */

static bool cfg_int(hf *H, const char *key, int64_t lo, int64_t hi, int *out, bool required) {
    const ak_json *v = ak_json_get(H->cfg, key);
    int64_t x;
    if (!v || v->type == AK_JSON_NULL) {
        if (required) hf_fail(H, AK_ERR_FORMAT, "model: config.json has no %s", key);
        return false;
    }
    if (!ak_json_int(v, &x)) { hf_fail(H, AK_ERR_FORMAT, "model: config.json %s is not an integer", key); return false; }
    if (x < lo || x > hi) {
        hf_fail(H, AK_ERR_FORMAT, "model: config.json %s = %lld is out of range [%lld, %lld]", key, (long long)x, (long long)lo, (long long)hi);
        return false;
    }
    *out = (int)x;
    return true;
}

static bool cfg_num(const ak_json *obj, const char *key, double *out) { return ak_json_num(ak_json_get(obj, key), out); }

/* Token id from an integer or a list of them (the first); -1 if absent or out of range. */
static int token_id(const ak_json *v, int vocab) {
    if (v && v->type == AK_JSON_ARR) v = v->child;
    int64_t x;
    return ak_json_int(v, &x) && x >= 0 && x < vocab ? (int)x : -1;
}

/* Llama 3.1 frequency scaling as divisors of the inverse frequencies (what GGUF files
 * carry as rope_freqs.weight): wavelengths shorter than orig/high_freq_factor keep
 * theirs, longer than orig/low_freq_factor are divided by factor, and the band between
 * blends the two linearly in orig/wavelength. */
static bool llama3_factors(hf *H, const ak_json *rp, float *out, int half) {
    const ak_config *c = &H->m->cfg;
    double f, lo, hi, orig;
    if (!cfg_num(rp, "factor", &f) || !cfg_num(rp, "low_freq_factor", &lo) || !cfg_num(rp, "high_freq_factor", &hi) ||
        !cfg_num(rp, "original_max_position_embeddings", &orig) || !(f >= 1 && f < 1e6) || !(lo > 0) || !(hi > lo) || !(orig >= 1)) {
        hf_fail(H, AK_ERR_FORMAT, "model: config.json llama3 rope parameters missing or out of range");
        return false;
    }
    double lo_wl = orig / lo, hi_wl = orig / hi;
    for (int i = 0; i < half; i++) {
        double inv = 1.0 / pow((double)c->rope_base, (double)(2 * i) / (double)c->n_rot), wl = 2 * M_PI / inv;
        if (wl < hi_wl) out[i] = 1.f;
        else if (wl > lo_wl) out[i] = (float)f;
        else {
            double smooth = (orig / wl - lo) / (hi - lo);
            out[i] = (float)(1.0 / ((1 - smooth) / f + smooth));
        }
    }
    return true;
}

/* A number of obj: false if absent or null, a failure if of another type. */
static bool rope_num(hf *H, const ak_json *obj, const char *key, double *out) {
    const ak_json *v = ak_json_get(obj, key);
    if (!v || v->type == AK_JSON_NULL) return false;
    if (!ak_json_num(v, out)) { hf_fail(H, AK_ERR_FORMAT, "model: config.json %s is not a number", key); return false; }
    return true;
}

/* YaRN as transformers reads it (_compute_yarn_parameters, standardize_rope_params): a
 * top-level original_max_position_embeddings wins over the rope parameters' own, which
 * defaults to max_position_embeddings; a null factor is their ratio; beta_fast and
 * beta_slow that are absent, null or 0 are 32 and 1; truncate defaults to true (null is
 * false, as Python reads it); without attention_factor it is 0.1 ln(factor) + 1, or with
 * mscale and mscale_all_dim both nonzero the ratio of that form with each. Ranges are
 * checked in ak_model_build_aux. */
static void read_yarn(hf *H, const ak_json *sc) {
    ak_config *c = &H->m->cfg;
    double f, orig = c->n_ctx_train, d, ms = 0, msa = 0;
    rope_num(H, sc, "original_max_position_embeddings", &orig);
    rope_num(H, H->cfg, "original_max_position_embeddings", &orig);
    if (H->status) return;
    if (!ak_json_get(sc, "factor")) { hf_fail(H, AK_ERR_FORMAT, "model: config.json yarn rope parameters have no factor"); return; }
    if (!rope_num(H, sc, "factor", &f)) {
        if (H->status) return;
        f = c->n_ctx_train / orig;
    }
    c->yarn.on = true;
    c->yarn.factor = (float)f;
    c->yarn.orig_ctx = (float)orig;
    c->yarn.beta_fast = rope_num(H, sc, "beta_fast", &d) && d != 0 ? (float)d : 32.f;
    c->yarn.beta_slow = rope_num(H, sc, "beta_slow", &d) && d != 0 ? (float)d : 1.f;
    const ak_json *tv = ak_json_get(sc, "truncate");
    c->yarn.truncate = !tv || (tv->type == AK_JSON_BOOL && tv->b);
    if (tv && tv->type != AK_JSON_BOOL && tv->type != AK_JSON_NULL) {
        hf_fail(H, AK_ERR_FORMAT, "model: config.json rope parameter truncate is not a boolean");
        return;
    }
    rope_num(H, sc, "mscale", &ms);
    rope_num(H, sc, "mscale_all_dim", &msa);
    if (H->status) return;
    if (rope_num(H, sc, "attention_factor", &d)) c->yarn.attn_factor = (float)d;
    else if (f <= 1) c->yarn.attn_factor = 1.f;
    else if (ms != 0 && msa != 0) c->yarn.attn_factor = (float)((0.1 * ms * log(f) + 1) / (0.1 * msa * log(f) + 1));
    else c->yarn.attn_factor = (float)(0.1 * log(f) + 1);
}

/* rope_theta (top level, or in rope_parameters as transformers 5 writes it) and the
 * scaling type: default, linear, llama3 or yarn. *llama3 receives its parameters' object. */
static void read_rope(hf *H, const ak_json **llama3) {
    ak_config *c = &H->m->cfg;
    const ak_json *rp = ak_json_get(H->cfg, "rope_parameters"), *rs = ak_json_get(H->cfg, "rope_scaling");
    if (rp && rp->type != AK_JSON_OBJ) rp = NULL;
    if (rs && rs->type != AK_JSON_OBJ) rs = NULL;
    double d;
    c->rope_base = H->m->arch->rope_base_default;
    if (cfg_num(H->cfg, "rope_theta", &d) || cfg_num(rp, "rope_theta", &d)) c->rope_base = (float)d;
    if (!(c->rope_base > 1 && c->rope_base < 1e12)) { hf_fail(H, AK_ERR_FORMAT, "model: config.json rope_theta out of range"); return; }
    c->rope_base_swa = c->rope_base;
    c->rope_freq_scale = 1.f;
    const ak_json *sc = rs ? rs : rp;
    const ak_json *type = ak_json_get(sc, "rope_type");
    if (!type) type = ak_json_get(sc, "type");
    if (!type || ak_json_str_is(type, "default")) return;
    if (ak_json_str_is(type, "linear")) {
        if (!cfg_num(sc, "factor", &d) || !(d >= 1 && d < 1e6)) { hf_fail(H, AK_ERR_FORMAT, "model: config.json linear rope factor out of range"); return; }
        c->rope_freq_scale = (float)(1.0 / d);
    } else if (ak_json_str_is(type, "llama3")) {
        *llama3 = sc;
    } else if (ak_json_str_is(type, "yarn")) {
        read_yarn(H, sc);
    } else {
        hf_fail(H, AK_ERR_UNSUPPORTED, "model: rope scaling type '%.40s' is not supported (default, linear, llama3, yarn are)",
                type->type == AK_JSON_STR ? type->s : "?");
    }
}

static void read_config(hf *H, const ak_json **llama3) {
    ak_config *c = &H->m->cfg;
    const int BIG = 1 << 20;
    cfg_int(H, "hidden_size", 1, BIG, &c->dim, true);
    cfg_int(H, "num_hidden_layers", 1, 4096, &c->n_layers, true);
    cfg_int(H, "num_attention_heads", 1, 4096, &c->n_heads, true);
    cfg_int(H, "intermediate_size", 1, BIG, &c->ffn_dim, true);
    if (H->status) return;
    c->n_kv_heads = c->n_heads;
    cfg_int(H, "num_key_value_heads", 1, 4096, &c->n_kv_heads, false);
    c->n_ctx_train = 2048;
    cfg_int(H, "max_position_embeddings", 1, 1 << 24, &c->n_ctx_train, false);
    c->head_dim = c->dim / c->n_heads;
    if (!cfg_int(H, "head_dim", 1, 4096, &c->head_dim, false) && c->dim % c->n_heads)
        hf_fail(H, AK_ERR_FORMAT, "model: hidden_size %d is not a multiple of num_attention_heads %d", c->dim, c->n_heads);
    if (H->status) return;
    c->head_dim_v = c->head_dim;
    if (c->head_dim % 2 || c->head_dim > 512) { hf_fail(H, AK_ERR_UNSUPPORTED, "model: head size %d not supported (even, at most 512)", c->head_dim); return; }
    if (c->n_heads % c->n_kv_heads) { hf_fail(H, AK_ERR_FORMAT, "model: num_attention_heads %d is not a multiple of num_key_value_heads %d", c->n_heads, c->n_kv_heads); return; }
    c->n_rot = c->head_dim;
    double d;
    if (cfg_num(H->cfg, "partial_rotary_factor", &d) && d != 1.0) { hf_fail(H, AK_ERR_UNSUPPORTED, "model: partial_rotary_factor is not supported"); return; }
    c->norm_eps = 1e-6f;
    if (cfg_num(H->cfg, "rms_norm_eps", &d)) c->norm_eps = (float)d;
    if (!(c->norm_eps > 0 && c->norm_eps < 1)) { hf_fail(H, AK_ERR_FORMAT, "model: rms_norm_eps %g out of range", (double)c->norm_eps); return; }
    const ak_json *act = ak_json_get(H->cfg, "hidden_act");
    if (act && !ak_json_str_is(act, "silu")) { hf_fail(H, AK_ERR_UNSUPPORTED, "model: hidden_act must be silu"); return; }
    bool b;
    if ((ak_json_bool(ak_json_get(H->cfg, "use_sliding_window"), &b) && b) || (ak_json_bool(ak_json_get(H->cfg, "mlp_bias"), &b) && b)) {
        hf_fail(H, AK_ERR_UNSUPPORTED, "model: sliding-window attention and MLP biases are not supported here");
        return;
    }
    c->attn_softcap = c->final_softcap = 0;
    c->sliding_window = 0;
    c->pooling = AK_POOL_NONE;
    c->attn_scale = 1.f / sqrtf((float)c->head_dim);
    read_rope(H, llama3);
}

/* "quantization" (mlx-lm) or a "quantization_config" without quant_method: MLX affine. */
static void read_quant(hf *H) {
    const ak_json *q = ak_json_get(H->cfg, "quantization");
    if (!q) {
        q = ak_json_get(H->cfg, "quantization_config");
        const ak_json *meth = ak_json_get(q, "quant_method");
        if (meth) {
            hf_fail(H, AK_ERR_UNSUPPORTED, "model: quantization method '%.40s' is not supported (MLX affine is)",
                    meth->type == AK_JSON_STR ? meth->s : "?");
            return;
        }
    }
    if (!q) return;
    const ak_json *mode = ak_json_get(q, "mode");
    if (q->type != AK_JSON_OBJ || (mode && !ak_json_str_is(mode, "affine"))) {
        hf_fail(H, AK_ERR_UNSUPPORTED, "model: only MLX affine quantization is supported");
        return;
    }
    H->quant = q;
}

static const struct { const char *model_type, *arch; } hf_archs[] = {
    {"llama", "llama"}, {"qwen2", "qwen2"}, {"qwen3", "qwen3"},
};

static void bind_weights(hf *H, const ak_tensor **qkv_bias) {
    ak_model *m = H->m;
    const ak_config *c = &m->cfg;
    int dim = c->dim, nq = c->n_heads * c->head_dim, nkv = c->n_kv_heads * c->head_dim, ff = c->ffn_dim;
    const ak_st_tensor *e = ak_st_dir_find(H->st, "model.embed_tokens.weight");
    if (!e || e->n_dims != 2 || e->shape[0] < 1 || e->shape[0] > (1 << 22)) {
        hf_fail(H, AK_ERR_FORMAT, "model: model.embed_tokens.weight is missing or has no vocabulary rows");
        return;
    }
    m->cfg.vocab = (int)e->shape[0];
    int V = m->cfg.vocab, cv;
    if (cfg_int(H, "vocab_size", 1, 1 << 22, &cv, false) && cv != V)
        hf_fail(H, AK_ERR_FORMAT, "model: config.json vocab_size %d, embed_tokens has %d rows", cv, V);
    m->tok_embd = matrix(H, true, dim, V, "model.embed_tokens");
    m->output_norm = vector(H, true, dim, "model.norm.weight");
    bool tied = false;
    ak_json_bool(ak_json_get(H->cfg, "tie_word_embeddings"), &tied);
    m->output = tied ? NULL : matrix(H, false, dim, V, "lm_head");
    if (!m->output) m->output = m->tok_embd;
    for (int l = 0; l < c->n_layers && !H->status; l++) {
        ak_layer *y = &m->layers[l];
        const char *p = "model.layers";
        y->attn_norm = vector(H, true, dim, "%s.%d.input_layernorm.weight", p, l);
        y->wq = matrix(H, true, dim, nq, "%s.%d.self_attn.q_proj", p, l);
        y->wk = matrix(H, true, dim, nkv, "%s.%d.self_attn.k_proj", p, l);
        y->wv = matrix(H, true, dim, nkv, "%s.%d.self_attn.v_proj", p, l);
        y->wo = matrix(H, true, nq, dim, "%s.%d.self_attn.o_proj", p, l);
        y->bo = vector(H, false, dim, "%s.%d.self_attn.o_proj.bias", p, l);
        qkv_bias[3 * l] = vector(H, false, nq, "%s.%d.self_attn.q_proj.bias", p, l);
        y->has_qkv_bias = qkv_bias[3 * l] != NULL;
        if (y->has_qkv_bias) {
            qkv_bias[3 * l + 1] = vector(H, true, nkv, "%s.%d.self_attn.k_proj.bias", p, l);
            qkv_bias[3 * l + 2] = vector(H, true, nkv, "%s.%d.self_attn.v_proj.bias", p, l);
        }
        if (m->arch->qk_norm) {
            y->q_norm = vector(H, true, c->head_dim, "%s.%d.self_attn.q_norm.weight", p, l);
            y->k_norm = vector(H, true, c->head_dim, "%s.%d.self_attn.k_norm.weight", p, l);
        }
        y->ffn_norm = vector(H, true, dim, "%s.%d.post_attention_layernorm.weight", p, l);
        y->w_gate = matrix(H, true, dim, ff, "%s.%d.mlp.gate_proj", p, l);
        y->w_up = matrix(H, true, dim, ff, "%s.%d.mlp.up_proj", p, l);
        y->w_down = matrix(H, true, ff, dim, "%s.%d.mlp.down_proj", p, l);
    }
}

/* Copies (plain matrices), converts (vectors to F32) or repacks (MLX) every tensor. */
static void fill(hf *H) {
    ak_model *m = H->m;
    uint8_t *base = (uint8_t *)m->weights;
    for (int i = 0; i < m->n_tensors && !H->status; i++) {
        ak_tensor *t = &m->tensors[i];
        const hf_src *s = &H->src[i];
        uint8_t *dst = base + t->off;
        t->data = dst;
        if (!s->bits && t->dtype == plain_dtype(s->w->dtype)) { memcpy(dst, s->w->data, t->nbytes); continue; }
        if (!s->bits) { ak_dtype_info[plain_dtype(s->w->dtype)].dequant(s->w->data, (float *)dst, t->ne0); continue; }
        ak_dtype sbt = plain_dtype(s->scales->dtype);
        size_t wrow = (size_t)t->ne0 * (size_t)s->bits / 8, sbrow = (size_t)(t->ne0 / s->group) * ak_st_dtype_size(s->scales->dtype);
        size_t rb = ak_dtype_row_bytes(t->dtype, t->ne0);
        for (int64_t r = 0; r < t->ne1; r++) {
            if (!ak_mlx_repack_row(s->bits, s->group, s->w->data + (size_t)r * wrow, s->scales->data + (size_t)r * sbrow,
                                   s->biases->data + (size_t)r * sbrow, sbt, dst + (size_t)r * rb, t->ne0)) {
                hf_fail(H, AK_ERR_UNSUPPORTED, "model: %s row %lld: a scale or bias is not finite in f16", s->name, (long long)r);
                break;
            }
        }
    }
}

static void load(hf *H, const char *dir) {
    ak_model *m = H->m;
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/config.json", dir) >= sizeof path) { hf_fail(H, AK_ERR_ARG, "model: path too long"); return; }
    char *text = NULL;
    size_t len = 0;
    ak_json_doc *doc = NULL;
    const ak_tensor **qkv_bias = NULL;
    ak_status st = ak_read_small_file(path, HF_MAX_CONFIG, &text, &len, H->err);
    if (!st && (st = ak_json_parse(text, len, &doc, H->err)) && H->err) {
        char msg[sizeof H->err->msg];
        snprintf(msg, sizeof msg, "%s", H->err->msg);
        snprintf(H->err->msg, sizeof H->err->msg, "model: config.json: %.400s", msg);
    }
    if (!st) st = ak_st_dir_open(dir, &H->st, H->err);
    if (st) { H->status = st; goto done; }
    H->cfg = ak_json_root(doc);
    if (H->cfg->type != AK_JSON_OBJ) { hf_fail(H, AK_ERR_FORMAT, "model: config.json is not an object"); goto done; }
    const ak_json *mt = ak_json_get(H->cfg, "model_type");
    for (size_t i = 0; i < sizeof hf_archs / sizeof *hf_archs && !m->arch; i++)
        if (ak_json_str_is(mt, hf_archs[i].model_type)) m->arch = ak_arch_find(hf_archs[i].arch);
    if (!m->arch) {
        hf_fail(H, AK_ERR_UNSUPPORTED, "model: config.json model_type '%.40s' is not supported (llama, qwen2, qwen3 are)",
                mt && mt->type == AK_JSON_STR ? mt->s : "?");
        goto done;
    }
    snprintf(m->arch_name, sizeof m->arch_name, "%s", m->arch->name);
    m->rope = AK_ROPE_NEOX; /* HF checkpoints rotate halves (llama too: only GGUF converters permute to pairs) */
    const ak_json *llama3 = NULL;
    read_config(H, &llama3);
    read_quant(H);
    if (H->status) goto done;
    H->cap = 4 + 20 * m->cfg.n_layers;
    m->tensors = calloc((size_t)H->cap, sizeof *m->tensors);
    H->src = calloc((size_t)H->cap, sizeof *H->src);
    m->layers = calloc((size_t)m->cfg.n_layers, sizeof *m->layers);
    qkv_bias = calloc((size_t)m->cfg.n_layers * 3, sizeof *qkv_bias);
    if (!m->tensors || !H->src || !m->layers || !qkv_bias) { hf_fail(H, AK_ERR_NOMEM, "model: out of memory"); goto done; }
    bind_weights(H, qkv_bias);
    if (H->status) goto done;
    size_t size = (H->size + 63) & ~(size_t)63;
    void *buf = aligned_alloc(64, size ? size : 64);
    if (!buf) { hf_fail(H, AK_ERR_NOMEM, "model: cannot allocate %zu bytes of weights", size); goto done; }
    m->weights = buf;
    m->weights_size = size;
    fill(H);
    if (H->status) goto done;
    if ((st = ak_model_check_vectors(m, H->err))) { H->status = st; goto done; }
    float factors[256];
    ak_tensor rf = {.dtype = AK_F32, .ne0 = m->cfg.n_rot / 2, .ne1 = 1, .data = factors, .nbytes = sizeof factors};
    if (llama3 && !llama3_factors(H, llama3, factors, m->cfg.n_rot / 2)) goto done;
    if ((st = ak_model_build_aux(m, llama3 ? &rf : NULL, qkv_bias, H->err))) { H->status = st; goto done; }
    m->bos = token_id(ak_json_get(H->cfg, "bos_token_id"), m->cfg.vocab);
    m->eos = token_id(ak_json_get(H->cfg, "eos_token_id"), m->cfg.vocab);
done:
    free(qkv_bias);
    ak_json_free(doc);
    free(text);
}

ak_status ak_model_load_hf(const char *dir, ak_model **out, ak_err *err) {
    *out = NULL;
    ak_model *m = calloc(1, sizeof *m);
    if (!m) return ak_fail(err, AK_ERR_NOMEM, "out of memory");
    hf H = {.m = m, .err = err};
    load(&H, dir);
    free(H.src);
    ak_st_dir_close(H.st); /* every byte the model uses was copied out */
    if (H.status) { ak_model_free(m); return H.status; }
    *out = m;
    return AK_OK;
}
