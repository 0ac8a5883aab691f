/* safetensors: header length, JSON header and tensor bounds checked against the file
 * before any tensor byte is handed out (format: github.com/huggingface/safetensors,
 * "Format" section): offsets are relative to the data section, end >= begin, the byte
 * count matches dtype x shape, and no two tensors overlap. */
#include "format/safetensors.h"
#include "core/err.h"
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct { const char *name; size_t size; } st_types[AK_ST_DTYPE_COUNT] = {
    [AK_ST_F32] = {"F32", 4}, [AK_ST_F16] = {"F16", 2}, [AK_ST_BF16] = {"BF16", 2}, [AK_ST_U32] = {"U32", 4},
    [AK_ST_I32] = {"I32", 4}, [AK_ST_I64] = {"I64", 8}, [AK_ST_F64] = {"F64", 8}, [AK_ST_U64] = {"U64", 8},
    [AK_ST_I16] = {"I16", 2}, [AK_ST_U16] = {"U16", 2}, [AK_ST_I8] = {"I8", 1}, [AK_ST_U8] = {"U8", 1},
    [AK_ST_BOOL] = {"BOOL", 1}, [AK_ST_F8_E4M3] = {"F8_E4M3", 1}, [AK_ST_F8_E5M2] = {"F8_E5M2", 1},
};

const char *ak_st_dtype_name(ak_st_dtype t) { return (unsigned)t < AK_ST_DTYPE_COUNT ? st_types[t].name : "?"; }
size_t ak_st_dtype_size(ak_st_dtype t) { return (unsigned)t < AK_ST_DTYPE_COUNT ? st_types[t].size : 0; }

static int by_offset(const void *a, const void *b) {
    const ak_st_tensor *x = *(const ak_st_tensor *const *)a, *y = *(const ak_st_tensor *const *)b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* One header entry: {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}. */
static ak_status parse_entry(ak_st *s, const ak_json *e, ak_st_tensor *t, ak_err *err) {
    t->name = e->key;
    if (e->type != AK_JSON_OBJ) return ak_fail(err, AK_ERR_FORMAT, "safetensors: entry '%.200s' is not an object", t->name);
    if (strlen(e->key) != e->key_len || e->key_len == 0)
        return ak_fail(err, AK_ERR_FORMAT, "safetensors: a tensor name is empty or holds a NUL");
    const ak_json *dt = ak_json_get(e, "dtype"), *sh = ak_json_get(e, "shape"), *off = ak_json_get(e, "data_offsets");
    if (!dt || dt->type != AK_JSON_STR || !sh || sh->type != AK_JSON_ARR || !off || off->type != AK_JSON_ARR)
        return ak_fail(err, AK_ERR_FORMAT, "safetensors: tensor '%.200s' needs dtype, shape and data_offsets", t->name);
    int ti = 0;
    while (ti < AK_ST_DTYPE_COUNT && !ak_json_str_is(dt, st_types[ti].name)) ti++;
    if (ti == AK_ST_DTYPE_COUNT)
        return ak_fail(err, AK_ERR_UNSUPPORTED, "safetensors: tensor '%.200s' has unknown dtype '%.32s'", t->name, dt->s);
    t->dtype = (ak_st_dtype)ti;
    if (sh->len > AK_ST_MAX_DIMS)
        return ak_fail(err, AK_ERR_UNSUPPORTED, "safetensors: tensor '%.200s' has %zu dimensions (at most %d)", t->name, sh->len, AK_ST_MAX_DIMS);
    t->n_dims = (int)sh->len;
    uint64_t n = 1;
    int k = 0;
    for (const ak_json *d = sh->child; d; d = d->next, k++) {
        int64_t v;
        if (!ak_json_int(d, &v) || v < 0)
            return ak_fail(err, AK_ERR_FORMAT, "safetensors: tensor '%.200s' has a bad dimension", t->name);
        t->shape[k] = v;
        if (v && n > UINT64_MAX / (uint64_t)v) return ak_fail(err, AK_ERR_FORMAT, "safetensors: tensor '%.200s' is too large", t->name);
        n *= (uint64_t)v;
    }
    t->n_elems = n;
    size_t es = st_types[ti].size;
    if (n > UINT64_MAX / es) return ak_fail(err, AK_ERR_FORMAT, "safetensors: tensor '%.200s' is too large", t->name);
    t->nbytes = n * es;
    int64_t b, en;
    if (off->len != 2 || !ak_json_int(off->child, &b) || !ak_json_int(off->child->next, &en) || b < 0 || en < b)
        return ak_fail(err, AK_ERR_FORMAT, "safetensors: tensor '%.200s' has bad data_offsets", t->name);
    uint64_t data_size = s->size - s->data_offset;
    if ((uint64_t)en > data_size)
        return ak_fail(err, AK_ERR_FORMAT, "safetensors: tensor '%.200s' ends at %lld, past the data section (%llu bytes)",
                       t->name, (long long)en, (unsigned long long)data_size);
    if ((uint64_t)(en - b) != t->nbytes)
        return ak_fail(err, AK_ERR_FORMAT, "safetensors: tensor '%.200s' holds %lld bytes, its dtype and shape need %llu",
                       t->name, (long long)(en - b), (unsigned long long)t->nbytes);
    t->offset = (uint64_t)b;
    t->data = s->base + s->data_offset + t->offset;
    return AK_OK;
}

static ak_status parse_header(ak_st *s, ak_err *err) {
    if (s->size < 8) return ak_fail(err, AK_ERR_FORMAT, "safetensors: file of %zu bytes has no header", s->size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | s->base[i];
    if (n < 2 || n > AK_ST_MAX_HEADER || n > s->size - 8)
        return ak_fail(err, AK_ERR_FORMAT, "safetensors: header length %llu is out of range (file %zu bytes)", (unsigned long long)n, s->size);
    s->data_offset = 8 + n;
    const char *h = (const char *)s->base + 8;
    if (h[0] != '{') return ak_fail(err, AK_ERR_FORMAT, "safetensors: header does not start with '{'");
    ak_status st = ak_json_parse(h, (size_t)n, &s->doc, err);
    if (st) return st;
    const ak_json *root = ak_json_root(s->doc);
    if (root->type != AK_JSON_OBJ) return ak_fail(err, AK_ERR_FORMAT, "safetensors: header is not a JSON object");
    s->tensors = calloc(root->len ? root->len : 1, sizeof *s->tensors);
    if (!s->tensors) return ak_fail(err, AK_ERR_NOMEM, "safetensors: out of memory");
    for (const ak_json *e = root->child; e; e = e->next) {
        if (e->key_len == 12 && !memcmp(e->key, "__metadata__", 12)) {
            if (e->type != AK_JSON_OBJ) return ak_fail(err, AK_ERR_FORMAT, "safetensors: __metadata__ is not an object");
            for (const ak_json *m = e->child; m; m = m->next)
                if (m->type != AK_JSON_STR) return ak_fail(err, AK_ERR_FORMAT, "safetensors: __metadata__ values must be strings");
            s->metadata = e;
            continue;
        }
        if ((st = parse_entry(s, e, &s->tensors[s->n_tensors], err))) return st;
        s->n_tensors++;
    }
    /* No two tensors may share bytes. */
    const ak_st_tensor **v = malloc((size_t)(s->n_tensors ? s->n_tensors : 1) * sizeof *v);
    if (!v) return ak_fail(err, AK_ERR_NOMEM, "safetensors: out of memory");
    int m = 0;
    for (int i = 0; i < s->n_tensors; i++) if (s->tensors[i].nbytes) v[m++] = &s->tensors[i];
    qsort(v, (size_t)m, sizeof *v, by_offset);
    for (int i = 1; i < m && !st; i++)
        if (v[i]->offset < v[i - 1]->offset + v[i - 1]->nbytes)
            st = ak_fail(err, AK_ERR_FORMAT, "safetensors: tensors '%.200s' and '%.200s' overlap", v[i - 1]->name, v[i]->name);
    free(v);
    return st;
}

ak_status ak_st_open_mem(const void *data, size_t size, ak_st **out, ak_err *err) {
    *out = NULL;
    ak_st *s = calloc(1, sizeof *s);
    if (!s) return ak_fail(err, AK_ERR_NOMEM, "safetensors: out of memory");
    s->base = data;
    s->size = size;
    ak_status st = parse_header(s, err);
    if (st) { ak_st_close(s); return st; }
    *out = s;
    return AK_OK;
}

ak_status ak_st_open(const char *path, ak_st **out, ak_err *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return ak_fail(err, AK_ERR_IO, "cannot open '%s'", path);
    struct stat stt;
    if (fstat(fd, &stt) != 0 || !S_ISREG(stt.st_mode)) { close(fd); return ak_fail(err, AK_ERR_IO, "'%s' is not a regular file", path); }
    size_t size = (size_t)stt.st_size;
    if (size < 8) { close(fd); return ak_fail(err, AK_ERR_FORMAT, "safetensors: '%s' is too short (%zu bytes)", path, size); }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return ak_fail(err, AK_ERR_IO, "cannot map '%s'", path);
    ak_status st = ak_st_open_mem(map, size, out, err);
    if (st) {
        munmap(map, size);
        size_t l = err ? strlen(err->msg) : 0;
        if (err && l + 4 < sizeof err->msg) snprintf(err->msg + l, sizeof err->msg - l, " (%s)", path);
        return st;
    }
    (*out)->mapped = true;
    return AK_OK;
}

void ak_st_close(ak_st *s) {
    if (!s) return;
    if (s->mapped) munmap((void *)s->base, s->size);
    ak_json_free(s->doc);
    free(s->tensors);
    free(s);
}

const ak_st_tensor *ak_st_find(const ak_st *s, const char *name) {
    for (int i = 0; i < s->n_tensors; i++)
        if (!strcmp(s->tensors[i].name, name)) return &s->tensors[i];
    return NULL;
}

/* ---- directories ---- */

ak_status ak_read_small_file(const char *path, size_t max_bytes, char **out, size_t *size, ak_err *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return ak_fail(err, AK_ERR_IO, "cannot open '%s'", path);
    char *buf = NULL;
    size_t n = 0, cap = 0;
    ak_status st = AK_OK;
    for (;;) {
        if (n == cap) {
            if (cap > max_bytes) { st = ak_fail(err, AK_ERR_FORMAT, "'%s' is larger than %zu bytes", path, max_bytes); break; }
            cap = cap ? 2 * cap : 4096;
            char *nb = realloc(buf, cap + 1);
            if (!nb) { st = ak_fail(err, AK_ERR_NOMEM, "out of memory"); break; }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) {
            if (ferror(f)) st = ak_fail(err, AK_ERR_IO, "cannot read '%s'", path);
            break;
        }
    }
    fclose(f);
    if (!st && n > max_bytes) st = ak_fail(err, AK_ERR_FORMAT, "'%s' is larger than %zu bytes", path, max_bytes);
    if (st) { free(buf); return st; }
    buf[n] = 0;
    *out = buf;
    *size = n;
    return AK_OK;
}

/* A shard name from an index or a listing: a plain file name in the directory. */
static bool shard_name_ok(const char *n, size_t len) {
    return len > 0 && len < 256 && strlen(n) == len && !strchr(n, '/') && strcmp(n, ".") && strcmp(n, "..");
}

static int name_cmp(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int entry_cmp(const void *a, const void *b) {
    return strcmp(((const ak_st_entry *)a)->name, ((const ak_st_entry *)b)->name);
}

static bool ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

/* Distinct shard names: from the index's weight_map, else the directory listing. */
static ak_status shard_names(const char *dir, const ak_json *wmap, char ***names, int *count, ak_err *err) {
    int n = 0, cap = 16;
    char **v = malloc((size_t)cap * sizeof *v);
    ak_status st = AK_OK;
    if (!v) return ak_fail(err, AK_ERR_NOMEM, "out of memory");
    DIR *dd = NULL;
    if (!wmap && !(dd = opendir(dir))) { free(v); return ak_fail(err, AK_ERR_IO, "cannot list '%s'", dir); }
    const ak_json *e = wmap ? wmap->child : NULL;
    for (;;) {
        const char *name;
        size_t len;
        if (wmap) {
            if (!e) break;
            if (e->type != AK_JSON_STR || !shard_name_ok(e->s, e->len)) {
                st = ak_fail(err, AK_ERR_FORMAT, "safetensors index: weight_map entry '%.200s' names a bad file", e->key);
                break;
            }
            name = e->s;
            len = e->len;
            e = e->next;
        } else {
            struct dirent *de = readdir(dd);
            if (!de) break;
            name = de->d_name;
            len = strlen(name);
            if (name[0] == '.' || !ends_with(name, ".safetensors")) continue;
        }
        bool seen = false;
        for (int i = 0; i < n && !seen; i++) seen = !strcmp(v[i], name);
        if (seen) continue;
        if (n == 4096) { st = ak_fail(err, AK_ERR_UNSUPPORTED, "safetensors: more than 4096 shards"); break; }
        if (n == cap) {
            char **nv = realloc(v, (size_t)(cap *= 2) * sizeof *nv);
            if (!nv) { st = ak_fail(err, AK_ERR_NOMEM, "out of memory"); break; }
            v = nv;
        }
        if (!(v[n] = malloc(len + 1))) { st = ak_fail(err, AK_ERR_NOMEM, "out of memory"); break; }
        memcpy(v[n++], name, len + 1);
    }
    if (dd) closedir(dd);
    if (!st && n == 0) st = ak_fail(err, AK_ERR_FORMAT, "no .safetensors files in '%s'", dir);
    if (st) {
        for (int i = 0; i < n; i++) free(v[i]);
        free(v);
        return st;
    }
    qsort(v, (size_t)n, sizeof *v, name_cmp);
    *names = v;
    *count = n;
    return AK_OK;
}

static const ak_st_entry *dir_entry(const ak_st_dir *d, const char *name) {
    ak_st_entry key = {name, NULL, 0};
    return d->index ? bsearch(&key, d->index, (size_t)d->n_entries, sizeof *d->index, entry_cmp) : NULL;
}

static ak_status build_index(ak_st_dir *d, ak_err *err) {
    size_t n = 0;
    for (int i = 0; i < d->n_files; i++) n += (size_t)d->files[i]->n_tensors;
    d->index = malloc((n ? n : 1) * sizeof *d->index);
    if (!d->index) return ak_fail(err, AK_ERR_NOMEM, "out of memory");
    for (int i = 0; i < d->n_files; i++)
        for (int j = 0; j < d->files[i]->n_tensors; j++)
            d->index[d->n_entries++] = (ak_st_entry){d->files[i]->tensors[j].name, &d->files[i]->tensors[j], i};
    qsort(d->index, n, sizeof *d->index, entry_cmp);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(d->index[i - 1].name, d->index[i].name))
            return ak_fail(err, AK_ERR_FORMAT, "safetensors: tensor '%.200s' appears in two shards", d->index[i].name);
    return AK_OK;
}

ak_status ak_st_dir_open(const char *dir, ak_st_dir **out, ak_err *err) {
    *out = NULL;
    char path[4096];
    ak_st_dir *d = calloc(1, sizeof *d);
    if (!d) return ak_fail(err, AK_ERR_NOMEM, "out of memory");
    ak_json_doc *idx = NULL;
    char **names = NULL, *text = NULL;
    int n_names = 0;
    ak_status st = AK_OK;
    const ak_json *wmap = NULL;
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (access(path, F_OK) == 0) {
        size_t len;
        if (!(st = ak_read_small_file(path, (size_t)64 << 20, &text, &len, err)) && (st = ak_json_parse(text, len, &idx, err)) && err) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            snprintf(err->msg, sizeof err->msg, "safetensors index: %.400s", msg);
        }
        if (!st) {
            wmap = ak_json_get(ak_json_root(idx), "weight_map");
            if (!wmap || wmap->type != AK_JSON_OBJ || wmap->len == 0)
                st = ak_fail(err, AK_ERR_FORMAT, "safetensors index: weight_map is missing or empty");
        }
    }
    if (!st) st = shard_names(dir, wmap, &names, &n_names, err);
    if (!st && !(d->files = calloc((size_t)n_names, sizeof *d->files))) st = ak_fail(err, AK_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n_names && !st; i++) {
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= sizeof path) {
            st = ak_fail(err, AK_ERR_ARG, "path too long");
            break;
        }
        st = ak_st_open(path, &d->files[i], err);
        if (!st) { d->n_files++; d->bytes += d->files[i]->size; }
    }
    if (!st) st = build_index(d, err);
    /* The index assigns each tensor a shard: it must be there. */
    for (const ak_json *e = wmap ? wmap->child : NULL; e && !st; e = e->next) {
        const ak_st_entry *t = dir_entry(d, e->key);
        int fi = 0;
        while (fi < n_names && strcmp(names[fi], e->s)) fi++;
        if (!t || t->file != fi)
            st = ak_fail(err, AK_ERR_FORMAT, "safetensors index: tensor '%.200s' is not in %.200s", e->key, e->s);
    }
    for (int i = 0; i < n_names; i++) free(names[i]);
    free(names);
    ak_json_free(idx);
    free(text);
    if (st) { ak_st_dir_close(d); return st; }
    *out = d;
    return AK_OK;
}

void ak_st_dir_close(ak_st_dir *d) {
    if (!d) return;
    for (int i = 0; i < d->n_files; i++) ak_st_close(d->files[i]);
    free(d->files);
    free(d->index);
    free(d);
}

const ak_st_tensor *ak_st_dir_find(const ak_st_dir *d, const char *name) {
    const ak_st_entry *e = dir_entry(d, name);
    return e ? e->t : NULL;
}
