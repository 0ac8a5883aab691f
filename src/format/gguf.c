/* GGUF reader. The only code that touches raw file bytes; every read goes through
 * the cursor, which refuses to step past the end of the mapping. */
#include "format/gguf.h"
#include "core/err.h"
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const uint8_t *p;
    size_t size, off;
    ak_err *err;
    ak_status st;
} cursor;

static bool need(cursor *c, uint64_t n, const char *what) {
    if (c->st) return false;
    if (n > c->size - c->off) {
        c->st = ak_fail(c->err, AK_ERR_FORMAT, "gguf: truncated file: %s at offset %zu needs %llu bytes, file has %zu",
                        what, c->off, (unsigned long long)n, c->size);
        return false;
    }
    return true;
}

static uint64_t rd_u(cursor *c, int bytes, const char *what) {
    if (!need(c, (uint64_t)bytes, what)) return 0;
    uint64_t v = 0;
    memcpy(&v, c->p + c->off, (size_t)bytes); /* GGUF is little-endian, as is every host we build for */
    c->off += (size_t)bytes;
    return v;
}

static ak_str rd_str(cursor *c, const char *what) {
    ak_str s = {0, 0};
    uint64_t n = rd_u(c, 8, what);
    if (!need(c, n, what)) return s;
    s.ptr = (const char *)c->p + c->off;
    s.len = n;
    c->off += (size_t)n;
    return s;
}

static const int type_size[AK_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *ak_gguf_type_name(ak_gguf_type t) {
    static const char *names[AK_GGUF_TYPE_COUNT] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                                    "bool", "string", "array", "u64", "i64", "f64"};
    return (unsigned)t < AK_GGUF_TYPE_COUNT ? names[t] : "?";
}

bool ak_str_eq(ak_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && memcmp(s.ptr, c, n) == 0;
}

static int str_cmp(const void *x, const void *y) {
    const ak_str *a = x, *b = y;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    return memcmp(a->ptr, b->ptr, a->len);
}

/* Sorting a copy of the names finds a duplicate in n log n: a hostile file with a
 * million tiny entries must not take minutes. dup->ptr is NULL when all differ. */
static ak_status find_dup(const void *items, uint64_t n, size_t stride, size_t name_off, ak_str *dup, ak_err *err) {
    dup->ptr = NULL;
    dup->len = 0;
    if (n < 2) return AK_OK;
    ak_str *names = malloc((size_t)n * sizeof *names);
    if (!names) return ak_fail(err, AK_ERR_NOMEM, "gguf: out of memory");
    for (uint64_t i = 0; i < n; i++) memcpy(&names[i], (const uint8_t *)items + i * stride + name_off, sizeof *names);
    qsort(names, (size_t)n, sizeof *names, str_cmp);
    for (uint64_t i = 1; i < n && !dup->ptr; i++)
        if (str_cmp(&names[i - 1], &names[i]) == 0) *dup = names[i];
    free(names);
    return AK_OK;
}

static uint64_t raw_u(const uint8_t *p, int bytes) { uint64_t v = 0; memcpy(&v, p, (size_t)bytes); return v; }

/* Numeric payload of a scalar of type t at p into kv->v. */
static void set_scalar(ak_gguf_kv *kv, ak_gguf_type t, const uint8_t *p) {
    switch (t) {
    case AK_GGUF_U8: case AK_GGUF_U16: case AK_GGUF_U32: case AK_GGUF_U64: case AK_GGUF_BOOL:
        kv->v.u = raw_u(p, type_size[t]); break;
    case AK_GGUF_I8: kv->v.i = (int8_t)p[0]; break;
    case AK_GGUF_I16: kv->v.i = (int16_t)raw_u(p, 2); break;
    case AK_GGUF_I32: kv->v.i = (int32_t)raw_u(p, 4); break;
    case AK_GGUF_I64: kv->v.i = (int64_t)raw_u(p, 8); break;
    case AK_GGUF_F32: { float f; memcpy(&f, p, 4); kv->v.f = f; } break;
    case AK_GGUF_F64: memcpy(&kv->v.f, p, 8); break;
    default: break;
    }
}

static void parse_kv(cursor *c, ak_gguf_kv *kv) {
    kv->key = rd_str(c, "metadata key");
    uint64_t t = rd_u(c, 4, "metadata type");
    if (c->st) return;
    if (t >= AK_GGUF_TYPE_COUNT) {
        c->st = ak_fail(c->err, AK_ERR_FORMAT, "gguf: metadata '%.*s' has unknown value type %llu",
                        (int)(kv->key.len > 200 ? 200 : kv->key.len), kv->key.ptr, (unsigned long long)t);
        return;
    }
    kv->type = (ak_gguf_type)t;
    if (t == AK_GGUF_STRING) { kv->v.s = rd_str(c, "metadata string"); return; }
    if (t != AK_GGUF_ARRAY) {
        if (!need(c, (uint64_t)type_size[t], "metadata value")) return;
        set_scalar(kv, kv->type, c->p + c->off);
        c->off += (size_t)type_size[t];
        return;
    }
    uint64_t at = rd_u(c, 4, "array type");
    uint64_t n = rd_u(c, 8, "array length");
    if (c->st) return;
    if (at >= AK_GGUF_TYPE_COUNT || at == AK_GGUF_ARRAY) {
        c->st = ak_fail(c->err, AK_ERR_FORMAT, "gguf: array '%.*s' has unsupported element type %llu",
                        (int)(kv->key.len > 200 ? 200 : kv->key.len), kv->key.ptr, (unsigned long long)at);
        return;
    }
    kv->arr_type = (ak_gguf_type)at;
    kv->arr_n = n;
    if (at != AK_GGUF_STRING) {
        /* n * size must fit in what is left: divide rather than multiply to avoid overflow */
        if (n > (c->size - c->off) / (uint64_t)type_size[at]) {
            need(c, UINT64_MAX, "array data");
            return;
        }
        kv->arr_data = c->p + c->off;
        c->off += (size_t)(n * (uint64_t)type_size[at]);
        return;
    }
    if (n > (c->size - c->off) / 8) { need(c, UINT64_MAX, "string array"); return; } /* each needs >= 8 bytes */
    kv->arr_str = malloc((size_t)(n ? n : 1) * sizeof(ak_str));
    if (!kv->arr_str) { c->st = ak_fail(c->err, AK_ERR_NOMEM, "gguf: out of memory for %llu strings", (unsigned long long)n); return; }
    for (uint64_t i = 0; i < n && !c->st; i++) kv->arr_str[i] = rd_str(c, "string array element");
}

static ak_status parse(ak_gguf *g, ak_err *err) {
    cursor c = {g->base, g->size, 0, err, AK_OK};
    if (g->size < 4 || memcmp(g->base, "GGUF", 4) != 0)
        return ak_fail(err, AK_ERR_FORMAT, "gguf: bad magic (not a GGUF file)");
    c.off = 4;
    g->version = (uint32_t)rd_u(&c, 4, "version");
    if (c.st) return c.st;
    if (g->version != 2 && g->version != 3)
        return ak_fail(err, AK_ERR_UNSUPPORTED, "gguf: version %u not supported (2 and 3 are)", g->version);
    g->n_tensors = rd_u(&c, 8, "tensor count");
    g->n_kv = rd_u(&c, 8, "metadata count");
    if (c.st) return c.st;
    /* Each kv takes at least 12 bytes and each tensor entry at least 24: bound the counts
     * by the file size before allocating anything. */
    if (g->n_kv > g->size / 12 || g->n_tensors > g->size / 24)
        return ak_fail(err, AK_ERR_FORMAT, "gguf: counts (%llu tensors, %llu metadata) exceed what a %zu-byte file can hold",
                       (unsigned long long)g->n_tensors, (unsigned long long)g->n_kv, g->size);
    g->kv = calloc((size_t)g->n_kv + 1, sizeof *g->kv);
    g->tensors = calloc((size_t)g->n_tensors + 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors) return ak_fail(err, AK_ERR_NOMEM, "gguf: out of memory");

    g->alignment = 32;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        parse_kv(&c, &g->kv[i]);
        if (c.st) return c.st;
    }
    ak_str dup;
    if (find_dup(g->kv, g->n_kv, sizeof *g->kv, offsetof(ak_gguf_kv, key), &dup, err) ||
        (dup.ptr && ak_fail(err, AK_ERR_FORMAT, "gguf: duplicate metadata key '%.*s'", (int)(dup.len > 200 ? 200 : dup.len), dup.ptr)))
        return AK_ERR_FORMAT;
    const ak_gguf_kv *al = ak_gguf_find(g, "general.alignment");
    if (al) {
        /* the spec: a multiple of 8; below that, F32 tensors (norm vectors the kernels read
         * as floats) could start at unaligned addresses */
        if (al->type != AK_GGUF_U32 || al->v.u < 8 || (al->v.u & (al->v.u - 1)))
            return ak_fail(err, AK_ERR_FORMAT, "gguf: general.alignment must be a power-of-two u32 of at least 8");
        g->alignment = al->v.u;
    }

    for (uint64_t i = 0; i < g->n_tensors; i++) {
        ak_gguf_tensor *t = &g->tensors[i];
        t->name = rd_str(&c, "tensor name");
        uint64_t nd = rd_u(&c, 4, "tensor dims");
        if (c.st) return c.st;
        if (nd < 1 || nd > 4)
            return ak_fail(err, AK_ERR_FORMAT, "gguf: tensor '%.*s' has %llu dimensions (1..4 allowed)",
                           (int)(t->name.len > 200 ? 200 : t->name.len), t->name.ptr, (unsigned long long)nd);
        t->n_dims = (int)nd;
        uint64_t count = 1;
        for (int d = 0; d < 4; d++) t->ne[d] = 1;
        for (uint64_t d = 0; d < nd; d++) {
            uint64_t ne = rd_u(&c, 8, "tensor shape");
            if (c.st) return c.st;
            if (ne == 0 || ne > ((uint64_t)1 << 40) || count > (((uint64_t)1 << 50) / ne))
                return ak_fail(err, AK_ERR_FORMAT, "gguf: tensor '%.*s' has an invalid shape",
                               (int)(t->name.len > 200 ? 200 : t->name.len), t->name.ptr);
            t->ne[d] = (int64_t)ne;
            count *= ne;
        }
        t->ggml_type = (uint32_t)rd_u(&c, 4, "tensor type");
        t->offset = rd_u(&c, 8, "tensor offset");
        if (c.st) return c.st;
        int dt = ak_dtype_from_ggml(t->ggml_type);
        if (dt < 0)
            return ak_fail(err, AK_ERR_UNSUPPORTED, "gguf: tensor '%.*s' has unknown or unsupported type id %u",
                           (int)(t->name.len > 200 ? 200 : t->name.len), t->name.ptr, t->ggml_type);
        t->dtype = (ak_dtype)dt;
        const ak_dtype_traits *tr = &ak_dtype_info[dt];
        if (t->ne[0] % tr->block)
            return ak_fail(err, AK_ERR_FORMAT, "gguf: tensor '%.*s' row of %lld is not a multiple of the %s block (%d)",
                           (int)(t->name.len > 200 ? 200 : t->name.len), t->name.ptr, (long long)t->ne[0], tr->name, tr->block);
        t->nbytes = count / (uint64_t)tr->block * (uint64_t)tr->block_bytes;
        if (t->offset % g->alignment)
            return ak_fail(err, AK_ERR_FORMAT, "gguf: tensor '%.*s' offset is not aligned to %llu",
                           (int)(t->name.len > 200 ? 200 : t->name.len), t->name.ptr, (unsigned long long)g->alignment);
    }
    if (find_dup(g->tensors, g->n_tensors, sizeof *g->tensors, offsetof(ak_gguf_tensor, name), &dup, err) ||
        (dup.ptr && ak_fail(err, AK_ERR_FORMAT, "gguf: duplicate tensor name '%.*s'", (int)(dup.len > 200 ? 200 : dup.len), dup.ptr)))
        return AK_ERR_FORMAT;
    uint64_t data = ((uint64_t)c.off + g->alignment - 1) / g->alignment * g->alignment;
    if (!g->n_tensors && data > g->size) data = g->size;   /* no data section: never point past the end */
    if (g->n_tensors && data > g->size)
        return ak_fail(err, AK_ERR_FORMAT, "gguf: truncated file: tensor data would start at %llu, file has %zu bytes",
                       (unsigned long long)data, g->size);
    g->data_offset = data;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        ak_gguf_tensor *t = &g->tensors[i];
        uint64_t avail = g->size - data;
        if (t->offset > avail || t->nbytes > avail - t->offset)
            return ak_fail(err, AK_ERR_FORMAT, "gguf: truncated file: tensor '%.*s' (%llu bytes at %llu) runs past the end",
                           (int)(t->name.len > 200 ? 200 : t->name.len), t->name.ptr,
                           (unsigned long long)t->nbytes, (unsigned long long)(data + t->offset));
        t->data = g->base + data + t->offset;
    }
    return AK_OK;
}

ak_status ak_gguf_open_mem(const void *data, size_t size, ak_gguf **out, ak_err *err) {
    *out = NULL;
    ak_gguf *g = calloc(1, sizeof *g);
    if (!g) return ak_fail(err, AK_ERR_NOMEM, "gguf: out of memory");
    g->base = data;
    g->size = size;
    ak_status st = parse(g, err);
    if (st) { ak_gguf_close(g); return st; }
    *out = g;
    return AK_OK;
}

ak_status ak_gguf_open(const char *path, ak_gguf **out, ak_err *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return ak_fail(err, AK_ERR_IO, "cannot open '%s'", path);
    struct stat stt;
    if (fstat(fd, &stt) != 0 || !S_ISREG(stt.st_mode)) { close(fd); return ak_fail(err, AK_ERR_IO, "'%s' is not a regular file", path); }
    size_t size = (size_t)stt.st_size;
    if (size == 0) { close(fd); return ak_fail(err, AK_ERR_FORMAT, "gguf: '%s' is empty", path); }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return ak_fail(err, AK_ERR_IO, "cannot map '%s'", path);
    ak_status st = ak_gguf_open_mem(map, size, out, err);
    if (st) { munmap(map, size); return st; }
    (*out)->mapped = true;
    return AK_OK;
}

void ak_gguf_close(ak_gguf *g) {
    if (!g) return;
    if (g->kv)
        for (uint64_t i = 0; i < g->n_kv; i++) free(g->kv[i].arr_str);
    free(g->kv);
    free(g->tensors);
    if (g->mapped) munmap((void *)g->base, g->size);
    free(g);
}

const ak_gguf_kv *ak_gguf_find(const ak_gguf *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (ak_str_eq(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const ak_gguf_tensor *ak_gguf_tensor_find(const ak_gguf *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (ak_str_eq(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

static bool scalar_i64(ak_gguf_type t, uint64_t u, int64_t i, double f, int64_t *out) {
    switch (t) {
    case AK_GGUF_U8: case AK_GGUF_U16: case AK_GGUF_U32: case AK_GGUF_BOOL: *out = (int64_t)u; return true;
    case AK_GGUF_U64: if (u > INT64_MAX) return false; *out = (int64_t)u; return true;
    case AK_GGUF_I8: case AK_GGUF_I16: case AK_GGUF_I32: case AK_GGUF_I64: *out = i; return true;
    case AK_GGUF_F32: case AK_GGUF_F64:
        if (!(f >= -9e18 && f <= 9e18) || f != (double)(int64_t)f) return false;
        *out = (int64_t)f; return true;
    default: return false;
    }
}

bool ak_gguf_get_i64(const ak_gguf *g, const char *key, int64_t *out) {
    const ak_gguf_kv *kv = ak_gguf_find(g, key);
    return kv && scalar_i64(kv->type, kv->v.u, kv->v.i, kv->v.f, out);
}

bool ak_gguf_get_f64(const ak_gguf *g, const char *key, double *out) {
    const ak_gguf_kv *kv = ak_gguf_find(g, key);
    if (!kv) return false;
    if (kv->type == AK_GGUF_F32 || kv->type == AK_GGUF_F64) { *out = kv->v.f; return true; }
    int64_t i;
    if (!scalar_i64(kv->type, kv->v.u, kv->v.i, kv->v.f, &i)) return false;
    *out = (double)i;
    return true;
}

bool ak_gguf_get_bool(const ak_gguf *g, const char *key, bool *out) {
    const ak_gguf_kv *kv = ak_gguf_find(g, key);
    if (!kv || kv->type != AK_GGUF_BOOL) return false;
    *out = kv->v.u != 0;
    return true;
}

bool ak_gguf_get_str(const ak_gguf *g, const char *key, ak_str *out) {
    const ak_gguf_kv *kv = ak_gguf_find(g, key);
    if (!kv || kv->type != AK_GGUF_STRING) return false;
    *out = kv->v.s;
    return true;
}

static bool arr_elem(const ak_gguf_kv *kv, uint64_t i, ak_gguf_kv *tmp) {
    if (kv->type != AK_GGUF_ARRAY || i >= kv->arr_n || !kv->arr_data) return false;
    int sz = type_size[kv->arr_type];
    set_scalar(tmp, kv->arr_type, kv->arr_data + i * (uint64_t)sz);
    return true;
}

bool ak_gguf_arr_f64(const ak_gguf_kv *kv, uint64_t i, double *out) {
    ak_gguf_kv tmp = {0};
    if (!arr_elem(kv, i, &tmp)) return false;
    if (kv->arr_type == AK_GGUF_F32 || kv->arr_type == AK_GGUF_F64) { *out = tmp.v.f; return true; }
    int64_t v;
    if (!scalar_i64(kv->arr_type, tmp.v.u, tmp.v.i, tmp.v.f, &v)) return false;
    *out = (double)v;
    return true;
}

bool ak_gguf_arr_i64(const ak_gguf_kv *kv, uint64_t i, int64_t *out) {
    ak_gguf_kv tmp = {0};
    if (!arr_elem(kv, i, &tmp)) return false;
    return scalar_i64(kv->arr_type, tmp.v.u, tmp.v.i, tmp.v.f, out);
}
