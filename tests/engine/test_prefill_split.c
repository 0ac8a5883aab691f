/* Prefill does not depend on how the prompt is cut: one call, two calls split at any
 * position (a cached prefix: ak_generate prefills only what is new) and chunks of 3 or 7
 * tokens give every position's logits bit for bit. Without it a server's answer would
 * depend on which slot's cache took the request, and a prompt's greedy continuation on
 * what was asked before it. Every decoder fixture (f32, Gemma's window-8 layers crossed
 * several times), the requantized llama and qwen3 in every type (AKUNU_QUANT_MODELS, set
 * by quant_models.cmake), F32 and F16 KV caches; prompts of 37 ids. The sliding-window
 * layers' ring (their window and a chunk, 256 rows, in a context of 700) gives the whole
 * cache's bits over 700 ids, split anywhere.
 *     test_prefill_split [cpu|cuda]      (cuda: exits 77, skipped, without a GPU) */
#include "akunu.h"
#include "fixture_util.h"
#include "test_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_IDS 37

static ak_backend_kind backend;

/* ids [0, k) then [k, n) into lg (all rows); false on an error. */
static bool prefill2(ak_session *s, const int32_t *ids, int n, int k, float *lg, size_t V, const char *name) {
    ak_err err = {{0}};
    int32_t next;
    ak_session_reset(s);
    ak_status st = k > 0 ? ak_prefill(s, ids, k, &next, lg, &err) : AK_OK;
    if (!st) st = ak_prefill(s, ids + k, n - k, &next, lg + (size_t)k * V, &err);
    CHECK(!st, "%s: prefill split at %d: %s", name, k, err.msg);
    return !st;
}

/* The first row of lg that differs from ref, or -1. */
static int first_diff(const float *lg, const float *ref, int n, size_t V) {
    for (int r = 0; r < n; r++)
        if (memcmp(lg + (size_t)r * V, ref + (size_t)r * V, V * sizeof(float))) return r;
    return -1;
}

/* Gemma 2 and 3 (window 8) over N_RING ids: chunks of 16 (a ring of 256 rows)
 * in one call and split around the ring's wraps, against chunks of 512 (the window and a
 * chunk exceed the context: no ring). */
#define N_RING 700
static void ring_model(ak_model *m, const char *name) {
    size_t V = (size_t)ak_model_vocab(m);
    int32_t *ids = malloc(N_RING * sizeof *ids);
    uint64_t rng = 26;
    for (int i = 0; i < N_RING; i++) ids[i] = (int32_t)(ak_rand_u32(&rng) % (uint32_t)V);
    float *ref = malloc(N_RING * V * sizeof(float)), *lg = malloc(N_RING * V * sizeof(float));
    static const ak_kv_type kvs[] = {AK_KV_F32, AK_KV_F16};
    for (int ki = 0; ki < 2; ki++) {
        ak_session *whole = ak_fx_session(m, backend, N_RING, 512, kvs[ki], true, name);
        ak_session *ring = ak_fx_session(m, backend, N_RING, 16, kvs[ki], true, name);
        if (whole && ring && prefill2(whole, ids, N_RING, 0, ref, V, name)) {
            ak_kv_layers g, w, gr, wr;
            ak_session_kv_layers(whole, &g, &w);
            ak_session_kv_layers(ring, &gr, &wr);
            CHECK(w.layers > 0 && w.rows == N_RING && wr.rows == 256 && g.bytes == gr.bytes, "%s: sliding layers of %d and %d rows",
                  name, w.rows, wr.rows);
            static const int splits[] = {0, 1, 255, 256, 300, 511, 600, N_RING - 1};
            for (size_t k = 0; k < sizeof splits / sizeof *splits; k++) {
                if (!prefill2(ring, ids, N_RING, splits[k], lg, V, name)) break;
                int r = first_diff(lg, ref, N_RING, V);
                CHECK(r < 0, "%s kv=%d: a ring of %d rows, split at %d, changes the logits from row %d", name, ki, wr.rows,
                      splits[k], r);
            }
        }
        ak_session_free(whole);
        ak_session_free(ring);
    }
    printf("%-14s %d ids through the sliding layers' ring, f32 and f16 caches\n", name, N_RING);
    free(ids);
    free(ref);
    free(lg);
}

static void one_model(const char *path, const char *name) {
    ak_model *m = NULL;
    ak_err err = {{0}};
    if (ak_model_load(path, &m, &err)) { CHECK(0, "%s: %s", path, err.msg); return; }
    size_t V = (size_t)ak_model_vocab(m);
    int32_t ids[N_IDS];
    uint64_t rng = 77;
    for (int i = 0; i < N_IDS; i++) ids[i] = (int32_t)(ak_rand_u32(&rng) % (uint32_t)V);
    float *ref = malloc(N_IDS * V * sizeof(float)), *lg = malloc(N_IDS * V * sizeof(float));
    static const struct { ak_kv_type kv; const char *name; } kvs[] = {{AK_KV_F32, "f32"}, {AK_KV_F16, "f16"}};
    for (int ki = 0; ki < 2; ki++) {
        ak_session *s = ak_fx_session(m, backend, 64, 0, kvs[ki].kv, true, name);
        if (!s || !prefill2(s, ids, N_IDS, 0, ref, V, name)) { ak_session_free(s); continue; }
        int bad = 0, bad_k = -1, bad_r = -1;
        for (int k = 1; k < N_IDS; k++) {
            if (!prefill2(s, ids, N_IDS, k, lg, V, name)) break;
            int r = first_diff(lg, ref, N_IDS, V);
            if (r >= 0 && !bad++) { bad_k = k; bad_r = r; }
        }
        CHECK(!bad, "%s kv=%s: %d of %d splits change the logits (first: split at %d, row %d)", name, kvs[ki].name, bad,
              N_IDS - 1, bad_k, bad_r);
        ak_session_free(s);
        for (int chunk = 3; chunk <= 7; chunk += 4) {
            ak_session *c = ak_fx_session(m, backend, 64, chunk, kvs[ki].kv, true, name);
            if (c && prefill2(c, ids, N_IDS, 0, lg, V, name)) {
                int r = first_diff(lg, ref, N_IDS, V);
                CHECK(r < 0, "%s kv=%s: chunks of %d change the logits from row %d", name, kvs[ki].name, chunk, r);
            }
            ak_session_free(c);
        }
    }
    printf("%-14s %d splits and chunks of 3 and 7, f32 and f16 caches\n", name, N_IDS - 1);
    free(ref);
    free(lg);
    if (!strcmp(name, "gemma2") || !strcmp(name, "gemma3")) ring_model(m, name);
    ak_model_free(m);
}

int main(int argc, char **argv) {
    backend = argc > 1 && !strcmp(argv[1], "cuda") ? AK_BACKEND_CUDA : AK_BACKEND_CPU;
    if (backend == AK_BACKEND_CUDA && !ak_cuda_available()) { printf("no CUDA GPU: skipped\n"); return 77; }
    ak_test_debug(0);
    char rel[256], path[4096];
    for (int i = 0; i < ak_fx_n_models; i++) {
        snprintf(rel, sizeof rel, "%s/%s-f32.gguf", ak_fx_models[i], ak_fx_models[i]);
        one_model(ak_fixture(rel), ak_fx_models[i]);
    }
    const char *dir = getenv("AKUNU_QUANT_MODELS");
    static const char *const types[] = {"F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"};
    for (int a = 0; dir && a < 2; a++)
        for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
            snprintf(path, sizeof path, "%s/%s-%s.gguf", dir, a ? "qwen3" : "llama", types[t]);
            snprintf(rel, sizeof rel, "%s-%s", a ? "qwen3" : "llama", types[t]);
            one_model(path, rel);
        }
    CHECK(dir || backend == AK_BACKEND_CUDA, "AKUNU_QUANT_MODELS: not set (quant_models.cmake sets it)");
    return ak_test_done();
}
