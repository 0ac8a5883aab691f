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

static bool bigram_before(const ak_bigram *a, const ak_bigram *b) {
    return a->prio < b->prio || (a->prio == b->prio && a->left < b->left);
}

bool ak_heap_push(ak_bigram_heap *h, ak_bigram b) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        ak_bigram *a = realloc(h->a, cap * sizeof *a);
        if (!a) return false;
        h->a = a;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0 && bigram_before(&b, &h->a[(i - 1) / 2])) {
        h->a[i] = h->a[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->a[i] = b;
    return true;
}

ak_bigram ak_heap_pop(ak_bigram_heap *h) {
    ak_bigram top = h->a[0], last = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && bigram_before(&h->a[c + 1], &h->a[c])) c++;
        if (!bigram_before(&h->a[c], &last)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n) h->a[i] = last;
    return top;
}
