/* The decode table's fusions (issue #22's one program): the builder emits a fused command
 * only where the backend claims it, and the table then lists what runs. On every decoder
 * fixture, against fake backends:
 * - claiming nothing (or none asked: the unfused table, no backend) gives the plain table,
 *   command for command;
 * - claiming everything gives each pre-norm layer as five commands (QKV with its RMSNorm,
 *   attention with its rope_kv leaving its splits, the output projection merging them and
 *   adding into the residual, gate/up with its norm writing act(g) * u, the down projection
 *   reading it and adding), each bound as the plain table's commands were; a post-norm
 *   (Gemma 2/3) folds its add into the GEMV after it, which writes the new residual to its
 *   other home (X, X2), so that layers take five commands there too;
 * - every command binds the residual where the last command that moved it left it;
 * - refusing one fusion leaves exactly that pair apart;
 * - every fused command in a table is one the backend was asked about and claimed. */
#include "engine/build.h"
#include "model/model.h"
#include "test_util.h"
#include <stdio.h>
#include <string.h>

static const char *const models[] = {"llama", "llama31", "qwen2", "qwen3", "gemma", "gemma2", "gemma3"};

/* The fake backends: which fusions they refuse, and whether they saw each claimed command. */
static uint32_t refuse;
static uint64_t refuse_w;          /* weight offset of the one GEMV that refuses NORM_IN (0: any) */
static ak_cmd seen[4096];
static int n_seen;

static bool fake_fuses(ak_backend *b, const ak_cmd *c) {
    (void)b;
    bool ok = !(c->fuse & refuse) && !(refuse_w && (c->fuse & AK_FUSE_NORM_IN) && c->bind[0].off == refuse_w);
    if (ok && n_seen < 4096) seen[n_seen++] = *c;
    return ok;
}

static bool was_claimed(const ak_cmd *c) {
    for (int i = 0; i < n_seen; i++)
        if (!memcmp(&seen[i], c, sizeof *c)) return true;
    return false;
}

static int build(const ak_model *m, ak_backend *be, bool unfused, ak_table *t) {
    ak_build_opts o = {.rows = 1, .max_seq = 64, .kt = AK_F32, .vt = AK_F32, .be = be, .unfused = unfused};
    ak_err err = {{0}};
    n_seen = 0;
    ak_status st = ak_table_build(m, &o, t, &err);
    CHECK(!st, "build: %s", err.msg);
    return st ? -1 : t->n;
}

static bool same_cmds(const ak_table *a, const ak_table *b) {
    if (a->n != b->n) return false;
    for (int i = 0; i < a->n; i++)
        if (memcmp(&a->cmds[i], &b->cmds[i], sizeof a->cmds[i]) || strcmp(a->labels[i], b->labels[i])) return false;
    return true;
}

static int count(const ak_table *t, ak_kernel k) {
    int n = 0;
    for (int i = 0; i < t->n; i++) n += t->cmds[i].kernel == k;
    return n;
}

static bool bound(const ak_cmd *c, int slot, ak_buf_id buf, uint64_t off) {
    return c->nbind > slot && c->bind[slot].buf == (uint32_t)buf && c->bind[slot].off == off;
}

/* The residual's home through the table: every binding of X or X2 is where it lies,
 * but a post-norm fold's slot 9, the other home, where it lies from then on. */
static void residual_flow(const char *name, const char *what, const ak_table *t) {
    ak_buf_id home = AK_BUF_X;
    for (int i = 0; i < t->n; i++) {
        const ak_cmd *c = &t->cmds[i];
        const bool post = c->fuse & AK_FUSE_POST_IN;
        const ak_buf_id other = home == AK_BUF_X ? AK_BUF_X2 : AK_BUF_X;
        for (int s = 0; s < c->nbind; s++) {
            const ak_buf_id b = (ak_buf_id)c->bind[s].buf;
            if (b != AK_BUF_X && b != AK_BUF_X2) continue;
            CHECK(b == (post && s == 9 ? other : home), "%s %s: %s binds slot %d to %s, the residual is in %s", name, what,
                  t->labels[i], s, b == AK_BUF_X ? "X" : "X2", home == AK_BUF_X ? "X" : "X2");
        }
        if (post) {
            CHECK(c->nbind == AK_CMD_BINDS && c->bind[9].buf == (uint32_t)other, "%s %s: %s moves no residual", name, what,
                  t->labels[i]);
            home = other;
        }
    }
}

/* Every fused command claimed, and none left the backend did not see. */
static void all_claimed(const char *name, const char *what, const ak_table *t) {
    for (int i = 0; i < t->n; i++)
        if (t->cmds[i].fuse) CHECK(was_claimed(&t->cmds[i]), "%s %s: %s fused 0x%x unasked", name, what, t->labels[i], t->cmds[i].fuse);
}

static void one_model(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "%s/%s-f32.gguf", name, name);
    ak_model *m;
    ak_err err = {{0}};
    if (ak_model_load(ak_fixture(rel), &m, &err)) { CHECK(0, "%s: %s", rel, err.msg); return; }
    const int L = m->cfg.n_layers;
    bool post = m->layers[0].post_attn_norm != NULL;
    ak_backend fake = {.name = "fake", .fuses = fake_fuses}, none = {.name = "none"};
    ak_table plain, t;

    /* nothing claimed, nothing asked, or unfused: the plain table */
    if (build(m, NULL, false, &plain) < 0) goto out;
    refuse = ~0u;
    build(m, &fake, false, &t);
    CHECK(same_cmds(&plain, &t) && n_seen == 0, "%s: a backend claiming nothing gives the plain table", name);
    ak_table_free(&t);
    build(m, &none, false, &t);
    CHECK(same_cmds(&plain, &t), "%s: a backend without fuses gives the plain table", name);
    ak_table_free(&t);
    refuse = 0;
    ak_table u;
    build(m, &fake, true, &u);
    CHECK(n_seen == 0 && count(&u, AK_K_ROPE_KV) == L, "%s: the unfused table asks for no fusions", name);
    ak_table_free(&u);
    CHECK(count(&plain, AK_K_ROPE_KV) == L && count(&plain, AK_K_ADD_NORM) == 2 * L && count(&plain, AK_K_NORM) == 1,
          "%s: plain table has every rope_kv and norm", name);

    /* everything claimed */
    refuse = 0;
    refuse_w = 0;
    build(m, &fake, false, &t);
    all_claimed(name, "all", &t);
    residual_flow(name, "all", &t);
    /* gone: every rope_kv, the first norm and every add_norm */
    const int per = 5, want = plain.n - L - 1 - 2 * L;
    CHECK(t.n == want, "%s: %d commands with every fusion claimed, want %d", name, t.n, want);
    CHECK(count(&t, AK_K_ROPE_KV) == 0 && count(&t, AK_K_NORM) == 0 && count(&t, AK_K_ADD_NORM) == 0,
          "%s: rope_kv %d, norm %d, add_norm %d left", name, count(&t, AK_K_ROPE_KV), count(&t, AK_K_NORM), count(&t, AK_K_ADD_NORM));
    for (int l = 0, i = 1; l < L && t.n == want; l++, i += per) {
        const ak_layer *ly = &m->layers[l];
        const ak_cmd *qkv = &t.cmds[i], *at = &t.cmds[i + 1], *o = &t.cmds[i + 2], *gu = &t.cmds[i + 3], *dn = &t.cmds[i + 4];
        /* the first layer's qkv takes the lone norm; the others' the add_norm before: pre-norm, the
         * residual stays in X; post-norm, the qkv's add moves it from X2 to X and gate/up's back */
        const bool pq = post && l > 0;
        CHECK(qkv->kernel == AK_K_GEMV && qkv->fuse == (AK_FUSE_NORM_IN | (pq ? AK_FUSE_POST_IN : 0u)) &&
              bound(qkv, 3, pq ? AK_BUF_X2 : AK_BUF_X, 0) && bound(qkv, 6, AK_BUF_WEIGHTS, ly->attn_norm->off) &&
              qkv->fp.eps == m->cfg.norm_eps &&
              (!pq || (bound(qkv, 7, AK_BUF_T, 0) && bound(qkv, 8, AK_BUF_WEIGHTS, m->layers[l - 1].post_ffn_norm->off) &&
                       bound(qkv, 9, AK_BUF_X, 0))),
              "%s layer %d: qkv 0x%x", name, l, qkv->fuse);
        CHECK(at->kernel == AK_K_ATTN_DECODE && at->fuse == (AK_FUSE_ROPE | AK_FUSE_SPLITS_OUT) &&
              at->fp.rope.head_dim == m->cfg.head_dim && bound(at, 6, AK_BUF_AUX, ly->inv_freq_off) &&
              bound(at, 7, AK_BUF_AUX, ly->qkv_bias_off) &&
              bound(at, 4, AK_BUF_WEIGHTS, ly->q_norm ? ly->q_norm->off : 0),
              "%s layer %d: attention 0x%x", name, l, at->fuse);
        CHECK(o->kernel == AK_K_GEMV && o->fuse == (AK_FUSE_MERGE_IN | (post ? 0u : AK_FUSE_ADD_OUT)) &&
              bound(o, 4, post ? AK_BUF_T : AK_BUF_X, 0),
              "%s layer %d: attn_output 0x%x", name, l, o->fuse);
        CHECK(gu->kernel == AK_K_GEMV && gu->fuse == (AK_FUSE_NORM_IN | AK_FUSE_GATE_OUT | (post ? AK_FUSE_POST_IN : 0u)) &&
              gu->fp.act == (int32_t)m->arch->act && bound(gu, 3, AK_BUF_X, 0) &&
              bound(gu, 6, AK_BUF_WEIGHTS, ly->ffn_norm->off) &&
              (!post || (bound(gu, 7, AK_BUF_T, 0) && bound(gu, 8, AK_BUF_WEIGHTS, ly->post_attn_norm->off) &&
                         bound(gu, 9, AK_BUF_X2, 0))),
              "%s layer %d: gate_up 0x%x", name, l, gu->fuse);
        CHECK(dn->kernel == AK_K_GEMV_ACT_DOWN && dn->fuse == (AK_FUSE_GATE_IN | (post ? 0u : AK_FUSE_ADD_OUT)) &&
              bound(dn, 2, post ? AK_BUF_T : AK_BUF_X, 0),
              "%s layer %d: act_down 0x%x", name, l, dn->fuse);
    }
    const ak_cmd *lg = &t.cmds[t.n == want ? 1 + per * L : 0];
    CHECK(lg->kernel == AK_K_GEMV && lg->fuse == (AK_FUSE_NORM_IN | (post ? AK_FUSE_POST_IN : 0u)) &&
          bound(lg, 6, AK_BUF_WEIGHTS, m->output_norm->off) && bound(lg, 3, post ? AK_BUF_X2 : AK_BUF_X, 0) &&
          (!post || bound(lg, 8, AK_BUF_WEIGHTS, m->layers[L - 1].post_ffn_norm->off)), "%s: logits 0x%x", name, lg->fuse);
    ak_table_free(&t);

    /* one fusion refused: that pair stays apart, the rest fuse */
    const uint32_t each[] = {AK_FUSE_ROPE, AK_FUSE_SPLITS_OUT, AK_FUSE_GATE_IN, AK_FUSE_ADD_OUT, AK_FUSE_NORM_IN, AK_FUSE_POST_IN};
    for (int k = 0; k < 6; k++) {
        refuse = each[k];
        build(m, &fake, false, &t);
        all_claimed(name, "one refused", &t);
        residual_flow(name, "one refused", &t);
        bool none_has = true;
        for (int i = 0; i < t.n; i++) none_has = none_has && !(t.cmds[i].fuse & each[k]);
        CHECK(none_has, "%s: refused 0x%x yet emitted", name, each[k]);
        int want = each[k] == AK_FUSE_ROPE ? L : 0;
        CHECK(count(&t, AK_K_ROPE_KV) == want, "%s: refusing 0x%x leaves %d rope_kv", name, each[k], count(&t, AK_K_ROPE_KV));
        if (!post && each[k] == AK_FUSE_ADD_OUT)   /* the norms go with their adds: only the first lone norm folds */
            CHECK(count(&t, AK_K_ADD_NORM) == 2 * L && count(&t, AK_K_NORM) == 0, "%s: add refused: %d add_norms", name,
                  count(&t, AK_K_ADD_NORM));
        if (each[k] == AK_FUSE_NORM_IN)
            CHECK(count(&t, AK_K_ADD_NORM) == 2 * L && count(&t, AK_K_NORM) == 1, "%s: norm refused", name);
        if (each[k] == AK_FUSE_POST_IN)   /* the pre-norm tables have none to refuse */
            CHECK(count(&t, AK_K_ADD_NORM) == (post ? 2 * L : 0) && count(&t, AK_K_NORM) == 0, "%s: post-norm adds refused: %d add_norms",
                  name, count(&t, AK_K_ADD_NORM));
        ak_table_free(&t);
    }
    refuse = 0;

    /* one GEMV (layer 1's gate/up) refusing its norm: the add_norm before it stays, the
     * output projection before that writes T as in the plain table, and the add_norm
     * updates the residual where it lies (X; post-norm, the QKV's fold moved it back), from
     * where the later folds move it */
    if (L > 1) {
        refuse_w = m->layers[1].w_gate->off;
        build(m, &fake, false, &t);
        all_claimed(name, "gate_up 1 refused", &t);
        residual_flow(name, "gate_up 1 refused", &t);
        CHECK(t.n == plain.n - 3 * L && count(&t, AK_K_ADD_NORM) == 1, "%s: %d commands, %d add_norms with one norm refused",
              name, t.n, count(&t, AK_K_ADD_NORM));
        for (int i = 0; i < t.n; i++)
            if (t.cmds[i].kernel == AK_K_ADD_NORM)
                CHECK(!strcmp(t.labels[i], "layer.1.attn_residual_norm") && t.cmds[i - 1].fuse == AK_FUSE_MERGE_IN &&
                      bound(&t.cmds[i - 1], 4, AK_BUF_T, 0) && t.cmds[i + 1].fuse == AK_FUSE_GATE_OUT &&
                      bound(&t.cmds[i], 0, AK_BUF_X, 0),
                      "%s: the add_norm left is %s, between 0x%x and 0x%x", name, t.labels[i], t.cmds[i - 1].fuse,
                      t.cmds[i + 1].fuse);
        ak_table_free(&t);
        refuse_w = 0;
    }

    /* the description -v prints */
    build(m, &fake, false, &t);
    char d[160];
    ak_cmd_describe(&t, 1, d, sizeof d);
    CHECK(strstr(d, "layer.0.qkv") && strstr(d, "gemv (norm in)"), "%s: described as '%s'", name, d);
    ak_cmd_describe(&t, 2, d, sizeof d);
    CHECK(strstr(d, "attn_decode (rope_kv, splits out)"), "%s: described as '%s'", name, d);
    ak_table_free(&t);
    ak_table_free(&plain);
out:
    ak_model_free(m);
}

int main(void) {
    for (int i = 0; i < (int)(sizeof models / sizeof *models); i++) one_model(models[i]);
    return ak_test_done();
}
