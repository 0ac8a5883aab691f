/* GGUF loader: every fixture parses; metadata getters agree with the file. */
#include "format/gguf.h"
#include "test_util.h"
#include <string.h>

int main(void) {
    const char *files[] = {"llama/llama-f32.gguf", "llama31/llama31-q8_0.gguf", "qwen3/qwen3-f16.gguf",
                           "gemma3/gemma3-f32.gguf", "bert/bert-f32.gguf"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        ak_gguf *g;
        ak_err err = {{0}};
        ak_status st = ak_gguf_open(ak_fixture(files[i]), &g, &err);
        CHECK(st == AK_OK, "%s: %s", files[i], err.msg);
        if (st) continue;
        CHECK(g->version == 3, "version %u", g->version);
        ak_str arch;
        CHECK(ak_gguf_get_str(g, "general.architecture", &arch), "arch");
        const ak_gguf_kv *tok = ak_gguf_find(g, "tokenizer.ggml.tokens");
        CHECK(tok && tok->type == AK_GGUF_ARRAY && tok->arr_type == AK_GGUF_STRING && tok->arr_n >= 400, "tokens");
        const ak_gguf_tensor *t = ak_gguf_tensor_find(g, "token_embd.weight");
        CHECK(t && t->ne[0] == 128, "token_embd");
        for (uint64_t k = 0; k < g->n_tensors; k++)
            CHECK((const uint8_t *)g->tensors[k].data + g->tensors[k].nbytes <= g->base + g->size, "bounds");
        ak_gguf_close(g);
    }
    ak_gguf *g;
    ak_err err = {{0}};
    CHECK(ak_gguf_open("/nonexistent/model.gguf", &g, &err) == AK_ERR_IO, "missing file");
    CHECK(strstr(err.msg, "cannot open") != NULL, "message: %s", err.msg);
    return ak_test_done();
}
