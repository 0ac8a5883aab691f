/* Vocabulary lookups and the merge queue, shared by every tokenizer algorithm. */
#include "model/vocab.h"
#include <stdlib.h>
#include <string.h>

uint32_t ak_vocab_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

int32_t ak_tok_lookup(const ak_tokenizer *t, const char *s, size_t len) {
    for (uint32_t i = ak_vocab_hash(s, len) & t->hash_mask;; i = (i + 1) & t->hash_mask) {
        uint32_t v = t->hash[i];
        if (!v) return -1;
        int32_t id = (int32_t)v - 1;
        if (t->text_len[id] == len && memcmp(t->arena + t->text_off[id], s, len) == 0) return id;
    }
}

bool ak_tok_mergeable(const ak_tokenizer *t, int32_t id) {
    return id >= 0 && (t->types[id] == AK_TT_NORMAL || t->types[id] == AK_TT_UNUSED);
}

/* ---- merge queue ---- */

/* Unlike a heap of queued pairs it holds no stale entries, and a change walks up only
 * while the minimum changes: a long word's merges stay near the leaves they touch
 * instead of sifting through a heap as large as the word. */
bool ak_pairq_reset(ak_pairq *q, size_t n) {
    size_t need = 2 * n > 2 ? 2 * n : 2;
    if (need > q->cap) {
        free(q->t);
        q->t = malloc(need * sizeof *q->t);
        q->cap = q->t ? need : 0;
        if (!q->t) return false;
    }
    q->n = n;
    return true;
}

static uint64_t children_min(const ak_pairq *q, size_t j) {
    return q->t[2 * j] < q->t[2 * j + 1] ? q->t[2 * j] : q->t[2 * j + 1];
}

void ak_pairq_build(ak_pairq *q) {
    for (size_t j = q->n; j-- > 1;) q->t[j] = children_min(q, j);
}

void ak_pairq_set(ak_pairq *q, size_t i, uint64_t key) {
    size_t j = q->n + i;
    q->t[j] = key;
    for (j >>= 1; j >= 1; j >>= 1) {
        uint64_t m = children_min(q, j);
        if (q->t[j] == m) break; /* the ancestors saw this value already */
        q->t[j] = m;
    }
}
