/* RMSNorm or LayerNorm (encoders: mean removed, a bias), and the fused residual add + norm
 * (with Gemma's optional post-norm of the added branch): one block per row, sums in float.
 * The output may alias x (BERT's post-norm residual): each thread rereads only what it wrote. */
#include "backend/cuda/common.cuh"

#define AK_NORM_THREADS 512

/* out = norm(x) * w (+ b): RMSNorm, or with AK_NORM_F_LAYER LayerNorm with the biased
 * variance as torch computes it. */
__device__ __forceinline__ void norm_row(const float *x, const float *w, const float *b, float *out, int dim, float eps,
                                         int flags, float *red) {
    bool ln = flags & AK_NORM_F_LAYER;
    float mean = 0;
    if (ln) {
        float s = 0;
        for (int k = threadIdx.x; k < dim; k += blockDim.x) s += x[k];
        mean = ak_block_sum(s, red) / (float)dim;
    }
    float ss = 0;
    for (int k = threadIdx.x; k < dim; k += blockDim.x) ss += (x[k] - mean) * (x[k] - mean);
    ss = ak_block_sum(ss, red);
    float r = 1.0f / sqrtf(ss / (float)dim + eps);
    for (int k = threadIdx.x; k < dim; k += blockDim.x) out[k] = ln ? (x[k] - mean) * r * w[k] + b[k] : x[k] * r * w[k];
}

__global__ void __launch_bounds__(AK_NORM_THREADS) k_norm(ak_cuda_args a) {
    __shared__ float red[32];
    AK_KERNEL_ENTRY(ak_p_norm, p);
    int i = blockIdx.x;
    if (i >= p.n) return;
    norm_row((const float *)a.b[0] + (size_t)i * p.dim, (const float *)a.b[1], (const float *)a.b[3],
             (float *)a.b[2] + (size_t)i * p.dim, p.dim, p.eps, p.flags, red);
}

/* x += [norm(a) * post_w | a]; out = norm(x) * w (+ b). */
__global__ void __launch_bounds__(AK_NORM_THREADS) k_add_norm(ak_cuda_args a) {
    __shared__ float red[32];
    AK_KERNEL_ENTRY(ak_p_norm, p);
    int i = blockIdx.x;
    if (i >= p.n) return;
    float *x = (float *)a.b[0] + (size_t)i * p.dim;
    const float *ad = (const float *)a.b[1] + (size_t)i * p.dim, *pw = (const float *)a.b[2], *w = (const float *)a.b[3];
    float ra = 1.f;
    bool post = p.flags & AK_NORM_F_POST;
    if (post) {
        float ss = 0;
        for (int k = threadIdx.x; k < p.dim; k += blockDim.x) ss += ad[k] * ad[k];
        ss = ak_block_sum(ss, red);
        ra = 1.0f / sqrtf(ss / (float)p.dim + p.eps);
    }
    for (int k = threadIdx.x; k < p.dim; k += blockDim.x) x[k] += post ? ad[k] * ra * pw[k] : ad[k];
    norm_row(x, w, (const float *)a.b[5], (float *)a.b[4] + (size_t)i * p.dim, p.dim, p.eps, p.flags, red);
}

static int threads_for(int dim) {
    int t = 32;
    while (t < AK_NORM_THREADS && t * 4 < dim) t *= 2;
    return t;
}

extern "C" int ak_cuda_norm(const ak_cuda_cmd *c, ak_cuda_ctx *x) {
    return (int)ak_launch(k_norm, dim3(c->rows), dim3(threads_for(((const ak_p_norm *)c->a.p)->dim)), 0, x->stream, c->a);
}

extern "C" int ak_cuda_add_norm(const ak_cuda_cmd *c, ak_cuda_ctx *x) {
    return (int)ak_launch(k_add_norm, dim3(c->rows), dim3(threads_for(((const ak_p_norm *)c->a.p)->dim)), 0, x->stream, c->a);
}
