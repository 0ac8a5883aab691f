/* A real embedding model (all-MiniLM-L6-v2, fetched and converted by scripts/get-model
 * minilm) against sentence-transformers: the tokenizer's ids and cosine similarity of
 * every sentence embedding to the committed reference (tools/embed_refs.py). The
 * sentences go through ak_embed_batch in one call. Fails when the model is missing.
 *   test_embed_real MODELS_DIR DATA_DIR */
#include "akunu.h"
#include "format/gguf.h"
#include "model/tokenizer.h"
#include "test_util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    CHECK(argc == 3, "usage: test_embed_real MODELS_DIR DATA_DIR");
    if (argc != 3) return ak_test_done();
    char path[4096];
    snprintf(path, sizeof path, "%s/all-MiniLM-L6-v2-f32.gguf", argv[1]);
    ak_model *m;
    ak_err err = {{0}};
    if (ak_model_load(path, &m, &err)) { CHECK(0, "%s (run scripts/get-model minilm)", err.msg); return ak_test_done(); }
    ak_gguf *g;
    ak_tokenizer *tok = NULL;
    CHECK(ak_gguf_open(path, &g, &err) == AK_OK && ak_tokenizer_load(g, &tok, &err) == AK_OK, "tokenizer: %s", err.msg);
    snprintf(path, sizeof path, "%s/sentences.txt", argv[2]);
    size_t n_txt, n_ids, n_ref;
    char *txt = ak_read_file(path, &n_txt);
    snprintf(path, sizeof path, "%s/ids.txt", argv[2]);
    char *ids_txt = ak_read_file(path, &n_ids);
    snprintf(path, sizeof path, "%s/embeddings.f32", argv[2]);
    float *ref = ak_read_file(path, &n_ref);
    CHECK(txt && ids_txt && ref && tok, "reference data in %s", argv[2]);
    if (!txt || !ids_txt || !ref || !tok) return ak_test_done();
    txt = realloc(txt, n_txt + 1);
    txt[n_txt] = 0;
    ids_txt = realloc(ids_txt, n_ids + 1);
    ids_txt[n_ids] = 0;
    int dim = ak_model_dim(m), n = 0;
    const int32_t *seqs[64];
    int lens[64];
    char *line = txt, *id_line = ids_txt;
    while (*line && n < 64) {
        char *end = strchr(line, '\n'), *id_end = strchr(id_line, '\n');
        if (end) *end = 0;
        if (id_end) *id_end = 0;
        int32_t *ids = malloc(512 * sizeof *ids), want[512];
        int got = 0, nw = 0;
        CHECK(ak_tokenizer_encode(tok, line, strlen(line), true, false, ids, 512, &got, &err) == AK_OK, "%s", err.msg);
        for (char *p = id_line; *p && nw < 512;) { want[nw++] = (int32_t)strtol(p, &p, 10); if (*p == ',') p++; }
        CHECK(got == nw && memcmp(ids, want, (size_t)nw * 4) == 0, "sentence %d: ids differ from the HF tokenizer ('%s')", n + 1, line);
        seqs[n] = ids;
        lens[n++] = got;
        if (!end) break;
        line = end + 1;
        id_line = id_end ? id_end + 1 : id_line + strlen(id_line);
    }
    CHECK(n >= 20 && n_ref == (size_t)n * dim * 4, "%d sentences, reference of %zu bytes", n, n_ref);
    ak_session *s;
    if (ak_session_create(m, NULL, &s, &err)) { CHECK(0, "%s", err.msg); return ak_test_done(); }
    float *out = malloc((size_t)n * dim * sizeof *out);
    CHECK(ak_embed_batch(s, seqs, lens, n, out, true, &err) == AK_OK, "%s", err.msg);
    double worst = 1;
    for (int i = 0; i < n && n_ref == (size_t)n * dim * 4; i++) {
        double dot = 0, na = 0, nb = 0;
        for (int j = 0; j < dim; j++) {
            dot += (double)out[i * dim + j] * ref[i * dim + j];
            na += (double)out[i * dim + j] * out[i * dim + j];
            nb += (double)ref[i * dim + j] * ref[i * dim + j];
        }
        double cs = dot / sqrt(na * nb);
        if (cs < worst) worst = cs;
        CHECK(cs >= 0.999, "sentence %d: cosine %.6f < 0.999", i + 1, cs);
    }
    printf("all-MiniLM-L6-v2: %d sentences, worst cosine to sentence-transformers %.7f\n", n, worst);
    for (int i = 0; i < n; i++) free((void *)seqs[i]);
    free(out);
    free(txt);
    free(ids_txt);
    free(ref);
    ak_session_free(s);
    ak_tokenizer_free(tok);
    ak_gguf_close(g);
    ak_model_free(m);
    return ak_test_done();
}
