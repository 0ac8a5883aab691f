/* A loaded model: config, architecture descriptor, weights that point into the mapped
 * file, and the text side read with it (tokenizer, chat template). Knows nothing of
 * kernels or backends. */
#ifndef AK_MODEL_H
#define AK_MODEL_H
#include "akunu.h"
#include "core/dtype.h"
#include "format/gguf.h"
#include "model/arch.h"
#include "model/chat.h"
#include "model/tokenizer.h"

typedef struct {
    ak_dtype dtype;
    int64_t ne0, ne1;      /* ne0: contiguous (input) dimension, ne1: rows */
    const void *data;      /* host bytes */
    size_t nbytes;
    size_t off;            /* offset in the weights buffer */
} ak_tensor;

typedef struct {
    const ak_tensor *attn_norm, *wq, *wk, *wv, *wo, *bo;
    const ak_tensor *q_norm, *k_norm, *post_attn_norm;
    const ak_tensor *ffn_norm, *w_gate, *w_up, *w_down, *post_ffn_norm;
    /* encoders: one fused QKV matrix (nomic-bert), FFN biases, LayerNorms after the residual adds */
    const ak_tensor *wqkv, *b_up, *b_down, *attn_out_norm, *attn_out_norm_b, *out_norm, *out_norm_b;
    bool has_qkv_bias;     /* bq|bk|bv concatenated in aux at qkv_bias_off */
    size_t qkv_bias_off;   /* byte offset in aux */
    bool sliding;
    size_t inv_freq_off;   /* byte offset in aux of this layer's RoPE inverse frequencies */
} ak_layer;

struct ak_model {
    ak_gguf *gguf;
    const ak_arch *arch;
    char arch_name[32];
    ak_rope_style rope;    /* the architecture's pairing, unless the file's layout differs (HF
                              checkpoints of llama rotate halves; GGUF permutes Q/K to pairs) */
    ak_config cfg;
    ak_tensor *tensors;    /* one per GGUF tensor */
    int n_tensors;
    const ak_tensor *tok_embd, *output_norm, *output;
    const ak_tensor *pos_embd, *type_embd, *embd_norm, *embd_norm_b;   /* encoders */
    ak_layer *layers;
    const void *weights;   /* base of the weights buffer: the file's data section */
    size_t weights_size;
    float *aux;            /* small float constants the kernels read (RoPE tables, fused biases) */
    size_t aux_size;       /* bytes */
    int32_t bos, eos;      /* from the metadata; the tokenizer's where there is one */
    ak_tokenizer *tok;     /* NULL: the file has none (a Hugging Face directory) */
    char *chat_text;       /* tokenizer.chat_template, NUL-terminated; NULL if absent */
    bool chat_ok;          /* chat holds a family we render */
    ak_chat_template chat;
    char *bos_text, *eos_text; /* the BOS / EOS token texts templates insert */
    char tok_why[512];     /* why there is no tokenizer, when the file names one we lack */
    char chat_why[512];    /* why chat is not ok, when the file has a template */
};

/* Builds a model from an open GGUF, taking ownership of it (closed on failure too). */
ak_status ak_model_from_gguf(ak_gguf *g, ak_model **out, ak_err *err);
/* The tokenizer and chat template of the GGUF (none from a Hugging Face directory). */
ak_status ak_model_load_text(ak_model *m, ak_err *err);
void ak_model_free_text(ak_model *m);
/* The end-of-generation ids (the tokenizer's, else the metadata's EOS): *ids stays
 * valid while the model lives. */
int ak_model_eog_ids(const ak_model *m, const int32_t **ids);

#endif
