/* Embedding lookup per dtype, gated activation, logit softcap, the Q4_0/Q8_0 row
 * repack, the read-bandwidth probe and the kernels' one-time setup. */
#include "backend/cuda/quant.cuh"
#include <float.h>
#include <limits.h>
#include <stdlib.h>

/* ---- embedding: one block per token row ---- */
/* o (+)= row of dtype * scale; each thread touches the same elements in every call. */
__device__ void embed_row(float *o, int dtype, const uint8_t *row, int dim, float scale, bool add) {
    if (ak_cuda_is_float(dtype)) {
        for (int k = threadIdx.x; k < dim; k += blockDim.x) {
            float v = dtype == AK_F32 ? ((const float *)row)[k]
                    : dtype == AK_F16 ? __half2float(((const __half *)row)[k])
                    : __bfloat162float(((const __nv_bfloat16 *)row)[k]);
            v = scale != 1.f ? v * scale : v;
            o[k] = add ? o[k] + v : v;
        }
        return;
    }
    int nb32 = dim / 32;
    for (int s = threadIdx.x; s < nb32; s += blockDim.x) {
        float v[32];
        ak_dq32(dtype, row, nb32, s, v);
        for (int l = 0; l < 32; l++) {
            float u = scale != 1.f ? v[l] * scale : v[l];
            o[32 * s + l] = add ? o[32 * s + l] + u : u;
        }
    }
}

/* Encoders add position_embd[pos + i] (less the row's segment start: AK_EMBED_F_SEG, b[5])
 * and token type 0's row (b[3], b[4]). */
__global__ void k_embed(ak_cuda_args a) {
    AK_KERNEL_ENTRY(ak_p_embed, p);
    int i = blockIdx.x;
    if (i >= p.n) return;
    int32_t id = ak_tok_ptr(a, st_)[i];
    float *o = (float *)a.b[2] + (size_t)i * p.dim;
    embed_row(o, p.dtype, (const uint8_t *)a.b[0] + (size_t)id * ak_cuda_row_bytes(p.dtype, p.dim), p.dim, p.scale, false);
    if (p.flags & AK_EMBED_F_POS) {
        const int at = p.pos + i - ((p.flags & AK_EMBED_F_SEG) ? ((const int32_t *)a.b[5])[2 * i] : 0);
        embed_row(o, p.pos_dtype, (const uint8_t *)a.b[3] + (size_t)at * ak_cuda_row_bytes(p.pos_dtype, p.dim), p.dim, 1.f, true);
    }
    if (p.flags & AK_EMBED_F_TYPE) embed_row(o, p.type_dtype, (const uint8_t *)a.b[4], p.dim, 1.f, true);
}

extern "C" int ak_cuda_embed(const ak_cuda_cmd *c, ak_cuda_ctx *x) {
    return (int)ak_launch(k_embed, dim3(c->rows), dim3(128), 0, x->stream, c->a);
}

/* ---- out = act(g) * u (gated) or act(g) over n rows ---- */
__global__ void k_act_gate(ak_cuda_args a) {
    AK_KERNEL_ENTRY(ak_p_act, p);
    int i = blockIdx.y;
    if (i >= p.n) return;
    const float *g = (const float *)a.b[0] + (size_t)i * p.ld_gu;
    float *o = (float *)a.b[1] + (size_t)i * p.K;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < p.K; k += gridDim.x * blockDim.x)
        o[k] = p.gated ? ak_dev_act(p.act, g[k]) * g[p.K + k] : ak_dev_act(p.act, g[k]);
}

extern "C" int ak_cuda_act_gate(const ak_cuda_cmd *c, ak_cuda_ctx *x) {
    const ak_p_act *p = (const ak_p_act *)c->a.p;
    dim3 grid(ak_cdiv(p->K, 256) < 64 ? ak_cdiv(p->K, 256) : 64, c->rows);
    return (int)ak_launch(k_act_gate, grid, dim3(256), 0, x->stream, c->a);
}

/* ---- x = cap * tanh(x / cap) ---- */
__global__ void k_softcap(ak_cuda_args a) {
    AK_KERNEL_ENTRY(ak_p_softcap, p);
    float *v = (float *)a.b[0];
    int64_t n = (int64_t)p.n * p.cols;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        v[i] = p.cap * tanhf(v[i] / p.cap);
}

extern "C" int ak_cuda_softcap(const ak_cuda_cmd *c, ak_cuda_ctx *x) {
    const ak_p_softcap *p = (const ak_p_softcap *)c->a.p;
    int64_t n = (int64_t)c->rows * p->cols;
    int blocks = ak_cdiv(n, 256);
    if (blocks > 1024) blocks = 1024;
    return (int)ak_launch(k_softcap, dim3(blocks), dim3(256), 0, x->stream, c->a);
}

/* ---- repack: per row, block b's quants to qs[b], its f16 scale to d[b] after all quants ---- */
__global__ void k_repack(uint8_t *w, int dtype, int nb, size_t row_bytes) {
    extern __shared__ uint8_t srow[];
    uint8_t *row = w + (size_t)blockIdx.x * row_bytes;
    for (size_t i = threadIdx.x; i < row_bytes; i += blockDim.x) srow[i] = row[i];
    __syncthreads();
    int qb = dtype == AK_Q4_0 ? 16 : 32, bb = qb + 2;
    for (int i = threadIdx.x; i < nb * bb; i += blockDim.x) {
        int b = i / bb, o = i % bb;
        uint8_t v = srow[i];
        if (o < 2) row[(size_t)nb * qb + 2 * b + o] = v;
        else row[(size_t)b * qb + o - 2] = v;
    }
}

extern "C" int ak_cuda_init_attention(void);
extern "C" int ak_cuda_init_gemv(void);
extern "C" int ak_cuda_init_sample(void);

int ak_cuda_pdl;

extern "C" int ak_cuda_kernels_init(int pdl) {
    int dev = 0, major = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    ak_cuda_pdl = major >= 9 && pdl;
    extern int ak_cuda_n_sm;
    cudaDeviceGetAttribute(&ak_cuda_n_sm, cudaDevAttrMultiProcessorCount, dev);
    cudaError_t e = cudaFuncSetAttribute(k_repack, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
    if (e != cudaSuccess) return (int)e;
    int r = ak_cuda_init_gemv();
    if (!r) r = ak_cuda_init_sample();
    return r ? r : ak_cuda_init_attention();
}

extern "C" int ak_cuda_is_repacked(int dtype) { return dtype == AK_Q4_0 || dtype == AK_Q8_0; }

extern "C" int ak_cuda_repack(void *w, int dtype, int64_t K, int64_t N, cudaStream_t s) {
    if (!ak_cuda_is_repacked(dtype) || N <= 0) return 0;
    size_t rb = ak_cuda_row_bytes(dtype, K);
    if (rb > 200 * 1024) return (int)cudaErrorInvalidValue;
    for (int64_t r0 = 0; r0 < N; r0 += 65535) {
        int nr = (int)(N - r0 < 65535 ? N - r0 : 65535);
        k_repack<<<nr, 256, rb, s>>>((uint8_t *)w + (size_t)r0 * rb, dtype, (int)(K / 32), rb);
    }
    return (int)cudaGetLastError();
}

/* ---- read bandwidth: every block streams its slice with 16-byte loads ---- */
__global__ void k_read(const uint4 *p, size_t n, uint32_t *sink) {
    uint32_t x = 0;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
        uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride), c = __ldcs(p + i + 2 * stride), d = __ldcs(p + i + 3 * stride);
        x ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n; i += stride) { uint4 a = __ldcs(p + i); x ^= a.x ^ a.y ^ a.z ^ a.w; }
    if (x == 0x9e3779b9u) *sink = x;   /* keeps the loads; practically never taken */
}

extern "C" double ak_cuda_read_bandwidth(cudaStream_t s) {
    size_t bytes = (size_t)2 << 30;
    void *buf = NULL;
    if (cudaMalloc(&buf, bytes + 256) != cudaSuccess) { cudaGetLastError(); return 0; }
    cudaMemsetAsync(buf, 1, bytes + 256, s);
    int dev, nsm;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    double best = 0;
    for (int rep = 0; rep < 10; rep++) {
        cudaEventRecord(e0, s);
        k_read<<<nsm * 8, 512, 0, s>>>((const uint4 *)buf, bytes / 16, (uint32_t *)((uint8_t *)buf + bytes));
        cudaEventRecord(e1, s);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        double gbps = ms > 0 ? (double)bytes / (ms * 1e-3) / 1e9 : 0;
        if (gbps > best) best = gbps;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(buf);
    return cudaGetLastError() == cudaSuccess ? best : 0;
}
