/* Text in, text out for the subcommands: tokenizing with messages, streaming a reply
 * to stdout, the generation parameters the options give, and the AKUNU_* debug
 * variables (only the CLI reads the environment). */
#include "cli.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double ak_cli_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int32_t *ak_cli_tokens(const ak_model *m, const char *text, bool add_special, bool parse_special, int *n) {
    ak_err err = {{0}};
    int need = 0;
    size_t len = strlen(text);
    if (ak_tokenize(m, text, len, add_special, parse_special, NULL, 0, &need, &err)) {
        fprintf(stderr, "akunu: %s\n", err.msg);
        return NULL;
    }
    int32_t *ids = malloc(((size_t)need + 1) * sizeof *ids);
    if (!ids) { fprintf(stderr, "akunu: out of memory\n"); return NULL; }
    if (ak_tokenize(m, text, len, add_special, parse_special, ids, need + 1, n, &err)) {
        fprintf(stderr, "akunu: %s\n", err.msg);
        free(ids);
        return NULL;
    }
    return ids;
}

int ak_cli_print_piece(const char *text, size_t len, void *user) {
    (void)user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0;
}

ak_generate_params ak_cli_gen_params(const ak_cli_opts *o) {
    ak_generate_params p = ak_generate_default_params();
    p.n_predict = o->n_predict;
    p.sampling = o->sp;
    if (o->greedy) p.sampling.temperature = 0;
    p.stop = o->stops;
    p.n_stop = o->n_stops;
    return p;
}

static bool env_on(const char *name) {
    const char *e = getenv(name);
    return e && *e && strcmp(e, "0") != 0;
}

static void log_stderr(const char *line, void *user) {
    (void)user;
    fprintf(stderr, "%s\n", line);
}

void ak_cli_debug_from_env(void) {
    const char *pdl = getenv("AKUNU_CUDA_PDL"), *trace = getenv("AKUNU_CUDA_TRACE");
    ak_debug d = {
        .cpu_scalar = env_on("AKUNU_SCALAR"),
        .cpu_no_vnni = env_on("AKUNU_NO_VNNI"),
        .cpu_act_f32 = env_on("AKUNU_ACT_F32"),
        .cuda_no_pdl = pdl && pdl[0] == '0',
        .cuda_stats = env_on("AKUNU_CUDA_STATS"),
        .cuda_profile = env_on("AKUNU_CUDA_PROFILE"),
        .cuda_trace = trace && *trace,
        .cuda_trace_pos = trace ? atoi(trace) : 0,
        .cuda_skip = getenv("AKUNU_CUDA_SKIP"),
        .log = log_stderr,
    };
    ak_set_debug(&d);
}
