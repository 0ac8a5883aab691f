/* Attention over the head-major KV cache ([kv_head][max_seq][head_dim] per layer), F32 or
 * F16 cache, GQA, causal mask, sliding window and logit softcap.
 * Decode: split-K (flash-decoding), see k_attn_decode.
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

/* Decode keys per block: about 64 splits of the cache, at least 16 keys each (one
 * unrolled step of every warp). */
extern "C" void ak_cuda_attn_splits(int max_seq, int *chunk, int *splits) {
    int c = (max_seq + 63) / 64;
    c = (c + 15) / 16 * 16;
    *chunk = c;
    *splits = (max_seq + c - 1) / c;
}

#define AK_DEC_WARPS 4
#define AK_DEC_UNROLL 4

/* Decode, flash-decoding style. A block takes one KV head, up to 32 / DPL of the query
 * heads that share it (GQA: K and V are read once for all of them) and one chunk of
 * keys; its warps take alternate keys, a lane per DPL of the head's dimensions
 * (d = lane + 32 e), and keep an online softmax per head, so one pass reads K and V.
 * The warps merge in shared memory, the block writes (max, sum, weighted V) per head,
 * and the last block of the KV head to finish merges the splits. Splits past kv_len
 * return at once (the grid is sized for the whole cache). */
template <int DPL>
__global__ void __launch_bounds__(AK_DEC_WARPS * 32) k_attn_decode(ak_cuda_args a, int chunk) {
    constexpr int MG = 32 / DPL;
    __shared__ float sh[AK_DEC_WARPS][MG][32 * DPL + 2];
    __shared__ bool last;
    AK_KERNEL_ENTRY(ak_p_attn, p);
    const int hd = p.head_dim, group = p.n_heads / p.n_kv_heads, passes = (group + MG - 1) / MG;
    const int kvh = blockIdx.x / passes, g0 = (blockIdx.x % passes) * MG, G = min(MG, group - g0);
    const int s = blockIdx.y;
    int lo, hi;
    key_range(p, p.pos + p.n - 1, &lo, &hi);
    const int S = (hi - lo + chunk - 1) / chunk;   /* splits in use */
    if (s >= S) return;
    const int k0 = lo + s * chunk, k1 = min(hi, k0 + chunk);
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const size_t base = (size_t)kvh * p.max_seq * hd;
    const float *qv = (const float *)a.b[0] + (size_t)(p.n - 1) * p.ld_q + (size_t)(kvh * group + g0) * hd;
    float q[MG][DPL], acc[MG][DPL], m[MG], l[MG];
#pragma unroll
    for (int g = 0; g < MG; g++) {
        m[g] = -INFINITY;
        l[g] = 0.f;
#pragma unroll
        for (int e = 0; e < DPL; e++) {
            int d = lane + 32 * e;
            q[g][e] = g < G && d < hd ? qv[(size_t)g * hd + d] : 0.f;
            acc[g][e] = 0.f;
        }
    }
    /* AK_DEC_UNROLL keys per warp at a time: all their K and V loads in flight together */
    for (int j0 = k0 + w; j0 < k1; j0 += AK_DEC_WARPS * AK_DEC_UNROLL) {
        float kk[AK_DEC_UNROLL][DPL], vv[AK_DEC_UNROLL][DPL];
#pragma unroll
        for (int t = 0; t < AK_DEC_UNROLL; t++) {
            int j = j0 + t * AK_DEC_WARPS;
#pragma unroll
            for (int e = 0; e < DPL; e++) {
                int d = lane + 32 * e;
                bool in = j < k1 && d < hd;
                kk[t][e] = in ? kv_at(a.b[1], p.kv_f16, base + (size_t)j * hd + d) : 0.f;
                vv[t][e] = in ? kv_at(a.b[2], p.kv_f16, base + (size_t)j * hd + d) : 0.f;
            }
        }
#pragma unroll
        for (int t = 0; t < AK_DEC_UNROLL; t++) {
            if (j0 + t * AK_DEC_WARPS >= k1) break;
#pragma unroll
            for (int g = 0; g < MG; g++) {
                if (g >= G) break;
                float dot = 0.f;
#pragma unroll
                for (int e = 0; e < DPL; e++) dot += q[g][e] * kk[t][e];
                float sc = attn_score(ak_warp_sum(dot), p);
                float mn = fmaxf(m[g], sc), c = expf(m[g] - mn), pr = expf(sc - mn);
                l[g] = l[g] * c + pr;
#pragma unroll
                for (int e = 0; e < DPL; e++) acc[g][e] = acc[g][e] * c + pr * vv[t][e];
                m[g] = mn;
            }
        }
    }
#pragma unroll
    for (int g = 0; g < MG; g++) {
        if (g >= G) break;
        if (lane == 0) { sh[w][g][0] = m[g]; sh[w][g][1] = l[g]; }
#pragma unroll
        for (int e = 0; e < DPL; e++) sh[w][g][2 + lane + 32 * e] = acc[g][e];
    }
    __syncthreads();
    /* the warps' partial softmaxes into this split's (max, sum, V) per head */
    float *scratch = (float *)a.scratch;
    const int SM = gridDim.y;
    for (int t = threadIdx.x; t < G * hd; t += blockDim.x) {
        int g = t / hd, d = t % hd;
        float M = -INFINITY;
        for (int v = 0; v < AK_DEC_WARPS; v++) M = fmaxf(M, sh[v][g][0]);
        float L = 0.f, A = 0.f;
        if (M != -INFINITY)
            for (int v = 0; v < AK_DEC_WARPS; v++) {
                float f = expf(sh[v][g][0] - M);
                L += sh[v][g][1] * f;
                A += sh[v][g][2 + d] * f;
            }
        float *part = scratch + ((size_t)(kvh * group + g0 + g) * SM + s) * (hd + 2);
        part[2 + d] = A;
        if (d == 0) { part[0] = M; part[1] = L; }
    }
    uint32_t *cnt = (uint32_t *)(scratch + (size_t)p.n_heads * SM * (hd + 2)) + blockIdx.x;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(cnt, 1u) == (uint32_t)S - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int t = threadIdx.x; t < G * hd; t += blockDim.x) {
        int h = kvh * group + g0 + t / hd, d = t % hd;
        const volatile float *ph = (const volatile float *)scratch + (size_t)h * SM * (hd + 2);
        float M = -INFINITY;
        for (int u = 0; u < S; u++) M = fmaxf(M, ph[(size_t)u * (hd + 2)]);
        float L = 0.f, A = 0.f;
        for (int u = 0; u < S; u++) {
            float mt = ph[(size_t)u * (hd + 2)];
            if (mt == -INFINITY) continue;
            float f = expf(mt - M);
            L += ph[(size_t)u * (hd + 2) + 1] * f;
            A += ph[(size_t)u * (hd + 2) + 2 + d] * f;
        }
        ((float *)a.b[3])[(size_t)(p.n - 1) * p.n_heads * hd + (size_t)h * hd + d] = L > 0.f ? A / L : 0.f;
    }
    if (threadIdx.x == 0) *cnt = 0;
}

extern "C" int ak_cuda_attn_decode(const ak_cuda_cmd *c, ak_cuda_ctx *x) {
    const ak_p_attn *p = (const ak_p_attn *)c->a.p;
    int hd = p->head_dim, group = p->n_heads / p->n_kv_heads;
    int dpl = hd <= 32 ? 1 : hd <= 64 ? 2 : hd <= 128 ? 4 : 8;
    int passes = (group + 32 / dpl - 1) / (32 / dpl);
    dim3 grid(p->n_kv_heads * passes, c->aux[1]), blk(AK_DEC_WARPS * 32);
    switch (dpl) {
    case 1: return (int)ak_launch(k_attn_decode<1>, grid, blk, 0, x->stream, c->a, c->aux[0]);
    case 2: return (int)ak_launch(k_attn_decode<2>, grid, blk, 0, x->stream, c->a, c->aux[0]);
    case 4: return (int)ak_launch(k_attn_decode<4>, grid, blk, 0, x->stream, c->a, c->aux[0]);
    default: return (int)ak_launch(k_attn_decode<8>, grid, blk, 0, x->stream, c->a, c->aux[0]);
    }
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
    return (int)e;
}
