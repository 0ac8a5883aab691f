/* What a barrier between thread blocks costs, idle and while every multiprocessor streams
 * memory (the decode's situation): one block of 512 threads per multiprocessor (120 KB of
 * shared memory keeps it one), each repeatedly requesting its next 32 KB from its own 1 MB
 * region before it meets the others, then using the previous 32 KB. The meeting is none,
 * a cluster barrier (clusters of 2 to 16: a hardware signal), a grid barrier through
 * memory (one release add per block and an acquire poll), or cooperative groups'
 * grid.sync. Prints the median of 5 runs of 4000 meetings: time per meeting and, loaded,
 * the bandwidth. bench/README has the H100's figures.
 *   nvcc -O3 -arch=sm_90a -o /tmp/gpu_barrier bench/gpu_barrier.cu && /tmp/gpu_barrier */
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

enum { NONE, CLUSTER, GRID_MEM, GRID_SYNC };
#define THREADS 512
#define SMEM (120 * 1024)
#define BATCH (4 * THREADS)   /* int4 per block and meeting: 32 KB */
#define ITERS 4000

template <int V, bool LOAD>
__global__ void __launch_bounds__(THREADS, 1) k_meet(const int4 *buf, size_t per, unsigned long long *bar, int *sink) {
    const int4 *p = buf + blockIdx.x * per;
    int4 r[4], acc = make_int4(0, 0, 0, 0);
    size_t off = 0;
    unsigned long long base = 0;
    if (V == GRID_MEM && threadIdx.x == 0) asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(base) : "l"(bar) : "memory");
    for (int j = 0; j < 4; j++) r[j] = LOAD ? __ldcg(p + threadIdx.x + j * THREADS) : make_int4(j, 0, 0, 0);
    for (int i = 1; i <= ITERS; i++) {
        off = off + 2 * BATCH > per ? 0 : off + BATCH;
        int4 nr[4];
        for (int j = 0; j < 4; j++) nr[j] = LOAD ? __ldcg(p + off + threadIdx.x + j * THREADS) : make_int4(i, j, 0, 0);
        if (V == CLUSTER) {
            asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
            asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
        } else if (V == GRID_MEM) {
            __syncthreads();
            if (threadIdx.x == 0) {
                asm volatile("red.release.gpu.global.add.u64 [%0], 1;" ::"l"(bar) : "memory");
                unsigned long long v;
                do asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(bar) : "memory");
                while (v < base + (unsigned long long)i * gridDim.x);
            }
            __syncthreads();
        } else if (V == GRID_SYNC) {
            cooperative_groups::this_grid().sync();
        }
        for (int j = 0; j < 4; j++) {
            acc.x ^= r[j].x;
            acc.y += r[j].y;
            r[j] = nr[j];
        }
    }
    if (acc.x == 0x5eed && acc.y == 7) *sink = 1;   /* keeps the loads */
}

template <int V, bool LOAD>
static float run(int grid, int cluster, const int4 *buf, size_t per, unsigned long long *bar, int *sink) {
    cudaFuncSetAttribute(k_meet<V, LOAD>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM);
    cudaFuncSetAttribute(k_meet<V, LOAD>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    cudaLaunchAttribute at[1];
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = SMEM;
    cfg.attrs = at;
    if (V == CLUSTER) {
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = cluster;
        at[0].val.clusterDim.y = at[0].val.clusterDim.z = 1;
        cfg.numAttrs = 1;
    } else if (V == GRID_SYNC) {
        at[0].id = cudaLaunchAttributeCooperative;
        at[0].val.cooperative = 1;
        cfg.numAttrs = 1;
    }
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    float t[5];
    for (int rep = 0; rep < 5; rep++) {
        cudaMemset(bar, 0, 8);
        cudaEventRecord(a);
        cudaError_t e = cudaLaunchKernelEx(&cfg, k_meet<V, LOAD>, buf, per, bar, sink);
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        if (e == cudaSuccess) e = cudaGetLastError();
        if (e != cudaSuccess) { fprintf(stderr, "launch: %s\n", cudaGetErrorString(e)); exit(1); }
        cudaEventElapsedTime(&t[rep], a, b);
    }
    for (int i = 1; i < 5; i++)   /* insertion sort: the median is t[2] */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) { float s = t[j]; t[j] = t[j - 1]; t[j - 1] = s; }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return t[2];
}

static int cluster_grid(int c) {   /* blocks of the clusters of c that fit at once */
    cudaLaunchAttribute at[1];
    cudaLaunchConfig_t q = {};
    q.gridDim = dim3(c);
    q.blockDim = dim3(THREADS);
    q.dynamicSmemBytes = SMEM;
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = c;
    at[0].val.clusterDim.y = at[0].val.clusterDim.z = 1;
    q.attrs = at;
    q.numAttrs = 1;
    cudaFuncSetAttribute(k_meet<CLUSTER, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM);
    cudaFuncSetAttribute(k_meet<CLUSTER, true>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, (void *)k_meet<CLUSTER, true>, &q) != cudaSuccess) n = 0;
    return n * c;
}

template <bool LOAD>
static void table(int nsm, const int4 *buf, size_t per, unsigned long long *bar, int *sink) {
    struct { const char *name; int v, c; } cs[] = {{"none", NONE, 0}, {"cluster 2", CLUSTER, 2}, {"cluster 4", CLUSTER, 4},
                                                  {"cluster 8", CLUSTER, 8}, {"cluster 16", CLUSTER, 16},
                                                  {"grid, memory", GRID_MEM, 0}, {"grid.sync", GRID_SYNC, 0}};
    printf("%s:\n", LOAD ? "while streaming (32 KB per block in flight)" : "idle");
    for (auto &c : cs) {
        int grid = c.v == CLUSTER ? cluster_grid(c.c) : nsm;
        if (grid == 0) continue;
        float ms = c.v == NONE        ? run<NONE, LOAD>(grid, 0, buf, per, bar, sink)
                 : c.v == CLUSTER     ? run<CLUSTER, LOAD>(grid, c.c, buf, per, bar, sink)
                 : c.v == GRID_MEM    ? run<GRID_MEM, LOAD>(grid, 0, buf, per, bar, sink)
                                      : run<GRID_SYNC, LOAD>(grid, 0, buf, per, bar, sink);
        printf("  %-13s %3d blocks  %7.3f us per meeting", c.name, grid, 1000.0 * ms / ITERS);
        if (LOAD) printf("  %6.0f GB/s", (double)grid * ITERS * BATCH * 16 / (ms * 1e6));
        printf("\n");
    }
}

int main(void) {
    int nsm = 0;
    if (cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess || nsm == 0) {
        fprintf(stderr, "no CUDA device\n");
        return 1;
    }
    const size_t per = (size_t)1 << 16;   /* int4 per block: 1 MB, 132 MB in all (past L2) */
    int4 *buf;
    unsigned long long *bar;
    int *sink;
    if (cudaMalloc(&buf, per * 16 * nsm) || cudaMalloc(&bar, 8) || cudaMalloc(&sink, 4)) {
        fprintf(stderr, "cudaMalloc failed\n");
        return 1;
    }
    cudaMemset(buf, 1, per * 16 * nsm);
    table<false>(nsm, buf, per, bar, sink);
    table<true>(nsm, buf, per, bar, sink);
    return 0;
}
