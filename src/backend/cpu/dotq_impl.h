/* Int8-activation kernels, written once and compiled per instruction set by dotq_x86.c:
 * it defines TGT (the target attribute), SFX (the name suffix) and VNNI (0: AVX2
 * maddubs, 1: AVX512-VNNI on 256-bit vectors, 2: AVX-VNNI) and includes this file.
 * Each 32-value block gives an exact int32 sum of weight codes times x codes; the block
 * scales multiply its float conversion. Layouts: core/quants.c. */
#define CAT2_(a, b) a##_##b
#define CAT2(a, b) CAT2_(a, b)
#define F(name) CAT2(name, SFX)

#if VNNI == 1
#define DPBUSD(acc, u, s) _mm256_dpbusd_epi32(acc, u, s)
#elif VNNI == 2
#define DPBUSD(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#endif

TGT static inline float F(f16_at)(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

TGT static inline float F(hsum)(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

/* Sums of u*s over each 4 bytes, u unsigned (at most 128), s signed: 8 x int32. */
TGT static inline __m256i F(idot_u)(__m256i u, __m256i s) {
#if VNNI
    return DPBUSD(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

/* acc + sums of u*s over each 4 bytes. */
TGT static inline __m256i F(idot_acc)(__m256i acc, __m256i u, __m256i s) {
#if VNNI
    return DPBUSD(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

/* Signed times signed: |w| times x with w's sign (w = -128 is not a ggml code). */
TGT static inline __m256i F(idot_s)(__m256i w, __m256i x) {
    return F(idot_u)(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

/* 16 bytes of nibbles -> 32 codes: low nibbles are values 0-15, high nibbles 16-31. */
TGT static inline __m256i F(nib32)(const uint8_t *qs) {
    __m128i v = _mm_loadu_si128((const __m128i *)qs);
    __m256i t = _mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1);
    return _mm256_and_si256(t, _mm256_set1_epi8(0xF));
}

/* Bit i of the 32-bit word at p -> 0x10 in byte i (the fifth bit of a Q5 code). */
TGT static inline __m256i F(bit4)(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return ak_q5_bit4_avx2(v);
}

/* ---- GEMV: one weight row against quantized x ----
 * Per block: acc += float(isum) * d * dx. Offset codes (Q4_0: -8, Q5_0: -16) start
 * isum at OFF/8 * m8 (exact, in int32); the min of Q4_1/Q5_1 adds m * dx * sum(q_x)
 * as a scalar. Two blocks per step, two accumulators. */
#define DOTQ32(NAME, BYTES, CODES, SIGNED, MIN_AT, OFF)                                     \
    TGT static inline __m256 F(NAME##_blk)(const uint8_t *p, const ak_xq *x, int64_t b,    \
                                           __m256 acc, float *corr) {                       \
        __m256i xv = _mm256_loadu_si256((const __m256i *)(x->q + 32 * b));                  \
        __m256i u = CODES, is;                                                              \
        if (SIGNED) is = F(idot_s)(u, xv);                                                  \
        else if (OFF) {                                                                     \
            __m256i m = _mm256_loadu_si256((const __m256i *)(x->m8 + 8 * b));               \
            if ((OFF) == 16) m = _mm256_add_epi32(m, m);                                     \
            is = F(idot_acc)(m, u, xv);                                                     \
        } else is = F(idot_u)(u, xv);                                                       \
        float d = F(f16_at)(p);                                                             \
        if ((MIN_AT) > 0) *corr += F(f16_at)(p + (MIN_AT)) * (x->s[2 * b] + x->s[2 * b + 1]); \
        return _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(d * x->d[b]), acc);  \
    }                                                                                       \
    TGT static float F(NAME)(int64_t K, const void *w, const ak_xq *x) {                    \
        const uint8_t *p = w;                                                               \
        __m256 a0 = _mm256_setzero_ps(), a1 = a0;                                           \
        float c0 = 0, c1 = 0;                                                               \
        int64_t nb = K / 32, b = 0;                                                         \
        for (; b + 2 <= nb; b += 2, p += 2 * (BYTES)) {                                     \
            a0 = F(NAME##_blk)(p, x, b, a0, &c0);                                           \
            a1 = F(NAME##_blk)(p + (BYTES), x, b + 1, a1, &c1);                             \
        }                                                                                   \
        if (b < nb) a0 = F(NAME##_blk)(p, x, b, a0, &c0);                                   \
        return F(hsum)(_mm256_add_ps(a0, a1)) + (c0 + c1);                                  \
    }

DOTQ32(dotq_q4_0, 18, F(nib32)(p + 2), 0, 0, 8)
DOTQ32(dotq_q4_1, 20, F(nib32)(p + 4), 0, 2, 0)
DOTQ32(dotq_q5_0, 22, _mm256_or_si256(F(nib32)(p + 6), F(bit4)(p + 2)), 0, 0, 16)
DOTQ32(dotq_q5_1, 24, _mm256_or_si256(F(nib32)(p + 8), F(bit4)(p + 4)), 0, 2, 0)
DOTQ32(dotq_q8_0, 34, _mm256_loadu_si256((const __m256i *)(p + 2)), 1, 0, 0)

/* ---- K-quant GEMV (256-value super-blocks; every 32-value block lines up with one
 * block of x) ---- Per block: acc += float(isum) * (d * sc * dx), the 6-bit scale and
 * min of Q4_K/Q5_K per 32 values, the int8 scale of Q6_K per 16 (lanes 0-3 / 4-7 of the
 * int32 sums). Mins: dmin * m * (sum of d q of x over the block), one vector per row.
 * Q6_K codes are unsigned (0-63) with the -32 offset started as 4 * m8. */

/* The 8 scales and 8 mins of a Q4_K/Q5_K super-block (12 bytes at q) as floats:
 * j < 4: q[j] & 63, q[j+4] & 63; j >= 4: low nibble / high nibble of q[j+4] with the
 * top two bits of q[j-4] / q[j] above them. */
TGT static inline void F(k4_scales)(const uint8_t *q, __m256 *sc, __m256 *mn) {
    uint32_t a, b, c;
    memcpy(&a, q, 4);
    memcpy(&b, q + 4, 4);
    memcpy(&c, q + 8, 4);
    uint32_t s_lo = a & 0x3F3F3F3Fu, m_lo = b & 0x3F3F3F3Fu;
    uint32_t s_hi = (c & 0x0F0F0F0Fu) | ((a >> 6) & 0x03030303u) << 4;
    uint32_t m_hi = ((c >> 4) & 0x0F0F0F0Fu) | ((b >> 6) & 0x03030303u) << 4;
    __m128i sv = _mm_set_epi32(0, 0, (int)s_hi, (int)s_lo), mv = _mm_set_epi32(0, 0, (int)m_hi, (int)m_lo);
    *sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sv));
    *mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mv));
}

/* The 8 per-block sums of d q of x for blocks 8 sb .. 8 sb + 7 (s holds two per block). */
TGT static inline __m256 F(xsum8)(const float *s) {
    __m256 h = _mm256_hadd_ps(_mm256_loadu_ps(s), _mm256_loadu_ps(s + 8));
    return _mm256_permutevar8x32_ps(h, _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
}

/* Broadcast lane j of v (j a constant after unrolling). */
#define LANE(v, j) _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(j))

#define DOTQ_K4(NAME, BYTES, FIVE)                                                             \
    TGT static float F(NAME)(int64_t K, const void *w, const ak_xq *x) {                       \
        const uint8_t *p = w;                                                                  \
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, am = a0;                                      \
        for (int64_t sb = 0; sb < K / 256; sb++, p += (BYTES)) {                                \
            __m256 sc, mn;                                                                     \
            F(k4_scales)(p + 4, &sc, &mn);                                                     \
            const float *dx = x->d + 8 * sb;                                                   \
            __m256 fac = _mm256_mul_ps(_mm256_mul_ps(sc, _mm256_set1_ps(F(f16_at)(p))), _mm256_loadu_ps(dx)); \
            am = _mm256_fmadd_ps(_mm256_mul_ps(mn, _mm256_set1_ps(F(f16_at)(p + 2))), F(xsum8)(x->s + 16 * sb), am); \
            const int8_t *xq = x->q + 256 * sb;                                                \
            const uint8_t *qs = p + ((FIVE) ? 48 : 16);                                        \
            __m256i qh = (FIVE) ? _mm256_loadu_si256((const __m256i *)(p + 16)) : _mm256_setzero_si256(); \
            const __m256i lo4 = _mm256_set1_epi8(0xF);                                          \
            for (int i = 0; i < 4; i++) {                                                      \
                __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * i));                \
                __m256i u0 = _mm256_and_si256(v, lo4);                                         \
                __m256i u1 = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo4);                   \
                if (FIVE) {                                                                    \
                    const __m256i b0 = _mm256_set1_epi8((char)(1 << (2 * i)));                 \
                    const __m256i b1 = _mm256_set1_epi8((char)(2 << (2 * i)));                 \
                    const __m256i h5 = _mm256_set1_epi8(0x10);                                 \
                    u0 = _mm256_or_si256(u0, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b0), b0), h5)); \
                    u1 = _mm256_or_si256(u1, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1), h5)); \
                }                                                                              \
                __m256i i0 = F(idot_u)(u0, _mm256_loadu_si256((const __m256i *)(xq + 64 * i))); \
                __m256i i1 = F(idot_u)(u1, _mm256_loadu_si256((const __m256i *)(xq + 64 * i + 32))); \
                a0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), LANE(fac, 2 * i), a0);            \
                a1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1), LANE(fac, 2 * i + 1), a1);        \
            }                                                                                  \
        }                                                                                      \
        return F(hsum)(_mm256_add_ps(a0, a1)) - F(hsum)(am);                                   \
    }

DOTQ_K4(dotq_q4_k, 144, 0)
DOTQ_K4(dotq_q5_k, 176, 1)

/* Q6_K: ql[128], qh[64], scales int8[16], d. Per half of 128 values: blocks 0-3 take
 * the low nibbles of ql[0:32], ql[32:64], then the high nibbles, with bit pairs 0-1,
 * 2-3, 4-5, 6-7 of qh[0:32] as bits 4-5. */
TGT static float F(dotq_q6_k)(int64_t K, const void *w, const ak_xq *x) {
    const uint8_t *p = w;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    const __m256i lo4 = _mm256_set1_epi8(0xF), hi2 = _mm256_set1_epi8(0x30);
    for (int64_t sb = 0; sb < K / 256; sb++, p += 210) {
        __m128i s16 = _mm_loadu_si128((const __m128i *)(p + 192));
        __m256 d = _mm256_set1_ps(F(f16_at)(p + 208));
        __m256 sc0 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s16)));
        __m256 sc1 = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(s16, 8))));
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = p + 64 * h, *qhp = p + 128 + 32 * h;
            int64_t b = 8 * sb + 4 * h;
            const int8_t *xq = x->q + 32 * b;
            __m256 sc = h ? sc1 : sc0;
            __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)qhp);
            __m256i u[4] = {
                _mm256_or_si256(_mm256_and_si256(l0, lo4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), hi2)),
                _mm256_or_si256(_mm256_and_si256(l1, lo4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), hi2)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), lo4), _mm256_and_si256(qh, hi2)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), lo4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), hi2)),
            };
            for (int j = 0; j < 4; j++) {
                __m256i m = _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(x->m8 + 8 * (b + j))), 2);
                __m256i is = F(idot_acc)(m, u[j], _mm256_loadu_si256((const __m256i *)(xq + 32 * j)));
                __m256 f = _mm256_permutevar8x32_ps(sc, _mm256_setr_epi32(2 * j, 2 * j, 2 * j, 2 * j, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1));
                f = _mm256_mul_ps(f, _mm256_broadcast_ss(x->d + b + j));
                if (j & 1) a1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), f, a1);
                else a0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), f, a0);
            }
        }
    }
    return F(hsum)(_mm256_add_ps(a0, a1));
}
#undef LANE

const ak_dotq_fn F(ak_dotq)[AK_DTYPE_COUNT] = {
    [AK_Q4_0] = F(dotq_q4_0), [AK_Q4_1] = F(dotq_q4_1), [AK_Q5_0] = F(dotq_q5_0),
    [AK_Q5_1] = F(dotq_q5_1), [AK_Q8_0] = F(dotq_q8_0), [AK_Q4_K] = F(dotq_q4_k),
    [AK_Q5_K] = F(dotq_q5_k), [AK_Q6_K] = F(dotq_q6_k),
};

/* ---- GEMM tile: MR unpacked weight rows x NR quantized activation rows ----
 * VNNI: dpbusd(nc, x ^ 0x80, q) = sum (x + 128) q - 128 sum q = sum x q, exactly.
 * AVX2: maddubs(|q|, x with q's sign), then pairs summed by madd. */
TGT static inline float F(fdot)(int64_t n, const float *a, const float *b) {
    __m256 s = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) s = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s);
    float r = F(hsum)(s);
    for (; i < n; i++) r += a[i] * b[i];
    return r;
}

#define TILE(MR_, NR_)                                                                          \
    TGT static void F(tile_##MR_##x##NR_)(int64_t K, const ak_prow *w, const ak_xq *x, float *out, \
                                          int ldo) {                                            \
        __m256 acc[MR_][NR_];                                                                   \
        for (int r = 0; r < MR_; r++)                                                           \
            for (int c = 0; c < NR_; c++) acc[r][c] = _mm256_setzero_ps();                      \
        for (int64_t b = 0; b < K / 32; b++) {                                                  \
            __m256i xv[NR_];                                                                    \
            __m256 dx[NR_];                                                                     \
            for (int c = 0; c < NR_; c++) {                                                     \
                xv[c] = _mm256_loadu_si256((const __m256i *)(x[c].q + 32 * b));                 \
                if (VNNI) xv[c] = _mm256_xor_si256(xv[c], _mm256_set1_epi8((char)0x80));        \
                dx[c] = _mm256_broadcast_ss(x[c].d + b);                                        \
            }                                                                                   \
            for (int r = 0; r < MR_; r++) {                                                     \
                __m256i qv = _mm256_loadu_si256((const __m256i *)(w[r].q + 32 * b));            \
                __m256 av = _mm256_loadu_ps(w[r].a + 8 * b);                                    \
                TILE_PREP_ROW                                                                   \
                for (int c = 0; c < NR_; c++) {                                                 \
                    __m256i is = TILE_IDOT;                                                     \
                    acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_mul_ps(av, dx[c]), acc[r][c]); \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
        for (int r = 0; r < MR_; r++)                                                           \
            for (int c = 0; c < NR_; c++)                                                       \
                out[r * ldo + c] = F(hsum)(acc[r][c]) + F(fdot)(K / 16, w[r].b, x[c].s);        \
    }

#if VNNI
#define TILE_PREP_ROW __m256i nc = _mm256_loadu_si256((const __m256i *)(w[r].nc + 8 * b));
#define TILE_IDOT DPBUSD(nc, xv[c], qv)
#else
#define TILE_PREP_ROW __m256i aq = _mm256_sign_epi8(qv, qv);
#define TILE_IDOT _mm256_madd_epi16(_mm256_maddubs_epi16(aq, _mm256_sign_epi8(xv[c], qv)), _mm256_set1_epi16(1))
#endif

TILE(1, 1)
#if VNNI == 1
TILE(4, 4)
#define TMR 4
#define TNR 4
#else
TILE(4, 2)
#define TMR 4
#define TNR 2
#endif

TGT void F(ak_gemm_q8_tile)(int64_t K, const ak_prow *w, int mr, const ak_xq *x, int nr, float *out, int ldo) {
    if (mr == TMR && nr == TNR) {
#if VNNI == 1
        F(tile_4x4)(K, w, x, out, ldo);
#else
        F(tile_4x2)(K, w, x, out, ldo);
#endif
        return;
    }
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < nr; c++) F(tile_1x1)(K, w + r, x + c, out + r * ldo + c, ldo);
}

#if VNNI == 0
/* Quantize x per 32 values (see cpu.h); matches ak_xq_quantize_ref bit for bit:
 * x * (1/d) rounded to nearest even. */
TGT void F(ak_xq_quantize)(const float *x, int64_t K, ak_xq *o) {
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < K / 32; b++, x += 32) {
        int sm[2];
        __m256i c[4];
        float d = ak_q32_avx2(x, o->q + 32 * b, sm, c);
        __m256i g4 = _mm256_hadd_epi32(_mm256_hadd_epi32(c[0], c[1]), _mm256_hadd_epi32(c[2], c[3]));
        g4 = _mm256_permutevar8x32_epi32(g4, perm);   /* sums of values 4g..4g+3 */
        _mm256_storeu_si256((__m256i *)(o->m8 + 8 * b), _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(g4, 3)));
        o->d[b] = d;
        o->s[2 * b] = d * (float)sm[0];
        o->s[2 * b + 1] = d * (float)sm[1];
    }
}

TGT void F(ak_xq_dequant)(const float *x, int64_t K, float *xh) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < K / 32; b++, x += 32, xh += 32) {
        __m256 v[4], m = _mm256_setzero_ps();
        for (int i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(x + 8 * i);
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[i]));
        }
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
        float amax = _mm_cvtss_f32(h), d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        __m256 vid = _mm256_set1_ps(id), vd = _mm256_set1_ps(d);
        for (int i = 0; i < 4; i++) {
            __m256 q = _mm256_round_ps(_mm256_mul_ps(v[i], vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            _mm256_storeu_ps(xh + 8 * i, _mm256_mul_ps(vd, q));
        }
    }
}
#endif

#undef TILE_PREP_ROW
#undef TILE_IDOT
#undef TMR
#undef TNR
#undef DPBUSD
#undef F
#undef CAT2
#undef CAT2_
