/* akunu's side of bench/grammar_compare.sh (GBNF verdicts against llama.cpp's):
 *     grammar_check gen GRAMMAR.gbnf N M SEED DIR   N sentences (ak_grammar_sample) to DIR/sNNNN.txt,
 *                                                  M mutations of them to DIR/mNNNN.txt
 *     grammar_check check GRAMMAR.gbnf FILE...      "accept FILE" or "reject FILE" per file
 * A file is accepted when all its bytes are (ak_gmatch_accept_bytes) and the grammar can
 * end there (ak_gmatch_can_end). Mutations work on code points, so every file is valid
 * UTF-8 (llama.cpp's validator decodes its input as UTF-8 before matching). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/grammar.h"

enum { CAP = 1 << 14, MAX_CP = CAP };

static char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0, k;
    char *b = malloc(cap);
    while (b && (k = fread(b + len, 1, cap - len, f)) > 0) {
        len += k;
        if (len == cap) {
            char *q = realloc(b, cap *= 2);
            if (!q) free(b);
            b = q;
        }
    }
    fclose(f);
    *n = len;
    return b;
}

static ak_grammar *load(const char *path) {
    size_t n;
    char *text = read_all(path, &n);
    ak_grammar *g = NULL;
    ak_err err;
    if (!text) fprintf(stderr, "grammar_check: cannot read %s\n", path);
    else if (ak_grammar_parse(text, n, NULL, &g, &err)) fprintf(stderr, "grammar_check: %s: %s\n", path, err.msg);
    free(text);
    return g;
}

static uint64_t next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* UTF-8 (valid: ak_grammar_sample writes it) to code points and back */
static int decode(const char *s, size_t n, uint32_t *cp) {
    int k = 0;
    for (size_t i = 0; i < n && k < MAX_CP;) {
        unsigned char c = (unsigned char)s[i];
        int len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        uint32_t v = len == 1 ? c : c & (0x3F >> (len - 1));
        for (int j = 1; j < len && i + j < n; j++) v = v << 6 | ((unsigned char)s[i + j] & 0x3F);
        cp[k++] = v, i += (size_t)len;
    }
    return k;
}
static void put(FILE *f, uint32_t c) {
    if (c < 0x80) fputc((int)c, f);
    else if (c < 0x800) fputc((int)(0xC0 | c >> 6), f), fputc((int)(0x80 | (c & 0x3F)), f);
    else if (c < 0x10000)
        fputc((int)(0xE0 | c >> 12), f), fputc((int)(0x80 | (c >> 6 & 0x3F)), f), fputc((int)(0x80 | (c & 0x3F)), f);
    else
        fputc((int)(0xF0 | c >> 18), f), fputc((int)(0x80 | (c >> 12 & 0x3F)), f),
            fputc((int)(0x80 | (c >> 6 & 0x3F)), f), fputc((int)(0x80 | (c & 0x3F)), f);
}
static int write_cps(const char *dir, char kind, int i, const uint32_t *cp, int n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%c%04d.txt", dir, kind, i);
    FILE *f = fopen(path, "wb");
    if (!f) return fprintf(stderr, "grammar_check: cannot write %s\n", path), 1;
    for (int k = 0; k < n; k++) put(f, cp[k]);
    return fclose(f) != 0;
}

/* One random edit of cp[0..*n): delete, replace, insert (a code point from pool),
 * truncate, duplicate a span, or swap two neighbours. */
static void mutate(uint32_t *cp, int *n, const uint32_t *pool, int n_pool, uint64_t *rng) {
    int len = *n, at = len ? (int)(next(rng) % (uint64_t)len) : 0;
    uint32_t c = pool[next(rng) % (uint64_t)n_pool];
    switch (next(rng) % 6) {
    case 0: if (len) memmove(cp + at, cp + at + 1, (size_t)(len - at - 1) * 4), len--; break;
    case 1: if (len) cp[at] = c; break;
    case 2:
        if (len < MAX_CP) memmove(cp + at + 1, cp + at, (size_t)(len - at) * 4), cp[at] = c, len++;
        break;
    case 3: len = at; break;
    case 4: {
        int span = 1 + (int)(next(rng) % 8);
        if (at + span > len) span = len - at;
        if (span > 0 && len + span <= MAX_CP) {
            memmove(cp + at + span, cp + at, (size_t)(len - at) * 4);
            len += span;
        }
        break;
    }
    default:
        if (at + 1 < len) {
            uint32_t t = cp[at];
            cp[at] = cp[at + 1], cp[at + 1] = t;
        }
    }
    *n = len;
}

static int gen(const ak_grammar *g, int n, int m, uint64_t rng, const char *dir) {
    char *buf = malloc(CAP);
    uint32_t *cp = malloc(MAX_CP * sizeof *cp), *pool = malloc(MAX_CP * sizeof *pool);
    char **sent = calloc((size_t)(n ? n : 1), sizeof *sent);
    size_t *len = calloc((size_t)(n ? n : 1), sizeof *len);
    int rc = !(buf && cp && pool && sent && len), got = 0, n_pool = 0;
    static const char extra[] = " \n\t{}[]()\":,.;-+*/=<>#'0123456789aeiouxyzAEXZ\\";
    /* class edges: NUL, controls, DEL, C1 (U+0085 is in list.gbnf), line separators, planes */
    static const uint32_t edge[] = {0x00, 0x0B, 0x0C, 0x0D, 0x1F, 0x7F, 0x80, 0x85, 0xFF, 0x3000, 0x3041,
                                    0x309F, 0x30A1, 0x4E00, 0x9FFF, 0x2028, 0x2029, 0xFFFF, 0x10000, 0x10FFFF};
    for (const char *e = extra; *e; e++) pool[n_pool++] = (uint32_t)*e;
    for (size_t e = 0; e < sizeof edge / sizeof *edge; e++) pool[n_pool++] = edge[e];
    for (int i = 0, tries = 0; !rc && i < n && tries < 20 * n; tries++) {
        size_t k;
        if (!ak_grammar_sample(g, &rng, 6 + (int)(next(&rng) % 10), buf, CAP, &k)) continue;
        sent[got] = malloc(k ? k : 1), len[got] = k;
        if (!sent[got]) rc = 1;
        else memcpy(sent[got], buf, k);
        int c = decode(buf, k, cp);
        for (int j = 0; j < c && n_pool < MAX_CP; j++) pool[n_pool++] = cp[j];
        rc = rc || write_cps(dir, 's', got++, cp, c);
        i++;
    }
    if (!got && !rc) {
        fprintf(stderr, "grammar_check: no sentence sampled\n");
        rc = 1;
    }
    for (int i = 0; !rc && i < m; i++) {
        int j = (int)(next(&rng) % (uint64_t)got), c = decode(sent[j], len[j], cp);
        for (int e = 1 + (int)(next(&rng) % 3); e > 0; e--) mutate(cp, &c, pool, n_pool, &rng);
        rc = write_cps(dir, 'm', i, cp, c);
    }
    for (int i = 0; i < got; i++) free(sent[i]);
    free(buf), free(cp), free(pool), free(sent), free(len);
    return rc;
}

static int check(const ak_grammar *g, char **files, int n) {
    ak_gmatch *m = NULL;
    ak_err err;
    if (ak_gmatch_create(g, NULL, &m, &err)) return fprintf(stderr, "grammar_check: %s\n", err.msg), 1;
    int rc = 0;
    for (int i = 0; i < n; i++) {
        size_t len;
        char *s = read_all(files[i], &len);
        if (!s) {
            fprintf(stderr, "grammar_check: cannot read %s\n", files[i]);
            rc = 1;
            continue;
        }
        ak_gmatch_reset(m);
        bool ok = ak_gmatch_accept_bytes(m, s, len) && ak_gmatch_can_end(m);
        printf("%s %s\n", ok ? "accept" : "reject", files[i]);
        free(s);
    }
    ak_gmatch_free(m);
    return rc;
}

int main(int argc, char **argv) {
    bool is_gen = argc == 7 && !strcmp(argv[1], "gen"), is_check = argc >= 3 && !strcmp(argv[1], "check");
    if (!is_gen && !is_check) {
        fprintf(stderr, "usage: grammar_check gen GRAMMAR.gbnf N M SEED DIR | check GRAMMAR.gbnf FILE...\n");
        return 2;
    }
    ak_grammar *g = load(argv[2]);
    if (!g) return 1;
    int rc = is_gen ? gen(g, atoi(argv[3]), atoi(argv[4]), strtoull(argv[5], NULL, 10), argv[6])
                    : check(g, argv + 3, argc - 3);
    ak_grammar_free(g);
    return rc;
}
