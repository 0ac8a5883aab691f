/* libFuzzer target: text → ak_tokenizer_encode over every vocabulary kind (vocabs.h),
 * with and without BOS/EOS and special-token parsing. Byte 0 picks the vocabulary, byte
 * 1 the flags, the rest is the text. The size query (no buffer) must agree with the
 * encoding into a buffer of that size, and every id must be in the vocabulary. */
#include <stdlib.h>
#include <string.h>
#include "vocabs.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    ak_fuzz_load_vocabs();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const ak_tokenizer *t = ak_fuzz_vocab[data[0] % AK_FUZZ_N_VOCABS];
    bool add_special = data[1] & 1, parse_special = data[1] & 2;
    const char *text = (const char *)data + 2;
    size_t len = size - 2;
    ak_err err;
    int need = -1, n = -1;
    ak_status st = ak_tokenizer_encode(t, text, len, add_special, parse_special, NULL, 0, &need, &err);
    if (st != AK_OK && st != AK_ERR_ARG) return 0;   /* out of memory */
    int32_t *ids = malloc(((size_t)need + 1) * sizeof *ids);
    if (!ids) return 0;
    if (ak_tokenizer_encode(t, text, len, add_special, parse_special, ids, need, &n, &err) || n != need) abort();
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= ak_tokenizer_n_vocab(t)) abort();
    free(ids);
    return 0;
}
