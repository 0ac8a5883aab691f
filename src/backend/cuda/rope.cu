/* Fused [bias +] [per-head RMSNorm (Qwen3) +] RoPE + KV-cache write: one block per
 * (token, head). Angles are pos * inv_freq in float32 with accurate cosf/sinf, as the
 * CPU and the float32 reference compute them. */
#include "backend/cuda/common.cuh"
extern "C" {
#include "model/arch.h"
}

#define AK_ROPE_MAX_HD 512

__device__ __forceinline__ void store_row(void *cache, int kv_f16, size_t idx, const float *x, int hd) {
    if (kv_f16) {
        __half *d = (__half *)cache + idx * (size_t)hd;
        for (int k = threadIdx.x; k < hd; k += blockDim.x) d[k] = __float2half_rn(x[k]);
    } else {
        float *d = (float *)cache + idx * (size_t)hd;
        for (int k = threadIdx.x; k < hd; k += blockDim.x) d[k] = x[k];
    }
}

__global__ void k_rope_kv(ak_cuda_args a) {
    __shared__ float sx[AK_ROPE_MAX_HD], red[32];
    AK_KERNEL_ENTRY(ak_p_rope_kv, p);
    int hd = p.head_dim, nh = p.n_heads, nkv = p.n_kv_heads, per = nh + nkv;
    int i = blockIdx.x / per, h = blockIdx.x % per, pos = p.pos + i;
    if (i >= p.n) return;
    int nq = nh * hd, nk = nkv * hd;
    const float *bias = (const float *)a.b[6];
    float *row = (float *)a.b[0] + (size_t)i * p.ld;
    bool is_q = h < nh;
    int off = is_q ? h * hd : nq + (h - nh) * hd;
    float *x = row + off;
    bool has_bias = p.flags & AK_ROPE_F_BIAS;
    for (int k = threadIdx.x; k < hd; k += blockDim.x) sx[k] = has_bias ? x[k] + bias[off + k] : x[k];
    __syncthreads();
    if (p.flags & AK_ROPE_F_QKNORM) {
        const float *w = (const float *)(is_q ? a.b[1] : a.b[2]);
        float ss = 0;
        for (int k = threadIdx.x; k < hd; k += blockDim.x) ss += sx[k] * sx[k];
        ss = ak_block_sum(ss, red);
        float r = 1.0f / sqrtf(ss / (float)hd + p.eps);
        for (int k = threadIdx.x; k < hd; k += blockDim.x) sx[k] = sx[k] * r * w[k];
        __syncthreads();
    }
    if (p.n_rot) {
        const float *inv_freq = (const float *)a.b[3];
        int half = p.n_rot / 2;
        for (int k = threadIdx.x; k < half; k += blockDim.x) {
            float th = (float)pos * inv_freq[k];
            float cs = cosf(th), sn = sinf(th);
            int ia = p.style == AK_ROPE_NEOX ? k : 2 * k, ib = p.style == AK_ROPE_NEOX ? k + half : 2 * k + 1;
            float x0 = sx[ia], x1 = sx[ib];
            sx[ia] = x0 * cs - x1 * sn;
            sx[ib] = x0 * sn + x1 * cs;
        }
        __syncthreads();
    }
    for (int k = threadIdx.x; k < hd; k += blockDim.x) x[k] = sx[k];
    if (is_q) return;
    int kh = h - nh;
    size_t idx = (size_t)kh * p.max_seq + (size_t)pos;
    store_row(a.b[4], p.kv_f16, idx, sx, hd);
    float *v = row + nq + nk + kh * hd;
    __syncthreads();
    for (int k = threadIdx.x; k < hd; k += blockDim.x) {
        float vv = has_bias ? v[k] + bias[nq + nk + kh * hd + k] : v[k];
        if (has_bias) v[k] = vv;
        sx[k] = vv;
    }
    __syncthreads();
    store_row(a.b[5], p.kv_f16, idx, sx, hd);
}

extern "C" int ak_cuda_rope_kv(const ak_cuda_cmd *c, ak_cuda_ctx *x) {
    const ak_p_rope_kv *p = (const ak_p_rope_kv *)c->a.p;
    if (p->head_dim > AK_ROPE_MAX_HD) return (int)cudaErrorInvalidValue;
    int t = p->head_dim / 2 < 32 ? 32 : p->head_dim / 2 > 256 ? 256 : p->head_dim / 2;
    t = (t + 31) / 32 * 32;
    return (int)ak_launch(k_rope_kv, dim3(c->rows * (p->n_heads + p->n_kv_heads)), dim3(t), 0, x->stream, c->a);
}
