/* GGUF reader against hostile input: truncated fixtures, seeded byte/bit mutations of the
 * header, metadata and tensor table, and hand-built files that break one rule each. Every
 * buffer handed to the reader is an exactly-sized malloc, so a sanitizer build catches any
 * read past the end. A valid hand-built file checks every getter and the data alignment. */
#include "format/gguf.h"
#include "test_util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- opening exact copies ---------------------------------------------------------- */

static uint8_t *exact_copy(const uint8_t *src, size_t n) {
    uint8_t *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "out of memory\n"); exit(2); }
    if (n) memcpy(p, src, n);
    return p;
}

static bool in_buf(const ak_gguf *g, const void *ptr, uint64_t len) {
    const uint8_t *p = ptr;
    if (!p) return len == 0;
    if (p < g->base) return false;
    size_t off = (size_t)(p - g->base);
    return off <= g->size && len <= g->size - off;
}

static int type_bytes(ak_gguf_type t) {
    static const int sz[AK_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return (unsigned)t < AK_GGUF_TYPE_COUNT ? sz[t] : 0;
}

/* Everything an accepted file hands out must lie inside the buffer and be self-consistent;
 * the getters are run over every key on the way. Returns false on the first problem. */
static bool check_accepted(const ak_gguf *g, const char *label) {
    int bad0 = ak_test_failures;
    CHECK(g->alignment && !(g->alignment & (g->alignment - 1)), "%s: alignment %llu", label, (unsigned long long)g->alignment);
    for (uint64_t i = 0; i < g->n_kv && ak_test_failures == bad0; i++) {
        const ak_gguf_kv *kv = &g->kv[i];
        CHECK(in_buf(g, kv->key.ptr, kv->key.len), "%s: kv %llu key outside the buffer", label, (unsigned long long)i);
        CHECK((unsigned)kv->type < AK_GGUF_TYPE_COUNT, "%s: kv %llu type %d", label, (unsigned long long)i, (int)kv->type);
        if (ak_test_failures != bad0) break;
        if (kv->type == AK_GGUF_STRING)
            CHECK(in_buf(g, kv->v.s.ptr, kv->v.s.len), "%s: kv %llu string outside the buffer", label, (unsigned long long)i);
        if (kv->type == AK_GGUF_ARRAY) {
            int es = type_bytes(kv->arr_type);
            CHECK((unsigned)kv->arr_type < AK_GGUF_TYPE_COUNT && kv->arr_type != AK_GGUF_ARRAY, "%s: kv %llu array type %d",
                  label, (unsigned long long)i, (int)kv->arr_type);
            if (kv->arr_type == AK_GGUF_STRING) {
                CHECK(kv->arr_n == 0 || kv->arr_str, "%s: kv %llu string array missing", label, (unsigned long long)i);
                for (uint64_t j = 0; kv->arr_str && j < kv->arr_n && ak_test_failures == bad0; j++)
                    CHECK(in_buf(g, kv->arr_str[j].ptr, kv->arr_str[j].len), "%s: kv %llu element %llu outside the buffer",
                          label, (unsigned long long)i, (unsigned long long)j);
            } else if (es) {
                CHECK(kv->arr_n <= g->size / (uint64_t)es && in_buf(g, kv->arr_data, kv->arr_n * (uint64_t)es),
                      "%s: kv %llu array data outside the buffer", label, (unsigned long long)i);
                if (ak_test_failures == bad0 && kv->arr_n) {
                    double f; int64_t v;
                    (void)ak_gguf_arr_f64(kv, 0, &f); (void)ak_gguf_arr_i64(kv, kv->arr_n - 1, &v);
                    CHECK(!ak_gguf_arr_i64(kv, kv->arr_n, &v), "%s: index past the end accepted", label);
                }
            }
        }
        /* exercise the getters through a NUL-terminated copy of the key */
        if (ak_test_failures == bad0 && kv->key.len < 256 && !memchr(kv->key.ptr, 0, kv->key.len)) {
            char key[256];
            memcpy(key, kv->key.ptr, kv->key.len);
            key[kv->key.len] = 0;
            int64_t iv; double dv; bool bv; ak_str sv;
            (void)ak_gguf_get_i64(g, key, &iv); (void)ak_gguf_get_f64(g, key, &dv); (void)ak_gguf_get_bool(g, key, &bv);
            if (ak_gguf_get_str(g, key, &sv)) CHECK(in_buf(g, sv.ptr, sv.len), "%s: get_str outside the buffer", label);
        }
    }
    CHECK(g->n_tensors == 0 || g->data_offset <= g->size, "%s: data offset %llu past %zu", label,
          (unsigned long long)g->data_offset, g->size);
    for (uint64_t i = 0; i < g->n_tensors && ak_test_failures == bad0; i++) {
        const ak_gguf_tensor *t = &g->tensors[i];
        CHECK(in_buf(g, t->name.ptr, t->name.len), "%s: tensor %llu name outside the buffer", label, (unsigned long long)i);
        CHECK(t->n_dims >= 1 && t->n_dims <= 4, "%s: tensor %llu dims %d", label, (unsigned long long)i, t->n_dims);
        CHECK(in_buf(g, t->data, t->nbytes), "%s: tensor %llu data (%llu bytes) outside the buffer", label,
              (unsigned long long)i, (unsigned long long)t->nbytes);
        CHECK((const uint8_t *)t->data == g->base + g->data_offset + t->offset, "%s: tensor %llu data pointer", label,
              (unsigned long long)i);
        CHECK(t->offset % g->alignment == 0, "%s: tensor %llu offset unaligned", label, (unsigned long long)i);
        if (ak_test_failures != bad0) break;
        uint64_t count = 1;
        for (int d = 0; d < 4; d++) {
            CHECK(t->ne[d] >= 1, "%s: tensor %llu ne[%d] = %lld", label, (unsigned long long)i, d, (long long)t->ne[d]);
            count *= (uint64_t)t->ne[d];
        }
        const ak_dtype_traits *tr = &ak_dtype_info[t->dtype];
        CHECK((unsigned)t->dtype < AK_DTYPE_COUNT && count % (uint64_t)tr->block == 0 &&
              t->nbytes == count / (uint64_t)tr->block * (uint64_t)tr->block_bytes,
              "%s: tensor %llu nbytes %llu", label, (unsigned long long)i, (unsigned long long)t->nbytes);
        if (t->nbytes) { /* touch both ends: a sanitizer build faults if the range were wrong */
            volatile uint8_t x = ((const uint8_t *)t->data)[0];
            x = ((const uint8_t *)t->data)[t->nbytes - 1];
            (void)x;
        }
    }
    return ak_test_failures == bad0;
}

/* A failure must come back with a status, a message, and no handle. */
static bool check_failed(ak_status st, const ak_gguf *g, const ak_err *err, const char *label) {
    int bad0 = ak_test_failures;
    CHECK(st == AK_ERR_FORMAT || st == AK_ERR_UNSUPPORTED, "%s: status %d (%s)", label, (int)st, err->msg);
    CHECK(g == NULL, "%s: handle set on failure", label);
    CHECK(err->msg[0] != 0, "%s: empty error message", label);
    return ak_test_failures == bad0;
}

static ak_status open_exact(const uint8_t *src, size_t n, ak_gguf **g, ak_err *err, uint8_t **buf) {
    *buf = exact_copy(src, n);
    memset(err->msg, 0, sizeof err->msg);
    *g = (ak_gguf *)1; /* the reader must overwrite this on every path */
    return ak_gguf_open_mem(*buf, n, g, err);
}

/* ---- 1. truncation --------------------------------------------------------------------- */

static int n_trunc;

static void truncate_at(const uint8_t *file, size_t len, const char *label) {
    ak_gguf *g; ak_err err; uint8_t *buf;
    ak_status st = open_exact(file, len, &g, &err, &buf);
    n_trunc++;
    char what[160];
    snprintf(what, sizeof what, "%s truncated to %zu", label, len);
    if (st == AK_OK) {
        CHECK(0, "%s: accepted", what);
        ak_gguf_close(g);
    } else if (check_failed(st, g, &err, what)) {
        CHECK(strstr(err.msg, "truncated") || strstr(err.msg, "magic") || strstr(err.msg, "exceed"),
              "%s: message does not say what is wrong: %s", what, err.msg);
    }
    free(buf);
}

static void truncation_tests(const char *rel, const uint8_t *file, size_t size, const ak_gguf *g0) {
    size_t d = (size_t)g0->data_offset;
    /* every offset of the header, metadata and tensor table, and the data start itself */
    for (size_t len = 0; len <= d && len < size; len++) truncate_at(file, len, rel);
    /* the data section: just past its start, one byte short of each tensor's end, a spread */
    for (size_t len = d + 1; len < d + 40 && len < size; len++) truncate_at(file, len, rel);
    for (uint64_t i = 0; i < g0->n_tensors; i++) {
        uint64_t end = g0->data_offset + g0->tensors[i].offset + g0->tensors[i].nbytes;
        if (end - 1 > d) truncate_at(file, (size_t)end - 1, rel);
    }
    for (int k = 1; k < 48; k++) truncate_at(file, d + (size - d) / 48 * (size_t)k, rel);
    truncate_at(file, size - 1, rel);
}

/* ---- 2. seeded mutation of the header, metadata and tensor table ------------------------ */

static int n_mut, n_mut_ok, n_mut_format, n_mut_unsup;

/* Offsets worth hitting: the fixed header, each kv's length/type/array header, the tensor table. */
typedef struct { size_t *pt; size_t n_pt; size_t table, end; } targets;

static void find_targets(const ak_gguf *g, targets *tg) {
    tg->pt = malloc(sizeof(size_t) * (size_t)(g->n_kv * 3 + 1));
    tg->n_pt = 0;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        size_t k = (size_t)((const uint8_t *)g->kv[i].key.ptr - g->base);
        tg->pt[tg->n_pt++] = k - 8;                      /* key length */
        tg->pt[tg->n_pt++] = k + g->kv[i].key.len;        /* value type */
        tg->pt[tg->n_pt++] = k + g->kv[i].key.len + 4;    /* value / array type and length / string length */
    }
    tg->end = (size_t)g->data_offset;
    tg->table = g->n_tensors ? (size_t)((const uint8_t *)g->tensors[0].name.ptr - g->base) - 8 : 24;
    if (tg->table >= tg->end) tg->table = 0;
}

static void mutation_tests(const char *label, const uint8_t *file, size_t size, const ak_gguf *g0, int trials,
                           uint64_t seed) {
    static const uint64_t big[] = {0, 1, 2, 3, 4, 5, 8, 12, 13, 31, 32, 33, 63, 64, 99, 255, 256, 0x7fffffffull,
                                   0x80000000ull, 0xffffffffull, 0x100000000ull, 1ull << 40, 1ull << 50,
                                   1ull << 60, 1ull << 61, 1ull << 62, 1ull << 63, ~0ull, ~0ull - 31};
    targets tg;
    find_targets(g0, &tg);
    size_t end = tg.end;
    uint8_t *work = exact_copy(file, size);
    uint64_t rs = seed;
    for (int trial = 0; trial < trials; trial++) {
        int n_edit = 1 + (int)(ak_rand_u32(&rs) % 3);
        for (int e = 0; e < n_edit; e++) {
            size_t pos;
            switch (ak_rand_u32(&rs) % 4) {
            case 0: pos = ak_rand_u32(&rs) % end; break;
            case 1: pos = ak_rand_u32(&rs) % 24; break;
            case 2: pos = tg.table + ak_rand_u32(&rs) % (end - tg.table); break;
            default:
                pos = tg.n_pt ? tg.pt[ak_rand_u32(&rs) % tg.n_pt] + ak_rand_u32(&rs) % 8 : ak_rand_u32(&rs) % end;
                break;
            }
            if (pos >= end) pos = end - 1;
            uint32_t kind = ak_rand_u32(&rs) % 5;
            if (kind == 0) work[pos] ^= (uint8_t)(1u << (ak_rand_u32(&rs) % 8));
            else if (kind == 1) work[pos] = (uint8_t)ak_rand_u32(&rs);
            else if (kind == 2) work[pos] = (ak_rand_u32(&rs) & 1) ? 0xff : 0x00;
            else {
                uint64_t v = big[ak_rand_u32(&rs) % (sizeof big / sizeof *big)];
                if (ak_rand_u32(&rs) % 4 == 0) v += (uint64_t)size * (ak_rand_u32(&rs) % 3);
                size_t w = kind == 3 ? 8 : 4;
                if (pos + w > end) pos = end - w;
                memcpy(work + pos, &v, w);
            }
        }
        ak_gguf *g; ak_err err;
        memset(err.msg, 0, sizeof err.msg);
        g = (ak_gguf *)1;
        ak_status st = ak_gguf_open_mem(work, size, &g, &err);
        char what[96];
        snprintf(what, sizeof what, "%s mutation %d", label, trial);
        n_mut++;
        if (st == AK_OK) {
            n_mut_ok++;
            check_accepted(g, what);
            ak_gguf_close(g);
        } else {
            if (st == AK_ERR_FORMAT) n_mut_format++;
            if (st == AK_ERR_UNSUPPORTED) n_mut_unsup++;
            check_failed(st, g, &err, what);
        }
        memcpy(work, file, end); /* edits never reach the data section */
    }
    free(work);
    free(tg.pt);
}

static void fixture_tests(const char *rel, int trials, uint64_t seed) {
    size_t size = 0;
    uint8_t *raw = ak_read_file(ak_fixture(rel), &size);
    CHECK(raw != NULL && size > 64, "cannot read fixture %s", ak_fixture(rel));
    if (!raw) return;
    uint8_t *file = exact_copy(raw, size);
    free(raw);
    ak_gguf *g; ak_err err; uint8_t *buf;
    ak_status st = open_exact(file, size, &g, &err, &buf);
    CHECK(st == AK_OK, "%s intact: %s", rel, err.msg);
    if (st == AK_OK) {
        check_accepted(g, rel);
        CHECK(g->n_tensors > 0 && g->data_offset < size, "%s: no tensors", rel);
        /* the last tensor must end at the end of the file for every truncation to be detectable */
        uint64_t max_end = 0;
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            uint64_t e = g->data_offset + g->tensors[i].offset + g->tensors[i].nbytes;
            if (e > max_end) max_end = e;
        }
        CHECK(max_end == size, "%s: data ends at %llu of %zu", rel, (unsigned long long)max_end, size);
        truncation_tests(rel, file, size, g);
        mutation_tests(rel, file, size, g, trials, seed);
        ak_gguf_close(g);
    }
    free(buf);
    free(file);
}

/* ---- 3. hand-built files ------------------------------------------------------------------ */

typedef struct { uint8_t *p; size_t n, cap; } wbuf;

static void w_bytes(wbuf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) { fprintf(stderr, "out of memory\n"); exit(2); }
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void w_u8(wbuf *b, uint8_t v) { w_bytes(b, &v, 1); }
static void w_u16(wbuf *b, uint16_t v) { w_bytes(b, &v, 2); } /* little-endian host, as GGUF */
static void w_u32(wbuf *b, uint32_t v) { w_bytes(b, &v, 4); }
static void w_u64(wbuf *b, uint64_t v) { w_bytes(b, &v, 8); }
static void w_f32(wbuf *b, float v) { w_bytes(b, &v, 4); }
static void w_f64(wbuf *b, double v) { w_bytes(b, &v, 8); }
static void w_str(wbuf *b, const char *s) { w_u64(b, strlen(s)); w_bytes(b, s, strlen(s)); }
static void w_pad(wbuf *b, size_t align) { while (b->n % align) w_u8(b, 0); }
static void w_zeros(wbuf *b, size_t n) { while (n--) w_u8(b, 0); }

static void w_header(wbuf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    w_bytes(b, "GGUF", 4);
    w_u32(b, version);
    w_u64(b, n_tensors);
    w_u64(b, n_kv);
}
static void w_kv_u32(wbuf *b, const char *key, uint32_t v) { w_str(b, key); w_u32(b, AK_GGUF_U32); w_u32(b, v); }
static void w_kv_str(wbuf *b, const char *key, const char *v) { w_str(b, key); w_u32(b, AK_GGUF_STRING); w_str(b, v); }
static void w_tinfo(wbuf *b, const char *name, uint32_t nd, const uint64_t *ne, uint32_t type, uint64_t offset) {
    w_str(b, name);
    w_u32(b, nd);
    for (uint32_t d = 0; d < nd; d++) w_u64(b, ne[d]);
    w_u32(b, type);
    w_u64(b, offset);
}

/* A well-formed file of one F32 tensor "t" of ne = {8, 2}: the base most cases bend. */
static void w_one_tensor(wbuf *b, uint32_t nd, const uint64_t *ne, uint32_t type, uint64_t offset, size_t data_bytes) {
    w_header(b, 3, 1, 1);
    w_kv_str(b, "general.architecture", "llama");
    w_tinfo(b, "t", nd, ne, type, offset);
    w_pad(b, 32);
    w_zeros(b, data_bytes);
}

static int n_hand;

/* Opens b (consumed) and expects status want with word in the message. */
static void expect_fail(const char *label, wbuf *b, ak_status want, const char *word) {
    ak_gguf *g; ak_err err; uint8_t *buf;
    ak_status st = open_exact(b->p, b->n, &g, &err, &buf);
    n_hand++;
    CHECK(st == want, "%s: status %d, want %d (%s)", label, (int)st, (int)want, err.msg);
    if (st == AK_OK) ak_gguf_close(g);
    else {
        CHECK(g == NULL, "%s: handle set on failure", label);
        CHECK(strstr(err.msg, word) != NULL, "%s: message lacks '%s': %s", label, word, err.msg);
    }
    free(buf);
    free(b->p);
    *b = (wbuf){0};
}

static void hostile_files(void) {
    wbuf b = {0};
    const uint64_t ne2[2] = {8, 2};

    /* framing */
    expect_fail("empty file", &b, AK_ERR_FORMAT, "magic");
    w_bytes(&b, "GGUF", 4);
    expect_fail("only GGUF", &b, AK_ERR_FORMAT, "truncated");
    w_bytes(&b, "GGU", 3);
    expect_fail("three bytes", &b, AK_ERR_FORMAT, "magic");
    w_bytes(&b, "GGUF", 4); w_u32(&b, 3);
    expect_fail("magic and version only", &b, AK_ERR_FORMAT, "truncated");
    w_header(&b, 3, 0, 0); b.p[3] = 'X';
    expect_fail("bad magic", &b, AK_ERR_FORMAT, "magic");
    w_header(&b, 3, 0, 0); b.p[0] = 'g';
    expect_fail("lower-case magic", &b, AK_ERR_FORMAT, "magic");
    w_one_tensor(&b, 2, ne2, 0, 0, 64); memcpy(&b.p[4], &(uint32_t){1}, 4);
    expect_fail("version 1", &b, AK_ERR_UNSUPPORTED, "version");
    w_one_tensor(&b, 2, ne2, 0, 0, 64); memcpy(&b.p[4], &(uint32_t){4}, 4);
    expect_fail("version 4", &b, AK_ERR_UNSUPPORTED, "version");
    w_one_tensor(&b, 2, ne2, 0, 0, 64); memcpy(&b.p[4], &(uint32_t){0x03000000}, 4);
    expect_fail("big-endian version", &b, AK_ERR_UNSUPPORTED, "version");

    /* counts */
    w_header(&b, 3, 1ull << 60, 0); w_zeros(&b, 256);
    expect_fail("n_tensors 2^60", &b, AK_ERR_FORMAT, "exceed");
    w_header(&b, 3, 0, 1ull << 60); w_zeros(&b, 256);
    expect_fail("n_kv 2^60", &b, AK_ERR_FORMAT, "exceed");
    w_header(&b, 3, ~0ull, ~0ull); w_zeros(&b, 256);
    expect_fail("counts 2^64-1", &b, AK_ERR_FORMAT, "exceed");
    w_header(&b, 3, 0, 2); w_kv_u32(&b, "a", 1);
    expect_fail("fewer kvs than counted", &b, AK_ERR_FORMAT, "truncated");
    w_header(&b, 3, 2, 0); w_tinfo(&b, "t", 2, ne2, 0, 0);
    expect_fail("fewer tensors than counted", &b, AK_ERR_FORMAT, "truncated");

    /* strings and arrays */
    w_header(&b, 3, 0, 1); w_u64(&b, 1ull << 63); w_zeros(&b, 64);
    expect_fail("key length 2^63", &b, AK_ERR_FORMAT, "truncated");
    w_header(&b, 3, 0, 1); w_str(&b, "k"); w_u32(&b, AK_GGUF_STRING); w_u64(&b, 1ull << 63); w_zeros(&b, 64);
    expect_fail("string length 2^63", &b, AK_ERR_FORMAT, "truncated");
    w_header(&b, 3, 0, 1); w_str(&b, "k"); w_u32(&b, AK_GGUF_STRING); w_u64(&b, ~0ull); w_zeros(&b, 64);
    expect_fail("string length 2^64-1", &b, AK_ERR_FORMAT, "truncated");
    w_header(&b, 3, 0, 1); w_str(&b, "k"); w_u32(&b, AK_GGUF_STRING); w_u64(&b, 65); w_zeros(&b, 64);
    expect_fail("string one byte too long", &b, AK_ERR_FORMAT, "truncated");
    w_header(&b, 3, 0, 1); w_str(&b, "k"); w_u32(&b, AK_GGUF_ARRAY); w_u32(&b, AK_GGUF_U32); w_u64(&b, 1ull << 62);
    w_zeros(&b, 64);
    expect_fail("array of 2^62 u32", &b, AK_ERR_FORMAT, "truncated");
    w_header(&b, 3, 0, 1); w_str(&b, "k"); w_u32(&b, AK_GGUF_ARRAY); w_u32(&b, AK_GGUF_U64); w_u64(&b, 1ull << 61);
    w_zeros(&b, 64);
    expect_fail("array of 2^61 u64 (size wraps to 0)", &b, AK_ERR_FORMAT, "truncated");
    w_header(&b, 3, 0, 1); w_str(&b, "k"); w_u32(&b, AK_GGUF_ARRAY); w_u32(&b, AK_GGUF_U8); w_u64(&b, 65);
    w_zeros(&b, 64);
    expect_fail("u8 array one byte short", &b, AK_ERR_FORMAT, "truncated");
    w_header(&b, 3, 0, 1); w_str(&b, "k"); w_u32(&b, AK_GGUF_ARRAY); w_u32(&b, AK_GGUF_STRING); w_u64(&b, 1ull << 62);
    w_zeros(&b, 64);
    expect_fail("array of 2^62 strings", &b, AK_ERR_FORMAT, "truncated");
    w_header(&b, 3, 0, 1); w_str(&b, "k"); w_u32(&b, AK_GGUF_ARRAY); w_u32(&b, AK_GGUF_STRING); w_u64(&b, 2);
    w_str(&b, "ok"); w_u64(&b, 1ull << 63); w_zeros(&b, 16);
    expect_fail("string array element of 2^63", &b, AK_ERR_FORMAT, "truncated");
    w_header(&b, 3, 0, 1); w_str(&b, "k"); w_u32(&b, AK_GGUF_ARRAY); w_u32(&b, AK_GGUF_ARRAY); w_u64(&b, 1);
    w_u32(&b, AK_GGUF_U8); w_u64(&b, 1); w_u8(&b, 7);
    expect_fail("array of arrays", &b, AK_ERR_FORMAT, "type");
    w_header(&b, 3, 0, 1); w_str(&b, "k"); w_u32(&b, AK_GGUF_ARRAY); w_u32(&b, AK_GGUF_TYPE_COUNT); w_u64(&b, 1);
    w_u64(&b, 0);
    expect_fail("array of unknown type", &b, AK_ERR_FORMAT, "type");
    w_header(&b, 3, 0, 1); w_str(&b, "k"); w_u32(&b, AK_GGUF_TYPE_COUNT); w_u64(&b, 0);
    expect_fail("unknown value type 13", &b, AK_ERR_FORMAT, "type");
    w_header(&b, 3, 0, 1); w_str(&b, "k"); w_u32(&b, 0xffffffffu); w_u64(&b, 0);
    expect_fail("unknown value type 2^32-1", &b, AK_ERR_FORMAT, "type");
    w_header(&b, 3, 0, 1); w_str(&b, "k"); w_u32(&b, AK_GGUF_U64); w_u32(&b, 0);
    expect_fail("u64 value cut short", &b, AK_ERR_FORMAT, "truncated");
    w_header(&b, 3, 0, 2); w_kv_u32(&b, "dup", 1); w_kv_u32(&b, "dup", 2);
    expect_fail("duplicate metadata key", &b, AK_ERR_FORMAT, "duplicate");

    /* alignment */
    const struct { const char *label; uint32_t type; uint64_t v; } al[] = {
        {"alignment 0", AK_GGUF_U32, 0}, {"alignment 3", AK_GGUF_U32, 3}, {"alignment 48", AK_GGUF_U32, 48},
        {"alignment 1", AK_GGUF_U32, 1}, {"alignment 2", AK_GGUF_U32, 2}, {"alignment 4", AK_GGUF_U32, 4},
        {"alignment as u64", AK_GGUF_U64, 32}, {"alignment as i32", AK_GGUF_I32, 32}, {"alignment as f32", AK_GGUF_F32, 0},
        {"alignment as string", AK_GGUF_STRING, 0},
    };
    for (size_t i = 0; i < sizeof al / sizeof *al; i++) {
        w_header(&b, 3, 1, 1);
        w_str(&b, "general.alignment");
        w_u32(&b, al[i].type);
        if (al[i].type == AK_GGUF_U64) w_u64(&b, al[i].v);
        else if (al[i].type == AK_GGUF_STRING) w_str(&b, "32");
        else if (al[i].type == AK_GGUF_F32) w_f32(&b, 32.0f);
        else w_u32(&b, (uint32_t)al[i].v);
        w_tinfo(&b, "t", 2, ne2, 0, 0);
        w_pad(&b, 32);
        w_zeros(&b, 64);
        expect_fail(al[i].label, &b, AK_ERR_FORMAT, "alignment");
    }

    /* tensor table */
    w_one_tensor(&b, 2, ne2, 99, 0, 64);
    expect_fail("tensor type 99", &b, AK_ERR_UNSUPPORTED, "type");
    w_one_tensor(&b, 2, ne2, 0xffffffffu, 0, 64);
    expect_fail("tensor type 2^32-1", &b, AK_ERR_UNSUPPORTED, "type");
    w_one_tensor(&b, 2, (const uint64_t[]){8, 0}, 0, 0, 64);
    expect_fail("zero-size dim", &b, AK_ERR_FORMAT, "shape");
    w_one_tensor(&b, 1, (const uint64_t[]){0}, 0, 0, 64);
    expect_fail("zero-size first dim", &b, AK_ERR_FORMAT, "shape");
    w_one_tensor(&b, 5, (const uint64_t[]){2, 2, 2, 2, 1}, 0, 0, 64);
    expect_fail("5 dims", &b, AK_ERR_FORMAT, "dimensions");
    w_one_tensor(&b, 0, NULL, 0, 0, 64);
    expect_fail("0 dims", &b, AK_ERR_FORMAT, "dimensions");
    w_header(&b, 3, 1, 0); w_str(&b, "t"); w_u32(&b, 0xffffffffu); w_zeros(&b, 128);
    expect_fail("2^32-1 dims", &b, AK_ERR_FORMAT, "dimensions");
    w_one_tensor(&b, 3, (const uint64_t[]){1ull << 32, 1ull << 32, 1ull << 32}, 0, 0, 64);
    expect_fail("shape product 2^96", &b, AK_ERR_FORMAT, "shape");
    w_one_tensor(&b, 4, (const uint64_t[]){1ull << 16, 1ull << 16, 1ull << 16, 1ull << 16}, 0, 0, 64);
    expect_fail("shape product 2^64 (wraps to 0)", &b, AK_ERR_FORMAT, "shape");
    w_one_tensor(&b, 1, (const uint64_t[]){1ull << 63}, 0, 0, 64);
    expect_fail("dim 2^63", &b, AK_ERR_FORMAT, "shape");
    w_one_tensor(&b, 2, (const uint64_t[]){~0ull, 1}, 0, 0, 64);
    expect_fail("dim 2^64-1", &b, AK_ERR_FORMAT, "shape");
    w_one_tensor(&b, 2, (const uint64_t[]){1ull << 31, 1ull << 31}, 0, 0, 64);
    expect_fail("2^62 elements", &b, AK_ERR_FORMAT, "shape");
    w_one_tensor(&b, 2, (const uint64_t[]){1ull << 25, 1ull << 25}, 0, 0, 64);
    expect_fail("2^50 f32 elements (data far past the end)", &b, AK_ERR_FORMAT, "truncated");
    w_one_tensor(&b, 1, (const uint64_t[]){33}, 8 /* Q8_0 */, 0, 64);
    expect_fail("Q8_0 row not a block multiple", &b, AK_ERR_FORMAT, "block");
    w_one_tensor(&b, 2, ne2, 0, 4, 128);
    expect_fail("offset not aligned", &b, AK_ERR_FORMAT, "align");
    w_one_tensor(&b, 2, ne2, 0, 1ull << 40, 64);
    expect_fail("offset past the end", &b, AK_ERR_FORMAT, "truncated");
    w_one_tensor(&b, 2, ne2, 0, ~0ull - 31, 64);
    expect_fail("offset 2^64-32 (sum wraps)", &b, AK_ERR_FORMAT, "truncated");
    w_one_tensor(&b, 2, ne2, 0, 32, 64);
    expect_fail("data runs past the end", &b, AK_ERR_FORMAT, "truncated");
    w_one_tensor(&b, 2, ne2, 0, 0, 63);
    expect_fail("data one byte short", &b, AK_ERR_FORMAT, "truncated");
    w_header(&b, 3, 1, 0); w_tinfo(&b, "t", 2, ne2, 0, 0);
    expect_fail("no data section", &b, AK_ERR_FORMAT, "truncated");
    w_header(&b, 3, 1, 0); w_u64(&b, 1ull << 63); w_zeros(&b, 64);
    expect_fail("tensor name length 2^63", &b, AK_ERR_FORMAT, "truncated");
    w_header(&b, 3, 2, 0); w_tinfo(&b, "t", 2, ne2, 0, 0); w_tinfo(&b, "t", 2, ne2, 0, 64);
    w_pad(&b, 32); w_zeros(&b, 128);
    expect_fail("duplicate tensor names", &b, AK_ERR_FORMAT, "duplicate");
    w_header(&b, 3, 1, 1); w_kv_u32(&b, "general.alignment", 64);
    w_tinfo(&b, "t", 2, ne2, 0, 32); w_pad(&b, 64); w_zeros(&b, 128);
    expect_fail("offset aligned to 32 but general.alignment 64", &b, AK_ERR_FORMAT, "align");
}

/* ---- 3b. a valid file of every value type ------------------------------------------------- */

static void w_arr_hdr(wbuf *b, const char *key, uint32_t type, uint64_t n) {
    w_str(b, key); w_u32(b, AK_GGUF_ARRAY); w_u32(b, type); w_u64(b, n);
}

enum { N_KV_VALID = 26 };

/* Returns the size of the tensor table's end (before padding) through *table_end. */
static void build_valid(wbuf *b, uint32_t version, uint32_t align, size_t *a_off, size_t *q_off, size_t *table_end) {
    w_header(b, version, 2, N_KV_VALID + (align ? 1 : 0));
    if (align) w_kv_u32(b, "general.alignment", align);
    w_str(b, "v.u8"); w_u32(b, AK_GGUF_U8); w_u8(b, 200);
    w_str(b, "v.i8"); w_u32(b, AK_GGUF_I8); w_u8(b, (uint8_t)(int8_t)-100);
    w_str(b, "v.u16"); w_u32(b, AK_GGUF_U16); w_u16(b, 60000);
    w_str(b, "v.i16"); w_u32(b, AK_GGUF_I16); w_u16(b, (uint16_t)(int16_t)-30000);
    w_str(b, "v.u32"); w_u32(b, AK_GGUF_U32); w_u32(b, 4000000000u);
    w_str(b, "v.i32"); w_u32(b, AK_GGUF_I32); w_u32(b, (uint32_t)(int32_t)-2000000000);
    w_str(b, "v.f32"); w_u32(b, AK_GGUF_F32); w_f32(b, 1.5f);
    w_str(b, "v.true"); w_u32(b, AK_GGUF_BOOL); w_u8(b, 1);
    w_str(b, "v.false"); w_u32(b, AK_GGUF_BOOL); w_u8(b, 0);
    w_kv_str(b, "v.str", "hello, gguf");
    w_kv_str(b, "v.empty", "");
    w_str(b, "v.u64"); w_u32(b, AK_GGUF_U64); w_u64(b, (1ull << 40) + 3);
    w_str(b, "v.i64"); w_u32(b, AK_GGUF_I64); w_u64(b, (uint64_t)-(1ll << 50));
    w_str(b, "v.f64"); w_u32(b, AK_GGUF_F64); w_f64(b, -3.25);
    w_arr_hdr(b, "a.u8", AK_GGUF_U8, 3); w_u8(b, 0); w_u8(b, 128); w_u8(b, 255);
    w_arr_hdr(b, "a.i8", AK_GGUF_I8, 2); w_u8(b, (uint8_t)(int8_t)-128); w_u8(b, 127);
    w_arr_hdr(b, "a.u16", AK_GGUF_U16, 2); w_u16(b, 1); w_u16(b, 65535);
    w_arr_hdr(b, "a.i16", AK_GGUF_I16, 2); w_u16(b, (uint16_t)(int16_t)-32768); w_u16(b, 5);
    w_arr_hdr(b, "a.u32", AK_GGUF_U32, 3); w_u32(b, 7); w_u32(b, 0xffffffffu); w_u32(b, 0);
    w_arr_hdr(b, "a.i32", AK_GGUF_I32, 2); w_u32(b, (uint32_t)(int32_t)-7); w_u32(b, 123456789);
    w_arr_hdr(b, "a.f32", AK_GGUF_F32, 3); w_f32(b, 0.25f); w_f32(b, -2.0f); w_f32(b, 1e10f);
    w_arr_hdr(b, "a.bool", AK_GGUF_BOOL, 2); w_u8(b, 1); w_u8(b, 0);
    w_arr_hdr(b, "a.u64", AK_GGUF_U64, 2); w_u64(b, 1ull << 62); w_u64(b, 9);
    w_arr_hdr(b, "a.i64", AK_GGUF_I64, 2); w_u64(b, (uint64_t)INT64_MIN); w_u64(b, (uint64_t)-1);
    w_arr_hdr(b, "a.f64", AK_GGUF_F64, 2); w_f64(b, 2.5); w_f64(b, -1e300);
    w_arr_hdr(b, "a.str", AK_GGUF_STRING, 3); w_str(b, "alpha"); w_str(b, ""); w_str(b, "gamma");
    /* 26 kvs above; empty array as the last one would make 27: keep the count honest */
    size_t al = align ? align : 32;
    /* tensor "a": F32 {4, 3} at 0 (48 bytes); tensor "q": Q8_0 {32, 2} after it, aligned */
    w_tinfo(b, "a", 2, (const uint64_t[]){4, 3}, 0, 0);
    *q_off = (48 + al - 1) / al * al;
    w_tinfo(b, "q", 2, (const uint64_t[]){32, 2}, 8, *q_off);
    *table_end = b->n;
    w_pad(b, al);
    *a_off = b->n;
    for (int i = 0; i < 12; i++) w_f32(b, (float)i + 0.5f);
    w_pad(b, al);
    for (int r = 0; r < 2; r++) { w_u16(b, 0x3c00); for (int i = 0; i < 32; i++) w_u8(b, (uint8_t)(i - 16 + r)); }
}

static void check_valid(uint32_t version, uint32_t align) {
    wbuf b = {0};
    size_t a_off, q_off, table_end;
    build_valid(&b, version, align, &a_off, &q_off, &table_end);
    char label[64];
    snprintf(label, sizeof label, "valid v%u align %u", version, align);
    ak_gguf *g; ak_err err; uint8_t *buf;
    ak_status st = open_exact(b.p, b.n, &g, &err, &buf);
    CHECK(st == AK_OK, "%s: %s", label, err.msg);
    if (st == AK_OK) {
        check_accepted(g, label);
        size_t al = align ? align : 32;
        CHECK(g->version == version && g->alignment == al, "%s: version %u alignment %llu", label, g->version,
              (unsigned long long)g->alignment);
        CHECK(g->n_kv == N_KV_VALID + (align ? 1u : 0u) && g->n_tensors == 2, "%s: counts", label);
        CHECK(g->data_offset == a_off && g->data_offset % al == 0 && g->data_offset >= table_end,
              "%s: data offset %llu, want %zu", label, (unsigned long long)g->data_offset, a_off);
        int64_t i; double f; bool bo; ak_str s;
        const struct { const char *k; int64_t v; } ints[] = {
            {"v.u8", 200}, {"v.i8", -100}, {"v.u16", 60000}, {"v.i16", -30000}, {"v.u32", 4000000000ll},
            {"v.i32", -2000000000}, {"v.u64", (1ll << 40) + 3}, {"v.i64", -(1ll << 50)}, {"v.true", 1},
        };
        for (size_t k = 0; k < sizeof ints / sizeof *ints; k++) {
            CHECK(ak_gguf_get_i64(g, ints[k].k, &i) && i == ints[k].v, "%s: %s = %lld", label, ints[k].k, (long long)i);
            CHECK(ak_gguf_get_f64(g, ints[k].k, &f) && f == (double)ints[k].v, "%s: %s as f64 = %g", label, ints[k].k, f);
        }
        CHECK(ak_gguf_get_f64(g, "v.f32", &f) && f == 1.5, "%s: f32 %g", label, f);
        CHECK(ak_gguf_get_f64(g, "v.f64", &f) && f == -3.25, "%s: f64 %g", label, f);
        CHECK(!ak_gguf_get_i64(g, "v.f64", &i), "%s: -3.25 converted to an integer", label);
        CHECK(ak_gguf_get_bool(g, "v.true", &bo) && bo, "%s: true", label);
        CHECK(ak_gguf_get_bool(g, "v.false", &bo) && !bo, "%s: false", label);
        CHECK(!ak_gguf_get_bool(g, "v.u8", &bo), "%s: u8 read as bool", label);
        CHECK(ak_gguf_get_str(g, "v.str", &s) && ak_str_eq(s, "hello, gguf"), "%s: string", label);
        CHECK(ak_gguf_get_str(g, "v.empty", &s) && s.len == 0, "%s: empty string", label);
        CHECK(!ak_gguf_get_str(g, "v.u32", &s), "%s: u32 read as string", label);
        CHECK(!ak_gguf_get_i64(g, "v.str", &i) && !ak_gguf_get_f64(g, "v.str", &f), "%s: string read as number", label);
        CHECK(!ak_gguf_get_i64(g, "a.u8", &i), "%s: array read as scalar", label);
        CHECK(!ak_gguf_get_i64(g, "missing", &i) && !ak_gguf_get_str(g, "missing", &s) && !ak_gguf_find(g, "missing"),
              "%s: missing key", label);
        CHECK(!ak_gguf_get_i64(g, "v.u", &i) && !ak_gguf_get_i64(g, "v.u8x", &i), "%s: key prefix matched", label);

        const struct { const char *k; ak_gguf_type t; int n; int64_t v[3]; } ia[] = {
            {"a.u8", AK_GGUF_U8, 3, {0, 128, 255}}, {"a.i8", AK_GGUF_I8, 2, {-128, 127}},
            {"a.u16", AK_GGUF_U16, 2, {1, 65535}}, {"a.i16", AK_GGUF_I16, 2, {-32768, 5}},
            {"a.u32", AK_GGUF_U32, 3, {7, 0xffffffffll, 0}}, {"a.i32", AK_GGUF_I32, 2, {-7, 123456789}},
            {"a.bool", AK_GGUF_BOOL, 2, {1, 0}}, {"a.u64", AK_GGUF_U64, 2, {1ll << 62, 9}},
            {"a.i64", AK_GGUF_I64, 2, {INT64_MIN, -1}},
        };
        for (size_t k = 0; k < sizeof ia / sizeof *ia; k++) {
            const ak_gguf_kv *kv = ak_gguf_find(g, ia[k].k);
            CHECK(kv && kv->type == AK_GGUF_ARRAY && kv->arr_type == ia[k].t && kv->arr_n == (uint64_t)ia[k].n,
                  "%s: %s header", label, ia[k].k);
            if (!kv) continue;
            for (int e = 0; e < ia[k].n; e++) {
                CHECK(ak_gguf_arr_i64(kv, (uint64_t)e, &i) && i == ia[k].v[e], "%s: %s[%d] = %lld", label, ia[k].k, e,
                      (long long)i);
                CHECK(ak_gguf_arr_f64(kv, (uint64_t)e, &f) && f == (double)ia[k].v[e], "%s: %s[%d] as f64 = %g", label,
                      ia[k].k, e, f);
            }
            CHECK(!ak_gguf_arr_i64(kv, (uint64_t)ia[k].n, &i) && !ak_gguf_arr_f64(kv, ~0ull, &f),
                  "%s: %s index past the end", label, ia[k].k);
        }
        const ak_gguf_kv *kv = ak_gguf_find(g, "a.f32");
        CHECK(kv && kv->arr_type == AK_GGUF_F32 && kv->arr_n == 3, "%s: a.f32", label);
        if (kv) {
            CHECK(ak_gguf_arr_f64(kv, 0, &f) && f == 0.25, "%s: a.f32[0] %g", label, f);
            CHECK(ak_gguf_arr_f64(kv, 1, &f) && f == -2.0, "%s: a.f32[1] %g", label, f);
            CHECK(ak_gguf_arr_f64(kv, 2, &f) && f == 1e10f, "%s: a.f32[2] %g", label, f);
            CHECK(ak_gguf_arr_i64(kv, 1, &i) && i == -2, "%s: a.f32[1] as int", label);
            CHECK(!ak_gguf_arr_i64(kv, 0, &i), "%s: 0.25 converted to an integer", label);
        }
        kv = ak_gguf_find(g, "a.f64");
        CHECK(kv && kv->arr_type == AK_GGUF_F64 && kv->arr_n == 2, "%s: a.f64", label);
        if (kv) {
            CHECK(ak_gguf_arr_f64(kv, 0, &f) && f == 2.5, "%s: a.f64[0] %g", label, f);
            CHECK(ak_gguf_arr_f64(kv, 1, &f) && f == -1e300, "%s: a.f64[1] %g", label, f);
            CHECK(!ak_gguf_arr_i64(kv, 1, &i), "%s: -1e300 converted to an integer", label);
        }
        kv = ak_gguf_find(g, "a.str");
        CHECK(kv && kv->type == AK_GGUF_ARRAY && kv->arr_type == AK_GGUF_STRING && kv->arr_n == 3 && kv->arr_str,
              "%s: a.str", label);
        if (kv && kv->arr_str && kv->arr_n == 3) {
            CHECK(ak_str_eq(kv->arr_str[0], "alpha") && ak_str_eq(kv->arr_str[1], "") && ak_str_eq(kv->arr_str[2], "gamma"),
                  "%s: a.str values", label);
            CHECK(!ak_gguf_arr_i64(kv, 0, &i) && !ak_gguf_arr_f64(kv, 0, &f), "%s: string array read as numbers", label);
        }
        CHECK(!ak_gguf_arr_i64(ak_gguf_find(g, "v.u8"), 0, &i), "%s: scalar read as array", label);

        const ak_gguf_tensor *ta = ak_gguf_tensor_find(g, "a"), *tq = ak_gguf_tensor_find(g, "q");
        CHECK(ta && ta->dtype == AK_F32 && ta->n_dims == 2 && ta->ne[0] == 4 && ta->ne[1] == 3 && ta->ne[2] == 1 &&
              ta->ne[3] == 1 && ta->nbytes == 48 && ta->offset == 0, "%s: tensor a", label);
        CHECK(tq && tq->dtype == AK_Q8_0 && tq->ggml_type == 8 && tq->ne[0] == 32 && tq->ne[1] == 2 && tq->nbytes == 68 &&
              tq->offset == q_off, "%s: tensor q", label);
        CHECK(!ak_gguf_tensor_find(g, "b") && !ak_gguf_tensor_find(g, "aa"), "%s: missing tensor found", label);
        if (ta) {
            CHECK((const uint8_t *)ta->data == buf + a_off && ((uintptr_t)ta->data - (uintptr_t)buf) % al == 0,
                  "%s: tensor a data pointer", label);
            float v[12];
            memcpy(v, ta->data, sizeof v);
            bool ok = true;
            for (int k = 0; k < 12; k++) ok = ok && v[k] == (float)k + 0.5f;
            CHECK(ok, "%s: tensor a data", label);
        }
        if (tq) {
            const uint8_t *q = tq->data;
            CHECK(q == buf + a_off + q_off && (size_t)(q - buf) % al == 0, "%s: tensor q data pointer", label);
            CHECK(q[0] == 0x00 && q[1] == 0x3c && q[2] == (uint8_t)-16 && q[34 + 2 + 31] == 16 && q + 68 == buf + b.n,
                  "%s: tensor q data", label);
        }
        ak_gguf_close(g);
    }
    free(buf);

    /* every prefix of the valid file fails */
    for (size_t len = 0; len < b.n; len++) {
        snprintf(label, sizeof label, "valid v%u align %u", version, align);
        truncate_at(b.p, len, label);
    }
    /* and mutations of its header region never get past the checks */
    ak_gguf *g0;
    uint8_t *buf0;
    if (open_exact(b.p, b.n, &g0, &err, &buf0) == AK_OK) {
        snprintf(label, sizeof label, "valid v%u align %u", version, align);
        mutation_tests(label, buf0, b.n, g0, 3000, 0x5eed0000u + version * 131u + align);
        ak_gguf_close(g0);
    }
    free(buf0);
    free(b.p);
}

int main(void) {
    clock_t t0 = clock();
    const char *files[] = {"llama/llama-f32.gguf", "qwen2/qwen2-q8_0.gguf", "gemma3/gemma3-f16.gguf", "bert/bert-f32.gguf"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) fixture_tests(files[i], 6000, 0xa11ce5ull + i * 7919u);
    hostile_files();
    check_valid(3, 0);
    check_valid(2, 0);
    check_valid(3, 64);
    check_valid(3, 8);    /* the smallest alignment the spec allows */
    check_valid(3, 256);
    printf("truncations %d, mutations %d (accepted %d, format %d, unsupported %d), hand-built hostile files %d, %.1f s cpu\n",
           n_trunc, n_mut, n_mut_ok, n_mut_format, n_mut_unsup, n_hand, (double)(clock() - t0) / CLOCKS_PER_SEC);
    return ak_test_done();
}
