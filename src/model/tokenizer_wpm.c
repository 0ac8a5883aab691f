/* WordPiece (tokenizer.ggml.model = bert), as BERT's basic tokenizer + WordPiece:
 * drop control characters, map whitespace to spaces, isolate CJK ideographs; for
 * uncased vocabularies strip accents (NFD without Mn) and lowercase; split on
 * whitespace and punctuation; then greedy longest match per word. GGUF stores
 * word-initial pieces with a U+2581 prefix and continuations without "##". */
#include <stdlib.h>
#include <string.h>
#include "model/tokenizer_int.h"
#include "model/unicode.h"

#define WPM_MAX_CHARS 100 /* longer words are [UNK], as max_input_chars_per_word */

static bool is_punct(uint32_t cp) {
    if (cp < 0x80)
        return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126);
    return ak_uc_class(cp) == AK_UC_P;
}

enum { K_WORD, K_SPACE, K_PUNCT }; /* what splits words */

static uint8_t kind_of(uint32_t cp) { return ak_uc_is_space(cp) ? K_SPACE : is_punct(cp) ? K_PUNCT : K_WORD; }

/* One codepoint normalized: 0 to 3 codepoints in out. */
static int normalize_cp(const ak_tokenizer *t, uint32_t cp, uint32_t out[3]) {
    if (cp == AK_UTF8_INVALID || cp == 0 || cp == 0xFFFD) return 0;
    int k = ak_uc_class(cp);
    bool ws = cp == '\t' || cp == '\n' || cp == '\r';
    if (!ws && (k == AK_UC_CC || k == AK_UC_CF || k == AK_UC_OTHER)) return 0;
    if (ws || ak_uc_is_space(cp)) { out[0] = ' '; return 1; }
    if (ak_uc_is_cjk(cp)) { out[0] = ' '; out[1] = cp; out[2] = ' '; return 3; }
    if (!t->lowercase) { out[0] = cp; return 1; }
    uint32_t d[3];
    int m = ak_uc_strip_accents(cp, d);
    for (int j = 0; j < m; j++) out[j] = ak_uc_lower(d[j]);
    return m;
}

/* A codepoint costs table searches to normalize and classify (even ASCII punctuation
 * and spaces), and text repeats few distinct ones: each call remembers them in a
 * direct-mapped table sized to the text. */
typedef struct { uint32_t cp; uint8_t n, kind[3]; uint32_t out[3]; } norm_memo;

/* Normalized codepoints of s into out and their kinds into kind (room for 3 * len + 1);
 * returns the count. */
static size_t normalize(const ak_tokenizer *t, const char *s, size_t len, uint32_t *out, uint8_t *kind) {
    size_t n = 0, slots = 16;
    while (slots < 4096 && slots < len) slots *= 2;
    norm_memo *memo = calloc(slots, sizeof *memo); /* cp 0 (never looked up) marks an empty slot */
    norm_memo one;
    for (size_t i = 0; i < len;) {
        size_t adv;
        uint32_t cp = ak_utf8_next(s + i, len - i, &adv);
        i += adv;
        if (cp == 0) continue;
        norm_memo *e = memo ? &memo[cp & (slots - 1)] : &one; /* without memory: no memo */
        if (!memo || e->cp != cp) {
            e->cp = cp;
            e->n = (uint8_t)normalize_cp(t, cp, e->out);
            for (int j = 0; j < e->n; j++) e->kind[j] = kind_of(e->out[j]);
        }
        for (int j = 0; j < e->n; j++) { out[n] = e->out[j]; kind[n++] = e->kind[j]; }
    }
    free(memo);
    return n;
}

/* One word (codepoints w[0..n)); buf has room for 3 + 4 * n bytes, at[] n + 1 entries. */
static void encode_word(const ak_tokenizer *t, const uint32_t *w, size_t n, char *buf, size_t *at, ak_tokout *o) {
    if (n > WPM_MAX_CHARS) { if (t->unk >= 0) ak_tokout_push(o, t->unk); return; }
    memcpy(buf, "\xE2\x96\x81", 3);
    size_t b = 3;
    for (size_t i = 0; i < n; i++) {
        at[i] = b;
        b += (size_t)ak_utf8_put(w[i], buf + b);
    }
    at[n] = b;
    int first = o->n;
    for (size_t start = 0; start < n;) {
        int32_t id = -1;
        size_t from = start ? at[start] : 0; /* the first piece carries the U+2581 */
        /* no piece is longer than the longest token text: try ends from there, not from
         * the end of the word (up to 100 characters, each end a hash of the whole piece) */
        size_t end = n - start > t->max_text_len ? start + t->max_text_len : n;
        while (end > start && at[end] - from > t->max_text_len) end--;
        for (; end > start; end--)
            if ((id = ak_tok_lookup(t, buf + from, at[end] - from)) >= 0) break;
        if (id < 0) { /* no piece fits: the whole word is unknown */
            o->n = first;
            if (t->unk >= 0) ak_tokout_push(o, t->unk);
            return;
        }
        ak_tokout_push(o, id);
        start = end;
    }
}

ak_status ak_wpm_encode(const ak_tokenizer *t, const char *s, size_t len, ak_tokout *o) {
    size_t at[WPM_MAX_CHARS + 1];
    char buf[3 + 4 * WPM_MAX_CHARS];
    uint32_t *cp = malloc((3 * len + 1) * (sizeof *cp + 1)); /* then the kinds */
    if (!cp) return AK_ERR_NOMEM;
    uint8_t *kind = (uint8_t *)(cp + 3 * len + 1);
    size_t n = normalize(t, s, len, cp, kind);
    for (size_t i = 0; i < n;) {
        if (kind[i] == K_SPACE) { i++; continue; }
        size_t j = i + 1;
        if (kind[i] != K_PUNCT)
            while (j < n && kind[j] == K_WORD) j++;
        encode_word(t, cp + i, j - i, buf, at, o);
        i = j;
    }
    free(cp);
    return AK_OK;
}
