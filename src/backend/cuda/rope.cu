/* Fused [bias +] [per-head RMSNorm (Qwen3) +] RoPE [+ rotation] + KV-cache write (F32,
 * F16, Q8_0 or Q4_0, K and V each): one warp per (token, head). Angles are pos * inv_freq
 * in float32 with accurate cosf/sinf, as the CPU and the float32 reference compute them. */
#include "backend/cuda/common.cuh"

#define AK_ROPE_MAX_HD 512
#define AK_ROPE_WARPS 4

/* One warp per (token, head): the head lives in the warp's slice of shared memory, so
 * the steps need no block barrier (a decode step is a few dozen heads: latency, not
 * bandwidth, is what counts). */
__global__ void __launch_bounds__(AK_ROPE_WARPS * 32) k_rope_kv(ak_cuda_args a) {
    __shared__ float sxs[AK_ROPE_WARPS][AK_ROPE_MAX_HD], svs[AK_ROPE_WARPS][AK_ROPE_MAX_HD];
    AK_KERNEL_ENTRY(ak_p_rope_kv, p);
    const int lane = threadIdx.x & 31, hd = p.head_dim, nh = p.n_heads, per = nh + p.n_kv_heads;
    const int item = blockIdx.x * AK_ROPE_WARPS + (threadIdx.x >> 5);
    const int i = item / per, h = item % per, pos = p.pos + i;
    if (i >= p.n) return;
    float *sx = sxs[threadIdx.x >> 5];
    const int nq = nh * hd, nk = p.n_kv_heads * hd;
    const float *bias = (const float *)a.b[6];
    float *row = (float *)a.b[0] + (size_t)i * p.ld;
    const bool is_q = h < nh, has_bias = p.flags & AK_ROPE_F_BIAS;
    const int off = is_q ? h * hd : nq + (h - nh) * hd;
    float *x = row + off, ss = 0.f;
    for (int k = lane; k < hd; k += 32) {
        float v = has_bias ? x[k] + bias[off + k] : x[k];
        sx[k] = v;
        ss += v * v;
    }
    if (p.flags & AK_ROPE_F_QKNORM) {
        const float *w = (const float *)(is_q ? a.b[1] : a.b[2]);
        const float r = 1.0f / sqrtf(ak_warp_sum(ss) / (float)hd + p.eps);
        for (int k = lane; k < hd; k += 32) sx[k] = sx[k] * r * w[k];
    }
    __syncwarp();
    if (p.n_rot) {   /* a lane owns whole pairs */
        const float *inv_freq = (const float *)a.b[3];
        const int half = p.n_rot / 2;
        for (int k = lane; k < half; k += 32) {
            float th = (float)pos * inv_freq[k];
            float cs = cosf(th), sn = sinf(th);
            int ia = p.style == AK_ROPE_NEOX ? k : 2 * k, ib = p.style == AK_ROPE_NEOX ? k + half : 2 * k + 1;
            float x0 = sx[ia], x1 = sx[ib];
            sx[ia] = x0 * cs - x1 * sn;
            sx[ib] = x0 * sn + x1 * cs;
        }
        __syncwarp();
    }
    ak_wht_warp(sx, hd, ak_kv_rot(p.kt, hd, 0));   /* a rotated key cache: Q and K alike */
    for (int k = lane; k < hd; k += 32) x[k] = sx[k];
    if (is_q) return;
    const int kh = h - nh;
    const size_t crow = ak_kv_row(kh, pos, p.cap, p.max_seq);
    ak_kv_store(a.b[4], p.kt, crow, sx, hd);
    float *v = row + nq + nk + kh * hd, *sv = svs[threadIdx.x >> 5];
    for (int k = lane; k < hd; k += 32) sv[k] = has_bias ? v[k] + bias[nq + nk + kh * hd + k] : v[k];
    __syncwarp();
    const int rv = ak_kv_rot(p.vt, hd, 1);
    ak_wht_warp(sv, hd, rv);
    if (has_bias || rv)   /* the row as the CPU leaves it */
        for (int k = lane; k < hd; k += 32) v[k] = sv[k];
    ak_kv_store(a.b[5], p.vt, crow, sv, hd);
}

extern "C" int ak_cuda_rope_kv(const ak_cuda_cmd *c, ak_cuda_ctx *x) {
    const ak_p_rope_kv *p = (const ak_p_rope_kv *)c->a.p;
    if (p->head_dim > AK_ROPE_MAX_HD) return (int)cudaErrorInvalidValue;
    int items = c->rows * (p->n_heads + p->n_kv_heads);
    return (int)ak_launch(k_rope_kv, dim3(ak_cdiv(items, AK_ROPE_WARPS)), dim3(AK_ROPE_WARPS * 32), 0, x->stream, c->a);
}
