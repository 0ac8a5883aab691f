/* Loader internals shared by the GGUF loader (model.c) and the Hugging Face / MLX
 * safetensors loader (model_hf.c): both fill the same struct ak_model. */
#ifndef AK_MODEL_INT_H
#define AK_MODEL_INT_H
#include "model/model.h"

/* Shape [ne0, ne1] (ne1 == 0: a vector, stored as ne1 == 1) and a dtype the kernels
 * can compute with; name is for the message. */
ak_status ak_model_check_tensor(const ak_tensor *t, const char *name, int64_t ne0, int64_t ne1, ak_err *err);
/* Norm and bias vectors must be F32 (the kernels read them as floats). */
ak_status ak_model_check_vectors(ak_model *m, ak_err *err);
/* m->aux: RoPE inverse frequencies (divided by rope_freqs' factors when given, or YaRN's
 * blend when cfg.yarn.on, whose attention factor it folds into cfg.attn_scale), then
 * per layer with has_qkv_bias the q|k|v biases, qkv_bias[3*l + 0..2], concatenated. */
ak_status ak_model_build_aux(ak_model *m, const ak_tensor *rope_freqs, const ak_tensor *const *qkv_bias, ak_err *err);

/* A Hugging Face checkpoint directory: config.json + *.safetensors (F32/F16/BF16, or
 * MLX affine quantized). The weights are copied into one buffer that m owns. */
ak_status ak_model_load_hf(const char *dir, ak_model **out, ak_err *err);

#endif
