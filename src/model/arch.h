/* Architecture descriptors and the model's numbers. One static descriptor per
 * architecture: adding one means adding a row, not new control flow. */
#ifndef AK_ARCH_H
#define AK_ARCH_H
#include <stdbool.h>
#include <stdint.h>
#include "core/kernels.h"

typedef enum { AK_NORM_RMS = 0, AK_NORM_LAYER } ak_norm_kind;

typedef struct {
    const char *name;        /* general.architecture */
    ak_norm_kind norm;
    ak_act act;
    bool gated_ffn;          /* act(gate) * up */
    ak_rope_style rope;
    bool qk_norm;            /* per-head RMSNorm of Q and K before RoPE */
    bool post_norms;         /* norm of the attention / FFN output before the residual add */
    bool embed_scale;        /* embeddings times sqrt(dim) */
    bool causal;
    bool tied_output_ok;     /* output.weight may be missing: use token_embd */
    int swa_pattern;         /* 0: no sliding window; n: layer l slides unless (l+1) % n == 0 */
    bool swa_rope_base;      /* sliding layers use rope.freq_base_swa */
    float rope_base_default;
    int wide_qscale_layers;  /* the variant with this many layers scales q by 1/sqrt(dim/heads)
                                (Gemma 2/3 27B: query_pre_attn_scalar), others by 1/sqrt(head_dim) */
    /* encoders (BERT family): post-norm residuals, hidden states out instead of a token */
    bool encoder;
    bool learned_pos;        /* position_embd added to the embeddings */
    bool fused_qkv;          /* one attn_qkv matrix */
} ak_arch;

typedef enum { AK_POOL_NONE = 0, AK_POOL_MEAN = 1, AK_POOL_CLS = 2, AK_POOL_LAST = 3 } ak_pooling;

/* Returns NULL for an architecture we do not know. */
const ak_arch *ak_arch_find(const char *name);

typedef struct {
    int dim, n_layers, n_heads, n_kv_heads, head_dim, head_dim_v, ffn_dim, vocab, n_ctx_train;
    int n_rot;               /* rotary dims per head (<= head_dim) */
    float norm_eps;
    float rope_base, rope_base_swa, rope_freq_scale;
    float attn_softcap, final_softcap;  /* 0: none */
    float attn_scale;        /* multiplies q.k */
    int sliding_window;      /* 0: none */
    bool has_rope_freqs;     /* llama 3.1 per-dimension divisors */
    /* YaRN (rope scaling type yarn) when yarn.on: the loaders fill these (defaults
     * resolved); ak_model_build_aux checks them, builds the table, folds attn_factor in. */
    struct {
        bool on;
        float factor, beta_fast, beta_slow;
        float attn_factor;   /* multiplies cos and sin, so q.k by its square */
        float orig_ctx;      /* the pretraining context the correction dims come from */
        bool truncate;       /* correction dims rounded outwards to whole dims */
    } yarn;
    ak_pooling pooling;      /* encoders */
} ak_config;

#endif
