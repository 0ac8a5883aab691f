/* The backend interface: buffers, table encoding and replay. Host code sees only this;
 * a backend's kernels and private headers stay behind it. */
#ifndef AK_BACKEND_H
#define AK_BACKEND_H
#include "akunu.h"
#include "core/table.h"

typedef struct ak_backend ak_backend;

/* One replay: steps tokens from position pos (decode), or one step of n tokens (prefill).
 * Decode stops early after writing a token listed in stop. */
typedef struct {
    int pos, n, steps;
    const int32_t *stop;
    int n_stop;
    int steps_done;        /* out */
} ak_run;

struct ak_backend {
    const char *name;
    int n_threads;
    /* Weights: the CPU wraps the host bytes (no copy); a GPU uploads them once. */
    ak_status (*buf_import)(ak_backend *b, const void *host, size_t size, void **out, ak_err *err);
    ak_status (*buf_alloc)(ak_backend *b, size_t size, void **out, ak_err *err);
    void (*buf_free)(ak_backend *b, void *buf);
    ak_status (*buf_write)(ak_backend *b, void *buf, size_t off, const void *src, size_t n, ak_err *err);
    ak_status (*buf_read)(ak_backend *b, void *buf, size_t off, void *dst, size_t n, ak_err *err);
    /* Resolves kernels and buffers once; the result is replayed by run. */
    ak_status (*encode)(ak_backend *b, const ak_table *t, void *const bufs[AK_BUF_COUNT], void **out, ak_err *err);
    void (*encoded_free)(ak_backend *b, void *enc);
    ak_status (*run)(ak_backend *b, void *enc, ak_run *r, ak_err *err);
    ak_status (*read_bandwidth)(ak_backend *b, double *gbps, ak_err *err);
    /* Memory free for new buffers (host RAM the kernel can give without swapping, or
     * free GPU memory), so a session too large fails with its size instead of the OOM killer. */
    uint64_t (*mem_available)(ak_backend *b);
    bool weights_copied;   /* buf_import copies the weights (a GPU): they count against mem_available */
    bool kv_blocks;        /* its rope_kv and attention take each of K and V as F32, F16, Q8_0 or Q4_0 (a
                              combination its kernels lack, encode refuses by name); otherwise F16 or
                              F32, K and V alike */
    bool rows_as_decode;   /* it runs n rows as n decode steps would round them: its decode attention takes
                              several rows, and its GEMMs honour ak_p_mm.rowwise */
    bool kv_ring;          /* its rope_kv and attention honour ak_p_rope_kv.cap and ak_p_attn.cap (ak_kv_row): a
                              sliding-window layer's cache is then a ring of its window, not the context */
    /* Whether it runs command c with the fusions c->fuse asks for (core/kernels.h's
     * AK_FUSE_*): the table builder asks so for each fused command it would emit in a
     * decode table, and emits the commands apart where not. NULL: it claims none. */
    bool (*fuses)(ak_backend *b, const ak_cmd *c);
    bool pack_inputs;      /* a call costs it more to launch than its rows to run (a GPU): an encoder's inputs
                              go into one call, each padded to the attention's key tile (AK_ATTN_SEGMENTS) */
    void (*destroy)(ak_backend *b);
};

ak_status ak_backend_cpu_create(int n_threads, ak_backend **out, ak_err *err);
/* Defined by the CUDA backend when built (AKUNU_CUDA), else by backend/stub.c: AK_ERR_UNSUPPORTED. */
ak_status ak_backend_cuda_create(ak_backend **out, ak_err *err);
bool ak_backend_cuda_present(void);
/* The debug knobs of ak_set_debug (CPU limits now, CUDA flags at the next backend). */
void ak_backend_set_debug(const ak_debug *d);
void ak_cuda_set_debug(const ak_debug *d);   /* the CUDA backend's part (stub.c without it) */

#endif
