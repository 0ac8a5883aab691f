/* MLX affine reference dequantizer: a hand-packed 3-bit row, parameter checks, and bit-
 * exact agreement with the independent NumPy model in tools/gen_quant_vectors.py for
 * every bits x group size x scale type. Vectors: argv[1] or AKUNU_QUANT_VECTORS. */
#include <stdlib.h>
#include <string.h>
#include "core/mlx.h"
#include "test_util.h"

/* Codes k % 8 packed at 3 bits: a 24-bit pattern 0xFAC688 repeated, so 32 codes fill
 * 3 words and codes 10, 21 straddle word boundaries. */
static void test_hand_packed(void) {
    const uint32_t w[3] = {0x88FAC688u, 0xC688FAC6u, 0xFAC688FAu};
    for (int k = 0; k < 32; k++) CHECK(ak_mlx_code(3, w, k) == (uint32_t)(k % 8), "3-bit code %d", k);
    /* scale 0.5, bias -1 as f16 (0x3800, 0xBC00) */
    const uint8_t s[2] = {0x00, 0x38}, b[2] = {0x00, 0xBC};
    float out[32];
    CHECK(ak_mlx_dequant_row(3, 32, w, s, b, AK_F16, out, 32), "dequant");
    for (int k = 0; k < 32; k++) CHECK(out[k] == 0.5f * (float)(k % 8) - 1.0f, "value %d: %g", k, out[k]);
    /* 6 bits: codes 0..15 need 96 bits; code 5 straddles words 0 and 1 */
    uint32_t w6[3] = {0, 0, 0};
    for (int k = 0; k < 16; k++)
        for (int j = 0; j < 6; j++)
            if ((k >> j) & 1) w6[(6 * k + j) / 32] |= 1u << ((6 * k + j) % 32);
    for (int k = 0; k < 16; k++) CHECK(ak_mlx_code(6, w6, k) == (uint32_t)k, "6-bit code %d", k);
    /* word 0 holds codes 0..4 and the low 2 bits of code 5 */
    CHECK(w6[0] == 0x440C2040u, "6-bit word 0 = %08x", (unsigned)w6[0]);
}

static void test_params(void) {
    CHECK(ak_mlx_row_words(4, 64) == 8, "4-bit words");
    CHECK(ak_mlx_row_words(3, 64) == 6, "3-bit words");
    CHECK(ak_mlx_row_words(6, 32) == 6, "6-bit words");
    CHECK(ak_mlx_row_words(8, 128) == 32, "8-bit words");
    CHECK(ak_mlx_row_words(7, 32) == 0 && ak_mlx_row_words(3, 10) == 0, "bad bits / length");
    CHECK(!ak_mlx_params_ok(4, 16) && !ak_mlx_params_ok(1, 64) && ak_mlx_params_ok(2, 128), "params");
    uint32_t w[4] = {0};
    float s = 1, out[32];
    CHECK(!ak_mlx_dequant_row(4, 48, w, &s, &s, AK_F32, out, 32), "group 48 rejected");
    CHECK(!ak_mlx_dequant_row(4, 32, w, &s, &s, AK_Q8_0, out, 32), "scale type rejected");
    CHECK(!ak_mlx_dequant_row(4, 64, w, &s, &s, AK_F32, out, 32), "n not a multiple of group");
}

static uint32_t rd32(const uint8_t *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static void test_vectors(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/mlx_vectors.bin", dir);
    size_t size = 0;
    uint8_t *buf = ak_read_file(path, &size);
    CHECK(buf != NULL, "cannot read %s (run tools/gen_quant_vectors.py)", path);
    if (!buf) return;
    CHECK(size >= 8 && !memcmp(buf, "AKMX", 4) && rd32(buf + 4) == 1, "%s: bad header", path);
    size_t off = 8;
    int records = 0, bad = size < 8, seen[9][129][3];
    memset(seen, 0, sizeof seen);
    while (!bad && off < size) {
        if (size - off < 20) { bad = 1; break; }
        uint32_t bits = rd32(buf + off), group = rd32(buf + off + 4), sbt = rd32(buf + off + 8);
        uint32_t rows = rd32(buf + off + 12), n = rd32(buf + off + 16);
        off += 20;
        size_t words = ak_mlx_row_words((int)bits, n), sb = sbt == 0 ? 4 : 2;
        if (!words || sbt > 2 || !ak_mlx_params_ok((int)bits, (int)group) || n % group) { bad = 1; break; }
        size_t ngroups = n / group, need = rows * (words * 4 + 2 * ngroups * sb + (size_t)n * 4);
        if (size - off < need) { bad = 1; break; }
        const uint8_t *pw = buf + off, *ps = pw + rows * words * 4, *pb = ps + rows * ngroups * sb;
        const uint8_t *ref = pb + rows * ngroups * sb;
        off += need;
        uint32_t *w = malloc(words * 4);
        float *out = malloc((size_t)n * 4);
        ak_dtype t = sbt == 0 ? AK_F32 : sbt == 1 ? AK_F16 : AK_BF16;
        for (uint32_t r = 0; r < rows; r++) {
            for (size_t k = 0; k < words; k++) w[k] = rd32(pw + (r * words + k) * 4);
            bool ok = ak_mlx_dequant_row((int)bits, (int)group, w, ps + r * ngroups * sb,
                                         pb + r * ngroups * sb, t, out, n);
            uint32_t i = 0;
            while (ok && i < n && rd32((const uint8_t *)(out + i)) == rd32(ref + ((size_t)r * n + i) * 4)) i++;
            CHECK(ok && i == n, "bits %u group %u %s row %u: first difference at %u", bits, group,
                  ak_dtype_info[t].name, r, i);
        }
        free(w);
        free(out);
        seen[bits][group][sbt]++;
        records++;
    }
    CHECK(!bad, "%s: malformed after %d records", path, records);
    const int bit_set[] = {2, 3, 4, 6, 8}, groups[] = {32, 64, 128};
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 3; k++)
                CHECK(seen[bit_set[i]][groups[j]][k], "no vectors for bits %d group %d sb %d", bit_set[i],
                      groups[j], k);
    printf("mlx: %d records\n", records);
    free(buf);
}

int main(int argc, char **argv) {
    test_hand_packed();
    test_params();
    const char *dir = argc > 1 ? argv[1] : getenv("AKUNU_QUANT_VECTORS");
    CHECK(dir != NULL, "vector folder: pass it as argv[1] or set AKUNU_QUANT_VECTORS");
    if (dir) test_vectors(dir);
    return ak_test_done();
}
