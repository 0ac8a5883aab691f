/* Table builder: walks the architecture once and emits the per-token command list. */
#ifndef AK_BUILD_H
#define AK_BUILD_H
#include "backend/backend.h"
#include "core/table.h"
#include "model/model.h"

typedef struct {
    bool prefill;          /* GEMM + tiled attention over up to `rows` tokens; else one-token decode */
    int rows;              /* activation rows (prefill chunk) */
    int max_seq;           /* KV cache length */
    int ring;              /* rows each KV head of a sliding-window layer's K and V caches keeps, a ring
                              (ak_build_ring; ak_kv_row); 0: max_seq, as every other layer */
    ak_dtype kt, vt;       /* the K and V cache's element types: AK_F32, AK_F16, AK_Q8_0 or AK_Q4_0 */
    bool logits_all;       /* prefill: logits for every row, not only the last */
    bool pick_all;         /* with logits_all: a token chosen from every row (speculative verification) */
    bool as_decode;        /* prefill rows as decode steps: the decode attention a row at a time and GEMMs that
                              round each row as a GEMV (a backend with rows_as_decode): verification then
                              chooses exactly as decoding would */
    bool unfused;          /* emit the unfused variants (for testing the fused ones) */
    ak_backend *be;        /* decode: the backend whose fused commands (ak_backend.fuses) the table takes */
} ak_build_opts;

/* Whether the model's tables take several inputs in one call (an encoder with learned or
 * no positions: AK_ATTN_SEGMENTS), and where their segment table sits in AK_BUF_TOKENS
 * (after the ids: per row its segment's first and end key, int32). */
bool ak_build_segments(const ak_model *m);
size_t ak_build_seg_off(const ak_build_opts *o);
/* Sizes in bytes of every activation buffer for these options. */
void ak_build_buf_sizes(const ak_model *m, const ak_build_opts *o, size_t sizes[AK_BUF_COUNT]);
/* The ring a sliding-window layer's cache needs on a backend with kv_ring: its window,
 * plus the rows one call may write before its first row reads that window, rounded up
 * to AK_KV_RING_ALIGN; 0 (no ring) when the model has no window or that is no smaller
 * than max_seq. */
int ak_build_ring(const ak_model *m, int max_seq, int rows);
/* Rows each KV head of layer l's caches keeps (ring or max_seq), and the bytes of its K
 * and V caches together. */
int ak_build_kv_rows(const ak_model *m, const ak_build_opts *o, int l);
size_t ak_build_kv_bytes(const ak_model *m, const ak_build_opts *o, int l);
ak_status ak_table_build(const ak_model *m, const ak_build_opts *o, ak_table *t, ak_err *err);
/* The decode fusions be claims (ak_backend.fuses), done to a one-row table in place: what
 * ak_table_build does to a decode table (tests apply it to tables of their own). */
void ak_table_fuse(ak_table *t, ak_backend *be);

#endif
