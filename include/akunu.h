/* akunu public C API: load a model once, then prefill, decode and chain-decode tokens. */
#ifndef AKUNU_H
#define AKUNU_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    AK_OK = 0,
    AK_ERR_IO,          /* file could not be opened, read or mapped */
    AK_ERR_FORMAT,      /* the bytes do not follow the format */
    AK_ERR_UNSUPPORTED, /* valid input we do not handle (architecture, tensor type) */
    AK_ERR_NOMEM,
    AK_ERR_ARG,         /* caller passed something out of range */
    AK_ERR_BACKEND,
} ak_status;

/* Every fallible call fills one of these; msg is always NUL-terminated. */
typedef struct { char msg[512]; } ak_err;

typedef struct ak_model ak_model;
typedef struct ak_session ak_session;

/* The KV cache's element type. AUTO: F16 on the CUDA backend (its prefill attention runs
 * on tensor cores from an F16 cache, and the cache is half the size), F32 on the CPU
 * (exact, and its attention reads F32 rows without a conversion). */
typedef enum { AK_KV_F32 = 0, AK_KV_F16 = 1, AK_KV_AUTO = 2 } ak_kv_type;
typedef enum { AK_BACKEND_CPU = 0, AK_BACKEND_CUDA, AK_BACKEND_AUTO } ak_backend_kind;

typedef struct {
    int n_ctx;          /* 0: the model's context length, capped at 4096 */
    int chunk;          /* prefill chunk size in tokens; 0: 512 */
    int n_threads;      /* 0: one per core */
    ak_kv_type kv_type;
    bool logits_all;    /* prefill keeps logits for every position, not only the last */
    ak_backend_kind backend; /* CPU by default; AUTO: CUDA if a GPU is present */
} ak_session_params;

/* Name of the backend a session runs on ("cpu", "cuda"). */
const char *ak_session_backend(const ak_session *s);
/* CPU worker threads of the session (1 for GPU backends). */
int ak_session_threads(const ak_session *s);
/* The KV cache type the session runs with (AUTO resolved). */
ak_kv_type ak_session_kv_type(const ak_session *s);
/* Whether this build has the CUDA backend and a GPU is present. */
bool ak_cuda_available(void);

ak_status ak_model_load(const char *path, ak_model **out, ak_err *err);
void ak_model_free(ak_model *m);
int ak_model_vocab(const ak_model *m);
int ak_model_n_ctx_train(const ak_model *m);
int ak_model_eos(const ak_model *m);
const char *ak_model_arch_name(const ak_model *m);

ak_session_params ak_session_default_params(void);
ak_status ak_session_create(ak_model *m, const ak_session_params *p, ak_session **out, ak_err *err);
void ak_session_free(ak_session *s);

/* Number of commands the decode table runs per token. */
int ak_session_table_size(const ak_session *s);
int ak_session_pos(const ak_session *s);
int ak_session_n_ctx(const ak_session *s);
/* Forget the KV cache contents (position back to 0). */
void ak_session_reset(ak_session *s);
/* Keep only the first pos tokens of the KV cache (pos <= the current position), so a
 * conversation can continue from a common prefix. */
ak_status ak_session_rewind(ak_session *s, int pos, ak_err *err);

/* Run the prompt through the prefill path from the current position.
 * *next receives the greedy next token. With logits_all, logits holds n*vocab
 * floats (row i = position pos+i); otherwise vocab floats for the last position.
 * logits may be NULL. */
ak_status ak_prefill(ak_session *s, const int32_t *ids, int n, int32_t *next, float *logits, ak_err *err);

/* One token through the decode table: writes the greedy next token and, if
 * logits is not NULL, vocab floats. */
ak_status ak_decode(ak_session *s, int32_t token, int32_t *next, float *logits, ak_err *err);

/* Chain decode: starting from token, generate up to n tokens with no host
 * round trip between them. out receives the generated ids; stops after a token
 * listed in stop (included). Returns the count in *n_out. */
ak_status ak_chain_decode(ak_session *s, int32_t token, int n, const int32_t *stop, int n_stop,
                          int32_t *out, int *n_out, ak_err *err);

/* Encoder models (BERT family). ak_embed runs one sequence from position 0: hidden
 * receives n*dim floats (may be NULL), pooled dim floats by the model's pooling (mean,
 * CLS or last; may be NULL), L2-normalised if normalize. ak_embed_batch takes several
 * sequences of different lengths; pooled receives n_seq*dim floats. */
ak_status ak_embed(ak_session *s, const int32_t *ids, int n, float *hidden, float *pooled, bool normalize, ak_err *err);
ak_status ak_embed_batch(ak_session *s, const int32_t *const *ids, const int *lens, int n_seq, float *pooled,
                         bool normalize, ak_err *err);
bool ak_model_is_encoder(const ak_model *m);
int ak_model_dim(const ak_model *m);

/* Read bandwidth of the session's memory (host RAM or GPU memory), GB/s, measured now. */
ak_status ak_session_bandwidth(ak_session *s, double *gbps, ak_err *err);

/* Weight bytes one decode step reads (every matrix once, one embedding row) and the
 * number of weight parameters. */
uint64_t ak_model_decode_bytes(const ak_model *m);
uint64_t ak_model_params(const ak_model *m);
uint64_t ak_model_file_bytes(const ak_model *m);

#ifdef __cplusplus
}
#endif
#endif
