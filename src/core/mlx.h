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

#endif
