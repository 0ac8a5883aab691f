/* CPU backend internals: the encoded command, per-thread scratch and the kernel
 * entry points. Every kernel runs on all threads and takes its own slice of the work. */
#ifndef AK_CPU_H
#define AK_CPU_H
#include <stdint.h>
#include <stddef.h>
#include "core/dtype.h"
#include "core/kernels.h"

typedef struct {
    float *scratch;        /* per-thread, sized at encode time for the table's largest need */
    size_t scratch_n;      /* floats */
} ak_cpu_tls;

typedef struct ak_cpu_cmd ak_cpu_cmd;
typedef void (*ak_cpu_fn)(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls);

struct ak_cpu_cmd {
    ak_cpu_fn fn;
    void *b[8];
    _Alignas(8) uint8_t p[64];
    /* replay patch data (see ak_cmd) */
    uint8_t patch, off_pos, off_kv, off_n, bind_tok;
    uint8_t *tok_base;
};

/* Slice [*lo, *hi) of n work units for thread ith of nth. */
static inline void ak_split(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    *lo = n * ith / nth;
    *hi = n * (ith + 1) / nth;
}

/* SIMD level chosen at run time: 0 scalar, 1 AVX2+FMA+F16C, 2 AVX-512 (F, BW, VL). */
extern int ak_cpu_simd;
void ak_cpu_detect(void);

/* dot(row of W in dtype t, x) over K values; scratch holds K floats for the generic path. */
typedef float (*ak_dot_fn)(int64_t K, const void *w, const float *x, float *scratch);
ak_dot_fn ak_cpu_dot(ak_dtype t);
float ak_dot_ref(ak_dtype t, int64_t K, const void *w, const float *x, float *scratch);
float ak_dot_f32(int64_t K, const float *a, const float *b);

float ak_act_apply(int act, float x);

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
void ak_cpu_argmax(const ak_cpu_cmd *c, int ith, int nth, ak_cpu_tls *tls);

/* Scratch floats a command needs per thread. */
size_t ak_cpu_scratch_need(int kernel, const void *params);

#define AK_ATTN_QB 16   /* prefill attention tile: queries */
#define AK_ATTN_KB 64   /* prefill attention tile: keys */

#endif
