/* YaRN RoPE scaling (issue #26) against Hugging Face (tests/data/yarn, written by
 * tools/gen_yarn_refs.py): a tiny Qwen3 with rope_type yarn (factor 4 over an original
 * context of 32) from its GGUF (llama.cpp's converter) and from its HF folder, over 96
 * prompt ids, three times the original context:
 *   - one prefill of all 96 with every position's logits, and the same in chunks of 20;
 *   - a prefill of 32, then positions 32..95 through the decode table one id at a time;
 * each against transformers' float32 logits (relative L2, the fixtures' f32 tolerance;
 * an F16 cache the f16 files' tolerance), and the two files agree. Then the parameters:
 * each cases/NAME.json as config.json beside the HF weights gives transformers' inverse
 * frequencies and attention factor; out-of-range values in config.json or in the GGUF's
 * metadata fail with AK_ERR_FORMAT; a partial rotation or sliding layers are refused.
 *     test_yarn [cpu|cuda] [DATA_DIR]      (cuda: exits 77, skipped, without a GPU) */
#include "akunu.h"
#include "format/gguf.h"
#include "format/json.h"
#include "model/model_int.h"
#include "fixture_util.h"
#include "test_util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 96       /* prompt ids */
#define ORIG 32    /* the original context: the decode steps start here */
#define V 512

static const char *dir;
static ak_backend_kind backend;

static char *path_of(const char *rel) {
    static char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    return p;
}

static char *read_text(const char *path, size_t *n) {
    size_t sz = 0;
    char *t = ak_read_file(path, &sz);
    if (!t) return NULL;
    t = realloc(t, sz + 1);
    t[sz] = 0;
    if (n) *n = sz;
    return t;
}

/* Logits of every prompt position: one prefill in chunks of `chunk` (0: default) when
 * n_pre == N, else a prefill of n_pre and decode steps for the rest. */
static float *run(ak_model *m, const int32_t *ids, int n_pre, int chunk, ak_kv_type kv) {
    ak_session *s = ak_fx_session(m, backend, 128, chunk, kv, true, "yarn");
    if (!s) return NULL;
    ak_err err = {{0}};
    const char *want = backend == AK_BACKEND_CUDA ? "cuda" : "cpu";
    CHECK(!strcmp(ak_session_backend(s), want), "backend %s, not %s", ak_session_backend(s), want);
    float *lg = malloc((size_t)N * V * sizeof(float));
    int32_t next;
    ak_status st = ak_prefill(s, ids, n_pre, &next, lg, &err);
    for (int i = n_pre; i < N && !st; i++) st = ak_decode(s, ids[i], &next, lg + (size_t)i * V, &err);
    CHECK(st == AK_OK, "run: %s", err.msg);
    ak_session_free(s);
    if (st) { free(lg); return NULL; }
    return lg;
}

/* Relative L2 of positions [a, b). */
static double err_rows(const float *out, const float *ref, int a, int b) {
    return ak_rel_l2(out + (size_t)a * V, ref + (size_t)a * V, (size_t)(b - a) * V);
}

/* The model's logits against Hugging Face's; returns the prefill's logits (to compare
 * the two files) or NULL. */
static float *check_logits(ak_model *m, const char *name, const int32_t *ids, const float *ref) {
    struct { const char *what; int n_pre, chunk; ak_kv_type kv; double tol; } runs[] = {
        {"prefill", N, 0, AK_KV_F32, 1e-4}, {"prefill/20", N, 20, AK_KV_F32, 1e-4},
        {"decode", ORIG, 0, AK_KV_F32, 1e-4}, {"decode f16kv", ORIG, 0, AK_KV_F16, 5e-3}};
    float *keep = NULL;
    for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
        float *lg = run(m, ids, runs[r].n_pre, runs[r].chunk, runs[r].kv);
        if (!lg) continue;
        double all = err_rows(lg, ref, 0, N), past = err_rows(lg, ref, ORIG, N);
        printf("%-4s %-13s rel_l2 %.3g, positions %d..%d past the original context %.3g (tol %.0e)\n", name, runs[r].what,
               all, ORIG, N - 1, past, runs[r].tol);
        CHECK(all <= runs[r].tol && past <= runs[r].tol, "%s %s: rel L2 %.3g (past %d: %.3g) > %.0e", name, runs[r].what, all,
              ORIG, past, runs[r].tol);
        if (r == 0) keep = lg;
        else free(lg);
    }
    return keep;
}

/* A directory holding `config` as config.json and a link to the HF weights. */
static char *hf_dir_with(const char *config) {
    static char d[64];
    char *made = mkdtemp(strcpy(d, "/tmp/akunu-yarn-XXXXXX"));
    CHECK(made != NULL, "mkdtemp");
    if (!made) return NULL;
    char p[4096], w[4096];
    snprintf(p, sizeof p, "%s/config.json", d);
    FILE *f = fopen(p, "w");
    if (f) { fputs(config, f); fclose(f); }
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    CHECK(realpath(path_of("hf/model.safetensors"), w) && symlink(w, p) == 0, "link %s", p);
    return d;
}

static void hf_dir_free(const char *d) {
    char p[4096];
    snprintf(p, sizeof p, "%s/config.json", d);
    unlink(p);
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    unlink(p);
    rmdir(d);
}

static ak_status load_config(const char *config, ak_model **m, ak_err *err) {
    char *d = hf_dir_with(config);
    if (!d) return AK_ERR_IO;
    ak_status st = ak_model_load(d, m, err);
    hf_dir_free(d);
    return st;
}

/* Each case's table and attention factor (folded into attn_scale as its square) against
 * transformers' for the same config.json. */
static void check_cases(void) {
    const char *names[] = {"model", "defaults", "no_truncate", "attention_factor", "mscale", "zero_betas",
                           "factor_null", "factor_8_theta_1e6", "top_level_orig", "legacy_rope_scaling"};
    for (size_t c = 0; c < sizeof names / sizeof *names; c++) {
        char rel[256];
        snprintf(rel, sizeof rel, "cases/%s.json", names[c]);
        size_t n;
        char *text = read_text(path_of(rel), &n);
        CHECK(text != NULL, "%s missing (tools/gen_yarn_refs.py writes it)", rel);
        if (!text) continue;
        ak_json_doc *doc = NULL;
        ak_err err = {{0}};
        CHECK(ak_json_parse(text, n, &doc, &err) == AK_OK, "%s: %s", rel, err.msg);
        const ak_json *ex = ak_json_get(ak_json_root(doc), "_expect"), *inv = ak_json_get(ex, "inv_freq");
        double af = 0;
        CHECK(inv && inv->type == AK_JSON_ARR && inv->len == 16 && ak_json_num(ak_json_get(ex, "attention_factor"), &af),
              "%s: _expect", rel);
        ak_model *m = NULL;
        CHECK(load_config(text, &m, &err) == AK_OK, "%s: %s", rel, err.msg);
        if (m && inv && inv->len == 16) {
            double worst = 0;
            int i = 0;
            for (const ak_json *e = inv->child; e; e = e->next, i++) {
                double want = 0;
                ak_json_num(e, &want);
                worst = fmax(worst, fabs(m->aux[i] - want) / want);
            }
            double scale = af * af / sqrt(32.0), es = fabs(m->cfg.attn_scale - scale) / scale;
            printf("case %-20s inv_freq max rel err %.2g, attention factor %.6f rel err of q.k scale %.2g\n", names[c], worst,
                   af, es);
            CHECK(worst <= 1e-6 && es <= 1e-6, "%s: inv_freq rel err %.3g, attn_scale %.8g (want %.8g)", rel, worst,
                  (double)m->cfg.attn_scale, scale);
        }
        ak_model_free(m);
        ak_json_free(doc);
        free(text);
    }
}

/* config.json with its rope_parameters object replaced by `rope`. */
static char *with_rope(const char *config, const char *rope) {
    const char *a = strstr(config, "\"rope_parameters\"");
    const char *b = a ? strchr(a, '}') : NULL;
    if (!b) return NULL;
    size_t n = strlen(config) + strlen(rope) + 64;
    char *out = malloc(n);
    snprintf(out, n, "%.*s\"rope_parameters\": %s%s", (int)(a - config), config, rope, b + 1);
    return out;
}

static void check_hostile_hf(void) {
    char *config = read_text(path_of("hf/config.json"), NULL);
    CHECK(config != NULL, "hf/config.json");
    if (!config) return;
#define Y "\"rope_type\": \"yarn\", \"rope_theta\": 1000.0, \"original_max_position_embeddings\": 32"
    const char *bad[] = {
        "{" Y ", \"factor\": 0}", "{" Y ", \"factor\": -2}", "{" Y ", \"factor\": 0.5}", "{" Y ", \"factor\": 1e999}",
        "{" Y ", \"factor\": NaN}", "{" Y ", \"factor\": \"4\"}", "{" Y "}",
        "{" Y ", \"factor\": 4, \"beta_fast\": -1}", "{" Y ", \"factor\": 4, \"beta_fast\": 1, \"beta_slow\": 32}",
        "{" Y ", \"factor\": 4, \"beta_slow\": 1e999}",
        "{\"rope_type\": \"yarn\", \"rope_theta\": 1000.0, \"original_max_position_embeddings\": 0, \"factor\": 4}",
        "{\"rope_type\": \"yarn\", \"rope_theta\": 1000.0, \"original_max_position_embeddings\": -32, \"factor\": 4}",
        "{" Y ", \"factor\": 4, \"attention_factor\": 0}", "{" Y ", \"factor\": 4, \"attention_factor\": -1}",
        "{" Y ", \"factor\": 4, \"mscale\": 1, \"mscale_all_dim\": -100}", "{" Y ", \"factor\": 4, \"mscale\": \"x\"}",
        "{" Y ", \"factor\": 4, \"truncate\": \"yes\"}",
    };
#undef Y
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *c = with_rope(config, bad[i]);
        CHECK(c != NULL, "rope_parameters in hf/config.json");
        if (!c) break;
        ak_model *m = NULL;
        ak_err err = {{0}};
        ak_status st = load_config(c, &m, &err);
        CHECK(st == AK_ERR_FORMAT && err.msg[0], "rope_parameters %s: status %d '%s'", bad[i], st, err.msg);
        printf("refused (config.json %zu): %s\n", i, err.msg);
        ak_model_free(m);
        free(c);
    }
    free(config);
}

/* The GGUF with one float of its metadata (key) overwritten. */
static ak_status load_gguf_with(const uint8_t *data, size_t n, const char *key, float v, ak_err *err) {
    uint8_t *buf = malloc(n);
    memcpy(buf, data, n);
    uint8_t *k = memmem(buf, n, key, strlen(key));
    CHECK(k != NULL, "%s in the GGUF", key);
    uint32_t type = 0;
    if (k) memcpy(&type, k + strlen(key), 4);
    CHECK(type == 6, "%s is not an F32", key); /* GGUF value type 6: float32 */
    if (k && type == 6) memcpy(k + strlen(key) + 4, &v, 4);
    ak_gguf *g;
    ak_model *m = NULL;
    ak_status st = ak_gguf_open_mem(buf, n, &g, err);
    if (!st) st = ak_model_from_gguf(g, &m, err);
    ak_model_free(m);
    free(buf);
    return st;
}

static void check_hostile_gguf(void) {
    size_t n;
    uint8_t *data = ak_read_file(path_of("yarn-f32.gguf"), &n);
    if (!data) return;
    const struct { const char *key; float v; } bad[] = {
        {"qwen3.rope.scaling.factor", 0}, {"qwen3.rope.scaling.factor", NAN}, {"qwen3.rope.scaling.factor", -4},
        {"qwen3.rope.scaling.factor", INFINITY}, {"qwen3.rope.scaling.yarn_beta_fast", -16},
        {"qwen3.rope.scaling.yarn_beta_fast", 0.25f}, {"qwen3.rope.scaling.yarn_beta_slow", NAN}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ak_err err = {{0}};
        ak_status st = load_gguf_with(data, n, bad[i].key, bad[i].v, &err);
        CHECK(st == AK_ERR_FORMAT && err.msg[0], "%s = %g: status %d '%s'", bad[i].key, (double)bad[i].v, st, err.msg);
        printf("refused %s = %g: %s\n", bad[i].key, (double)bad[i].v, err.msg);
    }
    /* a scaling type the loader does not know (the value "yarn" made "xarn") is refused,
     * not computed as no scaling */
    const char *key = "qwen3.rope.scaling.type";
    uint8_t *k = memmem(data, n, key, strlen(key));
    uint8_t *v = k ? memmem(k, n - (size_t)(k - data), "yarn", 4) : NULL;
    CHECK(v != NULL, "%s = yarn in the GGUF", key);
    if (v) {
        v[0] = 'x';
        ak_gguf *g;
        ak_model *m = NULL;
        ak_err err = {{0}};
        ak_status st = ak_gguf_open_mem(data, n, &g, &err);
        if (!st) st = ak_model_from_gguf(g, &m, &err);
        CHECK(st == AK_ERR_UNSUPPORTED && strstr(err.msg, "xarn"), "rope.scaling.type xarn: status %d '%s'", st, err.msg);
        printf("refused rope.scaling.type xarn: %s\n", err.msg);
        ak_model_free(m);
    }
    free(data);
}

/* The attention factor folds into the score scale only where it multiplies all of q and
 * k in every layer: a partial rotation or sliding layers (unscaled table) are refused. */
static void check_refusals(ak_model *m) {
    ak_err err = {{0}};
    float *aux = m->aux;
    float scale = m->cfg.attn_scale;
    m->cfg.n_rot = 16;
    CHECK(ak_model_build_aux(m, NULL, NULL, &err) == AK_ERR_UNSUPPORTED && strstr(err.msg, "partial"),
          "partial rotation: '%s'", err.msg);
    m->cfg.n_rot = 32;
    m->layers[1].sliding = true;
    CHECK(ak_model_build_aux(m, NULL, NULL, &err) == AK_ERR_UNSUPPORTED && strstr(err.msg, "sliding"),
          "sliding layers: '%s'", err.msg);
    m->layers[1].sliding = false;
    CHECK(m->aux == aux && m->cfg.attn_scale == scale, "a refused table changed the model");
}

int main(int argc, char **argv) {
    const char *be = argc > 1 ? argv[1] : "cpu";
    dir = argc > 2 ? argv[2] : AK_YARN_DIR;
    backend = !strcmp(be, "cuda") ? AK_BACKEND_CUDA : AK_BACKEND_CPU;
    if (backend == AK_BACKEND_CUDA && !ak_cuda_available()) { printf("no CUDA GPU: skipped\n"); return 77; }
    ak_test_debug(0);
    char *manifest = read_text(path_of("manifest.json"), NULL);
    int32_t ids[N + 1];
    int n = manifest ? ak_json_ints(manifest, NULL, "prompt_ids", ids, N + 1) : -1;
    CHECK(n == N, "%s: %d prompt ids", path_of("manifest.json"), n);
    size_t sz = 0;
    float *ref = ak_read_file(path_of("logits.hf.f32"), &sz);
    CHECK(ref && sz == (size_t)N * V * sizeof(float), "logits.hf.f32: %zu bytes", sz);
    float *out[2] = {NULL, NULL};
    const char *files[2] = {"yarn-f32.gguf", "hf"}, *names[2] = {"gguf", "hf"};
    for (int f = 0; f < 2 && n == N && ref && sz == (size_t)N * V * sizeof(float); f++) {
        ak_model *m = NULL;
        ak_err err = {{0}};
        CHECK(ak_model_load(path_of(files[f]), &m, &err) == AK_OK, "%s: %s", files[f], err.msg);
        if (!m) continue;
        CHECK(m->cfg.yarn.on, "%s: no YaRN", files[f]);
        out[f] = check_logits(m, names[f], ids, ref);
        if (f == 0) check_refusals(m);
        ak_model_free(m);
    }
    if (out[0] && out[1]) {
        double e = ak_rel_l2(out[1], out[0], (size_t)N * V);
        printf("hf against gguf: rel_l2 %.3g\n", e);
        CHECK(e <= 1e-6, "the HF folder and the GGUF differ: rel L2 %.3g", e);
    }
    free(out[0]);
    free(out[1]);
    check_cases();
    check_hostile_hf();
    check_hostile_gguf();
    free(ref);
    free(manifest);
    return ak_test_done();
}
