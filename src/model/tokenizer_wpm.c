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

/* Normalized codepoints of s into out (room for 3 * len + 1); returns the count. */
static size_t normalize(const ak_tokenizer *t, const char *s, size_t len, uint32_t *out) {
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t adv;
        uint32_t cp = ak_utf8_next(s + i, len - i, &adv);
        i += adv;
        if (cp == AK_UTF8_INVALID || cp == 0 || cp == 0xFFFD) continue;
        int k = ak_uc_class(cp);
        bool ws = cp == '\t' || cp == '\n' || cp == '\r';
        if (!ws && (k == AK_UC_CC || k == AK_UC_CF || k == AK_UC_OTHER)) continue;
        if (ws || ak_uc_is_space(cp)) { out[n++] = ' '; continue; }
        if (ak_uc_is_cjk(cp)) { out[n++] = ' '; out[n++] = cp; out[n++] = ' '; continue; }
        if (!t->lowercase) { out[n++] = cp; continue; }
        uint32_t d[3];
        int m = ak_uc_strip_accents(cp, d);
        for (int j = 0; j < m; j++) out[n++] = ak_uc_lower(d[j]);
    }
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
    uint32_t *cp = malloc((3 * len + 1) * sizeof *cp);
    size_t *at = malloc((WPM_MAX_CHARS + 1) * sizeof *at);
    char *buf = malloc(3 + 4 * WPM_MAX_CHARS);
    ak_status rc = AK_ERR_NOMEM;
    if (!cp || !at || !buf) goto out;
    size_t n = normalize(t, s, len, cp);
    for (size_t i = 0; i < n;) {
        if (ak_uc_is_space(cp[i])) { i++; continue; }
        size_t j = i + 1;
        if (!is_punct(cp[i]))
            while (j < n && !ak_uc_is_space(cp[j]) && !is_punct(cp[j])) j++;
        encode_word(t, cp + i, j - i, buf, at, o);
        i = j;
    }
    rc = AK_OK;
out:
    free(cp); free(at); free(buf);
    return rc;
}
