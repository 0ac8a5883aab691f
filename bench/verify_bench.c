/* What a speculative check costs against a decode step: after DEPTH prompt tokens, the
 * median time of one chain-decoded token (a decode step) and of one check of k drafts (the
 * verification table on k + 1 rows, ak_session_verify, then rewound), for each k. The
 * ratio bounds speculation: a check that accepts a drafts gives a + 1 tokens for `ratio`
 * decode steps, so (k + 1) / ratio is the most it can gain.
 *   verify_bench -m FILE [--backend cpu|cuda|auto] [-d DEPTH] [-r REPS] [-t THREADS] [K ...]
 * (K: draft counts, 1 to AK_SPEC_MAX; default 1 2 4 8 16) */
#include "akunu.h"
#include "bench_util.h"
#include "engine/session.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DECODE_N 64

int main(int argc, char **argv) {
    const char *path = NULL;
    int depth = 0, reps = 9, nk = 0, ks[AK_SPEC_MAX];
    ak_session_params sp = ak_session_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-m") && v) path = argv[++i];
        else if (!strcmp(a, "-d") && v) depth = atoi(argv[++i]);
        else if (!strcmp(a, "-r") && v) reps = atoi(argv[++i]);
        else if (!strcmp(a, "-t") && v) sp.n_threads = atoi(argv[++i]);
        else if (!strcmp(a, "--backend") && v) {
            i++;
            if (!ak_backend_from_name(v, &sp.backend)) { fprintf(stderr, "verify_bench: --backend cpu|cuda|auto\n"); return 2; }
        } else if (atoi(a) >= 1 && atoi(a) <= AK_SPEC_MAX && nk < AK_SPEC_MAX) ks[nk++] = atoi(a);
        else { fprintf(stderr, "usage: verify_bench -m FILE [--backend cpu|cuda|auto] [-d DEPTH] [-r REPS] [-t THREADS] [K ...]\n"); return 2; }
    }
    if (!path || depth < 0 || reps < 1) { fprintf(stderr, "verify_bench: -m FILE required\n"); return 2; }
    if (!nk) for (int k = 1; k <= AK_SPEC_MAX; k *= 2) ks[nk++] = k;
    ak_err err = {{0}};
    ak_model *m = NULL;
    ak_session *s = NULL;
    sp.n_ctx = depth + DECODE_N + AK_SPEC_MAX + 2;
    sp.chunk = 512;
    if (ak_model_load(path, &m, &err) || ak_session_create(m, &sp, &s, &err)) {
        fprintf(stderr, "verify_bench: %s\n", err.msg);
        ak_model_free(m);
        return 1;
    }
    const int vocab = ak_model_vocab(m);
    int32_t *ids = malloc((size_t)(depth + AK_SPEC_MAX + 1) * sizeof *ids), out[DECODE_N], picks[AK_SPEC_MAX + 1];
    double *t = malloc((size_t)reps * sizeof *t);
    int rc = !ids || !t;
    for (int i = 0; !rc && i < depth + AK_SPEC_MAX + 1; i++) ids[i] = (int32_t)(((int64_t)i * 7919 + 13) % vocab);
    int32_t tok = 1 % vocab;
    if (!rc && depth && ak_prefill(s, ids, depth, &tok, NULL, &err)) rc = 1;
    /* a decode step: chain-decoded tokens, rewound to the depth each time (one untimed first) */
    double step = 0;
    for (int r = -1; !rc && r < reps; r++) {
        int got = 0;
        double t0 = now_s();
        if (ak_chain_decode(s, tok, DECODE_N, NULL, 0, out, &got, &err) || ak_session_rewind(s, depth, &err)) rc = 1;
        else if (r >= 0) t[r] = (now_s() - t0) / got;
    }
    if (!rc) step = median(t, reps);
    if (!rc) {
        printf("%s, %s, depth %d: decode step %.3f ms (median of %d runs of %d tokens)\n", path, ak_session_backend(s), depth,
               1e3 * step, reps, DECODE_N);
        printf("| drafts k | rows | check ms | decode steps | most tokens a step (k + 1) / steps |\n| ---: | ---: | ---: | ---: | ---: |\n");
    }
    for (int i = 0; !rc && i < nk; i++) {
        const int k = ks[i];
        if (k + 1 > ak_session_verify_rows(s)) { fprintf(stderr, "verify_bench: %d drafts: at most %d rows\n", k, ak_session_verify_rows(s)); rc = 1; break; }
        for (int r = -1; !rc && r < reps; r++) {
            double t0 = now_s();
            if (ak_session_verify(s, ids + depth, k + 1, picks, NULL, &err) || ak_session_rewind(s, depth, &err)) rc = 1;
            else if (r >= 0) t[r] = now_s() - t0;
        }
        if (rc) break;
        const double ms = 1e3 * median(t, reps);
        printf("| %d | %d | %.3f | %.2f | %.2f |\n", k, k + 1, ms, ms / (1e3 * step), (k + 1) / (ms / (1e3 * step)));
    }
    if (rc && err.msg[0]) fprintf(stderr, "verify_bench: %s\n", err.msg);
    free(ids);
    free(t);
    ak_session_free(s);
    ak_model_free(m);
    return rc;
}
