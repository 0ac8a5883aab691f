/* The architecture descriptors. Facts follow each family's reference implementation:
 * GGUF converters permute llama Q/K for interleaved RoPE; the Gemma family bakes the
 * (1 + w) norm offset into the weights, scales embeddings by sqrt(dim) and uses
 * tanh-GELU; Gemma 2 alternates sliding and global layers, Gemma 3 slides 5 of 6. */
#include "model/arch.h"
#include <string.h>

static const ak_arch archs[] = {
    {.name = "llama", .norm = AK_NORM_RMS, .act = AK_ACT_SILU, .gated_ffn = true, .rope = AK_ROPE_INTERLEAVED,
     .causal = true, .tied_output_ok = true, .rope_base_default = 10000.f},
    {.name = "qwen2", .norm = AK_NORM_RMS, .act = AK_ACT_SILU, .gated_ffn = true, .rope = AK_ROPE_NEOX,
     .causal = true, .tied_output_ok = true, .rope_base_default = 10000.f},
    {.name = "qwen3", .norm = AK_NORM_RMS, .act = AK_ACT_SILU, .gated_ffn = true, .rope = AK_ROPE_NEOX,
     .qk_norm = true, .causal = true, .tied_output_ok = true, .rope_base_default = 10000.f},
    {.name = "gemma", .norm = AK_NORM_RMS, .act = AK_ACT_GELU_TANH, .gated_ffn = true, .rope = AK_ROPE_NEOX,
     .embed_scale = true, .causal = true, .tied_output_ok = true, .rope_base_default = 10000.f},
    {.name = "gemma2", .norm = AK_NORM_RMS, .act = AK_ACT_GELU_TANH, .gated_ffn = true, .rope = AK_ROPE_NEOX,
     .post_norms = true, .embed_scale = true, .causal = true, .tied_output_ok = true, .swa_pattern = 2,
     .rope_base_default = 10000.f, .wide_qscale_layers = 46},
    {.name = "gemma3", .norm = AK_NORM_RMS, .act = AK_ACT_GELU_TANH, .gated_ffn = true, .rope = AK_ROPE_NEOX,
     .qk_norm = true, .post_norms = true, .embed_scale = true, .causal = true, .tied_output_ok = true,
     .swa_pattern = 6, .swa_rope_base = true, .rope_base_default = 1000000.f, .wide_qscale_layers = 62},
};

/* BERT: learned positions and token types, LayerNorm after each residual add, erf-GELU.
 * nomic-bert: rotary (NeoX), SwiGLU, one fused QKV matrix, no learned positions. */
static const ak_arch encoders[] = {
    {.name = "bert", .norm = AK_NORM_LAYER, .act = AK_ACT_GELU_ERF, .rope = AK_ROPE_NONE, .encoder = true,
     .learned_pos = true},
    {.name = "nomic-bert", .norm = AK_NORM_LAYER, .act = AK_ACT_SILU, .gated_ffn = true, .rope = AK_ROPE_NEOX,
     .encoder = true, .fused_qkv = true, .rope_base_default = 1000.f},
};

const ak_arch *ak_arch_find(const char *name) {
    for (size_t i = 0; i < sizeof archs / sizeof *archs; i++)
        if (strcmp(archs[i].name, name) == 0) return &archs[i];
    for (size_t i = 0; i < sizeof encoders / sizeof *encoders; i++)
        if (strcmp(encoders[i].name, name) == 0) return &encoders[i];
    return NULL;
}
