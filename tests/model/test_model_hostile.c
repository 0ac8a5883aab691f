/* Hostile model files past the GGUF layer: truncated and mutated fixtures, and files
 * whose metadata or tensor shapes lie, must fail to load with a message or load a model
 * that runs without touching memory it does not own (ASan watches). */
#include "akunu.h"
#include "format/gguf.h"
#include "model/model.h"
#include "test_util.h"
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 7;

/* Loads from an exactly-sized copy; if it loads, runs a short prefill and decode. */
static int try_load(const uint8_t *data, size_t n, ak_err *err) {
    uint8_t *buf = malloc(n ? n : 1);
    memcpy(buf, data, n);
    ak_gguf *g;
    ak_model *m = NULL;
    ak_status st = ak_gguf_open_mem(buf, n, &g, err);
    if (!st) st = ak_model_from_gguf(g, &m, err);
    if (!st) {
        ak_session_params p = ak_session_default_params();
        p.n_ctx = 16;
        p.chunk = 4;
        ak_session *s;
        if (ak_session_create(m, &p, &s, err) == AK_OK) {
            int32_t ids[6] = {1, 2, 3, 4, 5, 6}, next;
            ak_err e2;
            for (int i = 0; i < 6; i++) ids[i] %= ak_model_vocab(m);
            if (ak_prefill(s, ids, 6, &next, NULL, &e2) == AK_OK) ak_decode(s, next, &next, NULL, &e2);
            ak_session_free(s);
        }
        ak_model_free(m);
    }
    free(buf);
    return st;
}

int main(void) {
    const char *files[] = {"llama31/llama31-q8_0.gguf", "gemma2/gemma2-f16.gguf", "qwen3/qwen3-f32.gguf"};
    int loads = 0, fails = 0;
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        size_t n;
        uint8_t *data = ak_read_file(ak_fixture(files[f]), &n);
        CHECK(data != NULL, "%s missing", files[f]);
        if (!data) continue;
        ak_err err = {{0}};
        CHECK(try_load(data, n, &err) == AK_OK, "%s: intact file fails: %s", files[f], err.msg);
        ak_gguf *g;
        ak_gguf_open_mem(data, n, &g, &err);
        size_t hdr = g ? g->data_offset : n;
        ak_gguf_close(g);
        /* every truncation fails with a message */
        for (size_t cut = 0; cut < n; cut += (cut < hdr ? 97 : n / 50)) {
            err.msg[0] = 0;
            int st = try_load(data, cut, &err);
            CHECK(st != AK_OK && err.msg[0], "%s cut at %zu: st %d '%s'", files[f], cut, st, err.msg);
        }
        /* random byte mutations anywhere in the header and tensor table */
        for (int trial = 0; trial < 300; trial++) {
            uint8_t *mut = malloc(n);
            memcpy(mut, data, n);
            int k = 1 + (int)(ak_rand_u32(&rng) % 3);
            for (int j = 0; j < k; j++) mut[ak_rand_u32(&rng) % hdr] ^= (uint8_t)(1u << (ak_rand_u32(&rng) % 8));
            err.msg[0] = 0;
            int st = try_load(mut, n, &err);
            if (st) { fails++; CHECK(err.msg[0] != 0, "mutation failed without a message"); }
            else loads++;
            free(mut);
        }
        free(data);
    }
    printf("mutations: %d loaded and ran, %d refused\n", loads, fails);
    /* A well-formed file whose architecture we do not know. */
    {
        size_t n;
        uint8_t *data = ak_read_file(ak_fixture("llama/llama-f32.gguf"), &n);
        uint8_t *p = data ? memmem(data, n, "llama", 5) : NULL;
        CHECK(p != NULL, "arch string");
        if (p) {
            memcpy(p, "xlama", 5);
            ak_err err = {{0}};
            CHECK(try_load(data, n, &err) == AK_ERR_UNSUPPORTED && strstr(err.msg, "xlama"), "unknown arch: %s", err.msg);
        }
        free(data);
    }
    return ak_test_done();
}
