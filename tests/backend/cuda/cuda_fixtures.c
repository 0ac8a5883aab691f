/* The fixtures end to end on the CUDA backend, with the CPU's tolerances against Hugging
 * Face's float32 logits (rel L2 over all 24 positions: f32 1e-4, f16 5e-3, q8_0 4e-2):
 * prefill in one chunk (cuBLAS GEMM), in chunks of 5 (batched GEMV) and of 1, the decode
 * table (CUDA graph), the unfused table, an F16 KV cache; greedy continuations through
 * prefill + chain decode equal the manifest's; chain decode equals single decode steps; a
 * stop token ends the chain (the common steps in fixture_util.c). Exits 77 (skipped)
 * where no GPU is present. */
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
