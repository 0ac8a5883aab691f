/* Panels of the ggml block types (private to panel_q.c and panel_q_x86.c).
 *
 * A panel holds AK_PANEL_R = 16 rows, stored group by group: a group is G blocks (one
 * 32-value block, or one 256-value super-block of the K types) chosen so that it spans a
 * whole number of 64-byte lines; a group holds the scales of its blocks, then their code
 * vectors (each 32 values' 4-bit codes followed by their high bits; Q6_K: block 0's
 * sub-scales and codes, then block 1's), so a GEMV reads one forward stream (a jump back
 * to block 1's sub-scales halved Q6_K's rate from memory) and every 64-byte vector load
 * is aligned (the panels are 64-aligned; each field's size is a multiple of 64 bytes). Every field is interleaved across the 16 rows:
 *   codes: per 32 values, vectors of 64 bytes; vector v holds values 4v..4v+3 of all rows
 *     (byte 4r + t = value 4v + t of row r), so one load feeds 16 rows of a 4-value dot;
 *     4-bit codes share bytes: load i (0..3) holds vector i in its low nibbles and
 *     vector i + 4 in its high ones; Q8_0 stores its codes + 128 (unsigned);
 *   fifth bit (Q5): per 32 values 8 x u64, bit 4r + t of word v = bit 4 of that code;
 *   Q6_K (and MLX 6-bit) bits 4-5: per 32 values 2 x 64 bytes, bits 2s..2s+1 of byte
 *     4r + t of load h = bits 4-5 of vector 4h + s;
 *   f16 scales: 16 x f16 (32 bytes), row r at 2r;
 *   byte scales (K types): 16 bytes per sub-scale, row r at r.
 * Every code is unsigned; w = a * (code - off) + b per sub-block with a, b from the scales.
 * Sizes equal the file's (Q4_K +2.8% and Q5_K +2.3% for whole bytes of sub-scales and
 * mins), plus one block per panel where G = 2 and the row has an odd number of blocks.
 *
 * Activations (scratch), one row of K values: int8 codes q[K], then per 32 values
 * d (float) and xs = d * sum q (float), per 16 values -sum q (int32), per 32 values
 * -sum q (int32); rows are padded to 64 bytes. The offsets are powers of two, so an
 * accumulator starts at (-sum q) << log2(off): one broadcast load and one shift. */
#ifndef AK_CPU_PANEL_Q_H
#define AK_CPU_PANEL_Q_H
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"
#include "backend/cpu/panel.h"

/* Offsets in a group: block bi of the group has its codes at codes + bi * cs, sub-block j
 * (32 values) of it at + j * js, with its high bits at hb past the sub-block's codes (so
 * a GEMV reads one sequential stream); scales at base + bi * stride. */
typedef struct {
    int blk;        /* values per block: 32 or 256 */
    int G, gb;      /* blocks per group, bytes per group */
    int codes, cs;  /* codes of block 0, stride of blocks */
    int js;         /* stride of 32-value sub-blocks (K types) */
    int hb;         /* fifth bit (Q5) / bits 4-5 (Q6_K, MLX_Q6) after a sub-block's 4-bit codes; -1: none */
    int d, m;       /* f16 scale d and min / dmin (-1: none), stride 32 */
    int sc, mn, ss; /* byte sub-scales and mins (K types; Q6_K: 16 int8 scales), stride ss */
    int off;        /* code offset: w = a * (code - off) */
} ak_pq_layout;

static const ak_pq_layout ak_pq_layouts[AK_DTYPE_COUNT] = {
    /*          blk G    gb codes   cs   js   hb     d     m    sc    mn   ss off */
    [AK_Q4_0] = {32, 2, 576, 64, 256, 0, -1, 0, -1, -1, -1, 0, 8},
    [AK_Q4_1] = {32, 1, 320, 64, 256, 0, -1, 0, 32, -1, -1, 0, 0},
    [AK_Q5_0] = {32, 2, 704, 64, 320, 0, 256, 0, -1, -1, -1, 0, 16},
    [AK_Q5_1] = {32, 1, 384, 64, 320, 0, 256, 0, 32, -1, -1, 0, 0},
    [AK_Q8_0] = {32, 2, 1088, 64, 512, 0, -1, 0, -1, -1, -1, 0, 128},
    [AK_Q4_K] = {256, 1, 2368, 320, 2048, 256, -1, 0, 32, 64, 192, 128, 0},
    [AK_Q5_K] = {256, 1, 2880, 320, 2560, 320, 256, 0, 32, 64, 192, 128, 0},
    [AK_Q6_K] = {256, 2, 6720, 320, 3328, 384, 256, 0, -1, 64, -1, 3328, 32},
    /* MLX blocks (core/mlx.h, w = s * code + bias): 2- and 3-bit codes in Q4_1's layout,
     * 6-bit ones with Q6_K's bits 4-5, 8-bit ones as Q8_0's codes; unsigned, offset 0 */
    [AK_MLX_Q2] = {32, 1, 320, 64, 256, 0, -1, 0, 32, -1, -1, 0, 0},
    [AK_MLX_Q3] = {32, 1, 320, 64, 256, 0, -1, 0, 32, -1, -1, 0, 0},
    [AK_MLX_Q6] = {32, 1, 448, 64, 384, 0, 256, 0, 32, -1, -1, 0, 0},
    [AK_MLX_Q8] = {32, 1, 576, 64, 512, 0, -1, 0, 32, -1, -1, 0, 0},
};

static inline size_t ak_pq_xrow(int64_t K) { return ((size_t)K + (size_t)K / 2 + (size_t)K / 8 + 63) & ~(size_t)63; }
#define AK_PQ_XD(row, K) ((float *)((uint8_t *)(row) + (K)))
#define AK_PQ_XS(row, K) ((float *)((uint8_t *)(row) + (K) + (K) / 8))
#define AK_PQ_X16(row, K) ((int32_t *)((uint8_t *)(row) + (K) + (K) / 4))
#define AK_PQ_X32(row, K) ((int32_t *)((uint8_t *)(row) + (K) + (K) / 2))
/* Block b's scale d and code sums s (codes 0-15, 16-31) into the row's metadata. */
static inline void ak_pq_meta(uint8_t *row, int64_t K, int64_t b, float d, const int s[2]) {
    AK_PQ_XD(row, K)[b] = d;
    AK_PQ_XS(row, K)[b] = d * (float)(s[0] + s[1]);
    AK_PQ_X16(row, K)[2 * b] = -s[0];
    AK_PQ_X16(row, K)[2 * b + 1] = -s[1];
    AK_PQ_X32(row, K)[b] = -(s[0] + s[1]);
}

#define AK_PQ_NR 8   /* activation rows per kernel call */

/* One panel against nr (1..AK_PQ_NR) activation rows (xa, stride xs): out[16 i + r] for
 * rows r < rows (the panel's rows below N; others may be skipped or written). gemv: nr <= 2,
 * each row summed as a one-row GEMV sums it (ak_panel_q_mm_pre). */
typedef void (*ak_pq_kern)(const uint8_t *pw, int64_t K, const uint8_t *xa, size_t xs, int nr, int rows, float *out,
                           int gemv);

#if defined(__x86_64__)
extern const ak_pq_kern ak_pq_vnni512[AK_DTYPE_COUNT];
extern const ak_pq_kern ak_pq_avx2[AK_DTYPE_COUNT];
extern const ak_pq_kern ak_pq_avxvnni[AK_DTYPE_COUNT];
void ak_pq_quant_avx2(const float *x, int64_t K, uint8_t *row);
#endif

#endif
