/* akunu logits: float32 logits for every prompt position, [n][vocab] little-endian,
 * through chunked prefill or (--decode) one token at a time through the decode table. */
#include "cli.h"
#include <stdio.h>
#include <stdlib.h>

static const char *usage = "usage: akunu logits -m FILE --prompt-ids ID,ID,... -o OUT.f32 [--chunk N] [--decode] [--kv f32|f16|q8_0|q4_0] [-t THREADS] [--backend cpu|cuda|auto]\n";

int ak_cli_logits(int argc, char **argv) {
    ak_cli_opts o;
    int rc = ak_cli_parse(argc, argv, &o, usage);
    if (rc) { free(o.ids); return rc; }
    if (!o.ids || !o.out) { fprintf(stderr, "akunu: --prompt-ids and -o are required\n%s", usage); free(o.ids); return 2; }
    ak_model *m;
    ak_session *s;
    if ((rc = ak_cli_open(&o, !o.decode, &m, &s))) { free(o.ids); return rc; }
    size_t V = (size_t)ak_model_vocab(m);
    float *lg = malloc((size_t)o.n_ids * V * sizeof(float));
    ak_err err = {{0}};
    int32_t next;
    if (!lg) { fprintf(stderr, "akunu: out of memory\n"); rc = 1; goto done; }
    if (o.decode) {
        for (int i = 0; i < o.n_ids && !rc; i++)
            if (ak_decode(s, o.ids[i], &next, lg + (size_t)i * V, &err)) rc = 1;
    } else if (ak_prefill(s, o.ids, o.n_ids, &next, lg, &err)) rc = 1;
    if (rc) { fprintf(stderr, "akunu: %s\n", err.msg); goto done; }
    FILE *f = fopen(o.out, "wb");
    if (!f || fwrite(lg, sizeof(float), (size_t)o.n_ids * V, f) != (size_t)o.n_ids * V) {
        fprintf(stderr, "akunu: cannot write '%s'\n", o.out);
        rc = 1;
    }
    if (f && fclose(f) != 0 && !rc) { fprintf(stderr, "akunu: cannot write '%s'\n", o.out); rc = 1; }
done:
    free(lg);
    free(o.ids);
    ak_session_free(s);
    ak_model_free(m);
    return rc;
}
