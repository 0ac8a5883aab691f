/* CPU backend internals: the encoded command, per-thread scratch and the kernel
 * entry points. Every kernel runs on all threads and takes its own slice of the work. */
#ifndef AK_CPU_H
#define AK_CPU_H
#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdatomic.h>
#include "core/dtype.h"
#include "core/kernels.h"

typedef struct {
    float *scratch;        /* per-thread, sized at encode time for the table's largest need */
    size_t scratch_n;      /* floats */
} ak_cpu_tls;

/* Where a kernel's threads combine their results, one per table (commands run one at a
 * time, so they share it), sized at encode by ak_cpu_shared_need: counters, zero between
 * commands (whoever brings one to its goal sets it back), and data. */
typedef struct {
    _Atomic int *count;
    void *data;
} ak_cpu_shared;

typedef struct ak_cpu_cmd ak_cpu_cmd;
typedef void (*ak_cpu_fn)(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls);

struct ak_cpu_cmd {
    ak_cpu_fn fn;
    void *b[8];
    _Alignas(8) uint8_t p[64];
    /* replay patch data (see ak_cmd) */
    uint8_t patch, off_pos, off_kv, off_n, bind_tok;
    uint8_t *tok_base;
    /* GEMV / GEMM / GEMV_ACT_DOWN: each segment's weights repacked into panels (panel.h)
     * by cpu_encode, or NULL where the segment runs the row kernels. */
    void *pk[3];
    ak_cpu_shared sh;
};

/* Slice [*lo, *hi) of n work units for thread ith of nth. */
static inline void ak_split(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    *lo = n * ith / nth;
    *hi = n * (ith + 1) / nth;
}

/* SIMD level chosen at run time: 0 scalar, 1 AVX2+FMA+F16C, 2 AVX-512 (F, BW, VL).
 * ak_cpu_vnni: 0 none, 1 AVX512-VNNI (+VL, used on 256-bit vectors), 2 AVX-VNNI; only
 * read when ak_cpu_simd >= 1. ak_debug's cpu_scalar forces 0/0, cpu_no_vnni vnni 0. */
extern int ak_cpu_simd;
extern int ak_cpu_vnni;
void ak_cpu_detect(void);
/* The debug limits (ak_debug): applied at once and by every later ak_cpu_detect. */
void ak_cpu_set_limits(bool scalar, bool no_vnni, bool act_f32);

/* dot(row of W in dtype t, x) over K values; scratch holds K floats for the generic path. */
typedef float (*ak_dot_fn)(int64_t K, const void *w, const float *x, float *scratch);
ak_dot_fn ak_cpu_dot(ak_dtype t);
float ak_dot_ref(ak_dtype t, int64_t K, const void *w, const float *x, float *scratch);
float ak_dot_f32(int64_t K, const float *a, const float *b);

/* One row of n values of dtype t to floats (dequant.c): the SIMD path where the level
 * has one, else the reference; either way bit-identical to ak_dtype_info[t].dequant. */
void ak_cpu_dequant_row(ak_dtype t, const void *src, float *dst, int64_t n);

/* ---- int8 activations (quant_act.c, dotq_x86.c) ----
 * x is quantized per 32 values: d = max|x|/127, q = round(x/d), so every value is off
 * by at most d/2 and a dot with weights w is off by at most sum_i |w_i| d_blk(i) / 2.
 * s holds d * (sum of q) for each 16 values (the weights' min terms) and m8 the
 * offset term of Q4_0 codes, -8 * (sum of q) for each 4 values (one int32 VNNI lane). */
typedef struct {
    int8_t *q;     /* K */
    float *d;      /* K/32 */
    float *s;      /* K/16 */
    int32_t *m8;   /* K/4 */
} ak_xq;
size_t ak_xq_bytes(int64_t K);                       /* K a multiple of 32 */
void ak_xq_quantize(const float *x, int64_t K, void *buf, ak_xq *out); /* buf 4-aligned */
void ak_xq_quantize_ref(const float *x, int64_t K, void *buf, ak_xq *out);

/* The ggml block types (Q4_0..Q6_K) multiply int8-quantized activations at every
 * level: the scalar reference dequantizes the weights and multiplies d * q of x.
 * ak_cpu_act_f32 (ak_debug's cpu_act_f32) keeps float activations everywhere instead. */
extern int ak_cpu_act_f32;
bool ak_act_q8(ak_dtype t);
/* dot(row of W, quantized x). At SIMD levels NULL where the dtype has no int8 kernel:
 * then the float kernel (ak_cpu_dot) runs against ak_xq_dequant(x). */
typedef float (*ak_dotq_fn)(int64_t K, const void *w, const ak_xq *x);
ak_dotq_fn ak_cpu_dotq(ak_dtype t);
ak_dotq_fn ak_dotq_reference(ak_dtype t);
void ak_xq_dequant(const float *x, int64_t K, float *xh);

/* A weight row unpacked for the int8 GEMM: w[i] = a[i/16] * q[i] + b[i/16], with q
 * signed (offset removed), a expanded to 8 floats per 32 values ([a_lo x4, a_hi x4],
 * the layout of an 8 x int32 VNNI sum), nc[i/4] = -128 * (q[i..i+3] summed). */
typedef struct {
    int8_t *q;     /* K */
    int32_t *nc;   /* K/4 */
    float *a;      /* K/4 */
    float *b;      /* K/16 */
} ak_prow;
size_t ak_prow_bytes(int64_t K);
void ak_unpack_row(ak_dtype t, const void *w, int64_t K, void *buf, ak_prow *out);
/* out[r * ldo + c] = dot(prow r, xq c) for r < mr, c < nr (int8 GEMM tile). */
void ak_gemm_q8_tile(int64_t K, const ak_prow *w, int mr, const ak_xq *x, int nr, float *out, int ldo);

float ak_act_apply(int act, float x);
/* o[k] = act(g[k]) * u[k] (u NULL: act(g[k])) for k < K, on AVX-512 or AVX2 where present. */
void ak_cpu_act_row(int act, const float *g, const float *u, float *o, int64_t K);
/* x = cap * tanh(x / cap) over a row, on vectors where present. */
void ak_cpu_softcap_row(float *x, int64_t n, float cap);
/* n values (a multiple of r) times the orthonormal Walsh-Hadamard matrix of order r,
 * block by block (core/kernels.h: ak_kv_rot); r 0: nothing. */
void ak_cpu_wht(float *x, int n, int r);

void ak_cpu_embed(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls);
void ak_cpu_norm(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls);
void ak_cpu_add_norm(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls);
void ak_cpu_gemv(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls);
void ak_cpu_gemm(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls);
void ak_cpu_gemv_act_down(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls);
void ak_cpu_act_gate(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls);
void ak_cpu_rope_kv(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls);
void ak_cpu_attn_decode(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls);
void ak_cpu_attn_prefill(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls);
void ak_cpu_softcap(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls);
void ak_cpu_sample(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls);

/* Scratch floats a command needs per thread; counters and data bytes of ak_cpu_shared. */
size_t ak_cpu_scratch_need(int kernel, const void *params);
void ak_cpu_shared_need(int kernel, const void *params, size_t *counts, size_t *bytes);
void ak_cpu_attn_shared(const ak_p_attn *p, size_t *counts, size_t *bytes);
/* Scratch floats of GEMV (gemm 0) and GEMM (gemm 1) commands (matmul.c). */
size_t ak_cpu_mm_scratch(const ak_p_mm *p, int gemm);
/* Scratch floats of an encoded GEMV / GEMM / GEMV_ACT_DOWN command with panel segments
 * (c->pk set), at least ak_cpu_scratch_need. */
size_t ak_cpu_mm_panel_scratch(const ak_cpu_cmd *c, int kernel);

#define AK_ATTN_QB 16   /* prefill attention tile: queries */
#define AK_ATTN_KB 64   /* prefill attention tile: keys */
#define AK_ATTN_DC 256  /* decode attention: keys a chunk (a unit of work, and of the merge) */
_Static_assert(AK_KV_RING_ALIGN % AK_ATTN_KB == 0 && AK_KV_RING_ALIGN % AK_ATTN_DC == 0,
               "a key tile or chunk of a ring reads contiguous slots");

#endif
