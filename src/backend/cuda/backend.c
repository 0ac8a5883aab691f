/* The CUDA backend: weights uploaded once (Q4_0/Q8_0 rows repacked on the device at
 * encode), buffers in device memory, and tables encoded once into launch records.
 * A one-row table (decode) is captured into CUDA graphs: one step, and
 * AK_CUDA_UNROLL steps back to back. Per-step values live in a device step struct that
 * the kernels read and the sample command advances, so chain decode of N tokens is N/UNROLL
 * graph launches and one synchronisation. A prefill of n rows is launched directly the
 * first time; when the same n comes again (a batch of embeddings, full prompt chunks) it is
 * captured for that n and replayed (a few graphs a table): an encoder's 60 small commands
 * cost more to launch than to run. */
#include "backend/backend.h"
#include "backend/cuda/cuda_int.h"
#include "core/err.h"
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define AK_CUDA_UNROLL 8
#define AK_CUDA_PF_GRAPHS 4

typedef struct { uintptr_t addr; void *buf; bool packed; } region;

typedef struct {
    ak_backend base;
    ak_cuda_ctx ctx;
    ak_cuda_step *d_step, *h_step;
    region *packed;        /* weight matrices repacked in place */
    int n_packed, cap_packed;
    struct { const void *w; void *h, *buf; size_t bytes; } *f16;   /* quantized GEMM weights kept as f16 (keep_f16) */
    int n_f16, cap_f16;
    size_t f16_bytes;
    int stats;             /* ak_debug's cuda_stats: log host time per step */
    int profile;           /* cuda_profile: time every command (no graphs), logged at the end */
    char skip[256];        /* cuda_skip: decode labels left out (a command's marginal cost; wrong output) */
    int trace, trace_pos;  /* cuda_trace: log the timeline of one decode position */
    struct { char name[32]; double us; long calls; } prof[64];
    int n_prof;
} cuda_backend;

typedef struct {
    ak_cuda_cmd *cmds;
    char (*labels)[32];
    int n, max_rows;
    void *arena;
    cudaGraphExec_t g1, gu;
    struct { int n; cudaGraphExec_t g; } pg[AK_CUDA_PF_GRAPHS];   /* prefill graphs by row count */
    int pg_next, last_n;
    unsigned long long *trace;  /* cuda_trace: a row of 8 per command (6 used, see ak_trace_t) */
    int trace_pos;
} cuda_table;

static ak_status cfail(ak_err *err, cudaError_t e, const char *what) {
    return ak_fail(err, AK_ERR_BACKEND, "cuda: %s: %s", what, cudaGetErrorString(e));
}

bool ak_backend_cuda_present(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) { cudaGetLastError(); return false; }
    return n > 0;
}

static ak_status cu_alloc(ak_backend *b, size_t size, void **out, ak_err *err) {
    cuda_backend *cb = (cuda_backend *)b;
    cudaError_t e = cudaMalloc(out, size ? size : 1);
    if (e != cudaSuccess) { *out = NULL; cudaGetLastError(); return ak_fail(err, AK_ERR_NOMEM, "cuda: cannot allocate %zu bytes: %s", size, cudaGetErrorString(e)); }
    e = cudaMemsetAsync(*out, 0, size ? size : 1, cb->ctx.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(cb->ctx.stream);
    return e == cudaSuccess ? AK_OK : cfail(err, e, "memset");
}

static ak_status cu_import(ak_backend *b, const void *host, size_t size, void **out, ak_err *err) {
    cuda_backend *cb = (cuda_backend *)b;
    cudaError_t e = cudaMalloc(out, size ? size : 1);
    if (e != cudaSuccess) { *out = NULL; cudaGetLastError(); return ak_fail(err, AK_ERR_NOMEM, "cuda: cannot allocate %zu bytes for the weights: %s", size, cudaGetErrorString(e)); }
    if (size) e = cudaMemcpyAsync(*out, host, size, cudaMemcpyHostToDevice, cb->ctx.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(cb->ctx.stream);
    return e == cudaSuccess ? AK_OK : cfail(err, e, "weight upload");
}

static void cu_buf_free(ak_backend *b, void *buf) {
    cuda_backend *cb = (cuda_backend *)b;
    if (!buf) return;
    int k = 0;   /* forget the matrices that lived in this buffer, and their f16 copies */
    for (int i = 0; i < cb->n_packed; i++)
        if (cb->packed[i].buf != buf) cb->packed[k++] = cb->packed[i];
    cb->n_packed = k;
    k = 0;
    for (int i = 0; i < cb->n_f16; i++) {
        if (cb->f16[i].buf != buf) { cb->f16[k++] = cb->f16[i]; continue; }
        cb->f16_bytes -= cb->f16[i].bytes;
        cudaFree(cb->f16[i].h);
    }
    cb->n_f16 = k;
    cudaFree(buf);
}

static ak_status cu_write(ak_backend *b, void *buf, size_t off, const void *src, size_t n, ak_err *err) {
    cuda_backend *cb = (cuda_backend *)b;
    cudaError_t e = cudaMemcpyAsync((uint8_t *)buf + off, src, n, cudaMemcpyHostToDevice, cb->ctx.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(cb->ctx.stream);
    return e == cudaSuccess ? AK_OK : cfail(err, e, "write");
}

static ak_status cu_read(ak_backend *b, void *buf, size_t off, void *dst, size_t n, ak_err *err) {
    cuda_backend *cb = (cuda_backend *)b;
    cudaError_t e = cudaMemcpyAsync(dst, (const uint8_t *)buf + off, n, cudaMemcpyDeviceToHost, cb->ctx.stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(cb->ctx.stream);
    return e == cudaSuccess ? AK_OK : cfail(err, e, "read");
}

/* The layout a Q4_0/Q8_0 matrix has on the device, decided the first time a table binds
 * it: GEMV/GEMM weights are repacked in place (once, however many tables bind them); an
 * embedding table that no GEMV has claimed keeps the file's layout, and every later
 * reader then reads it as such. *dtype becomes the dtype id the kernels dispatch on. */
static ak_status claim(cuda_backend *cb, void *buf, void *w, int *dtype, int64_t K, int64_t N, bool gemv, ak_err *err) {
    if (!ak_cuda_is_repacked(*dtype)) return AK_OK;
    uintptr_t a = (uintptr_t)w;
    for (int i = 0; i < cb->n_packed; i++)
        if (cb->packed[i].addr == a) {
            if (!cb->packed[i].packed) *dtype = ak_cuda_file_layout(*dtype);
            return AK_OK;
        }
    if (cb->n_packed == cb->cap_packed) {
        int cap = cb->cap_packed ? 2 * cb->cap_packed : 64;
        region *r = realloc(cb->packed, (size_t)cap * sizeof *r);
        if (!r) return ak_fail(err, AK_ERR_NOMEM, "cuda: out of memory");
        cb->packed = r;
        cb->cap_packed = cap;
    }
    if (K % 32) return ak_fail(err, AK_ERR_FORMAT, "cuda: row of %lld values is not a whole number of blocks", (long long)K);
    if (gemv) {
        cudaError_t e = (cudaError_t)ak_cuda_repack(w, *dtype, K, N, cb->ctx.stream);
        if (e != cudaSuccess) return cfail(err, e, "repack");
    } else {
        *dtype = ak_cuda_file_layout(*dtype);
    }
    cb->packed[cb->n_packed++] = (region){a, buf, gemv};
    return AK_OK;
}

/* A small model's quantized GEMM weights as f16 once, not a tile at every prefill call
 * (a fifth of an encoder's packed call, all-MiniLM-L6 on an H200): where this table's
 * come to at most AK_CUDA_F16_KEEP bytes as f16 with what is kept already, each matrix
 * one tile (ak_cuda_gemm_tile_rows), so that its product runs as the tile's did: the same
 * values on the same plan, the same logits. */
#define AK_CUDA_F16_KEEP ((size_t)512 << 20)
static ak_status keep_f16(cuda_backend *cb, cuda_table *t, const ak_table *tab, void *const bufs[AK_BUF_COUNT], ak_err *err) {
    for (int pass = 0; pass < 2; pass++) {
        size_t need = 0;
        for (int i = 0; i < t->n; i++) {
            ak_cuda_cmd *c = &t->cmds[i];
            const ak_p_mm *p = (const ak_p_mm *)c->a.p;
            if (c->kernel != AK_K_GEMM || p->rowwise || p->last_only) continue;
            for (int s = 0; s < p->nseg; s++) {
                const int dt = p->dtype[s];
                if (dt == AK_F32 || dt == AK_F16 || dt == AK_BF16) continue;
                if (p->N[s] > ak_cuda_gemm_tile_rows(p->N[s], p->K)) return AK_OK;
                int k = 0;
                while (k < cb->n_f16 && cb->f16[k].w != c->a.b[s]) k++;
                const size_t bytes = (size_t)p->N[s] * (size_t)p->K * 2;
                if (pass == 0) { need += k < cb->n_f16 ? 0 : bytes; continue; }
                if (k == cb->n_f16) {
                    if (cb->n_f16 == cb->cap_f16) {
                        int cap = cb->cap_f16 ? 2 * cb->cap_f16 : 64;
                        void *r = realloc(cb->f16, (size_t)cap * sizeof *cb->f16);
                        if (!r) return ak_fail(err, AK_ERR_NOMEM, "cuda: out of memory");
                        cb->f16 = r;
                        cb->cap_f16 = cap;
                    }
                    void *h = NULL;
                    if (cudaMalloc(&h, bytes) != cudaSuccess) { cudaGetLastError(); return AK_OK; }   /* short of memory: a tile a call */
                    cudaError_t e = (cudaError_t)ak_cuda_gemm_dequant(c->a.b[s], dt, p->K, 0, p->N[s], h, cb->ctx.stream);
                    if (e != cudaSuccess) { cudaFree(h); return cfail(err, e, "f16 weights"); }
                    cb->f16[cb->n_f16].w = c->a.b[s];
                    cb->f16[cb->n_f16].h = h;
                    cb->f16[cb->n_f16].buf = bufs[tab->cmds[i].bind[s].buf];
                    cb->f16[cb->n_f16++].bytes = bytes;
                    cb->f16_bytes += bytes;
                }
                c->w16[s] = cb->f16[k].h;
            }
        }
        if (pass == 0 && cb->f16_bytes + need > AK_CUDA_F16_KEEP) return AK_OK;
    }
    return AK_OK;
}

static void cu_encoded_free(ak_backend *b, void *enc) {
    (void)b;
    cuda_table *t = enc;
    if (!t) return;
    if (t->g1) cudaGraphExecDestroy(t->g1);
    if (t->gu) cudaGraphExecDestroy(t->gu);
    for (int i = 0; i < AK_CUDA_PF_GRAPHS; i++) if (t->pg[i].g) cudaGraphExecDestroy(t->pg[i].g);
    if (t->arena) cudaFree(t->arena);
    if (t->trace) cudaFree(t->trace);
    free(t->cmds);
    free(t->labels);
    free(t);
}

static int param_n(const ak_cuda_cmd *c) { int32_t n; memcpy(&n, c->a.p, 4); return n; }

static int launch(cuda_backend *cb, ak_cuda_cmd *c) {
    ak_cuda_ctx *x = &cb->ctx;
    switch (c->kernel) {
    case AK_K_EMBED: return ak_cuda_embed(c, x);
    case AK_K_NORM: return ak_cuda_norm(c, x);
    case AK_K_ADD_NORM: return ak_cuda_add_norm(c, x);
    case AK_K_GEMV: return ak_cuda_gemv(c, x);
    case AK_K_GEMM: return ak_cuda_gemm(c, x);
    case AK_K_GEMV_ACT_DOWN: return ak_cuda_gemv_act_down(c, x);
    case AK_K_ACT_GATE: return ak_cuda_act_gate(c, x);
    case AK_K_ROPE_KV: return ak_cuda_rope_kv(c, x);
    case AK_K_ATTN_DECODE: return ak_cuda_attn_decode(c, x);
    case AK_K_ATTN_PREFILL: return ak_cuda_attn_prefill(c, x);
    case AK_K_SOFTCAP: return ak_cuda_softcap(c, x);
    case AK_K_SAMPLE: return ak_cuda_sample(c, x);
    default: return (int)cudaErrorInvalidValue;
    }
}

/* A command's label without its layer ("layer.3.qkv" -> "qkv"). */
static const char *label_key(const char *name) {
    if (!strncmp(name, "layer.", 6)) { const char *d = strchr(name + 6, '.'); if (d) name = d + 1; }
    return name;
}

/* Whether label key k is in the comma-separated list. */
static bool in_list(const char *list, const char *k) {
    size_t n = strlen(k);
    for (const char *p = list; (p = strstr(p, k)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return true;
    return false;
}

/* One step of the table; rows = this step's n for the commands that take it. */
static cudaError_t launch_all(cuda_backend *cb, cuda_table *t, int n) {
    for (int i = 0; i < t->n; i++) {
        ak_cuda_cmd *c = &t->cmds[i];
        if (cb->skip[0] && n == 1 && in_list(cb->skip, label_key(t->labels[i]))) continue;
        c->rows = (c->a.patch & AK_PATCH_N) ? n : param_n(c);
        int e = launch(cb, c);
        if (e) return (cudaError_t)e;
    }
    return cudaSuccess;
}

static cudaError_t capture(cuda_backend *cb, cuda_table *t, int steps, int n, cudaGraphExec_t *out) {
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamBeginCapture(cb->ctx.stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) return e;
    cudaError_t le = cudaSuccess;
    for (int s = 0; s < steps && le == cudaSuccess; s++) le = launch_all(cb, t, n);
    e = cudaStreamEndCapture(cb->ctx.stream, &g);
    if (le != cudaSuccess) e = le;
    if (e == cudaSuccess) e = cudaGraphInstantiate(out, g, 0);
    if (e == cudaSuccess) e = cudaGraphUpload(*out, cb->ctx.stream);
    if (g) cudaGraphDestroy(g);
    return e;
}

/* The KV caches the kernels take: F32 or F16, K and V alike; Q8_0 and Q4_0 in any mix;
 * and, for heads of 64, 128 or 256 (the tensor-core kernels), F16 beside a quantized one. */
static const char *kv_unsupported(int kt, int vt, int hd) {
    bool qk = kt == AK_Q8_0 || kt == AK_Q4_0, qv = vt == AK_Q8_0 || vt == AK_Q4_0;
    if (!qk && !qv) return kt == vt ? NULL : "K and V caches of different float types";
    if (kt == AK_F32 || vt == AK_F32) return "an F32 cache beside a quantized one";
    return qk == qv || hd == 64 || hd == 128 || hd == 256 ? NULL
                                                          : "an F16 cache beside a quantized one with heads of other than 64, 128 or 256 dimensions";
}

/* Features the table may ask for that these kernels lack: refuse them at encode rather
 * than compute something else (the KV cache types above, heads the decode lacks). */

static const char *unsupported(const ak_cmd *c) {
    const void *p = c->params;
    switch (c->kernel) {
    case AK_K_ROPE_KV: {
        const ak_p_rope_kv *r = p;
        return kv_unsupported(r->kt, r->vt, r->head_dim);
    }
    case AK_K_ATTN_PREFILL: {
        const ak_p_attn *a = p;
        return kv_unsupported(a->kt, a->vt, a->head_dim);
    }
    case AK_K_ATTN_DECODE: {
        const ak_p_attn *a = p;
        int hd = a->head_dim;
        if (hd != 32 && hd != 64 && hd != 128 && hd != 256) return "heads of other than 32, 64, 128 or 256 dimensions";
        return kv_unsupported(a->kt, a->vt, hd);
    }
    default: return NULL;
    }
}

static size_t up256(size_t x) { return (x + 255) & ~(size_t)255; }

static ak_status grow(void **p, size_t *have, size_t need, ak_err *err) {
    if (need <= *have) return AK_OK;
    if (*p) cudaFree(*p);
    *p = NULL;
    *have = 0;
    cudaError_t e = cudaMalloc(p, need);
    if (e != cudaSuccess) { *p = NULL; cudaGetLastError(); return ak_fail(err, AK_ERR_NOMEM, "cuda: cannot allocate %zu bytes of GEMM scratch", need); }
    *have = need;
    return AK_OK;
}

/* Device scratch one command needs (bytes), and its per-kernel launch constants. */
static size_t cmd_scratch(ak_cuda_cmd *c, int max_rows, ak_cuda_ctx *x, ak_err *err, ak_status *st) {
    const void *p = c->a.p;
    switch (c->kernel) {
    case AK_K_ATTN_DECODE: {
        const ak_p_attn *a = p;
        c->aux[1] = ak_cuda_attn_splits(a, x->n_sm);
        return (size_t)a->n_heads * c->aux[1] * (a->head_dim + AK_ATTN_PART_PAD) * 4 + (size_t)a->n_heads * 4;
    }
    case AK_K_ATTN_PREFILL: return ak_cuda_attn_prefill_scratch(p, max_rows);
    case AK_K_SAMPLE:
        c->aux[0] = ak_cuda_sample_blocks(((const ak_p_sample *)p)->vocab);
        return ak_cuda_sample_scratch(((const ak_p_sample *)p)->vocab);
    case AK_K_GEMV_ACT_DOWN: return (size_t)((const ak_p_act_down *)p)->K * 4;
    case AK_K_GEMM: {
        const ak_p_mm *m = p;
        if (m->last_only || m->rowwise) return 0;
        size_t ws = 0;
        for (int g = 0; g < m->nseg; g++) {
            if (m->dtype[g] == AK_F32 || m->dtype[g] == AK_F16 || m->dtype[g] == AK_BF16) continue;
            size_t need = (size_t)ak_cuda_gemm_tile_rows(m->N[g], m->K) * m->K * 2;
            if (need > ws) ws = need;
        }
        if ((*st = grow(&x->ws, &x->ws_bytes, ws, err))) return 0;
        if ((*st = grow(&x->xs, &x->xs_bytes, (size_t)max_rows * m->K * 2, err))) return 0;
        return 0;
    }
    default: return 0;
    }
}

/* A command's bindings as pointers (bufs NULL: 256 + offset, as cu_fuses judges
 * alignment): the kernel's own eight in b, a post-norm fold's a, pw and new residual
 * (slots 7..9) in rb. */
static void bind_args(ak_cuda_args *a, const ak_cmd *c, void *const *bufs) {
    void *ptr[AK_CMD_BINDS] = {0};
    for (int s = 0; s < c->nbind && s < AK_CMD_BINDS; s++)
        ptr[s] = bufs ? (uint8_t *)bufs[c->bind[s].buf] + c->bind[s].off : (void *)(uintptr_t)(256 + c->bind[s].off);
    for (int s = 0; s < 8; s++) a->b[s] = ptr[s];
    if (c->fuse & AK_FUSE_POST_IN)
        for (int s = 0; s < 3; s++) a->rb[s] = ptr[7 + s];
}

/* The launch fields a command's fusions set (ak_cmd.fuse; see ak_cuda_args); the
 * merge's, from the attention before, once the arena is placed. */
static void fused_args(ak_cuda_args *a, const ak_cmd *c) {
    if (c->fuse & AK_FUSE_NORM_IN) {
        a->pro = c->fuse & AK_FUSE_POST_IN ? AK_CUDA_PRO_POST : AK_CUDA_PRO_NORM;
        a->pro_w = a->b[6];
        a->eps = c->fp.eps;
    }
    if (c->fuse & AK_FUSE_MERGE_IN) a->pro = AK_CUDA_PRO_MERGE;
    a->acc = (c->fuse & AK_FUSE_ADD_OUT) != 0;
    a->gated = (c->fuse & (AK_FUSE_GATE_OUT | AK_FUSE_GATE_IN)) != 0;
    if (c->fuse & AK_FUSE_GATE_OUT) a->act = c->fp.act;
    if (c->fuse & AK_FUSE_ROPE) {
        a->rope = c->fp.rope;
        for (int s = 0; s < 4; s++) a->rb[s] = a->b[4 + s];
    }
}

/* ak_backend.fuses: the decode fusions the streaming GEMVs and the decode attention
 * take. Buffers are 256-byte aligned, so a binding's offset decides its alignment. */
static bool cu_fuses(ak_backend *b, const ak_cmd *c) {
    (void)b;
    ak_cuda_args a;
    memset(&a, 0, sizeof a);
    bind_args(&a, c, NULL);
    memcpy(a.p, c->params, sizeof a.p);
    fused_args(&a, c);
    const uint32_t f = c->fuse;
    switch (c->kernel) {
    case AK_K_GEMV:
        return !(f & ~(uint32_t)(AK_FUSE_NORM_IN | AK_FUSE_MERGE_IN | AK_FUSE_ADD_OUT | AK_FUSE_GATE_OUT | AK_FUSE_POST_IN)) &&
               !((f & AK_FUSE_NORM_IN) && (f & AK_FUSE_MERGE_IN)) && ((const ak_p_mm *)c->params)->n == 1 &&
               (!(f & AK_FUSE_POST_IN) || ((f & AK_FUSE_NORM_IN) && !(f & AK_FUSE_ADD_OUT) && c->nbind == AK_CMD_BINDS)) &&
               ak_cuda_gemv_fusable(&a, c->kernel);
    case AK_K_GEMV_ACT_DOWN:
        return !(f & ~(uint32_t)(AK_FUSE_ADD_OUT | AK_FUSE_GATE_IN)) && ak_cuda_gemv_fusable(&a, c->kernel);
    case AK_K_ATTN_DECODE: {
        const ak_p_rope_kv *r = &c->fp.rope;
        return !(f & ~(uint32_t)(AK_FUSE_ROPE | AK_FUSE_SPLITS_OUT)) && ((const ak_p_attn *)c->params)->n == 1 &&
               !unsupported(c) && (!(f & AK_FUSE_ROPE) || (r->n == 1 && r->n_rot % 2 == 0 && r->n_rot <= r->head_dim));
    }
    default: return false;
    }
}

/* The encoded fusions' launch fields: an output projection that merges an attention's
 * splits takes the attention's scratch, split count, head size and window. */
static ak_status fuse_args(cuda_table *t, const ak_table *tab, ak_err *err) {
    for (int i = 0; i < t->n; i++) {
        const ak_cmd *c = &tab->cmds[i];
        ak_cuda_args *a = &t->cmds[i].a;
        if (!c->fuse) continue;
        fused_args(a, c);
        /* claimed on the table's offsets; checked again on the weights' layout as encoded */
        bool gemv = c->kernel == AK_K_GEMV || c->kernel == AK_K_GEMV_ACT_DOWN;
        if (!cu_fuses(NULL, c) || (gemv && !ak_cuda_gemv_fusable(a, c->kernel)))
            return ak_fail(err, AK_ERR_UNSUPPORTED, "cuda: %s: fusions 0x%x not supported here", tab->labels[i], (unsigned)c->fuse);
        if (c->fuse & AK_FUSE_MERGE_IN) {
            if (i == 0 || !(tab->cmds[i - 1].fuse & AK_FUSE_SPLITS_OUT))
                return ak_fail(err, AK_ERR_UNSUPPORTED, "cuda: %s merges splits no attention left", tab->labels[i]);
            ak_cuda_cmd *at = &t->cmds[i - 1];
            const ak_p_attn *p = (const ak_p_attn *)at->a.p;
            at->a.mrg_splits = a->mrg_splits = at->aux[1];
            a->mrg_hd = p->head_dim;
            a->mrg_window = p->window;
            a->pro_w = at->a.scratch;
        }
    }
    return AK_OK;
}

/* After the fusions (the gate/up GEMV's prologue is known then): the gated pairs whose
 * GEMV can write act(g) * u as int8 codes, and whose down projection reads them on the
 * streaming kernel too, do (gated 2). */
static void code_gates(cuda_table *t) {
    for (int i = 0; i + 1 < t->n; i++) {
        ak_cuda_cmd *c = &t->cmds[i], *n = &t->cmds[i + 1];
        if (c->kernel == AK_K_GEMV && c->a.gated && n->kernel == AK_K_GEMV_ACT_DOWN && n->a.gated &&
            ak_cuda_gemv_gate_codes(&c->a) && ak_cuda_gemv_down_codes(&n->a))
            c->a.gated = n->a.gated = 2;
    }
}

/* ak_debug's cuda_trace: a timeline of one decode position (trace_print). */
static void plan_trace(const cuda_backend *cb, cuda_table *t) {
    if (cb->trace) {
        if (cudaMalloc((void **)&t->trace, (size_t)t->n * 64) == cudaSuccess) t->trace_pos = cb->trace_pos;
        else { t->trace = NULL; cudaGetLastError(); }
    }
    for (int i = 0; i < t->n; i++) {
        ak_cuda_args *a = &t->cmds[i].a;
        a->trace = t->trace;
        a->trace_id = i;
        a->trace_pos = t->trace_pos;
    }
}

static ak_status cu_encode(ak_backend *b, const ak_table *tab, void *const bufs[AK_BUF_COUNT], void **out, ak_err *err) {
    cuda_backend *cb = (cuda_backend *)b;
    ak_status st = AK_OK;
    cuda_table *t = calloc(1, sizeof *t);
    if (!t) return ak_fail(err, AK_ERR_NOMEM, "cuda: out of memory");
    t->n = tab->n;
    t->max_rows = tab->max_rows;
    t->cmds = calloc((size_t)tab->n + 1, sizeof *t->cmds);
    t->labels = calloc((size_t)tab->n + 1, sizeof *t->labels);
    if (t->labels) memcpy(t->labels, tab->labels, (size_t)tab->n * sizeof *t->labels);
    size_t *offs = calloc((size_t)tab->n + 1, sizeof *offs);
    if (!t->cmds || !t->labels || !offs) { st = ak_fail(err, AK_ERR_NOMEM, "cuda: out of memory"); goto fail; }
    size_t arena = 0;
    for (int i = 0; i < tab->n; i++) {
        const ak_cmd *c = &tab->cmds[i];
        ak_cuda_cmd *e = &t->cmds[i];
        if (c->kernel >= AK_K_COUNT || c->kernel > AK_K_SAMPLE) {
            st = ak_fail(err, AK_ERR_UNSUPPORTED, "cuda: no kernel for id %d (%s)", c->kernel, tab->labels[i]);
            goto fail;
        }
        if (((c->patch & AK_PATCH_N) && c->off_n != 0) || ((c->patch & AK_PATCH_POS) && c->off_pos != 4) ||
            ((c->patch & AK_PATCH_KVLEN) && c->off_kv != 8)) {
            st = ak_fail(err, AK_ERR_UNSUPPORTED, "cuda: %s patches a field other than n, pos or kv_len", tab->labels[i]);
            goto fail;
        }
        const char *why = unsupported(c);
        if (why) {
            st = ak_fail(err, AK_ERR_UNSUPPORTED, "cuda: %s needs %s, which the CUDA kernels do not implement yet", tab->labels[i], why);
            goto fail;
        }
        e->kernel = c->kernel;
        bind_args(&e->a, c, bufs);
        memcpy(e->a.p, c->params, sizeof e->a.p);
        e->a.patch = c->patch;
        e->a.bind_tok = c->bind_tok;
        e->a.step = cb->d_step;
        /* weights the GEMV/GEMM kernels read in the repacked layout */
        if (c->kernel == AK_K_GEMV || c->kernel == AK_K_GEMM) {
            ak_p_mm *m = (ak_p_mm *)e->a.p;
            for (int g = 0; g < m->nseg && !st; g++) st = claim(cb, bufs[c->bind[g].buf], e->a.b[g], &m->dtype[g], m->K, m->N[g], true, err);
        } else if (c->kernel == AK_K_GEMV_ACT_DOWN) {
            ak_p_act_down *m = (ak_p_act_down *)e->a.p;
            st = claim(cb, bufs[c->bind[0].buf], e->a.b[0], &m->dtype, m->K, m->N, true, err);
        }
        if (st) goto fail;
        size_t s = cmd_scratch(e, tab->max_rows, &cb->ctx, err, &st);
        if (st) goto fail;
        offs[i] = s ? arena : (size_t)-1;
        arena += up256(s);
    }
    /* embeddings after the GEMVs: a tied table has been repacked by then */
    for (int i = 0; i < tab->n && !st; i++)
        if (tab->cmds[i].kernel == AK_K_EMBED) {
            ak_p_embed *pe = (ak_p_embed *)t->cmds[i].a.p;
            st = claim(cb, bufs[tab->cmds[i].bind[0].buf], t->cmds[i].a.b[0], &pe->dtype, pe->dim, 0, false, err);
        }
    if (st || (st = keep_f16(cb, t, tab, bufs, err))) goto fail;
    if (arena) {
        cudaError_t ce = cudaMalloc(&t->arena, arena);
        if (ce == cudaSuccess) ce = cudaMemsetAsync(t->arena, 0, arena, cb->ctx.stream);
        if (ce != cudaSuccess) { cudaGetLastError(); st = ak_fail(err, AK_ERR_NOMEM, "cuda: cannot allocate %zu bytes of scratch", arena); goto fail; }
        for (int i = 0; i < tab->n; i++)
            if (offs[i] != (size_t)-1) t->cmds[i].a.scratch = (uint8_t *)t->arena + offs[i];
    }
    cudaError_t ce = cudaStreamSynchronize(cb->ctx.stream);
    if (ce != cudaSuccess) { st = cfail(err, ce, "encode"); goto fail; }
    if ((st = fuse_args(t, tab, err))) goto fail;
    if (t->max_rows == 1) {
        code_gates(t);
        plan_trace(cb, t);
        /* decode: one graph per step, and one of AK_CUDA_UNROLL steps */
        ce = capture(cb, t, 1, 1, &t->g1);
        if (ce == cudaSuccess) ce = capture(cb, t, AK_CUDA_UNROLL, 1, &t->gu);
        if (ce != cudaSuccess) {
            cudaGetLastError();
            if (t->g1) cudaGraphExecDestroy(t->g1);
            if (t->gu) cudaGraphExecDestroy(t->gu);
            t->g1 = t->gu = NULL;   /* launch directly instead */
        }
    }
    free(offs);
    *out = t;
    return AK_OK;
fail:
    free(offs);
    cu_encoded_free(b, t);
    return st;
}

/* Profiling: each command between two events, summed per label (layer number dropped). */
static cudaError_t profile_step(cuda_backend *cb, cuda_table *t, int n) {
    cudaEvent_t ev[2];
    cudaEventCreate(&ev[0]);
    cudaEventCreate(&ev[1]);
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < t->n && e == cudaSuccess; i++) {
        ak_cuda_cmd *c = &t->cmds[i];
        c->rows = (c->a.patch & AK_PATCH_N) ? n : param_n(c);
        cudaEventRecord(ev[0], cb->ctx.stream);
        e = (cudaError_t)launch(cb, c);
        cudaEventRecord(ev[1], cb->ctx.stream);
        if (e == cudaSuccess) e = cudaEventSynchronize(ev[1]);
        float ms = 0;
        cudaEventElapsedTime(&ms, ev[0], ev[1]);
        char key[32];
        snprintf(key, sizeof key, "%s%s", n > 1 ? "pf:" : "", label_key(t->labels[i]));
        int k = 0;
        while (k < cb->n_prof && strcmp(cb->prof[k].name, key)) k++;
        if (k == cb->n_prof && k < 64) { snprintf(cb->prof[k].name, sizeof cb->prof[k].name, "%s", key); cb->n_prof++; }
        if (k < 64) { cb->prof[k].us += 1e3 * ms; cb->prof[k].calls++; }
    }
    cudaEventDestroy(ev[0]);
    cudaEventDestroy(ev[1]);
    return e;
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static void trace_reset(cuda_table *t, cudaStream_t s) {
    unsigned long long *h = calloc((size_t)t->n * 8, 8);
    if (!h) return;
    for (int i = 0; i < t->n; i++) h[8 * i] = h[8 * i + 4] = ~0ULL;   /* the minima */
    cudaMemcpyAsync(t->trace, h, (size_t)t->n * 64, cudaMemcpyHostToDevice, s);
    cudaStreamSynchronize(s);
    free(h);
}

/* The traced step, per label averaged over layers, in microseconds after the previous
 * command's last block exit. */
static void trace_print(cuda_table *t, cudaStream_t s) {
    unsigned long long *h = calloc((size_t)t->n * 8, 8);
    if (!h) return;
    cudaMemcpyAsync(h, t->trace, (size_t)t->n * 64, cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    struct { char k[32]; double v[6]; int n; } agg[32];
    int na = 0;
    for (int i = 1; i < t->n; i++) {
        const unsigned long long *c = h + 8 * i, E = h[8 * (i - 1) + 5];
        if (c[0] == ~0ULL || !E) continue;
        const char *k = label_key(t->labels[i]);
        int j = 0;
        while (j < na && strcmp(agg[j].k, k)) j++;
        if (j == na) {
            if (na == 32) continue;
            memset(&agg[na], 0, sizeof agg[na]);
            snprintf(agg[na].k, sizeof agg[na].k, "%s", k);
            na++;
        }
        for (int q = 0; q < 6; q++) agg[j].v[q] += c[q] ? ((double)c[q] - (double)E) / 1000.0 : 0.0;
        agg[j].n++;
    }
    ak_logf("akunu cuda trace of position %d (us after the previous command's last exit):", t->trace_pos);
    ak_logf("%-14s %5s %8s %8s %8s %8s %8s %8s", "command", "n", "entry0", "entry1", "release", "mark", "exit0", "exit1");
    for (int j = 0; j < na; j++) {
        char line[160];
        int o = snprintf(line, sizeof line, "%-14s %5d", agg[j].k, agg[j].n);
        for (int q = 0; q < 6 && o > 0 && o < (int)sizeof line; q++)
            o += snprintf(line + o, sizeof line - (size_t)o, " %8.2f", agg[j].v[q] / agg[j].n);
        ak_logf("%s", line);
    }
    free(h);
}

/* One prefill of n rows: its graph if one was captured for n; captured now if the previous
 * prefill had n rows too; otherwise launched directly. */
static cudaError_t prefill(cuda_backend *cb, cuda_table *t, int n) {
    bool again = t->last_n == n;
    t->last_n = n;
    for (int i = 0; i < AK_CUDA_PF_GRAPHS; i++)
        if (t->pg[i].g && t->pg[i].n == n) return cudaGraphLaunch(t->pg[i].g, cb->ctx.stream);
    if (!again) return launch_all(cb, t, n);
    int k = t->pg_next;
    t->pg_next = (k + 1) % AK_CUDA_PF_GRAPHS;
    if (t->pg[k].g) cudaGraphExecDestroy(t->pg[k].g);
    t->pg[k].g = NULL;
    cudaError_t e = capture(cb, t, 1, n, &t->pg[k].g);
    if (e != cudaSuccess) {   /* launch directly instead */
        cudaGetLastError();
        if (t->pg[k].g) cudaGraphExecDestroy(t->pg[k].g);
        t->pg[k].g = NULL;
        return launch_all(cb, t, n);
    }
    t->pg[k].n = n;
    return cudaGraphLaunch(t->pg[k].g, cb->ctx.stream);
}

static ak_status cu_run(ak_backend *b, void *enc, ak_run *r, ak_err *err) {
    cuda_backend *cb = (cuda_backend *)b;
    cuda_table *t = enc;
    r->steps_done = 0;
    if (r->n_stop > AK_CUDA_MAX_STOP) return ak_fail(err, AK_ERR_ARG, "cuda: at most %d stop tokens", AK_CUDA_MAX_STOP);
    if (r->steps <= 0) return AK_OK;
    double t0 = now_us();
    ak_cuda_step *h = cb->h_step;
    memset(h, 0, sizeof *h);
    h->pos = r->pos;
    h->n = r->n;
    h->n_stop = r->n_stop;
    for (int k = 0; k < r->n_stop; k++) h->stop[k] = r->stop[k];
    cudaStream_t s = cb->ctx.stream;
    bool tracing = t->trace && r->n == 1 && r->pos <= t->trace_pos && t->trace_pos < r->pos + r->steps;
    if (tracing) trace_reset(t, s);
    cudaError_t e = cudaMemcpyAsync(cb->d_step, h, sizeof *h, cudaMemcpyHostToDevice, s);
    if (cb->profile) {
        for (int k = 0; k < r->steps && e == cudaSuccess; k++) e = profile_step(cb, t, r->n);
    } else if (t->g1 && r->n == 1) {
        int left = r->steps;
        for (; e == cudaSuccess && left >= AK_CUDA_UNROLL; left -= AK_CUDA_UNROLL) e = cudaGraphLaunch(t->gu, s);
        for (; e == cudaSuccess && left > 0; left--) e = cudaGraphLaunch(t->g1, s);
    } else if (r->n > 1 && r->steps == 1 && e == cudaSuccess) {
        e = prefill(cb, t, r->n);
    } else {
        for (int k = 0; k < r->steps && e == cudaSuccess; k++) e = launch_all(cb, t, r->n);
    }
    if (e == cudaSuccess) e = cudaMemcpyAsync(&h->steps_done, &cb->d_step->steps_done, 4, cudaMemcpyDeviceToHost, s);
    double t1 = now_us();
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) return cfail(err, e, "run");
    r->steps_done = h->steps_done;
    if (tracing) trace_print(t, s);
    if (cb->stats)
        ak_logf("akunu cuda: %d step(s) of %d row(s): host %.2f us/step, wall %.2f us/step", r->steps, r->n,
                (t1 - t0) / r->steps, (now_us() - t0) / r->steps);
    return AK_OK;
}

static ak_status cu_bandwidth(ak_backend *b, double *gbps, ak_err *err) {
    *gbps = ak_cuda_read_bandwidth(((cuda_backend *)b)->ctx.stream);
    return *gbps > 0 ? AK_OK : ak_fail(err, AK_ERR_NOMEM, "cuda: cannot allocate the bandwidth test buffer");
}

static uint64_t cu_mem_available(ak_backend *b) {
    (void)b;
    size_t free_b = 0, total = 0;
    if (cudaMemGetInfo(&free_b, &total) != cudaSuccess) { cudaGetLastError(); return UINT64_MAX; }
    return free_b;
}

static void cu_destroy(ak_backend *b) {
    cuda_backend *cb = (cuda_backend *)b;
    if (!cb) return;
    cudaStreamSynchronize(cb->ctx.stream);
    if (cb->n_prof) {
        double tot = 0;
        for (int k = 0; k < cb->n_prof; k++) tot += cb->prof[k].us;
        ak_logf("akunu cuda profile (per command, events around each launch):");
        ak_logf("%-28s %8s %12s %10s %6s", "command", "calls", "total us", "avg us", "share");
        for (int k = 0; k < cb->n_prof; k++)
            ak_logf("%-28s %8ld %12.1f %10.2f %5.1f%%", cb->prof[k].name, cb->prof[k].calls, cb->prof[k].us,
                    cb->prof[k].us / (double)cb->prof[k].calls, 100 * cb->prof[k].us / tot);
    }
    if (cb->profile) ak_cuda_gemm_profile_dump();
    for (int i = 0; i < cb->n_f16; i++) cudaFree(cb->f16[i].h);
    free(cb->f16);
    ak_cuda_blas_destroy(cb->ctx.blas);
    if (cb->ctx.ws) cudaFree(cb->ctx.ws);
    if (cb->ctx.xs) cudaFree(cb->ctx.xs);
    if (cb->d_step) cudaFree(cb->d_step);
    if (cb->h_step) cudaFreeHost(cb->h_step);
    if (cb->ctx.stream) cudaStreamDestroy(cb->ctx.stream);
    free(cb->packed);
    free(cb);
}

/* ak_set_debug's CUDA part, read by each backend created afterwards. */
static ak_debug dbg;
static char dbg_skip[256];

void ak_cuda_set_debug(const ak_debug *d) {
    memset(&dbg, 0, sizeof dbg);
    if (d) dbg = *d;
    snprintf(dbg_skip, sizeof dbg_skip, "%s", dbg.cuda_skip ? dbg.cuda_skip : "");
    dbg.cuda_skip = NULL;
}

ak_status ak_backend_cuda_create(ak_backend **out, ak_err *err) {
    *out = NULL;
    if (!ak_backend_cuda_present()) return ak_fail(err, AK_ERR_UNSUPPORTED, "cuda: no GPU (or no driver) is present");
    cuda_backend *cb = calloc(1, sizeof *cb);
    if (!cb) return ak_fail(err, AK_ERR_NOMEM, "cuda: out of memory");
    cudaError_t e = cudaSetDevice(0);
    int dev = 0;
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&cb->ctx.n_sm, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&cb->ctx.stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = (cudaError_t)ak_cuda_kernels_init(!dbg.cuda_no_pdl);
    if (e == cudaSuccess) e = cudaMalloc((void **)&cb->d_step, sizeof(ak_cuda_step));
    if (e == cudaSuccess) e = cudaMemset(cb->d_step, 0, sizeof(ak_cuda_step));
    if (e == cudaSuccess) e = cudaMallocHost((void **)&cb->h_step, sizeof(ak_cuda_step));
    if (e == cudaSuccess) e = (cudaError_t)ak_cuda_blas_create(&cb->ctx.blas);
    if (e != cudaSuccess) {
        ak_status st = cfail(err, e, "initialisation");
        cu_destroy(&cb->base);
        return st;
    }
    cb->stats = dbg.cuda_stats;
    cb->profile = dbg.cuda_profile;
    cb->trace = dbg.cuda_trace;
    cb->trace_pos = dbg.cuda_trace_pos;
    snprintf(cb->skip, sizeof cb->skip, "%s", dbg_skip);
    ak_cuda_gemm_profile(cb->profile);
    ak_backend *b = &cb->base;
    b->name = "cuda";
    b->n_threads = 1;
    b->buf_import = cu_import;
    b->buf_alloc = cu_alloc;
    b->buf_free = cu_buf_free;
    b->buf_write = cu_write;
    b->buf_read = cu_read;
    b->encode = cu_encode;
    b->encoded_free = cu_encoded_free;
    b->run = cu_run;
    b->read_bandwidth = cu_bandwidth;
    b->mem_available = cu_mem_available;
    b->weights_copied = true;
    b->kv_blocks = true;   /* with limits (kv_unsupported): encode says which */
    b->kv_ring = true;
    b->pack_inputs = true;
    b->fuses = cu_fuses;
    b->destroy = cu_destroy;
    *out = b;
    return AK_OK;
}
