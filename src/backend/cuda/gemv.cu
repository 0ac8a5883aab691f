/* GEMV for decode (and the rowwise GEMM, AK_CUDA_GEMV_BATCH rows at a time): y[:, seg] = W_seg x (+ bias)
 * for up to three matrices side by side, and the activation + down GEMV.
 *
 * Streaming path (Q4_0, Q8_0 in the repacked layout, one x row, K a multiple of 256):
 * k_gemv_q below. x is multiplied as int8 codes with dp4a, as on the CPU backend.
 * Every other type in the file's layout (one x row): k_gemv_s, the same ring of stages
 * filled by cp.async, decoded by kquant.cuh's row of the type (float x for F16/BF16/F32),
 * with the same x prologues and epilogues; k_gemv_k, a warp per two rows loading into
 * registers, where rows are not whole 16 bytes (and Q4_0/Q8_0 rows whose K is not a
 * multiple of 256).
 * Generic path (every dtype, up to 8 x rows): a warp per output row, lanes over 32-value
 * sub-blocks dequantized as the reference does. */
#include "backend/cuda/kquant.cuh"

#define AK_GEMV_THREADS 128

typedef struct { int g0, g1; } seg_range;

/* Segments by selects, never a run-time array index (which would put the parameter
 * block in local memory). Columns are global: segment g starts at seg_start(g). */
__device__ __forceinline__ int seg_start(const ak_p_mm &p, int g) {
    return g == 0 ? 0 : g == 1 ? p.N[0] : g == 2 ? p.N[0] + p.N[1] : p.N[0] + p.N[1] + p.N[2];
}
__device__ __forceinline__ int seg_of(const ak_p_mm &p, int col) {
    return (p.nseg > 1 && col >= p.N[0]) + (p.nseg > 2 && col >= p.N[0] + p.N[1]);
}
__device__ __forceinline__ const uint8_t *seg_w(const ak_cuda_args &a, int g) {
    return (const uint8_t *)(g == 0 ? a.b[0] : g == 1 ? a.b[1] : a.b[2]);
}
__device__ __forceinline__ int seg_dtype(const ak_p_mm &p, int g) { return g == 0 ? p.dtype[0] : g == 1 ? p.dtype[1] : p.dtype[2]; }

/* Streaming GEMV over repacked Q4_0 / Q8_0 rows (one x row; M of them: launch_qm). Every
 * block first turns x into int8 codes in shared memory (per 32 values d = max|x|/127, as
 * the CPU backend does), optionally computing x on the way (PRO: the RMSNorm of the next block, or
 * act(g) * u for the down projection: the separate norm and activation kernels go
 * away). A row is cut into S slices of JC items (an item: 32 quant blocks, a lane per
 * block), so that a lane keeps the x codes of its slice in registers whatever K is
 * (reading them from shared memory per item left the long rows at 1.2 TB/s). The warps
 * of a block form row groups of S warps, one per slice; each warp streams its slice of
 * every row of its group (rows g + t * groups) through a ring of AK_GQ_STAGES stages in
 * shared memory filled by cp.async, so that about 128 KB per multiprocessor are in
 * flight without holding registers; dp4a multiplies, a warp sum closes each slice, and
 * with S > 1 the slices meet in shared memory at the end. The first stages are
 * requested before waiting for the previous kernel (weights depend on nothing it
 * writes); where gq_prod says so, a 17th warp fills every warp's ring by bulk copies
 * instead and never waits. The result is stored, or added to y (the residual add). */
#define AK_GQ_THREADS 512   /* one block per multiprocessor: x is prepared once per SM (256 threads: -20 %) */
#define AK_GQ_WARPS (AK_GQ_THREADS / 32)
#define AK_GQ_STAGES 4      /* 2 stages (two blocks fit per multiprocessor): -2 % to +1 % */
#define AK_GQ_MAX_K 32768

/* Bytes per item (32 blocks of quants, then their 32 scales), the most items of a slice
 * (registers: 8 words of x codes per item) and items per ring stage. */
template <int DT> struct gq_shape {
    static constexpr int QB = DT == AK_Q4_0 ? 16 : 32;
    static constexpr int ITEM = 32 * QB + 64;
    static constexpr int MAX_JC = DT == AK_Q4_0 ? 4 : 2;
    static constexpr int U = DT == AK_Q4_0 ? 4 : 2;
    static constexpr int STAGE = U * ITEM;
};
/* How a launch cuts rows: S slices of JC items, groups of S warps per block. With pair
 * (the gated epilogue, see k_gemv_q) a group takes rows two at a time. */
struct gq_cut { int S, JC, groups, tmax; };
template <int DT> static gq_cut gq_plan(int K, int total, int blocks, bool pair, int max_jc = gq_shape<DT>::MAX_JC) {
    int J = (K / 32 + 31) / 32;
    gq_cut c;
    c.S = (J + max_jc - 1) / max_jc;
    c.JC = (J + c.S - 1) / c.S;
    c.groups = blocks * (AK_GQ_WARPS / c.S);
    c.tmax = c.S <= 1 ? 0 : pair ? 2 * ((total / 2 + c.groups - 1) / c.groups) : (total + c.groups - 1) / c.groups;   /* slice sums kept per warp */
    return c;
}
static __host__ __device__ size_t gq_x_bytes(int K) { return ((size_t)K + (size_t)(K / 32) * 8 + 15) & ~(size_t)15; }
/* gated codes: how many of the NP products a grid of `blocks` makes as codes (whole
 * rounds of one chunk of 32 per block, see k_gemv_q) */
static __host__ __device__ int gq_code_rounds(int NP, int blocks) { return NP / 32 / blocks; }
static __host__ __device__ int gq_code_k(int NP, int blocks) { return 32 * blocks * gq_code_rounds(NP, blocks); }
template <int DT> static size_t gq_smem(int K, int tmax) {
    return gq_x_bytes(K) + (size_t)AK_GQ_WARPS * AK_GQ_STAGES * gq_shape<DT>::STAGE + (size_t)AK_GQ_WARPS * tmax * 4;
}
#define AK_GQ_SMEM_MAX (225 * 1024)   /* the opt-in limit is 227 KB, static shared memory included */

/* act(g) * u, SiLU with the fast exp and divide (the product becomes int8 codes next). */
__device__ __forceinline__ float gq_act_mul(int act, float g, float u) {
    return act == AK_ACT_SILU ? __fdividef(g, 1.0f + __expf(-g)) * u : ak_dev_act(act, g) * u;
}

/* Barriers among the 16 consumer warps only (the producer warp takes no part). */
template <bool PROD> __device__ __forceinline__ void gq_sync() {
    if (PROD) asm volatile("bar.sync 1, %0;" ::"n"(AK_GQ_THREADS) : "memory");
    else __syncthreads();
}
template <bool PROD> __device__ __forceinline__ float gq_block_sum(float v, float *red) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    v = ak_warp_sum(v);
    gq_sync<PROD>();
    if (lane == 0) red[w] = v;
    gq_sync<PROD>();
    v = lane < AK_GQ_WARPS ? red[lane] : 0.f;
    return ak_warp_sum(v);
}
/* mbarriers and bulk copies (sm_90; the PROD kernels run only there, see gq_prod) */
__device__ __forceinline__ uint32_t gq_sa(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define AK_SM90_ASM(...) __trap()
#else
#define AK_SM90_ASM(...) asm volatile(__VA_ARGS__)
#endif
__device__ __forceinline__ void mb_init(uint64_t *b, int n) { AK_SM90_ASM("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(gq_sa(b)), "r"(n) : "memory"); }
/* try_wait with a time hint: a consumer sleeps until its stage lands rather than spinning */
__device__ __forceinline__ bool mb_test(uint64_t *b, int parity) {
    uint32_t ok = 1;
    AK_SM90_ASM("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\n selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(ok) : "r"(gq_sa(b)), "r"(parity), "r"(1000000) : "memory");
    return ok;
}
__device__ __forceinline__ void mb_wait(uint64_t *b, int parity) { while (!mb_test(b, parity)) {} }
__device__ __forceinline__ bool mb_poll(uint64_t *b, int parity) {   /* never sleeps */
    uint32_t ok = 1;
    AK_SM90_ASM("{\n .reg .pred p;\n mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(ok) : "r"(gq_sa(b)), "r"(parity) : "memory");
    return ok;
}
__device__ __forceinline__ void mb_arrive(uint64_t *b) {
    AK_SM90_ASM("{\n .reg .b64 st;\n mbarrier.arrive.shared::cta.b64 st, [%0];\n}" ::"r"(gq_sa(b)) : "memory");
}
/* one arrival that also expects `bytes` of bulk copies to land */
__device__ __forceinline__ void mb_arrive_tx(uint64_t *b, uint32_t bytes) {
    AK_SM90_ASM("{\n .reg .b64 st;\n mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}" ::"r"(gq_sa(b)), "r"(bytes) : "memory");
}
/* a copy engine transfer of n bytes (16-byte multiples and alignment) that completes on mbar */
__device__ __forceinline__ void ak_bulk_copy(void *dst, const void *src, uint32_t n, uint64_t *mbar) {
    AK_SM90_ASM("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(gq_sa(dst)), "l"(src), "r"(n), "r"(gq_sa(mbar)) : "memory");
}
/* 32 values over TPB threads (V each) as int8 codes: per 32 d = max|x| / 127, the codes
 * packed four to a word, and their sum (every thread of the 32 gets amax and sum) */
template <int TPB, int V>
__device__ __forceinline__ void gq_q8(const float (&v)[V], int (&packed)[V / 4], float &amax, int &sum) {
    amax = 0.f;
#pragma unroll
    for (int i = 0; i < V; i++) amax = fmaxf(amax, fabsf(v[i]));
#pragma unroll
    for (int o = 1; o < TPB; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float id = amax > 0.f ? 127.f / amax : 0.f;
    sum = 0;
#pragma unroll
    for (int c = 0; c < V / 4; c++) {
        int q0 = __float2int_rn(v[4 * c] * id), q1 = __float2int_rn(v[4 * c + 1] * id);
        int q2 = __float2int_rn(v[4 * c + 2] * id), q3 = __float2int_rn(v[4 * c + 3] * id);
        sum += q0 + q1 + q2 + q3;
        packed[c] = (q0 & 0xFF) | (q1 & 0xFF) << 8 | (q2 & 0xFF) << 16 | (int)((uint32_t)(q3 & 0xFF) << 24);
    }
#pragma unroll
    for (int o = 1; o < TPB; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
}

/* x as int8 codes in shared memory: per 32 values d = max|x| / 127, the codes and their
 * sum, with TPB threads per 32 values (all loads of a thread in flight at once), x made
 * on the way (PRO: RMSNorm with pro_w, act(g) * u with u at x + K, or the merge of the
 * attention's ms splits in pro_w, where ms > 0). FLT: x as floats at xq instead (the
 * float weights' GEMV; xd and xs unused). PRO_POST: the RMSNorm of x + rmsnorm(a) * pw,
 * a post-norm's add folded in (AK_FUSE_POST_IN; a, pw and where that sum goes in rb). */
template <int TPB, int PRO, bool PROD, bool FLT = false>
__device__ __forceinline__ void gq_prep(const ak_cuda_args &a, const float *x, int K, int nb, int8_t *xq, float *xd,
                                        int *xs, int ms) {
    constexpr int V = 32 / TPB;
    const int per = AK_GQ_THREADS / TPB, sub = threadIdx.x % TPB;
    /* RMSNorm: with one pass (every block has its threads) the sum of squares comes from
     * the registers the codes are made from; else from a pass of its own first */
    const bool one = nb <= per;
    constexpr bool NORM = PRO == AK_CUDA_PRO_NORM || PRO == AK_CUDA_PRO_POST;
    __shared__ float red[32];
    float r = 1.f;
    if constexpr (PRO == AK_CUDA_PRO_POST) {
        /* x' = x + rmsnorm(a) pw, written out by every block and read back by it: each
         * block's threads then see their own block's stores, which other blocks overwrite
         * with the same values (made in registers, the loads below would take half as
         * many again) */
        const float4 *pa = (const float4 *)a.rb[0], *pw = (const float4 *)a.rb[1];
        float4 *xo = (float4 *)a.rb[2];
        float ss = 0;
        for (int k = threadIdx.x; k < K / 4; k += AK_GQ_THREADS) {
            const float4 v = pa[k];
            ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
        const float ra = 1.0f / sqrtf(gq_block_sum<PROD>(ss, red) / (float)K + a.eps);
        for (int k = threadIdx.x; k < K / 4; k += AK_GQ_THREADS) {
            float4 t = ((const float4 *)x)[k];
            const float4 u = pa[k], w = pw[k];
            t.x += u.x * ra * w.x; t.y += u.y * ra * w.y; t.z += u.z * ra * w.z; t.w += u.w * ra * w.w;
            xo[k] = t;
        }
        gq_sync<PROD>();
        x = (const float *)xo;
    }
    if (NORM && !one) {
        float ss = 0;
#pragma unroll 4
        for (int k = threadIdx.x; k < K / 4; k += AK_GQ_THREADS) {
            float4 v = ((const float4 *)x)[k];
            ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
        }
        r = 1.0f / sqrtf(gq_block_sum<PROD>(ss, red) / (float)K + a.eps);
    }
    for (int b0 = 0; b0 < nb; b0 += per) {
        const int b = b0 + (int)threadIdx.x / TPB, k0 = 32 * b + V * sub;
        const bool in = b < nb;
        float v[V], w[V];
#pragma unroll
        for (int i = 0; i < V; i++) v[i] = w[i] = 0.f;
        if (in && PRO == AK_CUDA_PRO_MERGE && ms) {
            /* x[k0, k0 + V) lies in one head: merge its splits with the arithmetic of
             * the attention's own merge */
            const int hd = a.mrg_hd, PS = hd + AK_ATTN_PART_PAD;   /* per split: max, sum, pad, pad, V */
            const float *ph = a.pro_w + (size_t)(k0 / hd) * a.mrg_splits * PS;
            float M = -INFINITY, mu[AK_ATTN_FOLD];
#pragma unroll
            for (int u = 0; u < AK_ATTN_FOLD; u++) {
                mu[u] = u < ms ? __ldcg(ph + (size_t)u * PS) : -INFINITY;
                M = fmaxf(M, mu[u]);
            }
            float L = 0.f;
#pragma unroll
            for (int u = 0; u < AK_ATTN_FOLD; u++) {
                if (mu[u] == -INFINITY) continue;
                const float *pu = ph + (size_t)u * PS;
                const float f = expf(mu[u] - M);
                L += __ldcg(pu + 1) * f;
#pragma unroll
                for (int c = 0; c < V / 4; c++) {
                    float4 t = __ldcg((const float4 *)(pu + AK_ATTN_PART_PAD + k0 % hd) + c);
                    v[4 * c] += t.x * f; v[4 * c + 1] += t.y * f; v[4 * c + 2] += t.z * f; v[4 * c + 3] += t.w * f;
                }
            }
#pragma unroll
            for (int i = 0; i < V; i++) v[i] = L > 0.f ? v[i] / L : 0.f;
        } else if (in) {
#pragma unroll
            for (int c = 0; c < V / 4; c++) {
                float4 t = ((const float4 *)(x + k0))[c];
                v[4 * c] = t.x; v[4 * c + 1] = t.y; v[4 * c + 2] = t.z; v[4 * c + 3] = t.w;
                if (NORM || PRO == AK_CUDA_PRO_ACT) {
                    t = ((const float4 *)(PRO == AK_CUDA_PRO_ACT ? x + K + k0 : a.pro_w + k0))[c];
                    w[4 * c] = t.x; w[4 * c + 1] = t.y; w[4 * c + 2] = t.z; w[4 * c + 3] = t.w;
                }
            }
        }
        if (NORM && one) {
            float ss = 0.f;
#pragma unroll
            for (int i = 0; i < V; i++) ss += v[i] * v[i];
            r = 1.0f / sqrtf(gq_block_sum<PROD>(ss, red) / (float)K + a.eps);
        }
#pragma unroll
        for (int i = 0; i < V; i++) {
            if (PRO == AK_CUDA_PRO_ACT) v[i] = in ? gq_act_mul(a.act, v[i], w[i]) : 0.f;
            else if (NORM) v[i] = v[i] * r * w[i];
        }
        if constexpr (FLT) {
            if (in) {
#pragma unroll
                for (int c = 0; c < V / 4; c++)
                    ((float4 *)((float *)xq + k0))[c] = make_float4(v[4 * c], v[4 * c + 1], v[4 * c + 2], v[4 * c + 3]);
            }
            continue;
        }
        float amax;
        int sum, packed[V / 4];
        gq_q8<TPB, V>(v, packed, amax, sum);
        if (in) {
#pragma unroll
            for (int c = 0; c < V / 4; c += 2) *(int2 *)(xq + k0 + 4 * c) = make_int2(packed[c], packed[c + 1]);
            if (sub == 0) {
                xd[b] = amax / 127.f;
                xs[b] = sum;
            }
        }
    }
}

/* The attention's key splits a PRO_MERGE prologue merges: those the attention left
 * unmerged at this step (0: it merged them itself). */
__device__ __forceinline__ int gq_merge_count(const ak_cuda_args &a, const ak_stepv &st) {
    const int kv = st.pos + st.n, keys = a.mrg_window > 0 && kv > a.mrg_window ? a.mrg_window : kv;
    const int ms = ak_attn_used_splits(keys, a.mrg_splits);
    return ms <= AK_ATTN_FOLD ? ms : 0;
}

/* Where gq_prep leaves x in shared memory: the codes, then d and the code sums per 32
 * (floats at q for the float weights). */
struct gq_xv {
    int8_t *q;
    float *d;
    int *s;
};
__device__ __forceinline__ gq_xv gq_x_at(uint8_t *smem, int K) {
    float *d = (float *)(smem + K);
    return {(int8_t *)smem, d, (int *)(d + K / 32)};
}
/* A one-row GEMV's x (its last row where last_only) into shared memory by gq_prep, 4
 * threads per 32 values where the row is short enough (a lone thread per 32 values left
 * a short row's prologue to a few serial threads). */
template <int PRO, bool PROD, bool FLT = false>
__device__ __forceinline__ void gq_x(const ak_cuda_args &a, const ak_p_mm &p, const ak_stepv &st, uint8_t *smem) {
    const int K = p.K, nb = K / 32;
    const gq_xv v = gq_x_at(smem, K);
    const float *x = (const float *)a.b[3] + (p.last_only ? (size_t)(p.n - 1) * p.ld_x : 0);
    const int ms = PRO == AK_CUDA_PRO_MERGE ? gq_merge_count(a, st) : 0;
    if (4 * nb <= AK_GQ_THREADS) gq_prep<4, PRO, PROD, FLT>(a, x, K, nb, v.q, v.d, v.s, ms);
    else gq_prep<1, PRO, PROD, FLT>(a, x, K, nb, v.q, v.d, v.s, ms);
}

/* Several x rows' codes (rows 0..n - 1 of x, ld apart) into shared memory, row m's as
 * gq_prep lays them out at smem + m * gq_x_bytes(K), 4 threads per 32 values, the loads of
 * 8 rounds in flight at once. (Each lane making the codes of its own blocks, row after
 * row, left the 8B QKV of 5 rows at 0.95x of five one-row launches; this, 0.61x.) */
__device__ __forceinline__ void gq_prep_rows(const float *x, int ld, int K, int n, uint8_t *smem) {
    constexpr int PER = AK_GQ_THREADS / 4, U = 8;
    const int nb = K / 32, total = n * nb, sub = threadIdx.x % 4;
    for (int g0 = 0; g0 < total; g0 += U * PER) {
        float v[U][8];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int g = g0 + u * PER + (int)threadIdx.x / 4, m = g / nb;
            const float4 *src = (const float4 *)(x + (size_t)m * ld + 32 * (g - m * nb) + 8 * sub);
            const float4 t0 = g < total ? src[0] : make_float4(0.f, 0.f, 0.f, 0.f), t1 = g < total ? src[1] : make_float4(0.f, 0.f, 0.f, 0.f);
            v[u][0] = t0.x; v[u][1] = t0.y; v[u][2] = t0.z; v[u][3] = t0.w;
            v[u][4] = t1.x; v[u][5] = t1.y; v[u][6] = t1.z; v[u][7] = t1.w;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int g = g0 + u * PER + (int)threadIdx.x / 4, m = g / nb, b = g - m * nb;
            float amax;
            int sum, packed[2];
            gq_q8<4, 8>(v[u], packed, amax, sum);
            if (g < total) {
                const gq_xv xv = gq_x_at(smem + (size_t)m * gq_x_bytes(K), K);
                *(int2 *)(xv.q + 32 * b + 8 * sub) = make_int2(packed[0], packed[1]);
                if (sub == 0) {
                    xv.d[b] = amax / 127.f;
                    xv.s[b] = sum;
                }
            }
        }
    }
}
/* Ring stages a warp with M x rows: two with 8, whose codes and slice sums would not fit
 * beside four (the 8B shape's down projection and output) */
static __host__ __device__ constexpr int gq_stages(int M) { return M >= 8 ? 2 : AK_GQ_STAGES; }
/* k_gemv_q's shared memory before the ring with M > 1 x rows: their codes, where the
 * slice sums (tmax a warp) go once every warp has its codes in registers */
static __host__ __device__ size_t gq_rows_bytes(int K, int M, int tmax) {
    const size_t c = (size_t)M * gq_x_bytes(K), s = (size_t)AK_GQ_WARPS * tmax * M * 4;
    return ((c > s ? c : s) + 15) & ~(size_t)15;
}

template <int DT, int PRO, int JC, bool PROD, bool CL, int M = 1>
__global__ void __launch_bounds__(PROD ? AK_GQ_THREADS + 32 : AK_GQ_THREADS, 1) k_gemv_q(ak_cuda_args a, seg_range sr, int S, int tmax) {
    using Sh = gq_shape<DT>;
    static_assert(M == 1 || (PRO == AK_CUDA_PRO_NONE && !PROD && !CL && JC == 1), "x rows: see launch_qm");
    constexpr int NS = gq_stages(M);
    /* items per stage: whole slices */
    constexpr int U = (Sh::U / JC > 0 ? Sh::U / JC : 1) * JC;
    extern __shared__ __align__(16) uint8_t smem[];
    /* the step first, ahead of the weight requests (only the sample command writes it, and it has
     * finished: every kernel lets its successor in only after its own wait) */
    ak_trace_t tr_;
    const ak_stepv st_ = ak_step(a);
    ak_p_mm p;
    memcpy(&p, a.p, sizeof p);
    const int K = p.K, nb = K / 32;
    const size_t rb = (size_t)nb * (Sh::QB + 2);
    auto xb = [&]() { return M > 1 ? gq_rows_bytes(K, M, tmax) : gq_x_bytes(K); };   /* where the ring starts */
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, RG = AK_GQ_WARPS / S;
    const int rg = wid / S, s = wid % S;
    /* group g takes rows c0 + g + t * groups: at any moment the grid reads one band of
     * neighbouring rows (as a plain copy would), not thousands of scattered streams */
    const int c0 = seg_start(p, sr.g0), c1 = seg_start(p, sr.g1), groups = gridDim.x * RG;
    /* gated (a.gated, segments gate and up of NP rows each): a group takes gate row r,
     * then up row NP + r, and writes act(gate) * up to y[r] itself, so that the down
     * projection reads half the floats and no activation (every one of its blocks reads
     * all of x: 114 KB each on 8B) */
    const int NP = a.gated ? p.N[0] : 0;
    /* gated codes (CL, a.gated 2, see gq_codes_cut): the first CK products come in R
     * rounds of one chunk of 32 per block (block b: chunks b + t * G; row group g: products
     * g + e * RG, e < E, of each), so that a block holds whole blocks of the down
     * projection's x codes and makes them itself at the end; the rest as without codes
     * (rows CK + g + u * groups), as floats after the codes, which keeps the last round as
     * even as before (whole chunks there too: gate/up 3.8 us slower on 8B). The down
     * projection then reads 1.25 bytes per value of the codes, not 4 (every one of its
     * blocks reads all of x: 23 KB, not 57 KB, on 8B; its x prologue 2.8 us shorter). */
    const bool codes = CL && NP;
    const int G = gridDim.x, R = codes ? gq_code_rounds(NP, G) : 0, CK = 32 * G * R, E = 32 / RG;
    /* the first row and the rows of row group g of this block (the producer warp counts
     * them for each consumer) */
    auto row0_of = [&](int g) { return CL && R ? 32 * (int)blockIdx.x + g : CK + c0 + (int)blockIdx.x * RG + g; };
    const int r0 = row0_of(rg);
    auto rows_of = [&](int g) {
        const int r = CK + c0 + blockIdx.x * RG + g;
        return !(g < RG && r < (NP ? NP : c1)) ? 2 * E * R * (g < RG) : 2 * E * R + (NP ? 2 * ((NP - r + groups - 1) / groups) : (c1 - r + groups - 1) / groups);
    };
    const int nrow = rows_of(rg);
    auto next_row = [&](int r) {
        if (!NP) return r + groups;
        if (r < NP) return r + NP;   /* gate, then up */
        if (!CL || r - NP >= CK) return r - NP + groups;
        r -= NP;
        if ((r & 31) + RG < 32) return r + RG;   /* a chunk: the group's next product */
        r -= (E - 1) * RG;
        return r + 32 * G < CK ? r + 32 * G : CK + (int)blockIdx.x * RG + (r & 31);
    };
    const int items = nrow * JC, j0 = s * JC;   /* this warp's first item of a row */
    uint8_t *ring = smem + xb() + (size_t)wid * NS * Sh::STAGE;
    /* M > 1: the slice sums where the x rows' codes were (gq_rows_bytes) */
    float *part = (float *)(M > 1 ? smem : smem + xb() + (size_t)AK_GQ_WARPS * AK_GQ_STAGES * Sh::STAGE);
    float *hb = part + AK_GQ_WARPS * tmax;   /* codes: the block's R chunks of products */
    /* issue cursor: row, item within the slice, this lane's next quant and scale addresses */
    int frow = r0, fj = 0, fleft = items;
    const uint8_t *qp = NULL, *sp = NULL;
    auto seek = [&]() {
        int g = seg_of(p, frow);
        const uint8_t *row = seg_w(a, g) + (size_t)(frow - seg_start(p, g)) * rb;
        qp = row + (size_t)(32 * j0 + lane) * Sh::QB;
        sp = row + (size_t)nb * Sh::QB + 64 * j0 + 4 * lane;
    };
    if (!PROD && fleft) seek();   /* PROD: the producer warp addresses the weights */
    /* requests the next U items into ring slot `slot`; always one commit group */
    auto issue = [&](int slot) {
        uint8_t *dst = ring + slot * Sh::STAGE;
#pragma unroll
        for (int u = 0; u < U; u++, dst += Sh::ITEM) {
            if (fleft == 0) break;
            int tail = nb - 32 * (j0 + fj);   /* blocks left in the row (<= 0 past its end) */
            if (lane < tail) {
#pragma unroll
                for (int k = 0; k < Sh::QB / 16; k++) ak_cp_async_cg16(dst + lane * Sh::QB + 16 * k, qp + 16 * k);
            }
            if (lane < 16 && 2 * lane < tail) ak_cp_async<4>(dst + 32 * Sh::QB + 4 * lane, sp);
            qp += 32 * Sh::QB;
            sp += 64;
            fleft--;
            if (++fj == JC) {
                fj = 0;
                frow = next_row(frow);
                if (fleft) seek();
            }
        }
        ak_cp_async_commit();
    };
    /* PROD (see gq_prod): warp 16 fills every consumer warp's ring by bulk copies and
     * never waits for the previous kernel (weights depend on nothing it writes), so the
     * consumers wait at once and the ring fills during their wait and x prologue. An
     * empty barrier per slot says its consumer is done with it, a full one that its
     * bytes have landed. */
    constexpr int NBAR = PROD ? AK_GQ_WARPS * AK_GQ_STAGES : 1;
    __shared__ __align__(8) uint64_t mb_full[NBAR], mb_empty[NBAR];
    if (PROD) {
        if (threadIdx.x == 0)
            for (int i = 0; i < NBAR; i++) { mb_init(&mb_full[i], 1); mb_init(&mb_empty[i], 1); }
        __syncthreads();
    }
    if (PROD && wid == AK_GQ_WARPS) {
        if (st_.stopped || lane >= AK_GQ_WARPS) return;
        /* lane c streams consumer warp c's stages: per row, its JC items' quants, then their
         * scales, in two bulk copies (nb is a multiple of 8: the sizes are of 16 bytes) */
        const int c = lane, rgc = c / S, j0c = (c % S) * JC, r0c = row0_of(rgc);
        const int nrc = rows_of(rgc);
        const int nst = (nrc * JC + U - 1) / U, blk = min(JC * 32, nb - 32 * j0c);
        int prow = r0c, rows_left = nrc;
        /* the 16 lanes poll in step: none sleeps on its consumer's barrier while another
         * consumer's slot is free */
        for (int k = 0;;) {
            if (!__any_sync(0x0000ffffu, k < nst)) break;
            const int slot = k % AK_GQ_STAGES, bi = c * AK_GQ_STAGES + slot;
            const bool go = k < nst && (k < AK_GQ_STAGES || mb_poll(&mb_empty[bi], (k / AK_GQ_STAGES - 1) & 1));
            if (!go) continue;
            k++;
            uint8_t *dst = smem + xb() + (size_t)bi * Sh::STAGE;
            uint32_t bytes = 0;
            for (int rr = 0; rr < U / JC && rows_left > 0; rr++, rows_left--, dst += JC * Sh::ITEM) {
                const int g = seg_of(p, prow);
                const uint8_t *row = seg_w(a, g) + (size_t)(prow - seg_start(p, g)) * rb;
                if (blk > 0) {
                    ak_bulk_copy(dst, row + (size_t)32 * j0c * Sh::QB, blk * Sh::QB, &mb_full[bi]);
                    ak_bulk_copy(dst + JC * 32 * Sh::QB, row + (size_t)nb * Sh::QB + 64 * j0c, blk * 2, &mb_full[bi]);
                    bytes += blk * (Sh::QB + 2);
                }
                prow = next_row(prow);
            }
            mb_arrive_tx(&mb_full[bi], bytes);
        }
        return;
    }
    /* the output projection starts during the attention: one stage before its wait, so
     * that its weight requests do not crowd the attention's own loads; the down projection
     * (after the producer-warp gate/up) two: its wait then releases sooner (tg128 8B
     * 1.005-1.007x, Qwen3-0.6B 1.012x against three; one: no change); a ring of two, one */
    constexpr int P = PRO == AK_CUDA_PRO_MERGE || NS == 2 ? 1 : PRO == AK_CUDA_PRO_NONE || PRO == AK_CUDA_PRO_Q8 ? 2 : AK_GQ_STAGES - 1;
    if (!PROD) {
#pragma unroll
        for (int st = 0; st < P; st++) issue(st);
    }
    ak_pdl_wait();
    ak_pdl_trigger();
    tr_.start(a, st_);
    if (st_.stopped) return;
    p = ak_params<ak_p_mm>(a, st_);

    /* x to int8 codes, 4 threads per 32 values where the row is short enough (a lone
     * thread per 32 values left a short row's prologue to a few serial threads) */
    int8_t *xq = (int8_t *)smem;
    float *xd = (float *)(smem + K);
    int *xs = (int *)(xd + nb);
    const float *x = (const float *)a.b[3] + (p.last_only ? (size_t)(p.n - 1) * p.ld_x : 0);
    const int ms = PRO == AK_CUDA_PRO_MERGE ? gq_merge_count(a, st_) : 0;
    /* this lane's x codes of the slice (of each x row); blocks past the row end weigh 0 */
    int xr[M][JC][8], xo[M][JC];
    float xdr[M][JC];
    bool xin[JC];
    if (M > 1) {
        gq_prep_rows(x, p.ld_x, K, p.n, smem);
    } else if constexpr (PRO == AK_CUDA_PRO_Q8) {
        /* the first codes_k values as codes (laid out as here), the rest as floats after
         * them: every load in flight before the floats' codes are made */
        constexpr int CPT = (AK_GQ_MAX_K + AK_GQ_MAX_K / 4 + 16 * AK_GQ_THREADS - 1) / (16 * AK_GQ_THREADS);
        const int kc = a.codes_k, nc = kc / 16, nd = kc / 32;
        const uint8_t *src = (const uint8_t *)x;
        int4 cv[CPT];
        constexpr int DPT = (2 * AK_GQ_MAX_K / 32 + AK_GQ_THREADS - 1) / AK_GQ_THREADS;
        int dv[DPT];
#pragma unroll
        for (int i = 0; i < CPT; i++) {
            const int j = threadIdx.x + i * AK_GQ_THREADS;
            if (j < nc) cv[i] = ((const int4 *)src)[j];
        }
#pragma unroll
        for (int i = 0; i < DPT; i++) {   /* d, then the sums, of the codes' blocks */
            const int j = threadIdx.x + i * AK_GQ_THREADS;
            if (j < 2 * nd) dv[i] = ((const int *)(src + K))[j < nd ? j : nb + j - nd];
        }
        if (4 * (nb - nd) <= AK_GQ_THREADS) gq_prep<4, AK_CUDA_PRO_NONE, PROD>(a, (const float *)(src + gq_x_bytes(K)), K - kc, nb - nd, xq + kc, xd + nd, xs + nd, 0);
        else gq_prep<1, AK_CUDA_PRO_NONE, PROD>(a, (const float *)(src + gq_x_bytes(K)), K - kc, nb - nd, xq + kc, xd + nd, xs + nd, 0);
#pragma unroll
        for (int i = 0; i < CPT; i++) {
            const int j = threadIdx.x + i * AK_GQ_THREADS;
            if (j < nc) ((int4 *)smem)[j] = cv[i];
        }
#pragma unroll
        for (int i = 0; i < DPT; i++) {
            const int j = threadIdx.x + i * AK_GQ_THREADS;
            if (j < 2 * nd) ((int *)xd)[j < nd ? j : nb + j - nd] = dv[i];
        }
    } else if (4 * nb <= AK_GQ_THREADS) {
        gq_prep<4, PRO, PROD>(a, x, K, nb, xq, xd, xs, ms);
    } else {
        gq_prep<1, PRO, PROD>(a, x, K, nb, xq, xd, xs, ms);
    }
    if (!PROD)
        for (int st = P; st < NS - 1; st++) issue(st);
    gq_sync<PROD>();
    tr_.mark();

#pragma unroll
    for (int j = 0; j < JC; j++) {
        int b = 32 * (j0 + j) + lane;
        bool in = b < nb;
        b = in ? b : nb - 1;
#pragma unroll
        for (int m = 0; m < M; m++) {   /* M > 1: rows past p.n weigh 0 */
            const gq_xv v = M > 1 ? gq_x_at(smem + (size_t)m * gq_x_bytes(K), K) : gq_xv{xq, xd, xs};
            const bool live = M == 1 || m < p.n;
            const int4 *xv = (const int4 *)(v.q + 32 * b);
            int4 x0 = live ? xv[0] : make_int4(0, 0, 0, 0), x1 = live ? xv[1] : make_int4(0, 0, 0, 0);
            xr[m][j][0] = x0.x; xr[m][j][1] = x0.y; xr[m][j][2] = x0.z; xr[m][j][3] = x0.w;
            xr[m][j][4] = x1.x; xr[m][j][5] = x1.y; xr[m][j][6] = x1.z; xr[m][j][7] = x1.w;
            xo[m][j] = DT == AK_Q4_0 && live ? -8 * v.s[b] : 0;
            xdr[m][j] = live ? v.d[b] : 0.f;
        }
        xin[j] = in;
    }
    if (M > 1) gq_sync<PROD>();   /* the slice sums go where the codes were */
    float *y = (float *)a.b[4];
    /* codes: product q of row group g, to its chunk or (past the chunks) to the floats */
    auto put_h = [&](int g, int q, float h) {
        if (q < E * R) hb[32 * (q / E) + g + RG * (q % E)] = h;
        else ((float *)((uint8_t *)y + gq_x_bytes(NP)))[(int)blockIdx.x * RG + g + (q - E * R) * groups] = h;
    };
    const float *bias = p.has_bias ? (const float *)a.b[5] : NULL;
    int crow = r0, t = 0;
    float gk = 0.f;   /* gated: the gate row's sum, until its up row */
    for (int i0 = 0, slot = 0, ph = 0; i0 < items; i0 += U, ph ^= slot + 1 == NS, slot = slot + 1 == NS ? 0 : slot + 1) {
        if (PROD) {
            mb_wait(&mb_full[wid * AK_GQ_STAGES + slot], ph);
        } else {
            issue(slot == 0 ? NS - 1 : slot - 1);   /* the slot computed last round */
            ak_cp_async_wait<NS - 1>();
        }
        __syncwarp();
        const uint8_t *src = ring + slot * Sh::STAGE;
#pragma unroll
        for (int rr = 0; rr < U / JC; rr++) {
            if (i0 + rr * JC >= items) break;
            float racc[M];
#pragma unroll
            for (int m = 0; m < M; m++) racc[m] = 0.f;
#pragma unroll
            for (int j = 0; j < JC; j++) {
                /* PROD: a row's JC items as its quants then its scales (bulk copies) */
                const uint8_t *run = src + rr * JC * Sh::ITEM;
                const uint8_t *it = PROD ? run + j * 32 * Sh::QB : run + j * Sh::ITEM;
                const uint8_t *sc = PROD ? run + JC * 32 * Sh::QB + j * 64 : it + 32 * Sh::QB;
                int acc[M], acc2[M];   /* two chains of dp4a (M > 1: one an x row, the rows' chains side by side) */
#pragma unroll
                for (int m = 0; m < M; m++) acc[m] = xo[m][j], acc2[m] = 0;
                if (DT == AK_Q4_0) {
                    uint4 q = *(const uint4 *)(it + lane * Sh::QB);
                    const uint32_t qw[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
                    for (int wi = 0; wi < 4; wi++)
#pragma unroll
                        for (int m = 0; m < M; m++) {
                            if (M > 1 && m >= p.n) break;
                            int &a2 = M > 1 ? acc[m] : acc2[m];
                            acc[m] = __dp4a((int)(qw[wi] & 0x0F0F0F0Fu), xr[m][j][wi], acc[m]);
                            a2 = __dp4a((int)((qw[wi] >> 4) & 0x0F0F0F0Fu), xr[m][j][4 + wi], a2);
                        }
                } else {
                    const uint4 *qv = (const uint4 *)(it + lane * Sh::QB);
                    uint4 q0 = qv[0], q1 = qv[1];
                    const uint32_t qw[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll
                    for (int wi = 0; wi < 8; wi += 2)
#pragma unroll
                        for (int m = 0; m < M; m++) {
                            if (M > 1 && m >= p.n) break;
                            int &a2 = M > 1 ? acc[m] : acc2[m];
                            acc[m] = __dp4a((int)qw[wi], xr[m][j][wi], acc[m]);
                            a2 = __dp4a((int)qw[wi + 1], xr[m][j][wi + 1], a2);
                        }
                }
#pragma unroll
                for (int m = 0; m < M; m++) {
                    const float v = __half2float(((const __half *)sc)[lane]) * xdr[m][j] * (float)(acc[m] + acc2[m]);
                    racc[m] += xin[j] ? v : 0.f;   /* past the row end the ring holds stale bytes */
                }
            }
            /* M > 1: lanes m * 32 / M hold x row m's sum */
            float v = M > 1 ? ak_warp_sums<M>(racc) : ak_warp_sum(racc[0]);
            const int vm = M > 1 ? lane / (32 / M) : 0;
            const bool own = M > 1 ? lane % (32 / M) == 0 && vm < p.n : lane == 0;
            if (S == 1) {
                if (lane == 0 && NP) {
                    if (crow < NP) gk = v;
                    else if (!codes) y[crow - NP] = gq_act_mul(a.act, gk, v);
                    else put_h(rg, t >> 1, gq_act_mul(a.act, gk, v));
                } else if (own) {
                    float *yr = y + (size_t)vm * p.ld_y;
                    if (bias && crow < p.N[0]) v += bias[crow];
                    yr[crow] = a.acc ? yr[crow] + v : v;
                }
            } else if (own) {
                part[(wid * tmax + t) * M + vm] = v;
            }
            crow = next_row(crow);
            t++;
        }
        __syncwarp();
        if (PROD && lane == 0) mb_arrive(&mb_empty[wid * AK_GQ_STAGES + slot]);
    }
    if (!PROD) ak_cp_async_wait<0>();
    /* gated, S > 1: the slices of pair q of group g (gate and up, rows 2q and 2q + 1) meet */
    auto pair_h = [&](int g, int q) {
        float gv = 0.f, uv = 0.f;
        for (int u = 0; u < S; u++) {
            gv += part[(g * S + u) * tmax + 2 * q];
            uv += part[(g * S + u) * tmax + 2 * q + 1];
        }
        return gq_act_mul(a.act, gv, uv);
    };
    if (codes) {
        if (S > 1) {
            gq_sync<PROD>();
            for (int i = threadIdx.x; i < RG * tmax / 2; i += AK_GQ_THREADS)
                if (2 * (i / RG) < rows_of(i % RG)) put_h(i % RG, i / RG, pair_h(i % RG, i / RG));
        }
        gq_sync<PROD>();
        /* 8 threads per 32 products: the codes, d and their sum, laid out as the down
         * projection keeps them in shared memory (codes, then all d, then all sums) */
        const int sub = threadIdx.x & 7;
        uint8_t *q = (uint8_t *)y;
        for (int t0 = 0; t0 < R; t0 += AK_GQ_THREADS / 8) {
            const int tt = t0 + (int)threadIdx.x / 8, m = blockIdx.x + tt * G;
            const bool in = tt < R;
            const float4 h4 = in ? *(const float4 *)(hb + 32 * tt + 4 * sub) : make_float4(0.f, 0.f, 0.f, 0.f);
            const float v[4] = {h4.x, h4.y, h4.z, h4.w};
            float amax;
            int sum, packed[1];
            gq_q8<8, 4>(v, packed, amax, sum);
            if (in) {
                ((int *)q)[8 * m + sub] = packed[0];
                if (sub == 0) {
                    ((float *)(q + NP))[m] = amax / 127.f;
                    ((int *)(q + NP))[NP / 32 + m] = sum;
                }
            }
        }
        return;
    }
    if (S == 1) return;
    /* the slices of each row meet: thread i closes row t = i / RG of group i % RG (gated:
     * pair q) */
    gq_sync<PROD>();
    if (NP) {
        for (int i = threadIdx.x; i < RG * tmax / 2; i += AK_GQ_THREADS) {
            int g = i % RG, q = i / RG, pr = blockIdx.x * RG + g + q * groups;
            if (pr < NP) y[pr] = pair_h(g, q);
        }
        return;
    }
    for (int i = threadIdx.x; i < RG * tmax * M; i += AK_GQ_THREADS) {
        int m = i % M, g = i / M % RG, tt = i / M / RG, row = c0 + blockIdx.x * RG + g + tt * groups;
        if (row >= c1 || (M > 1 && m >= p.n)) continue;
        float v = 0.f, *yr = y + (size_t)m * p.ld_y;
        for (int u = 0; u < S; u++) v += part[((g * S + u) * tmax + tt) * M + m];
        if (bias && row < p.N[0]) v += bias[row];
        yr[row] = a.acc ? yr[row] + v : v;
    }
}

/* Q4_K / Q5_K: sub-block u of x (int8 codes at xq, d and code sums per 32 at xd, xs)
 * against a row's codes q of it (w = a q - b, kq_sub32): dx (a dot - b sx). The x codes'
 * sum is the prologue's (no dp4a for it). */
__device__ __forceinline__ float ks_term(const uint32_t (&q)[8], float a, float b, const int8_t *xq, const float *xd,
                                         const int *xs, int u) {
    const int4 x0 = *(const int4 *)(xq + 32 * u), x1 = *(const int4 *)(xq + 32 * u + 16);
    const int xv[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
    int dot = 0, dot2 = 0;
#pragma unroll
    for (int i = 0; i < 8; i += 2) {
        dot = __dp4a((int)q[i], xv[i], dot);
        dot2 = __dp4a((int)q[i + 1], xv[i + 1], dot2);
    }
    const float v = a * (float)(dot + dot2) - b * (float)xs[u];
    return xd[u] * v;
}

/* Q4_K / Q5_K: sub-block u of R rows times x, added to acc: one scale pair a lane where
 * kq_decode's units unpack two (8B Q4_K_M tg128 1.06x, the GEMV of a 302 MB matrix 70 ->
 * 77 % of the bandwidth, H200). */
template <int DT, int R, bool SH = false>
__device__ __forceinline__ void ks_sub32(const uint8_t *const (&rows)[R], int u, const int8_t *xq, const float *xd,
                                         const int *xs, float (&acc)[R]) {
#pragma unroll
    for (int h = 0; h < R; h++) {
        uint32_t q[8];
        float a, b;
        kq_sub32<DT, SH>(rows[h], u, q, a, b);
        acc[h] += ks_term(q, a, b, xq, xd, xs, u);
    }
}

/* 16 bytes of a float row (4 or 8 values) times x floats at x. */
template <int DT> __device__ __forceinline__ float gf_dot(uint4 wv, const float4 *x) {
    if constexpr (DT == AK_F32) {
        const float4 x4 = x[0];
        return __uint_as_float(wv.x) * x4.x + __uint_as_float(wv.y) * x4.y + __uint_as_float(wv.z) * x4.z +
               __uint_as_float(wv.w) * x4.w;
    } else {
        const uint32_t ww[4] = {wv.x, wv.y, wv.z, wv.w};
        float r = 0.f;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const float4 x4 = x[h];
            float2 f0, f1;
            if constexpr (DT == AK_F16) {
                f0 = __half22float2(*(const __half2 *)&ww[2 * h]);
                f1 = __half22float2(*(const __half2 *)&ww[2 * h + 1]);
            } else {
                f0 = __bfloat1622float2(*(const __nv_bfloat162 *)&ww[2 * h]);
                f1 = __bfloat1622float2(*(const __nv_bfloat162 *)&ww[2 * h + 1]);
            }
            r += f0.x * x4.x + f0.y * x4.y + f1.x * x4.z + f1.y * x4.w;
        }
        return r;
    }
}

/* The units w of R rows (the same values of each) times x (int8 codes at xq, d per 32 at
 * xd), added to acc: four dp4a a group, the group's x code sum where w has an offset. */
template <int DT, int R>
__device__ __forceinline__ void kq_dots(const kq_unit (&w)[R], const int8_t *xq, const float *xd, float (&acc)[R]) {
#pragma unroll
    for (int gi = 0; gi < 2; gi++) {
        const int4 xv = *(const int4 *)(xq + w[0].off[gi]);
        const float dx = xd[w[0].off[gi] / 32];
        int sx = 0;
        if constexpr (kq_has_b<DT>()) {
            sx = __dp4a(xv.x, 0x01010101, 0);
            sx = __dp4a(xv.y, 0x01010101, sx);
            sx = __dp4a(xv.z, 0x01010101, sx);
            sx = __dp4a(xv.w, 0x01010101, sx);
        }
#pragma unroll
        for (int i = 0; i < R; i++) {
            int dot = __dp4a(w[i].q[gi][0], xv.x, 0);
            dot = __dp4a(w[i].q[gi][1], xv.y, dot);
            dot = __dp4a(w[i].q[gi][2], xv.z, dot);
            dot = __dp4a(w[i].q[gi][3], xv.w, dot);
            float v = w[i].a[gi] * (float)(dot + kq_zero<DT>() * sx);
            if constexpr (kq_has_b<DT>()) v += w[i].b[gi] * (float)sx;
            acc[i] += dx * v;
        }
    }
}

/* R rows' dot products with x (one warp; every lane gets them): the int8 codes at xq, d
 * per 32 at xd. The R rows' loads of a step go out together, which hides half the memory
 * latency a row alone waits. */
template <int DT, int R>
__device__ __forceinline__ void gk_dots(const uint8_t *const (&rows)[R], int K, const int8_t *xq, const float *xd, float (&out)[R]) {
    const int lane = threadIdx.x & 31;
    float acc[R];
#pragma unroll
    for (int i = 0; i < R; i++) acc[i] = 0.f;
    const int nb = K / 32;
#pragma unroll 2
    for (int u = lane; u < nb; u += 32) {
        kq_unit w[R];
#pragma unroll
        for (int i = 0; i < R; i++) kq_decode<DT>(rows[i], nb, u, w[i]);
        kq_dots<DT, R>(w, xq, xd, acc);
    }
#pragma unroll
    for (int i = 0; i < R; i++) out[i] = ak_warp_sum(acc[i]);
}

/* Int8 GEMV over rows in the file's layout (one x row) where k_gemv_s does not take them
 * (rows that are not whole 16 bytes: Q6_K and Q3_K unless K is a multiple of 2048, Q2_K
 * of 1024, Q5_0 of 256; the repacked Q4_0/Q8_0): x to int8 codes in shared memory with
 * the streaming kernel's prologues (gq_prep), then a warp per two rows at a time (gated:
 * a gate row and its up row, writing act(g) * u), lanes over the rows' units
 * (kquant.cuh): four dp4a per group of 16, the group's sum of x codes where the weights
 * have an offset. Before it waits for the previous kernel, each warp asks L2 for its
 * first rows (weights depend on nothing a kernel writes), so that the previous kernel's
 * tail and this one's x prologue overlap their first reads from memory. */
template <int DT, int PRO>
__global__ void __launch_bounds__(AK_GQ_THREADS, 1) k_gemv_k(ak_cuda_args a, seg_range sr) {
    extern __shared__ __align__(16) uint8_t smem[];
    ak_trace_t tr_;
    const ak_stepv st_ = ak_step(a);
    ak_p_mm p;
    memcpy(&p, a.p, sizeof p);
    const int K = p.K, lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int c0 = seg_start(p, sr.g0), c1 = seg_start(p, sr.g1), NP = a.gated ? p.N[0] : 0;
    const int nwork = NP ? NP : c1 - c0, step = gridDim.x * AK_GQ_WARPS, r0 = blockIdx.x * AK_GQ_WARPS + wid;
    const size_t rb = ak_cuda_row_bytes(DT, K);
    auto row_ptr = [&](int col) {
        const int g = seg_of(p, col);
        return seg_w(a, g) + (size_t)(col - seg_start(p, g)) * rb;
    };
    /* L2 requests for the two rows of the warp's round `pre` rounds ahead (a round: a gate
     * row and its up row, or rows r and r + step), so that its next rows are on their
     * way while it multiplies (more bytes in flight than its registers could hold). The
     * grid's requests stay within 16 MB of L2: whole rounds where they fit, else the
     * first `part` bytes of each row of the next round. Requesting whole large rounds
     * (F16 on the 8B shape: 35 MB ahead across the grid) evicted them before their loads
     * and read them twice. */
    const size_t lim = ((size_t)16 << 20) / (size_t)step;
    const int pre = (int)min((size_t)4, max((size_t)1, lim / (2 * rb)));
    const size_t part = min(rb, lim / 2);
    auto warm1 = [&](int col) {
        const uint8_t *row = row_ptr(col);
        for (size_t o = (size_t)lane * 128; o < part; o += 32 * 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(row + o));
    };
    auto warm = [&](int r) {   /* the round starting at r */
        if (r >= nwork) return;
        warm1(NP ? r : c0 + r);
        if (NP) warm1(NP + r);
        else if (r + step < nwork) warm1(c0 + r + step);
    };
    const int round = NP ? step : 2 * step;
    for (int t = 0; t < pre; t++) warm(r0 + t * round);
    ak_pdl_wait();
    ak_pdl_trigger();
    tr_.start(a, st_);
    if (st_.stopped) return;
    p = ak_params<ak_p_mm>(a, st_);
    gq_x<PRO, false>(a, p, st_, smem);
    const gq_xv xv = gq_x_at(smem, K);
    __syncthreads();
    tr_.mark();
    float *y = (float *)a.b[4];
    const float *bias = p.has_bias ? (const float *)a.b[5] : NULL;
    auto put = [&](int col, float v) {
        if (bias && col < p.N[0]) v += bias[col];
        y[col] = a.acc ? y[col] + v : v;
    };
    for (int r = r0; r < nwork; r += round) {
        warm(r + pre * round);
        if (NP) {
            const uint8_t *rows[2] = {row_ptr(r), row_ptr(NP + r)};
            float v[2];
            gk_dots<DT, 2>(rows, K, xv.q, xv.d, v);
            if (lane == 0) y[r] = gq_act_mul(a.act, v[0], v[1]);
        } else if (r + step < nwork) {
            const uint8_t *rows[2] = {row_ptr(c0 + r), row_ptr(c0 + r + step)};
            float v[2];
            gk_dots<DT, 2>(rows, K, xv.q, xv.d, v);
            if (lane == 0) { put(c0 + r, v[0]); put(c0 + r + step, v[1]); }
        } else {
            const uint8_t *rows[1] = {row_ptr(c0 + r)};
            float v[1];
            gk_dots<DT, 1>(rows, K, xv.q, xv.d, v);
            if (lane == 0) put(c0 + r, v[0]);
        }
    }
}

/* The streaming kernel over rows in the file's layout (every type k_gemv_k takes but the
 * repacked Q4_0/Q8_0, where a row's bytes are a multiple of 16): k_gemv_k's prologues,
 * decoders and epilogues, but each warp streams its rows through a ring of AK_GQ_STAGES
 * stages of about 2 KB in shared memory filled by cp.async, as k_gemv_q does, so that
 * about 128 KB per multiprocessor are in flight whatever registers the decode takes
 * (k_gemv_k: a warp's loads go out only as its registers allow). A stage is NG granules of
 * a row (a super-block, a 32-value block, or 16 bytes of floats); a lane takes the
 * stage's units lane, lane + 32, ... A warp takes one row at a time (gated: the gate row,
 * then its up row), rows r0, r0 + 16 blocks, ...; a row's last stage closes it. */
template <int DT> struct gs_shape {
    static constexpr bool FLT = DT == AK_F32 || DT == AK_F16 || DT == AK_BF16;
    static constexpr bool ALL = FLT || DT == AK_Q4_K || DT == AK_Q5_K;   /* every row whole 16 bytes */
    static constexpr int GV = FLT ? (DT == AK_F32 ? 4 : 8) : DT >= AK_Q2_K && DT <= AK_Q6_K ? 256 : 32;
    static constexpr int GB = (int)ak_cuda_row_bytes(DT, GV);
    static constexpr int UPG = FLT ? 1 : GV / 32;   /* a lane's units in a granule */
    /* granules a stage: whole warps of units, a multiple of 16 bytes, at most 2304 bytes */
    static constexpr int ng() {
        int best = 0;
        for (int n = 32 / UPG; n * GB <= 2304; n += 32 / UPG)
            if (n * GB % 16 == 0) best = n;
        return best;
    }
    static constexpr int NG = ng();
    static constexpr int SLOT = NG * GB;
};
static __host__ __device__ size_t gs_x_bytes(int dt, int K) { return ak_cuda_is_float(dt) ? (size_t)K * 4 : gq_x_bytes(K); }

template <int DT, int PRO>
__global__ void __launch_bounds__(AK_GQ_THREADS, 1) k_gemv_s(ak_cuda_args a, seg_range sr) {
    using Sh = gs_shape<DT>;
    static_assert(Sh::NG > 0, "a stage of whole warps' units in 16-byte multiples");
    extern __shared__ __align__(16) uint8_t smem[];
    ak_trace_t tr_;
    const ak_stepv st_ = ak_step(a);
    ak_p_mm p;
    memcpy(&p, a.p, sizeof p);
    const int K = p.K, lane = threadIdx.x & 31, wid = threadIdx.x >> 5, ng = K / Sh::GV;
    const int c0 = seg_start(p, sr.g0), c1 = seg_start(p, sr.g1), NP = a.gated ? p.N[0] : 0;
    const int nwork = NP ? NP : c1 - c0, step = gridDim.x * AK_GQ_WARPS, r0 = blockIdx.x * AK_GQ_WARPS + wid;
    const size_t rb = (size_t)ng * Sh::GB;
    /* the warp's t-th row (gated: gate rows even, up rows odd) and its stages */
    auto col_of = [&](int t) { return NP ? (t & 1) * NP + r0 + (t >> 1) * step : c0 + r0 + t * step; };
    const int nrow = r0 < nwork ? (NP ? 2 : 1) * ((nwork - r0 + step - 1) / step) : 0;
    const int per_row = (ng + Sh::NG - 1) / Sh::NG, pieces = nrow * per_row;
    uint8_t *ring = smem + gs_x_bytes(DT, K) + (size_t)wid * AK_GQ_STAGES * Sh::SLOT;
    int ft = 0, fg = 0, fi = 0;   /* issue cursor: row, granule, stage */
    auto issue = [&](int slot) {
        if (fi < pieces) {
            const int col = col_of(ft), g = seg_of(p, col), bytes = min(Sh::NG, ng - fg) * Sh::GB;
            const uint8_t *src = seg_w(a, g) + (size_t)(col - seg_start(p, g)) * rb + (size_t)fg * Sh::GB;
            uint8_t *dst = ring + slot * Sh::SLOT;
            for (int o = 16 * lane; o < bytes; o += 32 * 16) ak_cp_async_cg16(dst + o, src + o);
            fg += Sh::NG;
            if (fg >= ng) { fg = 0; ft++; }
            fi++;
        }
        ak_cp_async_commit();
    };
    /* stages requested before the wait as in k_gemv_q (weights depend on nothing a kernel writes) */
    constexpr int P = PRO == AK_CUDA_PRO_MERGE ? 1 : PRO == AK_CUDA_PRO_NONE ? 2 : AK_GQ_STAGES - 1;
#pragma unroll
    for (int s = 0; s < P; s++) issue(s);
    ak_pdl_wait();
    ak_pdl_trigger();
    tr_.start(a, st_);
    if (st_.stopped) return;
    p = ak_params<ak_p_mm>(a, st_);
    gq_x<PRO, false, Sh::FLT>(a, p, st_, smem);
    const gq_xv xv = gq_x_at(smem, K);
    for (int s = P; s < AK_GQ_STAGES - 1; s++) issue(s);
    __syncthreads();
    tr_.mark();
    float *y = (float *)a.b[4];
    const float *bias = p.has_bias ? (const float *)a.b[5] : NULL;
    float acc = 0.f, gk = 0.f;
    int ct = 0, cg = 0;   /* the row and granule being multiplied */
    for (int i = 0, slot = 0; i < pieces; i++, slot = slot + 1 == AK_GQ_STAGES ? 0 : slot + 1) {
        issue(slot == 0 ? AK_GQ_STAGES - 1 : slot - 1);   /* the slot multiplied last round */
        ak_cp_async_wait<AK_GQ_STAGES - 1>();
        __syncwarp();
        const uint8_t *src = ring + slot * Sh::SLOT;
        const int n = min(Sh::NG, ng - cg), v0 = cg * Sh::GV;
        float pa[1] = {0.f};
        /* unit u of the stage (a lane's 16 bytes of floats, or 32 values) */
        auto unit = [&](int u) {
            if constexpr (Sh::FLT) {
                pa[0] += gf_dot<DT>(*(const uint4 *)(src + 16 * u), (const float4 *)((const float *)xv.q + v0 + Sh::GV * u));
            } else if constexpr (DT == AK_Q4_K || DT == AK_Q5_K) {
                const uint8_t *rows[1] = {src};
                ks_sub32<DT, 1, true>(rows, u, xv.q + v0, xv.d + v0 / 32, xv.s + v0 / 32, pa);
            } else {
                kq_unit w[1];
                kq_decode<DT, true>(src, 0, u, w[0]);
                kq_dots<DT, 1>(w, xv.q + v0, xv.d + v0 / 32, pa);
            }
        };
        constexpr int UPS = Sh::UPG * Sh::NG;   /* units a whole stage */
        if (n == Sh::NG) {   /* all of a whole stage's loads at once */
#pragma unroll
            for (int u = lane; u < UPS; u += 32) unit(u);
        } else {
            for (int u = lane; u < Sh::UPG * n; u += 32) unit(u);
        }
        acc += pa[0];
        __syncwarp();
        cg += Sh::NG;
        if (cg >= ng) {   /* the row's last stage */
            const float v = ak_warp_sum(acc);
            const int col = col_of(ct);
            acc = 0.f;
            cg = 0;
            if (lane == 0) {
                if (NP && !(ct & 1)) gk = v;
                else if (NP) y[col - NP] = gq_act_mul(a.act, gk, v);
                else {
                    const float vb = bias && col < p.N[0] ? v + bias[col] : v;
                    y[col] = a.acc ? y[col] + vb : vb;
                }
            }
            ct++;
        }
    }
    ak_cp_async_wait<0>();
}

/* Several x rows (2..AK_CUDA_GEMV_BATCH: a speculative check)
 * against rows in the file's layout: each row's codes in shared memory (gq_prep, one
 * after another), a warp per weight row, each unit decoded once for all x rows. The
 * weights are read once, as by a one-row GEMV. */
template <int DT>
__global__ void __launch_bounds__(AK_GQ_THREADS, 1) k_gemv_km(ak_cuda_args a, seg_range sr) {
    extern __shared__ __align__(16) uint8_t smem[];
    AK_KERNEL_ENTRY(ak_p_mm, p);
    constexpr int MM = AK_CUDA_GEMV_BATCH;
    const int K = p.K, nb = K / 32, lane = threadIdx.x & 31, wid = threadIdx.x >> 5, M = p.n;
    const size_t S = gq_x_bytes(K), rb = ak_cuda_row_bytes(DT, K);
    for (int m = 0; m < M; m++) {
        int8_t *xq = (int8_t *)(smem + (size_t)m * S);
        float *xd = (float *)(xq + K);
        const float *x = (const float *)a.b[3] + (size_t)m * p.ld_x;
        if (4 * nb <= AK_GQ_THREADS) gq_prep<4, AK_CUDA_PRO_NONE, false>(a, x, K, nb, xq, xd, (int *)(xd + nb), 0);
        else gq_prep<1, AK_CUDA_PRO_NONE, false>(a, x, K, nb, xq, xd, (int *)(xd + nb), 0);
    }
    __syncthreads();
    const int c0 = seg_start(p, sr.g0), c1 = seg_start(p, sr.g1);
    float *y = (float *)a.b[4];
    const float *bias = p.has_bias ? (const float *)a.b[5] : NULL;
    for (int col = c0 + blockIdx.x * AK_GQ_WARPS + wid; col < c1; col += gridDim.x * AK_GQ_WARPS) {
        const int g = seg_of(p, col);
        const uint8_t *row = seg_w(a, g) + (size_t)(col - seg_start(p, g)) * rb;
        float acc[MM];
#pragma unroll
        for (int m = 0; m < MM; m++) acc[m] = 0.f;
        if constexpr (DT == AK_Q4_K || DT == AK_Q5_K) {   /* whole sub-blocks, decoded once for every row */
            for (int u = lane; u < nb; u += 32) {
                uint32_t q[8];
                float wa, wb;
                kq_sub32<DT>(row, u, q, wa, wb);
#pragma unroll
                for (int m = 0; m < MM; m++) {
                    if (m >= M) break;
                    const int8_t *xq = (const int8_t *)(smem + (size_t)m * S);
                    const float *xd = (const float *)(xq + K);
                    acc[m] += ks_term(q, wa, wb, xq, xd, (const int *)(xd + nb), u);
                }
            }
        } else {
            for (int u = lane; u < nb; u += 32) {
                kq_unit w;
                kq_decode<DT>(row, nb, u, w);
#pragma unroll
                for (int gi = 0; gi < 2; gi++)
#pragma unroll
                    for (int m = 0; m < MM; m++) {
                        if (m >= M) break;
                        const int8_t *xq = (const int8_t *)(smem + (size_t)m * S);
                        const int4 xv = *(const int4 *)(xq + w.off[gi]);
                        const float dx = ((const float *)(xq + K))[w.off[gi] / 32];
                        int dot = __dp4a(w.q[gi][0], xv.x, 0);
                        dot = __dp4a(w.q[gi][1], xv.y, dot);
                        dot = __dp4a(w.q[gi][2], xv.z, dot);
                        dot = __dp4a(w.q[gi][3], xv.w, dot);
                        float v;
                        if constexpr (kq_has_b<DT>()) {
                            int sx = __dp4a(xv.x, 0x01010101, 0);
                            sx = __dp4a(xv.y, 0x01010101, sx);
                            sx = __dp4a(xv.z, 0x01010101, sx);
                            sx = __dp4a(xv.w, 0x01010101, sx);
                            v = w.a[gi] * (float)(dot + kq_zero<DT>() * sx) + w.b[gi] * (float)sx;
                        } else {
                            v = w.a[gi] * (float)dot;
                        }
                        acc[m] += dx * v;
                    }
            }
        }
        const float b = bias && col < p.N[0] ? bias[col] : 0.f;
#pragma unroll
        for (int m = 0; m < MM; m++) {
            if (m >= M) break;
            const float v = ak_warp_sum(acc[m]);
            if (lane == 0) y[(size_t)m * p.ld_y + col] = v + b;
        }
    }
}

/* Generic: one warp per output row, M <= AK_CUDA_GEMV_BATCH x rows. */
__global__ void __launch_bounds__(AK_GEMV_THREADS) k_gemv_generic(ak_cuda_args a, seg_range sr) {
    AK_KERNEL_ENTRY(ak_p_mm, p);
    int lane = threadIdx.x & 31;
    int col = seg_start(p, sr.g0) + blockIdx.x * (AK_GEMV_THREADS / 32) + (threadIdx.x >> 5);
    if (col >= seg_start(p, sr.g1)) return;
    int g = seg_of(p, col), lr = col - seg_start(p, g);
    int dt = seg_dtype(p, g), M = p.last_only ? 1 : p.n;
    const float *x = (const float *)a.b[3] + (p.last_only ? (size_t)(p.n - 1) * p.ld_x : 0);
    const uint8_t *row = seg_w(a, g) + (size_t)lr * ak_cuda_row_bytes(dt, p.K);
    float acc[AK_CUDA_GEMV_BATCH];
#pragma unroll
    for (int m = 0; m < AK_CUDA_GEMV_BATCH; m++) acc[m] = 0.f;
    if (ak_cuda_is_float(dt)) {
        for (int k = lane; k < p.K; k += 32) {
            float w = dt == AK_F32 ? ((const float *)row)[k]
                    : dt == AK_F16 ? __half2float(((const __half *)row)[k])
                    : __bfloat162float(((const __nv_bfloat16 *)row)[k]);
#pragma unroll
            for (int m = 0; m < AK_CUDA_GEMV_BATCH; m++)
                if (m < M) acc[m] += w * x[(size_t)m * p.ld_x + k];
        }
    } else {
        int nb32 = p.K / 32;
        for (int s = lane; s < nb32; s += 32) {
            float v[32];
            ak_dq32(dt, row, nb32, s, v);
#pragma unroll
            for (int m = 0; m < AK_CUDA_GEMV_BATCH; m++) {
                if (m >= M) break;
                const float *xm = x + (size_t)m * p.ld_x + 32 * s;
                float t = 0;
#pragma unroll
                for (int l = 0; l < 32; l++) t += v[l] * xm[l];
                acc[m] += t;
            }
        }
    }
    float b = p.has_bias && g == 0 ? ((const float *)a.b[5])[lr] : 0.f;
#pragma unroll
    for (int m = 0; m < AK_CUDA_GEMV_BATCH; m++) {
        if (m >= M) break;
        float v = ak_warp_sum(acc[m]);
        if (lane == 0) ((float *)a.b[4])[(size_t)m * p.ld_y + col] = v + b;
    }
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }
int ak_cuda_n_sm = 132;

static int gq_blocks(int total) {
    int blocks = ak_cdiv(total, AK_GQ_WARPS);   /* 16 warps per multiprocessor, fewer blocks for small matrices */
    return blocks < ak_cuda_n_sm ? blocks : ak_cuda_n_sm;
}
template <int DT> static bool gq_fits(int K, int total, bool pair) {
    gq_cut c = gq_plan<DT>(K, total, gq_blocks(total), pair);
    return c.S <= AK_GQ_WARPS && gq_smem<DT>(K, c.tmax) <= AK_GQ_SMEM_MAX;
}

/* The longest float row k_gemv_s takes: x as floats in shared memory, 64 KB beside the
 * ring (Llama-3-8B's down projection: 14336). */
#define AK_GK_MAX_KF 16384

/* Whether segments [g0, g1) of a one-row product share a dtype and a kernel that takes
 * it: the Q4_0/Q8_0 streaming one (stream) or the file layout's (!stream). */
static bool fast_ok(const ak_cuda_args &a, const ak_p_mm *p, int g0, int g1, bool *stream = NULL) {
    int dt = p->dtype[g0];
    bool ok = (kq_type(dt) ? p->K % kq_block(dt) == 0 && p->K <= AK_GQ_MAX_K
                           : ak_cuda_is_float(dt) && p->K % 32 == 0 && p->K <= AK_GK_MAX_KF) && aligned16(a.b[3]) &&
              (!p->last_only || p->ld_x % 4 == 0) && (!a.pro_w || aligned16(a.pro_w)) &&
              (a.pro != AK_CUDA_PRO_POST || (aligned16(a.rb[0]) && aligned16(a.rb[1]) && aligned16(a.rb[2])));
    int total = 0;
    for (int g = g0; g < g1; g++) {
        ok = ok && p->dtype[g] == dt && aligned16(a.b[g]);
        total += p->N[g];
    }
    /* gated: one launch of both segments, gate and up alike, no bias or residual add */
    const bool pair = a.gated;
    ok = ok && (!pair || (g0 == 0 && g1 == 2 && p->nseg == 2 && p->N[0] == p->N[1] && !p->has_bias && !a.acc));
    const bool st = ok && (dt == AK_Q4_0 || dt == AK_Q8_0) && p->K % 256 == 0 &&
                    (dt == AK_Q8_0 ? gq_fits<AK_Q8_0>(p->K, total, pair) : gq_fits<AK_Q4_0>(p->K, total, pair));
    if (stream) *stream = st;
    return ok;
}

/* The producer-warp kernel for the GEMVs that normalise their input (QKV, gate/up, the
 * output) where a row's items are bulk copies of 2 KB or more, on sm_90 (where
 * ak_cuda_pdl is set). Their consumers then wait at once and the prologue reads x while
 * the ring fills: H100 tg128 8B Q4_0 1.04-1.055x, Q8_0 1.03-1.045x (two runs). Elsewhere it lost: the down and output projections' x prologues (57 KB
 * of x; the attention's splits) took longer with the whole ring in flight, and copies of
 * 512 bytes (K = 1024) streamed at a third of the rate (Qwen3-0.6B output 0.92x). */
template <int DT, int PRO> static bool gq_prod(int JC) { return PRO == AK_CUDA_PRO_NORM && ak_cuda_pdl && JC * 32 * gq_shape<DT>::QB >= 2048; }

template <int DT, int PRO, bool PROD, bool CL>
static cudaError_t launch_q(const ak_cuda_args &a, gq_cut c, seg_range sr, cudaStream_t st, dim3 g, size_t sm) {
    dim3 b(PROD ? AK_GQ_THREADS + 32 : AK_GQ_THREADS);
    switch (c.JC) {
    case 1: return ak_launch(k_gemv_q<DT, PRO, 1, PROD, CL>, g, b, sm, st, a, sr, c.S, c.tmax);
    case 2: return ak_launch(k_gemv_q<DT, PRO, 2, PROD, CL>, g, b, sm, st, a, sr, c.S, c.tmax);
    case 3: return ak_launch(k_gemv_q<DT, PRO, DT == AK_Q4_0 ? 3 : 1, PROD, CL>, g, b, sm, st, a, sr, c.S, c.tmax);
    default: return ak_launch(k_gemv_q<DT, PRO, DT == AK_Q4_0 ? 4 : 1, PROD, CL>, g, b, sm, st, a, sr, c.S, c.tmax);
    }
}
/* gated codes: whether a launch of `blocks` makes them (row groups that divide a chunk,
 * at least one chunk per block, its products beside the ring), its slice sums per warp
 * and shared memory */
template <int DT> static bool gq_codes_cut(int K, int NP, int blocks, gq_cut *c, size_t *sm) {
    *c = gq_plan<DT>(K, 2 * NP, blocks, true);
    const int RG = AK_GQ_WARPS / c->S, ck = gq_code_k(NP, blocks), groups = blocks * RG;
    if (NP % 32 || AK_GQ_WARPS % c->S || 32 % RG || ck == 0) return false;
    if (c->S > 1) c->tmax = 2 * (32 / RG) * (ck / (32 * blocks)) + 2 * ((NP - ck + groups - 1) / groups);
    *sm = gq_smem<DT>(K, c->tmax) + (size_t)ck / blocks * 4;
    return *sm <= AK_GQ_SMEM_MAX;
}
template <int DT, int PRO>
static cudaError_t launch_q(const ak_cuda_args &a, int total, seg_range sr, int K, cudaStream_t st) {
    const bool codes = a.gated == 2;
    const int blocks = gq_blocks(total);
    gq_cut c = gq_plan<DT>(K, total, blocks, a.gated);
    size_t sm = gq_smem<DT>(K, c.tmax);
    if (codes && (PRO != AK_CUDA_PRO_NORM || !gq_codes_cut<DT>(K, total / 2, blocks, &c, &sm))) return cudaErrorInvalidValue;
    /* the codes in instances of their own (as a run-time branch of the ones QKV and the
     * output share: tg128 8B 0.99x, Qwen3-0.6B 0.97x against this) */
    if constexpr (PRO == AK_CUDA_PRO_NORM)
        if (codes) return gq_prod<DT, PRO>(c.JC) ? launch_q<DT, PRO, true, true>(a, c, sr, st, dim3(blocks), sm)
                                                 : launch_q<DT, PRO, false, true>(a, c, sr, st, dim3(blocks), sm);
    if constexpr (PRO == AK_CUDA_PRO_NORM)
        if (gq_prod<DT, PRO>(c.JC)) return launch_q<DT, PRO, true, false>(a, c, sr, st, dim3(blocks), sm);
    return launch_q<DT, PRO, false, false>(a, c, sr, st, dim3(blocks), sm);
}

template <int PRO>
static cudaError_t launch_q(const ak_cuda_args &a, int dt, int total, seg_range sr, int K, cudaStream_t st) {
    if (dt == AK_Q8_0) return launch_q<AK_Q8_0, PRO>(a, total, sr, K, st);
    return launch_q<AK_Q4_0, PRO>(a, total, sr, K, st);
}

/* Several x rows (a speculative check's rowwise GEMM) through k_gemv_q, the weights read
 * once for up to M of them: slices of one item, so that a lane keeps its codes of every
 * row in registers (K / 1024 slices, at most one a warp: K up to 16384). Launches x rows
 * 0.. and returns how many it took (M of 8, 4 or 2, the least that takes them all or the
 * largest whose codes and slice sums fit; 0: none fits, and nothing was launched). */
template <int DT> static int launch_qm(const ak_cuda_args &a, int total, seg_range sr, int K, int rows, cudaStream_t st, cudaError_t *e) {
    const int blocks = gq_blocks(total);
    const gq_cut c = gq_plan<DT>(K, total, blocks, false, 1);
    if (c.S > AK_GQ_WARPS) return 0;
    int M = rows <= 2 ? 2 : rows <= 4 ? 4 : 8;
    auto smem = [&](int m) { return (size_t)AK_GQ_WARPS * gq_stages(m) * gq_shape<DT>::STAGE + gq_rows_bytes(K, m, c.tmax); };
    while (M > 2 && smem(M) > AK_GQ_SMEM_MAX) M /= 2;
    if (smem(M) > AK_GQ_SMEM_MAX) return 0;
    const int n = rows < M ? rows : M;
    ak_cuda_args r = a;
    ak_p_mm q;
    memcpy(&q, a.p, sizeof q);
    q.n = n;
    memcpy(r.p, &q, sizeof q);
    r.patch &= ~(uint32_t)AK_PATCH_N;
    dim3 g(blocks), b(AK_GQ_THREADS);
    const size_t sm = smem(M);
    *e = M == 2 ? ak_launch(k_gemv_q<DT, AK_CUDA_PRO_NONE, 1, false, false, 2>, g, b, sm, st, r, sr, c.S, c.tmax)
       : M == 4 ? ak_launch(k_gemv_q<DT, AK_CUDA_PRO_NONE, 1, false, false, 4>, g, b, sm, st, r, sr, c.S, c.tmax)
                : ak_launch(k_gemv_q<DT, AK_CUDA_PRO_NONE, 1, false, false, 8>, g, b, sm, st, r, sr, c.S, c.tmax);
    return n;
}

/* k_gemv_s (where rows are whole 16 bytes) or k_gemv_k over `total` rows (gated: NP =
 * total / 2 pairs): a block per 16 rows or pairs, one block per multiprocessor at most
 * (80 to 128 registers a thread: one fits), each making the x codes once; a second wave
 * would make them again and leave a tail. */
template <int DT, int PRO>
static cudaError_t launch_k(const ak_cuda_args &a, int total, seg_range sr, int K, cudaStream_t st) {
    const int work = a.gated ? total / 2 : total;
    int blocks = ak_cdiv(work, AK_GQ_WARPS);
    if (blocks > ak_cuda_n_sm) blocks = ak_cuda_n_sm;
    const size_t sm = gs_x_bytes(DT, K);
    if constexpr (DT != AK_Q4_0 && DT != AK_Q8_0)
        if (ak_cuda_row_bytes(DT, K) % 16 == 0)
            return ak_launch(k_gemv_s<DT, PRO>, dim3(blocks), dim3(AK_GQ_THREADS),
                             sm + (size_t)AK_GQ_WARPS * AK_GQ_STAGES * gs_shape<DT>::SLOT, st, a, sr);
    if constexpr (gs_shape<DT>::ALL) return cudaErrorInvalidValue;   /* unreachable: their rows are whole 16 bytes */
    else return ak_launch(k_gemv_k<DT, PRO>, dim3(blocks), dim3(AK_GQ_THREADS), sm, st, a, sr);
}
template <int PRO>
static cudaError_t launch_k(const ak_cuda_args &a, int dt, int total, seg_range sr, int K, cudaStream_t st) {
    switch (dt) {
    case AK_Q4_0: return launch_k<AK_Q4_0, PRO>(a, total, sr, K, st);
    case AK_Q8_0: return launch_k<AK_Q8_0, PRO>(a, total, sr, K, st);
    case AK_Q4_1: return launch_k<AK_Q4_1, PRO>(a, total, sr, K, st);
    case AK_Q5_0: return launch_k<AK_Q5_0, PRO>(a, total, sr, K, st);
    case AK_Q5_1: return launch_k<AK_Q5_1, PRO>(a, total, sr, K, st);
    case AK_Q2_K: return launch_k<AK_Q2_K, PRO>(a, total, sr, K, st);
    case AK_Q3_K: return launch_k<AK_Q3_K, PRO>(a, total, sr, K, st);
    case AK_Q4_K: return launch_k<AK_Q4_K, PRO>(a, total, sr, K, st);
    case AK_Q5_K: return launch_k<AK_Q5_K, PRO>(a, total, sr, K, st);
    case AK_Q6_K: return launch_k<AK_Q6_K, PRO>(a, total, sr, K, st);
    case AK_MLX_Q2: return launch_k<AK_MLX_Q2, PRO>(a, total, sr, K, st);
    case AK_MLX_Q3: return launch_k<AK_MLX_Q3, PRO>(a, total, sr, K, st);
    case AK_MLX_Q6: return launch_k<AK_MLX_Q6, PRO>(a, total, sr, K, st);
    case AK_MLX_Q8: return launch_k<AK_MLX_Q8, PRO>(a, total, sr, K, st);
    case AK_F32: return launch_k<AK_F32, PRO>(a, total, sr, K, st);
    case AK_F16: return launch_k<AK_F16, PRO>(a, total, sr, K, st);
    case AK_BF16: return launch_k<AK_BF16, PRO>(a, total, sr, K, st);
    default: return cudaErrorInvalidValue;
    }
}

/* One x row through the Q4_0/Q8_0 streaming kernel (stream) or the file layout's. The int8
 * codes of gated 2 (the gate/up GEMV writing them, PRO_Q8 on the down projection reading
 * them) are the Q4_0/Q8_0 kernel's alone. */
template <int PRO>
static cudaError_t launch_row(const ak_cuda_args &a, bool stream, int dt, int total, seg_range sr, int K, cudaStream_t st) {
    if (stream) return launch_q<PRO>(a, dt, total, sr, K, st);
    if constexpr (PRO == AK_CUDA_PRO_Q8) return cudaErrorInvalidValue;
    else return a.gated == 2 ? cudaErrorInvalidValue : launch_k<PRO>(a, dt, total, sr, K, st);
}

/* Launches segments [g0, g1) (one dtype) through the streaming, the int8 or the generic
 * kernel. */
static cudaError_t launch_segs(const ak_cuda_args &a, const ak_p_mm *p, int g0, int g1, int m_rows, cudaStream_t st) {
    int total = 0;
    for (int g = g0; g < g1; g++) total += p->N[g];
    seg_range sr = {g0, g1};
    bool stream = false;
    if (m_rows == 1 && fast_ok(a, p, g0, g1, &stream)) {
        const int dt = p->dtype[g0];
        switch (a.pro) {
        case AK_CUDA_PRO_NORM: return launch_row<AK_CUDA_PRO_NORM>(a, stream, dt, total, sr, p->K, st);
        case AK_CUDA_PRO_POST: return launch_row<AK_CUDA_PRO_POST>(a, stream, dt, total, sr, p->K, st);
        case AK_CUDA_PRO_ACT: return launch_row<AK_CUDA_PRO_ACT>(a, stream, dt, total, sr, p->K, st);
        case AK_CUDA_PRO_MERGE: return launch_row<AK_CUDA_PRO_MERGE>(a, stream, dt, total, sr, p->K, st);
        case AK_CUDA_PRO_Q8: return launch_row<AK_CUDA_PRO_Q8>(a, stream, dt, total, sr, p->K, st);
        default: return launch_row<AK_CUDA_PRO_NONE>(a, stream, dt, total, sr, p->K, st);
        }
    }
    if (a.pro || a.acc || a.gated) return cudaErrorInvalidValue;   /* the encoder fuses only what fast_ok takes */
    bool stream1 = false;
    if (m_rows > 1 && !p->last_only && p->ld_x % 4 == 0 && fast_ok(a, p, g0, g1, &stream1) && !stream1 &&
        kq_type(p->dtype[g0]) && m_rows * gq_x_bytes(p->K) <= AK_GQ_SMEM_MAX) {
        int blocks = ak_cdiv(total, AK_GQ_WARPS);
        if (blocks > ak_cuda_n_sm) blocks = ak_cuda_n_sm;
        const size_t sm = (size_t)m_rows * gq_x_bytes(p->K);
        switch (p->dtype[g0]) {
#define KM(T) case T: return ak_launch(k_gemv_km<T>, dim3(blocks), dim3(AK_GQ_THREADS), sm, st, a, sr);
        KM(AK_Q4_0) KM(AK_Q8_0) KM(AK_Q4_1) KM(AK_Q5_0) KM(AK_Q5_1) KM(AK_Q2_K) KM(AK_Q3_K) KM(AK_Q4_K) KM(AK_Q5_K) KM(AK_Q6_K)
        KM(AK_MLX_Q2) KM(AK_MLX_Q3) KM(AK_MLX_Q6) KM(AK_MLX_Q8)
#undef KM
        default: break;
        }
    }
    if (m_rows > 1 && !p->last_only && p->ld_x % 4 == 0 && fast_ok(a, p, g0, g1)) {
        /* a few rows (a speculative check): Q4_0/Q8_0 up to 8 a launch (launch_qm), else
         * the one-row kernels once a row, at the weights' bandwidth each; the generic
         * kernel below ran an 8B model's five-row chunk at 30 GB/s (147 ms on an H200) */
        int m = 0;
        while (stream1 && m_rows - m > 1) {
            ak_cuda_args r = a;
            r.b[3] = (float *)a.b[3] + (size_t)m * p->ld_x;
            r.b[4] = (float *)a.b[4] + (size_t)m * p->ld_y;
            cudaError_t e = cudaSuccess;
            const int n = p->dtype[g0] == AK_Q8_0 ? launch_qm<AK_Q8_0>(r, total, sr, p->K, m_rows - m, st, &e)
                                                  : launch_qm<AK_Q4_0>(r, total, sr, p->K, m_rows - m, st, &e);
            if (e != cudaSuccess) return e;
            if (n == 0) break;
            m += n;
        }
        for (; m < m_rows; m++) {
            ak_cuda_args r = a;
            ak_p_mm q = *p;
            q.n = 1;
            memcpy(r.p, &q, sizeof q);
            r.patch &= ~(uint32_t)AK_PATCH_N;
            r.b[3] = (float *)a.b[3] + (size_t)m * p->ld_x;
            r.b[4] = (float *)a.b[4] + (size_t)m * p->ld_y;
            cudaError_t e = launch_segs(r, &q, g0, g1, 1, st);
            if (e != cudaSuccess) return e;
        }
        return cudaSuccess;
    }
    return ak_launch(k_gemv_generic, dim3(ak_cdiv(total, AK_GEMV_THREADS / 32)), dim3(AK_GEMV_THREADS), 0, st, a, sr);
}

/* The product the act_down command asks for, as a one-segment GEMV of h = act(g) * u. */
static ak_cuda_args act_down_args(const ak_cuda_args &c) {
    const ak_p_act_down *q = (const ak_p_act_down *)c.p;
    ak_cuda_args g = c;
    ak_p_mm p;
    memset(&p, 0, sizeof p);
    p.n = 1;
    p.K = q->K;
    p.nseg = 1;
    p.N[0] = q->N;
    p.dtype[0] = q->dtype;
    p.ld_x = q->K;
    p.ld_y = q->N;
    memset(g.p, 0, sizeof g.p);
    memcpy(g.p, &p, sizeof p);
    g.patch = 0;
    g.b[0] = c.b[0];
    g.b[3] = c.b[1];
    g.b[4] = c.b[2];
    g.b[5] = NULL;
    g.act = q->act;
    g.gated = 0;
    return g;
}

/* The streaming kernels' shared memory beyond 48 KB; once per process. */
template <int DT, int JC> static cudaError_t gq_init() {
    cudaError_t e = cudaFuncSetAttribute(k_gemv_q<DT, AK_CUDA_PRO_NONE, JC, false, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, AK_GQ_SMEM_MAX);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(k_gemv_q<DT, AK_CUDA_PRO_NORM, JC, false, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, AK_GQ_SMEM_MAX);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(k_gemv_q<DT, AK_CUDA_PRO_POST, JC, false, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, AK_GQ_SMEM_MAX);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(k_gemv_q<DT, AK_CUDA_PRO_NORM, JC, true, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, AK_GQ_SMEM_MAX);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(k_gemv_q<DT, AK_CUDA_PRO_ACT, JC, false, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, AK_GQ_SMEM_MAX);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(k_gemv_q<DT, AK_CUDA_PRO_MERGE, JC, false, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, AK_GQ_SMEM_MAX);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(k_gemv_q<DT, AK_CUDA_PRO_Q8, JC, false, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, AK_GQ_SMEM_MAX);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(k_gemv_q<DT, AK_CUDA_PRO_NORM, JC, false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, AK_GQ_SMEM_MAX);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(k_gemv_q<DT, AK_CUDA_PRO_NORM, JC, true, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, AK_GQ_SMEM_MAX);
    if (JC == 1 && e == cudaSuccess) e = cudaFuncSetAttribute(k_gemv_q<DT, AK_CUDA_PRO_NONE, 1, false, false, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, AK_GQ_SMEM_MAX);
    if (JC == 1 && e == cudaSuccess) e = cudaFuncSetAttribute(k_gemv_q<DT, AK_CUDA_PRO_NONE, 1, false, false, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, AK_GQ_SMEM_MAX);
    if (JC == 1 && e == cudaSuccess) e = cudaFuncSetAttribute(k_gemv_q<DT, AK_CUDA_PRO_NONE, 1, false, false, 8>, cudaFuncAttributeMaxDynamicSharedMemorySize, AK_GQ_SMEM_MAX);
    return e;
}
template <int DT> static cudaError_t gs_init() {
    cudaError_t e = cudaFuncSetAttribute(k_gemv_s<DT, AK_CUDA_PRO_NONE>, cudaFuncAttributeMaxDynamicSharedMemorySize, AK_GQ_SMEM_MAX);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(k_gemv_s<DT, AK_CUDA_PRO_NORM>, cudaFuncAttributeMaxDynamicSharedMemorySize, AK_GQ_SMEM_MAX);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(k_gemv_s<DT, AK_CUDA_PRO_POST>, cudaFuncAttributeMaxDynamicSharedMemorySize, AK_GQ_SMEM_MAX);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(k_gemv_s<DT, AK_CUDA_PRO_ACT>, cudaFuncAttributeMaxDynamicSharedMemorySize, AK_GQ_SMEM_MAX);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(k_gemv_s<DT, AK_CUDA_PRO_MERGE>, cudaFuncAttributeMaxDynamicSharedMemorySize, AK_GQ_SMEM_MAX);
    return e;
}
template <int DT> static cudaError_t km_init() {
    return cudaFuncSetAttribute(k_gemv_km<DT>, cudaFuncAttributeMaxDynamicSharedMemorySize, AK_GQ_SMEM_MAX);
}
extern "C" int ak_cuda_init_gemv(void) {
    cudaError_t e = km_init<AK_Q4_0>();
    if (e == cudaSuccess) e = km_init<AK_Q8_0>();
    if (e == cudaSuccess) e = km_init<AK_Q4_1>();
    if (e == cudaSuccess) e = km_init<AK_Q5_0>();
    if (e == cudaSuccess) e = km_init<AK_Q5_1>();
    if (e == cudaSuccess) e = km_init<AK_Q2_K>();
    if (e == cudaSuccess) e = km_init<AK_Q3_K>();
    if (e == cudaSuccess) e = km_init<AK_Q4_K>();
    if (e == cudaSuccess) e = km_init<AK_Q5_K>();
    if (e == cudaSuccess) e = km_init<AK_Q6_K>();
    if (e == cudaSuccess) e = km_init<AK_MLX_Q2>();
    if (e == cudaSuccess) e = km_init<AK_MLX_Q3>();
    if (e == cudaSuccess) e = km_init<AK_MLX_Q6>();
    if (e == cudaSuccess) e = km_init<AK_MLX_Q8>();
    if (e == cudaSuccess) e = gs_init<AK_Q4_1>();
    if (e == cudaSuccess) e = gs_init<AK_Q5_0>();
    if (e == cudaSuccess) e = gs_init<AK_Q5_1>();
    if (e == cudaSuccess) e = gs_init<AK_Q2_K>();
    if (e == cudaSuccess) e = gs_init<AK_Q3_K>();
    if (e == cudaSuccess) e = gs_init<AK_Q4_K>();
    if (e == cudaSuccess) e = gs_init<AK_Q5_K>();
    if (e == cudaSuccess) e = gs_init<AK_Q6_K>();
    if (e == cudaSuccess) e = gs_init<AK_MLX_Q2>();
    if (e == cudaSuccess) e = gs_init<AK_MLX_Q3>();
    if (e == cudaSuccess) e = gs_init<AK_MLX_Q6>();
    if (e == cudaSuccess) e = gs_init<AK_MLX_Q8>();
    if (e == cudaSuccess) e = gs_init<AK_F32>();
    if (e == cudaSuccess) e = gs_init<AK_F16>();
    if (e == cudaSuccess) e = gs_init<AK_BF16>();
    if (e == cudaSuccess) e = gq_init<AK_Q8_0, 1>();
    if (e == cudaSuccess) e = gq_init<AK_Q8_0, 2>();
    if (e == cudaSuccess) e = gq_init<AK_Q4_0, 1>();
    if (e == cudaSuccess) e = gq_init<AK_Q4_0, 2>();
    if (e == cudaSuccess) e = gq_init<AK_Q4_0, 3>();
    if (e == cudaSuccess) e = gq_init<AK_Q4_0, 4>();
    return (int)e;
}

extern "C" int ak_cuda_gemv_fusable(const ak_cuda_args *a, int kernel) {
    if (kernel == AK_K_GEMV_ACT_DOWN) {
        ak_cuda_args g = act_down_args(*a);
        return fast_ok(g, (const ak_p_mm *)g.p, 0, 1);
    }
    const ak_p_mm *p = (const ak_p_mm *)a->p;
    if (kernel != AK_K_GEMV || p->last_only) return 0;
    /* each run of segments of one dtype is a launch of its own (ak_cuda_gemv_rows), with the
     * same prologue and epilogue: a Q4_K_M QKV with a Q6_K V takes its norm as well */
    for (int g = 0, h; g < p->nseg; g = h) {
        for (h = g + 1; h < p->nseg && p->dtype[h] == p->dtype[g];) h++;
        if (!fast_ok(*a, p, g, h)) return 0;
    }
    return 1;
}

/* Where the gate/up GEMV runs on the streaming kernel with its RMSNorm folded in and
 * makes at least one chunk of codes per block (gq_codes_cut). */
extern "C" int ak_cuda_gemv_gate_codes(const ak_cuda_args *a) {
    const ak_p_mm *p = (const ak_p_mm *)a->p;
    bool stream = false;
    if (!a->gated || a->pro != AK_CUDA_PRO_NORM || !fast_ok(*a, p, 0, 2, &stream) || !stream) return 0;
    const int blocks = gq_blocks(2 * p->N[0]);
    gq_cut c;
    size_t sm;
    return p->dtype[0] == AK_Q8_0 ? gq_codes_cut<AK_Q8_0>(p->K, p->N[0], blocks, &c, &sm) : gq_codes_cut<AK_Q4_0>(p->K, p->N[0], blocks, &c, &sm);
}

extern "C" int ak_cuda_gemv_down_codes(const ak_cuda_args *a) {
    ak_cuda_args g = act_down_args(*a);
    bool stream = false;
    return fast_ok(g, (const ak_p_mm *)g.p, 0, 1, &stream) && stream;
}

/* rows: x rows to multiply (1 for decode, n for a batched GEMM; 1 when last_only). */
extern "C" int ak_cuda_gemv_rows(const ak_cuda_args *a, int rows, cudaStream_t st) {
    const ak_p_mm *p = (const ak_p_mm *)a->p;
    int m_rows = p->last_only ? 1 : rows;
    if (m_rows > AK_CUDA_GEMV_BATCH) return (int)cudaErrorInvalidValue;
    /* one launch per run of segments that share a dtype (Q4_K_M's QKV: Q and K, then a Q6_K V) */
    for (int g = 0, h; g < p->nseg; g = h) {
        for (h = g + 1; h < p->nseg && p->dtype[h] == p->dtype[g];) h++;
        cudaError_t e = launch_segs(*a, p, g, h, m_rows, st);
        if (e != cudaSuccess) return (int)e;
    }
    return 0;
}

extern "C" int ak_cuda_gemv(const ak_cuda_cmd *c, ak_cuda_ctx *x) { return ak_cuda_gemv_rows(&c->a, 1, x->stream); }

/* ---- activation + down: y = W (act(g) * u); h in scratch first where the streaming
 * kernel does not take the weights ---- */
__global__ void k_act_vec(ak_cuda_args a) {
    AK_KERNEL_ENTRY(ak_p_act_down, p);
    const float *gu = (const float *)a.b[1];
    float *h = (float *)a.scratch;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < p.K; k += gridDim.x * blockDim.x)
        h[k] = ak_dev_act(p.act, gu[k]) * gu[p.K + k];
}

extern "C" int ak_cuda_gemv_act_down(const ak_cuda_cmd *c, ak_cuda_ctx *x) {
    ak_cuda_args g = act_down_args(c->a);
    const ak_p_mm *p = (const ak_p_mm *)g.p;
    if (fast_ok(g, p, 0, 1)) {   /* gated: the GEMV before wrote act(g) * u already */
        g.pro = c->a.gated == 2 ? AK_CUDA_PRO_Q8 : c->a.gated ? AK_CUDA_PRO_NONE : AK_CUDA_PRO_ACT;
        if (c->a.gated == 2) g.codes_k = gq_code_k(p->K, gq_blocks(2 * p->K));   /* as the gate/up launch made them */
        return (int)launch_segs(g, p, 0, 1, 1, x->stream);
    }
    if (c->a.gated) return (int)cudaErrorInvalidValue;
    cudaError_t e = ak_launch(k_act_vec, dim3(ak_cdiv(p->K, 256)), dim3(256), 0, x->stream, c->a);
    if (e != cudaSuccess) return (int)e;
    g.b[3] = c->a.scratch;
    return ak_cuda_gemv_rows(&g, 1, x->stream);
}
