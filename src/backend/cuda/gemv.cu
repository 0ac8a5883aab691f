/* GEMV for decode (and GEMM of up to AK_CUDA_GEMV_BATCH rows): y[:, seg] = W_seg x (+ bias)
 * for up to three matrices side by side, and the activation + down GEMV.
 *
 * Fast path (Q4_0, Q8_0 in the repacked layout, 16-byte aligned rows, one x row, K up to
 * 16384): a thread per quant block column, each warp reading 512 contiguous bytes of a
 * row per load; rows streamed R at a time, double-buffered. Q8_0 multiplies in float
 * (quants become floats with the 2^23 exponent trick, PRMT + FADD, not the quarter-rate
 * integer conversions). Q4_0, which would be instruction-bound that way, quantizes its
 * x block to int8 codes once (scale max|x|/127, as the CPU backend does) and uses dp4a:
 * results differ from the float reference by about 1e-3 relative.
 * Generic path (every dtype, up to 8 x rows): a warp per output row, lanes over 32-value
 * sub-blocks dequantized as the reference does. */
#include "backend/cuda/quant.cuh"

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

__device__ __forceinline__ float ub2f(uint32_t w, uint32_t sel) { return __int_as_float(__byte_perm(w, 0x4B000000u, sel)); }

/* sum over one quant block of (q - offset) * x, x as 8 float4 */
__device__ __forceinline__ float dot_q4_0(uint4 q, const float4 *xv) {
    const uint32_t qw[4] = {q.x, q.y, q.z, q.w};
    float s0 = 0, s1 = 0;
#pragma unroll
    for (int wi = 0; wi < 4; wi++) {
        uint32_t lo = qw[wi] & 0x0F0F0F0Fu, hi = (qw[wi] >> 4) & 0x0F0F0F0Fu;
        float4 xl = xv[wi], xh = xv[4 + wi];
        s0 += (ub2f(lo, 0x7440) - 8388616.f) * xl.x;
        s1 += (ub2f(hi, 0x7440) - 8388616.f) * xh.x;
        s0 += (ub2f(lo, 0x7441) - 8388616.f) * xl.y;
        s1 += (ub2f(hi, 0x7441) - 8388616.f) * xh.y;
        s0 += (ub2f(lo, 0x7442) - 8388616.f) * xl.z;
        s1 += (ub2f(hi, 0x7442) - 8388616.f) * xh.z;
        s0 += (ub2f(lo, 0x7443) - 8388616.f) * xl.w;
        s1 += (ub2f(hi, 0x7443) - 8388616.f) * xh.w;
    }
    return s0 + s1;
}

__device__ __forceinline__ float dot_q8_0(uint4 q0, uint4 q1, const float4 *xv) {
    const uint32_t qw[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
    float s0 = 0, s1 = 0;
#pragma unroll
    for (int wi = 0; wi < 8; wi += 2) {
        uint32_t a = qw[wi] ^ 0x80808080u, b = qw[wi + 1] ^ 0x80808080u;
        float4 xa = xv[wi], xb = xv[wi + 1];
        s0 += (ub2f(a, 0x7440) - 8388736.f) * xa.x;
        s1 += (ub2f(b, 0x7440) - 8388736.f) * xb.x;
        s0 += (ub2f(a, 0x7441) - 8388736.f) * xa.y;
        s1 += (ub2f(b, 0x7441) - 8388736.f) * xb.y;
        s0 += (ub2f(a, 0x7442) - 8388736.f) * xa.z;
        s1 += (ub2f(b, 0x7442) - 8388736.f) * xb.z;
        s0 += (ub2f(a, 0x7443) - 8388736.f) * xa.w;
        s1 += (ub2f(b, 0x7443) - 8388736.f) * xb.w;
    }
    return s0 + s1;
}

/* A block of T threads (T >= quant blocks per row, so each thread owns one block column
 * and keeps its 32 x values in registers) walks RG rows, R at a time; the next R rows'
 * quants are in flight while the current ones are multiplied, and the first R rows are
 * fetched before waiting for the previous kernel (they depend on nothing it writes). */
template <int DT, int R>
__global__ void __launch_bounds__(512) k_gemv_fast(ak_cuda_args a, seg_range sr, int RG) {
    constexpr int Q = DT == AK_Q4_0 ? 1 : 2;   /* uint4 of quants per block */
    extern __shared__ float red[];               /* [RG][warps] */
    ak_p_mm p;
    memcpy(&p, a.p, sizeof p);
    const int nb = p.K / 32, nw = blockDim.x >> 5;
    const size_t rb = (size_t)nb * (16 * Q + 2);
    const int c0 = seg_start(p, sr.g0), c1 = seg_start(p, sr.g1);
    const int j0 = c0 + blockIdx.x * RG, nrows = max(0, min(RG, c1 - j0));
    const int blk = threadIdx.x;
    const bool mine = blk < nb;
    uint4 qc[R][Q];
    unsigned short dc[R];
    auto fetch = [&](int r0, uint4 (&q)[R][Q], unsigned short (&d)[R]) {
#pragma unroll
        for (int r = 0; r < R; r++) {
            int col = j0 + min(r0 + r, nrows - 1), g = seg_of(p, col);
            const uint8_t *row = seg_w(a, g) + (size_t)(col - seg_start(p, g)) * rb;
#pragma unroll
            for (int k = 0; k < Q; k++) q[r][k] = __ldcs((const uint4 *)row + Q * blk + k);
            d[r] = __ldcs((const unsigned short *)(row + (size_t)nb * 16 * Q) + blk);
        }
    };
    if (mine && nrows > 0) fetch(0, qc, dc);
    ak_pdl_wait();
    ak_pdl_trigger();
    const ak_stepv st_ = ak_step(a);
    if (st_.stopped) return;
    p = ak_params<ak_p_mm>(a, st_);
    const float *x = (const float *)a.b[3] + (p.last_only ? (size_t)(p.n - 1) * p.ld_x : 0);
    float4 xv[8];
    int xq[8], xsum = 0;   /* Q4_0: the block of x as int8 codes (scale xd), for dp4a */
    float xd = 0.f;
    if (mine) {
        const float4 *xp = (const float4 *)(x + 32 * (size_t)blk);
#pragma unroll
        for (int c = 0; c < 8; c++) xv[c] = __ldg(xp + c);
        if (DT == AK_Q4_0) {
            float amax = 0.f;
#pragma unroll
            for (int c = 0; c < 8; c++) amax = fmaxf(amax, fmaxf(fmaxf(fabsf(xv[c].x), fabsf(xv[c].y)), fmaxf(fabsf(xv[c].z), fabsf(xv[c].w))));
            xd = amax / 127.f;
            float id = amax > 0.f ? 127.f / amax : 0.f;
#pragma unroll
            for (int c = 0; c < 8; c++) {
                int a0 = __float2int_rn(xv[c].x * id), a1 = __float2int_rn(xv[c].y * id);
                int a2 = __float2int_rn(xv[c].z * id), a3 = __float2int_rn(xv[c].w * id);
                xsum += a0 + a1 + a2 + a3;
                xq[c] = (a0 & 0xFF) | (a1 & 0xFF) << 8 | (a2 & 0xFF) << 16 | (a3 & 0xFF) << 24;
            }
        }
    }
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (int r0 = 0; r0 < nrows; r0 += R) {
        uint4 qn[R][Q];
        unsigned short dn[R];
        const bool more = r0 + R < nrows;
        if (mine && more) fetch(r0 + R, qn, dn);
#pragma unroll
        for (int r = 0; r < R; r++) {
            float v = 0.f;
            if (mine) {
                float s;
                if (DT == AK_Q4_0) {
                    /* sum (q - 8) * xq with integer dot products of four bytes */
                    const uint32_t qw[4] = {qc[r][0].x, qc[r][0].y, qc[r][0].z, qc[r][0].w};
                    int acc = 0;
#pragma unroll
                    for (int wi = 0; wi < 4; wi++) {
                        acc = __dp4a((int)(qw[wi] & 0x0F0F0F0Fu), xq[wi], acc);
                        acc = __dp4a((int)((qw[wi] >> 4) & 0x0F0F0F0Fu), xq[4 + wi], acc);
                    }
                    s = xd * (float)(acc - 8 * xsum);
                } else {
                    s = dot_q8_0(qc[r][0], qc[r][Q - 1], xv);
                }
                v = __half2float(__ushort_as_half(dc[r])) * s;
            }
            v = ak_warp_sum(v);
            if (lane == 0 && r0 + r < nrows) red[(r0 + r) * nw + w] = v;
        }
        if (more) {
#pragma unroll
            for (int r = 0; r < R; r++) {
#pragma unroll
                for (int k = 0; k < Q; k++) qc[r][k] = qn[r][k];
                dc[r] = dn[r];
            }
        }
    }
    __syncthreads();
    for (int r = threadIdx.x; r < nrows; r += blockDim.x) {
        int col = j0 + r;
        float v = 0;
        for (int k = 0; k < nw; k++) v += red[r * nw + k];
        if (p.has_bias && col < p.N[0]) v += ((const float *)a.b[5])[col];
        ((float *)a.b[4])[col] = v;
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

/* Launches segments [g0, g1) (one dtype) through the fast or the generic kernel. */
static cudaError_t launch_segs(const ak_cuda_args &a, const ak_p_mm *p, int g0, int g1, int m_rows, cudaStream_t st) {
    int dt = p->dtype[g0], total = 0;
    bool fast = (dt == AK_Q4_0 || dt == AK_Q8_0) && p->K % 256 == 0 && m_rows == 1 && aligned16(a.b[3]) &&
                (!p->last_only || p->ld_x % 4 == 0);
    for (int g = g0; g < g1; g++) {
        total += p->N[g];
        fast = fast && aligned16(a.b[g]);
    }
    seg_range sr = {g0, g1};
    int nb = p->K / 32;
    if (fast && nb <= 512) {
        /* one thread per quant block of a row; as many rows per block as fill the GPU about
         * four blocks deep per multiprocessor, at least R, at most 64 */
        int T = (nb + 31) / 32 * 32, R = dt == AK_Q4_0 ? 4 : 2;
        int per_sm = 65536 / (96 * T);   /* about the register limit */
        if (per_sm > 4) per_sm = 4;
        if (per_sm < 1) per_sm = 1;
        int RG = ak_cdiv(total, (int64_t)ak_cuda_n_sm * per_sm);
        RG = (RG + R - 1) / R * R;
        if (RG < R) RG = R;
        if (RG > 64) RG = 64;
        size_t smem = (size_t)RG * (T / 32) * sizeof(float);
        if (dt == AK_Q4_0) return ak_launch(k_gemv_fast<AK_Q4_0, 4>, dim3(ak_cdiv(total, RG)), dim3(T), smem, st, a, sr, RG);
        return ak_launch(k_gemv_fast<AK_Q8_0, 2>, dim3(ak_cdiv(total, RG)), dim3(T), smem, st, a, sr, RG);
    }
    return ak_launch(k_gemv_generic, dim3(ak_cdiv(total, AK_GEMV_THREADS / 32)), dim3(AK_GEMV_THREADS), 0, st, a, sr);
}

/* rows: x rows to multiply (1 for decode, n for a batched GEMM; 1 when last_only). */
extern "C" int ak_cuda_gemv_rows(const ak_cuda_args *a, int rows, cudaStream_t st) {
    const ak_p_mm *p = (const ak_p_mm *)a->p;
    int m_rows = p->last_only ? 1 : rows;
    if (m_rows > AK_CUDA_GEMV_BATCH) return (int)cudaErrorInvalidValue;
    /* one launch when all segments share a dtype, else one per segment */
    bool same = true;
    for (int g = 1; g < p->nseg; g++) same = same && p->dtype[g] == p->dtype[0];
    if (same) return (int)launch_segs(*a, p, 0, p->nseg, m_rows, st);
    for (int g = 0; g < p->nseg; g++) {
        cudaError_t e = launch_segs(*a, p, g, g + 1, m_rows, st);
        if (e != cudaSuccess) return (int)e;
    }
    return 0;
}

extern "C" int ak_cuda_gemv(const ak_cuda_cmd *c, ak_cuda_ctx *x) { return ak_cuda_gemv_rows(&c->a, 1, x->stream); }

/* ---- activation + down: h = act(g) * u into scratch, then y = W h ---- */
__global__ void k_act_vec(ak_cuda_args a) {
    AK_KERNEL_ENTRY(ak_p_act_down, p);
    const float *gu = (const float *)a.b[1];
    float *h = (float *)a.scratch;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < p.K; k += gridDim.x * blockDim.x)
        h[k] = ak_dev_act(p.act, gu[k]) * gu[p.K + k];
}

extern "C" int ak_cuda_gemv_act_down(const ak_cuda_cmd *c, ak_cuda_ctx *x) {
    const ak_p_act_down *q = (const ak_p_act_down *)c->a.p;
    cudaError_t e = ak_launch(k_act_vec, dim3(ak_cdiv(q->K, 256)), dim3(256), 0, x->stream, c->a);
    if (e != cudaSuccess) return (int)e;
    ak_cuda_args g = c->a;
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
    g.b[0] = c->a.b[0];
    g.b[3] = c->a.scratch;
    g.b[4] = c->a.b[2];
    g.b[5] = NULL;
    return ak_cuda_gemv_rows(&g, 1, x->stream);
}
