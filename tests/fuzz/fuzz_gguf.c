/* libFuzzer target: GGUF bytes → ak_gguf_open_mem → tokenizer and chat-template
 * detection → ak_model_from_gguf and the model's size queries. Every byte range the
 * reader hands out (strings, arrays, tensor data) is touched at both ends, so a view
 * that runs past the buffer is an ASan report rather than a silent success. */
#include "format/gguf.h"
#include "model/model.h"
#include "model/chat.h"
#include "model/tokenizer.h"
#include <stdint.h>

static volatile uint8_t sink;

static void touch(const void *p, uint64_t n) {
    if (n) sink ^= (uint8_t)(((const uint8_t *)p)[0] ^ ((const uint8_t *)p)[n - 1]);
}

static void touch_gguf(const ak_gguf *g) {
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const ak_gguf_kv *kv = &g->kv[i];
        touch(kv->key.ptr, kv->key.len);
        if (kv->type == AK_GGUF_STRING) touch(kv->v.s.ptr, kv->v.s.len);
        if (kv->type != AK_GGUF_ARRAY || kv->arr_n == 0) continue;
        if (kv->arr_str) {
            for (uint64_t k = 0; k < kv->arr_n; k++) touch(kv->arr_str[k].ptr, kv->arr_str[k].len);
        } else {
            double d;
            sink ^= (uint8_t)ak_gguf_arr_f64(kv, 0, &d) ^ (uint8_t)ak_gguf_arr_f64(kv, kv->arr_n - 1, &d);
        }
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        touch(g->tensors[i].name.ptr, g->tensors[i].name.len);
        touch(g->tensors[i].data, g->tensors[i].nbytes);
    }
}

/* The tokenizer and the chat template on their own (the model loads them too, but only
 * when its weights are right). */
static void tokenizer_and_chat(const ak_gguf *g) {
    ak_err err;
    ak_tokenizer *t;
    if (!ak_tokenizer_load(g, &t, &err)) ak_tokenizer_free(t);
    ak_str tmpl;
    ak_chat_template ct;
    if (ak_gguf_get_str(g, "tokenizer.chat_template", &tmpl)) sink ^= (uint8_t)ak_chat_detect(tmpl.ptr, tmpl.len, &ct, &err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ak_gguf *g;
    ak_err err;
    if (ak_gguf_open_mem(data, size, &g, &err)) return 0;
    touch_gguf(g);
    tokenizer_and_chat(g);
    ak_model *m;
    if (ak_model_from_gguf(g, &m, &err)) return 0; /* it closed g */
    /* the size queries walk every tensor the model bound (fuzz finding 1 was here) */
    sink ^= (uint8_t)(ak_model_decode_bytes(m) ^ ak_model_params(m) ^ ak_model_file_bytes(m));
    sink ^= (uint8_t)(ak_model_vocab(m) ^ ak_model_dim(m) ^ ak_token_eos(m) ^ ak_model_is_encoder(m));
    ak_model_free(m);
    return 0;
}
