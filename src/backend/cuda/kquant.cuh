/* The block formats of the int8 GEMVs in the file's layout (k_gemv_s, k_gemv_k), one
 * row per type: unit u of a row (32 values) as two groups of 16 weights w = a q + b,
 * the codes q packed four to a word (signed bytes), a and b per group and where the
 * group's values lie in the row, as the CPU backend's unpackers (backend/cpu/quant_act.c)
 * make them, so that both multiply the same integers. A unit's bytes are distinct from
 * its neighbours' where the format allows (a lane per unit, the warp over 32 units reads
 * its stretch of the row once), and loaded as wide as the format's alignment lets:
 * 16 bytes for Q4_K/Q5_K (144- and 176-byte blocks), 4 for Q4_1/Q5_1/Q2_K and MLX, 2
 * elsewhere.
 * Q4_0 and Q8_0 are in the repacked layout here (quants, then scales; see quant.cuh);
 * this kernel takes their rows only where the streaming kernel does not (K not a
 * multiple of 256). */
#ifndef AK_CUDA_KQUANT_CUH
#define AK_CUDA_KQUANT_CUH
#include "backend/cuda/quant.cuh"

struct kq_unit {
    int q[2][4];    /* codes of the two groups */
    float a[2], b[2];
    int off[2];     /* first value of each group in the row */
};

/* Loads through the read-only path, or (SH) from shared memory: the streaming kernel's
 * ring (k_gemv_s in gemv.cu) decodes the same blocks from there. */
template <bool SH, class T> __device__ __forceinline__ T kq_ld(const T *p) {
    if constexpr (SH) return *p;
    else return __ldg(p);
}
/* Little-endian 32-bit words at 2-, 4- and 16-byte alignment. */
template <bool SH> __device__ __forceinline__ uint32_t kq_u32a2(const uint8_t *p) {
    const unsigned short *s = (const unsigned short *)p;
    return (uint32_t)kq_ld<SH>(s) | (uint32_t)kq_ld<SH>(s + 1) << 16;
}
template <bool SH> __device__ __forceinline__ void kq_w4a2(const uint8_t *p, uint32_t (&w)[4]) {
#pragma unroll
    for (int i = 0; i < 4; i++) w[i] = kq_u32a2<SH>(p + 4 * i);
}
template <bool SH> __device__ __forceinline__ void kq_w4a4(const uint8_t *p, uint32_t (&w)[4]) {
#pragma unroll
    for (int i = 0; i < 4; i++) w[i] = kq_ld<SH>((const unsigned int *)p + i);
}
template <bool SH> __device__ __forceinline__ void kq_w4a16(const uint8_t *p, uint32_t (&w)[4]) {
    uint4 v = kq_ld<SH>((const uint4 *)p);
    w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
}
template <bool SH> __device__ __forceinline__ float kq_f16(const uint8_t *p) {
    return __half2float(__ushort_as_half(kq_ld<SH>((const unsigned short *)p)));
}
__device__ __forceinline__ float kq_f16_lo(uint32_t w) { return __half2float(__ushort_as_half((unsigned short)(w & 0xFFFF))); }
__device__ __forceinline__ float kq_f16_hi(uint32_t w) { return __half2float(__ushort_as_half((unsigned short)(w >> 16))); }

/* Four bits of qh (bit i for byte i, bits < 16) moved to bit `to` of each byte: the
 * multiply lays copies of the nibble 7 bits apart (no two overlap, so nothing carries),
 * which puts bit i of copy i at bit 8 i; a multiply and a mask where taking the bits one
 * by one was some ten instructions. */
__device__ __forceinline__ uint32_t kq_spread4(uint32_t bits, int to) {
    return (bits * (0x00204081u << to)) & (0x01010101u << to);
}

/* Q4_K / Q5_K: sub-block j's scale and min from a super-block's first 16 bytes (d, dmin,
 * scales[12]) as words, taken by selects and shifts (a byte pointer into the words would
 * put them in local memory). */
__device__ __forceinline__ void kq_k4_scale_min(const uint32_t (&hd)[4], int j, int &sc, int &m) {
    ak_k4_scale_min([&](int i) { return (int)(((i < 4 ? hd[1] : i < 8 ? hd[2] : hd[3]) >> (8 * (i & 3))) & 0xFF); }, j, sc, m);
}

/* Unit u of row `row` (K values; the repacked Q4_0/Q8_0 need nb = K / 32); SH: the row
 * is in shared memory. */
template <int DT, bool SH = false> __device__ __forceinline__ void kq_decode(const uint8_t *row, int nb, int u, kq_unit &o) {
    uint32_t w[4];
    if constexpr (DT == AK_Q4_0 || DT == AK_Q8_0) {   /* repacked: 2-byte alignment */
        constexpr int QB = DT == AK_Q4_0 ? 16 : 32;
        const float d = kq_f16<SH>(row + (size_t)nb * QB + 2 * u);
        o.a[0] = o.a[1] = d;
        o.b[0] = o.b[1] = 0.f;
        o.off[0] = 32 * u;
        o.off[1] = 32 * u + 16;
        if constexpr (DT == AK_Q4_0) {
            kq_w4a2<SH>(row + 16 * (size_t)u, w);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                o.q[0][i] = (int)__vsub4(w[i] & 0x0F0F0F0Fu, 0x08080808u);
                o.q[1][i] = (int)__vsub4((w[i] >> 4) & 0x0F0F0F0Fu, 0x08080808u);
            }
        } else {
            uint32_t w2[4];
            kq_w4a2<SH>(row + 32 * (size_t)u, w);
            kq_w4a2<SH>(row + 32 * (size_t)u + 16, w2);
#pragma unroll
            for (int i = 0; i < 4; i++) { o.q[0][i] = (int)w[i]; o.q[1][i] = (int)w2[i]; }
        }
    } else if constexpr (DT == AK_Q4_1 || DT == AK_Q5_0 || DT == AK_Q5_1) {
        /* a block per unit: low nibbles values 0-15, high nibbles 16-31 */
        constexpr int BB = DT == AK_Q4_1 ? 20 : DT == AK_Q5_0 ? 22 : 24;
        const uint8_t *p = row + (size_t)BB * u;
        float d, m = 0.f;
        uint32_t qh = 0;
        if constexpr (DT == AK_Q5_0) {
            d = kq_f16<SH>(p);
            qh = kq_u32a2<SH>(p + 2);
            kq_w4a2<SH>(p + 6, w);
        } else {
            const uint32_t dm = kq_ld<SH>((const unsigned int *)p);
            d = kq_f16_lo(dm);
            m = kq_f16_hi(dm);
            if constexpr (DT == AK_Q5_1) qh = kq_ld<SH>((const unsigned int *)p + 1);
            kq_w4a4<SH>(p + (DT == AK_Q5_1 ? 8 : 4), w);
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint32_t lo = w[i] & 0x0F0F0F0Fu, hi = (w[i] >> 4) & 0x0F0F0F0Fu;
            if constexpr (DT == AK_Q5_0) {
                /* q - 16 as a signed byte: the low nibble under 0xF0 where the high bit is
                 * clear (the spread of the inverted bits, times 15) */
                lo |= kq_spread4((~qh >> (4 * i)) & 0xF, 4) * 15;
                hi |= kq_spread4((~qh >> (16 + 4 * i)) & 0xF, 4) * 15;
            } else if constexpr (DT == AK_Q5_1) {
                lo |= kq_spread4((qh >> (4 * i)) & 0xF, 4);
                hi |= kq_spread4((qh >> (16 + 4 * i)) & 0xF, 4);
            }
            o.q[0][i] = (int)lo;
            o.q[1][i] = (int)hi;
        }
        o.a[0] = o.a[1] = d;
        o.b[0] = o.b[1] = m;
        o.off[0] = 32 * u;
        o.off[1] = 32 * u + 16;
    } else if constexpr (DT == AK_Q2_K || DT == AK_Q3_K) {
        /* unit v of a super-block: 16 bytes of qs (half v / 4, bytes 16 (v % 2) on), the
         * groups of shifts s = 2 ((v % 4) / 2) and s + 1 (values 128 half + 32 s + 16 (v % 2)) */
        constexpr int BB = DT == AK_Q2_K ? 84 : 110;
        const uint8_t *p = row + (size_t)BB * (u / 8);
        const int v = u % 8, half = v / 4, s0 = 2 * ((v % 4) / 2), lh = v % 2;
        uint32_t hm[4];
        if constexpr (DT == AK_Q2_K) {
            kq_w4a4<SH>(p + 16 + 32 * half + 16 * lh, w);
        } else {
            kq_w4a2<SH>(p + 32 + 32 * half + 16 * lh, w);
            kq_w4a2<SH>(p + 16 * lh, hm);
        }
        const float d = kq_f16<SH>(p + (DT == AK_Q2_K ? 80 : 108));
        const float dmin = DT == AK_Q2_K ? kq_f16<SH>(p + 82) : 0.f;
#pragma unroll
        for (int g = 0; g < 2; g++) {
            const int s = s0 + g, sc = 8 * half + 2 * s + lh;   /* the group's scale */
#pragma unroll
            for (int i = 0; i < 4; i++) {
                uint32_t q = (w[i] >> (2 * s)) & 0x03030303u;
                if constexpr (DT == AK_Q3_K) q = __vsub4(q | ((hm[i] >> (4 * half + s)) & 0x01010101u) << 2, 0x04040404u);
                o.q[g][i] = (int)q;
            }
            if constexpr (DT == AK_Q2_K) {
                const int b = kq_ld<SH>(p + sc);
                o.a[g] = d * (float)(b & 0xF);
                o.b[g] = -dmin * (float)(b >> 4);
            } else {
                o.a[g] = d * (float)ak_q3k_scale(p + 96, sc);
                o.b[g] = 0.f;
            }
            o.off[g] = 256 * (u / 8) + 128 * half + 32 * s + 16 * lh;
        }
    } else if constexpr (DT == AK_Q4_K || DT == AK_Q5_K) {
        /* unit v: qs bytes 32 (v / 2) + 16 (v % 2) on; low nibbles of sub-block 2 (v / 2),
         * high nibbles of the next, values 16 (v % 2) on of each */
        constexpr bool FIVE = DT == AK_Q5_K;
        const uint8_t *p = row + (size_t)(FIVE ? 176 : 144) * (u / 8);
        const int v = u % 8, j = 2 * (v / 2), lh = v % 2;
        uint32_t hd[4], qh[4];
        kq_w4a16<SH>(p, hd);   /* d, dmin, scales[12] */
        kq_w4a16<SH>(p + (FIVE ? 48 : 16) + 32 * (v / 2) + 16 * lh, w);
        if constexpr (FIVE) kq_w4a16<SH>(p + 16 + 16 * lh, qh);
        const float d = kq_f16_lo(hd[0]), dmin = kq_f16_hi(hd[0]);
#pragma unroll
        for (int g = 0; g < 2; g++) {
            int sc, m;
            kq_k4_scale_min(hd, j + g, sc, m);
            o.a[g] = d * (float)sc;
            o.b[g] = -dmin * (float)m;
            o.off[g] = 256 * (u / 8) + 32 * (j + g) + 16 * lh;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                uint32_t q = (w[i] >> (4 * g)) & 0x0F0F0F0Fu;
                if constexpr (FIVE) q |= ((qh[i] >> (j + g)) & 0x01010101u) << 4;
                o.q[g][i] = (int)q;
            }
        }
    } else if constexpr (ak_cuda_mlx_bits(DT) > 0) {
        /* a block per unit (core/mlx.h): f16 scale and bias, then B words of codes, an
         * LSB-first stream; 8-bit codes stored less kq_zero (128) to fit a signed byte */
        constexpr int B = ak_cuda_mlx_bits(DT);
        const uint8_t *p = row + (size_t)(4 + 4 * B) * u;
        const uint32_t sb = kq_ld<SH>((const unsigned int *)p);
        uint32_t c[B];
#pragma unroll
        for (int i = 0; i < B; i++) c[i] = kq_ld<SH>((const unsigned int *)p + 1 + i);
#pragma unroll
        for (int g = 0; g < 2; g++) {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                uint32_t q = 0;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int bit = (16 * g + 4 * i + j) * B, wd = bit / 32, sh = bit % 32;
                    uint32_t v = c[wd] >> sh;
                    if (sh + B > 32) v |= c[wd + 1] << (32 - sh);
                    q |= (v & ((1u << B) - 1)) << (8 * j);
                }
                o.q[g][i] = (int)(B == 8 ? __vsub4(q, 0x80808080u) : q);
            }
            o.a[g] = kq_f16_lo(sb);
            o.b[g] = kq_f16_hi(sb);
            o.off[g] = 32 * u + 16 * g;
        }
    } else {   /* Q6_K */
        /* unit v: half v / 4, k0 = 16 (v % 4): ql bytes 64 half + k0 on (low nibbles: values
         * 128 half + k0 on, high: 64 more), qh bytes 32 half + k0 % 32 on */
        const uint8_t *p = row + (size_t)210 * (u / 8);
        const int v = u % 8, half = v / 4, k0 = 16 * (v % 4);
        uint32_t qh[4];
        kq_w4a2<SH>(p + 64 * half + k0, w);
        kq_w4a2<SH>(p + 128 + 32 * half + k0 % 32, qh);
        const float d = kq_f16<SH>(p + 208);
#pragma unroll
        for (int g = 0; g < 2; g++) {
            const int r = 64 * g + k0;   /* within the half */
#pragma unroll
            for (int i = 0; i < 4; i++) {
                uint32_t q = (w[i] >> (4 * g)) & 0x0F0F0F0Fu;
                q |= ((qh[i] >> (2 * (r / 32))) & 0x03030303u) << 4;
                o.q[g][i] = (int)__vsub4(q, 0x20202020u);
            }
            o.a[g] = d * (float)(int8_t)kq_ld<SH>(p + 192 + (128 * half + r) / 16);
            o.b[g] = 0.f;
            o.off[g] = 256 * (u / 8) + 128 * half + r;
        }
    }
}

/* Q4_K / Q5_K: sub-block u of a row (32 consecutive values under one scale and min:
 * sub-block u % 8 of super-block u / 8) as codes q[i] (bytes 0..31, values 4 i on) with
 * w = a q - b. A lane that takes whole sub-blocks unpacks one scale pair where
 * kq_decode's unit (half of each of two sub-blocks) unpacks two. */
template <int DT, bool SH = false> __device__ __forceinline__ void kq_sub32(const uint8_t *row, int u, uint32_t (&q)[8], float &a, float &b) {
    constexpr bool FIVE = DT == AK_Q5_K;
    const int j = u & 7;
    const uint8_t *p = row + (size_t)(FIVE ? 176 : 144) * (u >> 3);
    uint32_t hd[4], wa[4], wb[4], ha[4] = {0, 0, 0, 0}, hb[4] = {0, 0, 0, 0};
    kq_w4a16<SH>(p, hd);
    kq_w4a16<SH>(p + (FIVE ? 48 : 16) + 32 * (j >> 1), wa);
    kq_w4a16<SH>(p + (FIVE ? 48 : 16) + 32 * (j >> 1) + 16, wb);
    if constexpr (FIVE) {
        kq_w4a16<SH>(p + 16, ha);
        kq_w4a16<SH>(p + 32, hb);
    }
    int sc, m;
    kq_k4_scale_min(hd, j, sc, m);
    a = kq_f16_lo(hd[0]) * (float)sc;
    b = kq_f16_hi(hd[0]) * (float)m;
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const uint32_t w = i < 4 ? wa[i] : wb[i - 4];
        q[i] = (w >> (4 * (j & 1))) & 0x0F0F0F0Fu;
        if constexpr (FIVE) q[i] |= (((i < 4 ? ha[i] : hb[i - 4]) >> j) & 0x01010101u) << 4;
    }
}

/* Whether w = a q + b has an offset b (the x codes' sums are needed). */
template <int DT> __host__ __device__ constexpr bool kq_has_b() {
    return DT == AK_Q4_1 || DT == AK_Q5_1 || DT == AK_Q2_K || DT == AK_Q4_K || DT == AK_Q5_K || ak_cuda_mlx_bits(DT) > 0;
}
/* What the stored codes lack: w = a (q + kq_zero) + b. */
template <int DT> __host__ __device__ constexpr int kq_zero() { return DT == AK_MLX_Q8 ? 128 : 0; }
/* The types k_gemv_k takes, and the K it needs (whole blocks). */
__host__ __device__ inline bool kq_type(int dt) {
    switch (dt) {
    case AK_Q4_0: case AK_Q8_0: case AK_Q4_1: case AK_Q5_0: case AK_Q5_1:
    case AK_Q2_K: case AK_Q3_K: case AK_Q4_K: case AK_Q5_K: case AK_Q6_K:
    case AK_MLX_Q2: case AK_MLX_Q3: case AK_MLX_Q6: case AK_MLX_Q8: return true;
    default: return false;
    }
}
__host__ __device__ inline int kq_block(int dt) { return dt >= AK_Q2_K && dt <= AK_Q6_K ? 256 : 32; }

#endif
