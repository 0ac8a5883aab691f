/* BERT against Hugging Face: final hidden states and mean pooling of the fixture input,
 * from the f32 and f16 files; a batch of sequences of different lengths gives each the
 * same vector as alone; decoder-only calls are refused on an encoder.
 *     test_bert [cpu|cuda]   (cuda: also the pooled vectors' cosine to the CPU's >= 0.9999;
 *                             exits 77, skipped, without a GPU) */
#include "akunu.h"
#include "test_util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static double cosine(const float *a, const float *b, int n) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) { ab += (double)a[i] * b[i]; aa += (double)a[i] * a[i]; bb += (double)b[i] * b[i]; }
    return ab / sqrt(aa * bb);
}

int main(int argc, char **argv) {
    bool cuda = argc > 1 && !strcmp(argv[1], "cuda");
    if (cuda && !ak_cuda_available()) { printf("no CUDA GPU: skipped\n"); return 77; }
    ak_session_params sp = ak_session_default_params();
    sp.backend = cuda ? AK_BACKEND_CUDA : AK_BACKEND_CPU;
    size_t sz;
    char *manifest = ak_read_file(ak_fixture("manifest.json"), &sz);
    CHECK(manifest != NULL, "manifest");
    if (!manifest) return ak_test_done();
    manifest = realloc(manifest, sz + 1);
    manifest[sz] = 0;
    int32_t ids[128];
    int n = ak_json_ints(manifest, "bert", "input_ids", ids, 128);
    CHECK(n == 31, "bert input_ids: %d", n);
    size_t hsz, psz;
    float *href = ak_read_file(ak_fixture("bert/hidden.hf.f32"), &hsz), *pref = ak_read_file(ak_fixture("bert/mean_pool.hf.f32"), &psz);
    CHECK(href && hsz == (size_t)n * 128 * 4 && pref && psz == 128 * 4, "references");
    const struct { const char *file; double tol; } files[] = {{"bert/bert-f32.gguf", 1e-4}, {"bert/bert-f16.gguf", 5e-3}};
    for (int f = 0; f < 2 && href && pref; f++) {
        ak_model *m;
        ak_session *s;
        ak_err err = {{0}};
        if (ak_model_load(ak_fixture(files[f].file), &m, &err)) { CHECK(0, "%s: %s", files[f].file, err.msg); continue; }
        CHECK(ak_model_is_encoder(m) && ak_model_dim(m) == 128, "encoder");
        /* an encoder has no output projection (fuzz finding: this read m->output) */
        uint64_t db = ak_model_decode_bytes(m);
        CHECK(db > 0 && db < ak_model_file_bytes(m), "%s: decode bytes %llu of %llu", files[f].file,
              (unsigned long long)db, (unsigned long long)ak_model_file_bytes(m));
        if (ak_session_create(m, &sp, &s, &err)) { CHECK(0, "%s", err.msg); ak_model_free(m); continue; }
        CHECK(!strcmp(ak_session_backend(s), cuda ? "cuda" : "cpu"), "backend %s", ak_session_backend(s));
        float *hidden = malloc((size_t)n * 128 * 4), pooled[128];
        CHECK(ak_embed(s, ids, n, hidden, pooled, false, &err) == AK_OK, "%s", err.msg);
        double eh = ak_rel_l2(hidden, href, (size_t)n * 128), ep = ak_rel_l2(pooled, pref, 128);
        printf("%s %s: hidden rel_l2 %.3g, mean_pool rel_l2 %.3g (tol %.0e)\n", ak_session_backend(s), files[f].file, eh, ep,
               files[f].tol);
        CHECK(eh <= files[f].tol && ep <= files[f].tol, "%s: hidden %.3g pool %.3g", files[f].file, eh, ep);
        ak_session *cs;
        if (cuda && ak_session_create(m, NULL, &cs, &err) == AK_OK) {
            float cpu[128];
            CHECK(ak_embed(cs, ids, n, NULL, cpu, false, &err) == AK_OK, "cpu: %s", err.msg);
            double c = cosine(pooled, cpu, 128);
            printf("%s: cosine to the CPU's pooled vector %.9f\n", files[f].file, c);
            CHECK(c >= 0.9999, "%s: cosine to the CPU %.9f", files[f].file, c);
            ak_session_free(cs);
        }

        /* batch of different lengths (prefixes of the input) = each alone */
        int lens[3] = {n, 5, 17};
        const int32_t *seqs[3] = {ids, ids, ids + 3};
        float batch[3 * 128], alone[128];
        CHECK(ak_embed_batch(s, seqs, lens, 3, batch, true, &err) == AK_OK, "%s", err.msg);
        for (int i = 0; i < 3; i++) {
            CHECK(ak_embed(s, seqs[i], lens[i], NULL, alone, true, &err) == AK_OK, "%s", err.msg);
            CHECK(memcmp(alone, batch + i * 128, sizeof alone) == 0, "batch entry %d differs from the sequence alone", i);
            double nn = 0;
            for (int j = 0; j < 128; j++) nn += (double)alone[j] * alone[j];
            CHECK(fabs(nn - 1) < 1e-5, "normalised: %g", nn);
        }
        int32_t next;
        CHECK(ak_prefill(s, ids, n, &next, NULL, &err) == AK_ERR_ARG && strstr(err.msg, "encoder"), "prefill refused: %s", err.msg);
        int32_t bad = 400;
        CHECK(ak_embed(s, &bad, 1, NULL, pooled, false, &err) == AK_ERR_ARG, "id outside vocab");
        int32_t *longer = calloc(200, 4);
        CHECK(ak_embed(s, longer, 200, NULL, pooled, false, &err) == AK_ERR_ARG, "longer than context: %s", err.msg);
        free(longer);
        /* learned positions end at the trained length: a longer context would read past them */
        ak_session_params lp = sp;
        lp.n_ctx = 1000;
        ak_session *ls = NULL;
        CHECK(ak_session_create(m, &lp, &ls, &err) == AK_ERR_ARG && strstr(err.msg, "learned positions"),
              "a context past the position table: %s", err.msg);
        ak_session_free(ls);
        free(hidden);
        ak_session_free(s);
        ak_model_free(m);
    }
    free(href);
    free(pref);
    free(manifest);
    return ak_test_done();
}
