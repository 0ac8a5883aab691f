/* SentencePiece-style BPE (tokenizer.ggml.model = llama): spaces become U+2581, an
 * optional space prefix, then adjacent pieces merge while their concatenation is a
 * vocabulary token, best score first (leftmost on ties); characters left outside the
 * vocabulary fall back to <0xXX> byte tokens. */
#include <stdlib.h>
#include <string.h>
#include "model/tokenizer_int.h"
#include "model/unicode.h"

typedef struct { int prev, next; uint32_t start, len; } spm_sym;

typedef struct {
    const ak_tokenizer *t;
    const char *buf;
    spm_sym *sym;
    ak_bigram_heap heap;
} spm_state;

static bool try_pair(spm_state *s, int l, int r) {
    if (l < 0 || r < 0) return true;
    uint32_t len = s->sym[l].len + s->sym[r].len;
    int32_t id = ak_tok_lookup(s->t, s->buf + s->sym[l].start, len);
    if (!ak_tok_mergeable(s->t, id)) return true;
    return ak_heap_push(&s->heap, (ak_bigram){-(double)s->t->scores[id], l, r, len});
}

static void emit(const ak_tokenizer *t, const char *p, uint32_t n, ak_tokout *o) {
    int32_t id = ak_tok_lookup(t, p, n);
    if (ak_tok_mergeable(t, id)) { ak_tokout_push(o, id); return; }
    for (uint32_t i = 0; i < n; i++) { /* byte fallback */
        int32_t b = t->byte_id[(unsigned char)p[i]];
        if (b < 0) { if (t->unk >= 0) ak_tokout_push(o, t->unk); return; }
        ak_tokout_push(o, b);
    }
}

ak_status ak_spm_encode(const ak_tokenizer *t, const char *s, size_t len, bool after_special, ak_tokout *o) {
    bool prefix = t->add_space_prefix && after_special;
    size_t spaces = 0;
    for (size_t i = 0; i < len; i++) spaces += s[i] == ' ';
    size_t blen = len + 2 * spaces + (prefix ? 3 : 0); /* each space becomes 3 bytes */
    if (blen > 0x7FFFFFFF) return AK_ERR_ARG;
    char *buf = malloc(blen);
    spm_sym *sym = malloc((blen ? blen : 1) * sizeof *sym);
    spm_state st = {t, buf, sym, {0}};
    ak_status rc = AK_ERR_NOMEM;
    if (!buf || !sym) goto out;
    size_t b = 0;
    if (prefix) { memcpy(buf, "\xE2\x96\x81", 3); b = 3; }
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ') { memcpy(buf + b, "\xE2\x96\x81", 3); b += 3; }
        else buf[b++] = s[i];
    }
    int n = 0;
    for (size_t i = 0; i < blen;) {
        size_t adv;
        ak_utf8_next(buf + i, blen - i, &adv);
        sym[n] = (spm_sym){n - 1, n + 1, (uint32_t)i, (uint32_t)adv};
        n++;
        i += adv;
    }
    if (n == 0) { rc = AK_OK; goto out; }
    sym[n - 1].next = -1;
    for (int i = 0; i + 1 < n; i++)
        if (!try_pair(&st, i, i + 1)) goto out;
    while (st.heap.n) {
        ak_bigram g = ak_heap_pop(&st.heap);
        spm_sym *l = &sym[g.left], *r = &sym[g.right];
        if (!l->len || !r->len || l->next != g.right || l->len + r->len != g.len) continue; /* stale */
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = g.left;
        if (!try_pair(&st, l->prev, g.left) || !try_pair(&st, g.left, l->next)) goto out;
    }
    for (int i = 0; i >= 0; i = sym[i].next) emit(t, buf + sym[i].start, sym[i].len, o);
    rc = AK_OK;
out:
    free(st.heap.a);
    free(sym);
    free(buf);
    return rc;
}
