/* MLX 32-value block types (AK_MLX_Q2..Q8; Q4_1 for 4 bits): traits, a hand-built block, repacking
 * random MLX rows for every bits x group x scale type: the blocks must dequantize to
 * exactly what ak_mlx_dequant_row gives for the original layout when scales are f16 or
 * bf16 (in f16 range), and to what it gives with f16-rounded scales when they are f32
 * (so within f16 rounding of the original). Inputs at odd addresses; bad parameters
 * and scales f16 cannot hold are rejected; the CPU dot product has an entry. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "core/mlx.h"
#include "backend/cpu/cpu.h"
#include "test_util.h"

static const int BITS[] = {2, 3, 4, 6, 8}, GROUPS[] = {32, 64, 128};

static void test_traits(void) {
    for (int i = 0; i < 5; i++) {
        int b = BITS[i], t = ak_mlx_dtype(b);
        /* 4 bits: Q4_1, the same block with its codes reordered */
        CHECK(t >= 0 && (b == 4 ? t == AK_Q4_1 : ak_dtype_info[t].mlx_bits == b && ak_dtype_info[t].ggml_type == -1) &&
              ak_dtype_info[t].block == 32 && ak_dtype_info[t].block_bytes == 4 + 4 * b &&
              ak_dtype_info[t].block_bytes == ak_mlx_block_bytes(b) && ak_dtype_info[t].dequant, "traits of %d bits", b);
        CHECK(ak_dtype_row_bytes((ak_dtype)t, 128) == (size_t)(4 * (4 + 4 * b)), "row bytes");
        CHECK(ak_cpu_dot((ak_dtype)t) != NULL, "a CPU dot product for MLX %d bits", b);
    }
    CHECK(ak_mlx_dtype(5) < 0 && ak_mlx_block_bytes(5) == 0 && ak_mlx_dtype(1) < 0, "no 5-bit block type");
}

/* 3-bit codes k % 8 at scale 0.5, bias -1 (f16 0x3800, 0xBC00). */
static void test_hand_block(void) {
    uint8_t blk[16] = {0x00, 0x38, 0x00, 0xBC};
    for (int k = 0; k < 32; k++)
        for (int j = 0; j < 3; j++)
            if (((k % 8) >> j) & 1) blk[4 + (3 * k + j) / 8] |= (uint8_t)(1u << ((3 * k + j) % 8));
    float out[32];
    ak_dtype_info[AK_MLX_Q3].dequant(blk, out, 32);
    for (int k = 0; k < 32; k++) CHECK(out[k] == 0.5f * (float)(k % 8) - 1.0f, "3-bit value %d: %g", k, out[k]);
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

/* A random scale or bias of the given type; bf16 values stay where f16 is exact. */
static void rand_sb(uint64_t *rng, ak_dtype t, uint8_t *p, bool scale) {
    float v = ak_rand_f(rng) * (scale ? 0.05f : 1.0f);
    if (scale && ak_rand_u32(rng) % 8 == 0) v = 0;          /* MLX stores 0 scales for constant groups */
    if (t == AK_F16) put16(p, ak_f32_to_f16(v));
    else if (t == AK_BF16) {
        uint16_t h = ak_f32_to_bf16(v);
        if (fabsf(ak_bf16_to_f32(h)) < 6.2e-5f) h = 0;     /* below f16's normal range: not the exact case */
        put16(p, h);
    } else memcpy(p, &v, 4);
}

static void test_repack(void) {
    uint64_t rng = 1234;
    const ak_dtype sbt[] = {AK_F16, AK_BF16, AK_F32};
    int cases = 0;
    for (int bi = 0; bi < 5; bi++)
        for (int gi = 0; gi < 3; gi++)
            for (int si = 0; si < 3; si++) {
                int bits = BITS[bi], group = GROUPS[gi];
                ak_dtype t = sbt[si];
                int64_t n = 4 * 128;
                size_t wbytes = (size_t)n * (size_t)bits / 8, ng = (size_t)(n / group), sb = t == AK_F32 ? 4 : 2;
                /* +1: every input at an odd address */
                uint8_t *w = malloc(wbytes + 1), *s = malloc(ng * sb + 1), *c = malloc(ng * sb + 1);
                uint8_t *s16 = malloc(ng * 2), *c16 = malloc(ng * 2);
                uint8_t *blocks = malloc((size_t)n / 32 * (size_t)ak_mlx_block_bytes(bits) + 1);
                for (size_t i = 0; i < wbytes; i++) w[1 + i] = (uint8_t)ak_rand_u32(&rng);
                for (size_t g = 0; g < ng; g++) {
                    rand_sb(&rng, t, s + 1 + g * sb, true);
                    rand_sb(&rng, t, c + 1 + g * sb, false);
                    put16(s16 + 2 * g, ak_f32_to_f16(ak_mlx_sb_at(s + 1, t, (int64_t)g)));
                    put16(c16 + 2 * g, ak_f32_to_f16(ak_mlx_sb_at(c + 1, t, (int64_t)g)));
                }
                float *ref = malloc(sizeof(float) * (size_t)n), *ref16 = malloc(sizeof(float) * (size_t)n);
                float *out = malloc(sizeof(float) * (size_t)n);
                uint32_t *words = malloc(wbytes);
                memcpy(words, w + 1, wbytes); /* ak_mlx_dequant_row takes aligned words */
                bool ok = ak_mlx_repack_row(bits, group, w + 1, s + 1, c + 1, t, blocks + 1, n);
                CHECK(ok, "repack %d bits group %d %s", bits, group, ak_dtype_info[t].name);
                ak_mlx_dequant_row(bits, group, words, s + 1, c + 1, t, ref, n);
                ak_mlx_dequant_row(bits, group, words, s16, c16, AK_F16, ref16, n);
                ak_dtype_info[ak_mlx_dtype(bits)].dequant(blocks + 1, out, n);
                const float *want = t == AK_F32 ? ref16 : ref;
                int64_t k = 0;
                while (ok && k < n && !memcmp(&out[k], &want[k], 4)) k++;
                CHECK(ok && k == n, "%d bits group %d %s: first difference at %lld (%g vs %g)", bits, group,
                      ak_dtype_info[t].name, (long long)k, k < n ? out[k] : 0.f, k < n ? want[k] : 0.f);
                /* against the original f32 scales: f16 rounding of scale and bias */
                double worst = 0;
                for (k = 0; k < n; k++) {
                    float sv = ak_mlx_sb_at(s + 1, t, k / group), cv = ak_mlx_sb_at(c + 1, t, k / group);
                    double q = (double)ak_mlx_code(bits, words, k);
                    double bound = (fabs(sv) * q + fabs(cv)) * (1.0 / 2048 + 1e-6) + 1e-7;
                    double e = fabs((double)out[k] - ref[k]) / bound;
                    if (e > worst) worst = e;
                }
                CHECK(worst <= 1.0, "%d bits %s: beyond f16 rounding (%.3g of the bound)", bits, ak_dtype_info[t].name, worst);
                /* the dot product of the block type agrees with the reference */
                float x[512], scratch[512];
                for (int i = 0; i < 512; i++) x[i] = ak_rand_f(&rng);
                ak_dtype bt = (ak_dtype)ak_mlx_dtype(bits);
                float d0 = ak_dot_ref(bt, n, blocks + 1, x, scratch), d1 = ak_cpu_dot(bt)(n, blocks + 1, x, scratch);
                CHECK(fabsf(d0 - d1) <= 1e-4f * (1 + fabsf(d0)), "dot %d bits: %g vs %g", bits, d0, d1);
                cases++;
                free(w); free(s); free(c); free(s16); free(c16); free(blocks); free(ref); free(ref16); free(out); free(words);
            }
    printf("mlx blocks: %d bits x group x scale-type cases\n", cases);
}

static void test_reject(void) {
    uint8_t w[64] = {0}, blk[4 * 36];
    float s = 1e6f, c = 0.f, nan = NAN, ok = 0.5f;
    CHECK(!ak_mlx_repack_row(4, 32, w, &s, &c, AK_F32, blk, 32), "scale past f16 range");
    CHECK(!ak_mlx_repack_row(4, 32, w, &ok, &nan, AK_F32, blk, 32), "NaN bias");
    uint8_t inf16[2] = {0x00, 0x7c}, one16[2] = {0x00, 0x3c};
    CHECK(!ak_mlx_repack_row(4, 32, w, inf16, one16, AK_F16, blk, 32), "inf f16 scale");
    CHECK(!ak_mlx_repack_row(5, 32, w, &ok, &c, AK_F32, blk, 32), "5 bits: no block type");
    CHECK(!ak_mlx_repack_row(4, 48, w, &ok, &c, AK_F32, blk, 48), "group 48");
    CHECK(!ak_mlx_repack_row(4, 64, w, &ok, &c, AK_F32, blk, 32), "n not a multiple of the group");
    CHECK(!ak_mlx_repack_row(4, 32, w, &ok, &c, AK_Q8_0, blk, 32), "scale type");
    CHECK(ak_mlx_repack_row(4, 32, w, &ok, &c, AK_F32, blk, 32), "a plain row");
}

int main(void) {
    test_traits();
    test_hand_block();
    test_repack();
    test_reject();
    return ak_test_done();
}
