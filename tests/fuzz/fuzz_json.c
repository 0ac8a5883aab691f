/* libFuzzer target: bytes → ak_json_parse, then a walk of the whole tree through the
 * typed getters and a lookup of every member by name, as config.json readers do. */
#include "format/json.h"
#include <stdint.h>
#include <string.h>

static volatile uint8_t sink;

/* Depth is bounded by the parser (AK_JSON_MAX_DEPTH), so recursion here is too. */
static void walk(const ak_json *v) {
    int64_t i;
    double d;
    bool b;
    sink ^= (uint8_t)(ak_json_int(v, &i) + ak_json_num(v, &d) + ak_json_bool(v, &b));
    /* every byte of a string, the terminating NUL included, must be inside the arena */
    if (v->type == AK_JSON_STR) sink ^= (uint8_t)(v->s[0] ^ v->s[v->len]);
    for (const ak_json *c = v->child; c; c = c->next) {
        /* keys may hold \u0000: lookup by a NUL-terminated name only finds clean ones */
        if (v->type == AK_JSON_OBJ && strlen(c->key) == c->key_len) sink ^= (uint8_t)(ak_json_get(v, c->key) != NULL);
        if (c->key) sink ^= (uint8_t)c->key[c->key_len];
        walk(c);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ak_json_doc *doc;
    ak_err err;
    if (ak_json_parse((const char *)data, size, &doc, &err)) return 0;
    walk(ak_json_root(doc));
    ak_json_free(doc);
    return 0;
}
