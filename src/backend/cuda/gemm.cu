/* Prefill GEMM: y[:, seg] = x W_seg^T (+ bias) over n rows, by cuBLASLt. F32 weights in
 * f32 (no TF32: the f32 fixtures hold to 1e-4). F16/BF16 weights are used in place;
 * quantized weights are dequantized (exactly as the reference does, then rounded to f16) a
 * tile of rows at a time into scratch, or once where a small model's are kept as f16
 * (backend.c, keep_f16). Activations are converted to f16 (bf16 for BF16
 * weights) and the product runs on tensor cores with f32 accumulation and f32 output.
 * A row's result does not depend on how many rows the call has (a prompt cut anywhere,
 * a cached prefix, a server slot's batch: the same logits): each shape's algorithm is
 * chosen once for AK_GEMM_PLAN_ROWS rows, without split-K, and used for every n, so a
 * row's dot products run the same instructions in the same order whatever n is.
 * GEMMs marked rowwise (speculative verification) and the last-row-only logits use the
 * GEMV kernels. */
#include "backend/cuda/kquant.cuh"
#include <cublasLt.h>
#include <type_traits>
#include <stdio.h>
#include <stdlib.h>

extern "C" int ak_cuda_gemv_rows(const ak_cuda_args *a, int rows, cudaStream_t st);

#define AK_GEMM_PLANS 256
#define AK_GEMM_PLAN_ROWS 512

/* an algorithm for one (type, N, K, ld_x, ld_y, alignment) */
typedef struct {
    int cls, N, K, ld_x, ld_y, align;
    cublasLtMatmulAlgo_t algo;
} gemm_plan;

struct ak_cuda_blas {
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_bytes;
    gemm_plan plan[AK_GEMM_PLANS];
    int n_plan;
};

extern "C" int ak_cuda_blas_create(ak_cuda_blas **out) {
    *out = NULL;
    ak_cuda_blas *g = (ak_cuda_blas *)calloc(1, sizeof *g);
    if (!g) return (int)cudaErrorMemoryAllocation;
    if (cublasLtCreate(&g->lt) != CUBLAS_STATUS_SUCCESS) { free(g); return (int)cudaErrorUnknown; }
    /* our own workspace, so that no allocation happens on the first prefill */
    g->ws_bytes = (size_t)32 << 20;
    if (cudaMalloc(&g->ws, g->ws_bytes) != cudaSuccess) {
        cublasLtDestroy(g->lt);
        free(g);
        return (int)cudaErrorMemoryAllocation;
    }
    *out = g;
    return 0;
}

extern "C" void ak_cuda_blas_destroy(ak_cuda_blas *g) {
    if (!g) return;
    cublasLtDestroy(g->lt);
    cudaFree(g->ws);
    free(g);
}

/* cls: 0 f16, 1 bf16, 2 f32 */
static cudaDataType_t cls_type(int cls) { return cls == 2 ? CUDA_R_32F : cls == 1 ? CUDA_R_16BF : CUDA_R_16F; }

/* The operation y (N x n, ld_y) = W^T (W: K x N, ld K) x (K x n, ld_x), column-major. */
static cublasStatus_t describe(int cls, int N, int K, int n, int ld_x, int ld_y, cublasLtMatmulDescOpaque_t *op,
                               cublasLtMatrixLayoutOpaque_t lay[3]) {
    cublasStatus_t s = cublasLtMatmulDescInit(op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t tr = CUBLAS_OP_T;
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tr, sizeof tr);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutInit(&lay[0], cls_type(cls), K, N, K);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutInit(&lay[1], cls_type(cls), K, n, ld_x);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutInit(&lay[2], CUDA_R_32F, N, n, ld_y);
    return s;
}

/* The plan for a shape, chosen at its first use: the heuristic's best algorithm for
 * AK_GEMM_PLAN_ROWS rows that runs without split-K (NULL if none or the cache is full). */
static const gemm_plan *plan_for(ak_cuda_blas *g, int cls, int N, int K, int ld_x, int ld_y, int align) {
    for (int i = 0; i < g->n_plan; i++) {
        const gemm_plan *p = &g->plan[i];
        if (p->cls == cls && p->N == N && p->K == K && p->ld_x == ld_x && p->ld_y == ld_y && p->align == align) return p;
    }
    if (g->n_plan == AK_GEMM_PLANS) return NULL;
    cublasLtMatmulDescOpaque_t op;
    cublasLtMatrixLayoutOpaque_t lay[3];
    if (describe(cls, N, K, AK_GEMM_PLAN_ROWS, ld_x, ld_y, &op, lay) != CUBLAS_STATUS_SUCCESS) return NULL;
    cublasLtMatmulPreference_t pref;
    if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) return NULL;
    uint32_t al = (uint32_t)align, none = CUBLASLT_REDUCTION_SCHEME_NONE;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &g->ws_bytes, sizeof g->ws_bytes);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &none, sizeof none);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al);
    cublasLtMatmulHeuristicResult_t res[16];
    int got = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(g->lt, &op, &lay[0], &lay[1], &lay[2], &lay[2], pref, 16, res, &got);
    cublasLtMatmulPreferenceDestroy(pref);
    for (int i = 0; s == CUBLAS_STATUS_SUCCESS && i < got; i++) {
        cublasLtMatmulAlgo_t algo = res[i].algo;
        int32_t one_split = 1;
        cublasLtMatmulHeuristicResult_t chk;
        if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one_split, sizeof one_split) ||
            cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &none, sizeof none) ||
            cublasLtMatmulAlgoCheck(g->lt, &op, &lay[0], &lay[1], &lay[2], &lay[2], &algo, &chk) ||
            chk.workspaceSize > g->ws_bytes)
            continue;
        gemm_plan *p = &g->plan[g->n_plan++];
        *p = gemm_plan{cls, N, K, ld_x, ld_y, align, algo};
        return p;
    }
    return NULL;
}

/* y (n rows, ld_y) = x (n rows, ld_x) W^T for W N x K of class cls, on the shape's plan. */
static cublasStatus_t mm(ak_cuda_blas *g, cudaStream_t st, int cls, int N, int K, int n, const void *w, const void *x,
                         int ld_x, float *y, int ld_y) {
    size_t es = cls == 2 ? 4 : 2;
    uintptr_t bits = (uintptr_t)w | (uintptr_t)x | (uintptr_t)y | (uintptr_t)(K * es) | (uintptr_t)(ld_x * es) | (uintptr_t)(ld_y * 4);
    int align = 16;
    while (align > (int)es && bits % align) align /= 2;
    const gemm_plan *p = plan_for(g, cls, N, K, ld_x, ld_y, align);
    if (!p) return CUBLAS_STATUS_NOT_SUPPORTED;
    cublasLtMatmulDescOpaque_t op;
    cublasLtMatrixLayoutOpaque_t lay[3];
    cublasStatus_t s = describe(cls, N, K, n, ld_x, ld_y, &op, lay);
    const float one = 1.f, zero = 0.f;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmul(g->lt, &op, &one, w, &lay[0], x, &lay[1], &zero, y, &lay[2], y, &lay[2], &p->algo, g->ws, g->ws_bytes, st);
    return s;
}

/* Weight rows dequantized per GEMM tile: a function of the shape alone (the tile's
 * height picks its plan, and the plan must not depend on which tables came first). */
extern "C" int ak_cuda_gemm_tile_rows(int N, int K) {
    int64_t cap = ((int64_t)128 << 20) / ((int64_t)K * 2);
    if (cap < 64) cap = 64;
    return N < cap ? N : (int)cap;
}

/* Rows [r0, r0 + nr) of W (dtype dt, K values each) to 16-bit floats, one thread per sub-block. */
template <class T>
__global__ void k_dequant16(const uint8_t *w, int dt, int K, int64_t r0, int nr, T *out) {
    int nb32 = K / 32;
    int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (t >= (int64_t)nr * nb32) return;
    int64_t r = t / nb32;
    int s = (int)(t % nb32);
    float v[32];
    ak_dq32(dt, w + (size_t)(r0 + r) * ak_cuda_row_bytes(dt, K), nb32, s, v);
    T *o = out + (size_t)r * K + 32 * (size_t)s;
#pragma unroll
    for (int l = 0; l < 32; l += 2) {
        if constexpr (std::is_same<T, __half>::value) *(__half2 *)(o + l) = __floats2half2_rn(v[l], v[l + 1]);
        else *(__nv_bfloat162 *)(o + l) = __floats2bfloat162_rn(v[l], v[l + 1]);
    }
}

static int blocks_for(int64_t n, int t) { return (int)((n + t - 1) / t); }

/* Repacked Q4_0/Q8_0 (see quant.cuh) to f16: a thread per block, 16-byte loads and stores. */
template <int DT>
__global__ void k_dequant16_fast(const uint8_t *w, int K, int64_t r0, int nr, __half *out) {
    constexpr int Q = DT == AK_Q4_0 ? 1 : 2;
    int nb = K / 32;
    int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (t >= (int64_t)nr * nb) return;
    int64_t r = t / nb;
    int b = (int)(t % nb);
    const uint8_t *row = w + (size_t)(r0 + r) * nb * (16 * Q + 2);
    uint4 q[Q];
#pragma unroll
    for (int k = 0; k < Q; k++) q[k] = __ldcs((const uint4 *)row + Q * b + k);
    float d = __half2float(__ushort_as_half(((const unsigned short *)(row + (size_t)nb * 16 * Q))[b]));
    const uint8_t *qb = (const uint8_t *)q;
    __align__(16) __half h[32];
#pragma unroll
    for (int i = 0; i < 32; i++) {
        int v = DT == AK_Q4_0 ? (i < 16 ? (qb[i] & 0xF) : (qb[i - 16] >> 4)) - 8 : (int)(int8_t)qb[i];
        h[i] = __float2half_rn(__fmul_rn(d, (float)v));
    }
    uint4 *o = (uint4 *)(out + (size_t)r * K + 32 * (size_t)b);
#pragma unroll
    for (int k = 0; k < 4; k++) o[k] = ((const uint4 *)h)[k];
}

/* The other quant types (kquant.cuh's units, 16-byte loads where the format allows) to
 * f16: a thread per unit of 32 values, a q + b with the reference's two roundings. */
template <int DT>
__global__ void k_dequant16_kq(const uint8_t *w, int K, int64_t r0, int nr, __half *out) {
    const int nb = K / 32;
    const int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (t >= (int64_t)nr * nb) return;
    const int64_t r = t / nb;
    kq_unit u;
    kq_decode<DT>(w + (size_t)(r0 + r) * ak_cuda_row_bytes(DT, K), nb, (int)(t % nb), u);
#pragma unroll
    for (int g = 0; g < 2; g++) {
        __align__(16) __half h[16];
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const float q = (float)((int8_t)(u.q[g][i / 4] >> (8 * (i % 4))) + kq_zero<DT>());
            const float v = kq_has_b<DT>() ? __fadd_rn(__fmul_rn(u.a[g], q), u.b[g]) : __fmul_rn(u.a[g], q);
            h[i] = __float2half_rn(v);
        }
        uint4 *o = (uint4 *)(out + (size_t)r * K + u.off[g]);
        o[0] = ((const uint4 *)h)[0];
        o[1] = ((const uint4 *)h)[1];
    }
}

template <int DT>
static void dequant_kq(const uint8_t *w, int K, int64_t r0, int nr, __half *out, cudaStream_t st) {
    k_dequant16_kq<DT><<<blocks_for((int64_t)nr * (K / 32), 128), 128, 0, st>>>(w, K, r0, nr, out);
}
/* Whether k_dequant16_kq takes dt, and launches it. */
static bool dequant_kq(int dt, const uint8_t *w, int K, int64_t r0, int nr, __half *out, cudaStream_t st) {
    if (((uintptr_t)w & 15) || K % kq_block(dt)) return false;
    switch (dt) {
    case AK_Q4_1: dequant_kq<AK_Q4_1>(w, K, r0, nr, out, st); return true;
    case AK_Q5_0: dequant_kq<AK_Q5_0>(w, K, r0, nr, out, st); return true;
    case AK_Q5_1: dequant_kq<AK_Q5_1>(w, K, r0, nr, out, st); return true;
    case AK_Q2_K: dequant_kq<AK_Q2_K>(w, K, r0, nr, out, st); return true;
    case AK_Q3_K: dequant_kq<AK_Q3_K>(w, K, r0, nr, out, st); return true;
    case AK_Q4_K: dequant_kq<AK_Q4_K>(w, K, r0, nr, out, st); return true;
    case AK_Q5_K: dequant_kq<AK_Q5_K>(w, K, r0, nr, out, st); return true;
    case AK_Q6_K: dequant_kq<AK_Q6_K>(w, K, r0, nr, out, st); return true;
    case AK_MLX_Q2: dequant_kq<AK_MLX_Q2>(w, K, r0, nr, out, st); return true;
    case AK_MLX_Q3: dequant_kq<AK_MLX_Q3>(w, K, r0, nr, out, st); return true;
    case AK_MLX_Q6: dequant_kq<AK_MLX_Q6>(w, K, r0, nr, out, st); return true;
    case AK_MLX_Q8: dequant_kq<AK_MLX_Q8>(w, K, r0, nr, out, st); return true;
    default: return false;
    }
}

extern "C" int ak_cuda_gemm_dequant(const void *w, int dt, int K, int64_t r0, int nr, void *out, cudaStream_t st) {
    const uint8_t *wg = (const uint8_t *)w;
    const bool vec = (dt == AK_Q4_0 || dt == AK_Q8_0) && K % 256 == 0 && ((uintptr_t)wg & 15) == 0;
    const int nblk = blocks_for((int64_t)nr * (K / 32), 128);
    if (vec && dt == AK_Q4_0) k_dequant16_fast<AK_Q4_0><<<nblk, 128, 0, st>>>(wg, K, r0, nr, (__half *)out);
    else if (vec) k_dequant16_fast<AK_Q8_0><<<nblk, 128, 0, st>>>(wg, K, r0, nr, (__half *)out);
    else if (!dequant_kq(dt, wg, K, r0, nr, (__half *)out, st)) k_dequant16<__half><<<nblk, 128, 0, st>>>(wg, dt, K, r0, nr, (__half *)out);
    return (int)cudaGetLastError();
}

template <class T>
__global__ void k_to16(const float *x, int ld_x, int K, int n, T *out) {
    int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (t >= (int64_t)n * K) return;
    int64_t i = t / K;
    int k = (int)(t % K);
    float v = x[(size_t)i * ld_x + k];
    if constexpr (std::is_same<T, __half>::value) out[t] = __float2half_rn(v);
    else out[t] = __float2bfloat16_rn(v);
}

__global__ void k_add_bias(float *y, int ld_y, const float *bias, int N, int n) {
    int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (t >= (int64_t)n * N) return;
    y[(size_t)(t / N) * ld_y + t % N] += bias[t % N];
}


/* ak_debug's cuda_profile: the GEMM's parts timed apart, logged when the backend ends. */
static struct { char name[40]; double us; long calls; } gp[64];
static int n_gp, gp_on;
static cudaEvent_t gp_ev[2];

extern "C" void ak_cuda_gemm_profile(int on) {
    if (on && !gp_on) { cudaEventCreate(&gp_ev[0]); cudaEventCreate(&gp_ev[1]); }
    gp_on = on;
}

extern "C" void ak_cuda_gemm_profile_dump(void) {
    if (!n_gp) return;
    ak_logf("akunu cuda GEMM parts:");
    for (int k = 0; k < n_gp; k++) ak_logf("  %-38s %6ld calls %10.1f us %8.2f us avg", gp[k].name, gp[k].calls, gp[k].us, gp[k].us / gp[k].calls);
    n_gp = 0;
}

static void gp_begin(cudaStream_t s) {
    if (gp_on) cudaEventRecord(gp_ev[0], s);
}

static void gp_end(cudaStream_t s, const char *what, int m, int n, int k) {
    if (!gp_on) return;
    cudaEventRecord(gp_ev[1], s);
    cudaEventSynchronize(gp_ev[1]);
    float ms = 0;
    cudaEventElapsedTime(&ms, gp_ev[0], gp_ev[1]);
    char key[40];
    snprintf(key, sizeof key, "%s %dx%dx%d", what, m, n, k);
    int i = 0;
    while (i < n_gp && strcmp(gp[i].name, key)) i++;
    if (i == n_gp && i < 64) { snprintf(gp[i].name, sizeof gp[i].name, "%s", key); n_gp++; }
    if (i < 64) { gp[i].us += 1e3 * ms; gp[i].calls++; }
}

extern "C" int ak_cuda_gemm(const ak_cuda_cmd *c, ak_cuda_ctx *x) {
    const ak_p_mm *p = (const ak_p_mm *)c->a.p;
    int n = c->rows;
    cudaStream_t st = x->stream;
    if (p->last_only) return ak_cuda_gemv_rows(&c->a, n, st);
    if (p->rowwise) {   /* AK_CUDA_GEMV_BATCH rows a launch */
        for (int r = 0; r < n; r += AK_CUDA_GEMV_BATCH) {
            int m = n - r < AK_CUDA_GEMV_BATCH ? n - r : AK_CUDA_GEMV_BATCH;
            ak_cuda_args a = c->a;   /* the kernels read n from their parameters: this launch's rows */
            a.b[3] = (float *)a.b[3] + (size_t)r * p->ld_x;
            a.b[4] = (float *)a.b[4] + (size_t)r * p->ld_y;
            a.patch &= ~AK_PATCH_N;
            ((ak_p_mm *)a.p)->n = m;
            int e = ak_cuda_gemv_rows(&a, m, st);
            if (e) return e;
        }
        return 0;
    }
    ak_cuda_blas *g = x->blas;
    const float *xin = (const float *)c->a.b[3];
    float *y = (float *)c->a.b[4];
    int converted = -1;   /* dtype class of xs: 0 f16, 1 bf16 */
    int col = 0;
    for (int s = 0; s < p->nseg; col += p->N[s], s++) {
        int dt = p->dtype[s], N = p->N[s], K = p->K;
        cublasStatus_t cs = CUBLAS_STATUS_SUCCESS;
        if (dt == AK_F32) {
            gp_begin(st);
            cs = mm(g, st, 2, N, K, n, c->a.b[s], xin, p->ld_x, y + col, p->ld_y);
            gp_end(st, "sgemm", N, n, K);
        } else {
            int cls = dt == AK_BF16 ? 1 : 0;
            if ((size_t)n * K * 2 > x->xs_bytes) return (int)cudaErrorInvalidValue;
            if (converted != cls) {
                gp_begin(st);
                if (cls) k_to16<__nv_bfloat16><<<blocks_for((int64_t)n * K, 256), 256, 0, st>>>(xin, p->ld_x, K, n, (__nv_bfloat16 *)x->xs);
                else k_to16<__half><<<blocks_for((int64_t)n * K, 256), 256, 0, st>>>(xin, p->ld_x, K, n, (__half *)x->xs);
                converted = cls;
                gp_end(st, "to16", n, K, 0);
            }
            if (dt == AK_F16 || dt == AK_BF16 || c->w16[s]) {   /* the weights in f16 already (kept: same values, one tile) */
                gp_begin(st);
                cs = mm(g, st, cls, N, K, n, c->w16[s] ? c->w16[s] : c->a.b[s], x->xs, K, y + col, p->ld_y);
                gp_end(st, "gemm16", N, n, K);
            } else {
                int64_t tile = ak_cuda_gemm_tile_rows(N, K);
                if ((size_t)tile * K * 2 > x->ws_bytes) return (int)cudaErrorInvalidValue;
                for (int64_t r0 = 0; r0 < N && cs == CUBLAS_STATUS_SUCCESS; r0 += tile) {
                    int nr = (int)(N - r0 < tile ? N - r0 : tile);
                    gp_begin(st);
                    ak_cuda_gemm_dequant(c->a.b[s], dt, K, r0, nr, x->ws, st);
                    gp_end(st, "dequant", nr, K, dt);
                    gp_begin(st);
                    cs = mm(g, st, 0, nr, K, n, x->ws, x->xs, K, y + col + r0, p->ld_y);
                    gp_end(st, "gemmq", nr, n, K);
                }
            }
        }
        if (cs != CUBLAS_STATUS_SUCCESS) return (int)cudaErrorUnknown;
        if (s == 0 && p->has_bias)
            k_add_bias<<<blocks_for((int64_t)n * N, 256), 256, 0, st>>>(y + col, p->ld_y, (const float *)c->a.b[5], N, n);
    }
    return (int)cudaGetLastError();
}
