/* Requantized fixtures (tools/requant.py, run by quant_models.cmake) against the
 * Hugging Face f32 logits: prefill (GEMM path) over the 24 manifest prompt ids, and
 * token-by-token decode (GEMV path, the per-dtype dot kernels) over the same ids.
 * Each figure must stay under the type's tolerance, picked from measurement with a
 * margin. With SIMD on, decode is also replayed at the scalar level: with float
 * activations the fast kernels must agree with the reference path to 1e-4 (relative L2);
 * with 8-bit activations (the default for quantized weights) a code that a 1e-7
 * difference upstream rounds the other way moves these tiny models' logits by up to
 * ~1e-2, so there the bound is a fifth of the type's tolerance. */
#include <stdlib.h>
#include <string.h>
#include "akunu.h"
#include "backend/cpu/cpu.h"
#include "test_util.h"

#define NTOK 24
#define VOCAB 512
#define SIMD_VS_SCALAR_TOL 1e-4

/* Relative L2 tolerance vs HF f32 logits per model and type, for prefill and decode
 * alike: about 1.3x the measured figure. These 2-layer random-weight models amplify
 * weight error (llama.cpp's own Q8_0 logits are 0.035 off), so 4-bit types land at
 * 0.2-0.4. K types apply only to rows that are a multiple of 256 (qwen3's attn_output;
 * none in llama): the rest falls back to a 32-value block type (tools/requant.py). */
static const struct { const char *type; double tol[2]; } tols[] = {
    /*          llama   qwen3 */
    {"F32",  {1e-4,  1e-4}},  {"F16",  {2e-3,  2e-3}},  {"BF16", {1e-2,  1e-2}},
    {"Q8_0", {0.035, 0.035}}, {"Q6_K", {0.035, 0.055}}, {"Q5_1", {0.21,  0.24}},
    {"Q5_0", {0.25,  0.25}},  {"Q5_K", {0.21,  0.23}},  {"Q4_1", {0.50,  0.48}},
    {"Q4_0", {0.49,  0.49}},  {"Q4_K", {0.25,  0.30}},  {"Q3_K", {0.49,  0.58}},
    {"Q2_K", {0.49,  0.76}},
};
static const char *models[] = {"llama", "qwen3"};

/* Logits of every position by decode: prefill ids[0], then one ak_decode per id. */
static ak_status run_decode(ak_session *s, const int32_t *ids, float *out, ak_err *err) {
    int32_t next;
    ak_session_reset(s);
    ak_status st = ak_prefill(s, ids, 1, &next, out, err);
    for (int i = 1; i < NTOK && st == AK_OK; i++) st = ak_decode(s, ids[i], &next, out + (size_t)i * VOCAB, err);
    return st;
}

static void run(const char *model, const char *type, double tol, const int32_t *ids, const float *ref) {
    char path[4096];
    const char *dir = getenv("AKUNU_QUANT_MODELS");
    if (!strcmp(type, "F32")) {
        char rel[256];
        snprintf(rel, sizeof rel, "%s/%s-f32.gguf", model, model);
        snprintf(path, sizeof path, "%s", ak_fixture(rel));
    } else snprintf(path, sizeof path, "%s/%s-%s.gguf", dir ? dir : "quant_models", model, type);

    ak_err err;
    ak_model *m = NULL;
    ak_session *s = NULL;
    ak_status st = ak_model_load(path, &m, &err);
    CHECK(st == AK_OK, "%s: %s", path, err.msg);
    if (st) return;
    ak_session_params sp = ak_session_default_params();
    sp.logits_all = true;
    st = ak_session_create(m, &sp, &s, &err);
    CHECK(st == AK_OK, "%s: session: %s", path, err.msg);
    float *pre = malloc(sizeof(float) * NTOK * VOCAB), *dec = malloc(sizeof(float) * NTOK * VOCAB);
    float *dec0 = malloc(sizeof(float) * NTOK * VOCAB);
    int32_t next;
    if (!st) {
        st = ak_prefill(s, ids, NTOK, &next, pre, &err);
        CHECK(st == AK_OK, "%s: prefill: %s", path, err.msg);
    }
    if (!st) {
        st = run_decode(s, ids, dec, &err);
        CHECK(st == AK_OK, "%s: decode: %s", path, err.msg);
    }
    if (!st) {
        double ep = ak_rel_l2(pre, ref, (size_t)NTOK * VOCAB), ed = ak_rel_l2(dec, ref, (size_t)NTOK * VOCAB);
        printf("%-5s %-4s prefill rel_l2=%.3g decode rel_l2=%.3g (tol %g)", model, type, ep, ed, tol);
        CHECK(ep <= tol, "%s %s prefill rel_l2 %.4f > %g", model, type, ep, tol);
        CHECK(ed <= tol, "%s %s decode rel_l2 %.4f > %g", model, type, ed, tol);
        int level = ak_cpu_simd;
        if (level > 0) {
            ak_cpu_simd = 0;
            st = run_decode(s, ids, dec0, &err);
            ak_cpu_simd = level;
            CHECK(st == AK_OK, "%s: scalar decode: %s", path, err.msg);
            double es = ak_rel_l2(dec, dec0, (size_t)NTOK * VOCAB);
            printf("  simd-vs-scalar int8=%.2g", es);
            CHECK(es <= 0.2 * tol, "%s %s SIMD decode differs from scalar (8-bit activations): rel_l2 %.3g", model, type, es);
            /* float activations: the same arithmetic up to summation order */
            int f32 = ak_cpu_act_f32;
            ak_cpu_act_f32 = 1;
            st = run_decode(s, ids, dec, &err);
            ak_cpu_simd = 0;
            if (!st) st = run_decode(s, ids, dec0, &err);
            ak_cpu_simd = level;
            ak_cpu_act_f32 = f32;
            CHECK(st == AK_OK, "%s: float-activation decode: %s", path, err.msg);
            es = ak_rel_l2(dec, dec0, (size_t)NTOK * VOCAB);
            printf(" f32=%.2g", es);
            CHECK(es <= SIMD_VS_SCALAR_TOL, "%s %s SIMD decode differs from scalar: rel_l2 %.3g", model, type, es);
        }
        printf("\n");
    }
    free(pre); free(dec); free(dec0);
    ak_session_free(s);
    ak_model_free(m);
}

int main(void) {
    ak_test_debug(0);
    int32_t ids[NTOK];
    size_t sz;
    char *js = ak_read_file(ak_fixture("manifest.json"), &sz);
    int n = -1;
    if (js && (js = realloc(js, sz + 1))) { js[sz] = 0; n = ak_json_ints(js, NULL, "prompt_ids", ids, NTOK); }
    free(js);
    CHECK(n == NTOK, "manifest.json: %d prompt ids", n);
    if (n != NTOK) return ak_test_done();
    ak_cpu_detect();
    printf("SIMD level %d\n", ak_cpu_simd);
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        char rel[256];
        size_t sz;
        snprintf(rel, sizeof rel, "%s/logits.hf.f32", models[mi]);
        float *ref = ak_read_file(ak_fixture(rel), &sz);
        CHECK(ref && sz == sizeof(float) * NTOK * VOCAB, "%s: %zu bytes", rel, ref ? sz : 0);
        if (ref && sz == sizeof(float) * NTOK * VOCAB)
            for (size_t ti = 0; ti < sizeof tols / sizeof tols[0]; ti++) run(models[mi], tols[ti].type, tols[ti].tol[mi], ids, ref);
        free(ref);
    }
    return ak_test_done();
}
