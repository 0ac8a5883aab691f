/* The sample command (core/sample.h): the token choice from a row of logits, which also
 * writes tokens[pos+n], checks the stop set and advances the device step, so a sampled
 * chain runs like a greedy one. The settings are read from the sample buffer at run time:
 * one captured graph serves every request.
 *   argmax: each block reduces a 4096-id slice; the last block to finish reduces the slices.
 *   otherwise: each block takes its slice into shared memory (penalties and mask applied)
 *   and writes at most AK_SAMPLE_MAX_K ids that include its top k, found by a radix descent
 *   over 64-bit keys (the logit's order-preserving bits, then the id reversed, so ties go
 *   to the smaller id and no two keys are equal); the last block finds the exact top k of
 *   those lists the same way, sorts the k, and one warp applies the filters and the
 *   Gumbel-max draw. (Sorting whole slices instead cost 175 us a token: bench/README.) */
#include "backend/cuda/common.cuh"
#include <limits.h>
extern "C" {
#include "core/sample.h"
}

#define AK_SAMPLE_THREADS 512

extern "C" int ak_cuda_sample_blocks(int vocab) {
    int b = ak_cdiv(vocab, AK_SAMPLE_SLICE);
    return b < 1 ? 1 : b;
}

/* Entries the last block selects from: every block's list. */
static int union_n(int vocab) {
    if (vocab > AK_SAMPLE_MAX_VOCAB) vocab = AK_SAMPLE_MAX_VOCAB;   /* beyond: argmax only (the session refuses the rest) */
    return ak_cuda_sample_blocks(vocab) * AK_SAMPLE_MAX_K;
}

/* Dynamic shared memory: the slice's logits and the penalty window, or the lists' keys
 * in the last block. */
static size_t smem_bytes(int vocab) {
    size_t a = (AK_SAMPLE_SLICE + AK_SAMPLE_MAX_WINDOW) * 4, b = (size_t)union_n(vocab) * sizeof(uint64_t);
    return a > b ? a : b;
}

struct kc { float l; int id; };

__device__ __forceinline__ bool kc_before(kc a, kc b) { return ak_sample_before(a.l, a.id, b.l, b.id); }

/* Bitonic sort of a[0..n) (n a power of two) in shared memory: "before" first. */
__device__ void kc_sort(kc *a, int n) {
    for (int k = 2; k <= n; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            for (int i = threadIdx.x; i < n; i += blockDim.x) {
                int q = i ^ j;
                if (q <= i) continue;
                kc x = a[i], y = a[q];
                bool up = (i & k) == 0;
                if (up ? kc_before(y, x) : kc_before(x, y)) { a[i] = y; a[q] = x; }
            }
            __syncthreads();
        }
}

/* 64-bit keys: larger is before. The logit's bits made order-preserving as an unsigned
 * number, then the id reversed (ties: the smaller id first); 0 is no entry. */
__device__ __forceinline__ uint64_t kkey(float l, int id) {
    uint32_t u = __float_as_uint(l);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((uint64_t)u << 32) | (uint32_t)~(uint32_t)id;
}
__device__ __forceinline__ kc kc_of(uint64_t key) {
    uint32_t u = (uint32_t)(key >> 32);
    u = (u & 0x80000000u) ? (u & 0x7fffffffu) : ~u;
    return kc{__uint_as_float(u), (int)~(uint32_t)key};
}

/* The result of a radix descent: the keys whose top 8 * depth bits are at least prefix. */
struct kdesc {
    uint64_t prefix;
    int depth;
    __device__ bool in(uint64_t key) const { return depth == 0 || (key >> (64 - 8 * depth)) >= prefix; }
};

/* hist[bin]++ for every lane with a bin (-1: none), one atomic per distinct bin of the
 * warp: the keys of a slice crowd into few bins, and same-address atomics serialise. */
__device__ __forceinline__ void hist_add(unsigned *hist, int bin) {
    unsigned same = __match_any_sync(0xffffffffu, bin);
    if (bin >= 0 && (threadIdx.x & 31) == __ffs(same) - 1) atomicAdd(&hist[bin], (unsigned)__popc(same));
}

/* A slot in a list counted by *cnt for each lane that takes one (warp-wide: one atomic). */
__device__ __forceinline__ int append(int *cnt, bool take) {
    unsigned b = __ballot_sync(0xffffffffu, take);
    int lane = threadIdx.x & 31, base = 0;
    if (lane == 0 && b) base = atomicAdd(cnt, __popc(b));
    base = __shfl_sync(0xffffffffu, base, 0);
    return base + __popc(b & ((1u << lane) - 1));
}

/* One step of the descent, shared by every thread after a histogram of the next byte of
 * the undecided keys (those whose top bits equal the prefix): the byte whose keys take
 * the count of keys above the prefix from below k to k or more. */
__device__ void desc_step(unsigned *hist, kdesc &d, int &above, int &eq, int k) {
    __shared__ int s_b, s_above, s_eq;
    __syncthreads();
    if (threadIdx.x < 32) {
        int lane = threadIdx.x, sum = 0;
        for (int j = 0; j < 8; j++) sum += hist[255 - 8 * lane - j];   /* lane 0: bytes 255..248 */
        int inc = sum;
        for (int o = 1; o < 32; o <<= 1) {
            int v = __shfl_up_sync(0xffffffffu, inc, o);
            if (lane >= o) inc += v;
        }
        int before = inc - sum;
        if (above + before < k && above + inc >= k) {
            int acc = above + before;
            for (int j = 0; j < 8; j++) {
                int b = 255 - 8 * lane - j, h = (int)hist[b];
                if (acc + h >= k) { s_b = b; s_above = acc; s_eq = h; break; }
                acc += h;
            }
        }
    }
    __syncthreads();
    d.prefix = (d.prefix << 8) | (uint64_t)s_b;
    d.depth++;
    above = s_above;
    eq = s_eq;
    __syncthreads();
}

/* Descent over keys held in registers (per thread m of them, 0 = none): stops once the
 * keys at or above the prefix number at most cap (and at least k). */
__device__ kdesc descend(const uint64_t *key, int m, int cap, int k) {
    __shared__ unsigned hist[256];
    __shared__ int s_n;
    kdesc d = {0, 0};
    if (threadIdx.x == 0) s_n = 0;
    __syncthreads();
    int mine = 0;
    for (int j = 0; j < m; j++) mine += key[j] != 0;
    for (int o = 16; o > 0; o >>= 1) mine += __shfl_xor_sync(0xffffffffu, mine, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(&s_n, mine);
    __syncthreads();
    int above = 0, eq = s_n;
    while (above + eq > cap && d.depth < 8) {
        for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
        __syncthreads();
        int sh = 56 - 8 * d.depth;
        for (int j = 0; j < m; j++)
            hist_add(hist, key[j] && (d.depth == 0 || (key[j] >> (sh + 8)) == d.prefix) ? (int)((key[j] >> sh) & 255) : -1);
        desc_step(hist, d, above, eq, k);
    }
    return d;
}

/* The same over n keys in shared memory. */
__device__ kdesc descend_smem(const uint64_t *u, int n, int cap, int k) {
    __shared__ unsigned hist[256];
    kdesc d = {0, 0};
    int above = 0, eq = n;
    while (above + eq > cap && d.depth < 8) {
        for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
        __syncthreads();
        int sh = 56 - 8 * d.depth;
        for (int i0 = 0; i0 < n; i0 += blockDim.x) {   /* whole warps: hist_add is warp-wide */
            int i = i0 + threadIdx.x;
            hist_add(hist, i < n && (d.depth == 0 || (u[i] >> (sh + 8)) == d.prefix) ? (int)((u[i] >> sh) & 255) : -1);
        }
        desc_step(hist, d, above, eq, k);
    }
    return d;
}

__device__ __forceinline__ void am_better(float &bv, int &bi, float v, int i) {
    if (v > bv || (v == bv && i < bi)) { bv = v; bi = i; }
}

/* Block-wide argmax (ties: the smaller index); the result in warp 0. */
__device__ void am_block(float &bv, int &bi) {
    __shared__ float sv[32];
    __shared__ int si[32];
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        am_better(bv, bi, ov, oi);
    }
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) { sv[w] = bv; si[w] = bi; }
    __syncthreads();
    if (w == 0) {
        int nw = blockDim.x >> 5;
        bv = lane < nw ? sv[lane] : -INFINITY;
        bi = lane < nw ? si[lane] : INT_MAX;
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            am_better(bv, bi, ov, oi);
        }
    }
}

/* Whether this block is the last of the grid to get here (its writes made visible first). */
__device__ bool last_block(const ak_cuda_args &a) {
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&a.step->pick_done, 1u) == gridDim.x - 1;
    __syncthreads();
    if (last) __threadfence();
    return last;
}

/* The chosen token into tokens[pos+n] (row's place: off before it); the step advances
 * once its last row is chosen (thread 0 of the last block). */
__device__ void finish(const ak_cuda_args &a, const ak_stepv &s, int off, int32_t tok) {
    ak_tok_ptr(a, s)[off] = tok;
    ak_cuda_step *st = a.step;
    st->pick_done = 0;
    if (!a.act) return;
    st->steps_done++;
    for (int k = 0; k < st->n_stop; k++) if (st->stop[k] == tok) st->stopped = 1;
    st->pos += st->n;
}

/* Warp 0: from the sorted top k (c[0..k)), the filters of core/sample.c and the draw. */
__device__ int32_t draw(const kc *c, int k, const ak_sample_cfg &g, int64_t index) {
    int lane = threadIdx.x & 31;
    float mx = c[0].l, t = g.temperature;
    float floor_ = mx - 40.0f * (t > 1 ? t : 1.0f);
    int n = 0;   /* the prefix within the floor (the sort puts -inf and padding last) */
    for (int i0 = 0; i0 < k; i0 += 32) {
        int i = i0 + lane;
        unsigned in = __ballot_sync(0xffffffffu, i < k && c[i].l >= floor_ && c[i].id != INT_MAX);
        n += __popc(in);
        if (in != 0xffffffffu) break;
    }
    if (n < 1) n = 1;
    if (g.top_p < 1.0f || g.min_p > 0) {
        double sum = 0;
        for (int i = lane; i < n; i += 32) sum += exp((double)c[i].l - mx);
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        int m = n;
        if (g.top_p < 1.0f) {   /* the fewest whose mass reaches top_p: an inclusive scan per 32 */
            double acc = 0, lim = (double)g.top_p * sum;
            for (int i0 = 0; i0 < n; i0 += 32) {
                int i = i0 + lane;
                double v = i < n ? exp((double)c[i].l - mx) : 0;
                for (int o = 1; o < 32; o <<= 1) {
                    double u = __shfl_up_sync(0xffffffffu, v, o);
                    if (lane >= o) v += u;
                }
                unsigned hit = __ballot_sync(0xffffffffu, i < n && acc + v >= lim);
                if (hit) { m = i0 + __ffs(hit); break; }
                acc += __shfl_sync(0xffffffffu, v, 31);
            }
        }
        if (g.min_p > 0) {
            double lim = (double)mx + log((double)g.min_p);
            int q = 0;
            for (int i = lane; i < m; i += 32) q += (double)c[i].l >= lim;
            for (int o = 16; o > 0; o >>= 1) q += __shfl_xor_sync(0xffffffffu, q, o);
            m = q;   /* a prefix: the list is sorted */
        }
        n = m < 1 ? 1 : m;
    }
    double bs = -INFINITY;
    int bi = INT_MAX;
    for (int i = lane; i < n; i += 32) {
        double s = ak_sample_score(c[i].l, mx, t, g.seed, index, c[i].id);
        if (s > bs) bs = s, bi = i;
    }
    for (int o = 16; o > 0; o >>= 1) {
        double os = __shfl_xor_sync(0xffffffffu, bs, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (os > bs || (os == bs && oi < bi)) bs = os, bi = oi;
    }
    return c[bi == INT_MAX ? 0 : bi].id;
}

/* a.acc: the row (all rows: one launch each); a.act: 1 on the launch that ends the step. */
__global__ void __launch_bounds__(AK_SAMPLE_THREADS) k_sample(ak_cuda_args a) {
    AK_KERNEL_ENTRY(ak_p_sample, p);
    const int row = p.all ? a.acc : p.n - 1;
    const float *x = (const float *)a.b[0] + (size_t)row * p.vocab;
    const int kv = p.kv_len + row - (p.n - 1);   /* this row's choice is for position kv */
    const uint8_t *sb = (const uint8_t *)a.b[2];
    ak_sample_cfg g;
    memcpy(&g, sb, sizeof g);
    if (g.mode == AK_SAMPLE_ARGMAX) {
        float *sv = (float *)a.scratch;
        int *si = (int *)(sv + gridDim.x);
        float bv = -INFINITY;
        int bi = INT_MAX;
        int lo = blockIdx.x * AK_SAMPLE_SLICE, hi = min(p.vocab, lo + AK_SAMPLE_SLICE);
        for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) am_better(bv, bi, x[i], i);
        am_block(bv, bi);
        if (threadIdx.x == 0) { sv[blockIdx.x] = bv; si[blockIdx.x] = bi; }
        if (!last_block(a)) return;
        bv = -INFINITY;
        bi = INT_MAX;
        for (int i = threadIdx.x; i < (int)gridDim.x; i += blockDim.x) am_better(bv, bi, __ldcg(sv + i), __ldcg(si + i));
        am_block(bv, bi);
        if (threadIdx.x == 0) finish(a, st_, row - (p.n - 1), bi == INT_MAX ? 0 : bi);
        return;
    }
    extern __shared__ __align__(16) uint8_t dyn[];
    float *sl = (float *)dyn;
    int lo = blockIdx.x * AK_SAMPLE_SLICE, n = min(p.vocab - lo, AK_SAMPLE_SLICE);
    const uint32_t *mask = g.masked ? (const uint32_t *)(sb + AK_SAMPLE_MASK_OFF) : NULL;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        int id = lo + i;
        sl[i] = mask && !(mask[id >> 5] >> (id & 31) & 1) ? -INFINITY : x[id];
    }
    __syncthreads();
    /* penalties: each distinct id of the window in this slice once, with its count */
    const int32_t *tok = ak_tok_ptr(a, st_) + row - (p.n - 1);
    int nw = min(g.last_n, kv);
    if (nw > 0 && (g.repeat != 1.0f || g.presence != 0 || g.frequency != 0)) {
        int32_t *win = (int32_t *)(sl + AK_SAMPLE_SLICE);   /* in shared memory: the scans below read it nw times */
        for (int j = threadIdx.x; j < nw; j += blockDim.x) win[j] = tok[j - nw];
        __syncthreads();
        for (int j = threadIdx.x; j < nw; j += blockDim.x) {
            int t = win[j];
            if (t < lo || t >= lo + n) continue;
            int cnt = 0;
            bool first = true;
            for (int q = 0; q < nw && first; q++)
                if (win[q] == t) { if (q < j) first = false; else cnt++; }
            if (first && sl[t - lo] != -INFINITY) sl[t - lo] = ak_sample_penalize(x[t], cnt, &g);
        }
        __syncthreads();
    }
    int k = g.mode == AK_SAMPLE_GREEDY ? 1 : min(g.top_k, p.vocab);
    constexpr int PER = AK_SAMPLE_SLICE / AK_SAMPLE_THREADS;
    uint64_t key[PER];
    for (int j = 0; j < PER; j++) {
        int i = threadIdx.x + j * AK_SAMPLE_THREADS;
        key[j] = i < n ? kkey(sl[i], lo + i) : 0;
    }
    /* this block's list: the ids at or above the descent's prefix, at most MAX_K */
    __shared__ int cnt;
    kdesc d = descend(key, PER, AK_SAMPLE_MAX_K, k);
    if (threadIdx.x == 0) cnt = 0;
    __syncthreads();
    uint64_t *lists = (uint64_t *)((uint8_t *)a.scratch + (size_t)gridDim.x * 8);
    int *counts = (int *)a.scratch;
    for (int j = 0; j < PER; j++) {
        bool take = key[j] && d.in(key[j]);
        int at = append(&cnt, take);
        if (take) lists[(size_t)blockIdx.x * AK_SAMPLE_MAX_K + at] = key[j];
    }
    __syncthreads();
    if (threadIdx.x == 0) counts[blockIdx.x] = cnt;
    if (!last_block(a)) return;
    /* the lists into shared memory, then the exact top k of them */
    uint64_t *u = (uint64_t *)dyn;
    __shared__ int s_cnt[AK_SAMPLE_MAX_VOCAB / AK_SAMPLE_SLICE], s_off[AK_SAMPLE_MAX_VOCAB / AK_SAMPLE_SLICE], total;
    for (int b = threadIdx.x; b < (int)gridDim.x; b += blockDim.x) s_cnt[b] = __ldcg(counts + b);
    __syncthreads();
    if (threadIdx.x == 0) {
        int t = 0;
        for (int b = 0; b < (int)gridDim.x; b++) s_off[b] = t, t += s_cnt[b];
        total = t;
    }
    __syncthreads();
    for (int b = threadIdx.x >> 5; b < (int)gridDim.x; b += blockDim.x >> 5)   /* a warp per list */
        for (int i = threadIdx.x & 31; i < s_cnt[b]; i += 32) u[s_off[b] + i] = __ldcg(lists + (size_t)b * AK_SAMPLE_MAX_K + i);
    __syncthreads();
    kdesc e = descend_smem(u, total, k, k);
    __shared__ kc top[AK_SAMPLE_MAX_K];
    if (threadIdx.x == 0) cnt = 0;
    __syncthreads();
    for (int i0 = 0; i0 < total; i0 += blockDim.x) {
        int i = i0 + threadIdx.x;
        bool take = i < total && e.in(u[i]);
        int at = append(&cnt, take);
        if (take) top[at] = kc_of(u[i]);
    }
    __syncthreads();
    k = cnt;   /* k: the lists hold at least min(top_k, vocab) keys, all distinct */
    int np = 1;
    while (np < k) np *= 2;
    for (int i = k + threadIdx.x; i < np; i += blockDim.x) top[i] = kc{-INFINITY, INT_MAX};
    __syncthreads();
    kc_sort(top, np);
    if (threadIdx.x >= 32) return;
    int32_t choice = g.mode == AK_SAMPLE_GREEDY ? top[0].id : draw(top, k, g, kv);
    if (threadIdx.x == 0) finish(a, st_, row - (p.n - 1), choice);
}

extern "C" size_t ak_cuda_sample_scratch(int vocab) {
    return (size_t)ak_cuda_sample_blocks(vocab) * (8 + AK_SAMPLE_MAX_K * sizeof(uint64_t));
}

extern "C" int ak_cuda_init_sample(void) {
    return (int)cudaFuncSetAttribute(k_sample, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_bytes(AK_SAMPLE_MAX_VOCAB));
}

/* Every row: a launch each, in order (a verification's dozen rows; the row's window
 * holds the rows before it). */
extern "C" int ak_cuda_sample(const ak_cuda_cmd *c, ak_cuda_ctx *x) {
    const ak_p_sample *p = (const ak_p_sample *)c->a.p;
    int rows = p->all ? c->rows : 1, e = 0;
    for (int r = 0; r < rows && !e; r++) {
        ak_cuda_args a = c->a;
        a.acc = r;
        a.act = r == rows - 1;
        e = (int)ak_launch(k_sample, dim3(c->aux[0]), dim3(AK_SAMPLE_THREADS), smem_bytes(p->vocab), x->stream, a);
    }
    return e;
}
