/* Reference dequantizers: bit-exact against gguf-py on random blocks of every ggml type,
 * the Q8_0 quantizer against gguf-py, and every tensor of every fixture GGUF file.
 * Vectors come from tools/gen_quant_vectors.py; their folder is argv[1] or the
 * environment variable AKUNU_QUANT_VECTORS. Missing vectors are a failure. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include "core/dtype.h"
#include "core/quants.h"
#include "format/gguf.h"
#include "test_util.h"

/* A bounds-checked cursor over a vector file. */
typedef struct { const uint8_t *p, *end; int bad; } cursor;

static const void *take(cursor *c, uint64_t n) {
    if (c->bad || n > (uint64_t)(c->end - c->p)) { c->bad = 1; return NULL; }
    const void *r = c->p;
    c->p += n;
    return r;
}

static uint32_t take_u32(cursor *c) {
    const uint8_t *b = take(c, 4);
    return b ? (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24 : 0;
}

static uint64_t take_u64(cursor *c) {
    uint64_t lo = take_u32(c);
    return lo | (uint64_t)take_u32(c) << 32;
}

static void *load(const char *dir, const char *file, const char *magic, cursor *c) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    size_t size = 0;
    uint8_t *buf = ak_read_file(path, &size);
    CHECK(buf != NULL, "cannot read %s (run tools/gen_quant_vectors.py)", path);
    if (!buf) return NULL;
    *c = (cursor){buf, buf + size, 0};
    const char *m = take(c, 4);
    uint32_t version = take_u32(c);
    CHECK(m && !memcmp(m, magic, 4) && version == 1, "%s: bad header", path);
    if (c->bad || memcmp(m, magic, 4) || version != 1) { free(buf); return NULL; }
    return buf;
}

/* Index of the first value whose bit pattern differs, or -1. */
static int64_t first_diff(const float *a, const void *ref, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t x, y;
        memcpy(&x, a + i, 4);
        memcpy(&y, (const uint8_t *)ref + 4 * i, 4);
        if (x != y) return i;
    }
    return -1;
}

static void dequant_record(cursor *c, uint32_t ggml_type, uint32_t n, uint32_t nbytes, int *seen) {
    const uint8_t *blocks = take(c, nbytes);
    const void *ref = take(c, (uint64_t)n * 4);
    int t = ak_dtype_from_ggml(ggml_type);
    CHECK(!c->bad && t >= 0, "ggml type %u: truncated record or unknown type", ggml_type);
    if (c->bad || t < 0) return;
    const ak_dtype_traits *tr = &ak_dtype_info[t];
    CHECK(tr->dequant != NULL, "%s: no reference dequantizer", tr->name);
    CHECK(ak_dtype_row_bytes((ak_dtype)t, n) == nbytes, "%s: %u values in %u bytes", tr->name, n, nbytes);
    if (!tr->dequant || ak_dtype_row_bytes((ak_dtype)t, n) != nbytes) return;
    /* Copy to an odd address: references must not depend on alignment. */
    uint8_t *src = malloc((size_t)nbytes + 1);
    float *out = malloc((size_t)n * 4);
    memcpy(src + 1, blocks, nbytes);
    tr->dequant(src + 1, out, n);
    int64_t i = first_diff(out, ref, n);
    float want = 0;
    if (i >= 0) memcpy(&want, (const uint8_t *)ref + 4 * i, 4);
    CHECK(i < 0, "%s: %u values, first difference at %lld: %.9g, gguf %.9g", tr->name, n, (long long)i,
          i >= 0 ? out[i] : 0.0, want);
    seen[t]++;
    free(src);
    free(out);
}

/* The quantizers of the KV cache's block types, Q8_0 (ggml type 8) and Q4_0 (2). */
static void quantize_record(cursor *c, uint32_t ggml_type, uint32_t n, uint32_t nbytes) {
    const void *x = take(c, (uint64_t)n * 4);
    const uint8_t *ref = take(c, nbytes);
    uint32_t bb = ggml_type == 8 ? 34 : 18;
    bool ok = !c->bad && (ggml_type == 8 || ggml_type == 2) && nbytes == n / 32 * bb;
    CHECK(ok, "quantize record: type %u", ggml_type);
    if (!ok) return;
    float *in = malloc((size_t)n * 4);
    uint8_t *out = malloc(nbytes);
    memcpy(in, x, (size_t)n * 4);
    (ggml_type == 8 ? ak_quantize_q8_0 : ak_quantize_q4_0)(in, out, n);
    uint32_t i = 0;
    while (i < nbytes && out[i] == ref[i]) i++;
    CHECK(i == nbytes, "%s quantize: %u values, first byte difference at %u: %u, gguf %u", ggml_type == 8 ? "Q8_0" : "Q4_0",
          n, i, i < nbytes ? out[i] : 0, i < nbytes ? ref[i] : 0);
    free(in);
    free(out);
}

static void test_random_blocks(const char *dir) {
    cursor c;
    uint8_t *buf = load(dir, "gguf_vectors.bin", "AKQV", &c);
    if (!buf) return;
    int seen[AK_DTYPE_COUNT] = {0}, records = 0, quantized = 0;
    while (c.p < c.end && !c.bad) {
        uint32_t kind = take_u32(&c), type = take_u32(&c), n = take_u32(&c), nbytes = take_u32(&c);
        if (kind == 0) dequant_record(&c, type, n, nbytes, seen);
        else if (kind == 1) { quantize_record(&c, type, n, nbytes); quantized++; }
        else CHECK(0, "unknown record kind %u", kind);
        records++;
    }
    CHECK(!c.bad, "gguf_vectors.bin: truncated after %d records", records);
    const ak_dtype want[] = {AK_F16, AK_BF16, AK_Q4_0, AK_Q4_1, AK_Q5_0, AK_Q5_1, AK_Q8_0,
                             AK_Q2_K, AK_Q3_K, AK_Q4_K, AK_Q5_K, AK_Q6_K};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++)
        CHECK(seen[want[k]] > 0, "no vectors for %s", ak_dtype_info[want[k]].name);
    CHECK(quantized > 0, "no Q8_0 quantize vectors");
    printf("random blocks: %d records (%d quantize)\n", records, quantized);
    free(buf);
}

/* Checks one fixture file's record against the tensors read by our GGUF reader. */
static void check_fixture_file(cursor *c, const char *rel, int *tensors) {
    uint32_t nt = take_u32(c);
    ak_gguf *g = NULL;
    ak_err err = {{0}};
    ak_status st = ak_gguf_open(ak_fixture(rel), &g, &err);
    CHECK(st == AK_OK, "%s: %s", rel, err.msg);
    CHECK(!g || g->n_tensors == nt, "%s: %llu tensors, gguf-py saw %u", rel,
          g ? (unsigned long long)g->n_tensors : 0ull, nt);
    for (uint32_t k = 0; k < nt && !c->bad; k++) {
        uint32_t len = take_u32(c);
        const char *name = take(c, len);
        uint32_t type = take_u32(c);
        uint64_t n = take_u64(c);
        const void *ref = take(c, n * 4);
        if (c->bad || !g) continue;
        char cname[256];
        snprintf(cname, sizeof cname, "%.*s", (int)len, name);
        const ak_gguf_tensor *t = ak_gguf_tensor_find(g, cname);
        CHECK(t != NULL, "%s: tensor %s missing", rel, cname);
        if (!t) continue;
        int64_t ne = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
        ak_dequant_fn fn = ak_dtype_info[t->dtype].dequant;
        CHECK(t->ggml_type == type && (uint64_t)ne == n && fn, "%s %s: type %u/%u, %lld/%llu values", rel,
              cname, t->ggml_type, type, (long long)ne, (unsigned long long)n);
        if (t->ggml_type != type || (uint64_t)ne != n || !fn) continue;
        float *out = malloc((size_t)n * 4);
        fn(t->data, out, ne);
        int64_t i = first_diff(out, ref, ne);
        CHECK(i < 0, "%s %s (%s): first difference at %lld", rel, cname, ak_dtype_info[t->dtype].name,
              (long long)i);
        free(out);
        (*tensors)++;
    }
    ak_gguf_close(g);
}

/* Every SUB/NAME.gguf under the fixture folder, as "SUB/NAME.gguf"; returns the count. */
static int list_fixtures(char names[][256], int max) {
    char root[4096];
    snprintf(root, sizeof root, "%s", ak_fixture(""));
    DIR *d = opendir(root);
    if (!d) return 0;
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char sub[4352];
        snprintf(sub, sizeof sub, "%s/%s", root, e->d_name);
        DIR *s = opendir(sub);
        if (!s) continue;
        struct dirent *f;
        while ((f = readdir(s))) {
            size_t l = strlen(f->d_name);
            if (l > 5 && !strcmp(f->d_name + l - 5, ".gguf") && count < max)
                snprintf(names[count++], 256, "%.100s/%.150s", e->d_name, f->d_name);
        }
        closedir(s);
    }
    closedir(d);
    return count;
}

static void test_fixtures(const char *dir) {
    static char files[256][256];
    static int covered[256];
    int n_files = list_fixtures(files, 256);
    CHECK(n_files > 0, "no */*.gguf under %s", ak_fixture(""));
    cursor c;
    uint8_t *buf = load(dir, "fixture_vectors.bin", "AKFX", &c);
    if (!buf) return;
    int records = 0, tensors = 0;
    while (c.p < c.end && !c.bad) {
        uint32_t len = take_u32(&c);
        const char *p = take(&c, len);
        if (c.bad) break;
        char rel[512];
        snprintf(rel, sizeof rel, "%.*s", (int)len, p);
        for (int k = 0; k < n_files; k++)
            if (!strcmp(files[k], rel)) covered[k] = 1;
        check_fixture_file(&c, rel, &tensors);
        records++;
    }
    CHECK(!c.bad, "fixture_vectors.bin: truncated after %d files", records);
    for (int k = 0; k < n_files; k++)
        CHECK(covered[k], "%s: not in fixture_vectors.bin (regenerate the vectors)", files[k]);
    printf("fixtures: %d tensors in %d files\n", tensors, records);
    free(buf);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : getenv("AKUNU_QUANT_VECTORS");
    CHECK(dir != NULL, "vector folder: pass it as argv[1] or set AKUNU_QUANT_VECTORS");
    if (dir) {
        test_random_blocks(dir);
        test_fixtures(dir);
    }
    return ak_test_done();
}
