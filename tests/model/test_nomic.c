/* nomic-bert (fused QKV, rotary, SwiGLU, post-norm) against the independent NumPy forward
 * pass of tools/make_nomic.py: final hidden states and mean pooling.
 *   test_nomic [cpu|cuda] [DIR]   (DIR, or env AKUNU_NOMIC_DIR, holds nomic.gguf, ids.txt, hidden.f32;
 *                                  cuda: exits 77, skipped, without a GPU) */
#include "akunu.h"
#include "test_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    bool cuda = argc > 1 && !strcmp(argv[1], "cuda");
    if (cuda && !ak_cuda_available()) { printf("no CUDA GPU: skipped\n"); return 77; }
    const char *dir = argc > 2 ? argv[2] : getenv("AKUNU_NOMIC_DIR");
    CHECK(dir != NULL, "usage: test_nomic DIR (or AKUNU_NOMIC_DIR)");
    if (!dir) return ak_test_done();
    char path[4096];
    size_t n_ids, n_ref;
    snprintf(path, sizeof path, "%s/ids.txt", dir);
    char *txt = ak_read_file(path, &n_ids);
    snprintf(path, sizeof path, "%s/hidden.f32", dir);
    float *ref = ak_read_file(path, &n_ref);
    CHECK(txt && ref, "reference files in %s (tools/make_nomic.py)", dir);
    if (!txt || !ref) return ak_test_done();
    txt = realloc(txt, n_ids + 1);
    txt[n_ids] = 0;
    int32_t ids[256];
    int n = 0;
    for (char *p = txt; *p && *p != '\n' && n < 256;) { ids[n++] = (int32_t)strtol(p, &p, 10); if (*p == ',') p++; }
    ak_model *m;
    ak_session *s;
    ak_err err = {{0}};
    snprintf(path, sizeof path, "%s/nomic.gguf", dir);
    ak_session_params sp = ak_session_default_params();
    sp.backend = cuda ? AK_BACKEND_CUDA : AK_BACKEND_CPU;
    if (ak_model_load(path, &m, &err) || ak_session_create(m, &sp, &s, &err)) { CHECK(0, "%s", err.msg); return ak_test_done(); }
    int dim = ak_model_dim(m);
    CHECK(n_ref == (size_t)n * dim * 4 && !strcmp(ak_model_arch_name(m), "nomic-bert"), "shape");
    float *hidden = malloc((size_t)n * dim * 4), *pooled = malloc((size_t)dim * 4), *mean = calloc((size_t)dim, 4);
    CHECK(ak_embed(s, ids, n, hidden, pooled, false, &err) == AK_OK, "%s", err.msg);
    for (int i = 0; i < n; i++) for (int j = 0; j < dim; j++) mean[j] += ref[i * dim + j] / (float)n;
    double eh = ak_rel_l2(hidden, ref, (size_t)n * dim), ep = ak_rel_l2(pooled, mean, (size_t)dim);
    printf("nomic-bert (%s): hidden rel_l2 %.3g, mean pool rel_l2 %.3g (tol 1e-4)\n", ak_session_backend(s), eh, ep);
    CHECK(eh <= 1e-4 && ep <= 1e-4, "hidden %.3g pool %.3g", eh, ep);
    free(hidden); free(pooled); free(mean); free(txt); free(ref);
    ak_session_free(s);
    ak_model_free(m);
    return ak_test_done();
}
