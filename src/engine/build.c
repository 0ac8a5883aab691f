/* Table builder. Decode, per token: embedding, then per layer
 *   fused QKV GEMV → [QK-norm +] RoPE + KV write → attention → O GEMV →
 *   [post-norm +] residual + FFN norm → fused gate/up GEMV → activation + down GEMV →
 *   [post-norm +] residual + next norm,
 * then logits GEMV → [softcap] → sample (argmax when greedy) into tokens[pos+1].
 * Prefill emits the same walk with GEMMs and tiled attention over n rows. */
#include "engine/build.h"
#include "core/err.h"
#include "core/sample.h"
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const ak_model *m;
    const ak_build_opts *o;
    ak_table *t;
    bool oom;
    size_t *kv_off;         /* [n_layers]: where each layer's K cache starts in AK_BUF_KV (its V cache follows) */
    int dim, nq, nkv, ff, qkv_ld;
    ak_buf_id in;           /* what the projections read: XN (pre-norm decoders) or X (post-norm encoders) */
} builder;

static ak_cmd *emit(builder *b, ak_kernel k, const void *p, size_t ps, uint32_t work, const char *fmt, int layer) {
    char label[32];
    if (layer >= 0) snprintf(label, sizeof label, "layer.%d.%s", layer, fmt);
    else snprintf(label, sizeof label, "%s", fmt);
    ak_cmd *c = ak_table_push(b->t, k, p, ps, label);
    if (!c) { b->oom = true; return NULL; }
    c->work = work;
    return c;
}

/* Marks the int32 param at offset as patched with n (prefill only: decode has n = 1). */
static void patch_n(builder *b, ak_cmd *c, size_t off) {
    if (c && b->o->prefill) { c->patch |= AK_PATCH_N; c->off_n = (uint8_t)off; }
}

static int rows(builder *b) { return b->o->prefill ? b->o->rows : 1; }

/* Bytes of one layer's K (or V) cache of type t: n_kv_heads x rows of head_dim. */
static size_t kv_cache_bytes(const ak_model *m, int rows, ak_dtype t) {
    return (size_t)m->cfg.n_kv_heads * (size_t)rows * ak_dtype_row_bytes(t, m->cfg.head_dim);
}

bool ak_build_segments(const ak_model *m) { return m->arch->encoder && m->rope == AK_ROPE_NONE; }
size_t ak_build_seg_off(const ak_build_opts *o) { return ((size_t)o->max_seq + 1) * 4; }

int ak_build_ring(const ak_model *m, int max_seq, int rows) {
    bool sliding = false;
    for (int l = 0; l < m->cfg.n_layers; l++) sliding |= m->layers[l].sliding;
    if (!sliding || m->cfg.sliding_window <= 0) return 0;
    /* a call's rows write their keys before its first row reads its window: W + rows - 1 live slots */
    int64_t a = AK_KV_RING_ALIGN, cap = ((int64_t)m->cfg.sliding_window + rows + a - 1) / a * a;
    return cap < max_seq ? (int)cap : 0;
}

int ak_build_kv_rows(const ak_model *m, const ak_build_opts *o, int l) {
    return o->ring > 0 && m->layers[l].sliding ? o->ring : o->max_seq;
}

size_t ak_build_kv_bytes(const ak_model *m, const ak_build_opts *o, int l) {
    int rows = ak_build_kv_rows(m, o, l);
    return kv_cache_bytes(m, rows, o->kt) + kv_cache_bytes(m, rows, o->vt);
}

void ak_build_buf_sizes(const ak_model *m, const ak_build_opts *o, size_t s[AK_BUF_COUNT]) {
    const ak_config *c = &m->cfg;
    size_t r = (size_t)(o->prefill ? o->rows : 1), f = sizeof(float);
    size_t nq = (size_t)c->n_heads * c->head_dim, nkv = (size_t)c->n_kv_heads * c->head_dim;
    memset(s, 0, sizeof(size_t) * AK_BUF_COUNT);
    s[AK_BUF_WEIGHTS] = m->weights_size;
    s[AK_BUF_AUX] = m->aux_size;
    s[AK_BUF_TOKENS] = ak_build_seg_off(o) + (ak_build_segments(m) ? (size_t)o->max_seq * 8 : 0);
    for (int l = 0; l < c->n_layers; l++) s[AK_BUF_KV] += ak_build_kv_bytes(m, o, l);
    s[AK_BUF_X] = r * c->dim * f;
    s[AK_BUF_XN] = r * c->dim * f;
    s[AK_BUF_QKV] = r * (nq + 2 * nkv) * f;
    s[AK_BUF_ATT] = r * nq * f;
    s[AK_BUF_T] = r * c->dim * f;
    s[AK_BUF_GU] = r * 2 * (size_t)c->ffn_dim * f;
    s[AK_BUF_ACT] = r * (size_t)c->ffn_dim * f;
    s[AK_BUF_LOGITS] = (o->prefill && o->logits_all ? r : 1) * (size_t)c->vocab * f;
    s[AK_BUF_SAMPLE] = (size_t)ak_sample_buf_bytes(c->vocab);
    s[AK_BUF_X2] = c->dim * f;   /* one row: only decode tables fold post-norms (AK_FUSE_POST_IN) */
}

/* y[:, y_col..] = x W^T for up to three matrices side by side. */
static ak_cmd *matmul(builder *b, const ak_tensor *const *w, int nw, ak_buf_id x, int ld_x, ak_buf_id y, int ld_y,
                      size_t y_col, const ak_tensor *bias, const char *label, int layer) {
    ak_p_mm p = {.n = rows(b), .K = (int32_t)w[0]->ne0, .nseg = nw, .ld_x = ld_x, .ld_y = ld_y, .has_bias = bias != NULL,
                 .rowwise = b->o->as_decode || b->o->pick_all};
    uint32_t work = 0;
    for (int i = 0; i < nw; i++) {
        p.N[i] = (int32_t)w[i]->ne1;
        p.dtype[i] = (int32_t)w[i]->dtype;
        work += (uint32_t)w[i]->ne1;
    }
    ak_cmd *c = emit(b, b->o->prefill ? AK_K_GEMM : AK_K_GEMV, &p, sizeof p, work, label, layer);
    if (!c) return NULL;
    for (int i = 0; i < 3; i++) ak_cmd_bind(c, i, AK_BUF_WEIGHTS, w[i < nw ? i : 0]->off);
    ak_cmd_bind(c, 3, x, 0);
    ak_cmd_bind(c, 4, y, y_col * sizeof(float));
    ak_cmd_bind(c, 5, AK_BUF_WEIGHTS, bias ? bias->off : 0);
    patch_n(b, c, offsetof(ak_p_mm, n));
    return c;
}

/* x += [post-norm](a); out = norm(x) (+ bias). Decoders normalise into XN for the next
 * block (pre-norm); encoders normalise the residual itself (post-norm, out = X). */
static void add_norm(builder *b, ak_buf_id a, const ak_tensor *post, const ak_tensor *w, const ak_tensor *bias,
                     const char *label, int layer) {
    bool ln = b->m->arch->norm == AK_NORM_LAYER;
    ak_p_norm p = {.n = rows(b), .dim = b->dim, .eps = b->m->cfg.norm_eps,
                   .flags = (post ? AK_NORM_F_POST : 0) | (ln ? AK_NORM_F_LAYER : 0)};
    ak_cmd *c = emit(b, AK_K_ADD_NORM, &p, sizeof p, (uint32_t)rows(b), label, layer);
    if (!c) return;
    ak_cmd_bind(c, 0, AK_BUF_X, 0);
    ak_cmd_bind(c, 1, a, 0);
    ak_cmd_bind(c, 2, AK_BUF_WEIGHTS, post ? post->off : 0);
    ak_cmd_bind(c, 3, AK_BUF_WEIGHTS, w->off);
    ak_cmd_bind(c, 4, b->m->arch->encoder ? AK_BUF_X : AK_BUF_XN, 0);
    ak_cmd_bind(c, 5, AK_BUF_WEIGHTS, bias ? bias->off : 0);
    patch_n(b, c, offsetof(ak_p_norm, n));
}

static void attention_block(builder *b, int l) {
    const ak_model *m = b->m;
    const ak_config *cfg = &m->cfg;
    const ak_layer *L = &m->layers[l];
    int kv_rows = ak_build_kv_rows(m, b->o, l);
    size_t k_off = b->kv_off[l], v_off = k_off + kv_cache_bytes(m, kv_rows, b->o->kt);
    const ak_tensor *qkv[3] = {L->wq, L->wk, L->wv};
    if (L->wqkv) {
        matmul(b, &L->wqkv, 1, b->in, b->dim, AK_BUF_QKV, b->qkv_ld, 0, NULL, "qkv", l);
    } else if (b->o->unfused) {
        size_t col[3] = {0, (size_t)b->nq, (size_t)(b->nq + b->nkv)};
        const char *names[3] = {"q", "k", "v"};
        for (int i = 0; i < 3; i++) matmul(b, &qkv[i], 1, b->in, b->dim, AK_BUF_QKV, b->qkv_ld, col[i], NULL, names[i], l);
    } else {
        matmul(b, qkv, 3, b->in, b->dim, AK_BUF_QKV, b->qkv_ld, 0, NULL, "qkv", l);
    }

    ak_p_rope_kv r = {.n = rows(b), .n_heads = cfg->n_heads, .n_kv_heads = cfg->n_kv_heads, .head_dim = cfg->head_dim,
                      .n_rot = m->rope == AK_ROPE_NONE ? 0 : cfg->n_rot, .style = (int32_t)m->rope,
                      .ld = b->qkv_ld, .max_seq = b->o->max_seq, .kt = b->o->kt, .vt = b->o->vt, .eps = cfg->norm_eps,
                      .flags = (L->q_norm ? AK_ROPE_F_QKNORM : 0) | (L->has_qkv_bias ? AK_ROPE_F_BIAS : 0),
                      .cap = kv_rows};
    ak_cmd *c = emit(b, AK_K_ROPE_KV, &r, sizeof r, (uint32_t)(rows(b) * (cfg->n_heads + cfg->n_kv_heads)), "rope_kv", l);
    if (c) {
        ak_cmd_bind(c, 0, AK_BUF_QKV, 0);
        ak_cmd_bind(c, 1, AK_BUF_WEIGHTS, L->q_norm ? L->q_norm->off : 0);
        ak_cmd_bind(c, 2, AK_BUF_WEIGHTS, L->k_norm ? L->k_norm->off : 0);
        ak_cmd_bind(c, 3, AK_BUF_AUX, L->inv_freq_off);
        ak_cmd_bind(c, 4, AK_BUF_KV, k_off);
        ak_cmd_bind(c, 5, AK_BUF_KV, v_off);
        ak_cmd_bind(c, 6, AK_BUF_AUX, L->qkv_bias_off);
        c->patch |= AK_PATCH_POS;
        c->off_pos = offsetof(ak_p_rope_kv, pos);
        patch_n(b, c, offsetof(ak_p_rope_kv, n));
    }

    ak_p_attn a = {.n = rows(b), .n_heads = cfg->n_heads, .n_kv_heads = cfg->n_kv_heads, .head_dim = cfg->head_dim,
                   .ld_q = b->qkv_ld, .max_seq = b->o->max_seq, .kt = b->o->kt, .vt = b->o->vt,
                   .window = L->sliding ? cfg->sliding_window : 0,
                   .causal = ak_build_segments(m) ? AK_ATTN_SEGMENTS : m->arch->causal,
                   .scale = cfg->attn_scale, .softcap = cfg->attn_softcap, .cap = kv_rows};
    c = emit(b, b->o->prefill && !b->o->as_decode ? AK_K_ATTN_PREFILL : AK_K_ATTN_DECODE, &a, sizeof a,
             (uint32_t)cfg->n_heads, "attention", l);
    if (c) {
        ak_cmd_bind(c, 0, AK_BUF_QKV, 0);
        ak_cmd_bind(c, 1, AK_BUF_KV, k_off);
        ak_cmd_bind(c, 2, AK_BUF_KV, v_off);
        ak_cmd_bind(c, 3, AK_BUF_ATT, 0);
        if (ak_build_segments(m)) ak_cmd_bind(c, 4, AK_BUF_TOKENS, ak_build_seg_off(b->o));
        c->patch |= AK_PATCH_POS | AK_PATCH_KVLEN;
        c->off_pos = offsetof(ak_p_attn, pos);
        c->off_kv = offsetof(ak_p_attn, kv_len);
        patch_n(b, c, offsetof(ak_p_attn, n));
    }
    matmul(b, &L->wo, 1, AK_BUF_ATT, b->nq, AK_BUF_T, b->dim, 0, L->bo, "attn_output", l);
    if (m->arch->encoder) add_norm(b, AK_BUF_T, NULL, L->attn_out_norm, L->attn_out_norm_b, "attn_residual_norm", l);
    else add_norm(b, AK_BUF_T, L->post_attn_norm, L->ffn_norm, NULL, "attn_residual_norm", l);
}

static void ffn_block(builder *b, int l) {
    const ak_model *m = b->m;
    const ak_layer *L = &m->layers[l];
    bool gated = m->arch->gated_ffn;
    int ld_gu = gated ? 2 * b->ff : b->ff;
    const ak_tensor *gu[2] = {L->w_gate, L->w_up};
    if (!gated) {
        matmul(b, &L->w_up, 1, b->in, b->dim, AK_BUF_GU, ld_gu, 0, L->b_up, "up", l);
    } else if (b->o->unfused) {
        matmul(b, &gu[0], 1, b->in, b->dim, AK_BUF_GU, ld_gu, 0, NULL, "gate", l);
        matmul(b, &gu[1], 1, b->in, b->dim, AK_BUF_GU, ld_gu, (size_t)b->ff, NULL, "up", l);
    } else {
        matmul(b, gu, 2, b->in, b->dim, AK_BUF_GU, ld_gu, 0, NULL, "gate_up", l);
    }
    if (b->o->prefill || b->o->unfused || !gated) {
        ak_p_act p = {.n = rows(b), .K = b->ff, .act = (int32_t)m->arch->act, .ld_gu = ld_gu, .gated = gated};
        ak_cmd *c = emit(b, AK_K_ACT_GATE, &p, sizeof p, (uint32_t)rows(b), "act", l);
        if (c) { ak_cmd_bind(c, 0, AK_BUF_GU, 0); ak_cmd_bind(c, 1, AK_BUF_ACT, 0); patch_n(b, c, offsetof(ak_p_act, n)); }
        matmul(b, &L->w_down, 1, AK_BUF_ACT, b->ff, AK_BUF_T, b->dim, 0, L->b_down, "down", l);
    } else {
        ak_p_act_down p = {.n = 1, .K = b->ff, .N = b->dim, .dtype = (int32_t)L->w_down->dtype,
                           .act = (int32_t)m->arch->act, .ld_gu = ld_gu};
        ak_cmd *c = emit(b, AK_K_GEMV_ACT_DOWN, &p, sizeof p, (uint32_t)b->dim, "act_down", l);
        if (c) { ak_cmd_bind(c, 0, AK_BUF_WEIGHTS, L->w_down->off); ak_cmd_bind(c, 1, AK_BUF_GU, 0); ak_cmd_bind(c, 2, AK_BUF_T, 0); }
    }
    if (m->arch->encoder) {
        add_norm(b, AK_BUF_T, NULL, L->out_norm, L->out_norm_b, "ffn_residual_norm", l);
        return;
    }
    const ak_tensor *next = l + 1 < m->cfg.n_layers ? m->layers[l + 1].attn_norm : m->output_norm;
    add_norm(b, AK_BUF_T, L->post_ffn_norm, next, NULL, "ffn_residual_norm", l);
}

/* ---- Decode fusions: pairs of commands done by one where the backend claims the
 * fused command (ak_backend.fuses). Each boundary between dependent kernels costs a GPU
 * a few microseconds even inside a graph. ---- */

static bool same_bind(ak_bind a, ak_bind b) { return a.buf == b.buf && a.off == b.off; }

static bool claims(ak_backend *be, const ak_cmd *c) { return be->fuses(be, c); }

/* The attention at i and the output projection after it, reading all its output. */
static bool merge_pair(const ak_table *t, int i) {
    if (i + 1 >= t->n) return false;
    const ak_cmd *a = &t->cmds[i], *g = &t->cmds[i + 1];
    const ak_p_attn *at = (const ak_p_attn *)a->params;
    return a->kernel == AK_K_ATTN_DECODE && g->kernel == AK_K_GEMV && same_bind(a->bind[3], g->bind[3]) &&
           ((const ak_p_mm *)g->params)->K == at->n_heads * at->head_dim;
}

/* The two-segment gate/up GEMV at i and the act_down after it, reading its output. */
static bool gate_pair(const ak_table *t, int i) {
    if (i + 1 >= t->n) return false;
    const ak_cmd *g = &t->cmds[i], *d = &t->cmds[i + 1];
    const ak_p_mm *m = (const ak_p_mm *)g->params;
    return g->kernel == AK_K_GEMV && d->kernel == AK_K_GEMV_ACT_DOWN && m->nseg == 2 && m->N[0] == m->N[1] &&
           m->dtype[0] == m->dtype[1] && ((const ak_p_act_down *)d->params)->K == m->N[0] && same_bind(g->bind[4], d->bind[1]);
}

/* Whether every command that binds buf binds it at slot s0 of the first command of a
 * pair, or at slot s1 of the second: what passes between them may then change form. */
static bool bound_in_pairs(const ak_table *t, uint32_t buf, bool (*pair)(const ak_table *, int), int s0, int s1) {
    for (int j = 0; j < t->n; j++)
        for (int s = 0; s < t->cmds[j].nbind; s++)
            if (t->cmds[j].bind[s].buf == buf && !((s == s0 && pair(t, j)) || (s == s1 && j > 0 && pair(t, j - 1)))) return false;
    return true;
}

/* The attention leaves its splits and the output projection merges them as it reads x;
 * the gate/up GEMV writes act(g) * u, which the down projection reads as its x. */
static void fuse_pairs(ak_table *t, ak_backend *be, bool (*pair)(const ak_table *, int), int s0, int s1, uint32_t f0, uint32_t f1) {
    for (int i = 0; i + 1 < t->n; i++) {
        if (!pair(t, i) || !bound_in_pairs(t, t->cmds[i].bind[s0].buf, pair, s0, s1)) continue;
        ak_cmd c0 = t->cmds[i], c1 = t->cmds[i + 1];
        c0.fuse |= f0;
        c1.fuse |= f1;
        /* params read where they lie: a cast of a local copy's bytes may be read before the copy (-O2) */
        if (f0 & AK_FUSE_GATE_OUT) c0.fp.act = ((const ak_p_act_down *)t->cmds[i + 1].params)->act;
        if (claims(be, &c0) && claims(be, &c1)) { t->cmds[i] = c0; t->cmds[i + 1] = c1; }
    }
}

/* Whether no command from `from` on reads buf before a norm writes it again. */
static bool sole_reader(const ak_table *t, int from, ak_bind buf) {
    for (int j = from; j < t->n; j++) {
        const ak_cmd *c = &t->cmds[j];
        int out = c->kernel == AK_K_NORM ? 2 : c->kernel == AK_K_ADD_NORM ? 4 : -1;
        for (int s = 0; s < c->nbind; s++)
            if (s != out && c->bind[s].buf == buf.buf) return false;
        if (out >= 0 && same_bind(c->bind[out], buf)) return true;
    }
    return true;
}

/* Whether no command from `from` on reads the QKV row a folded rope leaves unroped,
 * before a GEMV rewrites the whole row. */
static bool row_dead(const ak_table *t, int from, ak_bind row, int ld) {
    for (int j = from; j < t->n; j++) {
        const ak_cmd *c = &t->cmds[j];
        for (int s = 0; s < c->nbind; s++)
            if (c->bind[s].buf == row.buf && !(c->kernel == AK_K_GEMV && s == 4)) return false;
        if (c->kernel == AK_K_GEMV && same_bind(c->bind[4], row)) {
            const ak_p_mm *m = (const ak_p_mm *)c->params;
            return m->N[0] + m->N[1] + m->N[2] >= ld;
        }
    }
    return true;
}

/* Binds the residual where it now lies: slots bound to X, to res. A command with
 * POST_IN was made by fuse_norms with the residual's homes bound already. */
static void rebind_residual(ak_cmd *c, ak_buf_id res) {
    if (res == AK_BUF_X || (c->fuse & AK_FUSE_POST_IN)) return;
    for (int s = 0; s < c->nbind; s++)
        if (c->bind[s].buf == AK_BUF_X) c->bind[s].buf = res;
}

/* The rope_kv folds into the attention after it; around each RMSNorm, "x += W h;
 * xn = norm(x) w; y = W' xn" becomes "x += W h" (the GEMV adds into the residual) and
 * "y = W' norm(x) w" (the next GEMV normalises its own x), and a lone norm before a GEMV
 * folds into it. A post-norm's "x += norm(a) pw; xn = norm(x) w; y = W' xn" (Gemma 2/3)
 * becomes "x' = x + norm(a) pw; y = W' norm(x') w" in the GEMV, which writes x' to the
 * residual's other home (X2 or X), since its blocks may still read x while x' is written:
 * the residual moves between the two, and every later command binds it where it then lies.
 * LayerNorm keeps its commands. */
static void fuse_norms(ak_table *t, ak_backend *be) {
    int k = 0;
    ak_buf_id res = AK_BUF_X;
    for (int i = 0; i < t->n; i++) {
        ak_cmd *c = &t->cmds[i], *next = i + 1 < t->n ? &t->cmds[i + 1] : NULL;
        rebind_residual(c, res);
        if (c->kernel == AK_K_ROPE_KV && next && next->kernel == AK_K_ATTN_DECODE) {
            const ak_p_rope_kv *r = (const ak_p_rope_kv *)c->params;
            const ak_p_attn *at = (const ak_p_attn *)next->params;
            ak_cmd a = *next;
            a.fuse |= AK_FUSE_ROPE;
            a.fp.rope = *r;
            const int from[4] = {1, 2, 3, 6};
            for (int s = 0; s < 4; s++) ak_cmd_bind(&a, 4 + s, (ak_buf_id)c->bind[from[s]].buf, c->bind[from[s]].off);
            if (same_bind(c->bind[0], next->bind[0]) && same_bind(c->bind[4], next->bind[1]) &&
                same_bind(c->bind[5], next->bind[2]) && at->ld_q == r->ld && at->n_heads == r->n_heads &&
                at->n_kv_heads == r->n_kv_heads && at->head_dim == r->head_dim && at->kt == r->kt && at->vt == r->vt &&
                at->max_seq == r->max_seq && at->cap == r->cap && row_dead(t, i + 2, c->bind[0], r->ld) && claims(be, &a)) {
                *next = a;
                continue;
            }
        }
        bool add = c->kernel == AK_K_ADD_NORM;
        const ak_p_norm *np = (const ak_p_norm *)c->params;
        const bool post = add && np->flags == AK_NORM_F_POST;
        if ((add || c->kernel == AK_K_NORM) && (np->flags == 0 || post) && next && next->kernel == AK_K_GEMV &&
            !(next->fuse & AK_FUSE_MERGE_IN) && same_bind(next->bind[3], c->bind[add ? 4 : 2]) &&
            sole_reader(t, i + 2, c->bind[add ? 4 : 2])) {
            const ak_cmd *prev = k > 0 ? &t->cmds[k - 1] : NULL;
            ak_cmd g = *next, p = prev ? *prev : (ak_cmd){0};
            const ak_buf_id other = res == AK_BUF_X ? AK_BUF_X2 : AK_BUF_X;
            rebind_residual(&g, res);
            g.fuse |= AK_FUSE_NORM_IN;
            g.fp.eps = np->eps;
            ak_cmd_bind(&g, 3, (ak_buf_id)c->bind[0].buf, c->bind[0].off);
            ak_cmd_bind(&g, 6, (ak_buf_id)c->bind[add ? 3 : 1].buf, c->bind[add ? 3 : 1].off);
            if (post) {
                g.fuse |= AK_FUSE_POST_IN;
                ak_cmd_bind(&g, 7, (ak_buf_id)c->bind[1].buf, c->bind[1].off);
                ak_cmd_bind(&g, 8, (ak_buf_id)c->bind[2].buf, c->bind[2].off);
                ak_cmd_bind(&g, 9, other, c->bind[0].off);
            }
            bool ok = claims(be, &g);
            if (ok && post) res = other;
            if (ok && add && !post) {   /* the add goes into the command before, which must write all of a */
                int out = p.kernel == AK_K_GEMV_ACT_DOWN ? 2 : 4;
                const ak_p_mm *pm = prev ? (const ak_p_mm *)prev->params : NULL;
                ok = prev && !(p.fuse & AK_FUSE_ADD_OUT) && same_bind(p.bind[out], c->bind[1]) &&
                     (p.kernel == AK_K_GEMV_ACT_DOWN ? ((const ak_p_act_down *)prev->params)->N == np->dim
                                                      : p.kernel == AK_K_GEMV && pm->nseg == 1 && pm->N[0] == np->dim);
                p.fuse |= AK_FUSE_ADD_OUT;
                ak_cmd_bind(&p, out, (ak_buf_id)c->bind[0].buf, c->bind[0].off);
                ok = ok && claims(be, &p);
                if (ok) t->cmds[k - 1] = p;
            }
            if (ok) { *next = g; continue; }
        }
        if (k != i) { t->cmds[k] = *c; memcpy(t->labels[k], t->labels[i], sizeof t->labels[k]); }
        k++;
    }
    t->n = k;
}

void ak_table_fuse(ak_table *t, ak_backend *be) {
    if (!be || !be->fuses || t->max_rows != 1) return;
    fuse_pairs(t, be, merge_pair, 3, 3, AK_FUSE_SPLITS_OUT, AK_FUSE_MERGE_IN);
    fuse_pairs(t, be, gate_pair, 4, 1, AK_FUSE_GATE_OUT, AK_FUSE_GATE_IN);
    fuse_norms(t, be);
}

ak_status ak_table_build(const ak_model *m, const ak_build_opts *o, ak_table *t, ak_err *err) {
    const ak_config *cfg = &m->cfg;
    memset(t, 0, sizeof *t);
    builder b = {.m = m, .o = o, .t = t, .dim = cfg->dim, .nq = cfg->n_heads * cfg->head_dim,
                 .nkv = cfg->n_kv_heads * cfg->head_dim, .ff = cfg->ffn_dim};
    b.qkv_ld = b.nq + 2 * b.nkv;
    b.in = m->arch->encoder ? AK_BUF_X : AK_BUF_XN;
    t->max_rows = rows(&b);
    if (!(b.kv_off = malloc((size_t)(cfg->n_layers > 0 ? cfg->n_layers : 1) * sizeof *b.kv_off)))
        return ak_fail(err, AK_ERR_NOMEM, "table: out of memory");
    size_t off = 0;
    for (int l = 0; l < cfg->n_layers; l++) { b.kv_off[l] = off; off += ak_build_kv_bytes(m, o, l); }

    ak_p_embed pe = {.n = rows(&b), .dim = b.dim, .dtype = (int32_t)m->tok_embd->dtype,
                     .scale = m->arch->embed_scale ? sqrtf((float)b.dim) : 1.f,
                     .flags = (m->pos_embd ? AK_EMBED_F_POS : 0) | (m->type_embd ? AK_EMBED_F_TYPE : 0) |
                              (ak_build_segments(m) ? AK_EMBED_F_SEG : 0),
                     .pos_dtype = m->pos_embd ? (int32_t)m->pos_embd->dtype : 0,
                     .type_dtype = m->type_embd ? (int32_t)m->type_embd->dtype : 0};
    ak_cmd *c = emit(&b, AK_K_EMBED, &pe, sizeof pe, (uint32_t)rows(&b), "embed", -1);
    if (c) {
        ak_cmd_bind(c, 0, AK_BUF_WEIGHTS, m->tok_embd->off);
        ak_cmd_bind(c, 1, AK_BUF_TOKENS, 0);
        ak_cmd_bind(c, 2, AK_BUF_X, 0);
        ak_cmd_bind(c, 3, AK_BUF_WEIGHTS, m->pos_embd ? m->pos_embd->off : 0);
        ak_cmd_bind(c, 4, AK_BUF_WEIGHTS, m->type_embd ? m->type_embd->off : 0);
        if (ak_build_segments(m)) ak_cmd_bind(c, 5, AK_BUF_TOKENS, ak_build_seg_off(o));
        c->patch |= AK_PATCH_TOK_IN | AK_PATCH_POS;
        c->off_pos = offsetof(ak_p_embed, pos);
        c->bind_tok = 1;
        patch_n(&b, c, offsetof(ak_p_embed, n));
    }
    bool enc = m->arch->encoder;
    ak_p_norm pn = {.n = rows(&b), .dim = b.dim, .eps = cfg->norm_eps, .flags = enc ? AK_NORM_F_LAYER : 0};
    c = emit(&b, AK_K_NORM, &pn, sizeof pn, (uint32_t)rows(&b), enc ? "embed_norm" : "attn_norm", enc ? -1 : 0);
    if (c) {
        ak_cmd_bind(c, 0, AK_BUF_X, 0);
        ak_cmd_bind(c, 1, AK_BUF_WEIGHTS, enc ? m->embd_norm->off : m->layers[0].attn_norm->off);
        ak_cmd_bind(c, 2, enc ? AK_BUF_X : AK_BUF_XN, 0);
        ak_cmd_bind(c, 3, AK_BUF_WEIGHTS, enc ? m->embd_norm_b->off : 0);
        patch_n(&b, c, offsetof(ak_p_norm, n));
    }
    for (int l = 0; l < cfg->n_layers; l++) {
        attention_block(&b, l);
        ffn_block(&b, l);
    }
    if (!enc) {   /* decoders: logits, softcap, sample into tokens[pos+n]; encoders end with hidden states in X */
        bool all = o->prefill && o->logits_all;
        c = matmul(&b, &m->output, 1, AK_BUF_XN, b.dim, AK_BUF_LOGITS, cfg->vocab, 0, NULL, "logits", -1);
        if (c && o->prefill && !all) ((ak_p_mm *)c->params)->last_only = 1;
        if (cfg->final_softcap > 0) {
            ak_p_softcap ps = {.n = all ? rows(&b) : 1, .cols = cfg->vocab, .cap = cfg->final_softcap};
            c = emit(&b, AK_K_SOFTCAP, &ps, sizeof ps, (uint32_t)ps.n, "softcap", -1);
            if (c) { ak_cmd_bind(c, 0, AK_BUF_LOGITS, 0); if (all) patch_n(&b, c, offsetof(ak_p_softcap, n)); }
        }
        ak_p_sample pa = {.n = all ? rows(&b) : 1, .vocab = cfg->vocab, .all = all && o->pick_all};
        c = emit(&b, AK_K_SAMPLE, &pa, sizeof pa, 1, "sample", -1);
        if (c) {
            ak_cmd_bind(c, 0, AK_BUF_LOGITS, 0);
            ak_cmd_bind(c, 1, AK_BUF_TOKENS, 0);
            ak_cmd_bind(c, 2, AK_BUF_SAMPLE, 0);
            c->patch |= AK_PATCH_TOK_OUT | AK_PATCH_POS | AK_PATCH_KVLEN;
            c->off_pos = offsetof(ak_p_sample, pos);
            c->off_kv = offsetof(ak_p_sample, kv_len);
            c->bind_tok = 1;
            if (all) patch_n(&b, c, offsetof(ak_p_sample, n));
        }
    }
    free(b.kv_off);
    if (!b.oom && !o->prefill && !o->unfused) ak_table_fuse(t, o->be);
    if (b.oom) { ak_table_free(t); return ak_fail(err, AK_ERR_NOMEM, "table: out of memory"); }
    return AK_OK;
}
