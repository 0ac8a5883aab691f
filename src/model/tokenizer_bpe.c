/* Byte-level BPE (tokenizer.ggml.model = gpt2): the pre-tokenizer named by
 * tokenizer.ggml.pre splits text into words (hand-written matchers for the regexes
 * below), each word's bytes map to GPT-2's printable code points, and adjacent
 * symbols merge by the rank of tokenizer.ggml.merges, lowest first, leftmost on ties.
 *
 * gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
 *         | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * qwen2:  as llama3 with \p{N} one at a time
 * smollm: every \p{N} on its own, then gpt2 on the text between */
#include <stdlib.h>
#include <string.h>
#include "model/tokenizer_int.h"
#include "model/unicode.h"

/* GPT-2 maps the 188 printable bytes to themselves and the rest, in order, to U+0100.. */
uint32_t ak_bpe_byte_cp(unsigned char b) {
    if (b <= 0x20) return 256u + b;
    if (b >= 0x7F && b <= 0xA0) return 256u + 33u + (b - 0x7Fu);
    if (b == 0xAD) return 256u + 67u;
    return b;
}

int ak_bpe_cp_byte(uint32_t cp) {
    if (cp < 256) return (cp <= 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) ? -1 : (int)cp;
    if (cp < 256 + 33) return (int)(cp - 256);
    if (cp < 256 + 67) return (int)(0x7F + cp - 256 - 33);
    if (cp == 256 + 67) return 0xAD;
    return -1;
}

bool ak_bpe_pre_from_name(const char *name, ak_tok_pre *pre, bool *ignore_merges) {
    /* names as llama.cpp's converter writes them; only families whose regex is one of ours */
    static const struct { const char *name; ak_tok_pre pre; bool ignore_merges; } tab[] = {
        {"default", AK_PRE_GPT2, false},     {"gpt2", AK_PRE_GPT2, false},       {"gpt-2", AK_PRE_GPT2, false},
        {"mpt", AK_PRE_GPT2, false},         {"olmo", AK_PRE_GPT2, false},       {"llama-bpe", AK_PRE_LLAMA3, true},
        {"llama3", AK_PRE_LLAMA3, true},     {"llama-v3", AK_PRE_LLAMA3, true},  {"falcon3", AK_PRE_LLAMA3, true},
        {"dbrx", AK_PRE_LLAMA3, false},      {"smaug-bpe", AK_PRE_LLAMA3, false}, {"qwen2", AK_PRE_QWEN2, false},
        {"deepseek-r1-qwen", AK_PRE_QWEN2, false}, {"smollm", AK_PRE_SMOLLM, false}, {"starcoder", AK_PRE_SMOLLM, false},
        {"refact", AK_PRE_SMOLLM, false},    {"codeshell", AK_PRE_SMOLLM, false},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (strcmp(name, tab[i].name) == 0) {
            *pre = tab[i].pre;
            *ignore_merges = tab[i].ignore_merges;
            return true;
        }
    return false;
}

/* ---- pre-tokenizers ---- */

enum { F_L = 1, F_N = 2, F_S = 4 }; /* letter, number, whitespace; none of them = "other" */

typedef struct { const uint32_t *c; const uint8_t *f; } cps;

#define IS(v, i, e, fl) ((i) < (e) && ((v)->f[i] & (fl)))
#define OTHER(v, i, e) ((i) < (e) && !((v)->f[i] & (F_L | F_N | F_S)))
#define NL(x) ((x) == '\r' || (x) == '\n')

static size_t contraction(const cps *v, size_t i, size_t e, bool fold) {
    if (v->c[i] != '\'' || i + 1 >= e) return 0;
    uint32_t a = v->c[i + 1], b = i + 2 < e ? v->c[i + 2] : 0;
    if (fold) {
        if (a >= 'A' && a <= 'Z') a += 32;
        if (b >= 'A' && b <= 'Z') b += 32;
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (((a == 'r' || a == 'v') && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* \s+(?!\S)|\s+ at i (a whitespace): a run followed by a word leaves it its last space. */
static size_t space_run(const cps *v, size_t i, size_t e) {
    size_t j = i;
    while (IS(v, j, e, F_S)) j++;
    return (j < e && j - 1 > i) ? j - 1 : j;
}

static size_t match_gpt2(const cps *v, size_t i, size_t e) {
    size_t j = contraction(v, i, e, false);
    if (j) return i + j;
    j = v->c[i] == ' ' ? i + 1 : i; /* optional leading space */
    if (IS(v, j, e, F_L)) { while (IS(v, j, e, F_L)) j++; return j; }
    if (IS(v, j, e, F_N)) { while (IS(v, j, e, F_N)) j++; return j; }
    if (OTHER(v, j, e)) { while (OTHER(v, j, e)) j++; return j; }
    return space_run(v, i, e);
}

static size_t match_llama3(const cps *v, size_t i, size_t e, size_t max_digits) {
    size_t j = contraction(v, i, e, true);
    if (j) return i + j;
    uint32_t c = v->c[i];
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    j = (!NL(c) && !IS(v, i, e, F_L | F_N) && IS(v, i + 1, e, F_L)) ? i + 1 : i;
    if (IS(v, j, e, F_L)) { while (IS(v, j, e, F_L)) j++; return j; }
    if (IS(v, i, e, F_N)) { /* \p{N}{1,max} */
        for (j = i; j < e && j - i < max_digits && IS(v, j, e, F_N);) j++;
        return j;
    }
    j = c == ' ' ? i + 1 : i; /* ' ?[^\s\p{L}\p{N}]+[\r\n]*' */
    if (OTHER(v, j, e)) {
        while (OTHER(v, j, e)) j++;
        while (j < e && NL(v->c[j])) j++;
        return j;
    }
    /* \s*[\r\n]+ : through the last newline of the whitespace run */
    size_t k = i;
    while (IS(v, k, e, F_S)) k++;
    for (size_t m = k; m > i; m--)
        if (NL(v->c[m - 1])) return m;
    return space_run(v, i, e);
}

static size_t match(ak_tok_pre pre, const cps *v, size_t i, size_t e) {
    switch (pre) {
    case AK_PRE_LLAMA3: return match_llama3(v, i, e, 3);
    case AK_PRE_QWEN2: return match_llama3(v, i, e, 1);
    default: return match_gpt2(v, i, e);
    }
}

long ak_bpe_split(ak_tok_pre pre, const char *s, size_t len, size_t **ends_out) {
    uint32_t *c = malloc((len ? len : 1) * sizeof *c);
    uint8_t *f = malloc(len ? len : 1);
    size_t *off = malloc((len + 1) * sizeof *off), *ends = malloc((len ? len : 1) * sizeof *ends);
    long nw = -1;
    if (!c || !f || !off || !ends) goto out;
    size_t n = 0;
    for (size_t i = 0; i < len; n++) {
        size_t adv;
        uint32_t cp = ak_utf8_next(s + i, len - i, &adv);
        int k = ak_uc_class(cp);
        c[n] = cp;
        f[n] = (uint8_t)((k == AK_UC_L ? F_L : k == AK_UC_N ? F_N : 0) | (ak_uc_is_space(cp) ? F_S : 0));
        off[n] = i;
        i += adv;
    }
    off[n] = len;
    cps v = {c, f};
    nw = 0;
    size_t e = pre == AK_PRE_SMOLLM ? 0 : n; /* end of the text the regex sees from i */
    for (size_t i = 0; i < n;) {
        if (pre == AK_PRE_SMOLLM) { /* digits stand alone; the regex sees the text between */
            if (f[i] & F_N) { ends[nw++] = off[++i]; continue; }
            if (e <= i) /* the next digit: looked for once per stretch, not once per word */
                for (e = i; e < n && !(f[e] & F_N);) e++;
        }
        size_t j = match(pre, &v, i, e);
        if (j <= i) j = i + 1; /* cannot happen: every codepoint matches some branch */
        ends[nw++] = off[j];
        i = j;
    }
    *ends_out = ends;
    ends = NULL;
out:
    free(c); free(f); free(off); free(ends);
    return nw;
}

/* ---- merges ---- */

static bool merge_find(const ak_tokenizer *t, int32_t a, int32_t b, uint32_t *rank, int32_t *id) {
    if (a < 0 || b < 0) return false;
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (uint32_t i = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 40) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        if (t->merge_id[i] < 0) return false;
        if (t->merge_key[i] == key) { *rank = t->merge_rank[i]; *id = t->merge_id[i]; return true; }
    }
}

typedef struct { int prev, next; int32_t id, merged; } bpe_sym; /* merged: what the pair starting here makes */

/* The queue key of the pair that starts at symbol l: its merge rank, if it has one. */
static uint64_t pair_key(const ak_tokenizer *t, bpe_sym *sym, int l) {
    uint32_t rank;
    int r = sym[l].next;
    if (r < 0 || !merge_find(t, sym[l].id, sym[r].id, &rank, &sym[l].merged)) return AK_PAIR_NONE;
    return ak_pair_key(rank, l);
}

/* One pre-tokenized word; sym and map are scratch of at least n entries / 2n bytes. */
static ak_status encode_word(const ak_tokenizer *t, const unsigned char *w, size_t n, bpe_sym *sym, char *map,
                             ak_pairq *q, ak_tokout *o) {
    if (t->ignore_merges) { /* the whole word is a token: take it (llama-bpe) */
        size_t m = 0;
        for (size_t i = 0; i < n; i++) m += (size_t)ak_utf8_put(ak_bpe_byte_cp(w[i]), map + m);
        int32_t id = ak_tok_lookup(t, map, m);
        if (id >= 0) { ak_tokout_push(o, id); return AK_OK; }
    }
    if (n == 1) { /* a lone byte (digits stand alone in smollm, qwen2) */
        if (t->byte_id[w[0]] >= 0) ak_tokout_push(o, t->byte_id[w[0]]);
        return AK_OK;
    }
    for (size_t i = 0; i < n; i++) sym[i] = (bpe_sym){(int)i - 1, i + 1 < n ? (int)i + 1 : -1, t->byte_id[w[i]], -1};
    if (!ak_pairq_reset(q, n)) return AK_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) ak_pairq_leaf(q, i, pair_key(t, sym, (int)i));
    ak_pairq_build(q);
    for (uint64_t k; (k = ak_pairq_top(q)) != AK_PAIR_NONE;) { /* the best pair absorbs its right symbol */
        int left = ak_pair_pos(k);
        bpe_sym *l = &sym[left], *r = &sym[l->next];
        ak_pairq_set(q, (size_t)l->next, AK_PAIR_NONE);
        l->id = l->merged;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = left;
        ak_pairq_set(q, (size_t)left, pair_key(t, sym, left));
        if (l->prev >= 0) ak_pairq_set(q, (size_t)l->prev, pair_key(t, sym, l->prev));
    }
    /* a byte whose mapped char is not in the vocabulary is dropped, as HF (no unk
     * token in byte-level BPE) and llama.cpp do; unk would be wrong for models whose
     * unk is <|endoftext|> */
    for (int i = 0; i >= 0; i = sym[i].next)
        if (sym[i].id >= 0) ak_tokout_push(o, sym[i].id);
    return AK_OK;
}

ak_status ak_bpe_encode(const ak_tokenizer *t, const char *s, size_t len, ak_tokout *o) {
    size_t *ends = NULL;
    long nw = ak_bpe_split(t->pre, s, len, &ends);
    if (nw < 0) return AK_ERR_NOMEM;
    size_t longest = 1;
    for (long k = 0, start = 0; k < nw; start = (long)ends[k++])
        if (ends[k] - (size_t)start > longest) longest = ends[k] - (size_t)start;
    bpe_sym *sym = malloc(longest * sizeof *sym);
    char *map = malloc(2 * longest);
    ak_pairq q = {0};
    ak_status rc = (sym && map && ak_pairq_reset(&q, longest)) ? AK_OK : AK_ERR_NOMEM;
    size_t start = 0;
    for (long k = 0; k < nw && !rc; k++) {
        rc = encode_word(t, (const unsigned char *)s + start, ends[k] - start, sym, map, &q, o);
        start = ends[k];
    }
    free(q.t); free(sym); free(map); free(ends);
    return rc;
}
