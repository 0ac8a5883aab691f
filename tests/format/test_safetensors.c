/* safetensors: a valid file read back; hostile headers (length, JSON, dtypes, shapes,
 * offsets out of range, overlapping, size mismatch, duplicates); every truncation and
 * random mutations; directories of shards with and without an index. Buffers are exact-
 * size heap copies, so an out-of-bounds read shows under AddressSanitizer. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "format/safetensors.h"
#include "test_util.h"

typedef struct { uint8_t *p; size_t n; } blob;

/* 8-byte length + header + data bytes (data_len bytes: 0, 1, 2, ...). */
static blob make(const char *header, size_t data_len) {
    size_t h = strlen(header);
    blob b = {malloc(8 + h + data_len + 1), 8 + h + data_len};
    for (int i = 0; i < 8; i++) b.p[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(b.p + 8, header, h);
    for (size_t i = 0; i < data_len; i++) b.p[8 + h + i] = (uint8_t)i;
    return b;
}

static ak_status open_blob(blob b, size_t n, ak_st **s, ak_err *err) {
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, b.p, n);
    err->msg[0] = 0;
    ak_status st = ak_st_open_mem(copy, n, s, err);
    if (!st) {
        /* reads every byte of every tensor: out-of-range pointers would show here */
        unsigned sum = 0;
        for (int i = 0; i < (*s)->n_tensors; i++)
            for (uint64_t k = 0; k < (*s)->tensors[i].nbytes; k++) sum += (*s)->tensors[i].data[k];
        (void)sum;
        ak_st_close(*s);
        *s = NULL;
    }
    free(copy);
    return st;
}

static const char *VALID = "{\"__metadata__\":{\"format\":\"pt\"},"
                           "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                           "\"b.weight\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[24,32]},"
                           "\"scalar\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[32,40]},"
                           "\"empty\":{\"dtype\":\"BF16\",\"shape\":[0,5],\"data_offsets\":[40,40]}}  ";

static void test_valid(void) {
    blob b = make(VALID, 40);
    ak_st *s;
    ak_err err;
    ak_status st = ak_st_open_mem(b.p, b.n, &s, &err);
    CHECK(st == AK_OK, "valid file: %s", err.msg);
    if (!st) {
        CHECK(s->n_tensors == 4 && s->metadata && ak_json_str_is(ak_json_get(s->metadata, "format"), "pt"), "tensors and metadata");
        const ak_st_tensor *a = ak_st_find(s, "a"), *w = ak_st_find(s, "b.weight"), *sc = ak_st_find(s, "scalar");
        const ak_st_tensor *e = ak_st_find(s, "empty");
        CHECK(a && a->dtype == AK_ST_F32 && a->n_dims == 2 && a->shape[0] == 2 && a->shape[1] == 3 && a->n_elems == 6 &&
              a->nbytes == 24 && a->data == b.p + s->data_offset, "tensor a");
        CHECK(w && w->dtype == AK_ST_F16 && w->n_dims == 1 && w->offset == 24 && w->data[0] == 24, "tensor b.weight");
        CHECK(sc && sc->n_dims == 0 && sc->n_elems == 1 && sc->nbytes == 8, "scalar");
        CHECK(e && e->n_elems == 0 && e->nbytes == 0, "empty tensor");
        CHECK(!ak_st_find(s, "__metadata__") && !ak_st_find(s, "c"), "missing names");
        ak_st_close(s);
    }
    free(b.p);
    /* every dtype name the format defines, with its size */
    const char *names[] = {"F32", "F16", "BF16", "U32", "I32", "I64", "F64", "U64", "I16", "U16", "I8", "U8", "BOOL", "F8_E4M3", "F8_E5M2"};
    for (int t = 0; t < AK_ST_DTYPE_COUNT; t++) {
        char h[256];
        size_t sz = ak_st_dtype_size((ak_st_dtype)t);
        snprintf(h, sizeof h, "{\"x\":{\"dtype\":\"%s\",\"shape\":[3],\"data_offsets\":[0,%zu]}}", names[t], 3 * sz);
        b = make(h, 3 * sz);
        st = ak_st_open_mem(b.p, b.n, &s, &err);
        CHECK(st == AK_OK && s->tensors[0].dtype == (ak_st_dtype)t && !strcmp(ak_st_dtype_name((ak_st_dtype)t), names[t]),
              "dtype %s: %s", names[t], err.msg);
        if (!st) ak_st_close(s);
        free(b.p);
    }
}

static void expect(const char *what, const char *header, size_t data_len, ak_status want) {
    blob b = make(header, data_len);
    ak_st *s = NULL;
    ak_err err;
    ak_status st = open_blob(b, b.n, &s, &err);
    CHECK(st == want && err.msg[0], "%s: status %d (want %d) '%s'", what, st, want, err.msg);
    free(b.p);
}

#define T(dt, shape, b, e) "{\"dtype\":\"" dt "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static void test_hostile(void) {
    const ak_status F = AK_ERR_FORMAT, U = AK_ERR_UNSUPPORTED;
    expect("end past the data", "{\"a\":" T("F32", "[2]", 0, 8) "}", 7, F);
    expect("begin after end", "{\"a\":" T("F32", "[0]", 8, 4) "}", 8, F);
    expect("negative offset", "{\"a\":" T("F32", "[1]", -4, 0) "}", 8, F);
    expect("size mismatch", "{\"a\":" T("F32", "[3]", 0, 8) "}", 16, F);
    expect("size mismatch (dtype)", "{\"a\":" T("F16", "[4]", 0, 16) "}", 16, F);
    expect("overlap", "{\"a\":" T("F32", "[2]", 0, 8) ",\"b\":" T("F32", "[2]", 4, 12) "}", 12, F);
    expect("same range", "{\"a\":" T("F32", "[2]", 0, 8) ",\"b\":" T("F32", "[2]", 0, 8) "}", 8, F);
    expect("unknown dtype", "{\"a\":" T("F4", "[2]", 0, 1) "}", 8, U);
    expect("dtype not a string", "{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 8, F);
    expect("negative dim", "{\"a\":" T("F32", "[-1]", 0, 4) "}", 8, F);
    expect("fractional dim", "{\"a\":" T("F32", "[1.5]", 0, 4) "}", 8, F);
    expect("nine dims", "{\"a\":" T("U8", "[1,1,1,1,1,1,1,1,1]", 0, 1) "}", 8, U);
    expect("shape overflow", "{\"a\":" T("F32", "[4294967296,4294967296]", 0, 8) "}", 8, F);
    expect("bytes overflow", "{\"a\":" T("F64", "[4611686018427387904]", 0, 8) "}", 8, F);
    expect("huge offsets", "{\"a\":" T("U8", "[1]", 9223372036854775806, 9223372036854775807) "}", 8, F);
    expect("offset beyond int64", "{\"a\":" T("U8", "[1]", 0, 18446744073709551617) "}", 8, F);
    expect("three offsets", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", 8, F);
    expect("missing shape", "{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 8, F);
    expect("missing offsets", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 8, F);
    expect("entry not an object", "{\"a\":[1]}", 8, F);
    expect("metadata not an object", "{\"__metadata__\":[]}", 0, F);
    expect("metadata value not a string", "{\"__metadata__\":{\"k\":1}}", 0, F);
    expect("duplicate names", "{\"a\":" T("U8", "[1]", 0, 1) ",\"a\":" T("U8", "[1]", 1, 2) "}", 8, F);
    expect("empty name", "{\"\":" T("U8", "[1]", 0, 1) "}", 8, F);
    expect("NUL in name", "{\"a\\u0000b\":" T("U8", "[1]", 0, 1) "}", 8, F);
    expect("header an array", "[{\"a\":1}]", 0, F);
    expect("header bad JSON", "{\"a\":" T("U8", "[1]", 0, 1) ",}", 8, F);
    expect("header trailing garbage", "{} x", 0, F);
    expect("header not starting with {", " {}", 0, F);

    /* header length field */
    ak_st *s;
    ak_err err;
    blob b = make("{}", 0);
    CHECK(open_blob(b, b.n, &s, &err) == AK_OK, "empty header: %s", err.msg);
    uint8_t *p = b.p;
    p[0] = 3; /* longer than the file */
    CHECK(open_blob(b, b.n, &s, &err) == F, "header length past the end");
    p[0] = 1;
    CHECK(open_blob(b, b.n, &s, &err) == F, "header length 1");
    p[0] = 0;
    CHECK(open_blob(b, b.n, &s, &err) == F, "header length 0");
    p[0] = 2;
    p[7] = 0x80;
    CHECK(open_blob(b, b.n, &s, &err) == F, "header length 2^63");
    for (size_t n = 0; n < 8; n++) CHECK(open_blob(b, n, &s, &err) == F, "file of %zu bytes", n);
    free(b.p);
}

/* Every strict prefix of a valid file fails (the data is needed to its last byte); random
 * mutations of header and length bytes never crash. */
static void test_truncation_and_mutation(void) {
    blob b = make(VALID, 40);
    ak_st *s;
    ak_err err;
    for (size_t n = 0; n < b.n; n++) {
        ak_status st = open_blob(b, n, &s, &err);
        CHECK(st != AK_OK && err.msg[0], "prefix of %zu bytes accepted", n);
    }
    CHECK(open_blob(b, b.n, &s, &err) == AK_OK, "whole file");
    uint64_t rng = 7;
    uint8_t *m = malloc(b.n);
    int rejected = 0;
    for (int it = 0; it < 20000; it++) {
        memcpy(m, b.p, b.n);
        int k = 1 + (int)(ak_rand_u32(&rng) % 3);
        for (int j = 0; j < k; j++) m[ak_rand_u32(&rng) % (b.n - 40)] = (uint8_t)ak_rand_u32(&rng);
        blob mb = {m, b.n};
        ak_status st = open_blob(mb, b.n, &s, &err);
        if (st) { rejected++; CHECK(err.msg[0], "mutation rejected without a message"); }
    }
    printf("safetensors: %d of 20000 mutations rejected\n", rejected);
    free(m);
    free(b.p);
}

static void write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fwrite(p, 1, n, f);
    fclose(f);
}

static void write_st(const char *dir, const char *name, const char *header, size_t data_len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    blob b = make(header, data_len);
    write_file(path, b.p, b.n);
    free(b.p);
}

static void clear_dir(const char *dir) {
    const char *names[] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors",
                           "model.safetensors.index.json", "extra.safetensors"};
    char path[4096];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
}

static void test_dir(void) {
    char dir[] = "/tmp/ak_st_test_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[4096];
    ak_st_dir *d = NULL;
    ak_err err;
    CHECK(ak_st_dir_open(dir, &d, &err) == AK_ERR_FORMAT && strstr(err.msg, "no .safetensors"), "empty dir: %s", err.msg);
    write_st(dir, "model-00001-of-00002.safetensors", "{\"x\":" T("F32", "[2]", 0, 8) ",\"y\":" T("U8", "[1]", 8, 9) "}", 9);
    write_st(dir, "model-00002-of-00002.safetensors", "{\"z\":" T("F16", "[2]", 0, 4) "}", 4);
    /* no index: every *.safetensors */
    ak_status st = ak_st_dir_open(dir, &d, &err);
    CHECK(st == AK_OK && d->n_files == 2 && d->n_entries == 3, "two shards: %s", err.msg);
    if (!st) {
        const ak_st_tensor *z = ak_st_dir_find(d, "z"), *x = ak_st_dir_find(d, "x");
        CHECK(z && z->dtype == AK_ST_F16 && x && x->nbytes == 8 && !ak_st_dir_find(d, "w"), "lookups across shards");
        ak_st_dir_close(d);
    }
    /* with an index */
    const char *idx = "{\"metadata\":{\"total_size\":13},\"weight_map\":{\"x\":\"model-00001-of-00002.safetensors\","
                      "\"y\":\"model-00001-of-00002.safetensors\",\"z\":\"model-00002-of-00002.safetensors\"}}";
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    write_file(path, idx, strlen(idx));
    write_st(dir, "extra.safetensors", "{\"x\":" T("F32", "[2]", 0, 8) "}", 8); /* not in the index: ignored */
    st = ak_st_dir_open(dir, &d, &err);
    CHECK(st == AK_OK && d->n_files == 2, "index: %s", err.msg);
    if (!st) ak_st_dir_close(d);
    /* an index that misplaces a tensor, names a missing file, or escapes the directory */
    const char *bad[] = {
        "{\"weight_map\":{\"x\":\"model-00002-of-00002.safetensors\"}}",
        "{\"weight_map\":{\"x\":\"model-00003-of-00002.safetensors\"}}",
        "{\"weight_map\":{\"x\":\"../model-00001-of-00002.safetensors\"}}",
        "{\"weight_map\":{\"x\":\"..\"}}",
        "{\"weight_map\":{\"x\":7}}",
        "{\"weight_map\":{}}",
        "{\"weight_map\":[]}",
        "{\"weights\":{}}",
        "{\"weight_map\":{\"x\":\"model-00001-of-00002.safetensors\",}",
    };
    ak_status want[] = {AK_ERR_FORMAT, AK_ERR_IO, AK_ERR_FORMAT, AK_ERR_FORMAT, AK_ERR_FORMAT, AK_ERR_FORMAT,
                        AK_ERR_FORMAT, AK_ERR_FORMAT, AK_ERR_FORMAT};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_file(path, bad[i], strlen(bad[i]));
        err.msg[0] = 0;
        st = ak_st_dir_open(dir, &d, &err);
        CHECK(st == want[i] && err.msg[0], "bad index #%zu: status %d '%s'", i, st, err.msg);
        if (!st) ak_st_dir_close(d);
    }
    /* the same tensor in two shards */
    unlink(path);
    st = ak_st_dir_open(dir, &d, &err);
    CHECK(st == AK_ERR_FORMAT && strstr(err.msg, "two shards"), "duplicate across shards: %s", err.msg);
    if (!st) ak_st_dir_close(d);
    /* a broken shard names its file */
    write_st(dir, "extra.safetensors", "{\"q\":" T("F32", "[2]", 0, 8) "}", 7);
    st = ak_st_dir_open(dir, &d, &err);
    CHECK(st == AK_ERR_FORMAT && strstr(err.msg, "extra.safetensors"), "broken shard: %s", err.msg);
    if (!st) ak_st_dir_close(d);
    /* ak_st_open on a path */
    ak_st *s;
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    st = ak_st_open(path, &s, &err);
    CHECK(st == AK_OK && s->mapped && s->n_tensors == 1, "open file: %s", err.msg);
    if (!st) ak_st_close(s);
    CHECK(ak_st_open(dir, &s, &err) == AK_ERR_IO, "a directory is not a file");
    snprintf(path, sizeof path, "%s/none.safetensors", dir);
    CHECK(ak_st_open(path, &s, &err) == AK_ERR_IO, "missing file");
    clear_dir(dir);
    rmdir(dir);
}

int main(void) {
    test_valid();
    test_hostile();
    test_truncation_and_mutation();
    test_dir();
    return ak_test_done();
}
