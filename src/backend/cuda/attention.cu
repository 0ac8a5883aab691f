/* Attention over the head-major KV cache ([kv_head][max_seq][head_dim] per layer, or
 * [kv_head][cap] slots, a ring, for a sliding-window layer: ak_kv_row): F32 or
 * F16 (K and V alike), Q8_0 and Q4_0 in any mix (rows of blocks, rotated: ak_kv_rot; the
 * output is rotated back), and for heads of 64, 128 and 256 F16 beside a quantized cache
 * (the tensor-core kernels dequantize tiles to f16); GQA, causal mask,
 * sliding window, logit softcap.
 * Decode: split-K (flash-decoding), see k_attn_decode and k_attn_decode_tc.
 * Prefill: tiled flash attention (online softmax over key tiles in shared memory), on
 * tensor cores for heads of 64, 128 or 256 and any cache but F32 (k_attn_prefill_tc). */
#include <type_traits>
#include "backend/cuda/common.cuh"

__device__ __forceinline__ float attn_score(float s, const ak_p_attn &p) {
    s *= p.scale;
    if (p.softcap > 0) s = p.softcap * tanhf(s / p.softcap);
    return s;
}

/* Rows a KV head keeps: a sliding-window layer's ring (key position j in slot j % rows),
 * or max_seq. */
__device__ __forceinline__ int kv_rows(const ak_p_attn &p) { return p.cap > 0 ? p.cap : p.max_seq; }
/* The slot of key j in a run of at most `rows` keys from k0, whose slot is s0. */
__device__ __forceinline__ int kv_slot(int j, int k0, int s0, int rows) {
    const int s = s0 + (j - k0);
    return s >= rows ? s - rows : s;
}

#define AK_DEC_WARPS 8
/* DPL neighbouring values of a cache row (F32 or F16) as floats, in one vector load. */
template <int DPL, bool F16>
__device__ __forceinline__ void load_dpl(const void *cache, size_t i, float (&v)[DPL]) {
    if (F16) {
        const __half *c = (const __half *)cache + i;
        uint32_t w[(DPL + 1) / 2];
        if (DPL == 8) { uint4 u = *(const uint4 *)c; w[0] = u.x; w[1] = u.y; w[2] = u.z; w[3] = u.w; }
        else if (DPL == 4) { uint2 u = *(const uint2 *)c; w[0] = u.x; w[1] = u.y; }
        else if (DPL == 2) w[0] = *(const uint32_t *)c;
        else { v[0] = __half2float(*c); return; }
#pragma unroll
        for (int k = 0; k < DPL / 2; k++) {
            float2 f = __half22float2(*(const __half2 *)&w[k]);
            v[2 * k] = f.x;
            v[2 * k + 1] = f.y;
        }
    } else {
        const float *c = (const float *)cache + i;
#pragma unroll
        for (int k = 0; k < DPL; k += 4 < DPL ? 4 : DPL) {
            if (DPL >= 4) { float4 f = *(const float4 *)(c + k); v[k] = f.x; v[k + 1] = f.y; v[k + 2] = f.z; v[k + 3] = f.w; }
            else if (DPL == 2) { float2 f = *(const float2 *)c; v[0] = f.x; v[1] = f.y; }
            else v[0] = *c;
        }
    }
}
#define AK_DEC_UNROLL 4

/* A lane's DPL values of a Q8_0 or Q4_0 cache row (heads of 32 and 256, where the scalar
 * kernel runs). */
template <int DPL, int T>
__device__ __forceinline__ void load_q(const uint8_t *row, int lane, float (&v)[DPL]) {
#pragma unroll
    for (int e = 0; e < DPL; e++) v[e] = ak_kv_val(row, T, 0, DPL * lane + e, 32 * DPL);
}

/* Decode: the first query head of a block's group and how many heads (MG) a block takes:
 * the head group rounded up to a power of two, at most 8 and 32 / DPL (registers); groups
 * past that take several passes of blocks. */
static __host__ __device__ int dec_mg(int head_dim, int group) {
    const int dpl = head_dim / 32, m8 = 32 / dpl < 8 ? 32 / dpl : 8;
    return group <= 1 ? 1 : group <= 2 ? 2 : (group <= 4 || m8 == 4) ? 4 : m8;
}


/* The folded rope's cos and sin of this position, per rotated pair (cs[0], cs[1]). */
template <int DPL>
__device__ __forceinline__ void rope_table(const ak_cuda_args &a, const ak_p_attn &p, float (*cs)[16 * DPL]) {
    const int half = a.rope.n_rot / 2, pos = p.pos + p.n - 1;
    for (int k = threadIdx.x; k < half; k += blockDim.x) {
        const float th = (float)pos * ((const float *)a.rb[2])[k];
        cs[0][k] = cosf(th);
        cs[1][k] = sinf(th);
    }
}

/* ak_wht_warp's transform of order r (0: none) on a row of 32 DPL values held DPL
 * neighbours a lane: the same butterflies in the same order (spans under DPL within a
 * lane, the others with the lane h / DPL away), so the same floats, without a barrier. */
template <int DPL> __device__ __forceinline__ void wht_regs(float (&v)[DPL], int r) {
    if (r <= 1) return;
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int h = 1; h < 32 * DPL; h *= 2) {
        if (h >= r) break;
        if (h < DPL) {
#pragma unroll
            for (int e = 0; e < DPL; e++)
                if (!(e & h)) {
                    const float u = v[e], w = v[e + h];
                    v[e] = u + w;
                    v[e + h] = u - w;
                }
        } else {
            const int o = h / DPL;
            const bool hi = lane & o;   /* this lane holds the pair's upper half */
#pragma unroll
            for (int e = 0; e < DPL; e++) {
                const float q = __shfl_xor_sync(0xffffffffu, v[e], o);
                v[e] = hi ? q - v[e] : v[e] + q;
            }
        }
    }
    const float sc = 1.0f / sqrtf((float)r);
#pragma unroll
    for (int e = 0; e < DPL; e++) v[e] *= sc;
}

/* The rope_kv folded into a one-row decode attention (AK_FUSE_ROPE), with k_rope_kv's
 * arithmetic: the block ropes (and head-normalises, and over a quantized cache rotates:
 * ak_kv_rot) its own query heads from the QKV row into sq[0, G); the block whose keys end
 * at this position (cur) also makes its KV head's key and value (sq[G], sq[G + 1]) and
 * writes them to the cache (types KT, VT), where its key loop reads them back. Blocks of
 * other query-head passes do the same: they write the same values. */
template <int DPL, int KT, int VT>
__device__ void rope_fold(const ak_cuda_args &a, const ak_p_attn &p, int kvh, int q0, int G, bool cur, float (*sq)[32 * DPL],
                          const float (*cs)[16 * DPL]) {
    constexpr int HD = 32 * DPL;
    const ak_p_rope_kv &r = a.rope;
    const int pos = p.pos + p.n - 1, nq = p.n_heads * HD, nk = p.n_kv_heads * HD;
    const int lane = threadIdx.x & 31, nh = G + (cur ? 2 : 0);
    const float *row = (const float *)a.b[0] + (size_t)(p.n - 1) * p.ld_q, *bias = (const float *)a.rb[3];
    const bool has_bias = r.flags & AK_ROPE_F_BIAS;
    for (int h = threadIdx.x >> 5; h < nh; h += blockDim.x >> 5) {   /* a warp per head */
        const int o = h < G ? (q0 + h) * HD : h == G ? nq + kvh * HD : nq + nk + kvh * HD;
        float ss = 0.f;
        for (int k = lane; k < HD; k += 32) {
            float v = has_bias ? row[o + k] + bias[o + k] : row[o + k];
            sq[h][k] = v;
            ss += v * v;
        }
        if ((r.flags & AK_ROPE_F_QKNORM) && h <= G) {
            const float *w = (const float *)(h < G ? a.rb[0] : a.rb[1]);
            const float rr = 1.0f / sqrtf(ak_warp_sum(ss) / (float)HD + r.eps);
            for (int k = lane; k < HD; k += 32) sq[h][k] = sq[h][k] * rr * w[k];
        }
    }
    __syncthreads();
    if (r.n_rot) {
        const int half = r.n_rot / 2, nr = G + (cur ? 1 : 0);   /* queries and the key */
        for (int t = threadIdx.x; t < nr * half; t += blockDim.x) {
            const int h = t / half, k = t % half;
            const float c = cs[0][k], sn = cs[1][k];
            int ia = r.style == AK_ROPE_NEOX ? k : 2 * k, ib = r.style == AK_ROPE_NEOX ? k + half : 2 * k + 1;
            float x0 = sq[h][ia], x1 = sq[h][ib];
            sq[h][ia] = x0 * c - x1 * sn;
            sq[h][ib] = x0 * sn + x1 * c;
        }
        __syncthreads();
    }
    if constexpr (KT == AK_Q8_0 || KT == AK_Q4_0 || VT != KT) {
        /* a warp a row: queries and key rotated alike (a rotated key cache), the value by
         * its own order, in registers (wht_regs); the key and value stored */
        const int RK = ak_kv_rot(KT, HD, 0), RV = ak_kv_rot(VT, HD, 1);   /* constants here */
        for (int h = threadIdx.x >> 5; h < nh; h += blockDim.x >> 5) {
            float v[DPL];
#pragma unroll
            for (int e = 0; e < DPL; e++) v[e] = sq[h][DPL * lane + e];
            wht_regs<DPL>(v, h <= G ? RK : RV);
#pragma unroll
            for (int e = 0; e < DPL; e++) sq[h][DPL * lane + e] = v[e];
            __syncwarp();
            if (h >= G) ak_kv_store(a.b[1 + h - G], h > G ? VT : KT, ak_kv_row(kvh, pos, p.cap, p.max_seq), sq[h], HD);
        }
        __syncthreads();
        return;
    }
    if (!cur) return;
    const size_t idx = ak_kv_row(kvh, pos, p.cap, p.max_seq) * HD;
    for (int k = threadIdx.x; k < HD; k += blockDim.x) {
        if (KT == AK_F16) {
            ((__half *)a.b[1])[idx + k] = __float2half_rn(sq[G][k]);
            ((__half *)a.b[2])[idx + k] = __float2half_rn(sq[G + 1][k]);
        } else {
            ((float *)a.b[1])[idx + k] = sq[G][k];
            ((float *)a.b[2])[idx + k] = sq[G + 1][k];
        }
    }
    __syncthreads();
}

/* A decode block's share: its KV head, first query head of the group and how many (G),
 * its split s of the S this step uses and that split's keys [k0, k1); cur is this
 * position. False for a split past S (the grid is sized for the whole cache). */
struct dec_share { int kvh, g0, G, s, S, k0, k1, cur; };
template <int MG> __device__ __forceinline__ bool dec_share_of(const ak_p_attn &p, dec_share &d) {
    const int group = p.n_heads / p.n_kv_heads, passes = (group + MG - 1) / MG;
    d.kvh = blockIdx.x / passes;
    d.g0 = (blockIdx.x % passes) * MG;
    d.G = min(MG, group - d.g0);
    d.s = blockIdx.y;
    d.cur = p.pos + p.n - 1;
    int lo, hi;
    ak_key_range(&p, NULL, d.cur, &lo, &hi);
    d.S = ak_attn_used_splits(hi - lo, gridDim.y);
    const int chunk = (hi - lo + d.S - 1) / d.S;
    d.k0 = lo + d.s * chunk;
    d.k1 = min(hi, d.k0 + chunk);
    return d.s < d.S;
}

/* The decode key loop's per-warp cp.async pipeline: each lane copies its own DPL values of
 * K and V of the warp's next batches into shared memory and reads back only its own, so a
 * warp needs no barrier, only its wait_group. P stages a warp, about 64 KB a block (two
 * blocks an SM): P - 1 batches stay in flight while one is computed. Rows of under 4
 * bytes a lane (F16, head 32) cannot be copied so and load to registers instead. */
template <int DPL, bool F16> struct dec_pipe {
    static constexpr int LB = DPL * (F16 ? 2 : 4);   /* bytes a lane copies of a row */
    static constexpr bool ON = LB >= 4;
    static constexpr int STAGE = AK_DEC_UNROLL * 2 * 32 * LB;   /* a warp's K and V of one batch */
    static constexpr int P0 = 65536 / (AK_DEC_WARPS * STAGE), P = P0 < 2 ? 2 : P0 > 4 ? 4 : P0;
    static constexpr size_t BYTES = ON ? (size_t)P * AK_DEC_WARPS * STAGE : 0;
};
template <int DPL, int MG, bool F16> static constexpr size_t dec_smem() {
    constexpr size_t SH = sizeof(float) * AK_DEC_WARPS * MG * (32 * DPL + 2);   /* the warps' merge */
    return SH > dec_pipe<DPL, F16>::BYTES ? SH : dec_pipe<DPL, F16>::BYTES;
}
template <int LB> __device__ __forceinline__ void cp_lane(void *d, const void *s) {
    if constexpr (LB == 32) {
        ak_cp_async_cg16(d, s);
        ak_cp_async_cg16((uint8_t *)d + 16, (const uint8_t *)s + 16);
    } else if constexpr (LB == 16) ak_cp_async_cg16(d, s);
    else ak_cp_async<LB>(d, s);
}

/* A decode block's end (both kernels): its warps' partial softmaxes (sh: per warp and head
 * the max in natural units, the sum, and the weighted V) merged into the block's split,
 * written as the result (one split) or to scratch, where the next GEMV's prologue (up to
 * AK_ATTN_FOLD splits) or the last block of the KV head to finish merges the splits.
 * vrot: a rotated value cache's order (ak_kv_rot), whose weighted V is rotated back once
 * the warps are merged (the merges are linear in it): G rows, not W G. Rotating every
 * warp's rows (with a division a butterfly to find its row) took about 5 us of a Gemma 3
 * 270M layer's attention at 65 keys (H200). */
template <int W, int MG, int HD>
__device__ __forceinline__ void dec_finish(const ak_cuda_args &a, const ak_p_attn &p, float (*sh)[MG][HD + 2], float (*fw)[W + 2],
                                           float (*mw)[AK_ATTN_MAX_SPLITS], bool *last, int h0, int G, int s, int S, int vrot) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    /* the warps' partial softmaxes into this split's (max, sum, V) per head: a thread per
     * head and warp makes that warp's factor e^(m - M) once (and the head's M and sum L),
     * then every output value is W multiply-adds */
    if (threadIdx.x < W * MG) {
        constexpr unsigned mask = W * MG >= 32 ? 0xffffffffu : (1u << (W * MG)) - 1;
        const int g = threadIdx.x / W, v = threadIdx.x % W;
        const float mv = sh[v][g][0];
        float M = mv;
#pragma unroll
        for (int o = 1; o < W; o <<= 1) M = fmaxf(M, __shfl_xor_sync(mask, M, o));
        const float f = M == -INFINITY ? 0.f : expf(mv - M);
        float L = sh[v][g][1] * f;
#pragma unroll
        for (int o = 1; o < W; o <<= 1) L += __shfl_xor_sync(mask, L, o);
        fw[g][v] = f;
        if (v == 0) { fw[g][W] = M; fw[g][W + 1] = L; }
    }
    __syncthreads();
    float *scratch = (float *)a.scratch, *out = (float *)a.b[3] + (size_t)(p.n - 1) * p.n_heads * HD;
    const int SM = gridDim.y, PS = HD + AK_ATTN_PART_PAD;
    const bool fold = a.mrg_splits && S <= AK_ATTN_FOLD;
    auto emit = [&](int g, int d, float A) {
        const float M = fw[g][W], L = fw[g][W + 1];
        if (S == 1 && !fold) {   /* the only split: the result */
            out[(size_t)(h0 + g) * HD + d] = L > 0.f ? A / L : 0.f;
            return;
        }
        float *part = scratch + ((size_t)(h0 + g) * SM + s) * PS;
        part[AK_ATTN_PART_PAD + d] = A;
        if (d == 0) { part[0] = M; part[1] = L; }
    };
    for (int t = threadIdx.x; t < G * HD; t += blockDim.x) {
        const int g = t / HD, d = t % HD;
        float A = 0.f;
#pragma unroll
        for (int v = 0; v < W; v++) A += sh[v][g][2 + d] * fw[g][v];
        if (vrot) sh[0][g][2 + d] = A;   /* only this thread reads (g, d) */
        else emit(g, d, A);
    }
    if (vrot) {
        __syncthreads();
        ak_wht_block(&sh[0][0][2], G, HD + 2, HD, vrot);
        for (int t = threadIdx.x; t < G * HD; t += blockDim.x) emit(t / HD, t % HD, sh[0][t / HD][2 + t % HD]);
    }
    if (S == 1 || fold) return;
    /* the last block of this KV head to get here merges; one release-acquire atomic
     * (two fence.sc, as __threadfence, cost 0.5 us more per layer) */
    uint32_t *cnt = (uint32_t *)(scratch + (size_t)p.n_heads * SM * PS) + blockIdx.x;
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t old;
        asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(cnt) : "memory");
        *last = old == (uint32_t)S - 1;
    }
    __syncthreads();
    if (!*last) return;
    /* L2 loads (__ldcg: the other blocks' writes are visible there after their release and
     * our acquire). A warp per head makes every split's factor e^(m - M) and the sum L at
     * once (its lanes over the splits); then a thread per 4 output values adds the splits'
     * weighted V, 16 independent vector loads at a time: the merge's latency is a few L2
     * round trips, not one per split (a scalar load per value, 8 at a time, made 64
     * splits cost more than they saved: 8B at depth 16384, 55 us a layer against 45). */
    for (int g = w; g < G; g += W) {
        const float *ph = scratch + (size_t)(h0 + g) * SM * PS;
        float mu[AK_ATTN_MAX_SPLITS / 32], M = -INFINITY, L = 0.f;
#pragma unroll
        for (int i = 0; i < AK_ATTN_MAX_SPLITS / 32; i++) {
            const int u = lane + 32 * i;
            mu[i] = u < S ? __ldcg(ph + (size_t)u * PS) : -INFINITY;
            M = fmaxf(M, mu[i]);
        }
        M = ak_warp_max(M);
#pragma unroll
        for (int i = 0; i < AK_ATTN_MAX_SPLITS / 32; i++) {
            const int u = lane + 32 * i;
            if (u >= S) break;
            const float f = mu[i] == -INFINITY ? 0.f : expf(mu[i] - M);
            L += __ldcg(ph + (size_t)u * PS + 1) * f;
            mw[g][u] = f;
        }
        L = ak_warp_sum(L);
        if (lane == 0) fw[g][W + 1] = L > 0.f ? 1.f / L : 0.f;
    }
    __syncthreads();
    for (int t = threadIdx.x; t < G * HD / 4; t += blockDim.x) {
        const int g = t / (HD / 4), d4 = t % (HD / 4), h = h0 + g;
        const float4 *ph = (const float4 *)(scratch + (size_t)h * SM * PS + AK_ATTN_PART_PAD) + d4;
        float4 A = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 16
        for (int u = 0; u < S; u++) {
            const float4 v = __ldcg(ph + (size_t)u * (PS / 4));
            const float f = mw[g][u];
            A.x += v.x * f, A.y += v.y * f, A.z += v.z * f, A.w += v.w * f;
        }
        const float r = fw[g][W + 1];
        *(float4 *)(out + (size_t)h * HD + 4 * d4) = make_float4(A.x * r, A.y * r, A.z * r, A.w * r);
    }
    if (threadIdx.x == 0) *cnt = 0;
}

/* Decode, flash-decoding style. A block takes one KV head, MG of the query heads that
 * share it (GQA: K and V are read once for all of them) and one chunk of keys; its warps
 * take batches of AK_DEC_UNROLL keys in turn (through the pipeline above), a lane per DPL
 * neighbouring dimensions of the head, and keep an online softmax per head, so one pass
 * reads K and V. Heads of 32, 64, 128 or 256 (encode refuses others); F32 or F16 caches,
 * and for heads of 32 and 256 Q8_0 and Q4_0 ones (KQT, VQT: loaded to registers).
 * The first batches, keys of earlier positions, are requested before the wait for the
 * QKV GEMV (earlier steps wrote them), and the output projection is let in only once the
 * RoPE is done: its weight requests would otherwise queue ahead of those loads.
 * The warps merge in shared memory; with one split that is the result, else the block
 * writes (max, sum, weighted V) per head to scratch. With up to AK_ATTN_FOLD splits and
 * a.mrg_splits set, the next GEMV merges them as it reads its x (PRO_MERGE); otherwise
 * the last block of the KV head to finish merges them. Splits past those this step uses
 * return at once (the grid is sized for the whole cache). */
template <int DPL, int MG, bool F16, int KQT = 0, int VQT = 0>
__global__ void __launch_bounds__(AK_DEC_WARPS * 32) k_attn_decode(ak_cuda_args a) {
    /* KQT, VQT: a Q8_0 or Q4_0 cache (both; heads of 32 and 256), read straight to registers */
    using PP = dec_pipe<DPL, F16>;
    constexpr bool QC = KQT != 0, PON = PP::ON && !QC;
    using T = typename std::conditional<F16, __half, float>::type;
    constexpr int W = AK_DEC_WARPS, U = AK_DEC_UNROLL;
    extern __shared__ __align__(16) uint8_t shraw[];
    float (*sh)[MG][32 * DPL + 2] = reinterpret_cast<float (*)[MG][32 * DPL + 2]>(shraw);
    __shared__ float sq[MG + 2][32 * DPL];
    __shared__ float fw[MG][W + 2];   /* per head: each warp's factor, M, L */
    __shared__ float rcs[2][16 * DPL];   /* this position's RoPE cos and sin */
    __shared__ float mw[MG][AK_ATTN_MAX_SPLITS];   /* the cross-block merge's factors */
    __shared__ bool last;
    ak_trace_t tr_;
    const ak_stepv st_ = ak_step(a);   /* before the wait: only the sample command writes the step */
    const ak_p_attn p = ak_params<ak_p_attn>(a, st_);
    dec_share d;
    if (!dec_share_of<MG>(p, d)) return;
    const int hd = p.head_dim, group = p.n_heads / p.n_kv_heads;
    const int kvh = d.kvh, g0 = d.g0, G = d.G, s = d.s, S = d.S, k0 = d.k0, k1 = d.k1, cur = d.cur;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int rows = kv_rows(p), s0 = k0 % rows;   /* the split's keys: at most `rows` (kv_slot) */
    const size_t base = (size_t)kvh * rows * hd + DPL * lane;
    constexpr int KRB = QC ? ak_kv_row_bytes(KQT, 32 * DPL) : 0, VRB = QC ? ak_kv_row_bytes(VQT, 32 * DPL) : 0;
    const uint8_t *kq = (const uint8_t *)a.b[1] + (size_t)kvh * rows * KRB, *vq = (const uint8_t *)a.b[2] + (size_t)kvh * rows * VRB;
    /* this lane's slots: [warp][stage][key][K, V][lane][DPL] */
    T *mine = reinterpret_cast<T *>(shraw) + (size_t)w * PP::P * U * 2 * 32 * DPL + DPL * lane;
    auto slot = [&](int b, int t) { return mine + ((size_t)(b % PP::P) * U + t) * 2 * 32 * DPL; };
    /* batch b of this warp: keys k0 + W U b + w + W t; the key of this position (cur) is
     * made in this kernel and read directly */
    auto issue = [&](int b) {
#pragma unroll
        for (int t = 0; t < U; t++) {
            const int j = k0 + W * U * b + w + W * t;
            if (j < k1 && j < cur) {
                const size_t at = base + (size_t)kv_slot(j, k0, s0, rows) * hd;
                cp_lane<PP::LB>(slot(b, t), (const T *)a.b[1] + at);
                cp_lane<PP::LB>(slot(b, t) + 32 * DPL, (const T *)a.b[2] + at);
            }
        }
        ak_cp_async_commit();
    };
    if (PON && !st_.stopped)
        for (int b = 0; b < PP::P - 1; b++) issue(b);
    /* the angles need only the position: made while the QKV GEMV still runs */
    if (a.rope.head_dim) rope_table<DPL>(a, p, rcs);
    ak_pdl_wait();
    tr_.start(a, st_);
    if (st_.stopped) return;
    const float *qv = (const float *)a.b[0] + (size_t)(p.n - 1) * p.ld_q + (size_t)(kvh * group + g0) * hd;
    if (a.rope.head_dim) {   /* this position's key lies in the last split */
        constexpr int KT = QC ? KQT : F16 ? AK_F16 : AK_F32, VT = QC ? VQT : KT;
        rope_fold<DPL, KT, VT>(a, p, kvh, kvh * group + g0, G, s == S - 1, sq, rcs);
        qv = &sq[0][0];
    }
    ak_pdl_trigger();
    tr_.mark();
    float q[MG][DPL], acc[MG][DPL], m[MG], l[MG];
#pragma unroll
    for (int g = 0; g < MG; g++) {
        m[g] = -INFINITY;
        l[g] = 0.f;
#pragma unroll
        for (int e = 0; e < DPL; e++) {
            q[g][e] = g < G ? qv[(size_t)g * hd + DPL * lane + e] : 0.f;
            acc[g][e] = 0.f;
        }
    }
    for (int b = 0;; b++) {
        const int j0 = k0 + W * U * b + w;
        if (j0 >= k1) break;
        if (PON) {
            issue(b + PP::P - 1);   /* into the slot computed last round */
            ak_cp_async_wait<PP::P - 1>();   /* batch b is in */
        }
        float kk[U][DPL], vv[U][DPL];
#pragma unroll
        for (int t = 0; t < U; t++) {
            const int j = j0 + W * t;
            if (j >= k1) {
#pragma unroll
                for (int e = 0; e < DPL; e++) kk[t][e] = vv[t][e] = 0.f;
            } else if (QC) {
                const int sj = kv_slot(j, k0, s0, rows);
                load_q<DPL, (QC ? KQT : AK_Q8_0)>(kq + (size_t)sj * KRB, lane, kk[t]);
                load_q<DPL, (QC ? VQT : AK_Q8_0)>(vq + (size_t)sj * VRB, lane, vv[t]);
            } else if (!PON || j >= cur) {
                const size_t at = base + (size_t)kv_slot(j, k0, s0, rows) * hd;
                load_dpl<DPL, F16>(a.b[1], at, kk[t]);
                load_dpl<DPL, F16>(a.b[2], at, vv[t]);
            } else {
                load_dpl<DPL, F16>(slot(b, t), 0, kk[t]);
                load_dpl<DPL, F16>(slot(b, t) + 32 * DPL, 0, vv[t]);
            }
        }
        /* every head's and key's dot product, then all their warp sums side by side:
         * no branch between them (MG is the template's, the softcap comes after), so the
         * shuffles of one sum overlap those of the others rather than forming a chain
         * of dependent round trips per head and key */
        float sc[MG][U];
#pragma unroll
        for (int g = 0; g < MG; g++)
#pragma unroll
            for (int t = 0; t < U; t++) {
                float dot = 0.f;
#pragma unroll
                for (int e = 0; e < DPL; e++) dot += q[g][e] * kk[t][e];
                sc[g][t] = dot;
            }
        {   /* the MG * U warp sums as one reduce-scatter (each lane ends with one whole
             * score: NV - 1 shuffles and a few butterfly rounds rather than 5 NV), scaled
             * once per lane, then gathered back (NV shuffles). The key loop keeps scores
             * and maxima in log2 units: exp2f is one MUFU operation, expf several
             * instructions around it. */
            constexpr int NV = MG * U, SH = NV >= 32 ? 0 : NV >= 16 ? 1 : NV >= 8 ? 2 : NV >= 4 ? 3 : NV >= 2 ? 4 : 5;
            float r[NV];
#pragma unroll
            for (int i = 0; i < NV; i++) r[i] = sc[i / U][i % U];
            const float own = attn_score(ak_warp_sums<NV>(r), p) * 1.44269504f;
#pragma unroll
            for (int i = 0; i < NV; i++) sc[i / U][i % U] = __shfl_sync(0xffffffffu, own, i << SH);
        }
        /* one online softmax update per head: a chain of one rescale per U keys */
#pragma unroll
        for (int g = 0; g < MG; g++) {
            float mn = m[g];
#pragma unroll
            for (int t = 0; t < U; t++) {
                if (j0 + t * W >= k1) sc[g][t] = -INFINITY;
                mn = fmaxf(mn, sc[g][t]);
            }
            const float c = exp2f(m[g] - mn);   /* key t = 0 is always in range: mn is finite */
            l[g] *= c;
#pragma unroll
            for (int e = 0; e < DPL; e++) acc[g][e] *= c;
#pragma unroll
            for (int t = 0; t < U; t++) {
                const float pr = exp2f(sc[g][t] - mn);
                l[g] += pr;
#pragma unroll
                for (int e = 0; e < DPL; e++) acc[g][e] += pr * vv[t][e];
            }
            m[g] = mn;
        }
    }
    if (PON) {   /* the merge area is the pipeline's: every warp done with it (the batches
                     * issued past the chunk's end copied nothing) */
        ak_cp_async_wait<0>();
        __syncthreads();
    }
#pragma unroll
    for (int g = 0; g < MG; g++) {   /* idle heads too (q = 0): every factor below is defined */
        if (lane == 0) { sh[w][g][0] = m[g] * 0.693147181f; sh[w][g][1] = l[g]; }   /* back to natural units */
#pragma unroll
        for (int e = 0; e < DPL; e++) sh[w][g][2 + DPL * lane + e] = acc[g][e];
    }
    __syncthreads();
    dec_finish<W, MG, 32 * DPL>(a, p, sh, fw, mw, &last, kvh * group + g0, G, s, S, QC ? ak_kv_rot(VQT, 32 * DPL, 1) : 0);
}

/* The scalar kernel over a quantized pair (heads of 32 and 256; 64 and 128 run on tensor
 * cores): launch, or with c NULL raise the shared-memory limit of, the one for (kt, vt). */
template <int DPL, int MG, int KT, int VT> static cudaError_t dec_q_one(const ak_cuda_cmd *c, cudaStream_t st) {
    constexpr size_t SM = dec_smem<DPL, MG, true>();
    if (!c) return cudaFuncSetAttribute(k_attn_decode<DPL, MG, true, KT, VT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SM);
    const ak_p_attn *p = (const ak_p_attn *)c->a.p;
    const int group = p->n_heads / p->n_kv_heads, passes = (group + MG - 1) / MG;
    return ak_launch(k_attn_decode<DPL, MG, true, KT, VT>, dim3(p->n_kv_heads * passes, c->aux[1]), dim3(AK_DEC_WARPS * 32), SM, st, c->a);
}
template <int DPL, int MG> static cudaError_t dec_q(int kt, int vt, const ak_cuda_cmd *c, cudaStream_t st) {
    if constexpr (DPL == 1 || DPL == 8) {
        if (kt == AK_Q8_0) return vt == AK_Q8_0 ? dec_q_one<DPL, MG, AK_Q8_0, AK_Q8_0>(c, st) : dec_q_one<DPL, MG, AK_Q8_0, AK_Q4_0>(c, st);
        return vt == AK_Q8_0 ? dec_q_one<DPL, MG, AK_Q4_0, AK_Q8_0>(c, st) : dec_q_one<DPL, MG, AK_Q4_0, AK_Q4_0>(c, st);
    }
    return cudaErrorInvalidValue;
}

template <int DPL, int MG>
static cudaError_t attn_decode_launch(const ak_cuda_cmd *c, cudaStream_t st) {
    const ak_p_attn *p = (const ak_p_attn *)c->a.p;
    const int group = p->n_heads / p->n_kv_heads, passes = (group + MG - 1) / MG;
    dim3 grid(p->n_kv_heads * passes, c->aux[1]), blk(AK_DEC_WARPS * 32);
    if (p->kt == AK_Q8_0 || p->kt == AK_Q4_0) return dec_q<DPL, MG>(p->kt, p->vt, c, st);
    if (p->kt == AK_F16) return ak_launch(k_attn_decode<DPL, MG, true>, grid, blk, dec_smem<DPL, MG, true>(), st, c->a);
    return ak_launch(k_attn_decode<DPL, MG, false>, grid, blk, dec_smem<DPL, MG, false>(), st, c->a);
}

template <int DPL>
static cudaError_t attn_decode_group(const ak_cuda_cmd *c, cudaStream_t st) {
    const ak_p_attn *p = (const ak_p_attn *)c->a.p;
    switch (dec_mg(p->head_dim, p->n_heads / p->n_kv_heads)) {
    case 1: return attn_decode_launch<DPL, 1>(c, st);
    case 2: return attn_decode_launch<DPL, 2>(c, st);
    case 4: return attn_decode_launch<DPL, 4>(c, st);
    default: return attn_decode_launch<DPL, (32 / DPL < 8 ? 32 / DPL : 8)>(c, st);
    }
}

/* The decode kernels' shared memory past 48 KB. */
template <int DPL, int MG> static cudaError_t dec_attr() {
    cudaError_t e = cudaFuncSetAttribute(k_attn_decode<DPL, MG, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dec_smem<DPL, MG, true>());
    const int qt[2] = {AK_Q8_0, AK_Q4_0};
    for (int i = 0; i < 4 && (DPL == 1 || DPL == 8) && e == cudaSuccess; i++) e = dec_q<DPL, MG>(qt[i / 2], qt[i % 2], NULL, 0);
    return e != cudaSuccess ? e : cudaFuncSetAttribute(k_attn_decode<DPL, MG, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dec_smem<DPL, MG, false>());
}
template <int DPL> static cudaError_t dec_attrs() {
    constexpr int M8 = 32 / DPL < 8 ? 32 / DPL : 8;
    cudaError_t e = dec_attr<DPL, 1>();
    if (e == cudaSuccess) e = dec_attr<DPL, 2>();
    if (e == cudaSuccess) e = dec_attr<DPL, 4>();
    if (e == cudaSuccess && M8 != 4) e = dec_attr<DPL, M8>();
    return e;
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
    const int rows = kv_rows(p);   /* tiles of KB divide a ring's rows: a tile's slots are contiguous */
    size_t base = (size_t)(h / group) * rows;
    for (int e = threadIdx.x; e < QB * hd; e += blockDim.x) {
        int r = e / hd, d = e % hd;
        Q[e] = r < nqr ? ((const float *)a.b[0])[(size_t)(i0 + r) * p.ld_q + (size_t)h * hd + d] : 0.f;
        O[e] = 0.f;
    }
    if (threadIdx.x < QB) { M[threadIdx.x] = -INFINITY; L[threadIdx.x] = 0.f; }
    int klo, khi, tlo, thi;
    const int32_t *seg = (const int32_t *)a.b[4];   /* AK_ATTN_SEGMENTS */
    ak_key_range(&p, seg, p.pos + i0, &klo, &thi);
    ak_key_range(&p, seg, p.pos + i0 + nqr - 1, &tlo, &khi);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    /* key tiles at multiples of KB: a row meets the same tiles wherever its block starts
     * (a prompt cut elsewhere rounds the same; tiles it cannot see leave it unchanged) */
    for (int kb = klo / KB * KB; kb < khi; kb += KB) {
        int nk = min(KB, khi - kb);
        __syncthreads();
        for (int e = threadIdx.x; e < KB * hd; e += blockDim.x) {
            int j = e / hd, d = e % hd;
            size_t row = base + kb % rows + j;
            K[j * (hd + 1) + d] = j < nk ? ak_kv_val(a.b[1], p.kt, row, d, hd) : 0.f;
            V[e] = j < nk ? ak_kv_val(a.b[2], p.vt, row, d, hd) : 0.f;
        }
        __syncthreads();
        for (int e = threadIdx.x; e < QB * KB; e += blockDim.x) {
            int r = e / KB, j = e % KB, key = kb + j, lo, hi;
            float s = -INFINITY;
            if (r < nqr && j < nk) {
                ak_key_range(&p, seg, p.pos + i0 + r, &lo, &hi);
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
    ak_wht_block(O, QB, hd, hd, ak_kv_rot(p.vt, hd, 1));   /* a rotated value cache: the output rotated back */
    for (int e = threadIdx.x; e < nqr * hd; e += blockDim.x) {
        int r = e / hd, d = e % hd;
        float inv = L[r] > 0 ? 1.0f / L[r] : 0.f;
        ((float *)a.b[3])[(size_t)(i0 + r) * p.n_heads * hd + (size_t)h * hd + d] = O[e] * inv;
    }
}

/* ---- prefill on tensor cores (F16 or quantized cache, head_dim 64, 128 or 256) ----
 * FlashAttention-2 style: a block of 4 warps takes 64 queries of one head, each warp 16
 * of them; key tiles of 64 stream through two shared-memory stages by cp.async (the next
 * loads while one is computed; swizzled, read by ldmatrix, V transposed by it) and
 * mma.sync m16n8k16 (f16 in, f32 accumulate) computes S = Q K^T and O += P V; the
 * online softmax runs on the S fragments in registers (a row is spread over the 4
 * threads of a quad). Q and P are rounded to f16 for the products: about 1e-3 relative
 * against the float kernel above. The scores are in log2 units (exp2f), their maxima and
 * sums are trees, and O is rescaled only when a row's maximum moved: at two warps a
 * scheduler the chains of dependent adds and expf left it idle 70 % of the cycles (Nsight
 * Compute, 8B shape at depth 16384: 1.66 -> 1.01 ms a layer with the three blocks an SM
 * below).
 * Heads of 256 (Gemma 2 and 3): a thread would hold 128 accumulators of O beside Q's 64
 * registers, so a block takes half of the value dimensions (DV = 128; the grid's x is the
 * head and the half) and computes S in whole; the two blocks of a head read the same key
 * tiles at the same time (L2), each its half of V. */
#define AK_TC_Q 64
#define AK_TC_K 64
/* Blocks an SM (registers capped at 168; Q is not kept in shared memory): the 0.6B
 * shape's pp512 at depth 16384 1.06x against two, the 8B's 1.04x with its keys split.
 * Heads of 256: two (96 KB of tiles a block). */
#define AK_TC_BLOCKS 3
static __host__ __device__ constexpr int tc_dv(int hd) { return hd > 128 ? 128 : hd; }
static __host__ __device__ constexpr int tc_blocks(int hd) { return hd > 128 ? 2 : AK_TC_BLOCKS; }
static bool pf_tc(const ak_p_attn *p) { return p->kt != AK_F32 && (p->head_dim == 64 || p->head_dim == 128 || p->head_dim == 256); }

/* Key splits of the causal prefill: a block (head, 64 queries) takes the key tiles of one
 * split [z S, (z + 1) S) (the grid's z), so that a long cache fills the GPU: Qwen3-0.6B's
 * 16 heads x 8 query blocks of a 512-row chunk were 128 blocks of 4 warps, one an SM,
 * whatever the depth (H200, pp512 after 4096 tokens 1.42x with splits, after 16384
 * 1.84x). S is fixed by max_seq (at most AK_PF_SPLITS splits) and whether to split by
 * the head count and the GPU, so a row's splits, and its arithmetic, do not depend on how
 * the prompt is cut. A row whose keys lie in one split is written by that split's block
 * as before; the others' partial softmaxes go to scratch and k_attn_pf_merge combines
 * them in split order. Only where a 512-row chunk's blocks do not fill the SMs'
 * AK_TC_BLOCKS slots (with two an SM, the 8B shape's 256 blocks lost 4 % with splits at
 * depth 4096; with three, splitting gains 1.08x there and 1.20x at 16384). Over a quantized
 * V a row is rotated back where it is finished: by its split's block, or by the merge. Not
 * for an encoder's segments. */
#define AK_PF_SPLITS 16
static __host__ __device__ int pf_split(const ak_p_attn &p) {
    int s = 1024;
    while ((p.max_seq + s - 1) / s > AK_PF_SPLITS) s *= 2;
    return s;
}
extern int ak_cuda_n_sm;
static int pf_nz(const ak_p_attn &p) {
    const int hd = p.head_dim, blocks = p.n_heads * (hd / tc_dv(hd)) * (512 / AK_TC_Q);
    const bool on = p.causal == 1 && blocks <= tc_blocks(hd) * ak_cuda_n_sm;
    return on ? ak_cdiv(p.max_seq, pf_split(p)) : 1;
}

__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t pack_h2(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *(uint32_t *)&h;
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const __half *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"((uint32_t)__cvta_generic_to_shared(p)) : "memory");
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const __half *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"((uint32_t)__cvta_generic_to_shared(p)) : "memory");
}
/* A tile's 16-byte chunk c of row r, in halves: chunks XOR-swizzled by the row, so the 8
 * rows an ldmatrix reads (and a row's copies) fall on distinct banks without padding */
template <int HD> __device__ __forceinline__ int dtc_at(int r, int c) { return r * HD + 8 * (c ^ (r & 7)); }
/* 16 bytes, or 16 zero bytes where !ok (rows past the chunk: their V must not be NaN) */
__device__ __forceinline__ void cp16_or_zero(void *d, const void *s, bool ok) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"((uint32_t)__cvta_generic_to_shared(d)), "l"(s), "r"(ok ? 16 : 0));
}
/* Rows [0, rows) of a quantized tile into shared memory by cp.async, 8 bytes a copy where
 * the row size allows, else 4; the rest of the tile's nbytes zero (rows past the keys
 * must not be NaN). The rows are a head's (head) slots from s0 on, the first n1 of them
 * before a ring's end and the rest from its start. */
template <int RB>
__device__ __forceinline__ void raw_issue(uint8_t *d, const uint8_t *head, int s0, int rows, int n1, int nbytes) {
    constexpr int C = RB % 8 ? 4 : 8;   /* divides RB: a chunk lies in one row */
    const int valid = rows * RB, wrap = n1 * RB;
    const uint8_t *src = head + (size_t)s0 * RB;
    for (int c = threadIdx.x & 31; c < nbytes / C; c += 32) {
        const bool ok = C * c < valid;
        const uint8_t *from = !ok ? src : C * c < wrap ? src + C * c : head + (C * c - wrap);
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"((uint32_t)__cvta_generic_to_shared(d + C * c)),
                     "l"(from), "n"(C), "r"(ok ? C : 0));
    }
}

/* Two codes as f16 exactly: the bytes b0, b1 of w (each under 256) placed under the
 * exponent of 1024 (0x64) give 1024 + b; minus `off` leaves b + 1024 - off. */
__device__ __forceinline__ __half2 codes_h2(uint32_t w, float off) {
    const uint32_t x = __byte_perm(w, 0x64, 0x4140);
    return __hsub2(*(const __half2 *)&x, __float2half2_rn(off));
}

/* Two Q8_0 codes (the low 16 bits of w; xor 0x8080 puts q + 128 under the exponent) times
 * the block's scale d, rounded to f16 once: kv_dequant's tiles and dtc_kfrag/dtc_vfrag's fragments */
__device__ __forceinline__ __half2 q8_h2(uint32_t w, __half2 d) { return __hmul2(codes_h2(w ^ 0x8080u, 1152.f), d); }
__device__ __forceinline__ uint32_t h2_bits(__half2 h) { return *(const uint32_t *)&h; }

/* A quantized tile's raw rows (shared or global memory; row cur_row, written after the
 * copies were issued, from the cache itself) to a swizzled f16 tile of nz rows, the
 * threads of `lanes` (from lane0) a block of 32 values each: the reference's d * q
 * (Q8_0) or d * (q - 8) (Q4_0), rounded to f16 once (the codes are exact in f16, their
 * product with d is rounded by __hmul2); rows from nr on zero. Dims [32 b0, 32 b0 + DV)
 * of the rows of HD, the tile's rows DV wide. */
template <int T, int HD, int DV = HD>
__device__ __forceinline__ void kv_dequant(__half *dst, const uint8_t *raw, const uint8_t *cache, int nr, int nz, int cur_row,
                                           int lane0, int lanes, int b0 = 0) {
    constexpr int RB = ak_kv_row_bytes(T, HD), BS = T == AK_Q8_0 ? 34 : 18, NB = DV / 32;
    for (int u = lane0; u < nz * NB; u += lanes) {
        const int r = u / NB, b = u % NB;
        if (r >= nr) {
#pragma unroll
            for (int c = 0; c < 4; c++) *(uint4 *)(dst + dtc_at<DV>(r, 4 * b + c)) = make_uint4(0, 0, 0, 0);
            continue;
        }
        const uint8_t *src = (r == cur_row ? cache : raw + r * RB) + (b0 + b) * BS;
        const __half2 d = __half2half2(*(const __half *)src);
        const uint16_t *q = (const uint16_t *)(src + 2);   /* blocks start at even offsets */
        __align__(16) __half2 h[16];
        if (T == AK_Q8_0) {
#pragma unroll
            for (int i = 0; i < 16; i++) h[i] = q8_h2(q[i], d);
        } else {
#pragma unroll
            for (int i = 0; i < 8; i++) {
                const uint32_t w = q[i];
                h[i] = __hmul2(codes_h2(w & 0x0F0Fu, 1032.f), d);
                h[i + 8] = __hmul2(codes_h2((w >> 4) & 0x0F0Fu, 1032.f), d);
            }
        }
#pragma unroll
        for (int c = 0; c < 4; c++) *(uint4 *)(dst + dtc_at<DV>(r, 4 * b + c)) = ((const uint4 *)h)[c];
    }
}

/* x as hi + lo halves, packed in pairs: (a, b) -> the hi pair and the lo pair */
__device__ __forceinline__ void split_h2(float x0, float x1, uint32_t &hi, uint32_t &lo) {
    const __half2 h = __floats2half2_rn(x0, x1);
    const float2 r = __half22float2(h);
    const __half2 l = __floats2half2_rn(x0 - r.x, x1 - r.y);
    hi = *(const uint32_t *)&h;
    lo = *(const uint32_t *)&l;
}

/* K tiles and V tiles (DV of each row) in two stages, swizzled (dtc_at); Q goes from the
 * activations straight into fragments, so that three blocks fit an SM */
template <int HD> static __host__ __device__ size_t tc_smem() { return (size_t)2 * AK_TC_K * (HD + tc_dv(HD)) * 2; }

template <int HD, int KT, int VT>
__global__ void __launch_bounds__(128, tc_blocks(HD)) k_attn_prefill_tc(ak_cuda_args a) {
    constexpr bool KQ = KT != AK_F16, VQ = VT != AK_F16;
    constexpr int DV = tc_dv(HD), NV = HD / DV;
    extern __shared__ __align__(16) __half tsm[];
    constexpr int TILE = AK_TC_K * (HD + DV);   /* K then V, per stage */
    __half *kv = tsm;
    AK_KERNEL_ENTRY(ak_p_attn, p);
    /* this block's head, and its values' dims [v0, v0 + DV) */
    const int group = p.n_heads / p.n_kv_heads, h = blockIdx.x / NV, v0 = blockIdx.x % NV * DV, i0 = blockIdx.y * AK_TC_Q;
    if (i0 >= p.n) return;
    const int nqr = min(AK_TC_Q, p.n - i0);
    const bool split = gridDim.z > 1;
    const int S = split ? pf_split(p) : 0, z = blockIdx.z;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int rows = kv_rows(p);   /* AK_TC_K divides a ring's rows: a tile's slots are contiguous */
    const size_t base = (size_t)(h / group) * rows * HD;
    const __half *kc = (const __half *)a.b[1], *vc = (const __half *)a.b[2];
    const uint8_t *kq = (const uint8_t *)a.b[1] + (size_t)(h / group) * rows * ak_kv_row_bytes(KT, HD);
    const uint8_t *vq = (const uint8_t *)a.b[2] + (size_t)(h / group) * rows * ak_kv_row_bytes(VT, HD);
    /* this thread's two query rows: 16 w + g and 16 w + g + 8 */
    int lo[2], hi[2], klo, khi, unused;
    const int32_t *seg = (const int32_t *)a.b[4];   /* AK_ATTN_SEGMENTS */
    ak_key_range(&p, seg, p.pos + i0 + 16 * w + g, &lo[0], &hi[0]);
    ak_key_range(&p, seg, p.pos + i0 + 16 * w + g + 8, &lo[1], &hi[1]);
    ak_key_range(&p, seg, p.pos + i0, &klo, &unused);
    ak_key_range(&p, seg, p.pos + i0 + nqr - 1, &unused, &khi);
    if (split) {   /* this block's split of the keys (S is a multiple of the tile) */
        klo = max(klo, z * S);
        khi = min(khi, (z + 1) * S);
        if (klo >= khi) return;   /* before Q is read: most splits of a short prompt are empty */
    }
    /* A fragments of Q: rows 16 w + g (x = 0) and + 8 (x = 1), dims 16 kk + 2 t (+ 8) */
    uint32_t qf[HD / 16][4];
#pragma unroll
    for (int x = 0; x < 2; x++) {
        const int r = 16 * w + g + 8 * x;
        const float *q = (const float *)a.b[0] + (size_t)(i0 + r) * p.ld_q + (size_t)h * HD + 2 * t;
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
            const float2 v0 = r < nqr ? *(const float2 *)(q + 16 * kk) : make_float2(0.f, 0.f);
            const float2 v1 = r < nqr ? *(const float2 *)(q + 16 * kk + 8) : make_float2(0.f, 0.f);
            qf[kk][x] = pack_h2(v0.x, v0.y);
            qf[kk][2 + x] = pack_h2(v1.x, v1.y);
        }
    }
    float o[DV / 8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
#pragma unroll
    for (int u = 0; u < DV / 8; u++) o[u][0] = o[u][1] = o[u][2] = o[u][3] = 0.f;
    /* tile kb's K and V into stage st by cp.async (zeros past khi: V's must not be NaN);
     * a quantized cache's tile dequantized straight from the cache (its loads then wait) */
    auto fetch = [&](int kb, int st) {
        if (kb < khi) {
            for (int e = threadIdx.x; e < AK_TC_K * HD / 8; e += blockDim.x) {
                const int j = e / (HD / 8), c = e % (HD / 8);
                const bool ok = kb + j < khi;
                const size_t off = ok ? base + (size_t)(kb % rows + j) * HD + 8 * c : 0;
                if (!KQ) cp16_or_zero(kv + st * TILE + dtc_at<HD>(j, c), kc + off, ok);
                if (!VQ && c < DV / 8) cp16_or_zero(kv + st * TILE + AK_TC_K * HD + dtc_at<DV>(j, c), vc + off + v0, ok);
            }
            const int nr = min(AK_TC_K, khi - kb);
            const size_t sk = kb % rows;
            if (KQ) kv_dequant<KT, HD>(kv + st * TILE, kq + sk * ak_kv_row_bytes(KT, HD), kq, nr, AK_TC_K, -1, threadIdx.x, blockDim.x);
            if (VQ) kv_dequant<VT, HD, DV>(kv + st * TILE + AK_TC_K * HD, vq + sk * ak_kv_row_bytes(VT, HD), vq, nr, AK_TC_K, -1,
                                           threadIdx.x, blockDim.x, v0 / 32);
        }
        ak_cp_async_commit();
    };
    klo = klo / AK_TC_K * AK_TC_K;   /* tiles at multiples of AK_TC_K, as k_attn_prefill's */
    fetch(klo, 0);
    for (int kb = klo, st = 0; kb < khi; kb += AK_TC_K, st ^= 1) {
        fetch(kb + AK_TC_K, st ^ 1);   /* the next tile loads while this one is computed */
        ak_cp_async_wait<1>();
        __syncthreads();
        const __half *Ks = kv + st * TILE, *Vs = Ks + AK_TC_K * HD;
        float sc[AK_TC_K / 8][4];
#pragma unroll
        for (int n8 = 0; n8 < AK_TC_K / 8; n8++) {
            sc[n8][0] = sc[n8][1] = sc[n8][2] = sc[n8][3] = 0.f;
#pragma unroll
            for (int k2 = 0; k2 < HD / 32; k2++) {
                uint32_t b[4];   /* keys 8 n8 on, dims 32 k2 on: b0, b1 of two k16 steps */
                ldsm_x4(b, Ks + dtc_at<HD>(8 * n8 + (lane & 7), 4 * k2 + (lane >> 3)));
                mma16816(sc[n8], qf[2 * k2][0], qf[2 * k2][1], qf[2 * k2][2], qf[2 * k2][3], b[0], b[1]);
                mma16816(sc[n8], qf[2 * k2 + 1][0], qf[2 * k2 + 1][1], qf[2 * k2 + 1][2], qf[2 * k2 + 1][3], b[2], b[3]);
            }
        }
        /* scale (log2 units), and the mask unless every row of the warp sees the whole tile;
         * online softmax per row (r 0: row g, r 1: row g + 8), its maxima and sums as trees:
         * with two or three warps a scheduler, chains of dependent adds left it idle */
        const bool whole = __all_sync(0xffffffffu, kb >= lo[0] && kb + AK_TC_K <= hi[0] && kb >= lo[1] && kb + AK_TC_K <= hi[1]);
#pragma unroll
        for (int n8 = 0; n8 < AK_TC_K / 8; n8++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = e >> 1, key = kb + 8 * n8 + 2 * t + (e & 1);
                const float v = attn_score(sc[n8][e], p) * 1.44269504f;
                sc[n8][e] = whole || (key >= lo[r] && key < hi[r]) ? v : -INFINITY;
            }
        float corr[2], ms[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float tm[AK_TC_K / 8];
#pragma unroll
            for (int n8 = 0; n8 < AK_TC_K / 8; n8++) tm[n8] = fmaxf(sc[n8][2 * r], sc[n8][2 * r + 1]);
#pragma unroll
            for (int w2 = AK_TC_K / 16; w2 > 0; w2 /= 2)
#pragma unroll
                for (int n8 = 0; n8 < w2; n8++) tm[n8] = fmaxf(tm[n8], tm[n8 + w2]);
            float mx = fmaxf(tm[0], __shfl_xor_sync(0xffffffffu, tm[0], 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float mn = fmaxf(m[r], mx);
            corr[r] = mn == -INFINITY ? 1.f : exp2f(m[r] - mn);
            m[r] = mn;
            ms[r] = mn == -INFINITY ? 0.f : mn;   /* a row with no key yet: its p are exp2(-inf) = 0 */
        }
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float ts[AK_TC_K / 8];
#pragma unroll
            for (int n8 = 0; n8 < AK_TC_K / 8; n8++) {
                sc[n8][2 * r] = exp2f(sc[n8][2 * r] - ms[r]);
                sc[n8][2 * r + 1] = exp2f(sc[n8][2 * r + 1] - ms[r]);
                ts[n8] = sc[n8][2 * r] + sc[n8][2 * r + 1];
            }
#pragma unroll
            for (int w2 = AK_TC_K / 16; w2 > 0; w2 /= 2)
#pragma unroll
                for (int n8 = 0; n8 < w2; n8++) ts[n8] += ts[n8 + w2];
            l[r] = l[r] * corr[r] + ts[0];   /* this thread's share of the row sum */
        }
        if (__any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) {   /* deep in a cache the maxima settle */
#pragma unroll
            for (int u = 0; u < DV / 8; u++) {
                o[u][0] *= corr[0];
                o[u][1] *= corr[0];
                o[u][2] *= corr[1];
                o[u][3] *= corr[1];
            }
        }
#pragma unroll
        for (int j = 0; j < AK_TC_K / 16; j++) {
            uint32_t a0 = pack_h2(sc[2 * j][0], sc[2 * j][1]), a1 = pack_h2(sc[2 * j][2], sc[2 * j][3]);
            uint32_t a2 = pack_h2(sc[2 * j + 1][0], sc[2 * j + 1][1]), a3 = pack_h2(sc[2 * j + 1][2], sc[2 * j + 1][3]);
#pragma unroll
            for (int u2 = 0; u2 < DV / 16; u2++) {
                uint32_t b[4];   /* V transposed: keys 16 j to 16 j + 15 of dims 16 u2 on, then 16 u2 + 8 on */
                ldsm_x4_t(b, Vs + dtc_at<DV>(16 * j + 8 * ((lane >> 3) & 1) + (lane & 7), 2 * u2 + (lane >> 4)));
                mma16816(o[2 * u2], a0, a1, a2, a3, b[0], b[1]);
                mma16816(o[2 * u2 + 1], a0, a1, a2, a3, b[2], b[3]);
            }
        }
        __syncthreads();   /* this stage is the one fetched into next round */
    }
    float ls[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        ls[r] = l[r];
        l[r] = l[r] > 0.f ? 1.f / l[r] : 0.f;
    }
    float *out = (float *)a.b[3] + (size_t)h * HD + v0 + 2 * t;
    const size_t ld = (size_t)p.n_heads * HD;
    const int ra = 16 * w + g, rb = ra + 8;
    if (split) {
        /* per row: the whole result where its keys lie in this split alone, else this
         * split's (O, max, sum) to scratch (nothing where it has no keys here) */
        float *os = reinterpret_cast<float *>(tsm);   /* VQ: whole rows, rotated back below */
        __shared__ bool whole[AK_TC_Q];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int row = r ? rb : ra, z0 = lo[r] / S, z1 = (hi[r] - 1) / S;
            if (VQ && t == 0) whole[row] = row < nqr && z0 == z1 && z == z0;
            if (row >= nqr || z < z0 || z > z1) continue;
            if (z0 == z1) {
#pragma unroll
                for (int u = 0; u < DV / 8; u++)
                    *(float2 *)((VQ ? os + row * DV + 2 * t : out + (size_t)(i0 + row) * ld) + 8 * u) = make_float2(o[u][2 * r] * l[r], o[u][2 * r + 1] * l[r]);
                continue;
            }
            float *pt = (float *)a.scratch + (((size_t)z * p.n + i0 + row) * p.n_heads + h) * (HD + 2);
#pragma unroll
            for (int u = 0; u < DV / 8; u++) *(float2 *)(pt + v0 + 8 * u + 2 * t) = make_float2(o[u][2 * r], o[u][2 * r + 1]);
            if (t == 0 && v0 == 0) *(float2 *)(pt + HD) = make_float2(m[r], ls[r]);   /* the same in every half */
        }
        if constexpr (VQ) {   /* the rotation's blocks (64) lie within a half */
            __syncthreads();
            ak_wht_block(os, AK_TC_Q, DV, DV, ak_kv_rot(VT, HD, 1));   /* rows not whole here: unread */
            for (int e = threadIdx.x; e < nqr * DV; e += blockDim.x)
                if (whole[e / DV]) ((float *)a.b[3])[(size_t)(i0 + e / DV) * ld + (size_t)h * HD + v0 + e % DV] = os[e];
        }
        return;
    }
    if constexpr (VQ) {   /* a rotated value cache: the rows rotated back in shared memory (the stages are free) */
        float *os = reinterpret_cast<float *>(tsm);
#pragma unroll
        for (int u = 0; u < DV / 8; u++) {
            *(float2 *)(os + ra * DV + 8 * u + 2 * t) = make_float2(o[u][0] * l[0], o[u][1] * l[0]);
            *(float2 *)(os + rb * DV + 8 * u + 2 * t) = make_float2(o[u][2] * l[1], o[u][3] * l[1]);
        }
        __syncthreads();
        ak_wht_block(os, AK_TC_Q, DV, DV, ak_kv_rot(VT, HD, 1));
        for (int e = threadIdx.x; e < nqr * DV; e += blockDim.x)
            ((float *)a.b[3])[(size_t)(i0 + e / DV) * ld + (size_t)h * HD + v0 + e % DV] = os[e];
    } else {
#pragma unroll
        for (int u = 0; u < DV / 8; u++) {
            if (ra < nqr) *(float2 *)(out + (size_t)(i0 + ra) * ld + 8 * u) = make_float2(o[u][0] * l[0], o[u][1] * l[0]);
            if (rb < nqr) *(float2 *)(out + (size_t)(i0 + rb) * ld + 8 * u) = make_float2(o[u][2] * l[1], o[u][3] * l[1]);
        }
    }
}

/* The rows of a split prefill whose keys span several splits: a warp per (row, head)
 * merges the splits' (O, max, sum) in split order (and over a rotated value cache, V type
 * VT, rotates the row back). */
template <int HD, int VT>
__global__ void __launch_bounds__(128) k_attn_pf_merge(ak_cuda_args a) {
    AK_KERNEL_ENTRY(ak_p_attn, p);
    const int wi = blockIdx.x * 4 + (threadIdx.x >> 5), lane = threadIdx.x & 31, i = wi / p.n_heads, h = wi % p.n_heads;
    if (i >= p.n) return;
    int lo, hi;
    ak_key_range(&p, (const int32_t *)a.b[4], p.pos + i, &lo, &hi);
    const int S = pf_split(p), z0 = lo / S, z1 = (hi - 1) / S;
    if (z0 == z1) return;
    const float *pt = (const float *)a.scratch + ((size_t)i * p.n_heads + h) * (HD + 2);
    const size_t zs = (size_t)p.n * p.n_heads * (HD + 2);
    float M = -INFINITY;
    for (int z = z0; z <= z1; z++) M = fmaxf(M, pt[z * zs + HD]);
    float L = 0.f, o[HD / 32];
#pragma unroll
    for (int d = 0; d < HD / 32; d++) o[d] = 0.f;
    for (int z = z0; z <= z1; z++) {
        const float *q = pt + z * zs, f = q[HD] == -INFINITY ? 0.f : exp2f(q[HD] - M);   /* maxima in log2 units */
        L += q[HD + 1] * f;
#pragma unroll
        for (int d = 0; d < HD / 32; d++) o[d] += q[lane + 32 * d] * f;
    }
    float *out = (float *)a.b[3] + (size_t)i * p.n_heads * HD + (size_t)h * HD;
    const float il = L > 0.f ? 1.f / L : 0.f;
    __shared__ float xr[4][HD];
    float *x = xr[threadIdx.x >> 5];
    const int vr = ak_kv_rot(VT, HD, 1);   /* a constant: 0 over an F16 cache */
#pragma unroll
    for (int d = 0; d < HD / 32; d++) {
        if (vr) x[lane + 32 * d] = o[d] * il;
        else out[lane + 32 * d] = o[d] * il;
    }
    if (!vr) return;
    __syncwarp();
    ak_wht_warp(x, HD, vr);
#pragma unroll
    for (int d = 0; d < HD / 32; d++) out[lane + 32 * d] = x[lane + 32 * d];
}

/* Scratch of the split prefill: every split's (O, max, sum) for max_rows rows. */
extern "C" size_t ak_cuda_attn_prefill_scratch(const ak_p_attn *p, int max_rows) {
    const int nz = pf_nz(*p);
    if (!pf_tc(p) || nz == 1) return 0;
    return (size_t)nz * max_rows * p->n_heads * (p->head_dim + 2) * 4;
}

/* ---- decode on tensor cores (F16 or quantized cache, heads of 64 or 128; 256: dec_tc) ----
 * The scalar kernel spends about 140 instructions a key on an 8B shape (its lanes split
 * the head, so every score is a warp reduction): at depth it is bound by issue, near half
 * the H100's bandwidth. Here the query heads of a KV head (up to AK_DTC_MG) are the rows
 * of an m16n8k16's A operand: per 16 keys a warp issues 32 mma and a few dozen other
 * instructions. Q and P go in as two f16 halves each, x = hi + lo, hi in row g and lo in
 * the padding row g + 8, and the two rows' products are added: about 22 bits, as the
 * float kernel (f16 alone costs 1e-3 relative, see the tensor-core prefill), at no extra
 * mma. Each warp streams its own 16-key tiles of K and V (swizzled for ldmatrix) through
 * a cp.async pipeline as the scalar kernel does, and the block ends as that kernel does
 * (dec_finish). */
#define AK_DTC_WARPS 4
#define AK_DTC_MG 8
#define AK_DTC_K 16
/* A warp's pipeline stage holds a tile's K then V: swizzled f16 rows for an F16 cache, the
 * raw rows (16 consecutive rows are contiguous) for a quantized one. A Q4_0 tile becomes a
 * swizzled f16 tile of the warp's own (CONV) before the products; a Q8_0 tile's codes go
 * from the raw rows straight into the mma's fragments (KR, VR: dtc_kfrag, dtc_vfrag), the
 * same f16 values without the round trip through shared memory: tg128 after 16384 tokens
 * 1.07x (Qwen3-0.6B shape) and 1.05x (8B), H200. Sized for three blocks an SM (registers
 * capped at 168) it was 0.8x. */
template <int HD, int KT, int VT> struct dtc_cfg {
    static constexpr bool KQ = KT != AK_F16, VQ = VT != AK_F16, KR = KT == AK_Q8_0, VR = VT == AK_Q8_0;
    static constexpr int F16T = AK_DTC_K * HD * 2;   /* bytes of an f16 tile */
    static constexpr int KB = KQ ? (AK_DTC_K * ak_kv_row_bytes(KT, HD) + 15) / 16 * 16 : F16T;
    static constexpr int VB = VQ ? (AK_DTC_K * ak_kv_row_bytes(VT, HD) + 15) / 16 * 16 : F16T;
    static constexpr int STAGE = KB + VB, CONV = ((KQ && !KR) + (VQ && !VR)) * F16T;
    /* stages a warp: at head 128, 96 KB a block (F16; Q8_0 68 KB and Q4_0 102 KB with 4), two an SM.
     * Against 2 stages (H200, 0.6B shape, one run): tg128 at d16384 +13 % (F16) and +10 %
     * (Q8_0), at d4096 -1 % and +6 %; heads of 64 (3 stages before too) */
    static constexpr int P = HD > 64 && KQ && VQ ? 4 : 3;   /* a mixed pair: 92 KB with 3 */
    static constexpr int WARP = P * STAGE + CONV;
    static constexpr size_t PIPE = (size_t)AK_DTC_WARPS * WARP;
    static constexpr size_t SH = sizeof(float) * AK_DTC_WARPS * AK_DTC_MG * (HD + 2);
    static constexpr size_t SMEM = PIPE > SH ? PIPE : SH;
};

/* The B fragments ldsm_x4 gives for S = Q K^T (keys 8 n8 on, dims 32 k2 on: b[i] holds key
 * 8 n8 + g's dims 32 k2 + 8 i + 2 t4 and + 1), from a raw tile of Q8_0 rows: block k2's
 * scale and two codes a register. kr: the lane's row g of the tile; every other offset
 * is a constant. */
template <int HD>
__device__ __forceinline__ void dtc_kfrag(uint32_t (&b)[4], const uint8_t *kr, int n8, int k2, int t4) {
    const uint8_t *blk = kr + 8 * n8 * ak_kv_row_bytes(AK_Q8_0, HD) + 34 * k2;
    const __half2 d = __half2half2(*(const __half *)blk);
    const uint16_t *q = (const uint16_t *)(blk + 2 + 2 * t4);
#pragma unroll
    for (int i = 0; i < 4; i++) b[i] = h2_bits(q8_h2(q[4 * i], d));
}
/* The B fragments ldsm_x4_t gives for O += P V (b[i]: keys 8 (i & 1) + 2 t4 and + 1 of dim
 * 16 u2 + 8 (i >> 1) + g), from a raw tile of Q8_0 rows: each lane converts its row's pair
 * (key 8 (i & 1) + g, dims 2 t4 on; all in block u2 / 2, whose scales for the two rows
 * are d[0], d[1]) and movmatrix transposes the 8 x 8 block. vr: the lane's row g. */
template <int HD>
__device__ __forceinline__ void dtc_vfrag(uint32_t (&b)[4], const uint8_t *vr, const __half2 (&d)[2], int u2, int t4) {
    constexpr int RB = ak_kv_row_bytes(AK_Q8_0, HD);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const uint8_t *q = vr + 8 * (i & 1) * RB + 34 * (u2 >> 1) + 2 + 16 * (u2 & 1) + 8 * (i >> 1) + 2 * t4;
        const uint32_t h = h2_bits(q8_h2(*(const uint16_t *)q, d[i & 1]));
        asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(b[i]) : "r"(h));
    }
}
/* dtc_vfrag's scales: block k of the lane's rows g and g + 8 */
template <int HD> __device__ __forceinline__ void dtc_vscale(__half2 (&d)[2], const uint8_t *vr, int k) {
#pragma unroll
    for (int x = 0; x < 2; x++) d[x] = __half2half2(*(const __half *)(vr + 8 * x * ak_kv_row_bytes(AK_Q8_0, HD) + 34 * k));
}

template <int HD, int KT, int VT>
__global__ void __launch_bounds__(AK_DTC_WARPS * 32) k_attn_decode_tc(ak_cuda_args a) {
    using C = dtc_cfg<HD, KT, VT>;
    constexpr bool KQ = C::KQ, VQ = C::VQ, KR = C::KR, VR = C::VR;
    constexpr int W = AK_DTC_WARPS, MG = AK_DTC_MG, DPL = HD / 32;
    /* at heads of 256 Q's fragments (64 registers) wait in shared memory, lane by lane:
     * in registers beside O's 128 the kernel took 255 and spilled */
    constexpr bool QS = HD > 128;
    extern __shared__ __align__(16) uint8_t shraw[];
    __shared__ uint4 sqf[QS ? HD / 16 : 1][32];
    float (*sh)[MG][HD + 2] = reinterpret_cast<float (*)[MG][HD + 2]>(shraw);
    __shared__ float sq[MG + 2][HD];
    __shared__ float fw[MG][W + 2];
    __shared__ float rcs[2][HD / 2];
    __shared__ float mw[MG][AK_ATTN_MAX_SPLITS];
    __shared__ bool last;
    ak_trace_t tr_;
    const ak_stepv st_ = ak_step(a);
    const ak_p_attn p = ak_params<ak_p_attn>(a, st_);
    dec_share d;
    if (!dec_share_of<MG>(p, d)) return;
    const int group = p.n_heads / p.n_kv_heads;
    const int kvh = d.kvh, g0 = d.g0, G = d.G, s = d.s, S = d.S, k0 = d.k0, k1 = d.k1, cur = d.cur;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, t4 = lane & 3;
    const int rows = kv_rows(p), s0 = k0 % rows;   /* the split's keys: at most `rows` (kv_slot) */
    const size_t head0 = (size_t)kvh * rows;
    const __half *kc = (const __half *)a.b[1] + head0 * HD, *vc = (const __half *)a.b[2] + head0 * HD;
    const uint8_t *kq = (const uint8_t *)a.b[1] + head0 * ak_kv_row_bytes(KT, HD);
    const uint8_t *vq = (const uint8_t *)a.b[2] + head0 * ak_kv_row_bytes(VT, HD);
    uint8_t *mine = shraw + (size_t)w * C::WARP;
    __half *kconv = reinterpret_cast<__half *>(mine + C::P * C::STAGE), *vconv = kconv + (KQ && !KR ? AK_DTC_K * HD : 0);
    /* the warp's i-th tile: keys k0 + AK_DTC_K (w + W i) on; the key of this position
     * (cur) is made in this kernel (or by the rope_kv before it, which may still run)
     * and read when its tile is computed */
    auto issue = [&](int i) {
        const int j0 = k0 + AK_DTC_K * (w + W * i);
        if (j0 < k1) {
            uint8_t *d = mine + (size_t)(i % C::P) * C::STAGE;
#pragma unroll
            for (int c = lane; c < AK_DTC_K * HD / 8; c += 32) {
                const int r = c / (HD / 8), col = 8 * (c % (HD / 8)), j = j0 + r;
                const bool ok = j < k1 && j < cur;
                const size_t off = ok ? (size_t)kv_slot(j, k0, s0, rows) * HD + col : 0;
                if (!KQ) cp16_or_zero((__half *)d + dtc_at<HD>(r, col / 8), kc + off, ok);
                if (!VQ) cp16_or_zero((__half *)(d + C::KB) + dtc_at<HD>(r, col / 8), vc + off, ok);
            }
            /* the tile's rows from slot sj0; a ring's may wrap after n1 of them */
            const int nr = min(AK_DTC_K, min(k1, cur) - j0), sj0 = kv_slot(j0, k0, s0, rows), n1 = min(nr, rows - sj0);
            if (KQ) raw_issue<ak_kv_row_bytes(KT, HD)>(d, kq, sj0, nr, n1, C::KB);
            if (VQ) raw_issue<ak_kv_row_bytes(VT, HD)>(d + C::KB, vq, sj0, nr, n1, C::VB);
        }
        ak_cp_async_commit();
    };
    if (!st_.stopped)
        for (int i = 0; i < C::P - 1; i++) issue(i);
    if (a.rope.head_dim) rope_table<DPL>(a, p, rcs);
    ak_pdl_wait();
    tr_.start(a, st_);
    if (st_.stopped) return;
    const float *qv = (const float *)a.b[0] + (size_t)(p.n - 1) * p.ld_q + (size_t)(kvh * group + g0) * HD;
    if (a.rope.head_dim) {
        rope_fold<DPL, KT, VT>(a, p, kvh, kvh * group + g0, G, s == S - 1, sq, rcs);
        qv = &sq[0][0];
    }
    ak_pdl_trigger();
    tr_.mark();
    /* A fragments of Q: row g (under G a head) its f16 part, row g + 8 the rest, so every
     * product row g + 8 gives completes row g's (the padding rows do the second half) */
    uint32_t qf[QS ? 1 : HD / 16][4];
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
        uint32_t f[4];
#pragma unroll
        for (int x = 0; x < 2; x++) {
            const int d = 16 * kk + 2 * t4 + 8 * x;
            const bool in = g < G;
            split_h2(in ? qv[(size_t)g * HD + d] : 0.f, in ? qv[(size_t)g * HD + d + 1] : 0.f, f[2 * x], f[2 * x + 1]);
        }
        if constexpr (QS) {
            if (w == 0) sqf[kk][lane] = make_uint4(f[0], f[1], f[2], f[3]);
        } else
#pragma unroll
            for (int x = 0; x < 4; x++) qf[kk][x] = f[x];
    }
    if constexpr (QS) __syncthreads();
    float o[HD / 8][4], m = -INFINITY, l = 0.f;
#pragma unroll
    for (int u = 0; u < HD / 8; u++) o[u][0] = o[u][1] = o[u][2] = o[u][3] = 0.f;
    for (int i = 0;; i++) {
        const int j0 = k0 + AK_DTC_K * (w + W * i);
        if (j0 >= k1) break;
        issue(i + C::P - 1);   /* into the slot computed last round */
        ak_cp_async_wait<C::P - 1>();
        __syncwarp();   /* the other lanes' copies */
        uint8_t *sd = mine + (size_t)(i % C::P) * C::STAGE;
        const __half *kt = KQ ? kconv : (const __half *)sd, *vt = VQ ? vconv : (const __half *)(sd + C::KB);
        (void)kt, (void)vt;   /* unread on a Q8_0 path */
        const int cur_row = cur >= j0 && cur < j0 + AK_DTC_K && cur < k1 ? cur - j0 : -1;
        const size_t scur = kv_slot(cur, k0, s0, rows);
        if (KQ && !KR) kv_dequant<KT, HD>(kconv, sd, kq + scur * ak_kv_row_bytes(KT, HD), AK_DTC_K, AK_DTC_K, cur_row, lane, 32);
        if (VQ && !VR) kv_dequant<VT, HD>(vconv, sd + C::KB, vq + scur * ak_kv_row_bytes(VT, HD), AK_DTC_K, AK_DTC_K, cur_row, lane, 32);
        if ((KR || VR) && cur_row >= 0) {   /* this position's raw rows from the cache itself */
            constexpr int RW = ak_kv_row_bytes(AK_Q8_0, HD) / 4;   /* words a row */
            for (int c = lane; c < 2 * RW; c += 32) {
                const bool v = c >= RW;
                if (v ? !VR : !KR) continue;
                ((uint32_t *)((v ? sd + C::KB : sd) + (size_t)cur_row * 4 * RW))[c % RW] = ((const uint32_t *)((v ? vq : kq) + scur * 4 * RW))[c % RW];
            }
        }
        if (cur_row >= 0 && (!KQ || !VQ)) {
            for (int c = lane; c < HD / 4; c += 32) {
                const bool v = c >= HD / 8;
                const int col = 8 * (c % (HD / 8));
                if (v ? VQ : KQ) continue;
                *(uint4 *)((__half *)(v ? sd + C::KB : sd) + dtc_at<HD>(cur_row, col / 8)) = *(const uint4 *)((v ? vc : kc) + scur * HD + col);
            }
        }
        if (KQ || VQ || cur_row >= 0) __syncwarp();
        /* S = Q K^T for keys 8 n8 on; even and odd k16 steps in two accumulators (two
         * chains of dependent mma, not one twice as long) */
        float sa[2][4], sb[2][4];
#pragma unroll
        for (int n8 = 0; n8 < 2; n8++) {
#pragma unroll
            for (int e = 0; e < 4; e++) sa[n8][e] = sb[n8][e] = 0.f;
#pragma unroll
            for (int k2 = 0; k2 < HD / 32; k2++) {
                uint32_t b[4];   /* keys 8 n8 on, dims 32 k2 on: b0, b1 of two k16 steps */
                if constexpr (KR) dtc_kfrag<HD>(b, sd + g * ak_kv_row_bytes(AK_Q8_0, HD), n8, k2, t4);
                else ldsm_x4(b, kt + dtc_at<HD>(8 * n8 + (lane & 7), 4 * k2 + (lane >> 3)));
                uint4 q0, q1;
                if constexpr (QS) q0 = sqf[2 * k2][lane], q1 = sqf[2 * k2 + 1][lane];
                else {
                    const uint32_t *r0 = qf[QS ? 0 : 2 * k2], *r1 = qf[QS ? 0 : 2 * k2 + 1];
                    q0 = make_uint4(r0[0], r0[1], r0[2], r0[3]), q1 = make_uint4(r1[0], r1[1], r1[2], r1[3]);
                }
                mma16816(sa[n8], q0.x, q0.y, q0.z, q0.w, b[0], b[1]);
                mma16816(sb[n8], q1.x, q1.y, q1.z, q1.w, b[2], b[3]);
            }
        }
        /* row g's scores of keys 8 n8 + 2 t4 + e, online softmax in log2 units (a quad
         * holds a head) */
        float sc[2][2], mx = -INFINITY;
#pragma unroll
        for (int n8 = 0; n8 < 2; n8++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const float dot = (sa[n8][e] + sa[n8][e + 2]) + (sb[n8][e] + sb[n8][e + 2]);
                const float v = j0 + 8 * n8 + 2 * t4 + e < k1 ? attn_score(dot, p) * 1.44269504f : -INFINITY;
                sc[n8][e] = v;
                mx = fmaxf(mx, v);
            }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float mn = fmaxf(m, mx);   /* the tile's first key is in range: finite */
        if (__any_sync(0xffffffffu, mn != m)) {   /* deep in a cache the maxima settle: no rescale */
            const float c = exp2f(m - mn);
            l *= c;
#pragma unroll
            for (int u = 0; u < HD / 8; u++) o[u][0] *= c, o[u][1] *= c, o[u][2] *= c, o[u][3] *= c;
            m = mn;
        }
#pragma unroll
        for (int n8 = 0; n8 < 2; n8++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                sc[n8][e] = exp2f(sc[n8][e] - m);
                l += sc[n8][e];
            }
        /* P as the A operand: row g its f16 part, row g + 8 the rest */
        uint32_t pf[4];
        split_h2(sc[0][0], sc[0][1], pf[0], pf[1]);
        split_h2(sc[1][0], sc[1][1], pf[2], pf[3]);
        const uint8_t *vr = sd + C::KB + g * ak_kv_row_bytes(AK_Q8_0, HD);
        __half2 vd[2];
#pragma unroll
        for (int u2 = 0; u2 < HD / 16; u2++) {
            uint32_t b[4];   /* V transposed: keys 0-7 and 8-15 of dims 16 u2 on, then of 16 u2 + 8 on */
            if constexpr (VR) {
                if (u2 % 2 == 0) dtc_vscale<HD>(vd, vr, u2 / 2);
                dtc_vfrag<HD>(b, vr, vd, u2, t4);
            }
            else ldsm_x4_t(b, vt + dtc_at<HD>(8 * ((lane >> 3) & 1) + (lane & 7), 2 * u2 + (lane >> 4)));
            mma16816(o[2 * u2], pf[0], pf[1], pf[2], pf[3], b[0], b[1]);
            mma16816(o[2 * u2 + 1], pf[0], pf[1], pf[2], pf[3], b[2], b[3]);
        }
    }
    ak_cp_async_wait<0>();
    __syncthreads();   /* the merge area is the pipeline's */
    /* row g: the quad's sum, the max in natural units, the two halves' products added */
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (t4 == 0) { sh[w][g][0] = m * 0.693147181f; sh[w][g][1] = l; }
#pragma unroll
    for (int u = 0; u < HD / 8; u++) {
        sh[w][g][2 + 8 * u + 2 * t4] = o[u][0] + o[u][2];
        sh[w][g][2 + 8 * u + 2 * t4 + 1] = o[u][1] + o[u][3];
    }
    __syncthreads();
    dec_finish<W, MG, HD>(a, p, sh, fw, mw, &last, kvh * group + g0, G, s, S, ak_kv_rot(VT, HD, 1));
}

/* Decode heads per block: AK_DTC_MG on tensor cores (an F16 or quantized cache, heads of
 * 64 or 128; at 256 only F16 beside a quantized cache, which the scalar kernel cannot
 * read), else the scalar kernel's dec_mg. At 256 the scalar kernel is the faster: with
 * every pair on tensor cores (one block an SM) tg128 on the Gemma 3 shapes went 0.94-0.97x
 * with an F16 cache and 0.99-1.03x with Q8_0 (H200, empty to 16384 keys, 2026-11-29). */
static bool dec_tc(const ak_p_attn *p) {
    return p->kt != AK_F32 &&
           (p->head_dim == 64 || p->head_dim == 128 || (p->head_dim == 256 && (p->kt == AK_F16) != (p->vt == AK_F16)));
}

/* Decode splits of the cache (the grid's y): enough blocks for two per SM at any depth, so
 * that a deep cache streams from every SM (with 16 splits and 8 KV heads, one block an SM,
 * H200 8B Q4_0 at depth 16384 read its KV at 0.8 TB/s), at most AK_ATTN_MAX_SPLITS (the
 * merge's share) and at least AK_ATTN_FOLD; a step uses ak_attn_used_splits of them. */
extern "C" int ak_cuda_attn_splits(const ak_p_attn *p, int n_sm) {
    const int group = p->n_heads / p->n_kv_heads, mg = dec_tc(p) ? AK_DTC_MG : dec_mg(p->head_dim, group);
    const int blocks = p->n_kv_heads * ((group + mg - 1) / mg);
    int s = ak_cdiv(2 * (int64_t)n_sm, blocks);
    s = s < AK_ATTN_FOLD ? AK_ATTN_FOLD : s > AK_ATTN_MAX_SPLITS ? AK_ATTN_MAX_SPLITS : s;
    return ak_attn_used_splits(p->max_seq, s);
}

template <int HD, int KT, int VT> static cudaError_t attn_decode_tc(const ak_cuda_cmd *c, cudaStream_t st) {
    const ak_p_attn *p = (const ak_p_attn *)c->a.p;
    const int group = p->n_heads / p->n_kv_heads, passes = (group + AK_DTC_MG - 1) / AK_DTC_MG;
    return ak_launch(k_attn_decode_tc<HD, KT, VT>, dim3(p->n_kv_heads * passes, c->aux[1]), dim3(AK_DTC_WARPS * 32),
                     dtc_cfg<HD, KT, VT>::SMEM, st, c->a);
}
/* The tensor-core kernels' instantiations for every (K, V) cache pair of F16, Q8_0 and
 * Q4_0: F::go launches (or, with c NULL, raises the shared-memory limit of) the one for
 * head HD. */
struct dec_tc_k {
    template <int HD, int KT, int VT> static cudaError_t go(const ak_cuda_cmd *c, cudaStream_t st) {
        if (c) return attn_decode_tc<HD, KT, VT>(c, st);
        return cudaFuncSetAttribute(k_attn_decode_tc<HD, KT, VT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dtc_cfg<HD, KT, VT>::SMEM);
    }
};
struct pf_tc_k {
    template <int HD, int KT, int VT> static cudaError_t go(const ak_cuda_cmd *c, cudaStream_t st) {
        if (!c) return cudaFuncSetAttribute(k_attn_prefill_tc<HD, KT, VT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tc_smem<HD>());
        const ak_p_attn *p = (const ak_p_attn *)c->a.p;
        const int nz = pf_nz(*p);
        cudaError_t e = ak_launch(k_attn_prefill_tc<HD, KT, VT>, dim3(p->n_heads * (HD / tc_dv(HD)), ak_cdiv(c->rows, AK_TC_Q), nz), dim3(128),
                                  tc_smem<HD>(), st, c->a);
        if (e != cudaSuccess || nz == 1) return e;
        return ak_launch(k_attn_pf_merge<HD, VT>, dim3(ak_cdiv(c->rows * p->n_heads, 4)), dim3(128), 0, st, c->a);
    }
};
/* heads of 256 on tensor cores: F16 beside a quantized cache (dec_tc) */
static cudaError_t dec_tc_mixed(int kt, int vt, const ak_cuda_cmd *c, cudaStream_t st) {
    if (kt == AK_F16) return vt == AK_Q8_0 ? dec_tc_k::go<256, AK_F16, AK_Q8_0>(c, st) : dec_tc_k::go<256, AK_F16, AK_Q4_0>(c, st);
    return kt == AK_Q8_0 ? dec_tc_k::go<256, AK_Q8_0, AK_F16>(c, st) : dec_tc_k::go<256, AK_Q4_0, AK_F16>(c, st);
}
template <class F, int HD, int KT> static cudaError_t kv_pair_v(int vt, const ak_cuda_cmd *c, cudaStream_t st) {
    return vt == AK_Q8_0 ? F::template go<HD, KT, AK_Q8_0>(c, st)
         : vt == AK_Q4_0 ? F::template go<HD, KT, AK_Q4_0>(c, st) : F::template go<HD, KT, AK_F16>(c, st);
}
template <class F, int HD> static cudaError_t kv_pair_hd(int kt, int vt, const ak_cuda_cmd *c, cudaStream_t st) {
    return kt == AK_Q8_0 ? kv_pair_v<F, HD, AK_Q8_0>(vt, c, st) : kt == AK_Q4_0 ? kv_pair_v<F, HD, AK_Q4_0>(vt, c, st) : kv_pair_v<F, HD, AK_F16>(vt, c, st);
}
/* heads of 64 or 128 (both kernels), or 256 (the prefill's; the decode's: dec_tc_mixed) */
template <class F> static cudaError_t kv_pair(int hd, int kt, int vt, const ak_cuda_cmd *c, cudaStream_t st) {
    return hd == 64 ? kv_pair_hd<F, 64>(kt, vt, c, st) : kv_pair_hd<F, 128>(kt, vt, c, st);
}
static cudaError_t kv_pair_pf(int hd, int kt, int vt, const ak_cuda_cmd *c, cudaStream_t st) {
    return hd == 256 ? kv_pair_hd<pf_tc_k, 256>(kt, vt, c, st) : kv_pair<pf_tc_k>(hd, kt, vt, c, st);
}

extern "C" int ak_cuda_attn_decode(const ak_cuda_cmd *c, ak_cuda_ctx *x) {
    const ak_p_attn *p = (const ak_p_attn *)c->a.p;
    if (dec_tc(p))
        return (int)(p->head_dim == 256 ? dec_tc_mixed(p->kt, p->vt, c, x->stream) : kv_pair<dec_tc_k>(p->head_dim, p->kt, p->vt, c, x->stream));
    switch (p->head_dim) {
    case 32: return (int)attn_decode_group<1>(c, x->stream);
    case 64: return (int)attn_decode_group<2>(c, x->stream);
    case 128: return (int)attn_decode_group<4>(c, x->stream);
    case 256: return (int)attn_decode_group<8>(c, x->stream);
    default: return (int)cudaErrorInvalidValue;   /* refused at encode */
    }
}

extern "C" int ak_cuda_attn_prefill(const ak_cuda_cmd *c, ak_cuda_ctx *x) {
    const ak_p_attn *p = (const ak_p_attn *)c->a.p;
    if (pf_tc(p)) return (int)kv_pair_pf(p->head_dim, p->kt, p->vt, c, x->stream);
    dim3 grid(p->n_heads, ak_cdiv(c->rows, AK_PF_QB));
    return (int)ak_launch(k_attn_prefill, dim3(grid), dim3(AK_PF_THREADS), pf_smem(p->head_dim), x->stream, c->a);
}

extern "C" int ak_cuda_init_attention(void) {
    cudaError_t e = cudaFuncSetAttribute(k_attn_prefill, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)pf_smem(512));
    if (e == cudaSuccess) e = dec_attrs<1>();
    if (e == cudaSuccess) e = dec_attrs<2>();
    if (e == cudaSuccess) e = dec_attrs<4>();
    if (e == cudaSuccess) e = dec_attrs<8>();
    const int kvt[3] = {AK_F16, AK_Q8_0, AK_Q4_0};
    for (int i = 0; i < 27 && e == cudaSuccess; i++) {
        const int hd = 64 << (i / 9);
        const int kt = kvt[i % 9 / 3], vt = kvt[i % 3];
        if (hd < 256) e = kv_pair<dec_tc_k>(hd, kt, vt, NULL, 0);
        else if ((kt == AK_F16) != (vt == AK_F16)) e = dec_tc_mixed(kt, vt, NULL, 0);
        if (e == cudaSuccess) e = kv_pair_pf(hd, kt, vt, NULL, 0);
    }
    return (int)e;
}
