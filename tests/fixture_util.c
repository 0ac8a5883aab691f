#include "fixture_util.h"
#include "engine/session.h"
#include "test_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const ak_fx_models[] = {"llama", "llama31", "qwen2", "qwen3", "gemma", "gemma2", "gemma3"};
const int ak_fx_n_models = (int)(sizeof ak_fx_models / sizeof *ak_fx_models);
const ak_fx_type ak_fx_types[] = {{"f32", 1e-4}, {"f16", 5e-3}, {"q8_0", 4e-2}};
const int ak_fx_n_types = (int)(sizeof ak_fx_types / sizeof *ak_fx_types);

bool ak_fx_open(ak_fx *f, ak_backend_kind backend) {
    memset(f, 0, sizeof *f);
    f->backend = backend;
    size_t sz;
    f->manifest = ak_read_file(ak_fixture("manifest.json"), &sz);
    CHECK(f->manifest != NULL, "manifest.json not found under %s", ak_fixture(""));
    if (!f->manifest) return false;
    f->manifest = realloc(f->manifest, sz + 1);
    f->manifest[sz] = 0;
    f->n_prompt = ak_json_ints(f->manifest, NULL, "prompt_ids", f->prompt, 64);
    CHECK(f->n_prompt == 24, "prompt_ids: %d", f->n_prompt);
    return f->n_prompt == 24;
}

void ak_fx_close(ak_fx *f) {
    free(f->manifest);
    f->manifest = NULL;
}

static float *fx_ref(const ak_fx *f, const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "%s/logits.hf.f32", name);
    size_t sz;
    float *ref = ak_read_file(ak_fixture(rel), &sz);
    CHECK(ref && sz == (size_t)f->n_prompt * 512 * 4, "%s: reference logits", name);
    if (ref && sz != (size_t)f->n_prompt * 512 * 4) { free(ref); return NULL; }
    return ref;
}

static ak_model *fx_load(const char *name, const char *type) {
    char rel[256];
    snprintf(rel, sizeof rel, "%s/%s-%s.gguf", name, name, type);
    ak_model *m;
    ak_err err = {{0}};
    if (ak_model_load(ak_fixture(rel), &m, &err)) { CHECK(0, "%s: %s", rel, err.msg); return NULL; }
    return m;
}

void ak_fx_each(const ak_fx *f, ak_fx_fn fn) {
    for (int mi = 0; mi < ak_fx_n_models; mi++) {
        float *ref = fx_ref(f, ak_fx_models[mi]);
        for (int ti = 0; ref && ti < ak_fx_n_types; ti++) {
            ak_model *m = fx_load(ak_fx_models[mi], ak_fx_types[ti].type);
            if (!m) continue;
            fn(f, ak_fx_models[mi], &ak_fx_types[ti], m, ref);
            ak_model_free(m);
        }
        free(ref);
    }
}

static ak_session_params params(const ak_fx *f, int chunk, ak_kv_type kv) {
    ak_session_params p = ak_session_default_params();
    p.chunk = chunk;
    p.kv_type = kv;
    p.backend = f->backend;
    return p;
}

float *ak_fx_logits(const ak_fx *f, ak_model *m, int chunk, bool decode, bool unfused, ak_kv_type kv) {
    int V = ak_model_vocab(m), n = f->n_prompt;
    ak_session_params p = params(f, chunk, kv);
    p.logits_all = true;
    ak_session *s;
    ak_err err = {{0}};
    if (ak_session_create_ex(m, &p, unfused, &s, &err)) { CHECK(0, "session: %s", err.msg); return NULL; }
    const char *want = f->backend == AK_BACKEND_CUDA ? "cuda" : "cpu";
    CHECK(!strcmp(ak_session_backend(s), want), "backend %s, not %s", ak_session_backend(s), want);
    float *lg = malloc((size_t)n * V * sizeof(float));
    int32_t next;
    ak_status st = AK_OK;
    if (decode)
        for (int i = 0; i < n && !st; i++) st = ak_decode(s, f->prompt[i], &next, lg + (size_t)i * V, &err);
    else
        st = ak_prefill(s, f->prompt, n, &next, lg, &err);
    CHECK(st == AK_OK, "run: %s", err.msg);
    ak_session_free(s);
    if (st) { free(lg); return NULL; }
    return lg;
}

ak_session *ak_fx_session(ak_model *m, ak_backend_kind backend, int n_ctx, int chunk, ak_kv_type kv, bool logits_all,
                          const char *what) {
    ak_session_params p = ak_session_default_params();
    p.n_ctx = n_ctx;
    p.chunk = chunk;
    p.kv_type = kv;
    p.backend = backend;
    p.logits_all = logits_all;
    ak_session *s = NULL;
    ak_err err = {{0}};
    if (ak_session_create(m, &p, &s, &err)) CHECK(0, "%s session: %s", what, err.msg);
    return s;
}

bool ak_fx_next_logits(ak_session *s, ak_session *fresh, int32_t next, float *a, float *b) {
    const int n = ak_session_pos(s);
    int32_t *ids = malloc((size_t)(n + 1) * sizeof *ids), pick;
    ak_err err = {{0}};
    bool ok = ids != NULL;
    CHECK(ok, "out of memory");
    if (ok) {
        memcpy(ids, ak_session_tokens(s), (size_t)n * sizeof *ids);
        ids[n] = next;
        ak_session_reset(fresh);
        ok = !ak_prefill(s, ids + n, 1, &pick, a, &err) && !ak_prefill(fresh, ids, n + 1, &pick, b, &err);
        CHECK(ok, "%s", err.msg);
    }
    free(ids);
    return ok;
}

void ak_fx_kv_auto(const ak_fx *f, ak_model *m, ak_kv_type want) {
    ak_session_params p = params(f, 0, AK_KV_AUTO);
    ak_session *s = NULL;
    ak_err err = {{0}};
    CHECK(ak_session_create(m, &p, &s, &err) == AK_OK, "session with AK_KV_AUTO: %s", err.msg);
    if (s) CHECK(ak_session_kv_type(s) == want, "AK_KV_AUTO on %s gave KV type %d, not %d", ak_session_backend(s), ak_session_kv_type(s), want);
    ak_session_free(s);
    size_t n = (size_t)f->n_prompt * ak_model_vocab(m);
    float *a = ak_fx_logits(f, m, 0, true, false, AK_KV_AUTO), *b = ak_fx_logits(f, m, 0, true, false, want);
    CHECK(a && b && memcmp(a, b, n * sizeof(float)) == 0, "AK_KV_AUTO decodes other logits than KV type %d", want);
    free(a);
    free(b);
    p.kv_type = (ak_kv_type)7;
    s = NULL;
    CHECK(ak_session_create(m, &p, &s, &err) == AK_ERR_ARG && strstr(err.msg, "KV cache type"), "KV type 7 not refused: %s", err.msg);
    ak_session_free(s);
    p.kv_type = AK_KV_AUTO;
    p.kv_type_v = (ak_kv_type)9;
    s = NULL;
    CHECK(ak_session_create(m, &p, &s, &err) == AK_ERR_ARG && strstr(err.msg, "KV cache type 9"), "V type 9 not refused: %s", err.msg);
    ak_session_free(s);
}

void ak_fx_greedy(const ak_fx *f, ak_model *m, const char *name, const char *type, ak_kv_type kv) {
    int32_t want[16], got[17], next, eos = ak_token_eos(m);
    const int32_t *prompt = f->prompt;
    const int n_prompt = f->n_prompt;
    int nw = ak_json_ints(f->manifest, name, "greedy_continuation", want, 16);
    CHECK(nw == 16, "%s: manifest greedy_continuation", name);
    ak_session_params p = params(f, 0, kv);
    ak_session *s;
    ak_err err = {{0}};
    if (ak_session_create(m, &p, &s, &err)) { CHECK(0, "%s", err.msg); return; }
    CHECK(ak_prefill(s, prompt, n_prompt, &next, NULL, &err) == AK_OK, "%s", err.msg);
    got[0] = next;
    int n = 0;
    /* the fixtures' eos (2) never appears in these continuations, so the chain runs to 15 */
    CHECK(ak_chain_decode(s, next, 15, &eos, 1, got + 1, &n, &err) == AK_OK, "%s", err.msg);
    CHECK(n == 15, "%s %s: chain produced %d tokens", name, type, n);
    int same = n == 15;
    for (int i = 0; i < 16 && same; i++) same = got[i] == want[i];
    CHECK(same, "%s %s (kv %s): greedy continuation differs from Hugging Face's", name, type, kv ? "f16" : "f32");
    printf("%-8s %-5s greedy kv=%s %s\n", name, type, kv ? "f16" : "f32", same ? "matches" : "DIFFERS");

    /* chain decode of 16 (on CUDA two unrolled graphs) equals 16 decode calls from the
     * same state */
    ak_session *a, *b;
    if (ak_session_create(m, &p, &a, &err) || ak_session_create(m, &p, &b, &err)) { CHECK(0, "%s", err.msg); ak_session_free(s); return; }
    int32_t na = -1, nb = -1, chain[16], single[16];
    CHECK(!ak_prefill(a, prompt, n_prompt, &na, NULL, &err) && !ak_prefill(b, prompt, n_prompt, &nb, NULL, &err), "%s", err.msg);
    int nc = 0;
    CHECK(ak_chain_decode(a, na, 16, NULL, 0, chain, &nc, &err) == AK_OK && nc == 16, "chain: %s", err.msg);
    int32_t t = nb;
    for (int i = 0; i < 16; i++) { CHECK(ak_decode(b, t, &single[i], NULL, &err) == AK_OK, "%s", err.msg); t = single[i]; }
    CHECK(memcmp(chain, single, sizeof chain) == 0, "%s %s: chain decode differs from single decode steps", name, type);
    CHECK(ak_session_pos(a) == ak_session_pos(b) && ak_session_pos(a) == n_prompt + 16, "positions");
    /* a stop token ends the chain after it */
    ak_session_reset(a);
    CHECK(!ak_prefill(a, prompt, n_prompt, &na, NULL, &err), "%s", err.msg);
    int32_t stop = chain[9], out[16];
    CHECK(ak_chain_decode(a, na, 16, &stop, 1, out, &nc, &err) == AK_OK, "%s", err.msg);
    int first = 0;
    while (chain[first] != stop) first++;
    CHECK(nc == first + 1 && out[nc - 1] == stop, "%s %s: stop after %d tokens, expected %d", name, type, nc, first + 1);
    ak_session_free(a);
    ak_session_free(b);
    ak_session_free(s);
}
