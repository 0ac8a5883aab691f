/* safetensors reader: one file (8-byte little-endian header length, a JSON header of
 * name -> {dtype, shape, data_offsets} plus optional __metadata__, then the data) mapped
 * and checked, and a directory of shards (model.safetensors.index.json, or every
 * *.safetensors file) with one name lookup across them. */
#ifndef AK_SAFETENSORS_H
#define AK_SAFETENSORS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "akunu.h"
#include "format/json.h"

#define AK_ST_MAX_DIMS 8
#define AK_ST_MAX_HEADER ((uint64_t)100 << 20)

/* Every dtype the format names. Those the engine computes with: F32, F16, BF16 (and
 * U32 for MLX packed weights, I32/I64 for integer side tables); the others parse (their
 * sizes are known, so bounds are checked) and a loader that needs one says so. */
typedef enum {
    AK_ST_F32 = 0, AK_ST_F16, AK_ST_BF16, AK_ST_U32, AK_ST_I32, AK_ST_I64,
    AK_ST_F64, AK_ST_U64, AK_ST_I16, AK_ST_U16, AK_ST_I8, AK_ST_U8, AK_ST_BOOL,
    AK_ST_F8_E4M3, AK_ST_F8_E5M2, AK_ST_DTYPE_COUNT
} ak_st_dtype;

typedef struct {
    const char *name;      /* NUL-terminated, no embedded NUL */
    ak_st_dtype dtype;
    int n_dims;            /* 0: a scalar */
    int64_t shape[AK_ST_MAX_DIMS]; /* row-major: shape[n_dims-1] is contiguous */
    uint64_t n_elems;
    uint64_t offset;       /* from the start of the data section */
    uint64_t nbytes;
    const uint8_t *data;   /* into the mapping; no alignment promised */
} ak_st_tensor;

typedef struct {
    const uint8_t *base;
    size_t size;
    bool mapped;
    uint64_t data_offset;  /* 8 + header length */
    int n_tensors;
    ak_st_tensor *tensors; /* in header order */
    const ak_json *metadata; /* __metadata__ (an object of strings) or NULL */
    ak_json_doc *doc;
} ak_st;

const char *ak_st_dtype_name(ak_st_dtype t);
size_t ak_st_dtype_size(ak_st_dtype t);

ak_status ak_st_open(const char *path, ak_st **out, ak_err *err);
/* Parses a buffer the caller keeps alive for the life of the result. */
ak_status ak_st_open_mem(const void *data, size_t size, ak_st **out, ak_err *err);
void ak_st_close(ak_st *s);
const ak_st_tensor *ak_st_find(const ak_st *s, const char *name);

typedef struct { const char *name; const ak_st_tensor *t; int file; } ak_st_entry;

typedef struct {
    int n_files;
    ak_st **files;
    int n_entries;
    ak_st_entry *index;    /* every tensor of every shard, sorted by name */
    uint64_t bytes;        /* sum of the files' sizes */
} ak_st_dir;

/* Opens the shards of a directory: those model.safetensors.index.json's weight_map
 * names (each must hold the tensors the map assigns it), else every *.safetensors file.
 * A tensor name found in two shards is an error. */
ak_status ak_st_dir_open(const char *dir, ak_st_dir **out, ak_err *err);
void ak_st_dir_close(ak_st_dir *d);
const ak_st_tensor *ak_st_dir_find(const ak_st_dir *d, const char *name);

/* Whole small file into memory (NUL-terminated; *size excludes the NUL), at most
 * max_bytes. For config.json and index files. */
ak_status ak_read_small_file(const char *path, size_t max_bytes, char **out, size_t *size, ak_err *err);

#endif
