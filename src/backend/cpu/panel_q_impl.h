/* Panel kernels of the block types, written once and compiled per instruction set by
 * panel_q_x86.c: it defines TGT (the target attribute), SFX (the name suffix), W (16:
 * one zmm covers the 16 rows of a panel; 8: one ymm covers 8 rows, a panel runs as two
 * halves) and VNNI (0: AVX2 maddubs + madd, 1: AVX512-VNNI, 2: AVX-VNNI), and includes
 * this file. Layouts: panel_q.h.
 *
 * Per 32 values and activation row, one int32 vector of W rows: it starts at
 * -off * (sum of the row's x codes), then 8 dot steps add code vector v (values
 * 4v..4v+3 of every row, unsigned) times 4 x codes broadcast (signed), so it ends at the
 * exact sum of (code - off) * q; one conversion and one fma with scale * d_x follow. */
#define CAT2_(a, b) a##_##b
#define CAT2(a, b) CAT2_(a, b)
#define F(name) CAT2(name, SFX)

#if W == 16
#define VI __m512i
#define VF __m512
#define LDI(p) _mm512_loadu_si512((const void *)(p))
#define AND(a, b) _mm512_and_si512(a, b)
#define OR(a, b) _mm512_or_si512(a, b)
#define SRL16(a, n) _mm512_srli_epi16(a, n)
#define SLL16(a, n) _mm512_slli_epi16(a, n)
#define B8(c) _mm512_set1_epi8((char)(c))
#define I32(v) _mm512_set1_epi32(v)
#define ADDI(a, b) _mm512_add_epi32(a, b)
#define SLL32(a, n) _mm512_slli_epi32(a, n)
#define CVT(a) _mm512_cvtepi32_ps(a)
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define FNMA(a, b, c) _mm512_fnmadd_ps(a, b, c)
#define MUL(a, b) _mm512_mul_ps(a, b)
#define _ADDPS(a, b) _mm512_add_ps(a, b)
#define PS1(v) _mm512_set1_ps(v)
#define ZF() _mm512_setzero_ps()
#define PH(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define U8F(p) _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(p))))
#define I8F(p) _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p))))
#define DPB(acc, u, xp) F(dpb_bc)(acc, u, xp)
#define HIBIT(c, m64) _mm512_mask_add_epi8(c, (__mmask64)(m64), c, B8(16))
#define STF(p, v) _mm512_storeu_ps(p, v)
#else
#define VI __m256i
#define VF __m256
#define LDI(p) _mm256_loadu_si256((const __m256i *)(p))
#define AND(a, b) _mm256_and_si256(a, b)
#define OR(a, b) _mm256_or_si256(a, b)
#define SRL16(a, n) _mm256_srli_epi16(a, n)
#define SLL16(a, n) _mm256_slli_epi16(a, n)
#define B8(c) _mm256_set1_epi8((char)(c))
#define I32(v) _mm256_set1_epi32(v)
#define ADDI(a, b) _mm256_add_epi32(a, b)
#define SLL32(a, n) _mm256_slli_epi32(a, n)
#define CVT(a) _mm256_cvtepi32_ps(a)
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define FNMA(a, b, c) _mm256_fnmadd_ps(a, b, c)
#define MUL(a, b) _mm256_mul_ps(a, b)
#define _ADDPS(a, b) _mm256_add_ps(a, b)
#define PS1(v) _mm256_set1_ps(v)
#define ZF() _mm256_setzero_ps()
#define PH(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define U8F(p) _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p))))
#define I8F(p) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(p))))
#if VNNI == 2
#define DPB(acc, u, xp) _mm256_dpbusd_avx_epi32(acc, u, _mm256_set1_epi32(F(ld32)(xp)))
#else
#define DPB(acc, u, xp) _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_set1_epi32(F(ld32)(xp))), _mm256_set1_epi16(1)))
#endif
#define HIBIT(c, m64) OR(c, ak_q5_bit4_avx2((uint32_t)(m64)))
#define STF(p, v) _mm256_storeu_ps(p, v)
#endif

TGT static inline int32_t F(ld32)(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

#if W == 16
typedef struct { int8_t b[4]; } F(x4);
/* acc + u times the 4 x codes at xp broadcast, as vpdpbusd's embedded {1to16} broadcast
 * (the compiler would emit a separate broadcast load). */
TGT static inline __m512i F(dpb_bc)(__m512i acc, __m512i u, const int8_t *xp) {
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const F(x4) *)xp));
    return acc;
}
#endif


/* acc + the 4-value dots of code vector c with the x codes at xp. sign: AVX2 Q8_0, where
 * c holds |w| and ws the signed w. */
TGT static inline VI F(step)(const int sign, VI acc, VI c, VI ws, const int8_t *xp) {
#if W == 8 && VNNI == 0
    if (sign) {
        VI xb = _mm256_sign_epi8(_mm256_set1_epi32(F(ld32)(xp)), ws);
        return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(c, xb), _mm256_set1_epi16(1)));
    }
#else
    (void)sign;
    (void)ws;
#endif
    return DPB(acc, c, xp);
}

#define PQ_UNROLL _Pragma("GCC unroll 8")
#ifndef PQ_PF
#define PQ_PF 2048
#endif

/* T, NR and S are constants after inlining; H is the first row (0, or 8 for the second
 * half of a panel at W = 8). S: a GEMV's rows (NR <= 2), each float sum split over two
 * accumulators (shorter chains); otherwise a row sums as in a block of any size. */
TGT static inline __attribute__((always_inline)) void F(body)(const int T, const int NR, const int S, const uint8_t *pw, int64_t K,
                                                           const uint8_t *xa, size_t xs, int H, float *out) {
    const ak_pq_layout L = ak_pq_layouts[T];
    const int nsub = L.blk / 32;
    const int kt = T == AK_Q4_K || T == AK_Q5_K || T == AK_Q6_K;
    const int q5 = T == AK_Q5_0 || T == AK_Q5_1 || T == AK_Q5_K;
    const int b8 = T == AK_Q8_0 || T == AK_MLX_Q8, b6 = T == AK_Q6_K || T == AK_MLX_Q6;
    /* AVX2 maddubs would saturate on 8-bit codes: it multiplies |code - 128| by x with the
     * sign of code - 128 (MLX's codes 0..255 then add 128 * sum x back) */
    const int q8sign = b8 && VNNI == 0;
    VF acc[AK_PQ_NR], acc2[AK_PQ_NR];
    PQ_UNROLL
    for (int i = 0; i < NR; i++) acc[i] = acc2[i] = ZF();
    const int64_t nsb = K / L.blk;
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *P = pw + (size_t)(sb / L.G) * L.gb;
        const int bi = (int)(sb % L.G);
        const uint8_t *C = P + L.codes + bi * L.cs;
        const uint8_t *SC = P + (L.sc >= 0 ? L.sc + bi * L.ss : 0), *MN = P + (L.mn >= 0 ? L.mn + bi * L.ss : 0);
        VF fd = PH(P + L.d + 32 * bi + 2 * H), fm = ZF();
        if (L.m >= 0) fm = PH(P + L.m + 32 * bi + 2 * H);
        _Pragma("GCC unroll 1")
        for (int j = 0; j < nsub; j++) {
            const int64_t b = sb * nsub + j;
            VI c[8];
            const uint8_t *CJ = C + L.js * j;
            if (S && H == 0) /* decode streams from memory: prefetch a little ahead */
                for (int v = 0; v < (b8 ? 8 : 4 + (L.hb < 0 ? 0 : b6 ? 2 : 1)); v++)
                    _mm_prefetch((const char *)(CJ + 64 * v + PQ_PF), _MM_HINT_T0);
            if (b8) {
                PQ_UNROLL
                for (int v = 0; v < 8; v++) c[v] = LDI(C + 64 * v + 4 * H);
            } else {
                const uint8_t *cp = CJ + 4 * H;
                PQ_UNROLL
                for (int i = 0; i < 4; i++) {
                    VI v = LDI(cp + 64 * i);
                    c[i] = AND(v, B8(0xF));
                    c[i + 4] = AND(SRL16(v, 4), B8(0xF));
                }
            }
            if (q5) {
                const uint8_t *hp = CJ + L.hb;
                PQ_UNROLL
                for (int v = 0; v < 8; v++) {
                    uint64_t m;
                    memcpy(&m, hp + 8 * v, 8);
                    c[v] = HIBIT(c[v], m >> (4 * H));
                }
            }
            if (b6) {
                const uint8_t *hp = CJ + L.hb + 4 * H;
                PQ_UNROLL
                for (int h = 0; h < 2; h++) {
                    VI hv = LDI(hp + 64 * h);
                    c[4 * h + 0] = OR(c[4 * h + 0], AND(SLL16(hv, 4), B8(0x30)));
                    c[4 * h + 1] = OR(c[4 * h + 1], AND(SLL16(hv, 2), B8(0x30)));
                    c[4 * h + 2] = OR(c[4 * h + 2], AND(hv, B8(0x30)));
                    c[4 * h + 3] = OR(c[4 * h + 3], AND(SRL16(hv, 2), B8(0x30)));
                }
            }
#if W == 8 && VNNI == 0
            VI ws[8];
#define WS(v) ws[v]
            if (q8sign)
                PQ_UNROLL
                for (int v = 0; v < 8; v++) {
                    ws[v] = _mm256_xor_si256(c[v], B8(0x80));
                    c[v] = _mm256_sign_epi8(ws[v], ws[v]);
                }
#else
#define WS(v) c[v]
#endif
            VF fa = fd, fb = fd, fmj = fm;
            if (T == AK_Q4_K || T == AK_Q5_K) {
                fa = MUL(fd, U8F(SC + 16 * j + H));
                fmj = MUL(fm, U8F(MN + 16 * j + H));
            } else if (T == AK_Q6_K) {
                fa = MUL(fd, I8F(SC + 32 * j + H));
                fb = MUL(fd, I8F(SC + 32 * j + 16 + H));
            }
            PQ_UNROLL
            for (int i = 0; i < NR; i++) {
                const uint8_t *xr = xa + (size_t)i * xs;
                const int8_t *q = (const int8_t *)xr + 32 * b;
                const int32_t *x16 = AK_PQ_X16(xr, K) + 2 * b;
                const VF dx = PS1(AK_PQ_XD(xr, K)[b]);
                if (T == AK_Q6_K) {
                    VI ia = SLL32(I32(x16[0]), 5), ib = SLL32(I32(x16[1]), 5);
                    PQ_UNROLL
                    for (int v = 0; v < 4; v++) ia = DPB(ia, c[v], q + 4 * v);
                    PQ_UNROLL
                    for (int v = 4; v < 8; v++) ib = DPB(ib, c[v], q + 4 * v);
                    acc[i] = FMA(CVT(ia), MUL(fa, dx), acc[i]);
                    if (S) acc2[i] = FMA(CVT(ib), MUL(fb, dx), acc2[i]);
                    else acc[i] = FMA(CVT(ib), MUL(fb, dx), acc[i]);
                    continue;
                }
                VI ia = I32(0), ib = I32(0);
                if (L.off && !q8sign) ia = SLL32(I32(AK_PQ_X32(xr, K)[b]), __builtin_ctz(L.off));
                else if (T == AK_MLX_Q8 && q8sign) ia = SLL32(I32(-AK_PQ_X32(xr, K)[b]), 7);
                PQ_UNROLL
                for (int v = 0; v < 8; v++) {
                    if (S && (v & 1)) ib = F(step)(q8sign, ib, c[v], WS(v), q + 4 * v);
                    else ia = F(step)(q8sign, ia, c[v], WS(v), q + 4 * v);
                }
                if (S) ia = ADDI(ia, ib);
                acc[i] = FMA(CVT(ia), MUL(fa, dx), acc[i]);
                VF *am = S ? &acc2[i] : &acc[i];
                if (kt) *am = FNMA(fmj, PS1(AK_PQ_XS(xr, K)[b]), *am);
                else if (L.m >= 0) *am = FMA(fm, PS1(AK_PQ_XS(xr, K)[b]), *am);
            }
        }
    }
    PQ_UNROLL
    for (int i = 0; i < NR; i++) STF(out + 16 * i + H, S ? _ADDPS(acc[i], acc2[i]) : acc[i]);
}

/* nr rows as blocks of 8, 4, 2 and 1 (fewer instances to compile); gemv: each row summed
 * as a one-row GEMV (S), in blocks of 4 where the registers hold their two accumulators
 * each (AVX-512), else of 2: a speculative check's rows share one decode of the weights. */
#if W == 16
#define PQ_GEMV4(T) for (; i + 4 <= nr; i += 4) F(body)(T, 4, 1, pw, K, xa + i * xs, xs, H, out + 16 * i);
#else
#define PQ_GEMV4(T)
#endif
#define PQ_KERN(T, NAME)                                                                            \
    TGT static void F(NAME)(const uint8_t *pw, int64_t K, const uint8_t *xa, size_t xs, int nr,    \
                            int rows, float *out, int gemv) {                                       \
        for (int H = 0; H < rows; H += W) {                                                         \
            int i = 0;                                                                              \
            if (gemv) {                                                                             \
                PQ_GEMV4(T)                                                                         \
                for (; i + 2 <= nr; i += 2) F(body)(T, 2, 1, pw, K, xa + i * xs, xs, H, out + 16 * i); \
                if (i < nr) F(body)(T, 1, 1, pw, K, xa + i * xs, xs, H, out + 16 * i);              \
                continue;                                                                           \
            }                                                                                       \
            for (; i + 8 <= nr; i += 8) F(body)(T, 8, 0, pw, K, xa + i * xs, xs, H, out + 16 * i);  \
            if (i + 4 <= nr) { F(body)(T, 4, 0, pw, K, xa + i * xs, xs, H, out + 16 * i); i += 4; } \
            if (i + 2 <= nr) { F(body)(T, 2, 0, pw, K, xa + i * xs, xs, H, out + 16 * i); i += 2; } \
            if (i < nr) F(body)(T, 1, 0, pw, K, xa + i * xs, xs, H, out + 16 * i);                  \
        }                                                                                           \
    }

PQ_KERN(AK_Q4_0, pq_q4_0)
PQ_KERN(AK_Q4_1, pq_q4_1)
PQ_KERN(AK_Q5_0, pq_q5_0)
PQ_KERN(AK_Q5_1, pq_q5_1)
PQ_KERN(AK_Q8_0, pq_q8_0)
PQ_KERN(AK_Q4_K, pq_q4_k)
PQ_KERN(AK_Q5_K, pq_q5_k)
PQ_KERN(AK_Q6_K, pq_q6_k)
PQ_KERN(AK_MLX_Q6, pq_mlx_q6)
PQ_KERN(AK_MLX_Q8, pq_mlx_q8)

/* MLX 2- and 3-bit panels are Q4_1's layout and arithmetic */
const ak_pq_kern F(ak_pq)[AK_DTYPE_COUNT] = {
    [AK_Q4_0] = F(pq_q4_0), [AK_Q4_1] = F(pq_q4_1), [AK_Q5_0] = F(pq_q5_0), [AK_Q5_1] = F(pq_q5_1),
    [AK_Q8_0] = F(pq_q8_0), [AK_Q4_K] = F(pq_q4_k), [AK_Q5_K] = F(pq_q5_k), [AK_Q6_K] = F(pq_q6_k),
    [AK_MLX_Q2] = F(pq_q4_1), [AK_MLX_Q3] = F(pq_q4_1), [AK_MLX_Q6] = F(pq_mlx_q6), [AK_MLX_Q8] = F(pq_mlx_q8),
};

#if W == 8 && VNNI == 0
/* Quantize one activation row (panel_q.h); matches the scalar quantizer bit for bit:
 * x * (1/d) rounded to nearest even. */
TGT void ak_pq_quant_avx2(const float *x, int64_t K, uint8_t *row) {
    for (int64_t b = 0; b < K / 32; b++, x += 32) {
        int sm[2];
        __m256i c[4];
        float d = ak_q32_avx2(x, (int8_t *)row + 32 * b, sm, c);
        ak_pq_meta(row, K, b, d, sm);
    }
}
#endif

#undef VI
#undef VF
#undef LDI
#undef AND
#undef OR
#undef SRL16
#undef SLL16
#undef B8
#undef I32
#undef ADDI
#undef SLL32
#undef CVT
#undef FMA
#undef FNMA
#undef MUL
#undef _ADDPS
#undef PS1
#undef ZF
#undef PH
#undef U8F
#undef I8F
#undef DPB
#undef HIBIT
#undef STF
#undef WS
#undef PQ_UNROLL
#undef PQ_GEMV4
#undef PQ_KERN
#undef F
#undef CAT2
#undef CAT2_
