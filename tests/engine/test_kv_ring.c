/* Rewinding a session whose sliding-window layers keep a ring (issue #26), on the Gemma 3
 * fixture (window 8) on the CPU: 600 ids in chunks of 16 leave a ring of 256 rows, whose
 * oldest positions are gone. ak_session_keep gives the positions whose window the ring
 * still holds (the furthest the cache was written counts, not the current position); a
 * rewind within reach decodes and prefills the same logits as a fresh session fed the
 * same prefix, bit for bit; one beyond it fails with AK_ERR_ARG, and ak_generate
 * prefills again a cached prefix it cannot reach. A model without windows keeps all. */
#include "akunu.h"
#include "fixture_util.h"
#include "test_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_FILL 600
#define N_IDS 700
#define WINDOW 8   /* the fixture's sliding_window (manifest.json) */

static int32_t ids[N_IDS];

/* A fresh session fed the same keys the same way (a decode step rounds its keys unlike a
 * prefill): ids [0, pre) in one prefill and [pre, pre + dec) by decode steps; then n more
 * by decode steps (decode) or one more prefill: the logits of each step, or of the
 * prefill's last row. */
static float *fresh(ak_model *m, int pre, int dec, int n, bool decode) {
    size_t V = (size_t)ak_model_vocab(m);
    ak_session *s = ak_fx_session(m, AK_BACKEND_CPU, 1024, 16, AK_KV_F32, false, "fresh");
    float *lg = malloc((size_t)n * V * sizeof(float));
    ak_err err = {{0}};
    int32_t next;
    int at = pre + dec;
    ak_status st = s ? ak_prefill(s, ids, pre, &next, NULL, &err) : AK_ERR_ARG;
    for (int i = pre; i < at && !st; i++) st = ak_decode(s, ids[i], &next, NULL, &err);
    for (int i = 0; i < n && !st && decode; i++) st = ak_decode(s, ids[at + i], &next, lg + (size_t)i * V, &err);
    if (!st && !decode) st = ak_prefill(s, ids + at, n, &next, lg, &err);
    CHECK(!st, "fresh session: %s", err.msg);
    ak_session_free(s);
    return lg;
}

static void rewinds(ak_model *m) {
    size_t V = (size_t)ak_model_vocab(m);
    ak_session *s = ak_fx_session(m, AK_BACKEND_CPU, 1024, 16, AK_KV_F32, false, "gemma3");
    if (!s) return;
    ak_kv_layers g, w;
    ak_session_kv_layers(s, &g, &w);
    CHECK(w.layers == 5 && w.rows == 256 && g.layers == 1 && g.rows == 1024,
          "gemma3: %d global layers of %d rows, %d sliding of %d (want 1 of 1024, 5 of 256)", g.layers, g.rows, w.layers, w.rows);
    CHECK(w.bytes * 4 == g.bytes * 5, "gemma3: 5 sliding layers of a quarter of the rows take %zu bytes, the global one %zu",
          w.bytes, g.bytes);
    ak_err err = {{0}};
    int32_t next;
    CHECK(ak_prefill(s, ids, N_FILL, &next, NULL, &err) == AK_OK, "prefill: %s", err.msg);
    /* the ring holds positions [600 - 256, 600): the query at L needs [L - 7, L) */
    int lo = N_FILL - w.rows + WINDOW - 1;
    CHECK(ak_session_keep(s, N_FILL) == N_FILL && ak_session_keep(s, N_FILL + 50) == N_FILL, "keep at and past the end");
    CHECK(ak_session_keep(s, lo) == lo && ak_session_keep(s, 500) == 500, "keep %d and 500: reachable", lo);
    CHECK(ak_session_keep(s, lo - 1) == 0 && ak_session_keep(s, 5) == 0 && ak_session_keep(s, 0) == 0 &&
          ak_session_keep(s, -3) == 0, "keep below %d: 0", lo);
    CHECK(ak_session_rewind(s, lo - 1, &err) == AK_ERR_ARG && ak_session_pos(s) == N_FILL, "rewind beyond reach fails");
    printf("beyond reach: %s\n", err.msg);

    /* the tightest rewind: its window's first key is the ring's oldest */
    const int n_dec = 12;
    float *lg = malloc((size_t)n_dec * V * sizeof(float));
    ak_status st = ak_session_rewind(s, lo, &err);
    CHECK(!st, "rewind to %d: %s", lo, err.msg);
    for (int i = 0; i < n_dec && !st; i++) st = ak_decode(s, ids[lo + i], &next, lg + (size_t)i * V, &err);
    float *want = fresh(m, lo, 0, n_dec, true);
    CHECK(!st && !memcmp(lg, want, (size_t)n_dec * V * sizeof(float)), "decode after a rewind to %d differs from a fresh session", lo);
    free(want);

    /* now at lo + 12: what counts is how far the ring was written (600), not the position */
    int at = ak_session_pos(s);
    CHECK(ak_session_keep(s, lo + 4) == lo + 4 && ak_session_keep(s, lo - 1) == 0 && at - (lo - 1) < w.rows - WINDOW,
          "keep after a rewind: reach from the cache's furthest write");
    const int n_pre = 40;   /* three chunks, each writing its keys before its first row reads the window */
    st = ak_session_rewind(s, lo + 4, &err);
    if (!st) st = ak_prefill(s, ids + lo + 4, n_pre, &next, lg, &err);
    want = fresh(m, lo, 4, n_pre, false);
    CHECK(!st && !memcmp(lg, want, V * sizeof(float)), "prefill after a rewind to %d differs from a fresh session", lo + 4);
    free(want);
    free(lg);

    /* back to the start: the cache is empty, and within the ring's rows all is reachable again */
    CHECK(ak_session_rewind(s, 0, &err) == AK_OK, "rewind to 0: %s", err.msg);
    CHECK(ak_prefill(s, ids, 200, &next, NULL, &err) == AK_OK && ak_session_keep(s, 1) == 1, "keep after a rewind to 0");
    ak_session_free(s);
}

/* ak_generate over a cached prefix beyond reach prefills the prompt again, with the same reply. */
static void generate(ak_model *m) {
    ak_session *s = ak_fx_session(m, AK_BACKEND_CPU, 1024, 16, AK_KV_F32, false, "gemma3 generate");
    ak_session *f = ak_fx_session(m, AK_BACKEND_CPU, 1024, 16, AK_KV_F32, false, "gemma3 fresh");
    if (!s || !f) { ak_session_free(s); ak_session_free(f); return; }
    ak_err err = {{0}};
    int32_t next, a[8], b[8], prompt[360];
    CHECK(ak_prefill(s, ids, N_FILL, &next, NULL, &err) == AK_OK, "prefill: %s", err.msg);
    memcpy(prompt, ids, sizeof prompt);
    prompt[340] = (ids[340] + 1) % ak_model_vocab(m);   /* the cache shares 340 ids with it, out of reach */
    ak_generate_params p = ak_generate_default_params();
    p.n_predict = 8;
    p.ids_cap = 8;
    ak_generate_result r, rf;
    p.ids_out = a;
    CHECK(ak_generate(s, prompt, 360, &p, NULL, NULL, &r, &err) == AK_OK, "generate beyond reach: %s", err.msg);
    p.ids_out = b;
    CHECK(ak_generate(f, prompt, 360, &p, NULL, NULL, &rf, &err) == AK_OK, "generate fresh: %s", err.msg);
    CHECK(r.n_cached == 0 && r.n_generated == rf.n_generated && !memcmp(a, b, sizeof a),
          "generate beyond reach: %d cached, reply %s the fresh session's", r.n_cached, memcmp(a, b, sizeof a) ? "unlike" : "as");
    ak_session_free(s);
    ak_session_free(f);
}

/* No sliding window: every position stays reachable. */
static void no_window(ak_model *m) {
    ak_session *s = ak_fx_session(m, AK_BACKEND_CPU, 1024, 16, AK_KV_F32, false, "llama");
    if (!s) return;
    ak_kv_layers g, w;
    ak_session_kv_layers(s, &g, &w);
    CHECK(w.layers == 0 && g.rows == 1024, "llama: %d sliding layers, global of %d rows", w.layers, g.rows);
    ak_err err = {{0}};
    int32_t next;
    CHECK(ak_prefill(s, ids, N_FILL, &next, NULL, &err) == AK_OK, "prefill: %s", err.msg);
    CHECK(ak_session_keep(s, 1) == 1 && ak_session_rewind(s, 1, &err) == AK_OK, "llama: rewind to 1: %s", err.msg);
    ak_session_free(s);
}

int main(void) {
    ak_test_debug(0);
    uint64_t rng = 26;
    for (int i = 0; i < N_IDS; i++) ids[i] = (int32_t)(ak_rand_u32(&rng) % 512);
    static const char *const names[] = {"gemma3", "llama"};
    for (int i = 0; i < 2; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "%s/%s-f32.gguf", names[i], names[i]);
        ak_model *m = NULL;
        ak_err err = {{0}};
        if (ak_model_load(ak_fixture(rel), &m, &err)) { CHECK(0, "%s: %s", rel, err.msg); continue; }
        CHECK(ak_model_vocab(m) == 512, "%s: vocabulary %d", rel, ak_model_vocab(m));
        if (i == 0) {
            rewinds(m);
            generate(m);
        } else {
            no_window(m);
        }
        ak_model_free(m);
    }
    return ak_test_done();
}
