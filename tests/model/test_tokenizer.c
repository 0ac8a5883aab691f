/* Tokenizer tests: exact ids against Hugging Face references (tools/gen_tokenizer_refs.py)
 * for the fixture vocabularies and, with --real MODELS_DIR, the models scripts/get-model
 * fetches; pre-tokenizer splits, round trips, BOS/EOS rules, streaming detokenization. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "format/gguf.h"
#include "model/tokenizer.h"
#include "model/unicode.h"
#include "test_util.h"

static char g_root[4096]; /* repository root */

static const char *src_path(const char *rel) {
    static char buf[4][4608];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s%s", g_root, rel);
    return buf[k];
}

static void find_root(void) {
    const char *env = getenv("AKUNU_SRC");
    if (env) { snprintf(g_root, sizeof g_root, "%s/", env); return; }
    const char *f = __FILE__, *tail = strstr(f, "tests/model/test_tokenizer.c");
    snprintf(g_root, sizeof g_root, "%.*s", tail ? (int)(tail - f) : 0, f);
}

typedef struct { char *data; char **line; size_t *len; int n; } lines_t;

static bool read_lines(const char *path, lines_t *l) {
    size_t size;
    memset(l, 0, sizeof *l);
    char *d = ak_read_file(path, &size);
    if (!d) return false;
    int cap = 1;
    for (size_t i = 0; i < size; i++) cap += d[i] == '\n';
    l->data = d;
    l->line = malloc((size_t)cap * sizeof *l->line);
    l->len = malloc((size_t)cap * sizeof *l->len);
    size_t start = 0;
    for (size_t i = 0; i <= size; i++) {
        if (i < size && d[i] != '\n') continue;
        if (i == size && start == size) break; /* no line after the final newline */
        l->line[l->n] = d + start;
        l->len[l->n++] = i - start;
        start = i + 1;
    }
    return true;
}

static void free_lines(lines_t *l) { free(l->data); free(l->line); free(l->len); }

static int parse_ids(const char *s, size_t n, int32_t *ids, int cap) {
    int k = 0;
    for (size_t i = 0; i < n;) {
        while (i < n && s[i] == ' ') i++;
        if (i >= n) break;
        long v = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') v = v * 10 + (s[i++] - '0');
        if (k < cap) ids[k] = (int32_t)v;
        k++;
    }
    return k;
}

static lines_t g_corpus;
static char *g_whole;
static size_t g_whole_len;

static bool utf8_valid(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t adv;
        if (ak_utf8_next(s + i, n - i, &adv) == AK_UTF8_INVALID) return false;
        i += adv;
    }
    return true;
}

/* ---- pre-tokenizers (no vocabulary needed) ---- */

/* The (buf, cap, &n) calls as plain sizes for the loops below: -1 when they fail. */
static long piece(const ak_tokenizer *t, int32_t id, bool special, char *buf, size_t cap) {
    size_t n = 0;
    return ak_tokenizer_piece(t, id, special, buf, cap, &n, NULL) ? -1 : (long)n;
}

static long decode(const ak_tokenizer *t, const int32_t *ids, int n_ids, bool special, char *buf, size_t cap) {
    size_t n = 0;
    return ak_tokenizer_decode(t, ids, n_ids, special, buf, cap, &n, NULL) ? -1 : (long)n;
}

static long push(ak_detok *d, const ak_tokenizer *t, int32_t id, char *out, size_t cap) {
    size_t n = 0;
    return ak_detok_push(d, t, id, out, cap, &n, NULL) ? -1 : (long)n;
}

static long flush(ak_detok *d, char *out, size_t cap) {
    size_t n = 0;
    return ak_detok_flush(d, out, cap, &n, NULL) ? -1 : (long)n;
}

static void test_pretokenizers(void) {
    const char *pres[] = {"gpt2", "llama3", "qwen2", "smollm"};
    size_t *ends = malloc(4096 * sizeof *ends);
    int32_t *ref = malloc(4096 * sizeof *ref);
    for (int p = 0; p < 4; p++) {
        char rel[128];
        snprintf(rel, sizeof rel, "tests/data/tokenizer_refs/split-%s.txt", pres[p]);
        lines_t want;
        if (!read_lines(src_path(rel), &want)) { CHECK(0, "missing %s", rel); continue; }
        CHECK(want.n == g_corpus.n, "%s: %d lines, corpus has %d", rel, want.n, g_corpus.n);
        int bad = 0;
        for (int i = 0; i < want.n && i < g_corpus.n; i++) {
            int nr = parse_ids(want.line[i], want.len[i], ref, 4096);
            int n = 0;
            ak_pretokenize(pres[p], g_corpus.line[i], g_corpus.len[i], ends, 4096, &n, NULL);
            bool ok = n == nr;
            for (int k = 0; ok && k < n; k++) ok = ends[k] == (size_t)ref[k];
            if (!ok && bad++ < 3) fprintf(stderr, "  %s split differs on line %d: %.*s\n", pres[p], i + 1,
                                          (int)g_corpus.len[i], g_corpus.line[i]);
        }
        CHECK(bad == 0, "pre-tokenizer %s: %d of %d lines differ", pres[p], bad, want.n);
        printf("pre-tokenizer %-7s %d lines, %d differ\n", pres[p], want.n, bad);
        free_lines(&want);
    }
    int nw = 0;
    CHECK(ak_pretokenize("no-such-pre", "x", 1, ends, 1, &nw, NULL) == AK_ERR_UNSUPPORTED, "unknown pre-tokenizer accepted");
    CHECK(ak_pretokenize("gpt2", "a b c", 5, ends, 2, &nw, NULL) == AK_ERR_ARG && nw == 3, "too many words: %d", nw);
    free(ends);
    free(ref);
}

/* ---- ids against references ---- */

static int32_t g_ids[1 << 16], g_ref[1 << 16];

static int compare_file(const ak_tokenizer *t, const char *name, const char *suffix, bool parse_special) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/data/tokenizer_refs/%s%s", name, suffix);
    lines_t want;
    if (!read_lines(src_path(rel), &want)) { CHECK(0, "missing %s", rel); return 0; }
    bool whole = strstr(suffix, "whole") != NULL;
    int n_lines = whole ? 1 : g_corpus.n, bad = 0, total = 0;
    CHECK(want.n == n_lines, "%s: %d lines, expected %d", rel, want.n, n_lines);
    ak_err err;
    for (int i = 0; i < want.n && i < n_lines; i++) {
        const char *s = whole ? g_whole : g_corpus.line[i];
        size_t len = whole ? g_whole_len : g_corpus.len[i];
        int nr = parse_ids(want.line[i], want.len[i], g_ref, 1 << 16), n = 0;
        ak_status st = ak_tokenizer_encode(t, s, len, false, parse_special, g_ids, 1 << 16, &n, &err);
        CHECK(st == AK_OK, "%s line %d: %s", rel, i + 1, err.msg);
        total += nr;
        bool ok = n == nr;
        int k = 0;
        while (ok && k < n && g_ids[k] == g_ref[k]) k++;
        ok = ok && k == n;
        if (!ok) {
            if (bad < 3) {
                for (k = 0; k < n && k < nr && g_ids[k] == g_ref[k]; k++) {}
                fprintf(stderr, "  %s%s line %d differs at id %d (got %d, want %d; %d vs %d ids): %.*s\n", name, suffix,
                        i + 1, k, k < n ? g_ids[k] : -1, k < nr ? g_ref[k] : -1, n, nr, whole ? 60 : (int)len, s);
            }
            bad++;
        }
    }
    CHECK(bad == 0, "%s%s: %d of %d lines differ", name, suffix, bad, want.n);
    printf("%-16s %-11s %4d lines, %6d ids, %d differ\n", name, suffix, want.n, total, bad);
    free_lines(&want);
    return bad;
}

/* decode(encode(s)) == s, and the streaming decoder agrees with it chunk by chunk */
static void test_roundtrip(const ak_tokenizer *t, const char *name, bool parse_special) {
    static char buf[1 << 20], stream[1 << 20];
    ak_err err;
    int bad = 0, bad_stream = 0;
    for (int i = 0; i < g_corpus.n; i++) {
        int n = 0;
        if (ak_tokenizer_encode(t, g_corpus.line[i], g_corpus.len[i], false, parse_special, g_ids, 1 << 16, &n, &err)) {
            CHECK(0, "%s: %s", name, err.msg);
            continue;
        }
        long m = decode(t, g_ids, n, parse_special, buf, sizeof buf);
        if (m != (long)g_corpus.len[i] || memcmp(buf, g_corpus.line[i], (size_t)m) != 0) {
            if (bad++ < 3) fprintf(stderr, "  %s round trip line %d: got '%.*s'\n", name, i + 1, (int)m, buf);
        }
        /* streaming: each chunk valid UTF-8; all chunks = all pieces (the text is valid) */
        ak_detok d;
        ak_detok_init(&d, parse_special);
        size_t o = 0, p = 0;
        bool ok = true;
        for (int k = 0; k < n; k++) {
            long w = push(&d, t, g_ids[k], stream + o, sizeof stream - o);
            ok = ok && w >= 0 && utf8_valid(stream + o, (size_t)w);
            if (w > 0) o += (size_t)w;
            p += (size_t)piece(t, g_ids[k], parse_special, buf + p, sizeof buf - p);
        }
        long w = flush(&d, stream + o, 16);
        ok = ok && w == 0 && o == p && memcmp(stream, buf, o) == 0;
        if (!ok && bad_stream++ < 3) fprintf(stderr, "  %s stream line %d differs\n", name, i + 1);
    }
    CHECK(bad == 0, "%s: %d lines do not round trip", name, bad);
    CHECK(bad_stream == 0, "%s: %d lines stream differently", name, bad_stream);
    printf("%-16s round trip (%s): %d lines, %d differ, %d stream differences\n", name,
           parse_special ? "specials" : "plain", g_corpus.n, bad, bad_stream);
}

/* Invalid UTF-8 goes through byte tokens and comes back byte for byte; the streaming
 * decoder turns it into U+FFFD the way Python's errors="replace" does. */
static void test_invalid_utf8(const ak_tokenizer *t, const char *name, bool all_bytes) {
    static const struct { const char *in; const char *stream; } cases[] = {
        {" \xfe\xfe  hi\xc0\xaf", " \xEF\xBF\xBD\xEF\xBF\xBD  hi\xEF\xBF\xBD\xEF\xBF\xBD"}, /* bytes some vocabs lack */
        {"\xff", "\xEF\xBF\xBD"},
        {"abc\x80" "def", "abc\xEF\xBF\xBD" "def"},
        {"caf\xc3", "caf\xEF\xBF\xBD"},                          /* cut short at the end */
        {"\xe2\x82" "A", "\xEF\xBF\xBD" "A"},                    /* maximal subpart: one U+FFFD */
        {"\xf0\x80\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* overlong */
        {"\xed\xa0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* surrogate */
        {"ok \xc3\xa9\xf0\x9f\x98 x", "ok \xc3\xa9\xEF\xBF\xBD x"},
    };
    char buf[256], stream[256];
    ak_err err;
    for (size_t c = all_bytes ? 0 : 2; c < sizeof cases / sizeof cases[0]; c++) {
        size_t len = strlen(cases[c].in);
        int n = 0;
        ak_status st = ak_tokenizer_encode(t, cases[c].in, len, false, false, g_ids, 1 << 16, &n, &err);
        CHECK(st == AK_OK, "%s: invalid utf-8 case %zu: %s", name, c, err.msg);
        size_t p = 0, o = 0;
        ak_detok d;
        ak_detok_init(&d, false);
        for (int k = 0; k < n; k++) {
            p += (size_t)piece(t, g_ids[k], false, buf + p, sizeof buf - p);
            long w = push(&d, t, g_ids[k], stream + o, sizeof stream - o);
            CHECK(w >= 0, "%s: stream push", name);
            if (w > 0) o += (size_t)w;
        }
        o += (size_t)flush(&d, stream + o, sizeof stream - o);
        /* a SentencePiece prefix adds one leading space to the pieces */
        const char *pb = buf;
        bool prefixed = p == len + 1 && buf[0] == ' ';
        if (prefixed) { pb++; p--; }
        CHECK(p == len && memcmp(pb, cases[c].in, len) == 0, "%s: invalid utf-8 case %zu does not round trip", name, c);
        const char *so = stream;
        if (prefixed && o) { so++; o--; }
        CHECK(o == strlen(cases[c].stream) && memcmp(so, cases[c].stream, o) == 0,
              "%s: stream of invalid case %zu: '%.*s'", name, c, (int)o, so);
    }
}

/* A multi-byte character split over two tokens waits for the second. */
static void test_stream_holdback(const ak_tokenizer *t, const char *name) {
    int32_t b[4];
    const char *e = "\xe2\x82\xac"; /* EUR sign: three byte tokens */
    for (int k = 0; k < 3; k++) {
        char s[1] = {e[k]};
        int n = 0;
        ak_err err;
        /* the token for that single byte: encode it alone and take the last id */
        ak_tokenizer_encode(t, s, 1, false, false, g_ids, 16, &n, &err);
        b[k] = n ? g_ids[n - 1] : -1;
    }
    char out[64];
    ak_detok d;
    ak_detok_init(&d, false);
    CHECK(push(&d, t, b[0], out, 64) == 0, "%s: first byte held back", name);
    CHECK(push(&d, t, b[1], out, 64) == 0, "%s: second byte held back", name);
    size_t need = 0;
    CHECK(ak_detok_push(&d, t, b[2], out, 2, &need, NULL) == AK_ERR_ARG && need == 3, "%s: too small a buffer asks for 3", name);
    CHECK(ak_detok_push(&d, t, b[2], NULL, 0, &need, NULL) == AK_OK && need == 3, "%s: a size query asks for 3", name);
    long w = push(&d, t, b[2], out, 64);
    CHECK(w == 3 && memcmp(out, e, 3) == 0, "%s: euro sign completes (%ld)", name, w);
    push(&d, t, b[0], out, 64);
    CHECK(flush(&d, out, 64) == 3 && memcmp(out, "\xEF\xBF\xBD", 3) == 0, "%s: flush gives U+FFFD", name);
    CHECK(flush(&d, out, 64) == 0, "%s: flush empties", name);
}

static ak_tokenizer *load(const char *path) {
    ak_gguf *g = NULL;
    ak_tokenizer *t = NULL;
    ak_err err;
    if (ak_gguf_open(path, &g, &err)) { CHECK(0, "open %s: %s", path, err.msg); return NULL; }
    if (ak_tokenizer_load(g, &t, &err)) CHECK(0, "tokenizer %s: %s", path, err.msg);
    ak_gguf_close(g); /* the tokenizer must not need the file any more */
    return t;
}

enum { LOSSLESS = 1, LOSSLESS_SPECIALS = 2, ALL_BYTES = 4 };

/* Random mixes of ASCII, UTF-8 fragments, special-token text and stray bytes: no
 * failure, stream chunks always valid UTF-8, and (lossless, all bytes) exact round
 * trips. Also one long word, which a quadratic merge loop would choke on. */
static void test_fuzz(const ak_tokenizer *t, const char *name, int how) {
    static const char *frag[] = {"a", "Z", " ", "  ", "\t", "\n", "\r\n", "7", "42", "'s", "'LL", ".", "!?", "<|im_start|>",
                                 "<s>", "<end_of_turn>", "[CLS]", "\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\x98\x80",
                                 "\xe2\x96\x81", "\xc2\xa0", "\xcc\x81", "\xff", "\x80", "\xe2\x82", "\xf0\x9f", "\x00"};
    static char text[8192], out[1 << 16], stream[1 << 16];
    uint64_t rng = 12345;
    int bad = 0;
    ak_err err;
    for (int it = 0; it < 400; it++) {
        size_t len = 0;
        int parts = (int)(ak_rand_u32(&rng) % 40);
        for (int k = 0; k < parts; k++) {
            const char *f = frag[ak_rand_u32(&rng) % (sizeof frag / sizeof frag[0])];
            size_t fl = strcmp(f, "\x00") == 0 ? 1 : strlen(f);
            memcpy(text + len, f, fl);
            len += fl;
        }
        bool ps = it & 1;
        int n = 0;
        if (ak_tokenizer_encode(t, text, len, it & 2, ps, g_ids, 1 << 16, &n, &err)) { bad++; continue; }
        ak_detok d;
        ak_detok_init(&d, ps);
        size_t o = 0;
        for (int k = 0; k < n; k++) {
            long w = push(&d, t, g_ids[k], stream + o, sizeof stream - o);
            if (w < 0 || !utf8_valid(stream + o, (size_t)w)) bad++;
            if (w > 0) o += (size_t)w;
        }
        long w = flush(&d, stream + o, 16);
        if (w < 0) bad++;
        /* SentencePiece reads a literal U+2581 back as a space */
        bool meta = memmem(text, len, "\xe2\x96\x81", 3) != NULL;
        if ((how & LOSSLESS) && (how & ALL_BYTES) && !ps && !(it & 2) && !meta) {
            long m = decode(t, g_ids, n, false, out, sizeof out);
            if (m != (long)len || memcmp(out, text, len) != 0) bad++;
        }
    }
    static char word[1 << 17];
    for (size_t i = 0; i < sizeof word; i++) word[i] = "ab"[i % 2 ? 1 : 0];
    int n = 0;
    ak_status st = ak_tokenizer_encode(t, word, sizeof word, false, false, g_ids, 1 << 16, &n, &err);
    CHECK(st == AK_OK || (st == AK_ERR_ARG && n > (1 << 16)), "%s: long word: %s", name, err.msg);
    CHECK(bad == 0, "%s: %d fuzz failures", name, bad);
}

static void test_model(const char *path, const char *name, int how) {
    ak_tokenizer *t = load(path);
    if (!t) return;
    compare_file(t, name, ".ids", true);
    compare_file(t, name, ".raw.ids", false);
    compare_file(t, name, ".whole.ids", true);
    test_fuzz(t, name, how);
    if (how & LOSSLESS) {
        test_roundtrip(t, name, false);
        if (how & LOSSLESS_SPECIALS) test_roundtrip(t, name, true);
        test_invalid_utf8(t, name, how & ALL_BYTES);
        test_stream_holdback(t, name);
    }
    ak_tokenizer_free(t);
}

/* BOS/EOS rules, end-of-generation ids, lookups, capacity errors */
static void test_rules(const char *path, const char *name, int32_t bos, int32_t eos, bool add_bos, bool add_eos,
                       const char *eog_text) {
    ak_tokenizer *t = load(path);
    if (!t) return;
    ak_err err;
    int n = 0;
    CHECK(ak_tokenizer_bos(t) == bos && ak_tokenizer_eos(t) == eos, "%s: bos %d eos %d", name, ak_tokenizer_bos(t),
          ak_tokenizer_eos(t));
    CHECK(ak_tokenizer_encode(t, "Hi", 2, true, true, g_ids, 64, &n, &err) == AK_OK, "%s: %s", name, err.msg);
    CHECK((n > 0 && g_ids[0] == bos) == add_bos, "%s: BOS rule (first id %d)", name, n ? g_ids[0] : -1);
    CHECK((n > 0 && g_ids[n - 1] == eos) == add_eos, "%s: EOS rule (last id %d)", name, n ? g_ids[n - 1] : -1);
    int with = n, extra = add_bos + add_eos;
    CHECK(ak_tokenizer_encode(t, "Hi", 2, false, true, g_ids, 64, &n, &err) == AK_OK && n == with - extra,
          "%s: add_special=false adds nothing", name);
    CHECK(ak_tokenizer_encode(t, "", 0, true, true, g_ids, 64, &n, &err) == AK_OK && n == extra, "%s: empty text", name);
    CHECK(ak_tokenizer_encode(t, "Hello world, hello world", 24, false, false, g_ids, 1, &n, &err) == AK_ERR_ARG && n > 1,
          "%s: small cap fails with the needed count (%d)", name, n);
    CHECK(ak_tokenizer_is_eog(t, eos), "%s: eos ends generation", name);
    if (eog_text) {
        int32_t id = ak_tokenizer_find(t, eog_text, strlen(eog_text));
        CHECK(id >= 0 && ak_tokenizer_is_eog(t, id), "%s: %s ends generation", name, eog_text);
        char text[64];
        CHECK(piece(t, id, false, text, 64) == 0, "%s: control piece hidden", name);
        CHECK(piece(t, id, true, text, 64) == (long)strlen(eog_text) && !strcmp(text, eog_text), "%s: control piece shown", name);
    }
    CHECK(!ak_tokenizer_is_eog(t, -1) && !ak_tokenizer_is_eog(t, ak_tokenizer_n_vocab(t)), "%s: bad ids", name);
    size_t sz = 0;
    CHECK(ak_tokenizer_piece(t, ak_tokenizer_n_vocab(t), false, NULL, 0, &sz, &err) == AK_ERR_ARG, "%s: piece of a bad id", name);
    /* size queries with no buffer where a piece is empty (fuzz findings: memcpy and
     * pointer arithmetic on NULL, caught by UBSan): the BOS control token hides its text */
    if (bos >= 0) {
        CHECK(ak_tokenizer_piece(t, bos, false, NULL, 0, &sz, &err) == AK_OK && sz == 0, "%s: size of an empty piece", name);
        int32_t seq[3] = {bos, bos, 300 % ak_tokenizer_n_vocab(t)};
        long want = piece(t, seq[2], false, NULL, 0);
        CHECK(decode(t, seq, 1, false, NULL, 0) == 0, "%s: size of an empty sequence text", name);
        CHECK(decode(t, seq, 3, false, NULL, 0) >= 0 && decode(t, seq, 3, false, NULL, 0) <= want,
              "%s: size query with empty pieces first", name);
    }
    ak_tokenizer_free(t);
}

static void test_hostile(void) {
    /* a gguf without a tokenizer, and one whose model is unknown */
    ak_gguf g;
    memset(&g, 0, sizeof g);
    ak_tokenizer *t = (ak_tokenizer *)1;
    ak_err err;
    CHECK(ak_tokenizer_load(&g, &t, &err) == AK_ERR_FORMAT && t == NULL, "empty metadata rejected");
    ak_gguf_kv kv;
    memset(&kv, 0, sizeof kv);
    kv.key = (ak_str){"tokenizer.ggml.model", 20};
    kv.type = AK_GGUF_STRING;
    kv.v.s = (ak_str){"rwkv", 4};
    g.kv = &kv;
    g.n_kv = 1;
    CHECK(ak_tokenizer_load(&g, &t, &err) == AK_ERR_UNSUPPORTED, "unknown model rejected: %s", err.msg);
    kv.v.s = (ak_str){"gpt2", 4};
    CHECK(ak_tokenizer_load(&g, &t, &err) == AK_ERR_FORMAT, "gpt2 without tokens rejected: %s", err.msg);
}

/* ---- pathological text (bench/tokenize_bench.c measures it) ---- */

typedef struct { const char *p; size_t n; int32_t id; bool user; } special_text;

/* Text made of special-token texts, their proper prefixes and suffixes, and stray
 * bytes, so that special texts overlap and nearly match. */
static size_t special_soup(const special_text *sp, int n_sp, uint64_t *rng, char *out, size_t cap) {
    size_t len = 0;
    int parts = 1 + (int)(ak_rand_u32(rng) % 24);
    for (int k = 0; k < parts; k++) {
        const special_text *s = &sp[ak_rand_u32(rng) % (uint32_t)n_sp];
        uint32_t how = ak_rand_u32(rng) % 10, cut = s->n > 1 ? 1 + ak_rand_u32(rng) % (uint32_t)(s->n - 1) : 1;
        const char *p = s->p;
        size_t m = s->n;
        if (how < 4) {}                              /* the whole text */
        else if (how < 7) m = cut;                   /* a proper prefix */
        else if (how < 8) { p += cut; m -= cut; }    /* a suffix */
        else { p = &"<|>_ \n\tab|<"[ak_rand_u32(rng) % 11]; m = 1; }
        if (len + m > cap) break;
        memcpy(out + len, p, m);
        len += m;
    }
    return len;
}

/* ak_tokenize's special-token splitting against a brute-force scan (longest special
 * text at each position, the smallest id among equal texts, user-defined tokens only
 * without parse_special; the runs between them tokenized alone), on texts full of
 * special-token text; then inputs that took seconds to minutes per MB when special
 * matching tried every token with the same first byte and the smollm pre-tokenizer
 * rescanned for digits (now tens of ms). */
static void test_pathological(const char *path1, const char *path2) {
    const char *paths[2] = {path1, path2};
    static char text[512];
    int32_t *ref = malloc((1 << 16) * sizeof *ref), *run = malloc((1 << 16) * sizeof *run);
    for (int m = 0; m < 2; m++) {
        ak_tokenizer *t = load(paths[m]);
        if (!t) continue;
        int n_sp = 0;
        special_text *sp = malloc((size_t)ak_tokenizer_n_vocab(t) * sizeof *sp);
        for (int32_t id = 0; id < ak_tokenizer_n_vocab(t); id++) {
            size_t n;
            const char *p = ak_tokenizer_text(t, id, &n);
            if (!ak_tokenizer_is_special(t, id) || n == 0) continue;
            /* user-defined tokens are the special ones whose piece shows without special */
            sp[n_sp++] = (special_text){p, n, id, piece(t, id, false, NULL, 0) > 0};
        }
        uint64_t rng = 777;
        int bad = 0;
        ak_err err;
        for (int it = 0; it < 300; it++) {
            size_t len = special_soup(sp, n_sp, &rng, text, sizeof text);
            for (int ps = 0; ps < 2; ps++) {
                int n = 0, nr = 0, k;
                if (ak_tokenizer_encode(t, text, len, false, ps, g_ids, 1 << 16, &n, &err)) { bad++; continue; }
                size_t start = 0;
                for (size_t i = 0; i <= len;) {
                    int best = -1;
                    for (int j = 0; i < len && j < n_sp; j++)
                        if ((ps || sp[j].user) && sp[j].n <= len - i && memcmp(sp[j].p, text + i, sp[j].n) == 0 &&
                            (best < 0 || sp[j].n > sp[best].n || (sp[j].n == sp[best].n && sp[j].id < sp[best].id)))
                            best = j;
                    if (best < 0 && i < len) { i++; continue; }
                    if (ak_tokenizer_encode(t, text + start, i - start, false, false, run, 1 << 16, &k, &err)) { bad++; break; }
                    memcpy(ref + nr, run, (size_t)k * sizeof *run);
                    nr += k;
                    if (best < 0) break;
                    ref[nr++] = sp[best].id;
                    i += sp[best].n;
                    start = i;
                }
                if (n != nr || memcmp(g_ids, ref, (size_t)n * sizeof *ref) != 0) {
                    if (bad < 3) fprintf(stderr, "  special split differs (parse_special %d): %.*s\n", ps, (int)len, text);
                    bad++;
                }
            }
        }
        CHECK(bad == 0, "%s: %d of 600 special-token splits differ from the brute-force scan", paths[m], bad);
        printf("%-16s special splits: %d specials, 600 texts, %d differ\n", m ? "gemma3-270m" : "smollm2", n_sp, bad);
        free(sp);

        /* 1 MB each: "<|im_sta" repeated (no digit: the smollm scan was quadratic) and
         * '<' repeated (Gemma 3 has 6321 special tokens starting with '<') */
        static const char *const unit[] = {"<|im_sta", "<"};
        size_t big = 1000000;
        char *s = malloc(big);
        int32_t *ids = malloc((big + 16) * sizeof *ids);
        for (int u = 0; u < 2; u++) {
            size_t ul = strlen(unit[u]);
            for (size_t i = 0; i < big; i++) s[i] = unit[u][i % ul];
            struct timespec t0, t1;
            int n = 0;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            ak_status st = ak_tokenizer_encode(t, s, big, false, true, ids, (int)big + 16, &n, &err);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
            CHECK(st == AK_OK && n > 0, "%s: 1 MB of %s: %s", paths[m], unit[u], err.msg);
            CHECK(sec < 10, "%s: 1 MB of %s took %.1f s", paths[m], unit[u], sec);
            printf("%-16s 1 MB of \"%s\": %d ids in %.3f s\n", m ? "gemma3-270m" : "smollm2", unit[u], n, sec);
        }
        free(s);
        free(ids);
        ak_tokenizer_free(t);
    }
    free(ref);
    free(run);
}

int main(int argc, char **argv) {
    find_root();
    bool real = argc > 2 && strcmp(argv[1], "--real") == 0;
    if (!read_lines(src_path("tests/data/tokenizer_corpus.txt"), &g_corpus)) {
        CHECK(0, "cannot read %s", src_path("tests/data/tokenizer_corpus.txt"));
        return ak_test_done();
    }
    g_whole = ak_read_file(src_path("tests/data/tokenizer_corpus.txt"), &g_whole_len);
    if (!real) {
        test_pretokenizers();
        test_hostile();
        test_model(ak_fixture("llama/llama-f32.gguf"), "llama-fixture", LOSSLESS | ALL_BYTES);
        test_model(ak_fixture("gemma3/gemma3-f32.gguf"), "gemma3-fixture", LOSSLESS | LOSSLESS_SPECIALS | ALL_BYTES);
        test_model(ak_fixture("bert/bert-f32.gguf"), "bert-fixture", 0);
        test_model(src_path("tests/data/tokenizer_refs/wpm-vocab.gguf"), "wpm", 0);
        test_rules(ak_fixture("llama/llama-f32.gguf"), "llama-fixture", 1, 2, true, false, NULL);
        test_rules(ak_fixture("gemma3/gemma3-f32.gguf"), "gemma3-fixture", 1, 2, true, false, NULL);
        test_rules(ak_fixture("bert/bert-f32.gguf"), "bert-fixture", 2, 3, true, true, NULL);
        test_rules(src_path("tests/data/tokenizer_refs/wpm-vocab.gguf"), "wpm", 2, 3, true, true, NULL);
    } else {
        char p1[4096], p2[4096];
        snprintf(p1, sizeof p1, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", argv[2]);
        snprintf(p2, sizeof p2, "%s/gemma-3-270m-q4_k_m.gguf", argv[2]);
        FILE *f = fopen(p1, "rb");
        CHECK(f != NULL, "%s missing: run scripts/get-model all", p1);
        if (f) fclose(f);
        f = fopen(p2, "rb");
        CHECK(f != NULL, "%s missing: run scripts/get-model all", p2);
        if (f) fclose(f);
        test_model(p1, "smollm2", LOSSLESS | LOSSLESS_SPECIALS); /* lacks 21 of the 256 byte tokens */
        test_rules(p1, "smollm2", 1, 2, false, false, "<|endoftext|>");
        ak_tokenizer *t = load(p1);
        ak_err err;
        if (t) { /* the other pre-tokenizers over a real byte-level vocabulary */
            CHECK(ak_tokenizer_set_pre(t, "llama-bpe", &err) == AK_OK, "%s", err.msg);
            compare_file(t, "smollm2-llama3", ".ids", true);
            compare_file(t, "smollm2-llama3", ".whole.ids", true);
            CHECK(ak_tokenizer_set_pre(t, "qwen2", &err) == AK_OK, "%s", err.msg);
            compare_file(t, "smollm2-qwen2", ".ids", true);
            compare_file(t, "smollm2-qwen2", ".whole.ids", true);
            CHECK(ak_tokenizer_set_pre(t, "nope", &err) == AK_ERR_UNSUPPORTED, "unknown pre accepted");
            ak_tokenizer_free(t);
        }
        test_model(p2, "gemma3-270m", LOSSLESS | LOSSLESS_SPECIALS | ALL_BYTES);
        test_rules(p2, "gemma3-270m", 2, 1, true, false, "<end_of_turn>");
        test_pathological(p1, p2);
    }
    free(g_whole);
    free_lines(&g_corpus);
    return ak_test_done();
}
