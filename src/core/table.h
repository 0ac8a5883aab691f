/* The dispatch table: the whole per-token sequence of kernel launches as plain data,
 * built once and replayed. Labels are kept apart (cold) for profiling. */
#ifndef AK_TABLE_H
#define AK_TABLE_H
#include <stddef.h>
#include <stdint.h>
#include "akunu.h"
#include "core/kernels.h"

/* Buffers a table binds; the session allocates each through the backend. */
typedef enum {
    AK_BUF_WEIGHTS = 0, AK_BUF_AUX, AK_BUF_TOKENS, AK_BUF_KV,
    AK_BUF_X, AK_BUF_XN, AK_BUF_QKV, AK_BUF_ATT, AK_BUF_T, AK_BUF_GU, AK_BUF_ACT, AK_BUF_LOGITS,
    AK_BUF_SAMPLE,   /* the sample command's settings, grammar mask and CPU scratch (core/sample.h) */
    AK_BUF_X2,       /* the residual's other home: a GEMV that folds a post-norm's add in (AK_FUSE_POST_IN)
                        writes the new residual there while its blocks may still read the old */
    AK_BUF_COUNT
} ak_buf_id;

typedef struct { uint32_t buf; uint32_t pad; uint64_t off; } ak_bind;

/* What replay patches, given the step's position pos and token count n. */
enum {
    AK_PATCH_POS = 1,     /* params int32 at off_pos    = pos */
    AK_PATCH_KVLEN = 2,   /* params int32 at off_kv     = pos + n */
    AK_PATCH_N = 4,       /* params int32 at off_n      = n */
    AK_PATCH_TOK_IN = 8,  /* bind[bind_tok].off        += 4 * pos      (embedding reads tokens[pos..]) */
    AK_PATCH_TOK_OUT = 16,/* bind[bind_tok].off        += 4 * (pos + n) (argmax writes tokens[pos+n]) */
};

/* Binding slots a command has: a kernel's own use 0..7 (ak_cuda_args.b, ak_cpu_cmd.b);
 * fusions bind what they add beyond those (AK_FUSE_POST_IN). */
#define AK_CMD_BINDS 10

typedef struct {
    uint16_t kernel;
    uint8_t nbind;
    uint8_t patch;
    uint8_t off_pos, off_kv, off_n, bind_tok;
    uint32_t work;            /* units of parallel work (rows, heads, ...) */
    uint32_t fuse;            /* AK_FUSE_* (kernels.h): neighbours' work done here */
    ak_bind bind[AK_CMD_BINDS];
    _Alignas(8) uint8_t params[64];
    ak_p_fused fp;            /* what the fusions take */
} ak_cmd;

typedef struct {
    ak_cmd *cmds;
    char (*labels)[32];
    int n, cap;
    int max_rows;             /* rows the activations are sized for */
} ak_table;

void ak_table_free(ak_table *t);
/* Appends a command; returns NULL (and sets *st) when out of memory. */
ak_cmd *ak_table_push(ak_table *t, ak_kernel k, const void *params, size_t psize, const char *label);
void ak_cmd_bind(ak_cmd *c, int slot, ak_buf_id buf, size_t off);
/* Command i as it runs, for people: its label, kernel and fusions, e.g.
 * "layer.0.qkv  gemv (norm in)". */
void ak_cmd_describe(const ak_table *t, int i, char *buf, size_t size);
/* The patched copy of a command for step (pos, n). */
void ak_cmd_patch(ak_cmd *dst, const ak_cmd *src, int pos, int n);

#endif
