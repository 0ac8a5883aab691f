/* Device helpers every kernel file uses: the step patch applied at kernel entry (the
 * device side of ak_cmd_patch), reductions and half/bfloat conversions. */
#ifndef AK_CUDA_COMMON_CUH
#define AK_CUDA_COMMON_CUH
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <string.h>
#include "backend/cuda/cuda_int.h"
#ifndef _Alignas
#define _Alignas(x) alignas(x)   /* table.h is C11 */
#endif
extern "C" {
#include "core/err.h"
#include "core/kernels.h"
#include "core/table.h"
}

/* pos, n and stopped of the step, in one 16-byte load through L2 (the sample command of the
 * previous step wrote them). */
struct ak_stepv { int32_t pos, n, stopped; };
__device__ __forceinline__ ak_stepv ak_step(const ak_cuda_args &a) {
    int4 v = __ldcg((const int4 *)a.step);
    return ak_stepv{v.x, v.y, v.z};
}

/* The parameter block with this step's n, pos and kv_len, as ak_cmd_patch would write them. */
template <class P>
__device__ __forceinline__ P ak_params(const ak_cuda_args &a, const ak_stepv &s) {
    P p;
    memcpy(&p, a.p, sizeof(P));
    int32_t *w = reinterpret_cast<int32_t *>(&p);
    if (a.patch & AK_PATCH_N) w[0] = s.n;
    if (a.patch & AK_PATCH_POS) w[1] = s.pos;
    if (a.patch & AK_PATCH_KVLEN) w[2] = s.pos + s.n;
    return p;
}

/* The token binding after TOK_IN / TOK_OUT patching. */
__device__ __forceinline__ int32_t *ak_tok_ptr(const ak_cuda_args &a, const ak_stepv &s) {
    int32_t *t = (int32_t *)a.b[a.bind_tok];
    if (a.patch & AK_PATCH_TOK_IN) t += s.pos;
    if (a.patch & AK_PATCH_TOK_OUT) t += s.pos + s.n;
    return t;
}

/* Programmatic dependent launch (sm_90): a kernel may start while its predecessor
 * finishes; it waits (griddepcontrol.wait) before it touches anything the predecessor
 * writes or reads, then lets its own successor start. So when a kernel starts, every
 * kernel before its predecessor has finished, and reads of only their results can go
 * before the wait: weights, the step (only the sample command writes it), the KV cache of
 * earlier positions. No-ops before sm_90. */
__device__ __forceinline__ void ak_pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void ak_pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* A timeline of one decode step (AKUNU_CUDA_TRACE=pos): per command, the first and last
 * block entry, the last release from the wait, the last mark() (the GEMV's x codes
 * ready; the attention's rope done) and the first and last exit, from thread 0 of each
 * block, in globaltimer nanoseconds. Profilers time kernels alone; this shows where a
 * step's time goes inside the graph, with programmatic launches overlapping. */
__device__ __forceinline__ unsigned long long ak_gtime() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
struct ak_trace_t {
    unsigned long long *t, t0;
    __device__ ak_trace_t() : t(NULL), t0(ak_gtime()) {}
    __device__ void start(const ak_cuda_args &a, const ak_stepv &s) {
        if (a.trace && s.pos == a.trace_pos && threadIdx.x == 0) {
            t = a.trace + 8 * a.trace_id;
            atomicMin(t, t0);
            atomicMax(t + 1, t0);
            atomicMax(t + 2, ak_gtime());
        }
    }
    __device__ void mark() { if (t) atomicMax(t + 3, ak_gtime()); }
    __device__ ~ak_trace_t() {
        if (!t) return;
        unsigned long long e = ak_gtime();
        atomicMin(t + 4, e);
        atomicMax(t + 5, e);
    }
};

/* Kernel prologue: wait for the predecessor, read the step, or return when the chain
 * has stopped. */
#define AK_KERNEL_ENTRY(P, p)                  \
    ak_trace_t tr_;                            \
    ak_pdl_wait();                             \
    ak_pdl_trigger();                          \
    const ak_stepv st_ = ak_step(a);           \
    tr_.start(a, st_);                         \
    if (st_.stopped) return;                   \
    const P p = ak_params<P>(a, st_)

/* Launches a kernel that begins with AK_KERNEL_ENTRY (or its own ak_pdl_wait) with the
 * programmatic-serialization attribute where the device has it. */
extern int ak_cuda_pdl;   /* set by ak_cuda_kernels_init */
template <typename... KArgs, typename... Args>
static cudaError_t ak_launch(void (*k)(KArgs...), dim3 g, dim3 b, size_t smem, cudaStream_t s, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    cfg.gridDim = g;
    cfg.blockDim = b;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = ak_cuda_pdl ? 1 : 0;
    cudaError_t e = cudaLaunchKernelEx(&cfg, k, args...);
    return e != cudaSuccess ? e : cudaGetLastError();
}

/* Asynchronous copies global -> shared (sm_80 on): N bytes (4, 8 or 16) through L1, or
 * 16 bytes around it, and their commit groups. ak_pdl_wait does not wait for these as it
 * does for a thread's register loads. */
template <int N>
__device__ __forceinline__ void ak_cp_async(void *dst, const void *src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src), "n"(N));
}
__device__ __forceinline__ void ak_cp_async_cg16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src));
}
__device__ __forceinline__ void ak_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void ak_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

__device__ __forceinline__ float ak_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* NV warp sums at once (NV a power of two up to 32): at offset o a lane keeps the half of
 * its values picked by its bit o and adds its partner's copy of that half, so each round
 * halves the values; once one is left, plain butterfly rounds finish it. Lane l ends with
 * the whole sum of value l >> (5 - log2 NV). */
template <int NV>
__device__ __forceinline__ float ak_warp_sums(float (&r)[NV]) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int rd = 0; rd < 5; rd++) {
        const int o = 16 >> rd, h = (NV >> rd) / 2;   /* h: values kept after this round */
        if (h == 0) {
            r[0] += __shfl_xor_sync(0xffffffffu, r[0], o);
            continue;
        }
        const bool hi = lane & o;
#pragma unroll
        for (int i = 0; i < NV / 2; i++) {
            if (i >= h) break;
            const float send = hi ? r[i] : r[i + h], keep = hi ? r[i + h] : r[i];
            r[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
        }
    }
    return r[0];
}

__device__ __forceinline__ float ak_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over the block; every thread gets it. red holds 32 floats. */
__device__ __forceinline__ float ak_block_sum(float v, float *red) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = ak_warp_sum(v);
    __syncthreads();
    if (lane == 0) red[w] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : 0.f;
    return ak_warp_sum(v);
}

__device__ __forceinline__ float ak_block_max(float v, float *red) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = ak_warp_max(v);
    __syncthreads();
    if (lane == 0) red[w] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : -INFINITY;
    return ak_warp_max(v);
}

/* Little-endian reads at any alignment. */
__device__ __forceinline__ float ak_f16_at(const uint8_t *p) {
    return __half2float(__ushort_as_half((unsigned short)(p[0] | (p[1] << 8))));
}
__device__ __forceinline__ uint32_t ak_u32_at(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Activation as ak_act_apply computes it. */
__device__ __forceinline__ float ak_dev_act(int act, float x) {
    switch (act) {
    case AK_ACT_SILU: return x / (1.0f + expf(-x));
    case AK_ACT_GELU_TANH: return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    default: return 0.5f * x * erfcf(-x * 0.7071067811865475f);   /* 1 + erf(z), exact below 0 too */
    }
}

/* Decode attention: the key splits a step uses, one per 32 visible keys (one unrolled
 * step of every warp) up to the grid's, so that the shortest contexts need no merge. */
__host__ __device__ inline int ak_attn_used_splits(int keys, int grid_splits) {
    int s = (keys + 31) / 32;
    return s < grid_splits ? s : grid_splits;
}

static inline int ak_cdiv(int64_t a, int64_t b) { return (int)((a + b - 1) / b); }

/* ---- the KV cache's row types: F32, F16, or Q8_0 / Q4_0 blocks (rotated: ak_kv_rot) ---- */
__host__ __device__ constexpr int ak_kv_row_bytes(int t, int hd) {
    return t == AK_F32 ? 4 * hd : t == AK_F16 ? 2 * hd : t == AK_Q8_0 ? hd / 32 * 34 : hd / 32 * 18;
}

/* The Walsh-Hadamard butterfly i of the stage of span h, in blocks of r values: it
 * replaces x[j], x[j + h] (j returned) by their sum and difference. */
__device__ __forceinline__ int ak_wht_pair(int i, int r, int h) {
    /* r and h are powers of two: masks, not divisions (a division by a value known only at
     * run time is some twenty instructions, and k_rope_kv made about 60 pairs a lane) */
    const int k = i & (r / 2 - 1);
    return 2 * (i - k) + 2 * (k & -h) + (k & (h - 1));
}

/* The orthonormal Walsh-Hadamard transform of order r on every block of r of n values in
 * shared memory (ak_cpu_wht's butterflies and scale), a warp's lanes together. */
__device__ __forceinline__ void ak_wht_warp(float *x, int n, int r) {
    if (r <= 1) return;
    const int lane = threadIdx.x & 31;
    for (int h = 1; h < r; h *= 2) {
        for (int i = lane; i < n / 2; i += 32) {
            const int j = ak_wht_pair(i, r, h);
            const float u = x[j], v = x[j + h];
            x[j] = u + v;
            x[j + h] = u - v;
        }
        __syncwarp();
    }
    const float sc = 1.0f / sqrtf((float)r);
    for (int i = lane; i < n; i += 32) x[i] *= sc;
    __syncwarp();
}

/* The same on nv vectors of n values at a stride of ld, a block's threads together (every
 * thread of the block calls it). */
__device__ __forceinline__ void ak_wht_block(float *x, int nv, int ld, int n, int r) {
    if (r <= 1) return;
    const int half = n / 2;
    for (int h = 1; h < r; h *= 2) {
        for (int t = threadIdx.x; t < nv * half; t += blockDim.x) {
            const int j = ak_wht_pair(t % half, r, h);
            float *y = x + (size_t)(t / half) * ld;
            const float u = y[j], v = y[j + h];
            y[j] = u + v;
            y[j + h] = u - v;
        }
        __syncthreads();
    }
    const float sc = 1.0f / sqrtf((float)r);
    for (int t = threadIdx.x; t < nv * n; t += blockDim.x) x[(size_t)(t / n) * ld + t % n] *= sc;
    __syncthreads();
}

/* Value d of cache row `row` (head_dim hd, type t), as the reference dequantizes it. */
__device__ __forceinline__ float ak_kv_val(const void *cache, int t, size_t row, int d, int hd) {
    if (t == AK_F32) return ((const float *)cache)[row * hd + d];
    if (t == AK_F16) return __half2float(((const __half *)cache)[row * hd + d]);
    const int bs = t == AK_Q8_0 ? 34 : 18, i = d % 32;
    const uint8_t *b = (const uint8_t *)cache + row * (size_t)(hd / 32) * bs + (size_t)(d / 32) * bs;
    const float sc = __half2float(*(const __half *)b);
    if (t == AK_Q8_0) return sc * (float)(int8_t)b[2 + i];
    return (float)((i < 16 ? b[2 + i] & 15 : b[2 + i - 16] >> 4) - 8) * sc;
}

/* x[0, hd) (shared memory) into cache row `row`, a warp's lanes together: F32, F16, or
 * the blocks ak_quantize_q8_0 / ak_quantize_q4_0 make. */
__device__ __forceinline__ void ak_kv_store(void *cache, int t, size_t row, const float *x, int hd) {
    const int lane = threadIdx.x & 31;
    if (t == AK_F32 || t == AK_F16) {
        for (int k = lane; k < hd; k += 32) {
            if (t == AK_F16) ((__half *)cache)[row * hd + k] = __float2half_rn(x[k]);
            else ((float *)cache)[row * hd + k] = x[k];
        }
        return;
    }
    const int bs = t == AK_Q8_0 ? 34 : 18;
    uint8_t *o = (uint8_t *)cache + row * (size_t)(hd / 32) * bs;
    for (int b = 0; b < hd / 32; b++, o += bs) {
        const float v = x[32 * b + lane], av = fabsf(v), amax = ak_warp_max(av);
        float d;
        if (t == AK_Q8_0) d = amax / 127.0f;
        else d = __shfl_sync(0xffffffffu, v, __ffs(__ballot_sync(0xffffffffu, av == amax)) - 1) / -8.0f;   /* the first largest, signed */
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        if (lane == 0) *(__half *)o = __float2half_rn(d);
        if (t == AK_Q8_0) {
            o[2 + lane] = (uint8_t)(int8_t)roundf(v * id);
        } else {
            const float hi = __shfl_down_sync(0xffffffffu, v, 16);
            const int ql = (int)(v * id + 8.5f), qh = (int)(hi * id + 8.5f);
            if (lane < 16) o[2 + lane] = (uint8_t)((ql < 15 ? ql : 15) | (qh < 15 ? qh : 15) << 4);
        }
    }
}

#endif
