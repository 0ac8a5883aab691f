/* GGUF v2/v3 reader: maps the file, parses metadata and the tensor table, and checks
 * every count, length, offset and size against the mapped bytes before use. */
#ifndef AK_GGUF_H
#define AK_GGUF_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "akunu.h"
#include "core/dtype.h"

typedef enum {
    AK_GGUF_U8 = 0, AK_GGUF_I8, AK_GGUF_U16, AK_GGUF_I16, AK_GGUF_U32, AK_GGUF_I32,
    AK_GGUF_F32, AK_GGUF_BOOL, AK_GGUF_STRING, AK_GGUF_ARRAY, AK_GGUF_U64, AK_GGUF_I64,
    AK_GGUF_F64, AK_GGUF_TYPE_COUNT
} ak_gguf_type;

/* A string inside the mapping: not NUL-terminated. */
typedef struct { const char *ptr; uint64_t len; } ak_str;

typedef struct {
    ak_str key;
    ak_gguf_type type;
    union { uint64_t u; int64_t i; double f; ak_str s; } v; /* scalars (bool in u) */
    /* arrays */
    ak_gguf_type arr_type;
    uint64_t arr_n;
    const uint8_t *arr_data; /* first element (numeric arrays) */
    ak_str *arr_str;         /* string arrays: one entry per element, built at open */
} ak_gguf_kv;

typedef struct {
    ak_str name;
    uint32_t ggml_type;
    ak_dtype dtype;
    int n_dims;
    int64_t ne[4];         /* ne[0] is the contiguous dimension */
    uint64_t offset;       /* relative to the data section */
    uint64_t nbytes;
    const void *data;      /* into the mapping */
} ak_gguf_tensor;

typedef struct {
    const uint8_t *base;
    size_t size;
    bool mapped;           /* unmap on close */
    uint32_t version;
    uint64_t n_kv, n_tensors;
    ak_gguf_kv *kv;
    ak_gguf_tensor *tensors;
    uint64_t alignment;
    uint64_t data_offset;
} ak_gguf;

ak_status ak_gguf_open(const char *path, ak_gguf **out, ak_err *err);
/* Parses a buffer the caller keeps alive for the life of the result. */
ak_status ak_gguf_open_mem(const void *data, size_t size, ak_gguf **out, ak_err *err);
void ak_gguf_close(ak_gguf *g);

const ak_gguf_kv *ak_gguf_find(const ak_gguf *g, const char *key);
const ak_gguf_tensor *ak_gguf_tensor_find(const ak_gguf *g, const char *name);
bool ak_str_eq(ak_str s, const char *c);

/* Typed getters: return false if the key is missing; a present key of a
 * non-numeric type also returns false. Integers of any width convert. */
bool ak_gguf_get_i64(const ak_gguf *g, const char *key, int64_t *out);
bool ak_gguf_get_f64(const ak_gguf *g, const char *key, double *out);
bool ak_gguf_get_bool(const ak_gguf *g, const char *key, bool *out);
bool ak_gguf_get_str(const ak_gguf *g, const char *key, ak_str *out);
/* Element i of a numeric array as double / int64 (false if out of range or not numeric). */
bool ak_gguf_arr_f64(const ak_gguf_kv *kv, uint64_t i, double *out);
bool ak_gguf_arr_i64(const ak_gguf_kv *kv, uint64_t i, int64_t *out);

const char *ak_gguf_type_name(ak_gguf_type t);

#endif
