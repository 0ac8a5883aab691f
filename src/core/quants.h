/* Reference dequantizers for the ggml block formats other than Q8_0.
 * Until a format is implemented its macro is NULL and loading a tensor of it fails cleanly. */
#ifndef AK_QUANTS_H
#define AK_QUANTS_H
#define AK_DQ_Q4_0 NULL
#define AK_DQ_Q4_1 NULL
#define AK_DQ_Q5_0 NULL
#define AK_DQ_Q5_1 NULL
#define AK_DQ_Q2_K NULL
#define AK_DQ_Q3_K NULL
#define AK_DQ_Q4_K NULL
#define AK_DQ_Q5_K NULL
#define AK_DQ_Q6_K NULL
#endif
