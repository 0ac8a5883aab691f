/* Weights repacked once at encode into panels of AK_PANEL_R rows, interleaved so that
 * one vector load feeds AK_PANEL_R output rows at once: a GEMV reads each weight byte
 * once with no horizontal sums, and a GEMM reuses each loaded weight vector across
 * several activation rows. The layout is private to the CPU backend; the file's rows
 * stay untouched (embedding lookups of tied output weights keep reading them).
 *
 * panel.c dispatches by dtype: panel_q.c holds the block types (int8 activations, as
 * the row kernels), panel_f.c the float types (F32, F16, BF16). Every family has a
 * scalar reference over the same layout beside its SIMD paths. */
#ifndef AK_CPU_PANEL_H
#define AK_CPU_PANEL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"

#define AK_PANEL_R 16

/* Whether dtype t with row length K has a panel layout at the current SIMD level. */
bool ak_panel_supported(ak_dtype t, int64_t K);
/* Bytes of the packed N x K matrix (ceil(N / R) panels; rows past N are zero). */
size_t ak_panel_bytes(ak_dtype t, int64_t N, int64_t K);
/* Packs panels [p0, p1) of the N x K matrix src (rows in the file's layout) into dst. */
void ak_panel_pack(ak_dtype t, const void *src, int64_t N, int64_t K, void *dst, int64_t p0, int64_t p1);
/* Bytes of scratch ak_panel_mm needs for n activation rows of K values. */
size_t ak_panel_scratch(ak_dtype t, int64_t K, int n, bool gemv);
/* y[i * ldy + r] = sum_k W[r][k] * x[i * ldx + k] (+ bias[r] if bias) for every row r of
 * panels [p0, p1) with r < N and every i < n. scratch: ak_panel_scratch bytes, 64-aligned.
 * gemv: every row rounds as a one-row GEMV does (decode, and rows verified as decode
 * steps). Otherwise a row rounds the same whatever rows share the call, so a prompt
 * prefilled in any split (a cached prefix, any chunk size) gives the same bits. */
void ak_panel_mm(ak_dtype t, const void *w, int64_t N, int64_t K, int64_t p0, int64_t p1,
                 const float *x, int64_t ldx, int n, float *y, int64_t ldy, const float *bias,
                 void *scratch, bool gemv);

/* The block family (panel_q.c), called by panel.c for the ggml block types: int8
 * activations quantized as ak_xq (per 32 values d = max|x|/127, q = round(x/d)). */
bool ak_panel_q_supported(ak_dtype t, int64_t K);
size_t ak_panel_q_bytes(ak_dtype t, int64_t N, int64_t K);
void ak_panel_q_pack(ak_dtype t, const void *src, int64_t N, int64_t K, void *dst, int64_t p0, int64_t p1);
size_t ak_panel_q_scratch(ak_dtype t, int64_t K, int n);
void ak_panel_q_mm(ak_dtype t, const void *w, int64_t N, int64_t K, int64_t p0, int64_t p1,
                   const float *x, int64_t ldx, int n, float *y, int64_t ldy, const float *bias,
                   void *scratch, bool gemv);
/* ak_panel_q_mm in two steps, so that segments of one command quantize x once:
 * ak_panel_q_quantize writes n rows into xa (ak_panel_q_scratch bytes, 64-aligned; the
 * layout is the same for every block type), ak_panel_q_mm_pre multiplies them. */
void ak_panel_q_quantize(int64_t K, const float *x, int64_t ldx, int n, void *xa);
void ak_panel_q_mm_pre(ak_dtype t, const void *w, int64_t N, int64_t K, int64_t p0, int64_t p1,
                       const void *xa, int n, float *y, int64_t ldy, const float *bias, bool gemv);

/* The float family (panel_f.c), called by panel.c for F32, F16 and BF16. */
bool ak_panel_f_supported(ak_dtype t, int64_t K);
size_t ak_panel_f_bytes(ak_dtype t, int64_t N, int64_t K);
void ak_panel_f_pack(ak_dtype t, const void *src, int64_t N, int64_t K, void *dst, int64_t p0, int64_t p1);
size_t ak_panel_f_scratch(ak_dtype t, int64_t K, int n, bool gemv);
void ak_panel_f_mm(ak_dtype t, const void *w, int64_t N, int64_t K, int64_t p0, int64_t p1,
                   const float *x, int64_t ldx, int n, float *y, int64_t ldy, const float *bias,
                   void *scratch, bool gemv);

#endif
