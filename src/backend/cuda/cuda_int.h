/* CUDA backend internals shared by the host glue (backend.c, C) and the kernel files
 * (*.cu, C++): the device step struct, the encoded command and the launchers. */
#ifndef AK_CUDA_INT_H
#define AK_CUDA_INT_H
#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>
#include "core/dtype.h"
#include "core/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AK_CUDA_MAX_STOP 64
#define AK_CUDA_GEMV_BATCH 8      /* x rows one batched GEMV takes (rowwise GEMMs: verification) */

/* The per-step values, resident on the device. Every kernel reads pos and n from here
 * (that is how one captured graph serves every position); the sample kernel writes
 * the token, checks the stop set and advances pos. Kernels return at once when
 * stopped is set. */
typedef struct {
    int32_t pos, n, stopped, steps_done;
    int32_t n_stop;
    uint32_t pick_done;            /* blocks of the sample command that have finished */
    int32_t pad[2];
    int32_t stop[AK_CUDA_MAX_STOP];
} ak_cuda_step;

/* One launch, passed to the kernel by value: resolved buffer pointers (bindings plus
 * offsets), the command's parameter block as the builder wrote it, and its patch bits.
 * Patched fields are n (offset 0), pos (4) and kv_len (8) of every parameter struct;
 * encode checks that. */
typedef struct {
    void *b[8];
    union { uint8_t p[64]; uint64_t p_align_; };
    uint32_t patch, bind_tok;
    ak_cuda_step *step;
    void *scratch;                 /* this command's device scratch (see encode) */
    /* Decode fusions of the streaming GEMV (the table's AK_FUSE_NORM_IN, _MERGE_IN and
     * _ADD_OUT; fused_args): x made on the fly (pro: RMSNorm with pro_w and eps, or
     * act(g) * u) and y += instead of y =. */
    int32_t pro, acc, act;
    float eps;
    const float *pro_w;
    /* Decode: the rope_kv before an attention folded into it (AK_FUSE_ROPE): its
     * parameters, and in rb its qk-norm weights, inv_freq and bias; rope.head_dim 0: not
     * folded. On a GEMV that folds a post-norm's add (pro PRO_POST), rb holds the branch
     * a, its norm weight pw and where x + norm(a) * pw goes. */
    ak_p_rope_kv rope;
    const void *rb[4];
    /* Decode: the attention's split merge folded into the GEMV after it (AK_FUSE_SPLITS_OUT
     * and _MERGE_IN): on both, the attention's grid splits (0: not folded); on the GEMV (pro PRO_MERGE,
     * pro_w the attention's scratch) its head size and sliding window. */
    int32_t mrg_splits, mrg_window;
    /* mrg_hd on PRO_MERGE; on PRO_Q8, x holds its first codes_k values as codes, the rest
     * as floats after them (one field: with 8 more bytes of kernel parameters, 296,
     * Qwen3-0.6B decoded 1 % slower) */
    union { int32_t mrg_hd, codes_k; };
    /* Decode: act(gate) * up made by the gate/up GEMV's epilogue (AK_FUSE_GATE_OUT, _IN): on
     * the GEMV (with act), write it to y; on the act_down, x is it. 1: as N floats; 2: as the
     * int8 codes the down projection multiplies (ak_cuda_gemv_gate_codes). */
    int32_t gated;
    /* AKUNU_CUDA_TRACE: this command's row of the step timeline, and the traced position */
    int32_t trace_id, trace_pos;
    unsigned long long *trace;
} ak_cuda_args;

/* x prologues of the streaming GEMV: none, RMSNorm, act(g) * u, the attention's split
 * merge, x given as int8 codes already (gated 2), or the RMSNorm of x + rmsnorm(a) * pw
 * (AK_FUSE_POST_IN): instances of its own, so that the pre-norm models' GEMVs keep their
 * registers (as a run-time branch of PRO_NORM it cost Qwen3-0.6B 2 %; bench/README) */
enum { AK_CUDA_PRO_NONE = 0, AK_CUDA_PRO_NORM, AK_CUDA_PRO_ACT, AK_CUDA_PRO_MERGE, AK_CUDA_PRO_Q8, AK_CUDA_PRO_POST };

/* Decode attention scratch: per head and split (max, sum, pad, pad, weighted V[head_dim]),
 * V 16-byte aligned; the next GEMV merges up to AK_ATTN_FOLD splits itself, the attention
 * up to AK_ATTN_MAX_SPLITS (a multiple of 32). */
#define AK_ATTN_PART_PAD 4
#define AK_ATTN_FOLD 4
#define AK_ATTN_MAX_SPLITS 64

/* Shared state of the launchers. */
typedef struct {
    cudaStream_t stream;
    struct ak_cuda_blas *blas;     /* the cuBLASLt handle, its workspace and the GEMM plans (gemm.cu) */
    void *ws; size_t ws_bytes;     /* GEMM: dequantized weight tile (f16/bf16) */
    void *xs; size_t xs_bytes;     /* GEMM: activations converted to f16/bf16 */
    int n_sm;
} ak_cuda_ctx;

typedef struct {
    int kernel;
    int rows;                      /* rows the grid is sized for (this run's n, or the table's) */
    ak_cuda_args a;
    int aux[4];                    /* per kernel: attention splits and chunk, sample blocks */
    const void *w16[3];            /* GEMM: each quantized segment's f16 copy (NULL: dequantized a tile a call) */
} ak_cuda_cmd;

/* Launchers (one per kernel family). Each returns a cudaError_t as int. */
int ak_cuda_embed(const ak_cuda_cmd *c, ak_cuda_ctx *x);
int ak_cuda_act_gate(const ak_cuda_cmd *c, ak_cuda_ctx *x);
int ak_cuda_softcap(const ak_cuda_cmd *c, ak_cuda_ctx *x);
int ak_cuda_sample(const ak_cuda_cmd *c, ak_cuda_ctx *x);
int ak_cuda_norm(const ak_cuda_cmd *c, ak_cuda_ctx *x);
int ak_cuda_add_norm(const ak_cuda_cmd *c, ak_cuda_ctx *x);
int ak_cuda_rope_kv(const ak_cuda_cmd *c, ak_cuda_ctx *x);
int ak_cuda_attn_decode(const ak_cuda_cmd *c, ak_cuda_ctx *x);
int ak_cuda_attn_prefill(const ak_cuda_cmd *c, ak_cuda_ctx *x);
int ak_cuda_gemv(const ak_cuda_cmd *c, ak_cuda_ctx *x);
int ak_cuda_gemm(const ak_cuda_cmd *c, ak_cuda_ctx *x);
int ak_cuda_gemv_act_down(const ak_cuda_cmd *c, ak_cuda_ctx *x);
/* Whether a one-row GEMV or act_down command runs on the streaming or the int8 kernel,
 * which take the decode fusions. */
int ak_cuda_gemv_fusable(const ak_cuda_args *a, int kernel);
/* Whether the gated gate/up GEMV a (gated set) can write act(g) * u as int8 codes. */
int ak_cuda_gemv_gate_codes(const ak_cuda_args *a);
/* Whether the act_down a can read its x as those codes (its weights on the streaming kernel). */
int ak_cuda_gemv_down_codes(const ak_cuda_args *a);

/* Sets the kernels' shared-memory limits; once per process. pdl: launch with
 * programmatic dependent launch where the GPU has it (sm_90). */
int ak_cuda_kernels_init(int pdl);
/* ak_debug's cuda_profile for the GEMM's parts; the dump goes to the log. */
void ak_cuda_gemm_profile(int on);
void ak_cuda_gemm_profile_dump(void);
/* Rewrites in place the rows of a Q4_0 or Q8_0 matrix into the layout the CUDA
 * kernels read (per row: all quants, then all scales). */
int ak_cuda_repack(void *w, int dtype, int64_t K, int64_t N, cudaStream_t s);
/* Whether a dtype is repacked on the device when a GEMV reads it (Q4_0, Q8_0). */
int ak_cuda_is_repacked(int dtype);
/* Kernel-side dtype id of Q4_0/Q8_0 kept in the file's block layout. */
#define AK_CUDA_Q4_0_FILE 100
#define AK_CUDA_Q8_0_FILE 101
static inline int ak_cuda_file_layout(int dtype) { return dtype == AK_Q4_0 ? AK_CUDA_Q4_0_FILE : AK_CUDA_Q8_0_FILE; }
/* Best read bandwidth over a scratch buffer, GB/s (0 on failure). */
double ak_cuda_read_bandwidth(cudaStream_t s);
/* Attention decode: the grid's key splits for its cache and this device's SMs. */
int ak_cuda_attn_splits(const ak_p_attn *p, int n_sm);
/* Attention prefill: the key splits' partial results for max_rows rows (0: one split). */
size_t ak_cuda_attn_prefill_scratch(const ak_p_attn *p, int max_rows);
int ak_cuda_sample_blocks(int vocab);
/* The sample command's scratch: the blocks' argmax or top-k lists. */
size_t ak_cuda_sample_scratch(int vocab);
/* The prefill GEMM's state (gemm.cu). */
typedef struct ak_cuda_blas ak_cuda_blas;
int ak_cuda_blas_create(ak_cuda_blas **g);
void ak_cuda_blas_destroy(ak_cuda_blas *g);
/* Weight rows a quantized GEMM dequantizes at a time (its scratch holds that many). */
int ak_cuda_gemm_tile_rows(int N, int K);
/* Rows [r0, r0 + nr) of a quantized GEMM weight (dtype as the kernels dispatch on it) to
 * f16, as the GEMM dequantizes them (cudaError_t as int). */
int ak_cuda_gemm_dequant(const void *w, int dt, int K, int64_t r0, int nr, void *out, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
