/* akunu bench: prompt processing (ppN) and generation (tgN) throughput the way
 * llama-bench measures them, plus the weight bytes one decode step reads, the achieved
 * GB/s and its share of the measured read bandwidth (the roofline); with --sample, the
 * generation again with the sampling that chat clients use. Encoder models measure
 * embedding throughput instead: batches of B sequences of N tokens, sentences/s. */
#include "cli.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *usage =
    "usage: akunu bench -m FILE [-p 512] [-n 128] [-d DEPTH] [-t THREADS] [-r REPS] [--kv f32|f16|q8_0|q4_0] [--kv-k T] [--kv-v T] [--backend cpu|cuda|auto] [--sample] [--json]\n"
    "       -d: run each test after DEPTH tokens already in the cache (llama-bench's -d; GB/s counts weights only)\n"
    "       --sample: tgN again, sampled in the table as llama.cpp samples by default (temperature 0.8, top-k 40,\n"
    "                 top-p 0.95, min-p 0.05, repeat penalty 1.1 over 64 tokens)\n"
    "       akunu bench -m FILE --bandwidth [-t THREADS] [--backend ...]   the backend's memory read bandwidth only\n"
    "       encoder models: embeddings of -b BATCH (32) sequences of -p N tokens each, sentences/s\n";

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }

typedef struct { double mean, sd, median; } stats;

static stats summarize(double *v, int n) {
    stats s = {0, 0, 0};
    for (int i = 0; i < n; i++) s.mean += v[i];
    s.mean /= n;
    for (int i = 0; i < n; i++) s.sd += (v[i] - s.mean) * (v[i] - s.mean);
    s.sd = n > 1 ? sqrt(s.sd / (n - 1)) : 0;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    return s;
}

/* Prompt ids that are the same on every run: i * 7919 + 13 (mod vocab) from i = i0. */
static int32_t *prompt_ids(int i0, int n, int vocab) {
    int32_t *ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *ids);
    for (int i = 0; ids && i < n; i++) ids[i] = (int32_t)(((int64_t)(i0 + i) * 7919 + 13) % vocab);
    return ids;
}

/* One timed run after n_depth untimed prompt tokens: prefill of n_pp tokens, or n_tg
 * chain-decoded tokens. */
static int timed(ak_session *s, int vocab, int n_depth, int n_pp, int n_tg, double *tps) {
    ak_err err = {{0}};
    ak_session_reset(s);
    double t0, t1;
    int32_t tok = 1 % vocab;
    if (n_depth) {
        int32_t *ids = prompt_ids(0, n_depth, vocab);
        if (!ids) { fprintf(stderr, "akunu: out of memory\n"); return 1; }
        ak_status st = ak_prefill(s, ids, n_depth, &tok, NULL, &err);
        free(ids);
        if (st) { fprintf(stderr, "akunu: %s\n", err.msg); return 1; }
    }
    if (n_pp) {
        int32_t *ids = prompt_ids(n_depth, n_pp, vocab), next;
        if (!ids) { fprintf(stderr, "akunu: out of memory\n"); return 1; }
        t0 = now();
        ak_status st = ak_prefill(s, ids, n_pp, &next, NULL, &err);
        t1 = now();
        free(ids);
        if (st) { fprintf(stderr, "akunu: %s\n", err.msg); return 1; }
        *tps = n_pp / (t1 - t0);
    } else {
        int32_t *out = malloc((size_t)n_tg * sizeof *out);
        int n_out = 0;
        t0 = now();
        ak_status st = ak_chain_decode(s, tok, n_tg, NULL, 0, out, &n_out, &err);
        t1 = now();
        free(out);
        if (st) { fprintf(stderr, "akunu: %s\n", err.msg); return 1; }
        *tps = n_out / (t1 - t0);
    }
    return 0;
}

/* One timed batch of n_seq distinct sequences of n ids through ak_embed_batch. */
static int timed_embed(ak_session *s, int vocab, int dim, int n, int n_seq, double *sps) {
    ak_err err = {{0}};
    int32_t *ids = prompt_ids(0, n * n_seq, vocab);
    const int32_t **seqs = malloc((size_t)n_seq * sizeof *seqs);
    int *lens = malloc((size_t)n_seq * sizeof *lens);
    float *out = malloc((size_t)n_seq * (size_t)dim * sizeof *out);
    int rc = !ids || !seqs || !lens || !out;
    if (rc) fprintf(stderr, "akunu: out of memory\n");
    for (int i = 0; !rc && i < n_seq; i++) { seqs[i] = ids + (size_t)i * n; lens[i] = n; }
    if (!rc) {
        double t0 = now();
        if (ak_embed_batch(s, seqs, lens, n_seq, out, true, &err)) { fprintf(stderr, "akunu: %s\n", err.msg); rc = 1; }
        *sps = n_seq / (now() - t0);
    }
    free(ids); free(seqs); free(lens); free(out);
    return rc;
}

int ak_cli_bench(int argc, char **argv) {
    int n_pp = 512, n_tg = 128, n_depth = 0, reps = 5, batch = 32, rc;
    bool json = false, bw_only = false, sample = false;
    /* bench-only flags first; the rest goes to the common parser */
    char **rest = malloc(((size_t)argc + 3) * sizeof *rest);
    int nrest = 0;
    rest[nrest++] = argv[0];
    for (int i = 1; i < argc; i++) {
        int *dst = NULL;
        if (!strcmp(argv[i], "-p")) dst = &n_pp;
        else if (!strcmp(argv[i], "-r") || !strcmp(argv[i], "--reps")) dst = &reps;
        else if (!strcmp(argv[i], "-n")) dst = &n_tg;
        else if (!strcmp(argv[i], "-d") || !strcmp(argv[i], "--depth")) dst = &n_depth;
        else if (!strcmp(argv[i], "-b") || !strcmp(argv[i], "--batch")) dst = &batch;
        else if (!strcmp(argv[i], "--json")) { json = true; continue; }
        else if (!strcmp(argv[i], "--sample")) { sample = true; continue; }
        else if (!strcmp(argv[i], "--bandwidth")) { bw_only = true; continue; }
        if (dst) {
            char *end;
            long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : -1;
            if (i + 1 >= argc || *end || v < 0 || v > 65536 || ((dst == &reps || dst == &batch) && v < 1)) {
                fprintf(stderr, "akunu: %s expects a count\n%s", argv[i], usage);
                free(rest);
                return 2;
            }
            *dst = (int)v;
            i++;
            continue;
        }
        rest[nrest++] = argv[i];
    }
    ak_cli_opts o;
    rc = ak_cli_parse(nrest, rest, &o, usage);
    free(rest);
    if (rc) { free(o.ids); return rc; }
    if (!bw_only && n_pp == 0 && n_tg == 0) { fprintf(stderr, "akunu: nothing to measure (-p 0 -n 0)\n"); return 2; }

    ak_model *m = NULL;
    ak_session *s = NULL;
    ak_err err = {{0}};
    double bw = 0;
    o.ctx = n_depth + (n_pp > n_tg + 1 ? n_pp : n_tg + 1);   /* ppN fills N rows, tgN feeds N tokens after one */
    /* the depth's prefill goes in chunks of the test's size (512 when only tg is measured) */
    o.chunk = n_pp > 0 ? n_pp : n_depth > 0 ? (n_depth < 512 ? n_depth : 512) : 1;
    if (ak_model_load(o.model, &m, &err)) { fprintf(stderr, "akunu: %s\n", err.msg); return 1; }
    const int n_emb = n_pp > 0 ? n_pp : 128;   /* an encoder's input length */
    if (ak_model_is_encoder(m)) o.ctx = 0;   /* the model's: as many inputs a call as it holds */
    if ((rc = ak_cli_session(&o, false, &m, &s))) return rc;
    if (ak_session_bandwidth(s, &bw, &err)) { fprintf(stderr, "akunu: %s\n", err.msg); rc = 1; goto done; }
    int threads = ak_session_threads(s);
    const char *name = strrchr(o.model, '/') ? strrchr(o.model, '/') + 1 : o.model;
    double gib = (double)ak_model_file_bytes(m) / (1024.0 * 1024 * 1024);
    double params = (double)ak_model_params(m) / 1e9;
    double bpt = (double)ak_model_decode_bytes(m);
    if (bw_only) {
        printf(json ? "{\"backend\": \"%s\", \"read_gbps\": %.2f}\n" : "backend %s: read bandwidth %.2f GB/s\n", ak_session_backend(s), bw);
        goto done;
    }
    if (ak_model_is_encoder(m)) {   /* sentences/s over batches of distinct sequences */
        const int n = n_emb;
        double warm, *v = malloc((size_t)reps * sizeof *v);
        if (!v || (rc = timed_embed(s, ak_model_vocab(m), ak_model_dim(m), n, batch, &warm))) { free(v); rc = 1; goto done; }
        for (int r = 0; r < reps && !rc; r++) rc = timed_embed(s, ak_model_vocab(m), ak_model_dim(m), n, batch, &v[r]);
        if (rc) { free(v); goto done; }
        stats st = summarize(v, reps);
        free(v);
        if (json)
            printf("[\n  {\"model\": \"%s\", \"backend\": \"%s\", \"threads\": %d, \"test\": \"embed %dx%d\", "
                   "\"sentences_per_s_mean\": %.3f, \"sentences_per_s_sd\": %.3f, \"sentences_per_s_median\": %.3f, \"reps\": %d}\n]\n",
                   name, ak_session_backend(s), threads, batch, n, st.mean, st.sd, st.median, reps);
        else
            printf("| model | backend | threads | test | sentences/s | median sentences/s |\n| --- | --- | ---: | --- | ---: | ---: |\n"
                   "| %s | %s | %d | embed %dx%d | %.2f ± %.2f | %.2f |\n",
                   name, ak_session_backend(s), threads, batch, n, st.mean, st.sd, st.median);
        goto done;
    }
    if (json) printf("[\n");
    else {
        printf("| model | size | params | backend | threads | test | t/s | median t/s | GB/s | roofline |\n");
        printf("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    }
    int vocab = ak_model_vocab(m), first = 1;
    for (int test = 0; test < 3; test++) {
        int pp = test == 0 ? n_pp : 0, tg = test >= 1 ? n_tg : 0;
        if ((!pp && !tg) || (test == 2 && !sample)) continue;
        if (test == 2) {   /* sampled as llama.cpp samples by default, in the table */
            ak_sampling_params sp = ak_sampling_default_params();
            sp.repeat_penalty = 1.1f;
            sp.seed = 1;
            if (ak_session_set_sampling(s, &sp, &err)) { fprintf(stderr, "akunu: %s\n", err.msg); rc = 1; goto done; }
        }
        double warm, *v = malloc((size_t)reps * sizeof *v);
        if ((rc = timed(s, vocab, n_depth, pp, tg, &warm))) { free(v); goto done; }
        for (int r = 0; r < reps && !rc; r++) rc = timed(s, vocab, n_depth, pp, tg, &v[r]);
        if (rc) { free(v); goto done; }
        stats st = summarize(v, reps);
        free(v);
        char tname[32];
        if (n_depth) snprintf(tname, sizeof tname, "%s%d @ d%d", pp ? "pp" : "tg", pp ? pp : tg, n_depth);
        else snprintf(tname, sizeof tname, "%s%d", pp ? "pp" : "tg", pp ? pp : tg);
        if (test == 2) strcat(tname, " sampled");
        double gbps = tg ? bpt * st.median / 1e9 : 0;
        if (json) {
            printf("%s  {\"model\": \"%s\", \"size_gib\": %.4f, \"params_b\": %.4f, \"backend\": \"%s\", \"threads\": %d, "
                   "\"kv\": \"%s\", \"test\": \"%s\", \"tps_mean\": %.3f, \"tps_sd\": %.3f, \"tps_median\": %.3f, \"reps\": %d",
                   first ? "" : ",\n", name, gib, params, ak_session_backend(s), threads,
                   ak_cli_kv_name(s), tname, st.mean, st.sd, st.median, reps);
            if (tg) printf(", \"bytes_per_token\": %.0f, \"gbps\": %.3f, \"read_gbps\": %.3f, \"roofline\": %.4f", bpt, gbps, bw, gbps / bw);
            printf("}");
        } else {
            printf("| %s | %.2f GiB | %.2f B | %s | %d | %s | %.2f ± %.2f | %.2f |", name, gib, params, ak_session_backend(s),
                   threads, tname, st.mean, st.sd, st.median);
            if (tg) printf(" %.1f | %.0f%% |\n", gbps, 100 * gbps / bw);
            else printf(" | |\n");
        }
        first = 0;
    }
    if (json) printf("\n]\n");
    else printf("\nweights read per token: %.1f MB; measured read bandwidth: %.1f GB/s\n", bpt / 1e6, bw);
done:
    ak_session_free(s);
    ak_model_free(m);
    return rc;
}
