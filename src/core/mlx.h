/* MLX affine quantization, reference dequantizer. A row of n values is a little-endian
 * bit stream of `bits`-bit unsigned codes (value k at stream bits [k*bits, (k+1)*bits),
 * stream bit b = bit b%32 of word b/32), so 3-, 5- and 6-bit codes straddle words.
 * Each group of `group_size` consecutive values of the row has a scale s and a bias
 * (f32, f16 or bf16); value = s*q + bias, computed in float32 with two roundings. */
#ifndef AK_MLX_H
#define AK_MLX_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/dtype.h"

/* bits in {2,3,4,5,6,8} (MLX's affine set), group_size in {32,64,128}. */
bool ak_mlx_params_ok(int bits, int group_size);
/* uint32 words of one packed row of n values (n*bits/32); 0 if n*bits is not a
 * multiple of 32 or bits is unsupported. */
size_t ak_mlx_row_words(int bits, int64_t n);
/* The `bits`-bit code of value k of a packed row. */
uint32_t ak_mlx_code(int bits, const uint32_t *w, int64_t k);
/* Dequantizes one row: n values (a multiple of group_size) from w (ak_mlx_row_words
 * words) and n/group_size scales and biases of type sb_type (AK_F32, AK_F16 or AK_BF16,
 * read byte-wise as little-endian, so any alignment works). Returns false, writing
 * nothing, on unsupported parameters. */
bool ak_mlx_dequant_row(int bits, int group_size, const uint32_t *w, const void *scales,
                        const void *biases, ak_dtype sb_type, float *dst, int64_t n);
/* Element i of a scale/bias array of type sb_type as float (AK_F32/AK_F16/AK_BF16). */
float ak_mlx_sb_at(const void *p, ak_dtype sb_type, int64_t i);

/* The engine's MLX block types (AK_MLX_Q2/Q3/Q6/Q8), made at load by repacking: 32
 * values per block; bytes 0-1 the f16 scale, 2-3 the f16 bias (little-endian), then
 * 4*bits bytes of codes, an LSB-first bit stream (code i at stream bits [i*bits,
 * (i+1)*bits), stream bit b = bit b%8 of byte b/8); value = scale*q + bias in float32,
 * rounded after each operation. A file's group of 32, 64 or 128 values repeats its scale
 * and bias over its 32-value blocks, so the codes copy over unchanged.
 * 4-bit rows become Q4_1 blocks instead: the same bytes and the same float arithmetic
 * (d*q + m, two roundings), with the codes in Q4_1's order (byte i: values i and i + 16),
 * so they take every backend's Q4_1 kernels.
 * Exactness: with f16 scales and biases the blocks dequantize to exactly the floats
 * ak_mlx_dequant_row gives for the original layout; bf16 ones convert to f16 exactly
 * (f16 holds every bf16 value of magnitude 2^-14 to 65504, and zero), so those are exact
 * too; f32 ones are rounded to f16 (relative error at most 2^-11 each). */
#define AK_MLX_BLOCK 32
/* Bytes of one block (4 + 4*bits); 0 for a bit width without a block type. */
int ak_mlx_block_bytes(int bits);
/* AK_MLX_Q<bits> (AK_Q4_1 for 4); -1 for a bit width without a block type (5). */
int ak_mlx_dtype(int bits);
/* Repacks one row of n values (a multiple of group_size) from MLX's layout, w being the
 * row's packed words as little-endian bytes (any alignment), into n/32 blocks at dst.
 * Returns false on unsupported parameters or a scale or bias that is not finite in f16. */
bool ak_mlx_repack_row(int bits, int group_size, const void *w, const void *scales, const void *biases,
                       ak_dtype sb_type, void *dst, int64_t n);
/* Reference dequantizers of the block types (n a multiple of 32): the traits' dequant. */
void ak_mlx_dequant_q2(const void *src, float *dst, int64_t n);
void ak_mlx_dequant_q3(const void *src, float *dst, int64_t n);
void ak_mlx_dequant_q6(const void *src, float *dst, int64_t n);
void ak_mlx_dequant_q8(const void *src, float *dst, int64_t n);

#endif
