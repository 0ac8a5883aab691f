/* The fixtures end to end on the CUDA backend, with the CPU's tolerances against Hugging
 * Face's float32 logits (rel L2 over all 24 positions: f32 1e-4, f16 5e-3, q8_0 4e-2):
 * prefill in one chunk (cuBLAS GEMM), in chunks of 5 (batched GEMV) and of 1, the decode
 * table (CUDA graph), the unfused table, an F16 KV cache; greedy continuations through
 * prefill + chain decode equal the manifest's; chain decode equals single decode steps; a
 * stop token ends the chain (the common steps in fixture_util.c); speculative decoding
 * keeps plain decoding's ids. Exits 77 (skipped) where no GPU is present. */
#include "fixture_util.h"
#include "test_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(const char *name, const char *type, const char *what, const float *lg, const float *ref, size_t n, double tol) {
    double e = ak_rel_l2(lg, ref, n);
    printf("%-8s %-5s %-16s rel_l2 %.3g (tol %.0e)\n", name, type, what, e, tol);
    CHECK(e <= tol, "%s %s %s: rel L2 %.3g > %.0e", name, type, what, e, tol);
}

/* Speculative decoding on the GPU, whose check of k drafts runs the prefill path on k + 1
 * rows (rowwise GEMVs, every row's logits and choice): prompt lookup and a draft model
 * (the model's f16 file) give plain greedy decoding's ids; after rejected drafts the next
 * logits equal a fresh session's over the same ids (within the type's tolerance: the
 * fresh session's prefill rounds on cuBLAS). */
static void spec(const ak_fx *f, const char *name, const ak_fx_type *ty, ak_model *m) {
    enum { N = 48 };
    char rel[64];
    snprintf(rel, sizeof rel, "%s/%s-f16.gguf", name, name);
    ak_err err = {{0}};
    ak_model *dm = NULL;
    ak_session *s = ak_fx_session(m, AK_BACKEND_CUDA, 128, 0, AK_KV_F32, false, "spec target");
    ak_session *fresh = ak_fx_session(m, AK_BACKEND_CUDA, 128, 0, AK_KV_F32, false, "spec fresh"), *ds = NULL;
    if (ak_model_load(ak_fixture(rel), &dm, &err)) CHECK(0, "%s: %s", rel, err.msg);
    else ds = ak_fx_session(dm, AK_BACKEND_CUDA, 128, 0, AK_KV_F32, false, "spec draft");
    int32_t ref[N], got[N];
    ak_generate_params p = ak_generate_default_params();
    ak_generate_result r;
    p.n_predict = p.ids_cap = N;
    p.ids_out = ref;
    if (!s || !fresh || !ds || ak_generate(s, f->prompt, f->n_prompt, &p, NULL, NULL, &r, &err) || r.n_generated != N) {
        CHECK(0, "%s %s spec: %s", name, ty->type, err.msg);
        goto out;
    }
    for (int how = 1; how <= 2; how++) {   /* n-gram lookup, the draft model */
        p.ids_out = got;
        p.spec_draft = how == 1 ? 16 : 4;
        p.draft = how == 2 ? ds : NULL;
        ak_session_reset(s);
        CHECK(ak_generate(s, f->prompt, f->n_prompt, &p, NULL, NULL, &r, &err) == AK_OK && r.n_generated == N, "%s", err.msg);
        int same = 0;
        while (same < N && got[same] == ref[same]) same++;
        printf("%-8s %-5s spec %-6s %2d drafted, %2d accepted, %s\n", name, ty->type, how == 1 ? "n-gram" : "draft",
               r.n_drafted, r.n_accepted, same == N ? "the ids of plain decoding" : "DIFFERS");
        CHECK(same == N, "%s %s: speculation (%s) changed id %d of %d", name, ty->type, how == 1 ? "n-gram" : "draft", same, N);
        CHECK(r.n_accepted <= r.n_drafted && (how == 1 || r.n_accepted > 0), "%s %s: %d of %d drafts accepted", name,
              ty->type, r.n_accepted, r.n_drafted);
        if (r.n_accepted == r.n_drafted) continue;
        /* rejected drafts were taken back: one more token's logits as a fresh session's */
        const size_t V = (size_t)ak_model_vocab(m);
        float *a = malloc(V * sizeof *a), *b = malloc(V * sizeof *b);
        if (!a || !b) CHECK(0, "out of memory");
        else if (ak_fx_next_logits(s, fresh, got[N - 1], a, b))
            check(name, ty->type, how == 1 ? "after n-gram" : "after draft", a, b, V, ty->tol);
        free(a); free(b);
    }
out:
    ak_session_free(s);
    ak_session_free(fresh);
    ak_session_free(ds);
    ak_model_free(dm);
}

/* One fixture model in one storage type. */
static void one(const ak_fx *f, const char *name, const ak_fx_type *ty, ak_model *m, const float *ref) {
    size_t n = (size_t)f->n_prompt * ak_model_vocab(m);
    struct { int chunk; bool decode, unfused; ak_kv_type kv; const char *what; } v[] = {
        {0, false, false, AK_KV_F32, "prefill"}, {5, false, false, AK_KV_F32, "chunk 5"},
        {1, false, false, AK_KV_F32, "chunk 1"}, {0, true, false, AK_KV_F32, "decode (graph)"},
        {7, false, true, AK_KV_F32, "unfused chunk 7"}, {0, true, true, AK_KV_F32, "unfused decode"},
        {0, false, false, AK_KV_F16, "prefill kv=f16"}, {0, true, false, AK_KV_F16, "decode kv=f16"}};
    for (size_t k = 0; k < sizeof v / sizeof *v; k++) {
        if (v[k].kv == AK_KV_F16 && strcmp(ty->type, "f32") == 0) continue;
        float *o = ak_fx_logits(f, m, v[k].chunk, v[k].decode, v[k].unfused, v[k].kv);
        if (!o) continue;
        double tol = v[k].kv == AK_KV_F16 && ty->tol < 5e-3 ? 5e-3 : ty->tol;
        check(name, ty->type, v[k].what, o, ref, n, tol);
        free(o);
    }
    if (strcmp(ty->type, "q8_0") != 0) ak_fx_greedy(f, m, name, ty->type, AK_KV_F32);
    if (strcmp(ty->type, "q8_0") != 0) spec(f, name, ty, m);
    if (!strcmp(ty->type, "f16")) ak_fx_greedy(f, m, name, ty->type, AK_KV_F16);
    if (!strcmp(name, "llama") && !strcmp(ty->type, "f16")) ak_fx_kv_auto(f, m, AK_KV_F16);
}

int main(void) {
    if (!ak_cuda_available()) { printf("no CUDA GPU: skipped\n"); return 77; }
    ak_fx f;
    if (ak_fx_open(&f, AK_BACKEND_CUDA)) ak_fx_each(&f, one);
    ak_fx_close(&f);
    return ak_test_done();
}
