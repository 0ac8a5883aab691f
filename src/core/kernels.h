/* Kernel ids and their inline parameter blocks: the contract between the table
 * builder and every backend. Parameters are plain data, at most 64 bytes. */
#ifndef AK_KERNELS_H
#define AK_KERNELS_H
#include <stdint.h>
#include "core/dtype.h"

#ifndef AK_HD   /* inline helpers the CUDA kernels call too (here and in core/sample.h) */
#ifdef __CUDACC__
#define AK_HD __host__ __device__
#else
#define AK_HD
#endif
#endif

typedef enum {
    AK_K_EMBED = 0,   /* b: table, tokens, out, [pos table, type table] */
    AK_K_NORM,        /* b: x, w, out, [bias]          out = norm(x) * w (+ bias) */
    AK_K_ADD_NORM,    /* b: x, a, post_w, w, out, [bias]  x += [norm(a)*post_w | a]; out = norm(x) * w (+ bias) */
    AK_K_GEMV,        /* b: W0, W1, W2, x, y, bias     y[:, seg] = W_seg x (+ bias), one row */
    AK_K_GEMM,        /* same bindings, n rows */
    AK_K_GEMV_ACT_DOWN, /* b: W, gu, y                y = W (act(g) * u) */
    AK_K_ACT_GATE,    /* b: gu, out                    out = act(g) * u, n rows */
    AK_K_ROPE_KV,     /* b: qkv, q_norm, k_norm, inv_freq, kcache, vcache, bias */
    AK_K_ATTN_DECODE, /* b: qkv, kcache, vcache, out */
    AK_K_ATTN_PREFILL,/* same bindings, n queries, tiled */
    AK_K_SOFTCAP,     /* b: x                          x = cap * tanh(x / cap) */
    AK_K_SAMPLE,      /* b: logits, tokens, sample buf   tokens[0] = the choice from logits row n-1 (core/sample.h), or every row's */
    AK_K_COUNT
} ak_kernel;

extern const char *const ak_kernel_names[AK_K_COUNT];

typedef enum { AK_ACT_SILU = 0, AK_ACT_GELU_TANH, AK_ACT_GELU_ERF } ak_act;
/* RoPE pairing: dims (2i, 2i+1) (GGUF llama) or (i, i + n_rot/2) (NeoX, HF checkpoints). */
typedef enum { AK_ROPE_NONE = 0, AK_ROPE_INTERLEAVED, AK_ROPE_NEOX } ak_rope_style;

/* Fields named n, pos and kv_len are the ones replay patches (see ak_cmd). */
typedef struct { int32_t n, pos, dim, dtype, pos_dtype, type_dtype; float scale; int32_t flags; } ak_p_embed;
/* add position_embd[pos+i] / token_types[0] (b: 3, 4); SEG: position pos + i less the first
 * key of row i's segment (b: 5, the segment table: AK_ATTN_SEGMENTS) */
enum { AK_EMBED_F_POS = 1, AK_EMBED_F_TYPE = 2, AK_EMBED_F_SEG = 4 };

typedef struct { int32_t n, dim; float eps; int32_t flags; } ak_p_norm;
enum {
    AK_NORM_F_POST = 1,  /* ADD_NORM: normalise a with post_w before adding */
    AK_NORM_F_LAYER = 2, /* LayerNorm (mean removed) with a bias, instead of RMSNorm */
};
/* NORM bindings: x, w, out, bias. ADD_NORM: x, a, post_w, w, out, bias. */

typedef struct {
    int32_t n, K;
    int32_t nseg;          /* 1..3 weight matrices writing side by side */
    int32_t N[3], dtype[3];
    int32_t ld_x, ld_y;    /* row strides in floats */
    int32_t last_only;     /* GEMM: use only row n-1 of x, write row 0 of y */
    int32_t has_bias;      /* bias for segment 0 */
    int32_t rowwise;       /* GEMM: each row rounds as a one-row GEMV (speculative verification) */
} ak_p_mm;

typedef struct { int32_t n, K, N, dtype, act, ld_gu; } ak_p_act_down; /* g at gu[0..K), u at gu[K..2K) */

typedef struct { int32_t n, K, act, ld_gu, gated; } ak_p_act; /* gated: act(g) * u, else act(g) */

typedef struct {
    int32_t n, pos;
    int32_t n_heads, n_kv_heads, head_dim, n_rot, style, ld;
    int32_t max_seq, kt, vt, flags;   /* kt, vt: the K and V cache's ak_dtype (F32, F16, Q8_0, Q4_0) */
    float eps;
    int32_t cap;                      /* rows a KV head keeps, a ring (ak_kv_row); 0: max_seq */
} ak_p_rope_kv;

/* A sliding-window layer may keep only cap rows per KV head, a ring: key position j in
 * slot j % cap (cap 0 or max_seq: every position in its own row). A ring's cap is a
 * multiple of AK_KV_RING_ALIGN, so that an attention key tile that starts at a multiple
 * of its size (at most this) reads contiguous slots. */
#define AK_KV_RING_ALIGN 256
static inline AK_HD size_t ak_kv_row(int32_t kv_head, int32_t j, int32_t cap, int32_t max_seq) {
    int32_t rows = cap > 0 ? cap : max_seq;
    return (size_t)kv_head * (size_t)rows + (size_t)(j % rows);
}

/* A Q8_0 or Q4_0 cache holds its rows rotated: times the orthonormal Walsh-Hadamard
 * matrix of order r, block by block of r values (r a power of two; the matrix is
 * symmetric and its own inverse). A few large dimensions (Qwen2.5's keys reach 100x the
 * rest) would otherwise set every block's scale; rotated, the block's values share it.
 * Keys: q . k = (H q) . (H k), so rope_kv rotates Q alike; values: the attention output
 * sum p (H v) = H (sum p v) is rotated back. r for keys: the largest power of two that
 * divides head_dim; for values 64 (or 32), which measured better (PPL) than wider. 0:
 * rows as they are (F32, F16). */
static inline AK_HD int ak_kv_rot(int32_t t, int32_t head_dim, int value) {
    if (t != AK_Q8_0 && t != AK_Q4_0) return 0;
    int r = head_dim & -head_dim;
    return value && r > 64 ? 64 : r;
}
enum { AK_ROPE_F_QKNORM = 1, AK_ROPE_F_BIAS = 2 };

typedef struct {
    int32_t n, pos, kv_len;
    int32_t n_heads, n_kv_heads, head_dim, ld_q;
    int32_t max_seq, kt, vt, window, causal;   /* kt, vt as ak_p_rope_kv's */
    float scale, softcap;
    int32_t cap;                               /* as ak_p_rope_kv's */
} ak_p_attn;
/* ak_p_attn.causal: 0 every key, 1 keys up to the query's position, or an encoder's batch
 * of inputs in one call: row i sees keys [seg[2i], seg[2i + 1]) of the segment table
 * (bound at 4; the embedding's at 5), so that each input attends only to itself. */
enum { AK_ATTN_SEGMENTS = 2 };

/* Keys visible to the query at position q (row q - pos of the call): [lo, hi). A tile's
 * rows past the call's (n) take its last row's segment. */
static inline AK_HD void ak_key_range(const ak_p_attn *p, const int32_t *seg, int q, int *lo, int *hi) {
    if (p->causal == AK_ATTN_SEGMENTS) {
        const int r = q - p->pos < p->n ? q - p->pos : p->n - 1;
        *lo = seg[2 * r];
        *hi = seg[2 * r + 1];
        return;
    }
    *hi = p->causal ? q + 1 : p->kv_len;
    if (*hi > p->kv_len) *hi = p->kv_len;
    *lo = (p->window > 0 && q - p->window + 1 > 0) ? q - p->window + 1 : 0;
}

/* Fusions: work of neighbouring commands that a command does in place of them
 * (ak_cmd.fuse, with what they take in ak_cmd.fp). The builder emits them in a decode
 * table only where the backend claims the fused command (ak_backend.fuses), so the table
 * lists exactly the launches that run. */
enum {
    AK_FUSE_NORM_IN = 1,    /* GEMV: x = rmsnorm(x) * w first, w bound at 6, fp.eps (the NORM or ADD_NORM before) */
    AK_FUSE_ADD_OUT = 2,    /* GEMV, GEMV_ACT_DOWN: y += W x (the residual add of the ADD_NORM after); y is the residual */
    AK_FUSE_GATE_OUT = 4,   /* GEMV of gate and up (2 segments): y[0..N) = act(W_0 x) * (W_1 x), act fp.act */
    AK_FUSE_GATE_IN = 8,    /* GEMV_ACT_DOWN: x is act(g) * u already, K floats (the GATE_OUT GEMV before) */
    AK_FUSE_ROPE = 16,      /* ATTN_DECODE: the ROPE_KV before (fp.rope; its q_norm, k_norm, inv_freq and bias
                               bound at 4..7), leaving the QKV row unroped */
    AK_FUSE_SPLITS_OUT = 32,/* ATTN_DECODE: its key splits left unmerged, for the GEMV after (out unwritten) */
    AK_FUSE_MERGE_IN = 64,  /* GEMV: x is the attention before's splits, merged as it reads them */
    AK_FUSE_POST_IN = 128,  /* GEMV with NORM_IN: x (bound at 3) is first x + rmsnorm(a) * pw, a post-norm's
                               add (Gemma 2/3: the ADD_NORM before), a bound at 7, pw at 8; that new
                               residual is written to the buffer bound at 9 */
};
typedef struct ak_p_fused {
    float eps;              /* NORM_IN */
    int32_t act;            /* GATE_OUT */
    ak_p_rope_kv rope;      /* ROPE (n and pos as the attention's) */
} ak_p_fused;

typedef struct { int32_t n, cols; float cap; } ak_p_softcap;
/* kv_len: the chosen token's position (the draw's key; the penalty window ends before it).
 * all: a choice from every row i, for position pos + 1 + i, into tokens[pos + 1 + i]
 * (speculative decoding's verification: the token each draft is checked against). */
typedef struct { int32_t n, pos, kv_len, vocab, all; } ak_p_sample;

#endif
