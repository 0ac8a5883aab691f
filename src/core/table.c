/* Dispatch table storage and patching. */
#include "core/table.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const ak_kernel_names[AK_K_COUNT] = {
    "embed", "norm", "add_norm", "gemv", "gemm", "gemv_act_down", "act_gate", "rope_kv",
    "attn_decode", "attn_prefill", "softcap", "sample",
};

void ak_table_free(ak_table *t) {
    free(t->cmds);
    free(t->labels);
    memset(t, 0, sizeof *t);
}

ak_cmd *ak_table_push(ak_table *t, ak_kernel k, const void *params, size_t psize, const char *label) {
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        ak_cmd *c = realloc(t->cmds, (size_t)cap * sizeof *c);
        if (!c) return NULL;
        t->cmds = c;
        char (*l)[32] = realloc(t->labels, (size_t)cap * sizeof *l);
        if (!l) return NULL;
        t->labels = l;
        t->cap = cap;
    }
    ak_cmd *c = &t->cmds[t->n];
    memset(c, 0, sizeof *c);
    c->kernel = (uint16_t)k;
    memcpy(c->params, params, psize);
    snprintf(t->labels[t->n], sizeof t->labels[0], "%s", label);
    t->n++;
    return c;
}

void ak_cmd_bind(ak_cmd *c, int slot, ak_buf_id buf, size_t off) {
    c->bind[slot].buf = (uint32_t)buf;
    c->bind[slot].off = off;
    if (slot + 1 > c->nbind) c->nbind = (uint8_t)(slot + 1);
}

static void put_i32(uint8_t *params, int off, int32_t v) { memcpy(params + off, &v, 4); }

void ak_cmd_patch(ak_cmd *dst, const ak_cmd *src, int pos, int n) {
    *dst = *src;
    if (src->patch & AK_PATCH_POS) put_i32(dst->params, src->off_pos, pos);
    if (src->patch & AK_PATCH_KVLEN) put_i32(dst->params, src->off_kv, pos + n);
    if (src->patch & AK_PATCH_N) put_i32(dst->params, src->off_n, n);
    if (src->patch & AK_PATCH_TOK_IN) dst->bind[src->bind_tok].off += 4 * (uint64_t)pos;
    if (src->patch & AK_PATCH_TOK_OUT) dst->bind[src->bind_tok].off += 4 * (uint64_t)(pos + n);
}

void ak_cmd_describe(const ak_table *t, int i, char *buf, size_t size) {
    static const char *const fused[] = {"norm in", "residual add out", "act(g) * u out", "act(g) * u in",
                                        "rope_kv", "splits out", "split merge in", "post-norm add in"};
    const ak_cmd *c = &t->cmds[i];
    int n = snprintf(buf, size, "%-28s %s", t->labels[i], c->kernel < AK_K_COUNT ? ak_kernel_names[c->kernel] : "?");
    const char *sep = " (";
    for (int f = 0; f < (int)(sizeof fused / sizeof *fused); f++) {
        if (!(c->fuse & (1u << f)) || n < 0 || (size_t)n >= size) continue;
        n += snprintf(buf + n, size - (size_t)n, "%s%s", sep, fused[f]);
        sep = ", ";
    }
    if (c->fuse && n >= 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, ")");
}
