/* akunu serve: options, then the server's life — listen at once (/health says
 * "loading"), load the model, start the slots, serve until SIGINT or SIGTERM, then stop
 * taking connections, cancel what runs, wait for the slots and free everything. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "server.h"

static const char *usage =
    "usage: akunu serve -m FILE [--host 127.0.0.1] [--port 8080] [-c CTX] [-t THREADS] [--backend cpu|cuda|auto]\n"
    "                   [--kv f32|f16|q8_0|q4_0] [--kv-k T] [--kv-v T] [--slots N] [--max-queue N] [--api-key KEY | --api-key-file F]\n"
    "                   [--rate-limit N (requests a minute per client)] [--timeout S] [--max-tokens N]\n"
    "                   [--max-body BYTES] [--alias NAME] [--spec ngram [--draft-max K]] [-v]\n"
    "  --spec ngram: speculative decoding by prompt lookup, K drafted tokens (10) checked in one pass\n"
    "  an OpenAI-compatible server: /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models,\n"
    "  /health, /metrics, and a chat page at /\n";

static bool num(const char *flag, const char *v, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "akunu serve: %s expects an integer in [%ld, %ld]\n", flag, lo, hi);
        return false;
    }
    *out = x;
    return true;
}

/* The key from a file: its first line, without the newline. */
static char *read_key(const char *path) {
    FILE *f = fopen(path, "r");
    char line[4096];
    char *k = f && fgets(line, sizeof line, f) ? strdup(line) : NULL;
    if (f) fclose(f);
    if (k) k[strcspn(k, "\r\n")] = 0;
    if (k && !k[0]) { free(k); k = NULL; }
    return k;
}

static int parse(int argc, char **argv, ak_srv_opts *o, char **key_owned) {
    *o = (ak_srv_opts){.host = "127.0.0.1", .port = 8080, .slots = 1, .max_queue = 64, .timeout_s = 600,
                       .max_body = 8 << 20, .backend = AK_BACKEND_CPU, .kv = AK_KV_AUTO, .kv_v = AK_KV_AUTO};
    bool spec = false;
    int draft_max = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x = 0;
        bool ok = true, takes = true;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model_path = v;
        else if (!strcmp(a, "--host")) o->host = v;
        else if (!strcmp(a, "--alias")) o->model_name = v;
        else if (!strcmp(a, "--api-key")) {
            if (v && !v[0]) { fprintf(stderr, "akunu serve: --api-key must not be empty\n"); return 2; }
            o->api_key = v;
        }
        else if (!strcmp(a, "--api-key-file")) {
            if (!v || !(*key_owned = read_key(v))) { fprintf(stderr, "akunu serve: cannot read a key from '%s'\n", v ? v : ""); return 2; }
            o->api_key = *key_owned;
        }
        else if (!strcmp(a, "--port") && (ok = num(a, v, 0, 65535, &x))) o->port = (int)x;
        else if ((!strcmp(a, "-c") || !strcmp(a, "--ctx")) && (ok = num(a, v, 1, 1 << 30, &x))) o->ctx = (int)x;
        else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && (ok = num(a, v, 1, 256, &x))) o->threads = (int)x;
        else if (!strcmp(a, "--slots") && (ok = num(a, v, 1, 64, &x))) o->slots = (int)x;
        else if (!strcmp(a, "--max-queue") && (ok = num(a, v, 1, 1 << 16, &x))) o->max_queue = (int)x;
        else if (!strcmp(a, "--rate-limit") && (ok = num(a, v, 0, 1 << 20, &x))) o->rate_per_min = (int)x;
        else if (!strcmp(a, "--timeout") && (ok = num(a, v, 0, 1 << 20, &x))) o->timeout_s = (int)x;
        else if (!strcmp(a, "--max-tokens") && (ok = num(a, v, 0, 1 << 24, &x))) o->max_tokens = (int)x;
        else if (!strcmp(a, "--max-body") && (ok = num(a, v, 1024, 1L << 30, &x))) o->max_body = (size_t)x;
        else if (!strcmp(a, "--spec")) {
            if (!v || strcmp(v, "ngram")) { fprintf(stderr, "akunu serve: --spec expects ngram (draft models: akunu run)\n"); return 2; }
            spec = true;
        }
        else if (!strcmp(a, "--draft-max") && (ok = num(a, v, 1, AK_SPEC_MAX, &x))) draft_max = (int)x;
        else if (!strcmp(a, "--backend")) {
            if (!ak_backend_from_name(v, &o->backend)) { fprintf(stderr, "akunu serve: --backend expects cpu, cuda or auto\n"); return 2; }
        }
        else if (!strcmp(a, "--kv-f16")) o->kv = o->kv_v = AK_KV_F16, takes = false;
        else if (!strcmp(a, "--kv-f32")) o->kv = o->kv_v = AK_KV_F32, takes = false;
        else if (!strcmp(a, "--kv") || !strcmp(a, "--kv-k") || !strcmp(a, "--kv-v")) {
            ak_kv_type t;
            if (!ak_kv_type_from_name(v, &t)) { fprintf(stderr, "akunu serve: %s expects f32, f16, q8_0, q4_0 or auto\n", a); return 2; }
            if (strcmp(a, "--kv-v")) o->kv = t;
            if (strcmp(a, "--kv-k")) o->kv_v = t;
        }
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o->verbose = true, takes = false;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage, stdout); return 1; }
        else if (ok) { fprintf(stderr, "akunu serve: unknown option '%s'\n%s", a, usage); return 2; }
        if (!ok) return 2;
        if (takes) {
            if (!v) { fprintf(stderr, "akunu serve: %s needs a value\n", a); return 2; }
            i++;
        }
    }
    if (!o->model_path) { fprintf(stderr, "akunu serve: -m FILE is required\n%s", usage); return 2; }
    if (draft_max && !spec) { fprintf(stderr, "akunu serve: --draft-max goes with --spec ngram\n"); return 2; }
    o->spec_draft = spec ? (draft_max ? draft_max : 10) : 0;
    return 0;
}

int ak_cli_serve(int argc, char **argv) {
    ak_srv *s = calloc(1, sizeof *s);
    char *key = NULL;
    if (!s) return 1;
    int rc = parse(argc, argv, &s->o, &key);
    if (rc) { free(key); free(s); return rc == 1 ? 0 : rc; }
    /* the signals are taken by sigwait below, so every thread started from here blocks them */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);   /* a client gone mid-write is an error to handle, not a signal */
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->rl_mu, NULL);
    const char *base = strrchr(s->o.model_path, '/');
    snprintf(s->model_name, sizeof s->model_name, "%s", s->o.model_name ? s->o.model_name : base ? base + 1 : s->o.model_path);
    ak_err err = {{0}};
    rc = 1;
    if (ak_http_start(s, &err)) { fprintf(stderr, "akunu serve: %s\n", err.msg); goto out; }
    fprintf(stderr, "akunu serve: listening on http://%s:%d (loading %s)\n", s->o.host, s->o.port, s->o.model_path);
    if (ak_model_load(s->o.model_path, &s->m, &err) || ak_srv_start_slots(s, &err)) {
        fprintf(stderr, "akunu serve: %s\n", err.msg[0] ? err.msg : "out of memory");
        goto stop;
    }
    if (!ak_model_is_encoder(s->m) && !ak_model_chat_family(s->m)) {   /* as llama-server: ChatML */
        fprintf(stderr, "akunu serve: %s; chat requests use ChatML\n",
                ak_model_chat_template(s->m) ? "the model's chat template is not one akunu renders" : "the model has no chat template");
        ak_model_set_chat_template(s->m, "chatml", &err);
    }
    atomic_store(&s->ready, true);
    fprintf(stderr, "akunu serve: ready: %s, %d slot(s) of %d tokens, backend %s%s\n", s->model_name, s->n_slots, s->n_ctx,
            ak_session_backend(s->slots[0].s), s->o.api_key ? ", API key required" : "");
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "akunu serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    rc = 0;
stop:
    atomic_store(&s->stopping, true);
    ak_http_quiesce(s);
    ak_srv_stop_slots(s);
    ak_http_stop(s);
out:
    ak_model_free(s->m);
    pthread_mutex_destroy(&s->rl_mu);
    pthread_mutex_destroy(&s->mu);
    free(key);
    free(s);
    return rc;
}
