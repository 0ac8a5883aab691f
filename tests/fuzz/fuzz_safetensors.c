/* libFuzzer target: bytes → ak_st_open_mem (one safetensors file from memory). Touches
 * the first and last byte of every tensor it accepts, so a bounds check that lets a
 * tensor run past the buffer shows up as an ASan report, not as silence. */
#include "format/safetensors.h"
#include <stdint.h>
#include <string.h>

static volatile uint8_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ak_st *s;
    ak_err err;
    if (ak_st_open_mem(data, size, &s, &err)) return 0;
    for (int i = 0; i < s->n_tensors; i++) {
        const ak_st_tensor *t = &s->tensors[i];
        if (t->nbytes) sink ^= (uint8_t)(t->data[0] ^ t->data[t->nbytes - 1]);
        sink ^= (uint8_t)(ak_st_find(s, t->name) != NULL) ^ (uint8_t)strlen(ak_st_dtype_name(t->dtype));
    }
    for (const ak_json *m = s->metadata ? s->metadata->child : NULL; m; m = m->next) sink ^= (uint8_t)m->s[m->len];
    ak_st_close(s);
    return 0;
}
