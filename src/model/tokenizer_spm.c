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
} spm_state;

/* The queue priority of a score, as an integer: higher scores come first. The bits of
 * a float ordered as unsigned integers (negatives flipped); -0 counts as 0. */
static uint32_t score_prio(float score) {
    float p = -score;
    uint32_t u;
    if (p == 0) p = 0;
    memcpy(&u, &p, sizeof u);
    return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

/* The queue key of the pair that starts at symbol l: its concatenation's score, if
 * that is a vocabulary token. */
static uint64_t pair_key(const spm_state *s, int l) {
    int r = s->sym[l].next;
    if (r < 0) return AK_PAIR_NONE;
    int32_t id = ak_tok_lookup(s->t, s->buf + s->sym[l].start, s->sym[l].len + s->sym[r].len);
    return ak_tok_mergeable(s->t, id) ? ak_pair_key(score_prio(s->t->scores[id]), l) : AK_PAIR_NONE;
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
    spm_state st = {t, buf, sym};
    ak_pairq q = {0};
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
    if (!ak_pairq_reset(&q, (size_t)n)) goto out;
    bool any = false; /* text without a single pair (digits, say) needs no tree */
    for (int i = 0; i < n; i++) {
        uint64_t k = pair_key(&st, i);
        ak_pairq_leaf(&q, (size_t)i, k);
        any |= k != AK_PAIR_NONE;
    }
    if (any) ak_pairq_build(&q);
    for (uint64_t k; any && (k = ak_pairq_top(&q)) != AK_PAIR_NONE;) { /* the best pair absorbs its right symbol */
        int left = ak_pair_pos(k);
        spm_sym *l = &sym[left], *r = &sym[l->next];
        ak_pairq_set(&q, (size_t)l->next, AK_PAIR_NONE);
        l->len += r->len;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = left;
        ak_pairq_set(&q, (size_t)left, pair_key(&st, left));
        if (l->prev >= 0) ak_pairq_set(&q, (size_t)l->prev, pair_key(&st, l->prev));
    }
    for (int i = 0; i >= 0; i = sym[i].next) emit(t, buf + sym[i].start, sym[i].len, o);
    rc = AK_OK;
out:
    free(q.t);
    free(sym);
    free(buf);
    return rc;
}
