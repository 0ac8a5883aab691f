/* Option parsing and model/session set-up shared by the subcommands. */
#include "cli.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int parse_int(const char *flag, const char *s, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "akunu: %s expects an integer in [%d, %d], got '%s'\n", flag, lo, hi, s);
        return 2;
    }
    *out = (int)v;
    return 0;
}

static int parse_float(const char *flag, const char *s, double lo, double hi, float *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "akunu: %s expects a number in [%g, %g], got '%s'\n", flag, lo, hi, s);
        return 2;
    }
    *out = (float)v;
    return 0;
}

static int parse_ids(const char *s, ak_cli_opts *o) {
    size_t cap = 1;
    for (const char *c = s; *c; c++) cap += *c == ',';
    o->ids = malloc(cap * sizeof *o->ids);
    if (!o->ids) { fprintf(stderr, "akunu: out of memory\n"); return 2; }
    o->n_ids = 0;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
            fprintf(stderr, "akunu: the ids must be comma-separated non-negative integers, got '%s'\n", s);
            return 2;
        }
        o->ids[o->n_ids++] = (int32_t)v;
        if (!*end) break;
        p = end + 1;
    }
    return 0;
}

int ak_cli_parse(int argc, char **argv, ak_cli_opts *o, const char *usage) {
    memset(o, 0, sizeof *o);
    o->n_predict = 256;
    o->kv = o->kv_v = AK_KV_AUTO;
    o->sp = ak_sampling_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int r = 0;
#define NEEDV() do { if (!v) { fprintf(stderr, "akunu: %s needs a value\n%s", a, usage); return 2; } i++; } while (0)
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) { NEEDV(); o->model = v; }
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) { NEEDV(); o->out = v; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            NEEDV();
            if (o->n_prompts == AK_CLI_MAX_PROMPTS) { fprintf(stderr, "akunu: at most %d prompts\n", AK_CLI_MAX_PROMPTS); return 2; }
            o->prompts[o->n_prompts++] = v;
        }
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) { NEEDV(); o->file = v; }
        else if (!strcmp(a, "--temp")) { NEEDV(); r = parse_float(a, v, 0, 100, &o->sp.temperature); }
        else if (!strcmp(a, "--top-k")) { NEEDV(); r = parse_int(a, v, 0, 1 << 30, &o->sp.top_k); }
        else if (!strcmp(a, "--top-p")) { NEEDV(); r = parse_float(a, v, 0, 1, &o->sp.top_p); }
        else if (!strcmp(a, "--min-p")) { NEEDV(); r = parse_float(a, v, 0, 1, &o->sp.min_p); }
        else if (!strcmp(a, "--repeat-penalty")) { NEEDV(); r = parse_float(a, v, 0.01, 100, &o->sp.repeat_penalty); }
        else if (!strcmp(a, "--repeat-last-n")) { NEEDV(); r = parse_int(a, v, 0, 1 << 20, &o->sp.penalty_last_n); }
        else if (!strcmp(a, "--presence-penalty")) { NEEDV(); r = parse_float(a, v, -2, 2, &o->sp.presence_penalty); }
        else if (!strcmp(a, "--frequency-penalty")) { NEEDV(); r = parse_float(a, v, -2, 2, &o->sp.frequency_penalty); }
        else if (!strcmp(a, "--seed")) {
            NEEDV();
            char *end;
            errno = 0;
            unsigned long long sd = strtoull(v, &end, 10);
            if (errno || end == v || *end || v[0] == '-') { fprintf(stderr, "akunu: --seed expects a non-negative integer, got '%s'\n", v); return 2; }
            o->sp.seed = sd;
            o->seed_set = true;
        }
        else if (!strcmp(a, "--stop")) {
            NEEDV();
            if (o->n_stops == 16) { fprintf(stderr, "akunu: at most 16 stop strings\n"); return 2; }
            o->stops[o->n_stops++] = v;
        }
        else if (!strcmp(a, "--grammar")) { NEEDV(); o->grammar = v; }
        else if (!strcmp(a, "--grammar-file")) { NEEDV(); o->grammar_file = v; }
        else if (!strcmp(a, "--json-schema")) { NEEDV(); o->schema_file = v; }
        else if (!strcmp(a, "--spec")) {
            NEEDV();
            if (!strcmp(v, "ngram")) o->spec = 1;
            else if (!strcmp(v, "draft")) o->spec = 2;
            else { fprintf(stderr, "akunu: --spec expects ngram or draft, got '%s'\n", v); return 2; }
        }
        else if (!strcmp(a, "--draft-max")) { NEEDV(); r = parse_int(a, v, 1, AK_SPEC_MAX, &o->draft_max); }
        else if (!strcmp(a, "--draft-model")) { NEEDV(); o->draft_model = v; }
        else if (!strcmp(a, "--raw")) o->raw = true;
        else if (!strcmp(a, "--no-bos")) o->no_bos = true;
        else if (!strcmp(a, "--no-special")) o->no_special = true;
        else if (!strcmp(a, "--special")) o->special = true;
        else if (!strcmp(a, "--chunks")) { NEEDV(); r = parse_int(a, v, 1, 1 << 30, &o->chunks); }
        else if (!strcmp(a, "--json")) o->json = true;
        else if (!strcmp(a, "--no-normalize")) o->no_normalize = true;
        else if (!strcmp(a, "--prompt-ids") || !strcmp(a, "--ids")) { NEEDV(); free(o->ids); r = parse_ids(v, o); }
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) { NEEDV(); r = parse_int(a, v, 0, 1 << 24, &o->n_predict); }
        else if (!strcmp(a, "--chunk")) { NEEDV(); r = parse_int(a, v, 1, 1 << 16, &o->chunk); }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { NEEDV(); r = parse_int(a, v, 1, 256, &o->threads); }
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) { NEEDV(); r = parse_int(a, v, 1, 1 << 30, &o->ctx); }
        else if (!strcmp(a, "--backend")) {
            NEEDV();
            if (!ak_backend_from_name(v, &o->backend)) { fprintf(stderr, "akunu: --backend expects cpu, cuda or auto, got '%s'\n", v); return 2; }
        }
        else if (!strcmp(a, "--greedy")) { o->greedy = true; o->sp.temperature = 0; }
        else if (!strcmp(a, "--print-ids")) o->print_ids = true;
        else if (!strcmp(a, "--decode")) o->decode = true;
        else if (!strcmp(a, "--kv-f16")) o->kv = o->kv_v = AK_KV_F16;
        else if (!strcmp(a, "--kv-f32")) o->kv = o->kv_v = AK_KV_F32;
        else if (!strcmp(a, "--kv") || !strcmp(a, "--kv-k") || !strcmp(a, "--kv-v")) {
            NEEDV();
            ak_kv_type t;
            if (!ak_kv_type_from_name(v, &t)) { fprintf(stderr, "akunu: %s expects f32, f16, q8_0, q4_0 or auto, got '%s'\n", a, v); return 2; }
            if (strcmp(a, "--kv-v")) o->kv = t;     /* --kv and --kv-k */
            if (strcmp(a, "--kv-k")) o->kv_v = t;   /* --kv and --kv-v */
        }
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) o->verbose = o->print_prompt = true;
        else if (!strcmp(a, "--print-prompt")) o->print_prompt = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage, stdout); exit(0); }
        else { fprintf(stderr, "akunu: unknown option '%s'\n%s", a, usage); return 2; }
        if (r) return r;
#undef NEEDV
    }
    if (!o->model) { fprintf(stderr, "akunu: -m FILE is required\n%s", usage); return 2; }
    if ((o->spec == 2) != !!o->draft_model) { fprintf(stderr, "akunu: --spec draft goes with --draft-model FILE\n"); return 2; }
    if (o->spec && !o->draft_max) o->draft_max = o->spec == 1 ? 10 : 8;
    if (o->sp.temperature <= 0) o->greedy = true;
    if (!o->seed_set) o->sp.seed = (uint64_t)time(NULL);
    return 0;
}

int ak_cli_open(const ak_cli_opts *o, bool logits_all, ak_model **m, ak_session **s) {
    ak_err err = {{0}};
    if (ak_model_load(o->model, m, &err)) { fprintf(stderr, "akunu: %s\n", err.msg); return 1; }
    return ak_cli_session(o, logits_all, m, s);
}

static int label_layer(const char *d) { return strncmp(d, "layer.", 6) ? -1 : atoi(d + 6); }

/* -v: the commands a token runs, as the backend runs them (what was fused into each): those
 * outside the layers and the first layer's in full, the other layers' counted. */
static void print_table(const ak_session *s) {
    int n = ak_session_table_size(s), lo = 0, hi = 0, rest = 0;
    char d[160];
    for (int i = 0; ak_session_table_command(s, i, d, sizeof d); i++) {
        int l = label_layer(d);
        if (l > 0) { lo = lo ? lo : l; hi = l; rest++; }
    }
    fprintf(stderr, "dispatch table: %d commands per token\n", n);
    for (int i = 0, last = -1; ak_session_table_command(s, i, d, sizeof d); i++) {
        int l = label_layer(d);
        if (last == 0 && l != 0 && hi > lo)
            fprintf(stderr, "  layers %d-%d: %d commands, %.1f a layer\n", lo, hi, rest, (double)rest / (hi - lo + 1));
        else if (last == 0 && l != 0 && hi > 0)
            fprintf(stderr, "  layer %d: %d commands\n", lo, rest);
        if (l <= 0) fprintf(stderr, "  %s\n", d);
        last = l;
    }
}

int ak_cli_session(const ak_cli_opts *o, bool logits_all, ak_model **m, ak_session **s) {
    ak_err err = {{0}};
    ak_session_params p = ak_session_default_params();
    p.chunk = o->chunk;
    p.n_threads = o->threads;
    p.n_ctx = o->ctx;
    p.kv_type = o->kv;
    p.kv_type_v = o->kv_v;
    p.logits_all = logits_all;
    p.backend = o->backend;
    if (ak_session_create(*m, &p, s, &err)) {
        fprintf(stderr, "akunu: %s\n", err.msg);
        ak_model_free(*m);
        *m = NULL;
        return 1;
    }
    if (o->verbose) {
        fprintf(stderr, "akunu: %s, vocab %d, context %d, backend %s, KV cache %s\n", ak_model_arch_name(*m),
                ak_model_vocab(*m), ak_session_n_ctx(*s), ak_session_backend(*s), ak_cli_kv_name(*s));
        print_table(*s);
        ak_kv_layers g, w;
        ak_session_kv_layers(*s, &g, &w);
        fprintf(stderr, "kv cache: %d global layers x %d rows = %.1f MB", g.layers, g.rows, (double)g.bytes / 1e6);
        if (w.layers) fprintf(stderr, ", %d sliding layers x %d rows = %.1f MB", w.layers, w.rows, (double)w.bytes / 1e6);
        fprintf(stderr, "\n");
    }
    return 0;
}

/* "q8_0", or "K type/V type" when they differ. */
const char *ak_cli_kv_name(const ak_session *s) {
    static char buf[32];
    ak_kv_type k = ak_session_kv_type(s), v = ak_session_kv_type_v(s);
    if (k == v) return ak_kv_type_name(k);
    snprintf(buf, sizeof buf, "%s/%s", ak_kv_type_name(k), ak_kv_type_name(v));
    return buf;
}

char *ak_cli_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    for (size_t r; buf && (r = fread(buf + len, 1, cap - len, f)) > 0;) {
        len += r;
        if (len == cap) { char *b = realloc(buf, 2 * cap + 1); if (!b) { free(buf); buf = NULL; break; } buf = b; cap *= 2; }
    }
    if (ferror(f)) { free(buf); buf = NULL; }
    fclose(f);
    if (buf) { buf[len] = 0; *n = len; }
    return buf;
}
