/* libFuzzer target: ids → text. Byte 0 picks the vocabulary (vocabs.h; 1 is the llama
 * fixture), bit 0 of byte 1 shows control tokens, the rest is little-endian int32 ids
 * (in or out of range). Every call first asks for the size with NULL, 0 (fuzz findings
 * 2 and 3 were there), then writes into a buffer of exactly that size: ak_tokenizer_decode,
 * ak_tokenizer_piece per id, and the streaming detokenizer, whose output must be valid
 * UTF-8 and whose size query must consume nothing. */
#include <stdlib.h>
#include <string.h>
#include "vocabs.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    ak_fuzz_load_vocabs();
    return 0;
}

static bool utf8_valid(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!k || i + k > n) return false;
        for (size_t j = 1; j < k; j++)
            if (((unsigned char)s[i + j] & 0xC0) != 0x80) return false;
        i += k;
    }
    return true;
}

/* Exactly need bytes, so an overrun is an ASan report; never NULL (malloc(0) may be). */
static char *exact(size_t need) { return malloc(need ? need : 1); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const ak_tokenizer *t = ak_fuzz_vocab[data[0] % AK_FUZZ_N_VOCABS];
    bool special = data[1] & 1;
    int n = (int)((size - 2) / 4);
    int32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
    if (!ids) return 0;
    if (n) memcpy(ids, data + 2, (size_t)n * 4);
    size_t need = 0, got = 0;
    if (ak_tokenizer_decode(t, ids, n, special, NULL, 0, &need, NULL) == AK_OK) {
        char *buf = exact(need);
        if (ak_tokenizer_decode(t, ids, n, special, buf, need, &got, NULL) || got != need) abort();
        free(buf);
    }
    ak_detok d;
    ak_detok_init(&d, special);
    for (int i = 0; i < n; i++) {
        if (ak_tokenizer_piece(t, ids[i], special, NULL, 0, &need, NULL) == AK_OK) {
            char *buf = exact(need);
            if (ak_tokenizer_piece(t, ids[i], special, buf, need, &got, NULL) || got != need) abort();
            free(buf);
        }
        size_t again = 0;
        if (ak_detok_push(&d, t, ids[i], NULL, 0, &need, NULL)) continue;   /* an id out of range */
        if (ak_detok_push(&d, t, ids[i], NULL, 0, &again, NULL) || again != need) abort();  /* consumed nothing */
        char *buf = exact(need);
        if (ak_detok_push(&d, t, ids[i], buf, need, &got, NULL) || got != need || !utf8_valid(buf, got)) abort();
        free(buf);
    }
    if (ak_detok_flush(&d, NULL, 0, &need, NULL)) abort();
    char *buf = exact(need);
    if (ak_detok_flush(&d, buf, need, &got, NULL) || got != need || !utf8_valid(buf, got)) abort();
    free(buf);
    free(ids);
    return 0;
}
