/* Test harness helpers shared by every test. */
#include "test_util.h"
#include "akunu.h"
#include "core/kernels.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

int ak_test_failures, ak_test_checks;

int ak_test_done(void) {
    printf("%d checks, %d failed\n", ak_test_checks, ak_test_failures);
    return ak_test_failures ? 1 : 0;
}

const char *ak_fixture(const char *rel) {
    static char buf[4096];
    const char *dir = getenv("AKUNU_FIXTURES");
    snprintf(buf, sizeof buf, "%s/%s", dir ? dir : "../shared/fixtures/hf", rel);
    return buf;
}

void *ak_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(n > 0 ? (size_t)n : 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) { free(p); p = NULL; }
    fclose(f);
    if (p) *size = (size_t)n;
    return p;
}

uint32_t ak_rand_u32(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t x = *s;
    return (uint32_t)((x ^ (x >> 22)) >> (22 + (x >> 61)));
}

float ak_rand_f(uint64_t *s) { return (float)((double)ak_rand_u32(s) / 2147483648.0 - 1.0); }

double ak_rel_l2(const float *out, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)out[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

int ak_json_ints(const char *json, const char *scope, const char *key, int32_t *out, int cap) {
    char pat[128];
    const char *p = json;
    if (scope) {
        snprintf(pat, sizeof pat, "\"%s\"", scope);
        if (!(p = strstr(p, pat))) return -1;
    }
    snprintf(pat, sizeof pat, "\"%s\"", key);
    if (!(p = strstr(p, pat)) || !(p = strchr(p, '['))) return -1;
    int n = 0;
    for (p++; *p && *p != ']';) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) { p++; continue; }
        if (n < cap) out[n] = (int32_t)v;
        n++;
        p = end;
    }
    return n;
}

double ak_act_ref(int act, double x) {
    if (act == AK_ACT_SILU) return x / (1 + exp(-x));
    if (act == AK_ACT_GELU_TANH) return x / (1 + exp(-2 * 0.7978845608028654 * (x + 0.044715 * x * x * x)));
    return 0.5 * x * erfc(-x * 0.7071067811865475);   /* 1 + erf(z) without its cancellation below 0 */
}

static int env_on(const char *name) {
    const char *e = getenv(name);
    return e && *e && strcmp(e, "0") != 0;
}

void ak_test_debug(int act_f32) {
    ak_debug d = {.cpu_scalar = env_on("AKUNU_SCALAR"), .cpu_no_vnni = env_on("AKUNU_NO_VNNI"), .cpu_act_f32 = act_f32};
    ak_set_debug(&d);
}
