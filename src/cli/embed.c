/* akunu embed: sentence embeddings from an encoder model, one per -p, pooled as the
 * file says and L2-normalised (unless --no-normalize). */
#include "cli.h"
#include <stdio.h>
#include <stdlib.h>

static const char *usage = "usage: akunu embed -m FILE -p TEXT [-p TEXT ...] [--json] [--no-normalize] [-t THREADS] [--backend cpu|cuda|auto]\n";

int ak_cli_embed(int argc, char **argv) {
    ak_cli_opts o;
    int rc = ak_cli_parse(argc, argv, &o, usage);
    if (rc) { free(o.ids); return rc; }
    if (!o.n_prompts) { fprintf(stderr, "akunu: give at least one -p TEXT\n%s", usage); return 2; }
    ak_model *m;
    ak_session *s;
    if ((rc = ak_cli_open(&o, false, &m, &s))) return rc;
    int dim = ak_model_dim(m);
    float *vec = malloc((size_t)dim * sizeof *vec);
    if (!ak_model_is_encoder(m)) { fprintf(stderr, "akunu: %s is not an embedding (encoder) model\n", o.model); rc = 1; goto done; }
    if (!vec) { rc = 1; goto done; }
    if (o.json) printf("{\"model\": \"%s\", \"dim\": %d, \"normalized\": %s, \"embeddings\": [", o.model, dim, o.no_normalize ? "false" : "true");
    for (int i = 0; i < o.n_prompts && !rc; i++) {
        int n = 0;
        ak_err err = {{0}};
        int32_t *ids = ak_cli_tokens(m, o.prompts[i], true, false, &n);
        if (!ids) { rc = 1; break; }
        if (ak_embed(s, ids, n, NULL, vec, !o.no_normalize, &err)) { fprintf(stderr, "akunu: input %d: %s\n", i + 1, err.msg); rc = 1; }
        free(ids);
        if (rc) break;
        printf(o.json ? (i ? ",\n  [" : "\n  [") : "");
        for (int j = 0; j < dim; j++) printf(o.json ? (j ? ", %.7g" : "%.7g") : (j ? " %.7g" : "%.7g"), vec[j]);
        printf(o.json ? "]" : "\n");
    }
    if (o.json && !rc) printf("\n]}\n");
done:
    free(vec);
    ak_session_free(s);
    ak_model_free(m);
    return rc;
}
