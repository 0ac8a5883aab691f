/* libFuzzer target: GBNF text → ak_grammar_parse; a grammar that parses then runs through
 * the matcher. Input: the grammar, optionally a NUL and bytes to feed. A random sentence
 * of the grammar must be accepted and end there, fed whole or byte by byte; the fed bytes
 * must get the same verdict in both ways; the token mask over the llama fixture's
 * vocabulary must equal a token-by-token check, and its allowed tokens be accepted. */
#include <stdlib.h>
#include <string.h>
#include "engine/grammar.h"
#include "vocabs.h"

static ak_gvocab *vocab;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    ak_fuzz_load_vocabs();
    const ak_tokenizer *t = ak_fuzz_vocab[1];
    if (ak_gvocab_create(t, ak_tokenizer_n_vocab(t) + 3, &vocab, NULL)) abort();
    return 0;
}

/* How many of s's n bytes are accepted fed in one call, and byte by byte (equal, or abort). */
static size_t feed_both(ak_gmatch *m, const uint8_t *s, size_t n, bool *end) {
    ak_gmatch_reset(m);
    bool whole = ak_gmatch_accept_bytes(m, (const char *)s, n);
    bool whole_end = whole && ak_gmatch_can_end(m);
    ak_gmatch_reset(m);
    size_t i = 0;
    while (i < n && ak_gmatch_accept_bytes(m, (const char *)s + i, 1)) i++;
    if (whole != (i == n)) abort();
    *end = i == n && ak_gmatch_can_end(m);
    if (whole && *end != whole_end) abort();
    return i;
}

static void check_mask(const ak_grammar *g, ak_gmatch *m, const uint8_t *pre, size_t n_pre) {
    int nv = ak_gvocab_n_vocab(vocab);
    uint32_t *mask = calloc((size_t)(nv + 31) / 32, 4);
    ak_gmatch *b = NULL;
    if (!mask || ak_gmatch_create(g, vocab, &b, NULL)) abort();
    int cnt = ak_gmatch_mask(m, mask), pop = 0;
    ak_gmatch_accept_bytes(b, (const char *)pre, n_pre);
    for (int32_t t = 0; t < nv; t++) {
        bool allowed = mask[t >> 5] >> (t & 31) & 1;
        pop += allowed;
        bool ok = ak_gmatch_accept_token(b, t);
        if (ok != allowed) abort();
        if (ok) {
            ak_gmatch_reset(b);
            ak_gmatch_accept_bytes(b, (const char *)pre, n_pre);
        }
    }
    if (pop != cnt) abort();
    ak_gmatch_free(b);
    free(mask);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    ak_grammar *g = NULL;
    ak_err err;
    if (ak_grammar_parse((const char *)data, glen, NULL, &g, &err)) {
        if (strncmp(err.msg, "line ", 5) && strncmp(err.msg, "grammar: ", 9)) abort(); /* located, or a size */
        return 0;
    }
    ak_gmatch *m = NULL;
    if (ak_gmatch_create(g, vocab, &m, NULL)) {
        ak_grammar_free(g);
        return 0; /* the start rule past the matcher's limits */
    }
    bool end;
    if (nul) {
        size_t n = size - glen - 1;
        size_t got = feed_both(m, nul + 1, n, &end);
        ak_gmatch_reset(m);
        ak_gmatch_accept_bytes(m, (const char *)nul + 1, got);
        check_mask(g, m, nul + 1, got);
    }
    static char buf[4096];
    size_t n = 0;
    uint64_t rng = size;
    if (ak_grammar_sample(g, &rng, 8, buf, sizeof buf, &n)) {
        if (feed_both(m, (const uint8_t *)buf, n, &end) != n || !end) abort();
        ak_gmatch_reset(m);
        ak_gmatch_accept_bytes(m, buf, n / 2);
        check_mask(g, m, (const uint8_t *)buf, n / 2);
    }
    ak_gmatch_free(m);
    ak_grammar_free(g);
    return 0;
}
