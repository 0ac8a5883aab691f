/* Attention over the head-major KV cache ([kv_head][max_seq][head_dim] per layer), F32 or
 * F16 cache, GQA, causal mask, sliding window and logit softcap.
 * Decode: split-K (flash-decoding). Blocks (head, split) each take a fixed chunk of the
 * keys and write (max, sum, weighted V) to scratch; the last block of a head to finish
 * merges the splits. The grid is sized for the whole cache, so one captured graph serves
 * every position; splits past kv_len return at once.
 * Prefill: tiled flash attention (online softmax over key tiles in shared memory). */
#include "backend/cuda/common.cuh"

__device__ __forceinline__ float attn_score(float s, const ak_p_attn &p) {
    s *= p.scale;
    if (p.softcap > 0) s = p.softcap * tanhf(s / p.softcap);
    return s;
}

/* Keys visible to the query at position q: [lo, hi) (as the CPU's key_range). */
__device__ __forceinline__ void key_range(const ak_p_attn &p, int q, int *lo, int *hi) {
    *hi = p.causal ? q + 1 : p.kv_len;
    if (*hi > p.kv_len) *hi = p.kv_len;
    *lo = (p.window > 0 && q - p.window + 1 > 0) ? q - p.window + 1 : 0;
}

__device__ __forceinline__ float kv_at(const void *cache, int f16, size_t i) {
    return f16 ? __half2float(((const __half *)cache)[i]) : ((const float *)cache)[i];
}

extern "C" void ak_cuda_attn_splits(int max_seq, int *chunk, int *splits) {
    int c = (max_seq + 31) / 32;
    c = (c + 63) / 64 * 64;
    if (c < 64) c = 64;
    *chunk = c;
    *splits = (max_seq + c - 1) / c;
}

#define AK_DEC_THREADS 128

__global__ void __launch_bounds__(AK_DEC_THREADS) k_attn_decode(ak_cuda_args a, int chunk) {
    extern __shared__ float sm[];
    __shared__ float red[32];
    __shared__ bool last;
    AK_KERNEL_ENTRY(ak_p_attn, p);
    int hd = p.head_dim, group = p.n_heads / p.n_kv_heads;
    int h = blockIdx.x, s = blockIdx.y, S = gridDim.y;
    int qpos = p.pos + p.n - 1, lo, hi;
    key_range(p, qpos, &lo, &hi);
    int k0 = lo + s * chunk, k1 = min(hi, k0 + chunk);
    float *part = (float *)a.scratch + ((size_t)h * S + s) * (hd + 2);
    uint32_t *cnt = (uint32_t *)((float *)a.scratch + (size_t)p.n_heads * S * (hd + 2));
    const float *qv = (const float *)a.b[0] + (size_t)(p.n - 1) * p.ld_q + (size_t)h * hd;
    size_t base = (size_t)(h / group) * p.max_seq;
    if (k0 >= k1) {
        if (threadIdx.x == 0) { part[0] = -INFINITY; part[1] = 0.f; }
    } else {
        float *sq = sm, *sc = sm + hd;
        for (int d = threadIdx.x; d < hd; d += blockDim.x) sq[d] = qv[d];
        __syncthreads();
        /* a thread per key: every key's row is in flight at once (the rows are read
         * 16 bytes at a time, the cache lines shared by neighbouring loads) */
        for (int j = k0 + threadIdx.x; j < k1; j += blockDim.x) {
            float acc = 0;
            if (p.kv_f16 && hd % 8 == 0) {
                const uint4 *kr = (const uint4 *)((const __half *)a.b[1] + (base + j) * hd);
                for (int d8 = 0; d8 < hd / 8; d8++) {
                    uint4 u = kr[d8];
                    const __half2 *h2 = (const __half2 *)&u;
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        float2 f = __half22float2(h2[e]);
                        acc += sq[8 * d8 + 2 * e] * f.x + sq[8 * d8 + 2 * e + 1] * f.y;
                    }
                }
            } else if (!p.kv_f16 && hd % 4 == 0) {
                const float4 *kr = (const float4 *)((const float *)a.b[1] + (base + j) * hd);
                for (int d4 = 0; d4 < hd / 4; d4++) {
                    float4 f = kr[d4];
                    acc += sq[4 * d4] * f.x + sq[4 * d4 + 1] * f.y + sq[4 * d4 + 2] * f.z + sq[4 * d4 + 3] * f.w;
                }
            } else {
                for (int d = 0; d < hd; d++) acc += sq[d] * kv_at(a.b[1], p.kv_f16, (base + j) * hd + d);
            }
            sc[j - k0] = attn_score(acc, p);
        }
        __syncthreads();
        int nk = k1 - k0;
        float m = -INFINITY;
        for (int j = threadIdx.x; j < nk; j += blockDim.x) m = fmaxf(m, sc[j]);
        m = ak_block_max(m, red);
        float l = 0;
        for (int j = threadIdx.x; j < nk; j += blockDim.x) { float e = expf(sc[j] - m); sc[j] = e; l += e; }
        l = ak_block_sum(l, red);   /* its barriers also publish sc */
        for (int d = threadIdx.x; d < hd; d += blockDim.x) {
            float acc = 0;
            const size_t vb = (base + k0) * hd + d;
#pragma unroll 8
            for (int j = 0; j < nk; j++) acc += sc[j] * kv_at(a.b[2], p.kv_f16, vb + (size_t)j * hd);
            part[2 + d] = acc;
        }
        if (threadIdx.x == 0) { part[0] = m; part[1] = l; }
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&cnt[h], 1u) == (uint32_t)S - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    const volatile float *ph = (const volatile float *)a.scratch + (size_t)h * S * (hd + 2);
    float M = -INFINITY;
    for (int t = 0; t < S; t++) M = fmaxf(M, ph[(size_t)t * (hd + 2)]);
    float L = 0;
    for (int t = 0; t < S; t++) {
        float mt = ph[(size_t)t * (hd + 2)];
        if (mt != -INFINITY) L += ph[(size_t)t * (hd + 2) + 1] * expf(mt - M);
    }
    float *out = (float *)a.b[3] + (size_t)(p.n - 1) * p.n_heads * hd + (size_t)h * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc = 0;
        for (int t = 0; t < S; t++) {
            float mt = ph[(size_t)t * (hd + 2)];
            if (mt != -INFINITY) acc += ph[(size_t)t * (hd + 2) + 2 + d] * expf(mt - M);
        }
        out[d] = acc / L;
    }
    if (threadIdx.x == 0) cnt[h] = 0;
}

extern "C" int ak_cuda_attn_decode(const ak_cuda_cmd *c, ak_cuda_ctx *x) {
    const ak_p_attn *p = (const ak_p_attn *)c->a.p;
    dim3 grid(p->n_heads, c->aux[1]);
    size_t smem = ((size_t)p->head_dim + c->aux[0]) * sizeof(float);
    return (int)ak_launch(k_attn_decode, dim3(grid), dim3(AK_DEC_THREADS), smem, x->stream, c->a, c->aux[0]);
}

/* ---- prefill: QB queries of one head per block, key tiles of KB ---- */
#define AK_PF_QB 16
#define AK_PF_THREADS 256

static __host__ __device__ int pf_kb(int hd) { return hd <= 128 ? 64 : hd <= 256 ? 32 : 16; }
static __host__ __device__ size_t pf_smem(int hd) {
    int kb = pf_kb(hd);
    return ((size_t)AK_PF_QB * hd * 2 + (size_t)kb * (2 * hd + 1) + (size_t)AK_PF_QB * kb + 3 * AK_PF_QB) * sizeof(float);
}

__global__ void __launch_bounds__(AK_PF_THREADS) k_attn_prefill(ak_cuda_args a) {
    extern __shared__ float sm[];
    AK_KERNEL_ENTRY(ak_p_attn, p);
    int hd = p.head_dim, group = p.n_heads / p.n_kv_heads, KB = pf_kb(hd), QB = AK_PF_QB;
    int h = blockIdx.x, i0 = blockIdx.y * QB;
    if (i0 >= p.n) return;
    int nqr = min(QB, p.n - i0);
    float *Q = sm, *O = Q + QB * hd, *K = O + QB * hd, *V = K + KB * (hd + 1), *S = V + KB * hd;
    float *M = S + QB * KB, *L = M + QB, *C = L + QB;
    size_t base = (size_t)(h / group) * p.max_seq;
    for (int e = threadIdx.x; e < QB * hd; e += blockDim.x) {
        int r = e / hd, d = e % hd;
        Q[e] = r < nqr ? ((const float *)a.b[0])[(size_t)(i0 + r) * p.ld_q + (size_t)h * hd + d] : 0.f;
        O[e] = 0.f;
    }
    if (threadIdx.x < QB) { M[threadIdx.x] = -INFINITY; L[threadIdx.x] = 0.f; }
    int klo, khi, tlo, thi;
    key_range(p, p.pos + i0, &klo, &thi);
    key_range(p, p.pos + i0 + nqr - 1, &tlo, &khi);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int kb = klo; kb < khi; kb += KB) {
        int nk = min(KB, khi - kb);
        __syncthreads();
        for (int e = threadIdx.x; e < KB * hd; e += blockDim.x) {
            int j = e / hd, d = e % hd;
            size_t idx = (base + kb + j) * hd + d;
            K[j * (hd + 1) + d] = j < nk ? kv_at(a.b[1], p.kv_f16, idx) : 0.f;
            V[e] = j < nk ? kv_at(a.b[2], p.kv_f16, idx) : 0.f;
        }
        __syncthreads();
        for (int e = threadIdx.x; e < QB * KB; e += blockDim.x) {
            int r = e / KB, j = e % KB, key = kb + j, lo, hi;
            float s = -INFINITY;
            if (r < nqr && j < nk) {
                key_range(p, p.pos + i0 + r, &lo, &hi);
                if (key >= lo && key < hi) {
                    float acc = 0;
                    const float *qr = Q + r * hd, *kr = K + j * (hd + 1);
                    for (int d = 0; d < hd; d++) acc += qr[d] * kr[d];
                    s = attn_score(acc, p);
                }
            }
            S[e] = s;
        }
        __syncthreads();
        for (int r = w; r < QB; r += nw) {
            float mx = M[r];
            for (int j = lane; j < KB; j += 32) mx = fmaxf(mx, S[r * KB + j]);
            mx = ak_warp_max(mx);
            float corr = 1.f, sum = 0.f;
            if (mx == -INFINITY) {
                for (int j = lane; j < KB; j += 32) S[r * KB + j] = 0.f;
            } else {
                corr = expf(M[r] - mx);
                for (int j = lane; j < KB; j += 32) { float e = expf(S[r * KB + j] - mx); S[r * KB + j] = e; sum += e; }
            }
            sum = ak_warp_sum(sum);
            __syncwarp();
            if (lane == 0) {
                C[r] = corr;
                if (mx != -INFINITY) { L[r] = L[r] * corr + sum; M[r] = mx; }
            }
        }
        __syncthreads();
        for (int e = threadIdx.x; e < QB * hd; e += blockDim.x) {
            int r = e / hd, d = e % hd;
            float acc = O[e] * C[r];
            const float *sr = S + r * KB;
            for (int j = 0; j < nk; j++) acc += sr[j] * V[j * hd + d];
            O[e] = acc;
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < nqr * hd; e += blockDim.x) {
        int r = e / hd, d = e % hd;
        float inv = L[r] > 0 ? 1.0f / L[r] : 0.f;
        ((float *)a.b[3])[(size_t)(i0 + r) * p.n_heads * hd + (size_t)h * hd + d] = O[e] * inv;
    }
}

extern "C" int ak_cuda_attn_prefill(const ak_cuda_cmd *c, ak_cuda_ctx *x) {
    const ak_p_attn *p = (const ak_p_attn *)c->a.p;
    dim3 grid(p->n_heads, ak_cdiv(c->rows, AK_PF_QB));
    return (int)ak_launch(k_attn_prefill, dim3(grid), dim3(AK_PF_THREADS), pf_smem(p->head_dim), x->stream, c->a);
}

extern "C" int ak_cuda_init_attention(void) {
    cudaError_t e = cudaFuncSetAttribute(k_attn_prefill, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)pf_smem(512));
    if (e == cudaSuccess) e = cudaFuncSetAttribute(k_attn_decode, cudaFuncAttributeMaxDynamicSharedMemorySize, 160 * 1024);
    return (int)e;
}
