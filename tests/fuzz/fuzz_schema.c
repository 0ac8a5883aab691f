/* libFuzzer target: bytes as a JSON Schema → ak_schema_to_gbnf; whatever converts must
 * parse as GBNF (a grammar error other than a size limit is a finding, trapped), and the
 * matcher then follows the input itself and a sentence of the grammar. */
#include "engine/grammar.h"
#include "engine/schema.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static volatile uint8_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *gbnf = NULL;
    ak_err err;
    if (ak_schema_to_gbnf((const char *)data, size, &gbnf, &err)) return 0;
    size_t n = strlen(gbnf);
    ak_grammar *g = NULL;
    if (ak_grammar_parse(gbnf, n, NULL, &g, &err)) {
        if (!strstr(err.msg, "too large") && !strstr(err.msg, "too many") && !strstr(err.msg, "too deep")) __builtin_trap();
        free(gbnf);
        return 0;
    }
    ak_gmatch *m = NULL;
    if (!ak_gmatch_create(g, NULL, &m, &err)) {
        sink ^= (uint8_t)ak_gmatch_accept_bytes(m, (const char *)data, size);
        sink ^= (uint8_t)ak_gmatch_can_end(m);
        char buf[512];
        size_t len;
        uint64_t rng = size;
        if (ak_grammar_sample(g, &rng, 8, buf, sizeof buf, &len)) {
            ak_gmatch_reset(m);
            /* a sentence of the grammar is accepted whole */
            if (!ak_gmatch_accept_bytes(m, buf, len) || !ak_gmatch_can_end(m)) __builtin_trap();
        }
        ak_gmatch_free(m);
    }
    ak_grammar_free(g);
    free(gbnf);
    return 0;
}
